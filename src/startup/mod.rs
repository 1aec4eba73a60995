//! Building the application from settings: the one seam tests and `main` share. `build` binds
//! the listener (port 0 in tests), so `port()` is known before serving starts.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::agent::{
    Agent, AgentOptions, CompactionOptions, CurrentAgent, ImageLimits, SecretMasker,
};
use crate::config::{ConfigError, Settings};
use crate::holmes::{ApprovalSigner, StatelessChat};
use crate::http::capacity::Capacity;
use crate::http::server::{Phase, ServeOptions, serve};
use crate::http::{
    ApiKeys, AppState, BrowserGuard, RequestLimit, SharedState, ShutdownWatch, router,
};
use crate::llm::{
    AnthropicClient, BedrockClient, GeminiClient, Llm, ModelRegistry, OpenAiClient, Transport,
};
use crate::prompt::{DisabledToolset, PromptInputs, Prompts, ToolsetPrompt};
use crate::sandbox::{Sandbox, SandboxError};
use crate::tools::{self, ToolsetStatus};

mod conversations;
mod credentials;
mod reload;
pub use reload::SettingsSource;
mod store_files;
mod toolsets;
use crate::runtime::install_crypto_provider;
use crate::runtime::memory::{protect_process_memory, release_unused};
use conversations::open_conversations;
use toolsets::{load_tools, own_files};

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Prompt(#[from] crate::prompt::PromptError),
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    #[error("conversation store: {0}")]
    Store(String),
    #[error("{0}")]
    Tls(String),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(
        "refusing to serve on {0} without an API key: set HOLMES_API_KEY (or server.api_keys), \
         bind to 127.0.0.1, or set HOLMES_UNSAFE_ALLOW_UNAUTHENTICATED=true \
         (TRIAGE_SERVER__ALLOW_UNAUTHENTICATED=true) to accept unauthenticated requests"
    )]
    Unprotected(String),
    #[error("cannot start the serving threads: {0}")]
    Threads(std::io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

/// Everything a request needs, built once: also used in-process by the CLI. `walled_ports` are
/// the ports triage listens on, which no tool process may reach (none for the CLI's own runs).
pub async fn build_agent(
    settings: &Settings,
    walled_ports: &[u16],
) -> Result<Arc<Agent>, StartupError> {
    install_crypto_provider();
    protect_process_memory();
    let models = Arc::new(ModelRegistry::from_settings(settings)?);
    // Masked from here on, start-up's own log lines (toolsets, MCP servers) included.
    let masker = log_masker(settings, &models);
    let warming = warm_tokenizers(&models);
    let (tools, prompts) = build_tools(settings, walled_ports).await?;
    // A panic while building an encoding would repeat, and be reported, on first use.
    let _ = warming.await;
    assemble(settings, models, tools, prompts, masker)
}

/// The masker of an agent over `models`, which every log line passes from now on.
fn log_masker(settings: &Settings, models: &ModelRegistry) -> Arc<SecretMasker> {
    let masker = Arc::new(
        SecretMasker::new(credentials::known_secrets(settings, models))
            .with_issued(models.issued().clone()),
    );
    crate::telemetry::mask_logs(&masker);
    masker
}

/// Builds the encodings the configured models use now, so the first request does not pay
/// for it; an encoding no model uses (tens of MiB) is never loaded. About 100 ms of CPU,
/// spent while the toolsets' start-up checks wait on their processes.
fn warm_tokenizers(models: &ModelRegistry) -> tokio::task::JoinHandle<()> {
    let tokenizers: std::collections::HashSet<_> =
        models.all().iter().map(|model| model.tokenizer).collect();
    tokio::task::spawn_blocking(move || {
        for tokenizer in tokenizers {
            tokenizer.count("warm up");
        }
    })
}

/// The tools (in their sandbox, MCP servers started) and the prompts that describe them.
async fn build_tools(
    settings: &Settings,
    walled_ports: &[u16],
) -> Result<(Arc<crate::tools::ToolRegistry>, Arc<Prompts>), StartupError> {
    let sandbox = Sandbox::new(&settings.sandbox, &own_files(settings), walled_ports)?;
    sandbox.log_summary();
    // Every outbound client trusts these besides the system's roots (CERTIFICATE).
    let roots = settings.outbound_roots()?;
    let mut tools = load_tools(settings, &sandbox, &roots).await?;
    let mut mcp_prompts = Vec::new();
    if !settings.mcp_servers.is_empty() {
        let started = Instant::now();
        let hub = tools::mcp::McpHub::start(&settings.mcp_servers, &sandbox, &roots)?;
        // Slow servers join when they are ready: start-up waits only briefly.
        hub.wait_for_first_attempts(tools::mcp::STARTUP_WAIT).await;
        mcp_prompts = hub.prompt_sections();
        tools = tools.with_mcp(hub);
        // After the cap on all definitions has had its say (it logs what it left out).
        for s in tools.mcp_statuses() {
            tracing::info!(mcp_server = %s.name, status = ?s.status, tools = s.tool_count,
                waited_ms = started.elapsed().as_millis() as u64, "MCP server at start-up");
        }
    }
    let tools = tools.with_sandbox(sandbox);
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
            .chain(
                mcp_prompts
                    .into_iter()
                    .map(|(name, instructions)| ToolsetPrompt { name, instructions }),
            )
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
    Ok((Arc::new(tools), Arc::new(prompts)))
}

/// An agent from its parts: the LLM client and the options are built from `settings` here.
fn assemble(
    settings: &Settings,
    models: Arc<ModelRegistry>,
    tools: Arc<crate::tools::ToolRegistry>,
    prompts: Arc<Prompts>,
    masker: Arc<SecretMasker>,
) -> Result<Arc<Agent>, StartupError> {
    let transport = Transport::new(&settings.llm, &settings.outbound_roots()?)?;
    let timeouts = transport.timeouts();
    let llm = Llm::new(
        Arc::new(OpenAiClient::new(transport.clone())),
        timeouts.request,
        timeouts.first_byte,
    )
    .with_anthropic(Arc::new(AnthropicClient::new(transport.clone())))
    .with_gemini(Arc::new(GeminiClient::new(transport.clone())))
    .with_bedrock(Arc::new(BedrockClient::new(transport)));
    let a = &settings.agent;
    Ok(Arc::new(Agent {
        models,
        llm,
        prompts,
        tools,
        options: AgentOptions {
            max_steps: a.max_steps,
            tool_budget_pct: a.tool_budget_pct,
            tool_budget_tokens: a.tool_budget_tokens,
            duplicate_call_guard: a.duplicate_call_guard,
            max_tool_calls_per_answer: a.max_tool_calls_per_answer,
            images: ImageLimits {
                per_request: a.max_images_per_request,
                total: a.max_images_total,
                bytes_total: a.max_image_bytes_total,
            },
        },
        masker,
        compaction: CompactionOptions {
            enabled: settings.compaction.enabled,
            threshold_pct: settings.compaction.threshold_pct,
        },
    }))
}

/// The stateless `/api/chat` front door over the serving agent, with the approval signing key.
pub fn stateless_chat(settings: &Settings, agent: Arc<CurrentAgent>) -> Arc<StatelessChat> {
    let signer = ApprovalSigner::new(
        settings.approvals.signing_key.as_deref(),
        settings.approvals.token_ttl_secs,
    );
    Arc::new(StatelessChat::new(agent, signer))
}

pub struct Application {
    listener: TcpListener,
    router: axum::Router,
    port: u16,
    serve: ServeOptions,
    phase: watch::Sender<Phase>,
}

impl Application {
    /// An application whose admin reload (when on) builds from these same settings again:
    /// the files they name (the model list, skills) are read anew, the settings themselves
    /// are not. `main` reads them from their files and the environment: `build_with_source`.
    pub async fn build(settings: Settings) -> Result<Application, StartupError> {
        let again = settings.clone();
        Application::build_with_source(settings, Box::new(move || Ok(again.clone()))).await
    }

    /// An application whose admin reload takes its settings from `source`.
    pub async fn build_with_source(
        settings: Settings,
        source: SettingsSource,
    ) -> Result<Application, StartupError> {
        let server = &settings.server;
        let keys = server.all_api_keys();
        check_exposure(&server.host, !keys.is_empty(), server.allow_unauthenticated)?;
        let in_a_pod = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
        if let Some(warning) = loopback_in_a_pod(&server.host, in_a_pod) {
            tracing::warn!("{warning}");
        }
        let tls = crate::http::tls::acceptor(server).map_err(StartupError::Tls)?;
        // Bound first: the tools' sandbox walls its port off before any tool process starts.
        let addr = format!("{}:{}", server.host, server.port);
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|source| StartupError::Bind { addr, source })?;
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let agent = build_agent(&settings, &[port]).await?;
        let peer_check = match agent.tools.sandbox() {
            Some(sandbox) => {
                sandbox.wall_ready().await;
                sandbox.peer_check()
            }
            None => None,
        };
        if settings.approvals.signing_key.is_none() {
            tracing::warn!(
                "no approval signing key configured (approvals.signing_key or \
                 HOLMES_APPROVAL_SIGNING_KEY): using a random per-process key, so a paused \
                 approval can only be resumed by this process"
            );
        }
        if agent.models.is_empty() {
            tracing::warn!("{}", crate::llm::registry::NO_MODEL_HELP);
        }
        // Which endpoint each model really calls, so a missing api_base is seen at once.
        for model in agent.models.all() {
            tracing::info!(
                model = %model.key,
                default = agent.models.default_key() == Some(model.key.as_str()),
                id = %model.model_id,
                endpoint = %model.endpoint,
                "model configured"
            );
        }
        let serving = CurrentAgent::new(agent);
        let conversations = open_conversations(&settings, serving.clone()).await?;
        let checks = crate::checks::Checks::new(
            serving.clone(),
            &settings.checks,
            &settings.outbound_roots()?,
            &settings.prompts.cluster_name,
        )?;
        let admin = settings.admin.enabled.then(|| {
            Arc::new(reload::Reloader::new(serving.clone(), source, vec![port]))
                as Arc<dyn crate::http::admin::Reload>
        });
        let _ = crate::meters::recorder();
        let (phase, phase_rx) = watch::channel(Phase::Running);
        let capacity = start_capacity(server);
        let secs = Duration::from_secs_f64;
        let state = AppState::new(SharedState {
            chat: stateless_chat(&settings, serving.clone()),
            inbound: crate::inbound::Inbound::new(conversations.clone()),
            conversations,
            a2a: Arc::new(settings.a2a.clone()),
            serving,
            checks: Arc::new(checks),
            admin,
            keepalive: (server.keepalive_interval_secs > 0.0)
                .then(|| secs(server.keepalive_interval_secs)),
            body_limit: server.body_limit_bytes,
            body_read_timeout: secs(server.body_read_timeout_secs),
            stall_watch: crate::http::StallWatch::new(secs(server.write_timeout_secs)),
            model_name_as_string: settings.compat.model_name_as_string,
            api_keys: ApiKeys::new(&keys),
            limit: RequestLimit::new(server.max_concurrent_requests, capacity.clone()),
            deadline: secs(server.request_deadline_secs),
            shutdown: ShutdownWatch(phase_rx),
            started: Instant::now(),
            cors_allowed_origins: server.cors_allowed_origins.clone(),
            browser_guard: Arc::new(BrowserGuard::new(
                &server.cors_allowed_origins,
                &server.allowed_hosts,
                !keys.is_empty(),
            )),
            // triage's own credentials never reach a tool, whatever the configured list says.
            blocked_headers: Arc::new(
                server
                    .passthrough_blocked_headers
                    .split(',')
                    .map(|h| h.trim().to_ascii_lowercase())
                    .filter(|h| !h.is_empty())
                    .chain(["x-api-key".to_owned(), "authorization".to_owned()])
                    .collect(),
            ),
        });
        let shards =
            crate::runtime::shards::Shards::start(crate::runtime::allocator::on_worker_park)
                .map_err(StartupError::Threads)?;
        release_unused();
        Ok(Application {
            listener,
            router: router(state),
            port,
            serve: ServeOptions {
                tls,
                header_read_timeout: secs(server.header_read_timeout_secs),
                write_timeout: secs(server.write_timeout_secs),
                grace: secs(server.shutdown_grace_secs),
                capacity,
                shards,
                peer_check,
            },
            phase,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves until SIGINT/SIGTERM, then shuts down gracefully.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.run_until(shutdown_signal()).await
    }

    /// Serves until `signal` resolves, then shuts down gracefully.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> std::io::Result<()> {
        tracing::info!(
            port = self.port,
            tls = self.serve.tls.is_some(),
            "triage listening"
        );
        serve(self.listener, self.router, self.serve, self.phase, signal).await
    }
}

/// Raises the descriptor limit, then watches memory and descriptors for load shedding.
fn start_capacity(server: &crate::config::ServerSettings) -> Arc<Capacity> {
    if let Some((before, now, hard)) = crate::http::capacity::raise_descriptor_limit() {
        tracing::info!(
            soft_before = before,
            soft = now,
            hard,
            "open files limit (RLIMIT_NOFILE)"
        );
    }
    let capacity = Arc::new(Capacity::new(
        server.memory_budget_bytes,
        server.descriptor_reserve,
    ));
    Capacity::start_sampling(&capacity);
    capacity
}

/// Fail closed: no API key on an address others can reach is refused unless explicitly allowed.
fn check_exposure(
    host: &str,
    has_keys: bool,
    allow_unauthenticated: bool,
) -> Result<(), StartupError> {
    let loopback = matches!(host, "localhost" | "127.0.0.1" | "::1" | "[::1]")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if has_keys || loopback || allow_unauthenticated {
        if !has_keys && !loopback {
            tracing::warn!(
                host,
                "serving without authentication on a non-loopback address"
            );
        }
        return Ok(());
    }
    Err(StartupError::Unprotected(host.to_owned()))
}

/// HolmesGPT listens on 0.0.0.0 by default, triage on loopback: in a pod that address is out of
/// reach of the Service and the kubelet's probes, which a deployment copied from HolmesGPT's
/// (no HOLMES_HOST) would only see as failing probes.
fn loopback_in_a_pod(host: &str, in_a_pod: bool) -> Option<String> {
    let loopback = matches!(host, "localhost" | "127.0.0.1" | "::1" | "[::1]");
    (in_a_pod && loopback).then(|| {
        format!(
            "listening on {host} in a Kubernetes pod: the Service and the probes cannot reach \
             it; set HOLMES_HOST=0.0.0.0 (HolmesGPT's default) with an API key"
        )
    })
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
    tracing::info!("shutdown signal received");
}

#[cfg(test)]
mod tests {
    use super::toolsets::bash_settings;
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_is_not_dumpable() {
        protect_process_memory();
        // SAFETY: PR_GET_DUMPABLE only reads the flag.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_DUMPABLE) }, 0);
    }

    #[test]
    fn triages_own_files_are_sensitive_for_bash() {
        let mut settings = Settings::from_toml(
            "model_list_file = \"/etc/triage/models.yaml\"\n[server]\ntls_cert_file = \
             \"/etc/triage/tls.crt\"\ntls_key_file = \"/etc/triage/tls.key\"\n\
             [toolsets.kubernetes]\nkubeconfig = \"/etc/triage/kubeconfig\"\n",
        )
        .expect("settings");
        settings.config_file = Some("/etc/triage/config.toml".into());
        let sensitive = bash_settings(&settings).sensitive_paths;
        for path in [
            "/etc/triage/config.toml",
            "/etc/triage/models.yaml",
            "/etc/triage/tls.crt",
            "/etc/triage/tls.key",
            "/etc/triage/kubeconfig",
        ] {
            assert!(
                sensitive.contains(&path.to_owned()),
                "{path}: {sensitive:?}"
            );
        }
    }

    #[test]
    fn loopback_in_a_pod_is_named() {
        let warning = loopback_in_a_pod("127.0.0.1", true).expect("a warning");
        assert!(warning.contains("HOLMES_HOST=0.0.0.0"), "{warning}");
        assert_eq!(loopback_in_a_pod("127.0.0.1", false), None);
        assert_eq!(loopback_in_a_pod("0.0.0.0", true), None);
    }

    #[test]
    fn refuses_open_unauthenticated_servers() {
        assert!(check_exposure("127.0.0.1", false, false).is_ok());
        assert!(check_exposure("::1", false, false).is_ok());
        assert!(check_exposure("0.0.0.0", true, false).is_ok());
        assert!(check_exposure("0.0.0.0", false, true).is_ok());
        let err = check_exposure("0.0.0.0", false, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("HOLMES_UNSAFE_ALLOW_UNAUTHENTICATED=true"),
            "{err}"
        );
    }
}
