//! triage: a HolmesGPT-compatible troubleshooting agent server.
//!
//! Data flows one way: `http` → `agent` (the loop) → `llm` / `tools` → events → `http`.

pub mod agent;
pub mod cli;
pub mod config;
pub mod context;
pub mod credentials;
pub mod http;
pub mod llm;
pub mod prompt;
pub mod sandbox;
pub mod startup;
pub mod telemetry;
pub mod tools;
pub mod wire;
