//! The context window: token counting, the per-request token ledger behind `metadata`.

pub mod conversation;
pub mod tokens;
pub mod truncation;
