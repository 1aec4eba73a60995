//! A scripted fake LLM that speaks the OpenAI chat-completions wire format
//! (streaming SSE and non-streaming JSON) on a loopback port.
//!
//! Each incoming request is recorded (parsed JSON body) and then consumes the
//! next scripted [`Step`] (FIFO). When the script is empty the fake answers
//! HTTP 500 `{"error":{"message":"fake llm: script exhausted","type":"server_error"}}`,
//! unless a responder was set ([`FakeLlm::set_responder`], [`FakeLlm::set_default`]):
//! then the responder picks the step from the request (for long, concurrent runs).
#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::Stream;
use serde_json::{Value, json};

/// The body of the HTTP 500 answered when the script is exhausted.
pub const EXHAUSTED_MESSAGE: &str = "fake llm: script exhausted";

/// Token usage reported in the final usage chunk / non-streaming `usage`.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One tool call requested by the fake model.
#[derive(Clone, Debug)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One scripted response; each incoming request consumes the next step.
#[derive(Clone, Debug)]
pub enum Step {
    /// Streams `content` (and optional reasoning as `reasoning_content` deltas)
    /// split into several deltas (by word), finish_reason "stop".
    Text {
        content: String,
        reasoning: Option<String>,
        usage: Option<Usage>,
    },
    /// Optional content first, then the tool calls as deltas (header chunk with
    /// index/id/type/name and empty arguments, then >= 2-3 argument pieces).
    /// finish_reason "tool_calls".
    ToolCalls {
        content: Option<String>,
        calls: Vec<ToolCall>,
        usage: Option<Usage>,
    },
    /// A non-streaming HTTP error with body
    /// `{"error":{"message":..,"type":..,"param":null,"code":..}}`.
    Error {
        status: u16,
        message: String,
        retry_after: Option<String>,
    },
    /// Accept the request, never send response headers.
    HangBeforeHeaders,
    /// Send headers and the first content chunk, then stall forever.
    HangAfterFirstChunk { first: String },
    /// Send the content chunks of `content`, then end the body without a
    /// finish_reason chunk and without `data: [DONE]`.
    CutMidStream { content: String },
    /// Send raw SSE text verbatim as the body (status 200, text/event-stream).
    Raw { body: String },
    /// Raw bytes as the body (for invalid UTF-8).
    RawBytes { body: Vec<u8> },
    /// One content delta every `interval`, `chunks` times, then finish normally.
    Slow {
        content: String,
        chunks: usize,
        interval: Duration,
    },
}

impl Step {
    /// Text with no reasoning, default usage.
    pub fn text(s: &str) -> Step {
        Step::Text {
            content: s.to_string(),
            reasoning: None,
            usage: None,
        }
    }

    /// Text preceded by reasoning deltas, default usage.
    pub fn text_with_reasoning(reasoning: &str, s: &str) -> Step {
        Step::Text {
            content: s.to_string(),
            reasoning: Some(reasoning.to_string()),
            usage: None,
        }
    }

    /// One tool call, arguments = `args.to_string()`.
    pub fn tool(id: &str, name: &str, args: Value) -> Step {
        Step::tools(vec![(id, name, args)])
    }

    /// Several tool calls in one assistant turn.
    pub fn tools(calls: Vec<(&str, &str, Value)>) -> Step {
        Step::ToolCalls {
            content: None,
            calls: calls
                .into_iter()
                .map(|(id, name, args)| ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: args.to_string(),
                })
                .collect(),
            usage: None,
        }
    }

    /// A non-streaming HTTP error without Retry-After.
    pub fn error(status: u16, message: &str) -> Step {
        Step::Error {
            status,
            message: message.to_string(),
            retry_after: None,
        }
    }
}

/// Chooses a step from the request body when the script is empty.
pub type Responder = Arc<dyn Fn(&Value) -> Step + Send + Sync>;

struct Script {
    steps: VecDeque<Step>,
    requests: Vec<Value>,
    /// Requests received, kept or not.
    count: usize,
    /// Whether request bodies are kept for `requests()`.
    keep_requests: bool,
    responder: Option<Responder>,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            steps: VecDeque::new(),
            requests: Vec::new(),
            count: 0,
            keep_requests: true,
            responder: None,
        }
    }
}

struct Inner {
    script: Mutex<Script>,
    /// What GET /v1/models answers: the listed ids, or an error status.
    models: Mutex<Result<Vec<String>, u16>>,
    cancellations: AtomicUsize,
    changed: tokio::sync::Notify,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            script: Mutex::default(),
            models: Mutex::new(Ok(vec!["fake-model".to_owned()])),
            cancellations: AtomicUsize::default(),
            changed: tokio::sync::Notify::default(),
        }
    }
}

impl Inner {
    fn bump_cancellations(&self) {
        self.cancellations.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// Aborts the server task when the last `FakeLlm` clone goes away.
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
    addr: std::net::SocketAddr,
    _task: Arc<ServerTask>,
}

impl FakeLlm {
    /// Binds 127.0.0.1:0 and serves POST /v1/chat/completions (and
    /// /chat/completions) in a spawned tokio task.
    pub async fn start() -> FakeLlm {
        let inner = Arc::new(Inner::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fake llm: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("fake llm: local_addr");
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/chat/completions", post(handle))
            .route("/v1/models", get(list_models))
            .layer(DefaultBodyLimit::disable())
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
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

    /// The bound socket address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// What GET /v1/models answers from now on: these ids, or an error status.
    pub fn set_models(&self, models: Result<&[&str], u16>) {
        *self.inner.models.lock().unwrap() =
            models.map(|ids| ids.iter().map(|id| (*id).to_owned()).collect());
    }

    /// Append a scripted step (FIFO).
    pub fn push(&self, step: Step) {
        self.inner.script.lock().unwrap().steps.push_back(step);
    }

    /// When the script is empty, answer every request with a clone of `step`
    /// (instead of HTTP 500).
    pub fn set_default(&self, step: Step) {
        self.set_responder(move |_| step.clone());
    }

    /// When the script is empty, answer with the step `f` picks for the request
    /// body (instead of HTTP 500). Scripted steps still come first. `f` runs
    /// under the script's lock: it must not call back into the fake.
    pub fn set_responder(&self, f: impl Fn(&Value) -> Step + Send + Sync + 'static) {
        self.inner.script.lock().unwrap().responder = Some(Arc::new(f));
    }

    /// `false`: count requests but do not keep their bodies (`requests()` stays
    /// empty), so a long run does not grow the process. Default `true`.
    pub fn keep_requests(&self, keep: bool) {
        self.inner.script.lock().unwrap().keep_requests = keep;
    }

    /// Number of scripted steps not yet consumed.
    pub fn remaining(&self) -> usize {
        self.inner.script.lock().unwrap().steps.len()
    }

    /// Bodies of every request received so far (parsed JSON), in arrival order.
    /// A body that is not valid JSON is recorded as a JSON string of its text.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.script.lock().unwrap().requests.clone()
    }

    pub fn request_count(&self) -> usize {
        self.inner.script.lock().unwrap().count
    }

    /// Number of responses whose body (or pending handler, for hangs) was
    /// dropped before the step finished.
    pub fn cancellations(&self) -> usize {
        self.inner.cancellations.load(Ordering::SeqCst)
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

/// A `reqwest::Client` usable against the fake (installs the ring rustls
/// provider, which reqwest's `rustls-no-provider` feature requires, and
/// ignores proxy environment variables).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("fake llm: build reqwest client")
}

/// Counts a cancellation on drop unless `finish()` was called.
struct CancelGuard {
    inner: Arc<Inner>,
    done: bool,
}

impl CancelGuard {
    fn new(inner: &Arc<Inner>) -> Self {
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
        if !self.done {
            self.inner.bump_cancellations();
        }
    }
}

/// Per-request facts needed to render chunks.
struct Ctx {
    id: String,
    created: u64,
    model: String,
    stream: bool,
    include_usage: bool,
    prompt_tokens: u64,
}

impl Ctx {
    fn from_request(body: &Value, raw_len: usize) -> Ctx {
        Ctx {
            id: format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
            created: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("fake-model")
                .to_string(),
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
            include_usage: body
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            prompt_tokens: ((raw_len / 4) as u64).max(1),
        }
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        let v = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [{
                "index": 0,
                "delta": delta,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
        });
        sse(&v)
    }

    fn usage_chunk(&self, usage: Usage) -> Bytes {
        let v = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [],
            "usage": usage_json(usage),
        });
        sse(&v)
    }

    fn usage_or_default(&self, usage: Option<Usage>, completion_estimate: u64) -> Usage {
        usage.unwrap_or(Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: completion_estimate.max(1),
        })
    }
}

fn usage_json(u: Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    })
}

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn done_line() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// Splits text into word deltas, keeping the whitespace attached so that the
/// concatenation of the pieces equals the input.
fn split_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_ws = false;
    for c in s.chars() {
        let ws = c.is_whitespace();
        if !ws && prev_ws && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
        prev_ws = ws;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Splits `s` into exactly `n` contiguous pieces of roughly equal char count
/// (some may be empty if `s` is shorter than `n`).
fn split_n(s: &str, n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let chars: Vec<char> = s.chars().collect();
    let total = chars.len();
    (0..n)
        .map(|i| {
            let start = i * total / n;
            let end = (i + 1) * total / n;
            chars[start..end].iter().collect()
        })
        .collect()
}

/// Splits tool-call arguments into at least 3 pieces (fewer only when the
/// string has fewer chars), more for long arguments.
fn split_args(s: &str) -> Vec<String> {
    let len = s.chars().count();
    if len == 0 {
        return Vec::new();
    }
    let n = len.div_ceil(12).max(3).min(len);
    split_n(s, n)
}

fn word_count(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

fn tool_calls_completion_estimate(content: Option<&str>, calls: &[ToolCall]) -> u64 {
    let args: usize = calls.iter().map(|c| c.arguments.len()).sum();
    content.map(word_count).unwrap_or(0) + (args / 4) as u64
}

fn error_kind(status: u16) -> (&'static str, Value) {
    match status {
        400 => ("invalid_request_error", Value::Null),
        401 => ("invalid_request_error", json!("invalid_api_key")),
        403 => ("permission_error", Value::Null),
        404 => ("invalid_request_error", json!("model_not_found")),
        408 => ("timeout", Value::Null),
        413 => ("invalid_request_error", json!("context_length_exceeded")),
        429 => ("requests", json!("rate_limit_exceeded")),
        s if s >= 500 => ("server_error", Value::Null),
        _ => ("invalid_request_error", Value::Null),
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn sse_response<S>(stream: S) -> Response
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

async fn list_models(State(inner): State<Arc<Inner>>) -> Response {
    match inner.models.lock().unwrap().clone() {
        Ok(ids) => {
            let data: Vec<Value> = ids
                .iter()
                .map(|id| json!({"id": id, "object": "model", "owned_by": "fake"}))
                .collect();
            json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
        }
        Err(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            json_response(
                status,
                &json!({"error": {"message": "refused by the fake"}}),
            )
        }
    }
}

async fn handle(State(inner): State<Arc<Inner>>, raw: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&raw)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&raw).into_owned()));
    let ctx = Ctx::from_request(&body, raw.len());
    let step = {
        let mut script = inner.script.lock().unwrap();
        script.count += 1;
        let step = script
            .steps
            .pop_front()
            .or_else(|| script.responder.as_ref().map(|f| f(&body)));
        if script.keep_requests {
            script.requests.push(body);
        }
        step
    };
    inner.changed.notify_waiters();

    let Some(step) = step else {
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": {"message": EXHAUSTED_MESSAGE, "type": "server_error"}}),
        );
    };

    match step {
        Step::Error {
            status,
            message,
            retry_after,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let (kind, code) = error_kind(status.as_u16());
            let mut resp = json_response(
                status,
                &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
            );
            if let Some(v) = retry_after.and_then(|ra| HeaderValue::from_str(&ra).ok()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
            resp
        }
        Step::HangBeforeHeaders => {
            let _guard = CancelGuard::new(&inner);
            futures::future::pending::<Response>().await
        }
        Step::Raw { body } => sse_response(futures::stream::once(async move {
            Ok::<_, Infallible>(Bytes::from(body))
        })),
        Step::RawBytes { body } => sse_response(futures::stream::once(async move {
            Ok::<_, Infallible>(Bytes::from(body))
        })),
        step if ctx.stream => streaming(inner, ctx, step),
        step => non_streaming(inner, ctx, step).await,
    }
}

fn streaming(inner: Arc<Inner>, ctx: Ctx, step: Step) -> Response {
    let stream = async_stream::stream! {
        let mut guard = CancelGuard::new(&inner);
        yield Ok::<_, Infallible>(ctx.chunk(json!({"role": "assistant", "content": ""}), None));
        match step {
            Step::Text { content, reasoning, usage } => {
                if let Some(r) = &reasoning {
                    for piece in split_words(r) {
                        tokio::task::yield_now().await;
                        yield Ok(ctx.chunk(json!({"reasoning_content": piece}), None));
                    }
                }
                for piece in split_words(&content) {
                    tokio::task::yield_now().await;
                    yield Ok(ctx.chunk(json!({"content": piece}), None));
                }
                let usage = ctx.usage_or_default(usage, word_count(&content));
                for b in finish(&ctx, "stop", usage) {
                    tokio::task::yield_now().await;
                    yield Ok(b);
                }
                guard.finish();
                yield Ok(done_line());
            }
            Step::ToolCalls { content, calls, usage } => {
                if let Some(c) = &content {
                    for piece in split_words(c) {
                        tokio::task::yield_now().await;
                        yield Ok(ctx.chunk(json!({"content": piece}), None));
                    }
                }
                for (i, call) in calls.iter().enumerate() {
                    tokio::task::yield_now().await;
                    yield Ok(ctx.chunk(json!({"tool_calls": [{
                        "index": i,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }]}), None));
                    for piece in split_args(&call.arguments) {
                        tokio::task::yield_now().await;
                        yield Ok(ctx.chunk(json!({"tool_calls": [{
                            "index": i,
                            "function": {"arguments": piece},
                        }]}), None));
                    }
                }
                let usage = ctx.usage_or_default(
                    usage,
                    tool_calls_completion_estimate(content.as_deref(), &calls),
                );
                for b in finish(&ctx, "tool_calls", usage) {
                    tokio::task::yield_now().await;
                    yield Ok(b);
                }
                guard.finish();
                yield Ok(done_line());
            }
            Step::HangAfterFirstChunk { first } => {
                yield Ok(ctx.chunk(json!({"content": first}), None));
                futures::future::pending::<()>().await;
            }
            Step::CutMidStream { content } => {
                for piece in split_words(&content) {
                    tokio::task::yield_now().await;
                    yield Ok(ctx.chunk(json!({"content": piece}), None));
                }
                guard.finish();
            }
            Step::Slow { content, chunks, interval } => {
                for piece in split_n(&content, chunks) {
                    tokio::time::sleep(interval).await;
                    yield Ok(ctx.chunk(json!({"content": piece}), None));
                }
                let usage = ctx.usage_or_default(None, word_count(&content));
                for b in finish(&ctx, "stop", usage) {
                    yield Ok(b);
                }
                guard.finish();
                yield Ok(done_line());
            }
            // Handled before streaming starts.
            Step::Error { .. } | Step::HangBeforeHeaders | Step::Raw { .. } | Step::RawBytes { .. } => {
                guard.finish();
            }
        }
    };
    sse_response(stream)
}

/// The finish_reason chunk, then the usage chunk if the request asked for it.
fn finish(ctx: &Ctx, reason: &str, usage: Usage) -> Vec<Bytes> {
    let mut out = vec![ctx.chunk(json!({}), Some(reason))];
    if ctx.include_usage {
        out.push(ctx.usage_chunk(usage));
    }
    out
}

fn completion(ctx: &Ctx, message: Value, finish_reason: &str, usage: Usage) -> Value {
    json!({
        "id": ctx.id,
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": "fp_fake",
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
        "usage": usage_json(usage),
    })
}

async fn non_streaming(inner: Arc<Inner>, ctx: Ctx, step: Step) -> Response {
    match step {
        Step::Text {
            content,
            reasoning,
            usage,
        } => {
            let mut message = json!({"role": "assistant", "content": content});
            if let Some(r) = reasoning {
                message["reasoning_content"] = json!(r);
            }
            let usage = ctx.usage_or_default(usage, word_count(&content));
            json_response(StatusCode::OK, &completion(&ctx, message, "stop", usage))
        }
        Step::ToolCalls {
            content,
            calls,
            usage,
        } => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    })
                })
                .collect();
            let usage = ctx.usage_or_default(
                usage,
                tool_calls_completion_estimate(content.as_deref(), &calls),
            );
            let message =
                json!({"role": "assistant", "content": content, "tool_calls": tool_calls});
            json_response(
                StatusCode::OK,
                &completion(&ctx, message, "tool_calls", usage),
            )
        }
        Step::Slow {
            content,
            chunks,
            interval,
        } => {
            {
                let mut guard = CancelGuard::new(&inner);
                for _ in 0..chunks {
                    tokio::time::sleep(interval).await;
                }
                guard.finish();
            }
            let usage = ctx.usage_or_default(None, word_count(&content));
            let message = json!({"role": "assistant", "content": content});
            json_response(StatusCode::OK, &completion(&ctx, message, "stop", usage))
        }
        Step::HangAfterFirstChunk { first } => {
            // Headers plus the beginning of a JSON object, then stall.
            let prefix = format!(
                "{{\"id\":\"{}\",\"object\":\"chat.completion\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":{}",
                ctx.id,
                json!(first)
            );
            let stream = async_stream::stream! {
                let _guard = CancelGuard::new(&inner);
                yield Ok::<_, Infallible>(Bytes::from(prefix));
                futures::future::pending::<()>().await;
            };
            let mut resp = Response::new(Body::from_stream(stream));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            resp
        }
        Step::CutMidStream { content } => {
            // A truncated JSON body.
            let full = completion(
                &ctx,
                json!({"role": "assistant", "content": content}),
                "stop",
                ctx.usage_or_default(None, word_count(&content)),
            )
            .to_string();
            let cut = full.len() / 2;
            let cut = (0..=cut)
                .rev()
                .find(|&i| full.is_char_boundary(i))
                .unwrap_or(0);
            let mut resp = Response::new(Body::from(full[..cut].to_string()));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            resp
        }
        // Handled in `handle`.
        Step::Error { .. } | Step::HangBeforeHeaders | Step::Raw { .. } | Step::RawBytes { .. } => {
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
