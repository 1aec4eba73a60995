//! `GET /api/conversations/{id}/events/stream`: the conversation's log as SSE. Every frame has
//! an `id:`; a client that reconnects with `Last-Event-ID` (or `?after=N`) gets exactly what it
//! missed, then live events, never one twice. Frames are read from the store, so a slow
//! subscriber never holds the run back and every replica serves the same stream. With
//! `stream_deltas=true` (`/api/chat`'s name), `ai_answer_delta` frames of runs on this replica
//! come in between, live only: no `id:`, not stored, dropped for a subscriber that lags.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::broadcast::error::RecvError;

use super::conversations::query_pairs;
use super::extract::Path;
use super::sse::KEEPALIVE_FRAME;
use super::{ApiError, AppState};
use crate::conversations::{ConversationId, DeltaFeed};
use crate::store::{EventQuery, StoredEvent};
use crate::wire::events::AnswerDelta;

/// Events read from the store per query while catching up.
const PAGE: u32 = 100;

pub async fn stream(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let mut after = 0u64;
    let mut with_deltas = false;
    for (key, value) in query_pairs(raw.as_deref()) {
        match (key.as_str(), value.as_str(), value.parse::<u64>()) {
            ("after", _, Ok(n)) => after = n,
            ("stream_deltas", "true", _) => with_deltas = true,
            ("stream_deltas", "false", _) => with_deltas = false,
            _ => {
                return ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!(
                        "query parameter '{key}={value}': known are after=<event id> and \
                         stream_deltas=true|false"
                    ),
                )
                .into_response();
            }
        }
    }
    if let Some(last) = headers.get("last-event-id") {
        match last
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            Some(n) => after = after.max(n),
            None => {
                return ApiError::new(StatusCode::BAD_REQUEST, "Last-Event-ID must be an event id")
                    .into_response();
            }
        }
    }
    let store = state.conversations.store().clone();
    match store.get(id).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return ApiError::new(
                StatusCode::NOT_FOUND,
                format!("conversation {id} not found"),
            )
            .into_response();
        }
        Err(e) => {
            return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
        }
    }
    let keepalive = state.keepalive.unwrap_or(Duration::from_secs(15));
    let shutdown = state.shutdown.clone();
    // Subscribed before the first read, so nothing appended in between is missed.
    let mut news = store.subscribe();
    let mut deltas = with_deltas.then(|| state.conversations.delta_feed(id));
    let frames = async_stream::stream! {
        let closing = shutdown.closing();
        let mut closing = std::pin::pin!(closing);
        loop {
            // Deltas queued before a read of the log belong to text the read delivers whole.
            if let Some(feed) = deltas.as_mut() {
                feed.skip_queued();
            }
            let query = EventQuery { after: Some(after), limit: PAGE, ..EventQuery::default() };
            let page = match store.events(id, &query).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(conversation = %id, error = %e, "event stream read failed");
                    break;
                }
            };
            let full = page.items.len() as u32 == PAGE;
            for event in page.items {
                after = event.id;
                yield Ok::<Bytes, Infallible>(frame(&event));
            }
            if full {
                continue;
            }
            // Caught up: wait for news of this conversation past `after`.
            loop {
                tokio::select! {
                    biased;
                    () = &mut closing => return,
                    // Before news of the log: a run sends its deltas before the message they
                    // make up is appended.
                    Some(text) = next_delta(deltas.as_mut()) => {
                        yield Ok(delta_frame(&text));
                    }
                    note = news.recv() => match note {
                        Ok((conversation, seq)) if conversation == id && seq > after => break,
                        Ok(_) => {}
                        // Fell behind the announcements: the store has it all; read again.
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => return,
                    },
                    () = tokio::time::sleep(keepalive) => {
                        if !matches!(store.get(id).await, Ok(Some(_))) {
                            return; // deleted
                        }
                        yield Ok(Bytes::from_static(KEEPALIVE_FRAME));
                    }
                }
            }
        }
    };
    super::sse::event_stream(frames)
}

/// The next delta of the feed; never resolves without one.
async fn next_delta(feed: Option<&mut DeltaFeed>) -> Option<std::sync::Arc<str>> {
    match feed {
        Some(feed) => feed.next().await,
        None => std::future::pending().await,
    }
}

/// An `ai_answer_delta` frame, as `/api/chat` sends it, without an `id:` (not stored, so a
/// reconnect's `Last-Event-ID` stays the last stored event's).
fn delta_frame(text: &str) -> Bytes {
    let data = serde_json::to_string(&AnswerDelta {
        content: text.to_owned(),
    })
    .unwrap_or_else(|_| "null".into());
    Bytes::from(format!("event: ai_answer_delta\ndata: {data}\n\n"))
}

fn frame(event: &StoredEvent) -> Bytes {
    let data = serde_json::to_string(&event.payload).unwrap_or_else(|_| "null".into());
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {data}\n\n",
        event.id, event.kind
    ))
}
