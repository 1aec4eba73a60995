//! A scripted fake LLM that speaks the OpenAI chat-completions wire format (streaming SSE and
//! non-streaming JSON) on a loopback port: the one fake behind triage's end-to-end tests, the
//! browser harness, the examples and the load benchmark.
//!
//! Each request to `POST /v1/chat/completions` (or `/chat/completions`, see `openai.rs`) is counted, recorded (its raw body,
//! unless [`FakeLlm::keep_requests`] is off) and consumes the next scripted [`Step`] (FIFO).
//! When the script is empty the fake answers HTTP 500
//! `{"error":{"message":"fake llm: script exhausted","type":"server_error"}}`, unless a
//! responder was set ([`FakeLlm::set_responder`], [`FakeLlm::set_raw_responder`],
//! [`FakeLlm::set_default`]): then the responder picks the step from the request (long,
//! concurrent runs). `GET /v1/models` answers the model list ([`FakeLlm::set_models`]).
//! A request that matches a rule ([`FakeLlm::when`]: by the model it names or by its content)
//! is answered, counted and recorded by that rule instead, and consumes no scripted step: a
//! test describes scenarios (a title request always gets a title) rather than call orders.
//! With a context window set ([`FakeLlm::set_context_window`]), a prompt that does not fit is
//! refused as OpenAI refuses it (HTTP 400 `context_length_exceeded`), consuming no step.
//!
//! `POST /v1/messages` speaks Anthropic's Messages API from the same script: it refuses, as
//! Anthropic does (HTTP 400 `invalid_request_error`), every request the real API refuses
//! (headers, alternation, tool pairing, empty text, thinking signatures…), and answers in
//! Anthropic's SSE events or message JSON (see `anthropic/`).
//!
//! Gemini (`/v1beta/models/{m}:streamGenerateContent?alt=sse`), Vertex AI
//! (`/v1/projects/{p}/locations/{l}/publishers/{google|anthropic}/models/{m}:…`) and Google's
//! token endpoints (`/token`, the metadata server's path) answer from the same script, refusing
//! what Gemini and Vertex refuse (see `gemini/`).
//!
//! Bedrock's `POST /model/{id}/converse-stream` checks SigV4 signatures and answers in
//! eventstream frames, with a fake STS at `/sts` for web identity (see `bedrock/`).

pub(crate) mod anthropic;
mod bedrock;
mod gemini;
mod openai;
mod rules;
mod step;
mod window;
mod wire;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use serde_json::Value;

pub use rules::{Rule, When};
pub use step::{Step, ToolCall, Usage};

/// The body of the HTTP 500 answered when the script is exhausted.
pub const EXHAUSTED_MESSAGE: &str = "fake llm: script exhausted";

type JsonResponder = Arc<dyn Fn(&Value) -> Step + Send + Sync>;
type RawResponder = Arc<dyn Fn(&[u8]) -> Step + Send + Sync>;

#[derive(Clone)]
enum Responder {
    Json(JsonResponder),
    Raw(RawResponder),
}

struct Script {
    steps: VecDeque<Step>,
    /// Raw bodies, parsed only when read: keeping one costs a reference count.
    requests: Vec<Bytes>,
    /// The headers of the kept requests, in the same order.
    headers: Vec<HeaderMap>,
    keep_requests: bool,
    responder: Option<Responder>,
    context_window: Option<u64>,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            steps: VecDeque::new(),
            requests: Vec::new(),
            headers: Vec::new(),
            keep_requests: true,
            responder: None,
            context_window: None,
        }
    }
}

impl Script {
    /// The next scripted step, or else the responder that will pick one.
    fn next(&mut self) -> (Option<Step>, Option<Responder>) {
        let step = self.steps.pop_front();
        let responder = if step.is_none() {
            self.responder.clone()
        } else {
            None
        };
        (step, responder)
    }
}

struct Inner {
    script: Mutex<Script>,
    /// Checked first, in the order added; a request one matches is that rule's.
    rules: Mutex<Vec<Rule>>,
    /// Whether `rules` has any: without, a request's body is not parsed to match them.
    any_rules: AtomicBool,
    /// Requests received, kept or not, that no rule matched.
    count: AtomicUsize,
    /// What GET /v1/models answers: the listed ids, or an error status.
    models: Mutex<Result<Vec<String>, u16>>,
    cancellations: AtomicUsize,
    in_flight: AtomicUsize,
    changed: tokio::sync::Notify,
    anthropic: anthropic::AnthropicState,
    bedrock: bedrock::BedrockState,
    google: gemini::GoogleState,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            script: Mutex::default(),
            rules: Mutex::default(),
            any_rules: AtomicBool::default(),
            count: AtomicUsize::default(),
            models: Mutex::new(Ok(vec!["fake-model".to_owned()])),
            cancellations: AtomicUsize::default(),
            in_flight: AtomicUsize::default(),
            changed: tokio::sync::Notify::default(),
            anthropic: anthropic::AnthropicState::default(),
            bedrock: bedrock::BedrockState::default(),
            google: gemini::GoogleState::new(),
        }
    }
}

impl Inner {
    /// A test that panicked while holding the lock must not hide its own failure behind a
    /// poisoned mutex here.
    fn script(&self) -> MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rule a request belongs to: the first added that matches it (`body` is parsed
    /// from `raw` if needed). `url_model`: the model named in the URL, if the API puts it there.
    fn rule_for(
        &self,
        url_model: Option<&str>,
        raw: &[u8],
        body: &mut Option<Value>,
    ) -> Option<Rule> {
        if !self.any_rules.load(Ordering::SeqCst) {
            return None;
        }
        let body = body.get_or_insert_with(|| parse(raw));
        let rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules.iter().find(|r| r.matches(url_model, body)).cloned()
    }

    /// Counts and records a request where it belongs (on its rule, else in the script's
    /// record) and returns its rule.
    fn receive(
        &self,
        url_model: Option<&str>,
        raw: &Bytes,
        headers: Option<&HeaderMap>,
    ) -> Option<Rule> {
        let rule = self.rule_for(url_model, raw, &mut None);
        match &rule {
            Some(rule) => rule.record(raw),
            None => {
                self.count.fetch_add(1, Ordering::SeqCst);
                let mut script = self.script();
                if script.keep_requests {
                    script.requests.push(raw.clone());
                    if let Some(headers) = headers {
                        script.headers.push(headers.clone());
                    }
                }
            }
        }
        self.changed.notify_waiters();
        rule
    }

    /// The step answering a request: its rule's, else the next scripted one, else the
    /// responder's; `None` when exhausted.
    fn step(&self, rule: Option<&Rule>, body: &Value, raw: &[u8]) -> Option<Step> {
        if let Some(rule) = rule {
            return rule.next();
        }
        let (scripted, responder) = self.script().next();
        scripted.or_else(|| match responder? {
            Responder::Json(f) => Some(f(body)),
            Responder::Raw(f) => Some(f(raw)),
        })
    }
}

/// Aborts the accept loop when the last `FakeLlm` clone goes away.
struct ServerTask(tokio::task::JoinHandle<()>);

impl Drop for ServerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A scripted fake OpenAI-compatible LLM server on 127.0.0.1.
#[derive(Clone)]
pub struct FakeLlm {
    inner: Arc<Inner>,
    addr: SocketAddr,
    _task: Arc<ServerTask>,
}

impl FakeLlm {
    /// Binds 127.0.0.1:0 and serves in a spawned tokio task.
    pub async fn start() -> FakeLlm {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fake llm: bind 127.0.0.1:0");
        FakeLlm::serve(listener)
    }

    /// Serves on `listener` in a spawned tokio task: HTTP/1 with TCP_NODELAY, as OpenAI
    /// clients speak to a plain-HTTP base URL.
    pub fn serve(listener: tokio::net::TcpListener) -> FakeLlm {
        let inner = Arc::new(Inner::default());
        let addr = listener.local_addr().expect("fake llm: local_addr");
        let app = Router::new()
            .route("/v1/chat/completions", post(openai::complete))
            .route("/chat/completions", post(openai::complete))
            .route("/v1/models", get(openai::list_models))
            .route("/v1/messages", post(anthropic::messages))
            .route(
                "/v1beta/models/{model}",
                post(gemini::ai_studio).get(gemini::get_model),
            )
            .route(
                "/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}",
                post(gemini::vertex).get(gemini::vertex_get_model),
            )
            .route(
                "/model/{model}/converse-stream",
                post(bedrock::converse_stream),
            )
            .route("/sts", post(bedrock::sts))
            .route("/sts/", post(bedrock::sts))
            .route("/token", post(gemini::token))
            .route(
                "/computeMetadata/v1/instance/service-accounts/default/token",
                get(gemini::metadata_token),
            )
            .layer(DefaultBodyLimit::disable())
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            loop {
                let (tcp, _) = match listener.accept().await {
                    Ok(c) => c,
                    Err(_) => {
                        // Out of descriptors, typically: wait for some to close.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        FakeLlm {
            inner,
            addr,
            _task: Arc::new(ServerTask(task)),
        }
    }

    /// e.g. "http://127.0.0.1:PORT/v1"
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// e.g. "http://127.0.0.1:PORT": the `api_base` of Gemini and Vertex entries.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Gemini requests must carry this API key (else any non-empty one is taken).
    pub fn set_gemini_api_key(&self, key: &str) {
        *self
            .inner
            .google
            .api_key
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(key.to_owned());
    }

    /// The token endpoint (`{origin}/token`) accepts JWTs of `email` signed with the key of
    /// `private_key_pem` (PKCS#8), as Google accepts those of a service account's key.
    pub fn trust_service_account(&self, email: &str, private_key_pem: &str) {
        let key = gemini::public_key_of(private_key_pem).expect("fake llm: a PKCS#8 RSA key");
        *self
            .inner
            .google
            .trusted
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((email.to_owned(), key));
    }

    /// Bedrock accepts requests signed with this access key (SigV4, recomputed by the fake).
    pub fn trust_aws_key(&self, access_key_id: &str, secret_access_key: &str) {
        self.inner
            .bedrock
            .credentials
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(access_key_id.to_owned(), secret_access_key.to_owned());
    }

    /// Bedrock accepts `Authorization: Bearer <token>` (a Bedrock API key).
    pub fn trust_bedrock_bearer(&self, token: &str) {
        *self
            .inner
            .bedrock
            .bearer
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(token.to_owned());
    }

    /// The fake STS (`{origin}/sts`) gives credentials for `role_arn` to `web_identity_token`.
    pub fn trust_web_identity(&self, role_arn: &str, web_identity_token: &str) {
        *self
            .inner
            .bedrock
            .web_identity
            .lock()
            .unwrap_or_else(|e| e.into_inner()) =
            Some((role_arn.to_owned(), web_identity_token.to_owned()));
    }

    /// AssumeRoleWithWebIdentity calls received by the fake STS.
    pub fn sts_requests(&self) -> usize {
        self.inner.bedrock.sts_requests.load(Ordering::SeqCst)
    }

    /// Token requests received (service-account grants and metadata-server reads).
    pub fn google_token_requests(&self) -> usize {
        self.inner.google.token_requests.load(Ordering::SeqCst)
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What GET /v1/models answers from now on: these ids, or an error status.
    pub fn set_models(&self, models: Result<&[&str], u16>) {
        *self.inner.models.lock().unwrap_or_else(|e| e.into_inner()) =
            models.map(|ids| ids.iter().map(|id| (*id).to_owned()).collect());
    }

    /// Adds a rule, checked after those added before: requests it matches are answered from
    /// the rule (see [`Rule::push`], [`Rule::always`]) and recorded there, never from the
    /// script.
    pub fn when(&self, when: When) -> Rule {
        let rule = Rule::new(when);
        self.inner
            .rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(rule.clone());
        self.inner.any_rules.store(true, Ordering::SeqCst);
        rule
    }

    /// Append a scripted step (FIFO).
    pub fn push(&self, step: Step) {
        self.inner.script().steps.push_back(step);
    }

    /// Replace the script and forget the recorded requests.
    pub fn reset(&self, steps: Vec<Step>) {
        let mut script = self.inner.script();
        script.steps = steps.into();
        script.requests.clear();
        script.headers.clear();
    }

    /// When the script is empty, answer every request with a clone of `step`
    /// (instead of HTTP 500).
    pub fn set_default(&self, step: Step) {
        self.set_responder(move |_| step.clone());
    }

    /// When the script is empty, answer with the step `f` picks for the request body
    /// (instead of HTTP 500). Scripted steps still come first.
    pub fn set_responder(&self, f: impl Fn(&Value) -> Step + Send + Sync + 'static) {
        self.inner.script().responder = Some(Responder::Json(Arc::new(f)));
    }

    /// As [`FakeLlm::set_responder`], from the unparsed request body: for a benchmark, where
    /// parsing every body would weigh on the figures.
    pub fn set_raw_responder(&self, f: impl Fn(&[u8]) -> Step + Send + Sync + 'static) {
        self.inner.script().responder = Some(Responder::Raw(Arc::new(f)));
    }

    /// `false`: count requests but do not keep their bodies (`requests()` stays
    /// empty), so a long run does not grow the process. Default `true`.
    pub fn keep_requests(&self, keep: bool) {
        self.inner.script().keep_requests = keep;
    }

    /// `Some(tokens)`: refuse, as OpenAI does, every request whose prompt (counted with o200k)
    /// plus its `max_tokens` exceeds `tokens`, with HTTP 400 `context_length_exceeded`. A
    /// refused request is counted and recorded but consumes no step. Default `None`: no limit.
    pub fn set_context_window(&self, tokens: Option<u64>) {
        self.inner.script().context_window = tokens;
    }

    /// Number of scripted steps not yet consumed.
    pub fn remaining(&self) -> usize {
        self.inner.script().steps.len()
    }

    /// Bodies of every request received so far (parsed JSON), in arrival order.
    /// A body that is not valid JSON is recorded as a JSON string of its text.
    pub fn requests(&self) -> Vec<Value> {
        self.inner
            .script()
            .requests
            .iter()
            .map(|b| parse(b))
            .collect()
    }

    /// The headers of every request kept so far (as [`FakeLlm::requests`]), in arrival order.
    pub fn request_headers(&self) -> Vec<HeaderMap> {
        self.inner.script().headers.clone()
    }

    /// The recorded bodies as received, which are then forgotten.
    pub fn take_raw_requests(&self) -> Vec<Bytes> {
        let mut script = self.inner.script();
        script.headers.clear();
        std::mem::take(&mut script.requests)
    }

    pub fn request_count(&self) -> usize {
        self.inner.count.load(Ordering::SeqCst)
    }

    /// Number of responses whose body (or pending handler, for hangs) was
    /// dropped before the step finished.
    pub fn cancellations(&self) -> usize {
        self.inner.cancellations.load(Ordering::SeqCst)
    }

    /// Streamed responses (and hangs) begun and not yet finished or dropped.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// Waits until `cancellations() >= n` or the timeout passes.
    pub async fn wait_for_cancellations(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |f| f.cancellations() >= n).await
    }

    /// Waits until `request_count() >= n` or the timeout passes.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |f| f.request_count() >= n).await
    }

    async fn wait_until(&self, timeout: Duration, cond: impl Fn(&FakeLlm) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.inner.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if cond(self) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            // Also re-check periodically as a safety net.
            let wait = (deadline - now).min(Duration::from_millis(50));
            let _ = tokio::time::timeout(wait, notified).await;
        }
    }
}

fn parse(raw: &[u8]) -> Value {
    serde_json::from_slice(raw)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw).into_owned()))
}

/// Counts a response in flight while it lives, and a cancellation on drop unless
/// `finish()` was called.
struct CancelGuard {
    inner: Arc<Inner>,
    done: bool,
}

impl CancelGuard {
    fn new(inner: &Arc<Inner>) -> Self {
        inner.in_flight.fetch_add(1, Ordering::SeqCst);
        CancelGuard {
            inner: inner.clone(),
            done: false,
        }
    }

    fn finish(&mut self) {
        self.done = true;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        self.inner.in_flight.fetch_sub(1, Ordering::SeqCst);
        if !self.done {
            self.inner.cancellations.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.changed.notify_waiters();
    }
}
