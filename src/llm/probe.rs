//! `triage check`'s model probe: one cheap real request per model, classified into what the
//! user must change. `GET {api_base}/models` is free and served by OpenAI, vLLM, llama.cpp,
//! Ollama and LiteLLM; when it is missing, or does not list the model, a one-token completion
//! decides. Azure deployments are probed with the completion directly.

use std::time::Duration;

use serde_json::{Value, json};

use super::error::error_message;
use super::model::ModelConfig;

#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    Reachable,
    AuthRefused { status: u16, message: String },
    NotFound { url: String, hint: String },
    WrongModel { served: Vec<String> },
    Unreachable(String),
    Failed(String),
}

impl Probe {
    pub fn is_ok(&self) -> bool {
        *self == Probe::Reachable
    }

    pub fn describe(&self, model: &ModelConfig) -> String {
        match self {
            Probe::Reachable => "reachable".into(),
            Probe::AuthRefused { status, message } => format!(
                "auth refused (HTTP {status}: {message}): check the api_key of model '{}' \
                 (or the variable it falls back to: OPENAI_API_KEY, ANTHROPIC_API_KEY, AZURE_API_KEY; \
                 for bedrock/ models the AWS credentials or AWS_BEARER_TOKEN_BEDROCK)",
                model.key
            ),
            Probe::NotFound { url, hint } => format!("not found: {url} answered 404{hint}"),
            Probe::WrongModel { served } => format!(
                "wrong model name: the server does not serve '{}'; it serves {}",
                model.wire_model,
                if served.is_empty() {
                    "no model".to_owned()
                } else {
                    served.join(", ")
                }
            ),
            Probe::Unreachable(e) => format!("unreachable: {e}"),
            Probe::Failed(e) => format!("failed: {e}"),
        }
    }
}

/// The chat-completions (or Anthropic messages) URL with its path end replaced by `models`.
fn models_url(endpoint: &str) -> Option<String> {
    endpoint
        .strip_suffix("/chat/completions")
        .or_else(|| endpoint.strip_suffix("/messages"))
        .map(|base| format!("{base}/models"))
}

fn request(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    model: &ModelConfig,
) -> reqwest::RequestBuilder {
    model.authorize(http.request(method, url))
}

/// Probes one model within `timeout` per request.
pub async fn probe(http: &reqwest::Client, model: &ModelConfig, timeout: Duration) -> Probe {
    if let super::model::Auth::Aws(auth) = &model.auth {
        // Bedrock: a one-token ConverseStream answer, signed like every call.
        let body = json!({"messages": [{"role": "user", "content": [{"text": "Reply with OK."}]}],
                          "inferenceConfig": {"maxTokens": 1}})
        .to_string();
        let headers = match auth.signer(&model.key).await {
            Ok(signer) => signer.headers(&model.endpoint, body.as_bytes()),
            Err(e) => Err(e),
        };
        let headers = match headers {
            Ok(h) => h,
            Err(e) => return Probe::Failed(e.to_string()),
        };
        let mut post = http
            .post(&model.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        for (name, value) in &headers {
            post = post.header(name.as_str(), value.as_str());
        }
        return probe_direct(http, model, post.body(body), timeout).await;
    }
    if let Some(url) = super::gemini::models::model_url(&model.endpoint) {
        return probe_direct(http, model, http.get(url), timeout).await;
    }
    if let Some(base) = model.endpoint.strip_suffix(":streamRawPredict") {
        // Claude on Vertex: a one-token answer, not streamed.
        let body = json!({"anthropic_version": super::google::VERTEX_ANTHROPIC_VERSION,
            "max_tokens": 1, "messages": [{"role": "user", "content": "Reply with OK."}]});
        let post = http
            .post(format!("{base}:rawPredict"))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        return probe_direct(http, model, post, timeout).await;
    }
    let azure = model.endpoint.contains("/openai/deployments/");
    let listed = match models_url(&model.endpoint).filter(|_| !azure) {
        Some(url) => list_models(http, model, &url, timeout).await,
        None => None,
    };
    match listed {
        Some(Ok(ids)) if serves(&ids, &model.wire_model) => Probe::Reachable,
        // Not listed: some servers (llama.cpp) answer any name, so the completion decides.
        Some(Ok(ids)) => match complete_one_token(http, model, timeout).await {
            Probe::NotFound { .. } => Probe::WrongModel { served: ids },
            other => other,
        },
        Some(Err(decided)) => decided,
        None => complete_one_token(http, model, timeout).await,
    }
}

/// One request that says whether the credentials and the name are good: Gemini's
/// `models.get` (free), Claude on Vertex's or Bedrock's one-token answer; with the model's
/// Google key or token, or already signed.
async fn probe_direct(
    http: &reqwest::Client,
    model: &ModelConfig,
    builder: reqwest::RequestBuilder,
    timeout: Duration,
) -> Probe {
    let mut builder = model.authorize(builder).timeout(timeout);
    if let super::model::Auth::Google(auth) = &model.auth {
        match auth.token(http, &model.key).await {
            Ok(token) => builder = builder.bearer_auth(token),
            Err(e) => return Probe::Failed(e.to_string()),
        }
    }
    let response = match builder.send().await {
        Ok(r) => r,
        Err(e) => return Probe::Unreachable(format!("{}: {e}", model.endpoint)),
    };
    let status = response.status().as_u16();
    let message = error_message(&response.text().await.unwrap_or_default());
    match status {
        200..=299 => Probe::Reachable,
        // Google answers a bad API key with 400 INVALID_ARGUMENT "API key not valid".
        401 | 403 => Probe::AuthRefused { status, message },
        400 if message.contains("API key") => Probe::AuthRefused { status, message },
        404 => Probe::WrongModel { served: Vec::new() },
        _ => Probe::Failed(format!("HTTP {status}: {message}")),
    }
}

fn serves(ids: &[String], name: &str) -> bool {
    // Ollama lists `llama3:latest` and answers to `llama3`.
    ids.iter()
        .any(|id| id == name || id.strip_suffix(":latest") == Some(name))
}

/// `Some(Ok(ids))`: listed; `Some(Err(probe))`: decided; `None`: no list here, try a completion.
async fn list_models(
    http: &reqwest::Client,
    model: &ModelConfig,
    url: &str,
    timeout: Duration,
) -> Option<Result<Vec<String>, Probe>> {
    let sent = request(http, reqwest::Method::GET, url, model)
        .timeout(timeout)
        .send()
        .await;
    let response = match sent {
        Ok(r) => r,
        Err(e) => return Some(Err(Probe::Unreachable(format!("{url}: {e}")))),
    };
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    match status {
        200..=299 => {
            let ids = serde_json::from_str::<Value>(&body).ok().and_then(|v| {
                v.get("data")?.as_array().map(|data| {
                    data.iter()
                        .filter_map(|m| m.get("id")?.as_str().map(str::to_owned))
                        .collect::<Vec<_>>()
                })
            });
            ids.map(Ok)
        }
        401 | 403 => Some(Err(Probe::AuthRefused {
            status,
            message: error_message(&body),
        })),
        _ => None,
    }
}

async fn complete_one_token(
    http: &reqwest::Client,
    model: &ModelConfig,
    timeout: Duration,
) -> Probe {
    let body = json!({
        "model": model.wire_model,
        "messages": [{"role": "user", "content": "Reply with OK."}],
        "max_tokens": 1,
        "stream": false,
    });
    let sent = request(http, reqwest::Method::POST, &model.endpoint, model)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .timeout(timeout)
        .send()
        .await;
    let response = match sent {
        Ok(r) => r,
        Err(e) if e.is_timeout() => {
            return Probe::Unreachable(format!("no answer within {} s", timeout.as_secs_f64()));
        }
        Err(e) => return Probe::Unreachable(format!("{}: {e}", model.endpoint)),
    };
    let status = response.status().as_u16();
    let message = error_message(&response.text().await.unwrap_or_default());
    match status {
        200..=299 => Probe::Reachable,
        401 | 403 => Probe::AuthRefused { status, message },
        404 => Probe::NotFound {
            url: model.endpoint.clone(),
            hint: super::error::missing_v1_hint(&model.endpoint),
        },
        // Reachable and authorised; a reasoning model may refuse `max_tokens`, which is fine.
        400 if !mentions_unknown_model(&message) => Probe::Reachable,
        400 => Probe::WrongModel { served: Vec::new() },
        _ => Probe::Failed(format!("HTTP {status}: {message}")),
    }
}

fn mentions_unknown_model(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("model")
        && [
            "not exist",
            "not found",
            "unknown",
            "does not",
            "invalid model",
        ]
        .iter()
        .any(|p| m.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_at_a_missing_v1_only_when_it_is_missing() {
        assert!(
            super::super::error::missing_v1_hint("http://h:8000/chat/completions")
                .contains("http://h:8000/v1")
        );
        assert_eq!(
            super::super::error::missing_v1_hint("http://h:8000/v1/chat/completions"),
            ""
        );
    }

    #[test]
    fn ollama_names_match_their_latest_tag() {
        assert!(serves(&["llama3:latest".into()], "llama3"));
        assert!(!serves(&["qwen".into()], "llama3"));
    }

    #[test]
    fn models_url_replaces_the_chat_path() {
        assert_eq!(
            models_url("http://h/v1/chat/completions").as_deref(),
            Some("http://h/v1/models")
        );
        assert_eq!(
            models_url("https://api.anthropic.com/v1/messages").as_deref(),
            Some("https://api.anthropic.com/v1/models")
        );
    }
}
