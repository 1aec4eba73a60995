//! `POST /v1/chat/completions`'s body, and its messages as turns. Unknown parameters are
//! refused, as OpenAI refuses them; the sampling parameters OpenAI documents are read and left
//! alone (the model entry of the list decides them for every step of the investigation).

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::error::OpenAiError;
use super::turns::{self, Options, Prepared, Turn};
use crate::wire::ToolCall;
use crate::wire::request::{ImageInput, ImageSpec};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatCompletionRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub response_format: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub tools: Option<Vec<FunctionTool>>,
    /// `auto` and `none` only: the investigation decides which tools it calls.
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default, rename = "temperature")]
    _temperature: Option<IgnoredAny>,
    #[serde(default, rename = "top_p")]
    _top_p: Option<IgnoredAny>,
    #[serde(default, rename = "max_tokens")]
    _max_tokens: Option<IgnoredAny>,
    #[serde(default, rename = "max_completion_tokens")]
    _max_completion_tokens: Option<IgnoredAny>,
    #[serde(default, rename = "stop")]
    _stop: Option<IgnoredAny>,
    #[serde(default, rename = "presence_penalty")]
    _presence_penalty: Option<IgnoredAny>,
    #[serde(default, rename = "frequency_penalty")]
    _frequency_penalty: Option<IgnoredAny>,
    #[serde(default, rename = "logit_bias")]
    _logit_bias: Option<IgnoredAny>,
    #[serde(default, rename = "seed")]
    _seed: Option<IgnoredAny>,
    #[serde(default, rename = "user")]
    _user: Option<IgnoredAny>,
    #[serde(default, rename = "metadata")]
    _metadata: Option<IgnoredAny>,
    #[serde(default, rename = "parallel_tool_calls")]
    _parallel_tool_calls: Option<IgnoredAny>,
    #[serde(default, rename = "reasoning_effort")]
    _reasoning_effort: Option<IgnoredAny>,
    #[serde(default, rename = "service_tier")]
    _service_tier: Option<IgnoredAny>,
    #[serde(default, rename = "store")]
    _store: Option<IgnoredAny>,
    #[serde(default, rename = "logprobs")]
    _logprobs: Option<IgnoredAny>,
    #[serde(default, rename = "top_logprobs")]
    _top_logprobs: Option<IgnoredAny>,
    #[serde(default, rename = "prompt_cache_key")]
    _prompt_cache_key: Option<IgnoredAny>,
    #[serde(default, rename = "safety_identifier")]
    _safety_identifier: Option<IgnoredAny>,
    #[serde(default, rename = "verbosity")]
    _verbosity: Option<IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
    #[serde(default, rename = "include_obfuscation")]
    _include_obfuscation: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    pub role: Role,
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub tool_calls: Option<Vec<MessageToolCall>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default, rename = "name")]
    _name: Option<IgnoredAny>,
    /// What DeepSeek-style replies carry and some clients send back: never the model's input.
    #[serde(default, rename = "reasoning_content")]
    _reasoning_content: Option<IgnoredAny>,
    #[serde(default, rename = "refusal")]
    _refusal: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageToolCall {
    pub id: String,
    #[serde(rename = "type", default)]
    _kind: Option<IgnoredAny>,
    pub function: CalledFunction,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalledFunction {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionTool {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionDefinition,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionDefinition {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<Value>,
    #[serde(default, rename = "strict")]
    _strict: Option<IgnoredAny>,
}

impl ChatCompletionRequest {
    pub fn streaming(&self) -> bool {
        self.stream == Some(true)
    }

    /// Whether the stream ends with a usage chunk (`stream_options.include_usage`).
    pub fn usage_in_stream(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// The request as a run, with the request's headers tools may see.
    pub fn prepare(self, tool_headers: Vec<(String, String)>) -> Result<Prepared, OpenAiError> {
        if self.n.is_some_and(|n| n != 1) {
            return Err(OpenAiError::invalid(
                "`n` must be 1: an investigation gives one answer",
                Some("n"),
            )
            .with_code("unsupported_value"));
        }
        if self.stream_options.is_some() && !self.streaming() {
            return Err(OpenAiError::invalid(
                "`stream_options` is only allowed when `stream` is true",
                Some("stream_options"),
            ));
        }
        let streaming = self.streaming();
        let tools_off = match &self.tool_choice {
            None => false,
            Some(Value::String(choice)) if choice == "auto" => false,
            Some(Value::String(choice)) if choice == "none" => true,
            Some(_) => {
                return Err(OpenAiError::invalid(
                    "`tool_choice` may be \"auto\" or \"none\": the investigation decides which \
                     tools it calls",
                    Some("tool_choice"),
                )
                .with_code("unsupported_value"));
            }
        };
        let client_tools = match self.tools {
            Some(tools) if !tools_off => client_tools(tools)?,
            _ => Vec::new(),
        };
        let response_format = self
            .response_format
            .map(Value::Object)
            .filter(|f| f.get("type").and_then(Value::as_str) != Some("text"));
        let turns = self
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| turn(i, m))
            .collect::<Result<Vec<_>, _>>()?;
        turns::prepare(
            turns,
            Options {
                model: self.model,
                response_format,
                client_tools,
                streaming,
                tool_headers,
                field: "messages",
            },
        )
    }
}

fn client_tools(
    tools: Vec<FunctionTool>,
) -> Result<Vec<crate::wire::request::FrontendToolDefinition>, OpenAiError> {
    tools
        .into_iter()
        .enumerate()
        .map(|(i, tool)| {
            if tool.kind != "function" {
                return Err(OpenAiError::invalid(
                    format!(
                        "tools[{i}].type `{}` is not supported: only function tools are",
                        tool.kind
                    ),
                    Some(&format!("tools[{i}].type")),
                )
                .with_code("unsupported_value"));
            }
            let f = tool.function;
            Ok(turns::client_tool(f.name, f.description, f.parameters))
        })
        .collect()
}

fn turn(i: usize, message: ChatMessage) -> Result<Turn, OpenAiError> {
    let param = format!("messages[{i}].content");
    Ok(match message.role {
        Role::System | Role::Developer => Turn::Instruction(text_only(message.content, &param)?),
        Role::User => {
            let (text, images) = user_content(message.content, &param)?;
            Turn::User { text, images }
        }
        Role::Assistant => {
            let text = match message.content {
                None | Some(Value::Null) => None,
                content => Some(text_only(content, &param)?),
            };
            let calls = message
                .tool_calls
                .unwrap_or_default()
                .into_iter()
                .map(|c| ToolCall::new(c.id, c.function.name, c.function.arguments))
                .collect();
            Turn::Assistant { text, calls }
        }
        Role::Tool => {
            let Some(call_id) = message.tool_call_id else {
                return Err(OpenAiError::invalid(
                    format!("messages[{i}]: a tool message needs its `tool_call_id`"),
                    Some(&format!("messages[{i}].tool_call_id")),
                )
                .with_code("missing_required_parameter"));
            };
            Turn::ToolResult {
                call_id,
                content: text_only(message.content, &param)?,
            }
        }
    })
}

/// A string, or text parts joined.
fn text_only(content: Option<Value>, param: &str) -> Result<String, OpenAiError> {
    let (text, images) = user_content(content, param)?;
    if !images.is_empty() {
        return Err(OpenAiError::invalid(
            format!("{param}: images are only read in user messages"),
            Some(param),
        ));
    }
    Ok(text)
}

/// A user message's content: a string, or text and `image_url` parts.
fn user_content(
    content: Option<Value>,
    param: &str,
) -> Result<(String, Vec<ImageInput>), OpenAiError> {
    let parts = match content {
        None | Some(Value::Null) => return Ok((String::new(), Vec::new())),
        Some(Value::String(text)) => return Ok((text, Vec::new())),
        Some(Value::Array(parts)) => parts,
        Some(_) => {
            return Err(OpenAiError::invalid(
                format!("{param} must be a string or an array of content parts"),
                Some(param),
            )
            .with_code("invalid_type"));
        }
    };
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for (j, part) in parts.into_iter().enumerate() {
        let here = format!("{param}[{j}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text") => match part.get("text").and_then(Value::as_str) {
                Some(text) => texts.push(text.to_owned()),
                None => return Err(missing(&here, "text")),
            },
            Some("image_url") => {
                let image = part.get("image_url");
                let url = image
                    .and_then(|i| i.get("url").or(Some(i)))
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing(&here, "image_url.url"))?;
                let detail = image
                    .and_then(|i| i.get("detail"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                images.push(ImageInput::Detailed(ImageSpec {
                    url: Some(url.to_owned()),
                    detail,
                    format: None,
                }));
            }
            Some(other) => {
                return Err(OpenAiError::invalid(
                    format!(
                        "{here}: content parts of type `{other}` are not supported (text and \
                         image_url are)"
                    ),
                    Some(&format!("{here}.type")),
                )
                .with_code("unsupported_value"));
            }
            None => return Err(missing(&here, "type")),
        }
    }
    Ok((texts.join("\n"), images))
}

fn missing(at: &str, field: &str) -> OpenAiError {
    let param = format!("{at}.{field}");
    OpenAiError::invalid(
        format!("Missing required parameter: '{param}'."),
        Some(&param),
    )
    .with_code("missing_required_parameter")
}
