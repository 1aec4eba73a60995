//! Load benchmark: triage in-process (via `Application`) against an in-process fast fake LLM
//! (OpenAI streaming chat completions) on loopback, driven by a load generator in the same
//! process. `cargo bench --bench load -- [--json PATH] [--quick] [--only PHASES]`, where
//! PHASES is a comma list of `startup`, `latency`, `throughput`, `streams`, `floor`.
//! BENCHMARKS.md has the results and how to read them.
//!
//! Every request follows the same script: the first LLM reply is a `TodoWrite` tool call, the
//! second is text. Measured:
//! - added latency per request and per LLM iteration at concurrency 1: time through triage
//!   minus the time of the same two LLM exchanges sent straight to the fake LLM (paired, one
//!   after the other), non-streaming and streaming;
//! - time to the response headers and to the first SSE event of a stream;
//! - throughput and latency percentiles at concurrency 16, 64 and 256;
//! - RSS with 1,000 and 10,000 concurrent open streams against a slow fake LLM (one chunk a
//!   second): for the real binary (triage alone; HTTP/1.1 and HTTP/2 clients) and in-process
//!   (triage + load generator + fake LLM). The descriptor limit is raised as far as allowed;
//!   a count it does not allow is reported, with the largest count that fits;
//! - start-up time of `triage serve` until `/readyz` answers 200, and its idle RSS;
//! - the floor (load/floor.rs): CPU per request and added latency of the release binary
//!   against a bare pass-through proxy (load/proxy.rs), each in its own process.
//!
//! Everything is on 127.0.0.1, every loop is bounded in count and time, and the whole run
//! stops by itself within five minutes (about 80 s with the defaults).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::watch;

use fake_llm::{FakeLlm, Step};
use triage::config::Settings;
use triage::startup::Application;

#[path = "load/doors.rs"]
mod doors;
#[path = "load/floor.rs"]
mod floor;
#[path = "load/proxy.rs"]
mod proxy;

// ---------------------------------------------------------------------------------------------
// Options and the overall time budget
// ---------------------------------------------------------------------------------------------

struct Options {
    json: Option<PathBuf>,
    quick: bool,
    /// `--only startup,streams,latency,throughput`: run these phases (e.g. under a profiler).
    only: Option<Vec<String>>,
    /// `LOAD_BENCH_FLOOR_KINDS`, read with the arguments: a typo stops the bench before any
    /// phase runs, not after the minutes before the floor.
    floor_kinds: Option<Vec<String>>,
}

impl Options {
    fn runs(&self, phase: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|p| p == phase))
    }

    fn parse() -> Options {
        let mut json = None;
        let mut quick = false;
        let mut only = None;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--json" => json = args.next().map(PathBuf::from),
                "--quick" => quick = true,
                "--only" => {
                    only = args
                        .next()
                        .map(|v| v.split(',').map(str::to_owned).collect());
                }
                // `cargo bench` passes `--bench`; filters and other flags are ignored.
                _ => {}
            }
        }
        let floor_kinds = floor::chosen_kinds().unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2);
        });
        Options {
            json,
            quick,
            only,
            floor_kinds,
        }
    }
}

/// Hard stop for the whole run: phases check it and end early (and say so) when it is near.
const RUN_BUDGET: Duration = Duration::from_secs(280);

struct Budget {
    started: Instant,
}

impl Budget {
    fn left(&self) -> Duration {
        RUN_BUDGET.saturating_sub(self.started.elapsed())
    }
}

// ---------------------------------------------------------------------------------------------
// The fake LLM: the shared one, with replies rendered once
// ---------------------------------------------------------------------------------------------

const TODO_ARGS: &str = r#"{"todos":[{"id":"1","content":"Check the pod status and recent restarts","status":"in_progress"},{"id":"2","content":"Read the container logs","status":"pending"},{"id":"3","content":"Check memory limits","status":"pending"}]}"#;

const ANSWER: &str = "The api pod restarts because its container exceeds the 512Mi memory limit \
and is OOMKilled about every ten minutes. Raise the limit to 1Gi or find the leak: the heap \
grows steadily after each deploy. Next: compare the memory graph with the deploy times.";

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let v = json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {v}\n\n")
}

fn tail(finish: &str, prompt: u64, completion: u64) -> String {
    let usage = json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "fake-model", "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    });
    format!(
        "{}data: {usage}\n\ndata: [DONE]\n\n",
        chunk(json!({}), Some(finish))
    )
}

/// First reply: a TodoWrite call, its arguments in three pieces.
fn tool_call_reply() -> Bytes {
    let mut s = chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_todo_1",
            "type": "function", "function": {"name": "TodoWrite", "arguments": ""}}]}),
        None,
    );
    let third = TODO_ARGS.len() / 3;
    for piece in [
        &TODO_ARGS[..third],
        &TODO_ARGS[third..2 * third],
        &TODO_ARGS[2 * third..],
    ] {
        s.push_str(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            None,
        ));
    }
    s.push_str(&tail("tool_calls", 6_000, 60));
    Bytes::from(s)
}

/// Second reply: the answer in eight content deltas.
fn text_reply() -> Bytes {
    let mut s = chunk(json!({"role": "assistant", "content": ""}), None);
    let words: Vec<&str> = ANSWER.split_inclusive(' ').collect();
    for piece in words.chunks(words.len().div_ceil(8)) {
        s.push_str(&chunk(json!({"content": piece.concat()}), None));
    }
    s.push_str(&tail("stop", 6_200, 70));
    Bytes::from(s)
}

/// The slow model's name: the fake answers its requests with a stream that lasts.
const SLOW_MODEL: &str = "gpt-4.1-slow";
/// A model whose first reply is the text answer (no tool round).
const ANSWER_MODEL: &str = "gpt-4.1-answer";

/// The shared fake (crates/fake-llm) answering from the raw body, so no request is parsed:
/// the fast model's two replies are rendered once; the slow model gets one chunk a second for
/// up to ten minutes (a benchmark phase ends far sooner, dropping the connection).
async fn start_fake() -> FakeLlm {
    let fake = FakeLlm::start().await;
    fake.keep_requests(false);
    let (tool_call, text) = (tool_call_reply(), text_reply());
    fake.set_raw_responder(move |body| {
        // The model is the first key of triage's LLM request: look only there, so the fast
        // path scans the body once, as a fake that routes by path would.
        let head = &body[..body.len().min(64)];
        if memchr_find(head, SLOW_MODEL.as_bytes()) {
            Step::Drip {
                piece: "still thinking ".into(),
                times: 600,
                interval: Duration::from_secs(1),
            }
        } else if memchr_find(head, ANSWER_MODEL.as_bytes())
            || memchr_find(body, br#""role":"tool""#)
        {
            // Second step of the script once the conversation carries the tool result.
            Step::Raw { body: text.clone() }
        } else {
            Step::Raw {
                body: tool_call.clone(),
            }
        }
    });
    fake
}

fn memchr_find(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

// ---------------------------------------------------------------------------------------------
// The load generator's HTTP/1 client: one keep-alive connection per worker
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
        self.send_with(method, path, &[], body).await
    }

    async fn send_with(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Response<Incoming>, String> {
        self.sender
            .ready()
            .await
            .map_err(|e| format!("connection: {e}"))?;
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
        self.sender
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))
    }
}

/// Timings of one chat request through triage.
struct ChatTiming {
    total: Duration,
    headers: Duration,
    /// First body bytes (for a stream: the first SSE event).
    first_byte: Duration,
}

/// Sends one `/api/chat` request and reads the whole answer; checks that it is complete.
async fn chat(conn: &mut Conn, body: &Bytes, stream: bool) -> Result<ChatTiming, String> {
    ask(conn, &doors::API_CHAT, body, stream).await
}

/// Sends one request to `door` and reads the whole answer; checks that it is complete.
async fn ask(
    conn: &mut Conn,
    door: &doors::Door,
    body: &Bytes,
    stream: bool,
) -> Result<ChatTiming, String> {
    let t0 = Instant::now();
    let resp = conn
        .send_with("POST", door.path, door.headers, body.clone())
        .await?;
    let headers = t0.elapsed();
    let status = resp.status();
    let mut body = resp.into_body();
    let mut first_byte = None;
    let mut data = Vec::with_capacity(if stream { 64 * 1024 } else { 32 * 1024 });
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("body: {e}"))?;
        if let Ok(chunk) = frame.into_data() {
            first_byte.get_or_insert_with(|| t0.elapsed());
            data.extend_from_slice(&chunk);
        }
    }
    let total = t0.elapsed();
    if status != StatusCode::OK {
        return Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&data[..data.len().min(300)])
        ));
    }
    let complete = memchr_find(&data, door.done(stream)) && !memchr_find(&data, b"event: error\n");
    if !complete {
        return Err(format!(
            "incomplete answer: {}",
            String::from_utf8_lossy(&data[data.len().saturating_sub(300)..])
        ));
    }
    Ok(ChatTiming {
        total,
        headers,
        first_byte: first_byte.unwrap_or(total),
    })
}

/// The two LLM exchanges of one request, sent straight to the fake LLM.
async fn direct(conn: &mut Conn, bodies: &[Bytes]) -> Result<Duration, String> {
    let t0 = Instant::now();
    for body in bodies {
        let resp = conn
            .send("POST", "/v1/chat/completions", body.clone())
            .await?;
        if resp.status() != StatusCode::OK {
            return Err(format!("fake LLM answered {}", resp.status()));
        }
        resp.into_body()
            .collect()
            .await
            .map_err(|e| format!("fake body: {e}"))?;
    }
    Ok(t0.elapsed())
}

fn chat_body(stream: bool, model: &str) -> Bytes {
    doors::API_CHAT.body(model, stream)
}

// ---------------------------------------------------------------------------------------------
// Statistics and process facts
// ---------------------------------------------------------------------------------------------

/// Percentile (nearest rank) of values in microseconds.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

/// Busy CPU time of the whole machine and of this process, in clock ticks: the difference
/// tells whether something else (another build, another session) took CPU during a phase.
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let machine: u64 = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .enumerate()
        // user nice system (idle iowait) irq softirq steal
        .filter(|(i, _)| matches!(i, 0 | 1 | 2 | 5 | 6 | 7))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum();
    let own = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let own: u64 = own
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        // fields 14 and 15 (utime, stime) are the 12th and 13th after the command name
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse::<u64>().ok())
        .sum();
    (machine, own)
}

/// CPU share (of all cores) other processes used between two `cpu_ticks` readings.
fn foreign_cpu(before: (u64, u64), after: (u64, u64), elapsed: Duration) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let foreign = after.0.saturating_sub(before.0) as f64 - after.1.saturating_sub(before.1) as f64;
    (foreign.max(0.0) / hz) / (elapsed.as_secs_f64() * cores)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// (VmRSS, VmHWM) in KiB of a process (`None`: this one).
fn rss_kib(pid: Option<u32>) -> (u64, u64) {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".to_owned(),
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Raises RLIMIT_NOFILE: the soft limit to the hard one, and the hard one itself when that is
/// allowed (root). Returns (soft, hard, what happened).
fn raise_fd_limit(wanted: u64) -> (u64, u64, String) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid, initialised struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    let before = (lim.rlim_cur, lim.rlim_max);
    let mut note = format!("RLIMIT_NOFILE was {}/{}", before.0, before.1);
    if lim.rlim_max < wanted {
        let raised = libc::rlimit {
            rlim_cur: wanted as libc::rlim_t,
            rlim_max: wanted as libc::rlim_t,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            note.push_str(&format!(
                "; hard limit raised to {wanted} (the process may: it runs as root)"
            ));
        } else {
            note.push_str("; the hard limit cannot be raised (not privileged)");
        }
    }
    // SAFETY: as above.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    note.push_str(&format!("; now {}/{}", lim.rlim_cur, lim.rlim_max));
    (lim.rlim_cur, lim.rlim_max, note)
}

fn machine() -> Value {
    let cmd = |c: &str, args: &[&str]| {
        std::process::Command::new(c)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let model = cmd("lscpu", &[])
        .lines()
        .find(|l| l.starts_with("Model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    json!({
        "nproc": cmd("nproc", &[]),
        "cpu_model": model,
        "memory_gib": (mem_kib as f64 / 1048576.0 * 10.0).round() / 10.0,
        "kernel": cmd("uname", &["-r"]),
        "date_utc": chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
    })
}

// ---------------------------------------------------------------------------------------------
// Triage: in-process, or the release binary as a child process
// ---------------------------------------------------------------------------------------------

/// The conversation database of every triage this run starts: a benchmark never touches the
/// user's conversations. Removed when the run ends.
fn bench_data_dir() -> PathBuf {
    std::env::temp_dir().join(format!("triage-bench-load-{}", std::process::id()))
}

fn bench_toml(port: u16, llm: SocketAddr) -> String {
    let data_dir = bench_data_dir().display().to_string();
    format!(
        r#"
[server]
host = "127.0.0.1"
port = {port}
max_concurrent_requests = 20000
[llm]
max_concurrent_calls_per_model = 20000
[toolsets.kubernetes]
enabled = false
[toolsets.prometheus]
enabled = false
[conversations]
data_dir = "{data_dir}"
[models.fast]
model = "openai/gpt-4.1"
api_base = "http://{llm}/v1"
[models.slow]
model = "openai/{SLOW_MODEL}"
api_base = "http://{llm}/v1"
[models.answer]
model = "openai/{ANSWER_MODEL}"
api_base = "http://{llm}/v1"
"#
    )
}

struct InProcess {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

async fn start_in_process(llm: SocketAddr) -> (InProcess, Duration) {
    let t0 = Instant::now();
    let settings = Settings::from_toml(&bench_toml(0, llm)).expect("bench settings");
    let app = Application::build(settings).await.expect("triage builds");
    let addr: SocketAddr = ([127, 0, 0, 1], app.port()).into();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = app
            .run_until(async {
                let _ = stopped.await;
            })
            .await;
    });
    wait_ready(addr, Duration::from_secs(10))
        .await
        .expect("in-process triage ready");
    (
        InProcess {
            addr,
            stop: Some(stop),
            task,
        },
        t0.elapsed(),
    )
}

/// Polls `GET /readyz` until it answers 200.
async fn wait_ready(addr: SocketAddr, limit: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        if let Ok(mut conn) = Conn::open(addr).await
            && let Ok(resp) = conn.send("GET", "/readyz", Bytes::new()).await
            && resp.status() == StatusCode::OK
        {
            return Ok(());
        }
        if t0.elapsed() > limit {
            return Err(format!("not ready within {limit:?}"));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The release binary, or `LOAD_BENCH_BIN` (e.g. the `profiling` build, which has symbols).
/// Not `TRIAGE_…`: the binary reads those as config keys and refuses unknown ones.
fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("LOAD_BENCH_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_triage")),
        PathBuf::from,
    );
    path.is_file().then_some(path)
}

/// `LOAD_BENCH_WRAP`: a command the binary runs under, e.g.
/// `valgrind --tool=callgrind --collect-atstart=no` (the floor phase then collects only while
/// it measures triage at concurrency 1, one dump per kind of request).
fn wrapper() -> Vec<String> {
    std::env::var("LOAD_BENCH_WRAP")
        .map(|w| w.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

struct Child {
    child: std::process::Child,
    addr: SocketAddr,
    _config: TempFile,
}

impl Child {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SIGTERM to our own child, then a bounded wait; SIGKILL if it is still there.
        // SAFETY: kill(2) on the pid of a child this process spawned and has not reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Spawns `triage serve` with a temporary config; returns it and the time until `/readyz`
/// answered 200.
async fn spawn_binary(bin: &Path, llm: SocketAddr, n: usize) -> Result<(Child, Duration), String> {
    let port = free_port();
    let path = std::env::temp_dir().join(format!("triage-bench-{}-{n}.toml", std::process::id()));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(bench_toml(port, llm).as_bytes()))
        .map_err(|e| format!("temp config: {e}"))?;
    let config = TempFile(path.clone());
    let t0 = Instant::now();
    let wrap = wrapper();
    let mut command = match wrap.split_first() {
        Some((program, args)) => {
            let mut c = std::process::Command::new(program);
            c.args(args).arg(bin);
            c
        }
        None => std::process::Command::new(bin),
    };
    let child = command
        .arg("serve")
        .env("TRIAGE_CONFIG", &path)
        .env("RUST_LOG", "warn")
        .env_remove("HOLMES_PORT")
        .env_remove("HOLMES_HOST")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let child = Child {
        child,
        addr,
        _config: config,
    };
    let limit = if wrap.is_empty() { 10 } else { 120 };
    wait_ready(addr, Duration::from_secs(limit)).await?;
    Ok((child, t0.elapsed()))
}

// ---------------------------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------------------------

/// Added latency at concurrency 1: each triage request is paired with a direct replay of the
/// two LLM exchanges it caused.
async fn latency(
    triage: SocketAddr,
    fake: &FakeLlm,
    stream: bool,
    count: usize,
    limit: Duration,
) -> Value {
    let body = chat_body(stream, "fast");
    let mut conn = Conn::open(triage).await.expect("connect triage");
    let mut fake_conn = Conn::open(fake.addr()).await.expect("connect fake");
    // The replay set: the two LLM request bodies of one triage request.
    fake.keep_requests(true);
    let _ = fake.take_raw_requests();
    chat(&mut conn, &body, stream)
        .await
        .expect("capture request");
    fake.keep_requests(false);
    let bodies = fake.take_raw_requests();
    assert_eq!(bodies.len(), 2, "one request = two LLM exchanges");
    let llm_bytes: Vec<usize> = bodies.iter().map(Bytes::len).collect();
    for _ in 0..200 {
        let _ = chat(&mut conn, &body, stream).await;
        let _ = direct(&mut fake_conn, &bodies).await;
    }
    let (mut through, mut straight, mut added, mut headers, mut first) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut errors = 0u64;
    let t0 = Instant::now();
    for i in 0..count {
        if t0.elapsed() > limit {
            break;
        }
        // Alternate the order so neither side always runs on a warmer cache.
        let (t, d) = if i % 2 == 0 {
            let t = chat(&mut conn, &body, stream).await;
            (t, direct(&mut fake_conn, &bodies).await)
        } else {
            let d = direct(&mut fake_conn, &bodies).await;
            (chat(&mut conn, &body, stream).await, d)
        };
        match (t, d) {
            (Ok(t), Ok(d)) => {
                through.push(micros(t.total));
                straight.push(micros(d));
                added.push(micros(t.total) - micros(d));
                headers.push(micros(t.headers));
                first.push(micros(t.first_byte));
            }
            _ => errors += 1,
        }
    }
    let n = through.len();
    let (through, straight, added, headers, first) = (
        sorted(through),
        sorted(straight),
        sorted(added),
        sorted(headers),
        sorted(first),
    );
    let pcts = |v: &[f64]| json!({"p50_us": pct(v, 50.0), "p99_us": pct(v, 99.0)});
    json!({
        "mode": if stream { "stream" } else { "json" },
        "requests": n,
        "errors": errors,
        "llm_request_bytes": llm_bytes,
        "through_triage": pcts(&through),
        "direct_to_llm": pcts(&straight),
        "added_per_request": pcts(&added),
        "added_per_llm_iteration": {"p50_us": pct(&added, 50.0) / 2.0, "p99_us": pct(&added, 99.0) / 2.0},
        "time_to_headers": pcts(&headers),
        "time_to_first_body_byte": pcts(&first),
        // The first SSE event follows the first LLM exchange: this is its share of triage.
        "first_event_minus_one_llm_exchange_p50_us": pct(&first, 50.0) - pct(&straight, 50.0) / 2.0,
    })
}

/// `concurrency` workers, each on its own connection, for `warm + measure`.
async fn throughput(
    triage: SocketAddr,
    stream: bool,
    concurrency: usize,
    warm: Duration,
    measure: Duration,
) -> Value {
    let body = chat_body(stream, "fast");
    let start = Instant::now() + Duration::from_millis(50);
    let window_start = start + warm;
    let window_end = window_start + measure;
    // Bounded in count too: no worker makes more than this many requests.
    let max_per_worker = 200_000 / concurrency;
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let body = body.clone();
        workers.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(4096);
            let mut errors = Vec::new();
            let mut conn = match Conn::open(triage).await {
                Ok(c) => c,
                Err(e) => return (lat, vec![e]),
            };
            tokio::time::sleep_until(start.into()).await;
            for _ in 0..max_per_worker {
                let t0 = Instant::now();
                if t0 >= window_end {
                    break;
                }
                let result = chat(&mut conn, &body, stream).await;
                let in_window = t0 >= window_start && Instant::now() <= window_end;
                match result {
                    Ok(t) if in_window => lat.push(micros(t.total)),
                    Ok(_) => {}
                    Err(e) => {
                        if in_window {
                            errors.push(e);
                        }
                        if let Ok(c) = Conn::open(triage).await {
                            conn = c;
                        }
                    }
                }
            }
            (lat, errors)
        }));
    }
    tokio::time::sleep_until(window_start.into()).await;
    let cpu_before = cpu_ticks();
    tokio::time::sleep_until(window_end.into()).await;
    let cpu_after = cpu_ticks();
    let mut lat = Vec::new();
    let mut errors = Vec::new();
    for w in workers {
        if let Ok((l, e)) = w.await {
            lat.extend(l);
            errors.extend(e);
        }
    }
    let lat = sorted(lat);
    let secs = measure.as_secs_f64();
    json!({
        "mode": if stream { "stream" } else { "json" },
        "concurrency": concurrency,
        "seconds": secs,
        "requests": lat.len(),
        "req_per_s": lat.len() as f64 / secs,
        "llm_calls_per_s": 2.0 * lat.len() as f64 / secs,
        "p50_ms": pct(&lat, 50.0) / 1000.0,
        "p99_ms": pct(&lat, 99.0) / 1000.0,
        "max_ms": lat.last().copied().unwrap_or(f64::NAN) / 1000.0,
        "errors": errors.len(),
        "first_error": errors.first(),
        "other_processes_cpu_share": foreign_cpu(cpu_before, cpu_after, measure),
    })
}

/// How the client carries open streams.
#[derive(Clone, Copy, PartialEq)]
enum Proto {
    /// One HTTP/1.1 connection per stream (what most clients do).
    Http1,
    /// HTTP/2 (h2c), this many streams per connection: 10,000 streams then need about 100
    /// client connections instead of 10,000 descriptors.
    Http2(usize),
}

impl Proto {
    fn label(self) -> String {
        match self {
            Proto::Http1 => "HTTP/1.1, 1 stream/conn".into(),
            Proto::Http2(n) => format!("HTTP/2, {n} streams/conn"),
        }
    }

    /// Descriptors per stream on the client side and in triage (HTTP/2 connections are
    /// shared, so they are not counted): (client, triage).
    fn fds(self) -> (usize, usize) {
        match self {
            Proto::Http1 => (1, 2),
            Proto::Http2(_) => (0, 1),
        }
    }
}

type H2Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

async fn open_h2(addr: SocketAddr) -> Result<H2Sender, String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(stream),
    )
    .await
    .map_err(|e| format!("h2 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Opens one stream; returns what must be held to keep it open.
async fn open_one(
    triage: SocketAddr,
    proto: Proto,
    h2: &mut Option<(H2Sender, usize)>,
    body: &Bytes,
) -> Result<Box<dyn std::any::Any + Send>, String> {
    let per_conn = match proto {
        Proto::Http1 => {
            let mut conn = Conn::open(triage).await?;
            let resp = conn.send("POST", "/api/chat", body.clone()).await?;
            if resp.status() != StatusCode::OK {
                return Err(format!("HTTP {}", resp.status()));
            }
            return Ok(Box::new((conn, resp)));
        }
        Proto::Http2(per_conn) => per_conn,
    };
    if h2.as_ref().is_none_or(|(_, used)| *used >= per_conn) {
        *h2 = Some((open_h2(triage).await?, 0));
    }
    let (sender, used) = h2.as_mut().expect("connection just opened");
    *used += 1;
    let mut sender = sender.clone();
    sender
        .ready()
        .await
        .map_err(|e| format!("h2 connection: {e}"))?;
    let req = Request::builder()
        .method("POST")
        .uri(format!("http://{triage}/api/chat"))
        .header("content-type", "application/json")
        .body(Full::new(body.clone()))
        .map_err(|e| e.to_string())?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("h2 request: {e}"))?;
    if resp.status() != StatusCode::OK {
        return Err(format!("HTTP {}", resp.status()));
    }
    Ok(Box::new((sender, resp)))
}

/// Opens `n` streams against the slow model, holds them, measures RSS, then closes them.
async fn open_streams(
    triage: SocketAddr,
    pid: Option<u32>,
    fake: &FakeLlm,
    n: usize,
    proto: Proto,
    label: &str,
    budget: Duration,
) -> Value {
    const TASKS: usize = 32;
    let settle = || tokio::time::sleep(Duration::from_millis(1500));
    settle().await;
    let (rss_before, _) = rss_kib(pid);
    let (release_tx, release_rx) = watch::channel(false);
    let opened = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let stop_at = Instant::now() + budget;
    let body = chat_body(true, "slow");
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let share = n / TASKS + usize::from(t < n % TASKS);
        let (opened, failed, first_error, body) = (
            opened.clone(),
            failed.clone(),
            first_error.clone(),
            body.clone(),
        );
        let mut release = release_rx.clone();
        tasks.push(tokio::spawn(async move {
            let mut held = Vec::with_capacity(share);
            let mut h2 = None;
            for _ in 0..share {
                if Instant::now() > stop_at {
                    break;
                }
                let attempt = open_one(triage, proto, &mut h2, &body);
                match tokio::time::timeout(Duration::from_secs(10), attempt).await {
                    Ok(Ok(pair)) => {
                        held.push(pair);
                        opened.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(Err(e)) => {
                        failed.fetch_add(1, Ordering::SeqCst);
                        first_error.lock().unwrap().get_or_insert(e);
                    }
                    Err(_) => {
                        failed.fetch_add(1, Ordering::SeqCst);
                        first_error
                            .lock()
                            .unwrap()
                            .get_or_insert("timed out opening a stream".into());
                    }
                }
            }
            let _ = release.wait_for(|r| *r).await;
            drop(held);
            drop(h2);
        }));
    }
    // All open: the client holds n answers' headers and the fake LLM serves n slow streams.
    while (opened.load(Ordering::SeqCst) + failed.load(Ordering::SeqCst)) < n as u64
        || fake.in_flight() < n.min(opened.load(Ordering::SeqCst) as usize)
    {
        if Instant::now() > stop_at {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let open_time = t0.elapsed();
    let open_now = opened.load(Ordering::SeqCst);
    // Hold them for a few seconds (several slow chunks flow), sampling RSS.
    let mut rss_open = 0;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        rss_open = rss_open.max(rss_kib(pid).0);
    }
    let (_, hwm) = rss_kib(pid);
    // Still all alive: no stream was ended by triage while held.
    let alive = fake.in_flight();
    let _ = release_tx.send(true);
    let t_close = Instant::now();
    for t in tasks {
        let _ = t.await;
    }
    // Closing a client stream must cancel triage's LLM call.
    let cancel_limit = Instant::now() + Duration::from_secs(30);
    while fake.in_flight() > 0 && Instant::now() < cancel_limit {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled_in = t_close.elapsed();
    let leftover = fake.in_flight();
    let failed = failed.load(Ordering::SeqCst);
    let per_stream = if open_now > 0 {
        (rss_open.saturating_sub(rss_before)) as f64 / open_now as f64
    } else {
        f64::NAN
    };
    json!({
        "target": label,
        "protocol": proto.label(),
        "streams_wanted": n,
        "streams_open": open_now,
        "streams_alive_at_end_of_hold": alive,
        "errors": failed,
        "first_error": *first_error.lock().unwrap(),
        "open_seconds": open_time.as_secs_f64(),
        "rss_before_mib": rss_before as f64 / 1024.0,
        "rss_open_mib": rss_open as f64 / 1024.0,
        "peak_rss_mib": hwm as f64 / 1024.0,
        "rss_per_stream_kib": per_stream,
        "close_all_and_cancel_llm_seconds": cancelled_in.as_secs_f64(),
        "llm_streams_left_after_close": leftover,
    })
}

async fn startup(fake: &FakeLlm, runs: usize) -> (Value, Option<Child>) {
    let Some(bin) = binary() else {
        let mut times = Vec::new();
        for _ in 0..runs {
            let (app, took) = start_in_process(fake.addr()).await;
            times.push(micros(took) / 1000.0);
            stop_in_process(app).await;
        }
        let times = sorted(times);
        return (
            json!({"how": "in-process (release binary not found)", "runs": times.len(),
                   "ready_p50_ms": pct(&times, 50.0), "ready_max_ms": times.last()}),
            None,
        );
    };
    let mut times = Vec::new();
    let mut idle = Vec::new();
    let mut last = None;
    for i in 0..runs {
        match spawn_binary(&bin, fake.addr(), i).await {
            Ok((child, took)) => {
                times.push(micros(took) / 1000.0);
                tokio::time::sleep(Duration::from_millis(200)).await;
                idle.push(rss_kib(Some(child.pid())).0 as f64 / 1024.0);
                last = Some(child);
            }
            Err(e) => {
                eprintln!("start-up run {i}: {e}");
            }
        }
    }
    let times = sorted(times);
    let idle = sorted(idle);
    (
        json!({
            "how": format!("{} serve, TRIAGE_CONFIG=<temp file>, polling GET /readyz every 1 ms", bin.display()),
            "runs": times.len(),
            "ready_p50_ms": pct(&times, 50.0),
            "ready_max_ms": times.last(),
            "idle_rss_after_start_mib": pct(&idle, 50.0),
        }),
        last,
    )
}

async fn stop_in_process(mut app: InProcess) {
    if let Some(stop) = app.stop.take() {
        let _ = stop.send(());
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut app.task).await;
}

/// Warms a server with `n` sequential requests of each kind.
async fn warm(addr: SocketAddr, n: usize) -> u64 {
    let mut errors = 0;
    let mut conn = Conn::open(addr).await.expect("connect");
    for i in 0..n {
        if chat(&mut conn, &chat_body(i % 2 == 1, "fast"), i % 2 == 1)
            .await
            .is_err()
        {
            errors += 1;
        }
    }
    errors
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

fn f(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.is_finite() => {
            if x.abs() >= 100.0 {
                format!("{x:.0}")
            } else if x.abs() >= 10.0 {
                format!("{x:.1}")
            } else {
                format!("{x:.2}")
            }
        }
        _ => v.to_string(),
    }
}

fn print_report(r: &Value) {
    println!();
    println!(
        "triage load benchmark — {}",
        r["machine"]["date_utc"].as_str().unwrap_or("")
    );
    println!(
        "machine: {} × {}, {} GiB; server, fake LLM and load generator share these cores",
        r["machine"]["nproc"].as_str().unwrap_or("?"),
        r["machine"]["cpu_model"].as_str().unwrap_or("?"),
        r["machine"]["memory_gib"]
    );
    println!("{}", r["fd_limit"].as_str().unwrap_or(""));
    let s = &r["startup"];
    println!();
    println!("## Start-up ({})", s["how"].as_str().unwrap_or(""));
    println!(
        "ready p50 {} ms, max {} ms over {} runs; idle RSS after start {} MiB; idle RSS after {} warm-up requests {} MiB",
        f(&s["ready_p50_ms"]),
        f(&s["ready_max_ms"]),
        s["runs"],
        f(&s["idle_rss_after_start_mib"]),
        r["idle_after_warmup"]["requests"],
        f(&r["idle_after_warmup"]["rss_mib"]),
    );
    println!();
    println!("## Added latency at concurrency 1 (2 LLM iterations per request; µs)");
    println!(
        "| mode   | n    | triage p50 | triage p99 | direct p50 | direct p99 | added/req p50 | added/req p99 | added/iter p50 | added/iter p99 | headers p50 | 1st byte p50 | 1st byte p99 |"
    );
    println!(
        "|--------|------|-----------|-----------|-----------|-----------|--------------|--------------|---------------|---------------|------------|-------------|-------------|"
    );
    for l in r["latency"].as_array().into_iter().flatten() {
        println!(
            "| {:6} | {:4} | {:>9} | {:>9} | {:>9} | {:>9} | {:>12} | {:>12} | {:>13} | {:>13} | {:>10} | {:>11} | {:>11} |",
            l["mode"].as_str().unwrap_or(""),
            l["requests"],
            f(&l["through_triage"]["p50_us"]),
            f(&l["through_triage"]["p99_us"]),
            f(&l["direct_to_llm"]["p50_us"]),
            f(&l["direct_to_llm"]["p99_us"]),
            f(&l["added_per_request"]["p50_us"]),
            f(&l["added_per_request"]["p99_us"]),
            f(&l["added_per_llm_iteration"]["p50_us"]),
            f(&l["added_per_llm_iteration"]["p99_us"]),
            f(&l["time_to_headers"]["p50_us"]),
            f(&l["time_to_first_body_byte"]["p50_us"]),
            f(&l["time_to_first_body_byte"]["p99_us"]),
        );
    }
    println!();
    println!("## Throughput (one connection per worker)");
    println!(
        "| mode   | concurrency | req/s  | LLM calls/s | p50 ms | p99 ms | max ms | errors | CPU used by other processes |"
    );
    println!(
        "|--------|-------------|--------|-------------|--------|--------|--------|--------|-----------------------------|"
    );
    for t in r["throughput"].as_array().into_iter().flatten() {
        println!(
            "| {:6} | {:>11} | {:>6} | {:>11} | {:>6} | {:>6} | {:>6} | {:>6} | {:>26.0}% |",
            t["mode"].as_str().unwrap_or(""),
            t["concurrency"],
            f(&t["req_per_s"]),
            f(&t["llm_calls_per_s"]),
            f(&t["p50_ms"]),
            f(&t["p99_ms"]),
            f(&t["max_ms"]),
            t["errors"],
            t["other_processes_cpu_share"].as_f64().unwrap_or(f64::NAN) * 100.0,
        );
        if let Some(e) = t["first_error"].as_str() {
            println!("  first error: {e}");
        }
    }
    println!();
    println!("## Concurrent open streams (slow fake LLM: one chunk a second)");
    println!(
        "| target | protocol | wanted | open | alive | errors | open s | RSS before MiB | RSS open MiB | peak RSS MiB | KiB/stream | close+cancel s |"
    );
    println!(
        "|--------|----------|--------|------|-------|--------|--------|----------------|--------------|--------------|------------|----------------|"
    );
    for s in r["open_streams"].as_array().into_iter().flatten() {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s["target"].as_str().unwrap_or(""),
            s["protocol"].as_str().unwrap_or(""),
            s["streams_wanted"],
            s["streams_open"],
            s["streams_alive_at_end_of_hold"],
            s["errors"],
            f(&s["open_seconds"]),
            f(&s["rss_before_mib"]),
            f(&s["rss_open_mib"]),
            f(&s["peak_rss_mib"]),
            f(&s["rss_per_stream_kib"]),
            f(&s["close_all_and_cancel_llm_seconds"]),
        );
        if let Some(e) = s["first_error"].as_str() {
            println!("  first error: {e}");
        }
        if let Some(n) = s["note"].as_str() {
            println!("  note: {n}");
        }
    }
    println!();
    println!("total run time: {} s", f(&r["run_seconds"]));
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--serve-proxy") {
        if let Err(e) = proxy::serve(&args[2..]) {
            eprintln!("proxy: {e}");
            std::process::exit(2);
        }
        return;
    }
    let opts = Options::parse();
    // As the binary does: info level unless RUST_LOG/LOG_LEVEL say otherwise, so the
    // per-request span costs what it costs in production.
    triage::telemetry::init();
    triage::runtime::install_crypto_provider();
    // In-process 10,000 streams hold 4 descriptors each (client, triage in, triage out, fake).
    let (soft, _hard, fd_note) = raise_fd_limit(48_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let report = rt.block_on(run(&opts, soft, fd_note));
    print_report(&report);
    if opts.runs("floor") {
        floor::print(&report["floor"]);
    }
    if let Some(path) = &opts.json {
        match std::fs::write(path, serde_json::to_string_pretty(&report).unwrap()) {
            Ok(()) => println!("JSON written to {}", path.display()),
            Err(e) => eprintln!("cannot write {}: {e}", path.display()),
        }
    }
    // Dropping the runtime would wait for the slow fake streams' tasks; they are done, but
    // do not linger on blocked tasks either.
    rt.shutdown_timeout(Duration::from_secs(2));
    let _ = std::fs::remove_dir_all(bench_data_dir());
}

async fn run(opts: &Options, fd_soft: u64, fd_note: String) -> Value {
    let budget = Budget {
        started: Instant::now(),
    };
    let fake = start_fake().await;
    let quick = opts.quick;
    eprintln!("[load] start-up of the release binary…");
    let (startup, child) = if opts.runs("startup") {
        startup(&fake, if quick { 3 } else { 5 }).await
    } else {
        (json!({}), None)
    };
    // Idle RSS of the binary after it has served requests.
    let mut idle_after_warmup = json!({"requests": 0, "rss_mib": null});
    if let Some(child) = &child {
        let n = 400;
        let errors = warm(child.addr, n).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        idle_after_warmup = json!({"requests": n, "errors": errors,
            "rss_mib": rss_kib(Some(child.pid())).0 as f64 / 1024.0});
    }
    drop(child);

    // Memory freed after a spike stays with glibc's allocator (RSS stays near the peak and a
    // fragmented heap costs about a fifth of the throughput), so the in-process phases run
    // in this order: latency, throughput, then open streams (1,000 before 10,000); each run
    // against the binary gets a fresh process.
    eprintln!("[load] in-process triage…");
    let (app, in_process_start) = start_in_process(fake.addr()).await;
    let addr = app.addr;
    let warm_errors = warm(addr, 400).await;
    let mut latency_rows = Vec::new();
    for stream in [false, true].into_iter().filter(|_| opts.runs("latency")) {
        eprintln!("[load] latency at concurrency 1, stream={stream}…");
        let count = if quick { 500 } else { 2_000 };
        latency_rows.push(latency(addr, &fake, stream, count, Duration::from_secs(20)).await);
    }

    let mut through = Vec::new();
    let (warm_t, measure) = if quick {
        (Duration::from_millis(500), Duration::from_secs(2))
    } else {
        (Duration::from_secs(1), Duration::from_secs(5))
    };
    for stream in [false, true]
        .into_iter()
        .filter(|_| opts.runs("throughput"))
    {
        for c in [16, 64, 256] {
            if budget.left() < Duration::from_secs(90) {
                eprintln!("[load] time budget: skipping throughput c={c} stream={stream}");
                continue;
            }
            eprintln!("[load] throughput c={c} stream={stream}…");
            through.push(throughput(addr, stream, c, warm_t, measure).await);
        }
    }
    let mut open = Vec::new();
    let in_process_runs: &[(Proto, usize)] = if !opts.runs("streams") {
        &[]
    } else if quick {
        &[(Proto::Http1, 1_000)]
    } else {
        &[(Proto::Http1, 1_000), (Proto::Http2(100), 10_000)]
    };
    for &(proto, n) in in_process_runs {
        // In-process every descriptor of a stream is in this one process.
        let (client, server) = proto.fds();
        let want = n.min(fd_soft.saturating_sub(500) as usize / (client + server + 1));
        eprintln!("[load] {want} open streams in-process ({})…", proto.label());
        let mut r = open_streams(
            addr,
            None,
            &fake,
            want,
            proto,
            "in-process (triage + load generator + fake LLM)",
            Duration::from_secs(40),
        )
        .await;
        if want < n {
            r["note"] = json!(format!(
                "{n} not reachable in one process: the descriptor limit ({fd_soft}, hard) allows {want}"
            ));
        }
        open.push(r);
    }

    stop_in_process(app).await;

    let floor = if opts.runs("floor") {
        floor::floor(&fake, quick, opts.floor_kinds.as_deref()).await
    } else {
        json!({})
    };

    // The release binary, alone in its process (its RSS is triage's alone). HTTP/1.1 needs
    // two descriptors per stream in triage, so 10,000 exceed a 20,000 limit; HTTP/2 needs one
    // (the upstream connection).
    let binary_runs: &[(Proto, usize)] = if !opts.runs("streams") {
        &[]
    } else if quick {
        &[(Proto::Http1, 1_000)]
    } else {
        &[
            (Proto::Http1, 1_000),
            (Proto::Http1, 10_000),
            (Proto::Http2(100), 10_000),
        ]
    };
    if let Some(bin) = binary() {
        for (i, &(proto, n)) in binary_runs.iter().enumerate() {
            // Here: client and fake-LLM descriptors; in the child: triage's.
            let (client, server) = proto.fds();
            let room = fd_soft.saturating_sub(500) as usize;
            let want = n.min(room / (client + 1)).min(room / server);
            if budget.left() < Duration::from_secs(30) {
                eprintln!("[load] time budget: skipping {n} streams against the binary");
                continue;
            }
            let child = match spawn_binary(&bin, fake.addr(), 100 + i).await {
                Ok((child, _)) => child,
                Err(e) => {
                    eprintln!("[load] cannot start the binary: {e}");
                    continue;
                }
            };
            let warm_errors = warm(child.addr, 100).await;
            eprintln!(
                "[load] {want} open streams against the binary ({})…",
                proto.label()
            );
            let mut r = open_streams(
                child.addr,
                Some(child.pid()),
                &fake,
                want,
                proto,
                "binary (triage alone)",
                Duration::from_secs(40).min(budget.left() / 2),
            )
            .await;
            r["warmup_errors"] = json!(warm_errors);
            if want < n {
                r["note"] = json!(format!(
                    "{n} not reachable this way: the descriptor limit ({fd_soft}, hard) allows {want}"
                ));
            }
            open.push(r);
            drop(child);
        }
    }

    json!({
        "machine": machine(),
        "fd_limit": fd_note,
        "startup": startup,
        "in_process_start_ms": micros(in_process_start) / 1000.0,
        "idle_after_warmup": idle_after_warmup,
        "warmup_errors": warm_errors,
        "latency": latency_rows,
        "throughput": through,
        "open_streams": open,
        "floor": floor,
        "fake_llm_requests": fake.request_count(),
        "run_seconds": budget.started.elapsed().as_secs_f64(),
    })
}
