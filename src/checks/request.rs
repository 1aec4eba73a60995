//! `POST /api/checks/execute`'s body as HolmesGPT defines it, and its reading into a `Check`
//! that can run: every limit and every destination checked before the model is asked
//! anything, each refusal naming its field.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::notify::Destination;

/// A question longer than this is not a health check (HolmesGPT's operator caps its CRDs'
/// queries at 5,000 characters; twice that leaves room for callers of the API itself).
pub const MAX_QUERY_CHARS: usize = 10_000;
/// Names go into notification titles.
pub const MAX_NAME_CHARS: usize = 256;
/// More destinations than any alert needs; each costs up to a notification timeout.
pub const MAX_DESTINATIONS: usize = 10;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CheckRequest {
    /// The question the check asks, phrased so that "pass" means healthy (e.g. "Are all pods in
    /// namespace payments running?").
    #[schemars(length(min = 1, max = 10000))]
    pub query: String,
    /// The check's name, in notifications (default `api-check`).
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub name: Option<String>,
    /// Seconds the check may take; past it the answer is `status: error`. At most
    /// `checks.max_timeout_secs` (300 by default).
    #[serde(default = "default_timeout")]
    #[schemars(range(min = 1, max = 300))]
    pub timeout: i64,
    #[serde(default)]
    pub mode: CheckMode,
    /// Where a failed check in `alert` mode is announced: `{"type": "slack" | "pagerduty" |
    /// "webhook", "config": {…}}`, or a type name alone (its settings from the server's).
    #[serde(default)]
    #[schemars(schema_with = "destinations_schema")]
    pub destinations: Vec<Value>,
    /// A key of the model list; the default model when absent.
    #[serde(default)]
    pub model: Option<String>,
}

fn default_timeout() -> i64 {
    30
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckMode {
    /// Run and answer; notify nobody.
    #[default]
    Monitor,
    /// Run, answer, and notify the destinations when the check fails.
    Alert,
}

/// The documented form of `destinations` (the body is read by hand, for precise errors).
fn destinations_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let kind = json!({"type": "string", "enum": ["slack", "pagerduty", "webhook"]});
    schemars::json_schema!({
        "type": "array",
        "maxItems": MAX_DESTINATIONS,
        "items": {"oneOf": [
            kind.clone(),
            {
                "type": "object",
                "required": ["type"],
                "properties": {
                    "type": kind,
                    "config": {
                        "type": "object",
                        "description": "slack: `channel`, `token`; pagerduty: `routing_key` (or \
                            `integration_key`); webhook: `url`, `headers` (strings), \
                            `payload_template` (any JSON; `{{check_name}}`, `{{status}}`, \
                            `{{analysis}}`, `{{source_type}}`, `{{url}}` filled into its strings)",
                    },
                },
                "additionalProperties": false,
            },
        ]},
    })
}

/// A request read and checked: what runs.
#[derive(Debug)]
pub struct Check {
    pub name: String,
    pub query: String,
    pub timeout: Duration,
    pub mode: CheckMode,
    pub destinations: Vec<Destination>,
    pub model: Option<String>,
}

impl CheckRequest {
    /// The check, or what is wrong with the request, naming the field.
    pub fn into_check(self, max_timeout_secs: u64) -> Result<Check, String> {
        let query = self.query.trim();
        if query.is_empty() {
            return Err("`query` is empty: a check asks a question".into());
        }
        let chars = query.chars().count();
        if chars > MAX_QUERY_CHARS {
            return Err(format!(
                "`query` has {chars} characters; a check's question may have at most {MAX_QUERY_CHARS}"
            ));
        }
        let name = match self.name.as_deref().map(str::trim) {
            None | Some("") => "api-check".to_owned(),
            Some(name) if name.chars().count() > MAX_NAME_CHARS => {
                return Err(format!(
                    "`name` may have at most {MAX_NAME_CHARS} characters"
                ));
            }
            Some(name) if name.chars().any(char::is_control) => {
                return Err("`name` may not contain control characters".into());
            }
            Some(name) => name.to_owned(),
        };
        let timeout = match u64::try_from(self.timeout) {
            Ok(secs) if (1..=max_timeout_secs).contains(&secs) => Duration::from_secs(secs),
            _ => {
                return Err(format!(
                    "`timeout` must be between 1 and {max_timeout_secs} seconds \
                     (checks.max_timeout_secs), got {}",
                    self.timeout
                ));
            }
        };
        if self.destinations.len() > MAX_DESTINATIONS {
            return Err(format!(
                "`destinations` has {} entries; at most {MAX_DESTINATIONS}",
                self.destinations.len()
            ));
        }
        let destinations = self
            .destinations
            .iter()
            .enumerate()
            .map(|(i, d)| Destination::parse(d).map_err(|e| format!("`destinations[{i}]`: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let model = match self.model.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(model) => Some(model.to_owned()),
        };
        Ok(Check {
            name,
            query: query.to_owned(),
            timeout,
            mode: self.mode,
            destinations,
            model,
        })
    }
}
