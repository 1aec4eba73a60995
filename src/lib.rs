//! triage: a HolmesGPT-compatible troubleshooting agent server.
//!
//! Data flows one way: front doors (`http`, `cli`, through `holmes`, `conversations` and
//! `inbound`) → `agent` (the core: a run state plus an input becomes a stream of domain
//! events) → `llm` providers and `tools` → events → adapters (`holmes` renders HolmesGPT's
//! `wire` frames, `store` keeps them, `webhooks` send them). Imports follow the layer order
//! in docs/architecture.md, which the architecture test checks.

pub mod a2a;
pub mod agent;
pub mod agui;
pub mod checks;
pub mod cli;
pub mod config;
pub mod context;
pub mod conversation_domain;
pub mod conversations;
pub mod holmes;
pub mod http;
pub mod inbound;
pub mod llm;
pub mod mcp_server;
pub mod meters;
pub mod openai_compat;
pub mod prompt;
pub mod runtime;
pub mod sandbox;
pub mod secrets;
pub mod sse_reader;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod tools;
pub mod webhooks;
pub mod wire;

#[cfg(test)]
mod tests;
