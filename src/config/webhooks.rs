//! `[[webhooks]]`: the receivers, as the config file writes them, and every check serde
//! cannot make, each error naming the key. Secrets (`token`, `signing_secret`, header values)
//! may name environment variables as `${NAME}`, resolved at start-up (`$$` is a literal `$`).

use std::collections::{BTreeMap, BTreeSet};

use axum::http::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

/// One receiver of conversation updates.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// Names the receiver in metrics, logs and the deliveries API; its queue is keyed by it,
    /// so renaming a receiver starts a new queue. Unset: its URL's host ([`name_unnamed`]).
    #[serde(default)]
    pub name: String,
    /// `http(s)://host[:port][/path]`: deliveries go to `{base_url}/conversations` and
    /// `{base_url}/events/{conversation_id}`.
    pub base_url: String,
    /// Sent as `X-Access-Token`.
    #[serde(default)]
    pub token: Option<String>,
    /// Signs each body: `X-Triage-Signature: sha256=<hex HMAC-SHA256>`.
    #[serde(default)]
    pub signing_secret: Option<String>,
    /// Sent with every delivery.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `conversations` (snapshots) and/or `events`.
    #[serde(default = "default_updates")]
    pub updates: Vec<String>,
    /// Only these event kinds; empty: every kind.
    #[serde(default)]
    pub event_kinds: Vec<String>,
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    #[serde(default = "default_flush_delay")]
    pub flush_delay_secs: f64,
    #[serde(default = "default_timeout")]
    pub timeout_secs: f64,
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    #[serde(default = "default_max_age")]
    pub max_age_secs: f64,
    #[serde(default = "default_base_delay")]
    pub retry_base_delay_ms: u64,
    #[serde(default = "default_max_delay")]
    pub retry_max_delay_secs: f64,
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// How long a dead letter stays listed (and retryable) before it is deleted.
    #[serde(default = "default_dead_letter_retention")]
    pub dead_letter_retention_secs: f64,
}

/// Without the secrets: a settings dump in a log must not carry them.
impl std::fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "<hidden>");
        f.debug_struct("WebhookSettings")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("token", &hidden(&self.token))
            .field("signing_secret", &hidden(&self.signing_secret))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("updates", &self.updates)
            .field("event_kinds", &self.event_kinds)
            .finish_non_exhaustive()
    }
}

fn default_updates() -> Vec<String> {
    vec!["conversations".into(), "events".into()]
}
fn default_batch_size() -> usize {
    20
}
fn default_flush_delay() -> f64 {
    1.0
}
fn default_timeout() -> f64 {
    10.0
}
fn default_max_attempts() -> u32 {
    12
}
fn default_max_age() -> f64 {
    86_400.0
}
fn default_base_delay() -> u64 {
    1000
}
fn default_max_delay() -> f64 {
    300.0
}
fn default_dead_letter_retention() -> f64 {
    // Two weeks: time to notice a receiver's outage and retry what it missed.
    14.0 * 24.0 * 3600.0
}
fn default_max_in_flight() -> usize {
    4
}

impl WebhookSettings {
    /// A receiver with every default, for `name` at `base_url`.
    pub fn new(name: &str, base_url: &str) -> WebhookSettings {
        WebhookSettings {
            name: name.into(),
            base_url: base_url.into(),
            token: None,
            signing_secret: None,
            headers: BTreeMap::new(),
            updates: default_updates(),
            event_kinds: Vec::new(),
            batch_size: default_batch_size(),
            flush_delay_secs: default_flush_delay(),
            timeout_secs: default_timeout(),
            max_attempts: default_max_attempts(),
            max_age_secs: default_max_age(),
            retry_base_delay_ms: default_base_delay(),
            retry_max_delay_secs: default_max_delay(),
            max_in_flight: default_max_in_flight(),
            dead_letter_retention_secs: default_dead_letter_retention(),
        }
    }

    pub fn wants(&self, update: &str) -> bool {
        self.updates.iter().any(|u| u == update)
    }
}

/// Headers triage sets itself; a configured one of these would be ambiguous or break framing.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-type",
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
    "x-access-token",
    "x-triage-delivery",
    "x-triage-sequence",
    "x-triage-signature",
];

const UPDATES: &[&str] = &["conversations", "events"];

/// Names each receiver written without a `name` after its URL's host (as the earlier
/// examples wrote them): `hooks.example`, then `hooks.example-2` for a second one on that
/// host, never a name another receiver has. A URL without a host is left for [`validate`]
/// to name.
pub fn name_unnamed(receivers: &mut [WebhookSettings]) {
    let mut taken: BTreeSet<String> = receivers
        .iter()
        .map(|r| r.name.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    for r in receivers.iter_mut().filter(|r| r.name.trim().is_empty()) {
        let Some(host) = base_url(&r.base_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
        else {
            continue;
        };
        // An IPv6 host's brackets and colons are not name characters.
        let stem: String = host
            .trim_matches(['[', ']'])
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .take(60)
            .collect();
        let name = (1..)
            .map(|n| {
                if n == 1 {
                    stem.clone()
                } else {
                    format!("{stem}-{n}")
                }
            })
            .find(|candidate| !taken.contains(candidate))
            .unwrap_or_default();
        taken.insert(name.clone());
        r.name = name;
    }
}

/// Checks every receiver; the error names the key (`webhooks[N].key`) and the receiver.
pub fn validate(receivers: &[WebhookSettings]) -> Result<(), String> {
    let mut names = BTreeSet::new();
    for (i, r) in receivers.iter().enumerate() {
        let key = |field: &str| format!("`webhooks[{i}].{field}` (receiver '{}')", r.name);
        // A receiver without a name is named by its URL: a URL without a host is the error.
        base_url(&r.base_url).map_err(|why| format!("{}: {why}", key("base_url")))?;
        let valid_name = !r.name.is_empty()
            && r.name.len() <= 64
            && r.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_name {
            return Err(format!(
                "{}: 1 to 64 letters, digits, '_', '-' or '.'",
                key("name")
            ));
        }
        if !names.insert(r.name.as_str()) {
            return Err(format!("{}: two receivers have this name", key("name")));
        }
        if r.updates.is_empty() {
            return Err(format!(
                "{}: list `conversations`, `events` or both",
                key("updates")
            ));
        }
        if let Some(bad) = r.updates.iter().find(|u| !UPDATES.contains(&u.as_str())) {
            return Err(format!(
                "{}: '{bad}' is not `conversations` or `events`",
                key("updates")
            ));
        }
        if !r.event_kinds.is_empty() && !r.wants("events") {
            return Err(format!(
                "{}: set, but `updates` does not include `events`",
                key("event_kinds")
            ));
        }
        if r.event_kinds.iter().any(|k| k.trim().is_empty()) {
            return Err(format!("{}: an empty kind", key("event_kinds")));
        }
        if !(1..=100).contains(&r.batch_size) {
            return Err(format!("{}: 1 to 100", key("batch_size")));
        }
        if !(1..=64).contains(&r.max_in_flight) {
            return Err(format!("{}: 1 to 64", key("max_in_flight")));
        }
        if r.max_attempts == 0 {
            return Err(format!("{}: at least 1", key("max_attempts")));
        }
        if r.retry_base_delay_ms == 0 {
            return Err(format!("{}: at least 1", key("retry_base_delay_ms")));
        }
        let seconds = [
            ("timeout_secs", r.timeout_secs, false),
            ("max_age_secs", r.max_age_secs, false),
            ("retry_max_delay_secs", r.retry_max_delay_secs, false),
            (
                "dead_letter_retention_secs",
                r.dead_letter_retention_secs,
                false,
            ),
            ("flush_delay_secs", r.flush_delay_secs, true),
        ];
        for (field, value, zero_ok) in seconds {
            let ok = value.is_finite() && (value > 0.0 || (zero_ok && value == 0.0));
            if !ok || value > 365.0 * 86_400.0 {
                return Err(format!(
                    "{}: a {} number of seconds (at most a year), got {value}",
                    key(field),
                    if zero_ok { "non-negative" } else { "positive" }
                ));
            }
        }
        for (field, value) in [("token", &r.token), ("signing_secret", &r.signing_secret)] {
            if let Some(value) = value {
                let resolved = expand(value).map_err(|why| format!("{}: {why}", key(field)))?;
                if resolved.is_empty() {
                    return Err(format!("{}: empty", key(field)));
                }
                if field == "token" {
                    HeaderValue::from_str(&resolved).map_err(|_| {
                        format!(
                            "{}: not a valid header value (control characters?)",
                            key(field)
                        )
                    })?;
                }
            }
        }
        for (name, value) in &r.headers {
            let field = format!("headers.{name}");
            header(name, value).map_err(|why| format!("{}: {why}", key(&field)))?;
        }
    }
    Ok(())
}

/// A checked `base_url`, without a trailing slash.
pub fn base_url(raw: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(raw.trim()).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("an http:// or https:// URL".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials in the URL would be logged: use `token` or `headers`".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("no query or fragment: paths are appended to it".into());
    }
    Ok(url)
}

/// A configured header, its value resolved.
pub fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), String> {
    let header_name =
        HeaderName::from_bytes(name.as_bytes()).map_err(|_| "not a header name".to_owned())?;
    if RESERVED_HEADERS.contains(&header_name.as_str()) {
        return Err("set by triage itself".into());
    }
    let resolved = expand(value)?;
    let mut header_value = HeaderValue::from_str(&resolved)
        .map_err(|_| "not a valid header value (control characters?)".to_owned())?;
    header_value.set_sensitive(true);
    Ok((header_name, header_value))
}

/// `${NAME}` replaced by the environment variable NAME (which must be set), `$$` by `$`.
pub fn expand(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(more) = after.strip_prefix('$') {
            out.push('$');
            rest = more;
        } else if let Some(inner) = after.strip_prefix('{') {
            let end = inner
                .find('}')
                .ok_or_else(|| "`${` without a closing `}`".to_owned())?;
            let name = &inner[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!("`${{{name}}}` is not an environment variable name"));
            }
            let found = std::env::var(name)
                .map_err(|_| format!("environment variable {name} is not set"))?;
            out.push_str(&found);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Every secret the receivers hold, resolved (for the masker): tokens, signing secrets,
/// header values.
pub fn secrets(receivers: &[WebhookSettings]) -> Vec<String> {
    receivers
        .iter()
        .flat_map(|r| {
            r.token
                .iter()
                .chain(&r.signing_secret)
                .chain(r.headers.values())
                .filter_map(|v| expand(v).ok())
                .collect::<Vec<_>>()
        })
        .filter(|s| s.len() >= 4)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_expand_and_dollars_escape() {
        // SAFETY: set before any thread of this test reads the environment.
        unsafe { std::env::set_var("UNIT_WEBHOOK_TEST_TOKEN", "s3cret") };
        assert_eq!(
            expand("Bearer ${UNIT_WEBHOOK_TEST_TOKEN}").unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(expand("a$$b$c").unwrap(), "a$b$c");
        assert!(
            expand("${UNIT_WEBHOOK_TEST_UNSET_VAR}")
                .unwrap_err()
                .contains("UNIT_WEBHOOK_TEST_UNSET_VAR is not set")
        );
        assert!(expand("${oops").is_err());
        assert!(expand("${1A}").is_err());
    }

    #[test]
    fn errors_name_the_key() {
        let check = |edit: &dyn Fn(&mut WebhookSettings)| {
            let mut r = WebhookSettings::new("tickets", "https://hooks.example/triage");
            edit(&mut r);
            validate(&[r]).unwrap_err()
        };
        let err = check(&|r| r.base_url = "ftp://x".into());
        assert!(err.contains("`webhooks[0].base_url`"), "{err}");
        let err = check(&|r| r.base_url = "https://user:pw@x/".into());
        assert!(err.contains("credentials"), "{err}");
        let err = check(&|r| r.updates = vec!["everything".into()]);
        assert!(err.contains("`webhooks[0].updates`"), "{err}");
        let err = check(&|r| {
            r.headers
                .insert("X-Evil".into(), "a\r\nX-Injected: 1".into());
        });
        assert!(err.contains("`webhooks[0].headers.X-Evil`"), "{err}");
        let err = check(&|r| {
            r.headers.insert("X-Triage-Signature".into(), "x".into());
        });
        assert!(err.contains("set by triage"), "{err}");
        let err = check(&|r| r.timeout_secs = f64::NAN);
        assert!(err.contains("timeout_secs"), "{err}");
        let err = check(&|r| r.token = Some("${UNIT_WEBHOOK_TEST_UNSET_VAR}".into()));
        assert!(err.contains("`webhooks[0].token`"), "{err}");
        let twice = [
            WebhookSettings::new("a", "http://127.0.0.1:1"),
            WebhookSettings::new("a", "http://127.0.0.1:2"),
        ];
        assert!(validate(&twice).unwrap_err().contains("two receivers"));
        assert!(validate(&[WebhookSettings::new("ok", "http://127.0.0.1:9/x")]).is_ok());
    }

    #[test]
    fn receivers_without_a_name_are_named_after_their_host() {
        let mut receivers = [
            WebhookSettings::new("", "https://hooks.example/a"),
            WebhookSettings::new("hooks.example-2", "https://other.example"),
            WebhookSettings::new("", "https://hooks.example:8443/b"),
            WebhookSettings::new("  ", "http://[::1]:9/"),
            WebhookSettings::new("", "not a url"),
        ];
        name_unnamed(&mut receivers);
        let names: Vec<&str> = receivers.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "hooks.example",
                "hooks.example-2",
                "hooks.example-3",
                "--1",
                ""
            ]
        );
        let err = validate(&receivers).unwrap_err();
        assert!(err.contains("`webhooks[4].base_url`"), "{err}");
        assert!(validate(&receivers[..4]).is_ok());
    }
}
