//! The model registry: configured model keys resolved to provider endpoints, context windows
//! and output budgets, once at start-up.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{ConfigError, ModelEntry, Settings};
use crate::context::tokens::Tokenizer;

/// Model used when nothing is configured but `OPENAI_API_KEY` is set.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1";
const FALLBACK_CONTEXT_WINDOW: u32 = 200_000;
const OPENAI_API_BASE: &str = "https://api.openai.com/v1";
const OLLAMA_API_BASE: &str = "http://localhost:11434/v1";

/// Where `openai/` models without an `api_base` go instead of OpenAI: the variables the OpenAI
/// SDK and LiteLLM (HolmesGPT) read, in LiteLLM's order.
const OPENAI_BASE_VARS: &[&str] = &["OPENAI_API_BASE", "OPENAI_BASE_URL"];

#[derive(Debug, Clone)]
pub enum Auth {
    None,
    Bearer(String),
    /// Azure OpenAI's `api-key` header.
    AzureKey(String),
    /// Anthropic's `x-api-key` header (with `anthropic-version`).
    AnthropicKey(String),
    /// Google AI Studio's `x-goog-api-key` header.
    GoogleApiKey(String),
    /// Google OAuth tokens (Vertex AI), added per call by the provider.
    Google(Arc<super::gemini::auth::GoogleAuth>),
}

/// The wire protocol a model is spoken to in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI chat completions (OpenAI, Azure, every compatible server and proxy).
    OpenAiChat,
    /// Anthropic's Messages API (Anthropic, Azure AI Foundry's Anthropic endpoint).
    AnthropicMessages,
    /// Gemini's `streamGenerateContent` (Google AI Studio, Vertex AI).
    GeminiGenerate,
}

#[derive(Debug)]
pub struct ModelConfig {
    pub key: String,
    pub api: Api,
    /// As configured, e.g. `openai/gpt-4.1`.
    pub model_id: String,
    /// The `model` field sent to the provider.
    pub wire_model: String,
    /// Full chat-completions URL.
    pub endpoint: String,
    pub auth: Auth,
    pub temperature: Option<f64>,
    /// Sent as `max_tokens` only when configured: a default could exceed a small server's limit.
    pub max_tokens: Option<u32>,
    pub context_window: u32,
    pub max_output_tokens: u32,
    pub vision: bool,
    /// (input, output) dollars per token.
    pub prices: Option<(f64, f64)>,
    pub extra_params: Map<String, Value>,
    /// The entry's `extra_headers`, sent with every call.
    pub extra_headers: Vec<(String, String)>,
    pub tokenizer: Tokenizer,
    /// Calls in flight to this model are bounded (llm.max_concurrent_calls_per_model).
    pub call_slots: Arc<tokio::sync::Semaphore>,
    /// Every credential of this model (its key, credential-like fields of its entry), for the
    /// secret masker.
    pub credentials: Vec<String>,
}

impl ModelConfig {
    /// One of the model's call slots, if one is free now.
    pub fn try_reserve_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.call_slots.clone().try_acquire_owned().ok()
    }

    /// One of the model's call slots, waiting at most `wait`: never an unbounded queue.
    pub async fn reserve_slot_within(
        &self,
        wait: std::time::Duration,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        tokio::time::timeout(wait, self.call_slots.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }

    /// The model's credentials and `extra_headers` on a request to its provider.
    pub(crate) fn authorize(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let mut builder = match &self.auth {
            Auth::None => builder,
            Auth::Bearer(key) => builder.bearer_auth(key),
            Auth::AzureKey(key) => builder.header("api-key", key),
            Auth::AnthropicKey(key) => builder
                .header("x-api-key", key)
                .header("anthropic-version", super::anthropic::API_VERSION),
            Auth::GoogleApiKey(key) => builder.header("x-goog-api-key", key),
            Auth::Google(_) => builder,
        };
        for (name, value) in &self.extra_headers {
            builder = builder.header(name, value);
        }
        builder
    }
}

#[derive(Debug, Default)]
pub struct ModelRegistry {
    models: Vec<Arc<ModelConfig>>,
    default_index: usize,
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
        let models = entries
            .into_iter()
            .map(|(key, entry)| resolve(&key, &entry, settings).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
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
        })
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
    let raw: serde_norway::Value = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    let serde_norway::Value::Mapping(map) = raw else {
        return Err("expected a mapping of model key to model settings".into());
    };
    map.into_iter()
        .map(|(key, value)| {
            let key = key.as_str().ok_or("model keys must be strings")?.to_owned();
            let entry: ModelEntry =
                serde_norway::from_value(value).map_err(|e| format!("model '{key}': {e}"))?;
            super::entry_keys::check_extra_keys(&format!("'{key}'"), &entry.extra)?;
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

fn resolve(key: &str, entry: &ModelEntry, settings: &Settings) -> Result<ModelConfig, ConfigError> {
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
    let env_key = |var: &str| std::env::var(var).ok().filter(|k| !k.is_empty());
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
            let google = super::gemini::resolve(&provider, name, api_base.as_deref(), entry);
            let (google_api, endpoint, auth) = google.map_err(invalid)?;
            api = google_api;
            (endpoint, name.to_owned(), auth)
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
        "openai" | "" | "hosted_vllm" | "ollama" | "ollama_chat" | "openai_like" | "lm_studio"
        | "llamacpp" => {
            let base = match (&api_base, provider.as_str()) {
                (Some(b), _) => b.clone(),
                (None, "ollama" | "ollama_chat") => OLLAMA_API_BASE.to_owned(),
                (None, "openai") => openai_base(),
                (None, "") if entry.api_key.is_some() || env_key("OPENAI_API_KEY").is_some() => {
                    openai_base()
                }
                (None, _) => {
                    return Err(invalid(format!(
                        "'{id}' needs api_base: the URL of an OpenAI-compatible endpoint"
                    )));
                }
            };
            // OPENAI_API_KEY belongs to the endpoint the OpenAI variables name, never to an
            // entry's own api_base or to a local Ollama.
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
    let known = match api {
        Api::AnthropicMessages => super::anthropic::known_model(name).map(KnownModel::from),
        Api::GeminiGenerate => super::gemini::known_model(name).map(KnownModel::from),
        Api::OpenAiChat => known_model(name),
    };
    let context_window = entry
        .custom_args
        .as_ref()
        .and_then(|c| c.max_context_size)
        .or(settings.llm.max_context_size)
        .or(known.map(|k| k.context_window))
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
        .unwrap_or_else(|| default_output_budget(context_window, known.map(|k| k.max_output)));
    if api == Api::AnthropicMessages {
        // The API requires max_tokens: the entry's, else the model's output budget.
        super::anthropic::check_entry(&entry.extra, entry.max_tokens.unwrap_or(max_output_tokens))
            .map_err(invalid)?;
    }
    let extra_params = super::entry_keys::body_params(&entry.extra);
    let extra_headers = super::entry_keys::headers(&entry.extra);
    let prices = match (entry.input_cost_per_token, entry.output_cost_per_token) {
        (None, None) => None,
        (i, o) => Some((i.unwrap_or(0.0), o.unwrap_or(0.0))),
    };
    // litellm-style entries may carry provider credentials beside `api_key`
    // (aws_secret_access_key, vertex_credentials, …).
    let mut credentials: Vec<String> = entry
        .extra
        .iter()
        .filter(|(k, _)| crate::credentials::is_credential_name(k) || k.contains("credentials"))
        .filter_map(|(_, v)| v.as_str().map(str::to_owned))
        .collect();
    if let Auth::Bearer(k) | Auth::AzureKey(k) | Auth::AnthropicKey(k) | Auth::GoogleApiKey(k) =
        &auth
    {
        credentials.push(k.clone());
    }
    Ok(ModelConfig {
        credentials,
        key: key.to_owned(),
        api,
        model_id: id.to_owned(),
        wire_model,
        endpoint,
        auth,
        temperature: entry.temperature.or(settings.llm.temperature),
        max_tokens: entry.max_tokens,
        context_window,
        max_output_tokens,
        vision: entry.vision.unwrap_or(false),
        prices,
        extra_params,
        extra_headers,
        tokenizer: Tokenizer::for_model(name),
        call_slots: Arc::new(tokio::sync::Semaphore::new(
            settings.llm.max_concurrent_calls_per_model,
        )),
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

/// HolmesGPT's rule is `max(64000, 12% of the window)`; capped by what the model can emit and by
/// half the window so small local models keep room for their input.
fn default_output_budget(context_window: u32, model_max: Option<u32>) -> u32 {
    let budget = 64_000.max(context_window / 100 * 12);
    budget
        .min(model_max.unwrap_or(u32::MAX))
        .min(context_window / 2)
}

#[derive(Clone, Copy)]
struct KnownModel {
    context_window: u32,
    max_output: u32,
}

impl From<(u32, u32)> for KnownModel {
    fn from((context_window, max_output): (u32, u32)) -> KnownModel {
        KnownModel {
            context_window,
            max_output,
        }
    }
}

/// Well-known OpenAI models; longest matching prefix wins. Anything else: 200000 / 64000.
fn known_model(name: &str) -> Option<KnownModel> {
    const TABLE: &[(&str, u32, u32)] = &[
        ("gpt-5", 400_000, 128_000),
        ("gpt-4.1", 1_047_576, 32_768),
        ("gpt-4o", 128_000, 16_384),
        ("gpt-4-turbo", 128_000, 4_096),
        ("gpt-4", 8_192, 4_096),
        ("gpt-3.5-turbo", 16_385, 4_096),
        ("o1", 200_000, 100_000),
        ("o3", 200_000, 100_000),
        ("o4-mini", 200_000, 100_000),
    ];
    let name = name.to_ascii_lowercase();
    TABLE
        .iter()
        .filter(|(prefix, _, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _, _)| prefix.len())
        .map(|&(_, context_window, max_output)| KnownModel {
            context_window,
            max_output,
        })
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
    fn known_models_and_budgets() {
        assert_eq!(known_model("gpt-4o-mini").unwrap().context_window, 128_000);
        assert_eq!(known_model("gpt-4").unwrap().context_window, 8_192);
        assert_eq!(default_output_budget(128_000, Some(16_384)), 16_384);
        assert_eq!(default_output_budget(1_000_000, None), 120_000);
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
