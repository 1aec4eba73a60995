//! Notifications of a failed check: Slack's `chat.postMessage`, PagerDuty's Events API v2 and
//! a generic webhook. Every destination is read and checked before the check runs; each
//! delivery's outcome is reported, never raised: one receiver down does not hide the verdict
//! or the other deliveries. Credentials (tokens, routing keys, header values) never appear in
//! an outcome or a log line; a webhook is named by its scheme and host only, since its path
//! may be a credential too (Slack's incoming webhooks are).

mod pagerduty;
mod slack;
mod template;
mod webhook;

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::ChecksSettings;
use crate::runtime::trust::ExtraRoots;
use crate::tools::capped::{Overflow, read_capped};

pub use webhook::WebhookTarget;

/// A destination as the request configured it, checked.
#[derive(Debug)]
pub enum Destination {
    Slack {
        channel: Option<String>,
        token: Option<String>,
    },
    PagerDuty {
        routing_key: String,
    },
    Webhook(WebhookTarget),
}

/// What one delivery came to, in HolmesGPT's shape.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NotificationStatus {
    /// `slack`, `pagerduty` or `webhook`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Where it went: a Slack channel, a webhook's scheme and host (`null` for PagerDuty).
    pub channel: Option<String>,
    pub status: DeliveryStatus,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Sent,
    Failed,
    /// Not attempted: the destination lacks what it needs (Slack without a token or channel).
    Skipped,
}

/// What a notification says about the check.
pub struct Alert<'a> {
    pub check_name: &'a str,
    pub query: &'a str,
    pub analysis: &'a str,
    /// Where the alert comes from (`prompts.cluster_name`), for PagerDuty's `source`.
    pub source: &'a str,
}

/// The value of a string field of a destination's `config`, if present.
fn text<'a>(config: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim())),
        Some(_) => Err(format!("`config.{key}` must be a string")),
    }
}

/// Refuses keys a destination does not read: a typo would otherwise drop a setting silently.
fn only_keys(kind: &str, config: &Map<String, Value>, known: &[&str]) -> Result<(), String> {
    match config.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(format!(
            "{kind} does not read `config.{key}` (it reads {})",
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        None => Ok(()),
    }
}

impl Destination {
    /// A destination of the request: `"slack"`, or `{"type": "slack", "config": {…}}`. A name
    /// alone is that type with an empty config, as HolmesGPT reads it.
    pub fn parse(value: &Value) -> Result<Destination, String> {
        let empty = Map::new();
        let (kind, config) = match value {
            Value::String(kind) => (kind.as_str(), &empty),
            Value::Object(fields) => {
                if let Some(key) = fields
                    .keys()
                    .find(|k| !matches!(k.as_str(), "type" | "config"))
                {
                    return Err(format!(
                        "unknown field `{key}` (a destination has `type` and `config`)"
                    ));
                }
                let kind = match fields.get("type") {
                    Some(Value::String(kind)) => kind.as_str(),
                    _ => return Err("`type` is required: slack, pagerduty or webhook".into()),
                };
                let config = match fields.get("config") {
                    None | Some(Value::Null) => &empty,
                    Some(Value::Object(config)) => config,
                    Some(_) => return Err("`config` must be an object".into()),
                };
                (kind, config)
            }
            _ => {
                return Err(
                    "a destination is a type name or an object with `type` and `config`".into(),
                );
            }
        };
        match kind.trim().to_ascii_lowercase().as_str() {
            "slack" => {
                only_keys("slack", config, &["channel", "token"])?;
                Ok(Destination::Slack {
                    channel: text(config, "channel")?.map(str::to_owned),
                    token: text(config, "token")?.map(str::to_owned),
                })
            }
            "pagerduty" => {
                only_keys("pagerduty", config, &["routing_key", "integration_key"])?;
                let key = text(config, "routing_key")?.or(text(config, "integration_key")?);
                let routing_key = key.ok_or(
                    "pagerduty needs `config.routing_key` (the Events API v2 integration key; \
                     `integration_key` is read too)",
                )?;
                Ok(Destination::PagerDuty {
                    routing_key: routing_key.to_owned(),
                })
            }
            "webhook" => {
                only_keys("webhook", config, &["url", "headers", "payload_template"])?;
                Ok(Destination::Webhook(WebhookTarget::parse(config)?))
            }
            other => Err(format!(
                "unknown destination type `{}` (slack, pagerduty or webhook)",
                other.chars().take(64).collect::<String>()
            )),
        }
    }
}

/// Sends notifications: one HTTP client for every destination, no redirects (a receiver
/// answering with one would send the alert, its credentials in headers, elsewhere), a
/// resolver that refuses link-local and cloud metadata addresses (`address.rs`).
pub struct Notifier {
    client: reqwest::Client,
    slack_api_base: String,
    slack_token: Option<String>,
    slack_channel: Option<String>,
    pagerduty_enqueue: String,
}

impl Notifier {
    /// `roots`: the extra CAs every outbound client trusts (`ca_certificate`), so a receiver
    /// inside the company behind a private CA is reached as the LLM and the webhooks are.
    pub fn new(settings: &ChecksSettings, roots: &ExtraRoots) -> Result<Notifier, reqwest::Error> {
        let timeout = Duration::from_secs_f64(settings.notification_timeout_secs);
        let client = roots
            .client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(crate::runtime::destinations::GuardedResolver))
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()?;
        Ok(Notifier {
            client,
            slack_api_base: settings.slack_api_base.trim_end_matches('/').to_owned(),
            slack_token: settings.slack_token.clone(),
            slack_channel: settings.slack_channel.clone(),
            pagerduty_enqueue: format!(
                "{}/v2/enqueue",
                settings.pagerduty_events_base.trim_end_matches('/')
            ),
        })
    }

    /// Delivers `alert` to every destination, at once, and reports each outcome in order.
    pub async fn notify(
        &self,
        destinations: &[Destination],
        alert: &Alert<'_>,
    ) -> Vec<NotificationStatus> {
        futures::future::join_all(destinations.iter().map(|d| self.deliver(d, alert))).await
    }

    async fn deliver(&self, destination: &Destination, alert: &Alert<'_>) -> NotificationStatus {
        let (kind, channel, outcome) = match destination {
            Destination::Slack { channel, token } => {
                let channel = channel.clone().or_else(|| self.slack_channel.clone());
                let token = token.as_deref().or(self.slack_token.as_deref());
                let outcome = match (token, &channel) {
                    (Some(token), Some(channel)) => Some(
                        slack::post(&self.client, &self.slack_api_base, token, channel, alert)
                            .await,
                    ),
                    _ => None,
                };
                ("slack", channel, outcome)
            }
            Destination::PagerDuty { routing_key } => {
                let outcome =
                    pagerduty::trigger(&self.client, &self.pagerduty_enqueue, routing_key, alert)
                        .await;
                // The routing key names the service; it is a credential, so nothing is shown.
                ("pagerduty", None, Some(outcome))
            }
            Destination::Webhook(target) => {
                let outcome = target.post(&self.client, alert).await;
                ("webhook", Some(target.origin()), Some(outcome))
            }
        };
        let (status, error) = match outcome {
            None => (
                DeliveryStatus::Skipped,
                Some(
                    "no Slack token or channel: set SLACK_TOKEN and SLACK_CHANNEL \
                     (checks.slack_token, checks.slack_channel) or the destination's \
                     config.token and config.channel"
                        .to_owned(),
                ),
            ),
            Some(Ok(())) => (DeliveryStatus::Sent, None),
            Some(Err(e)) => (DeliveryStatus::Failed, Some(e)),
        };
        match &error {
            Some(e) => {
                tracing::warn!(check = alert.check_name, destination = kind, channel = channel.as_deref().unwrap_or(""), ?status, error = %e, "check notification not delivered")
            }
            None => tracing::info!(
                check = alert.check_name,
                destination = kind,
                channel = channel.as_deref().unwrap_or(""),
                "check notification sent"
            ),
        }
        NotificationStatus {
            kind: kind.to_owned(),
            channel,
            status,
            error,
        }
    }
}

/// A transport failure in words that carry no URL (its path or query may be a credential).
fn transport_error(e: reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let e = e.without_url();
    match std::error::Error::source(&e) {
        Some(cause) => format!("{kind}: {cause}"),
        None => format!("{kind}: {e}"),
    }
}

/// The most of a receiver's answer read: it is parsed for a status or cut to an excerpt, and a
/// receiver must not make triage hold a body of any size it likes for the whole timeout.
const ANSWER_MAX: usize = 64 * 1024;

/// A receiver's answer body, its first [`ANSWER_MAX`] bytes (an unreadable one is empty: the
/// status line still says what happened).
async fn answer_text(response: reqwest::Response) -> String {
    let kept = read_capped(response.bytes_stream(), ANSWER_MAX, Overflow::Stop)
        .await
        .map(|capped| capped.bytes)
        .unwrap_or_default();
    String::from_utf8_lossy(&kept).into_owned()
}

/// A receiver's answer body, short and on one line, for an error message.
fn excerpt(body: &str) -> String {
    let line: String = body
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    line.trim().to_owned()
}
