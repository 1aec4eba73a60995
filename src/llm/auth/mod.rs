//! How a model's requests prove who sends them: the credential kinds of the providers, put on
//! a request with the model's `extra_headers`.

pub mod aws;
pub mod google;

use std::sync::Arc;

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
    Google(Arc<google::GoogleAuth>),
    /// AWS: SigV4 or a Bedrock bearer token, added per call by the provider.
    Aws(Arc<aws::AwsAuth>),
}

impl Auth {
    /// The key itself, for the secret masker; `None` for tokens fetched per call.
    pub fn key(&self) -> Option<&str> {
        match self {
            Auth::Bearer(k) | Auth::AzureKey(k) | Auth::AnthropicKey(k) | Auth::GoogleApiKey(k) => {
                Some(k)
            }
            Auth::None | Auth::Google(_) | Auth::Aws(_) => None,
        }
    }
}

impl Auth {
    /// Every secret the auth holds (the key, an AWS entry's secret keys), for the masker.
    pub fn secrets(&self) -> Vec<String> {
        match self {
            Auth::Aws(aws) => aws.secrets(),
            other => other.key().map(str::to_owned).into_iter().collect(),
        }
    }
}

/// The Anthropic API version every request with an Anthropic key names (the only stable one).
pub const ANTHROPIC_API_VERSION: &str = "2023-06-01";

impl Auth {
    /// The credential on a request, for the kinds that are headers; Google and AWS credentials
    /// are added per call by their provider.
    pub(crate) fn apply(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Auth::None => builder,
            Auth::Bearer(key) => builder.bearer_auth(key),
            Auth::AzureKey(key) => builder.header("api-key", key),
            Auth::AnthropicKey(key) => builder
                .header("x-api-key", key)
                .header("anthropic-version", ANTHROPIC_API_VERSION),
            Auth::GoogleApiKey(key) => builder.header("x-goog-api-key", key),
            Auth::Google(_) | Auth::Aws(_) => builder,
        }
    }
}
