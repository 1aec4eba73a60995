//! The native `gemini/` and `vertex_ai/` providers through `/api/chat`, against the fake's
//! Gemini and Vertex endpoints, which refuse (HTTP 400 INVALID_ARGUMENT, as Gemini does) every
//! request the real API refuses: roles, function responses answering the previous turn's
//! calls, the schema subset, thought signatures. Vertex calls carry a token the fake's token
//! endpoint issued for a JWT signed with the test service account's key.

use serde_json::{Value, json};

use crate::helpers::{TestApp, names, spawn_app_with};
use crate::provider_common::{
    SMALL_WINDOW, assert_a_leaving_client_cancels, assert_answered,
    assert_approval_resumes_statelessly, assert_compaction_summarises_then_answers,
    assert_failure_before_output_is_retried, assert_frontend_tool_pauses_and_resumes,
    assert_plain_answer_streamed_and_not, assert_structured_output_repaired,
    assert_two_tool_rounds_answered, last_event, request_blocks,
};
use fake_llm::{FakeLlm, Step};

const GEMINI: &str = "default_model = \"gem\"\n[models.gem]\nmodel = \"gemini/gemini-2.5-flash\"\napi_base = \"{LLM_ORIGIN}\"\napi_key = \"AIza-test\"\n";
/// A test-only key (tests/fixtures), trusted by nothing but the fake.
const TEST_KEY: &str = include_str!("../fixtures/TEST-ONLY-gcp-service-account-key.pem");
const SA_EMAIL: &str = "triage-test@test-project.iam.gserviceaccount.com";

async fn gemini(extra: &str) -> TestApp {
    let app = spawn_app_with(&format!("{GEMINI}{extra}")).await;
    app.llm.set_gemini_api_key("AIza-test");
    app
}

/// The parts of content `i` of request `n`.
fn parts(app: &TestApp, n: usize, i: usize) -> Vec<Value> {
    request_blocks(app, n, ("contents", "parts"), i)
}

#[tokio::test]
async fn plain_answer_streamed_and_not() {
    let app = gemini("").await;
    let (_, request) =
        assert_plain_answer_streamed_and_not(&app, Step::text("Streamed answer.")).await;
    assert!(request["systemInstruction"]["parts"][0]["text"].is_string());
    assert_eq!(request["contents"][0]["role"], "user");
    assert_eq!(
        request["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
    let declarations = request["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap();
    assert!(!declarations.is_empty());
    assert!(!request.to_string().contains("additionalProperties"));
}

#[tokio::test]
async fn two_tool_rounds_answer_calls_in_order() {
    let app = gemini("").await;
    assert_two_tool_rounds_answered(&app, ["x1", "x2", "x3"]).await;
    // user, model(call), user(response), model(2 calls), user(2 responses).
    assert_eq!(
        parts(&app, 2, 3)[0]["functionCall"]["args"],
        json!({"command": "echo one"})
    );
    let answers = parts(&app, 2, 4);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["functionResponse"]["name"], "bash");
    assert!(
        answers[0]["functionResponse"]["response"]["result"]
            .as_str()
            .unwrap()
            .contains("one")
    );
    assert!(
        answers[1]["functionResponse"]["response"]["error"].is_string(),
        "{answers:?}"
    );
}

#[tokio::test]
async fn approvals_resume_statelessly() {
    let app = gemini("").await;
    assert_approval_resumes_statelessly(&app, "gemini-approval").await;
    let answers = parts(&app, 1, 2);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|p| p["functionResponse"]["name"] == "bash")
    );
}

#[tokio::test]
async fn frontend_tools_pause_and_resume() {
    let app = gemini("").await;
    let tools = json!([{"name": "show_chart", "description": "Render a chart", "mode": "pause",
        "parameters": {"type": "object", "additionalProperties": false,
                       "properties": {"metric": {"type": ["string", "null"]}}}}]);
    let (_, offering) = assert_frontend_tool_pauses_and_resumes(&app, &tools, "fe").await;
    let offered = offering["tools"].to_string();
    assert!(offered.contains("\"nullable\":true"), "{offered}");
    assert_eq!(
        parts(&app, 1, 2)[0]["functionResponse"]["response"]["result"],
        "peak 93%"
    );
}

#[tokio::test]
async fn images_become_inline_data() {
    const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let app = gemini("vision = true\n").await;
    app.llm.push(Step::text("A dashboard."));
    let (status, body) = app
        .chat_json(&json!({"ask": "What is this?", "images": [PNG]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let user = parts(&app, 0, 0);
    assert_eq!(user[1]["inlineData"]["mimeType"], "image/png");
    assert!(
        user[1]["inlineData"]["data"]
            .as_str()
            .unwrap()
            .starts_with("iVBOR")
    );
}

#[tokio::test]
async fn structured_output_beside_tools_is_an_instruction_and_checked() {
    let app = gemini("").await;
    let requests = assert_structured_output_repaired(&app).await;
    let request = &requests[0];
    // Gemini refuses a JSON response type beside function declarations.
    assert!(
        request
            .pointer("/generationConfig/responseMimeType")
            .is_none()
    );
    assert!(
        request["systemInstruction"]
            .to_string()
            .contains("single JSON object")
    );
}

#[tokio::test]
async fn rate_limits_are_retried_after_googles_retry_info() {
    let app = gemini("").await;
    app.llm.push(Step::Error {
        status: 429,
        message: "Resource has been exhausted (e.g. check quota).".into(),
        retry_after: Some("0.2".into()),
    });
    app.llm.push(Step::text("Second time lucky."));
    let started = std::time::Instant::now();
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Second time lucky.");
    assert_eq!(app.llm.request_count(), 2);
    // The wait the body asked for (0.2 s), not the test back-off (at most 50 ms).
    assert!(started.elapsed() >= std::time::Duration::from_millis(200));
}

#[tokio::test]
async fn invalid_requests_bad_keys_and_blocked_answers_are_clear_errors() {
    let app = gemini("").await;
    app.llm.push(Step::error(
        400,
        "* GenerateContentRequest.contents: custom refusal",
    ));
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    assert_eq!(names(&events).last(), Some(&"error"));
    let text = last_event(&events)["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains("HTTP 400") && text.contains("custom refusal"),
        "{text}"
    );
    assert_eq!(app.llm.request_count(), 1, "a 400 is not retried");

    app.llm.push(Step::Raw {
        body: "data: {\"candidates\":[{\"finishReason\":\"SAFETY\",\"index\":0}]}\r\n\r\n".into(),
    });
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    let text = last_event(&events)["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("SAFETY"), "{text}");

    app.llm
        .push(Step::error(403, "Permission denied on resource project."));
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    let text = last_event(&events)["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains("model 'gem'")
            && text.contains("GEMINI_API_KEY")
            && text.contains("Permission denied"),
        "{text}"
    );

    app.llm.set_gemini_api_key("another-key");
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    let text = last_event(&events)["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("API key not valid"), "{text}");
}

#[tokio::test]
async fn an_error_mid_stream_ends_in_an_error_event() {
    let app = gemini("").await;
    app.llm.push(Step::FailMidStream {
        content: "Partial answer".into(),
        kind: "internal".into(),
        message: "Internal error encountered.".into(),
    });
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    assert_eq!(names(&events).last(), Some(&"error"), "{events:#?}");
    let text = last_event(&events)["description"].as_str().unwrap();
    assert!(
        text.contains("INTERNAL: Internal error encountered."),
        "{text}"
    );
}

#[tokio::test]
async fn thinking_signatures_round_trip_and_thoughts_count_as_output() {
    let app = gemini("reasoning_effort = \"high\"\n").await;
    app.llm
        .push(Step::tool("t1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::Text {
        content: "Done thinking.".into(),
        reasoning: Some("Let me weigh the evidence carefully".into()),
        usage: Some(fake_llm::Usage {
            prompt_tokens: 0,
            completion_tokens: 5,
        }),
    });
    let (status, body) = app.chat_json(&json!({"ask": "think"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Done thinking.");
    let config = &app.llm.requests()[0]["generationConfig"]["thinkingConfig"];
    assert_eq!(
        config,
        &json!({"thinkingBudget": 4096, "includeThoughts": true})
    );
    // The signed call went back with its signature (the fake refuses it otherwise).
    let model_turn = parts(&app, 1, 1);
    assert!(
        model_turn[0]["thoughtSignature"].is_string(),
        "{model_turn:?}"
    );
    // 5 answer tokens plus 3 a word of the six-word thought.
    let usage = &body["metadata"]["usage"];
    assert_eq!(usage["completion_tokens"], 5 + 18, "{body:#}");

    // A stateless follow-up sends the whole history back: both signatures go with it.
    let history = body["conversation_history"].clone();
    assert!(
        history.to_string().contains("gemini_thought_signature"),
        "{history:#}"
    );
    app.llm.push(Step::text("Still sure."));
    let (status, body) = app
        .chat_json(&json!({"ask": "sure?", "conversation_history": history}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Still sure.");
    let sent = app.llm.requests()[2]["contents"].to_string();
    assert_eq!(sent.matches("thoughtSignature").count(), 2, "{sent}");
}

#[tokio::test]
async fn the_last_step_keeps_tools_with_mode_none() {
    let app = gemini("[agent]\nmax_steps = 2\n").await;
    app.llm
        .push(Step::tool("t1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("Answered on the last step."));
    let (status, body) = app.chat_json(&json!({"ask": "go"})).await;
    assert_eq!(status, 200, "{body}");
    let last = &app.llm.requests()[1];
    assert_eq!(
        last["toolConfig"],
        json!({"functionCallingConfig": {"mode": "NONE"}})
    );
    assert_eq!(last["tools"], app.llm.requests()[0]["tools"]);
}

/// A service-account key (inline, as `vertex_credentials` may hold it) whose token URI is the
/// fake's.
fn inline_key() -> String {
    json!({"type": "service_account", "project_id": "test-project",
        "private_key_id": "test", "private_key": TEST_KEY, "client_email": SA_EMAIL,
        "token_uri": "{LLM_ORIGIN}/token"})
    .to_string()
}

#[tokio::test]
async fn vertex_gemini_and_claude_with_a_service_account() {
    let vertex = |key_name: &str, model: &str| {
        format!(
            "[models.{key_name}]\nmodel = \"vertex_ai/{model}\"\napi_base = \"{{LLM_ORIGIN}}\"\nvertex_project = \"test-project\"\nvertex_location = \"us-east5\"\nvertex_credentials = '''{}'''\n",
            inline_key()
        )
    };
    let config = format!(
        "default_model = \"vg\"\n{}{}",
        vertex("vg", "gemini-2.5-pro"),
        vertex("vc", "claude-sonnet-4-5@20250929")
    );
    let app = spawn_app_with(&config).await;
    app.llm.trust_service_account(SA_EMAIL, TEST_KEY);
    app.llm
        .push(Step::tool("v1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("Vertex Gemini answered."));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Vertex Gemini answered.");

    app.llm
        .push(Step::tool("toolu_v", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("Vertex Claude answered."));
    let (status, body) = app.chat_json(&json!({"ask": "q", "model": "vc"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Vertex Claude answered.");
    let claude = &app.llm.requests()[3];
    assert_eq!(claude["anthropic_version"], "vertex-2023-10-16");
    assert!(claude.get("model").is_none());
    assert_eq!(claude["stream"], true);
    // One token per model for its two calls: cached until near its expiry.
    assert_eq!(app.llm.google_token_requests(), 2);
}

/// The fake refuses what Gemini refuses, so the tests above prove something.
#[tokio::test]
async fn the_fake_refuses_what_gemini_refuses() {
    let llm = FakeLlm::start().await;
    let client = reqwest::Client::new();
    let url = format!(
        "{}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        llm.origin()
    );
    let user = |t: &str| json!({"role": "user", "parts": [{"text": t}]});
    let call = json!({"role": "model", "parts": [{"functionCall": {"name": "t", "args": {}}}]});
    let tools = json!([{"functionDeclarations": [{"name": "t"}]}]);
    let with_schema = |s: Value| {
        json!({"contents": [user("q")],
        "tools": [{"functionDeclarations": [{"name": "t", "parameters": s}]}]})
    };
    let refused = [
        (
            with_schema(
                json!({"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string"}}}),
            ),
            "additionalProperties",
        ),
        (
            with_schema(json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}})),
            "$ref",
        ),
        (
            with_schema(
                json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}),
            ),
            "type",
        ),
        (
            with_schema(json!({"type": "object", "properties": {}})),
            "non-empty",
        ),
        (json!({"contents": [user("a"), user("b")]}), "alternate"),
        (
            json!({"contents": [user("q"), call, {"role": "user", "parts": [{"text": "no answer"}]}], "tools": tools}),
            "number of function response parts",
        ),
        (
            json!({"contents": [user("q"), call, {"role": "user", "parts": [{"functionResponse": {"name": "t", "response": {}}}]}]}),
            "not declared",
        ),
        (
            json!({"contents": [user("q")], "tools": tools, "generationConfig": {"responseMimeType": "application/json"}}),
            "mime type",
        ),
    ];
    for (body, expected) in refused {
        let resp = client
            .post(&url)
            .header("x-goog-api-key", "k")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{body}");
        let err = crate::helpers::json_body(resp).await;
        assert_eq!(err["error"]["status"], "INVALID_ARGUMENT");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message} for {body}");
    }
    let ok = json!({"contents": [user("hi")]});
    let resp = client.post(&url).body(ok.to_string()).send().await.unwrap();
    assert_eq!(resp.status(), 403, "no key");
    // Vertex: only tokens the fake issued.
    let vertex = format!(
        "{}/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        llm.origin()
    );
    let resp = client
        .post(&vertex)
        .bearer_auth("ya29.forged")
        .body(ok.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    // A JWT signed by another key is refused by the token endpoint.
    llm.trust_service_account(SA_EMAIL, TEST_KEY);
    let forged = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln";
    let resp = client
        .post(format!("{}/token", llm.origin()))
        .body(forged)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    llm.push(Step::text("fine"));
    let resp = client
        .post(&url)
        .header("x-goog-api-key", "k")
        .body(ok.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(
        text.contains("\"finishReason\":\"STOP\"") && text.contains("fine"),
        "{text}"
    );
}

#[tokio::test]
async fn check_probes_gemini_and_vertex_through_the_metadata_server() {
    let llm = FakeLlm::start().await;
    let list =
        crate::helpers::scratch().join(format!("gemini-{}.yaml", uuid::Uuid::new_v4().simple()));
    std::fs::write(
        &list,
        format!(
            "flash:\n  model: gemini/gemini-2.5-flash\n  api_base: {o}\npro:\n  model: vertex_ai/gemini-2.5-pro\n  api_base: {o}\n  vertex_project: test-project\nopus:\n  model: vertex_ai/claude-opus-4-1\n  api_base: {o}\n  vertex_project: test-project\n  vertex_location: us-east5\n",
            o = llm.origin()
        ),
    )
    .unwrap();
    let host = llm.origin().trim_start_matches("http://").to_owned();
    llm.push(Step::text("OK"));
    let out = crate::cli::triage_env(
        &[
            ("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap()),
            ("GEMINI_API_KEY", "AIza-from-env"),
            ("GCE_METADATA_HOST", &host),
        ],
        &["check"],
    )
    .await;
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = |key: &str| {
        report
            .lines()
            .find(|l| l.contains(key))
            .unwrap_or("")
            .to_owned()
    };
    assert!(
        line("flash").contains("reachable"),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(line("pro").contains("reachable"), "{report}");
    assert!(line("opus").contains("reachable"), "{report}");
    assert_eq!(
        llm.google_token_requests(),
        2,
        "one metadata-server token per Vertex model"
    );
    // Claude's probe was a valid Vertex rawPredict request.
    assert_eq!(llm.request_count(), 1);
    let _ = std::fs::remove_file(list);
}

#[tokio::test]
async fn an_error_before_any_output_is_retried_and_a_leaving_client_cancels() {
    let app = gemini("").await;
    assert_failure_before_output_is_retried(&app, "internal", "Internal error encountered.").await;
    assert_a_leaving_client_cancels(&app, "Gemini").await;
}

#[tokio::test]
async fn an_outage_moves_to_the_fallback_model() {
    let app = gemini("fallbacks = [\"fake\"]\n[llm]\nretry_max_attempts = 2\n").await;
    app.llm.push(Step::error(503, "The model is overloaded."));
    app.llm.push(Step::error(503, "The model is overloaded."));
    app.llm.push(Step::text("From the fallback."));
    let events = app.chat_sse(&json!({"ask": "hi", "stream": true})).await;
    assert_answered(&events, "From the fallback.");
    let note = events
        .iter()
        .find(|e| e.name == "model_fallback")
        .unwrap_or_else(|| panic!("no model_fallback in {:?}", names(&events)));
    assert_eq!(note.data["requested_model"], "gem");
    assert_eq!(note.data["model"], "fake");
    // Two Gemini requests, then one chat-completions request to the fallback.
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[1]["contents"].is_array());
    assert!(requests[2]["messages"].is_array(), "{}", requests[2]);
}

#[tokio::test]
async fn compaction_summarises_then_answers() {
    assert_compaction_summarises_then_answers(&gemini(SMALL_WINDOW).await).await;
}
