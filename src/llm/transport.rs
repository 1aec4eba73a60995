//! What every HTTP provider shares: one connection pool, the timeouts (first byte, idle), the
//! retry policy for calls that have produced nothing yet, error statuses read into `LlmError`,
//! and a bounded server-sent-event stream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use rand::Rng;

use super::error::{LlmError, error_chain};
use super::model::ModelConfig;
use crate::config::LlmSettings;
use crate::runtime::shards::PerShard;
use crate::sse_reader::{SseError, SseEvent, sse_events};

/// Largest event accepted. A chunk carries one delta (bytes to a few KiB); a server that
/// ignores `stream: true` sends its whole answer as one event, and answers are cut at about
/// eight bytes a token of the output budget (512 KiB for 64k tokens). 4 MiB leaves room for
/// JSON escaping and larger budgets while bounding what one call can hold.
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Clone, Copy)]
pub struct LlmTimeouts {
    pub request: Duration,
    pub first_byte: Duration,
    pub idle: Duration,
}

#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    pub max_elapsed: Duration,
}

impl RetryPolicy {
    /// Exponential back-off with jitter in [d/2, d], so a burst of clients does not retry in
    /// lock-step.
    fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
            .min(self.max_delay);
        let half = exp / 2;
        half + exp
            .saturating_sub(half)
            .mul_f64(rand::rng().random::<f64>())
    }
}

/// The HTTP side of a provider. Cloning shares the connection pool.
#[derive(Clone)]
pub struct Transport {
    http: Arc<PerShard<reqwest::Client>>,
    timeouts: LlmTimeouts,
    retry: RetryPolicy,
}

impl Transport {
    /// `roots`: trusted besides the system's (`CERTIFICATE`), by every provider.
    pub fn new(
        settings: &LlmSettings,
        roots: &crate::runtime::trust::ExtraRoots,
    ) -> Result<Transport, reqwest::Error> {
        let secs = Duration::from_secs_f64;
        // One pool per serving thread: a pooled connection's task runs where it was opened,
        // so a shard's requests reuse only connections that shard drives.
        let connect_timeout = secs(settings.connect_timeout_secs);
        let roots = roots.clone();
        let http = Arc::new(PerShard::new(move || {
            roots
                .client_builder()
                .connect_timeout(connect_timeout)
                // Below the keep-alive of common servers (uvicorn, and so LiteLLM: 5 s; nginx:
                // 75 s), so triage drops an idle connection before the server closes it under a
                // request.
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                // One connection per call in flight, as the OpenAI and Anthropic SDKs do. Over
                // HTTP/2 the pool shares one connection per host and opens no second one when it
                // is full, so calls past the provider's stream limit (100–256 a connection) queue
                // behind answers that take seconds; and thousands of request bodies sharing one
                // flow-control window go out in tiny frames that servers' flood guards refuse.
                .http1_only()
                .tcp_nodelay(true)
                .build()
        })?);
        Ok(Transport {
            http,
            timeouts: LlmTimeouts {
                request: secs(settings.request_timeout_secs),
                first_byte: secs(settings.first_byte_timeout_secs),
                idle: secs(settings.idle_timeout_secs),
            },
            retry: RetryPolicy {
                max_attempts: settings.retry_max_attempts.max(1),
                base_delay: Duration::from_millis(settings.retry_base_delay_ms),
                max_delay: Duration::from_millis(settings.retry_max_delay_ms),
                max_elapsed: secs(settings.retry_max_elapsed_secs),
            },
        })
    }

    /// The calling thread's client, for a provider's side requests (Google access tokens).
    pub fn http(&self) -> &reqwest::Client {
        self.http.get()
    }

    pub fn timeouts(&self) -> LlmTimeouts {
        self.timeouts
    }

    /// A POST of `body` to the model's endpoint; the caller adds the provider's headers.
    pub fn post(
        &self,
        model: &ModelConfig,
        body: impl Into<reqwest::Body>,
    ) -> reqwest::RequestBuilder {
        match &model.endpoint_url {
            Some(url) => self.http().post(url.clone()),
            None => self.http().post(&model.endpoint),
        }
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .body(body)
    }

    /// Sends the request `build` makes, retrying while nothing has been received yet, and
    /// returns the response whose body is the answer's event stream.
    pub async fn open_with_retries(
        &self,
        model: &ModelConfig,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, LlmError> {
        self.open_counting(model, build, &mut 0, Instant::now())
            .await
    }

    /// `open_with_retries` within a call's attempts so far (`attempt`, counted up here) and
    /// the time budget of a call that started at `started`: a caller that also retries
    /// failed streams shares one budget rather than multiplying two.
    pub(crate) async fn open_counting(
        &self,
        model: &ModelConfig,
        build: impl Fn() -> reqwest::RequestBuilder,
        attempt: &mut u32,
        started: Instant,
    ) -> Result<reqwest::Response, LlmError> {
        let mut max_attempts = self.retry.max_attempts;
        loop {
            *attempt += 1;
            let attempt = *attempt;
            let err = match self.open(model, &build).await {
                Ok(response) => return Ok(response),
                Err(Failure {
                    error,
                    retried_by_proxy,
                }) => {
                    if retried_by_proxy {
                        // The proxy already retried this call upstream: our attempts would
                        // multiply its own.
                        max_attempts = max_attempts.min(PROXY_MAX_ATTEMPTS);
                    }
                    error
                }
            };
            let Some(delay) = self.retry_delay_within(max_attempts, attempt, &err, started) else {
                return Err(err);
            };
            tracing::warn!(
                model = %model.key, attempt, delay_ms = delay.as_millis() as u64,
                error = %err, "retrying LLM call"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// The wait before another attempt after `attempt` failed with `err` (its `retry-after`,
    /// else back-off), or `None` when the call must give up: not retryable, out of attempts,
    /// or past the retry time budget of a call that started at `started`.
    pub fn retry_delay(&self, attempt: u32, err: &LlmError, started: Instant) -> Option<Duration> {
        self.retry_delay_within(self.retry.max_attempts, attempt, err, started)
    }

    fn retry_delay_within(
        &self,
        max_attempts: u32,
        attempt: u32,
        err: &LlmError,
        started: Instant,
    ) -> Option<Duration> {
        if !err.is_retryable() || attempt >= max_attempts {
            return None;
        }
        let delay = err
            .retry_after()
            .unwrap_or_else(|| self.retry.backoff(attempt));
        (started.elapsed() + delay <= self.retry.max_elapsed).then_some(delay)
    }

    /// Sends the request `build` makes and waits for the response headers. A pooled
    /// connection the server closed as the request went out is retried at once, once: nothing
    /// reached the server.
    async fn open(
        &self,
        model: &ModelConfig,
        build: &impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Failure> {
        let sent = async {
            match build().send().await {
                Err(e) if is_stale_connection(&e) => {
                    tracing::debug!(error = %error_chain(&e), "pooled connection closed by the server: sending again");
                    build().send().await
                }
                other => other,
            }
        };
        let response = tokio::time::timeout(self.timeouts.first_byte, sent)
            .await
            .map_err(|_| {
                Failure::from(LlmError::Timeout(format!(
                    "no response headers within {} s (llm.first_byte_timeout_secs)",
                    self.timeouts.first_byte.as_secs_f64()
                )))
            })?
            .map_err(|e| {
                Failure::from(LlmError::Connect {
                    endpoint: model.endpoint.clone(),
                    message: error_chain(&e),
                })
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retried_by_proxy = is_retrying_proxy(response.headers());
        let retry_after = retry_after(response.headers());
        let text = tokio::time::timeout(self.timeouts.idle, read_at_most(response, MAX_ERROR_BODY))
            .await
            .unwrap_or_default();
        Err(Failure {
            error: LlmError::from_status(
                status.as_u16(),
                &text,
                retry_after,
                &model.key,
                &model.endpoint,
            ),
            retried_by_proxy,
        })
    }

    /// The response body as server-sent events, each bounded in size, the stream failing when
    /// it stalls longer than the idle timeout.
    pub fn events(
        &self,
        response: reqwest::Response,
    ) -> impl Stream<Item = Result<SseEvent, LlmError>> + Send + use<> {
        let idle = self.timeouts.idle;
        let events = sse_events(response.bytes_stream(), MAX_EVENT_BYTES);
        futures::stream::unfold(Some(events), move |events| async move {
            let mut events = events?;
            let next = match tokio::time::timeout(idle, events.next()).await {
                Err(_) => Err(LlmError::Timeout(format!(
                    "the stream stalled for {} s (llm.idle_timeout_secs)",
                    idle.as_secs_f64()
                ))),
                Ok(None) => return None,
                Ok(Some(event)) => event.map_err(|e| match e {
                    SseError::TooLarge(max) => LlmError::Oversized(format!(
                        "one streamed event exceeded {max} bytes without ending; the call was stopped"
                    )),
                    SseError::Body(e) => {
                        LlmError::Protocol(format!("unreadable stream: {}", error_chain(&e)))
                    }
                }),
            };
            // After an error the stream ends.
            let rest = next.is_ok().then_some(events);
            Some((next, rest))
        })
    }
}

/// An error body is read up to this size: enough for any provider's message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The start of a response body, at most `limit` bytes, as text.
async fn read_at_most(response: reqwest::Response, limit: usize) -> String {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        let room = limit.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= limit {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// A request body as JSON, in a buffer started at the last body's size (`size_hint`), then
/// held in exactly its size: with thousands of calls open at once, unused room adds up.
pub fn json_body(value: &impl serde::Serialize) -> Result<bytes::Bytes, LlmError> {
    static BODY: crate::runtime::size_hint::SizeHint =
        crate::runtime::size_hint::SizeHint::new(8 * 1024);
    let mut body = BODY.buffer();
    serde_json::to_writer(&mut body, value)
        .map_err(|e| LlmError::Protocol(format!("cannot encode the request: {e}")))?;
    Ok(bytes::Bytes::from(BODY.finish(body)))
}

/// Idle pooled connections are closed after this; below uvicorn's (LiteLLM's) 5 s keep-alive.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// Attempts per call when the error came from a proxy that retries upstream itself (LiteLLM).
const PROXY_MAX_ATTEMPTS: u32 = 2;

/// A failed attempt, and whether a retrying proxy answered it.
struct Failure {
    error: LlmError,
    retried_by_proxy: bool,
}

impl From<LlmError> for Failure {
    fn from(error: LlmError) -> Failure {
        Failure {
            error,
            retried_by_proxy: false,
        }
    }
}

/// LiteLLM marks its answers with `x-litellm-*` headers and forwards the provider's as
/// `llm_provider-*`; it retries failed calls upstream before answering.
fn is_retrying_proxy(headers: &reqwest::header::HeaderMap) -> bool {
    headers.keys().any(|name| {
        let name = name.as_str();
        name.starts_with("x-litellm-") || name.starts_with("llm_provider-")
    })
}

/// The server closed a pooled connection just as the request went out (it had timed the
/// connection out): the request never reached it, so sending again is safe.
fn is_stale_connection(e: &reqwest::Error) -> bool {
    if e.is_connect() || e.is_timeout() {
        return false;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(hyper) = s.downcast_ref::<hyper::Error>()
            && (hyper.is_incomplete_message() || hyper.is_canceled())
        {
            return true;
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            )
        {
            return true;
        }
        source = s.source();
    }
    false
}

/// `Retry-After` in seconds (fractions allowed) or `retry-after-ms`, as the provider sent them
/// or as LiteLLM forwards them (`llm_provider-retry-after`).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let seconds = |prefix: &str| {
        get(&format!("{prefix}retry-after-ms"))
            .map(|ms| ms / 1000.0)
            .or_else(|| get(&format!("{prefix}retry-after")))
    };
    seconds("")
        .or_else(|| seconds("llm_provider-"))
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(3600.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
            max_elapsed: Duration::from_secs(10),
        };
        let d1 = p.backoff(1);
        assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
        let d5 = p.backoff(5);
        assert!(d5 >= Duration::from_millis(150) && d5 <= Duration::from_millis(300));
    }

    #[test]
    fn parses_retry_after() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        let mut proxied = reqwest::header::HeaderMap::new();
        proxied.insert("llm_provider-retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&proxied), Some(Duration::from_secs(3)));
        assert!(is_retrying_proxy(&proxied) && !is_retrying_proxy(&h));
    }
}
