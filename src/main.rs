//! The `triage` command: `serve` the HTTP API, or `ask` a question in-process.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use futures::StreamExt;

use triage::config::Settings;
use triage::startup::{Application, build_agent};
use triage::wire::{ChatRequest, StreamEvent};

#[derive(Parser)]
#[command(
    name = "triage",
    version,
    about = "A HolmesGPT-compatible troubleshooting agent"
)]
struct Cli {
    /// Config file layered over the defaults (also TRIAGE_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API.
    Serve,
    /// Ask one question in-process and print the answer.
    Ask {
        question: String,
        /// Model key (see `triage models`).
        #[arg(long)]
        model: Option<String>,
    },
    /// List the configured model keys.
    Models,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    triage::telemetry::init();
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("triage: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("triage: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve => serve(settings).await,
            Command::Ask { question, model } => ask(settings, question, model).await,
            Command::Models => models(settings),
        }
    })
}

async fn serve(settings: Settings) -> ExitCode {
    let app = match Application::build(settings).await {
        Ok(app) => app,
        Err(e) => {
            eprintln!("triage: {e}");
            return ExitCode::FAILURE;
        }
    };
    match app.run_until_stopped().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("triage: server error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn ask(settings: Settings, question: String, model: Option<String>) -> ExitCode {
    let agent = match build_agent(&settings).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("triage: {e}");
            return ExitCode::FAILURE;
        }
    };
    let request = ChatRequest {
        ask: question,
        model,
        ..ChatRequest::default()
    };
    let meta = triage::agent::RequestMeta {
        request_id: uuid::Uuid::new_v4().to_string(),
        headers: Vec::new(),
    };
    let prepared = match agent.prepare(request, meta) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("triage: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut events = std::pin::pin!(agent.clone().run(prepared));
    while let Some(event) = events.next().await {
        match event {
            StreamEvent::StartToolCalling(s) => eprintln!("· running {}", s.tool_name),
            StreamEvent::ToolCallingResult(r) => {
                eprintln!("· {} → {:?}", r.description, r.result.status)
            }
            StreamEvent::AiMessage(m) => {
                if let Some(c) = m.content {
                    eprintln!("{c}");
                }
            }
            StreamEvent::AnswerEnd(end) => {
                println!("{}", end.analysis);
                return ExitCode::SUCCESS;
            }
            StreamEvent::Error(e) => {
                eprintln!("triage: {}", e.description);
                return ExitCode::FAILURE;
            }
            _ => {}
        }
    }
    ExitCode::FAILURE
}

fn models(settings: Settings) -> ExitCode {
    match triage::llm::ModelRegistry::from_settings(&settings) {
        Ok(r) => {
            for key in r.keys() {
                println!("{key}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("triage: {e}");
            ExitCode::FAILURE
        }
    }
}
