//! How HolmesGPT's model parameters become request parameters: the variables that set them
//! for every model (THINKING, REASONING_EFFORT, EXTRA_HEADERS) and the rules of OpenAI's
//! reasoning models.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::config::ConfigError;

/// o1, o3, o4-mini…, gpt-5…: OpenAI's reasoning models, which take `max_completion_tokens`
/// and refuse a temperature. `gpt-5-chat` is a chat model and takes both.
pub(super) fn is_openai_reasoning_model(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let o_series = name.len() >= 2 && name.starts_with('o') && name.as_bytes()[1].is_ascii_digit();
    o_series || (name.starts_with("gpt-5") && !name.starts_with("gpt-5-chat"))
}

/// OpenRouter's optional app attribution, from the variables LiteLLM reads.
pub(super) fn openrouter_attribution(headers: &mut BTreeMap<String, String>) {
    for (var, header) in [("OR_SITE_URL", "HTTP-Referer"), ("OR_APP_NAME", "X-Title")] {
        if let Ok(value) = std::env::var(var)
            && !value.trim().is_empty()
            && reqwest::header::HeaderValue::from_str(value.trim()).is_ok()
        {
            headers
                .entry(header.to_owned())
                .or_insert_with(|| value.trim().to_owned());
        }
    }
}

/// HolmesGPT's defaults for every model, from its variables: THINKING (JSON), REASONING_EFFORT,
/// EXTRA_HEADERS (a JSON object). An entry's own key wins.
#[derive(Debug, Default)]
pub(super) struct EnvDefaults {
    pub thinking: Option<Value>,
    pub reasoning_effort: Option<String>,
    pub extra_headers: BTreeMap<String, String>,
}

impl EnvDefaults {
    pub fn read() -> Result<EnvDefaults, ConfigError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let json = |name: &str| -> Result<Option<Value>, ConfigError> {
            var(name)
                .map(|text| {
                    serde_json::from_str(&text).map_err(|e| {
                        ConfigError::Invalid(format!("{name} must be a JSON object: {e}"))
                    })
                })
                .transpose()
        };
        let thinking = json("THINKING")?;
        if thinking.as_ref().is_some_and(|t| !t.is_object()) {
            return Err(ConfigError::Invalid(
                "THINKING must be a JSON object, e.g. {\"type\": \"enabled\", \"budget_tokens\": 4096}"
                    .into(),
            ));
        }
        let extra_headers = match json("EXTRA_HEADERS")? {
            None => BTreeMap::new(),
            Some(Value::Object(map)) => {
                crate::config::entry_keys::check_extra_keys(
                    "EXTRA_HEADERS",
                    &Map::from_iter([(
                        crate::config::entry_keys::HEADERS_KEY.to_owned(),
                        Value::Object(map.clone()),
                    )]),
                )
                .map_err(|_| {
                    ConfigError::Invalid(
                        "EXTRA_HEADERS must map header names to string values".into(),
                    )
                })?;
                crate::config::entry_keys::headers(&Map::from_iter([(
                    crate::config::entry_keys::HEADERS_KEY.to_owned(),
                    Value::Object(map),
                )]))
            }
            Some(_) => {
                return Err(ConfigError::Invalid(
                    "EXTRA_HEADERS must be a JSON object of header name to value".into(),
                ));
            }
        };
        Ok(EnvDefaults {
            thinking,
            reasoning_effort: var("REASONING_EFFORT").map(|v| v.trim().to_ascii_lowercase()),
            extra_headers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_models_are_told_apart() {
        for name in [
            "o1",
            "o3-mini",
            "o4-mini-2025-04-16",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.1",
        ] {
            assert!(is_openai_reasoning_model(name), "{name}");
        }
        for name in ["gpt-4.1", "gpt-4o", "gpt-5-chat-latest", "omni", "o"] {
            assert!(!is_openai_reasoning_model(name), "{name}");
        }
    }

    fn model(toml: &str, key: &str) -> std::sync::Arc<crate::llm::ModelConfig> {
        let settings = crate::config::Settings::from_toml(toml).unwrap();
        let registry = crate::llm::ModelRegistry::from_settings(&settings).unwrap();
        registry.resolve(Some(key)).unwrap()
    }

    #[test]
    fn prefixes_strip_themselves_and_take_their_key_variable() {
        // SAFETY: no other test reads this variable.
        unsafe { std::env::set_var("TOGETHER_AI_TOKEN", "tok-together") };
        let m = model(
            "[models.t]\nmodel = \"together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo\"\n",
            "t",
        );
        assert_eq!(m.endpoint, "https://api.together.xyz/v1/chat/completions");
        assert_eq!(m.wire_model, "meta-llama/Llama-3.3-70B-Instruct-Turbo");
        assert!(matches!(&m.auth, super::super::model::Auth::Bearer(k) if k == "tok-together"));
        assert!(m.credentials.contains(&"tok-together".to_owned()));
        assert_eq!(m.context_window, 131_072, "from the model table");
        let ollama = model("[models.o]\nmodel = \"ollama_chat/llama3.1\"\n", "o");
        assert_eq!(
            ollama.endpoint,
            "http://localhost:11434/v1/chat/completions"
        );
        assert!(matches!(ollama.auth, super::super::model::Auth::None));
    }

    #[test]
    fn reasoning_models_at_openai_get_their_parameter_names() {
        let toml = "[llm]\ntemperature = 0.2\n\
            [models.o3]\nmodel = \"openai/o3\"\napi_key = \"sk\"\nmax_tokens = 900\n\
            reasoning_effort = \"high\"\nthinking = { type = \"enabled\", budget_tokens = 512 }\n\
            [models.proxy]\nmodel = \"openai/o3\"\napi_base = \"http://litellm:4000\"\n\
            thinking = { type = \"enabled\", budget_tokens = 512 }\ntop_p = 0.9\n";
        let o3 = model(toml, "o3");
        assert!(o3.uses_max_completion_tokens);
        assert_eq!(o3.max_tokens, Some(900));
        assert_eq!(o3.temperature, None, "the global default is not sent to o3");
        assert_eq!(o3.reasoning_effort.as_deref(), Some("high"));
        assert_eq!(o3.thinking, None, "OpenAI refuses `thinking`");
        assert!(o3.prices.is_some() && o3.context_window == 200_000);
        let proxy = model(toml, "proxy");
        assert!(proxy.uses_max_completion_tokens);
        assert_eq!(proxy.thinking.as_ref().unwrap()["budget_tokens"], 512);
        assert_eq!(proxy.top_p, Some(0.9));
        assert_eq!(proxy.temperature, None);
    }

    #[test]
    fn price_keys_override_the_table() {
        let m = model(
            "[models.m]\nmodel = \"openai/gpt-4o\"\napi_base = \"http://h\"\n\
             input_cost_per_token = 0.001\n",
            "m",
        );
        assert_eq!(m.prices, Some((0.001, 0.0)));
    }
}
