//! Frontend tools: declared per conversation, called by the LLM like any tool, executed by
//! the client. `pause` stops the run for the client to run the tool; `noop` answers at once
//! with a canned result. The model's arguments are checked against the tool's schema first:
//! the client only ever gets arguments that match it.

use serde_json::{Value, json};

use super::error::RunError;
use crate::tools::ToolRegistry;
use crate::wire::request::{FrontendToolDefinition, FrontendToolMode};

pub const DEFAULT_NOOP_RESPONSE: &str =
    "The action was performed successfully in the user's browser.";

pub struct FrontendTool {
    pub name: String,
    pub mode: FrontendToolMode,
    pub noop_response: Option<String>,
    /// `None` when the tool takes any object.
    validator: Option<jsonschema::Validator>,
}

impl FrontendTool {
    /// The model's arguments as JSON, or why they cannot go to the client.
    pub fn check_arguments(&self, raw: &str) -> Result<Value, String> {
        let value: Value = if raw.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(raw)
                .map_err(|e| format!("the arguments are not valid JSON ({e})"))?
        };
        if !value.is_object() {
            return Err("the arguments must be a JSON object".into());
        }
        if let Some(validator) = &self.validator {
            let errors = super::structured::violations(validator, &value, 10);
            if !errors.is_empty() {
                return Err(format!(
                    "the arguments do not match the tool's parameters schema: {}",
                    errors.join("; ")
                ));
            }
        }
        Ok(value)
    }
}

/// Validates frontend tool declarations and returns them with their OpenAI definitions.
pub(super) fn compile(
    defs: &[FrontendToolDefinition],
    registry: &ToolRegistry,
    can_pause: bool,
) -> Result<(Vec<FrontendTool>, Vec<Value>), RunError> {
    let mut tools: Vec<FrontendTool> = Vec::with_capacity(defs.len());
    let mut definitions = Vec::with_capacity(defs.len());
    for (i, def) in defs.iter().enumerate() {
        let name = def.name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(RunError::bad_input(format!(
                "frontend_tools[{i}].name '{}' is not a valid tool name (letters, digits, '_' and '-')",
                def.name
            )));
        }
        if registry.get(name).is_some() || tools.iter().any(|t| t.name == name) {
            return Err(RunError::bad_input(format!(
                "Frontend tool name '{name}' conflicts with either a built-in Holmes tool or another frontend tool in the same request. Use a different name."
            )));
        }
        let (parameters, validator) = match &def.parameters {
            None => (json!({"type": "object", "properties": {}}), None),
            Some(Value::Object(o)) if o.is_empty() => {
                (json!({"type": "object", "properties": {}}), None)
            }
            Some(schema @ Value::Object(_)) => {
                let validator = jsonschema::validator_for(schema).map_err(|e| {
                    RunError::bad_input(format!(
                        "frontend_tools[{i}] ('{name}'): invalid parameters JSON Schema: {e}"
                    ))
                })?;
                (schema.clone(), Some(validator))
            }
            Some(_) => {
                return Err(RunError::bad_input(format!(
                    "frontend_tools[{i}] ('{name}'): parameters must be a JSON Schema object"
                )));
            }
        };
        if def.mode == FrontendToolMode::Pause && !can_pause {
            return Err(RunError::bad_input(
                "frontend_tools with mode='pause' requires stream=true (the pause/resume flow needs SSE)",
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
            validator,
        });
    }
    Ok((tools, definitions))
}
