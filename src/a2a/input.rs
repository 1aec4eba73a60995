//! What a user message on a task says: new text for the conversation, or — while the task
//! waits for approvals — the decisions. Decisions are the text `approve` / `deny` (every
//! pending call) or data parts `{"approve": bool, "toolCallId"?: str, "reason"?: str}`
//! (one per call; without `toolCallId`, every call).

use serde::Deserialize;

use super::jsonrpc::{ErrorCode, RpcError};
use super::types::{Message, Part};
use crate::conversations::api::ConfirmationResponse;
use crate::wire::request::ToolDecision;

/// The text a message brings: its text parts, and its data parts as JSON, in order.
pub fn text_of(message: &Message) -> Result<String, RpcError> {
    let mut pieces = Vec::with_capacity(message.parts.len());
    for (index, part) in message.parts.iter().enumerate() {
        pieces.push(part_text(index, part)?);
    }
    let text = pieces.join("\n\n");
    if text.trim().is_empty() {
        return Err(RpcError::invalid_params(
            "message.parts hold no text: send at least one non-empty text part",
        ));
    }
    Ok(text)
}

fn part_text(index: usize, part: &Part) -> Result<String, RpcError> {
    match (&part.text, &part.data, &part.raw, &part.url) {
        (Some(text), None, None, None) => Ok(text.clone()),
        (None, Some(data), None, None) => Ok(format!(
            "```json\n{}\n```",
            serde_json::to_string_pretty(data).unwrap_or_default()
        )),
        (None, None, Some(_), None) | (None, None, None, Some(_)) => Err(RpcError::new(
            ErrorCode::ContentTypeNotSupported,
            format!(
                "message.parts[{index}]: file parts (raw, url{}) are not supported: send text \
                 or data parts",
                part.media_type
                    .as_deref()
                    .map(|m| format!(", here {m}"))
                    .unwrap_or_default()
            ),
        )),
        _ => Err(RpcError::invalid_params(format!(
            "message.parts[{index}] must hold exactly one of text, raw, url or data"
        ))),
    }
}

/// One decision of a data part.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DataDecision {
    approve: bool,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// The decisions a message makes on the calls a task waits for.
pub fn decisions_of(message: &Message) -> Result<ConfirmationResponse, RpcError> {
    let how = "the task waits for approval: reply with the text \"approve\" or \"deny\", or \
               data parts {\"approve\": true|false, \"toolCallId\": \"…\", \"reason\": \"…\"}";
    let mut every: Option<(bool, Option<String>)> = None;
    let mut per_call = Vec::new();
    for (index, part) in message.parts.iter().enumerate() {
        let (approve, call, reason) = match (&part.text, &part.data) {
            (Some(text), None) if part.raw.is_none() && part.url.is_none() => {
                match text.trim().to_ascii_lowercase().as_str() {
                    "approve" | "approved" | "yes" => (true, None, None),
                    "deny" | "denied" | "no" => (false, None, None),
                    _ => {
                        return Err(RpcError::invalid_params(format!(
                            "message.parts[{index}]: {how}"
                        )));
                    }
                }
            }
            (None, Some(data)) if part.raw.is_none() && part.url.is_none() => {
                let d = DataDecision::deserialize(data).map_err(|e| {
                    RpcError::invalid_params(format!("message.parts[{index}].data: {e}; {how}"))
                })?;
                (d.approve, d.tool_call_id, d.reason)
            }
            _ => {
                return Err(RpcError::invalid_params(format!(
                    "message.parts[{index}]: {how}"
                )));
            }
        };
        match call {
            Some(tool_call_id) => per_call.push(ToolDecision {
                tool_call_id,
                approved: approve,
                feedback: reason,
                save_prefixes: None,
            }),
            None if every.is_some() => {
                return Err(RpcError::invalid_params(format!(
                    "message.parts[{index}]: a second decision for every call"
                )));
            }
            None => every = Some((approve, reason)),
        }
    }
    if every.is_some() && !per_call.is_empty() {
        return Err(RpcError::invalid_params(
            "decide either every call at once or each call by its toolCallId, not both",
        ));
    }
    Ok(ConfirmationResponse {
        accept: every.as_ref().map(|(approve, _)| *approve),
        reason: every.and_then(|(_, reason)| reason),
        tool_decisions: (!per_call.is_empty()).then_some(per_call),
        frontend_tool_results: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::types::Role;
    use serde_json::json;

    fn message(parts: Vec<Part>) -> Message {
        Message {
            message_id: "m".into(),
            context_id: None,
            task_id: None,
            role: Role::User,
            parts,
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    #[test]
    fn decisions_in_either_form() {
        let d = decisions_of(&message(vec![Part::text(" Approve ")])).unwrap();
        assert_eq!(d.accept, Some(true));
        let d = decisions_of(&message(vec![Part::data(
            json!({"approve": false, "toolCallId": "c1", "reason": "too risky"}),
        )]))
        .unwrap();
        let calls = d.tool_decisions.unwrap();
        assert_eq!(
            (calls[0].approved, calls[0].feedback.as_deref()),
            (false, Some("too risky"))
        );
        for wrong in [
            vec![Part::text("sure, go ahead")],
            vec![Part::data(json!({"approve": "yes"}))],
            vec![Part::data(json!({"approve": true, "extra": 1}))],
            vec![Part::text("approve"), Part::text("deny")],
            vec![
                Part::text("approve"),
                Part::data(json!({"approve": true, "toolCallId": "c"})),
            ],
        ] {
            assert_eq!(
                decisions_of(&message(wrong)).unwrap_err().code,
                ErrorCode::InvalidParams
            );
        }
    }

    #[test]
    fn text_of_refuses_files_and_empty_messages() {
        let file = Part {
            url: Some("https://example.com/x.png".into()),
            media_type: Some("image/png".into()),
            ..Part::default()
        };
        assert_eq!(
            text_of(&message(vec![file])).unwrap_err().code,
            ErrorCode::ContentTypeNotSupported
        );
        assert!(text_of(&message(vec![Part::text("  ")])).is_err());
        assert!(text_of(&message(vec![])).is_err());
        let both = Part {
            text: Some("a".into()),
            data: Some(json!(1)),
            ..Part::default()
        };
        assert!(text_of(&message(vec![both])).is_err());
        assert_eq!(
            text_of(&message(vec![Part::text("a"), Part::data(json!({"k": 1}))])).unwrap(),
            "a\n\n```json\n{\n  \"k\": 1\n}\n```"
        );
    }
}
