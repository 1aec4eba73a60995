//! The command line: `ask` (in-process or against `--server`), `models`, `check`,
//! `conversations` (a client of a running server). Progress goes to stderr, the answer
//! (markdown) to stdout, so `triage ask … > answer.md` works.

mod check;
mod conversations;
mod terminal;

pub use check::{check, models, startup_exit};
pub use conversations::{ConversationCommand, ConversationsArgs, conversations};

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::config::Settings;
use crate::holmes::{RequestMeta, StatelessChat};
use crate::runtime::install_crypto_provider;
use crate::sse_reader::sse_events;
use crate::startup::{build_agent, stateless_chat};
use crate::wire::events::{ApprovalRequired, ToolStatus};
use crate::wire::request::ToolDecision;
use crate::wire::{ChatRequest, StreamEvent};

/// Exit codes: 0 answer, 1 error; 2 (usage) comes from clap and config errors.
pub const EXIT_ERROR: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
/// A remote server's frame longer than this ends the answer instead of filling memory; the
/// last frame carries the whole history, images included, hence the room.
const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, clap::Args)]
pub struct AskOptions {
    pub question: String,
    /// Model key (see `triage models`).
    #[arg(long)]
    pub model: Option<String>,
    /// Turn a prompt section on or off, e.g. --behavior style_guide=off (repeatable).
    #[arg(long = "behavior", value_name = "KEY=on|off")]
    pub behavior: Vec<String>,
    /// Print the non-streaming JSON response instead.
    #[arg(long)]
    pub json: bool,
    /// Ask y/n on the terminal for tools that need approval.
    #[arg(long)]
    pub approve: bool,
    /// Ask a running triage (e.g. http://127.0.0.1:5050) instead of running the agent here.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// API key for --server.
    #[arg(long, env = "TRIAGE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
}

/// Parses `--behavior KEY=on|off`.
pub fn behavior_controls(pairs: &[String]) -> Result<HashMap<String, bool>, String> {
    pairs
        .iter()
        .map(|pair| {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("--behavior expects KEY=on|off, got '{pair}'"))?;
            let on = match value.trim().to_ascii_lowercase().as_str() {
                "on" | "true" | "yes" | "1" => true,
                "off" | "false" | "no" | "0" => false,
                other => {
                    return Err(format!(
                        "--behavior {key}: expected on or off, got '{other}'"
                    ));
                }
            };
            let key = key.trim();
            if crate::prompt::Section::from_key(key).is_none() {
                let valid: Vec<&str> = crate::prompt::Section::ALL.map(|s| s.key()).to_vec();
                return Err(format!(
                    "--behavior: unknown key '{key}'. Valid keys: {}",
                    valid.join(", ")
                ));
            }
            Ok((key.to_owned(), on))
        })
        .collect()
}

/// The `/api/chat` URL of a running triage, from what the user gave `--server`.
fn server_chat_url(given: &str) -> Result<String, String> {
    Ok(format!("{}/api/chat", server_base_url(given)?))
}

/// The base URL of a running triage (no trailing slash), from what the user gave `--server`.
fn server_base_url(given: &str) -> Result<String, String> {
    let example = "e.g. --server http://127.0.0.1:5050";
    let parsed = url::Url::parse(given).ok().filter(|u| u.has_host());
    let Some(url) = parsed.filter(|u| matches!(u.scheme(), "http" | "https")) else {
        return Err(format!(
            "--server expects the base URL of a running triage with http:// or https:// \
             ({example}); got '{given}'"
        ));
    };
    if url.path().trim_end_matches('/').is_empty() && url.query().is_none() {
        return Ok(given.trim_end_matches('/').to_owned());
    }
    let base = format!(
        "{}://{}",
        url.scheme(),
        &url[url::Position::BeforeHost..url::Position::AfterPort]
    );
    Err(format!(
        "--server expects the server's base URL, not an endpoint: got '{given}', write --server {base}"
    ))
}

/// Why `ask` failed: the request was wrong (exit 2) or something failed while running (1).
#[derive(Debug)]
enum Failure {
    Usage(String),
    Runtime(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Runtime(message)
    }
}

impl Failure {
    /// Prints the message and gives the exit code.
    fn exit(self) -> ExitCode {
        ExitCode::from(self.report())
    }

    /// Prints the message (it may quote a server: escaped) and gives the bare exit code.
    fn report(self) -> u8 {
        let (code, message) = match self {
            Failure::Usage(m) => (EXIT_USAGE, m),
            Failure::Runtime(m) => (EXIT_ERROR, m),
        };
        eprintln!("triage: {}", terminal::clean_text(&message));
        code
    }
}

pub async fn ask(settings: Settings, opts: AskOptions) -> ExitCode {
    let controls = match behavior_controls(&opts.behavior) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("triage: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let request = ChatRequest {
        ask: opts.question.clone(),
        model: opts.model.clone(),
        behavior_controls: (!controls.is_empty()).then_some(controls),
        stream: !opts.json,
        enable_tool_approval: opts.approve && !opts.json,
        ..ChatRequest::default()
    };
    let source = match &opts.server {
        Some(url) => match Source::remote(url, opts.api_key.clone()) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("triage: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        },
        None => match build_agent(&settings, &[]).await {
            Ok(agent) => {
                // No model, or an unknown --model: usage errors, found before any work.
                if let Err(e) = agent.models.resolve(opts.model.as_deref()) {
                    eprintln!("triage: {e}");
                    return ExitCode::from(EXIT_USAGE);
                }
                Source::Local(stateless_chat(
                    &settings,
                    crate::agent::CurrentAgent::new(agent),
                ))
            }
            Err(e) => return check::startup_exit(&e),
        },
    };
    if opts.json {
        return match source.json(request).await {
            Ok(body) => {
                println!("{}", terminal::json_text_for_terminal(&body));
                ExitCode::SUCCESS
            }
            Err(e) => e.exit(),
        };
    }
    let mut progress = Progress::new();
    let mut request = request;
    loop {
        let events = match source.stream(request.clone()).await {
            Ok(e) => e,
            Err(e) => return e.exit(),
        };
        match progress.follow(events).await {
            Outcome::Answer(text) => {
                // Escaped even when redirected: `cat answer.md` reaches a terminal too.
                println!("{}", terminal::clean_text(&text));
                return ExitCode::SUCCESS;
            }
            Outcome::Failed(message) => {
                eprintln!("triage: {}", terminal::clean_text(&message));
                return ExitCode::from(EXIT_ERROR);
            }
            Outcome::Paused(paused) => match decide(&paused) {
                Some(decisions) => {
                    request = ChatRequest {
                        ask: String::new(),
                        conversation_history: Some(paused.conversation_history),
                        tool_decisions: Some(decisions),
                        frontend_tool_results: None,
                        ..request
                    };
                }
                None if opts.approve => {
                    eprintln!(
                        "triage: the agent needs approval for a tool, but approvals need a \
                         terminal to ask y/n on and stdin is not one; run this command in an \
                         interactive terminal"
                    );
                    return ExitCode::from(EXIT_ERROR);
                }
                None => {
                    eprintln!(
                        "triage: the agent needs approval for a tool; run on a terminal with --approve"
                    );
                    return ExitCode::from(EXIT_ERROR);
                }
            },
        }
    }
}

/// Asks y/n for each pending approval; `None` when nobody can answer (no terminal).
fn decide(paused: &ApprovalRequired) -> Option<Vec<ToolDecision>> {
    if !std::io::stdin().is_terminal() || paused.pending_approvals.is_empty() {
        return None;
    }
    let mut decisions = Vec::new();
    for p in &paused.pending_approvals {
        eprint!(
            "Run `{}` ({})? [y/N] ",
            terminal::clean_line(&p.description),
            terminal::clean_line(&p.tool_name)
        );
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let approved = std::io::stdin().read_line(&mut line).is_ok()
            && matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes");
        decisions.push(ToolDecision {
            tool_call_id: p.tool_call_id.clone(),
            approved,
            feedback: None,
            save_prefixes: None,
        });
    }
    Some(decisions)
}

enum Outcome {
    Answer(String),
    Failed(String),
    Paused(ApprovalRequired),
}

type EventStream = std::pin::Pin<Box<dyn Stream<Item = StreamEvent> + Send>>;

/// The error event that ends a remote stream this CLI could not read.
fn stream_failed(description: String) -> StreamEvent {
    StreamEvent::Error(crate::wire::events::ErrorEvent::new(description, false))
}

/// Where events come from: the agent in this process, or a running triage.
enum Source {
    Local(Arc<StatelessChat>),
    Remote {
        url: String,
        key: Option<String>,
        http: reqwest::Client,
    },
}

impl Source {
    fn remote(url: &str, key: Option<String>) -> Result<Source, String> {
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // A redirect would carry X-API-Key to wherever the server points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Source::Remote {
            url: server_chat_url(url)?,
            key,
            http,
        })
    }

    async fn post(&self, request: &ChatRequest) -> Result<reqwest::Response, Failure> {
        let Source::Remote { url, key, http } = self else {
            return Err(Failure::Runtime("not a remote source".into()));
        };
        let body = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        let mut req = http
            .post(url.as_str())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(k) = key {
            req = req.header("x-api-key", k.as_str());
        }
        let resp = req.send().await.map_err(|e| {
            let why = if e.is_connect() {
                "nothing answered; is `triage serve` running there? Check the host and port \
                 of --server"
                    .to_owned()
            } else {
                e.to_string()
            };
            format!("cannot reach triage at {url}: {why}")
        })?;
        if !resp.status().is_success() {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            let detail = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| {
                    v.get("detail")
                        .map(|d| d.as_str().map_or_else(|| d.to_string(), str::to_owned))
                })
                .unwrap_or(text);
            let message = format!("HTTP {status}: {detail}");
            // 400: the server refused what was asked (e.g. an unknown --model), a usage error.
            return Err(if status == reqwest::StatusCode::BAD_REQUEST {
                Failure::Usage(message)
            } else {
                Failure::Runtime(message)
            });
        }
        Ok(resp)
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, Failure> {
        match self {
            Source::Local(chat) => {
                let run = chat
                    .start(request, local_meta())
                    .map_err(|e| e.to_string())?;
                Ok(Box::pin(run))
            }
            Source::Remote { .. } => {
                let resp = self.post(&request).await?;
                // A broken or oversized stream ends in an error event naming why; events of
                // kinds this CLI does not know are skipped.
                let events = sse_events(resp.bytes_stream(), MAX_FRAME_BYTES)
                    .scan(false, |failed, e| {
                        let item = match e {
                            _ if *failed => return futures::future::ready(None),
                            Ok(e) => match e.text() {
                                Some(data) => StreamEvent::parse(e.name(), data),
                                None => Some(stream_failed(format!(
                                    "the server sent a `{}` event that is not UTF-8",
                                    e.name()
                                ))),
                            },
                            Err(e) => Some(stream_failed(format!("the event stream broke: {e}"))),
                        };
                        *failed = matches!(item, Some(StreamEvent::Error(_)));
                        futures::future::ready(Some(item))
                    })
                    .filter_map(futures::future::ready);
                Ok(Box::pin(events))
            }
        }
    }

    async fn json(&self, request: ChatRequest) -> Result<String, Failure> {
        match self {
            Source::Local(chat) => {
                let run = chat
                    .start(request, local_meta())
                    .map_err(|e| e.to_string())?;
                let response = run.collect().await.map_err(|e| e.message)?;
                Ok(serde_json::to_string_pretty(&response).map_err(|e| e.to_string())?)
            }
            Source::Remote { .. } => {
                let text = self
                    .post(&request)
                    .await?
                    .text()
                    .await
                    .map_err(|e| e.to_string())?;
                let value: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
                Ok(serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?)
            }
        }
    }
}

fn local_meta() -> RequestMeta {
    RequestMeta {
        request_id: uuid::Uuid::new_v4().to_string(),
        headers: Vec::new(),
    }
}

/// Live progress on stderr: a spinner while tools run (on a terminal), one line per result.
struct Progress {
    tty: bool,
    running: Vec<(String, String)>,
    started: Instant,
    total_tokens: u64,
}

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

impl Progress {
    fn new() -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            running: Vec::new(),
            started: Instant::now(),
            total_tokens: 0,
        }
    }

    async fn follow(&mut self, mut events: EventStream) -> Outcome {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut frame = 0usize;
        loop {
            let event = tokio::select! {
                e = events.next() => e,
                _ = tick.tick(), if self.tty && !self.running.is_empty() => {
                    frame += 1;
                    self.draw_spinner(frame);
                    continue;
                }
            };
            let Some(event) = event else {
                return Outcome::Failed("the stream ended without an answer".into());
            };
            self.clear_line();
            match event {
                StreamEvent::StartToolCalling(s) => self.running.push((s.id, s.tool_name)),
                StreamEvent::ToolCallingResult(r) => {
                    self.running.retain(|(id, _)| *id != r.tool_call_id);
                    let mark = match r.result.status {
                        ToolStatus::Success => "✓",
                        ToolStatus::NoData => "∅",
                        ToolStatus::ApprovalRequired => "?",
                        ToolStatus::Error => "✗",
                    };
                    let detail = r
                        .result
                        .error
                        .as_deref()
                        .map(|e| format!(": {}", first_line(e)))
                        .unwrap_or_default();
                    eprintln!(
                        "{mark} {} — {}{}",
                        terminal::clean_line(&r.name),
                        terminal::clean_line(&r.description),
                        terminal::clean_line(&detail)
                    );
                }
                StreamEvent::AiMessage(m) => {
                    if let Some(c) = m.content.filter(|c| !c.trim().is_empty()) {
                        eprintln!("{}", terminal::clean_text(c.trim()));
                    }
                }
                // Not requested: the answer is printed whole when it ends.
                StreamEvent::AnswerDelta(_) => {}
                StreamEvent::TokenCount(t) => {
                    self.total_tokens = u64::from(t.metadata.tokens.total_tokens)
                }
                StreamEvent::CompactionStart(c) => {
                    eprintln!("{}", terminal::clean_text(&c.content))
                }
                StreamEvent::Compacted(c) => eprintln!("{}", terminal::clean_text(&c.content)),
                StreamEvent::ModelFallback(f) => eprintln!(
                    "model {} unavailable, answered by {}: {}",
                    terminal::clean_line(&f.requested_model),
                    terminal::clean_line(&f.model),
                    terminal::clean_line(first_line(&f.reason))
                ),
                StreamEvent::ApprovalRequired(p) => return Outcome::Paused(*p),
                StreamEvent::AnswerEnd(end) => {
                    let u = end.metadata.usage;
                    eprintln!(
                        "({} tokens in the conversation; last call {} prompt + {} completion; {:.1} s)",
                        end.metadata.tokens.total_tokens,
                        u.prompt_tokens,
                        u.completion_tokens,
                        self.started.elapsed().as_secs_f64()
                    );
                    return Outcome::Answer(end.analysis);
                }
                StreamEvent::Error(e) => return Outcome::Failed(e.description),
            }
        }
    }

    fn draw_spinner(&self, frame: usize) {
        let names: Vec<&str> = self.running.iter().map(|(_, n)| n.as_str()).collect();
        eprint!(
            "\r\x1b[2K{} running {} ({:.0} s)",
            SPINNER[frame % SPINNER.len()],
            terminal::clean_line(&names.join(", ")),
            self.started.elapsed().as_secs_f64()
        );
        let _ = std::io::stderr().flush();
    }

    fn clear_line(&self) {
        if self.tty {
            eprint!("\r\x1b[2K");
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_behavior_pairs() {
        let c = behavior_controls(&["style_guide=off".into(), "ai_safety=on".into()]).unwrap();
        assert!(!c["style_guide"]);
        assert!(c["ai_safety"]);
        assert!(behavior_controls(&["x".into()]).is_err());
        assert!(behavior_controls(&["x=maybe".into()]).is_err());
        let err = behavior_controls(&["style_guid=off".into()]).unwrap_err();
        assert!(
            err.contains("style_guid") && err.contains("style_guide"),
            "{err}"
        );
    }

    #[test]
    fn server_urls_say_what_to_write() {
        assert_eq!(
            server_chat_url("http://127.0.0.1:5050/").unwrap(),
            "http://127.0.0.1:5050/api/chat"
        );
        let no_scheme = server_chat_url("localhost:5050").unwrap_err();
        assert!(no_scheme.contains("http://"), "{no_scheme}");
        let endpoint = server_chat_url("http://h:5050/api/chat").unwrap_err();
        assert!(endpoint.contains("--server http://h:5050"), "{endpoint}");
    }
}
