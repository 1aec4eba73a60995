//! Loading settings: the compiled-in defaults, then a file, then the environment, layered by
//! figment; then the values serde cannot check.

use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Toml};

use super::env::{CLI_ONLY_VARS, HOLMES_ENV, check_env_model_vars, env_hint};
use super::{ConfigError, HolmesFiles, Settings};

const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

impl Settings {
    /// Loads settings from the layers above. `file` is `--config`; `TRIAGE_CONFIG` is its
    /// fallback.
    pub fn load(file: Option<&Path>) -> Result<Settings, ConfigError> {
        let mut figment = Figment::from(Toml::string(DEFAULT_TOML));
        // HolmesGPT's files sit below triage's own: a key set in both is triage's.
        let (holmes_layers, holmes_report) = super::holmes::read(&HolmesFiles::from_env())?;
        for layer in holmes_layers {
            figment = figment.merge(layer);
        }
        let file = file
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("TRIAGE_CONFIG").map(PathBuf::from));
        let mut model_order = Vec::new();
        if let Some(path) = &file {
            if !path.is_file() {
                return Err(ConfigError::Invalid(format!(
                    "config file {} does not exist",
                    path.display()
                )));
            }
            if let Ok(text) = std::fs::read_to_string(path) {
                model_order = models_in_file_order(&[&text]);
            }
            figment = figment.merge(Toml::file(path));
        }
        check_env_model_vars()?;
        let holmes = Env::raw()
            // An empty variable means "unset" in HolmesGPT's deployments (Helm renders them).
            .filter_map(|key| {
                HOLMES_ENV
                    .iter()
                    .find(|(var, _)| key.as_str().eq_ignore_ascii_case(var))
                    .filter(|(var, _)| std::env::var(var).is_ok_and(|v| !v.trim().is_empty()))
                    .map(|(_, path)| (*path).into())
            })
            .lowercase(false);
        figment = figment
            .merge(holmes)
            // TRIAGE_CONFIG and TRIAGE_API_KEY (the CLI's `--api-key`) are not settings.
            .merge(Env::prefixed("TRIAGE_").ignore(CLI_ONLY_VARS).split("__"));
        let mut settings: Settings = figment.extract().map_err(|e| {
            let message = super::without_values(e).to_string();
            ConfigError::Invalid(format!("{message}{}", env_hint(&message)))
        })?;
        settings.model_order = model_order;
        settings.holmes = holmes_report;
        super::webhooks::name_unnamed(&mut settings.webhooks);
        settings.validate()?;
        settings.config_file = file;
        Ok(settings)
    }

    /// Parses settings from TOML text layered on the defaults (tests and tools).
    pub fn from_toml(text: &str) -> Result<Settings, ConfigError> {
        Settings::from_toml_layers(&[text])
    }

    /// Like `from_toml`, with several layers, later ones winning key by key.
    pub fn from_toml_layers(layers: &[&str]) -> Result<Settings, ConfigError> {
        Settings::from_holmes_and_toml(&HolmesFiles::default(), layers)
    }

    /// HolmesGPT's files `holmes` names, then TOML layers (tests: no environment is read).
    pub fn from_holmes_and_toml(
        holmes: &HolmesFiles,
        layers: &[&str],
    ) -> Result<Settings, ConfigError> {
        let (holmes_layers, holmes_report) = super::holmes::read(holmes)?;
        let figment = holmes_layers
            .into_iter()
            .fold(Figment::from(Toml::string(DEFAULT_TOML)), Figment::merge);
        let figment = layers
            .iter()
            .fold(figment, |f, layer| f.merge(Toml::string(layer)));
        let mut settings: Settings = figment.extract()?;
        settings.holmes = holmes_report;
        settings.model_order = models_in_file_order(layers);
        super::webhooks::name_unnamed(&mut settings.webhooks);
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.checks.validate().map_err(ConfigError::Invalid)?;
        self.a2a.validate().map_err(ConfigError::Invalid)?;
        let positive = [
            ("llm.request_timeout_secs", self.llm.request_timeout_secs),
            ("llm.connect_timeout_secs", self.llm.connect_timeout_secs),
            (
                "llm.first_byte_timeout_secs",
                self.llm.first_byte_timeout_secs,
            ),
            ("llm.idle_timeout_secs", self.llm.idle_timeout_secs),
            ("conversations.lease_secs", self.conversations.lease_secs),
        ];
        for (key, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(ConfigError::Invalid(format!(
                    "`{key}` must be a positive number of seconds, got {value}"
                )));
            }
        }
        for (key, value) in [
            (
                "server.request_deadline_secs",
                self.server.request_deadline_secs,
            ),
            (
                "server.header_read_timeout_secs",
                self.server.header_read_timeout_secs,
            ),
            (
                "server.body_read_timeout_secs",
                self.server.body_read_timeout_secs,
            ),
            ("server.write_timeout_secs", self.server.write_timeout_secs),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ConfigError::Invalid(format!(
                    "`{key}` must be a positive number of seconds, got {value}"
                )));
            }
        }
        if !(self.server.shutdown_grace_secs.is_finite() && self.server.shutdown_grace_secs >= 0.0)
        {
            return Err(ConfigError::Invalid(
                "`server.shutdown_grace_secs` must be 0 or positive".into(),
            ));
        }
        if let Some(bad) = self
            .server
            .allowed_hosts
            .iter()
            .find(|h| h.trim().is_empty() || h.contains('/'))
        {
            return Err(ConfigError::Invalid(format!(
                "`server.allowed_hosts` lists host names (`name` or `name:port`, no scheme or path), got '{bad}'"
            )));
        }
        if self.llm.max_concurrent_calls_per_model == Some(0) {
            return Err(ConfigError::Invalid(
                "`llm.max_concurrent_calls_per_model` must be at least 1".into(),
            ));
        }
        if self.conversations.max_running == 0 {
            return Err(ConfigError::Invalid(
                "`conversations.max_running` must be at least 1".into(),
            ));
        }
        if self.conversations.max_events_per_conversation == 0 {
            return Err(ConfigError::Invalid(
                "`conversations.max_events_per_conversation` must be at least 1".into(),
            ));
        }
        if let Some(url) = &self.conversations.database_url
            && !url.trim().is_empty()
            && !["sqlite:", "postgres://", "postgresql://"]
                .iter()
                .any(|scheme| url.trim().starts_with(scheme))
        {
            return Err(ConfigError::Invalid(
                "`conversations.database_url` must start with sqlite: or postgres://".into(),
            ));
        }
        // An empty key is unset (a Helm chart renders unset values empty).
        let current = self
            .conversations
            .secret_key
            .iter()
            .filter(|k| !k.trim().is_empty());
        let previous = self.conversations.previous_secret_keys.iter().enumerate();
        let keys = current.map(|k| (k, "secret_key".to_owned()));
        for (key, name) in
            keys.chain(previous.map(|(i, k)| (k, format!("previous_secret_keys[{i}]"))))
        {
            // The key itself never appears in the message.
            if let Err(why) = super::keys::parse_key(key) {
                return Err(ConfigError::Invalid(format!(
                    "`conversations.{name}` {why}"
                )));
            }
        }
        if self.server.max_concurrent_requests == Some(0) {
            return Err(ConfigError::Invalid(
                "`server.max_concurrent_requests` must be at least 1".into(),
            ));
        }
        if self.server.tls_cert_file.is_some() != self.server.tls_key_file.is_some() {
            return Err(ConfigError::Invalid(
                "TLS needs both `server.tls_cert_file` and `server.tls_key_file` (HOLMES_SSL_CERTFILE / HOLMES_SSL_KEYFILE)".into(),
            ));
        }
        // As HolmesGPT: without a certificate these would leave the server on plain HTTP.
        let password_set = self
            .server
            .tls_key_password
            .as_deref()
            .is_some_and(|p| !p.is_empty());
        for (set, key) in [
            (
                password_set,
                "`server.tls_key_password` (HOLMES_SSL_KEYFILE_PASSWORD)",
            ),
            (
                self.server.tls_client_ca_file.is_some(),
                "`server.tls_client_ca_file` (HOLMES_SSL_CA_CERTS)",
            ),
        ] {
            if set && self.server.tls_cert_file.is_none() {
                return Err(ConfigError::Invalid(format!(
                    "{key} is set but TLS is not: set `server.tls_cert_file` and \
                     `server.tls_key_file` (HOLMES_SSL_CERTFILE / HOLMES_SSL_KEYFILE) too"
                )));
            }
        }
        self.outbound_roots()?;
        let keepalive = self.server.keepalive_interval_secs;
        if !(keepalive.is_finite() && keepalive >= 0.0) {
            return Err(ConfigError::Invalid(format!(
                "`server.keepalive_interval_secs` must be 0 (off) or positive, got {keepalive}"
            )));
        }
        let pct = self.agent.tool_budget_pct;
        if !(pct.is_finite() && pct > 0.0 && pct <= 100.0) {
            return Err(ConfigError::Invalid(format!(
                "`agent.tool_budget_pct` (TOOL_MAX_ALLOCATED_CONTEXT_WINDOW_PCT) must be in (0, 100], got {pct}"
            )));
        }
        if !(1..=100).contains(&self.compaction.threshold_pct) {
            return Err(ConfigError::Invalid(format!(
                "`compaction.threshold_pct` (CONTEXT_WINDOW_COMPACTION_THRESHOLD_PCT) must be 1..=100, got {}",
                self.compaction.threshold_pct
            )));
        }
        for (key, value) in [
            (
                "agent.max_tool_calls_per_answer",
                self.agent.max_tool_calls_per_answer,
            ),
            (
                "agent.max_images_per_request",
                self.agent.max_images_per_request,
            ),
            ("agent.max_images_total", self.agent.max_images_total),
            (
                "agent.max_image_bytes_total",
                self.agent.max_image_bytes_total,
            ),
            (
                "agent.max_tool_definitions_bytes",
                self.agent.max_tool_definitions_bytes,
            ),
            (
                "approvals.token_ttl_secs",
                self.approvals.token_ttl_secs as usize,
            ),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid(format!("`{key}` must be at least 1")));
            }
        }
        if self.agent.max_steps == 0 {
            return Err(ConfigError::Invalid(
                "`agent.max_steps` (MAX_STEPS) must be at least 1".into(),
            ));
        }
        if !(self.llm.retry_max_elapsed_secs.is_finite() && self.llm.retry_max_elapsed_secs >= 0.0)
        {
            return Err(ConfigError::Invalid(
                "`llm.retry_max_elapsed_secs` must be 0 or positive".into(),
            ));
        }
        super::webhooks::validate(&self.webhooks).map_err(ConfigError::Invalid)?;
        for (name, server) in &self.mcp_servers {
            server.check(name).map_err(ConfigError::Invalid)?;
        }
        for (key, entry) in &self.models {
            if entry.model.trim().is_empty() {
                return Err(ConfigError::Invalid(format!(
                    "`models.{key}.model` must name a model"
                )));
            }
            super::entry_keys::check_extra_keys(&format!("[models.{key}]"), &entry.extra)
                .map_err(ConfigError::Invalid)?;
        }
        Ok(())
    }
}

/// The `[models.*]` keys of TOML layers in the order they are written, first mention winning.
/// figment's maps are sorted, so the order is read from the text itself.
fn models_in_file_order(layers: &[&str]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for layer in layers {
        let Ok(table) = layer.parse::<toml::Table>() else {
            continue;
        };
        if let Some(models) = table.get("models").and_then(toml::Value::as_table) {
            for key in models.keys() {
                if !order.contains(key) {
                    order.push(key.clone());
                }
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        let s = Settings::from_toml("").unwrap();
        assert_eq!(s.server.port, 5050);
        assert_eq!(s.agent.max_steps, 40);
        assert!(s.models.is_empty());
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Settings::from_toml("[server]\nprot = 1\n").unwrap_err();
        assert!(err.to_string().contains("prot"), "{err}");
    }

    /// A secret written in the wrong shape is named by its key, never quoted.
    #[test]
    fn type_errors_do_not_quote_the_value() {
        for (toml, key) in [
            (
                "[mcp_servers.x]\nurl = \"http://h/mcp\"\n[mcp_servers.x.config]\nheaders = \"Bearer sk-LEAK1\"\n",
                "mcp_servers.x.config.headers",
            ),
            ("[server]\napi_keys = \"sk-LEAK2\"\n", "server.api_keys"),
        ] {
            let err = Settings::from_toml(toml).unwrap_err().to_string();
            assert!(err.contains(key) && !err.contains("sk-LEAK"), "{err}");
        }
    }

    #[test]
    fn allowed_hosts_are_names() {
        let err = Settings::from_toml("[server]\nallowed_hosts = [\"https://triage.example\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("server.allowed_hosts") && err.contains("https://triage.example"),
            "{err}"
        );
        assert!(
            Settings::from_toml("[server]\nallowed_hosts = [\"triage.example:8080\"]\n").is_ok()
        );
    }

    #[test]
    fn half_a_tls_configuration_is_refused() {
        for half in [
            "[server]\ntls_cert_file = \"/etc/tls.crt\"\n",
            "[server]\ntls_key_file = \"/etc/tls.key\"\n",
        ] {
            let err = Settings::from_toml(half).unwrap_err().to_string();
            assert!(
                err.contains("TLS needs both `server.tls_cert_file` and `server.tls_key_file`"),
                "{half}: {err}"
            );
        }
    }

    /// As HolmesGPT: a key password or a client CA without a certificate would serve plain
    /// HTTP while the operator believes TLS is on.
    #[test]
    fn tls_extras_without_tls_are_refused() {
        for (extra, key) in [
            ("tls_key_password = \"p\"", "HOLMES_SSL_KEYFILE_PASSWORD"),
            (
                "tls_client_ca_file = \"/etc/ca.crt\"",
                "HOLMES_SSL_CA_CERTS",
            ),
        ] {
            let err = Settings::from_toml(&format!("[server]\n{extra}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(key) && err.contains("HOLMES_SSL_CERTFILE"),
                "{err}"
            );
        }
        assert!(Settings::from_toml("[server]\ntls_key_password = \"\"\n").is_ok());
    }

    #[test]
    fn model_order_is_the_file_order() {
        let s = Settings::from_toml_layers(&[
            "[models.zeta]\nmodel = \"openai/z\"\n[models.alpha]\nmodel = \"openai/a\"\n",
            "[models.beta]\nmodel = \"openai/b\"\n[models.zeta]\ntemperature = 0.1\n",
        ])
        .unwrap();
        assert_eq!(s.model_order, ["zeta", "alpha", "beta"]);
    }

    #[test]
    fn model_entry_typos_are_refused() {
        let err = Settings::from_toml("[models.x]\nmodel = \"openai/m\"\napi_bse = \"http://h\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`api_bse`") && err.contains("[models.x]"),
            "{err}"
        );
    }

    #[test]
    fn model_entries_keep_extra_fields() {
        let s = Settings::from_toml(
            "[models.a]\nmodel = \"openai/x\"\nbase_url = \"http://h/v1\"\ntop_p = 0.5\n",
        )
        .unwrap();
        let a = &s.models["a"];
        assert_eq!(a.api_base.as_deref(), Some("http://h/v1"));
        assert_eq!(a.extra["top_p"], serde_json::json!(0.5));
    }
}
