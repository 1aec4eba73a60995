//! Capacity benchmark (issue 18): N concurrent SSE streams through the real `triage` binary on
//! its default limits, against a fake LLM that answers each call in ~30 s (one delta a second),
//! every stream read to its end. Three processes, each with its own descriptors: this one (the
//! load generator), a copy of it serving the fake LLM (`--serve-fake-llm`), and `triage serve`.
//!
//! `cargo bench --bench streams -- [--streams N] [--http1] [--secs S]`: the client speaks h2c to
//! triage (about 100 streams a connection) unless `--http1` (one connection a stream, so each
//! stream holds two descriptors in triage). Reports errors, the end-time distribution, and
//! triage's RSS before, at its peak, 5 s and 15 s after, per stream; plus the machine's load.

use std::io::{BufRead, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use fake_llm::{FakeLlm, Step};

const STREAMS_PER_H2_CONNECTION: usize = 100;

struct Options {
    streams: usize,
    http1: bool,
    /// Seconds the fake LLM takes per answer (one delta a second).
    secs: usize,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
    };
    let http1 = args.iter().any(|a| a == "--http1");
    Options {
        streams: value("--streams").unwrap_or(if http1 { 9_000 } else { 10_000 }),
        http1,
        secs: value("--secs").unwrap_or(30),
    }
}

fn raise_descriptor_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a struct this function owns.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
}

/// The fake LLM's process: serves until its parent closes stdin.
fn serve_fake_llm(secs: usize) {
    raise_descriptor_limit();
    let Ok(rt) = tokio::runtime::Runtime::new() else {
        return;
    };
    rt.block_on(async {
        let fake = FakeLlm::start().await;
        fake.set_default(Step::Drip {
            piece: "word ".into(),
            times: secs,
            interval: Duration::from_secs(1),
        });
        println!("{}", fake.addr());
        let _ = std::io::stdout().flush();
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
        })
        .await;
    });
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A child process ended (SIGKILL) when dropped.
struct Process(std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_fake_llm(secs: usize) -> Option<(Process, SocketAddr)> {
    let mut child = std::process::Command::new(std::env::current_exe().ok()?)
        .args(["--serve-fake-llm", "--secs", &secs.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    Some((Process(child), line.trim().parse().ok()?))
}

fn start_triage(llm: SocketAddr) -> Option<(Process, SocketAddr, PathBuf)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let dir = std::env::temp_dir().join(format!("triage-bench-streams-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let config = dir.join("triage.toml");
    // The default limits: nothing here about concurrency.
    std::fs::write(
        &config,
        format!(
            "[server]\nhost = \"127.0.0.1\"\nport = {port}\n\
             [toolsets.kubernetes]\nenabled = false\n[toolsets.prometheus]\nenabled = false\n\
             [conversations]\ndata_dir = \"{}\"\n\
             [models.slow]\nmodel = \"openai/gpt-4.1\"\napi_base = \"http://{llm}/v1\"\n",
            dir.display()
        ),
    )
    .ok()?;
    // `STREAMS_BENCH_BIN` (another build, e.g. the profiling one) and `STREAMS_BENCH_WRAP`
    // (a command it runs under, e.g. `heaptrack`); not `TRIAGE_*`, which triage reads.
    let bin = std::env::var_os("STREAMS_BENCH_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_triage")),
        PathBuf::from,
    );
    let wrap: Vec<String> = std::env::var("STREAMS_BENCH_WRAP")
        .map(|w| w.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let mut command = match wrap.split_first() {
        Some((program, args)) => {
            let mut c = std::process::Command::new(program);
            c.args(args).arg(&bin);
            c
        }
        None => std::process::Command::new(&bin),
    };
    let child = command
        .arg("serve")
        .env("TRIAGE_CONFIG", &config)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .ok()?;
    Some((Process(child), ([127, 0, 0, 1], port).into(), dir))
}

async fn wait_ready(addr: SocketAddr) -> bool {
    for _ in 0..200 {
        if let Ok(stream) = TcpStream::connect(addr).await
            && let Ok((mut sender, conn)) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
        {
            tokio::spawn(conn);
            let req = Request::get("/readyz")
                .header("host", "127.0.0.1")
                .body(Full::new(Bytes::new()));
            if let Ok(req) = req
                && sender
                    .send_request(req)
                    .await
                    .is_ok_and(|r| r.status().is_success())
            {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

type H2 = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

async fn h2_connection(addr: SocketAddr) -> Result<H2, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok(sender)
}

/// One stream, read to its end: the seconds it took, or what went wrong.
async fn one_stream(addr: SocketAddr, h2: Option<H2>, body: Bytes) -> Result<f64, String> {
    let started = Instant::now();
    let req = Request::post(format!("http://{addr}/api/chat"))
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Full::new(body))
        .map_err(|e| e.to_string())?;
    let resp = match h2 {
        Some(mut sender) => {
            sender.ready().await.map_err(|e| e.to_string())?;
            sender.send_request(req).await.map_err(|e| e.to_string())?
        }
        None => {
            let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            sender.send_request(req).await.map_err(|e| e.to_string())?
        }
    };
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status()));
    }
    let text = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if memchr::memmem::find(&text, b"event: ai_answer_end").is_none() {
        return Err("stream ended without ai_answer_end".into());
    }
    Ok(started.elapsed().as_secs_f64())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let opts = options();
    if std::env::args().any(|a| a == "--serve-fake-llm") {
        serve_fake_llm(opts.secs);
        return;
    }
    if std::env::args().any(|a| a == "--bench") && !std::env::args().any(|a| a == "--streams") {
        // `cargo bench` without arguments: say how to run it rather than open 10,000 streams.
        eprintln!("streams: run with --streams N [--http1] [--secs S]");
        return;
    }
    raise_descriptor_limit();
    let Some((_fake, llm)) = start_fake_llm(opts.secs) else {
        eprintln!("streams: the fake LLM did not start");
        return;
    };
    let Some((triage, addr, dir)) = start_triage(llm) else {
        eprintln!("streams: triage did not start");
        return;
    };
    let pid = triage.0.id();
    let Ok(rt) = tokio::runtime::Runtime::new() else {
        return;
    };
    rt.block_on(async {
        if !wait_ready(addr).await {
            eprintln!("streams: triage never became ready");
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss_before = rss_kib(pid);
        let body = Bytes::from_static(br#"{"ask": "why is the pod crashing?", "stream": true, "model": "slow"}"#);
        let peak = Arc::new(AtomicU64::new(rss_before));
        let sampler = {
            let peak = peak.clone();
            tokio::spawn(async move {
                loop {
                    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        };
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(opts.streams);
        let mut h2 = None;
        for i in 0..opts.streams {
            if !opts.http1 && i % STREAMS_PER_H2_CONNECTION == 0 {
                h2 = h2_connection(addr).await.ok();
            }
            tasks.push(tokio::spawn(one_stream(
                addr,
                if opts.http1 { None } else { h2.clone() },
                body.clone(),
            )));
        }
        let mut ends = Vec::new();
        let mut errors = Vec::new();
        for task in tasks {
            match task.await {
                Ok(Ok(secs)) => ends.push(secs),
                Ok(Err(e)) => errors.push(e),
                Err(e) => errors.push(e.to_string()),
            }
        }
        let wall = started.elapsed().as_secs_f64();
        sampler.abort();
        let load = load_average();
        // Idle pooled LLM connections close after 4 s; the server trims its heap once idle.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let rss_after = rss_kib(pid);
        tokio::time::sleep(Duration::from_secs(10)).await;
        let rss_later = rss_kib(pid);
        let rss_peak = peak.load(Ordering::Relaxed);
        ends.sort_by(f64::total_cmp);
        let per_stream = (rss_peak.saturating_sub(rss_before)) as f64 / opts.streams as f64;
        println!(
            "| {} | {} | {} | {:.1} / {:.1} / {:.1} / {:.1} s | {:.1} / {:.1} / {:.1} / {:.1} MiB | {per_stream:.1} KiB | {wall:.1} s | {load} |",
            opts.streams,
            if opts.http1 { "HTTP/1.1 both ways" } else { "h2c client, HTTP/1.1 to the LLM" },
            errors.len(),
            percentile(&ends, 0.0),
            percentile(&ends, 0.5),
            percentile(&ends, 0.99),
            percentile(&ends, 1.0),
            rss_before as f64 / 1024.0,
            rss_peak as f64 / 1024.0,
            rss_after as f64 / 1024.0,
            rss_later as f64 / 1024.0,
        );
        if let Some(first) = errors.first() {
            println!("first error: {first}");
        }
    });
    drop(triage);
    let _ = std::fs::remove_dir_all(dir);
}
