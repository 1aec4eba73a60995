//! `triage models` and `triage check`: what is configured, and whether it works.

use std::process::ExitCode;
use std::time::Duration;

use super::{EXIT_ERROR, EXIT_USAGE};
use crate::config::Settings;
use crate::llm::ModelRegistry;
use crate::llm::probe::probe;
use crate::llm::registry::NO_MODEL_HELP;
use crate::startup::{StartupError, build_agent};
use crate::tools::ToolsetStatus;

/// Each probe request gets this long: a healthy server answers a model list in milliseconds.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Configuration errors are usage errors (2); anything else failed at run time (1).
pub fn startup_exit(e: &StartupError) -> ExitCode {
    eprintln!("triage: {e}");
    match e {
        StartupError::Config(_)
        | StartupError::Prompt(_)
        | StartupError::Unprotected(_)
        | StartupError::Tls(_) => ExitCode::from(EXIT_USAGE),
        _ => ExitCode::from(EXIT_ERROR),
    }
}

/// The model keys, the default first and marked.
pub fn models(settings: &Settings) -> ExitCode {
    match ModelRegistry::from_settings(settings) {
        Ok(r) if r.is_empty() => {
            eprintln!("triage: {NO_MODEL_HELP}");
            ExitCode::from(EXIT_USAGE)
        }
        Ok(r) => {
            for key in r.keys() {
                if r.default_key() == Some(key.as_str()) {
                    println!("{key} (default)");
                } else {
                    println!("{key}");
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("triage: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Validates the configuration, calls each model once and reports models and toolsets. Fails
/// (1) when the default model does not answer, (2) when the configuration is unusable.
pub async fn check(settings: &Settings) -> ExitCode {
    // The wall the server would put around its port.
    let agent = match build_agent(settings, &[settings.server.port]).await {
        Ok(a) => a,
        Err(e) => return startup_exit(&e),
    };
    println!("configuration: ok");
    let models = agent.models.all();
    let mut default_failed = false;
    if models.is_empty() {
        println!("models: none\n  {NO_MODEL_HELP}");
    } else {
        // As the server's providers do: the system's roots and CERTIFICATE's.
        let roots = match settings.outbound_roots() {
            Ok(roots) => roots,
            Err(e) => {
                eprintln!("triage: {e}");
                return ExitCode::from(EXIT_ERROR);
            }
        };
        let http = match roots
            .client_builder()
            .connect_timeout(PROBE_TIMEOUT)
            .build()
        {
            Ok(h) => h,
            Err(e) => {
                eprintln!("triage: cannot build the HTTP client: {e}");
                return ExitCode::from(EXIT_ERROR);
            }
        };
        let results =
            futures::future::join_all(models.iter().map(|m| probe(&http, m, PROBE_TIMEOUT))).await;
        println!("models:");
        for (model, result) in models.iter().zip(&results) {
            let is_default = agent.models.default_key() == Some(model.key.as_str());
            default_failed |= is_default && !result.is_ok();
            println!(
                "  {}{} ({} at {}): {}",
                model.key,
                if is_default { " (default)" } else { "" },
                model.model_id,
                model.endpoint,
                result.describe(model)
            );
        }
    }
    if let Some(sandbox) = agent.tools.sandbox() {
        println!("sandbox: {}", sandbox.summary());
    }
    println!("toolsets:");
    for t in agent.tools.toolsets() {
        let status = match &t.status {
            ToolsetStatus::Enabled => format!("enabled ({} tools)", t.tools.len()),
            ToolsetStatus::Disabled => "disabled in config".to_owned(),
            ToolsetStatus::Unavailable(reason) => format!("unavailable: {reason}"),
        };
        println!("  {:<20} {status}", t.name);
    }
    if agent.tools.mcp().is_some() {
        println!("mcp servers:");
        for s in agent.tools.mcp_statuses() {
            let error = s
                .last_error
                .map(|e| format!(", last error: {e}"))
                .unwrap_or_default();
            let mut rejected = String::new();
            for (n, what) in [
                (s.rejected_tools.len(), "rejected"),
                (s.trimmed_tools.len(), "with a trimmed description"),
                (
                    s.withheld_tools.len(),
                    "left out by agent.max_tool_definitions_bytes",
                ),
            ] {
                if n > 0 {
                    rejected.push_str(&format!(", {n} tools {what}"));
                }
            }
            println!(
                "  {:<20} {} ({}, {} tools{rejected}{error})",
                s.name,
                serde_json::to_value(s.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                s.mode,
                s.tool_count
            );
        }
    }
    if models.is_empty() {
        ExitCode::from(EXIT_USAGE)
    } else if default_failed {
        ExitCode::from(EXIT_ERROR)
    } else {
        ExitCode::SUCCESS
    }
}
