//! Domain events as HolmesGPT frames: the pieces both front doors share. The stateless
//! `/api/chat` adds the history to its terminal frames; conversations store them as they are.

use crate::agent::{
    AgentEvent, CompactionReport, CompactionStarted, PendingCall, UsageReport, Waiting,
};
use crate::tools::ToolOutcome;
use crate::wire::events::{
    AiMessage, AnswerDelta, CompactedMetadata, CompactionCost, CompactionStart,
    CompactionStartMetadata, PendingApproval, PendingFrontendToolCall, StartToolCalling,
    TokenCount, ToolCallResult, ToolResultBody,
};
use crate::wire::{Metadata, StreamEvent};

const SCHEMA_VERSION: &str = "robusta:v1.0.0";

/// The frame of an event that needs nothing but itself (`Ok(None)`: an event no frame shows,
/// such as a message joining the history); the event back when the front door renders it.
pub fn frame(event: AgentEvent) -> Result<Option<StreamEvent>, AgentEvent> {
    Ok(Some(match event {
        AgentEvent::TextDelta(content) => StreamEvent::AnswerDelta(AnswerDelta { content }),
        AgentEvent::MessageAdded { .. } | AgentEvent::MessageReplaced { .. } => return Ok(None),
        AgentEvent::Thought {
            content,
            reasoning,
            usage,
        } => StreamEvent::AiMessage(AiMessage {
            content,
            reasoning,
            metadata: Some(metadata(&usage)),
        }),
        AgentEvent::Notice(text) => StreamEvent::AiMessage(AiMessage {
            content: Some(text),
            reasoning: None,
            metadata: None,
        }),
        AgentEvent::ToolStarted { call_id, tool_name } => {
            StreamEvent::StartToolCalling(StartToolCalling {
                tool_name,
                id: call_id,
            })
        }
        AgentEvent::ToolFinished(outcome) => {
            StreamEvent::ToolCallingResult(Box::new(tool_result(*outcome)))
        }
        AgentEvent::Usage(usage) => StreamEvent::TokenCount(TokenCount {
            metadata: metadata(&usage),
        }),
        AgentEvent::CompactionStarted(c) => StreamEvent::CompactionStart(compaction_start(&c)),
        AgentEvent::Compacted(report) => StreamEvent::Compacted(Box::new(compacted(*report))),
        AgentEvent::ModelFallback(fallback) => StreamEvent::ModelFallback(fallback),
        other => return Err(other),
    }))
}

pub fn metadata(usage: &UsageReport) -> Metadata {
    Metadata {
        usage: usage.last_call,
        tokens: usage.tokens,
        max_tokens: usage.context_window,
        max_output_tokens: usage.max_output_tokens,
        costs: usage.costs,
        truncations: usage.truncations.clone(),
        ..Metadata::default()
    }
}

/// `tool_calling_result`: HolmesGPT's structured tool result.
pub fn tool_result(outcome: ToolOutcome) -> ToolCallResult {
    ToolCallResult {
        tool_call_id: outcome.call_id,
        tool_name: outcome.tool_name.clone(),
        name: outcome.tool_name,
        description: outcome.description,
        role: "tool".into(),
        result: ToolResultBody {
            schema_version: SCHEMA_VERSION.into(),
            status: outcome.output.status,
            error: outcome.output.error,
            return_code: outcome.output.return_code,
            data: outcome.output.data,
            images: None,
            url: None,
            invocation: outcome.output.invocation,
            params: outcome.params,
            icon_url: None,
            elapsed_seconds: outcome.elapsed.map(|d| d.as_secs_f64()),
        },
        toolset_name: outcome.toolset,
    }
}

pub fn compacted(r: CompactionReport) -> crate::wire::events::Compacted {
    let saved = f64::from(r.initial_tokens.saturating_sub(r.compacted_tokens))
        / f64::from(r.initial_tokens.max(1))
        * 100.0;
    crate::wire::events::Compacted {
        content: format!(
            "The conversation history has been compacted from {} to {} tokens",
            r.initial_tokens, r.compacted_tokens
        ),
        compaction_summary: Some(r.summary),
        metadata: CompactedMetadata {
            initial_tokens: r.initial_tokens,
            compacted_tokens: r.compacted_tokens,
            compression_ratio_pct: (saved * 10.0).round() / 10.0,
            num_messages_before: r.num_messages_before,
            num_messages_after: r.messages.len(),
            max_context_size: r.context_window,
            threshold_pct: r.threshold_pct,
            fallback_used: false,
            fallback_reason: None,
            summarization_requests: r.summarization_requests,
            compaction_cost: Some(CompactionCost {
                total_cost: r.cost,
                prompt_tokens: r.usage.prompt_tokens,
                completion_tokens: r.usage.completion_tokens,
                total_tokens: r.usage.total_tokens,
                cached_tokens: None,
                cache_creation_tokens: None,
            }),
        },
        messages: r.messages,
    }
}

pub fn compaction_start(c: &CompactionStarted) -> CompactionStart {
    CompactionStart {
        content: format!(
            "Compacting conversation history ({} tokens, {} messages)...",
            c.initial_tokens, c.num_messages
        ),
        metadata: CompactionStartMetadata {
            initial_tokens: c.initial_tokens,
            num_messages: c.num_messages,
            max_context_size: c.context_window,
            threshold_pct: c.threshold_pct,
        },
    }
}

pub fn pending_approvals(pending: &[PendingCall]) -> Vec<PendingApproval> {
    pending
        .iter()
        .filter_map(|p| match &p.waits_for {
            Waiting::Approval {
                description,
                params,
            } => Some(PendingApproval {
                tool_call_id: p.call.id.clone(),
                tool_name: p.call.function.name.clone(),
                description: description.clone(),
                params: params.clone(),
            }),
            Waiting::Frontend { .. } => None,
        })
        .collect()
}

pub fn pending_frontend(pending: &[PendingCall]) -> Vec<PendingFrontendToolCall> {
    pending
        .iter()
        .filter_map(|p| match &p.waits_for {
            Waiting::Frontend { arguments } => Some(PendingFrontendToolCall {
                tool_call_id: p.call.id.clone(),
                tool_name: p.call.function.name.clone(),
                arguments: arguments.clone(),
            }),
            Waiting::Approval { .. } => None,
        })
        .collect()
}
