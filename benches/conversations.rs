//! Server-side conversations at scale (issue 14), measured on the release binary
//! (`target/release/triage serve`, a child process, so its RSS is its own) against the shared
//! fake LLM (crates/fake-llm) in this process, over loopback HTTP/1.1. Phases (`--only`, a
//! comma list; all by default):
//!
//! - `startup`: ready time with 1, 10,000 and 100,000 stored conversations in the SQLite file
//!   (`--stored` changes the list): process start → `GET /readyz` 200, and → the first
//!   `GET /api/conversations/{id}` of a stored one; RSS then, after reading 1,000 stored
//!   conversations and 20 pages of the list, and after 1,000 other ones. The stored
//!   conversations are copies, made with SQL, of one real finished conversation (a tool call
//!   and an answer, as the server stored it).
//! - `first_frame`: a subscriber on `GET …/events/stream` sees `user_message` after
//!   `POST …/events`: time from sending the POST to reading the frame, one message at a time
//!   (`BENCH_FRAME_CONVERSATIONS` × `BENCH_FRAME_MESSAGES`, default 10 × 110, the first 10 of
//!   each not counted), beside `GET /healthz` and `GET /api/conversations/{id}` as floors.
//! - `waiting`: RSS per running conversation while its LLM call streams slowly (one piece a
//!   second): N conversations created with a first message (`--waiting 1000,10000`), RSS delta
//!   over a warmed server / N.
//! - `webhooks`: a run's latency (create → `finished` read on its event stream, `--webhook-runs`
//!   conversations one after another, default 200) with no webhook receiver, with one that is
//!   down and with one that accepts and never answers: the outbox must not slow a run.
//! - `many`: `--many 10000` conversations started at once against a slow LLM (a tool call
//!   streamed over ~33 s, then an answer over ~4 s); all must finish. Wall time, counts, peak
//!   conversations running and LLM calls in flight, peak RSS and descriptors.
//!
//! `cargo bench --bench conversations -- [--only PHASES] [--stored N,…] [--waiting N,…]
//! [--many N] [--llm-slots N] [--webhook-runs N]`; `BENCH_TRIAGE_BIN=PATH` measures another build of the binary.
//! Every loop is bounded in count and time; temp files are removed at the end. BENCHMARKS.md
//! (session 5) has the figures.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use uuid::Uuid;

use fake_llm::{FakeLlm, Step, ToolCall};

const QUESTION: &str = "Why is the api pod in namespace prod restarting every few minutes?";
const ANSWER: &str = "The api pod restarts because its container exceeds the 512Mi memory limit \
and is OOMKilled about every ten minutes. Raise the limit to 1Gi or find the leak.";
const TODO_ARGS: &str =
    r#"{"todos":[{"id":"1","content":"Check the pod status","status":"in_progress"}]}"#;

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

struct Options {
    only: Option<Vec<String>>,
    stored: Vec<usize>,
    waiting: Vec<usize>,
    many: usize,
    llm_slots: usize,
    webhook_runs: usize,
}

impl Options {
    fn parse() -> Options {
        let args: Vec<String> = std::env::args().collect();
        let value = |name: &str| {
            args.iter()
                .position(|a| a == name)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        let list = |name: &str, default: &[usize]| {
            value(name).map_or(default.to_vec(), |v| {
                v.split(',').filter_map(|n| n.trim().parse().ok()).collect()
            })
        };
        Options {
            only: value("--only").map(|v| v.split(',').map(str::to_owned).collect()),
            stored: list("--stored", &[1, 10_000, 100_000]),
            waiting: list("--waiting", &[1_000, 10_000]),
            many: value("--many")
                .and_then(|v| v.parse().ok())
                .unwrap_or(10_000),
            llm_slots: value("--llm-slots")
                .and_then(|v| v.parse().ok())
                .unwrap_or(20_000),
            webhook_runs: value("--webhook-runs")
                .and_then(|v| v.parse().ok())
                .unwrap_or(200),
        }
    }

    fn runs(&self, phase: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|p| p == phase))
    }
}

// ---------------------------------------------------------------------------------------------
// The fake LLM: one of three behaviours, switched between phases
// ---------------------------------------------------------------------------------------------

const FAST: u8 = 0;
/// One piece a second for ten minutes: a conversation waiting on a slow LLM.
const DRIP: u8 = 1;
/// A tool call streamed over ~33 s (a chunk every 3 s), then an answer over ~4 s: longer
/// than creating 10,000 conversations takes here, so that they all run at once.
const SLOW: u8 = 2;

fn has_tool_result(body: &[u8]) -> bool {
    memchr::memmem::find(body, br#""role":"tool""#).is_some()
}

fn todo_call(pause: Duration) -> Step {
    Step::Paced {
        before: Duration::ZERO,
        between_chunks: pause,
        step: Box::new(Step::ToolCalls {
            content: None,
            calls: vec![ToolCall {
                id: "call_todo_1".into(),
                name: "TodoWrite".into(),
                arguments: TODO_ARGS.into(),
            }],
            usage: None,
        }),
    }
}

async fn start_fake(mode: Arc<AtomicU8>) -> FakeLlm {
    let fake = FakeLlm::start().await;
    fake.keep_requests(false);
    fake.set_raw_responder(move |body| match mode.load(Ordering::Relaxed) {
        DRIP => Step::Drip {
            piece: "still thinking ".into(),
            times: 600,
            interval: Duration::from_secs(1),
        },
        SLOW if has_tool_result(body) => Step::Slow {
            content: ANSWER.into(),
            chunks: 4,
            interval: Duration::from_secs(1),
        },
        SLOW => todo_call(Duration::from_secs(3)),
        _ if has_tool_result(body) => Step::text(ANSWER),
        _ => todo_call(Duration::ZERO),
    });
    fake
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 client: one keep-alive connection per task
// ---------------------------------------------------------------------------------------------

struct Conn {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Result<Conn, String> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { sender })
    }

    async fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Bytes,
    ) -> Result<Response<Incoming>, String> {
        self.sender
            .ready()
            .await
            .map_err(|e| format!("connection: {e}"))?;
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        self.sender
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))
    }

    /// A whole exchange: the status and the body as JSON (`Null` when it is not JSON).
    async fn call(
        &mut self,
        method: &str,
        path: &str,
        body: Value,
    ) -> Result<(StatusCode, Value), String> {
        let body = if body.is_null() {
            Bytes::new()
        } else {
            Bytes::from(body.to_string())
        };
        let resp = self.send(method, path, body).await?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }
}

fn create_body(run: bool) -> Value {
    json!({"initial_message": {"content": QUESTION, "run": run}})
}

/// Polls `GET /api/conversations/count?status=running` until it is 0, for at most `limit`.
async fn wait_none_running(conn: &mut Conn, limit: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let (_, n) = conn
            .call(
                "GET",
                "/api/conversations/count?status=running",
                Value::Null,
            )
            .await?;
        if n.as_u64() == Some(0) {
            return Ok(());
        }
        if t0.elapsed() > limit {
            return Err(format!("{n} conversations still running after {limit:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn count(conn: &mut Conn, status: &str) -> u64 {
    let path = format!("/api/conversations/count?status={status}");
    match conn.call("GET", &path, Value::Null).await {
        Ok((_, n)) => n.as_u64().unwrap_or(0),
        Err(_) => 0,
    }
}

/// Creates `n` conversations with a first message from `tasks` connections; (created, errors,
/// the first error).
async fn create_many(addr: SocketAddr, n: usize, tasks: usize) -> (usize, usize, Option<String>) {
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let next = next.clone();
            tokio::spawn(async move {
                let (mut ok, mut errors, mut first) = (0, 0, None);
                let mut conn = match Conn::open(addr).await {
                    Ok(c) => c,
                    Err(e) => return (0, 1, Some(e)),
                };
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    match conn
                        .call("POST", "/api/conversations", create_body(true))
                        .await
                    {
                        Ok((StatusCode::CREATED, _)) => ok += 1,
                        Ok((status, body)) => {
                            errors += 1;
                            first.get_or_insert(format!("HTTP {status}: {body}"));
                        }
                        Err(e) => {
                            errors += 1;
                            first.get_or_insert(e);
                            match Conn::open(addr).await {
                                Ok(c) => conn = c,
                                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                            }
                        }
                    }
                }
                (ok, errors, first)
            })
        })
        .collect();
    let (mut ok, mut errors, mut first) = (0, 0, None);
    for w in workers {
        if let Ok((o, e, f)) = w.await {
            ok += o;
            errors += e;
            first = first.or(f);
        }
    }
    (ok, errors, first)
}

// ---------------------------------------------------------------------------------------------
// The binary as a child process
// ---------------------------------------------------------------------------------------------

/// `llm.max_concurrent_calls_per_model` of the servers (`--llm-slots`; default 20,000): a run
/// starts only with one of its model's call slots (429 otherwise), so the default of 256
/// would cap running conversations below `conversations.max_running`.
static LLM_SLOTS: AtomicUsize = AtomicUsize::new(20_000);

fn bench_toml(port: u16, llm: SocketAddr, db: &Path, extra: &str) -> String {
    let slots = LLM_SLOTS.load(Ordering::Relaxed);
    format!(
        r#"
[server]
host = "127.0.0.1"
port = {port}
max_concurrent_requests = 20000
shutdown_grace_secs = 1.0
[llm]
max_concurrent_calls_per_model = {slots}
[toolsets.kubernetes]
enabled = false
[toolsets.prometheus]
enabled = false
[conversations]
database_url = "sqlite://{db}"
max_running = 20000
auto_title = false
[models.fast]
model = "openai/gpt-4.1"
api_base = "http://{llm}/v1"
{extra}"#,
        db = db.display()
    )
}

struct Child {
    child: std::process::Child,
    addr: SocketAddr,
    config: PathBuf,
}

impl Child {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// (VmRSS, VmHWM) in KiB.
    fn rss_kib(&self) -> (u64, u64) {
        let text =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// CPU time the process used so far (user + system), in seconds.
    fn cpu_secs(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // utime and stime: the 12th and 13th fields after the command name.
        let ticks: u64 = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|v| v.parse::<u64>().ok())
            .sum();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        ticks as f64 / hz
    }

    fn descriptors(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SIGTERM to our own child, a bounded wait, then SIGKILL.
        // SAFETY: kill(2) on the pid of a child this process spawned and has not reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_file(&self.config);
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// The binary under test: cargo's, or `BENCH_TRIAGE_BIN` (another build, to compare). Not a
/// `TRIAGE_*` name: the server reads those as settings, and it inherits this environment.
fn binary() -> String {
    std::env::var("BENCH_TRIAGE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_triage").to_owned())
}

/// Start-up facts of one spawn.
struct Started {
    child: Child,
    ready: Duration,
}

/// Spawns `triage serve` on `db`; returns once `GET /readyz` answers 200 (polled every 1 ms).
async fn spawn(llm: SocketAddr, db: &Path) -> Result<Started, String> {
    spawn_with(llm, db, "").await
}

/// `spawn` with more TOML after the bench's settings.
async fn spawn_with(llm: SocketAddr, db: &Path, extra: &str) -> Result<Started, String> {
    let port = free_port();
    let config = db.with_extension(format!("{port}.toml"));
    std::fs::File::create(&config)
        .and_then(|mut f| f.write_all(bench_toml(port, llm, db, extra).as_bytes()))
        .map_err(|e| format!("temp config: {e}"))?;
    let bin = binary();
    let t0 = Instant::now();
    let child = std::process::Command::new(&bin)
        .arg("serve")
        .env("TRIAGE_CONFIG", &config)
        .env("RUST_LOG", "warn")
        .env_remove("HOLMES_PORT")
        .env_remove("HOLMES_HOST")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {bin}: {e}"))?;
    let child = Child {
        child,
        addr: ([127, 0, 0, 1], port).into(),
        config,
    };
    loop {
        if let Ok(mut conn) = Conn::open(child.addr).await
            && let Ok(resp) = conn.send("GET", "/readyz", Bytes::new()).await
            && resp.status() == StatusCode::OK
        {
            return Ok(Started {
                ready: t0.elapsed(),
                child,
            });
        }
        if t0.elapsed() > Duration::from_secs(30) {
            return Err("not ready within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A temp directory for one phase's database, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("triage-bench-{name}-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn db(&self) -> PathBuf {
        self.0.join("triage.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The machine's 1-minute load average: other sessions share the two cores.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_owned()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

// ---------------------------------------------------------------------------------------------
// startup: ready time and memory with many stored conversations
// ---------------------------------------------------------------------------------------------

/// Runs one conversation (tool call + answer) on the server and returns its id.
async fn real_conversation(addr: SocketAddr) -> Result<Uuid, String> {
    let mut conn = Conn::open(addr).await?;
    let (status, info) = conn
        .call("POST", "/api/conversations", create_body(true))
        .await?;
    if status != StatusCode::CREATED {
        return Err(format!("create: HTTP {status}: {info}"));
    }
    let id: Uuid = info["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or("no id")?;
    wait_none_running(&mut conn, Duration::from_secs(20)).await?;
    let (_, info) = conn
        .call("GET", &format!("/api/conversations/{id}"), Value::Null)
        .await?;
    if info["execution_status"] != "finished" {
        return Err(format!(
            "the template conversation ended {}",
            info["execution_status"]
        ));
    }
    Ok(id)
}

/// Copies the template conversation (row and events) until `total` are stored: SQL inside the
/// file, 10,000 per transaction. Returns the seeding time.
async fn seed(db: &Path, template: Uuid, total: usize) -> Duration {
    use sqlx::Connection;
    let t0 = Instant::now();
    let url = format!("sqlite://{}", db.display());
    let mut conn = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("open the bench db");
    loop {
        let (have,): (i64,) = sqlx::query_as("SELECT count(*) FROM conversations")
            .fetch_one(&mut conn)
            .await
            .expect("count");
        let missing = total.saturating_sub(have as usize).min(10_000);
        if missing == 0 {
            break;
        }
        let mut tx = conn.begin().await.expect("begin");
        // Spread creation times a millisecond apart into the past, as a server's history.
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) \
             INSERT INTO conversations (id, title, tags, status, reason, config, state, \
             state_event_id, stats, last_event_id, created_at, updated_at) \
             SELECT randomblob(16), title, tags, status, reason, config, state, state_event_id, \
             stats, last_event_id, created_at - ($3 + i) * 1000, updated_at - ($3 + i) * 1000 \
             FROM conversations, n WHERE id = $2",
        )
        .bind(missing as i64)
        .bind(template)
        .bind(have)
        .execute(&mut *tx)
        .await
        .expect("copy rows");
        sqlx::query(
            "INSERT INTO events (conversation_id, seq, kind, source, timestamp, payload) \
             SELECT c.id, e.seq, e.kind, e.source, e.timestamp, e.payload \
             FROM conversations c JOIN events e ON e.conversation_id = $1 \
             WHERE NOT EXISTS (SELECT 1 FROM events x WHERE x.conversation_id = c.id)",
        )
        .bind(template)
        .execute(&mut *tx)
        .await
        .expect("copy events");
        tx.commit().await.expect("commit");
    }
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .expect("checkpoint");
    let _ = conn.close().await;
    t0.elapsed()
}

async fn sample_ids(db: &Path, n: usize) -> Vec<Uuid> {
    use sqlx::Connection;
    let url = format!("sqlite://{}", db.display());
    let mut conn = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("open the bench db");
    let ids: Vec<(Uuid,)> =
        sqlx::query_as("SELECT id FROM conversations ORDER BY random() LIMIT $1")
            .bind(n as i64)
            .fetch_all(&mut conn)
            .await
            .expect("ids");
    let _ = conn.close().await;
    ids.into_iter().map(|(id,)| id).collect()
}

async fn startup(fake: &FakeLlm, opts: &Options) {
    println!("\n## Start-up with stored conversations (SQLite)\n");
    let dir = TempDir::new("startup");
    let db = dir.db();
    let template = {
        let server = spawn(fake.addr(), &db).await.expect("a server");
        real_conversation(server.child.addr)
            .await
            .expect("a finished conversation")
    };
    {
        use sqlx::Connection;
        let url = format!("sqlite://{}", db.display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.expect("db");
        let (events, bytes): (i64, i64) = sqlx::query_as(
            "SELECT count(*), sum(length(payload)) FROM events WHERE conversation_id = $1",
        )
        .bind(template)
        .fetch_one(&mut conn)
        .await
        .expect("template events");
        let (state,): (i64,) = sqlx::query_as(
            "SELECT length(state) + length(config) FROM conversations WHERE id = $1",
        )
        .bind(template)
        .fetch_one(&mut conn)
        .await
        .expect("template row");
        println!(
            "Each stored conversation: {events} events ({bytes} bytes of payload), {state} bytes of config + state."
        );
    }
    println!();
    println!(
        "| stored | seeding | db file | ready (`/readyz`) p50 / max | first `GET /api/conversations/{{id}}` p50 | RSS at ready | after 1,000 reads + 20 list pages | after 1,000 more reads |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for &stored in &opts.stored {
        let seeding = seed(&db, template, stored.max(1)).await;
        let size = std::fs::metadata(&db).map_or(0, |m| m.len());
        let ids = sample_ids(&db, 2000).await;
        let (first_half, second_half) = ids.split_at(ids.len().div_ceil(2));
        let (mut ready, mut first, mut rss, mut after, mut more) =
            (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..3 {
            let server = spawn(fake.addr(), &db).await.expect("a server");
            ready.push(server.ready.as_secs_f64() * 1e3);
            let t = Instant::now();
            let mut conn = Conn::open(server.child.addr).await.expect("connect");
            let (status, _) = conn
                .call(
                    "GET",
                    &format!("/api/conversations/{}", ids[0]),
                    Value::Null,
                )
                .await
                .expect("first read");
            assert_eq!(status, StatusCode::OK, "a stored conversation reads");
            first.push((server.ready + t.elapsed()).as_secs_f64() * 1e3);
            tokio::time::sleep(Duration::from_millis(200)).await;
            rss.push(mib(server.child.rss_kib().0));
            read_all(&mut conn, first_half).await;
            let mut page: Option<String> = None;
            for _ in 0..20 {
                let path = match &page {
                    Some(p) => format!("/api/conversations/search?limit=100&page_id={p}"),
                    None => "/api/conversations/search?limit=100".to_owned(),
                };
                let (_, body) = conn.call("GET", &path, Value::Null).await.expect("search");
                page = body["next_page_id"].as_str().map(str::to_owned);
                if page.is_none() {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            after.push(mib(server.child.rss_kib().0));
            read_all(&mut conn, second_half).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            more.push(mib(server.child.rss_kib().0));
        }
        for v in [&mut ready, &mut first, &mut rss, &mut after, &mut more] {
            v.sort_by(|a, b| a.total_cmp(b));
        }
        println!(
            "| {stored} | {:.1} s | {:.0} MiB | {:.0} / {:.0} ms | {:.0} ms | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
            seeding.as_secs_f64(),
            size as f64 / 1048576.0,
            pct(&ready, 50.0),
            pct(&ready, 100.0),
            pct(&first, 50.0),
            pct(&rss, 50.0),
            pct(&after, 50.0),
            pct(&more, 50.0),
        );
    }
}

async fn read_all(conn: &mut Conn, ids: &[Uuid]) {
    for id in ids {
        let (status, _) = conn
            .call("GET", &format!("/api/conversations/{id}"), Value::Null)
            .await
            .expect("read");
        assert_eq!(status, StatusCode::OK);
    }
}

// ---------------------------------------------------------------------------------------------
// waiting: RSS per running conversation on a slow LLM
// ---------------------------------------------------------------------------------------------

async fn warm(addr: SocketAddr, n: usize) {
    let (ok, errors, first) = create_many(addr, n, 4).await;
    if errors > 0 {
        eprintln!("warm-up: {errors} errors of {}: {first:?}", ok + errors);
    }
    let mut conn = Conn::open(addr).await.expect("connect");
    if let Err(e) = wait_none_running(&mut conn, Duration::from_secs(30)).await {
        eprintln!("warm-up: {e}");
    }
}

async fn waiting(fake: &FakeLlm, mode: &AtomicU8, opts: &Options) {
    println!("\n## Running conversations waiting on a slow LLM (one piece a second)\n");
    println!(
        "| conversations | created in (triage CPU) | errors | LLM streams open | RSS before | RSS with all waiting (peak of 6 samples) | **KiB per conversation** | descriptors |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for &n in &opts.waiting {
        mode.store(FAST, Ordering::Relaxed);
        let dir = TempDir::new("waiting");
        let server = spawn(fake.addr(), &dir.db()).await.expect("a server");
        let addr = server.child.addr;
        warm(addr, 50).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = server.child.rss_kib().0;
        mode.store(DRIP, Ordering::Relaxed);
        let base = fake.in_flight();
        let cpu = server.child.cpu_secs();
        let t0 = Instant::now();
        let (ok, errors, first) = create_many(addr, n, 32).await;
        let created = t0.elapsed();
        let cpu = server.child.cpu_secs() - cpu;
        if let Some(e) = first {
            eprintln!("waiting {n}: first error: {e}");
        }
        let open_by = Instant::now() + Duration::from_secs(60);
        while fake.in_flight() < base + ok && Instant::now() < open_by {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let open = fake.in_flight() - base;
        let mut peak = 0;
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            peak = peak.max(server.child.rss_kib().0);
        }
        let descriptors = server.child.descriptors();
        println!(
            "| {n} | {:.2} s ({cpu:.1} s) | {errors} | {open} | {:.1} MiB | {:.1} MiB | **{:.1}** | {descriptors} |",
            created.as_secs_f64(),
            mib(before),
            mib(peak),
            (peak.saturating_sub(before)) as f64 / ok.max(1) as f64,
        );
        drop(server);
        mode.store(FAST, Ordering::Relaxed);
        // The killed server's LLM streams end on the fake's side too.
        let gone = Instant::now() + Duration::from_secs(10);
        while fake.in_flight() > base && Instant::now() < gone {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// first_frame: POST …/events → `user_message` on the stream
// ---------------------------------------------------------------------------------------------

/// Reads an SSE body; sends (the marker of each `user_message` frame, when its bytes arrived).
fn watch_stream(body: Incoming) -> tokio::sync::mpsc::UnboundedReceiver<(String, Instant)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut body = body;
        let mut buffer = Vec::new();
        while let Some(Ok(frame)) = body.frame().await {
            let at = Instant::now();
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buffer.extend_from_slice(&data);
            while let Some(end) = memchr::memmem::find(&buffer, b"\n\n") {
                let event: Vec<u8> = buffer.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                if text.contains("event: user_message\n")
                    && let Some(start) = text.find("<m")
                    && let Some(len) = text[start..].find('>')
                {
                    let _ = tx.send((text[start..start + len + 1].to_owned(), at));
                }
            }
        }
    });
    rx
}

async fn first_frame(fake: &FakeLlm) {
    println!("\n## Message → first SSE frame (`user_message` on `GET …/events/stream`)\n");
    let dir = TempDir::new("frame");
    let server = spawn(fake.addr(), &dir.db()).await.expect("a server");
    let addr = server.child.addr;
    let mut conn = Conn::open(addr).await.expect("connect");
    let (mut to_frame, mut to_answer) = (Vec::new(), Vec::new());
    let (mut to_health, mut to_read) = (Vec::new(), Vec::new());
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let conversations = env("BENCH_FRAME_CONVERSATIONS", 10);
    let messages = env("BENCH_FRAME_MESSAGES", 110);
    for c in 0..conversations {
        let (status, info) = conn
            .call("POST", "/api/conversations", json!({}))
            .await
            .expect("create");
        assert_eq!(status, StatusCode::CREATED);
        let id = info["id"].as_str().expect("an id").to_owned();
        let mut stream_conn = Conn::open(addr).await.expect("connect");
        let resp = stream_conn
            .send(
                "GET",
                &format!("/api/conversations/{id}/events/stream"),
                Bytes::new(),
            )
            .await
            .expect("stream");
        assert_eq!(resp.status(), StatusCode::OK);
        let mut frames = watch_stream(resp.into_body());
        for i in 0..messages {
            let marker = format!("<m{c}.{i}>");
            let body = json!({"content": format!("Any news on the api pod? {marker}")});
            let t0 = Instant::now();
            let (status, _) = conn
                .call("POST", &format!("/api/conversations/{id}/events"), body)
                .await
                .expect("send");
            let answered = t0.elapsed();
            assert_eq!(status, StatusCode::OK, "message accepted");
            let seen = loop {
                match tokio::time::timeout(Duration::from_secs(5), frames.recv()).await {
                    Ok(Some((m, at))) if m == marker => break at,
                    Ok(Some(_)) => continue,
                    _ => panic!("no user_message frame for {marker}"),
                }
            };
            // The first ten per conversation warm the connection and caches.
            if i >= 10 {
                to_frame.push(seen.saturating_duration_since(t0).as_secs_f64() * 1e6);
                to_answer.push(answered.as_secs_f64() * 1e6);
                // Floors on the same connection: HTTP alone, and HTTP + one row read.
                for (path, times) in [
                    ("/healthz".to_owned(), &mut to_health),
                    (format!("/api/conversations/{id}"), &mut to_read),
                ] {
                    let t = Instant::now();
                    let (status, _) = conn.call("GET", &path, Value::Null).await.expect("get");
                    assert_eq!(status, StatusCode::OK);
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
    }
    for v in [&mut to_frame, &mut to_answer, &mut to_health, &mut to_read] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    println!(
        "{} messages ({conversations} conversations, one subscriber each, sent one at a time, `run` false).\n",
        to_frame.len()
    );
    println!("| from sending `POST …/events` to… | p50 | p90 | p99 | max |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (what, v) in [
        (
            "**the `user_message` frame read by the subscriber**",
            &to_frame,
        ),
        ("the POST's response (200)", &to_answer),
        ("(floor) `GET /healthz`'s response", &to_health),
        ("(floor) `GET /api/conversations/{id}`'s response", &to_read),
    ] {
        println!(
            "| {what} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs |",
            pct(v, 50.0),
            pct(v, 90.0),
            pct(v, 99.0),
            pct(v, 100.0)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// webhooks: a run's latency with no receiver, a receiver that is down, one that hangs
// ---------------------------------------------------------------------------------------------

/// A receiver that accepts connections and never answers (the sockets are held open).
async fn hanging_receiver() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    addr
}

/// Creates a conversation that runs at once (a tool call, then an answer) and returns the time
/// from sending the POST to reading `finished` on its event stream.
async fn one_run(addr: SocketAddr, conn: &mut Conn) -> Result<Duration, String> {
    let t0 = Instant::now();
    let (status, info) = conn
        .call("POST", "/api/conversations", create_body(true))
        .await?;
    if status != StatusCode::CREATED {
        return Err(format!("create: {status} {info}"));
    }
    let id = info["id"].as_str().ok_or("no id")?.to_owned();
    // The stream replays from the store, so opening it after the run started misses nothing.
    let mut stream = Conn::open(addr).await?;
    let resp = stream
        .send(
            "GET",
            &format!("/api/conversations/{id}/events/stream"),
            Bytes::new(),
        )
        .await?;
    let mut body = resp.into_body();
    let mut seen = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("stream: {e}"))?;
        if let Ok(data) = frame.into_data() {
            seen.extend_from_slice(&data);
            if memchr::memmem::find(&seen, br#""execution_status":"finished""#).is_some() {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > Duration::from_secs(30) {
                break;
            }
        }
    }
    Err(format!("conversation {id} did not finish"))
}

async fn webhooks(fake: &FakeLlm, runs: usize) {
    println!("\n## A run's latency and webhook receivers\n");
    let down = free_port();
    let hung = hanging_receiver().await;
    let receiver = |name: &str, addr: String| {
        format!(
            "[[webhooks]]\nname = \"{name}\"\nbase_url = \"http://{addr}/hooks\"\n\
             timeout_secs = 10\nflush_delay_secs = 0.05\n"
        )
    };
    let setups = [
        ("no receiver", String::new()),
        (
            "a receiver that is down (connection refused)",
            receiver("down", format!("127.0.0.1:{down}")),
        ),
        (
            "a receiver that accepts and never answers",
            receiver("hung", hung.to_string()),
        ),
    ];
    println!(
        "{runs} conversations one after another per setup, each a tool call and an answer from \
         the zero-latency fake LLM: time from `POST /api/conversations` (run) to reading \
         `finished` on its event stream.\n"
    );
    println!("| receivers | p50 | p90 | p99 | max | CPU ms / run |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (what, extra) in setups {
        let dir = TempDir::new("webhooks");
        let server = spawn_with(fake.addr(), &dir.db(), &extra)
            .await
            .expect("a server");
        let addr = server.child.addr;
        let mut conn = Conn::open(addr).await.expect("connect");
        // Warm-up: connections, caches, the receiver's first failures.
        for _ in 0..10 {
            let _ = one_run(addr, &mut conn).await;
        }
        let cpu0 = server.child.cpu_secs();
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            match one_run(addr, &mut conn).await {
                Ok(t) => times.push(t.as_secs_f64() * 1e6),
                Err(e) => println!("({what}: {e})"),
            }
        }
        let cpu = (server.child.cpu_secs() - cpu0) * 1e3 / runs.max(1) as f64;
        times.sort_by(|a, b| a.total_cmp(b));
        println!(
            "| {what} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {cpu:.2} |",
            pct(&times, 50.0) / 1e3,
            pct(&times, 90.0) / 1e3,
            pct(&times, 99.0) / 1e3,
            pct(&times, 100.0) / 1e3
        );
    }
}

// ---------------------------------------------------------------------------------------------
// many: thousands of conversations at once, all finishing
// ---------------------------------------------------------------------------------------------

async fn many(fake: &FakeLlm, mode: &AtomicU8, n: usize) {
    println!("\n## {n} conversations at once against a slow LLM\n");
    mode.store(FAST, Ordering::Relaxed);
    let dir = TempDir::new("many");
    let server = spawn(fake.addr(), &dir.db()).await.expect("a server");
    let addr = server.child.addr;
    warm(addr, 50).await;
    let before = server.child.rss_kib().0;
    mode.store(SLOW, Ordering::Relaxed);
    let base = fake.in_flight();
    let t0 = Instant::now();
    let cpu_before = server.child.cpu_secs();
    let sampler = {
        let fake = fake.clone();
        let pid = server.child.pid();
        let (stop_tx, mut stop) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let (mut llm, mut fds, mut running) = (0, 0, 0);
            let mut conn = Conn::open(addr).await.ok();
            loop {
                llm = llm.max(fake.in_flight().saturating_sub(base));
                fds =
                    fds.max(std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count()));
                if let Some(c) = conn.as_mut() {
                    running = running.max(count(c, "running").await);
                }
                tokio::select! {
                    _ = &mut stop => return (llm, fds, running),
                    () = tokio::time::sleep(Duration::from_millis(250)) => {}
                }
            }
        });
        (stop_tx, task)
    };
    let (ok, errors, first) = create_many(addr, n, 64).await;
    let created = t0.elapsed();
    let cpu_creating = server.child.cpu_secs() - cpu_before;
    if let Some(e) = &first {
        eprintln!("many: first error: {e}");
    }
    let mut conn = Conn::open(addr).await.expect("connect");
    let finished_in = wait_none_running(&mut conn, Duration::from_secs(600)).await;
    let wall = t0.elapsed();
    let _ = sampler.0.send(());
    let (peak_llm, peak_fds, peak_running) = sampler.1.await.unwrap_or((0, 0, 0));
    let cpu = server.child.cpu_secs() - cpu_before;
    let (rss, hwm) = server.child.rss_kib();
    let (finished, error, total) = (
        count(&mut conn, "finished").await,
        count(&mut conn, "error").await,
        conn.call("GET", "/api/conversations/count", Value::Null)
            .await
            .ok()
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(0),
    );
    if let Err(e) = finished_in {
        println!("**Not all finished**: {e}\n");
    }
    println!("| | |\n| --- | --- |");
    println!(
        "| created (201) / refused | {ok} / {errors} (in {:.1} s; triage CPU {cpu_creating:.1} s) |",
        created.as_secs_f64()
    );
    println!(
        "| stored conversations / finished / error (50 warm-up ones included) | {total} / {finished} / {error} |"
    );
    println!(
        "| wall time, first POST → none running | **{:.1} s** |",
        wall.as_secs_f64()
    );
    println!(
        "| peak conversations `running` / LLM calls in flight (sampled every 250 ms) | **{peak_running}** / {peak_llm} |"
    );
    println!("| triage CPU time over the phase | {cpu:.1} s |");
    println!(
        "| RSS before / peak (VmHWM) / after | {:.1} / {:.1} / {:.1} MiB |",
        mib(before),
        mib(hwm),
        mib(rss)
    );
    println!("| peak descriptors of triage | {peak_fds} |");
    mode.store(FAST, Ordering::Relaxed);
}

// ---------------------------------------------------------------------------------------------

/// Raises the soft RLIMIT_NOFILE to the hard one (inherited by the server); returns both.
fn raise_fd_limit() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid, initialised struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    (lim.rlim_cur, lim.rlim_max)
}

fn main() {
    let opts = Options::parse();
    LLM_SLOTS.store(opts.llm_slots, Ordering::Relaxed);
    let (soft, hard) = raise_fd_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        println!(
            "binary {}, RLIMIT_NOFILE {soft}/{hard}, {}",
            binary(),
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
        );
        let mode = Arc::new(AtomicU8::new(FAST));
        let fake = start_fake(mode.clone()).await;
        if opts.runs("startup") {
            let before = load();
            startup(&fake, &opts).await;
            println!("\n(load average before / after: {before} / {})", load());
        }
        if opts.runs("first_frame") {
            let before = load();
            first_frame(&fake).await;
            println!("\n(load average before / after: {before} / {})", load());
        }
        if opts.runs("waiting") {
            let before = load();
            waiting(&fake, &mode, &opts).await;
            println!("\n(load average before / after: {before} / {})", load());
        }
        if opts.runs("webhooks") {
            let before = load();
            webhooks(&fake, opts.webhook_runs).await;
            println!("\n(load average before / after: {before} / {})", load());
        }
        if opts.runs("many") {
            let before = load();
            many(&fake, &mode, opts.many).await;
            println!("\n(load average before / after: {before} / {})", load());
        }
    });
}
