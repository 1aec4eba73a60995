//! Every credential triage knows, gathered once at start-up for the secret masker: whatever
//! configured it (the config file, the model list file, HolmesGPT's or a provider's
//! environment variables, a credentials file a variable points at).
//!
//! Masking is a net, not a wall: it replaces exact copies in tool output and errors, and a
//! transformed copy (reversed, base64, split) passes. Keeping tools from reading triage's
//! secrets at all is the sandbox's job.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::config::Settings;
use crate::llm::ModelRegistry;

/// Provider and triage variables that hold credentials, whatever their values look like.
const CREDENTIAL_ENV_VARS: &[&str] = &[
    "OPENAI_API_KEY",
    "AZURE_API_KEY",
    "AZURE_AD_TOKEN",
    "AZURE_CLIENT_SECRET",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "XAI_API_KEY",
    "HF_TOKEN",
    "API_KEY",
    "HOLMES_API_KEY",
    "HOLMES_APPROVAL_SIGNING_KEY",
];

/// Variables naming a credentials file (or holding its JSON), as Google's SDKs and litellm
/// read them.
pub const CREDENTIAL_FILE_ENV_VARS: &[&str] =
    &["GOOGLE_APPLICATION_CREDENTIALS", "VERTEXAI_CREDENTIALS"];

/// Fields of a service-account or OAuth credentials file that are secret.
const SECRET_JSON_FIELDS: &[&str] = &[
    "private_key",
    "private_key_id",
    "client_secret",
    "refresh_token",
];

/// A credentials file is a few KiB; anything larger is not one.
const MAX_CREDENTIALS_FILE: u64 = 1024 * 1024;

/// Everything that must never reach the LLM or a client.
pub fn known_secrets(settings: &Settings, models: &ModelRegistry) -> Vec<String> {
    let mut secrets = settings.security.secrets.clone();
    secrets.extend(
        settings
            .security
            .secret_env_vars
            .iter()
            .filter_map(|var| std::env::var(var).ok()),
    );
    secrets.extend(settings.server.all_api_keys());
    secrets.extend(settings.approvals.signing_key.clone());
    // Resolved models carry every key they use, whichever source configured them.
    secrets.extend(models.credentials());
    secrets.extend(settings.models.values().filter_map(|m| m.api_key.clone()));
    secrets.extend(settings.env_model.as_ref().and_then(|m| m.api_key.clone()));
    for value in settings.toolsets.prometheus.headers.values() {
        secrets.extend(header_secrets(value));
    }
    secrets.extend(env_secrets(std::env::vars()));
    for var in CREDENTIAL_FILE_ENV_VARS {
        if let Ok(value) = std::env::var(var) {
            secrets.extend(credentials_file_secrets(&value));
        }
    }
    secrets
}

/// A name that says its value is a credential (`*_API_KEY`, `*_TOKEN`, `*_PASSWORD`, …).
pub fn is_credential_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    [
        "API_KEY",
        "APIKEY",
        "SECRET",
        "TOKEN",
        "PASSWORD",
        "PASSWD",
        "PRIVATE_KEY",
        "ACCESS_KEY",
    ]
    .iter()
    .any(|marker| name.contains(marker))
}

/// Values of the known credential variables, and of any variable whose name says it holds a
/// credential unless the value is plainly not one (a number, a flag, a path).
fn env_secrets(vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    vars.filter(|(name, value)| {
        CREDENTIAL_ENV_VARS.contains(&name.as_str())
            || (is_credential_name(name) && looks_like_a_secret(value))
    })
    .map(|(_, value)| value)
    .collect()
}

fn looks_like_a_secret(value: &str) -> bool {
    let value = value.trim();
    value.len() >= 8
        && !value.starts_with('/')
        && value.parse::<f64>().is_err()
        && !["true", "false", "yes", "no"].contains(&value.to_ascii_lowercase().as_str())
}

/// A header value, its credential without the scheme (`Bearer x` → `x`), and the password of
/// `Basic` credentials.
fn header_secrets(value: &str) -> Vec<String> {
    let mut out = vec![value.to_owned()];
    if let Some((scheme, credential)) = value.trim().split_once(' ') {
        let credential = credential.trim();
        out.push(credential.to_owned());
        if scheme.eq_ignore_ascii_case("basic")
            && let Ok(decoded) = STANDARD.decode(credential)
            && let Ok(decoded) = String::from_utf8(decoded)
        {
            out.extend(
                decoded
                    .split_once(':')
                    .map(|(_, password)| password.to_owned()),
            );
            out.push(decoded);
        }
    }
    out
}

/// The secret fields of a credentials file, given its JSON or its path.
fn credentials_file_secrets(value: &str) -> Vec<String> {
    let json = if value.trim_start().starts_with('{') {
        Some(value.to_owned())
    } else {
        let path = std::path::Path::new(value.trim());
        std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file() && m.len() <= MAX_CREDENTIALS_FILE)
            .and_then(|_| std::fs::read_to_string(path).ok())
    };
    let Some(Ok(Value::Object(fields))) = json.map(|j| serde_json::from_str::<Value>(&j)) else {
        return Vec::new();
    };
    SECRET_JSON_FIELDS
        .iter()
        .filter_map(|f| fields.get(*f)?.as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_variables_by_list_and_by_name() {
        let vars = [
            ("AZURE_API_KEY", "azure-secret-value"),
            ("AWS_SESSION_TOKEN", "session-token-value"),
            ("MY_SERVICE_PASSWORD", "hunter2hunter2"),
            ("GITHUB_TOKEN", "ghp_abcdefghijkl"),
            ("MAX_TOKENS_LIMIT", "100000"),
            ("SECRET_FILE", "/var/run/secrets/x"),
            ("TOKEN_REFRESH", "true"),
            ("HOME", "/root"),
            ("PATH", "/usr/bin"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        assert_eq!(
            env_secrets(vars.into_iter()),
            [
                "azure-secret-value",
                "session-token-value",
                "hunter2hunter2",
                "ghp_abcdefghijkl"
            ]
        );
    }

    #[test]
    fn header_credentials_with_and_without_scheme() {
        assert_eq!(
            header_secrets("Bearer tok-123456"),
            ["Bearer tok-123456", "tok-123456"]
        );
        // admin:s3cret-pass
        let basic = header_secrets("Basic YWRtaW46czNjcmV0LXBhc3M=");
        assert!(basic.contains(&"s3cret-pass".to_owned()), "{basic:?}");
        assert!(basic.contains(&"admin:s3cret-pass".to_owned()), "{basic:?}");
    }

    #[test]
    fn service_account_files_by_path_or_inline() {
        let json = r#"{"type":"service_account","private_key_id":"abcdef123456","private_key":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n","client_email":"x@y"}"#;
        let inline = credentials_file_secrets(json);
        assert_eq!(inline.len(), 2);
        assert!(inline[0].contains("BEGIN PRIVATE KEY"));
        let path = std::env::temp_dir().join(format!("triage-sa-{}.json", std::process::id()));
        std::fs::write(&path, json).unwrap();
        assert_eq!(credentials_file_secrets(path.to_str().unwrap()), inline);
        std::fs::remove_file(&path).unwrap();
        assert!(credentials_file_secrets("/nonexistent/file.json").is_empty());
    }
}
