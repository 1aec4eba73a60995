//! The README's configuration reference is checked against the code: every settings key and
//! every HolmesGPT environment variable triage reads must be documented there.

use serde_json::Value;
use triage::config::{HOLMES_ENV, Settings};

fn leaf_keys(prefix: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_keys(&key, v, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

fn documented_keys() -> Vec<String> {
    let settings = Settings::from_toml("").expect("defaults");
    let mut value = serde_json::to_value(&settings).expect("settings serialise");
    // Model entries are documented as a table of their own fields.
    if let Some(obj) = value.as_object_mut() {
        obj.remove("models");
        obj.remove("env_model");
        obj.remove("mcp_servers");
    }
    let mut keys = Vec::new();
    leaf_keys("", &value, &mut keys);
    // `[[webhooks]]` is a list: each receiver's keys are documented as `webhooks.<key>`.
    let receiver = triage::webhooks::WebhookSettings::new("r", "http://127.0.0.1:1");
    if let Value::Object(fields) = serde_json::to_value(receiver).expect("a receiver serialises") {
        keys.extend(fields.keys().map(|k| format!("webhooks.{k}")));
    }
    // `[mcp_servers.<name>]` is a map: each server's keys as `mcp_servers.<name>.<key>`.
    let server: triage::tools::mcp::McpServerSettings =
        serde_json::from_value(serde_json::json!({})).expect("a server with defaults");
    let server = serde_json::to_value(server).expect("a server serialises");
    leaf_keys("mcp_servers.<name>", &server, &mut keys);
    keys
}

#[test]
fn every_setting_is_documented() {
    let readme = readme();
    let missing: Vec<String> = documented_keys()
        .into_iter()
        .filter(|k| !readme.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md does not document: {missing:?}"
    );
}

#[test]
fn every_holmes_variable_is_documented() {
    let readme = readme();
    let mut vars: Vec<&str> = HOLMES_ENV.iter().map(|(v, _)| *v).collect();
    vars.extend([
        "OPENAI_API_KEY",
        "TRIAGE_CONFIG",
        "LOG_LEVEL",
        "ENABLE_JSON_LOGS_FORMAT",
        "AZURE_API_KEY",
        "AZURE_API_VERSION",
        "OPENAI_API_BASE",
        "OPENAI_BASE_URL",
        "TRIAGE_API_KEY",
        "CUSTOM_TOOLSET_LOCATION",
        "CUSTOM_SKILL_PATHS",
    ]);
    let missing: Vec<&str> = vars
        .into_iter()
        .filter(|v| !readme.contains(&format!("`{v}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md does not document: {missing:?}"
    );
}

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
}

#[test]
fn every_model_entry_key_is_documented() {
    let readme = readme();
    let missing: Vec<&str> = triage::config::entry_keys::valid_keys()
        .into_iter()
        .filter(|k| !readme.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md does not document: {missing:?}"
    );
}

/// Whoever clones the repository has only the repository: every relative link points inside it.
#[test]
fn the_readme_stands_alone() {
    let readme = readme();
    assert!(
        !readme.contains("../"),
        "README.md links outside the repository"
    );
    let links = regex::Regex::new(r"\]\(([^)#]+)").unwrap();
    for link in links.captures_iter(&readme).map(|c| c[1].to_owned()) {
        if link.starts_with("http") {
            continue;
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(&link);
        assert!(
            path.exists(),
            "README.md links to {link}, which does not exist"
        );
    }
}
