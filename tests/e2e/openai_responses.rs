//! The OpenAI-compatible door's Responses API: a whole response with tool activity as a
//! reasoning item, stateful requests refused, the stream's events in order, the client's tools.

use serde_json::{Value, json};

use crate::helpers::spawn_app;
use crate::openai_compat::{Frame, frames, post, text};
use crate::openai_errors::error_of;
use fake_llm::Step;

#[tokio::test]
async fn responses_answer_whole_and_refuse_state() {
    let app = spawn_app().await;
    app.llm
        .push(Step::tool("c1", "bash", json!({"command": "echo hi"})));
    app.llm.push(text("It printed hi.", 30, 6));
    let (status, body) = post(
        &app,
        "/v1/responses",
        &json!({"model": "fake", "instructions": "Be brief.", "input": "run echo"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert!(body["id"].as_str().unwrap().starts_with("resp_"));
    let output = body["output"].as_array().unwrap();
    assert_eq!(output[0]["type"], "reasoning");
    assert!(
        output[0]["summary"][0]["text"]
            .as_str()
            .unwrap()
            .contains("echo hi")
    );
    let message = output.last().unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["content"][0]["type"], "output_text");
    assert_eq!(message["content"][0]["text"], "It printed hi.");
    assert!(body["usage"]["input_tokens"].as_u64().unwrap() > 30);
    assert!(app.system_prompt_sent(0).contains("Be brief."));

    for (extra, param) in [
        (
            json!({"previous_response_id": "resp_123"}),
            "previous_response_id",
        ),
        (json!({"store": true}), "store"),
        (json!({"bogus": 1}), "bogus"),
    ] {
        let mut request = json!({"model": "fake", "input": "q"});
        request
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (status, body) = post(&app, "/v1/responses", &request).await;
        assert_eq!(status, 400, "{request} → {body}");
        assert_eq!(error_of(&body)["param"], param);
    }
    let (status, body) = post(
        &app,
        "/v1/responses",
        &json!({"model": "gone", "input": "q"}),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "model_not_found");
}

#[tokio::test]
async fn responses_stream_events_in_order() {
    let app = spawn_app().await;
    app.llm
        .push(Step::tool("c1", "bash", json!({"command": "echo hi"})));
    app.llm.push(text("It printed hi.", 30, 6));
    let frames = frames(
        &app,
        "/v1/responses",
        &json!({"model": "fake", "stream": true, "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "run echo"}]}
        ]}),
    )
    .await;
    let events: Vec<&str> = frames.iter().map(|f| f.event.as_str()).collect();
    assert_eq!(events[0], "response.created");
    assert_eq!(events.last(), Some(&"response.completed"));
    for needed in [
        "response.reasoning_summary_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_item.done",
    ] {
        assert!(events.contains(&needed), "{needed} missing: {events:?}");
    }
    let datas: Vec<Value> = frames.iter().map(Frame::json).collect();
    for (i, data) in datas.iter().enumerate() {
        assert_eq!(data["type"], events[i]);
        assert_eq!(data["sequence_number"], i);
    }
    let text: String = datas
        .iter()
        .filter(|d| d["type"] == "response.output_text.delta")
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "It printed hi.");
    let done = &datas.last().unwrap()["response"];
    assert_eq!(done["status"], "completed");
    assert!(done["usage"]["total_tokens"].as_u64().unwrap() > 36);
    let output = done["output"].as_array().unwrap();
    assert_eq!(
        output.last().unwrap()["content"][0]["text"],
        "It printed hi."
    );
}

#[tokio::test]
async fn responses_client_tools_round_trip() {
    let app = spawn_app().await;
    let tools = json!([{"type": "function", "name": "pick_cluster", "parameters": {"type": "object", "properties": {}}}]);
    app.llm.push(Step::tool("fc1", "pick_cluster", json!({})));
    let (status, body) = post(
        &app,
        "/v1/responses",
        &json!({"model": "fake", "tools": tools, "input": "which cluster?"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let call = body["output"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["call_id"], "fc1");
    app.llm.push(text("Using prod.", 3, 2));
    let (status, body) = post(
        &app,
        "/v1/responses",
        &json!({"model": "fake", "tools": tools, "input": [
            {"role": "user", "content": "which cluster?"},
            call,
            {"type": "function_call_output", "call_id": "fc1", "output": "prod"}
        ]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["output"].as_array().unwrap().last().unwrap()["content"][0]["text"],
        "Using prod."
    );
}
