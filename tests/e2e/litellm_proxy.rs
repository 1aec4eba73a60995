//! triage through a real LiteLLM proxy (PyPI `litellm[proxy]`, how many HolmesGPT users route
//! their models), in front of the fake LLM: plain, stream, tools, approvals, a 429 and a
//! mid-stream error, all through /api/chat. `.ci/run` installs the proxy into
//! target/litellm-venv (LITELLM_BIN overrides the path); without it the test is skipped with a
//! note, except under CI, where it fails.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{TestApp, eventually, free_port, http_client, last, names, spawn_app_with};
use fake_llm::Step;

fn litellm_bin() -> Option<PathBuf> {
    let path = std::env::var_os("LITELLM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/litellm-venv/bin/litellm")
        });
    path.is_file().then_some(path)
}

/// The proxy, stopped when dropped.
struct Proxy {
    child: tokio::process::Child,
    base: String,
    /// The proxy's master key: triage's api_key for it.
    key: String,
    dir: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// LiteLLM on a loopback port, one model `fake` routed to the fake LLM, no telemetry, the
/// local cost map, no database, and no retries of its own (the scenarios count upstream calls).
async fn start_proxy(bin: &PathBuf, upstream: &str) -> Proxy {
    let dir = crate::helpers::scratch().join(format!("litellm-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("litellm.yaml");
    std::fs::write(
        &config,
        format!(
            "model_list:\n  - model_name: fake\n    litellm_params:\n      model: openai/fake-model\n      api_base: {upstream}\n      api_key: sk-upstream\n      max_retries: 0\n\
             litellm_settings:\n  num_retries: 0\n  telemetry: false\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let key = format!(
        "sk-{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let log = std::fs::File::create(dir.join("litellm.log")).unwrap();
    let mut child = tokio::process::Command::new(bin)
        .args(["--config", config.to_str().unwrap(), "--host", "127.0.0.1"])
        .args(["--port", &port.to_string(), "--num_workers", "1"])
        .env("LITELLM_MASTER_KEY", &key)
        .env("LITELLM_TELEMETRY", "False")
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_LOG", "ERROR")
        .env_remove("DATABASE_URL")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("litellm starts");
    let base = format!("http://127.0.0.1:{port}");
    let client = http_client();
    let log = dir.join("litellm.log");
    let what = format!("litellm to start (its log: {})", log.display());
    let (client, health) = (&client, &format!("{base}/health/liveliness"));
    eventually(&what, Duration::from_secs(120), || {
        if let Some(exited) = child.try_wait().ok().flatten() {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("litellm exited ({exited}): {log}");
        }
        async move {
            client
                .get(health)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        }
    })
    .await;
    Proxy {
        child,
        base,
        key,
        dir,
    }
}

/// One test, the scenarios in order: the proxy takes seconds to start, and the fake's script
/// is shared by the scenarios.
#[tokio::test]
async fn triage_through_a_real_litellm_proxy() {
    let Some(bin) = litellm_bin() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the LiteLLM proxy test: .ci/run installs target/litellm-venv"
        );
        eprintln!(
            "SKIPPED triage_through_a_real_litellm_proxy: no LiteLLM at target/litellm-venv \
             (bash .ci/run installs it, or set LITELLM_BIN)"
        );
        return;
    };
    // The fake LLM first, then the proxy in front of it, then triage pointed at the proxy.
    let placeholder = spawn_app_with("").await;
    let proxy = start_proxy(&bin, &placeholder.llm.base_url()).await;
    let app = spawn_app_with(&format!(
        "[llm]\nretry_max_attempts = 5\nretry_max_elapsed_secs = 30.0\n\
         [models.fake]\nmodel = \"openai/fake\"\napi_base = \"{}\"\napi_key = \"{}\"\n",
        proxy.base, proxy.key
    ))
    .await;
    let llm = &placeholder.llm;

    plain(&app, llm).await;
    stream(&app, llm).await;
    tools(&app, llm).await;
    approvals(&app, llm).await;
    rate_limit(&app, llm).await;
    mid_stream_error(&app, llm).await;
    idle_connection(&app, llm).await;
}

async fn plain(app: &TestApp, llm: &fake_llm::FakeLlm) {
    llm.push(Step::text("plain answer through the proxy"));
    let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
    assert_eq!(status, 200, "plain: {body}");
    assert_eq!(body["analysis"], "plain answer through the proxy");
    assert_eq!(llm.requests().last().unwrap()["model"], "fake-model");
}

async fn stream(app: &TestApp, llm: &fake_llm::FakeLlm) {
    llm.push(Step::text("streamed answer through the proxy"));
    let events = app
        .chat_sse(&json!({"ask": "hi", "stream": true, "stream_deltas": true}))
        .await;
    let end = last(&events);
    assert_eq!(end.name, "ai_answer_end", "stream: {:?}", names(&events));
    assert_eq!(end.data["analysis"], "streamed answer through the proxy");
    let deltas: String = events
        .iter()
        .filter(|e| e.name == "ai_answer_delta")
        .map(|e| e.data["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(deltas, "streamed answer through the proxy");
}

async fn tools(app: &TestApp, llm: &fake_llm::FakeLlm) {
    llm.push(Step::tools(vec![
        ("c1", "bash", json!({"command": "echo one"})),
        ("c2", "bash", json!({"command": "echo two"})),
    ]));
    llm.push(Step::text("both ran"));
    let events = app
        .chat_sse(&json!({"ask": "run them", "stream": true}))
        .await;
    assert_eq!(
        last(&events).data["analysis"],
        "both ran",
        "tools: {:?}",
        names(&events)
    );
    let outputs: Vec<String> = events
        .iter()
        .filter(|e| e.name == "tool_calling_result")
        .map(|e| {
            e.data["result"]["data"]
                .as_str()
                .unwrap_or_default()
                .trim()
                .to_owned()
        })
        .collect();
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert!(outputs.contains(&"one".to_owned()) && outputs.contains(&"two".to_owned()));
    // The results went back through the proxy after their calls.
    let sent = llm.requests().pop().unwrap();
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        roles[roles.len() - 3..],
        ["assistant", "tool", "tool"],
        "{sent}"
    );
}

async fn approvals(app: &TestApp, llm: &fake_llm::FakeLlm) {
    let dir = crate::helpers::tool_writable_dir("litellm-approvals");
    let command = format!("touch {}/approved-through-proxy", dir.display());
    llm.push(Step::tool("risky", "bash", json!({"command": command})));
    let events = app
        .chat_sse(&json!({"ask": "fix it", "enable_tool_approval": true}))
        .await;
    let paused = last(&events);
    assert_eq!(paused.name, "approval_required", "{:?}", names(&events));
    llm.push(Step::text("Fixed."));
    let events = app
        .chat_sse(
            &json!({"ask": "", "conversation_history": paused.data["conversation_history"],
            "enable_tool_approval": true,
            "tool_decisions": [{"tool_call_id": "risky", "approved": true}]}),
        )
        .await;
    assert_eq!(
        last(&events).data["analysis"],
        "Fixed.",
        "{:?}",
        names(&events)
    );
    assert!(dir.join("approved-through-proxy").exists());
}

/// A 429 with Retry-After reaches triage through the proxy: triage waits as told, and since
/// the proxy retries upstream itself, makes at most two attempts.
async fn rate_limit(app: &TestApp, llm: &fake_llm::FakeLlm) {
    let before = llm.request_count();
    for _ in 0..6 {
        llm.push(Step::Error {
            status: 429,
            message: "slow down".into(),
            retry_after: Some("1".into()),
        });
    }
    let started = Instant::now();
    let events = app.chat_sse(&json!({"ask": "hi", "stream": true})).await;
    let elapsed = started.elapsed();
    let error = last(&events);
    assert_eq!(error.name, "error", "{:?}", names(&events));
    assert!(
        error.data["description"]
            .as_str()
            .unwrap_or_default()
            .contains("429"),
        "{}",
        error.data
    );
    let upstream = llm.request_count() - before;
    assert_eq!(upstream, 2, "two attempts, the proxy's own retries off");
    assert!(
        elapsed >= Duration::from_millis(900),
        "the forwarded Retry-After was honoured: {elapsed:?}"
    );
    llm.reset(Vec::new());
}

/// The upstream stream sends some text, then an error object: the client gets an `error`
/// event naming it, promptly. (An upstream stream that is merely cut short, LiteLLM ends as if
/// complete: triage cannot tell; README, "Through a LiteLLM proxy".)
async fn mid_stream_error(app: &TestApp, llm: &fake_llm::FakeLlm) {
    let chunk = json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
        "model": "fake-model", "choices": [{"index": 0,
        "delta": {"role": "assistant", "content": "partial "}, "finish_reason": null}]});
    let error = json!({"error": {"message": "upstream exploded mid-stream", "type": "server_error", "code": 500}});
    llm.push(Step::Raw {
        body: format!("data: {chunk}\n\ndata: {error}\n\n").into(),
    });
    let started = Instant::now();
    let events = app.chat_sse(&json!({"ask": "hi", "stream": true})).await;
    let end = last(&events);
    assert_eq!(end.name, "error", "{:?}: {}", names(&events), end.data);
    assert!(
        end.data["description"]
            .as_str()
            .unwrap_or_default()
            .contains("upstream exploded"),
        "{}",
        end.data
    );
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// A pause past the proxy's keep-alive (uvicorn: 5 s; triage drops idle connections after
/// 4 s): the next call succeeds with one upstream request, no retry.
async fn idle_connection(app: &TestApp, llm: &fake_llm::FakeLlm) {
    llm.push(Step::text("first"));
    let (status, _) = app.chat_json(&json!({"ask": "hi"})).await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let before = llm.request_count();
    llm.push(Step::text("after a pause"));
    let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "after a pause");
    assert_eq!(llm.request_count() - before, 1);
}

/// A server that answers one request on a connection, keeps it open, then closes it without
/// answering when the next request arrives (a keep-alive timeout racing the request), as
/// uvicorn does. Returns its base URL and the number of requests it read.
async fn closing_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let mut buf = vec![0u8; 1 << 20];
                // One request per read is enough here: triage's requests are small.
                for answered in 0.. {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    counted.fetch_add(1, Ordering::SeqCst);
                    if answered == 1 {
                        return; // closes the connection under the request
                    }
                    if tcp.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}/v1"), requests)
}

#[tokio::test]
async fn a_pooled_connection_closed_under_a_request_is_sent_again_once() {
    let (base, requests) = closing_server().await;
    // No retries of triage's own: only the stale-connection resend can save the second call.
    let app = spawn_app_with(&format!(
        "[llm]\nretry_max_attempts = 1\n[models.fake]\napi_base = \"{base}\"\n"
    ))
    .await;
    for n in 1..=2 {
        let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
        assert_eq!(status, 200, "call {n}: {body}");
        assert_eq!(body["analysis"], "ok");
    }
    assert_eq!(
        requests.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "the second call was read on the pooled connection, closed, and sent again"
    );
}
