//! A `RunAgentInput` as the `/api/chat` request it stands for: the client's messages become
//! the history, its last user message the question, its `tools` frontend tools, a frontend
//! tool's result message a frontend result, and each resume entry a decision on the call its
//! interrupt names, flagged with the interrupt's approval token so holmes verifies it exactly
//! as it verifies `/api/chat`'s.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::input::{Body, InputMessage, Part, ResumeEntry, ResumeStatus, RunAgentInput, Source};
use super::interrupts::parse_interrupt_id;
use crate::agent::RunError;
use crate::wire::request::{
    FrontendToolDefinition, FrontendToolMode, FrontendToolResult, ImageInput, ToolDecision,
};
use crate::wire::{ChatRequest, Message, ToolCall};

/// The request, and what the client holds where the run's history will differ from it.
pub struct Converted {
    pub request: ChatRequest,
    /// The new user message as the client holds it: the run keeps the rendered prompt.
    pub ask_view: Option<Value>,
    /// The frontend results the client sent, by call id, as its tool messages hold them.
    pub client_results: HashMap<String, Value>,
}

pub fn convert(input: RunAgentInput) -> Result<Converted, RunError> {
    let mut instructions: Vec<String> = Vec::new();
    let mut history: Vec<Message> = Vec::new();
    let mut call_names: HashMap<String, String> = HashMap::new();
    for (i, message) in input.messages.into_iter().enumerate() {
        let converted = match message {
            InputMessage::Developer(m) | InputMessage::System(m) => {
                instructions.push(m.content);
                continue;
            }
            InputMessage::Reasoning(_) | InputMessage::Activity(_) => continue,
            InputMessage::User(m) => Message::user(content_value(&m.content)),
            InputMessage::Assistant(m) => {
                let calls: Vec<ToolCall> = m
                    .tool_calls
                    .into_iter()
                    .map(|c| ToolCall::new(c.id, c.function.name, c.function.arguments))
                    .collect();
                for c in &calls {
                    call_names.insert(c.id.clone(), c.function.name.clone());
                }
                Message::assistant(m.content.filter(|c| !c.is_empty()), None, calls)
            }
            InputMessage::Tool(m) => {
                let Some(name) = call_names.get(&m.tool_call_id) else {
                    return Err(RunError::bad_input(format!(
                        "messages[{i}]: toolCallId '{}' answers no tool call of an earlier \
                         assistant message",
                        m.tool_call_id
                    )));
                };
                Message::tool(&m.tool_call_id, name, body_text(&m.content))
            }
        };
        history.push(converted);
    }

    let mut ask = String::new();
    let mut images = Vec::new();
    let mut ask_view = None;
    if history.last().is_some_and(|m| m.is_role("user")) {
        let last = history.pop().map(|m| m.content);
        if let Some(crate::wire::message::Content::Json(content)) = last {
            (ask, images) = question(&content);
            ask_view = Some(content);
        }
    }

    let frontend_names: HashSet<&str> = input.tools.iter().map(|t| t.name.as_str()).collect();
    let mut frontend_results = Vec::new();
    let mut client_results = HashMap::new();
    let mut decisions = Vec::new();
    let resume = input.resume.unwrap_or_default();
    match history.iter().rposition(|m| m.is_role("assistant")) {
        Some(last) => {
            take_frontend_results(
                &mut history,
                last,
                &frontend_names,
                &mut frontend_results,
                &mut client_results,
            );
            decisions = resume_decisions(&mut history, last, &resume)?;
        }
        None if !resume.is_empty() => {
            return Err(RunError::bad_input(
                "resume: there is no assistant message in messages, so no tool call can \
                 await approval",
            ));
        }
        None => {}
    }
    if ask.trim().is_empty() && decisions.is_empty() && frontend_results.is_empty() {
        return Err(RunError::bad_input(
            "nothing to answer: the last message must be the user's question (role user), a \
             frontend tool's result (role tool, for a tool in `tools`), or `resume` must answer \
             the interrupts of the last run",
        ));
    }

    if !input.context.is_empty() {
        let mut block = CONTEXT_HEADING.to_owned();
        for entry in &input.context {
            block.push_str(&format!("\n- {}: {}", entry.description, entry.value));
        }
        instructions.push(block);
    }
    let model = input
        .forwarded_props
        .as_ref()
        .and_then(|p| p.get("model"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let request = ChatRequest {
        ask,
        conversation_history: Some(history),
        model,
        images: (!images.is_empty()).then_some(images),
        stream: true,
        enable_tool_approval: true,
        stream_deltas: true,
        tool_decisions: Some(decisions),
        frontend_tools: Some(
            input
                .tools
                .into_iter()
                .map(|t| FrontendToolDefinition {
                    name: t.name,
                    description: t.description,
                    parameters: t.parameters,
                    mode: FrontendToolMode::Pause,
                    noop_response: None,
                })
                .collect(),
        ),
        frontend_tool_results: Some(frontend_results),
        additional_system_prompt: (!instructions.is_empty()).then(|| instructions.join("\n\n")),
        ..ChatRequest::default()
    };
    Ok(Converted {
        request,
        ask_view,
        client_results,
    })
}

const CONTEXT_HEADING: &str = "Context the user's application gives for this conversation:";

/// A user message's content as the history holds it: a string, or OpenAI-style parts.
pub(super) fn content_value(body: &Body) -> Value {
    match body {
        Body::Text(text) => Value::String(text.clone()),
        Body::Parts(parts) => Value::Array(
            parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(json!({"type": "text", "text": text})),
                    Part::Image { source } => image_url(source)
                        .map(|url| json!({"type": "image_url", "image_url": {"url": url}})),
                    // Nothing triage can give a model: dropped, as the protocol lets a peer do.
                    Part::Audio {} | Part::Video {} | Part::Document {} => None,
                })
                .collect(),
        ),
    }
}

fn image_url(source: &Source) -> Option<String> {
    match source {
        Source::Data { value, mime_type } => Some(format!("data:{mime_type};base64,{value}")),
        Source::Url { value } => Some(value.clone()),
        Source::File {} => None,
    }
}

pub(super) fn body_text(body: &Body) -> String {
    match body {
        Body::Text(text) => text.clone(),
        Body::Parts(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The question's text and images, from the content `content_value` made.
pub(super) fn question(content: &Value) -> (String, Vec<ImageInput>) {
    match content {
        Value::String(text) => (text.clone(), Vec::new()),
        Value::Array(parts) => {
            let text: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            let images = parts
                .iter()
                .filter_map(|p| p.pointer("/image_url/url").and_then(Value::as_str))
                .map(|url| ImageInput::Url(url.to_owned()))
                .collect();
            (text.join("\n"), images)
        }
        _ => (String::new(), Vec::new()),
    }
}

/// A frontend call of the last assistant message that the client answered: its result leaves
/// the history and becomes a frontend result, the call is flagged as the pause left it.
fn take_frontend_results(
    history: &mut Vec<Message>,
    last: usize,
    frontend: &HashSet<&str>,
    results: &mut Vec<FrontendToolResult>,
    views: &mut HashMap<String, Value>,
) {
    let calls: Vec<(String, String)> = history[last]
        .tool_calls()
        .iter()
        .filter(|c| frontend.contains(c.function.name.as_str()))
        .map(|c| (c.id.clone(), c.function.name.clone()))
        .collect();
    for (id, name) in calls {
        let Some(at) = history[last + 1..]
            .iter()
            .position(|m| m.is_role("tool") && m.tool_call_id.as_deref() == Some(&id))
        else {
            continue;
        };
        let message = history.remove(last + 1 + at);
        views.insert(id.clone(), Value::String(message.text()));
        results.push(FrontendToolResult {
            tool_call_id: id.clone(),
            tool_name: name,
            result: message.text(),
        });
        flag(history, last, &id, |call| {
            call.pending_frontend = Some(true)
        });
    }
}

/// Each resume entry as a decision on the call its interrupt names, that call flagged with the
/// interrupt's token for holmes to verify.
fn resume_decisions(
    history: &mut [Message],
    last: usize,
    resume: &[ResumeEntry],
) -> Result<Vec<ToolDecision>, RunError> {
    let mut decisions: Vec<ToolDecision> = Vec::with_capacity(resume.len());
    for (k, entry) in resume.iter().enumerate() {
        let (call_id, token) = parse_interrupt_id(&entry.interrupt_id)
            .map_err(|why| RunError::bad_input(format!("resume[{k}].interruptId: {why}")))?;
        if !history[last].tool_calls().iter().any(|c| c.id == call_id) {
            return Err(RunError::bad_input(format!(
                "resume[{k}].interruptId names tool call '{call_id}', which is not a call of \
                 the last assistant message in messages"
            )));
        }
        let answered = history[last + 1..]
            .iter()
            .any(|m| m.is_role("tool") && m.tool_call_id.as_deref() == Some(&call_id));
        if answered {
            return Err(RunError::bad_input(format!(
                "resume[{k}]: tool call '{call_id}' already has a result in messages"
            )));
        }
        if decisions.iter().any(|d| d.tool_call_id == call_id) {
            return Err(RunError::bad_input(format!(
                "resume[{k}]: tool call '{call_id}' is answered twice"
            )));
        }
        let decision = decision(k, entry, call_id.clone())?;
        let token = token.to_owned();
        flag(history, last, &call_id, |call| {
            call.pending_approval = Some(true);
            call.approval_token = Some(token);
        });
        decisions.push(decision);
    }
    Ok(decisions)
}

/// Resume entry `k`'s decision on call `call_id`: approved when resolved, unless its payload
/// says `approved: false`; its feedback from `payload.feedback` (or `reason`).
pub(super) fn decision(
    k: usize,
    entry: &ResumeEntry,
    call_id: String,
) -> Result<ToolDecision, RunError> {
    let payload = entry.payload.as_ref();
    let said = payload.and_then(|p| p.get("approved"));
    // A denial spelled "false", 0 or null must not read as "not a denial": refused.
    if let Some(said) = said.filter(|a| !a.is_boolean()) {
        return Err(RunError::bad_input(format!(
            "resume[{k}].payload.approved must be true or false, not {said}"
        )));
    }
    let approved = entry.status == ResumeStatus::Resolved && said != Some(&Value::Bool(false));
    let feedback = payload
        .and_then(|p| p.get("feedback").or_else(|| p.get("reason")))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(ToolDecision {
        tool_call_id: call_id,
        approved,
        feedback,
        save_prefixes: None,
    })
}

fn flag(history: &mut [Message], index: usize, call_id: &str, set: impl FnOnce(&mut ToolCall)) {
    if let Some(call) = history[index]
        .tool_calls
        .iter_mut()
        .flatten()
        .find(|c| c.id == call_id)
    {
        set(call);
    }
}
