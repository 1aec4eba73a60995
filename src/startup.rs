//! Building the application from settings: the one seam tests and `main` share. `build` binds
//! the listener (port 0 in tests), so `port()` is known before serving starts.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::agent::{Agent, AgentOptions, ApprovalSigner, CompactionOptions};
use crate::config::{ConfigError, Settings, ToolsetSettings};
use crate::context::tokens::Tokenizer;
use crate::http::{AppState, router};
use crate::llm::{LlmClient, ModelRegistry};
use crate::prompt::{DisabledToolset, PromptInputs, Prompts, ToolsetPrompt};
use crate::tools::{self, ToolRegistry, ToolsetStatus};

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Prompt(#[from] crate::prompt::PromptError),
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

/// Installs rustls' ring provider once (reqwest is built without a default provider so that
/// aws-lc stays out of the build).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Everything a request needs, built once: also used in-process by the CLI.
pub async fn build_agent(settings: &Settings) -> Result<Arc<Agent>, StartupError> {
    install_crypto_provider();
    Tokenizer::warm_up();
    let models = ModelRegistry::from_settings(settings)?;
    let tools = load_tools(&settings.toolsets).await?;
    let inputs = PromptInputs {
        cluster_name: settings.prompts.cluster_name.clone(),
        system_prompt_additions: settings.prompts.system_prompt_additions.clone(),
        toolsets: tools
            .toolsets()
            .iter()
            .filter(|t| t.status == ToolsetStatus::Enabled)
            .map(|t| ToolsetPrompt {
                name: t.name.clone(),
                instructions: t.instructions.clone(),
            })
            .collect(),
        disabled_toolsets: tools
            .toolsets()
            .iter()
            .filter_map(|t| match &t.status {
                ToolsetStatus::Unavailable(reason) => Some(DisabledToolset {
                    name: t.name.clone(),
                    reason: reason.clone(),
                }),
                _ => None,
            })
            .collect(),
    };
    let prompts = Prompts::new(
        &inputs,
        settings.prompts.enabled.as_deref(),
        settings.prompts.dir.as_deref(),
    )?;
    let llm = LlmClient::new(&settings.llm)?;
    let a = &settings.agent;
    Ok(Arc::new(Agent {
        models,
        llm,
        prompts,
        tools,
        signer: ApprovalSigner::new(settings.approvals.signing_key.as_deref()),
        options: AgentOptions {
            max_steps: a.max_steps,
            tool_budget_pct: a.tool_budget_pct,
            tool_budget_tokens: a.tool_budget_tokens,
            duplicate_call_guard: a.duplicate_call_guard,
        },
        compaction: CompactionOptions {
            enabled: settings.compaction.enabled,
            threshold_pct: settings.compaction.threshold_pct,
        },
    }))
}

async fn load_tools(cfg: &ToolsetSettings) -> Result<ToolRegistry, StartupError> {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let (kubernetes, prometheus) = tokio::join!(
        tools::kubernetes::toolset(&cfg.kubernetes),
        tools::prometheus::toolset(&cfg.prometheus, &http),
    );
    let toolsets = vec![
        tools::core_toolset(),
        tools::bash::toolset(&cfg.bash),
        kubernetes,
        prometheus,
        tools::internet::toolset(&cfg.internet, &http),
    ];
    for t in &toolsets {
        match &t.status {
            ToolsetStatus::Enabled => {
                tracing::info!(toolset = %t.name, tools = t.tools.len(), "toolset enabled")
            }
            ToolsetStatus::Disabled => {
                tracing::info!(toolset = %t.name, "toolset disabled in config")
            }
            ToolsetStatus::Unavailable(reason) => {
                tracing::warn!(toolset = %t.name, %reason, "toolset unavailable")
            }
        }
    }
    Ok(ToolRegistry::new(toolsets))
}

pub struct Application {
    listener: TcpListener,
    router: axum::Router,
    port: u16,
}

impl Application {
    pub async fn build(settings: Settings) -> Result<Application, StartupError> {
        let agent = build_agent(&settings).await?;
        if agent.models.is_empty() {
            tracing::warn!("{}", crate::llm::registry::NO_MODEL_HELP);
        } else {
            tracing::info!(models = ?agent.models.keys(), "models configured");
        }
        let keepalive = (settings.server.keepalive_interval_secs > 0.0)
            .then(|| Duration::from_secs_f64(settings.server.keepalive_interval_secs));
        let state = AppState {
            agent,
            keepalive,
            body_limit: settings.server.body_limit_bytes,
            model_name_as_string: settings.compat.model_name_as_string,
        };
        let addr = format!("{}:{}", settings.server.host, settings.server.port);
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|source| StartupError::Bind { addr, source })?;
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        Ok(Application {
            listener,
            router: router(state),
            port,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves until SIGINT/SIGTERM, then stops accepting and lets running requests finish.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        tracing::info!(port = self.port, "triage listening");
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown_signal())
            .await
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}
