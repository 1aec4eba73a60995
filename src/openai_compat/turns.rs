//! Both APIs' inputs in one form — instructions, user turns, the assistant's replies and the
//! results of the client's tools — and that form as a run: the client's instructions join the
//! system prompt, the last user turn is the run's new message (rendered through the prompt
//! template, its images checked), everything before it is the history. A conversation that
//! ends with tool results continues the run that asked for them (the client's own tools).

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::OpenAiError;
use crate::agent::{ApprovalMode, Input, RunConfig, RunState, UserMessage};
use crate::wire::request::{FrontendToolDefinition, FrontendToolMode, ImageInput};
use crate::wire::{Message, ToolCall};

/// One piece of a client's conversation, whichever API it came in.
#[derive(Debug)]
pub enum Turn {
    /// A `system` or `developer` message, or the Responses API's `instructions`.
    Instruction(String),
    User {
        text: String,
        images: Vec<ImageInput>,
    },
    Assistant {
        text: Option<String>,
        calls: Vec<ToolCall>,
    },
    ToolResult {
        call_id: String,
        content: String,
    },
}

/// What a request asks of the run besides its conversation.
pub struct Options {
    pub model: String,
    pub response_format: Option<Value>,
    /// The client's function tools: the run ends on their calls for the client to answer.
    pub client_tools: Vec<FrontendToolDefinition>,
    pub streaming: bool,
    /// The request's headers tools may see (blocked ones removed), as `/api/chat` passes them.
    pub tool_headers: Vec<(String, String)>,
    /// Where the conversation is in the request, for errors: `messages` or `input`.
    pub field: &'static str,
}

pub struct Prepared {
    pub config: RunConfig,
    pub state: RunState,
    pub input: Input,
}

/// Told to the model on every run of this door: nobody can approve a call here.
const NO_APPROVALS: &str = "This conversation comes through an OpenAI-compatible API where \
     nobody can approve tool calls: a call that needs approval is refused. Do not retry a \
     refused call; say in your answer what you would run and why, so the user can run it.";

pub fn prepare(turns: Vec<Turn>, options: Options) -> Result<Prepared, OpenAiError> {
    let field = options.field;
    let mut instructions = Vec::new();
    let mut rest = Vec::with_capacity(turns.len());
    for turn in turns {
        match turn {
            Turn::Instruction(text) => instructions.push(text),
            other => rest.push(other),
        }
    }
    let message = match rest.last() {
        Some(Turn::User { .. }) => match rest.pop() {
            Some(Turn::User { text, images }) => Some(UserMessage { text, images }),
            _ => None,
        },
        Some(Turn::ToolResult { .. }) => None,
        Some(_) => {
            return Err(OpenAiError::invalid(
                format!(
                    "The last item of `{field}` must be a user message, or tool results \
                     continuing the reply that asked for them; it is an assistant message"
                ),
                Some(field),
            ));
        }
        None => {
            return Err(OpenAiError::invalid(
                format!("`{field}` holds no user message: send the question as one"),
                Some(field),
            ));
        }
    };
    if message
        .as_ref()
        .is_some_and(|m| m.text.trim().is_empty() && m.images.is_empty())
    {
        return Err(OpenAiError::invalid(
            format!("The last user message of `{field}` is empty"),
            Some(field),
        ));
    }
    let messages = history(rest, field)?;
    instructions.push(NO_APPROVALS.to_owned());
    let config = RunConfig {
        model: Some(options.model),
        additional_system_prompt: Some(instructions.join("\n\n")),
        behavior_controls: None,
        // A repaired structured answer would follow its first attempt in the deltas: the
        // answer is sent whole instead.
        text_deltas: options.streaming && options.response_format.is_none(),
        response_format: options.response_format,
        frontend_tools: options.client_tools,
        approvals: ApprovalMode::Refuse,
        // The client's tools end the run: the reply is the pause.
        can_pause: true,
        max_steps: None,
        secrets: Vec::new(),
        stuck_detection: false,
    };
    let state = RunState {
        messages,
        ..RunState::default()
    };
    let input = Input {
        message,
        tool_headers: Arc::new(options.tool_headers),
        ..Input::default()
    };
    Ok(Prepared {
        config,
        state,
        input,
    })
}

/// The turns before the new message as OpenAI-format messages. A tool result must answer a
/// call of the assistant reply before it (as OpenAI requires: providers refuse it otherwise).
fn history(turns: Vec<Turn>, field: &str) -> Result<Vec<Message>, OpenAiError> {
    let mut messages: Vec<Message> = Vec::with_capacity(turns.len());
    let mut open_calls: Vec<ToolCall> = Vec::new();
    for turn in turns {
        match turn {
            Turn::User { text, images } => {
                open_calls.clear();
                messages.push(Message::user(user_content(text, &images)));
            }
            Turn::Assistant { text, calls } => {
                open_calls = calls.clone();
                messages.push(Message::assistant(text, None, calls));
            }
            Turn::ToolResult { call_id, content } => {
                let Some(call) = open_calls.iter().find(|c| c.id == call_id) else {
                    return Err(OpenAiError::invalid(
                        format!(
                            "`{field}`: the tool result for `{call_id}` answers no tool call \
                             of the assistant message before it"
                        ),
                        Some(field),
                    ));
                };
                messages.push(Message::tool(&call_id, &call.function.name, content));
            }
            // Gathered into the system prompt by `prepare`.
            Turn::Instruction(_) => {}
        }
    }
    Ok(messages)
}

/// A past user message as the model reads it: text, or text and image parts.
fn user_content(text: String, images: &[ImageInput]) -> Value {
    if images.is_empty() {
        return Value::String(text);
    }
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(images.iter().map(|image| match image {
        ImageInput::Url(url) => json!({"type": "image_url", "image_url": {"url": url}}),
        ImageInput::Detailed(spec) => {
            let mut image_url = json!({"url": spec.url});
            if let Some(detail) = &spec.detail {
                image_url["detail"] = json!(detail);
            }
            json!({"type": "image_url", "image_url": image_url})
        }
    }));
    Value::Array(parts)
}

/// A client's function tool as a frontend tool that pauses the run for the client.
pub fn client_tool(
    name: String,
    description: Option<String>,
    parameters: Option<Value>,
) -> FrontendToolDefinition {
    FrontendToolDefinition {
        name,
        description: description.unwrap_or_default(),
        parameters,
        mode: FrontendToolMode::Pause,
        noop_response: None,
    }
}
