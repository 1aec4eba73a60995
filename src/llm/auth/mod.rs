//! How a model's requests prove who sends them: the credential kinds of the providers, put on
//! a request with the model's `extra_headers`.

use std::sync::Arc;

use super::registry::ModelConfig;

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
    /// AWS: SigV4 or a Bedrock bearer token, added per call by the provider.
    Aws(Arc<super::bedrock::auth::AwsAuth>),
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

impl ModelConfig {
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
            Auth::Google(_) | Auth::Aws(_) => builder,
        };
        for (name, value) in &self.extra_headers {
            builder = builder.header(name, value);
        }
        builder
    }
}
