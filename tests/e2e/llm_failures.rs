//! LLM failures: retries, give-ups, timeouts, broken streams, the step budget and client
//! disconnects, seen both as non-streaming HTTP errors and as SSE `error` events.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::{
    Event, TestApp, assert_leaving_cancels, eventually, json_body, last, names, read_events,
    spawn_app, spawn_app_with,
};
use fake_llm::Step;

const WAIT: Duration = Duration::from_secs(5);

fn ask(stream: bool) -> Value {
    json!({"ask": "Why is my pod crashing?", "stream": stream})
}

fn error_with_retry_after(status: u16, message: &str, retry_after: &str) -> Step {
    Step::Error {
        status,
        message: message.to_string(),
        retry_after: Some(retry_after.to_string()),
    }
}

/// The single `error` event of a stream that failed before any LLM output.
fn only_error(events: &[Event]) -> &Value {
    assert_eq!(names(events), ["error"], "{events:#?}");
    let data = &events[0].data;
    assert_eq!(data["success"], false, "{data}");
    data
}

fn description(data: &Value) -> &str {
    data["description"]
        .as_str()
        .unwrap_or_else(|| panic!("description is a string: {data}"))
}

fn detail(body: &Value) -> &str {
    body["detail"]
        .as_str()
        .unwrap_or_else(|| panic!("detail is a string: {body}"))
}

/// A non-rate-limit error event carrying `needle` (error_code 1, msg = description).
fn assert_generic_error(data: &Value, needle: &str) {
    assert_eq!(data["error_code"], 1, "{data}");
    assert!(description(data).contains(needle), "{data}");
    assert_eq!(data["msg"], data["description"], "{data}");
}

// ---------------------------------------------------------------------------------------------
// Retries that end in success
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn rate_limit_then_success_is_retried() {
    let app = spawn_app().await;
    app.llm
        .push(error_with_retry_after(429, "slow down please", "0"));
    app.llm.push(Step::text("Recovered after a rate limit."));
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Recovered after a rate limit.");
    assert_eq!(app.llm.request_count(), 2);
    // The retry sends the same request again.
    let reqs = app.llm.requests();
    assert_eq!(reqs[0], reqs[1]);
}

#[tokio::test]
async fn unavailable_then_success_is_retried() {
    let app = spawn_app().await;
    app.llm.push(Step::error(503, "overloaded, try again"));
    app.llm.push(Step::text("Recovered after a 503."));
    let events = app.chat_sse(&ask(true)).await;
    assert_eq!(last(&events).name, "ai_answer_end", "{events:#?}");
    assert_eq!(last(&events).data["analysis"], "Recovered after a 503.");
    assert!(!names(&events).contains(&"error"), "{events:#?}");
    assert_eq!(app.llm.request_count(), 2);
}

// ---------------------------------------------------------------------------------------------
// Retries exhausted
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn server_error_on_every_attempt_non_streaming_is_500() {
    let app = spawn_app_with("[llm]\nretry_max_attempts = 2\n").await;
    for _ in 0..2 {
        app.llm.push(Step::error(500, "upstream exploded"));
    }
    app.llm.push(Step::text("never reached"));
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 500, "{body}");
    assert!(detail(&body).contains("upstream exploded"), "{body}");
    assert_eq!(
        app.llm.request_count(),
        2,
        "exactly retry_max_attempts calls"
    );
    assert_eq!(app.llm.remaining(), 1);
}

#[tokio::test]
async fn server_error_on_every_attempt_streaming_is_one_error_event() {
    let app = spawn_app_with("[llm]\nretry_max_attempts = 2\n").await;
    for _ in 0..2 {
        app.llm.push(Step::error(500, "upstream exploded"));
    }
    let events = app.chat_sse(&ask(true)).await;
    let data = only_error(&events);
    assert_generic_error(data, "upstream exploded");
    assert_eq!(app.llm.request_count(), 2);
}

#[tokio::test]
async fn rate_limit_exhausted_non_streaming_is_429() {
    let app = spawn_app_with("[llm]\nretry_max_attempts = 2\n").await;
    for _ in 0..2 {
        app.llm.push(error_with_retry_after(429, "quota hit", "0"));
    }
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 429, "{body}");
    assert!(detail(&body).contains("quota hit"), "{body}");
    assert_eq!(app.llm.request_count(), 2);
}

#[tokio::test]
async fn rate_limit_exhausted_streaming_is_error_5204() {
    let app = spawn_app_with("[llm]\nretry_max_attempts = 2\n").await;
    for _ in 0..2 {
        app.llm.push(error_with_retry_after(429, "quota hit", "0"));
    }
    let events = app.chat_sse(&ask(true)).await;
    let data = only_error(&events);
    assert_eq!(data["error_code"], 5204, "{data}");
    assert_eq!(data["msg"], "Rate limit exceeded", "{data}");
    assert!(description(data).contains("quota hit"), "{data}");
    assert_eq!(app.llm.request_count(), 2);
}

// ---------------------------------------------------------------------------------------------
// Not retried
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unauthorized_is_not_retried_and_is_502() {
    let app = spawn_app().await;
    app.llm.push(Step::error(401, "Incorrect API key provided"));
    app.llm.push(Step::text("never reached"));
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 502, "{body}");
    assert!(
        detail(&body).contains("Incorrect API key provided"),
        "{body}"
    );
    assert_eq!(app.llm.request_count(), 1, "401 is not retried");
    assert_eq!(app.llm.remaining(), 1);
}

#[tokio::test]
async fn unauthorized_streaming_is_generic_error_event() {
    let app = spawn_app().await;
    app.llm.push(Step::error(401, "Incorrect API key provided"));
    app.llm.push(Step::text("never reached"));
    let events = app.chat_sse(&ask(true)).await;
    assert_generic_error(only_error(&events), "Incorrect API key provided");
    assert_eq!(app.llm.request_count(), 1);
}

#[tokio::test]
async fn bad_request_is_not_retried_and_is_500() {
    let app = spawn_app().await;
    app.llm
        .push(Step::error(400, "Invalid value for 'messages'"));
    app.llm.push(Step::text("never reached"));
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 500, "{body}");
    assert!(
        detail(&body).contains("Invalid value for 'messages'"),
        "{body}"
    );
    assert_eq!(app.llm.request_count(), 1, "400 is not retried");
}

#[tokio::test]
async fn bad_request_streaming_is_error_code_1() {
    let app = spawn_app().await;
    app.llm
        .push(Step::error(400, "Invalid value for 'messages'"));
    app.llm.push(Step::text("never reached"));
    let events = app.chat_sse(&ask(true)).await;
    assert_generic_error(only_error(&events), "Invalid value for 'messages'");
    assert_eq!(app.llm.request_count(), 1);
}

#[tokio::test]
async fn retry_after_beyond_the_budget_gives_up_at_once() {
    // retry_max_elapsed_secs is 5 in the test defaults; the provider asks for 30 s.
    let app = spawn_app().await;
    app.llm
        .push(error_with_retry_after(429, "come back in 30 s", "30"));
    app.llm.push(Step::text("never reached"));
    let started = Instant::now();
    let (status, body) = app.chat_json(&ask(false)).await;
    let took = started.elapsed();
    assert_eq!(status, 429, "{body}");
    assert!(detail(&body).contains("come back in 30 s"), "{body}");
    assert!(took < Duration::from_secs(2), "gave up after {took:?}");
    assert_eq!(app.llm.request_count(), 1);
}

// ---------------------------------------------------------------------------------------------
// Timeouts and broken streams
// ---------------------------------------------------------------------------------------------

fn mentions_timeout(s: &str) -> bool {
    let s = s.to_lowercase();
    s.contains("timed out") || s.contains("timeout")
}

#[tokio::test]
async fn llm_hanging_before_headers_streaming_times_out() {
    let app = spawn_app_with("[llm]\nfirst_byte_timeout_secs = 0.5\n").await;
    app.llm.push(Step::HangBeforeHeaders);
    app.llm.push(Step::text("never reached"));
    let started = Instant::now();
    let events = app.chat_sse(&ask(true)).await;
    let took = started.elapsed();
    let data = only_error(&events);
    assert_eq!(data["error_code"], 1, "{data}");
    assert!(mentions_timeout(description(data)), "{data}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(app.llm.wait_for_cancellations(1, WAIT).await);
    assert_eq!(app.llm.request_count(), 1, "a timeout is not retried");
}

#[tokio::test]
async fn llm_hanging_before_headers_non_streaming_is_500() {
    let app = spawn_app_with("[llm]\nfirst_byte_timeout_secs = 0.5\n").await;
    app.llm.push(Step::HangBeforeHeaders);
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 500, "{body}");
    assert!(mentions_timeout(detail(&body)), "{body}");
    assert!(app.llm.wait_for_cancellations(1, WAIT).await);
}

#[tokio::test]
async fn llm_stalling_mid_stream_is_an_error() {
    let app = spawn_app_with("[llm]\nidle_timeout_secs = 0.5\n").await;
    app.llm.push(Step::HangAfterFirstChunk {
        first: "The pod".into(),
    });
    app.llm.push(Step::text("never reached"));
    let started = Instant::now();
    let events = app.chat_sse(&ask(true)).await;
    let took = started.elapsed();
    let data = only_error(&events);
    assert_eq!(data["error_code"], 1, "{data}");
    assert!(description(data).contains("stalled"), "{data}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    // The stalled LLM response is abandoned, and output already received is never retried.
    assert!(app.llm.wait_for_cancellations(1, WAIT).await);
    assert_eq!(app.llm.request_count(), 1);
}

#[tokio::test]
async fn stream_cut_without_finish_is_an_error_not_a_truncated_answer() {
    let app = spawn_app().await;
    app.llm.push(Step::CutMidStream {
        content: "The pod is crash".into(),
    });
    app.llm.push(Step::text("never reached"));
    let events = app.chat_sse(&ask(true)).await;
    let data = only_error(&events);
    assert_eq!(data["error_code"], 1, "{data}");
    let d = description(data);
    assert!(d.contains("ended in the middle"), "{data}");
    assert_eq!(app.llm.request_count(), 1, "a broken stream is not retried");
}

#[tokio::test]
async fn stream_cut_without_finish_non_streaming_is_500() {
    let app = spawn_app().await;
    app.llm.push(Step::CutMidStream {
        content: "The pod is crash".into(),
    });
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 500, "{body}");
    assert!(detail(&body).contains("ended in the middle"), "{body}");
    assert!(body.get("analysis").is_none(), "{body}");
}

#[tokio::test]
async fn malformed_chunk_is_an_error() {
    let app = spawn_app().await;
    app.llm.push(Step::Raw {
        body: "data: {not json\n\n".into(),
    });
    app.llm.push(Step::text("never reached"));
    let events = app.chat_sse(&ask(true)).await;
    let data = only_error(&events);
    assert_eq!(data["error_code"], 1, "{data}");
    assert!(description(data).contains("malformed chunk"), "{data}");
    assert_eq!(app.llm.request_count(), 1);
}

#[tokio::test]
async fn invalid_utf8_in_the_stream_is_an_error() {
    let app = spawn_app().await;
    let mut body = raw_chunk(json!({"content": "ok "}), None).into_bytes();
    body.extend_from_slice(b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n");
    app.llm.push(Step::Raw { body: body.into() });
    let events = app.chat_sse(&ask(true)).await;
    let data = only_error(&events);
    assert_generic_error(data, "LLM stream broken");
    assert!(description(data).contains("invalid utf-8"), "{data}");
    assert_eq!(app.llm.request_count(), 1);
}

#[tokio::test]
async fn invalid_utf8_only_in_a_field_triage_ignores_is_read_as_before() {
    let app = spawn_app().await;
    let mut body = b"data: {\"id\":\"chatcmpl-\xff\",\"choices\":[{\"delta\":{\"content\":\"still read\"}}]}\n\n".to_vec();
    body.extend_from_slice(raw_chunk(json!({}), Some("stop")).as_bytes());
    body.extend_from_slice(b"data: [DONE]\n\n");
    app.llm.push(Step::Raw { body: body.into() });
    let (status, resp) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["analysis"], "still read");
}

#[tokio::test]
async fn an_llm_nobody_listens_on_is_a_clear_error() {
    // Port 9 (discard) on loopback: connection refused, on every attempt.
    let app = spawn_app_with(
        "[models.fake]\napi_base = \"http://127.0.0.1:9/v1\"\n[llm]\nretry_max_attempts = 2\n",
    )
    .await;
    let events = app.chat_sse(&ask(true)).await;
    assert_generic_error(only_error(&events), "cannot reach the LLM");
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 500, "{body}");
    assert!(detail(&body).contains("cannot reach the LLM"), "{body}");
}

fn raw_chunk(delta: Value, finish_reason: Option<&str>) -> String {
    let v = json!({
        "id": "chatcmpl-raw",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    });
    format!("data: {v}\n\n")
}

#[tokio::test]
async fn finish_reason_without_done_is_accepted() {
    let app = spawn_app().await;
    let body = raw_chunk(
        json!({"role": "assistant", "content": "Finished without DONE."}),
        None,
    ) + &raw_chunk(json!({}), Some("stop"));
    app.llm.push(Step::Raw { body: body.into() });
    let (status, resp) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["analysis"], "Finished without DONE.");
    assert_eq!(resp["metadata"]["finish_reason"], "stop");
    assert_eq!(app.llm.request_count(), 1);
}

// ---------------------------------------------------------------------------------------------
// Step budget
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn max_steps_exceeded_is_an_error_and_calls_are_forbidden_on_the_last_step() {
    let app = spawn_app_with("[agent]\nmax_steps = 2\n").await;
    app.llm
        .push(Step::tool("call_1", "TodoWrite", json!({"todos": []})));
    app.llm
        .push(Step::tool("call_2", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("never reached"));
    let events = app.chat_sse(&ask(true)).await;
    let end = last(&events);
    assert_eq!(end.name, "error", "{events:#?}");
    assert_eq!(
        end.data["description"],
        "Too many LLM calls - exceeded max_steps: 2/2"
    );
    assert_eq!(end.data["error_code"], 1);
    assert_eq!(end.data["success"], false);
    // The first step's tool call really ran.
    assert!(
        names(&events).contains(&"tool_calling_result"),
        "{events:#?}"
    );
    assert_eq!(app.llm.request_count(), 2);

    let reqs = app.llm.requests();
    let tools = reqs[0]["tools"].as_array().expect("tools on step 1");
    assert!(!tools.is_empty());
    // The last step keeps the definitions (the history holds calls) and forbids calls.
    assert_eq!(reqs[1]["tools"], reqs[0]["tools"], "{}", reqs[1]);
    assert_eq!(reqs[1]["tool_choice"], "none", "{}", reqs[1]);
}

#[tokio::test]
async fn max_steps_exceeded_non_streaming_is_500() {
    let app = spawn_app_with("[agent]\nmax_steps = 2\n").await;
    app.llm
        .push(Step::tool("call_1", "TodoWrite", json!({"todos": []})));
    app.llm
        .push(Step::tool("call_2", "TodoWrite", json!({"todos": []})));
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        body["detail"],
        "Too many LLM calls - exceeded max_steps: 2/2"
    );
}

// ---------------------------------------------------------------------------------------------
// Client disconnects cancel the LLM call
// ---------------------------------------------------------------------------------------------

fn slow_step() -> Step {
    // 5 s in total: longer than any wait below, so a cancellation can only come from the drop.
    Step::Slow {
        content: "one two three four five six seven eight nine ten".into(),
        chunks: 50,
        interval: Duration::from_millis(100),
    }
}

async fn wait_for_llm_request(app: &TestApp) {
    assert!(
        app.llm.wait_for_requests(1, WAIT).await,
        "the LLM never got the request"
    );
}

#[tokio::test]
async fn client_disconnect_while_streaming_cancels_the_llm_call() {
    let app = spawn_app().await;
    app.llm.push(slow_step());
    let resp = app.post_chat(&ask(true)).await;
    assert_eq!(resp.status(), 200);
    wait_for_llm_request(&app).await;
    // The answer is streaming to the client.
    eventually("the answer to stream", WAIT, || async {
        app.llm.in_flight() == 1
    })
    .await;
    assert_leaving_cancels(&app, || drop(resp), "LLM").await;
}

#[tokio::test]
async fn client_disconnect_before_llm_headers_cancels_the_llm_call() {
    let app = spawn_app().await;
    app.llm.push(Step::HangBeforeHeaders);
    let resp = app.post_chat(&ask(true)).await;
    assert_eq!(resp.status(), 200);
    wait_for_llm_request(&app).await;
    // first_byte_timeout is 5 s: a cancellation within 2 s comes from the drop.
    assert_leaving_cancels(&app, || drop(resp), "LLM").await;
}

#[tokio::test]
async fn client_disconnect_non_streaming_cancels_the_llm_call() {
    let app = spawn_app().await;
    app.llm.push(slow_step());
    let client = app.client.clone();
    let url = app.url("/api/chat");
    let request = tokio::spawn(async move {
        let resp = client
            .post(url)
            .header("content-type", "application/json")
            .body(ask(false).to_string())
            .send()
            .await;
        match resp {
            Ok(r) => Some(json_body(r).await),
            Err(_) => None,
        }
    });
    wait_for_llm_request(&app).await;
    eventually("the answer to be under way", WAIT, || async {
        app.llm.in_flight() == 1
    })
    .await;
    assert_leaving_cancels(&app, || request.abort(), "LLM").await;
    assert!(request.await.unwrap_err().is_cancelled());
}

/// Reading a streamed answer to its end counts no cancellation (the control for the tests
/// above).
#[tokio::test]
async fn client_disconnect_during_a_retry_backoff_stops_retrying() {
    let app =
        spawn_app_with("[llm]\nretry_base_delay_ms = 1000\nretry_max_delay_ms = 1000\n").await;
    app.llm.push(error_with_retry_after(503, "busy", "1"));
    app.llm.push(Step::text("too late"));
    let resp = app.post_chat(&ask(true)).await;
    wait_for_llm_request(&app).await;
    drop(resp);
    // Past the 1 s backoff: a retry would have arrived by now (an absence, given its time).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        app.llm.request_count(),
        1,
        "a retry was sent for a client that left"
    );
}

#[tokio::test]
async fn a_finished_stream_counts_no_cancellation() {
    let app = spawn_app().await;
    app.llm.push(Step::Slow {
        content: "all good".into(),
        chunks: 3,
        interval: Duration::from_millis(20),
    });
    let resp = app.post_chat(&ask(true)).await;
    let events = read_events(resp).await;
    assert_eq!(last(&events).name, "ai_answer_end");
    assert_eq!(last(&events).data["analysis"], "all good");
    // Once the fake's response is over it has counted a finish or a cancellation.
    eventually("the answer to end", WAIT, || async {
        app.llm.in_flight() == 0
    })
    .await;
    assert_eq!(app.llm.cancellations(), 0);
}

#[tokio::test]
async fn an_error_chunk_mid_stream_is_an_error_event() {
    let app = spawn_app().await;
    app.llm.push(Step::FailMidStream {
        content: "Partial".into(),
        kind: "server_error".into(),
        message: "upstream went away".into(),
    });
    let events = app.chat_sse(&ask(true)).await;
    let end = last(&events);
    assert_eq!(end.name, "error", "{events:#?}");
    assert!(description(&end.data).contains("upstream went away"));
}

// ---------------------------------------------------------------------------------------------
// Redirects
// ---------------------------------------------------------------------------------------------

/// An endpoint that moved (a proxy's trailing-slash rule answers 307 or 308) gets the very
/// request the model would have had, body and all: the body goes out in parts (the shared
/// system prompt and tools), and a redirect makes triage send it again in one piece.
#[tokio::test]
async fn a_moved_endpoint_gets_the_same_request_after_its_308() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let moved = format!("http://{}", listener.local_addr().unwrap());
    let app = spawn_app_with(&format!(
        "[models.moved]\nmodel = \"openai/fake-model\"\napi_base = \"{moved}/v1\"\n"
    ))
    .await;
    let target = format!("{}/chat/completions", app.llm.base_url());
    let redirected = Arc::new(AtomicUsize::new(0));
    let counter = redirected.clone();
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: axum::body::Bytes| {
            let (target, counter) = (target.clone(), counter.clone());
            async move {
                // A well-formed body arrived here too.
                assert!(serde_json::from_slice::<Value>(&body).is_ok());
                counter.fetch_add(1, Ordering::SeqCst);
                (
                    axum::http::StatusCode::PERMANENT_REDIRECT,
                    [("location", target)],
                )
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });

    app.llm.push(Step::text("Answered from the new place."));
    app.llm
        .push(Step::text("Answered from the new place again."));
    app.llm.push(Step::text("Answered directly."));
    let moved_ask = json!({"ask": "Why is my pod crashing?", "model": "moved"});
    let (status, body) = app.chat_json(&moved_ask).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Answered from the new place.");
    // Once in parts, refused; then in one piece, which reqwest follows to the new place.
    assert_eq!(redirected.load(Ordering::SeqCst), 2);
    // The endpoint is known to redirect: in one piece from the start.
    let (status, body) = app.chat_json(&moved_ask).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(redirected.load(Ordering::SeqCst), 3);
    let (status, body) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 200, "{body}");
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["messages"][0], requests[2]["messages"][0]);
    assert_eq!(requests[0]["tools"], requests[2]["tools"]);
    // The body in parts goes out with its length, not chunked.
    let headers = app.llm.request_headers().pop().unwrap();
    let length = headers.get("content-length").and_then(|v| v.to_str().ok());
    let raw = app.llm.take_raw_requests();
    assert_eq!(
        length,
        Some(raw[2].len().to_string().as_str()),
        "{headers:?}"
    );
    assert!(!headers.contains_key("transfer-encoding"), "{headers:?}");
    assert_eq!(requests[0]["messages"][0]["role"], "system");
    assert!(
        requests[0]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
}
