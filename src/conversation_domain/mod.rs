//! The words a conversation is described in, typed: its status and the kinds of events its
//! log holds. Conversations, the store, webhooks, the HTTP API and the CLI all speak them, so
//! they live below all of those (this module uses nothing of triage's), and each string is
//! written once, here, in the form the API and the stored rows have always had.

mod event_kind;
mod status;

pub use event_kind::EventKind;
pub use status::{ConversationStatus, StatusChange, UnknownName};
