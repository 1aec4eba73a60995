//! `POST /v1/responses`'s body, and its input as turns. Stateless: nothing is stored, so a
//! request that names an earlier response or a conversation, or asks to be stored, is refused
//! rather than answered without the context it expects.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::error::OpenAiError;
use super::turns::{self, Options, Prepared, Turn};
use crate::wire::ToolCall;
use crate::wire::request::{FrontendToolDefinition, ImageInput, ImageSpec};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponsesRequest {
    pub model: String,
    pub input: Value,
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub text: Option<TextOptions>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub previous_response_id: Option<String>,
    #[serde(default)]
    pub store: Option<bool>,
    #[serde(default)]
    pub conversation: Option<Value>,
    #[serde(default)]
    pub background: Option<bool>,
    #[serde(default, rename = "temperature")]
    _temperature: Option<IgnoredAny>,
    #[serde(default, rename = "top_p")]
    _top_p: Option<IgnoredAny>,
    #[serde(default, rename = "max_output_tokens")]
    _max_output_tokens: Option<IgnoredAny>,
    #[serde(default, rename = "metadata")]
    _metadata: Option<IgnoredAny>,
    #[serde(default, rename = "parallel_tool_calls")]
    _parallel_tool_calls: Option<IgnoredAny>,
    #[serde(default, rename = "reasoning")]
    _reasoning: Option<IgnoredAny>,
    #[serde(default, rename = "user")]
    _user: Option<IgnoredAny>,
    #[serde(default, rename = "truncation")]
    _truncation: Option<IgnoredAny>,
    #[serde(default, rename = "include")]
    _include: Option<IgnoredAny>,
    #[serde(default, rename = "service_tier")]
    _service_tier: Option<IgnoredAny>,
    #[serde(default, rename = "stream_options")]
    _stream_options: Option<IgnoredAny>,
    #[serde(default, rename = "prompt_cache_key")]
    _prompt_cache_key: Option<IgnoredAny>,
    #[serde(default, rename = "safety_identifier")]
    _safety_identifier: Option<IgnoredAny>,
    #[serde(default, rename = "max_tool_calls")]
    _max_tool_calls: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextOptions {
    #[serde(default)]
    pub format: Option<serde_json::Map<String, Value>>,
    #[serde(default, rename = "verbosity")]
    _verbosity: Option<IgnoredAny>,
}

impl ResponsesRequest {
    pub fn streaming(&self) -> bool {
        self.stream == Some(true)
    }

    /// The chat form of `text.format`, which the Responses API flattens (`name` and `schema`
    /// beside `type`).
    fn response_format(&self) -> Option<Value> {
        let format = self.text.as_ref()?.format.as_ref()?;
        match format.get("type").and_then(Value::as_str) {
            Some("json_schema") => {
                let mut spec = format.clone();
                spec.remove("type");
                Some(json!({"type": "json_schema", "json_schema": spec}))
            }
            Some("text") => None,
            _ => Some(Value::Object(format.clone())),
        }
    }

    pub fn prepare(self, tool_headers: Vec<(String, String)>) -> Result<Prepared, OpenAiError> {
        if self.previous_response_id.is_some() {
            return Err(OpenAiError::invalid(
                "`previous_response_id` is not supported: this server stores no responses; \
                 send the whole conversation in `input`",
                Some("previous_response_id"),
            )
            .with_code("unsupported_parameter"));
        }
        if self.store == Some(true) {
            return Err(OpenAiError::invalid(
                "`store: true` is not supported: this server stores no responses; send \
                 `store: false` or leave it out",
                Some("store"),
            )
            .with_code("unsupported_parameter"));
        }
        if self.conversation.as_ref().is_some_and(|c| !c.is_null()) {
            return Err(OpenAiError::invalid(
                "`conversation` is not supported: send the whole conversation in `input`",
                Some("conversation"),
            )
            .with_code("unsupported_parameter"));
        }
        if self.background == Some(true) {
            return Err(OpenAiError::invalid(
                "`background: true` is not supported: the answer comes in the response",
                Some("background"),
            )
            .with_code("unsupported_parameter"));
        }
        let tools_off = match &self.tool_choice {
            None => false,
            Some(Value::String(c)) if c == "auto" => false,
            Some(Value::String(c)) if c == "none" => true,
            Some(_) => {
                return Err(OpenAiError::invalid(
                    "`tool_choice` may be \"auto\" or \"none\"",
                    Some("tool_choice"),
                )
                .with_code("unsupported_value"));
            }
        };
        let client_tools = match &self.tools {
            Some(tools) if !tools_off => client_tools(tools)?,
            _ => Vec::new(),
        };
        let response_format = self.response_format();
        let streaming = self.streaming();
        let mut turns = Vec::new();
        if let Some(instructions) = self.instructions.filter(|i| !i.trim().is_empty()) {
            turns.push(Turn::Instruction(instructions));
        }
        match self.input {
            Value::String(text) => turns.push(Turn::User {
                text,
                images: Vec::new(),
            }),
            Value::Array(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    match (item_turn(i, item)?, turns.last_mut()) {
                        // One reply's calls come as one item each: they are one message.
                        (
                            Some(Turn::Assistant { text: None, calls }),
                            Some(Turn::Assistant { calls: before, .. }),
                        ) => before.extend(calls),
                        (Some(turn), _) => turns.push(turn),
                        (None, _) => {}
                    }
                }
            }
            _ => {
                return Err(OpenAiError::invalid(
                    "`input` must be a string or an array of input items",
                    Some("input"),
                )
                .with_code("invalid_type"));
            }
        }
        turns::prepare(
            turns,
            Options {
                model: self.model,
                response_format,
                client_tools,
                streaming,
                tool_headers,
                field: "input",
            },
        )
    }
}

fn client_tools(tools: &[Value]) -> Result<Vec<FrontendToolDefinition>, OpenAiError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let kind = tool.get("type").and_then(Value::as_str).unwrap_or("");
            let name = tool.get("name").and_then(Value::as_str);
            match (kind, name) {
                ("function", Some(name)) => Ok(turns::client_tool(
                    name.to_owned(),
                    tool.get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    tool.get("parameters").cloned().filter(|p| !p.is_null()),
                )),
                ("function", None) => Err(OpenAiError::invalid(
                    format!("Missing required parameter: 'tools[{i}].name'."),
                    Some(&format!("tools[{i}].name")),
                )
                .with_code("missing_required_parameter")),
                (other, _) => Err(OpenAiError::invalid(
                    format!("tools[{i}].type `{other}` is not supported: only function tools are"),
                    Some(&format!("tools[{i}].type")),
                )
                .with_code("unsupported_value")),
            }
        })
        .collect()
}

fn str_field(item: &Value, field: &str, at: &str) -> Result<String, OpenAiError> {
    item.get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            let param = format!("{at}.{field}");
            OpenAiError::invalid(
                format!("Missing required parameter: '{param}'."),
                Some(&param),
            )
            .with_code("missing_required_parameter")
        })
}

/// One input item as a turn; reasoning items (a client sending back an earlier output) are
/// dropped: the model never reads them.
fn item_turn(i: usize, item: Value) -> Result<Option<Turn>, OpenAiError> {
    let at = format!("input[{i}]");
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    Ok(Some(match kind {
        "message" => {
            let role = str_field(&item, "role", &at)?;
            let (text, images) = content(item.get("content"), &format!("{at}.content"))?;
            match role.as_str() {
                "system" | "developer" => Turn::Instruction(text),
                "user" => Turn::User { text, images },
                "assistant" => Turn::Assistant {
                    text: Some(text),
                    calls: Vec::new(),
                },
                other => {
                    return Err(OpenAiError::invalid(
                        format!(
                            "{at}.role `{other}` is not one of user, assistant, system, developer"
                        ),
                        Some(&format!("{at}.role")),
                    )
                    .with_code("invalid_value"));
                }
            }
        }
        "function_call" => Turn::Assistant {
            text: None,
            calls: vec![ToolCall::new(
                str_field(&item, "call_id", &at)?,
                str_field(&item, "name", &at)?,
                str_field(&item, "arguments", &at)?,
            )],
        },
        "function_call_output" => Turn::ToolResult {
            call_id: str_field(&item, "call_id", &at)?,
            content: match item.get("output") {
                Some(Value::String(s)) => s.clone(),
                other => content(other, &format!("{at}.output"))?.0,
            },
        },
        "reasoning" => return Ok(None),
        other => {
            return Err(OpenAiError::invalid(
                format!("{at}.type `{other}` is not supported"),
                Some(&format!("{at}.type")),
            )
            .with_code("unsupported_value"));
        }
    }))
}

/// A message's content: a string, or `input_text`/`output_text` and `input_image` parts.
fn content(content: Option<&Value>, at: &str) -> Result<(String, Vec<ImageInput>), OpenAiError> {
    let parts = match content {
        Some(Value::String(text)) => return Ok((text.clone(), Vec::new())),
        Some(Value::Array(parts)) => parts,
        _ => {
            return Err(OpenAiError::invalid(
                format!("{at} must be a string or an array of content parts"),
                Some(at),
            )
            .with_code("invalid_type"));
        }
    };
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for (j, part) in parts.iter().enumerate() {
        let here = format!("{at}[{j}]");
        match part.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => {
                texts.push(str_field(part, "text", &here)?);
            }
            Some("input_image") => images.push(ImageInput::Detailed(ImageSpec {
                url: Some(str_field(part, "image_url", &here)?),
                detail: part
                    .get("detail")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                format: None,
            })),
            Some("refusal") => {}
            other => {
                return Err(OpenAiError::invalid(
                    format!(
                        "{here}: content parts of type `{}` are not supported (input_text, \
                         output_text and input_image are)",
                        other.unwrap_or("(none)")
                    ),
                    Some(&format!("{here}.type")),
                )
                .with_code("unsupported_value"));
            }
        }
    }
    Ok((texts.join("\n"), images))
}
