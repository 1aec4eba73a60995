//! End-to-end tests: the real server over HTTP against a scripted fake LLM.

mod fake_llm;
mod fake_llm_selftest;
mod helpers;
mod kube_standin;

mod api_model;
mod approvals;
mod bad_input;
mod chat_basic;
mod cli;
mod compaction;
mod conversation;
mod deltas;
mod faults;
mod frontend_tools;
mod fuzz;
mod images;
mod llm_failures;
mod openapi;
mod operations;
mod readme;
mod sandbox;
mod security;
mod soak;
mod streaming;
mod structured_output;
mod tool_results;
mod toolset_internet;
mod toolset_kubernetes;
mod toolset_prometheus;
