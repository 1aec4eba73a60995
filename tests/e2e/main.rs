//! End-to-end tests: the real server over HTTP against a scripted fake LLM.

// Support: the shared helpers and the Kubernetes API stand-in.
mod helpers;
mod kube_standin;
mod webhook_receiver;

// The tests, one module per concern.
mod agent_limits;
mod api_model;
mod approval_binding;
mod approvals;
mod bad_input;
mod bash_policy;
mod browser_guard;
mod chat_basic;
mod ci_prerequisites;
mod cli;
mod cli_conversations;
mod cli_hostile_server;
mod compaction;
mod config_honesty;
mod conversation;
mod conversation_actions;
mod conversations_api;
mod conversations_crash;
mod conversations_pg;
mod conversations_replicas;
mod core_attacks;
mod deltas;
mod errors_and_exits;
mod fake_llm_selftest;
mod frontend_tools;
mod fuzz;
mod images;
mod llm_failures;
mod openapi;
mod operations;
mod policy_strace;
mod provider_anthropic;
mod provider_gemini;
mod readme;
mod run_fixes;
mod sandbox;
mod secret_masking;
mod security;
mod slow_clients;
mod soak;
mod streaming;
mod structured_output;
mod tool_results;
mod toolset_internet;
mod toolset_kubernetes;
mod toolset_prometheus;
mod webhooks_crash;
mod webhooks_in;
mod webhooks_out;
