//! `triage conversations watch ID`: follows `GET …/events/stream`, printing each event once,
//! until the conversation stops (finished, error, stuck, paused, waiting for a confirmation).
//! A dropped connection is resumed with `Last-Event-ID`, so nothing is missed or shown twice.
//!
//! When to stop: the conversation's info, read first, says how far its log goes. The events up
//! to there are history; once they are read, the status they end on (or the info's, when there
//! were none to read) decides: stopped means exit now, running means wait for the next stop.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use uuid::Uuid;

use super::super::{EXIT_ERROR, Failure};
use super::client::{Client, refusal};
use super::render::{event_text, field};
use crate::conversation_domain::{ConversationStatus, EventKind, StatusChange};
use crate::conversations::api::ConversationInfo;
use crate::sse_reader::{SseError, SseEvent, sse_events};

/// Exit codes of `watch` (and `send --watch`): how the conversation stopped.
pub const EXIT_FINISHED: u8 = 0;
pub const EXIT_WAITING: u8 = 3;
pub const EXIT_PAUSED: u8 = 4;
pub const EXIT_STUCK: u8 = 5;

/// Nothing at all (not even a keep-alive comment) for this long: the connection is dead.
const SILENCE: Duration = Duration::from_secs(60);
/// How long reconnecting may fail in a row before `watch` gives up.
const RECONNECT_FOR: Duration = Duration::from_secs(60);
/// A connection that lasted this long, or brought an event, was a good one: the next drop
/// starts the backoff over. One that a server ends at once is a failure like any other, so a
/// server that keeps doing so is not asked again and again without pause, for ever.
const HEALTHY_AFTER: Duration = Duration::from_secs(5);
/// A frame longer than this (a server that never ends one) breaks the connection instead of
/// filling memory.
const FRAME_MAX: usize = 64 * 1024 * 1024;

/// The exit code for a status the conversation stays in until someone acts; `None` while it
/// runs (or is being deleted: the stream then ends and the reconnect finds it gone).
fn stopped(status: ConversationStatus) -> Option<u8> {
    match status {
        ConversationStatus::Finished | ConversationStatus::Idle => Some(EXIT_FINISHED),
        ConversationStatus::Error => Some(EXIT_ERROR),
        ConversationStatus::WaitingForConfirmation => Some(EXIT_WAITING),
        ConversationStatus::Paused => Some(EXIT_PAUSED),
        ConversationStatus::Stuck => Some(EXIT_STUCK),
        ConversationStatus::Running
        | ConversationStatus::Deleting
        | ConversationStatus::Deleted => None,
    }
}

/// How a connection ended.
enum Dropped {
    /// The conversation stopped: exit with this code.
    Stopped(u8),
    /// The connection broke (or the server ended it): resume after the last event.
    Broken(String),
}

struct Follower {
    id: Uuid,
    /// The last event printed.
    last: u64,
    /// The log's end when `watch` started: everything up to here is history.
    history_end: u64,
    /// The status the events read so far end on.
    status: Option<ConversationStatus>,
    /// The status the info reported, for when there was no history to read.
    info_status: ConversationStatus,
}

impl Follower {
    /// The exit code if the conversation is stopped as far as the events read tell.
    fn settled(&self) -> Option<u8> {
        if self.last < self.history_end {
            return None;
        }
        stopped(self.status.unwrap_or(self.info_status))
    }

    fn take(&mut self, event: &SseEvent) -> Option<u8> {
        let Ok(id) = event.id().trim().parse::<u64>() else {
            return None; // comments and frames without an id carry no event
        };
        if id <= self.last {
            return None; // never print an event twice, whatever the server sends
        }
        self.last = id;
        let payload: Value = serde_json::from_slice(event.data()).unwrap_or(Value::Null);
        if event.name() == EventKind::ConversationStateUpdate.as_str()
            && let Some(change) = StatusChange::of_payload(&payload)
        {
            self.status = Some(change.status);
        }
        if let Some(text) = event_text(id, event.name(), &payload) {
            let mut out = std::io::stdout().lock();
            // Whoever read the output went away (`watch … | head`): stop.
            if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
                return Some(EXIT_ERROR);
            }
        }
        self.settled()
    }

    async fn follow(&mut self, response: reqwest::Response) -> Dropped {
        let mut events = sse_events(response.bytes_stream(), FRAME_MAX);
        loop {
            let next = match tokio::time::timeout(SILENCE, events.next()).await {
                Err(_) => return Dropped::Broken(format!("nothing for {} s", SILENCE.as_secs())),
                Ok(None) => return Dropped::Broken("the server ended the stream".into()),
                // Reconnecting would fetch the same event again: stop and say so.
                Ok(Some(Err(e @ SseError::TooLarge(_)))) => {
                    eprintln!(
                        "triage: the event after {} of conversation {}: {e}",
                        self.last, self.id
                    );
                    return Dropped::Stopped(EXIT_ERROR);
                }
                Ok(Some(Err(e))) => return Dropped::Broken(e.to_string()),
                Ok(Some(Ok(event))) => event,
            };
            if let Some(code) = self.take(&next) {
                return Dropped::Stopped(code);
            }
        }
    }
}

/// Prints the conversation's events after `after` and follows it until it stops.
pub(super) async fn watch(client: &Client, id: Uuid, after: u64) -> ExitCode {
    let info: ConversationInfo = match client.get(&format!("/api/conversations/{id}")).await {
        Ok(info) => info,
        Err(e) => return e.exit(),
    };
    let mut follower = Follower {
        id,
        last: after,
        history_end: info.last_event_id,
        status: None,
        info_status: info.execution_status,
    };
    let code = follower.run(client).await;
    if code == EXIT_WAITING {
        eprintln!(
            "triage: the conversation waits for a confirmation: triage conversations approve {id} \
             [--deny --reason TEXT]"
        );
    }
    ExitCode::from(code)
}

impl Follower {
    async fn run(&mut self, client: &Client) -> u8 {
        if let Some(code) = self.settled() {
            return self.stop(code);
        }
        let path = format!("/api/conversations/{}/events/stream", self.id);
        let mut failing_since: Option<Instant> = None;
        let mut backoff = Duration::from_millis(250);
        loop {
            let last = (self.last > 0).then_some(self.last);
            let why = match client.send_raw(Method::GET, &path, None, last).await {
                Ok(response) if response.status().is_success() => {
                    let opened = Instant::now();
                    let before = self.last;
                    let why = match self.follow(response).await {
                        Dropped::Stopped(code) => return self.stop(code),
                        Dropped::Broken(why) => why,
                    };
                    if self.last > before || opened.elapsed() >= HEALTHY_AFTER {
                        failing_since = None;
                        backoff = Duration::from_millis(250);
                    }
                    why
                }
                Ok(response) if response.status() == StatusCode::NOT_FOUND => {
                    eprintln!(
                        "triage: conversation {} is gone (deleted) after event {}",
                        self.id, self.last
                    );
                    return EXIT_ERROR;
                }
                // 5xx while a server restarts or sheds load: try again.
                Ok(response) if response.status().is_server_error() => {
                    refusal(response).await.message()
                }
                Ok(response) => return refusal(response).await.report(),
                Err(failure) => failure.message(),
            };
            let since = *failing_since.get_or_insert_with(Instant::now);
            if since.elapsed() > RECONNECT_FOR {
                eprintln!(
                    "triage: lost the conversation's stream after event {} and could not \
                     reconnect for {} s: {}",
                    self.last,
                    RECONNECT_FOR.as_secs(),
                    field(&why)
                );
                return EXIT_ERROR;
            }
            eprintln!(
                "triage: stream interrupted after event {} ({}); reconnecting",
                self.last,
                field(&why)
            );
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    fn stop(&self, code: u8) -> u8 {
        let status = self.status.unwrap_or(self.info_status);
        if status == ConversationStatus::Idle && self.last >= self.history_end {
            eprintln!(
                "triage: conversation {} is idle: send it a message with --run to start it",
                self.id
            );
        }
        code
    }
}

impl Failure {
    fn message(self) -> String {
        match self {
            Failure::Usage(m) | Failure::Runtime(m) => m,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse_reader::SseDecoder;

    fn follower(after: u64, history_end: u64, info_status: ConversationStatus) -> Follower {
        Follower {
            id: Uuid::nil(),
            last: after,
            history_end,
            status: None,
            info_status,
        }
    }

    fn event(id: u64, name: &str, data: &str) -> SseEvent {
        let mut decoder = SseDecoder::new(1 << 20);
        decoder.feed(format!("id: {id}\nevent: {name}\ndata: {data}\n\n").into());
        decoder
            .next_event()
            .expect("within the bound")
            .expect("a whole event")
    }

    #[test]
    fn history_is_read_before_the_status_decides() {
        // Finished per the info, but its log is read first, ending on a status of its own.
        let mut f = follower(0, 3, ConversationStatus::Finished);
        assert_eq!(f.settled(), None);
        assert_eq!(
            f.take(&event(1, "user_message", r#"{"content":"hi"}"#)),
            None
        );
        let running = r#"{"execution_status":"running"}"#;
        assert_eq!(
            f.take(&event(2, "conversation_state_update", running)),
            None
        );
        // The log ends on `running`: the final update is still coming.
        assert_eq!(f.take(&event(3, "ai_message", r#"{"content":"x"}"#)), None);
        let done = r#"{"execution_status":"waiting_for_confirmation"}"#;
        assert_eq!(
            f.take(&event(4, "conversation_state_update", done)),
            Some(EXIT_WAITING)
        );
        // Seen before: ignored.
        assert_eq!(f.take(&event(4, "conversation_state_update", done)), None);
        // Nothing to read: the info's status decides at once.
        let settled = |status| follower(5, 5, status).settled();
        assert_eq!(settled(ConversationStatus::Stuck), Some(EXIT_STUCK));
        assert_eq!(settled(ConversationStatus::Idle), Some(EXIT_FINISHED));
        assert_eq!(settled(ConversationStatus::Running), None);
    }
}
