//! The `generateContent` request body of one completion: `contents` and `systemInstruction`,
//! `functionDeclarations` with their schemas in Gemini's subset, `toolConfig` (mode `NONE` when
//! calls are forbidden: the definitions stay, as the history may hold calls), and
//! `generationConfig` from the entry (temperature, topP, maxOutputTokens, stop sequences,
//! thinking). Structured output uses `responseSchema` only when no tools are declared, since
//! Gemini refuses a JSON response type beside function declarations; otherwise the format is
//! an instruction, checked by the agent as for every provider.

use serde_json::{Map, Value, json};

use super::{contents, schema};
use crate::llm::error::LlmError;
use crate::llm::provider::CompletionRequest;

/// LiteLLM's thinking budgets for `reasoning_effort` on Gemini.
fn effort_budget(effort: &str) -> Option<i64> {
    match effort {
        "disable" | "none" => Some(0),
        "low" => Some(1024),
        "medium" => Some(2048),
        "high" => Some(4096),
        _ => None,
    }
}

fn thinking_config(thinking: Option<&Value>, reasoning_effort: Option<&str>) -> Option<Value> {
    let budget = match thinking {
        Some(t) if t.get("type").and_then(Value::as_str) == Some("disabled") => 0,
        Some(t) => t.get("budget_tokens").and_then(Value::as_i64).unwrap_or(-1),
        None => effort_budget(reasoning_effort?)?,
    };
    Some(if budget == 0 {
        json!({"thinkingBudget": 0})
    } else {
        json!({"thinkingBudget": budget, "includeThoughts": true})
    })
}

pub fn body(req: &CompletionRequest<'_>) -> Result<Value, LlmError> {
    let model = req.model;
    let params = &model.extra_params;
    let history = contents::translate(req.messages, req.tools.is_some());
    let mut body = Map::new();
    let mut system = history.system;
    body.insert("contents".into(), Value::Array(history.contents));
    if let Some(tools) = req.tools {
        let tools: Vec<Value> = serde_json::from_str(tools.get())
            .map_err(|e| LlmError::Protocol(format!("cannot read the tool definitions: {e}")))?;
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": tools.iter().map(declaration).collect::<Vec<_>>()}]),
        );
        let mode = if req.allow_tool_calls { "AUTO" } else { "NONE" };
        body.insert(
            "toolConfig".into(),
            json!({"functionCallingConfig": {"mode": mode}}),
        );
    }
    let mut generation = Map::new();
    if let Some(t) = model.temperature {
        generation.insert("temperature".into(), json!(t));
    }
    if let Some(top_p) = model.top_p {
        generation.insert("topP".into(), json!(top_p));
    }
    if let Some(seed) = params.get("seed") {
        generation.insert("seed".into(), seed.clone());
    }
    let max_tokens = params
        .get("max_completion_tokens")
        .and_then(Value::as_u64)
        .or(model.max_tokens.map(u64::from));
    if let Some(n) = max_tokens {
        generation.insert("maxOutputTokens".into(), json!(n));
    }
    match params.get("stop") {
        Some(Value::String(s)) => {
            generation.insert("stopSequences".into(), json!([s]));
        }
        Some(stops @ Value::Array(_)) => {
            generation.insert("stopSequences".into(), stops.clone());
        }
        _ => {}
    }
    if let Some(config) =
        thinking_config(model.thinking.as_ref(), model.reasoning_effort.as_deref())
    {
        generation.insert("thinkingConfig".into(), config);
    }
    if let Some(format) = req.response_format {
        let kind = format.get("type").and_then(Value::as_str);
        let schema = format.pointer("/json_schema/schema");
        match (req.tools.is_some(), kind) {
            (false, Some("json_object")) => {
                generation.insert("responseMimeType".into(), json!("application/json"));
            }
            (false, Some("json_schema")) => {
                generation.insert("responseMimeType".into(), json!("application/json"));
                if let Some(schema) = schema {
                    generation.insert("responseSchema".into(), schema::translate(schema));
                }
            }
            (true, Some("json_object" | "json_schema")) => {
                system.push_str(&format!(
                    "\n\nYour final answer must be a single JSON object and nothing else: no \
                     prose before or after it, no code fences.{}",
                    schema.map_or_else(String::new, |s| format!(
                        " It must match this JSON Schema:\n{s:#}"
                    ))
                ));
            }
            _ => {}
        }
    }
    if !system.trim().is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system.trim()}]}),
        );
    }
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    if let Some(Value::Object(extra)) = params.get("extra_body") {
        for (k, v) in extra {
            body.insert(k.clone(), v.clone());
        }
    }
    Ok(Value::Object(body))
}

/// An OpenAI-format tool definition as a Gemini function declaration. A function without
/// parameters declares none: Gemini refuses an object schema with no properties.
fn declaration(definition: &Value) -> Value {
    let function = definition.get("function").unwrap_or(definition);
    let mut declaration = json!({"name": function.get("name").cloned().unwrap_or(Value::Null)});
    if let Some(d) = function
        .get("description")
        .and_then(Value::as_str)
        .filter(|d| !d.is_empty())
    {
        declaration["description"] = json!(d);
    }
    if let Some(parameters) = function.get("parameters").filter(|p| p.is_object()) {
        let translated = schema::translate(parameters);
        if translated
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
        {
            declaration["parameters"] = translated;
        }
    }
    declaration
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_translate_schemas_and_drop_empty_ones() {
        let d = declaration(&json!({"type": "function", "function": {"name": "bash",
            "description": "run", "parameters": {"type": "object", "additionalProperties": false,
            "properties": {"c": {"type": ["string", "null"]}}}}}));
        assert_eq!(
            d,
            json!({"name": "bash", "description": "run", "parameters": {"type": "object",
                "properties": {"c": {"type": "string", "nullable": true}}}})
        );
        let bare = declaration(&json!({"function": {"name": "x",
            "parameters": {"type": "object", "properties": {}}}}));
        assert_eq!(bare, json!({"name": "x"}));
    }

    #[test]
    fn a_format_without_tools_is_a_response_schema() {
        let settings = crate::config::Settings::from_toml(
            "[models.g]\nmodel = \"gemini/gemini-2.5-flash\"\napi_key = \"k\"\ntemperature = 0.1\nmax_tokens = 900\nstop = \"END\"\n",
        )
        .unwrap();
        let registry = crate::llm::ModelRegistry::from_settings(&settings).unwrap();
        let model = registry.resolve(Some("g")).unwrap();
        let messages = [crate::wire::Message::user(json!("q"))];
        let format = json!({"type": "json_schema", "json_schema": {"name": "h", "schema": {
            "type": "object", "additionalProperties": false,
            "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}});
        let b = body(&CompletionRequest {
            model: &model,
            messages: &messages,
            tools: None,
            allow_tool_calls: false,
            response_format: Some(&format),
        })
        .unwrap();
        let config = &b["generationConfig"];
        assert_eq!(config["responseMimeType"], "application/json");
        assert_eq!(
            config["responseSchema"],
            json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
        );
        assert_eq!(config["temperature"], 0.1);
        assert_eq!(config["maxOutputTokens"], 900);
        assert_eq!(config["stopSequences"], json!(["END"]));
        assert!(b.get("tools").is_none() && b.get("toolConfig").is_none());
    }

    #[test]
    fn thinking_from_the_entry() {
        assert_eq!(
            thinking_config(None, Some("high")),
            Some(json!({"thinkingBudget": 4096, "includeThoughts": true}))
        );
        let on = json!({"type": "enabled", "budget_tokens": 999});
        assert_eq!(
            thinking_config(Some(&on), Some("low")),
            Some(json!({"thinkingBudget": 999, "includeThoughts": true}))
        );
        assert_eq!(
            thinking_config(Some(&json!({"type": "disabled"})), None),
            Some(json!({"thinkingBudget": 0}))
        );
        assert_eq!(thinking_config(None, None), None);
    }
}
