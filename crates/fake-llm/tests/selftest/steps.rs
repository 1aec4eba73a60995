//! The scripted steps, each driven directly with reqwest: what the fake streams or answers.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::common::*;
use fake_llm::{FakeLlm, Step, ToolCall, Usage};

#[tokio::test]
async fn fake_llm_text_streams_content_reasoning_and_usage() {
    let fake = FakeLlm::start().await;
    assert!(fake.base_url().starts_with("http://127.0.0.1:"));
    assert!(fake.base_url().ends_with("/v1"));
    let content = "The pod is OOMKilled because its memory limit is 128Mi.";
    fake.push(Step::Text {
        content: content.into(),
        reasoning: Some("Let me think about memory.".into()),
        usage: Some(Usage {
            prompt_tokens: 42,
            completion_tokens: 7,
        }),
    });
    fake.push(Step::text("second answer"));

    let resp = post(&fake, &chat_body(true, true)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let chunks1 = chunks(&sse_data(resp).await);

    let first = &chunks1[0];
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["model"], "gpt-test");
    assert!(first["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(first["choices"][0]["delta"]["content"], "");

    let (text, n) = delta_strings(&chunks1, "content");
    assert_eq!(text, content);
    assert!(
        n >= 3,
        "content should be split into several deltas, got {n}"
    );
    let (reasoning, _) = delta_strings(&chunks1, "reasoning_content");
    assert_eq!(reasoning, "Let me think about memory.");
    assert_eq!(finish_reasons(&chunks1), vec!["stop"]);

    let usage_chunk = chunks1.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(
        usage_chunk["usage"],
        json!({"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49})
    );

    // Without include_usage: no usage chunk; the finish chunk is last.
    let resp = post(&fake, &chat_body(true, false)).await;
    let chunks2 = chunks(&sse_data(resp).await);
    assert_eq!(delta_strings(&chunks2, "content").0, "second answer");
    assert!(chunks2.iter().all(|c| c.get("usage").is_none()));
    let last = chunks2.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["choices"][0]["delta"], json!({}));

    assert_eq!(fake.request_count(), 2);
    assert_eq!(fake.cancellations(), 0);
}

#[tokio::test]
async fn fake_llm_default_usage_is_estimated() {
    let fake = FakeLlm::start().await;
    fake.push(Step::text("one two three"));
    let chunks = chunks(&sse_data(post(&fake, &chat_body(true, true)).await).await);
    let usage = &chunks.last().unwrap()["usage"];
    let p = usage["prompt_tokens"].as_u64().unwrap();
    let c = usage["completion_tokens"].as_u64().unwrap();
    assert!(p >= 1);
    assert_eq!(c, 3);
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), p + c);
}

#[tokio::test]
async fn fake_llm_tool_calls_assemble_across_chunks() {
    let fake = FakeLlm::start().await;
    fake.push(Step::ToolCalls {
        content: Some("Checking the cluster.".into()),
        calls: vec![
            ToolCall {
                id: "call_a".into(),
                name: "kubectl_describe".into(),
                arguments: json!({"kind": "pod", "name": "api-7d9f", "namespace": "prod"})
                    .to_string(),
            },
            ToolCall {
                id: "call_b".into(),
                name: "fetch_logs".into(),
                arguments: json!({"pod": "api-7d9f", "tail": 100}).to_string(),
            },
        ],
        usage: None,
    });

    let resp = post(&fake, &chat_body(true, true)).await;
    assert_eq!(resp.status(), 200);
    let chunks = chunks(&sse_data(resp).await);
    assert_eq!(delta_strings(&chunks, "content").0, "Checking the cluster.");

    // index -> (id, name, arguments, number of argument pieces)
    let mut calls: BTreeMap<u64, (String, String, String, usize)> = BTreeMap::new();
    for c in &chunks {
        let Some(tcs) = c
            .pointer("/choices/0/delta/tool_calls")
            .and_then(Value::as_array)
        else {
            continue;
        };
        for tc in tcs {
            let idx = tc["index"].as_u64().expect("tool call index");
            let entry = calls.entry(idx).or_default();
            if let Some(id) = tc.get("id").and_then(Value::as_str) {
                assert!(entry.0.is_empty(), "id sent twice");
                assert_eq!(tc["type"], "function");
                assert_eq!(tc["function"]["arguments"], "");
                entry.0 = id.to_string();
                entry.1 = tc["function"]["name"].as_str().unwrap().to_string();
            } else {
                assert!(!entry.0.is_empty(), "arguments before header");
                assert!(tc["function"].get("name").is_none());
                entry
                    .2
                    .push_str(tc["function"]["arguments"].as_str().unwrap());
                entry.3 += 1;
            }
        }
    }
    assert_eq!(calls.len(), 2);
    let a = &calls[&0];
    assert_eq!((a.0.as_str(), a.1.as_str()), ("call_a", "kubectl_describe"));
    assert_eq!(
        serde_json::from_str::<Value>(&a.2).unwrap(),
        json!({"kind": "pod", "name": "api-7d9f", "namespace": "prod"})
    );
    assert!(a.3 >= 3, "arguments split into {} pieces", a.3);
    let b = &calls[&1];
    assert_eq!((b.0.as_str(), b.1.as_str()), ("call_b", "fetch_logs"));
    assert_eq!(
        serde_json::from_str::<Value>(&b.2).unwrap(),
        json!({"pod": "api-7d9f", "tail": 100})
    );
    assert!(b.3 >= 2);

    assert_eq!(finish_reasons(&chunks), vec!["tool_calls"]);
    let usage = &chunks.last().unwrap()["usage"];
    assert!(usage["completion_tokens"].as_u64().unwrap() >= 1);
}

#[tokio::test]
async fn fake_llm_tool_helpers_build_calls() {
    let step = Step::tools(vec![("c1", "a", json!({"x": 1})), ("c2", "b", json!({}))]);
    let Step::ToolCalls {
        content,
        calls,
        usage,
    } = step
    else {
        panic!("expected ToolCalls");
    };
    assert!(content.is_none() && usage.is_none());
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].arguments, r#"{"x":1}"#);
    assert_eq!(calls[1].name, "b");

    let fake = FakeLlm::start().await;
    fake.push(Step::tool("call_1", "noop", json!({})));
    let chunks = chunks(&sse_data(post(&fake, &chat_body(true, false)).await).await);
    let args: String = chunks
        .iter()
        .filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0/function/arguments"))
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(args, "{}");
}

#[tokio::test]
async fn fake_llm_error_returns_status_body_and_retry_after() {
    let fake = FakeLlm::start().await;
    fake.push(Step::Error {
        status: 429,
        message: "Rate limit reached".into(),
        retry_after: Some("2".into()),
    });
    fake.push(Step::error(400, "bad request: context too long"));

    let resp = post(&fake, &chat_body(true, true)).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "2");
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value = json_body(resp).await;
    assert_eq!(body["error"]["message"], "Rate limit reached");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert!(body["error"]["type"].is_string());

    let resp = post(&fake, &chat_body(true, true)).await;
    assert_eq!(resp.status(), 400);
    assert!(resp.headers().get("retry-after").is_none());
    let body: Value = json_body(resp).await;
    assert_eq!(body["error"]["message"], "bad request: context too long");
    assert_eq!(body["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn fake_llm_hang_after_first_chunk_counts_cancellation_on_drop() {
    let fake = FakeLlm::start().await;
    fake.push(Step::HangAfterFirstChunk {
        first: "Partial".into(),
    });
    let resp = post(&fake, &chat_body(true, true)).await;
    assert_eq!(resp.status(), 200);
    let mut events = resp.bytes_stream().eventsource();
    let mut content = String::new();
    while content.is_empty() {
        let ev = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("first chunk in time")
            .expect("stream open")
            .expect("valid event");
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        if let Some(s) = v
            .pointer("/choices/0/delta/content")
            .and_then(Value::as_str)
        {
            content.push_str(s);
        }
    }
    assert_eq!(content, "Partial");
    // Nothing more arrives.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), events.next())
            .await
            .is_err()
    );
    assert_eq!(fake.cancellations(), 0);
    drop(events);
    assert!(fake.wait_for_cancellations(1, WAIT).await);
    assert_eq!(fake.cancellations(), 1);
}

#[tokio::test]
async fn fake_llm_hang_before_headers_counts_cancellation_on_drop() {
    let fake = FakeLlm::start().await;
    fake.push(Step::HangBeforeHeaders);
    let res = tokio::time::timeout(
        Duration::from_millis(150),
        post(&fake, &chat_body(true, false)),
    )
    .await;
    assert!(res.is_err(), "no headers should ever arrive");
    assert_eq!(fake.request_count(), 1);
    assert!(fake.wait_for_cancellations(1, WAIT).await);
}

#[tokio::test]
async fn fake_llm_records_requests_and_exhausted_script_is_500() {
    let fake = FakeLlm::start().await;
    fake.push(Step::text("ok"));
    let b1 = chat_body(true, true);
    let resp = post(&fake, &b1).await;
    let _ = sse_data(resp).await;

    assert!(fake.wait_for_requests(1, WAIT).await);
    assert!(!fake.wait_for_requests(2, Duration::from_millis(20)).await);

    // Script now empty; also send via the /v1 path with a non-chat body.
    let b2 = json!({"anything": [1, 2, 3]});
    let resp = post(&fake, &b2).await;
    assert_eq!(resp.status(), 500);
    let body: Value = json_body(resp).await;
    assert_eq!(
        body,
        json!({"error": {"message": "fake llm: script exhausted", "type": "server_error"}})
    );

    // The un-prefixed path also works.
    let addr = fake.base_url().trim_end_matches("/v1").to_string();
    let resp = post_raw(
        &format!("{addr}/chat/completions"),
        "not json at all".into(),
    )
    .await;
    assert_eq!(resp.status(), 500);

    assert_eq!(fake.request_count(), 3);
    let reqs = fake.requests();
    assert_eq!(reqs[0], b1);
    assert_eq!(reqs[1], b2);
    assert_eq!(reqs[2], json!("not json at all"));
    assert_eq!(fake.cancellations(), 0);
}

#[tokio::test]
async fn fake_llm_cut_mid_stream_has_no_finish_and_no_done() {
    let fake = FakeLlm::start().await;
    fake.push(Step::CutMidStream {
        content: "this answer is cut".into(),
    });
    let data = sse_data(post(&fake, &chat_body(true, true)).await).await;
    assert!(data.iter().all(|d| d != "[DONE]"));
    let chunks: Vec<Value> = data
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(finish_reasons(&chunks).is_empty());
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(delta_strings(&chunks, "content").0, "this answer is cut");
    assert_eq!(fake.cancellations(), 0);
}

#[tokio::test]
async fn fake_llm_raw_body_is_verbatim() {
    let fake = FakeLlm::start().await;
    let raw = "data: {not json\n\ndata: [DONE]\n\n";
    fake.push(Step::Raw { body: raw.into() });
    let resp = post(&fake, &chat_body(true, false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.text().await.unwrap(), raw);
}

#[tokio::test]
async fn fake_llm_slow_streams_with_intervals() {
    let fake = FakeLlm::start().await;
    fake.push(Step::Slow {
        content: "slow and steady".into(),
        chunks: 4,
        interval: Duration::from_millis(25),
    });
    let started = Instant::now();
    let chunks = chunks(&sse_data(post(&fake, &chat_body(true, true)).await).await);
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(delta_strings(&chunks, "content").0, "slow and steady");
    assert_eq!(finish_reasons(&chunks), vec!["stop"]);
    assert!(chunks.last().unwrap().get("usage").is_some());
    assert_eq!(fake.cancellations(), 0);
}

#[tokio::test]
async fn fake_llm_slow_dropped_midway_counts_cancellation() {
    let fake = FakeLlm::start().await;
    fake.push(Step::Slow {
        content: "a b c d e f g h".into(),
        chunks: 8,
        interval: Duration::from_millis(50),
    });
    let resp = post(&fake, &chat_body(true, false)).await;
    let mut events = resp.bytes_stream().eventsource();
    let _ = events.next().await; // role chunk
    drop(events);
    assert!(fake.wait_for_cancellations(1, WAIT).await);
}

#[tokio::test]
async fn fake_llm_non_streaming_returns_chat_completion() {
    let fake = FakeLlm::start().await;
    fake.push(Step::text("plain answer"));
    fake.push(Step::tool("call_9", "lookup", json!({"q": "x"})));

    let resp = post(&fake, &chat_body(false, false)).await;
    assert_eq!(resp.status(), 200);
    let v: Value = json_body(resp).await;
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "gpt-test");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], "plain answer");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert!(v["usage"]["total_tokens"].as_u64().unwrap() >= 2);

    let mut body = chat_body(false, false);
    body["stream"] = json!(false);
    let v: Value = json_body(post(&fake, &body).await).await;
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    let tc = &v["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(tc["id"], "call_9");
    assert_eq!(tc["type"], "function");
    assert_eq!(tc["function"]["name"], "lookup");
    assert_eq!(tc["function"]["arguments"], r#"{"q":"x"}"#);
}

#[tokio::test]
async fn fake_llm_drip_repeats_one_piece_and_counts_in_flight() {
    let fake = FakeLlm::start().await;
    fake.push(Step::Drip {
        piece: "tick ".into(),
        times: 3,
        interval: Duration::from_millis(20),
    });
    let chunks = chunks(&sse_data(post(&fake, &chat_body(true, false)).await).await);
    assert_eq!(delta_strings(&chunks, "content").0, "tick tick tick ");
    assert_eq!(finish_reasons(&chunks), vec!["stop"]);
    assert_eq!((fake.in_flight(), fake.cancellations()), (0, 0));

    // A long drip stays in flight until its client goes away, which counts a cancellation.
    fake.push(Step::Drip {
        piece: "tick ".into(),
        times: 1000,
        interval: Duration::from_millis(20),
    });
    let resp = post(&fake, &chat_body(true, false)).await;
    let mut events = resp.bytes_stream().eventsource();
    let _ = events.next().await; // role chunk
    assert_eq!(fake.in_flight(), 1);
    drop(events);
    assert!(fake.wait_for_cancellations(1, WAIT).await);
    assert_eq!(fake.in_flight(), 0);
}

#[tokio::test]
async fn fake_llm_paced_waits_before_and_between_chunks() {
    let fake = FakeLlm::start().await;
    fake.push(Step::Paced {
        before: Duration::from_millis(100),
        between_chunks: Duration::from_millis(30),
        step: Box::new(Step::text("one two three")),
    });
    let started = Instant::now();
    let chunks = chunks(&sse_data(post(&fake, &chat_body(true, false)).await).await);
    // 100 ms before, then 30 ms before each of three words and the finish chunk.
    assert!(started.elapsed() >= Duration::from_millis(220));
    assert_eq!(delta_strings(&chunks, "content").0, "one two three");
}

#[tokio::test]
async fn fake_llm_raw_responder_sees_the_unparsed_body() {
    let fake = FakeLlm::start().await;
    fake.keep_requests(false);
    fake.set_raw_responder(|body| {
        let text = String::from_utf8_lossy(body).into_owned();
        Step::Raw {
            body: format!("data: {}\n\n", text.len()).into(),
        }
    });
    let body = chat_body(true, false).to_string();
    let resp = post(&fake, &chat_body(true, false)).await;
    assert_eq!(
        resp.text().await.unwrap(),
        format!("data: {}\n\n", body.len())
    );
    assert_eq!(fake.request_count(), 1);
    assert!(fake.requests().is_empty(), "keep_requests(false)");

    // Kept bodies come back raw, once.
    fake.keep_requests(true);
    let _ = post(&fake, &chat_body(false, false)).await;
    let raw = fake.take_raw_requests();
    assert_eq!(raw.len(), 1);
    assert_eq!(raw[0], chat_body(false, false).to_string());
    assert!(fake.take_raw_requests().is_empty());
}

#[tokio::test]
async fn fake_llm_reset_replaces_the_script_and_forgets_requests() {
    let fake = FakeLlm::start().await;
    fake.push(Step::text("old"));
    let _ = post(&fake, &chat_body(false, false)).await;
    fake.push(Step::text("stale"));
    fake.reset(vec![Step::text("new")]);
    assert!(fake.requests().is_empty());
    assert_eq!(fake.remaining(), 1);
    let v = json_body(post(&fake, &chat_body(false, false)).await).await;
    assert_eq!(v["choices"][0]["message"]["content"], "new");
}
