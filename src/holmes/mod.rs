//! The HolmesGPT adapter: its stateless `/api/chat` front door, where the client carries the
//! conversation. A request becomes a run's config, state and input (pending approvals
//! verified here, the only place approval tokens are signed or checked); the run's events
//! become HolmesGPT frames (`frames.rs`, which the conversations' stored events reuse). The
//! HTTP handler and the CLI's in-process mode share it.

mod approvals;
pub mod frames;
mod prepare;
mod render;

use std::sync::Arc;

use crate::agent::{CurrentAgent, Run, RunError};
use crate::wire::{ChatRequest, FollowUpAction};

pub use approvals::{ApprovalSigner, TokenError, conversation_digest};
pub use prepare::RequestMeta;
pub use render::ChatRun;

pub struct StatelessChat {
    /// The agent serving now; each request takes it once, at its start.
    pub serving: Arc<CurrentAgent>,
    signer: Arc<ApprovalSigner>,
}

impl StatelessChat {
    pub fn new(serving: Arc<CurrentAgent>, signer: ApprovalSigner) -> StatelessChat {
        StatelessChat {
            serving,
            signer: Arc::new(signer),
        }
    }

    /// Starts a request's run; every refusal comes back here, before any frame.
    pub fn start(&self, request: ChatRequest, meta: RequestMeta) -> Result<ChatRun, RunError> {
        let request_id = meta.request_id.clone();
        let prepared = prepare::prepare(&self.signer, request, meta)?;
        let follow_up_actions = if prepared.first_turn {
            FollowUpAction::defaults()
        } else {
            Vec::new()
        };
        // The history is rendered from the final state (`ChatRun::history`).
        let run = self
            .serving
            .current()
            .start(&prepared.config, prepared.state, prepared.input)?
            .without_history_events();
        Ok(ChatRun::new(
            run,
            self.signer.clone(),
            follow_up_actions,
            request_id,
        ))
    }

    /// Starts a request's run for another stateless front door (AG-UI) that renders each
    /// event itself: the same preparation as `start` (pending approvals verified with this
    /// server's signer), the run's events raw, history events included.
    pub fn start_events(&self, request: ChatRequest, meta: RequestMeta) -> Result<Run, RunError> {
        let prepared = prepare::prepare(&self.signer, request, meta)?;
        self.serving
            .current()
            .start(&prepared.config, prepared.state, prepared.input)
    }

    /// The signer of this door's approval tokens, for a door that hands them out in its own
    /// shape (AG-UI interrupt ids carry them).
    pub fn signer(&self) -> Arc<ApprovalSigner> {
        self.signer.clone()
    }
}
