//! triage: a HolmesGPT-compatible troubleshooting agent server.
//!
//! Data flows one way: front doors (`http`, `cli`, through `stateless`) → `agent` (the core:
//! a run state plus an input becomes a stream of domain events) → `llm` providers and `tools`
//! → events → adapters (`stateless` renders HolmesGPT's `wire` frames). See
//! docs/architecture.md.

pub mod agent;
pub mod allocator;
pub mod cli;
pub mod config;
pub mod context;
pub mod conversation_domain;
pub mod conversations;
pub mod credentials;
pub mod frames;
pub mod http;
pub mod llm;
pub mod memory;
pub mod meters;
pub mod prompt;
pub mod sandbox;
pub mod shards;
pub mod size_hint;
pub mod sse_reader;
pub mod startup;
pub mod stateless;
pub mod store;
pub mod telemetry;
pub mod tools;
pub mod webhooks;
pub mod wire;

#[cfg(test)]
mod mask_tests;
