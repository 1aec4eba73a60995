//! The native `bedrock/` provider through `/api/chat`, against the fake's ConverseStream,
//! which recomputes every request's SigV4 signature (403 InvalidSignatureException on a
//! mismatch) and refuses (HTTP 400 ValidationException, as Bedrock does) every request the
//! real API refuses: alternation, tool blocks without toolConfig, results answering the
//! previous turn's calls, empty text, unsigned reasoning. Answers come as eventstream frames.

use serde_json::{Value, json};

use crate::helpers::{TestApp, names, spawn_app_with};
use crate::provider_common::{
    SMALL_WINDOW, assert_approval_resumes_statelessly, assert_compaction_summarises_then_answers,
    assert_frontend_tool_pauses_and_resumes, assert_plain_answer_streamed_and_not,
    assert_two_tool_rounds_answered, last_event, request_blocks,
};
use fake_llm::{FakeLlm, Step};

const KEY_ID: &str = "AKIDBEDROCKTEST";
const SECRET: &str = "bedrock-test-secret-key";
/// Claude 3.5 Sonnet v1: an id with `:` (percent-encoded in the path), no cache points.
const SONNET_35: &str = "anthropic.claude-3-5-sonnet-20240620-v1:0";
/// An inference profile of a model that takes cache points and thinking.
const SONNET_4: &str = "us.anthropic.claude-sonnet-4-20250514-v1:0";

fn entry(model: &str, extra: &str) -> String {
    format!(
        "default_model = \"br\"\n[models.br]\nmodel = \"bedrock/{model}\"\naws_region_name = \"us-east-1\"\naws_bedrock_runtime_endpoint = \"{{LLM_ORIGIN}}\"\naws_access_key_id = \"{KEY_ID}\"\naws_secret_access_key = \"{SECRET}\"\n{extra}"
    )
}

async fn bedrock(model: &str, extra: &str) -> TestApp {
    let app = spawn_app_with(&entry(model, extra)).await;
    app.llm.trust_aws_key(KEY_ID, SECRET);
    app
}

/// The content blocks of message `i` of request `n`.
fn blocks(app: &TestApp, n: usize, i: usize) -> Vec<Value> {
    request_blocks(app, n, ("messages", "content"), i)
}

#[tokio::test]
async fn plain_answer_streamed_and_not() {
    let app = bedrock(&format!("converse/{SONNET_35}"), "").await;
    let (_, request) =
        assert_plain_answer_streamed_and_not(&app, Step::text("Streamed answer.")).await;
    assert!(request["system"][0]["text"].is_string());
    assert_eq!(request["messages"][0]["role"], "user");
    assert!(request["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"].is_object());
    assert!(!request.to_string().contains("cachePoint"));
    let auth = app.llm.request_headers()[0]["authorization"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDBEDROCKTEST/"),
        "{auth}"
    );
    assert!(auth.contains("/us-east-1/bedrock/aws4_request"), "{auth}");
}

#[tokio::test]
async fn two_tool_rounds_answer_calls_in_order() {
    let app = bedrock(SONNET_35, "").await;
    assert_two_tool_rounds_answered(&app, ["tooluse_1", "tooluse_2", "tooluse_3"]).await;
    let results = blocks(&app, 2, 4);
    assert_eq!(results[0]["toolResult"]["toolUseId"], "tooluse_2");
    assert_eq!(results[1]["toolResult"]["toolUseId"], "tooluse_3");
    assert_eq!(results[1]["toolResult"]["status"], "error", "{results:?}");
    assert_eq!(
        blocks(&app, 2, 3)[0]["toolUse"]["input"],
        json!({"command": "echo one"})
    );
    assert!(app.llm.requests()[2]["toolConfig"].is_object());
}

#[tokio::test]
async fn approvals_and_frontend_tools_resume() {
    let app = bedrock(SONNET_35, "").await;
    let approved = assert_approval_resumes_statelessly(&app, "bedrock-approval").await;
    assert_eq!(approved, "risky");

    let tools = json!([{"name": "show_chart", "description": "Render a chart", "mode": "pause",
        "parameters": {"type": "object", "properties": {"metric": {"type": "string"}}}}]);
    let (id, _) = assert_frontend_tool_pauses_and_resumes(&app, &tools, "tooluse_fe").await;
    assert_eq!(id, "tooluse_fe");
    let n = app.llm.request_count() - 1;
    assert_eq!(
        blocks(&app, n, 2)[0]["toolResult"]["content"][0]["text"],
        "peak 93%"
    );
}

#[tokio::test]
async fn images_become_bytes_blocks() {
    const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let app = bedrock(SONNET_35, "vision = true\n").await;
    app.llm.push(Step::text("A dashboard."));
    let (status, body) = app
        .chat_json(&json!({"ask": "What is this?", "images": [PNG]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let user = blocks(&app, 0, 0);
    assert_eq!(user[1]["image"]["format"], "png", "{user:?}");
    assert!(
        user[1]["image"]["source"]["bytes"]
            .as_str()
            .unwrap()
            .starts_with("iVBOR")
    );
}

#[tokio::test]
async fn structured_output_and_the_last_step_keep_tools() {
    let app = bedrock(SONNET_35, "[agent]\nmax_steps = 2\n").await;
    let format = json!({"type": "json_schema", "json_schema": {"name": "Health", "schema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}});
    app.llm.push(Step::text("{\"ok\": true}"));
    let (status, body) = app
        .chat_json(&json!({"ask": "healthy?", "response_format": format}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["metadata"]["response_format"]["valid"], true);
    let system = app.llm.requests()[0]["system"].to_string();
    assert!(system.contains("single JSON object"), "{system}");

    // max_steps = 2: the second call may not call tools, yet keeps toolConfig (the history
    // has toolUse blocks); a call the model makes anyway is dropped.
    app.llm
        .push(Step::tool("tooluse_1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::ToolCalls {
        content: Some("Answered on the last step.".into()),
        calls: vec![fake_llm::ToolCall {
            id: "tooluse_2".into(),
            name: "bash".into(),
            arguments: "{\"command\":\"echo no\"}".into(),
        }],
        usage: None,
    });
    let (status, body) = app.chat_json(&json!({"ask": "go"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Answered on the last step.");
    let requests = app.llm.requests();
    let last = &requests[requests.len() - 1];
    assert_eq!(last["toolConfig"], requests[1]["toolConfig"]);
    assert!(last["system"].to_string().contains("Do not call any tool"));
}

#[tokio::test]
async fn throttling_and_unavailability_are_retried() {
    let app = bedrock(SONNET_35, "").await;
    app.llm.push(Step::error(
        429,
        "Too many requests, please wait before trying again.",
    ));
    app.llm.push(Step::error(
        503,
        "Bedrock is unable to process your request.",
    ));
    app.llm.push(Step::FailMidStream {
        content: String::new(),
        kind: "throttlingException".into(),
        message: "slow down".into(),
    });
    app.llm.push(Step::text("Third time lucky."));
    let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Third time lucky.");
    assert_eq!(app.llm.request_count(), 4);
}

#[tokio::test]
async fn errors_report_the_providers_message() {
    let app = bedrock(SONNET_35, "").await;
    // Mid-stream: the text already went out; the exception ends the turn in an error event.
    app.llm.push(Step::FailMidStream {
        content: "Partial answer".into(),
        kind: "modelStreamErrorException".into(),
        message: "The model stream failed".into(),
    });
    let events = app.chat_sse(&json!({"ask": "hi", "stream": true})).await;
    assert_eq!(names(&events).last(), Some(&"error"), "{events:#?}");
    assert!(
        last_event(&events)
            .to_string()
            .contains("The model stream failed")
    );
    // A ValidationException is not retried and says what Bedrock said.
    app.llm.push(Step::error(
        400,
        "The model returned the following errors: bad input",
    ));
    let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
    assert!(status >= 400, "{body}");
    assert!(body.to_string().contains("bad input"), "{body}");
    assert_eq!(app.llm.remaining(), 0);
}

#[tokio::test]
async fn a_wrong_secret_is_a_clear_signature_error() {
    let app = spawn_app_with(&entry(SONNET_35, "")).await;
    app.llm.trust_aws_key(KEY_ID, "a-different-secret");
    app.llm.push(Step::text("never"));
    let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
    assert!(status >= 400, "{body}");
    let text = body.to_string();
    assert!(
        text.contains("signature we calculated does not match"),
        "{text}"
    );
    assert!(!text.contains(SECRET) && !text.contains("a-different-secret"));
    assert_eq!(app.llm.remaining(), 1, "refused before any answer");
}

#[tokio::test]
async fn cache_and_thinking_tokens_are_accounted() {
    let app = bedrock(
        SONNET_4,
        "thinking = { type = \"enabled\", budget_tokens = 2000 }\ninput_cost_per_token = 0.000003\noutput_cost_per_token = 0.000015\n",
    )
    .await;
    app.llm
        .push(Step::tool("tooluse_1", "TodoWrite", json!({"todos": []})));
    app.llm
        .push(Step::text_with_reasoning("The plan is empty.", "Done."));
    let (status, body) = app.chat_json(&json!({"ask": "plan it"})).await;
    assert_eq!(status, 200, "{body}");
    let requests = app.llm.requests();
    // The reasoning block came back with its signature (the fake checks it), first in its turn.
    let assistant = blocks(&app, 1, 1);
    assert!(assistant[0]["reasoningContent"]["reasoningText"]["signature"].is_string());
    assert_eq!(
        requests[1]["additionalModelRequestFields"]["thinking"]["budget_tokens"],
        2000
    );
    assert!(requests[1]["system"].to_string().contains("cachePoint"));
    let usage = &body["metadata"]["usage"];
    let read = usage["cache_read_input_tokens"].as_u64().unwrap_or(0);
    assert!(read > 100, "{usage}");
    let costs = &body["metadata"]["costs"];
    assert!(
        costs["cache_creation_input_tokens"].as_u64().unwrap_or(0) > 100,
        "{costs}"
    );
    assert!(costs["total_cost"].as_f64().unwrap() > 0.0);
}

#[tokio::test]
async fn an_outage_moves_to_the_fallback_model() {
    let app = bedrock(
        SONNET_35,
        "fallbacks = [\"fake\"]\n[llm]\nretry_max_attempts = 2\n",
    )
    .await;
    app.llm.push(Step::error(503, "Service unavailable"));
    app.llm.push(Step::error(503, "Service unavailable"));
    app.llm.push(Step::text("From the fallback."));
    let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "From the fallback.");
    assert!(body.to_string().contains("fake"), "{body}");
}

#[tokio::test]
async fn a_bearer_token_is_sent_without_sigv4() {
    let app = spawn_app_with(&format!(
        "default_model = \"br\"\n[models.br]\nmodel = \"bedrock/{SONNET_35}\"\naws_region_name = \"eu-west-1\"\napi_base = \"{{LLM_ORIGIN}}\"\napi_key = \"bedrock-api-key-test\"\n"
    ))
    .await;
    app.llm.trust_bedrock_bearer("bedrock-api-key-test");
    app.llm.push(Step::text("Bearer works."));
    let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Bearer works.");
    let headers = &app.llm.request_headers()[0];
    assert_eq!(headers["authorization"], "Bearer bedrock-api-key-test");
    assert!(headers.get("x-amz-date").is_none());
}

/// A model list as a HolmesGPT user writes it, no keys in it: the credentials come from the
/// environment, as `check` (a process of its own) sees it.
fn model_list(llm: &FakeLlm) -> std::path::PathBuf {
    let list =
        crate::helpers::scratch().join(format!("bedrock-{}.yaml", uuid::Uuid::new_v4().simple()));
    std::fs::write(
        &list,
        format!(
            "sonnet:\n  model: bedrock/{SONNET_35}\n  aws_region_name: us-east-1\n  aws_bedrock_runtime_endpoint: {}\n",
            llm.origin()
        ),
    )
    .unwrap();
    list
}

#[tokio::test]
async fn check_probes_bedrock_with_a_bearer_token_and_web_identity() {
    let llm = FakeLlm::start().await;
    llm.trust_bedrock_bearer("env-bearer-token");
    llm.push(Step::text("OK"));
    let list = model_list(&llm);
    let out = crate::cli::triage_env(
        &[
            ("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap()),
            ("AWS_BEARER_TOKEN_BEDROCK", "env-bearer-token"),
        ],
        &["check"],
    )
    .await;
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        report.contains("sonnet") && report.contains("reachable"),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!report.contains("env-bearer-token"));

    // Web identity (IRSA): STS swaps the token file's token for credentials, which sign.
    let token_file =
        crate::helpers::scratch().join(format!("web-identity-{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&token_file, "web-identity-jwt").unwrap();
    llm.trust_web_identity("arn:aws:iam::123456789012:role/triage", "web-identity-jwt");
    llm.push(Step::text("OK"));
    let sts = format!("{}/sts", llm.origin());
    let out = crate::cli::triage_env(
        &[
            ("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap()),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.to_str().unwrap()),
            ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/triage"),
            ("AWS_ENDPOINT_URL_STS", &sts),
        ],
        &["check"],
    )
    .await;
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        report.contains("reachable"),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(llm.sts_requests(), 1);
    let _ = std::fs::remove_file(list);
    let _ = std::fs::remove_file(token_file);
}

#[tokio::test]
async fn compaction_summarises_then_answers() {
    assert_compaction_summarises_then_answers(&bedrock(SONNET_35, SMALL_WINDOW).await).await;
}

/// The fake refuses what Bedrock refuses, so the flows above passing means triage's requests
/// are valid: each request here breaks one rule.
#[tokio::test]
async fn the_fake_refuses_what_bedrock_refuses() {
    let llm = FakeLlm::start().await;
    llm.trust_bedrock_bearer("k");
    llm.push(Step::text("never"));
    let url = format!(
        "{}/model/{}/converse-stream",
        llm.origin(),
        "anthropic.claude-3-5-sonnet-20240620-v1%3A0"
    );
    let client = reqwest::Client::new();
    let send = |body: Value, auth: &'static str| {
        let request = client
            .post(&url)
            .header("authorization", auth)
            .header("content-type", "application/json")
            .body(body.to_string());
        async move {
            let r = request.send().await.expect("fake answers");
            (r.status().as_u16(), r.text().await.unwrap_or_default())
        }
    };
    let user = |text: &str| json!({"role": "user", "content": [{"text": text}]});
    let call = json!({"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "t1", "name": "bash", "input": {}}}]});
    let result = json!({"role": "user", "content": [
        {"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}]}}]});
    let tools = json!({"tools": [{"toolSpec": {"name": "bash", "inputSchema": {"json": {"type": "object"}}}}]});
    for (body, expected) in [
        (
            json!({"messages": [user("a"), call, result.clone()]}),
            "toolConfig field must be defined",
        ),
        (json!({"messages": [user("a"), user("b")]}), "alternate"),
        (
            json!({"messages": [{"role": "user", "content": [{"text": " "}]}]}),
            "blank",
        ),
        (
            json!({"messages": [user("a"), {"role": "assistant", "content": [{"text": "x"}]}, result],
                "toolConfig": tools}),
            "does not match any toolUse",
        ),
        (
            json!({"messages": [user("a"), {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "t", "signature": "forged"}}},
            {"text": "x"}]}, user("b")]}),
            "signature",
        ),
    ] {
        let (status, text) = send(body, "Bearer k").await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains(expected), "{expected}: {text}");
    }
    let (status, text) = send(json!({"messages": [user("a")]}), "Bearer wrong").await;
    assert_eq!(status, 403, "{text}");
    assert_eq!(llm.remaining(), 1, "every refusal came before the script");
}

/// One eventstream frame as Bedrock encodes it.
fn frame(message_type: &str, kind: &str, payload: &Value) -> Vec<u8> {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    let kind_header = match message_type {
        "exception" => ":exception-type",
        _ => ":event-type",
    };
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String(message_type.to_owned().into()),
        ))
        .add_header(Header::new(
            kind_header,
            HeaderValue::String(kind.to_owned().into()),
        ));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).expect("frame");
    out
}

/// A hostile or broken endpoint: a frame length that lies (far too large, too small, past the
/// end of the body), a corrupted CRC, an answer without `messageStop`, a redacted reasoning
/// block that never ends. Each ends the turn in an error naming the fault, one request each.
#[tokio::test]
async fn hostile_frames_end_in_clear_errors() {
    let app = bedrock(SONNET_35, "").await;
    let text = frame(
        "event",
        "contentBlockDelta",
        &json!({"contentBlockIndex": 0, "delta": {"text": "hi"}}),
    );
    let mut corrupt = text.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let mut endless_redaction = Vec::new();
    let piece = "r".repeat(1024 * 1024);
    for _ in 0..5 {
        endless_redaction.extend(frame(
            "event",
            "contentBlockDelta",
            &json!({"contentBlockIndex": 0,
                "delta": {"reasoningContent": {"redactedContent": piece}}}),
        ));
    }
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            [&[0x7f, 0xff, 0xff, 0xff][..], &[0; 12]].concat(),
            "eventstream frame of 2147483647 bytes",
        ),
        (
            [&[0, 0, 0, 3][..], &[0; 12]].concat(),
            "eventstream frame of 3 bytes",
        ),
        (text[..text.len() - 3].to_vec(), "ended inside a frame"),
        (corrupt, "unreadable eventstream frame"),
        (text.clone(), "ended in the middle of the answer"),
        (endless_redaction, "redacted reasoning exceeded"),
    ];
    for (n, (body, expected)) in cases.into_iter().enumerate() {
        app.llm.push(Step::Raw { body: body.into() });
        let events = app.chat_sse(&json!({"ask": "hi", "stream": true})).await;
        assert_eq!(
            names(&events).last(),
            Some(&"error"),
            "case {n}: {events:#?}"
        );
        let error = last_event(&events).to_string();
        assert!(error.contains(expected), "case {n}: {error}");
        assert_eq!(app.llm.request_count(), n + 1, "case {n}: not retried");
    }
}

/// A hostile endpoint echoing the secret key in a throttling exception after output went out:
/// the error is masked and the call not retried (its output would be duplicated).
#[tokio::test]
async fn a_late_exception_is_masked_and_not_retried() {
    let app = bedrock(SONNET_35, "").await;
    app.llm.push(Step::FailMidStream {
        content: "Partial answer".into(),
        kind: "throttlingException".into(),
        message: format!("slow down, {SECRET}"),
    });
    app.llm.push(Step::text("never"));
    let events = app.chat_sse(&json!({"ask": "hi", "stream": true})).await;
    assert_eq!(names(&events).last(), Some(&"error"), "{events:#?}");
    let all = format!("{events:?}");
    assert!(!all.contains(SECRET), "{all}");
    assert!(last_event(&events).to_string().contains("slow down"));
    // Sent once: the answer is not asked for again after output went out.
    assert_eq!(app.llm.request_count(), 1);
}

/// Refusals to open and failed streams alternating: one retry budget for both
/// (`retry_max_attempts`, 5 by default), not one for each stream retry's opens.
#[tokio::test]
async fn opening_and_stream_retries_share_one_budget() {
    let app = bedrock(SONNET_35, "").await;
    for _ in 0..6 {
        app.llm.push(Step::error(429, "Too many requests."));
        app.llm.push(Step::FailMidStream {
            content: String::new(),
            kind: "throttlingException".into(),
            message: "slow down".into(),
        });
    }
    app.llm.push(Step::text("never"));
    let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
    assert!(status >= 400, "{body}");
    assert_eq!(app.llm.request_count(), 5);
}
