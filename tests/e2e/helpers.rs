//! `spawn_app()`: the real triage server on an ephemeral loopback port, configured against a
//! scripted fake LLM on another port, plus small HTTP/SSE helpers.

#![allow(dead_code)]

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;
use triage::config::Settings;
use triage::startup::Application;

use fake_llm::{FakeLlm, Rule, Step, When};

/// Text that only triage's title request carries (its instructions, `src/agent/title.rs`).
pub const TITLE_REQUEST: &str = "You name troubleshooting conversations";
/// What the fake answers every title request with (see [`TestApp::titles`]).
pub const FAKE_TITLE: &str = "Fake conversation title";

/// Has `llm` answer every title request with [`FAKE_TITLE`], aside from its script.
pub fn answer_titles(llm: &FakeLlm) -> Rule {
    let titles = llm.when(When::system_contains(TITLE_REQUEST));
    titles.always(Step::text(FAKE_TITLE));
    titles
}

pub struct TestApp {
    pub base: String,
    pub llm: FakeLlm,
    /// The fake's rule for title requests (a conversation's first answer is followed by one,
    /// in the background): each gets [`FAKE_TITLE`] without taking a scripted step, and is
    /// recorded here rather than in `llm.requests()`. Push steps on it to script titles.
    pub titles: Rule,
    pub client: reqwest::Client,
    server: tokio::task::JoinHandle<()>,
    /// This app's own data directory (its conversation database), removed on drop.
    pub data_dir: Option<std::path::PathBuf>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
        if let Some(dir) = &self.data_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A fresh directory for one test app's conversation database: tests never write to $HOME.
pub fn test_data_dir() -> std::path::PathBuf {
    scratch().join(format!("data-{}", uuid::Uuid::new_v4().simple()))
}

/// Prefix of the scratch directory each e2e test process keeps its files in.
const SCRATCH_PREFIX: &str = "triage-e2e-run-";

/// This test process's scratch directory in the system temp dir; every file and directory the
/// e2e tests make goes under it. libtest has no hook at exit, so a run leaves its directory
/// behind, and the first test of the next run removes those of processes that have exited:
/// repeated runs leave one directory, not thousands of files. The name carries a random part
/// and the directory is created fresh (never one someone else made first, nor a symlink).
pub fn scratch() -> &'static std::path::Path {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        remove_scratch_of_exited_runs();
        let dir = std::env::temp_dir().join(format!(
            "{SCRATCH_PREFIX}{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&dir)
            .expect("create the e2e scratch directory");
        // Tools run as an unprivileged user when the tests run as root: they must be able to
        // reach the directories made for them in here, whatever the umask.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .expect("open the e2e scratch directory to tools");
        dir
    })
}

/// Removes the scratch directories, owned by this user, of test processes that have exited.
fn remove_scratch_of_exited_runs() {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let ours = std::fs::symlink_metadata(entry.path())
            .is_ok_and(|m| m.file_type().is_dir() && m.uid() == uid);
        // Our own pid: a directory of an earlier process (ours is made after this sweep).
        let exited =
            pid == std::process::id() || !std::path::Path::new(&format!("/proc/{pid}")).exists();
        if ours && exited {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// One SSE event: its name and parsed data.
#[derive(Debug, Clone)]
pub struct Event {
    pub name: String,
    pub data: Value,
}

/// A `reqwest::Client` for loopback servers (installs the ring rustls provider, which
/// reqwest's `rustls-no-provider` feature requires, and ignores proxy environment variables).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("build reqwest client")
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with("").await
}

/// Starts triage with test defaults (fast retries and timeouts, a model `fake` pointing at
/// the fake LLM) plus `extra` TOML layered on top. `{LLM}` in `extra` becomes the fake's URL
/// (`…/v1`), `{LLM_ORIGIN}` its origin (Gemini and Vertex bases).
pub async fn spawn_app_with(extra: &str) -> TestApp {
    spawn_app_layers(&[extra]).await
}

/// `spawn_app_with` with several TOML layers, each on top of the ones before (two layers may
/// each set keys of one table).
pub async fn spawn_app_layers(extras: &[&str]) -> TestApp {
    spawn_app_holmes(&triage::config::HolmesFiles::default(), extras).await
}

/// `spawn_app_layers` with HolmesGPT's config files below the TOML layers (as `serve` reads
/// `~/.holmes/config.yaml` and `CUSTOM_TOOLSET_LOCATION`, without reading the environment).
pub async fn spawn_app_holmes(holmes: &triage::config::HolmesFiles, extras: &[&str]) -> TestApp {
    spawn_app_adjusted(holmes, extras, |_| {}).await
}

/// `spawn_app_holmes` with the settings changed by `adjust` before the server starts (for the
/// settings no config file can set, such as the sandbox's test switches).
pub async fn spawn_app_adjusted(
    holmes: &triage::config::HolmesFiles,
    extras: &[&str],
    adjust: impl FnOnce(&mut Settings),
) -> TestApp {
    let llm = FakeLlm::start().await;
    let data_dir = test_data_dir();
    let layers = test_layers(&llm, &data_dir, extras);
    let layers: Vec<&str> = layers.iter().map(String::as_str).collect();
    let mut settings = Settings::from_holmes_and_toml(holmes, &layers).expect("test settings");
    adjust(&mut settings);
    let mut app = spawn_with_settings(settings, llm).await;
    app.data_dir = Some(data_dir);
    app
}

/// `spawn_app_holmes` whose admin reload (`[admin] enabled = true` in `extras`) reads its
/// settings again as `serve` does: HolmesGPT's files and the TOML layers, and the files they
/// name (the model list).
pub async fn spawn_app_reloadable(holmes: triage::config::HolmesFiles, extras: &[&str]) -> TestApp {
    let llm = FakeLlm::start().await;
    let data_dir = test_data_dir();
    let layers = test_layers(&llm, &data_dir, extras);
    let read = move || {
        let layers: Vec<&str> = layers.iter().map(String::as_str).collect();
        Settings::from_holmes_and_toml(&holmes, &layers)
    };
    let settings = read().expect("test settings");
    let mut app = spawn_with_source(settings, llm, Box::new(read)).await;
    app.data_dir = Some(data_dir);
    app
}

/// The test defaults (fast retries and timeouts, a model `fake` pointing at the fake LLM, a
/// conversation database in `data_dir`) and `extras` on top, placeholders filled.
fn test_layers(llm: &FakeLlm, data_dir: &std::path::Path, extras: &[&str]) -> Vec<String> {
    let base_toml = format!(
        r#"
[server]
host = "127.0.0.1"
port = 0
[llm]
first_byte_timeout_secs = 5.0
idle_timeout_secs = 5.0
retry_base_delay_ms = 10
retry_max_delay_ms = 50
retry_max_elapsed_secs = 5.0
[toolsets.kubernetes]
enabled = false
[toolsets.prometheus]
enabled = false
[approvals]
signing_key = "e2e-test-key"
[models.fake]
model = "openai/fake-model"
api_base = "{url}"
[conversations]
database_url = "sqlite://{db}"
"#,
        url = llm.base_url(),
        db = data_dir.join("triage.db").display()
    );
    let mut layers = vec![base_toml];
    layers.extend(extras.iter().map(|e| {
        e.replace("{LLM}", &llm.base_url())
            .replace("{LLM_ORIGIN}", &llm.origin())
    }));
    layers
}

pub async fn spawn_with_settings(settings: Settings, llm: FakeLlm) -> TestApp {
    let again = settings.clone();
    spawn_with_source(settings, llm, Box::new(move || Ok(again.clone()))).await
}

/// `spawn_with_settings` whose admin reload takes its settings from `source`.
pub async fn spawn_with_source(
    mut settings: Settings,
    llm: FakeLlm,
    source: Box<dyn Fn() -> Result<Settings, triage::config::ConfigError> + Send + Sync>,
) -> TestApp {
    // Settings a test built itself keep their conversations in a temp dir too.
    let c = &mut settings.conversations;
    let own_dir = (c.database_url.is_none() && c.data_dir.is_none()).then(|| {
        let dir = test_data_dir();
        c.data_dir = Some(dir.clone());
        dir
    });
    let titles = answer_titles(&llm);
    let app = Application::build_with_source(settings, source)
        .await
        .expect("app builds");
    let base = format!("http://127.0.0.1:{}", app.port());
    let server = tokio::spawn(async move {
        let _ = app.run_until_stopped().await;
    });
    TestApp {
        base,
        llm,
        titles,
        client: http_client(),
        server,
        data_dir: own_dir,
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn post_chat(&self, body: &Value) -> reqwest::Response {
        self.post_raw("/api/chat", body.to_string()).await
    }

    pub async fn post_raw(&self, path: &str, body: String) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request to triage")
    }

    /// Non-streaming chat: status and parsed body.
    pub async fn chat_json(&self, body: &Value) -> (u16, Value) {
        let resp = self.post_chat(body).await;
        let status = resp.status().as_u16();
        (status, json_body(resp).await)
    }

    /// Streaming chat: every event, in order (the body is read to its end).
    pub async fn chat_sse(&self, body: &Value) -> Vec<Event> {
        let mut body = body.clone();
        body["stream"] = Value::Bool(true);
        let resp = self.post_chat(&body).await;
        assert_eq!(resp.status(), 200, "streaming chat status");
        read_events(resp).await
    }

    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let resp = self.client.get(self.url(path)).send().await.expect("GET");
        let status = resp.status().as_u16();
        (status, json_body(resp).await)
    }

    /// The text of `/metrics`.
    pub async fn metrics(&self) -> String {
        self.client
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics body")
    }

    /// The messages of the n-th request the fake LLM received.
    pub fn llm_messages(&self, n: usize) -> Vec<Value> {
        self.llm.requests()[n]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The system prompt of the n-th LLM request, or "" when none was sent.
    pub fn system_prompt_sent(&self, n: usize) -> String {
        self.llm_messages(n)
            .iter()
            .find(|m| m["role"] == "system")
            .and_then(|m| m["content"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

pub async fn json_body(resp: reqwest::Response) -> Value {
    let bytes = resp.bytes().await.expect("response body");
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
}

pub async fn read_events(resp: reqwest::Response) -> Vec<Event> {
    let mut stream = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("SSE stream stalled")
    {
        let ev = ev.expect("SSE event");
        let data = serde_json::from_str(&ev.data)
            .unwrap_or_else(|e| panic!("event {} data is not JSON ({e}): {}", ev.event, ev.data));
        out.push(Event {
            name: ev.event,
            data,
        });
    }
    out
}

pub fn names(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.name.as_str()).collect()
}

pub fn last(events: &[Event]) -> &Event {
    events.last().expect("at least one event")
}

/// A tool of a toolset, by name (toolset tests drive tools directly).
pub fn tool<'a>(
    ts: &'a triage::tools::Toolset,
    name: &str,
) -> &'a std::sync::Arc<dyn triage::tools::Tool> {
    ts.tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("toolset has no tool {name}"))
}

/// Invokes a toolset's tool with default context.
pub async fn call(
    ts: &triage::tools::Toolset,
    name: &str,
    params: Value,
) -> triage::tools::ToolOutput {
    tool(ts, name)
        .invoke(&params, &triage::tools::ToolContext::default())
        .await
}

/// A fresh directory that approved tool commands can write in: tools run under the sandbox's
/// unprivileged user when the tests run as root, so the directory is world-writable.
pub fn tool_writable_dir(purpose: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch().join(format!("{purpose}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// How often [`eventually`] looks again: the conditions are cheap reads.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// What a condition of [`eventually`] answers once it holds: `true`, `Some(value)` or
/// `Ok(value)`. `Err(seen)` says what was seen instead, shown if the wait times out.
pub trait Reached {
    type Value;
    fn reached(self) -> Result<Self::Value, Option<String>>;
}

impl Reached for bool {
    type Value = ();
    fn reached(self) -> Result<(), Option<String>> {
        self.then_some(()).ok_or(None)
    }
}

impl<T> Reached for Option<T> {
    type Value = T;
    fn reached(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T, E: std::fmt::Display> Reached for Result<T, E> {
    type Value = T;
    fn reached(self) -> Result<T, Option<String>> {
        self.map_err(|seen| Some(seen.to_string()))
    }
}

/// Waits until `check` holds (see [`Reached`]; its value is returned), looking again every
/// 10 ms; panics naming `what` (and what was last seen) once `within` has passed. The way the
/// e2e tests wait: a fixed sleep is too short on a loaded machine and too long elsewhere.
pub async fn eventually<R: Reached, F: Future<Output = R>>(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> F,
) -> R::Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen = match check().await.reached() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            match seen {
                Some(seen) => panic!("waited {within:?} for {what}; last seen: {seen}"),
                None => panic!("waited {within:?} for {what}"),
            }
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Waits until a `triage serve` started as a subprocess answers `/readyz` with 200. Generous:
/// a debug build starting on a loaded machine can take seconds, and a timeout here only means
/// the test fails later with less to say.
pub async fn wait_until_ready(client: &reqwest::Client, base: &str) {
    eventually(
        &format!("the server at {base} to be ready"),
        Duration::from_secs(30),
        || async {
            client
                .get(format!("{base}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        },
    )
    .await
}

/// A loopback port that was free a moment ago, for a server started as a subprocess.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

/// A self-signed certificate for `localhost` and its key, written into `dir` by openssl.
pub fn self_signed_cert(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let status = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl is installed");
    assert!(status.success());
    (cert, key)
}

/// No LLM call has been cancelled yet; `leave` (the client going away: its response
/// dropped, its request aborted) cancels the call within 2 s. `what` names the call in the
/// failure message.
pub async fn assert_leaving_cancels(app: &TestApp, leave: impl FnOnce(), what: &str) {
    assert_eq!(app.llm.cancellations(), 0);
    leave();
    assert!(
        app.llm
            .wait_for_cancellations(1, Duration::from_secs(2))
            .await,
        "the {what} call kept running after the client left"
    );
}
