//! What a front door gives a run besides its state: a user message, decisions on the calls
//! awaiting approval, results of frontend tools, and the request's headers for tools.

use std::sync::Arc;

use super::control::RunControl;
use super::message::UserMessage;

#[derive(Debug, Clone, Default)]
pub struct Input {
    pub message: Option<UserMessage>,
    pub decisions: Vec<Decision>,
    pub frontend_results: Vec<FrontendResult>,
    /// Headers tools may see (blocked ones already removed).
    pub tool_headers: Arc<Vec<(String, String)>>,
    /// For runs that outlive a request: messages, pause and interrupt while it runs.
    pub control: Option<RunControl>,
}

impl Input {
    /// Nothing arrives: no message, no decision, no frontend result.
    pub fn is_empty(&self) -> bool {
        self.message.is_none() && self.decisions.is_empty() && self.frontend_results.is_empty()
    }
}

#[derive(Debug, Clone)]
pub struct Decision {
    pub call_id: String,
    pub verdict: Verdict,
}

impl Decision {
    /// The user's yes or no on a call, with the reason given for a no.
    pub fn from_user(call_id: String, approved: bool, feedback: Option<String>) -> Decision {
        Decision {
            call_id,
            verdict: if approved {
                Verdict::Approved
            } else {
                Verdict::Denied { feedback }
            },
        }
    }
}

#[derive(Debug, Clone)]
pub enum Verdict {
    Approved,
    Denied {
        feedback: Option<String>,
    },
    /// The front door could not trust the pending call (e.g. its approval token failed): it
    /// does not run, and the model reads why.
    Refused {
        reason: String,
    },
}

#[derive(Debug, Clone)]
pub struct FrontendResult {
    pub call_id: String,
    pub result: String,
}
