//! Text deltas (`ai_answer_delta`) of the runs on this replica, for the event streams that ask
//! for them: never stored, sent without an `id:` (replay is the log's, not theirs), and dropped
//! for a subscriber that falls behind, so no subscriber ever slows a run. A stream on another
//! replica gets none: deltas come only from the replica running the conversation.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::broadcast;
use uuid::Uuid;

use super::Conversations;

/// Deltas a subscriber may fall behind by; older ones are dropped for it.
const BUFFER: usize = 256;

/// One channel per conversation that has a subscriber now.
#[derive(Default)]
pub(super) struct Deltas {
    channels: RwLock<HashMap<Uuid, broadcast::Sender<Arc<str>>>>,
}

impl Deltas {
    /// Sends `text` to the conversation's subscribers, if any; never waits.
    pub fn publish(&self, id: Uuid, text: &str) {
        let channels = self.channels.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(channel) = channels.get(&id) {
            let _ = channel.send(Arc::from(text));
        }
    }

    fn subscribe(&self, id: Uuid) -> broadcast::Receiver<Arc<str>> {
        let mut channels = self
            .channels
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        channels
            .entry(id)
            .or_insert_with(|| broadcast::channel(BUFFER).0)
            .subscribe()
    }

    /// Forgets the conversation's channel once nobody listens.
    fn release(&self, id: Uuid) {
        let mut channels = self
            .channels
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if channels.get(&id).is_some_and(|c| c.receiver_count() == 0) {
            channels.remove(&id);
        }
    }
}

/// A stream's subscription to one conversation's deltas; unsubscribes when dropped.
pub struct DeltaFeed {
    receiver: Option<broadcast::Receiver<Arc<str>>>,
    owner: Arc<Conversations>,
    id: Uuid,
}

impl DeltaFeed {
    /// The next delta; `None` when none can come (never, while the server runs). Deltas the
    /// subscriber fell behind on are skipped.
    pub async fn next(&mut self) -> Option<Arc<str>> {
        let receiver = self.receiver.as_mut()?;
        loop {
            match receiver.recv().await {
                Ok(text) => return Some(text),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Drops what is queued: deltas older than a read of the log belong to text it holds.
    pub fn skip_queued(&mut self) {
        if let Some(receiver) = &mut self.receiver {
            *receiver = receiver.resubscribe();
        }
    }
}

impl Drop for DeltaFeed {
    fn drop(&mut self) {
        self.receiver.take();
        self.owner.deltas.release(self.id);
    }
}

impl Conversations {
    /// Subscribes to the deltas of the conversation's runs on this replica.
    pub fn delta_feed(self: &Arc<Self>, id: Uuid) -> DeltaFeed {
        DeltaFeed {
            receiver: Some(self.deltas.subscribe(id)),
            owner: self.clone(),
            id,
        }
    }
}
