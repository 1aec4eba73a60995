//! The `triage` command: `serve` the HTTP API, `ask` a question, list `models`, `check` config,
//! follow and steer server-side `conversations`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use triage::cli::{self, AskOptions, EXIT_ERROR, EXIT_USAGE};
use triage::config::Settings;
use triage::startup::Application;

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
    Serve(ServeFlags),
    /// Ask one question: the answer (markdown) on stdout, progress on stderr.
    Ask(AskOptions),
    /// List the configured model keys, the default first.
    Models,
    /// Validate the configuration, call each model once, report each toolset's status.
    Check,
    /// Conversations on a running triage: list, show, watch, send, approve, pause, interrupt,
    /// delete.
    Conversations(cli::ConversationsArgs),
}

#[derive(clap::Args)]
struct ServeFlags {
    /// Address to listen on (server.host, HOLMES_HOST).
    #[arg(long)]
    host: Option<String>,
    /// Port to listen on (server.port, HOLMES_PORT).
    #[arg(long)]
    port: Option<u16>,
}

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    triage::runtime::allocator::configure();
    let cli = Cli::parse();
    let default_level = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    triage::telemetry::init_with_default(default_level);
    let mut settings = match Settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("triage: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Command::Serve(flags) = &cli.command {
        settings.server.host = flags.host.clone().unwrap_or(settings.server.host);
        settings.server.port = flags.port.unwrap_or(settings.server.port);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(triage::runtime::allocator::on_worker_park)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("triage: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(_) => serve(settings, cli.config.clone()).await,
            Command::Ask(opts) => cli::ask(settings, opts).await,
            Command::Models => cli::models(&settings),
            Command::Check => cli::check(&settings).await,
            Command::Conversations(args) => cli::conversations(settings, args).await,
        }
    })
}

async fn serve(settings: Settings, config: Option<PathBuf>) -> ExitCode {
    // An admin reload reads the files and the environment again, as start-up did.
    let source = Box::new(move || Settings::load(config.as_deref()));
    let app = match Application::build_with_source(settings, source).await {
        Ok(app) => app,
        Err(e) => return cli::startup_exit(&e),
    };
    match app.run_until_stopped().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("triage: server error: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
