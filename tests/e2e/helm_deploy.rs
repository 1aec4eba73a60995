//! A HolmesGPT values file as their docs write one (tests/fixtures/helm/holmes-values.yaml),
//! rendered by the chart unchanged and deployed as the kubelet would: the ConfigMaps' items as
//! files under a root directory, the env with its Secrets resolved, given to a real
//! `triage serve`, which must list the same models and toolsets the values ask for. Skips like
//! the other chart tests (see helm_chart.rs) without the renderer.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helm_chart::{HOLMES_VALUES, RELEASE, Rendered, render_with, secret_data, venv_python};
use crate::helpers::{eventually, free_port, http_client, scratch, wait_until_ready};
use crate::kube_standin;
use crate::webhook_receiver::Receiver;
use fake_llm::{FakeLlm, Step};

const WEBHOOK_SIGNING_SECRET: &str = "signing-secret-from-the-secret";

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
                ("WEBHOOK_SIGNING_SECRET", WEBHOOK_SIGNING_SECRET),
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
    let receiver = Receiver::up(WEBHOOK_SIGNING_SECRET).await;
    let triage_keys = json!({"triage": {
        "settings": {"agent": {"max_steps": 12}},
        "webhooks": [{"name": "ops", "base_url": receiver.url(), "token": "${WEBHOOK_TOKEN}",
                      "signing_secret": "${WEBHOOK_SIGNING_SECRET}"}],
    }});
    let r = render_with(&python, &["--values", HOLMES_VALUES], &[&triage_keys])
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

    // triage's own keys: the webhook from triage.webhooks, its token and signing secret
    // named by env and read from the user's Secret, and the conversation store in the data
    // volume.
    let created = client
        .post(format!("{base}/api/conversations"))
        .header("X-API-Key", &api_key)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let got = receiver
        .wait_for(Duration::from_secs(30), |got| {
            got.iter().any(|g| g.path == "/conversations")
        })
        .await;
    let delivery = got.iter().find(|g| g.path == "/conversations").unwrap();
    assert_eq!(
        delivery.token.as_deref(),
        Some("webhook-token-from-the-secret")
    );
    assert!(delivery.signature_ok, "signed with the Secret's key");
    assert!(root.join("var/lib/triage/triage.db").is_file());

    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}
