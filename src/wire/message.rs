//! OpenAI-format chat messages as they appear in `conversation_history`.
//!
//! Clients send back the history we returned, so every key we do not model is kept in `extra`
//! and round-trips unchanged. Keys that only triage uses (`token_count`, approval flags) are
//! modelled explicitly so they can be stripped before a message goes to the LLM.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::content::Content;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Message {
    pub role: String,
    /// A string, or an array of content parts (vision); absent on tool-call-only replies.
    #[serde(default, skip_serializing_if = "Content::is_absent")]
    #[schemars(with = "Option<Value>")]
    pub content: Content,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Reasoning text some models return beside the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Token count cache: counted once, carried in the history, never sent to the LLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_count: Option<u32>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
    /// Set while the call waits for the user's decision (tool approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_approval: Option<bool>,
    /// HMAC token proving the pending approval was issued by this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_token: Option<String>,
    /// Set while the call waits for the client to run a frontend tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_frontend: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text, exactly as the model produced it.
    #[serde(default)]
    pub arguments: String,
}

fn function_type() -> String {
    "function".to_owned()
}

impl Message {
    fn new(role: &str, content: Content) -> Self {
        Message {
            role: role.to_owned(),
            content,
            tool_calls: None,
            tool_call_id: None,
            name: None,
            reasoning_content: None,
            token_count: None,
            extra: Map::new(),
        }
    }

    pub fn system(text: impl Into<String>) -> Self {
        Self::new("system", Content::text(text))
    }

    /// A system message holding a prompt shared with other runs rather than a copy of it.
    pub fn shared_system(text: std::sync::Arc<str>) -> Self {
        Self::new("system", Content::Shared(text))
    }

    pub fn user(content: Value) -> Self {
        Self::new("user", Content::Json(content))
    }

    pub fn assistant(
        text: Option<String>,
        reasoning: Option<String>,
        tool_calls: Vec<ToolCall>,
    ) -> Self {
        let mut m = Self::new("assistant", text.map_or(Content::Absent, Content::text));
        m.reasoning_content = reasoning;
        if !tool_calls.is_empty() {
            m.tool_calls = Some(tool_calls);
        }
        m
    }

    pub fn tool(tool_call_id: &str, name: &str, content: String) -> Self {
        let mut m = Self::new("tool", Content::text(content));
        m.tool_call_id = Some(tool_call_id.to_owned());
        m.name = Some(name.to_owned());
        m
    }

    pub fn is_role(&self, role: &str) -> bool {
        self.role == role
    }

    /// The plain text of `content`: the string itself, or the text parts of a content array.
    pub fn text(&self) -> String {
        if let Some(text) = self.content.as_str() {
            return text.to_owned();
        }
        self.content.parts().map_or_else(String::new, |parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    pub fn tool_calls(&self) -> &[ToolCall] {
        self.tool_calls.as_deref().unwrap_or_default()
    }

    /// Provider thinking blocks of an assistant message, under LiteLLM's key, so HolmesGPT
    /// clients that send the history back keep them (Anthropic refuses a tool loop whose
    /// thinking blocks were dropped or changed).
    pub fn thinking_blocks(&self) -> &[Value] {
        match self.extra.get(THINKING_BLOCKS) {
            Some(Value::Array(blocks)) => blocks,
            _ => &[],
        }
    }

    pub fn set_thinking_blocks(&mut self, blocks: Vec<Value>) {
        if blocks.is_empty() {
            self.extra.remove(THINKING_BLOCKS);
        } else {
            self.extra
                .insert(THINKING_BLOCKS.to_owned(), Value::Array(blocks));
        }
    }
}

/// LiteLLM's name for an assistant message's thinking blocks.
pub const THINKING_BLOCKS: &str = "thinking_blocks";

impl ToolCall {
    pub fn new(id: String, name: String, arguments: String) -> Self {
        ToolCall {
            id,
            kind: function_type(),
            function: FunctionCall { name, arguments },
            pending_approval: None,
            approval_token: None,
            pending_frontend: None,
            extra: Map::new(),
        }
    }
}

/// A view of a message as the LLM must see it: only the OpenAI fields, none of triage's
/// bookkeeping, and none of the provider-specific extras a strict server might reject.
pub struct ForLlm<'a>(pub &'a Message);

impl Serialize for ForLlm<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let m = self.0;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("role", &m.role)?;
        match &m.content {
            // OpenAI requires `content` on every message but an assistant tool-call reply.
            Content::Absent if m.tool_calls().is_empty() => map.serialize_entry("content", "")?,
            Content::Absent => map.serialize_entry("content", &Value::Null)?,
            content => map.serialize_entry("content", content)?,
        }
        if let Some(calls) = m.tool_calls.as_ref().filter(|c| !c.is_empty()) {
            let calls: Vec<_> = calls.iter().map(ToolCallForLlm).collect();
            map.serialize_entry("tool_calls", &calls)?;
        }
        if let Some(id) = &m.tool_call_id {
            map.serialize_entry("tool_call_id", id)?;
        }
        if let Some(name) = &m.name
            && m.role == "tool"
        {
            map.serialize_entry("name", name)?;
        }
        map.end()
    }
}

struct ToolCallForLlm<'a>(&'a ToolCall);

impl Serialize for ToolCallForLlm<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("id", &self.0.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry("function", &self.0.function)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_keys_round_trip() {
        let raw = json!({"role":"assistant","content":"hi","provider_specific_fields":{"refusal":null},"token_count":3});
        let m: Message = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(m.token_count, Some(3));
        assert_eq!(serde_json::to_value(&m).unwrap(), raw);
    }

    #[test]
    fn llm_view_strips_bookkeeping() {
        let mut call = ToolCall::new("c1".into(), "bash".into(), "{}".into());
        call.pending_approval = Some(true);
        call.approval_token = Some("t".into());
        let mut m = Message::assistant(None, Some("why".into()), vec![call]);
        m.token_count = Some(9);
        m.extra.insert("provider_specific_fields".into(), json!({}));
        let v = serde_json::to_value(ForLlm(&m)).unwrap();
        assert_eq!(
            v,
            json!({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]})
        );
    }
}
