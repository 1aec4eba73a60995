//! `RunAgentInput`, AG-UI's request body, as it arrives (camelCase). The protocol's objects are
//! open, so fields we do not read are ignored; a field we read with the wrong shape is refused
//! before the stream starts, naming it.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    pub thread_id: String,
    pub run_id: String,
    #[serde(default)]
    pub parent_run_id: Option<String>,
    /// Any JSON value; sent back unchanged as the run's state snapshot.
    #[serde(default)]
    pub state: Option<Value>,
    pub messages: Vec<InputMessage>,
    /// Frontend tools: the client runs them.
    #[serde(default)]
    pub tools: Vec<InputTool>,
    #[serde(default)]
    pub context: Vec<ContextEntry>,
    /// Read for one key, `model` (a key of the model list); the rest is ignored.
    #[serde(default)]
    pub forwarded_props: Option<Value>,
    #[serde(default)]
    pub resume: Option<Vec<ResumeEntry>>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum InputMessage {
    Developer(TextMessage),
    System(TextMessage),
    User(UserMessage),
    Assistant(AssistantMessage),
    Tool(ToolMessage),
    /// Materialised reasoning and activity: shown to the user, never sent to the model.
    Reasoning(Ignored),
    Activity(Ignored),
}

#[derive(Debug, Deserialize)]
pub struct TextMessage {
    pub content: String,
}

#[derive(Debug, Deserialize)]
pub struct UserMessage {
    pub content: Body,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<InputToolCall>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMessage {
    pub content: Body,
    pub tool_call_id: String,
}

#[derive(Debug, Deserialize)]
pub struct Ignored {}

/// A message body: text, or content parts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Body {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Part {
    Text { text: String },
    Image { source: Source },
    Audio {},
    Video {},
    Document {},
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Source {
    Data {
        value: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Url {
        value: String,
    },
    /// A provider's file handle: nothing triage can send on.
    File {},
}

#[derive(Debug, Deserialize)]
pub struct InputToolCall {
    pub id: String,
    pub function: InputFunction,
}

#[derive(Debug, Deserialize)]
pub struct InputFunction {
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Deserialize)]
pub struct InputTool {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub parameters: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub struct ContextEntry {
    pub description: String,
    pub value: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    pub interrupt_id: String,
    pub status: ResumeStatus,
    #[serde(default)]
    pub payload: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    Resolved,
    Cancelled,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_client_s_shape_reads_and_open_objects_stay_open() {
        let input: RunAgentInput = serde_json::from_value(json!({
            "threadId": "t", "runId": "r", "protocolVersion": "1.0.0", "state": {"a": 1},
            "messages": [
                {"id": "1", "role": "user", "content": [{"type": "text", "text": "hi"}], "extra": 1},
                {"id": "2", "role": "assistant", "toolCalls": [{"id": "c", "type": "function",
                    "function": {"name": "bash", "arguments": "{}"}}]},
                {"id": "3", "role": "tool", "toolCallId": "c", "content": "ok"},
                {"id": "4", "role": "reasoning", "content": "hmm"},
                {"id": "5", "role": "activity", "activityType": "x", "content": {}}
            ],
            "tools": [], "context": [{"description": "ns", "value": "default"}],
            "forwardedProps": {},
            "resume": [{"interruptId": "i", "status": "cancelled"}]
        }))
        .unwrap();
        assert_eq!(input.messages.len(), 5);
        assert_eq!(input.resume.unwrap()[0].status, ResumeStatus::Cancelled);
        let bad = serde_json::from_value::<RunAgentInput>(json!({
            "threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "robot", "content": ""}]
        }));
        assert!(bad.unwrap_err().to_string().contains("robot"));
    }
}
