//! What a model-list entry for `anthropic/…` resolves to: the Messages endpoint (Anthropic's,
//! or any `api_base` serving the same API, such as Azure AI Foundry's), the key, the output
//! budget the API requires, and which of the entry's keys the Messages API takes.

use serde_json::{Map, Value};

/// Anthropic's own API, when the entry names no `api_base`.
pub const DEFAULT_API_BASE: &str = "https://api.anthropic.com";
/// The variable the key falls back to, as in the Anthropic SDK and LiteLLM.
pub const KEY_VAR: &str = "ANTHROPIC_API_KEY";

/// The Messages URL of an API base: `…/v1/messages`, whether the base ends in the host, in
/// `/v1` or already in `/v1/messages` (Azure AI Foundry: `https://<resource>.services.ai.azure.com/anthropic`).
pub fn endpoint(api_base: Option<&str>) -> String {
    let base = api_base.unwrap_or(DEFAULT_API_BASE).trim_end_matches('/');
    if base.ends_with("/v1/messages") {
        base.to_owned()
    } else if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

/// (context window, most output tokens) of the Claude models; longest matching prefix wins.
/// `max_tokens` is required by the API and must not exceed the model's limit, so the
/// catch-all is one every current Claude model accepts.
pub fn known_model(name: &str) -> Option<(u32, u32)> {
    const TABLE: &[(&str, u32, u32)] = &[
        ("claude-", 200_000, 32_000),
        ("claude-opus-4", 200_000, 32_000),
        ("claude-opus-4-5", 200_000, 64_000),
        ("claude-sonnet-4", 200_000, 64_000),
        ("claude-haiku-4", 200_000, 64_000),
        ("claude-3-7-sonnet", 200_000, 64_000),
        ("claude-3-5", 200_000, 8_192),
        ("claude-3-opus", 200_000, 4_096),
        ("claude-3-sonnet", 200_000, 4_096),
        ("claude-3-haiku", 200_000, 4_096),
    ];
    let name = name.to_ascii_lowercase();
    // Bedrock-style and dated ids (`anthropic.claude-…`, `claude-…-20250514`) match by prefix
    // after any vendor part.
    let name = name.rsplit('.').next().unwrap_or(&name);
    TABLE
        .iter()
        .filter(|(prefix, _, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _, _)| prefix.len())
        .map(|&(_, window, max_output)| (window, max_output))
}

/// Model-list body keys the Messages API has no equivalent for; sent, Anthropic would refuse
/// the request, so the entry is refused at start-up instead, naming the key.
const UNSUPPORTED_KEYS: &[&str] = &["seed", "presence_penalty", "frequency_penalty"];

/// Checks an entry's body keys and its `thinking` against the output budget.
pub fn check_entry(extra: &Map<String, Value>, max_tokens: u32) -> Result<(), String> {
    if let Some(key) = UNSUPPORTED_KEYS.iter().find(|k| extra.contains_key(**k)) {
        return Err(format!(
            "`{key}` is not supported by the Anthropic Messages API; remove it from this entry"
        ));
    }
    if let Some(thinking) = extra.get("thinking") {
        let enabled = thinking.get("type").and_then(Value::as_str);
        match (
            enabled,
            thinking.get("budget_tokens").and_then(Value::as_u64),
        ) {
            (Some("disabled"), _) => {}
            (Some("enabled"), Some(budget)) if budget >= 1024 && budget < u64::from(max_tokens) => {
            }
            (Some("enabled"), Some(budget)) => {
                return Err(format!(
                    "thinking.budget_tokens ({budget}) must be at least 1024 and below max_tokens ({max_tokens})"
                ));
            }
            _ => {
                return Err(
                    "`thinking` must be { type = \"enabled\", budget_tokens = N } or { type = \"disabled\" }"
                        .into(),
                );
            }
        }
    }
    Ok(())
}

/// Whether the entry turns extended thinking on.
pub fn thinking_enabled(thinking: &Value) -> bool {
    thinking.get("type").and_then(Value::as_str) == Some("enabled")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoints_of_every_base_form() {
        assert_eq!(endpoint(None), "https://api.anthropic.com/v1/messages");
        assert_eq!(
            endpoint(Some("https://r.services.ai.azure.com/anthropic/")),
            "https://r.services.ai.azure.com/anthropic/v1/messages"
        );
        assert_eq!(
            endpoint(Some("http://127.0.0.1:9/v1")),
            "http://127.0.0.1:9/v1/messages"
        );
        assert_eq!(
            endpoint(Some("http://h/v1/messages")),
            "http://h/v1/messages"
        );
    }

    #[test]
    fn output_limits_by_model() {
        assert_eq!(
            known_model("claude-sonnet-4-5-20250929"),
            Some((200_000, 64_000))
        );
        assert_eq!(
            known_model("claude-3-haiku-20240307"),
            Some((200_000, 4_096))
        );
        assert_eq!(known_model("claude-opus-4-1"), Some((200_000, 32_000)));
        assert_eq!(known_model("claude-next"), Some((200_000, 32_000)));
        assert_eq!(known_model("gpt-4o"), None);
    }

    #[test]
    fn thinking_needs_a_budget_below_max_tokens() {
        let entry = |v: Value| v.as_object().cloned().unwrap_or_default();
        let on = entry(json!({"thinking": {"type": "enabled", "budget_tokens": 4000}}));
        assert!(check_entry(&on, 8000).is_ok());
        assert!(thinking_enabled(&on["thinking"]));
        let err = check_entry(&on, 4000).unwrap_err();
        assert!(err.contains("budget_tokens (4000)"), "{err}");
        assert!(check_entry(&entry(json!({"thinking": {"type": "on"}})), 8000).is_err());
        let err = check_entry(&entry(json!({"seed": 1})), 8000).unwrap_err();
        assert!(err.contains("`seed`"), "{err}");
    }

    #[test]
    fn anthropic_is_spoken_natively() {
        let s = crate::config::Settings::from_toml(
            "[models.c]\nmodel = \"anthropic/claude-3-5-haiku-latest\"\napi_key = \"k\"\n[models.f]\nmodel = \"anthropic/claude-sonnet-4-5\"\napi_key = \"k\"\napi_base = \"https://r.services.ai.azure.com/anthropic\"\nthinking = { type = \"enabled\", budget_tokens = 4000 }\n",
        )
        .unwrap();
        let r = crate::llm::ModelRegistry::from_settings(&s).unwrap();
        let c = r.resolve(Some("c")).unwrap();
        assert_eq!(c.api, crate::llm::model::Api::AnthropicMessages);
        assert_eq!(c.endpoint, "https://api.anthropic.com/v1/messages");
        assert_eq!(c.wire_model, "claude-3-5-haiku-latest");
        assert_eq!(c.max_output_tokens, 8_192);
        let f = r.resolve(Some("f")).unwrap();
        assert_eq!(
            f.endpoint,
            "https://r.services.ai.azure.com/anthropic/v1/messages"
        );
        assert_eq!(f.max_output_tokens, 64_000);
        let bad = crate::config::Settings::from_toml(
            "[models.c]\nmodel = \"anthropic/claude-3-haiku\"\napi_key = \"k\"\nthinking = { type = \"enabled\", budget_tokens = 8000 }\n",
        )
        .unwrap();
        let err = crate::llm::ModelRegistry::from_settings(&bad)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("model 'c'") && err.contains("budget_tokens"),
            "{err}"
        );
    }
}
