//! Google OAuth access tokens for Vertex AI, from a service-account key (a JWT signed RS256
//! with the key, exchanged at the key's `token_uri`) or from the metadata server (GCE, GKE
//! workload identity). A token is reused until a minute before it expires.
//!
//! Signed with `ring`, which triage already links for TLS: the whole flow is one JWT and one
//! POST, where `gcp_auth` or `yup-oauth2` would add their own HTTP and TLS stacks.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use serde_json::{Value, json};

use crate::llm::error::LlmError;
use crate::secrets::IssuedSecrets;

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The metadata server's host; `GCE_METADATA_HOST` overrides it, as in Google's libraries.
const METADATA_HOST: &str = "metadata.google.internal";
const METADATA_HOST_VAR: &str = "GCE_METADATA_HOST";
/// A token this close to its expiry is refreshed before use.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

enum Source {
    ServiceAccount {
        email: String,
        key: Box<RsaKeyPair>,
        token_uri: String,
    },
    Metadata {
        url: String,
    },
}

pub struct GoogleAuth {
    source: Source,
    cached: tokio::sync::Mutex<Option<(String, Instant)>>,
    /// The application's registry, where every token fetched is recorded for the maskers.
    issued: IssuedSecrets,
}

impl std::fmt::Debug for GoogleAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Source::ServiceAccount { email, .. } => {
                write!(f, "GoogleAuth(service account {email})")
            }
            Source::Metadata { url } => write!(f, "GoogleAuth(metadata server {url})"),
        }
    }
}

impl GoogleAuth {
    /// The credentials of a Vertex entry: `vertex_credentials` (a key file's path or its JSON),
    /// else `GOOGLE_APPLICATION_CREDENTIALS`, else the metadata server.
    pub fn resolve(
        vertex_credentials: Option<&str>,
        issued: &IssuedSecrets,
    ) -> Result<GoogleAuth, String> {
        let from_env = std::env::var("GOOGLE_APPLICATION_CREDENTIALS")
            .ok()
            .filter(|v| !v.trim().is_empty());
        let (text, origin) = match (vertex_credentials, from_env) {
            (Some(c), _) if c.trim_start().starts_with('{') => {
                (c.to_owned(), "vertex_credentials".to_owned())
            }
            (Some(path), _) => (
                read(path, "vertex_credentials")?,
                format!("vertex_credentials ({path})"),
            ),
            (None, Some(path)) => (
                read(&path, "GOOGLE_APPLICATION_CREDENTIALS")?,
                format!("GOOGLE_APPLICATION_CREDENTIALS ({path})"),
            ),
            (None, None) => {
                let host = std::env::var(METADATA_HOST_VAR)
                    .ok()
                    .filter(|h| !h.trim().is_empty())
                    .unwrap_or_else(|| METADATA_HOST.to_owned());
                let url = format!(
                    "http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
                );
                return Ok(GoogleAuth::new(Source::Metadata { url }, issued));
            }
        };
        Self::service_account(&text, issued).map_err(|e| format!("{origin}: {e}"))
    }

    fn new(source: Source, issued: &IssuedSecrets) -> GoogleAuth {
        GoogleAuth {
            source,
            cached: tokio::sync::Mutex::new(None),
            issued: issued.clone(),
        }
    }

    fn service_account(text: &str, issued: &IssuedSecrets) -> Result<GoogleAuth, String> {
        let json: Value =
            serde_json::from_str(text).map_err(|e| format!("not a JSON key file: {e}"))?;
        let field = |k: &str| {
            json.get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("the key file has no `{k}`"))
        };
        match json.get("type").and_then(Value::as_str) {
            Some("service_account") => {}
            other => {
                return Err(format!(
                    "credentials of type {other:?} are not supported; use a service-account \
                     key file or workload identity"
                ));
            }
        }
        let pem = field("private_key")?;
        let der = pem_body(&pem).ok_or("`private_key` is not a PEM private key")?;
        let key = RsaKeyPair::from_pkcs8(&der)
            .map_err(|e| format!("`private_key` is not a PKCS#8 RSA key: {e}"))?;
        Ok(GoogleAuth::new(
            Source::ServiceAccount {
                email: field("client_email")?,
                key: Box::new(key),
                token_uri: json
                    .get("token_uri")
                    .and_then(Value::as_str)
                    .unwrap_or("https://oauth2.googleapis.com/token")
                    .to_owned(),
            },
            issued,
        ))
    }

    /// A valid access token, fetched when none is cached or the cached one is about to expire.
    /// `model` names the model the token is for in errors.
    pub async fn token(&self, http: &reqwest::Client, model: &str) -> Result<String, LlmError> {
        let mut cached = self.cached.lock().await;
        if let Some((token, expires)) = cached.as_ref()
            && Instant::now() + REFRESH_MARGIN < *expires
        {
            return Ok(token.clone());
        }
        let (token, lifetime) = self.fetch(http, model).await?;
        self.issued.remember(&token);
        *cached = Some((token.clone(), Instant::now() + lifetime));
        Ok(token)
    }

    async fn fetch(
        &self,
        http: &reqwest::Client,
        model: &str,
    ) -> Result<(String, Duration), LlmError> {
        let (url, request) = match &self.source {
            Source::ServiceAccount {
                email,
                key,
                token_uri,
            } => {
                let assertion = signed_jwt(email, key, token_uri)?;
                let form = format!(
                    "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
                );
                (
                    token_uri.as_str(),
                    http.post(token_uri)
                        .header(
                            reqwest::header::CONTENT_TYPE,
                            "application/x-www-form-urlencoded",
                        )
                        .body(form),
                )
            }
            Source::Metadata { url } => (
                url.as_str(),
                http.get(url).header("Metadata-Flavor", "Google"),
            ),
        };
        let failed = |message: String| LlmError::Auth {
            status: 401,
            model: model.to_owned(),
            message: format!("cannot get an access token from {url}: {message}"),
        };
        let response = request
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(failed(format!(
                "HTTP {}: {}",
                status.as_u16(),
                super::super::error::error_message(&body)
            )));
        }
        let json: Value = serde_json::from_str(&body).map_err(|e| failed(e.to_string()))?;
        let token = json
            .get("access_token")
            .and_then(Value::as_str)
            .ok_or_else(|| failed("the answer has no access_token".into()))?;
        let lifetime = json
            .get("expires_in")
            .and_then(Value::as_u64)
            .unwrap_or(300);
        Ok((token.to_owned(), Duration::from_secs(lifetime)))
    }
}

fn read(path: &str, key: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{key}: cannot read {path}: {e}"))
}

/// The DER bytes of a PEM block.
fn pem_body(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----") && !l.is_empty())
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

/// The RS256 JWT a service account exchanges for an access token (Google's
/// "OAuth 2.0 for server to server applications").
fn signed_jwt(email: &str, key: &RsaKeyPair, audience: &str) -> Result<String, LlmError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "typ": "JWT"}).to_string());
    let claims = URL_SAFE_NO_PAD.encode(
        json!({"iss": email, "scope": SCOPE, "aud": audience, "iat": now, "exp": now + 3600})
            .to_string(),
    );
    let signing_input = format!("{header}.{claims}");
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| LlmError::Protocol("cannot sign the service-account JWT".into()))?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_credentials_are_named() {
        let err = GoogleAuth::resolve(
            Some("{\"type\": \"authorized_user\"}"),
            &IssuedSecrets::default(),
        )
        .unwrap_err();
        assert!(
            err.contains("vertex_credentials") && err.contains("authorized_user"),
            "{err}"
        );
        let err = GoogleAuth::resolve(Some("/nonexistent/key.json"), &IssuedSecrets::default())
            .unwrap_err();
        assert!(err.contains("cannot read /nonexistent/key.json"), "{err}");
        let err = GoogleAuth::resolve(Some(
            "{\"type\": \"service_account\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END PRIVATE KEY-----\"}",
        ), &IssuedSecrets::default())
        .unwrap_err();
        assert!(err.contains("PKCS#8"), "{err}");
    }
}
