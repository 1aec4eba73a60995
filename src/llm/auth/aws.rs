//! How a Bedrock call proves who sends it: a bearer token (`AWS_BEARER_TOKEN_BEDROCK`, no
//! SigV4), or SigV4 with credentials from the model entry's keys or the standard AWS chain
//! (environment keys, profile, web identity for IRSA and EKS pod identity, container and
//! instance metadata). Signing is aws-sigv4's and the chain is aws-config's: never ours.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use tokio::sync::OnceCell;

use crate::llm::error::LlmError;
use crate::secrets::IssuedSecrets;

/// The service name Bedrock's runtime signs under.
const SIGNING_NAME: &str = "bedrock";

pub enum AwsAuth {
    /// `Authorization: Bearer` with a Bedrock API key.
    Bearer(String),
    SigV4 {
        region: String,
        source: CredentialSource,
    },
}

pub enum CredentialSource {
    /// The entry's own `aws_access_key_id` / `aws_secret_access_key` (/ `aws_session_token`).
    Static(Credentials),
    /// The AWS default chain, optionally for a named profile; built on first use (it may
    /// read files and call STS or the metadata service) and then cached, credentials and all.
    Chain {
        profile: Option<String>,
        provider: OnceCell<Option<SharedCredentialsProvider>>,
        /// The application's registry, where the credentials the chain obtains are recorded.
        issued: IssuedSecrets,
        /// What the chain's own HTTPS client trusts besides the system's roots.
        roots: crate::runtime::trust::ExtraRoots,
    },
}

impl std::fmt::Debug for AwsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AwsAuth::Bearer(_) => f.write_str("AwsAuth::Bearer(..)"),
            AwsAuth::SigV4 { region, source } => {
                let source = match source {
                    CredentialSource::Static(_) => "entry keys".to_owned(),
                    CredentialSource::Chain { profile, .. } => {
                        format!("default chain, profile {profile:?}")
                    }
                };
                write!(f, "AwsAuth::SigV4 {{ region: {region}, {source} }}")
            }
        }
    }
}

/// What one attempt signs with: resolved before the attempt, applied to each request.
pub enum Signer {
    Bearer(String),
    SigV4 {
        region: String,
        credentials: Credentials,
    },
}

impl AwsAuth {
    /// The secrets the masker must know of: the bearer token, the entry's secret keys.
    pub fn secrets(&self) -> Vec<String> {
        match self {
            AwsAuth::Bearer(token) => vec![token.clone()],
            AwsAuth::SigV4 {
                source: CredentialSource::Static(c),
                ..
            } => std::iter::once(c.secret_access_key().to_owned())
                .chain(c.session_token().map(str::to_owned))
                .collect(),
            AwsAuth::SigV4 { .. } => Vec::new(),
        }
    }

    /// The credentials for the next attempt (the chain refreshes expiring ones itself).
    pub async fn signer(&self, model: &str) -> Result<Signer, LlmError> {
        let (region, source) = match self {
            AwsAuth::Bearer(token) => return Ok(Signer::Bearer(token.clone())),
            AwsAuth::SigV4 { region, source } => (region, source),
        };
        let credentials = match source {
            CredentialSource::Static(c) => c.clone(),
            CredentialSource::Chain {
                profile,
                provider,
                issued: registry,
                roots,
            } => {
                let no_credentials = |message: String| LlmError::Auth {
                    status: 401,
                    model: model.to_owned(),
                    message: format!("no AWS credentials: {message}"),
                };
                let Some(provider) = provider
                    .get_or_init(|| default_chain(region.clone(), profile.clone(), roots))
                    .await
                else {
                    return Err(no_credentials("the AWS chain has no source".into()));
                };
                let issued = provider
                    .provide_credentials()
                    .await
                    .map_err(|e| no_credentials(crate::llm::error::error_chain(&e)))?;
                // STS or the metadata service may have just issued these: masked from now on.
                registry.remember(issued.secret_access_key());
                if let Some(token) = issued.session_token() {
                    registry.remember(token);
                }
                issued
            }
        };
        Ok(Signer::SigV4 {
            region: region.clone(),
            credentials,
        })
    }
}

/// aws-config's default chain. Its own HTTP client (for STS, SSO-less web identity, the
/// container and instance metadata endpoints) runs on rustls with ring, as ours does: no
/// aws-lc in the build; it trusts `roots` as every outbound client does.
async fn default_chain(
    region: String,
    profile: Option<String>,
    roots: &crate::runtime::trust::ExtraRoots,
) -> Option<SharedCredentialsProvider> {
    use aws_smithy_http_client::{Builder, tls};
    let mut trust = tls::TrustStore::default();
    if !roots.is_empty() {
        trust = trust.with_pem_certificate(roots.pem());
    }
    let context = tls::TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .ok()?;
    let http = Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .tls_context(context)
        .build_https();
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(http)
        .region(aws_config::Region::new(region));
    if let Some(profile) = profile {
        loader = loader.profile_name(profile);
    }
    loader.load().await.credentials_provider()
}

impl Signer {
    /// The headers that authorize a POST of `body` to `url` (already percent-encoded: the
    /// signature covers the path as sent, encoded once more as SigV4 asks of every service but
    /// S3).
    pub fn headers(&self, url: &str, body: &[u8]) -> Result<Vec<(String, String)>, LlmError> {
        let (region, credentials) = match self {
            Signer::Bearer(token) => {
                return Ok(vec![("authorization".into(), format!("Bearer {token}"))]);
            }
            Signer::SigV4 {
                region,
                credentials,
            } => (region, credentials),
        };
        let identity = credentials.clone().into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name(SIGNING_NAME)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| LlmError::Protocol(format!("cannot sign the request: {e}")))?
            .into();
        let headers = [("content-type", "application/json")];
        let request =
            SignableRequest::new("POST", url, headers.into_iter(), SignableBody::Bytes(body))
                .map_err(|e| LlmError::Protocol(format!("cannot sign the request: {e}")))?;
        let (instructions, _) = sign(request, &params)
            .map_err(|e| LlmError::Protocol(format!("cannot sign the request: {e}")))?
            .into_parts();
        Ok(instructions
            .headers()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256};

    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn hmac(key: &[u8], data: &str) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
        mac.update(data.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// The signature is recomputed here from AWS's SigV4 specification, not with aws-sigv4:
    /// for an inference-profile ARN (`:` and `/` in the model id, sent percent-encoded in one
    /// path segment) the canonical URI encodes the path once more, as Bedrock checks it.
    #[test]
    fn signatures_follow_the_specification_for_arn_model_ids() {
        let url = format!(
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/{}/converse-stream",
            crate::llm::bedrock::models::path_segment(
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x"
            )
        );
        let signer = Signer::SigV4 {
            region: "us-east-1".into(),
            credentials: Credentials::new("AKIDTEST", "secret-test", None, None, "test"),
        };
        let body = br#"{"messages":[]}"#;
        let headers = signer.headers(&url, body).unwrap();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let amz_date = get("x-amz-date");
        let date = &amz_date[..8];
        let authorization = get("authorization");
        let canonical_request = format!(
            "POST\n/model/arn%253Aaws%253Abedrock%253Aus-east-1%253A123456789012%253Ainference-profile%252Fus.anthropic.claude-x/converse-stream\n\n\
             content-type:application/json\nhost:bedrock-runtime.us-east-1.amazonaws.com\nx-amz-date:{amz_date}\n\n\
             content-type;host;x-amz-date\n{}",
            hex(&Sha256::digest(body))
        );
        let scope = format!("{date}/us-east-1/bedrock/aws4_request");
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            hex(&Sha256::digest(canonical_request.as_bytes()))
        );
        let key = ["us-east-1", "bedrock", "aws4_request"]
            .iter()
            .fold(hmac(b"AWS4secret-test", date), |key, part| hmac(&key, part));
        let expected = format!(
            "AWS4-HMAC-SHA256 Credential=AKIDTEST/{scope}, SignedHeaders=content-type;host;x-amz-date, Signature={}",
            hex(&hmac(&key, &string_to_sign))
        );
        assert_eq!(authorization, expected);
    }
}
