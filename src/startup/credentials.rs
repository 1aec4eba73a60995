//! Every credential triage knows, gathered once at start-up for the secret masker: whatever
//! configured it (the config file, the model list file, HolmesGPT's or a provider's
//! environment variables, a credentials file a variable points at, the kubeconfig kubectl uses
//! and the pod's service-account token).
//!
//! Masking is a net, not a wall: it replaces exact copies in tool output and errors, and a
//! transformed copy (reversed, base64, split) passes. Keeping tools from reading triage's
//! secrets at all is the sandbox's job.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::config::Settings;
use crate::llm::ModelRegistry;
use crate::secrets::is_credential_name;

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
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
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

/// Variables naming a file that holds a token as it is (AWS web identity for IRSA, EKS pod
/// identity's container token): the file's content is the secret.
const TOKEN_FILE_ENV_VARS: &[&str] = &[
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
];

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
    secrets.extend(
        settings
            .server
            .tls_key_password
            .clone()
            .filter(|p| !p.is_empty()),
    );
    secrets.extend(settings.approvals.signing_key.clone());
    secrets.extend(settings.conversations.database_password());
    secrets.extend(settings.conversations.secret_key.clone());
    secrets.extend(settings.conversations.previous_secret_keys.iter().cloned());
    secrets.extend(crate::config::webhooks::secrets(&settings.webhooks));
    secrets.extend(settings.checks.slack_token.clone());
    secrets.extend(settings.a2a.push_signing_secret.clone());
    // Resolved models carry every key they use, whichever source configured them.
    secrets.extend(models.credentials());
    secrets.extend(settings.models.values().filter_map(|m| m.api_key.clone()));
    secrets.extend(settings.env_model.as_ref().and_then(|m| m.api_key.clone()));
    for value in settings.toolsets.prometheus.headers.values() {
        secrets.extend(header_secrets(value));
    }
    // MCP servers' headers and credential-like `env` entries, as sent (variables expanded).
    let lookup = |k: &str| std::env::var(k).ok();
    for server in settings.mcp_servers.values() {
        let c = &server.config;
        for value in c.headers.values() {
            let value = crate::tools::mcp::config::expand_env(value, &lookup);
            secrets.extend(value.iter().flat_map(|v| header_secrets(v)));
        }
        let env = c.env.iter().filter_map(|(k, v)| {
            let value = crate::tools::mcp::config::expand_env(v, &lookup).ok()?;
            Some((k.clone(), value))
        });
        secrets.extend(env_secrets(env));
    }
    secrets.extend(env_secrets(std::env::vars()));
    secrets.extend(yaml_toolset_secrets(settings));
    // A model's `vertex_credentials` is a key file's path or its JSON: its private key too.
    for value in models.credentials() {
        if value.trim_start().starts_with('{') || std::path::Path::new(value.trim()).is_file() {
            secrets.extend(credentials_file_secrets(&value));
        }
    }
    for var in CREDENTIAL_FILE_ENV_VARS {
        if let Ok(value) = std::env::var(var) {
            secrets.extend(credentials_file_secrets(&value));
        }
    }
    secrets.extend(token_files(|var| std::env::var(var).ok()));
    for kubeconfig in kubeconfig_files(settings) {
        secrets.extend(kubeconfig_secrets(&kubeconfig));
    }
    secrets.extend(read_small(std::path::Path::new(SERVICE_ACCOUNT_TOKEN)));
    secrets
}

/// The tokens in the files `TOKEN_FILE_ENV_VARS` name (`env` looks a variable up).
fn token_files(env: impl Fn(&str) -> Option<String>) -> Vec<String> {
    TOKEN_FILE_ENV_VARS
        .iter()
        .filter_map(|var| read_small(std::path::Path::new(env(var)?.trim())))
        .map(|token| token.trim().to_owned())
        .collect()
}

/// The token kubectl uses inside a pod.
const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// The kubeconfig files kubectl reads for triage: the configured one, else `KUBECONFIG`'s
/// list, else `~/.kube/config`.
fn kubeconfig_files(settings: &Settings) -> Vec<std::path::PathBuf> {
    if let Some(path) = &settings.toolsets.kubernetes.kubeconfig {
        return vec![path.clone()];
    }
    match std::env::var_os("KUBECONFIG") {
        Some(list) => std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        None => std::env::var_os("HOME")
            .map(|home| vec![std::path::PathBuf::from(home).join(".kube/config")])
            .unwrap_or_default(),
    }
}

/// The credentials of every user of a kubeconfig: tokens (inline or from `tokenFile`),
/// passwords, client keys, auth-provider tokens and secrets, and the credential-like `env` of
/// exec plugins. kubectl's own redaction (`config view`) misses the last two.
fn kubeconfig_secrets(path: &std::path::Path) -> Vec<String> {
    let Some(Ok(config)) = read_small(path).map(|t| serde_norway::from_str::<Value>(&t)) else {
        return Vec::new();
    };
    let users = config.get("users").and_then(Value::as_array);
    let mut out = Vec::new();
    for user in users.into_iter().flatten().filter_map(|u| u.get("user")) {
        let field = |name: &str| user.get(name).and_then(Value::as_str).map(str::to_owned);
        out.extend(
            ["token", "password", "client-key-data"]
                .into_iter()
                .filter_map(field),
        );
        if let Some(key) = field("client-key-data")
            && let Ok(pem) = STANDARD.decode(key.trim())
            && let Ok(pem) = String::from_utf8(pem)
        {
            out.push(pem);
        }
        out.extend(
            field("tokenFile")
                .and_then(|f| read_small(std::path::Path::new(&f)))
                .map(|t| t.trim().to_owned()),
        );
        if let Some(Value::Object(config)) = user.pointer("/auth-provider/config") {
            out.extend(
                config
                    .iter()
                    .filter(|(name, _)| is_credential_name(&name.replace('-', "_")))
                    .filter_map(|(_, v)| v.as_str().map(str::to_owned)),
            );
        }
        let env = user.pointer("/exec/env").and_then(Value::as_array);
        out.extend(env.into_iter().flatten().filter_map(|e| {
            let name = e.get("name")?.as_str()?;
            let value = e.get("value")?.as_str()?;
            (is_credential_name(name) && looks_like_a_secret(value)).then(|| value.to_owned())
        }));
    }
    out
}

/// A file's text, if it is a regular file no larger than a credentials file can be.
fn read_small(path: &std::path::Path) -> Option<String> {
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file() && m.len() <= MAX_CREDENTIALS_FILE)
        .and_then(|_| std::fs::read_to_string(path).ok())
        .filter(|t| !t.trim().is_empty())
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

/// YAML toolsets' header values (`${VAR}` resolved) and their `env` entries named like
/// credentials.
fn yaml_toolset_secrets(settings: &Settings) -> Vec<String> {
    let lookup = |var: &str| std::env::var(var).ok();
    let expand = |v: &str| crate::tools::yaml::expand_env(v, &lookup);
    let mut out = Vec::new();
    for toolset in settings.yaml_toolsets.values() {
        for tool in &toolset.tools {
            for value in tool.headers.values() {
                out.extend(header_secrets(&expand(value)));
            }
        }
        out.extend(env_secrets(
            toolset.env.iter().map(|(k, v)| (k.clone(), expand(v))),
        ));
    }
    out
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
        read_small(std::path::Path::new(value.trim()))
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
    fn mcp_headers_and_credential_env_are_secrets() {
        let settings = Settings::from_toml(
            "[mcp_servers.a]\nconfig = { url = \"http://h\", headers = { Authorization = \"Bearer mcp-bearer-token-1\" } }\n\
             [mcp_servers.b]\nconfig = { command = \"x\", env = { API_TOKEN = \"mcp-env-token-22\", TZ = \"Europe/Paris\" } }\n",
        )
        .expect("settings");
        let models = ModelRegistry::from_settings(&settings).expect("models");
        let secrets = known_secrets(&settings, &models);
        assert!(secrets.iter().any(|s| s == "mcp-bearer-token-1"));
        assert!(secrets.iter().any(|s| s == "mcp-env-token-22"));
        assert!(!secrets.iter().any(|s| s == "Europe/Paris"));
    }

    #[test]
    fn credential_variables_by_list_and_by_name() {
        let vars = [
            ("AZURE_API_KEY", "azure-secret-value"),
            ("AWS_SESSION_TOKEN", "session-token-value"),
            ("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-value"),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-token-value"),
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
                "bedrock-api-key-value",
                "container-token-value",
                "hunter2hunter2",
                "ghp_abcdefghijkl"
            ]
        );
    }

    /// IRSA's web identity token is exchanged at STS for credentials; an STS or provider
    /// error echoing it must not reach a client.
    #[test]
    fn aws_token_files_are_secrets() {
        let path = std::env::temp_dir().join(format!("triage-wit-{}", std::process::id()));
        std::fs::write(&path, "eyJweb-identity-jwt-123456\n").unwrap();
        let file = path.to_str().unwrap().to_owned();
        let found = token_files(|var| (var == "AWS_WEB_IDENTITY_TOKEN_FILE").then(|| file.clone()));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(found, ["eyJweb-identity-jwt-123456"]);
        assert!(token_files(|_| Some("/nonexistent/token".into())).is_empty());
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

    #[test]
    fn a_vertex_entrys_key_file_is_masked() {
        let pem = include_str!("../../tests/fixtures/TEST-ONLY-gcp-service-account-key.pem");
        let key = serde_json::json!({"type": "service_account", "private_key": pem,
            "private_key_id": "kid-0123456789", "client_email": "t@p.iam.gserviceaccount.com"});
        let path = std::env::temp_dir().join(format!("triage-vertex-{}.json", std::process::id()));
        std::fs::write(&path, key.to_string()).unwrap();
        let toml = format!(
            "[models.v]\nmodel = \"vertex_ai/gemini-2.5-pro\"\nvertex_project = \"p\"\nvertex_credentials = \"{}\"\n",
            path.display()
        );
        let settings = Settings::from_toml(&toml).unwrap();
        let models = ModelRegistry::from_settings(&settings).unwrap();
        let secrets = known_secrets(&settings, &models);
        std::fs::remove_file(&path).unwrap();
        assert!(
            secrets.iter().any(|s| s == pem),
            "the private key is not masked"
        );
        assert!(secrets.iter().any(|s| s == "kid-0123456789"));
    }

    /// kubectl's `config view` prints auth-provider tokens and exec env as they are: every
    /// credential of the kubeconfig triage uses is masked.
    #[test]
    fn kubeconfig_credentials() {
        let dir = std::env::temp_dir().join(format!("triage-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("token"), "file-token-123456\n").unwrap();
        let kubeconfig = dir.join("config");
        let key = STANDARD.encode("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAxyz0123456789\n-----END RSA PRIVATE KEY-----\n");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nusers:\n- name: a\n  user:\n    token: inline-token-123456\n    client-key-data: {key}\n- name: b\n  user:\n    tokenFile: {}\n- name: c\n  user:\n    auth-provider:\n      name: oidc\n      config:\n        client-id: kubernetes\n        id-token: id-token-123456\n        refresh-token: refresh-token-123456\n        client-secret: client-secret-123456\n- name: d\n  user:\n    exec:\n      command: aws\n      env:\n      - name: AWS_PROFILE\n        value: production-profile\n      - name: AWS_SECRET_ACCESS_KEY\n        value: aws-secret-123456\n",
                dir.join("token").display()
            ),
        )
        .unwrap();
        let found = kubeconfig_secrets(&kubeconfig);
        for secret in [
            "inline-token-123456",
            "file-token-123456",
            "id-token-123456",
            "refresh-token-123456",
            "client-secret-123456",
            "aws-secret-123456",
            key.as_str(),
        ] {
            assert!(found.iter().any(|f| f == secret), "{secret} in {found:?}");
        }
        assert!(
            found
                .iter()
                .any(|f| f.contains("MIIEowIBAAKCAQEAxyz0123456789"))
        );
        for public in ["kubernetes", "production-profile", "aws"] {
            assert!(!found.iter().any(|f| f == public), "{public} in {found:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(kubeconfig_secrets(&dir.join("missing")).is_empty());
    }
}
