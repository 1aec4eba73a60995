//! Operating triage: probes, info, metrics, load shedding, deadlines, slow clients, shutdown.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use triage::config::Settings;
use triage::startup::Application;

use crate::helpers::http_client;
use crate::helpers::{names, read_events, spawn_app, spawn_app_with};
use fake_llm::{FakeLlm, Step};

fn slow(chunks: usize, ms: u64) -> Step {
    Step::Slow {
        content: "a slow answer arrives".into(),
        chunks,
        interval: Duration::from_millis(ms),
    }
}

#[tokio::test]
async fn probes_and_info() {
    let app = spawn_app().await;
    assert_eq!(
        app.get_json("/healthz").await,
        (200, json!({"status": "healthy"}))
    );
    assert_eq!(
        app.get_json("/readyz").await,
        (200, json!({"status": "ready", "models": ["fake"]}))
    );
    let (status, info) = app.get_json("/api/info").await;
    assert_eq!(status, 200);
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info["auth_enabled"], false);
    assert_eq!(info["models"], json!(["fake"]));
    let toolsets = info["toolsets"].as_array().unwrap();
    let status_of =
        |name: &str| toolsets.iter().find(|t| t["name"] == name).unwrap()["status"].clone();
    assert_eq!(status_of("core_investigation"), "enabled");
    assert_eq!(status_of("kubernetes"), "disabled");
    assert_eq!(info["toolsets_summary"]["total"], toolsets.len());
    // Not ready without a model.
    let settings =
        Settings::from_toml("[server]\nport = 0\n[toolsets.kubernetes]\nenabled = false\n")
            .unwrap();
    if std::env::var("OPENAI_API_KEY").is_err() {
        let bare = crate::helpers::spawn_with_settings(settings, FakeLlm::start().await).await;
        assert_eq!(bare.get_json("/readyz").await.0, 503);
    }
}

#[tokio::test]
async fn metrics_in_prometheus_text_format() {
    let app = spawn_app().await;
    app.llm
        .push(Step::tool("m1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("ok"));
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    assert_eq!(names(&events).last(), Some(&"ai_answer_end"));
    let resp = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = resp.text().await.unwrap();
    for needle in [
        "triage_http_requests_total{route=\"/api/chat\",status=\"200\"}",
        "triage_http_request_duration_seconds_bucket{route=\"/api/chat\"",
        "triage_llm_calls_total{model=\"fake\",outcome=\"ok\"}",
        "triage_llm_call_duration_seconds_bucket{model=\"fake\"",
        "triage_llm_tokens_total{model=\"fake\",kind=\"prompt\"}",
        "triage_tool_calls_total{tool=\"TodoWrite\",status=\"success\"}",
        "triage_tool_call_duration_seconds_bucket{tool=\"TodoWrite\"",
        "triage_sse_streams_active",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
}

#[tokio::test]
async fn busy_servers_shed_load_with_503() {
    let app = spawn_app_with("[server]\nmax_concurrent_requests = 1\n").await;
    app.llm.push(slow(10, 100));
    let first = app.post_chat(&json!({"ask": "q", "stream": true})).await;
    assert_eq!(first.status(), 200);
    let resp = app.post_chat(&json!({"ask": "q"})).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    // Probes still answer.
    assert_eq!(app.get_json("/healthz").await.0, 200);
    let events = read_events(first).await;
    assert_eq!(names(&events).last(), Some(&"ai_answer_end"));
    // The slot is free again once the stream ended.
    app.llm.push(Step::text("ok"));
    assert_eq!(app.chat_json(&json!({"ask": "q"})).await.0, 200);
}

#[tokio::test]
async fn a_model_at_its_call_limit_answers_503() {
    let app = spawn_app_with("[llm]\nmax_concurrent_calls_per_model = 1\n").await;
    app.llm.push(slow(10, 100));
    let first = app.post_chat(&json!({"ask": "q", "stream": true})).await;
    assert!(app.llm.wait_for_requests(1, Duration::from_secs(5)).await);
    let resp = app.post_chat(&json!({"ask": "q"})).await;
    assert_eq!(resp.status(), 503);
    assert!(
        crate::helpers::json_body(resp).await["detail"]
            .as_str()
            .unwrap()
            .contains("max_concurrent_calls_per_model")
    );
    drop(first);
}

#[tokio::test]
async fn the_request_deadline_ends_streams_and_json_requests() {
    let app = spawn_app_with("[server]\nrequest_deadline_secs = 0.5\n").await;
    app.llm.push(slow(10, 200));
    let started = Instant::now();
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    assert_eq!(names(&events), ["error"]);
    assert!(
        events[0].data["description"]
            .as_str()
            .unwrap()
            .contains("deadline")
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        app.llm
            .wait_for_cancellations(1, Duration::from_secs(2))
            .await,
        "the LLM call was cancelled"
    );
    app.llm.push(slow(10, 200));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 504, "{body}");
}

#[tokio::test]
async fn slow_clients_are_cut_off_while_sending_headers() {
    let app = spawn_app_with("[server]\nheader_read_timeout_secs = 0.3\n").await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server kept a half-sent request open");
    assert!(started.elapsed() < Duration::from_secs(3));
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
}

#[tokio::test]
async fn graceful_shutdown_finishes_short_requests_and_ends_long_streams() {
    let llm = FakeLlm::start().await;
    let data_dir = crate::helpers::test_data_dir();
    let settings = Settings::from_toml(&format!(
        "[server]\nport = 0\nshutdown_grace_secs = 0.5\n[conversations]\ndata_dir = \"{}\"\n[toolsets.kubernetes]\nenabled = false\n[models.fake]\nmodel = \"openai/m\"\napi_base = \"{}\"\n",
        data_dir.display(),
        llm.base_url()
    ))
    .unwrap();
    let app = Application::build(settings).await.unwrap();
    let base = format!("http://127.0.0.1:{}", app.port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async {
        let _ = stopped.await;
    }));
    let client = http_client();
    let chat = |body: serde_json::Value| {
        client
            .post(format!("{base}/api/chat"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    // A long stream (5 s) and a short request (0.3 s) are running when the signal comes.
    llm.push(slow(25, 200));
    let long = chat(json!({"ask": "long", "stream": true})).await.unwrap();
    assert!(llm.wait_for_requests(1, Duration::from_secs(5)).await);
    llm.push(slow(3, 100));
    let short = tokio::spawn(chat(json!({"ask": "short"})));
    assert!(llm.wait_for_requests(2, Duration::from_secs(5)).await);
    let started = Instant::now();
    stop.send(()).unwrap();
    let short = short.await.unwrap().unwrap();
    assert_eq!(
        short.status(),
        200,
        "a request that fits in the grace period completes"
    );
    let events = read_events(long).await;
    let last = events.last().unwrap();
    assert_eq!(last.name, "error");
    assert!(
        last.data["description"]
            .as_str()
            .unwrap()
            .contains("shutting down")
    );
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("server stopped")
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(4));
    assert!(
        http_client()
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_err(),
        "no longer accepting"
    );
}
