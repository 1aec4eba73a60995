//! Soak: `SOAK_SECS` (default 120) of mixed traffic at concurrency 64 against the in-process
//! server and the fake LLM (auto-replying): streams, JSON answers, approval and frontend-tool
//! resumes, clients that disconnect mid-stream, and bad requests. Asserts that every response
//! is a well-formed answer, a well-formed `error` event or the expected 4xx; that the process's
//! memory comes back to its post-warm-up level; and that no stream stays counted as open.
//!
//! Ignored in the normal run; `.ci/run` runs it as `cargo test --test e2e soak -- --ignored`.
//! Loopback only, bounded in time (and so in count).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{Event, TestApp, spawn_app};
use fake_llm::Step;

const CONCURRENCY: usize = 64;
/// A request longer than this is an error (the fake LLM answers at once, or in ~1 s when slow).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const RSS_TOLERANCE: f64 = 0.10;

#[derive(Default)]
struct Counts {
    requests: AtomicUsize,
    answers: AtomicUsize,
    pauses: AtomicUsize,
    error_events: AtomicUsize,
    refusals: AtomicUsize,
    disconnects: AtomicUsize,
}

struct Load {
    app: TestApp,
    dir: std::path::PathBuf,
    counts: Counts,
    unexpected: Mutex<Vec<String>>,
}

impl Load {
    fn unexpected(&self, what: String) {
        let mut u = self.unexpected.lock().unwrap();
        if u.len() < 1000 {
            u.push(what);
        }
    }
}

/// What the fake LLM answers: a tool result is followed by the answer; otherwise the ask's
/// marker picks a tool call, a slow stream, or a plain answer.
fn responder(dir: &Path) -> impl Fn(&Value) -> Step + Send + Sync + 'static {
    let command = format!("touch {}/approved", dir.display());
    let ids = AtomicUsize::new(0);
    move |body| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        if last["role"] == "tool" {
            return Step::text("Done: the results are in.");
        }
        let ask = last["content"].as_str().unwrap_or_default();
        let id = format!("call_{}", ids.fetch_add(1, Ordering::Relaxed));
        if ask.contains("[approve]") {
            Step::tool(&id, "bash", json!({"command": command}))
        } else if ask.contains("[frontend]") {
            Step::tool(&id, "show_chart", json!({"metric": "cpu"}))
        } else if ask.contains("[slow]") {
            Step::Slow {
                content: "a slow answer that the client will not wait for".into(),
                chunks: 20,
                interval: Duration::from_millis(50),
            }
        } else {
            Step::text("All good: nothing is failing.")
        }
    }
}

/// xorshift64*: a cheap per-worker random source.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

async fn read_all(resp: reqwest::Response) -> Result<Vec<Event>, String> {
    let mut stream = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await {
        let ev = ev.map_err(|e| format!("SSE: {e}"))?;
        let data = serde_json::from_str(&ev.data)
            .map_err(|e| format!("event {} data is not JSON ({e})", ev.event))?;
        out.push(Event {
            name: ev.event,
            data,
        });
    }
    Ok(out)
}

async fn post(load: &Load, body: String) -> Result<reqwest::Response, String> {
    load.counts.requests.fetch_add(1, Ordering::Relaxed);
    load.app
        .client
        .post(load.app.url("/api/chat"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("request failed: {e}"))
}

/// A stream that must end with `expected` (and no other terminal event).
async fn stream(load: &Load, body: Value, expected: &str) -> Result<Vec<Event>, String> {
    let resp = post(load, body.to_string()).await?;
    if resp.status() != 200 {
        return Err(format!("stream answered {}", resp.status()));
    }
    let events = read_all(resp).await?;
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    let terminal = ["ai_answer_end", "approval_required", "error"];
    let terminals = names.iter().filter(|n| terminal.contains(n)).count();
    if names.last() != Some(&expected) || terminals != 1 {
        return Err(format!(
            "expected a stream ending in {expected}, got {names:?}"
        ));
    }
    let end = events.last().unwrap();
    match expected {
        "ai_answer_end" if !end.data["analysis"].is_string() => {
            return Err(format!("malformed answer: {}", end.data));
        }
        "error" if !end.data["description"].is_string() => {
            return Err(format!("malformed error event: {}", end.data));
        }
        _ => {}
    }
    Ok(events)
}

async fn refused(load: &Load, body: String, expected: u16) -> Result<(), String> {
    let resp = post(load, body.clone()).await?;
    let status = resp.status().as_u16();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    let detail_ok = serde_json::from_str::<Value>(&text).is_ok_and(|v| !v["detail"].is_null());
    if status != expected || !detail_ok {
        return Err(format!(
            "{body}: expected {expected} with a detail, got {status} {text}"
        ));
    }
    load.counts.refusals.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

async fn one(load: &Load, rng: &mut Rng) -> Result<(), String> {
    let counts = &load.counts;
    match rng.below(100) {
        // A streamed answer, sometimes a follow-up.
        0..=24 => {
            let history = if rng.below(2) == 0 {
                json!([{"role": "user", "content": "is it up?"}, {"role": "assistant", "content": "yes"}])
            } else {
                json!([])
            };
            stream(
                load,
                json!({"ask": "why is it slow?", "stream": true, "conversation_history": history}),
                "ai_answer_end",
            )
            .await?;
            counts.answers.fetch_add(1, Ordering::Relaxed);
        }
        // One JSON answer.
        25..=44 => {
            let resp = post(load, json!({"ask": "what failed?"}).to_string()).await?;
            let status = resp.status();
            let body = json_value(resp).await?;
            if status != 200 || !body["analysis"].is_string() {
                return Err(format!("JSON answer: {status} {body}"));
            }
            counts.answers.fetch_add(1, Ordering::Relaxed);
        }
        // Pause for approval, then resume with a decision.
        45..=59 => {
            let events = stream(
                load,
                json!({"ask": "[approve] clean up", "stream": true, "enable_tool_approval": true}),
                "approval_required",
            )
            .await?;
            counts.pauses.fetch_add(1, Ordering::Relaxed);
            let paused = &events.last().unwrap().data;
            let id = paused["pending_approvals"][0]["tool_call_id"].clone();
            let approved = rng.below(2) == 0;
            let events = stream(
                load,
                json!({"ask": "", "stream": true, "enable_tool_approval": true,
                    "conversation_history": paused["conversation_history"],
                    "tool_decisions": [{"tool_call_id": id, "approved": approved}]}),
                "ai_answer_end",
            )
            .await?;
            let status = &events[0].data["result"]["status"];
            if (approved && status == "error") || (!approved && status != "error") {
                return Err(format!("approved={approved} gave {}", events[0].data));
            }
            counts.answers.fetch_add(1, Ordering::Relaxed);
        }
        // Pause for a frontend tool, then resume with its result.
        60..=69 => {
            let tools =
                json!([{"name": "show_chart", "description": "Draw a chart", "mode": "pause"}]);
            let events = stream(
                load,
                json!({"ask": "[frontend] chart cpu", "stream": true, "frontend_tools": tools}),
                "approval_required",
            )
            .await?;
            counts.pauses.fetch_add(1, Ordering::Relaxed);
            let paused = &events.last().unwrap().data;
            let id = paused["pending_frontend_tool_calls"][0]["tool_call_id"].clone();
            stream(
                load,
                json!({"ask": "", "stream": true, "frontend_tools": tools,
                    "conversation_history": paused["conversation_history"],
                    "frontend_tool_results": [{"tool_call_id": id, "tool_name": "show_chart", "result": "drawn"}]}),
                "ai_answer_end",
            )
            .await?;
            counts.answers.fetch_add(1, Ordering::Relaxed);
        }
        // A client that goes away: right after the headers, or after the first bytes.
        70..=81 => {
            let resp = post(
                load,
                json!({"ask": "[slow] tell me", "stream": true}).to_string(),
            )
            .await?;
            if resp.status() != 200 {
                return Err(format!("slow stream answered {}", resp.status()));
            }
            if rng.below(2) == 0 {
                let mut bytes = resp.bytes_stream();
                let _ = bytes.next().await;
            }
            counts.disconnects.fetch_add(1, Ordering::Relaxed);
        }
        // A resume with nothing to resume: an `error` event in a stream.
        82..=85 => {
            stream(
                load,
                json!({"ask": "", "stream": true,
                    "conversation_history": [{"role": "user", "content": "hi"}],
                    "tool_decisions": [{"tool_call_id": "nobody", "approved": true}]}),
                "error",
            )
            .await?;
            counts.error_events.fetch_add(1, Ordering::Relaxed);
        }
        // Bad requests.
        _ => {
            let (body, status) = match rng.below(5) {
                0 => ("{\"ask\": ".to_owned(), 400),
                1 => (json!({"ask": 3}).to_string(), 422),
                2 => (json!({"ask": " "}).to_string(), 400),
                3 => (json!({"ask": "q", "model": "nope"}).to_string(), 400),
                _ => (
                    json!({"ask": "", "conversation_history": [{"role": "user", "content": "hi"}],
                        "tool_decisions": [{"tool_call_id": "nobody", "approved": true}]})
                    .to_string(),
                    400,
                ),
            };
            refused(load, body, status).await?;
        }
    }
    Ok(())
}

async fn json_value(resp: reqwest::Response) -> Result<Value, String> {
    let bytes = resp.bytes().await.map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))
}

/// `CONCURRENCY` clients sending the mix until `until`.
async fn drive(load: &Arc<Load>, until: Instant) {
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|w| {
            let load = load.clone();
            tokio::spawn(async move {
                let mut rng =
                    Rng(0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
                while Instant::now() < until {
                    match tokio::time::timeout(REQUEST_TIMEOUT, one(&load, &mut rng)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => load.unexpected(e),
                        Err(_) => load.unexpected("a request timed out".into()),
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker panicked");
    }
}

/// Anonymous resident memory of this process (server, fake LLM and clients all live in it),
/// in KiB: heap and stacks, where a leak grows. Not the binary's code pages, which the server
/// hands back when a burst ends and which come back as code runs again.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("RssAnon")
}

/// RSS after giving freed memory back to the OS: glibc keeps freed blocks in its arenas, so
/// without the trim RSS measures the allocator's high-water mark rather than live memory.
fn settled_rss_kib() -> u64 {
    // SAFETY: malloc_trim only releases free memory; it is safe to call at any time.
    unsafe {
        libc::malloc_trim(0);
    }
    rss_kib()
}

async fn active_streams(app: &TestApp) -> f64 {
    let text = app.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix("triage_sse_streams_active "))
        .map_or(0.0, |v| v.trim().parse().expect("gauge value"))
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "two minutes of load: run with `cargo test --test e2e soak -- --ignored`"]
async fn soak_mixed_traffic() {
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let app = spawn_app().await;
    let dir = crate::helpers::tool_writable_dir("soak");
    app.llm.set_responder(responder(&dir));
    // Keeping every request body would grow the process by itself.
    app.llm.keep_requests(false);
    let load = Arc::new(Load {
        app,
        dir,
        counts: Counts::default(),
        unexpected: Mutex::new(Vec::new()),
    });

    // Memory method: warm up with the same mix and concurrency, so that everything that grows
    // once and is then reused (allocator arenas, connection pools, runtime threads, caches) is
    // grown; then take the baseline. After the load, wait for the streams to close, trim the
    // allocator and compare: growth beyond the tolerance over minutes of load is a leak.
    let warm_up = Duration::from_secs((secs / 6).clamp(3, 20));
    drive(&load, Instant::now() + warm_up).await;
    // A measurement's settle, not a wait for a condition: the warm-up's tails finish dropping.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = settled_rss_kib();
    let warm_requests = load.counts.requests.load(Ordering::Relaxed);

    let started = Instant::now();
    drive(&load, started + Duration::from_secs(secs)).await;
    let elapsed = started.elapsed();

    // Every stream ends, including those whose client went away.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut open = active_streams(&load.app).await;
    while open != 0.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        open = active_streams(&load.app).await;
    }
    // Memory: allow a short settle (tasks of cancelled requests finish dropping).
    let limit = (baseline as f64 * (1.0 + RSS_TOLERANCE)) as u64;
    let mut after = settled_rss_kib();
    for _ in 0..20 {
        if after <= limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        after = settled_rss_kib();
    }

    let c = &load.counts;
    let total = c.requests.load(Ordering::Relaxed) - warm_requests;
    let unexpected = load.unexpected.lock().unwrap().clone();
    eprintln!(
        "soak: {secs} s at concurrency {CONCURRENCY}: {total} requests ({:.0}/s) after a {} s warm-up; \
         answers {}, pauses {}, error events {}, refusals {}, disconnects {} (counts include the warm-up); \
         unexpected {}; RSS {} KiB after warm-up, {} KiB after the load ({:+.1}%); streams open {open}",
        total as f64 / elapsed.as_secs_f64(),
        warm_up.as_secs(),
        c.answers.load(Ordering::Relaxed),
        c.pauses.load(Ordering::Relaxed),
        c.error_events.load(Ordering::Relaxed),
        c.refusals.load(Ordering::Relaxed),
        c.disconnects.load(Ordering::Relaxed),
        unexpected.len(),
        baseline,
        after,
        (after as f64 / baseline as f64 - 1.0) * 100.0,
    );
    let _ = std::fs::remove_dir_all(&load.dir);
    assert!(
        unexpected.is_empty(),
        "{} unexpected outcomes, first ones:\n{}",
        unexpected.len(),
        unexpected[..unexpected.len().min(10)].join("\n")
    );
    assert!(total > 0);
    assert_eq!(open, 0.0, "triage_sse_streams_active did not return to 0");
    assert!(
        after <= limit,
        "RSS grew from {baseline} KiB to {after} KiB (more than {:.0}%)",
        RSS_TOLERANCE * 100.0
    );
}
