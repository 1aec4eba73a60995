//! Clients too slow to be served: trickled bodies, silent connections, and streams nobody
//! reads must not hold request slots, LLM calls or connections.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{TestApp, spawn_app_with};
use fake_llm::Step;

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .expect("connect to triage")
}

/// A chat request whose headers announce 100 body bytes, of which one is sent.
async fn trickling_body(app: &TestApp) -> TcpStream {
    let mut stream = connect(app).await;
    stream
        .write_all(b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    stream
}

#[tokio::test]
async fn trickled_bodies_hold_no_request_slot() {
    let app = spawn_app_with("[server]\nmax_concurrent_requests = 2\n").await;
    let mut slow = Vec::new();
    for _ in 0..20 {
        slow.push(trickling_body(&app).await);
    }
    // Let the server parse their headers: before, each had then taken a slot.
    tokio::time::sleep(Duration::from_millis(300)).await;
    app.llm.push(Step::text("served"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "served");
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_408() {
    let app = spawn_app_with("[server]\nbody_read_timeout_secs = 0.3\n").await;
    let mut stream = trickling_body(&app).await;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the server kept waiting for the body")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("server.body_read_timeout_secs"), "{answer}");
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed() {
    let app = spawn_app_with("[server]\nheader_read_timeout_secs = 0.3\n").await;
    let mut stream = connect(&app).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "a silent connection was kept open");
}

/// A server with one request slot, a short write timeout, and an LLM that streams 40 MB of
/// text over about 8 s (answers that large are allowed): far more than socket buffers or an
/// HTTP/2 window hold, so only a stalled client can end the request early.
async fn flooded_app() -> TestApp {
    let app = spawn_app_with(
        "[server]\nmax_concurrent_requests = 1\nwrite_timeout_secs = 0.5\n\
         [llm]\nmax_output_tokens = 20000000\n\
         [models.fake]\ncustom_args = { max_context_size = 40000000 }\n",
    )
    .await;
    let piece = "word ".repeat(2_000);
    app.llm.push(Step::Slow {
        content: piece.repeat(4_000),
        chunks: 4_000,
        interval: Duration::from_millis(2),
    });
    app
}

fn flooding_ask() -> String {
    json!({"ask": "q", "stream": true, "stream_deltas": true}).to_string()
}

/// The stalled request's LLM call was cancelled and the only slot serves the next request.
async fn assert_released(app: &TestApp) {
    assert!(
        app.llm
            .wait_for_cancellations(1, Duration::from_secs(30))
            .await,
        "the LLM call of a client that reads nothing was not cancelled"
    );
    app.llm.push(Step::text("next"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_stream_nobody_reads_frees_its_slot_and_cancels_the_llm_call() {
    let app = flooded_app().await;
    let body = flooding_ask();
    let mut reader_gone = connect(&app).await;
    reader_gone
        .write_all(
            format!(
                "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    assert_released(&app).await;
    drop(reader_gone);
}

#[tokio::test]
async fn an_http2_stream_nobody_reads_frees_its_slot_and_cancels_the_llm_call() {
    // The client's HTTP/2 stack keeps reading the connection; only this stream's window fills.
    let app = flooded_app().await;
    let h2 = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let unread = h2
        .post(app.url("/api/chat"))
        .header("content-type", "application/json")
        .body(flooding_ask())
        .send()
        .await
        .unwrap();
    assert_eq!(unread.version(), reqwest::Version::HTTP_2);
    assert_released(&app).await;
    drop(unread);
}

/// An HTTP/2 client that grants no flow-control window takes the headers of a plain JSON
/// answer but never its body. The connection stays healthy, so no write deadline fires: the
/// request's slot must not wait for the body to be sent.
#[tokio::test]
async fn an_http2_json_body_nobody_takes_frees_its_slot() {
    let app =
        spawn_app_with("[server]\nmax_concurrent_requests = 1\nwrite_timeout_secs = 0.5\n").await;
    let h2 = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .http2_initial_stream_window_size(0)
        .build()
        .unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        let unread = h2.get(app.url("/api/openapi.json")).send().await.unwrap();
        assert_eq!(unread.status(), 200);
        held.push(unread);
    }
    // Past the 0.5 s write timeout: the held answers' slots must be free by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    app.llm.push(Step::text("served"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    drop(held);
}
