//! The conversation tools: `/api/conversations` as MCP tools, each one call of
//! `conversations::Conversations` (the runs, their approvals and their log are its), its answer
//! as JSON and its refusals as error results.

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::{Value, json};
use uuid::Uuid;

use super::tools::{
    APPROVE, CONVERSATION_EVENTS, CONVERSATION_STATUS, ConversationArgs, DENY, DecisionArgs,
    EventsArgs, SEND_MESSAGE, START_CONVERSATION, SendMessageArgs, StartConversationArgs,
};
use super::{arguments, json_result};
use crate::conversation_domain::ConversationStatus;
use crate::conversations::api::{
    ConfirmationResponse, ConversationInfo, CreateConversation, SendMessage,
};
use crate::conversations::{ConversationError, ConversationId, Conversations};
use crate::store::EventQuery;
use crate::wire::request::ToolDecision;

/// Events per page when the caller names no `limit`.
const DEFAULT_EVENTS: u32 = 50;

/// The tool named `name`'s answer; `None` when no conversation tool has that name.
pub(super) async fn call(
    conversations: &Arc<Conversations>,
    name: &str,
    args: JsonObject,
) -> Option<Result<CallToolResult, String>> {
    let answer = match name {
        START_CONVERSATION => start(conversations, args).await,
        CONVERSATION_STATUS => status(conversations, args).await,
        CONVERSATION_EVENTS => events(conversations, args).await,
        SEND_MESSAGE => send(conversations, args).await,
        APPROVE => decide(conversations, APPROVE, args, true).await,
        DENY => decide(conversations, DENY, args, false).await,
        _ => return None,
    };
    Some(answer.map(json_result))
}

fn conversation_id(tool: &str, raw: &str) -> Result<Uuid, String> {
    ConversationId::parse(raw)
        .map(Uuid::from)
        .map_err(|e| format!("{tool}: invalid argument `conversation_id`: {e}"))
}

/// A refusal of the conversation's, as the caller's model should read it.
fn refused(tool: &str, e: ConversationError) -> String {
    let retry = if e.is_retry_later() {
        " (retry shortly)"
    } else {
        ""
    };
    format!("{tool}: {e}{retry}")
}

async fn start(conversations: &Arc<Conversations>, args: JsonObject) -> Result<Value, String> {
    let args: StartConversationArgs = arguments::read(START_CONVERSATION, args)?;
    arguments::non_empty(START_CONVERSATION, "question", &args.question)?;
    let request = CreateConversation {
        model: args.model,
        title: args.title,
        initial_message: Some(SendMessage {
            content: args.question,
            images: None,
            run: Some(true),
        }),
        ..CreateConversation::default()
    };
    let info = conversations
        .create(request)
        .await
        .map_err(|e| refused(START_CONVERSATION, e))?;
    Ok(json!({
        "conversation_id": info.id,
        "status": info.execution_status,
    }))
}

async fn status(conversations: &Arc<Conversations>, args: JsonObject) -> Result<Value, String> {
    let args: ConversationArgs = arguments::read(CONVERSATION_STATUS, args)?;
    let id = conversation_id(CONVERSATION_STATUS, &args.conversation_id)?;
    let refused = |e| refused(CONVERSATION_STATUS, e);
    let info = conversations.info(id).await.map_err(refused)?;
    let answer = conversations.final_response(id).await.map_err(refused)?;
    Ok(status_of(&info, answer))
}

/// What `conversation_status` shows: the status, what waits for a decision, how far the log
/// goes, and the latest answer once there is one.
fn status_of(info: &ConversationInfo, answer: String) -> Value {
    let pending: Vec<Value> = info
        .pending_actions
        .iter()
        .filter(|p| p.waits_for == "approval")
        .map(|p| {
            json!({
                "tool_call_id": p.tool_call_id,
                "tool_name": p.tool_name,
                "description": p.description,
                "arguments": p.arguments,
            })
        })
        .collect();
    let mut status = json!({
        "conversation_id": info.id,
        "status": info.execution_status,
        "title": info.title,
        "pending_approvals": pending,
        "last_event": info.last_event_id,
    });
    if let Some(reason) = &info.reason {
        status["reason"] = json!(reason);
    }
    if !answer.is_empty() {
        status["answer"] = json!(answer);
    }
    status
}

async fn events(conversations: &Arc<Conversations>, args: JsonObject) -> Result<Value, String> {
    let args: EventsArgs = arguments::read(CONVERSATION_EVENTS, args)?;
    let id = conversation_id(CONVERSATION_EVENTS, &args.conversation_id)?;
    let limit = args.limit.unwrap_or(DEFAULT_EVENTS);
    if !(1..=100).contains(&limit) {
        return Err(format!(
            "{CONVERSATION_EVENTS}: invalid argument `limit`: {limit}, a number from 1 to 100"
        ));
    }
    let refused = |e| refused(CONVERSATION_EVENTS, e);
    // An unknown conversation is named as such, not answered with an empty page.
    conversations.info(id).await.map_err(refused)?;
    let query = EventQuery {
        limit,
        after: Some(args.after),
        ..EventQuery::default()
    };
    let page = conversations
        .store()
        .events(id, &query)
        .await
        .map_err(|e| refused(ConversationError::Store(e)))?;
    let next_after = page.items.last().map_or(args.after, |e| e.id);
    let items: Vec<Value> = page
        .items
        .into_iter()
        .map(|e| {
            json!({
                "id": e.id,
                "kind": e.kind,
                "source": e.source,
                "timestamp": e.timestamp,
                "payload": e.payload,
            })
        })
        .collect();
    Ok(json!({
        "events": items,
        "next_after": next_after,
        "more": page.next_page_id.is_some(),
    }))
}

async fn send(conversations: &Arc<Conversations>, args: JsonObject) -> Result<Value, String> {
    let args: SendMessageArgs = arguments::read(SEND_MESSAGE, args)?;
    let id = conversation_id(SEND_MESSAGE, &args.conversation_id)?;
    arguments::non_empty(SEND_MESSAGE, "message", &args.message)?;
    let message = SendMessage {
        content: args.message,
        images: None,
        run: Some(true),
    };
    let refused = |e| refused(SEND_MESSAGE, e);
    conversations
        .send_message(id, message)
        .await
        .map_err(refused)?;
    let info = conversations.info(id).await.map_err(refused)?;
    Ok(json!({"conversation_id": id, "status": info.execution_status}))
}

async fn decide(
    conversations: &Arc<Conversations>,
    tool: &str,
    args: JsonObject,
    approved: bool,
) -> Result<Value, String> {
    let args: DecisionArgs = arguments::read(tool, args)?;
    let id = conversation_id(tool, &args.conversation_id)?;
    let refused = |e| refused(tool, e);
    let info = conversations.info(id).await.map_err(refused)?;
    let waiting: Vec<&str> = info
        .pending_actions
        .iter()
        .filter(|p| p.waits_for == "approval")
        .map(|p| p.tool_call_id.as_str())
        .collect();
    if info.execution_status != ConversationStatus::WaitingForConfirmation || waiting.is_empty() {
        return Err(format!(
            "{tool}: conversation {id} waits for no approval (status `{}`)",
            info.execution_status.as_str()
        ));
    }
    let decided: Vec<String> = match args.tool_call_id {
        Some(call) if !waiting.contains(&call.as_str()) => {
            return Err(format!(
                "{tool}: call '{call}' is not waiting for approval in conversation {id}; \
                 waiting: {}",
                waiting.join(", ")
            ));
        }
        Some(call) => vec![call],
        None => waiting.iter().map(|c| (*c).to_owned()).collect(),
    };
    let response = ConfirmationResponse {
        tool_decisions: Some(
            decided
                .iter()
                .map(|call| ToolDecision {
                    tool_call_id: call.clone(),
                    approved,
                    feedback: args.comment.clone(),
                    save_prefixes: None,
                })
                .collect(),
        ),
        ..ConfirmationResponse::default()
    };
    conversations.respond(id, response).await.map_err(refused)?;
    Ok(json!({
        "conversation_id": id,
        "decided": decided,
        "approved": approved,
    }))
}
