//! The `floor` phase: triage's release binary and the bare proxy (proxy.rs), each in its own
//! process, side by side on the same fake LLM and the same requests. For each kind of request,
//! at concurrency 1 and 64: CPU time per request of the server process (utime + stime from
//! /proc, so the load generator and the fake LLM are not counted), and latency. At
//! concurrency 1 each request is paired with a replay of its LLM calls sent straight to the
//! fake, as in the `latency` phase, and "added" is the difference.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};

use super::doors::{self, Door};
use super::{
    Child, Conn, FakeLlm, TempFile, ask, binary, chat_body, direct, free_port, micros, pct, sorted,
    spawn_binary, wait_ready,
};

struct Kind {
    label: &'static str,
    door: &'static Door,
    model: &'static str,
    stream: bool,
    llm_calls: u32,
    /// The `/api/chat` kind an adapter's kind is compared with (issue 37: an adapter adds at
    /// most 10 % CPU per request); `None` for `/api/chat`'s own kinds, measured against the
    /// bare proxy instead.
    baseline: Option<&'static str>,
}

const fn kind(
    label: &'static str,
    door: &'static Door,
    model: &'static str,
    stream: bool,
    llm_calls: u32,
    baseline: Option<&'static str>,
) -> Kind {
    Kind {
        label,
        door,
        model,
        stream,
        llm_calls,
        baseline,
    }
}

const KINDS: &[Kind] = &[
    kind("JSON", &doors::API_CHAT, "answer", false, 1, None),
    kind("SSE", &doors::API_CHAT, "answer", true, 1, None),
    kind("JSON, one tool", &doors::API_CHAT, "fast", false, 2, None),
    kind("SSE, one tool", &doors::API_CHAT, "fast", true, 2, None),
    kind("AG-UI", &doors::AGUI, "answer", true, 1, Some("SSE")),
    kind(
        "OpenAI chat JSON",
        &doors::CHAT_COMPLETIONS,
        "answer",
        false,
        1,
        Some("JSON"),
    ),
    kind(
        "OpenAI chat SSE",
        &doors::CHAT_COMPLETIONS,
        "answer",
        true,
        1,
        Some("SSE"),
    ),
    kind(
        "Responses JSON",
        &doors::RESPONSES,
        "answer",
        false,
        1,
        Some("JSON"),
    ),
    kind(
        "Responses SSE",
        &doors::RESPONSES,
        "answer",
        true,
        1,
        Some("SSE"),
    ),
    kind(
        "MCP investigate",
        &doors::MCP,
        "answer",
        false,
        1,
        Some("JSON"),
    ),
    // A server-side conversation on the default model (tool call, then the answer): against
    // /api/chat's one-tool kind, so the ratio includes what the conversation store costs.
    kind(
        "A2A SendMessage",
        &doors::A2A,
        "fast",
        false,
        2,
        Some("JSON, one tool"),
    ),
];

/// utime + stime of a process, in clock ticks.
fn proc_ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_default()
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse::<u64>().ok())
        .sum()
}

/// Context switches (voluntary and not) of all of a process's threads so far: each is a thread
/// parking or being preempted, what a runtime's wake-ups cost beyond the work itself. Threads
/// that exited are not counted; the servers here keep theirs.
fn proc_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

fn tick_ms() -> f64 {
    // SAFETY: sysconf has no preconditions.
    1000.0 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

struct Target {
    name: &'static str,
    addr: SocketAddr,
    pid: u32,
}

/// The bare proxy in its own process: this bench binary again, with `--serve-proxy`.
struct ProxyChild {
    child: std::process::Child,
    _template: TempFile,
}

impl Drop for ProxyChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn spawn_proxy(
    llm: SocketAddr,
    template: &Bytes,
) -> Result<(ProxyChild, SocketAddr), String> {
    let path = std::env::temp_dir().join(format!("triage-bench-proxy-{}.json", std::process::id()));
    std::fs::write(&path, template).map_err(|e| format!("template: {e}"))?;
    let template = TempFile(path.clone());
    let port = free_port();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = std::process::Command::new(exe)
        .args(["--serve-proxy", &port.to_string(), &llm.to_string()])
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn proxy: {e}"))?;
    let proxy = ProxyChild {
        child,
        _template: template,
    };
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_ready(addr, Duration::from_secs(10)).await?;
    Ok((proxy, addr))
}

/// The LLM request bodies triage sends for one request of this kind.
async fn capture(
    fake: &FakeLlm,
    triage: SocketAddr,
    door: &Door,
    body: &Bytes,
    stream: bool,
) -> Vec<Bytes> {
    let mut conn = Conn::open(triage).await.expect("connect triage");
    fake.keep_requests(true);
    let _ = fake.take_raw_requests();
    ask(&mut conn, door, body, stream)
        .await
        .unwrap_or_else(|e| panic!("capture request on {}: {e}", door.path));
    fake.keep_requests(false);
    fake.take_raw_requests()
}

fn under_callgrind(t: &Target) -> bool {
    t.name == "triage" && std::env::var("LOAD_BENCH_WRAP").is_ok_and(|w| w.contains("callgrind"))
}

/// Under callgrind (`LOAD_BENCH_WRAP`): `-z` zeroes triage's counters, `-d` dumps them.
fn callgrind(t: &Target, what: &str) {
    if under_callgrind(t) {
        let _ = std::process::Command::new("callgrind_control")
            .args([what, &t.pid.to_string()])
            .stdout(std::process::Stdio::null())
            .status();
    }
}

/// Concurrency 1 for `window`: each request paired with a direct replay of its LLM calls.
async fn paired(
    t: &Target,
    fake: SocketAddr,
    door: &Door,
    body: &Bytes,
    stream: bool,
    llm: &[Bytes],
    window: Duration,
) -> Value {
    let mut conn = Conn::open(t.addr).await.expect("connect");
    let mut fake_conn = Conn::open(fake).await.expect("connect fake");
    for _ in 0..100 {
        let _ = ask(&mut conn, door, body, stream).await;
        let _ = direct(&mut fake_conn, llm).await;
    }
    let (mut through, mut added, mut errors) = (Vec::new(), Vec::new(), 0u64);
    callgrind(t, "-i=on");
    callgrind(t, "-z");
    let ticks = proc_ticks(t.pid);
    let t0 = Instant::now();
    let mut i = 0;
    // Under callgrind a request takes ~50× longer: a count, not the window, bounds the run.
    let min_requests = if under_callgrind(t) { 100 } else { 0 };
    while t0.elapsed() < window || (through.len() < min_requests && errors < 10) {
        i += 1;
        let (r, d) = if i % 2 == 0 {
            let r = ask(&mut conn, door, body, stream).await;
            (r, direct(&mut fake_conn, llm).await)
        } else {
            let d = direct(&mut fake_conn, llm).await;
            (ask(&mut conn, door, body, stream).await, d)
        };
        match (r, d) {
            (Ok(r), Ok(d)) => {
                through.push(micros(r.total));
                added.push(micros(r.total) - micros(d));
            }
            _ => errors += 1,
        }
    }
    let cpu_ms = (proc_ticks(t.pid) - ticks) as f64 * tick_ms();
    callgrind(t, "-d");
    callgrind(t, "-i=off");
    let n = through.len();
    let (through, added) = (sorted(through), sorted(added));
    json!({
        "requests": n, "errors": errors,
        "cpu_ms_per_request": cpu_ms / n.max(1) as f64,
        "p50_us": pct(&through, 50.0), "p99_us": pct(&through, 99.0),
        "added_p50_us": pct(&added, 50.0), "added_p99_us": pct(&added, 99.0),
    })
}

/// `concurrency` keep-alive connections for `window` after a short warm-up.
async fn concurrent(
    t: &Target,
    door: &'static Door,
    body: &Bytes,
    stream: bool,
    concurrency: usize,
    window: Duration,
) -> Value {
    let start = Instant::now() + Duration::from_millis(500);
    let end = start + window;
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (addr, body) = (t.addr, body.clone());
            tokio::spawn(async move {
                let (mut lat, mut errors) = (Vec::new(), 0u64);
                let Ok(mut conn) = Conn::open(addr).await else {
                    return (lat, 1);
                };
                loop {
                    let t0 = Instant::now();
                    if t0 >= end {
                        break;
                    }
                    let r = ask(&mut conn, door, &body, stream).await;
                    let counted = t0 >= start && Instant::now() <= end;
                    match r {
                        Ok(r) if counted => lat.push(micros(r.total)),
                        Ok(_) => {}
                        Err(_) => {
                            errors += u64::from(counted);
                            match Conn::open(addr).await {
                                Ok(c) => conn = c,
                                Err(_) => break,
                            }
                        }
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    tokio::time::sleep_until(start.into()).await;
    let (ticks, switches) = (proc_ticks(t.pid), proc_switches(t.pid));
    tokio::time::sleep_until(end.into()).await;
    let cpu_ms = (proc_ticks(t.pid) - ticks) as f64 * tick_ms();
    let switches = proc_switches(t.pid).saturating_sub(switches);
    let (mut lat, mut errors) = (Vec::new(), 0);
    for w in workers {
        if let Ok((l, e)) = w.await {
            lat.extend(l);
            errors += e;
        }
    }
    let n = lat.len();
    let lat = sorted(lat);
    json!({
        "requests": n, "errors": errors,
        "req_per_s": n as f64 / window.as_secs_f64(),
        "cpu_ms_per_request": cpu_ms / n.max(1) as f64,
        "switches_per_request": switches as f64 / n.max(1) as f64,
        "p50_us": pct(&lat, 50.0), "p99_us": pct(&lat, 99.0),
    })
}

/// triage's figure over the proxy's.
fn ratio(row: &Value, concurrency: &str, key: &str) -> f64 {
    let get = |t: &str| row[t][concurrency][key].as_f64().unwrap_or(f64::NAN);
    get("triage") / get("proxy")
}

/// A kind's name in `LOAD_BENCH_FLOOR_KINDS`: its label in lower case, `, ` and spaces as `-`.
fn slug(label: &str) -> String {
    label.to_lowercase().replace(", ", "-").replace(' ', "-")
}

/// `LOAD_BENCH_FLOOR_KINDS=JSON,SSE`: only these kinds (e.g. under a profiler), by label or
/// slug (`json-one-tool`, `sse-one-tool`: those labels have a comma), in any case. `None`
/// when unset. A name that is no kind is an error.
pub fn chosen_kinds() -> Result<Option<Vec<String>>, String> {
    let Ok(only) = std::env::var("LOAD_BENCH_FLOOR_KINDS") else {
        return Ok(None);
    };
    let slugs: Vec<String> = KINDS.iter().map(|k| slug(k.label)).collect();
    only.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            let name = slug(name);
            if slugs.contains(&name) {
                Ok(name)
            } else {
                Err(format!(
                    "LOAD_BENCH_FLOOR_KINDS: no kind {name:?}; the kinds: {}",
                    slugs.join(", ")
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()
        // Set but naming nothing (`LOAD_BENCH_FLOOR_KINDS=`): every kind, as when unset.
        .map(|names| (!names.is_empty()).then_some(names))
}

/// `kinds`: the slugs `chosen_kinds` gave, `None` for every kind.
pub async fn floor(fake: &FakeLlm, quick: bool, kinds: Option<&[String]>) -> Value {
    let Some(bin) = binary() else {
        return json!({"error": "release binary not found"});
    };
    let (triage, _) = match spawn_binary(&bin, fake.addr(), 300).await {
        Ok(t) => t,
        Err(e) => return json!({"error": format!("triage: {e}")}),
    };
    let triage: Child = triage;
    let answer_body = chat_body(false, "answer");
    let template = capture(fake, triage.addr, &doors::API_CHAT, &answer_body, false).await;
    let (proxy, proxy_addr) = match spawn_proxy(fake.addr(), &template[0]).await {
        Ok(p) => p,
        Err(e) => return json!({"error": format!("proxy: {e}")}),
    };
    let targets = [
        Target {
            name: "triage",
            addr: triage.addr,
            pid: triage.pid(),
        },
        Target {
            name: "proxy",
            addr: proxy_addr,
            pid: proxy.child.id(),
        },
    ];
    let (c1, c64) = if quick {
        (Duration::from_millis(1500), Duration::from_millis(1500))
    } else {
        (Duration::from_secs(4), Duration::from_secs(3))
    };
    let load_before = loadavg();
    let mut rows = Vec::new();
    let wanted = |label: &str| kinds.is_none_or(|k| k.contains(&slug(label)));
    for k in KINDS.iter().filter(|k| wanted(k.label)) {
        let (label, stream, llm_calls) = (k.label, k.stream, k.llm_calls);
        let body = k.door.body(k.model, stream);
        let llm = capture(fake, triage.addr, k.door, &body, stream).await;
        let mut row = json!({"kind": label, "path": k.door.path, "llm_calls": llm_calls, "llm_request_bytes": llm.iter().map(Bytes::len).collect::<Vec<_>>()});
        // The proxy relays /api/chat's answer only: an adapter's kind is triage alone.
        let measured = if k.baseline.is_none() {
            &targets[..]
        } else {
            &targets[..1]
        };
        for t in measured {
            eprintln!("[load] floor: {label}, {} at concurrency 1…", t.name);
            row[t.name]["c1"] = paired(t, fake.addr(), k.door, &body, stream, &llm, c1).await;
        }
        for t in measured {
            eprintln!("[load] floor: {label}, {} at concurrency 64…", t.name);
            row[t.name]["c64"] = concurrent(t, k.door, &body, stream, 64, c64).await;
        }
        if let Some(baseline) = k.baseline {
            row["baseline"] = json!(baseline);
            // Filtered out by LOAD_BENCH_FLOOR_KINDS: no ratio.
            if let Some(base) = rows.iter().find(|r: &&Value| r["kind"] == baseline) {
                for c in ["c1", "c64"] {
                    let get = |r: &Value| {
                        r["triage"][c]["cpu_ms_per_request"]
                            .as_f64()
                            .unwrap_or(f64::NAN)
                    };
                    row[format!("cpu_vs_api_chat_{c}")] = json!(get(&row) / get(base));
                }
            }
        } else {
            row["cpu_ratio_c1"] = json!(ratio(&row, "c1", "cpu_ms_per_request"));
            row["cpu_ratio_c64"] = json!(ratio(&row, "c64", "cpu_ms_per_request"));
            row["added_ratio_c1"] = json!(ratio(&row, "c1", "added_p50_us"));
            row["p50_ratio_c64"] = json!(ratio(&row, "c64", "p50_us"));
        }
        row["triage_added_per_iteration_p50_us"] = json!(
            row["triage"]["c1"]["added_p50_us"]
                .as_f64()
                .unwrap_or(f64::NAN)
                / f64::from(llm_calls)
        );
        rows.push(row);
    }
    drop(proxy);
    json!({"loadavg_before": load_before, "loadavg_after": loadavg(), "rows": rows})
}

pub fn print(r: &Value) {
    if let Some(e) = r["error"].as_str() {
        println!("\n## Floor: {e}");
        return;
    }
    println!();
    println!(
        "## The floor: triage against a bare proxy (own processes; load avg {} → {})",
        r["loadavg_before"].as_str().unwrap_or(""),
        r["loadavg_after"].as_str().unwrap_or("")
    );
    println!(
        "| kind | c | triage CPU ms/req | proxy CPU ms/req | CPU × | triage added p50 µs | proxy added p50 µs | added × | triage added/iter p50 µs | triage p50 µs | proxy p50 µs | triage req/s | proxy req/s | errors | switches/req triage / proxy |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let f = super::f;
    let rows = r["rows"].as_array().map(Vec::as_slice).unwrap_or_default();
    let (adapters, api_chat): (Vec<&Value>, Vec<&Value>) =
        rows.iter().partition(|row| row["baseline"].is_string());
    for row in api_chat {
        let (t, p) = (&row["triage"], &row["proxy"]);
        println!(
            "| {} | 1 | {} | {} | {} | {} | {} | {} | {} | {} | {} | | | {} | |",
            row["kind"].as_str().unwrap_or(""),
            f(&t["c1"]["cpu_ms_per_request"]),
            f(&p["c1"]["cpu_ms_per_request"]),
            f(&row["cpu_ratio_c1"]),
            f(&t["c1"]["added_p50_us"]),
            f(&p["c1"]["added_p50_us"]),
            f(&row["added_ratio_c1"]),
            f(&row["triage_added_per_iteration_p50_us"]),
            f(&t["c1"]["p50_us"]),
            f(&p["c1"]["p50_us"]),
            t["c1"]["errors"].as_u64().unwrap_or(0) + p["c1"]["errors"].as_u64().unwrap_or(0),
        );
        println!(
            "| {} | 64 | {} | {} | {} | | | | | {} | {} | {} | {} | {} | {} / {} |",
            row["kind"].as_str().unwrap_or(""),
            f(&t["c64"]["cpu_ms_per_request"]),
            f(&p["c64"]["cpu_ms_per_request"]),
            f(&row["cpu_ratio_c64"]),
            f(&t["c64"]["p50_us"]),
            f(&p["c64"]["p50_us"]),
            f(&t["c64"]["req_per_s"]),
            f(&p["c64"]["req_per_s"]),
            t["c64"]["errors"].as_u64().unwrap_or(0) + p["c64"]["errors"].as_u64().unwrap_or(0),
            f(&t["c64"]["switches_per_request"]),
            f(&p["c64"]["switches_per_request"]),
        );
    }
    if adapters.is_empty() {
        return;
    }
    println!();
    println!("## The adapters: triage's CPU per request against /api/chat's (same run)");
    println!(
        "| kind | path | against | c | CPU ms/req | × /api/chat | added p50 µs | p50 µs | req/s | errors |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for row in adapters {
        let t = &row["triage"];
        for c in ["c1", "c64"] {
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                row["kind"].as_str().unwrap_or(""),
                row["path"].as_str().unwrap_or(""),
                row["baseline"].as_str().unwrap_or(""),
                &c[1..],
                f(&t[c]["cpu_ms_per_request"]),
                f(&row[format!("cpu_vs_api_chat_{c}")]),
                f(&t[c]["added_p50_us"]),
                f(&t[c]["p50_us"]),
                f(&t[c]["req_per_s"]),
                t[c]["errors"].as_u64().unwrap_or(0),
            );
        }
    }
}
