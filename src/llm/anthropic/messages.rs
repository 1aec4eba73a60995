//! Our OpenAI-shaped history as Messages API turns: leading system messages become the
//! top-level `system`; user and assistant turns alternate, starting with the user (consecutive
//! turns of one role merge); assistant tool calls become `tool_use` blocks and tool messages
//! `tool_result` blocks at the start of the next user turn; images become `image` blocks; no
//! text block is empty. Every `tool_use` gets a result and every result a `tool_use` of the
//! turn before it, since the API refuses the request otherwise.

use serde_json::{Map, Value, json};

use crate::wire::Message;
use crate::wire::message::Content;

/// What a request carries of the history.
#[derive(Debug, Default, PartialEq)]
pub struct Translated {
    /// The system prompt's text (leading system messages, joined).
    pub system: String,
    /// Alternating `{role, content: [blocks]}`, starting with the user.
    pub messages: Vec<Value>,
}

/// Translates the history; thinking blocks of assistant turns go along only when `thinking`
/// is on (they are signed for the model that wrote them and useless to any other call).
pub fn translate(history: &[Message], thinking: bool) -> Translated {
    let leading = history.iter().take_while(|m| m.is_role("system")).count();
    let system = history[..leading]
        .iter()
        .map(Message::text)
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut turns: Vec<Turn> = Vec::new();
    for message in &history[leading..] {
        let turn = match message.role.as_str() {
            "assistant" => assistant_turn(message, thinking),
            "tool" => Turn::user(vec![tool_result(message)]),
            // A later system message (and any unknown role) is read by the model as the user's.
            _ => Turn::user(content_blocks(message.content.as_value().as_deref())),
        };
        if turn.blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.assistant == turn.assistant => last.blocks.extend(turn.blocks),
            _ => turns.push(turn),
        }
    }
    pair_tool_blocks(&mut turns);
    if turns.first().is_some_and(|t| t.assistant) {
        turns.insert(0, Turn::user(vec![text_block("Continue.")]));
    }
    Translated {
        system,
        messages: turns.into_iter().map(Turn::into_json).collect(),
    }
}

/// A request without tool definitions may not carry tool blocks (the API refuses it): each
/// becomes text saying what was called and what it returned. triage sends definitions
/// whenever its history may hold calls; this covers any other caller.
pub fn tool_blocks_as_text(messages: &mut [Value]) {
    for block in messages
        .iter_mut()
        .filter_map(|m| m.get_mut("content").and_then(Value::as_array_mut))
        .flatten()
    {
        let text = match block_type(block) {
            "tool_use" => format!(
                "[Called tool {} (call {}) with arguments {}]",
                block["name"].as_str().unwrap_or(""),
                block["id"].as_str().unwrap_or(""),
                block["input"]
            ),
            "tool_result" => match orphan_result_as_text(block).get("text") {
                Some(Value::String(t)) => t.clone(),
                _ => continue,
            },
            _ => continue,
        };
        *block = text_block(&text);
    }
}

/// Marks the end of the last message as a prompt-cache breakpoint (as HolmesGPT does): the
/// next call of the loop reads everything before it from the cache.
pub fn mark_cache_breakpoint(messages: &mut [Value]) {
    let Some(blocks) = messages
        .last_mut()
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    // Thinking blocks cannot carry cache_control.
    if let Some(block) = blocks
        .iter_mut()
        .rev()
        .find(|b| !matches!(block_type(b), "thinking" | "redacted_thinking"))
    {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
}

struct Turn {
    assistant: bool,
    blocks: Vec<Value>,
}

impl Turn {
    fn user(blocks: Vec<Value>) -> Turn {
        Turn {
            assistant: false,
            blocks,
        }
    }

    fn into_json(self) -> Value {
        let role = if self.assistant { "assistant" } else { "user" };
        json!({"role": role, "content": self.blocks})
    }
}

fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn assistant_turn(message: &Message, thinking: bool) -> Turn {
    let mut blocks: Vec<Value> = Vec::new();
    // Thinking comes first in an assistant turn, exactly as the model wrote it.
    if thinking {
        blocks.extend(message.thinking_blocks().iter().filter_map(thinking_block));
    }
    let text = message.text();
    if !text.trim().is_empty() {
        blocks.push(text_block(&text));
    }
    for call in message.tool_calls() {
        let input = match serde_json::from_str::<Value>(&call.function.arguments) {
            Ok(Value::Object(input)) => input,
            // The API takes an object; the call's result already told the model its
            // arguments were not one.
            _ => Map::new(),
        };
        blocks.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.function.name,
            "input": input,
        }));
    }
    Turn {
        assistant: true,
        blocks,
    }
}

/// A thinking block of the history with only the keys the API takes, or `None` when it is
/// not one the API would accept back.
fn thinking_block(block: &Value) -> Option<Value> {
    let field = |k: &str| block.get(k).and_then(Value::as_str);
    match block_type(block) {
        "thinking" => Some(json!({
            "type": "thinking",
            "thinking": field("thinking")?,
            "signature": field("signature")?,
        })),
        "redacted_thinking" => Some(json!({"type": "redacted_thinking", "data": field("data")?})),
        _ => None,
    }
}

/// triage writes every failed tool result as `Error: …` (see `tools::execute`).
fn is_error_result(text: &str) -> bool {
    text.starts_with("Error: ")
}

fn tool_result(message: &Message) -> Value {
    let id = message.tool_call_id.clone().unwrap_or_default();
    let mut block = json!({"type": "tool_result", "tool_use_id": id});
    let content = match &message.content {
        Content::Json(parts @ Value::Array(_)) => Value::Array(content_blocks(Some(parts))),
        _ => {
            let text = message.text();
            if is_error_result(&text) {
                block["is_error"] = Value::Bool(true);
            }
            if text.is_empty() {
                Value::Array(Vec::new())
            } else {
                Value::String(text)
            }
        }
    };
    // A result without output carries no content at all rather than an empty text.
    if content.as_array().is_none_or(|a| !a.is_empty()) {
        block["content"] = content;
    }
    block
}

/// A message's `content` (a string or OpenAI content parts) as text and image blocks.
fn content_blocks(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::String(text)) if !text.trim().is_empty() => vec![text_block(text)],
        Some(Value::Array(parts)) => parts.iter().filter_map(part_block).collect(),
        _ => Vec::new(),
    }
}

fn part_block(part: &Value) -> Option<Value> {
    match block_type(part) {
        "text" => {
            let text = part.get("text").and_then(Value::as_str)?;
            (!text.trim().is_empty()).then(|| text_block(text))
        }
        "image_url" => {
            let image = part.get("image_url")?;
            let url = image
                .as_str()
                .or_else(|| image.get("url").and_then(Value::as_str))?;
            Some(json!({"type": "image", "source": image_source(url)?}))
        }
        _ => None,
    }
}

/// A data URL as a base64 source, anything else as a URL source.
fn image_source(url: &str) -> Option<Value> {
    match url.strip_prefix("data:") {
        Some(rest) => {
            let (media_type, data) = rest.split_once(";base64,")?;
            Some(json!({"type": "base64", "media_type": media_type, "data": data}))
        }
        None => Some(json!({"type": "url", "url": url})),
    }
}

/// Every `tool_use` answered by a `tool_result` at the start of the next user turn, and every
/// `tool_result` answering a `tool_use` of the turn before. A call whose result is missing
/// (a history cut short elsewhere) gets an error result; a result whose call is not in the
/// turn before becomes text, so the model still reads it.
fn pair_tool_blocks(turns: &mut Vec<Turn>) {
    let mut i = 0;
    while i < turns.len() {
        if turns[i].assistant {
            let ids: Vec<String> = turns[i]
                .blocks
                .iter()
                .filter(|b| block_type(b) == "tool_use")
                .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect();
            if !ids.is_empty() && turns.get(i + 1).is_none_or(|t| t.assistant) {
                turns.insert(i + 1, Turn::user(Vec::new()));
            }
            if let Some(next) = turns.get_mut(i + 1) {
                answer_calls(next, &ids);
            }
            i += 2;
        } else {
            // A user turn not after an assistant one (the first) answers no call.
            answer_calls(&mut turns[i], &[]);
            i += 1;
        }
    }
}

/// Orders a user turn: the results of `ids` first, in call order, then everything else.
fn answer_calls(turn: &mut Turn, ids: &[String]) {
    let mut results: Vec<Option<Value>> = vec![None; ids.len()];
    let mut rest = Vec::new();
    for block in std::mem::take(&mut turn.blocks) {
        if block_type(&block) != "tool_result" {
            rest.push(block);
            continue;
        }
        let id = block
            .get("tool_use_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        match ids.iter().position(|c| c == id) {
            Some(at) if results[at].is_none() => results[at] = Some(block),
            _ => rest.push(orphan_result_as_text(&block)),
        }
    }
    turn.blocks = results
        .into_iter()
        .zip(ids)
        .map(|(result, id)| {
            result.unwrap_or_else(|| {
                json!({"type": "tool_result", "tool_use_id": id, "is_error": true,
                       "content": "Error: no result was recorded for this call"})
            })
        })
        .chain(rest)
        .collect();
}

fn orphan_result_as_text(block: &Value) -> Value {
    let id = block
        .get("tool_use_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    let content = match block.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    text_block(&format!("[Result of tool call {id}]\n{content}"))
}

#[cfg(test)]
#[path = "messages_tests.rs"]
mod tests;
