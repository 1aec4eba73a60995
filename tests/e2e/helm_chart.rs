//! deploy/helm/triage rendered by Helm's own engine (tests/helm/render.py in the venv that
//! .ci/helm builds; HELM_VENV names it): linted, every object valid for a current Kubernetes,
//! a HolmesGPT values file as their docs write one deployed — its rendered ConfigMaps, env and
//! Secrets given to a real `triage serve` — to a server that lists the same models and
//! toolsets, and what triage cannot honour refused by name. Without the venv each test skips
//! with a note, unless HELM_TEST_REQUIRED=1 (.ci/run sets it after .ci/helm).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::helpers::{eventually, free_port, http_client, scratch, wait_until_ready};
use crate::kube_standin;
use fake_llm::{FakeLlm, Step};

const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/helm/triage");
const RENDER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helm/render.py");
const HOLMES_VALUES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/helm/holmes-values.yaml"
);
const RELEASE: &str = "holmesgpt";
const NAMESPACE: &str = "observability";

/// The venv's python, or `None` after a note (a failure when HELM_TEST_REQUIRED=1).
fn venv_python(test: &str) -> Option<PathBuf> {
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
struct Rendered {
    objects: Vec<Value>,
    notes: String,
}

impl Rendered {
    fn get(&self, kind: &str, name: &str) -> &Value {
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

    fn container(&self) -> &Value {
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
    fn config_file(&self, key: &str) -> &str {
        self.get("ConfigMap", &format!("{RELEASE}-triage-config"))["data"][key]
            .as_str()
            .unwrap_or_else(|| panic!("{key} in the config ConfigMap"))
    }
}

/// Renders the chart with the values files in order (`helm -f a -f b`): the objects, or the
/// stage that refused and its message.
async fn render(python: &Path, values: &[&Value]) -> Result<Rendered, (String, String)> {
    render_with(python, None, values).await
}

async fn render_with(
    python: &Path,
    file: Option<&str>,
    values: &[&Value],
) -> Result<Rendered, (String, String)> {
    let dir = scratch().join(format!("helm-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = tokio::process::Command::new(python);
    cmd.args([RENDER, CHART, "--name", RELEASE, "--namespace", NAMESPACE]);
    if let Some(file) = file {
        cmd.args(["--values", file]);
    }
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
    assert!(
        secret_data(r.get("Secret", &secret_name))
            .get("apiKey")
            .is_none()
    );
    assert!(!r.notes.contains("generated"), "{}", r.notes);
}

fn secret_data(secret: &Value) -> BTreeMap<String, String> {
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

/// The Secrets a HolmesGPT user created before installing (the fixture's comments).
fn users_secrets() -> BTreeMap<String, BTreeMap<String, String>> {
    let keys = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    BTreeMap::from([
        (
            "holmes-llm-keys".to_owned(),
            keys(&[
                ("OPENAI_API_KEY", "sk-openai-from-the-secret"),
                ("AZURE_API_KEY", "azure-from-the-secret"),
                ("ANTHROPIC_API_KEY", "sk-ant-from-the-secret"),
                ("WEBHOOK_TOKEN", "webhook-token-from-the-secret"),
            ]),
        ),
        (
            "holmes-secrets".to_owned(),
            keys(&[("docs-mcp-token", "docs-token-from-the-secret")]),
        ),
    ])
}

/// The pod's file system under `root`: each volume mount as a directory, the ConfigMaps'
/// items written into theirs. Returns the mount paths.
fn lay_out_volumes(r: &Rendered, root: &Path) -> Vec<String> {
    let spec = &r.get("Deployment", &format!("{RELEASE}-triage"))["spec"]["template"]["spec"];
    let volumes = spec["volumes"].as_array().unwrap();
    let mut mounts = Vec::new();
    for mount in r.container()["volumeMounts"].as_array().unwrap() {
        let path = mount["mountPath"].as_str().unwrap();
        let dir = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).unwrap();
        let volume = volumes
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap_or_else(|| panic!("the volume of {mount}"));
        if let Some(config_map) = volume.get("configMap") {
            let data = &r.get("ConfigMap", config_map["name"].as_str().unwrap())["data"];
            for item in config_map["items"].as_array().unwrap() {
                let file = dir.join(item["path"].as_str().unwrap());
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, data[item["key"].as_str().unwrap()].as_str().unwrap())
                    .unwrap();
            }
        } else {
            assert!(
                volume.get("emptyDir").is_some(),
                "only ConfigMaps and emptyDirs here: {volume}"
            );
        }
        mounts.push(path.to_owned());
    }
    mounts
}

/// The container's environment as the kubelet builds it: `envFrom` Secrets, then `env` (which
/// wins), with `secretKeyRef`s read from the rendered and the user's Secrets.
fn pod_env(
    r: &Rendered,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut secrets = secrets.clone();
    for secret in r.objects.iter().filter(|o| o["kind"] == "Secret") {
        secrets.insert(
            secret["metadata"]["name"].as_str().unwrap().to_owned(),
            secret_data(secret),
        );
    }
    let c = r.container();
    let mut env = BTreeMap::new();
    for from in c["envFrom"].as_array().into_iter().flatten() {
        let name = from["secretRef"]["name"]
            .as_str()
            .unwrap_or_else(|| panic!("{from}"));
        let secret = secrets
            .get(name)
            .unwrap_or_else(|| panic!("no Secret {name}"));
        env.extend(secret.clone());
    }
    for var in c["env"].as_array().unwrap() {
        let name = var["name"].as_str().unwrap().to_owned();
        let value = if let Some(value) = var.get("value") {
            value
                .as_str()
                .unwrap_or_else(|| panic!("{var}: strings only"))
                .to_owned()
        } else {
            let by = &var["valueFrom"]["secretKeyRef"];
            let secret = by["name"].as_str().unwrap_or_else(|| panic!("{var}"));
            secrets
                .get(secret)
                .and_then(|s| s.get(by["key"].as_str().unwrap()))
                .unwrap_or_else(|| panic!("{var}: no such Secret key"))
                .clone()
        };
        env.insert(name, value);
    }
    env
}

/// `value` with every path under one of `mounts` moved under `root` (single paths, comma
/// lists, and JSON lists of paths).
fn reroot(value: &str, mounts: &[String], root: &Path) -> String {
    let root = root.display().to_string();
    let mut out = String::new();
    let mut rest = value;
    'scan: while !rest.is_empty() {
        let at_start = out.is_empty() || out.ends_with([',', '"', '[']);
        if at_start {
            for mount in mounts {
                if let Some(after) = rest.strip_prefix(mount.as_str())
                    && (after.is_empty() || after.starts_with(['/', ',', '"', ']']))
                {
                    out.push_str(&root);
                    out.push_str(mount);
                    rest = after;
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[tokio::test]
async fn a_holmes_values_file_from_their_docs_deploys_to_a_triage_with_the_same_models_and_toolsets()
 {
    let Some(python) = venv_python("a_holmes_values_file_from_their_docs_deploys") else {
        return;
    };
    // The values file unchanged, and triage's own keys beside it.
    let triage_keys = json!({"triage": {
        "settings": {"agent": {"max_steps": 12}},
        "webhooks": [{"name": "ops", "base_url": "http://127.0.0.1:9/hooks", "token": "${WEBHOOK_TOKEN}"}],
    }});
    let r = render_with(&python, Some(HOLMES_VALUES), &[&triage_keys])
        .await
        .unwrap_or_else(|(stage, error)| panic!("{stage} failed: {error}"));

    // The model list as HolmesGPT's chart writes it: envRef in both forms became env refs.
    let models: Value = serde_norway::from_str(r.config_file("model_list.yaml")).unwrap();
    assert_eq!(models["gpt-4.1"]["api_key"], "{{ env.OPENAI_API_KEY }}");
    assert_eq!(models["sonnet"]["api_key"], "{{ env.ANTHROPIC_API_KEY }}");
    assert_eq!(
        models["azure-gpt-4o"]["api_version"],
        "{{ env.AZURE_API_VERSION }}"
    );
    // Pod-spec keys of the values file are honoured.
    let pod = &r.get("Deployment", &format!("{RELEASE}-triage"))["spec"]["template"];
    assert_eq!(pod["spec"]["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(pod["spec"]["tolerations"][0]["value"], "observability");
    assert_eq!(
        pod["metadata"]["annotations"]["prometheus.io/scrape"],
        "true"
    );
    assert_eq!(r.container()["resources"]["limits"]["memory"], "1024Mi");

    // The pod, here: its volumes under a root directory, its env from the Secrets; what
    // differs from a cluster is the port, the gateway's address and a kubeconfig.
    let root = scratch().join(format!("helm-pod-{}", uuid::Uuid::new_v4().simple()));
    let mounts = lay_out_volumes(&r, &root);
    let llm = FakeLlm::start().await;
    let standin = kube_standin::start().await;
    let port = free_port();
    let mut env = pod_env(&r, &users_secrets());
    for value in env.values_mut() {
        *value = reroot(value, &mounts, &root);
    }
    let api_key = env["HOLMES_API_KEY"].clone();
    assert_eq!(
        env["HOLMES_HOST"], "0.0.0.0",
        "a cluster address, served with the generated key"
    );
    env.insert("HOLMES_PORT".into(), port.to_string());
    env.insert("LLM_GATEWAY_URL".into(), llm.base_url());
    env.insert("PATH".into(), std::env::var("PATH").unwrap_or_default());
    env.insert("HOME".into(), root.join("tmp").display().to_string());
    env.insert(
        "KUBECONFIG".into(),
        standin.kubeconfig_path().display().to_string(),
    );
    let log = std::fs::File::create(root.join("triage.log")).unwrap();
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .envs(&env)
        .arg("serve")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("triage serve starts");
    let base = format!("http://127.0.0.1:{port}");
    let client = http_client();
    let ready =
        tokio::time::timeout(Duration::from_secs(60), wait_until_ready(&client, &base)).await;
    if ready.is_err() || server.try_wait().ok().flatten().is_some() {
        panic!(
            "triage did not become ready with the rendered pod: {}",
            std::fs::read_to_string(root.join("triage.log")).unwrap_or_default()
        );
    }
    let get = |path: &str| {
        client
            .get(format!("{base}{path}"))
            .header("X-API-Key", &api_key)
            .send()
    };

    // The API key is the generated one: without it, 401.
    let anonymous = client
        .get(format!("{base}/api/model"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    // The same models as the values' modelList.
    let model = crate::helpers::json_body(get("/api/model").await.unwrap()).await;
    let mut keys: Vec<&str> = model["model_name"]
        .as_array()
        .unwrap_or_else(|| panic!("{model}"))
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["azure-gpt-4o", "gpt-4.1", "sonnet"], "{model}");

    // The toolsets the values' toolsets and mcp_servers ask for, each with its state here.
    let info = crate::helpers::json_body(get("/api/info").await.unwrap()).await;
    let status = |name: &str| -> String {
        info["toolsets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {info}"))["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    for enabled in [
        "kubernetes",
        "internet",
        "bash",
        "skills",
        "kubernetes/pod-restarts",
    ] {
        assert_eq!(status(enabled), "enabled", "{enabled}: {info}");
    }
    // Prometheus at the values' URL (nothing listens there) and robusta (no equivalent):
    // asked for, and reported as failed, not dropped.
    for failed in ["prometheus", "robusta"] {
        assert_eq!(status(failed), "failed", "{failed}: {info}");
    }
    // The MCP server too: tried at its URL (closed here), and reported with the error.
    eventually(
        "internal_docs to be tried",
        Duration::from_secs(30),
        || async {
            let info = crate::helpers::json_body(get("/api/info").await.unwrap()).await;
            let server = info["mcp_servers"]
                .as_array()
                .and_then(|s| s.iter().find(|s| s["name"] == "internal_docs"))
                .cloned();
            match server {
                Some(s)
                    if s["status"] == "disconnected"
                        && s["last_error"]
                            .as_str()
                            .is_some_and(|e| e.contains("127.0.0.1:9/mcp")) =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    // A chat with the envRef model: the key from the user's Secret reaches the LLM, and the
    // inline skill and the custom toolset reach the model.
    llm.push(Step::text("All pods are running."));
    let resp = client
        .post(format!("{base}/api/chat"))
        .header("X-API-Key", &api_key)
        .header("content-type", "application/json")
        .body(json!({"ask": "are the pods healthy?", "model": "gpt-4.1"}).to_string())
        .send()
        .await
        .unwrap();
    let body = crate::helpers::json_body(resp).await;
    assert_eq!(body["analysis"], "All pods are running.", "{body}");
    let headers = llm.request_headers();
    assert_eq!(
        headers.last().unwrap()["authorization"],
        "Bearer sk-openai-from-the-secret"
    );
    let request = llm.requests().last().unwrap().to_string();
    assert!(
        request.contains("oom-kills"),
        "the skill is offered: {request}"
    );
    assert!(
        request.contains("pod_restarts"),
        "the custom tool is offered"
    );

    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}
