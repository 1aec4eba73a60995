//! The fake LLM's own tests, over HTTP as its users reach it.

mod common;
mod rules;
mod steps;
