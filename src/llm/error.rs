//! LLM failures, classified by what the caller must do about them.

use std::time::Duration;

use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("LLM rate limit exceeded (HTTP 429): {message}")]
    RateLimited {
        message: String,
        retry_after: Option<Duration>,
    },
    #[error(
        "LLM provider rejected the credentials of model '{model}' (HTTP {status}): {message}. \
         Check that model's api_key (or the variable it falls back to: OPENAI_API_KEY, \
         ANTHROPIC_API_KEY, AZURE_API_KEY, GEMINI_API_KEY, GOOGLE_APPLICATION_CREDENTIALS, the AWS \
         credentials or AWS_BEARER_TOKEN_BEDROCK for bedrock/ models, or its provider prefix's \
         key variable such as GROQ_API_KEY)"
    )]
    Auth {
        status: u16,
        model: String,
        message: String,
    },
    #[error("LLM provider answered 404 Not Found for {url}: {message}{hint}")]
    NotFound {
        url: String,
        message: String,
        hint: String,
    },
    #[error("LLM provider error (HTTP {status}): {message}")]
    Upstream {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("cannot reach the LLM at {endpoint}: {message}")]
    Connect { endpoint: String, message: String },
    #[error("LLM timed out: {0}")]
    Timeout(String),
    #[error("LLM stream broken: {0}")]
    Protocol(String),
    /// The provider sent more than triage holds for one call (a bad or hostile server).
    #[error("LLM response too large: {0}")]
    Oversized(String),
    #[error(
        "too many concurrent calls to model '{0}' (llm.max_concurrent_calls_per_model); retry shortly"
    )]
    Overloaded(String),
}

impl LlmError {
    /// Worth another attempt (before any output was received).
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::RateLimited { .. } | LlmError::Connect { .. } => true,
            LlmError::Upstream { status, .. } => matches!(status, 408 | 409 | 500..=599),
            _ => false,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } | LlmError::Upstream { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::Auth { .. } => "auth",
            LlmError::NotFound { .. } => "not_found",
            LlmError::Upstream { .. } => "upstream",
            LlmError::Connect { .. } => "connect",
            LlmError::Timeout(_) => "timeout",
            LlmError::Protocol(_) => "protocol",
            LlmError::Oversized(_) => "oversized",
            LlmError::Overloaded(_) => "overloaded",
        }
    }

    pub fn is_rate_limit(&self) -> bool {
        matches!(self, LlmError::RateLimited { .. })
    }

    pub fn is_auth(&self) -> bool {
        matches!(self, LlmError::Auth { .. })
    }

    /// A provider's error status for a call of `model` to `url`.
    pub(crate) fn from_status(
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
        model: &str,
        url: &str,
    ) -> LlmError {
        let message = error_message(body);
        // Google APIs say how long to wait in the body (`RetryInfo`), not in a header.
        let retry_after = retry_after.or_else(|| {
            serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| retry_info(v.get("error")?))
        });
        match status {
            401 | 403 => LlmError::Auth {
                status,
                model: model.to_owned(),
                message,
            },
            404 => LlmError::NotFound {
                url: url.to_owned(),
                message,
                hint: missing_v1_hint(url),
            },
            429 => LlmError::RateLimited {
                message,
                retry_after,
            },
            _ => LlmError::Upstream {
                status,
                message,
                retry_after,
            },
        }
    }
}

/// What to try after a 404, when the API base does not end in `/v1`.
pub fn missing_v1_hint(endpoint: &str) -> String {
    let base = endpoint
        .split('?')
        .next()
        .unwrap_or(endpoint)
        .trim_end_matches("/chat/completions");
    if base.ends_with("/v1")
        || base.ends_with("/v1/messages")
        || endpoint.contains("/openai/deployments/")
    {
        String::new()
    } else {
        format!("; most OpenAI-compatible servers serve under /v1: try api_base = \"{base}/v1\"")
    }
}

/// The provider's own message (`{"error":{"message":…}}`), else the body's start.
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .or_else(|| v.get("detail"))
            .and_then(|m| m.as_str().map(str::to_owned))
    });
    match message {
        // A provider message is one sentence or a few; never relay megabytes of it.
        Some(m) if m.len() > 2000 => format!("{}…", m.chars().take(2000).collect::<String>()),
        Some(m) => m,
        None if body.trim().is_empty() => "(empty response body)".into(),
        None => body.chars().take(500).collect(),
    }
}

/// The wait a Google error asks for (`details[].retryDelay` of a `RetryInfo`, e.g. "30s").
pub fn retry_info(error: &Value) -> Option<Duration> {
    error
        .get("details")?
        .as_array()?
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| {
            d.get("retryDelay")?
                .as_str()?
                .strip_suffix('s')?
                .parse::<f64>()
                .ok()
        })
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(3600.0)))
}

pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_statuses() {
        let of = |status| LlmError::from_status(status, "", None, "m", "http://h/chat/completions");
        assert!(of(429).is_rate_limit());
        assert!(of(401).is_auth());
        assert!(of(401).to_string().contains("model 'm'"));
        assert!(
            of(404)
                .to_string()
                .contains("try api_base = \"http://h/v1\"")
        );
        assert!(of(503).is_retryable());
        assert!(!of(400).is_retryable());
    }

    #[test]
    fn extracts_provider_messages() {
        assert_eq!(
            error_message(r#"{"error":{"message":"slow down"}}"#),
            "slow down"
        );
        assert_eq!(error_message(r#"{"error":"plain"}"#), "plain");
        assert_eq!(error_message("oops"), "oops");
    }
}
