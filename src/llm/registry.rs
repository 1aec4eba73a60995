//! The model registry: configured model keys resolved to provider endpoints, context windows
//! and output budgets, once at start-up.

use std::sync::Arc;

use serde_json::Value;

use crate::config::{ConfigError, ModelEntry, Settings};
use crate::context::tokens::Tokenizer;
use crate::secrets::IssuedSecrets;

/// Model used when nothing is configured but `OPENAI_API_KEY` is set.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1";
const FALLBACK_CONTEXT_WINDOW: u32 = 200_000;
const OPENAI_API_BASE: &str = "https://api.openai.com/v1";

/// Where `openai/` models without an `api_base` go instead of OpenAI: the variables the OpenAI
/// SDK and LiteLLM (HolmesGPT) read, in LiteLLM's order.
const OPENAI_BASE_VARS: &[&str] = &["OPENAI_API_BASE", "OPENAI_BASE_URL"];

use super::model::{Api, Auth, ModelConfig};

#[derive(Debug, Default)]
pub struct ModelRegistry {
    models: Vec<Arc<ModelConfig>>,
    default_index: usize,
    /// Where the models' providers record the credentials they obtain at run time (Google
    /// tokens, AWS session keys): this application's, for its maskers.
    issued: IssuedSecrets,
}

impl ModelRegistry {
    pub fn from_settings(settings: &Settings) -> Result<ModelRegistry, ConfigError> {
        let mut entries: Vec<(String, ModelEntry)> = settings
            .models
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // File order, not the map's alphabetical one: the first entry is the default.
        entries.sort_by_key(|(k, _)| {
            settings
                .model_order
                .iter()
                .position(|o| o == k)
                .unwrap_or(usize::MAX)
        });
        if let Some(path) = &settings.model_list_file {
            for (key, entry) in load_model_list(path)? {
                if !entries.iter().any(|(k, _)| *k == key) {
                    entries.push((key, entry));
                }
            }
        }
        let mut default_key = settings.default_model.clone();
        if let Some(env_model) = &settings.env_model {
            let key = env_model.model.clone();
            if !entries.iter().any(|(k, _)| *k == key) {
                entries.push((key.clone(), env_model.clone()));
            }
            default_key.get_or_insert(key);
        }
        if entries.is_empty() && std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.is_empty()) {
            entries.push((
                DEFAULT_OPENAI_MODEL.to_owned(),
                ModelEntry {
                    model: format!("openai/{DEFAULT_OPENAI_MODEL}"),
                    ..ModelEntry::default()
                },
            ));
        }
        let defaults = super::params::EnvDefaults::read()?;
        let issued = IssuedSecrets::default();
        let models = entries
            .into_iter()
            .map(|(key, entry)| {
                let fallbacks = entry.fallbacks.clone();
                resolve(&key, &entry, settings, &defaults, &issued).map(|m| (m, fallbacks))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let models = super::fallbacks::link(models)?;
        let default_index = match default_key {
            Some(key) => models.iter().position(|m| m.key == key).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "`default_model` names an unknown model key '{key}'"
                ))
            })?,
            None => 0,
        };
        Ok(ModelRegistry {
            models,
            default_index,
            issued,
        })
    }

    /// The credentials the models' providers obtained so far, and will obtain.
    pub fn issued(&self) -> &IssuedSecrets {
        &self.issued
    }

    /// Every model, the default first, then in configuration order.
    fn in_order(&self) -> impl Iterator<Item = &Arc<ModelConfig>> {
        let rest = self
            .models
            .iter()
            .enumerate()
            .filter(move |(i, _)| *i != self.default_index)
            .map(|(_, m)| m);
        self.models.get(self.default_index).into_iter().chain(rest)
    }

    /// Every model key, the default first, then in configuration order.
    pub fn keys(&self) -> Vec<String> {
        self.in_order().map(|m| m.key.clone()).collect()
    }

    /// Every model, in the order of `keys`.
    pub fn all(&self) -> Vec<Arc<ModelConfig>> {
        self.in_order().cloned().collect()
    }

    /// The model a request without `model` gets.
    pub fn default_key(&self) -> Option<&str> {
        self.models.get(self.default_index).map(|m| m.key.as_str())
    }

    /// The credentials of every model, whichever source configured it.
    pub fn credentials(&self) -> impl Iterator<Item = String> + '_ {
        self.models
            .iter()
            .flat_map(|m| m.credentials.iter().cloned())
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The model for a request's `model` field; `None` picks the default.
    pub fn resolve(&self, key: Option<&str>) -> Result<Arc<ModelConfig>, ModelLookupError> {
        if self.models.is_empty() {
            return Err(ModelLookupError::NoneConfigured);
        }
        match key {
            None | Some("") => Ok(self.models[self.default_index].clone()),
            Some(key) => self
                .models
                .iter()
                .find(|m| m.key == key)
                .cloned()
                .ok_or_else(|| ModelLookupError::Unknown {
                    key: key.to_owned(),
                    valid: self.keys(),
                }),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ModelLookupError {
    #[error("{}", NO_MODEL_HELP)]
    NoneConfigured,
    #[error("Unknown model '{key}'. Valid model keys: {}", valid.join(", "))]
    Unknown { key: String, valid: Vec<String> },
}

pub const NO_MODEL_HELP: &str = "No LLM model is configured. Set OPENAI_API_KEY to use OpenAI's \
gpt-4.1; or set MODEL (e.g. openai/my-model), API_BASE (an OpenAI-compatible endpoint such as \
http://localhost:8000/v1 for vLLM, http://localhost:8080/v1 for llama.cpp server or \
http://localhost:11434/v1 for Ollama) and API_KEY if it needs one; or add a [models.<key>] \
table to the config file; or point MODEL_LIST_FILE_LOCATION at a HolmesGPT model list. \
Then restart triage.";

fn load_model_list(path: &std::path::Path) -> Result<Vec<(String, ModelEntry)>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::Invalid(format!(
            "cannot read model list {} (MODEL_LIST_FILE_LOCATION): {e}",
            path.display()
        ))
    })?;
    parse_model_list(&expand_env_placeholders(&text))
        .map_err(|e| ConfigError::Invalid(format!("model list {}: {e}", path.display())))
}

fn parse_model_list(text: &str) -> Result<Vec<(String, ModelEntry)>, String> {
    let raw: serde_norway::Value = serde_norway::from_str(text)
        .map_err(|e| crate::secrets::without_quoted_values(&e.to_string()))?;
    let serde_norway::Value::Mapping(map) = raw else {
        return Err("expected a mapping of model key to model settings".into());
    };
    map.into_iter()
        .map(|(key, value)| {
            let key = key.as_str().ok_or("model keys must be strings")?.to_owned();
            let entry: ModelEntry = serde_norway::from_value(value).map_err(|e| {
                let said = crate::secrets::without_quoted_values(&e.to_string());
                format!("model '{key}': {said}")
            })?;
            crate::config::entry_keys::check_extra_keys(&format!("'{key}'"), &entry.extra)?;
            Ok((key, entry))
        })
        .collect()
}

/// Expands HolmesGPT's `{{ env.VAR }}` placeholders; an unset variable becomes empty.
pub fn expand_env_placeholders(text: &str) -> String {
    static PLACEHOLDER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}").expect("valid regex")
    });
    PLACEHOLDER
        .replace_all(text, |caps: &regex::Captures| {
            std::env::var(&caps[1]).unwrap_or_else(|_| {
                tracing::warn!(variable = &caps[1], "model list names an unset variable");
                String::new()
            })
        })
        .into_owned()
}

fn resolve(
    key: &str,
    entry: &ModelEntry,
    settings: &Settings,
    defaults: &super::params::EnvDefaults,
    issued: &IssuedSecrets,
) -> Result<ModelConfig, ConfigError> {
    let invalid = |msg: String| ConfigError::Invalid(format!("model '{key}': {msg}"));
    let id = entry.model.trim();
    let (provider, name) = match id.split_once('/') {
        Some((p, n)) => (p.to_ascii_lowercase(), n),
        None => (String::new(), id),
    };
    let api_base = entry
        .api_base
        .as_deref()
        .map(|b| b.trim_end_matches('/').to_owned());
    if let Some(base) = &api_base {
        // Checked here, not at the first request; the value is not quoted, as it may hold
        // credentials (`https://user:key@host`).
        match url::Url::parse(base) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
            Ok(_) => return Err(invalid("api_base must be an http or https URL".into())),
            Err(e) => return Err(invalid(format!("api_base is not a URL: {e}"))),
        }
    }
    let env_key = |var: &str| std::env::var(var).ok().filter(|k| !k.is_empty());
    crate::config::entry_keys::refuse_other_providers_keys(&provider, &entry.extra)
        .map_err(invalid)?;
    let mut api = Api::OpenAiChat;
    let (endpoint, wire_model, auth) = match provider.as_str() {
        "anthropic" => {
            api = Api::AnthropicMessages;
            let key = entry
                .api_key
                .clone()
                .or_else(|| env_key(super::anthropic::KEY_VAR))
                .ok_or_else(|| {
                    invalid(format!(
                        "anthropic/ models need api_key or {}",
                        super::anthropic::KEY_VAR
                    ))
                })?;
            (
                super::anthropic::endpoint(api_base.as_deref()),
                name.to_owned(),
                Auth::AnthropicKey(key),
            )
        }
        "gemini" | "vertex_ai" => {
            let google =
                super::gemini::resolve(&provider, name, api_base.as_deref(), entry, issued);
            let (google_api, endpoint, auth) = google.map_err(invalid)?;
            api = google_api;
            (endpoint, name.to_owned(), auth)
        }
        "bedrock" => {
            api = Api::BedrockConverse;
            super::bedrock::resolve(
                name,
                api_base.as_deref(),
                entry,
                issued,
                &settings.outbound_roots()?,
            )
            .map_err(invalid)?
        }
        "azure" => {
            let base = api_base.ok_or_else(|| {
                invalid("azure/ models need api_base (https://<resource>.openai.azure.com)".into())
            })?;
            let version = entry
                .api_version
                .clone()
                .or_else(|| env_key("AZURE_API_VERSION"))
                .ok_or_else(|| invalid("azure/ models need api_version".into()))?;
            let key = entry.api_key.clone().or_else(|| env_key("AZURE_API_KEY"));
            (
                format!("{base}/openai/deployments/{name}/chat/completions?api-version={version}"),
                name.to_owned(),
                key.map_or(Auth::None, Auth::AzureKey),
            )
        }
        "openai" | "" => {
            let base = match (&api_base, provider.as_str()) {
                (Some(b), _) => b.clone(),
                (None, "openai") => openai_base(),
                (None, _) if entry.api_key.is_some() || env_key("OPENAI_API_KEY").is_some() => {
                    openai_base()
                }
                (None, _) => {
                    return Err(invalid(format!(
                        "'{id}' needs api_base: the URL of an OpenAI-compatible endpoint"
                    )));
                }
            };
            // OPENAI_API_KEY belongs to the endpoint the OpenAI variables name, never to an
            // entry's own api_base.
            let key = entry.api_key.clone().or_else(|| {
                (base == openai_base())
                    .then(|| env_key("OPENAI_API_KEY"))
                    .flatten()
            });
            (
                format!("{base}/chat/completions"),
                name.to_owned(),
                key.map_or(Auth::None, Auth::Bearer),
            )
        }
        known if let Some(prefix) = super::prefixes::find(known) => (
            prefix.endpoint(api_base.as_deref()).map_err(invalid)?,
            name.to_owned(),
            prefix
                .key(entry.api_key.as_deref())
                .map_or(Auth::None, Auth::Bearer),
        ),
        // Any other provider prefix works through an OpenAI-compatible proxy (LiteLLM), which
        // routes on the full id.
        other => {
            let base = api_base.ok_or_else(|| {
                invalid(format!(
                    "provider '{other}' is not spoken directly; set api_base to an \
                     OpenAI-compatible endpoint (e.g. a LiteLLM proxy) or use openai/<model>"
                ))
            })?;
            (
                format!("{base}/chat/completions"),
                id.to_owned(),
                entry.api_key.clone().map_or(Auth::None, Auth::Bearer),
            )
        }
    };
    // The model table; an unknown Claude still gets the Messages API's safe output limit, as
    // that API requires `max_tokens`.
    let known = super::catalog::lookup(id).or_else(|| {
        (api == Api::AnthropicMessages)
            .then(|| super::anthropic::known_model(name))
            .flatten()
            .map(|(window, output)| super::catalog::KnownModel {
                window,
                output,
                input: None,
                price_out: None,
            })
    });
    let context_window = entry
        .custom_args
        .as_ref()
        .and_then(|c| c.max_context_size)
        .or(settings.llm.max_context_size)
        .or(known.map(|k| k.window))
        .unwrap_or(FALLBACK_CONTEXT_WINDOW);
    if context_window < 1024 {
        return Err(invalid(format!(
            "context window of {context_window} tokens is too small"
        )));
    }
    let max_output_tokens = settings
        .llm
        .max_output_tokens
        .or(entry.max_tokens)
        .unwrap_or_else(|| {
            super::catalog::default_output_budget(context_window, known.map(|k| k.output))
        });
    if api == Api::AnthropicMessages {
        // The API requires max_tokens: the entry's, else the model's output budget. THINKING
        // (HolmesGPT's default for every model) is checked as the entry's own would be.
        let mut checked = entry.extra.clone();
        if let Some(thinking) = &defaults.thinking {
            checked
                .entry("thinking".to_owned())
                .or_insert_with(|| thinking.clone());
        }
        super::anthropic::check_entry(&checked, entry.max_tokens.unwrap_or(max_output_tokens))
            .map_err(invalid)?;
    }
    let extra_params = crate::config::entry_keys::body_params(&entry.extra);
    let mut extra_headers = defaults.extra_headers.clone();
    extra_headers.extend(crate::config::entry_keys::headers(&entry.extra));
    if provider == "openrouter" {
        super::params::openrouter_attribution(&mut extra_headers);
    }
    let prices = match (entry.input_cost_per_token, entry.output_cost_per_token) {
        (None, None) => known.and_then(|k| k.prices_per_token()),
        (i, o) => Some((i.unwrap_or(0.0), o.unwrap_or(0.0))),
    };
    // OpenAI itself (and Azure OpenAI) refuse parameters they do not know; a proxy or another
    // provider takes `thinking`, as LiteLLM does.
    let at_openai = provider == "azure" || endpoint.starts_with(OPENAI_API_BASE);
    // OpenAI's parameter names for its reasoning models, wherever they are served: proxies and
    // OpenAI-compatible servers take `max_completion_tokens` too.
    let openai_reasoning = matches!(provider.as_str(), "openai" | "" | "azure")
        && super::params::is_openai_reasoning_model(name);
    let thinking = entry.extra.get("thinking").or(defaults.thinking.as_ref());
    if at_openai && entry.extra.contains_key("thinking") {
        tracing::warn!(
            model = key,
            "OpenAI does not take `thinking`; it is not sent"
        );
    }
    // litellm-style entries may carry provider credentials beside `api_key`
    // (aws_secret_access_key, vertex_credentials, …).
    let mut credentials: Vec<String> = entry
        .extra
        .iter()
        .filter(|(k, _)| crate::secrets::is_credential_name(k) || k.contains("credentials"))
        .filter_map(|(_, v)| v.as_str().map(str::to_owned))
        .collect();
    credentials.extend(auth.secrets());
    Ok(ModelConfig {
        credentials,
        key: key.to_owned(),
        api,
        model_id: id.to_owned(),
        wire_model,
        endpoint_url: reqwest::Url::parse(&endpoint).ok(),
        endpoint,
        auth,
        // OpenAI's reasoning models refuse any temperature but 1: the global default
        // (TEMPERATURE) is not sent to them, an entry's own value is.
        temperature: entry
            .temperature
            .or(settings.llm.temperature.filter(|_| !openai_reasoning)),
        top_p: entry.extra.get("top_p").and_then(Value::as_f64),
        max_tokens: entry.max_tokens,
        uses_max_completion_tokens: openai_reasoning,
        reasoning_effort: entry
            .extra
            .get("reasoning_effort")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| defaults.reasoning_effort.clone()),
        thinking: thinking.filter(|_| !at_openai).cloned(),
        context_window,
        max_output_tokens,
        vision: entry.vision.unwrap_or(false),
        prices,
        extra_params,
        extra_headers,
        tokenizer: Tokenizer::for_model(name),
        // No cap configured: slots enough never to run out, so the call path stays one.
        call_slots: Arc::new(tokio::sync::Semaphore::new(
            settings
                .llm
                .max_concurrent_calls_per_model
                .unwrap_or(tokio::sync::Semaphore::MAX_PERMITS),
        )),
        fallbacks: Vec::new(),
    })
}

/// `OPENAI_API_BASE` or `OPENAI_BASE_URL` when set, else OpenAI itself.
fn openai_base() -> String {
    OPENAI_BASE_VARS
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.trim().is_empty()))
        .map_or_else(
            || OPENAI_API_BASE.to_owned(),
            |b| b.trim().trim_end_matches('/').to_owned(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str) -> Settings {
        Settings::from_toml(toml).unwrap()
    }

    #[test]
    fn openai_compatible_entry() {
        let s = settings(
            "[models.local]\nmodel = \"openai/qwen\"\napi_base = \"http://127.0.0.1:8000/v1/\"\n",
        );
        let r = ModelRegistry::from_settings(&s).unwrap();
        let m = r.resolve(Some("local")).unwrap();
        assert_eq!(m.endpoint, "http://127.0.0.1:8000/v1/chat/completions");
        assert_eq!(m.wire_model, "qwen");
        assert_eq!(m.context_window, 200_000);
        assert_eq!(m.max_output_tokens, 64_000);
    }

    #[test]
    fn context_window_precedence() {
        let s = settings(
            "[llm]\nmax_context_size = 50000\n[models.a]\nmodel = \"openai/gpt-4o\"\napi_base = \"http://h\"\ncustom_args = { max_context_size = 9000 }\n[models.b]\nmodel = \"openai/gpt-4o\"\napi_base = \"http://h\"\n",
        );
        let r = ModelRegistry::from_settings(&s).unwrap();
        assert_eq!(r.resolve(Some("a")).unwrap().context_window, 9000);
        assert_eq!(r.resolve(Some("a")).unwrap().max_output_tokens, 4500);
        assert_eq!(r.resolve(Some("b")).unwrap().context_window, 50000);
    }

    #[test]
    fn the_default_comes_first_then_file_order() {
        let models = "[models.zeta]\nmodel = \"openai/z\"\napi_base = \"http://h\"\n[models.alpha]\nmodel = \"openai/a\"\napi_base = \"http://h\"\n[models.mid]\nmodel = \"openai/m\"\napi_base = \"http://h\"\n";
        let r = ModelRegistry::from_settings(&settings(models)).unwrap();
        assert_eq!(r.keys(), ["zeta", "alpha", "mid"]);
        assert_eq!(r.default_key(), Some("zeta"));
        let named = format!("default_model = \"mid\"\n{models}");
        let r = ModelRegistry::from_settings(&settings(&named)).unwrap();
        assert_eq!(r.keys(), ["mid", "zeta", "alpha"]);
        assert_eq!(r.resolve(None).unwrap().key, "mid");
    }

    #[test]
    fn unknown_key_lists_valid_ones() {
        let s = settings("[models.a]\nmodel = \"openai/x\"\napi_base = \"http://h\"\n");
        let r = ModelRegistry::from_settings(&s).unwrap();
        let err = r.resolve(Some("nope")).unwrap_err().to_string();
        assert_eq!(err, "Unknown model 'nope'. Valid model keys: a");
    }

    #[test]
    fn unsupported_provider_without_base_is_a_config_error() {
        let s = settings("[models.c]\nmodel = \"bedrock_x/claude\"\n");
        let err = ModelRegistry::from_settings(&s).unwrap_err().to_string();
        assert!(
            err.contains("model 'c'") && err.contains("api_base"),
            "{err}"
        );
    }

    #[test]
    fn model_list_yaml() {
        // SAFETY: tests in this module do not read this variable concurrently.
        unsafe { std::env::set_var("TRIAGE_TEST_KEY", "sk-test") };
        let text = expand_env_placeholders(
            "fast:\n  model: openai/gpt-4.1-mini\n  api_key: \"{{ env.TRIAGE_TEST_KEY }}\"\n  temperature: 0\n  custom_args:\n    max_context_size: 64000\n",
        );
        let list = parse_model_list(&text).unwrap();
        assert_eq!(list[0].0, "fast");
        assert_eq!(list[0].1.api_key.as_deref(), Some("sk-test"));
        assert_eq!(
            list[0].1.custom_args.as_ref().unwrap().max_context_size,
            Some(64000)
        );
    }
}
