//! A history the LLM accepts: every tool call of an assistant message has a result. A run cut
//! short (interrupted, or a server that died mid-step) leaves calls without one; each gets an
//! error result saying why, right after its assistant message's results.

use std::collections::HashSet;

use crate::wire::Message;

/// (index to insert at, result message) for each call in `messages` that has no result and is
/// not one of `waiting` (calls a paused run legitimately waits on). Indices are for inserting
/// in the returned order.
pub fn missing_results(messages: &[Message], waiting: &[&str], why: &str) -> Vec<(usize, Message)> {
    let answered: HashSet<&str> = messages
        .iter()
        .filter(|m| m.is_role("tool"))
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    let mut inserts = Vec::new();
    let mut added = 0;
    for (i, m) in messages.iter().enumerate() {
        if !m.is_role("assistant") {
            continue;
        }
        let unanswered: Vec<_> = m
            .tool_calls()
            .iter()
            .filter(|c| !answered.contains(c.id.as_str()) && !waiting.contains(&c.id.as_str()))
            .collect();
        if unanswered.is_empty() {
            continue;
        }
        let mut at = i + 1;
        while messages.get(at).is_some_and(|n| n.is_role("tool")) {
            at += 1;
        }
        for call in unanswered {
            inserts.push((
                at + added,
                Message::tool(&call.id, &call.function.name, format!("Error: {why}")),
            ));
            added += 1;
        }
    }
    inserts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ToolCall;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id.into(), "bash".into(), "{}".into())
    }

    #[test]
    fn calls_without_results_get_an_error_result_after_their_message() {
        let mut messages = vec![
            Message::user(json!("go")),
            Message::assistant(None, None, vec![call("a"), call("b"), call("w")]),
            Message::tool("a", "bash", "ok".into()),
            Message::user(json!("later")),
        ];
        let inserts = missing_results(&messages, &["w"], "the run was interrupted");
        assert_eq!(inserts.len(), 1);
        for (at, m) in inserts {
            messages.insert(at, m);
        }
        let ids: Vec<_> = messages
            .iter()
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(messages[3].text(), "Error: the run was interrupted");
        assert!(messages[4].is_role("user"));
    }
}
