//! A2A's settings (`[a2a]`): the push notifications clients ask for (`a2a/push.rs`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct A2aSettings {
    /// Clients may add push notification configs (the card's
    /// `capabilities.pushNotifications`); off, those methods answer -32003.
    pub push_notifications: bool,
    /// Signs each notification's body: `X-Triage-Signature: sha256=<hex HMAC-SHA256>`.
    pub push_signing_secret: Option<String>,
    /// Hosts a notification URL may name (exact, case-insensitive); empty: any host but a
    /// link-local or cloud metadata address.
    pub push_allowed_hosts: Vec<String>,
    /// One attempt's whole delivery, connecting included.
    pub push_timeout_secs: f64,
    /// Attempts before a notification is dead-lettered (listed by the deliveries API).
    pub push_max_attempts: u32,
    /// Push notification configs one task may have.
    pub push_max_per_task: usize,
}

impl Default for A2aSettings {
    fn default() -> Self {
        A2aSettings {
            push_notifications: true,
            push_signing_secret: None,
            push_allowed_hosts: Vec::new(),
            push_timeout_secs: 10.0,
            push_max_attempts: 8,
            push_max_per_task: 10,
        }
    }
}

impl A2aSettings {
    /// The values serde cannot check, named by their keys.
    pub(super) fn validate(&self) -> Result<(), String> {
        if !(self.push_timeout_secs.is_finite() && self.push_timeout_secs > 0.0) {
            return Err("a2a.push_timeout_secs must be a positive number".into());
        }
        if self.push_max_attempts == 0 {
            return Err("a2a.push_max_attempts must be at least 1".into());
        }
        if !(1..=100).contains(&self.push_max_per_task) {
            return Err("a2a.push_max_per_task must be 1 to 100".into());
        }
        if let Some(host) = self
            .push_allowed_hosts
            .iter()
            .find(|h| h.trim().is_empty() || h.contains(['/', ':', '@', ' ']))
        {
            return Err(format!(
                "a2a.push_allowed_hosts: `{host}` is not a host name or IPv4 address"
            ));
        }
        Ok(())
    }

    /// Whether a notification URL's host is allowed by `push_allowed_hosts`.
    pub fn allows_host(&self, host: &str) -> bool {
        self.push_allowed_hosts.is_empty()
            || self.push_allowed_hosts.iter().any(|h| {
                h.trim_end_matches('.')
                    .eq_ignore_ascii_case(host.trim_end_matches('.'))
            })
    }
}
