//! Runs of a conversation: started in the background, their events appended to the log in
//! order (the run never waits for a commit), the state saved when they end; messages, pauses,
//! interrupts and confirmations on the way, whichever replica they reach.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use serde_json::json;
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use super::api::{ConfirmationResponse, SendMessage};
use super::events::{self, USER};
use super::ownership::{Hold, INTERRUPT, MESSAGE, PAUSE, message_of, message_payload};
use super::{ConversationError, Conversations, StoredConfig, from_json, to_json};
use crate::agent::{
    AgentEvent, Decision, FrontendResult, Input, Run, RunControl, RunMasker, RunState, StopReason,
    UserMessage,
};
use crate::conversation_domain::{ConversationStatus, EventKind};
use crate::store::{ConversationRow, NewEvent, ReplyToken, Store, StoreError};

/// A run in progress on this replica.
pub struct LiveRun {
    pub(super) control: RunControl,
    /// The run's masker: a message sent to the run is logged masked as its events are.
    pub(super) masker: RunMasker,
    done: watch::Receiver<bool>,
}

impl LiveRun {
    /// Resolves once the run has ended and its state is saved.
    pub async fn finished(&self) {
        let mut done = self.done.clone();
        let _ = done.wait_for(|d| *d).await;
    }
}

/// How long `interrupt` waits for a run on another replica to stop.
const INTERRUPT_WAIT: Duration = Duration::from_secs(30);

impl Conversations {
    /// Stores a user message; a running conversation takes it at its next step, an idle one
    /// keeps it for its next run (started at once with `run`).
    pub async fn send_message(
        self: &Arc<Self>,
        id: Uuid,
        message: SendMessage,
    ) -> Result<(), ConversationError> {
        if message.content.trim().is_empty() {
            return Err(ConversationError::BadInput("`content` is empty".into()));
        }
        let user = UserMessage {
            text: message.content.clone(),
            images: message.images.clone().unwrap_or_default(),
        };
        let lock = self.row_lock(id);
        let guard = lock.lock().await;
        if let Some(live) = self.live_run(id) {
            let logged = user_event(&message, &live.masker);
            self.store.append(id, vec![logged]).await?;
            live.control.send(user);
            return Ok(());
        }
        match self.hold(id).await? {
            Hold::Elsewhere => {
                // The run is another replica's: its secrets are in the stored config.
                let config: StoredConfig = from_json(&self.row(id).await?.config)?;
                let logged = user_event(&message, &self.masker(&config));
                self.store.append(id, vec![logged]).await?;
                drop(guard);
                return self
                    .send_to_owner(id, MESSAGE, message_payload(&user))
                    .await;
            }
            Hold::Mine(row) => match self.keep_new_message(*row, &message, &user).await {
                // The lease taken for the message is the run's: one claim, not a release
                // and a second claim.
                Ok(row) if message.run.unwrap_or(false) => {
                    return self.start_holding(row, Input::default(), false).await;
                }
                Ok(_) => self.release(id).await,
                Err(e) => {
                    self.release(id).await;
                    return Err(e);
                }
            },
        }
        Ok(())
    }

    /// A message for an idle conversation (its lease held): checked against its config,
    /// logged, then added to its state. Returns the row as it now stands.
    async fn keep_new_message(
        &self,
        mut row: ConversationRow,
        message: &SendMessage,
        user: &UserMessage,
    ) -> Result<ConversationRow, ConversationError> {
        let id = row.id;
        if row.status == ConversationStatus::WaitingForConfirmation {
            return Err(ConversationError::Conflict(
                "the conversation waits for a confirmation: answer it first \
                 (POST …/events/respond_to_confirmation)"
                    .into(),
            ));
        }
        let config: StoredConfig = from_json(&row.config)?;
        let mut state: RunState = from_json(&row.state)?;
        self.agent()
            .add_user_message(&config.run, &mut state, user)?;
        // The message as the LLM will read it goes to the log too, so the log alone rebuilds
        // the history (a fork from an earlier event folds it); both masked, as a run's events.
        let masker = self.masker(&config);
        let joined = events::message_pushed(state.messages.last(), &masker);
        let stored = self
            .store
            .append(
                id,
                [user_event(message, &masker)]
                    .into_iter()
                    .chain(joined)
                    .collect(),
            )
            .await?;
        row.state = to_json(&state)?;
        row.state_event_id = stored.last().map_or(row.state_event_id, |e| e.id);
        row.updated_at = Utc::now();
        self.store.update(&row).await?;
        Ok(row)
    }

    /// Runs the conversation from where it stands. 409 while it runs or waits for a
    /// confirmation.
    pub async fn run(self: &Arc<Self>, id: Uuid) -> Result<(), ConversationError> {
        self.start(id, Input::default(), false).await
    }

    /// Stops the run after its current step, on whichever replica runs it.
    pub async fn pause(self: &Arc<Self>, id: Uuid) -> Result<(), ConversationError> {
        let row = self.row(id).await?;
        if let Some(live) = self.live_run(id) {
            live.control.pause();
        } else if row.status == ConversationStatus::Running {
            self.send_to_owner(id, PAUSE, json!({})).await?;
        }
        Ok(())
    }

    /// Cuts the run now, on whichever replica runs it; returns once it has stopped.
    pub async fn interrupt(self: &Arc<Self>, id: Uuid) -> Result<(), ConversationError> {
        // The status alone: a conversation whose secrets no key opens can still be stopped
        // and deleted.
        let status = self
            .store
            .status(id)
            .await?
            .ok_or(ConversationError::NotFound(id))?;
        if let Some(live) = self.live_run(id) {
            live.control.interrupt();
            live.finished().await;
        } else if status == ConversationStatus::Running {
            self.send_to_owner(id, INTERRUPT, json!({})).await?;
            self.wait_stopped(id, INTERRUPT_WAIT).await;
        }
        Ok(())
    }

    /// Answers the pending calls and continues the run. 409 if nothing is pending.
    pub async fn respond(
        self: &Arc<Self>,
        id: Uuid,
        response: ConfirmationResponse,
    ) -> Result<(), ConversationError> {
        let row = self.row(id).await?;
        let state: RunState = from_json(&row.state)?;
        if row.status != ConversationStatus::WaitingForConfirmation || state.pending.is_empty() {
            return Err(ConversationError::Conflict(
                "nothing is waiting for a confirmation".into(),
            ));
        }
        // A decision or result for a call that does not wait here (a typo, another
        // conversation's call) is refused: the run would deny the real call in its place.
        let named = response
            .tool_decisions
            .iter()
            .flatten()
            .map(|d| (d.tool_call_id.as_str(), true))
            .chain(
                response
                    .frontend_tool_results
                    .iter()
                    .flatten()
                    .map(|r| (r.tool_call_id.as_str(), false)),
            );
        for (call, approval) in named {
            let waits = state
                .pending
                .iter()
                .any(|p| p.call.id == call && p.is_approval() == approval);
            if !waits {
                let waiting: Vec<&str> = state.pending.iter().map(|p| p.call.id.as_str()).collect();
                let what = if approval {
                    "an approval"
                } else {
                    "a frontend result"
                };
                return Err(ConversationError::BadInput(format!(
                    "tool_call_id {call:?} is not a call conversation {id} waits for {what} of \
                     (it waits for: {})",
                    waiting.join(", ")
                )));
            }
        }
        let mut input = Input::default();
        if let Some(accept) = response.accept {
            for p in state.pending.iter().filter(|p| p.is_approval()) {
                input.decisions.push(Decision::from_user(
                    p.call.id.clone(),
                    accept,
                    response.reason.clone(),
                ));
            }
        }
        for d in response.tool_decisions.unwrap_or_default() {
            input
                .decisions
                .push(Decision::from_user(d.tool_call_id, d.approved, d.feedback));
        }
        input.frontend_results = response
            .frontend_tool_results
            .unwrap_or_default()
            .into_iter()
            .map(|r| FrontendResult {
                call_id: r.tool_call_id,
                result: r.result,
            })
            .collect();
        self.start(id, input, true).await
    }

    async fn start(
        self: &Arc<Self>,
        id: Uuid,
        input: Input,
        answering: bool,
    ) -> Result<(), ConversationError> {
        let lock = self.row_lock(id);
        let _guard = lock.lock().await;
        let already = || {
            ConversationError::Conflict(
                "Conversation already running. Wait for completion or pause first.".into(),
            )
        };
        if self.live_run(id).is_some() {
            return Err(already());
        }
        let Hold::Mine(row) = self.hold(id).await? else {
            return Err(already());
        };
        self.start_holding(*row, input, answering).await
    }

    /// Starts a run under the lease this replica holds for a change (the row lock held):
    /// the lease is the run's from here; every refusal gives it back.
    async fn start_holding(
        self: &Arc<Self>,
        row: ConversationRow,
        input: Input,
        answering: bool,
    ) -> Result<(), ConversationError> {
        let id = row.id;
        let started = self.start_held(row, input, answering).await;
        match started {
            // The live run holds the lease now, not a change.
            Ok(Started::Running) => {
                self.brief_holds().remove(&id);
            }
            Ok(Started::Answered) | Err(_) => self.release(id).await,
        }
        started.map(|_| ())
    }

    async fn start_held(
        self: &Arc<Self>,
        mut row: ConversationRow,
        input: Input,
        answering: bool,
    ) -> Result<Started, ConversationError> {
        let id = row.id;
        if row.status == ConversationStatus::WaitingForConfirmation && !answering {
            return Err(ConversationError::Conflict(
                "the conversation waits for a confirmation: answer it first".into(),
            ));
        }
        let running = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        if running >= self.max_running {
            return Err(ConversationError::Busy(format!(
                "{running} conversations are running, the limit (conversations.max_running); retry shortly"
            )));
        }
        let config: StoredConfig = from_json(&row.config)?;
        let state: RunState = from_json(&row.state)?;
        if row.status == ConversationStatus::Paused && input.is_empty() && state.answered() {
            // The turn had its answer (a pause kept it): `run` finishes it without asking
            // the model again.
            self.save_status(&mut row, ConversationStatus::Finished)
                .await?;
            return Ok(Started::Answered);
        }
        let control = RunControl::default();
        let input = Input {
            control: Some(control.clone()),
            ..input
        };
        let run = self.agent().start(&config.run, state, input)?;
        let masker = run.masker().clone();
        let stop = control.clone();
        self.save_status(&mut row, ConversationStatus::Running)
            .await?;
        let (done_tx, done) = watch::channel(false);
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id,
                Arc::new(LiveRun {
                    control,
                    masker,
                    done,
                }),
            );
        let this = self.clone();
        crate::runtime::shards::spawn_background(async move {
            let still_ours = this.drive(id, run, stop).await;
            let _ = done_tx.send(true);
            // Commands queued while the run was ending: a message is kept for the next run.
            // Not when another replica took the conversation over: they are its commands.
            if still_ours {
                this.settle_commands(id).await;
            }
            this.title_after_first_answer(id);
        });
        Ok(Started::Running)
    }

    /// Saves the row under a new status (no reason) and logs the change.
    async fn save_status(
        &self,
        row: &mut ConversationRow,
        status: ConversationStatus,
    ) -> Result<(), ConversationError> {
        row.status = status;
        row.reason = None;
        row.updated_at = Utc::now();
        self.store.update(row).await?;
        self.store
            .append(row.id, vec![events::state_update(status, None)])
            .await?;
        Ok(())
    }

    /// Consumes a run: its events go to the log in order, through a writer that batches what
    /// is queued, so the run never waits for a commit; its end is saved with its state.
    /// Returns false if another replica took the conversation over meanwhile.
    async fn drive(&self, id: Uuid, mut run: Run, control: RunControl) -> bool {
        let (tx, rx) = mpsc::unbounded_channel::<(NewEvent, Option<ReplyToken>)>();
        let writer = tokio::spawn(write_log(self.store.clone(), id, rx, control.clone()));
        let mut end = None;
        let mut token = None;
        let mut context_tokens = 0;
        while let Some(event) = run.next().await {
            if let AgentEvent::Usage(u) = &event {
                context_tokens = u64::from(u.tokens.total_tokens);
            }
            if let AgentEvent::TextDelta(text) = &event {
                self.deltas.publish(id, text);
            }
            if event.is_terminal() {
                let mut status = status_of(&event);
                // A pause asked for while the step that answered was in flight: the answer
                // is kept, the conversation stays paused (`run` then finishes it).
                if status.0 == ConversationStatus::Finished && control.pause_requested() {
                    status = (ConversationStatus::Paused, None);
                }
                // A state that waits for the outside world gets a new reply token, handed
                // out with the event that announces it (webhooks in).
                token = status.0.awaits_reply().then(|| ReplyToken::mint(status.0));
                end = Some(status);
            }
            if let Some(stored) = events::stored(event) {
                let _ = tx.send((stored, token.clone()));
            }
        }
        let mut state = run.take_state().unwrap_or_default();
        let (status, reason) = end.unwrap_or((
            ConversationStatus::Error,
            Some("the run ended without a final event".into()),
        ));
        drop(tx);
        let (last_seq, log_error) = match writer.await {
            Ok(Ok(seq)) => (seq, None),
            Ok(Err((seq, e))) => (seq, Some(e.to_string())),
            Err(e) => (0, Some(format!("the log writer stopped: {e}"))),
        };
        let status = if log_error.is_some() {
            ConversationStatus::Error
        } else {
            status
        };
        let reason = log_error.or(reason);
        let lock = self.row_lock(id);
        let _guard = lock.lock().await;
        // Whatever happens below, the run is over here: later messages take the idle path.
        let _gone = RemoveOnDrop(self, id);
        let mut row = match self.store.get(id).await {
            Ok(Some(row)) => row,
            Ok(None) => return true, // deleted meanwhile
            // The lease stays until the renewal gives it up; the run is then settled as a
            // stopped one.
            Err(e) => {
                tracing::error!(conversation = %id, error = %e, "cannot read the conversation to save its run's end");
                return true;
            }
        };
        // A message sent while the run was ending is kept for the next run, not lost.
        let mut late = control.take_messages();
        match self.store.take_commands_of(id).await {
            Ok(queued) => late.extend(
                queued
                    .iter()
                    .filter(|c| c.kind == MESSAGE)
                    .filter_map(|c| message_of(&c.payload)),
            ),
            Err(e) => {
                tracing::warn!(conversation = %id, error = %e, "cannot take queued commands");
            }
        }
        if !late.is_empty()
            && let Ok(config) = from_json::<StoredConfig>(&row.config)
        {
            for message in late {
                if let Err(e) = self
                    .agent()
                    .add_user_message(&config.run, &mut state, &message)
                {
                    tracing::warn!(conversation = %id, error = %e, "a late message could not be kept");
                }
            }
        }
        let stats = super::stats_of(&state, context_tokens);
        row.status = status;
        row.reason = reason.clone();
        row.state = to_json(&state).unwrap_or(row.state);
        row.state_event_id = last_seq.max(row.state_event_id);
        row.stats = to_json(&stats).unwrap_or(row.stats);
        row.updated_at = Utc::now();
        // Saved before the state update is announced: whoever reads the conversation on
        // seeing it finds the new state.
        match self.store.finish(&row, self.replica).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::error!(conversation = %id, "the run's lease was taken over; its end is not saved");
                return false;
            }
            Err(e) => {
                tracing::error!(conversation = %id, error = %e, "cannot save the conversation's state");
                return true;
            }
        }
        let update = events::state_update(status, reason.as_deref());
        let token = token.filter(|t| t.state == status);
        if let Err(e) = self.store.append_replying(id, vec![update], token).await {
            tracing::error!(conversation = %id, error = %e, "cannot log the conversation's status");
        }
        true
    }
}

fn user_event(message: &SendMessage, masker: &RunMasker) -> NewEvent {
    let mut event = events::new_event(
        EventKind::UserMessage,
        USER,
        json!({"content": message.content, "images": message.images.as_ref().map_or(0, Vec::len)}),
    );
    masker.mask(&mut event.payload);
    event
}

/// What `start` did with the lease it took.
enum Started {
    /// A run holds it now.
    Running,
    /// The turn had its answer: the change is done, the lease goes back.
    Answered,
}

fn status_of(event: &AgentEvent) -> (ConversationStatus, Option<String>) {
    match event {
        AgentEvent::Finished(_) => (ConversationStatus::Finished, None),
        AgentEvent::Paused { .. } => (ConversationStatus::WaitingForConfirmation, None),
        AgentEvent::Failed(e) => (ConversationStatus::Error, Some(e.message.clone())),
        AgentEvent::Stopped(StopReason::Paused) => (ConversationStatus::Paused, None),
        AgentEvent::Stopped(StopReason::Interrupted { .. }) => {
            (ConversationStatus::Paused, Some("interrupted".into()))
        }
        AgentEvent::Stopped(StopReason::Stuck { pattern }) => {
            (ConversationStatus::Stuck, Some(pattern.clone()))
        }
        _ => (ConversationStatus::Error, None),
    }
}

/// Appends what the run queued, in order, a batch per commit. Returns the last event id, or
/// how far it got and why it stopped.
async fn write_log(
    store: Store,
    id: Uuid,
    mut rx: mpsc::UnboundedReceiver<(NewEvent, Option<ReplyToken>)>,
    control: RunControl,
) -> Result<u64, (u64, StoreError)> {
    let mut last = 0;
    while let Some((first, mut token)) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok((more, more_token)) = rx.try_recv() {
            batch.push(more);
            token = token.or(more_token);
        }
        match store.append_replying(id, batch, token).await {
            Ok(stored) => last = stored.last().map_or(last, |e| e.id),
            // A run whose events cannot be kept must not go on unseen.
            Err(e) => {
                control.interrupt();
                return Err((last, e));
            }
        }
    }
    Ok(last)
}

/// Takes a run off this replica's live list when its end is handled.
struct RemoveOnDrop<'a>(&'a Conversations, Uuid);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        self.0
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.1);
    }
}
