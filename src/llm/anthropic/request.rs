//! The Messages API request body of one completion: model, `max_tokens` (required), the
//! system prompt and the history (with prompt-cache breakpoints), tools in Anthropic's shape
//! with `tool_choice`, extended thinking, and the entry's other parameters translated.
//!
//! Structured output: the API has no `response_format`. A forced tool would stop the agent
//! from calling its real tools on every step but the last, which is not known in advance; so
//! the format goes into the system prompt as an instruction, and the answer is checked (and
//! repaired once) by the agent exactly as for every other provider.

use serde_json::{Map, Value, json};

use super::messages::{mark_cache_breakpoint, tool_blocks_as_text, translate};
use super::models::thinking_enabled;
use crate::llm::ModelConfig;
use crate::llm::error::LlmError;
use crate::llm::provider::CompletionRequest;

/// LiteLLM's budgets for `reasoning_effort` on Claude, so an entry written for it thinks as
/// much here.
fn effort_budget(effort: &str) -> Option<u32> {
    match effort {
        "low" => Some(1024),
        "medium" => Some(2048),
        "high" => Some(4096),
        _ => None,
    }
}

pub fn body(req: &CompletionRequest<'_>) -> Result<Value, LlmError> {
    let model = req.model;
    let params = &model.extra_params;
    let max_tokens = max_tokens(model);
    let thinking = thinking(model, max_tokens);
    let history = translate(req.messages, thinking.is_some());
    let mut messages = history.messages;
    if req.tools.is_none() {
        tool_blocks_as_text(&mut messages);
    }
    mark_cache_breakpoint(&mut messages);

    let mut body = Map::new();
    body.insert("model".into(), json!(model.wire_model));
    body.insert("max_tokens".into(), json!(max_tokens));
    let mut system = Vec::new();
    if !history.system.trim().is_empty() {
        system.push(json!({"type": "text", "text": history.system,
                           "cache_control": {"type": "ephemeral"}}));
    }
    if let Some(instruction) = req.response_format.and_then(format_instruction) {
        system.push(json!({"type": "text", "text": instruction}));
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = req.tools {
        let tools: Vec<Value> = serde_json::from_str(tools.get())
            .map_err(|e| LlmError::Protocol(format!("cannot read the tool definitions: {e}")))?;
        body.insert(
            "tools".into(),
            Value::Array(tools.iter().map(tool).collect()),
        );
        let mut choice = if req.allow_tool_calls {
            json!({"type": "auto"})
        } else {
            json!({"type": "none"})
        };
        if req.allow_tool_calls && params.get("parallel_tool_calls") == Some(&Value::Bool(false)) {
            choice["disable_parallel_tool_use"] = Value::Bool(true);
        }
        body.insert("tool_choice".into(), choice);
    }
    body.insert("stream".into(), Value::Bool(true));
    match &thinking {
        Some(thinking) => {
            // The API refuses a temperature other than 1 with thinking on.
            body.insert("thinking".into(), thinking.clone());
        }
        None => {
            if let Some(t) = model.temperature {
                body.insert("temperature".into(), json!(t));
            }
        }
    }
    if let Some(top_p) = model.top_p {
        body.insert("top_p".into(), json!(top_p));
    }
    match params.get("stop") {
        Some(Value::String(s)) => {
            body.insert("stop_sequences".into(), json!([s]));
        }
        Some(stops @ Value::Array(_)) => {
            body.insert("stop_sequences".into(), stops.clone());
        }
        _ => {}
    }
    if let Some(user) = params.get("user").and_then(Value::as_str) {
        body.insert("metadata".into(), json!({"user_id": user}));
    }
    // `extra_body` is the escape hatch for anything else the API takes: sent as written.
    if let Some(Value::Object(extra)) = params.get("extra_body") {
        for (k, v) in extra {
            body.insert(k.clone(), v.clone());
        }
    }
    Ok(Value::Object(body))
}

/// Claude's `thinking` parameter for a call of `max_tokens`: the entry's `thinking` (over
/// HolmesGPT's THINKING), else a budget for its `reasoning_effort` (over REASONING_EFFORT).
pub(crate) fn thinking(model: &ModelConfig, max_tokens: u64) -> Option<Value> {
    match &model.thinking {
        Some(t) => Some(t.clone()).filter(thinking_enabled),
        None => model
            .reasoning_effort
            .as_deref()
            .and_then(effort_budget)
            .filter(|budget| u64::from(*budget) < max_tokens)
            .map(|budget| json!({"type": "enabled", "budget_tokens": budget})),
    }
}

/// The output budget of a call: `max_completion_tokens`, else the entry's `max_tokens`, else
/// the model's output limit.
pub(crate) fn max_tokens(model: &ModelConfig) -> u64 {
    model
        .extra_params
        .get("max_completion_tokens")
        .and_then(Value::as_u64)
        .or(model.max_tokens.map(u64::from))
        .unwrap_or(u64::from(model.max_output_tokens))
}

/// An OpenAI-format tool definition in Anthropic's shape.
pub(crate) fn tool(definition: &Value) -> Value {
    let function = definition.get("function").unwrap_or(definition);
    let mut schema = function
        .get("parameters")
        .filter(|p| p.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    let mut tool = json!({
        "name": function.get("name").cloned().unwrap_or(Value::Null),
        "input_schema": schema,
    });
    if let Some(description) = function
        .get("description")
        .and_then(Value::as_str)
        .filter(|d| !d.is_empty())
    {
        tool["description"] = json!(description);
    }
    tool
}

/// The system-prompt instruction that stands for a `response_format`.
pub(crate) fn format_instruction(format: &Value) -> Option<String> {
    const LEAD: &str = "Your final answer must be a single JSON object and nothing else: no \
                        prose before or after it, no code fences.";
    match format.get("type").and_then(Value::as_str)? {
        "json_object" => Some(LEAD.to_owned()),
        "json_schema" => {
            let schema = format.pointer("/json_schema/schema")?;
            Some(format!(
                "{LEAD} It must match this JSON Schema:\n{}",
                serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string())
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_take_anthropic_shape() {
        let t = tool(&json!({"type": "function", "function": {
            "name": "bash", "description": "run", "parameters": {"properties": {"c": {}}}}}));
        assert_eq!(
            t,
            json!({"name": "bash", "description": "run",
                   "input_schema": {"type": "object", "properties": {"c": {}}}})
        );
        let bare = tool(&json!({"type": "function", "function": {"name": "x", "description": ""}}));
        assert_eq!(
            bare["input_schema"],
            json!({"type": "object", "properties": {}})
        );
        assert!(bare.get("description").is_none());
    }

    fn model(entry: &str) -> std::sync::Arc<crate::llm::ModelConfig> {
        let toml = format!(
            "[models.c]\nmodel = \"anthropic/claude-sonnet-4-5\"\napi_key = \"k\"\n{entry}"
        );
        let settings = crate::config::Settings::from_toml(&toml).unwrap();
        let registry = crate::llm::ModelRegistry::from_settings(&settings).unwrap();
        registry.resolve(Some("c")).unwrap()
    }

    fn body_for(model: &crate::llm::ModelConfig, allow_tool_calls: bool) -> Value {
        let tools = serde_json::value::RawValue::from_string(
            json!([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}])
                .to_string(),
        )
        .unwrap();
        let messages = [
            crate::wire::Message::system("sys"),
            crate::wire::Message::user(json!("q")),
        ];
        body(&CompletionRequest {
            model,
            messages: &messages,
            tools: Some(&tools),
            allow_tool_calls,
            response_format: None,
        })
        .unwrap()
    }

    #[test]
    fn parameters_are_translated() {
        let m = model(
            "temperature = 0.2\nmax_tokens = 5000\ntop_p = 0.9\nstop = \"END\"\nuser = \"sre\"\nparallel_tool_calls = false\n",
        );
        let b = body_for(&m, true);
        assert_eq!(b["max_tokens"], 5000);
        assert_eq!(b["temperature"], 0.2);
        assert_eq!(b["top_p"], 0.9);
        assert_eq!(b["stop_sequences"], json!(["END"]));
        assert_eq!(b["metadata"], json!({"user_id": "sre"}));
        assert_eq!(
            b["tool_choice"],
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
        assert_eq!(b["system"][0]["text"], "sys");
        assert_eq!(b["stream"], true);
        assert_eq!(body_for(&m, false)["tool_choice"], json!({"type": "none"}));
    }

    #[test]
    fn thinking_drops_temperature_and_effort_maps_to_a_budget() {
        let m =
            model("temperature = 0.2\nthinking = { type = \"enabled\", budget_tokens = 3000 }\n");
        let b = body_for(&m, true);
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 3000})
        );
        assert!(b.get("temperature").is_none());
        let m = model("reasoning_effort = \"high\"\n");
        let b = body_for(&m, true);
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 4096})
        );
        assert!(b.get("reasoning_effort").is_none());
    }

    #[test]
    fn formats_become_instructions() {
        let schema = json!({"type": "json_schema", "json_schema": {"name": "h",
            "schema": {"type": "object", "required": ["ok"]}}});
        let text = format_instruction(&schema).unwrap();
        assert!(text.contains("\"required\"") && text.contains("single JSON object"));
        assert!(format_instruction(&json!({"type": "text"})).is_none());
    }
}
