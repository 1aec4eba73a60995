//! Capacity benchmark (issue 18): N concurrent SSE streams through the real `triage` binary on
//! its default limits, against a fake LLM that answers each call in ~30 s (one delta a second),
//! every stream read to its end. Processes, each with its own descriptors: this one (the load
//! generator), a copy of it serving the fake LLM (`--serve-fake-llm`, or `--serve-tls-llm`),
//! and `triage serve`.
//!
//! `cargo bench --bench streams -- [--streams N] [--http1] [--llm-tls [--llm-stream-limit M]]
//! [--secs S]`: the client speaks h2c to triage (about 100 streams a connection) and triage
//! reaches the LLM over plain HTTP/1.1. `--http1`: HTTP/1.1 from the client too, one connection
//! a stream, so each stream holds two descriptors in triage. `--llm-tls`: triage reaches the
//! LLM over TLS, as it reaches a hosted provider: a small TLS server with a self-signed
//! certificate that triage trusts through `SSL_CERT_FILE`, offering h2 and HTTP/1.1 by ALPN
//! (triage takes HTTP/1.1), answers in the same drip; `--llm-stream-limit M` lets it allow M
//! HTTP/2 streams a connection, as hosted front ends do (to time an HTTP/2 client against it).
//! Reports errors, the end-time distribution, and triage's RSS before, at its peak, 5 s and
//! 15 s after, per stream; plus the machine's load.

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
    /// TLS to the LLM (a TLS server offering h2 and HTTP/1.1, answering the same drip).
    llm_tls: bool,
    /// The TLS LLM's HTTP/2 streams per connection (hosted front ends allow 100–256);
    /// unlimited when absent.
    llm_stream_limit: Option<u32>,
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
        llm_tls: args.iter().any(|a| a == "--llm-tls"),
        llm_stream_limit: value("--llm-stream-limit")
            .map(|n: usize| n.min(u32::MAX as usize) as u32),
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

/// The HTTP/2-over-TLS LLM's process: serves until its parent closes stdin.
fn serve_tls_llm(secs: u64, dir: PathBuf, stream_limit: Option<u32>) {
    raise_descriptor_limit();
    let Ok(rt) = tokio::runtime::Runtime::new() else {
        return;
    };
    rt.block_on(async {
        let addr = match tls_llm(secs, &dir, stream_limit).await {
            Ok(addr) => addr,
            Err(e) => {
                eprintln!("streams: the TLS LLM did not start: {e}");
                return;
            }
        };
        println!("{addr}");
        let _ = std::io::stdout().flush();
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
        })
        .await;
    });
}

/// A self-signed certificate for `localhost` (openssl), in `dir`: `llm.crt`, `llm.key`.
fn make_certificate(dir: &std::path::Path) -> Result<PathBuf, String> {
    let (cert, key) = (dir.join("llm.crt"), dir.join("llm.key"));
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost"])
        // A server certificate, not a CA: its own trust anchor.
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("openssl: {e}"))?;
    status
        .success()
        .then_some(cert)
        .ok_or_else(|| "openssl could not make a certificate".to_owned())
}

/// An LLM over TLS, ALPN h2 (at most `stream_limit` streams a connection) or HTTP/1.1,
/// answering every call with `drip_response`.
async fn tls_llm(
    secs: u64,
    dir: &std::path::Path,
    stream_limit: Option<u32>,
) -> Result<SocketAddr, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(dir.join("llm.crt"))
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .map_err(|e| e.to_string())?;
    let key = PrivateKeyDer::from_pem_file(dir.join("llm.key")).map_err(|e| e.to_string())?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut builder =
                    hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                builder
                    .http2()
                    .max_concurrent_streams(stream_limit.unwrap_or(u32::MAX));
                let service = hyper::service::service_fn(
                    move |req: Request<hyper::body::Incoming>| async move {
                        use http_body_util::BodyExt as _;
                        let _ = req.into_body().collect().await;
                        Ok::<_, String>(drip_response(secs))
                    },
                );
                if let Err(e) = builder.serve_connection(TokioIo::new(tls), service).await {
                    eprintln!("streams: TLS LLM connection: {e:?}");
                }
            });
        }
    });
    Ok(addr)
}

type DripBody = http_body_util::combinators::BoxBody<Bytes, String>;

/// An OpenAI streaming answer made here: a delta a second for `secs` seconds.
fn drip_response(secs: u64) -> hyper::Response<DripBody> {
    use http_body_util::BodyExt as _;
    let chunks = futures::stream::unfold(0u64, move |i| async move {
        if i > secs + 1 {
            return None;
        }
        if i > 0 && i <= secs {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let data = if i < secs {
            r#"{"id":"c","object":"chat.completion.chunk","created":0,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"word "},"finish_reason":null}]}"#.to_owned()
        } else if i == secs {
            r#"{"id":"c","object":"chat.completion.chunk","created":0,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}"#.to_owned()
        } else {
            "[DONE]".to_owned()
        };
        let frame = hyper::body::Frame::data(Bytes::from(format!("data: {data}\n\n")));
        Some((Ok::<_, String>(frame), i + 1))
    });
    hyper::Response::builder()
        .header("content-type", "text/event-stream")
        .body(http_body_util::StreamBody::new(chunks).boxed())
        .unwrap_or_default()
}

fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The anonymous part of the resident set (heap, stacks): what streams allocate, without the
/// binary's code pages that serving maps back in after start-up handed them back.
fn anon_kib(pid: u32) -> u64 {
    status_kib(pid, "RssAnon:")
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
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

/// A copy of this program in another mode (`args`), and the address it prints.
fn start_helper(args: &[&std::ffi::OsStr]) -> Option<(Process, SocketAddr)> {
    let mut child = std::process::Command::new(std::env::current_exe().ok()?)
        .args(args)
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

fn start_triage(
    llm: SocketAddr,
    dir: &std::path::Path,
    llm_certificate: Option<&std::path::Path>,
) -> Option<(Process, SocketAddr)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let config = dir.join("triage.toml");
    let api_base = match llm_certificate {
        Some(_) => format!("https://localhost:{}/v1", llm.port()),
        None => format!("http://{llm}/v1"),
    };
    // The default limits: nothing here about concurrency.
    std::fs::write(
        &config,
        format!(
            "[server]\nhost = \"127.0.0.1\"\nport = {port}\n\
             [toolsets.kubernetes]\nenabled = false\n[toolsets.prometheus]\nenabled = false\n\
             [conversations]\ndata_dir = \"{}\"\n\
             [models.slow]\nmodel = \"openai/gpt-4.1\"\napi_base = \"{api_base}\"\n",
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
    if let Some(certificate) = llm_certificate {
        command.env("SSL_CERT_FILE", certificate);
    }
    let child = command
        .arg("serve")
        .env("TRIAGE_CONFIG", &config)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .ok()?;
    Some((Process(child), ([127, 0, 0, 1], port).into()))
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
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    if args.iter().any(|a| a == "--serve-fake-llm") {
        serve_fake_llm(opts.secs);
        return;
    }
    if let Some(dir) = arg("--serve-tls-llm") {
        serve_tls_llm(opts.secs as u64, PathBuf::from(dir), opts.llm_stream_limit);
        return;
    }
    if std::env::args().any(|a| a == "--bench") && !std::env::args().any(|a| a == "--streams") {
        // `cargo bench` without arguments: say how to run it rather than open 10,000 streams.
        eprintln!("streams: run with --streams N [--http1] [--secs S]");
        return;
    }
    raise_descriptor_limit();
    let dir = std::env::temp_dir().join(format!("triage-bench-streams-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("streams: {e}");
        return;
    }
    let certificate = match !opts.llm_tls {
        true => None,
        false => match make_certificate(&dir) {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("streams: {e}");
                return;
            }
        },
    };
    let secs = opts.secs.to_string();
    let stream_limit = opts.llm_stream_limit.map(|n| n.to_string());
    let serve: Vec<&std::ffi::OsStr> = match &certificate {
        Some(_) => {
            let mut args: Vec<&std::ffi::OsStr> = vec![
                "--serve-tls-llm".as_ref(),
                dir.as_os_str(),
                "--secs".as_ref(),
                secs.as_ref(),
            ];
            if let Some(limit) = &stream_limit {
                args.push("--llm-stream-limit".as_ref());
                args.push(limit.as_ref());
            }
            args
        }
        None => vec![
            "--serve-fake-llm".as_ref(),
            "--secs".as_ref(),
            secs.as_ref(),
        ],
    };
    let Some((_llm, llm)) = start_helper(&serve) else {
        eprintln!("streams: the LLM did not start");
        return;
    };
    let Some((triage, addr)) = start_triage(llm, &dir, certificate.as_deref()) else {
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
        let anon_before = anon_kib(pid);
        let peak = Arc::new(AtomicU64::new(rss_before));
        let anon_peak = Arc::new(AtomicU64::new(anon_before));
        let sampler = {
            let (peak, anon_peak) = (peak.clone(), anon_peak.clone());
            tokio::spawn(async move {
                loop {
                    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                    anon_peak.fetch_max(anon_kib(pid), Ordering::Relaxed);
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
        let anon_per_stream = (anon_peak.load(Ordering::Relaxed).saturating_sub(anon_before))
            as f64
            / opts.streams as f64;
        println!(
            "| {} | {} | {} | {:.1} / {:.1} / {:.1} / {:.1} s | {:.1} / {:.1} / {:.1} / {:.1} MiB | {per_stream:.1} KiB | {anon_per_stream:.1} KiB | {wall:.1} s | {load} |",
            opts.streams,
            match (opts.http1, opts.llm_tls) {
                (true, false) => "HTTP/1.1 both ways",
                (true, true) => "HTTP/1.1 client, TLS to the LLM",
                (false, false) => "h2c client, HTTP/1.1 to the LLM",
                (false, true) => "h2c client, TLS to the LLM",
            },
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
