//! A handle on a run in flight, for front doors where a run lives longer than a request
//! (server-side conversations): user messages taken at the next step, a pause after the
//! current step, an interrupt that cuts the LLM call and the tools now.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use super::message::UserMessage;

#[derive(Clone)]
pub struct RunControl {
    inner: Arc<Inner>,
}

struct Inner {
    messages: Mutex<VecDeque<UserMessage>>,
    pause: AtomicBool,
    interrupt: watch::Sender<bool>,
}

impl std::fmt::Debug for RunControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunControl")
            .field("pause", &self.pause_requested())
            .finish_non_exhaustive()
    }
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl {
            inner: Arc::new(Inner {
                messages: Mutex::default(),
                pause: AtomicBool::new(false),
                interrupt: watch::channel(false).0,
            }),
        }
    }
}

impl RunControl {
    /// A user message for the run, taken before its next LLM call.
    pub fn send(&self, message: UserMessage) {
        self.lock().push_back(message);
    }

    /// Stop after the current step (its results are kept).
    pub fn pause(&self) {
        self.inner.pause.store(true, Ordering::SeqCst);
    }

    /// Stop now: the LLM call and the tools in flight are cancelled.
    pub fn interrupt(&self) {
        self.inner.interrupt.send_replace(true);
    }

    pub fn pause_requested(&self) -> bool {
        self.inner.pause.load(Ordering::SeqCst)
    }

    /// Messages not taken yet: a run that ended before its next step leaves them here.
    pub fn take_messages(&self) -> Vec<UserMessage> {
        self.lock().drain(..).collect()
    }

    /// Resolves once `interrupt` was called (at once if it already was).
    pub(super) async fn interrupted(&self) {
        let mut rx = self.inner.interrupt.subscribe();
        // The sender lives in `self`: the wait ends only by an interrupt.
        let _ = rx.wait_for(|interrupted| *interrupted).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<UserMessage>> {
        self.inner
            .messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
