//! deploy/helm/triage rendered by Helm's own engine (tests/helm/render.py in the venv that
//! .ci/helm builds; HELM_VENV names it): linted, every object valid for a current Kubernetes,
//! a HolmesGPT values file as their docs write one deployed — its rendered ConfigMaps, env and
//! Secrets given to a real `triage serve` — to a server that lists the same models and
//! toolsets, and what triage cannot honour refused by name. Without the venv each test skips
//! with a note, unless HELM_TEST_REQUIRED=1 (.ci/run sets it after .ci/helm).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Value, json};

use crate::helpers::scratch;

pub(crate) const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/helm/triage");
pub(crate) const RENDER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helm/render.py");
pub(crate) const HOLMES_VALUES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/helm/holmes-values.yaml"
);
pub(crate) const RELEASE: &str = "holmesgpt";
pub(crate) const NAMESPACE: &str = "observability";

/// The venv's python, or `None` after a note (a failure when HELM_TEST_REQUIRED=1).
pub(crate) fn venv_python(test: &str) -> Option<PathBuf> {
    let python = std::env::var_os("HELM_VENV").map(|v| PathBuf::from(v).join("bin/python"));
    match python {
        Some(python) if python.is_file() => Some(python),
        _ => {
            assert!(
                std::env::var("HELM_TEST_REQUIRED").as_deref() != Ok("1"),
                "HELM_TEST_REQUIRED=1 but HELM_VENV names no venv: run `export HELM_VENV=$(bash .ci/helm)`"
            );
            eprintln!(
                "SKIPPED {test}: no Helm renderer; `export HELM_VENV=$(bash .ci/helm)` makes one"
            );
            None
        }
    }
}

/// What Helm made of the values: every object, and the release notes.
pub(crate) struct Rendered {
    pub(crate) objects: Vec<Value>,
    pub(crate) notes: String,
}

impl Rendered {
    pub(crate) fn get(&self, kind: &str, name: &str) -> &Value {
        self.objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} among {}", self.names()))
    }

    fn names(&self) -> String {
        let names: Vec<String> = self
            .objects
            .iter()
            .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
            .collect();
        names.join(", ")
    }

    pub(crate) fn container(&self) -> &Value {
        &self.get("Deployment", &format!("{RELEASE}-triage"))["spec"]["template"]["spec"]["containers"]
            [0]
    }

    fn env(&self, name: &str) -> Option<&Value> {
        self.container()["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
    }

    /// One file of the chart's config ConfigMap.
    pub(crate) fn config_file(&self, key: &str) -> &str {
        self.get("ConfigMap", &format!("{RELEASE}-triage-config"))["data"][key]
            .as_str()
            .unwrap_or_else(|| panic!("{key} in the config ConfigMap"))
    }
}

/// Renders the chart with the values files in order (`helm -f a -f b`): the objects, or the
/// stage that refused and its message.
async fn render(python: &Path, values: &[&Value]) -> Result<Rendered, (String, String)> {
    render_with(python, &[], values).await
}

/// The same with more of render.py's arguments (`--values FILE`, `--kubeconfig FILE`) first.
pub(crate) async fn render_with(
    python: &Path,
    args: &[&str],
    values: &[&Value],
) -> Result<Rendered, (String, String)> {
    let dir = scratch().join(format!("helm-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = tokio::process::Command::new(python);
    cmd.args([RENDER, CHART, "--name", RELEASE, "--namespace", NAMESPACE]);
    cmd.args(args);
    for (i, v) in values.iter().enumerate() {
        let path = dir.join(format!("values-{i}.json"));
        std::fs::write(&path, v.to_string()).unwrap();
        cmd.arg("--values").arg(path);
    }
    let out = cmd.output().await.expect("the renderer runs");
    let _ = std::fs::remove_dir_all(&dir);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "render.py printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    if answer["ok"] == true {
        Ok(Rendered {
            objects: answer["objects"].as_array().unwrap().clone(),
            notes: answer["notes"].as_str().unwrap_or_default().to_owned(),
        })
    } else {
        Err((
            answer["stage"].as_str().unwrap_or_default().to_owned(),
            answer["error"].as_str().unwrap_or_default().to_owned(),
        ))
    }
}

async fn render_ok(python: &Path, values: &[&Value]) -> Rendered {
    render(python, values)
        .await
        .unwrap_or_else(|(stage, error)| panic!("{stage} failed: {error}"))
}

/// The render fails, and its message names `key`.
async fn refused(python: &Path, values: Value, key: &str) {
    match render(python, &[&values]).await {
        Ok(r) => panic!(
            "{values} rendered ({}) but should fail naming {key}",
            r.names()
        ),
        Err((stage, error)) => {
            assert_eq!(stage, "render", "{error}");
            assert!(
                error.contains(key),
                "{values}: the error names {key}: {error}"
            );
        }
    }
}

#[tokio::test]
async fn the_defaults_render_valid_objects_and_a_generated_api_key() {
    let Some(python) = venv_python("the_defaults_render_valid_objects_and_a_generated_api_key")
    else {
        return;
    };
    let r = render_ok(&python, &[&json!({})]).await;

    // The holmes chart's Service name and ports, its probes, preStop and read-only root.
    let service = r.get("Service", &format!("{RELEASE}-holmes"));
    assert_eq!(service["spec"]["ports"][0]["port"], 80);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");
    let c = r.container();
    assert_eq!(
        c["ports"][0],
        json!({"name": "http", "containerPort": 5050, "protocol": "TCP"})
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(
        c["lifecycle"]["preStop"]["exec"]["command"],
        json!(["bash", "-c", "kill -SIGINT 1"])
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(r.env("HOLMES_HOST").unwrap()["value"], "0.0.0.0");
    assert_eq!(
        r.env("MODEL_LIST_FILE_LOCATION").unwrap()["value"],
        "/etc/holmes/config/model_list.yaml"
    );
    // The pods are triage's alone: a holmes release's `app: holmes` selector never takes them.
    let labels = &r.get("Deployment", &format!("{RELEASE}-triage"))["spec"]["template"]["metadata"]
        ["labels"];
    assert!(labels.get("app").is_none(), "{labels}");

    // Read-only RBAC, and never Secrets.
    let role = r.get("ClusterRole", &format!("{RELEASE}-triage-read"));
    for rule in role["rules"].as_array().unwrap() {
        for verb in rule["verbs"].as_array().unwrap() {
            assert!(
                ["get", "list", "watch"].contains(&verb.as_str().unwrap()),
                "{rule}"
            );
        }
        assert!(
            !rule["resources"]
                .as_array()
                .unwrap()
                .contains(&json!("secrets")),
            "{rule}"
        );
    }
    let pods_rule = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|rule| rule["apiGroups"] == json!([""]))
        .unwrap();
    for resource in ["pods", "pods/log", "events", "nodes", "namespaces"] {
        assert!(
            pods_rule["resources"]
                .as_array()
                .unwrap()
                .contains(&json!(resource))
        );
    }

    // No key given: one generated into a Secret, which the server's env takes, and NOTES says
    // where it is and how to read it.
    let secret_name = format!("{RELEASE}-holmes-api-key");
    let key = secret_value(r.get("Secret", &secret_name), "apiKey");
    assert!(key.len() >= 32, "{key}");
    assert_eq!(
        r.env("HOLMES_API_KEY").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"name": secret_name, "key": "apiKey"})
    );
    assert!(r.notes.contains(&secret_name), "{}", r.notes);
    assert!(
        r.notes.contains(&format!(
            "kubectl get secret -n {NAMESPACE} {secret_name} -o jsonpath='{{.data.apiKey}}' | base64 -d"
        )),
        "{}",
        r.notes
    );

    // A key of their own: no generated key, no note about one.
    let r = render_ok(
        &python,
        &[&json!({"auth": {"existingApiKeySecret": "our-key"}})],
    )
    .await;
    assert_eq!(
        r.env("HOLMES_API_KEY").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"name": "our-key", "key": "apiKey"})
    );
    assert!(!secret_data(r.get("Secret", &secret_name)).contains_key("apiKey"));
    assert!(!r.notes.contains("generated"), "{}", r.notes);

    // The holmes chart's own image and telemetry keys: accepted, and named as unused.
    let holmes_image = json!({"image": "holmes:0.27.0", "registry": "robustadev",
                              "enableTelemetry": false});
    let r = render_ok(&python, &[&holmes_image]).await;
    assert!(
        r.notes.contains("not used by triage: image, registry ("),
        "{}",
        r.notes
    );
    // The chart deploys the crate it ships with.
    assert_eq!(
        r.container()["image"],
        format!("triage:{}", env!("CARGO_PKG_VERSION"))
    );
}

pub(crate) fn secret_data(secret: &Value) -> BTreeMap<String, String> {
    secret["data"]
        .as_object()
        .map(|data| {
            data.iter()
                .map(|(k, v)| {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(v.as_str().unwrap())
                        .unwrap();
                    (k.clone(), String::from_utf8(bytes).unwrap())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn secret_value(secret: &Value, key: &str) -> String {
    secret_data(secret)
        .remove(key)
        .unwrap_or_else(|| panic!("{key} in {secret}"))
}

#[tokio::test]
async fn keys_triage_cannot_honour_fail_the_render_by_name() {
    let Some(python) = venv_python("keys_triage_cannot_honour_fail_the_render_by_name") else {
        return;
    };
    for (values, key) in [
        (json!({"operator": {"enabled": true}}), "operator.enabled"),
        (
            json!({"mcpAddons": {"aws": {"enabled": true}}}),
            "mcpAddons.aws.enabled",
        ),
        (
            json!({"skillRepos": [{"url": "https://github.com/x/skills"}]}),
            "skillRepos",
        ),
        (json!({"args": ["--config=/etc/holmes/x.yaml"]}), "args"),
        (
            json!({"enablePostProcessing": true}),
            "enablePostProcessing",
        ),
        (json!({"auth": {"enabled": false}}), "auth.enabled"),
        (json!({"modellist": {}}), "\"modellist\""),
        (json!({"triage": {"replica": 2}}), "triage.replica"),
        (
            json!({"modelList": {"m": {"model": "openai/x", "api_key": "envRef:OPENAI-KEY"}}}),
            "modelList.m.api_key",
        ),
        (
            json!({"customClusterRoleRules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]}),
            "customClusterRoleRules[0].verbs",
        ),
        (json!({"tls": {"enabled": true}}), "tls.secretName"),
        (
            json!({"triage": {"webhooks": [{"name": "a", "base_url": "http://a"}],
                              "settings": {"webhooks": [{"name": "b", "base_url": "http://b"}]}}}),
            "triage.settings.webhooks",
        ),
        (
            json!({"customSkills": {"runbook": {"content": "Restart it."}}}),
            "customSkills.runbook.content",
        ),
    ] {
        refused(&python, values, key).await;
    }
    // An add-on left off, as the holmes chart's own defaults list them, is fine.
    render_ok(
        &python,
        &[&json!({"mcpAddons": {"aws": {"enabled": false}, "github": {"enabled": false}}})],
    )
    .await;
}

#[tokio::test]
async fn more_than_one_replica_needs_postgresql() {
    let Some(python) = venv_python("more_than_one_replica_needs_postgresql") else {
        return;
    };
    refused(&python, json!({"replicas": 3}), "PostgreSQL").await;
    refused(&python, json!({"replicas": 3}), "replicas: 3").await;
    refused(
        &python,
        json!({"autoscaling": {"enabled": true, "maxReplicas": 4}}),
        "autoscaling.enabled",
    )
    .await;

    let postgres = json!({"replicas": 3, "triage": {"database": {"existingSecret": "triage-db"}}});
    let r = render_ok(&python, &[&postgres]).await;
    assert_eq!(
        r.get("Deployment", &format!("{RELEASE}-triage"))["spec"]["replicas"],
        3
    );
    assert_eq!(
        r.env("TRIAGE_CONVERSATIONS__DATABASE_URL").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"name": "triage-db", "key": "database_url"})
    );
    assert_eq!(
        r.env("TRIAGE_CONVERSATIONS__SECRET_KEY").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"name": "triage-db", "key": "secret_key"})
    );
    // Every replica verifies the approval tokens another signed: one shared signing key.
    assert_eq!(
        r.env("HOLMES_APPROVAL_SIGNING_KEY").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"name": format!("{RELEASE}-holmes-api-key"), "key": "signing_key"})
    );
    let scaled = json!({"autoscaling": {"enabled": true, "maxReplicas": 4},
                        "triage": {"database": {"existingSecret": "triage-db"}}});
    let r = render_ok(&python, &[&scaled]).await;
    assert_eq!(
        r.get("HorizontalPodAutoscaler", &format!("{RELEASE}-triage"))["spec"]["maxReplicas"],
        4
    );
}

#[tokio::test]
async fn tls_mounts_the_secret_and_mutual_tls_probes_by_tcp() {
    let Some(python) = venv_python("tls_mounts_the_secret_and_mutual_tls_probes_by_tcp") else {
        return;
    };
    let tls = json!({"tls": {"enabled": true, "secretName": "holmes-tls"}});
    let r = render_ok(&python, &[&tls]).await;
    let c = r.container();
    assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTPS");
    assert_eq!(
        r.env("HOLMES_SSL_CERTFILE").unwrap()["value"],
        "/etc/holmes/tls/tls.crt"
    );
    assert!(r.env("HOLMES_SSL_CA_CERTS").is_none());

    let mtls = json!({"tls": {"enabled": true, "secretName": "holmes-tls",
                              "caCertsSecretKey": "ca.crt", "keyfilePasswordSecretKey": "pass"}});
    let r = render_ok(&python, &[&mtls]).await;
    let c = r.container();
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(c[probe]["tcpSocket"]["port"], "http", "{}", c[probe]);
        assert!(c[probe].get("httpGet").is_none());
    }
    assert_eq!(
        r.env("HOLMES_SSL_CA_CERTS").unwrap()["value"],
        "/etc/holmes/tls/ca.crt"
    );
    assert_eq!(
        r.env("HOLMES_SSL_KEYFILE_PASSWORD").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"name": "holmes-tls", "key": "pass"})
    );
}

#[tokio::test]
async fn k8s_rbac_turns_off_the_kubernetes_and_bash_toolsets() {
    let Some(python) = venv_python("k8s_rbac_turns_off_the_kubernetes_and_bash_toolsets") else {
        return;
    };
    let r = render_ok(&python, &[&json!({"k8sRBAC": true})]).await;
    let file: Value = serde_norway::from_str(r.config_file("custom_toolset.yaml")).unwrap();
    for name in ["kubernetes/core", "kubernetes/logs", "bash"] {
        assert_eq!(file["toolsets"][name]["enabled"], false, "{name}: {file}");
    }
    assert_eq!(file["toolsets"]["internet"]["enabled"], true);
}

#[tokio::test]
async fn the_data_volume_and_skill_directories_follow_the_values() {
    let Some(python) = venv_python("the_data_volume_and_skill_directories_follow_the_values")
    else {
        return;
    };
    let values = json!({
        "customSkillPaths": ["/skills/team"],
        "customSkills": {"oom": {"content": "---\nname: oom\ndescription: d\n---\n"}},
        "triage": {"persistence": {"enabled": true, "size": "5Gi"},
                   "settings": {"skills": {"paths": ["/skills/ops"]}}},
    });
    let r = render_ok(&python, &[&values]).await;
    let claim = format!("{RELEASE}-triage-data");
    assert_eq!(
        r.get("PersistentVolumeClaim", &claim)["spec"]["resources"]["requests"]["storage"],
        "5Gi"
    );
    let volumes =
        &r.get("Deployment", &format!("{RELEASE}-triage"))["spec"]["template"]["spec"]["volumes"];
    let data = volumes
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "data")
        .unwrap();
    assert_eq!(data["persistentVolumeClaim"]["claimName"], claim.as_str());
    // Every directory, in one list: the env replaces triage.toml's skills.paths, so it
    // carries those too. A frontmatter with a name keeps it.
    assert_eq!(
        r.env("TRIAGE_SKILLS__PATHS").unwrap()["value"],
        "[/skills/ops,/skills/team,/etc/holmes/skills]"
    );
    let skills = r.get("ConfigMap", &format!("{RELEASE}-triage-skills"));
    assert_eq!(
        skills["data"]["oom.SKILL.md"],
        "---\nname: oom\ndescription: d\n---\n"
    );
}

#[test]
fn the_renderer_script_names_a_python_too_old() {
    let dir = scratch().join(format!("old-python-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let python = dir.join("python3");
    std::fs::write(
        &python,
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'Python 3.8.10'\nexit 1\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&python)
        .status()
        .unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/helm"))
        .env("PATH", path)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Python >= 3.10") && err.contains("Python 3.8.10"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no venv path printed");
    let _ = std::fs::remove_dir_all(&dir);
}
