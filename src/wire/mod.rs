//! What crosses the HTTP boundary: request, response and SSE event payloads, and the
//! OpenAI-format messages of `conversation_history`. Serde for the wire, schemars for OpenAPI.

pub mod content;
pub mod events;
pub mod known_json;
pub mod message;
pub mod request;
pub mod response;
pub mod rules;

pub use events::StreamEvent;
pub use message::{FunctionCall, Message, ToolCall};
pub use request::ChatRequest;
pub use response::{ChatResponse, FollowUpAction, Metadata};
