//! A history message as AG-UI events, for both kinds of run: the stateless one renders the
//! messages its run adds (`stream.rs`), a thread the ones its conversation's log holds
//! (`thread_stream.rs`).

use std::collections::VecDeque;

use super::events::AguiEvent;
use crate::wire::Message;

/// The model's reply: its streamed text closed (`open_text`, the id of the text message being
/// streamed) or sent whole when it was not streamed, its reasoning, then its calls, each
/// under the reply's message id.
pub fn assistant(out: &mut VecDeque<AguiEvent>, open_text: Option<String>, message: Message) {
    let text = message.text();
    let message_id = match open_text {
        Some(id) => {
            out.push_back(AguiEvent::TextMessageEnd {
                message_id: id.clone(),
            });
            id
        }
        None => {
            let id = new_id();
            if !text.is_empty() {
                out.push_back(AguiEvent::TextMessageStart {
                    message_id: id.clone(),
                    role: "assistant",
                });
                out.push_back(AguiEvent::TextMessageContent {
                    message_id: id.clone(),
                    delta: text,
                });
                out.push_back(AguiEvent::TextMessageEnd {
                    message_id: id.clone(),
                });
            }
            id
        }
    };
    if let Some(reasoning) = message.reasoning_content.filter(|r| !r.is_empty()) {
        let id = new_id();
        out.extend([
            AguiEvent::ReasoningStart {
                message_id: id.clone(),
            },
            AguiEvent::ReasoningMessageStart {
                message_id: id.clone(),
                role: "reasoning",
            },
            AguiEvent::ReasoningMessageContent {
                message_id: id.clone(),
                delta: reasoning,
            },
            AguiEvent::ReasoningMessageEnd {
                message_id: id.clone(),
            },
            AguiEvent::ReasoningEnd { message_id: id },
        ]);
    }
    for call in message.tool_calls.into_iter().flatten() {
        out.push_back(AguiEvent::ToolCallStart {
            tool_call_id: call.id.clone(),
            tool_call_name: call.function.name,
            parent_message_id: message_id.clone(),
        });
        if !call.function.arguments.is_empty() {
            out.push_back(AguiEvent::ToolCallArgs {
                tool_call_id: call.id.clone(),
                delta: call.function.arguments,
            });
        }
        out.push_back(AguiEvent::ToolCallEnd {
            tool_call_id: call.id,
        });
    }
}

/// A tool's result message for call `tool_call_id`.
pub fn tool_result(tool_call_id: String, message: &Message) -> AguiEvent {
    AguiEvent::ToolCallResult {
        message_id: new_id(),
        tool_call_id,
        content: message.text(),
        role: "tool",
    }
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
