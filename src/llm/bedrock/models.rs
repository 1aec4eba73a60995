//! What a `bedrock/…` entry resolves to: `bedrock/<model id>` or LiteLLM's
//! `bedrock/converse/<model id>` (foundation model ids, inference profile ids such as
//! `us.anthropic.claude-…-v1:0`, and ARNs), the region (`aws_region_name`, else `AWS_REGION`,
//! else `AWS_DEFAULT_REGION`), the runtime URL (`aws_bedrock_runtime_endpoint` or `api_base`
//! over the regional endpoint) and the credentials (see `auth.rs`).

use std::sync::Arc;

use aws_credential_types::Credentials;
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::config::ModelEntry;
use crate::llm::auth::aws::{AwsAuth, CredentialSource};
use crate::llm::model::Auth;
use crate::secrets::IssuedSecrets;

/// Bedrock API keys, as the AWS SDKs and LiteLLM read them.
pub const BEARER_VAR: &str = "AWS_BEARER_TOKEN_BEDROCK";
pub const REGION_VARS: &[&str] = &["AWS_REGION", "AWS_DEFAULT_REGION"];
const STREAM_SUFFIX: &str = "/converse-stream";

/// The model id as Bedrock's URL path takes it: one segment, everything but unreserved
/// characters percent-encoded (`:` of versioned ids, `/` of ARNs).
pub fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The runtime base the endpoint was built on, for `triage check`.
pub fn runtime_base(endpoint: &str) -> Option<&str> {
    endpoint
        .strip_suffix(STREAM_SUFFIX)?
        .rsplit_once("/model/")
        .map(|(base, _)| base)
}

/// (streaming URL, wire model id, auth) of a `bedrock/` entry; `name` is what follows the
/// prefix.
pub fn resolve(
    name: &str,
    api_base: Option<&str>,
    entry: &ModelEntry,
    issued: &IssuedSecrets,
    roots: &crate::runtime::trust::ExtraRoots,
) -> Result<(String, String, Auth), String> {
    let env = |var: &str| std::env::var(var).ok().filter(|v| !v.trim().is_empty());
    let extra = |k: &str| -> Result<Option<String>, String> {
        match entry.extra.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
            Some(_) => Err(format!("`{k}` must be a string")),
        }
    };
    let id = name.strip_prefix("converse/").unwrap_or(name);
    if id.is_empty() || id.starts_with("invoke/") {
        return Err(format!(
            "'bedrock/{name}': triage speaks Bedrock's Converse API; write bedrock/<model id> \
             (e.g. bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0)"
        ));
    }
    let region = match extra("aws_region_name")? {
        Some(r) => r,
        None => REGION_VARS.iter().find_map(|v| env(v)).ok_or_else(|| {
            "bedrock/ models need aws_region_name (or AWS_REGION / AWS_DEFAULT_REGION)".to_owned()
        })?,
    };
    if !region
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(format!("aws_region_name '{region}' is not a region name"));
    }
    let base = match extra("aws_bedrock_runtime_endpoint")?.or(api_base.map(str::to_owned)) {
        Some(b) => b.trim_end_matches('/').to_owned(),
        None => format!("https://bedrock-runtime.{region}.amazonaws.com"),
    };
    if reqwest::Url::parse(&base).map_or(true, |u| u.host_str().is_none()) {
        return Err(format!(
            "the Bedrock endpoint '{base}' is not an absolute URL"
        ));
    }
    let endpoint = format!("{base}/model/{}{STREAM_SUFFIX}", path_segment(id));
    let key_id = extra("aws_access_key_id")?;
    let secret = extra("aws_secret_access_key")?;
    let auth = match (&entry.api_key, key_id, secret) {
        // LiteLLM reads a bedrock entry's api_key as a Bedrock API key.
        (Some(token), _, _) if !token.trim().is_empty() => AwsAuth::Bearer(token.trim().into()),
        (_, Some(key_id), Some(secret)) => AwsAuth::SigV4 {
            region,
            source: CredentialSource::Static(Credentials::new(
                key_id,
                secret,
                extra("aws_session_token")?,
                None,
                "model entry",
            )),
        },
        (_, Some(_), None) | (_, None, Some(_)) => {
            return Err(
                "aws_access_key_id and aws_secret_access_key go together: set both or neither"
                    .into(),
            );
        }
        (_, None, None) => match (extra("aws_profile_name")?, env(BEARER_VAR)) {
            (None, Some(token)) => AwsAuth::Bearer(token),
            (profile, _) => AwsAuth::SigV4 {
                region,
                source: CredentialSource::Chain {
                    profile,
                    provider: OnceCell::new(),
                    issued: issued.clone(),
                    roots: roots.clone(),
                },
            },
        },
    };
    Ok((endpoint, id.to_owned(), Auth::Aws(Arc::new(auth))))
}

/// Claude on Bedrock (foundation ids, inference profiles, ARNs naming one).
pub fn is_claude(id: &str) -> bool {
    id.contains("anthropic.claude") || id.contains("claude-")
}

/// Models that take `cachePoint` blocks: Claude 3.5 Haiku, 3.7 Sonnet and the Claude 4
/// family, and Amazon Nova. Others (Claude 3.5 Sonnet among them) refuse the request.
pub fn supports_cache_points(id: &str) -> bool {
    let id = id.to_ascii_lowercase();
    [
        "claude-3-5-haiku",
        "claude-3-7-sonnet",
        "claude-sonnet-4",
        "claude-opus-4",
        "claude-haiku-4",
        "amazon.nova",
    ]
    .iter()
    .any(|m| id.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_are_one_encoded_segment() {
        assert_eq!(
            path_segment("us.anthropic.claude-3-7-sonnet-20250219-v1:0"),
            "us.anthropic.claude-3-7-sonnet-20250219-v1%3A0"
        );
        assert_eq!(
            path_segment("arn:aws:bedrock:us-east-1:1:inference-profile/x"),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx"
        );
        assert_eq!(
            runtime_base("https://h/model/a%3A0/converse-stream"),
            Some("https://h")
        );
    }

    /// The region names a host: path or host characters in it are refused, not sent.
    #[test]
    fn a_region_with_host_or_path_characters_is_refused() {
        for region in ["us-east-1.evil.com/x", "us-east-1/../x", "us east", "eu@h"] {
            let entry: ModelEntry = serde_json::from_value(serde_json::json!(
                {"model": "bedrock/x", "aws_region_name": region, "api_key": "k"}))
            .unwrap();
            let err = resolve("x", None, &entry, &Default::default(), &Default::default())
                .err()
                .unwrap_or_default();
            assert!(err.contains("is not a region name"), "{region}: {err}");
        }
    }

    #[test]
    fn cache_points_only_where_taken() {
        assert!(supports_cache_points(
            "us.anthropic.claude-sonnet-4-20250514-v1:0"
        ));
        assert!(supports_cache_points("amazon.nova-pro-v1:0"));
        assert!(!supports_cache_points(
            "anthropic.claude-3-5-sonnet-20240620-v1:0"
        ));
        assert!(!supports_cache_points("meta.llama3-3-70b-instruct-v1:0"));
    }
}
