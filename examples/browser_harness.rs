//! The browser tests' server (tests/browser): triage on 127.0.0.1, configured against a
//! scripted fake OpenAI-compatible LLM that this program serves too. It stays up until killed.
//!
//! ```text
//! cargo run --example browser_harness -- --port-file PATH [--cors-origin ORIGIN]... [--api-key KEY]
//!     [--data-dir DIR] [--exit-on-stdin-close]
//! ```
//!
//! Each triage keeps its server-side conversations in its own SQLite file under `--data-dir`
//! (default: a new directory under the system's temp dir), never in the user's data directory.
//!
//! Once the servers listen, PATH receives
//! `{"triage": PORT, "triage_bare": PORT, "llm": PORT, "llm_script": PORT}` (`triage_bare` has
//! no model configured; plus `"triage_keyed": PORT` with `--api-key`: a triage that requires
//! that key), written atomically. The models `fake`, `fake-alt` and `fake-small` (an 8000-token
//! context window, for compaction) all point at the fake LLM.
//!
//! The fake LLM (crates/fake-llm) is scripted over HTTP on a port of its own (`llm_script` in
//! the port file):
//! - `POST /script` with a JSON list of steps replaces the script and forgets the recorded
//!   requests. Each chat-completions request consumes the next step; with none left the fake
//!   answers HTTP 500. A step is one of
//!   `{"text": "...", "reasoning": "..."?}`,
//!   `{"tool_calls": [{"id": "...", "name": "...", "arguments": {...}}], "content": "..."?}`,
//!   `{"error": STATUS, "message": "..."?}`,
//!   each with optional `"delay_ms"` (before the response) and `"chunk_delay_ms"` (between
//!   streamed chunks).
//! - `GET /requests`: the JSON bodies the fake LLM received, in order.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use clap::Parser;
use fake_llm::{FakeLlm, Step, ToolCall};
use serde::Deserialize;
use serde_json::{Value, json};
use triage::config::Settings;
use triage::startup::Application;

#[derive(Parser)]
#[command(about = "triage + a scripted fake LLM, for the browser tests")]
struct Args {
    /// Where to write the ports (see above) once everything listens.
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
    /// Where the triages keep their conversation databases (one SQLite file each).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// One scripted answer, as the browser tests write it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptStep {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptCall>,
    #[serde(default)]
    error: Option<u16>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    chunk_delay_ms: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    id: String,
    name: String,
    #[serde(default)]
    arguments: Value,
}

impl ScriptStep {
    fn into_step(self) -> Result<Step, String> {
        if self.reasoning.is_some() && !self.tool_calls.is_empty() {
            return Err("reasoning goes with text, not with tool_calls".into());
        }
        let text = self.text.or(self.content);
        let step = if let Some(status) = self.error {
            Step::Error {
                status,
                message: self.message.unwrap_or_else(|| "fake llm error".into()),
                retry_after: None,
            }
        } else if self.tool_calls.is_empty() {
            Step::Text {
                content: text.unwrap_or_default(),
                reasoning: self.reasoning,
                usage: None,
            }
        } else {
            Step::ToolCalls {
                content: text,
                calls: self
                    .tool_calls
                    .into_iter()
                    .map(|c| ToolCall {
                        id: c.id,
                        name: c.name,
                        arguments: c.arguments.to_string(),
                    })
                    .collect(),
                usage: None,
            }
        };
        if self.delay_ms == 0 && self.chunk_delay_ms == 0 {
            return Ok(step);
        }
        Ok(Step::Paced {
            before: Duration::from_millis(self.delay_ms),
            between_chunks: Duration::from_millis(self.chunk_delay_ms),
            step: Box::new(step),
        })
    }
}

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
    let llm = FakeLlm::start().await;
    let control = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("script port: bind: {e}"))?;
    let script_port = control.local_addr().map_err(|e| e.to_string())?.port();
    let control_app = Router::new()
        .route("/script", post(set_script))
        .route("/requests", get(requests))
        .with_state(llm.clone());
    tokio::spawn(async move {
        let _ = axum::serve(control, control_app).await;
    });

    let llm_url = llm.base_url();
    let data_dir = args.data_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("triage-browser-{}", uuid::Uuid::new_v4().simple()))
    });
    std::fs::create_dir_all(&data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let database = |name: &str| format!("sqlite://{}", data_dir.join(name).display());
    let open = start_triage(
        &llm_url,
        &args.cors_origin,
        None,
        true,
        &database("open.db"),
    )
    .await?;
    // A server with no model configured: what a newcomer sees first.
    let bare = start_triage(
        &llm_url,
        &args.cors_origin,
        None,
        false,
        &database("bare.db"),
    )
    .await?;
    let mut ports = json!({
        "triage": open.port(),
        "triage_bare": bare.port(),
        "llm": llm.addr().port(),
        "llm_script": script_port,
    });
    let mut servers = vec![open, bare];
    if let Some(key) = &args.api_key {
        let keyed = start_triage(
            &llm_url,
            &args.cors_origin,
            Some(key),
            true,
            &database("keyed.db"),
        )
        .await?;
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
    database_url: &str,
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
[conversations]
database_url = {database_url}
"#,
        cors = json!(cors),
        keys = json!(key.into_iter().collect::<Vec<_>>()),
        database_url = json!(database_url),
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

async fn set_script(State(llm): State<FakeLlm>, body: Bytes) -> Response {
    let steps = serde_json::from_slice::<Vec<ScriptStep>>(&body)
        .map_err(|e| e.to_string())
        .and_then(|steps| steps.into_iter().map(ScriptStep::into_step).collect());
    match steps {
        Ok(steps) => {
            llm.reset(steps);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("bad script: {e}")).into_response(),
    }
}

async fn requests(State(llm): State<FakeLlm>) -> Response {
    axum::Json(llm.requests()).into_response()
}
