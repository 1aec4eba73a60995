//! Frontend tools: declared per request, called by the LLM like any tool, executed by the
//! client. `pause` ends the stream for the client to run the tool and resume; `noop` answers
//! at once with a canned result.

use serde_json::{Value, json};

use super::prepare::ChatError;
use crate::tools::ToolRegistry;
use crate::wire::request::{FrontendToolDefinition, FrontendToolMode};

pub const DEFAULT_NOOP_RESPONSE: &str =
    "The action was performed successfully in the user's browser.";

#[derive(Debug, Clone)]
pub struct FrontendTool {
    pub name: String,
    pub mode: FrontendToolMode,
    pub noop_response: Option<String>,
}

/// Validates a request's frontend tools and returns them with their OpenAI definitions.
pub(super) fn validate(
    defs: &[FrontendToolDefinition],
    registry: &ToolRegistry,
    stream: bool,
) -> Result<(Vec<FrontendTool>, Vec<Value>), ChatError> {
    let mut tools = Vec::with_capacity(defs.len());
    let mut definitions = Vec::with_capacity(defs.len());
    for (i, def) in defs.iter().enumerate() {
        let name = def.name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(ChatError::BadRequest(format!(
                "frontend_tools[{i}].name '{}' is not a valid tool name (letters, digits, '_' and '-')",
                def.name
            )));
        }
        if registry.get(name).is_some() || tools.iter().any(|t: &FrontendTool| t.name == name) {
            return Err(ChatError::BadRequest(format!(
                "Frontend tool name '{name}' conflicts with either a built-in Holmes tool or another frontend tool in the same request. Use a different name."
            )));
        }
        let parameters = match &def.parameters {
            None => json!({"type": "object", "properties": {}}),
            Some(Value::Object(o)) if o.is_empty() => json!({"type": "object", "properties": {}}),
            Some(schema @ Value::Object(_)) => {
                jsonschema::validator_for(schema).map_err(|e| {
                    ChatError::BadRequest(format!(
                        "frontend_tools[{i}] ('{name}'): invalid parameters JSON Schema: {e}"
                    ))
                })?;
                schema.clone()
            }
            Some(_) => {
                return Err(ChatError::BadRequest(format!(
                    "frontend_tools[{i}] ('{name}'): parameters must be a JSON Schema object"
                )));
            }
        };
        if def.mode == FrontendToolMode::Pause && !stream {
            return Err(ChatError::BadRequest(
                "frontend_tools with mode='pause' requires stream=true (the pause/resume flow needs SSE)".into(),
            ));
        }
        definitions.push(json!({
            "type": "function",
            "function": {"name": name, "description": def.description, "parameters": parameters}
        }));
        tools.push(FrontendTool {
            name: name.to_owned(),
            mode: def.mode,
            noop_response: def.noop_response.clone(),
        });
    }
    Ok((tools, definitions))
}
