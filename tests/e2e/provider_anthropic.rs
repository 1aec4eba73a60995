//! The native `anthropic/` provider through `/api/chat`, against the fake's Messages API, which
//! refuses (HTTP 400, as Anthropic does) every request the real API would refuse: each flow
//! here passing means triage's requests are valid Messages requests.

use serde_json::{Value, json};

use crate::helpers::{TestApp, names, spawn_app_with};
use crate::provider_common::{
    SMALL_WINDOW, assert_a_leaving_client_cancels, assert_approval_resumes_statelessly,
    assert_compaction_summarises_then_answers, assert_failure_before_output_is_retried,
    assert_frontend_tool_pauses_and_resumes, assert_plain_answer_streamed_and_not,
    assert_structured_output_repaired, assert_two_tool_rounds_answered, last_event, request_blocks,
};
use fake_llm::{FakeLlm, Step};

const CLAUDE: &str = "default_model = \"claude\"\n[models.claude]\nmodel = \"anthropic/claude-sonnet-4-5\"\napi_base = \"{LLM}\"\napi_key = \"sk-ant-test\"\n";
const THINKING: &str = "thinking = { type = \"enabled\", budget_tokens = 2000 }\n";

async fn claude(extra: &str) -> TestApp {
    spawn_app_with(&format!("{CLAUDE}{extra}")).await
}

/// The content blocks of message `i` of request `n`.
fn blocks(app: &TestApp, n: usize, i: usize) -> Vec<Value> {
    request_blocks(app, n, ("messages", "content"), i)
}

#[tokio::test]
async fn plain_answer_streamed_and_not() {
    let app = claude("").await;
    let (body, request) = assert_plain_answer_streamed_and_not(
        &app,
        Step::text_with_reasoning("no thinking asked", "Streamed answer."),
    )
    .await;
    assert_eq!(body["metadata"]["max_output_tokens"], 64000);
    assert_eq!(request["model"], "claude-sonnet-4-5");
    assert_eq!(request["max_tokens"], 64000);
    assert_eq!(request["stream"], true);
    // The system prompt is top-level and a cache breakpoint; so is the last message.
    assert_eq!(request["system"][0]["cache_control"]["type"], "ephemeral");
    assert!(
        request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["role"] != "system")
    );
    let last = request["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last["content"].as_array().unwrap().last().unwrap()["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(request["tool_choice"], json!({"type": "auto"}));
    assert!(request["tools"][0]["input_schema"].is_object());
}

#[tokio::test]
async fn two_tool_rounds_pair_results_with_their_calls() {
    let app = claude("").await;
    assert_two_tool_rounds_answered(&app, ["toolu_1", "toolu_2", "toolu_3"]).await;
    // Request 3: user, assistant(tool_use), user(tool_result), assistant(2 tool_use), user(2 results).
    let results = blocks(&app, 2, 4);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["tool_use_id"], "toolu_2");
    assert_eq!(results[1]["tool_use_id"], "toolu_3");
    assert_eq!(results[1]["is_error"], true, "{results:?}");
    assert_eq!(
        blocks(&app, 2, 3)[0]["input"],
        json!({"command": "echo one"})
    );
}

#[tokio::test]
async fn approvals_resume_statelessly() {
    let app = claude("").await;
    let approved = assert_approval_resumes_statelessly(&app, "anthropic-approval").await;
    assert_eq!(approved, "risky");
    let ids: Vec<Value> = blocks(&app, 1, 2)
        .iter()
        .map(|b| b["tool_use_id"].clone())
        .collect();
    assert_eq!(ids, [json!("safe"), json!("risky")]);
}

#[tokio::test]
async fn frontend_tools_pause_and_resume() {
    let app = claude("").await;
    let tools = json!([{"name": "show_chart", "description": "Render a chart", "mode": "pause",
        "parameters": {"type": "object", "properties": {"metric": {"type": "string"}}}}]);
    let (id, _) = assert_frontend_tool_pauses_and_resumes(&app, &tools, "toolu_fe").await;
    assert_eq!(id, "toolu_fe");
    assert_eq!(blocks(&app, 1, 2)[0]["content"], "peak 93%");
}

#[tokio::test]
async fn images_become_image_blocks() {
    const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let app = claude("vision = true\n").await;
    app.llm.push(Step::text("A dashboard."));
    let (status, body) = app
        .chat_json(&json!({"ask": "What is this?", "images": [PNG, "https://example.com/a.png"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let user = blocks(&app, 0, 0);
    assert_eq!(user[1]["source"]["type"], "base64");
    assert_eq!(user[1]["source"]["media_type"], "image/png");
    assert_eq!(
        user[2]["source"],
        json!({"type": "url", "url": "https://example.com/a.png"})
    );
}

#[tokio::test]
async fn compaction_summarises_then_answers() {
    assert_compaction_summarises_then_answers(&claude(SMALL_WINDOW).await).await;
}

#[tokio::test]
async fn structured_output_is_asked_in_the_system_prompt_and_checked() {
    let app = claude("").await;
    let requests = assert_structured_output_repaired(&app).await;
    let system = requests[0]["system"].to_string();
    assert!(
        system.contains("single JSON object") && system.contains("\\\"ok\\\""),
        "{system}"
    );
    assert!(requests[0].get("response_format").is_none());
    // The repair forbids calls and keeps the definitions.
    assert_eq!(requests[1]["tool_choice"], json!({"type": "none"}));
}

#[tokio::test]
async fn rate_limits_and_overload_are_retried_after_retry_after() {
    let app = claude("").await;
    let busy = |status: u16, message: &str| Step::Error {
        status,
        message: message.into(),
        retry_after: Some("0".into()),
    };
    app.llm.push(busy(
        429,
        "Number of request tokens has exceeded your per-minute rate limit",
    ));
    app.llm.push(busy(529, "Overloaded"));
    app.llm.push(Step::text("Third time lucky."));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Third time lucky.");
    assert_eq!(app.llm.request_count(), 3);
}

#[tokio::test]
async fn invalid_requests_and_bad_keys_report_the_providers_message() {
    let app = claude("").await;
    app.llm.push(Step::error(
        400,
        "messages.0: custom refusal from the provider",
    ));
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    let error = last_event(&events);
    assert_eq!(names(&events).last(), Some(&"error"));
    let text = error["description"].as_str().unwrap();
    assert!(
        text.contains("HTTP 400") && text.contains("custom refusal"),
        "{text}"
    );
    assert_eq!(app.llm.request_count(), 1, "a 400 is not retried");
    app.llm.push(Step::error(401, "invalid x-api-key"));
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    let text = last_event(&events)["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains("model 'claude'") && text.contains("ANTHROPIC_API_KEY"),
        "{text}"
    );
}

#[tokio::test]
async fn an_error_event_mid_stream_ends_in_an_error_event() {
    let app = claude("").await;
    app.llm.push(Step::FailMidStream {
        content: "Partial answer".into(),
        kind: "overloaded_error".into(),
        message: "Overloaded".into(),
    });
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    assert_eq!(names(&events).last(), Some(&"error"), "{events:#?}");
    let text = last_event(&events)["description"].as_str().unwrap();
    assert!(text.contains("overloaded_error: Overloaded"), "{text}");
}

#[tokio::test]
async fn an_overload_before_any_output_is_retried() {
    let app = claude("").await;
    assert_failure_before_output_is_retried(&app, "overloaded_error", "Overloaded").await;
}

#[tokio::test]
async fn a_client_that_leaves_cancels_the_call() {
    let app = claude("").await;
    assert_a_leaving_client_cancels(&app, "Messages").await;
}

#[tokio::test]
async fn cached_tokens_count_in_usage_and_cost() {
    let app = claude("input_cost_per_token = 0.000003\noutput_cost_per_token = 0.000015\n").await;
    app.llm
        .push(Step::tool("toolu_1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("Done."));
    let (status, body) = app.chat_json(&json!({"ask": "plan it"})).await;
    assert_eq!(status, 200, "{body}");
    // The second call read the prefix the first one wrote.
    let usage = &body["metadata"]["usage"];
    let read = usage["cache_read_input_tokens"].as_u64().unwrap_or(0);
    assert!(read > 1000, "{usage}");
    let prompt = usage["prompt_tokens"].as_u64().unwrap();
    assert!(prompt >= read + usage["cache_creation_input_tokens"].as_u64().unwrap_or(0));
    let costs = &body["metadata"]["costs"];
    let written = costs["cache_creation_input_tokens"].as_u64().unwrap();
    assert!(written > 1000, "{costs}");
    assert_eq!(costs["cache_read_input_tokens"].as_u64().unwrap(), read);
    // Cache reads are billed at a tenth: the cost is below the uncached price.
    let full = costs["prompt_tokens"].as_f64().unwrap() * 0.000003
        + costs["completion_tokens"].as_f64().unwrap() * 0.000015;
    let cost = costs["total_cost"].as_f64().unwrap();
    assert!(cost > 0.0 && cost < full, "{cost} vs {full}");
}

#[tokio::test]
async fn thinking_blocks_round_trip_across_a_stateless_resume() {
    let app = claude(THINKING).await;
    let dir = crate::helpers::tool_writable_dir("anthropic-thinking");
    let command = format!("touch {}/thought", dir.display());
    app.llm
        .push(Step::tool("toolu_r", "bash", json!({"command": command})));
    let events = app
        .chat_sse(&json!({"ask": "fix it", "enable_tool_approval": true}))
        .await;
    assert!(names(&events).contains(&"token_count"));
    let request = &app.llm.requests()[0];
    assert_eq!(
        request["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    assert!(request.get("temperature").is_none());
    let history = last_event(&events)["conversation_history"].clone();
    let assistant = history
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    let thought = &assistant["thinking_blocks"][0];
    assert_eq!(thought["type"], "thinking");
    assert!(
        thought["signature"].as_str().unwrap().starts_with("sig_"),
        "{assistant}"
    );
    assert!(
        assistant["reasoning_content"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    );

    // Resumed from the client's history: the block goes back first and unchanged.
    app.llm.push(Step::text_with_reasoning(
        "one two three four five six",
        "Fixed now.",
    ));
    let resume = json!({"ask": "", "enable_tool_approval": true, "conversation_history": history,
        "tool_decisions": [{"tool_call_id": "toolu_r", "approved": true}]});
    let (status, body) = app.chat_json(&resume).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(blocks(&app, 1, 1)[0], *thought);
    // Thinking tokens are output tokens: six thought, two answered.
    assert_eq!(body["metadata"]["usage"]["completion_tokens"], 8, "{body}");
    assert_eq!(body["analysis"], "Fixed now.");

    // A changed thinking block is refused by the provider, and the user reads why.
    let mut tampered = history.clone();
    for m in tampered.as_array_mut().unwrap() {
        if m["role"] == "assistant" {
            m["thinking_blocks"][0]["thinking"] = json!("edited");
        }
    }
    let mut resume = resume.clone();
    resume["conversation_history"] = tampered;
    let (status, body) = app.chat_json(&resume).await;
    assert_ne!(status, 200, "{body}");
    assert!(body.to_string().contains("signature"), "{body}");
}

#[tokio::test]
async fn the_last_step_keeps_tools_and_forbids_calls() {
    let app = claude("[agent]\nmax_steps = 2\n").await;
    app.llm
        .push(Step::tool("toolu_1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("Answered on the last step."));
    let (status, body) = app.chat_json(&json!({"ask": "go"})).await;
    assert_eq!(status, 200, "{body}");
    let last = &app.llm.requests()[1];
    assert_eq!(last["tool_choice"], json!({"type": "none"}));
    assert_eq!(last["tools"], app.llm.requests()[0]["tools"]);
}

/// The fake itself refuses what Anthropic refuses, so the tests above prove something.
#[tokio::test]
async fn the_fake_refuses_what_anthropic_refuses() {
    let llm = FakeLlm::start().await;
    let client = reqwest::Client::new();
    let url = format!("{}/messages", llm.base_url());
    let send = |body: Value, key: bool| {
        let mut r = client
            .post(&url)
            .header("anthropic-version", "2023-06-01")
            .body(body.to_string());
        if key {
            r = r.header("x-api-key", "k");
        }
        r.send()
    };
    let user = |c: Value| json!({"role": "user", "content": c});
    let ok = json!({"model": "m", "max_tokens": 10, "messages": [user(json!("hi"))]});
    let refused = [
        (
            json!({"model": "m", "messages": [user(json!("hi"))]}),
            "max_tokens",
        ),
        (
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "assistant", "content": "x"}]}),
            "alternate",
        ),
        (
            json!({"model": "m", "max_tokens": 10, "messages": [user(json!([{"type": "text", "text": ""}]))]}),
            "non-empty",
        ),
        (
            json!({"model": "m", "max_tokens": 10, "messages": [
            user(json!("q")),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            user(json!([{"type": "tool_result", "tool_use_id": "b"}]))],
            "tools": [{"name": "t", "input_schema": {"type": "object"}}]}),
            "tool_use_id",
        ),
        (
            json!({"model": "m", "max_tokens": 10, "messages": [
            user(json!("q")),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            user(json!([{"type": "tool_result", "tool_use_id": "a"}]))]}),
            "must define tools",
        ),
        (
            json!({"model": "m", "max_tokens": 3000, "thinking": {"type": "enabled", "budget_tokens": 2000},
            "messages": [user(json!("q")),
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "forged"}]},
                user(json!("again"))]}),
            "signature",
        ),
    ];
    for (body, expected) in refused {
        let resp = send(body.clone(), true).await.unwrap();
        assert_eq!(resp.status(), 400, "{body}");
        let err = crate::helpers::json_body(resp).await;
        assert_eq!(err["error"]["type"], "invalid_request_error");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message} for {body}");
    }
    assert_eq!(send(ok.clone(), false).await.unwrap().status(), 401);
    llm.push(Step::text("fine"));
    let resp = send(ok, true).await.unwrap();
    assert_eq!(resp.status(), 200);
    let message = crate::helpers::json_body(resp).await;
    assert_eq!(message["type"], "message");
    assert_eq!(
        message["content"][0],
        json!({"type": "text", "text": "fine"})
    );
    assert_eq!(message["stop_reason"], "end_turn");
}

#[tokio::test]
async fn check_probes_an_anthropic_model_from_a_model_list() {
    let llm = FakeLlm::start().await;
    llm.push(Step::text("OK"));
    let list =
        crate::helpers::scratch().join(format!("anthropic-{}.yaml", uuid::Uuid::new_v4().simple()));
    std::fs::write(
        &list,
        format!(
            "sonnet:\n  model: anthropic/claude-sonnet-4-5\n  api_base: {}\n  thinking:\n    type: enabled\n    budget_tokens: 4000\n",
            llm.base_url()
        ),
    )
    .unwrap();
    let out = crate::cli::triage_env(
        &[
            ("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap()),
            ("ANTHROPIC_API_KEY", "sk-ant-from-env"),
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
    // Not listed by GET /v1/models: a one-token Messages request decided, and it was valid.
    assert_eq!(llm.request_count(), 1);
    assert_eq!(llm.requests()[0]["model"], "claude-sonnet-4-5");
}

#[tokio::test]
async fn a_server_side_conversation_with_thinking_and_a_side_question() {
    use crate::conversations_api::{create, frames_until, post, state_is};
    let app = claude(THINKING).await;
    app.llm
        .push(Step::tool("toolu_1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("All pods are healthy."));
    let id = create(
        &app,
        json!({"initial_message": {"content": "Are my pods healthy?"}}),
    )
    .await;
    let frames = frames_until(&app, &id, None, state_is("finished")).await;
    assert!(
        frames.iter().any(|f| f.name == "ai_answer_end"),
        "{:?}",
        frames.iter().map(|f| &f.name).collect::<Vec<_>>()
    );
    // The tool loop's second call sent the stored thinking block back, signed.
    assert_eq!(blocks(&app, 1, 1)[0]["type"], "thinking");
    // A side question over a history with tool calls: definitions sent, calls forbidden.
    app.llm.push(Step::text("One check, healthy."));
    let (status, asked) = post(
        &app,
        &format!("/api/conversations/{id}/ask_agent"),
        json!({"question": "Summarise in one line"}),
    )
    .await;
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["response"], "One check, healthy.");
    let side = app.llm.requests().last().unwrap().clone();
    assert_eq!(side["tool_choice"], json!({"type": "none"}));
    assert!(side["tools"].as_array().is_some_and(|t| !t.is_empty()));
}
