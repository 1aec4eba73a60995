//! The Converse request body of one call. The history is first put in the Messages API's shape
//! (`anthropic::messages`: roles alternate starting with the user, every `toolUse` answered by
//! a `toolResult` at the start of the next user turn, no empty text, thinking kept only when
//! on), whose rules Converse shares; each block is then written in Converse's form.
//!
//! The last step of a turn must answer, but Converse's `toolChoice` has no `none` (only auto,
//! any and one tool), and Bedrock refuses tool blocks in a history without `toolConfig`
//! (HolmesGPT #1142). So the tools stay, the system prompt tells the model not to call one,
//! and the provider drops any call the model makes anyway (see `mod.rs`).

use serde_json::{Map, Value, json};

use super::models::{is_claude, supports_cache_points};
use crate::llm::anthropic::messages::{tool_blocks_as_text, translate};
use crate::llm::anthropic::request::{format_instruction, max_tokens, thinking, tool};
use crate::llm::error::LlmError;
use crate::llm::provider::CompletionRequest;

/// Said in the system prompt on a step that may not call tools.
const NO_TOOL_CALLS: &str = "Do not call any tool now: answer with what you already have.";

pub fn body(req: &CompletionRequest<'_>) -> Result<Value, LlmError> {
    let model = req.model;
    let params = &model.extra_params;
    let max_tokens = max_tokens(model);
    let thinking = is_claude(&model.wire_model)
        .then(|| thinking(model, max_tokens))
        .flatten();
    let tools: Vec<Value> = match req.tools {
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|e| LlmError::Protocol(format!("cannot read the tool definitions: {e}")))?,
        None => Vec::new(),
    };
    let history = translate(req.messages, thinking.is_some());
    let mut messages = history.messages;
    if tools.is_empty() {
        tool_blocks_as_text(&mut messages);
    }
    let caching = supports_cache_points(&model.wire_model);
    let mut messages: Vec<Value> = messages.iter().map(message).collect();
    if caching
        && let Some(content) = messages
            .last_mut()
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
    {
        content.push(cache_point());
    }

    let mut body = Map::new();
    let mut system = Vec::new();
    if !history.system.trim().is_empty() {
        system.push(json!({"text": history.system}));
        if caching {
            system.push(cache_point());
        }
    }
    if let Some(instruction) = req.response_format.and_then(format_instruction) {
        system.push(json!({"text": instruction}));
    }
    if !tools.is_empty() && !req.allow_tool_calls {
        system.push(json!({"text": NO_TOOL_CALLS}));
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        let specs: Vec<Value> = tools.iter().map(tool).map(tool_spec).collect();
        body.insert(
            "toolConfig".into(),
            json!({"tools": specs, "toolChoice": {"auto": {}}}),
        );
    }
    let mut inference = Map::new();
    inference.insert("maxTokens".into(), json!(max_tokens));
    if thinking.is_none()
        && let Some(t) = model.temperature
    {
        // Claude refuses a temperature other than 1 with thinking on.
        inference.insert("temperature".into(), json!(t));
    }
    if let Some(top_p) = model.top_p {
        inference.insert("topP".into(), json!(top_p));
    }
    match params.get("stop") {
        Some(Value::String(s)) => {
            inference.insert("stopSequences".into(), json!([s]));
        }
        Some(stops @ Value::Array(_)) => {
            inference.insert("stopSequences".into(), stops.clone());
        }
        _ => {}
    }
    body.insert("inferenceConfig".into(), Value::Object(inference));
    // Model-specific fields (Claude's `thinking`, and `extra_body`, as LiteLLM passes them).
    let mut additional = Map::new();
    if let Some(thinking) = thinking {
        additional.insert("thinking".into(), thinking);
    }
    if let Some(Value::Object(extra)) = params.get("extra_body") {
        additional.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if !additional.is_empty() {
        body.insert(
            "additionalModelRequestFields".into(),
            Value::Object(additional),
        );
    }
    Ok(Value::Object(body))
}

fn cache_point() -> Value {
    json!({"cachePoint": {"type": "default"}})
}

/// An Anthropic-shaped tool (`name`, `description`, `input_schema`) as a Converse `toolSpec`.
fn tool_spec(mut anthropic: Value) -> Value {
    let schema = anthropic
        .get_mut("input_schema")
        .map(Value::take)
        .unwrap_or_else(|| json!({"type": "object"}));
    let mut spec = json!({"name": anthropic["name"].take(), "inputSchema": {"json": schema}});
    if let Some(d) = anthropic.get_mut("description") {
        spec["description"] = d.take();
    }
    json!({"toolSpec": spec})
}

/// A Messages API turn as a Converse message.
fn message(turn: &Value) -> Value {
    let blocks = turn
        .get("content")
        .and_then(Value::as_array)
        .map(|b| b.iter().map(block).collect())
        .unwrap_or_default();
    json!({"role": turn["role"], "content": Value::Array(blocks)})
}

/// Converse takes tool-use ids of `[a-zA-Z0-9_-]{1,64}`; ids from another provider (a
/// fallback's history) are made to fit, the same way on the call and its result.
fn tool_use_id(id: &Value) -> String {
    let id: String = id
        .as_str()
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if id.is_empty() { "call".into() } else { id }
}

/// One Messages API content block in Converse's form.
fn block(b: &Value) -> Value {
    let text = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("");
    match b.get("type").and_then(Value::as_str).unwrap_or("") {
        "tool_use" => json!({"toolUse": {
            "toolUseId": tool_use_id(&b["id"]),
            "name": b["name"],
            "input": b.get("input").cloned().unwrap_or_else(|| json!({})),
        }}),
        "tool_result" => {
            let content: Vec<Value> = match b.get("content") {
                Some(Value::String(s)) if !s.is_empty() => vec![json!({"text": s})],
                Some(Value::Array(parts)) => parts.iter().map(block).collect(),
                _ => Vec::new(),
            };
            let content = if content.is_empty() {
                // Converse refuses an empty result as it refuses empty text.
                vec![json!({"text": "(no output)"})]
            } else {
                content
            };
            let mut result =
                json!({"toolUseId": tool_use_id(&b["tool_use_id"]), "content": content});
            if b.get("is_error") == Some(&Value::Bool(true)) {
                result["status"] = json!("error");
            }
            json!({"toolResult": result})
        }
        "image" => match b.pointer("/source/type").and_then(Value::as_str) {
            Some("base64") => {
                let media = b.pointer("/source/media_type").and_then(Value::as_str);
                let format = media
                    .and_then(|m| m.strip_prefix("image/"))
                    .unwrap_or("png");
                let format = if format == "jpg" { "jpeg" } else { format };
                json!({"image": {"format": format,
                                 "source": {"bytes": b.pointer("/source/data")}}})
            }
            // Converse takes images inline (or from S3), never from a web URL.
            _ => json!({"text": format!(
                "[An image at {} was attached; this model takes only inline images.]",
                b.pointer("/source/url").and_then(Value::as_str).unwrap_or("a URL")
            )}),
        },
        "thinking" => json!({"reasoningContent": {"reasoningText": {
            "text": text("thinking"), "signature": text("signature"),
        }}}),
        "redacted_thinking" => json!({"reasoningContent": {"redactedContent": text("data")}}),
        _ => json!({"text": text("text")}),
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
