//! The image of `deploy/image/` run the way a cluster runs it: with podman, as its non-root
//! user, a read-only root with only `/tmp` and the data directory writable, in-cluster
//! Kubernetes credentials, and stopped by a signal sent to PID 1 (tini, which forwards it).
//!
//! `#[ignore]`d: they need podman, runc and the image, which `.ci/image` builds from the debug
//! binary and loads (`TRIAGE_IMAGE`, default `localhost/triage:latest`). `.ci/run` runs them
//! with `IMAGE_TEST_REQUIRED=1`, which turns a missing prerequisite into a failure; elsewhere
//! they skip with a note. They check that the image holds the binary under test.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use fake_llm::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::helpers::{answer_titles, free_port, http_client, names, read_events};
use crate::kube_standin::{self, NAMESPACE, POD_OK};

const API_KEY: &str = "image-test-api-key";

fn image() -> String {
    std::env::var("TRIAGE_IMAGE").unwrap_or_else(|_| "localhost/triage:latest".into())
}

/// podman as these machines need it: crun fails on their hybrid cgroups.
const PODMAN_FLAGS: [&str; 3] = ["--runtime", "runc", "--cgroup-manager=cgroupfs"];

/// Runs `podman <args>` to its end.
fn podman(args: &[&str]) -> Output {
    output(Command::new("podman").args(PODMAN_FLAGS).args(args))
}

fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("could not run {cmd:?}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_owned()
}

/// Why the image cannot be run here, if it cannot.
fn missing_prerequisite() -> Option<String> {
    for (tool, version) in [("podman", "--version"), ("runc", "--version")] {
        if !Command::new(tool)
            .arg(version)
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(format!(
                "{tool} is not installed (Debian: apt-get install {tool})"
            ));
        }
    }
    let image = image();
    let label = "{{index .Labels \"triage.binary.sha256\"}}";
    let inspected = podman(&["image", "inspect", "--format", label, &image]);
    if !inspected.status.success() {
        return Some(format!(
            "podman has no image {image}: build and load it with `bash .ci/image`"
        ));
    }
    let sum = output(Command::new("sha256sum").arg(env!("CARGO_BIN_EXE_triage")));
    let ours = text(&sum.stdout);
    let ours = ours.split_whitespace().next().unwrap_or_default();
    let theirs = text(&inspected.stdout);
    (ours != theirs).then(|| {
        format!(
            "{image} holds another triage binary (sha256 {theirs}) than this test's \
             ({ours}): rebuild it with `bash .ci/image`"
        )
    })
}

/// Whether to go on: false (with a note) when the image cannot run here, a panic instead when
/// `IMAGE_TEST_REQUIRED` is set.
fn can_run() -> bool {
    let Some(why) = missing_prerequisite() else {
        remove_containers_of_exited_runs();
        return true;
    };
    if std::env::var_os("IMAGE_TEST_REQUIRED").is_some() {
        panic!("IMAGE_TEST_REQUIRED is set but the image test cannot run: {why}");
    }
    eprintln!("skipping the image test: {why}");
    false
}

/// Prefix of the containers these tests start; the test process's pid follows.
const CONTAINER_PREFIX: &str = "triage-e2e-";

/// Removes the containers of test processes that have exited without removing theirs (killed
/// before their `Drop` ran).
fn remove_containers_of_exited_runs() {
    let filter = format!("name=^{CONTAINER_PREFIX}");
    let listed = podman(&["ps", "--all", "--filter", &filter, "--format", "{{.Names}}"]);
    for name in text(&listed.stdout).lines() {
        let pid = name
            .strip_prefix(CONTAINER_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = podman(&["rm", "--force", "--time", "0", name]);
        }
    }
}

/// A running container, removed when dropped.
struct Container {
    name: String,
    base: String,
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(PODMAN_FLAGS)
            .args(["rm", "--force", "--time", "0", &self.name])
            .output();
    }
}

impl Container {
    /// Starts the image as a cluster would: read-only root (and no tmpfs podman would add on
    /// its own), `/tmp` and the data directory as the only writable places, the API key by
    /// environment, on the host's network so it reaches the fakes on loopback.
    fn start(extra: &[String]) -> Container {
        let name = format!(
            "{CONTAINER_PREFIX}{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        let port = free_port();
        let mut run = Command::new("podman");
        run.args(PODMAN_FLAGS)
            .args(["run", "--detach", "--name", &name])
            .args([
                "--ulimit",
                "nofile=1024:4096",
                "--ulimit",
                "nproc=1024:4096",
            ])
            .args([
                "--network",
                "host",
                "--read-only",
                "--read-only-tmpfs=false",
            ])
            .args(["--tmpfs", "/tmp", "--tmpfs", "/var/lib/triage:U"])
            .args(["--env", &format!("HOLMES_API_KEY={API_KEY}")])
            .args(["--env", &format!("HOLMES_PORT={port}")])
            .args(extra)
            .arg(image());
        let started = output(&mut run);
        assert!(
            started.status.success(),
            "podman run failed: {}",
            text(&started.stderr)
        );
        Container {
            name,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn logs(&self) -> String {
        let out = podman(&["logs", &self.name]);
        format!("{}\n{}", text(&out.stdout), text(&out.stderr))
    }

    fn running(&self) -> bool {
        let inspected = podman(&["inspect", "--format", "{{.State.Running}}", &self.name]);
        text(&inspected.stdout) == "true"
    }

    /// Waits until `probe` (`/readyz`: a model is configured; `/healthz`) answers 200; a
    /// container that stopped meanwhile fails at once, with its logs.
    async fn wait_for(&self, client: &reqwest::Client, probe: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = client
                .get(format!("{}{probe}", self.base))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return;
            }
            assert!(self.running(), "the container stopped:\n{}", self.logs());
            assert!(
                Instant::now() < deadline,
                "not ready within 60 s:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `bash -c script` in the container as `user`: its standard output.
    fn exec(&self, user: &str, script: &str) -> String {
        let out = podman(&["exec", "--user", user, &self.name, "bash", "-c", script]);
        assert!(out.status.success(), "podman exec: {}", text(&out.stderr));
        text(&out.stdout)
    }

    /// Sends `signal` to PID 1 (tini, which forwards it to triage) and waits for the container
    /// to stop: its exit code and how long it took.
    async fn stop_with(&self, signal: &str) -> (String, Duration) {
        let started = Instant::now();
        let killed = podman(&["kill", "--signal", signal, &self.name]);
        assert!(
            killed.status.success(),
            "podman kill: {}",
            text(&killed.stderr)
        );
        let mut wait = tokio::process::Command::new("podman");
        wait.args(PODMAN_FLAGS).args(["wait", &self.name]);
        let waited = tokio::time::timeout(Duration::from_secs(30), wait.output())
            .await
            .unwrap_or_else(|_| panic!("still running 30 s after {signal}:\n{}", self.logs()))
            .expect("podman wait");
        (text(&waited.stdout), started.elapsed())
    }
}

fn authorized(client: &reqwest::Client, url: String) -> reqwest::RequestBuilder {
    client.get(url).header("x-api-key", API_KEY)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs podman and the image: bash .ci/image, then cargo test --test e2e image:: -- --ignored"]
async fn image_serves_chat_and_kubectl_in_cluster_on_a_read_only_root_and_stops_on_sigint() {
    if !can_run() {
        return;
    }
    let standin = kube_standin::start_tls().await;
    let llm = FakeLlm::start().await;
    let _titles = answer_titles(&llm);
    let account = format!(
        "{}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
        standin.service_account_dir().display()
    );
    let container = Container::start(&[
        "--volume".into(),
        account,
        "--env".into(),
        "KUBERNETES_SERVICE_HOST=127.0.0.1".into(),
        "--env".into(),
        format!("KUBERNETES_SERVICE_PORT={}", standin.addr().port()),
        "--env".into(),
        "MODEL=openai/fake-model".into(),
        "--env".into(),
        format!("API_BASE={}", llm.base_url()),
    ]);
    let client = http_client();
    container.wait_for(&client, "/readyz").await;

    let health = client
        .get(format!("{}/healthz", container.base))
        .send()
        .await
        .expect("GET /healthz");
    assert_eq!(health.status(), 200);
    assert_eq!(health.json::<Value>().await.unwrap()["status"], "healthy");

    // The sandbox holds inside the container: podman's default seccomp profile lets Landlock
    // and triage's own filter in.
    let info: Value = authorized(&client, format!("{}/api/info", container.base))
        .send()
        .await
        .expect("GET /api/info")
        .json()
        .await
        .expect("/api/info is JSON");
    let sandbox = &info["sandbox"];
    assert_eq!(sandbox["landlock"]["available"], true, "{sandbox}");
    assert_eq!(sandbox["no_new_privs"], true, "{sandbox}");
    assert_eq!(sandbox["tools_uid"], 10001, "{sandbox}");
    assert_eq!(sandbox["network"]["tcp_rules"], true, "{sandbox}");
    let kubernetes = info["toolsets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "kubernetes"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        kubernetes["status"],
        "enabled",
        "{kubernetes}\n{}",
        container.logs()
    );

    // A streamed chat whose one tool call is kubectl, in-cluster: https to the stand-in with
    // the service account's token and CA.
    llm.push(Step::tool(
        "call_pods",
        "kubectl_get_by_kind_in_namespace",
        json!({"kind": "pods", "namespace": NAMESPACE}),
    ));
    llm.push(Step::text("Both pods in default are running."));
    let response = client
        .post(format!("{}/api/chat", container.base))
        .header("x-api-key", API_KEY)
        .json(&json!({"ask": "Which pods run in default?", "stream": true}))
        .send()
        .await
        .expect("POST /api/chat");
    assert_eq!(response.status(), 200);
    let events = read_events(response).await;
    let seen = names(&events);
    assert_eq!(
        seen.iter().filter(|n| **n == "tool_calling_result").count(),
        1,
        "{seen:?}"
    );
    let result = events
        .iter()
        .find(|e| e.name == "tool_calling_result")
        .map(|e| e.data.clone())
        .unwrap_or_default();
    assert_eq!(
        result["result"]["status"],
        "success",
        "{result}\n{}",
        container.logs()
    );
    let listed = result["result"]["data"].as_str().unwrap_or_default();
    assert!(listed.contains(POD_OK), "{result}");
    let end = events.last().expect("events");
    assert_eq!(end.name, "ai_answer_end");
    assert_eq!(end.data["analysis"], "Both pods in default are running.");
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let requests = standin.seen();
    assert!(requests.iter().any(|r| r.path == pods), "{requests:?}");
    assert!(requests.iter().all(|r| r.authorized), "{requests:?}");
    // The stand-in does refuse a request without the token: kubectl's got through on its own.
    let ca = std::fs::read(standin.service_account_dir().join("ca.crt")).unwrap();
    let tls_client = reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).unwrap()])
        .build()
        .unwrap();
    let anonymous = tls_client
        .get(format!("https://127.0.0.1:{}{pods}", standin.addr().port()))
        .send()
        .await
        .expect("GET the stand-in without a token");
    assert_eq!(anonymous.status(), 401);

    // Only /tmp and the data directory take writes, even for root: the rest is a read-only
    // mount, not just permissions.
    let probe = "for dir in / /etc /usr/local/bin /home/triage /var/tmp /run /tmp /var/lib/triage; do \
                   if touch \"$dir/.probe\" 2>/dev/null; then rm -f \"$dir/.probe\"; echo \"$dir\"; fi; \
                 done";
    assert_eq!(container.exec("0", probe), "/tmp\n/var/lib/triage");
    assert_eq!(container.exec("10001", probe), "/tmp\n/var/lib/triage");
    let data = container.exec("10001", "ls /var/lib/triage");
    assert!(data.lines().any(|f| f == "triage.db"), "{data}");

    // Kubernetes' preStop hook for HolmesGPT sends SIGINT.
    let (code, took) = container.stop_with("SIGINT").await;
    assert_eq!(code, "0", "{}", container.logs());
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(container.logs().contains("shutdown signal received"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs podman and the image: bash .ci/image, then cargo test --test e2e image:: -- --ignored"]
async fn image_reaps_orphans_and_stops_on_sigterm() {
    if !can_run() {
        return;
    }
    let container = Container::start(&[]);
    let client = http_client();
    container.wait_for(&client, "/healthz").await;
    assert_eq!(container.exec("10001", "cat /proc/1/comm").trim(), "tini");
    // A killed tool's grandchildren are re-parented to PID 1, as this orphaned `sleep` is when
    // its shell exits; triage never waits for processes it did not start, tini does.
    container.exec("10001", "sleep 0.2 & exit 0");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let zombies = container.exec(
        "10001",
        "for f in /proc/[0-9]*/stat; do read -r pid comm state _ <\"$f\" && \
         [[ $state == Z ]] && echo \"$pid $comm\"; done; true",
    );
    assert_eq!(zombies.trim(), "", "zombies under PID 1");
    let (code, took) = container.stop_with("SIGTERM").await;
    assert_eq!(code, "0", "{}", container.logs());
    assert!(took < Duration::from_secs(10), "took {took:?}");
}
