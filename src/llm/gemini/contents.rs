//! Our OpenAI-shaped history as Gemini `contents`: leading system messages become
//! `systemInstruction`; turns have roles `user` and `model`, consecutive turns of one role
//! merged, the first a user turn; assistant tool calls become `functionCall` parts (with their
//! thought signatures put back where the model wrote them) and tool messages `functionResponse`
//! parts of the next user turn, in call order, each naming its call; images become
//! `inlineData`. A call without a result gets an error response; a result without its call
//! becomes text, since Gemini refuses either.

use serde_json::{Value, json};

use crate::wire::Message;

/// The `type` of the thinking block that carries a Gemini thought signature in our history.
pub const SIGNATURE_BLOCK: &str = "gemini_thought_signature";
/// Ids triage made up for calls Gemini sent without one: never sent back as ids.
pub const LOCAL_ID_PREFIX: &str = "gemini_call_";

#[derive(Debug, Default, PartialEq)]
pub struct Translated {
    pub system: String,
    pub contents: Vec<Value>,
}

struct Turn {
    model: bool,
    parts: Vec<Value>,
    /// For a model turn, its calls' (id, name); for a user turn, its results' (id, part).
    calls: Vec<(String, String)>,
    results: Vec<(String, String, Value)>,
}

impl Turn {
    fn user(parts: Vec<Value>) -> Turn {
        Turn {
            model: false,
            parts,
            calls: Vec::new(),
            results: Vec::new(),
        }
    }
}

/// Translates the history. Without tool definitions (`with_tools` false) calls and results
/// are written as text: Gemini refuses function parts a request declares no function for.
pub fn translate(history: &[Message], with_tools: bool) -> Translated {
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
            "assistant" => model_turn(message, with_tools),
            "tool" if with_tools => {
                let id = message.tool_call_id.clone().unwrap_or_default();
                let name = message.name.clone().unwrap_or_default();
                let mut t = Turn::user(Vec::new());
                t.results.push((id, name, json!(message.text())));
                t
            }
            "tool" => Turn::user(vec![text(&format!(
                "[Result of tool call {}]\n{}",
                message.tool_call_id.as_deref().unwrap_or(""),
                message.text()
            ))]),
            _ => Turn::user(content_parts(message.content.as_value().as_deref())),
        };
        if turn.parts.is_empty() && turn.results.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.model == turn.model => {
                last.parts.extend(turn.parts);
                last.calls.extend(turn.calls);
                last.results.extend(turn.results);
            }
            _ => turns.push(turn),
        }
    }
    let mut contents = Vec::new();
    let mut previous_calls: Vec<(String, String)> = Vec::new();
    for (i, turn) in turns.iter_mut().enumerate() {
        if turn.model {
            if i == 0 {
                contents.push(json!({"role": "user", "parts": [text("Continue.")]}));
            }
            previous_calls = std::mem::take(&mut turn.calls);
            contents.push(json!({"role": "model", "parts": std::mem::take(&mut turn.parts)}));
            continue;
        }
        let parts = answer_calls(&previous_calls, std::mem::take(&mut turn.results))
            .into_iter()
            .chain(std::mem::take(&mut turn.parts))
            .collect::<Vec<_>>();
        previous_calls.clear();
        if !parts.is_empty() {
            contents.push(json!({"role": "user", "parts": parts}));
        }
    }
    // Calls of the last model turns that no user turn answered (a history cut short) get error
    // answers, so the request stays one Gemini takes.
    let contents = close_unanswered(contents);
    Translated { system, contents }
}

/// Inserts an error answer after every model turn whose function calls the next turn does not
/// answer.
fn close_unanswered(contents: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(contents.len());
    let mut iter = contents.into_iter().peekable();
    while let Some(content) = iter.next() {
        let calls: Vec<(String, String)> = if content["role"] == "model" {
            content["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("functionCall"))
                .map(|c| {
                    (
                        c["id"].as_str().unwrap_or("").to_owned(),
                        c["name"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let answered = iter.peek().is_some_and(|next| {
            next["role"] == "user"
                && next["parts"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p.get("functionResponse").is_some()))
        });
        out.push(content);
        if !calls.is_empty() && !answered {
            let parts = answer_calls(&calls, Vec::new());
            match iter.peek_mut() {
                Some(next) if next["role"] == "user" => {
                    if let Some(existing) = next["parts"].as_array_mut() {
                        let mut all = parts;
                        all.append(existing);
                        *existing = all;
                    }
                }
                _ => out.push(json!({"role": "user", "parts": parts})),
            }
        }
    }
    out
}

fn text(t: &str) -> Value {
    json!({"text": t})
}

fn model_turn(message: &Message, with_tools: bool) -> Turn {
    let signatures: Vec<&Value> = message
        .thinking_blocks()
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some(SIGNATURE_BLOCK))
        .collect();
    let signature_for = |target: &str, call: usize| {
        signatures
            .iter()
            .find(|b| {
                b.get("part").and_then(Value::as_str) == Some(target)
                    && (target != "call"
                        || b.get("call").and_then(Value::as_u64) == Some(call as u64))
            })
            .and_then(|b| b.get("signature").cloned())
    };
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    let answer = message.text();
    if !answer.trim().is_empty() {
        let mut part = text(&answer);
        if let Some(sig) = signature_for("text", 0) {
            part["thoughtSignature"] = sig;
        }
        parts.push(part);
    }
    for (n, call) in message.tool_calls().iter().enumerate() {
        if !with_tools {
            parts.push(text(&format!(
                "[Called tool {} (call {}) with arguments {}]",
                call.function.name, call.id, call.function.arguments
            )));
            continue;
        }
        let args = match serde_json::from_str::<Value>(&call.function.arguments) {
            Ok(v @ Value::Object(_)) => v,
            _ => json!({}),
        };
        let mut function_call = json!({"name": call.function.name, "args": args});
        if !call.id.starts_with(LOCAL_ID_PREFIX) && !call.id.is_empty() {
            function_call["id"] = json!(call.id);
        }
        let mut part = json!({"functionCall": function_call});
        if let Some(sig) = signature_for("call", n) {
            part["thoughtSignature"] = sig;
        }
        parts.push(part);
        calls.push((call.id.clone(), call.function.name.clone()));
    }
    Turn {
        model: true,
        parts,
        calls,
        results: Vec::new(),
    }
}

/// The `functionResponse` parts answering `calls`, in call order; results that answer none of
/// them come after, as text.
fn answer_calls(calls: &[(String, String)], results: Vec<(String, String, Value)>) -> Vec<Value> {
    let mut answers: Vec<Option<Value>> = vec![None; calls.len()];
    let mut orphans = Vec::new();
    for (id, name, output) in results {
        match calls.iter().position(|(c, _)| *c == id) {
            Some(at) if answers[at].is_none() => answers[at] = Some(output),
            _ => orphans.push(text(&format!(
                "[Result of tool call {id} ({name})]\n{}",
                output.as_str().unwrap_or("")
            ))),
        }
    }
    calls
        .iter()
        .zip(answers)
        .map(|((id, name), output)| {
            let output =
                output.unwrap_or_else(|| json!("Error: no result was recorded for this call"));
            let text = output.as_str().unwrap_or("");
            let response = if text.starts_with("Error: ") {
                json!({"error": text})
            } else {
                json!({"result": text})
            };
            let mut part = json!({"name": name, "response": response});
            if !id.starts_with(LOCAL_ID_PREFIX) && !id.is_empty() {
                part["id"] = json!(id);
            }
            json!({"functionResponse": part})
        })
        .chain(orphans)
        .collect()
}

/// A message's `content` (a string or OpenAI content parts) as Gemini parts.
fn content_parts(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::String(t)) if !t.trim().is_empty() => vec![text(t)],
        Some(Value::Array(parts)) => parts.iter().filter_map(part).collect(),
        _ => Vec::new(),
    }
}

fn part(p: &Value) -> Option<Value> {
    match p.get("type").and_then(Value::as_str)? {
        "text" => {
            let t = p.get("text").and_then(Value::as_str)?;
            (!t.trim().is_empty()).then(|| text(t))
        }
        "image_url" => {
            let image = p.get("image_url")?;
            let url = image
                .as_str()
                .or_else(|| image.get("url").and_then(Value::as_str))?;
            match url
                .strip_prefix("data:")
                .and_then(|r| r.split_once(";base64,"))
            {
                Some((mime, data)) => Some(json!({"inlineData": {"mimeType": mime, "data": data}})),
                None => match own_file_mime(url) {
                    Some(mime) => Some(json!({"fileData": {"mimeType": mime, "fileUri": url}})),
                    // Gemini fetches only its own file URIs; any other URL is named for the model.
                    None => Some(text(&format!("[Image: {url}]"))),
                },
            }
        }
        _ => None,
    }
}

/// The image type of a file Gemini reads itself (Cloud Storage on Vertex AI, the Files API
/// on AI Studio), from its extension: `fileData` must name one, and a file of another type
/// would be refused.
fn own_file_mime(url: &str) -> Option<&'static str> {
    let own =
        url.starts_with("gs://") || url.starts_with("https://generativelanguage.googleapis.com/");
    if !own {
        return None;
    }
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let extension = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "heic" => "image/heic",
        "heif" => "image/heif",
        "gif" => "image/gif",
        _ => return None,
    })
}

#[cfg(test)]
#[path = "contents_tests.rs"]
mod tests;
