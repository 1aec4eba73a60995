//! End-to-end tests: the real server over HTTP against a scripted fake LLM.

mod fake_llm;
mod fake_llm_selftest;
mod helpers;

mod chat_basic;
