use serde_json::json;

use super::*;
use crate::wire::Message;

fn model(id: &str, entry: &str) -> std::sync::Arc<crate::llm::ModelConfig> {
    let toml = format!(
        "[models.b]\nmodel = \"bedrock/{id}\"\naws_region_name = \"us-east-1\"\naws_access_key_id = \"AKID\"\naws_secret_access_key = \"secret\"\n{entry}"
    );
    let settings = crate::config::Settings::from_toml(&toml).unwrap();
    let registry = crate::llm::ModelRegistry::from_settings(&settings).unwrap();
    registry.resolve(Some("b")).unwrap()
}

fn tool_history() -> Vec<Message> {
    serde_json::from_value(json!([
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call.1", "type": "function", "function": {"name": "bash", "arguments": "{\"c\":1}"}}]},
        {"role": "tool", "tool_call_id": "call.1", "content": "Error: boom"},
    ]))
    .unwrap()
}

fn body_for(model: &crate::llm::ModelConfig, allow: bool, with_tools: bool) -> Value {
    let tools = serde_json::value::RawValue::from_string(
        json!([{"type": "function", "function": {"name": "bash", "description": "run",
                "parameters": {"type": "object"}}}])
        .to_string(),
    )
    .unwrap();
    let history = tool_history();
    body(&CompletionRequest {
        model,
        messages: &history,
        tools: with_tools.then_some(&*tools),
        allow_tool_calls: allow,
        response_format: None,
    })
    .unwrap()
}

#[test]
fn history_in_converse_blocks() {
    let m = model(
        "anthropic.claude-3-5-sonnet-20240620-v1:0",
        "temperature = 0.3\n",
    );
    let b = body_for(&m, true, true);
    assert_eq!(b["system"], json!([{"text": "sys"}]));
    assert_eq!(b["messages"][0]["content"][0], json!({"text": "look"}));
    assert_eq!(
        b["messages"][0]["content"][1],
        json!({"image": {"format": "png", "source": {"bytes": "AAAA"}}})
    );
    assert_eq!(
        b["messages"][1]["content"][0],
        json!({"toolUse": {"toolUseId": "call_1", "name": "bash", "input": {"c": 1}}})
    );
    assert_eq!(
        b["messages"][2]["content"][0],
        json!({"toolResult": {"toolUseId": "call_1", "status": "error",
                              "content": [{"text": "Error: boom"}]}})
    );
    assert_eq!(
        b["toolConfig"]["tools"][0],
        json!({"toolSpec": {"name": "bash", "description": "run",
                            "inputSchema": {"json": {"type": "object"}}}})
    );
    assert_eq!(b["inferenceConfig"]["temperature"], 0.3);
    // Claude 3.5 Sonnet takes no cache points.
    assert!(!b.to_string().contains("cachePoint"));
}

#[test]
fn last_step_keeps_tools_and_forbids_calls() {
    let m = model("us.anthropic.claude-sonnet-4-20250514-v1:0", "");
    let b = body_for(&m, false, true);
    assert!(b["toolConfig"]["tools"].is_array());
    let system = b["system"].to_string();
    assert!(system.contains(NO_TOOL_CALLS), "{system}");
    // Cache points after the system prompt and the last message.
    assert_eq!(b["system"][1], json!({"cachePoint": {"type": "default"}}));
    let last = b["messages"][2]["content"].as_array().unwrap();
    assert_eq!(
        last.last(),
        Some(&json!({"cachePoint": {"type": "default"}}))
    );
    // Without definitions, tool blocks become text.
    let b = body_for(&m, true, false);
    assert!(b.get("toolConfig").is_none());
    assert!(!b["messages"].to_string().contains("toolUse"));
}

#[test]
fn thinking_goes_to_additional_fields_for_claude_only() {
    let m = model(
        "anthropic.claude-3-7-sonnet-20250219-v1:0",
        "temperature = 0.2\nthinking = { type = \"enabled\", budget_tokens = 2000 }\n",
    );
    let b = body_for(&m, true, true);
    assert_eq!(
        b["additionalModelRequestFields"]["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    assert!(b["inferenceConfig"].get("temperature").is_none());
    let m = model(
        "meta.llama3-3-70b-instruct-v1:0",
        "thinking = { type = \"enabled\", budget_tokens = 2000 }\n",
    );
    assert!(
        body_for(&m, true, true)
            .get("additionalModelRequestFields")
            .is_none()
    );
}
