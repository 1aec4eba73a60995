//! What the investigation does besides answering, as reasoning text: the model's own reasoning,
//! each tool call and how it ended, triage's notices. Both APIs send it where clients show a
//! model's thinking (`reasoning_content`, reasoning summaries) and plain clients look past it.

use std::fmt::Write;

use crate::agent::{AgentEvent, UsageReport};
use crate::wire::events::ToolStatus;

/// How much of a tool's error the reasoning repeats: the model read all of it.
const ERROR_EXCERPT_CHARS: usize = 300;

/// The reasoning text an event adds, if any.
pub fn describe(event: &AgentEvent) -> Option<String> {
    Some(match event {
        AgentEvent::Thought {
            reasoning: Some(reasoning),
            ..
        } if !reasoning.is_empty() => format!("{reasoning}\n\n"),
        AgentEvent::ToolStarted { tool_name, .. } => format!("Calling `{tool_name}`…\n"),
        AgentEvent::ToolFinished(outcome) => {
            let mut line = format!("`{}`", outcome.tool_name);
            if !outcome.description.is_empty() && outcome.description != outcome.tool_name {
                let _ = write!(line, " ({})", one_line(&outcome.description));
            }
            match outcome.status() {
                ToolStatus::Success => line.push_str(" succeeded"),
                ToolStatus::NoData => line.push_str(" returned no data"),
                ToolStatus::Error | ToolStatus::ApprovalRequired => {
                    let why = outcome.output.error.as_deref().unwrap_or("failed");
                    let _ = write!(line, " failed: {}", excerpt(why));
                }
            }
            if let Some(elapsed) = outcome.elapsed {
                let _ = write!(line, " in {:.1} s", elapsed.as_secs_f64());
            }
            line.push_str(".\n\n");
            line
        }
        AgentEvent::Notice(text) => format!("{text}\n\n"),
        AgentEvent::ModelFallback(f) => format!(
            "Model `{}` did not answer ({}); `{}` answered instead.\n\n",
            f.requested_model,
            excerpt(&f.reason),
            f.model
        ),
        AgentEvent::CompactionStarted(c) => format!(
            "Compacting the conversation ({} tokens of a {}-token window)…\n",
            c.initial_tokens, c.context_window
        ),
        AgentEvent::Compacted(report) => format!(
            "Compacted the conversation from {} to {} tokens.\n\n",
            report.initial_tokens, report.compacted_tokens
        ),
        _ => return None,
    })
}

/// The latest usage an event reports (cumulative over the run's LLM calls).
pub fn usage(event: &AgentEvent) -> Option<&UsageReport> {
    match event {
        AgentEvent::Usage(usage) | AgentEvent::Thought { usage, .. } => Some(usage),
        AgentEvent::Finished(answer) => Some(&answer.usage),
        _ => None,
    }
}

fn one_line(text: &str) -> String {
    excerpt(&text.replace(['\n', '\r'], " "))
}

fn excerpt(text: &str) -> String {
    match text.char_indices().nth(ERROR_EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
