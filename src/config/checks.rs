//! `[checks]`: health checks (`POST /api/checks/execute`) and where their notifications go;
//! `[admin]`: the reload routes. The API bases are settings so a deployment behind a proxy,
//! PagerDuty's EU service, or a test's local fakes can stand in for the public services.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChecksSettings {
    /// The longest `timeout` a check may ask for, in seconds (HolmesGPT's operator allows 300).
    pub max_timeout_secs: u64,
    /// One notification's whole delivery, connection included.
    pub notification_timeout_secs: f64,
    /// Slack's Web API; `chat.postMessage` is posted under it.
    pub slack_api_base: String,
    /// Slack bot token for destinations that name none (SLACK_TOKEN).
    pub slack_token: Option<String>,
    /// Channel for Slack destinations that name none (SLACK_CHANNEL).
    pub slack_channel: Option<String>,
    /// PagerDuty's Events API v2; events go to `{base}/v2/enqueue`.
    pub pagerduty_events_base: String,
}

impl Default for ChecksSettings {
    fn default() -> Self {
        ChecksSettings {
            max_timeout_secs: 300,
            notification_timeout_secs: 30.0,
            slack_api_base: "https://slack.com/api".into(),
            slack_token: None,
            slack_channel: None,
            pagerduty_events_base: "https://events.pagerduty.com".into(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminSettings {
    /// Serve `POST /api/admin/reload*` (ENABLE_ADMIN_API); off, they answer 404.
    pub enabled: bool,
}

impl ChecksSettings {
    /// The values serde cannot check, named by their keys.
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.max_timeout_secs == 0 {
            return Err("checks.max_timeout_secs must be at least 1".into());
        }
        if !(self.notification_timeout_secs.is_finite() && self.notification_timeout_secs > 0.0) {
            return Err("checks.notification_timeout_secs must be a positive number".into());
        }
        for (key, base) in [
            ("checks.slack_api_base", &self.slack_api_base),
            ("checks.pagerduty_events_base", &self.pagerduty_events_base),
        ] {
            match url::Url::parse(base) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => return Err(format!("{key} must be an http(s) URL, not `{base}`")),
            }
        }
        Ok(())
    }
}
