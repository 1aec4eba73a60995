//! The browser tests' server (tests/browser): triage on 127.0.0.1, configured against a
//! scripted fake OpenAI-compatible LLM that this program serves too. It stays up until killed.
//!
//! ```text
//! cargo run --example browser_harness -- --port-file PATH [--cors-origin ORIGIN]... [--api-key KEY]
//!     [--exit-on-stdin-close]
//! ```
//!
//! Once the servers listen, PATH receives `{"triage": PORT, "triage_bare": PORT, "llm": PORT}`
//! (`triage_bare` has no model configured; plus `"triage_keyed": PORT` with `--api-key`: a
//! triage that requires that key), written atomically. The models `fake`, `fake-alt` and `fake-small` (an 8000-token context window, for
//! compaction) all point at the fake LLM.
//!
//! The fake LLM is scripted over HTTP on its own port:
//! - `POST /__script` with a JSON list of steps replaces the script and forgets the recorded
//!   requests. Each chat-completions request consumes the next step; with none left it
//!   answers HTTP 500. A step is one of
//!   `{"text": "...", "reasoning": "..."?}`,
//!   `{"tool_calls": [{"id": "...", "name": "...", "arguments": {...}}], "content": "..."?}`,
//!   `{"error": STATUS, "message": "..."?}`,
//!   each with optional `"delay_ms"` (before the response) and `"chunk_delay_ms"` (between
//!   streamed chunks).
//! - `GET /__requests`: the JSON bodies the fake LLM received, in order.
//!
//! Essentials copied from tests/e2e/fake_llm.rs (examples cannot import test modules).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use clap::Parser;
use serde::Deserialize;
use serde_json::{Value, json};
use triage::config::Settings;
use triage::startup::Application;

#[derive(Parser)]
#[command(about = "triage + a scripted fake LLM, for the browser tests")]
struct Args {
    /// Where to write {"triage": PORT, "llm": PORT} once both listen.
    #[arg(long)]
    port_file: PathBuf,
    /// A browser origin allowed by triage's CORS (repeatable).
    #[arg(long)]
    cors_origin: Vec<String>,
    /// Also start a second triage ("triage_keyed") that requires this API key.
    #[arg(long)]
    api_key: Option<String>,
    /// Exit when standard input closes (the test runner that started us went away).
    #[arg(long)]
    exit_on_stdin_close: bool,
}

/// One scripted answer of the fake LLM.
#[derive(Clone, Debug, Deserialize)]
struct Step {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    error: Option<u16>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    chunk_delay_ms: u64,
}

#[derive(Clone, Debug, Deserialize)]
struct ToolCall {
    id: String,
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Default)]
struct Script {
    steps: VecDeque<Step>,
    requests: Vec<Value>,
}

type Shared = Arc<Mutex<Script>>;

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    triage::telemetry::init();
    if args.exit_on_stdin_close {
        std::thread::spawn(|| {
            let mut buf = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            std::process::exit(0);
        });
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("browser_harness: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("browser_harness: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let script: Shared = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("fake llm: bind: {e}"))?;
    let llm_port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let llm = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/__script", post(set_script))
        .route("/__requests", get(requests))
        .layer(DefaultBodyLimit::disable())
        .with_state(script);
    tokio::spawn(async move {
        let _ = axum::serve(listener, llm).await;
    });

    let llm_url = format!("http://127.0.0.1:{llm_port}/v1");
    let open = start_triage(&llm_url, &args.cors_origin, None, true).await?;
    // A server with no model configured: what a newcomer sees first.
    let bare = start_triage(&llm_url, &args.cors_origin, None, false).await?;
    let mut ports = json!({"triage": open.port(), "triage_bare": bare.port(), "llm": llm_port});
    let mut servers = vec![open, bare];
    if let Some(key) = &args.api_key {
        let keyed = start_triage(&llm_url, &args.cors_origin, Some(key), true).await?;
        ports["triage_keyed"] = json!(keyed.port());
        servers.push(keyed);
    }

    let tmp = args.port_file.with_extension("tmp");
    std::fs::write(&tmp, ports.to_string()).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &args.port_file)
        .map_err(|e| format!("{}: {e}", args.port_file.display()))?;
    eprintln!("browser_harness: listening {ports}");

    let tasks: Vec<_> = servers
        .into_iter()
        .map(|app| tokio::spawn(app.run_until_stopped()))
        .collect();
    for task in tasks {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("triage: {e}")),
            Err(e) => return Err(format!("triage task: {e}")),
        }
    }
    Ok(())
}

async fn start_triage(
    llm_url: &str,
    cors: &[String],
    key: Option<&str>,
    with_models: bool,
) -> Result<Application, String> {
    let mut toml = format!(
        r#"
[server]
host = "127.0.0.1"
port = 0
keepalive_interval_secs = 0.2
cors_allowed_origins = {cors}
api_keys = {keys}
[llm]
first_byte_timeout_secs = 10.0
idle_timeout_secs = 10.0
retry_max_attempts = 1
retry_base_delay_ms = 10
retry_max_delay_ms = 50
retry_max_elapsed_secs = 1.0
[toolsets.kubernetes]
enabled = false
[toolsets.prometheus]
enabled = false
[approvals]
signing_key = "browser-harness-key"
"#,
        cors = json!(cors),
        keys = json!(key.into_iter().collect::<Vec<_>>()),
    );
    if with_models {
        toml.push_str(&format!(
            r#"
[models.fake]
model = "openai/fake-model"
api_key = "unused"
api_base = "{llm_url}"
[models.fake-alt]
model = "openai/fake-model-alt"
api_key = "unused"
api_base = "{llm_url}"
[models.fake-small]
model = "openai/fake-model-small"
api_key = "unused"
api_base = "{llm_url}"
custom_args = {{ max_context_size = 8000 }}
"#
        ));
    }
    let settings = Settings::from_toml(&toml).map_err(|e| e.to_string())?;
    Application::build(settings)
        .await
        .map_err(|e| format!("triage: {e}"))
}

async fn set_script(State(script): State<Shared>, body: Bytes) -> Response {
    match serde_json::from_slice::<Vec<Step>>(&body) {
        Ok(steps) => {
            let mut s = script.lock().unwrap();
            s.steps = steps.into();
            s.requests.clear();
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("bad script: {e}")).into_response(),
    }
}

async fn requests(State(script): State<Shared>) -> Response {
    let requests = script.lock().unwrap().requests.clone();
    json_response(StatusCode::OK, &Value::Array(requests))
}

async fn completions(State(script): State<Shared>, raw: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&raw)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&raw).into_owned()));
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    let prompt_tokens = (raw.len() / 4).max(1) as u64;
    let step = {
        let mut s = script.lock().unwrap();
        s.requests.push(body);
        s.steps.pop_front()
    };
    let Some(step) = step else {
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": {"message": "fake llm: script exhausted", "type": "server_error"}}),
        );
    };
    if step.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.delay_ms)).await;
    }
    if let Some(status) = step.error {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let message = step.message.unwrap_or_else(|| "fake llm error".into());
        return json_response(
            status,
            &json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}}),
        );
    }
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": 20, "total_tokens": prompt_tokens + 20});
    if stream {
        streaming(step, usage, include_usage)
    } else {
        non_streaming(step, usage)
    }
}

fn chunk(delta: Value, finish_reason: Option<&str>) -> Bytes {
    let v = json!({
        "id": "chatcmpl-browser-harness",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    });
    Bytes::from(format!("data: {v}\n\n"))
}

/// Word-sized pieces whose concatenation is `s`.
fn words(s: &str) -> Vec<String> {
    s.split_inclusive(' ').map(str::to_owned).collect()
}

fn streaming(step: Step, usage: Value, include_usage: bool) -> Response {
    let pause = Duration::from_millis(step.chunk_delay_ms);
    let frames = async_stream::stream! {
        yield Ok::<_, Infallible>(chunk(json!({"role": "assistant", "content": ""}), None));
        let mut deltas = Vec::new();
        if let Some(r) = &step.reasoning {
            deltas.extend(words(r).into_iter().map(|w| json!({"reasoning_content": w})));
        }
        if let Some(c) = step.text.as_ref().or(step.content.as_ref()) {
            deltas.extend(words(c).into_iter().map(|w| json!({"content": w})));
        }
        for (i, call) in step.tool_calls.iter().enumerate() {
            deltas.push(json!({"tool_calls": [{"index": i, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}));
            let args = call.arguments.to_string();
            let mid = args.char_indices().nth(args.chars().count() / 2).map_or(0, |(i, _)| i);
            for piece in [&args[..mid], &args[mid..]] {
                deltas.push(json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}));
            }
        }
        for delta in deltas {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            yield Ok(chunk(delta, None));
        }
        let reason = if step.tool_calls.is_empty() { "stop" } else { "tool_calls" };
        yield Ok(chunk(json!({}), Some(reason)));
        if include_usage {
            let v = json!({"id": "chatcmpl-browser-harness", "object": "chat.completion.chunk",
                "created": 0, "model": "fake-model", "choices": [], "usage": usage});
            yield Ok(Bytes::from(format!("data: {v}\n\n")));
        }
        yield Ok(Bytes::from_static(b"data: [DONE]\n\n"));
    };
    let mut resp = Response::new(Body::from_stream(frames));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    resp
}

fn non_streaming(step: Step, usage: Value) -> Response {
    let mut message = json!({"role": "assistant", "content": step.text.or(step.content)});
    if let Some(r) = step.reasoning {
        message["reasoning_content"] = json!(r);
    }
    let finish = if step.tool_calls.is_empty() {
        "stop"
    } else {
        message["tool_calls"] = step
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
            .collect();
        "tool_calls"
    };
    json_response(
        StatusCode::OK,
        &json!({
            "id": "chatcmpl-browser-harness",
            "object": "chat.completion",
            "created": 0,
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }),
    )
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}
