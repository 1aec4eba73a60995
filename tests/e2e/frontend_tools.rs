//! Frontend tools: pause (two requests), noop, validation errors.

use serde_json::{Value, json};

use crate::helpers::{names, spawn_app};
use fake_llm::Step;

fn chart_tool(mode: &str) -> Value {
    json!({
        "name": "show_chart",
        "description": "Render a chart in the user's browser",
        "mode": mode,
        "parameters": {"type": "object", "properties": {"metric": {"type": "string"}}, "required": ["metric"]}
    })
}

#[tokio::test]
async fn pause_round_trip_over_two_requests() {
    let app = spawn_app().await;
    app.llm.push(Step::tool(
        "call_fe",
        "show_chart",
        json!({"metric": "cpu"}),
    ));
    let tools = json!([chart_tool("pause")]);
    let events = app
        .chat_sse(&json!({"ask": "Show me CPU", "frontend_tools": tools}))
        .await;
    assert_eq!(
        names(&events),
        [
            "token_count",
            "start_tool_calling",
            "token_count",
            "approval_required"
        ]
    );
    // The LLM was offered the frontend tool next to the built-in ones.
    let offered: Vec<_> = app.llm.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        offered.contains(&"show_chart".to_owned()) && offered.contains(&"TodoWrite".to_owned())
    );
    let paused = &events[3].data;
    assert_eq!(paused["content"], Value::Null);
    assert_eq!(paused["analysis"], Value::Null);
    assert_eq!(paused["requires_approval"], true);
    assert_eq!(paused["pending_approvals"], json!([]));
    assert_eq!(
        paused["pending_frontend_tool_calls"],
        json!([{"tool_call_id": "call_fe", "tool_name": "show_chart", "arguments": {"metric": "cpu"}}])
    );
    let history = paused["conversation_history"].clone();
    let last = history.as_array().unwrap().last().unwrap();
    assert_eq!(last["tool_calls"][0]["pending_frontend"], true);

    // Request 2: the client ran the tool.
    app.llm.push(Step::text("CPU peaked at 93%."));
    let events = app
        .chat_sse(&json!({
            "ask": "",
            "conversation_history": history,
            "frontend_tools": tools,
            "frontend_tool_results": [{"tool_call_id": "call_fe", "tool_name": "show_chart", "result": "rendered: peak 93% at 12:04"}]
        }))
        .await;
    assert_eq!(
        names(&events),
        ["tool_calling_result", "token_count", "ai_answer_end"]
    );
    assert_eq!(events[0].data["tool_call_id"], "call_fe");
    assert_eq!(events[0].data["description"], "Frontend tool: show_chart");
    assert_eq!(events[0].data["result"]["status"], "success");
    assert_eq!(events[2].data["analysis"], "CPU peaked at 93%.");
    // The LLM saw the client's result right after its tool call, and no pending flags survive.
    let sent = app.llm_messages(1);
    let roles: Vec<_> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(sent[3]["content"], "rendered: peak 93% at 12:04");
    let final_history = events[2].data["conversation_history"].to_string();
    assert!(!final_history.contains("pending_frontend"));
}

#[tokio::test]
async fn missing_result_becomes_an_error_and_a_new_ask_follows_the_results() {
    let app = spawn_app().await;
    app.llm.push(Step::tools(vec![
        ("a", "show_chart", json!({"metric": "cpu"})),
        ("b", "show_chart", json!({"metric": "mem"})),
    ]));
    let tools = json!([chart_tool("pause")]);
    let events = app
        .chat_sse(&json!({"ask": "charts", "frontend_tools": tools}))
        .await;
    let paused = &events.last().unwrap().data;
    assert_eq!(
        paused["pending_frontend_tool_calls"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    app.llm.push(Step::text("ok"));
    let events = app
        .chat_sse(&json!({
            "ask": "and memory?",
            "conversation_history": paused["conversation_history"],
            "frontend_tools": tools,
            "frontend_tool_results": [
                {"tool_call_id": "a", "tool_name": "show_chart", "result": "cpu chart"},
                {"tool_call_id": "zzz", "tool_name": "show_chart", "result": "for nobody"}
            ]
        }))
        .await;
    assert_eq!(
        names(&events),
        [
            "tool_calling_result",
            "tool_calling_result",
            "token_count",
            "ai_answer_end"
        ]
    );
    assert_eq!(events[1].data["tool_call_id"], "b");
    assert_eq!(events[1].data["result"]["status"], "error");
    let sent = app.llm_messages(1);
    let roles: Vec<_> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(sent[3]["content"], "cpu chart");
    assert!(
        sent[4]["content"]
            .as_str()
            .unwrap()
            .contains("frontend did not return a result")
    );
    assert!(
        sent[5]["content"]
            .as_str()
            .unwrap()
            .starts_with("and memory?")
    );
}

#[tokio::test]
async fn noop_tools_answer_at_once_even_without_streaming() {
    let app = spawn_app().await;
    app.llm.push(Step::tools(vec![
        ("n1", "highlight", json!({"row": 3})),
        ("n2", "navigate", json!({})),
    ]));
    app.llm.push(Step::text("Highlighted."));
    let (status, body) = app
        .chat_json(&json!({
            "ask": "highlight row 3",
            "frontend_tools": [
                {"name": "highlight", "description": "Highlight a row", "mode": "noop", "noop_response": "Row highlighted."},
                {"name": "navigate", "description": "Go somewhere", "mode": "noop"}
            ]
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Highlighted.");
    let calls = body["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["result"]["data"], "Row highlighted.");
    assert_eq!(
        calls[1]["result"]["data"],
        "The action was performed successfully in the user's browser."
    );
    let sent = app.llm_messages(1);
    assert_eq!(sent[3]["content"], "Row highlighted.");
}

#[tokio::test]
async fn noop_tool_events_in_a_stream() {
    let app = spawn_app().await;
    app.llm.push(Step::tool("n", "highlight", json!({})));
    app.llm.push(Step::text("done"));
    let events = app
        .chat_sse(&json!({"ask": "q", "frontend_tools": [{"name": "highlight", "description": "d", "mode": "noop"}]}))
        .await;
    assert_eq!(
        names(&events),
        [
            "token_count",
            "start_tool_calling",
            "tool_calling_result",
            "token_count",
            "token_count",
            "ai_answer_end"
        ]
    );
}

#[tokio::test]
async fn invalid_frontend_tools_are_400() {
    let app = spawn_app().await;
    let cases = [
        (
            json!({"ask": "q", "stream": true, "frontend_tools": [{"name": "TodoWrite", "description": "x"}]}),
            "conflicts with either a built-in",
        ),
        (
            json!({"ask": "q", "stream": true, "frontend_tools": [chart_tool("pause"), chart_tool("noop")]}),
            "conflicts with either a built-in",
        ),
        (
            json!({"ask": "q", "frontend_tools": [chart_tool("pause")]}),
            "requires stream=true",
        ),
        (
            json!({"ask": "q", "stream": true, "frontend_tools": [{"name": "t", "description": "d", "parameters": {"type": "nope"}}]}),
            "invalid parameters JSON Schema",
        ),
        (
            json!({"ask": "q", "stream": true, "frontend_tools": [{"name": "t", "description": "d", "parameters": [1]}]}),
            "must be a JSON Schema object",
        ),
        (
            json!({"ask": "q", "stream": true, "frontend_tools": [{"name": "bad name!", "description": "d"}]}),
            "not a valid tool name",
        ),
    ];
    for (body, expected) in cases {
        let (status, resp) = app.chat_json(&body).await;
        assert_eq!(status, 400, "{body} → {resp}");
        assert!(
            resp["detail"].as_str().unwrap().contains(expected),
            "{body} → {resp}"
        );
    }
    // A result that is not a string is a validation error (422).
    let (status, resp) = app
        .chat_json(&json!({"ask": "", "stream": true, "conversation_history": [{"role": "user", "content": "x"}],
            "frontend_tool_results": [{"tool_call_id": "a", "tool_name": "t", "result": {"x": 1}}]}))
        .await;
    assert_eq!(status, 422, "{resp}");
    assert_eq!(
        resp["detail"][0]["loc"],
        json!(["body", "frontend_tool_results", 0, "result"])
    );
    assert_eq!(app.llm.request_count(), 0);
}
