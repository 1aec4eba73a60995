//! `triage conversations list|show|watch|send|approve|pause|interrupt|delete`: a client of the
//! server-side conversations of a running triage (`/api/conversations`).
//!
//! Every command talks to a server, never to the store directly. A conversation runs inside the
//! server process that owns it: only that process can pause or interrupt it, and a delete
//! written straight into the database would leave its run going. Reading the store directly
//! would also skip the API keys, and with SQLite contend with the server for the file. So one
//! path, the HTTP API, whatever the command.
//!
//! Which server: `--server URL` (with `--api-key` or `TRIAGE_API_KEY`), as `ask` takes them.
//! Without `--server`, the address `triage serve` listens on with the same configuration
//! (`server.host`, `server.port`; `0.0.0.0` is reached as `127.0.0.1`), and its first API key
//! unless one is given: `triage serve` in one terminal and `triage conversations list` in
//! another just work. A key from the configuration is never sent to a `--server` URL.
//!
//! Output: tables and events on stdout, messages on stderr; `--json` prints the server's JSON.
//! Everything a server sends is printed with control characters escaped (see `render`).
//! Exit codes: 0 done, 1 a runtime failure (unreachable server, not found, conflict), 2 a usage
//! error (including the server's 400/422); `watch` also 1 for a conversation in `error`, 3
//! waiting for a confirmation, 4 paused, 5 stuck.

mod client;
mod render;
mod watch;

use std::process::ExitCode;

use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::Failure;
use super::terminal::json_for_terminal;
use crate::config::Settings;
use crate::conversation_domain::ConversationStatus;
use crate::conversations::api::ConversationInfo;
use client::Client;
use render::{event_text, info_text, list_header, list_row};

#[derive(Debug, clap::Args)]
pub struct ConversationsArgs {
    /// Base URL of a running triage (default: where `triage serve` listens with this config).
    #[arg(long, value_name = "URL", global = true)]
    pub server: Option<String>,
    /// API key (default with no --server: the config's first `server.api_keys`).
    #[arg(long, env = "TRIAGE_API_KEY", hide_env_values = true, global = true)]
    pub api_key: Option<String>,
    #[command(subcommand)]
    pub command: ConversationCommand,
}

/// What `list --status` accepts: every status a conversation can be in.
fn statuses() -> impl Iterator<Item = &'static str> {
    ConversationStatus::ALL
        .into_iter()
        .filter(|s| *s != ConversationStatus::Deleted)
        .map(ConversationStatus::as_str)
}

#[derive(Debug, clap::Subcommand)]
pub enum ConversationCommand {
    /// The conversations, most recently updated first: status, title, id, last update.
    List {
        /// Only conversations with this status.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(statuses()))]
        status: Option<String>,
        /// Conversations per page (1 to 100).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
        limit: u32,
        /// The page to show: the `--page` value the previous page printed.
        #[arg(long, value_name = "PAGE_ID")]
        page: Option<String>,
        /// Print the server's JSON page instead.
        #[arg(long)]
        json: bool,
    },
    /// One conversation: status, usage, what it waits for, and its last events.
    Show {
        id: String,
        /// How many of the last events to print.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
        events: u32,
        /// Print the server's JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Print the conversation's events and follow it until it stops (exit 0 finished, 1
    /// error, 3 waiting for a confirmation, 4 paused, 5 stuck).
    Watch {
        id: String,
        /// Start after this event id (default: from the beginning).
        #[arg(long, default_value_t = 0, value_name = "EVENT_ID")]
        after: u64,
    },
    /// Send a message: `send ID TEXT [--run]`, or `send --new TEXT` to start a conversation
    /// (it runs at once, and its id is printed on stdout).
    Send {
        /// ID and TEXT, or only TEXT with --new.
        #[arg(required = true, num_args = 1..=2, value_names = ["ID", "TEXT"])]
        args: Vec<String>,
        /// Create a conversation with TEXT as its first message.
        #[arg(long)]
        new: bool,
        /// Start a run with the message (a running conversation takes it at its next step).
        #[arg(long)]
        run: bool,
        /// With --new: don't run the first message yet.
        #[arg(long, requires = "new", conflicts_with = "run")]
        no_run: bool,
        /// With --new: the conversation's title.
        #[arg(long, requires = "new")]
        title: Option<String>,
        /// With --new: the model key (see `triage models`).
        #[arg(long, requires = "new")]
        model: Option<String>,
        /// Then follow the conversation, as `watch` does (and exit as it does).
        #[arg(long)]
        watch: bool,
    },
    /// Approve every pending tool call (or deny them with --deny); the run continues.
    Approve {
        id: String,
        #[arg(long)]
        deny: bool,
        /// Why: the model reads it.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Stop after the current step.
    Pause { id: String },
    /// Stop now: the LLM call and the tools in flight are cut.
    Interrupt { id: String },
    /// Delete the conversation and its events (a run is stopped first).
    Delete { id: String },
}

/// A page of `/search`.
#[derive(Deserialize)]
struct Page<T> {
    items: Vec<T>,
    next_page_id: Option<String>,
}

/// An event of `/events/search`.
#[derive(Deserialize)]
struct StoredEvent {
    id: u64,
    kind: String,
    payload: Value,
}

pub async fn conversations(settings: Settings, args: ConversationsArgs) -> ExitCode {
    let client = match Client::new(args.server.as_deref(), args.api_key, &settings) {
        Ok(c) => c,
        Err(e) => return e.exit(),
    };
    match run(&client, args.command).await {
        Ok(code) => code,
        Err(e) => e.exit(),
    }
}

fn conversation_id(raw: &str) -> Result<Uuid, Failure> {
    Uuid::parse_str(raw.trim()).map_err(|_| {
        Failure::Usage(format!(
            "'{}' is not a conversation id (a UUID; see `triage conversations list`)",
            render::field(raw)
        ))
    })
}

async fn run(client: &Client, command: ConversationCommand) -> Result<ExitCode, Failure> {
    match command {
        ConversationCommand::List {
            status,
            limit,
            page,
            json,
        } => list(client, status, limit, page, json).await,
        ConversationCommand::Show { id, events, json } => {
            show(client, conversation_id(&id)?, events, json).await
        }
        ConversationCommand::Watch { id, after } => {
            Ok(watch::watch(client, conversation_id(&id)?, after).await)
        }
        ConversationCommand::Send {
            args,
            new,
            run,
            no_run,
            title,
            model,
            watch,
        } => {
            let (id, text) = match (new, args.as_slice()) {
                (true, [text]) => (None, text),
                (false, [id, text]) => (Some(conversation_id(id)?), text),
                (true, _) => return Err(Failure::Usage("send --new takes only TEXT".into())),
                (false, _) => {
                    return Err(Failure::Usage(
                        "send takes ID and TEXT (or --new TEXT to start a conversation)".into(),
                    ));
                }
            };
            let (id, after) = match id {
                Some(id) => (id, send(client, id, text, run).await?),
                None => {
                    let body = json!({
                        "title": title,
                        "model": model,
                        "initial_message": {"content": text, "run": !no_run},
                    });
                    let info: ConversationInfo = client.post("/api/conversations", &body).await?;
                    println!("{}", info.id);
                    (info.id, 0)
                }
            };
            Ok(if watch {
                watch::watch(client, id, after).await
            } else {
                ExitCode::SUCCESS
            })
        }
        ConversationCommand::Approve { id, deny, reason } => {
            let id = conversation_id(&id)?;
            let body = json!({"accept": !deny, "reason": reason});
            let path = format!("/api/conversations/{id}/events/respond_to_confirmation");
            client.post::<Value>(&path, &body).await?;
            let what = if deny { "denied" } else { "approved" };
            eprintln!("{what}; the run continues (triage conversations watch {id})");
            Ok(ExitCode::SUCCESS)
        }
        ConversationCommand::Pause { id } => {
            action(
                client,
                conversation_id(&id)?,
                "pause",
                "pausing after the current step",
            )
            .await
        }
        ConversationCommand::Interrupt { id } => {
            action(client, conversation_id(&id)?, "interrupt", "interrupted").await
        }
        ConversationCommand::Delete { id } => {
            let id = conversation_id(&id)?;
            let path = format!("/api/conversations/{id}");
            client.call::<Value>(Method::DELETE, &path, None).await?;
            eprintln!("deleted {id}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Sends a message to a conversation; returns its last event id before the message.
async fn send(client: &Client, id: Uuid, text: &str, run: bool) -> Result<u64, Failure> {
    let info: ConversationInfo = client.get(&format!("/api/conversations/{id}")).await?;
    let body = json!({"content": text, "run": run});
    client
        .post::<Value>(&format!("/api/conversations/{id}/events"), &body)
        .await?;
    let running = info.execution_status == ConversationStatus::Running;
    eprintln!(
        "{}",
        match (run, running) {
            (_, true) => "sent; the run takes it at its next step",
            (true, false) => "sent; running",
            (false, false) => "sent; kept for the next run (--run starts one)",
        }
    );
    Ok(info.last_event_id)
}

async fn action(client: &Client, id: Uuid, verb: &str, done: &str) -> Result<ExitCode, Failure> {
    let path = format!("/api/conversations/{id}/{verb}");
    client.post::<Value>(&path, &json!({})).await?;
    eprintln!("{done}");
    Ok(ExitCode::SUCCESS)
}

async fn list(
    client: &Client,
    status: Option<String>,
    limit: u32,
    page: Option<String>,
    json: bool,
) -> Result<ExitCode, Failure> {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("limit", &limit.to_string());
    query.append_pair("sort_order", "UPDATED_AT_DESC");
    if let Some(status) = &status {
        query.append_pair("status", status);
    }
    if let Some(page) = &page {
        query.append_pair("page_id", page);
    }
    let path = format!("/api/conversations/search?{}", query.finish());
    if json {
        let page: Value = client.get(&path).await?;
        println!("{}", json_for_terminal(&page));
        return Ok(ExitCode::SUCCESS);
    }
    let page: Page<ConversationInfo> = client.get(&path).await?;
    if page.items.is_empty() {
        match &status {
            Some(status) => eprintln!("no conversations with status {status}"),
            None => eprintln!("no conversations"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", list_header());
    for info in &page.items {
        println!("{}", list_row(info));
    }
    if let Some(next) = &page.next_page_id {
        eprintln!("more: --page {}", render::field(next));
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(client: &Client, id: Uuid, events: u32, json: bool) -> Result<ExitCode, Failure> {
    let info_path = format!("/api/conversations/{id}");
    let events_path = format!(
        "/api/conversations/{id}/events/search?sort_order=TIMESTAMP_DESC&limit={}",
        events.max(1)
    );
    if json {
        let info: Value = client.get(&info_path).await?;
        println!("{}", json_for_terminal(&info));
        return Ok(ExitCode::SUCCESS);
    }
    let info: ConversationInfo = client.get(&info_path).await?;
    println!("{}", info_text(&info));
    if events == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let page: Page<StoredEvent> = client.get(&events_path).await?;
    let lines: Vec<String> = page
        .items
        .iter()
        .rev()
        .filter_map(|e| event_text(e.id, &e.kind, &e.payload))
        .collect();
    if !lines.is_empty() {
        println!("\nlast events:");
        for line in lines {
            println!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
