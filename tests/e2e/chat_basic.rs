//! The backbone: plain answers as JSON and SSE, tool calls, iterations, metadata.

use serde_json::{Value, json};

use crate::helpers::{names, spawn_app, spawn_app_with};
use fake_llm::{Step, Usage};

#[tokio::test]
async fn plain_answer_as_json() {
    let app = spawn_app().await;
    app.llm.push(Step::Text {
        content: "The pod is OOMKilled.".into(),
        reasoning: None,
        usage: Some(Usage {
            prompt_tokens: 1200,
            completion_tokens: 7,
        }),
    });
    let (status, body) = app
        .chat_json(&json!({"ask": "Why is my pod crashing?"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "The pod is OOMKilled.");
    assert_eq!(body["tool_calls"], json!([]));
    assert_eq!(body["pending_approvals"], Value::Null);
    let actions = body["follow_up_actions"].as_array().unwrap();
    assert_eq!(
        actions
            .iter()
            .map(|a| a["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["logs", "graphs", "articles"]
    );
    let history = body["conversation_history"].as_array().unwrap();
    let roles: Vec<_> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant"]);
    assert!(
        history[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Why is my pod crashing?")
    );
    assert_eq!(history[2]["content"], "The pod is OOMKilled.");
    assert!(
        history
            .iter()
            .all(|m| m["token_count"].as_u64().unwrap() > 0)
    );

    let meta = &body["metadata"];
    assert_eq!(
        meta["usage"],
        json!({"prompt_tokens": 1200, "completion_tokens": 7, "total_tokens": 1207})
    );
    assert_eq!(meta["max_tokens"], 200000);
    assert_eq!(meta["max_output_tokens"], 64000);
    assert_eq!(meta["finish_reason"], "stop");
    assert_eq!(meta["request_id"].as_str().unwrap().len(), 36);
    assert!(meta.get("costs").is_none(), "no prices configured: {meta}");
    let t = &meta["tokens"];
    let parts = [
        "tools_tokens",
        "system_tokens",
        "user_tokens",
        "tools_to_call_tokens",
        "assistant_tokens",
        "other_tokens",
    ];
    let sum: u64 = parts.iter().map(|k| t[k].as_u64().unwrap()).sum();
    assert_eq!(t["total_tokens"].as_u64().unwrap(), sum);
    assert_eq!(t["system_tokens"], history[0]["token_count"]);
    assert_eq!(t["user_tokens"], history[1]["token_count"]);
    assert_eq!(t["assistant_tokens"], history[2]["token_count"]);
    assert!(
        t["tools_tokens"].as_u64().unwrap() > 0,
        "TodoWrite's definition is counted"
    );

    // The LLM got the OpenAI request we promise: streaming with usage, tools offered.
    let req = &app.llm.requests()[0];
    assert_eq!(req["model"], "fake-model");
    assert_eq!(req["stream"], true);
    assert_eq!(req["stream_options"]["include_usage"], true);
    assert_eq!(req["tools"][0]["function"]["name"], "TodoWrite");
    assert!(
        req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m.get("token_count").is_none())
    );
}

#[tokio::test]
async fn plain_answer_as_sse_with_exact_framing() {
    let app = spawn_app().await;
    app.llm.push(Step::text("All nodes are ready."));
    let resp = app
        .post_chat(&json!({"ask": "Is the cluster healthy?", "stream": true}))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "text/event-stream; charset=utf-8"
    );
    let raw = String::from_utf8(resp.bytes().await.unwrap().to_vec()).unwrap();
    let frames: Vec<&str> = raw.split_terminator("\n\n").collect();
    assert_eq!(frames.len(), 2, "{raw}");
    for frame in &frames {
        let lines: Vec<&str> = frame.split('\n').collect();
        assert_eq!(lines.len(), 2, "one event line and one data line: {frame}");
        assert!(lines[0].starts_with("event: "));
        let data: Value = serde_json::from_str(lines[1].strip_prefix("data: ").unwrap()).unwrap();
        assert!(data.is_object());
    }
    assert!(frames[0].starts_with("event: token_count\n"));
    assert!(frames[1].starts_with("event: ai_answer_end\n"));
    let end: Value = serde_json::from_str(frames[1].split_once("data: ").unwrap().1).unwrap();
    assert_eq!(end["analysis"], "All nodes are ready.");
    assert_eq!(end["follow_up_actions"].as_array().unwrap().len(), 3);
    assert!(end["metadata"]["request_id"].is_string());
    assert!(end["conversation_history"].is_array());
}

#[tokio::test]
async fn one_tool_call_streams_in_reference_order() {
    let app = spawn_app().await;
    let todos = json!({"todos": [
        {"id": "1", "content": "Check pod logs", "status": "in_progress"},
        {"id": "2", "content": "Check events", "status": "pending"}
    ]});
    app.llm
        .push(Step::tool("call_1", "TodoWrite", todos.clone()));
    app.llm.push(Step::text("Planned."));
    let events = app
        .chat_sse(&json!({"ask": "Plan the investigation"}))
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
    assert_eq!(
        events[1].data,
        json!({"tool_name": "TodoWrite", "id": "call_1"})
    );
    let result = &events[2].data;
    assert_eq!(result["tool_call_id"], "call_1");
    assert_eq!(result["name"], "TodoWrite");
    assert_eq!(result["tool_name"], "TodoWrite");
    assert_eq!(result["role"], "tool");
    assert_eq!(result["description"], "Update investigation tasks");
    assert_eq!(result["toolset_name"], "core_investigation");
    assert_eq!(result["result"]["status"], "success");
    assert_eq!(result["result"]["params"], todos);
    assert!(
        result["result"]["data"]
            .as_str()
            .unwrap()
            .contains("[~] 1. Check pod logs")
    );
    // The second token_count includes the tool result.
    assert!(
        events[3].data["metadata"]["tokens"]["other_tokens"]
            .as_u64()
            .unwrap()
            > events[0].data["metadata"]["tokens"]["other_tokens"]
                .as_u64()
                .unwrap()
    );
    let history = events[5].data["conversation_history"].as_array().unwrap();
    let roles: Vec<_> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
    assert_eq!(history[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(history[3]["tool_call_id"], "call_1");
    // The LLM saw the tool result on its second call.
    let second = app.llm_messages(1);
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_1");
    assert!(
        second[3]["content"]
            .as_str()
            .unwrap()
            .contains("Check events")
    );
}

#[tokio::test]
async fn several_tool_calls_in_one_reply() {
    let app = spawn_app().await;
    app.llm.push(Step::ToolCalls {
        content: Some("Let me plan and check.".into()),
        calls: vec![
            fake_llm::ToolCall {
                id: "a".into(),
                name: "TodoWrite".into(),
                arguments: json!({"todos": []}).to_string(),
            },
            fake_llm::ToolCall {
                id: "b".into(),
                name: "no_such_tool".into(),
                arguments: "{}".into(),
            },
            fake_llm::ToolCall {
                id: "c".into(),
                name: "TodoWrite".into(),
                arguments: "{\"todos\": [".into(),
            },
            fake_llm::ToolCall {
                id: "d".into(),
                name: "TodoWrite".into(),
                arguments: "[1, 2]".into(),
            },
        ],
        usage: None,
    });
    app.llm.push(Step::text("Done."));
    let events = app.chat_sse(&json!({"ask": "Check everything"})).await;
    let n = names(&events);
    assert_eq!(n[0], "token_count");
    assert_eq!(n[1], "ai_message");
    assert_eq!(events[1].data["content"], "Let me plan and check.");
    assert!(events[1].data["metadata"]["tokens"].is_object());
    assert_eq!(
        &n[2..6],
        ["start_tool_calling"; 4],
        "all starts before any result: {n:?}"
    );
    assert_eq!(&n[6..10], ["tool_calling_result"; 4]);
    assert_eq!(&n[10..], ["token_count", "token_count", "ai_answer_end"]);
    let status_of = |id: &str| {
        events
            .iter()
            .find(|e| e.name == "tool_calling_result" && e.data["tool_call_id"] == id)
            .map(|e| e.data["result"].clone())
            .unwrap()
    };
    assert_eq!(status_of("a")["status"], "success");
    assert_eq!(status_of("b")["status"], "error");
    assert!(
        status_of("b")["error"]
            .as_str()
            .unwrap()
            .contains("Failed to find tool no_such_tool")
    );
    assert!(
        status_of("c")["error"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    assert!(
        status_of("d")["error"]
            .as_str()
            .unwrap()
            .contains("expected a JSON object")
    );
    // History keeps the order the model asked in, and the model sees every error.
    let history = events.last().unwrap().data["conversation_history"]
        .as_array()
        .unwrap()
        .clone();
    let tool_ids: Vec<_> = history
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(tool_ids, ["a", "b", "c", "d"]);
    let sent = app.llm_messages(1);
    assert!(
        sent[4]["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: Failed to find tool")
    );
}

#[tokio::test]
async fn three_iterations_then_an_answer() {
    let app = spawn_app().await;
    for i in 0..2 {
        app.llm.push(Step::tool(&format!("call_{i}"), "TodoWrite", json!({"todos": [{"id": "1", "content": format!("step {i}"), "status": "in_progress"}]})));
    }
    app.llm.push(Step::text("Root cause: bad config."));
    let (status, body) = app.chat_json(&json!({"ask": "Investigate"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Root cause: bad config.");
    assert_eq!(app.llm.request_count(), 3);
    let calls = body["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["tool_call_id"], "call_0");
    assert_eq!(calls[1]["result"]["status"], "success");
    assert_eq!(body["conversation_history"].as_array().unwrap().len(), 7);
    // Every LLM request carried the whole conversation so far.
    assert_eq!(app.llm_messages(2).len(), 6);
}

#[tokio::test]
async fn costs_when_the_model_has_prices() {
    let app = spawn_app_with(
        "[models.fake]\ninput_cost_per_token = 0.001\noutput_cost_per_token = 0.002\n",
    )
    .await;
    app.llm.push(Step::ToolCalls {
        content: None,
        calls: vec![fake_llm::ToolCall {
            id: "c".into(),
            name: "TodoWrite".into(),
            arguments: "{\"todos\":[]}".into(),
        }],
        usage: Some(Usage {
            prompt_tokens: 500,
            completion_tokens: 20,
        }),
    });
    app.llm.push(Step::Text {
        content: "ok".into(),
        reasoning: None,
        usage: Some(Usage {
            prompt_tokens: 1000,
            completion_tokens: 10,
        }),
    });
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    let costs = &body["metadata"]["costs"];
    assert_eq!(costs["max_prompt_tokens_per_call"], 1000);
    assert_eq!(costs["max_completion_tokens_per_call"], 20);
    assert_eq!(costs["prompt_tokens"], 1500, "cumulative over both calls");
    assert_eq!(costs["completion_tokens"], 30);
    let expected = 1500.0 * 0.001 + 30.0 * 0.002;
    assert!((costs["total_cost"].as_f64().unwrap() - expected).abs() < 1e-9);
}

#[tokio::test]
async fn reasoning_with_tool_calls_becomes_an_ai_message() {
    let app = spawn_app().await;
    app.llm.push(Step::ToolCalls {
        content: None,
        calls: vec![fake_llm::ToolCall {
            id: "r".into(),
            name: "TodoWrite".into(),
            arguments: "{\"todos\":[]}".into(),
        }],
        usage: None,
    });
    app.llm
        .push(Step::text_with_reasoning("thinking it over", "Final."));
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    // No content or reasoning on the tool-call reply: no ai_message.
    assert!(!names(&events).contains(&"ai_message"));
    let end = events.last().unwrap();
    assert_eq!(end.data["analysis"], "Final.");
    let history = end.data["conversation_history"].as_array().unwrap();
    assert_eq!(
        history.last().unwrap()["reasoning_content"],
        "thinking it over"
    );
}
