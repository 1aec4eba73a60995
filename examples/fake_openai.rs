//! A stand-in OpenAI-compatible LLM for tests against a live triage (`.ci/schemathesis.sh`):
//! answers every chat completion at once with a short text, streamed or not, and never asks
//! for a tool. Loopback only. It is the tests' fake (crates/fake-llm) with a fixed answer.
//!
//! `cargo run --example fake_openai [-- ADDR]` (default `127.0.0.1:0`); prints
//! `FAKE_OPENAI_URL=http://127.0.0.1:PORT/v1` on stdout once it listens.

use std::io::Write;
use std::net::SocketAddr;

use fake_llm::{FakeLlm, Step};
use serde_json::Value;

const ANSWER: &str = "The cluster looks healthy: no failing pods were found.";

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let addr: SocketAddr = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(std::io::Error::other)?,
        None => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    if !addr.ip().is_loopback() {
        return Err(std::io::Error::other(
            "fake_openai listens on loopback only",
        ));
    }
    let llm = FakeLlm::serve(tokio::net::TcpListener::bind(addr).await?);
    // Runs until killed: keep nothing per request.
    llm.keep_requests(false);
    llm.set_responder(answer);
    let mut out = std::io::stdout();
    writeln!(out, "FAKE_OPENAI_URL={}", llm.base_url())?;
    out.flush()?;
    futures::future::pending().await
}

fn answer(request: &Value) -> Step {
    if !request.is_object() {
        return Step::error(400, "body is not a JSON object");
    }
    // A structured-output request gets a JSON object: `{}` satisfies `json_object` and any
    // schema without required properties.
    if request.get("response_format").is_some_and(|f| !f.is_null()) {
        Step::text("{}")
    } else {
        Step::text(ANSWER)
    }
}
