//! A run as a `Stream` of events. The run's steps are plain async functions that emit events
//! into a queue; the stream hands them out and only drives the run further when the queue is
//! empty, so a slow consumer holds the run back and dropping the stream drops the run: the
//! LLM call and the tool processes in flight are cancelled.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::OwnedSemaphorePermit;

use super::event::AgentEvent;
use super::secrets::RunMasker;
use super::setup::RunSetup;
use super::state::RunState;
use super::usage::UsageReport;
use crate::context::conversation::Conversation;
use crate::wire::Message;

type Driver = Pin<Box<dyn Future<Output = RunState> + Send>>;

pub struct Run {
    driver: Option<Driver>,
    queue: Emitter,
    state: Option<RunState>,
}

impl Run {
    pub(super) fn new(driver: Driver, queue: Emitter) -> Run {
        Run {
            driver: Some(driver),
            queue,
            state: None,
        }
    }

    /// The run's state once it has ended (after its terminal event): what a store persists,
    /// what the stateless front door renders as the history.
    pub fn take_state(&mut self) -> Option<RunState> {
        self.state.take()
    }

    /// A run that emits `events` and ends with `state`: what a front door does with any event
    /// a run can make (the masking property test, `src/tests/masked_events.rs`).
    #[cfg(test)]
    pub(crate) fn replaying(masker: RunMasker, events: Vec<AgentEvent>, state: RunState) -> Run {
        let queue = Emitter::new(masker);
        let emit = queue.clone();
        let driver = async move {
            for event in events {
                emit.emit(event);
            }
            state
        };
        Run::new(Box::pin(driver), queue)
    }

    /// What the run's events are masked with, for a front door that also shows the final
    /// state (`/api/chat` returns the history to the client).
    pub fn masker(&self) -> &RunMasker {
        &self.queue.0.masker
    }

    /// For a front door that renders the history from the final state: the run sends no
    /// `MessageAdded` or `MessageReplaced`, each a copy of its message (a tool's whole output
    /// among them). Called before the run is first polled.
    pub fn without_history_events(self) -> Run {
        self.queue.0.without_history.store(true, Ordering::Relaxed);
        self
    }
}

impl Stream for Run {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        loop {
            if let Some(event) = self.queue.pop() {
                return Poll::Ready(Some(event));
            }
            let Some(driver) = self.driver.as_mut() else {
                return Poll::Ready(None);
            };
            match driver.as_mut().poll(cx) {
                Poll::Ready(state) => {
                    self.state = Some(state);
                    self.driver = None;
                    // Text held back as the possible start of a secret goes out as it is.
                    self.queue.flush();
                }
                Poll::Pending if self.queue.is_empty() => return Poll::Pending,
                Poll::Pending => {}
            }
        }
    }
}

/// Where a run's steps put their events, each masked as it is emitted: every consumer gets
/// it masked, none masks it again. Made only with the run's masker (`Emitter::new`).
#[derive(Clone)]
pub(super) struct Emitter(Arc<Queue>);

#[derive(Default)]
struct Queue {
    events: Mutex<Events>,
    without_history: AtomicBool,
    masker: RunMasker,
}

#[derive(Default)]
struct Events {
    queue: VecDeque<AgentEvent>,
    /// The end of the text streamed so far that may be the start of a secret: sent with the
    /// next piece (masked whole if it completes one) or before the next other event.
    held: String,
}

impl Events {
    fn flush(&mut self) {
        if !self.held.is_empty() {
            let text = std::mem::take(&mut self.held);
            self.queue.push_back(AgentEvent::TextDelta(text));
        }
    }
}

impl Emitter {
    pub fn new(masker: RunMasker) -> Emitter {
        Emitter(Arc::new(Queue {
            masker,
            ..Queue::default()
        }))
    }

    /// Queues an event, masked with the run's secrets.
    pub fn emit(&self, event: AgentEvent) {
        let masker = &self.0.masker;
        if let AgentEvent::TextDelta(piece) = event {
            let mut events = self.lock();
            let text = masker.mask_piece(&mut events.held, piece);
            if !text.is_empty() {
                events.queue.push_back(AgentEvent::TextDelta(text));
            }
            return;
        }
        let event = masker.masked(event);
        let mut events = self.lock();
        events.flush();
        events.queue.push_back(event);
    }

    fn flush(&self) {
        self.lock().flush();
    }

    /// Whether `MessageAdded` and `MessageReplaced` are wanted (`Run::without_history_events`).
    pub fn wants_history(&self) -> bool {
        !self.0.without_history.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Events> {
        self.0.events.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_empty(&self) -> bool {
        self.lock().queue.is_empty()
    }

    /// Every event queued, in order (for work that is not a `Run`: a forced compaction).
    pub fn drain(&self) -> Vec<AgentEvent> {
        self.flush();
        std::iter::from_fn(|| self.pop()).collect()
    }

    /// The next event; pieces of text already queued go out joined, as one delta.
    fn pop(&self) -> Option<AgentEvent> {
        let mut events = self.lock();
        let queue = &mut events.queue;
        let mut event = queue.pop_front()?;
        if let AgentEvent::TextDelta(text) = &mut event {
            while let Some(AgentEvent::TextDelta(more)) = queue.front() {
                text.push_str(more);
                queue.pop_front();
            }
        }
        Some(event)
    }
}

/// A run in progress: the conversation with its token ledger, the rest of the state, and what
/// this run holds (its emitter, the tools' headers, a reserved call slot).
pub(super) struct Live {
    pub conv: Conversation,
    /// The state without its messages, which live in `conv` meanwhile.
    pub state: RunState,
    pub emit: Emitter,
    pub tool_headers: Arc<Vec<(String, String)>>,
    /// A call slot reserved when the run was accepted, for its first LLM call.
    pub slot: Option<OwnedSemaphorePermit>,
    /// Main-loop LLM calls made by this run.
    pub llm_calls: u32,
    /// The calls of this run a fallback model answered, for the answer's metadata.
    pub fallbacks: Vec<crate::wire::events::ModelFallback>,
}

impl Live {
    pub fn new(
        mut state: RunState,
        setup: &RunSetup,
        system: Option<Message>,
        emit: Emitter,
        tool_headers: Arc<Vec<(String, String)>>,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Live {
        let mut conv =
            Conversation::new(setup.model.tokenizer, std::mem::take(&mut state.messages));
        if let Some(system) = system {
            // Regenerated every run and installed at index 0, whatever was there.
            if conv.messages().first().is_some_and(|m| m.is_role("system")) {
                conv.replace(0, system);
            } else {
                conv.insert(0, system);
                for p in &mut state.pending {
                    p.message_index += 1;
                }
            }
        }
        Live {
            conv,
            state,
            emit,
            tool_headers,
            slot,
            llm_calls: 0,
            fallbacks: Vec::new(),
        }
    }

    pub fn into_state(self) -> RunState {
        let mut state = self.state;
        state.messages = self.conv.into_messages();
        state
    }

    pub fn push(&mut self, message: Message) {
        let index = self.conv.len();
        self.insert(index, message);
    }

    pub fn insert(&mut self, index: usize, message: Message) {
        self.conv.insert(index, message);
        if self.emit.wants_history() {
            let message = Box::new(self.conv.messages()[index].clone());
            self.emit.emit(AgentEvent::MessageAdded { index, message });
        }
    }

    pub fn replace(&mut self, index: usize, message: Message) {
        self.conv.replace(index, message);
        if self.emit.wants_history() {
            let message = Box::new(self.conv.messages()[index].clone());
            self.emit
                .emit(AgentEvent::MessageReplaced { index, message });
        }
    }

    /// Gives every call left without a result an error result saying `why` (calls the run
    /// waits on keep waiting); returns their ids.
    pub fn settle(&mut self, why: &str) -> Vec<String> {
        let waiting: Vec<&str> = self
            .state
            .pending
            .iter()
            .map(|p| p.call.id.as_str())
            .collect();
        let inserts = super::settle::missing_results(self.conv.messages(), &waiting, why);
        let mut cut = Vec::with_capacity(inserts.len());
        for (at, message) in inserts {
            cut.extend(message.tool_call_id.clone());
            self.insert(at, message);
        }
        cut
    }

    pub fn report(&self, setup: &RunSetup) -> UsageReport {
        self.state.usage.report(
            &self.conv,
            setup.tools_tokens,
            &setup.model,
            &self.state.truncations,
        )
    }

    pub fn emit_usage(&self, setup: &RunSetup) {
        self.emit
            .emit(AgentEvent::Usage(Box::new(self.report(setup))));
    }
}
