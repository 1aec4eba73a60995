//! Which replica runs a conversation. The one that starts a run holds the conversation's
//! lease (`store::Lease`) and renews it every third of its length; a change to an idle
//! conversation holds it for as long as the change takes, so two replicas never rewrite the
//! same state at once. A run whose lease expired belongs to a replica that stopped: another
//! one settles it (`error`, "the server stopped", a valid history), as a restart would.
//! Commands for a conversation running elsewhere are queued in the store for its owner.

use std::collections::HashSet;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use chrono::Utc;
use serde_json::json;
use tokio::time::Instant;
use uuid::Uuid;

use super::events;
use super::{ConversationError, Conversations, StoredConfig, from_json, to_json};
use crate::agent::{RunState, UserMessage, missing_results};
use crate::conversation_domain::{ConversationStatus, EventKind};
use crate::store::{ConversationRow, EventQuery, QueuedCommand, StoreError};

/// Whether this replica may change the conversation now.
pub(super) enum Hold {
    /// The lease is ours until `release`; the row as it stands under it (read once: a row
    /// holds the whole history, and a message's `user_message` frame waits for each read).
    Mine(Box<ConversationRow>),
    /// It runs on another replica, which holds the lease.
    Elsewhere,
}

/// How long a change waits for another replica's brief change of the same conversation.
const HOLD_WAIT: Duration = Duration::from_secs(5);
/// Runs whose replica stopped, settled per sweep.
const SWEEP_BATCH: u32 = 100;

pub(super) const MESSAGE: &str = "message";
pub(super) const PAUSE: &str = "pause";
pub(super) const INTERRUPT: &str = "interrupt";

impl Conversations {
    /// Takes the lease for a change of this conversation's state, settling first a run
    /// whose replica stopped. `Elsewhere` when another replica runs it.
    pub(super) async fn hold(self: &Arc<Self>, id: Uuid) -> Result<Hold, ConversationError> {
        let deadline = Instant::now() + HOLD_WAIT;
        loop {
            // Marked before the claim: the renewal never takes a lease claimed here for one
            // that leaked.
            self.brief_holds().insert(id);
            let now = self.store.now();
            let claimed = match self
                .store
                .claim(id, self.replica, now, now + self.lease)
                .await
            {
                Ok(claimed) => claimed,
                Err(e) => {
                    self.brief_holds().remove(&id);
                    return Err(e.into());
                }
            };
            if claimed {
                let row = match self.store.get(id).await {
                    Ok(Some(row)) if row.status == ConversationStatus::Running => {
                        match self.settle_stopped_run(row).await {
                            // Settling rewrote it.
                            Ok(()) => self.row(id).await,
                            Err(e) => Err(e),
                        }
                    }
                    Ok(Some(row)) => Ok(row),
                    Ok(None) => Err(ConversationError::NotFound(id)),
                    Err(e) => Err(e.into()),
                };
                return match row {
                    Ok(row) => Ok(Hold::Mine(Box::new(row))),
                    Err(e) => {
                        self.release(id).await;
                        Err(e)
                    }
                };
            }
            self.brief_holds().remove(&id);
            if self.row(id).await?.status == ConversationStatus::Running {
                return Ok(Hold::Elsewhere);
            }
            if Instant::now() >= deadline {
                return Err(ConversationError::Unavailable(format!(
                    "another replica is changing conversation {id}; retry"
                )));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Gives the lease back (a failure only delays the next claim until it expires), then
    /// takes what was queued for the conversation meanwhile: a sender that saw the lease
    /// held left its command for the holder.
    pub(super) async fn release(&self, id: Uuid) {
        if let Err(e) = self.store.release(id, self.replica).await {
            tracing::warn!(conversation = %id, error = %e, "cannot release a conversation's lease");
        }
        self.brief_holds().remove(&id);
        // Taken by the maintenance task: the caller may hold the conversation's row lock.
        let _ = self.to_settle.send(id);
    }

    /// A lease held here for a change (not a run): the renewal keeps it, never takes it for
    /// a leaked one.
    pub(super) fn brief_holds(&self) -> std::sync::MutexGuard<'_, HashSet<Uuid>> {
        self.brief.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a command for the replica running the conversation. If that run ended (or its
    /// replica stopped) before the command was queued, the command is settled here instead.
    pub(super) async fn send_to_owner(
        self: &Arc<Self>,
        id: Uuid,
        kind: &str,
        payload: serde_json::Value,
    ) -> Result<(), ConversationError> {
        self.store
            .push_command(id, kind, &payload)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => ConversationError::NotFound(id),
                e => e.into(),
            })?;
        // Queued: from here on, a failure to look only delays the command until the sweep
        // takes commands no live lease holds.
        let owner_runs_it = match (self.store.get(id).await, self.store.lease(id).await) {
            (Ok(Some(row)), Ok(lease)) => {
                row.status == ConversationStatus::Running
                    && lease.is_some_and(|l| l.is_live(self.store.now()))
            }
            (Ok(None), _) => return Err(ConversationError::NotFound(id)),
            _ => true,
        };
        if !owner_runs_it {
            self.settle_commands(id).await;
        }
        Ok(())
    }

    /// Applies queued commands: to the run if it is live here; otherwise a message is kept
    /// for the conversation's next run and the rest, aimed at a run that is over, dropped.
    /// Takes each conversation's row lock: the caller must not hold it. Under the lock, a
    /// live run has not yet taken its late messages, so one sent to it is never lost.
    pub(super) async fn apply_commands(self: &Arc<Self>, commands: Vec<QueuedCommand>) {
        for command in commands {
            let id = command.conversation_id;
            let lock = self.row_lock(id);
            let _guard = lock.lock().await;
            let live = self.live_run(id);
            match (command.kind.as_str(), live) {
                (MESSAGE, live) => match (message_of(&command.payload), live) {
                    (Some(message), Some(live)) => live.control.send(message),
                    (Some(message), None) => {
                        self.keep_message(id, message, &command.payload).await;
                    }
                    (None, _) => {
                        tracing::warn!(conversation = %id, "a queued message is unreadable");
                    }
                },
                (PAUSE, Some(live)) => live.control.pause(),
                (INTERRUPT, Some(live)) => live.control.interrupt(),
                _ => {}
            }
        }
    }

    /// Takes what is queued for one conversation and applies it (not under its row lock).
    pub(super) async fn settle_commands(self: &Arc<Self>, id: Uuid) {
        match self.store.take_commands_of(id).await {
            Ok(commands) => self.apply_commands(commands).await,
            Err(e) => {
                tracing::warn!(conversation = %id, error = %e, "cannot take queued commands");
            }
        }
    }

    /// A message whose run ended before it was taken (the row lock held): added to the idle
    /// conversation's state (its event is already in the log), or queued again for a run
    /// started meanwhile on another replica.
    async fn keep_message(
        self: &Arc<Self>,
        id: Uuid,
        message: UserMessage,
        payload: &serde_json::Value,
    ) {
        let kept = match self.hold(id).await {
            Ok(Hold::Mine(_)) => {
                let kept = self.add_to_state(id, &message).await;
                self.release(id).await;
                kept
            }
            Ok(Hold::Elsewhere) => self
                .store
                .push_command(id, MESSAGE, payload)
                .await
                .map_err(Into::into),
            Err(e) => Err(e),
        };
        if let Err(e) = kept {
            tracing::warn!(conversation = %id, error = %e, "a queued message could not be kept");
        }
    }

    /// Adds a message to an idle conversation's stored state (the lease held).
    pub(super) async fn add_to_state(
        &self,
        id: Uuid,
        message: &UserMessage,
    ) -> Result<(), ConversationError> {
        let mut row = self.row(id).await?;
        let config: StoredConfig = from_json(&row.config)?;
        let mut state: RunState = from_json(&row.state)?;
        self.agent()
            .add_user_message(&config.run, &mut state, message)?;
        // Logged as it joins the history, as for any message outside a run (forks fold it).
        let joined = super::events::message_pushed(state.messages.last(), &self.masker(&config));
        let stored = self.store.append(id, joined.into_iter().collect()).await?;
        row.state = to_json(&state)?;
        row.state_event_id = stored.last().map_or(row.state_event_id, |e| e.id);
        row.updated_at = Utc::now();
        self.store.update(&row).await?;
        Ok(())
    }

    /// Waits (bounded) until the conversation no longer runs anywhere.
    pub(super) async fn wait_stopped(&self, id: Uuid, within: Duration) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            match self.store.get(id).await {
                Ok(Some(row)) if row.status == ConversationStatus::Running => {}
                _ => return,
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Settles every run whose replica stopped: at start-up, and on a timer so that another
    /// replica takes over when one dies. Returns how many it settled.
    pub async fn recover(self: &Arc<Self>) -> Result<usize, ConversationError> {
        let mut settled = 0;
        loop {
            let mut unreadable = 0;
            let ids = self
                .store
                .orphaned(
                    &[ConversationStatus::Running],
                    self.store.now(),
                    SWEEP_BATCH,
                )
                .await?;
            let found = ids.len();
            for id in ids {
                // This replica's own run, whose renewal is late: the renewal interrupts it
                // if the lease is lost; settling it here would run it twice.
                if self.live_run(id).is_some() {
                    continue;
                }
                let now = self.store.now();
                if !self
                    .store
                    .claim(id, self.replica, now, now + self.lease)
                    .await?
                {
                    continue;
                }
                let result = match self.store.get(id).await {
                    Ok(Some(row)) if row.status == ConversationStatus::Running => {
                        self.settle_stopped_run(row).await.map(|()| 1)
                    }
                    Ok(_) => Ok(0),
                    // One conversation no configured key opens must not stop the others (or
                    // start-up): it stays as it is, and is refused, named, when used.
                    Err(e @ StoreError::Sealed { .. }) => {
                        tracing::error!(conversation = %id, error = %e, "a stopped run cannot be settled");
                        unreadable += 1;
                        Ok(0)
                    }
                    Err(e) => Err(e.into()),
                };
                self.release(id).await;
                settled += result?;
            }
            // A batch of nothing but unreadable rows would be found again, for ever.
            if found < SWEEP_BATCH as usize || unreadable >= found {
                return Ok(settled);
            }
        }
    }

    /// A run whose replica stopped (the lease held): the conversation becomes `error`, with
    /// its history settled so that a new run is valid for the LLM — a call whose result was
    /// lost gets an error result, never a result without its call.
    async fn settle_stopped_run(&self, mut row: ConversationRow) -> Result<(), ConversationError> {
        let id = row.id;
        let mut state: RunState = from_json(&row.state)?;
        let mut after = row.state_event_id;
        loop {
            let page = self
                .store
                .events(
                    id,
                    &EventQuery {
                        after: Some(after),
                        limit: 500,
                        ..EventQuery::default()
                    },
                )
                .await?;
            for e in &page.items {
                events::fold(&mut state, e.kind, &e.payload);
                after = e.id;
            }
            if page.next_page_id.is_none() || page.items.is_empty() {
                break;
            }
        }
        state.pending.clear();
        let why = "the server stopped before this call finished";
        for (at, message) in missing_results(&state.messages, &[], why) {
            state.messages.insert(at, message);
        }
        // Messages queued for the stopped run are kept for the next one.
        for command in self.store.take_commands_of(id).await? {
            if command.kind == MESSAGE
                && let Some(message) = message_of(&command.payload)
            {
                let config: StoredConfig = from_json(&row.config)?;
                self.agent()
                    .add_user_message(&config.run, &mut state, &message)?;
            }
        }
        let reason = "the server stopped while the conversation was running";
        let error = events::new_event(
            EventKind::Error,
            events::ENVIRONMENT,
            json!({"description": reason, "error_code": 1, "msg": reason, "success": false}),
        );
        let stored = self
            .store
            .append(
                id,
                vec![
                    error,
                    events::state_update(ConversationStatus::Error, Some(reason)),
                ],
            )
            .await?;
        row.status = ConversationStatus::Error;
        row.reason = Some(reason.into());
        row.state = to_json(&state)?;
        row.state_event_id = stored.last().map_or(after, |e| e.id);
        row.updated_at = Utc::now();
        self.store.update(&row).await?;
        tracing::warn!(conversation = %id, "a run whose server stopped is now `error`; `run` continues it");
        Ok(())
    }

    /// Keeps this replica's leases (a task of its own, so that nothing else delays a
    /// renewal), takes over runs whose replica stopped, and applies the commands other
    /// replicas queue. Both tasks end when the service is dropped.
    pub fn maintain(self: &Arc<Self>) {
        let period = self.lease / 3;
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(period);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last_renewed = Instant::now();
            loop {
                every.tick().await;
                let Some(this) = weak.upgrade() else { return };
                this.store.sync_clock().await;
                this.renew_leases(&mut last_renewed, period).await;
            }
        });
        let weak = Arc::downgrade(self);
        let mut commands = self.store.subscribe_commands();
        let released = self
            .released
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut released) = released else {
            return; // already maintained
        };
        tokio::spawn(async move {
            let mut every = tokio::time::interval(period);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let woken = tokio::select! {
                    _ = every.tick() => None,
                    woken = commands.recv() => Some(woken),
                    Some(id) = released.recv() => {
                        let Some(this) = weak.upgrade() else { return };
                        this.settle_commands(id).await;
                        continue;
                    }
                };
                let Some(this) = weak.upgrade() else { return };
                match woken {
                    Some(Ok(id)) => {
                        if this.live_run(id).is_some() {
                            this.settle_commands(id).await;
                        }
                    }
                    // Fell behind: take everything queued for this replica.
                    Some(Err(_)) => this.take_own_commands().await,
                    None => {
                        if let Err(e) = this.recover().await {
                            tracing::warn!(error = %e, "cannot settle runs whose replica stopped");
                        }
                        this.take_own_commands().await;
                        this.take_stranded_commands().await;
                    }
                }
            }
        });
    }

    async fn take_own_commands(self: &Arc<Self>) {
        match self.store.take_commands(self.replica).await {
            Ok(commands) => self.apply_commands(commands).await,
            Err(e) => tracing::warn!(error = %e, "cannot take queued commands"),
        }
    }

    /// Commands no live lease covers (their run ended, or a sender could not look after
    /// queueing): a message is kept for the next run, nothing is left waiting forever.
    async fn take_stranded_commands(self: &Arc<Self>) {
        match self.store.take_stranded_commands(self.store.now()).await {
            Ok(commands) => self.apply_commands(commands).await,
            Err(e) => tracing::warn!(error = %e, "cannot take stranded commands"),
        }
    }

    /// Renews every lease held here. A run whose lease was lost, or that could not be
    /// renewed for most of its length, is interrupted: another replica may take it over, and
    /// two must never run one conversation. A lease held here for nothing (its run's end
    /// could not be saved) is given up, so that the conversation can be settled.
    async fn renew_leases(&self, last_renewed: &mut Instant, within: Duration) {
        let renewal = self
            .store
            .renew(self.replica, self.store.now() + self.lease);
        let renewed = match tokio::time::timeout(within, renewal).await {
            Ok(Ok(held)) => Ok(held),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the renewal timed out".to_owned()),
        };
        let live: HashSet<Uuid> = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .copied()
            .collect();
        match renewed {
            Ok(held) => {
                *last_renewed = Instant::now();
                let held: HashSet<Uuid> = held.into_iter().collect();
                for id in live.difference(&held) {
                    tracing::error!(conversation = %id, "this replica lost a running conversation's lease; interrupting its run");
                    if let Some(run) = self.live_run(*id) {
                        run.control.interrupt();
                    }
                }
                let leaked: Vec<Uuid> = {
                    let brief = self.brief_holds();
                    held.iter()
                        .filter(|id| !live.contains(id) && !brief.contains(id))
                        .copied()
                        .collect()
                };
                for id in leaked {
                    // Still not live: the run ended without saving its end.
                    if self.live_run(id).is_none() && !self.brief_holds().contains(&id) {
                        tracing::warn!(conversation = %id, "giving up a lease no run here uses");
                        let _ = self.store.release(id, self.replica).await;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew the leases of running conversations");
                if last_renewed.elapsed() > self.lease * 2 / 3 {
                    for id in live {
                        if let Some(run) = self.live_run(id) {
                            run.control.interrupt();
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn message_of(payload: &serde_json::Value) -> Option<UserMessage> {
    Some(UserMessage {
        text: payload.get("content")?.as_str()?.to_owned(),
        images: match payload.get("images") {
            Some(images) if !images.is_null() => serde_json::from_value(images.clone()).ok()?,
            _ => Vec::new(),
        },
    })
}

/// The queued form of a message sent to a conversation running elsewhere.
pub(super) fn message_payload(message: &UserMessage) -> serde_json::Value {
    json!({"content": message.text, "images": message.images})
}
