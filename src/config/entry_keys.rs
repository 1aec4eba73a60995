//! Which keys a model entry may hold. HolmesGPT hands every key it does not know to its provider
//! library; triage takes the ones an OpenAI-compatible provider understands and refuses the
//! rest by name, so a typo (`api_bse`) never silently sends traffic elsewhere.

use serde_json::{Map, Value};

/// Keys triage reads itself (`ModelEntry`'s own fields).
pub const OWN_KEYS: &[&str] = &[
    "model",
    "api_key",
    "api_base",
    "base_url",
    "api_version",
    "temperature",
    "max_tokens",
    "custom_args",
    "vision",
    "input_cost_per_token",
    "output_cost_per_token",
    "fallbacks",
];

/// Keys the registry reads into `ModelConfig`'s own fields, translated per provider.
pub const TYPED_KEYS: &[&str] = &["top_p", "reasoning_effort", "thinking"];

/// Keys sent unchanged in the chat-completions body.
pub const BODY_KEYS: &[&str] = &[
    "seed",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "max_completion_tokens",
    "parallel_tool_calls",
    "user",
    "extra_body",
];

/// Read by the provider an entry names (Vertex AI's project, location and credentials, AWS
/// credentials, region, profile and Bedrock endpoint, as LiteLLM names them), never sent in a
/// body.
pub const PROVIDER_KEYS: &[&str] = &[
    "vertex_project",
    "vertex_location",
    "vertex_credentials",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_region_name",
    "aws_profile_name",
    "aws_bedrock_runtime_endpoint",
];

/// An entry may hold another provider's keys (`vertex_*` on an `openai/` entry, `aws_*` on
/// a `gemini/` one) only by mistake: they would do nothing, so they are refused by name.
pub fn refuse_other_providers_keys(
    provider: &str,
    extra: &Map<String, Value>,
) -> Result<(), String> {
    let owner = |key: &str| {
        if key.starts_with("vertex_") {
            Some("vertex_ai")
        } else if key.starts_with("aws_") {
            Some("bedrock")
        } else {
            None
        }
    };
    for key in extra.keys() {
        if let Some(owner) = owner(key)
            && owner != provider
        {
            return Err(format!(
                "`{key}` is for {owner}/ models; remove it from this entry"
            ));
        }
    }
    Ok(())
}

/// Sent as HTTP headers (a table of name → value).
pub const HEADERS_KEY: &str = "extra_headers";

/// HolmesGPT's list of OpenAI parameters litellm may pass through; triage forwards every key
/// in `BODY_KEYS` anyway, so it is accepted and has no effect.
pub const NO_EFFECT_KEYS: &[&str] = &["allowed_openai_params"];

/// Every key a model entry may hold, for error messages and the README.
pub fn valid_keys() -> Vec<&'static str> {
    OWN_KEYS
        .iter()
        .chain(TYPED_KEYS)
        .chain(BODY_KEYS)
        .chain(PROVIDER_KEYS)
        .chain([&HEADERS_KEY])
        .chain(NO_EFFECT_KEYS)
        .copied()
        .collect()
}

/// Checks the keys `ModelEntry` did not take itself; `entry` names it for the message, e.g.
/// `[models.fast]`.
pub fn check_extra_keys(entry: &str, extra: &Map<String, Value>) -> Result<(), String> {
    let accepted = |k: &str| {
        TYPED_KEYS.contains(&k)
            || BODY_KEYS.contains(&k)
            || PROVIDER_KEYS.contains(&k)
            || k == HEADERS_KEY
            || NO_EFFECT_KEYS.contains(&k)
    };
    if let Some(unknown) = extra.keys().find(|k| !accepted(k)) {
        return Err(format!(
            "unknown key `{unknown}` in model entry {entry}. Valid keys: {}",
            valid_keys().join(", ")
        ));
    }
    let wrong_type = |key: &str, expected: &str| {
        Err(format!("`{key}` in model entry {entry} must be {expected}"))
    };
    match extra.get("top_p") {
        None | Some(Value::Number(_)) => {}
        Some(_) => return wrong_type("top_p", "a number"),
    }
    match extra.get("reasoning_effort") {
        None | Some(Value::String(_)) => {}
        Some(_) => return wrong_type("reasoning_effort", "a string (low, medium, high…)"),
    }
    match extra.get("thinking") {
        None | Some(Value::Object(_)) => {}
        Some(_) => {
            return wrong_type(
                "thinking",
                "a table, e.g. { type = \"enabled\", budget_tokens = 4096 }",
            );
        }
    }
    match extra.get(HEADERS_KEY) {
        None => Ok(()),
        Some(Value::Object(headers))
            if headers.iter().all(|(name, value)| {
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
                    && value
                        .as_str()
                        .is_some_and(|v| reqwest::header::HeaderValue::from_str(v).is_ok())
            }) =>
        {
            Ok(())
        }
        Some(_) => Err(format!(
            "`{HEADERS_KEY}` in model entry {entry} must be a table of header name = \"value\""
        )),
    }
}

/// The body parameters of an entry's extra keys.
pub fn body_params(extra: &Map<String, Value>) -> Map<String, Value> {
    extra
        .iter()
        .filter(|(k, _)| BODY_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The `extra_headers` of an entry.
pub fn headers(extra: &Map<String, Value>) -> std::collections::BTreeMap<String, String> {
    extra
        .get(HEADERS_KEY)
        .and_then(Value::as_object)
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn another_providers_keys_are_refused_by_name() {
        let vertex = map(json!({"vertex_project": "p"}));
        let aws = map(json!({"aws_region_name": "us-east-1"}));
        let err = refuse_other_providers_keys("openai", &vertex).unwrap_err();
        assert!(
            err.contains("`vertex_project`") && err.contains("vertex_ai/"),
            "{err}"
        );
        assert!(refuse_other_providers_keys("gemini", &vertex).is_err());
        assert!(refuse_other_providers_keys("vertex_ai", &vertex).is_ok());
        let err = refuse_other_providers_keys("anthropic", &aws).unwrap_err();
        assert!(
            err.contains("`aws_region_name`") && err.contains("bedrock/"),
            "{err}"
        );
        assert!(refuse_other_providers_keys("bedrock", &aws).is_ok());
        assert!(refuse_other_providers_keys("openai", &map(json!({"seed": 1}))).is_ok());
    }

    #[test]
    fn typos_are_named_with_the_entry_and_the_valid_keys() {
        let err = check_extra_keys("[models.x]", &map(json!({"api_bse": "http://h"}))).unwrap_err();
        assert!(
            err.contains("`api_bse`") && err.contains("[models.x]"),
            "{err}"
        );
        assert!(
            err.contains("api_base") && err.contains("reasoning_effort"),
            "{err}"
        );
    }

    #[test]
    fn provider_keys_are_taken() {
        let extra = map(json!({
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "reasoning_effort": "low",
            "extra_headers": {"x-team": "sre"},
            "allowed_openai_params": ["reasoning_effort"],
        }));
        check_extra_keys("[models.x]", &extra).unwrap();
        let body = body_params(&extra);
        assert!(
            body.is_empty(),
            "typed keys are not passed unchanged: {body:?}"
        );
        assert_eq!(headers(&extra)["x-team"], "sre");
    }

    #[test]
    fn typed_keys_are_checked() {
        for (key, bad) in [
            ("top_p", json!("high")),
            ("reasoning_effort", json!(3)),
            ("thinking", json!(true)),
        ] {
            let err = check_extra_keys("[models.x]", &map(json!({ key: bad }))).unwrap_err();
            assert!(err.contains(&format!("`{key}`")), "{err}");
        }
    }

    #[test]
    fn headers_must_be_strings() {
        let extra = map(json!({"extra_headers": {"x": 1}}));
        assert!(check_extra_keys("[models.x]", &extra).is_err());
    }
}
