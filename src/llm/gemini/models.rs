//! What a `gemini/…` or `vertex_ai/…` model-list entry resolves to: the API it is spoken in,
//! its streaming URL and its credentials. AI Studio: `api_key` or `GEMINI_API_KEY`. Vertex:
//! `vertex_project` / `vertex_location` (else `VERTEXAI_PROJECT` / `VERTEXAI_LOCATION`, the
//! location defaulting to us-central1) and Google credentials; `claude-…` models there are
//! Anthropic's, spoken through the Anthropic provider at `:streamRawPredict`.

use std::sync::Arc;

use serde_json::Value;

use crate::config::ModelEntry;
use crate::llm::auth::google::GoogleAuth;
use crate::llm::model::{Api, Auth};
use crate::secrets::IssuedSecrets;

/// Google AI Studio, when a `gemini/` entry names no `api_base`.
pub const AI_STUDIO_BASE: &str = "https://generativelanguage.googleapis.com";
/// The variable a `gemini/` entry's key falls back to (LiteLLM's).
pub const KEY_VAR: &str = "GEMINI_API_KEY";
const DEFAULT_LOCATION: &str = "us-central1";
const STREAM_SUFFIX: &str = ":streamGenerateContent?alt=sse";

/// The model's own URL (`models.get`), for `triage check`.
pub fn model_url(endpoint: &str) -> Option<&str> {
    endpoint.strip_suffix(STREAM_SUFFIX)
}

/// The Vertex AI base of a location: regional hosts, except `global`.
fn vertex_base(location: &str) -> String {
    if location == "global" {
        "https://aiplatform.googleapis.com".into()
    } else {
        format!("https://{location}-aiplatform.googleapis.com")
    }
}

/// (api, streaming URL, auth) of an entry with provider `provider` (`gemini` or `vertex_ai`).
pub fn resolve(
    provider: &str,
    name: &str,
    api_base: Option<&str>,
    entry: &ModelEntry,
    issued: &IssuedSecrets,
) -> Result<(Api, String, Auth), String> {
    let env = |var: &str| std::env::var(var).ok().filter(|v| !v.trim().is_empty());
    let extra = |k: &str| {
        entry
            .extra
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if provider == "gemini" {
        let key = entry
            .api_key
            .clone()
            .or_else(|| env(KEY_VAR))
            .ok_or_else(|| format!("gemini/ models need api_key or {KEY_VAR}"))?;
        // A base written with its version (`…/v1beta`) is taken as meant.
        let base = api_base
            .unwrap_or(AI_STUDIO_BASE)
            .trim_end_matches("/v1beta");
        return Ok((
            Api::GeminiGenerate,
            format!("{base}/v1beta/models/{name}{STREAM_SUFFIX}"),
            Auth::GoogleApiKey(key),
        ));
    }
    if entry.api_key.is_some() {
        return Err(
            "vertex_ai/ models authenticate with Google credentials (vertex_credentials, \
                    GOOGLE_APPLICATION_CREDENTIALS or workload identity), not api_key"
                .into(),
        );
    }
    let project = extra("vertex_project")
        .or_else(|| env("VERTEXAI_PROJECT"))
        .ok_or("vertex_ai/ models need vertex_project (or VERTEXAI_PROJECT)")?;
    let location = extra("vertex_location")
        .or_else(|| env("VERTEXAI_LOCATION"))
        .unwrap_or_else(|| DEFAULT_LOCATION.to_owned());
    let base = api_base.map_or_else(|| vertex_base(&location), str::to_owned);
    let auth = GoogleAuth::resolve(extra("vertex_credentials").as_deref(), issued)?;
    let models = format!("{base}/v1/projects/{project}/locations/{location}/publishers");
    let (api, url) = if name.starts_with("claude") {
        (
            Api::AnthropicMessages,
            format!("{models}/anthropic/models/{name}:streamRawPredict"),
        )
    } else {
        (
            Api::GeminiGenerate,
            format!("{models}/google/models/{name}{STREAM_SUFFIX}"),
        )
    };
    Ok((api, url, Auth::Google(Arc::new(auth))))
}

#[cfg(test)]
mod tests {
    use crate::llm::model::Api;

    fn registry(toml: &str) -> Result<crate::llm::ModelRegistry, String> {
        let s = crate::config::Settings::from_toml(toml).map_err(|e| e.to_string())?;
        crate::llm::ModelRegistry::from_settings(&s).map_err(|e| e.to_string())
    }

    #[test]
    fn entries_resolve_to_their_urls() {
        let r = registry(
            "[models.g]\nmodel = \"gemini/gemini-2.5-flash\"\napi_key = \"k\"\n[models.v]\nmodel = \"vertex_ai/gemini-2.5-pro\"\nvertex_project = \"p\"\nvertex_location = \"europe-west4\"\nvertex_credentials = \"{\\\"type\\\": \\\"external_account\\\"}\"\n",
        );
        let err = r.unwrap_err();
        assert!(
            err.contains("model 'v'") && err.contains("external_account"),
            "{err}"
        );
        let r =
            registry("[models.g]\nmodel = \"gemini/gemini-2.5-flash\"\napi_key = \"k\"\n").unwrap();
        let g = r.resolve(Some("g")).unwrap();
        assert_eq!(g.api, Api::GeminiGenerate);
        assert_eq!(
            g.endpoint,
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(g.max_output_tokens, 65_536);
        let err = registry("[models.v]\nmodel = \"vertex_ai/gemini-2.5-pro\"\n").unwrap_err();
        assert!(err.contains("vertex_project"), "{err}");
        let err = registry("[models.v]\nmodel = \"vertex_ai/gemini-2.5-pro\"\nvertex_project = \"p\"\napi_key = \"k\"\n").unwrap_err();
        assert!(err.contains("not api_key"), "{err}");
        let err = registry("[models.g]\nmodel = \"gemini/gemini-2.5-pro\"\napi_key = \"k\"\nvertex_location = \"x\"\n").unwrap_err();
        assert!(err.contains("`vertex_location` is for vertex_ai/"), "{err}");
    }
}
