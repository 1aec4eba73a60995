//! What `triage conversations` prints. Everything here comes from a server, and through it from
//! a model or another user, so nothing reaches the terminal raw (`cli::terminal`), and one-line
//! fields stay on one line, cut to a readable length.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::cli::terminal::{clean_line, clean_text, truncate};
use crate::conversation_domain::{ConversationStatus, EventKind};
use crate::conversations::api::{ConversationInfo, PendingAction};

/// Characters a single-line field (a title, a tool name) is cut to.
pub(super) const FIELD_MAX: usize = 200;
/// Characters a tool's output or an event payload is cut to in `watch`.
const BODY_MAX: usize = 4000;

pub(super) fn field(s: &str) -> String {
    truncate(&clean_line(s), FIELD_MAX)
}

fn time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// One row of `list`.
pub(super) fn list_row(info: &ConversationInfo) -> String {
    const TITLE: usize = 48;
    let title = info.title.as_deref().map_or_else(
        || "(untitled)".to_owned(),
        |t| truncate(&clean_line(t), TITLE),
    );
    format!(
        "{:<24}  {:<width$}  {}  {}",
        field(info.execution_status.as_str()),
        title,
        info.id,
        time(&info.updated_at),
        width = TITLE + 20
    )
}

pub(super) fn list_header() -> String {
    format!(
        "{:<24}  {:<68}  {:<36}  UPDATED (UTC)",
        "STATUS", "TITLE", "ID"
    )
}

/// `show`'s description of a conversation.
pub(super) fn info_text(info: &ConversationInfo) -> String {
    let mut lines = vec![
        format!(
            "{}",
            info.title.as_deref().map_or("(untitled)".into(), field)
        ),
        format!("id:       {}", info.id),
    ];
    let mut status = field(info.execution_status.as_str());
    if let Some(reason) = &info.reason {
        status.push_str(&format!(" ({})", field(reason)));
    }
    lines.push(format!("status:   {status}"));
    lines.push(format!(
        "model:    {}",
        info.model
            .as_deref()
            .map_or("(server default)".into(), field)
    ));
    lines.push(format!(
        "policy:   {:?}, at most {} LLM calls per turn, stuck detection {}",
        info.confirmation_policy,
        info.max_iterations,
        if info.stuck_detection { "on" } else { "off" }
    ));
    if !info.tags.is_empty() {
        let tags: Vec<String> = info
            .tags
            .iter()
            .map(|(k, v)| format!("{}={}", field(k), field(v)))
            .collect();
        lines.push(format!("tags:     {}", tags.join(", ")));
    }
    let s = &info.stats;
    lines.push(format!(
        "usage:    {} LLM calls, {} prompt + {} completion tokens, ${:.4}, context {} tokens",
        s.llm_calls, s.prompt_tokens, s.completion_tokens, s.cost, s.context_tokens
    ));
    lines.push(format!(
        "created:  {}  updated: {}  (UTC)  events: {}",
        time(&info.created_at),
        time(&info.updated_at),
        info.last_event_id
    ));
    if !info.pending_actions.is_empty() {
        lines.push(String::new());
        lines.push("waiting for:".into());
        for p in &info.pending_actions {
            lines.push(pending_line(p));
        }
        if info.execution_status == ConversationStatus::WaitingForConfirmation {
            lines.push(format!(
                "answer with: triage conversations approve {} [--deny --reason TEXT]",
                info.id
            ));
        }
    }
    lines.join("\n")
}

fn pending_line(p: &PendingAction) -> String {
    let what = match &p.description {
        Some(d) => field(d),
        None => field(&p.arguments.to_string()),
    };
    format!(
        "  {} {} — {what} (call {})",
        if p.waits_for == "approval" {
            "approve?"
        } else {
            "browser tool"
        },
        field(&p.tool_name),
        field(&p.tool_call_id)
    )
}

/// An event as `watch` and `show` print it: `#id` then a readable line (or lines), or `None`
/// for what only machines read (the stored messages, token counts).
pub(super) fn event_text(id: u64, kind: &str, payload: &Value) -> Option<String> {
    let s = |key: &str| payload[key].as_str().unwrap_or_default();
    // A kind this client does not know (a newer server's) is shown by its name.
    let Ok(known) = kind.parse::<EventKind>() else {
        return Some(format!("#{id} {}", field(kind)));
    };
    let text = match known {
        EventKind::Message
        | EventKind::MessageReplaced
        | EventKind::TokenCount
        | EventKind::AiAnswerDelta => return None,
        EventKind::UserMessage => format!("you: {}", body(s("content"))),
        EventKind::AiMessage => {
            let content = s("content").trim();
            if content.is_empty() {
                return None;
            }
            format!("triage: {}", body(content))
        }
        EventKind::StartToolCalling => format!("… {} started", field(s("tool_name"))),
        EventKind::ToolCallingResult => tool_result(payload),
        EventKind::ApprovalRequired => {
            let mut lines = vec!["waiting for approval:".to_owned()];
            for p in payload["pending_approvals"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let text = |key: &str| p[key].as_str().unwrap_or_default();
                lines.push(format!(
                    "    {} — {} (call {})",
                    field(text("tool_name")),
                    field(text("description")),
                    field(text("tool_call_id"))
                ));
            }
            for p in payload["pending_frontend_tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                lines.push(format!(
                    "    browser tool {} (call {})",
                    field(p["tool_name"].as_str().unwrap_or_default()),
                    field(p["tool_call_id"].as_str().unwrap_or_default())
                ));
            }
            lines.join("\n")
        }
        EventKind::AiAnswerEnd => format!("answer:\n{}", clean_text(s("analysis").trim())),
        EventKind::ConversationStateUpdate => {
            let mut line = format!("● {}", field(s("execution_status")));
            if let Some(reason) = payload["reason"].as_str() {
                line.push_str(&format!(" ({})", field(reason)));
            }
            line
        }
        EventKind::Error => format!("error: {}", body(s("description"))),
        EventKind::Interrupted => {
            let cut = payload["cut_tool_calls"].as_array().map_or(0, Vec::len);
            format!("interrupted ({cut} tool calls cut)")
        }
        EventKind::Paused => "paused after the step".to_owned(),
        EventKind::ModelFallback => format!(
            "model {} unavailable, answered by {}",
            field(s("requested_model")),
            field(s("model"))
        ),
        EventKind::Stuck => format!("stuck: {}", field(s("pattern"))),
        EventKind::ConversationHistoryCompactionStart | EventKind::ConversationHistoryCompacted => {
            body(s("content"))
        }
        EventKind::Webhook => field(kind),
    };
    Some(format!("#{id} {text}"))
}

fn body(s: &str) -> String {
    truncate(&clean_text(s.trim()), BODY_MAX)
}

fn tool_result(p: &Value) -> String {
    let result = &p["result"];
    let mark = match result["status"].as_str() {
        Some("success") => "✓",
        Some("no_data") => "∅",
        Some("approval_required") => "?",
        Some("error") => "✗",
        _ => "·",
    };
    let name = p["name"].as_str().or(p["tool_name"].as_str());
    let mut line = format!(
        "{mark} {} — {}",
        field(name.unwrap_or("tool")),
        field(p["description"].as_str().unwrap_or_default())
    );
    if let Some(error) = result["error"].as_str() {
        line.push_str(&format!(": {}", field(error.lines().next().unwrap_or(""))));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_fields_are_cut() {
        assert!(field(&"x".repeat(100_000)).chars().count() < FIELD_MAX + 40);
    }

    #[test]
    fn events_read_as_lines() {
        let line = event_text(
            3,
            "conversation_state_update",
            &json!({"execution_status": "paused", "reason": "interrupted"}),
        );
        assert_eq!(line.as_deref(), Some("#3 ● paused (interrupted)"));
        assert_eq!(event_text(4, "token_count", &json!({})), None);
        let answer = event_text(9, "ai_answer_end", &json!({"analysis": "## Done\nok"})).unwrap();
        assert_eq!(answer, "#9 answer:\n## Done\nok");
    }
}
