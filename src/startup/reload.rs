//! The admin reload (`http/admin.rs` calls it through `Reload`): settings read again from
//! their source, the part asked for rebuilt as at start-up, and a new agent made of it and the
//! parts kept, swapped in whole. Until the swap nothing serving changes, so a file that does
//! not read or a model that does not build leaves the old agent serving, and the error is the
//! answer. Requests and runs in flight keep the agent they took.
//!
//! What a reload rebuilds: models (`[models]`, the model list file, the env model), toolsets
//! (built-in, YAML, MCP servers, skills, the sandbox they run in) and the prompts that name
//! them, the agent's options and LLM client settings. Server settings (address, keys, TLS),
//! the store and webhooks need a restart.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{StartupError, assemble, build_tools, log_masker, warm_tokenizers};
use crate::agent::{Agent, CurrentAgent};
use crate::config::{ConfigError, Settings};
use crate::http::admin::{Reload, ReloadFuture, ReloadReport, ReloadScope};
use crate::llm::ModelRegistry;
use crate::tools::ToolsetStatus;

/// Where a reload reads its settings: `Settings::load` for `serve`, the same settings for an
/// application built from values.
pub type SettingsSource = Box<dyn Fn() -> Result<Settings, ConfigError> + Send + Sync>;

pub struct Reloader(Arc<Rebuild>);

struct Rebuild {
    serving: Arc<CurrentAgent>,
    source: SettingsSource,
    walled_ports: Vec<u16>,
    /// One reload at a time: two would each build from the agent serving before either swap.
    /// Taken before the blocking thread a reload runs on, so reloads queued behind one hold
    /// no thread of the blocking pool (which DNS lookups and file reads also need).
    one_at_a_time: Arc<tokio::sync::Mutex<()>>,
    /// The runtime start-up built on: the MCP supervisors and the sandbox's tasks a rebuild
    /// starts belong on it, as those of start-up do, not on the serving thread of a request.
    main: tokio::runtime::Handle,
}

impl Reloader {
    /// Called on the runtime start-up runs on.
    pub fn new(
        serving: Arc<CurrentAgent>,
        source: SettingsSource,
        walled_ports: Vec<u16>,
    ) -> Reloader {
        Reloader(Arc::new(Rebuild {
            serving,
            source,
            walled_ports,
            one_at_a_time: Arc::new(tokio::sync::Mutex::new(())),
            main: tokio::runtime::Handle::current(),
        }))
    }
}

impl Rebuild {
    async fn rebuild(&self, scope: ReloadScope) -> Result<ReloadReport, StartupError> {
        let settings = (self.source)()?;
        let old = self.serving.current();
        let models = match scope {
            ReloadScope::Toolsets => old.models.clone(),
            ReloadScope::All | ReloadScope::Models => {
                Arc::new(ModelRegistry::from_settings(&settings)?)
            }
        };
        let masker = log_masker(&settings, &models);
        let warming = warm_tokenizers(&models);
        let (tools, prompts) = match scope {
            ReloadScope::Models => (old.tools.clone(), old.prompts.clone()),
            ReloadScope::All | ReloadScope::Toolsets => {
                let (tools, prompts) = build_tools(&settings, &self.walled_ports).await?;
                if let Some(sandbox) = tools.sandbox() {
                    sandbox.wall_ready().await;
                }
                (tools, prompts)
            }
        };
        let _ = warming.await;
        let agent = assemble(&settings, models, tools, prompts, masker)?;
        let counts = counts(&agent);
        let detail = match scope {
            ReloadScope::All => "models and toolsets reloaded",
            ReloadScope::Toolsets => "toolsets reloaded",
            ReloadScope::Models => "models reloaded",
        };
        if agent.models.is_empty() {
            tracing::warn!("{}", crate::llm::registry::NO_MODEL_HELP);
        }
        self.serving.replace(agent);
        Ok(ReloadReport {
            detail: detail.to_owned(),
            counts,
        })
    }
}

impl Reload for Reloader {
    fn reload(&self, scope: ReloadScope) -> ReloadFuture<'_> {
        let rebuild = self.0.clone();
        Box::pin(async move {
            let only = rebuild.one_at_a_time.clone().lock_owned().await;
            // Building toolsets holds values that are not `Send` across its waits (as start-up
            // may), so it runs to its end on a blocking thread of the main runtime.
            let main = rebuild.main.clone();
            let done = main.spawn_blocking(move || {
                let _only = only;
                let main = rebuild.main.clone();
                main.block_on(async move {
                    rebuild
                        .rebuild(scope)
                        .await
                        .map_err(|e| crate::secrets::without_quoted_values(&e.to_string()))
                })
            });
            done.await.map_err(|e| format!("the reload stopped: {e}"))?
        })
    }
}

/// What serves after the reload.
fn counts(agent: &Agent) -> BTreeMap<String, u64> {
    let enabled: Vec<_> = agent
        .tools
        .toolsets()
        .iter()
        .filter(|t| t.status == ToolsetStatus::Enabled)
        .collect();
    BTreeMap::from([
        ("models".to_owned(), agent.models.keys().len() as u64),
        ("toolsets".to_owned(), enabled.len() as u64),
        (
            "tools".to_owned(),
            enabled.iter().map(|t| t.tools.len() as u64).sum(),
        ),
    ])
}
