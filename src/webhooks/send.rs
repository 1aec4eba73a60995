//! One receiver as the worker sees it: its own HTTP client (no redirects, a deadline per
//! attempt, nothing shared with the LLM's client), its fixed headers, its signing key, and
//! what to do after a failed attempt.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::config::webhooks::{self as config, WebhookSettings};
use crate::store::outbox::CONVERSATIONS;
use crate::store::{Delivery, Failure};

/// A `Retry-After` longer than this is taken as this.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(3600);
/// Bytes of an error answer kept for `last_error`; the rest is never read.
const ERROR_BODY_MAX: usize = 512;

#[derive(Clone)]
pub(crate) struct Receiver {
    pub name: String,
    /// `base_url` without its trailing slash.
    base: String,
    /// A push target's URL: deliveries go to `base` itself, nothing appended.
    exact: bool,
    client: reqwest::Client,
    headers: HeaderMap,
    signing_key: Option<Vec<u8>>,
    pub batch_size: usize,
    pub max_in_flight: usize,
    pub timeout: Duration,
    max_attempts: u32,
    max_age: Duration,
    base_delay: Duration,
    max_delay: Duration,
}

/// What an attempt came to.
#[derive(Debug)]
pub(crate) enum Outcome {
    Delivered,
    Failed {
        failure: Failure,
        retry_after: Option<Duration>,
        /// Sending the same request again cannot succeed (a 4xx other than 408/425/429, or
        /// a redirect, which is never followed).
        permanent: bool,
    },
}

impl Receiver {
    /// Settings already validated (`config::validate`); a value that fails here anyway is an
    /// error naming the receiver.
    pub fn new(
        settings: &WebhookSettings,
        roots: &crate::runtime::trust::ExtraRoots,
    ) -> Result<Receiver, String> {
        Receiver::build(settings, roots, false)
    }

    /// The template of push targets (`for_target`): `settings` give the retry policy and the
    /// signing key; its client resolves no name to a link-local or metadata address, as the
    /// URLs come from clients.
    pub fn for_push(
        settings: &WebhookSettings,
        roots: &crate::runtime::trust::ExtraRoots,
    ) -> Result<Receiver, String> {
        Receiver::build(settings, roots, true)
    }

    /// A push target: this template's client and policy, `url` as given and `headers` added.
    pub fn for_target(&self, name: String, url: &str, headers: HeaderMap) -> Receiver {
        let mut target = self.clone();
        target.name = name;
        target.base = url.to_owned();
        target.exact = true;
        target.headers.extend(headers);
        target
    }

    fn build(
        settings: &WebhookSettings,
        roots: &crate::runtime::trust::ExtraRoots,
        guarded: bool,
    ) -> Result<Receiver, String> {
        let name = &settings.name;
        let bad = |why: String| format!("webhook receiver '{name}': {why}");
        let base = config::base_url(&settings.base_url).map_err(bad)?;
        let mut headers = HeaderMap::new();
        for (key, value) in &settings.headers {
            let (key, value) = config::header(key, value).map_err(bad)?;
            headers.insert(key, value);
        }
        if let Some(token) = &settings.token {
            let mut value = HeaderValue::from_str(&config::expand(token).map_err(bad)?)
                .map_err(|_| bad("`token` is not a valid header value".into()))?;
            value.set_sensitive(true);
            headers.insert("x-access-token", value);
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static(concat!("triage/", env!("CARGO_PKG_VERSION"))),
        );
        let signing_key = settings
            .signing_secret
            .as_deref()
            .map(config::expand)
            .transpose()
            .map_err(bad)?
            .map(String::into_bytes);
        let timeout = Duration::from_secs_f64(settings.timeout_secs);
        let mut builder = roots.client_builder();
        if guarded {
            // No proxy either: a proxy resolves the name itself, past the guard, so a name
            // pointed at the metadata service would reach it through one (HTTPS_PROXY).
            builder = builder
                .dns_resolver(std::sync::Arc::new(
                    crate::runtime::destinations::GuardedResolver,
                ))
                .no_proxy();
        }
        let client = builder
            // A receiver names where deliveries go once, in the config: a redirect would let
            // it (or whoever answers for it) send them somewhere else.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .timeout(timeout)
            .pool_max_idle_per_host(settings.max_in_flight)
            .build()
            .map_err(|e| bad(format!("cannot build its HTTP client: {e}")))?;
        Ok(Receiver {
            name: name.clone(),
            base: base.as_str().trim_end_matches('/').to_owned(),
            exact: false,
            client,
            headers,
            signing_key,
            batch_size: settings.batch_size,
            max_in_flight: settings.max_in_flight,
            timeout,
            max_attempts: settings.max_attempts,
            max_age: Duration::from_secs_f64(settings.max_age_secs),
            base_delay: Duration::from_millis(settings.retry_base_delay_ms),
            max_delay: Duration::from_secs_f64(settings.retry_max_delay_secs),
        })
    }

    /// Where a delivery goes: only the conversation id (a UUID) comes from the delivery.
    fn url(&self, delivery: &Delivery) -> String {
        if self.exact {
            self.base.clone()
        } else if delivery.kind == CONVERSATIONS {
            format!("{}/conversations", self.base)
        } else {
            format!("{}/events/{}", self.base, delivery.conversation_id)
        }
    }

    /// One attempt, bounded by the receiver's timeout.
    pub async fn attempt(&self, delivery: &Delivery, body: String) -> Outcome {
        let mut request = self
            .client
            .post(self.url(delivery))
            .headers(self.headers.clone())
            .header("x-triage-delivery", delivery.id.to_string())
            .header("x-triage-sequence", delivery.sequence.to_string());
        if let Some(key) = &self.signing_key {
            request = request.header("x-triage-signature", signature(key, body.as_bytes()));
        }
        let sent = tokio::time::timeout(self.timeout, request.body(body).send()).await;
        let response = match sent {
            Err(_) => return failed(format!("no answer within {:?}", self.timeout), None),
            Ok(Err(e)) => return failed(describe(&e), None),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Outcome::Delivered;
        }
        let retry_after = retry_after(response.headers(), Utc::now());
        let redirect = status.is_redirection();
        let location = response
            .headers()
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(printable);
        let text = read_some(response).await;
        let error = match location {
            Some(to) if redirect => format!("HTTP {status}: a redirect to {to} (not followed)"),
            _ if text.is_empty() => format!("HTTP {status}"),
            _ => format!("HTTP {status}: {text}"),
        };
        let code = status.as_u16();
        Outcome::Failed {
            failure: Failure {
                error,
                status: Some(code),
            },
            retry_after,
            permanent: redirect || (status.is_client_error() && !matches!(code, 408 | 425 | 429)),
        }
    }

    /// When to try again after the `attempts`-th failed attempt (1 for the first), or `None`
    /// to dead-letter: exponential back-off with jitter, never sooner than `Retry-After`.
    pub fn next_attempt(
        &self,
        delivery: &Delivery,
        attempts: u32,
        retry_after: Option<Duration>,
        permanent: bool,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let age = (now - delivery.age_from).to_std().unwrap_or_default();
        if permanent || attempts >= self.max_attempts || age >= self.max_age {
            return None;
        }
        let exponential = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempts.saturating_sub(1).min(31)))
            .min(self.max_delay);
        // Half fixed, half random: retries of many deliveries spread out, none comes early.
        let mut delay = exponential.mul_f64(rand::random_range(0.5..=1.0));
        if let Some(wait) = retry_after {
            delay = delay.max(wait.min(RETRY_AFTER_CAP));
        }
        Some(now + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX))
    }
}

fn failed(error: String, status: Option<u16>) -> Outcome {
    Outcome::Failed {
        failure: Failure { error, status },
        retry_after: None,
        permanent: false,
    }
}

/// `sha256=<hex HMAC-SHA256 of the body>`.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = DateTime::parse_from_rfc2822(value)
        .ok()?
        .with_timezone(&Utc);
    (at - now).to_std().ok()
}

/// The start of an error answer, as text fit for a log line; the rest is never read.
async fn read_some(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < ERROR_BODY_MAX {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(ERROR_BODY_MAX);
    printable(&String::from_utf8_lossy(&bytes))
}

/// Control characters (a receiver's text reaches logs and the API) as spaces.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

/// A transport error without reqwest's nesting noise.
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    printable(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_hex_hmac_sha256() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(7)));
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from_static("Thu, 01 Jan 2026 00:00:30 GMT"),
        );
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(30)));
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers, now), None);
    }

    #[test]
    fn back_off_grows_honours_retry_after_and_gives_up() {
        let mut settings = WebhookSettings::new("r", "http://127.0.0.1:9");
        settings.max_attempts = 4;
        settings.retry_base_delay_ms = 1000;
        settings.retry_max_delay_secs = 3.0;
        let receiver = Receiver::new(&settings, &Default::default()).unwrap();
        let now = Utc::now();
        let delivery = Delivery {
            seq: 1,
            id: uuid::Uuid::new_v4(),
            receiver: "r".into(),
            conversation_id: uuid::Uuid::new_v4(),
            kind: "events".into(),
            sequence: 1,
            event_count: 1,
            status: "pending".into(),
            attempts: 0,
            created_at: now,
            age_from: now,
            next_attempt_at: now,
            last_error: None,
            last_status: None,
        };
        let wait = |attempts, retry_after| {
            receiver
                .next_attempt(&delivery, attempts, retry_after, false, now)
                .map(|at| (at - now).num_milliseconds())
        };
        let first = wait(1, None).unwrap();
        assert!((500..=1000).contains(&first), "{first}");
        let third = wait(3, None).unwrap();
        assert!((1500..=3000).contains(&third), "capped: {third}");
        let told = wait(1, Some(Duration::from_secs(20))).unwrap();
        assert_eq!(told, 20_000);
        let absurd = wait(1, Some(Duration::from_secs(10_000_000))).unwrap();
        assert_eq!(absurd, 3_600_000, "a Retry-After is believed up to an hour");
        assert_eq!(wait(4, None), None, "max_attempts");
        assert_eq!(
            receiver.next_attempt(&delivery, 1, None, true, now),
            None,
            "permanent"
        );
        let old = now + chrono::Duration::days(2);
        assert_eq!(
            receiver.next_attempt(&delivery, 1, None, false, old),
            None,
            "max_age"
        );
    }
}
