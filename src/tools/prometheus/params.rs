//! The five `prometheus_*` tools as the model sees them: their parameters, names,
//! descriptions and one-liners (how each runs is [`super::tools`]).

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// One tool of the toolset, named by its parameter type.
pub(super) trait Command: DeserializeOwned + JsonSchema + Send + 'static {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    fn one_liner(&self) -> String;
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct QueryParams {
    /// The PromQL expression, e.g. `sum by (pod) (rate(http_requests_total{job="api"}[5m]))`.
    pub(super) query: String,
    /// Evaluation time: RFC 3339 (`2024-05-01T10:00:00Z`), unix seconds, or `now-1h`.
    /// Default: now.
    #[serde(default, deserialize_with = "string_or_number")]
    #[schemars(with = "String")]
    pub(super) time: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct QueryRangeParams {
    /// The PromQL expression, e.g. `rate(container_cpu_usage_seconds_total{pod="x"}[5m])`.
    pub(super) query: String,
    /// Start of the range: RFC 3339, unix seconds, or `now-6h`. Default: one hour before end.
    #[serde(default, deserialize_with = "string_or_number")]
    #[schemars(with = "String")]
    pub(super) start: Option<String>,
    /// End of the range: RFC 3339, unix seconds, or `now`. Default: now.
    #[serde(default, deserialize_with = "string_or_number")]
    #[schemars(with = "String")]
    pub(super) end: Option<String>,
    /// Resolution: a duration such as `30s`, `5m`, or seconds. Default: about 200 points.
    #[serde(default, deserialize_with = "string_or_number")]
    #[schemars(with = "String")]
    pub(super) step: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListMetricsParams {
    /// Keep only names matching this case-insensitive regex or substring,
    /// e.g. `http_request` or `^node_(cpu|memory)`.
    #[serde(default, rename = "match")]
    pub(super) pattern: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListLabelsParams {
    /// Only consider series of this metric name or series selector, e.g. `up` or
    /// `kube_pod_info{namespace="prod"}`.
    #[serde(default)]
    pub(super) metric: Option<String>,
    /// List the values of this label (e.g. `job`, `namespace`) instead of the label names.
    #[serde(default)]
    pub(super) label: Option<String>,
}

// `prometheus_active_alerts` takes nothing; its schema still lists (no) `properties`, as some
// providers want every object schema to. (A doc comment would become the schema's description.)
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("properties" = {}))]
pub(super) struct ActiveAlertsParams {}

/// Accepts `"…"` or a number (unix seconds, step seconds) and keeps it as text.
fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(D::Error::custom("expected a string or a number")),
    }
}

/// An optional text parameter as shown: trimmed, `None` when blank.
fn shown(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl Command for QueryParams {
    const NAME: &'static str = "prometheus_query";
    const DESCRIPTION: &'static str = "Evaluate a PromQL expression at one instant (default: \
        now) and return the matching series with their values.";

    fn one_liner(&self) -> String {
        let query = self.query.trim();
        match shown(&self.time) {
            Some(t) => format!("PromQL instant query at {t}: {query}"),
            None => format!("PromQL instant query: {query}"),
        }
    }
}

impl Command for QueryRangeParams {
    const NAME: &'static str = "prometheus_query_range";
    const DESCRIPTION: &'static str = "Evaluate a PromQL expression over a time range \
        (default: the last hour) and return, per series, the number of points, \
        min/max/avg/last and a few sample points. Use it to see trends and since when \
        something changed.";

    fn one_liner(&self) -> String {
        let range = match (shown(&self.start), shown(&self.end)) {
            (None, None) => "last 1h".to_owned(),
            (start, end) => format!("{} to {}", start.unwrap_or("end-1h"), end.unwrap_or("now")),
        };
        let step = shown(&self.step)
            .map(|s| format!(", step {s}"))
            .unwrap_or_default();
        format!("PromQL range query ({range}{step}): {}", self.query.trim())
    }
}

impl Command for ListMetricsParams {
    const NAME: &'static str = "prometheus_list_metrics";
    const DESCRIPTION: &'static str = "List the metric names Prometheus knows, optionally \
        filtered by a case-insensitive regex or substring.";

    fn one_liner(&self) -> String {
        match shown(&self.pattern) {
            Some(m) => format!("List Prometheus metrics matching `{m}`"),
            None => "List Prometheus metrics".into(),
        }
    }
}

impl Command for ListLabelsParams {
    const NAME: &'static str = "prometheus_list_labels";
    const DESCRIPTION: &'static str = "List label names (optionally only on the series of one \
        metric or selector), or the values of one label, e.g. label=`namespace` with \
        metric=`kube_pod_info`.";

    fn one_liner(&self) -> String {
        let scope = shown(&self.metric)
            .map(|m| format!(" of {m}"))
            .unwrap_or_default();
        match shown(&self.label) {
            Some(l) => format!("List values of Prometheus label `{l}`{scope}"),
            None => format!("List Prometheus labels{scope}"),
        }
    }
}

impl Command for ActiveAlertsParams {
    const NAME: &'static str = "prometheus_active_alerts";
    const DESCRIPTION: &'static str = "List the alerts of Prometheus's alerting rules that are \
        pending or firing, with their labels, start time and summary.";

    fn one_liner(&self) -> String {
        "List active Prometheus alerts".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::parse_params;
    use serde_json::json;

    #[test]
    fn times_and_steps_may_be_numbers() {
        let p: QueryRangeParams =
            parse_params(&json!({"query": "up", "start": 1714557600, "step": 30, "end": " "}))
                .unwrap();
        assert_eq!(p.start.as_deref(), Some("1714557600"));
        assert_eq!(p.step.as_deref(), Some("30"));
        assert_eq!(p.end, None);
        let err = parse_params::<QueryParams>(&json!({"query": "up", "time": [1]})).unwrap_err();
        assert!(err.contains("`time`"), "{err}");
    }

    #[test]
    fn one_liners() {
        let q: QueryParams = parse_params(&json!({"query": " up ", "time": 5})).unwrap();
        assert_eq!(q.one_liner(), "PromQL instant query at 5: up");
        let r: QueryRangeParams = parse_params(&json!({"query": "up", "end": "now"})).unwrap();
        assert_eq!(r.one_liner(), "PromQL range query (end-1h to now): up");
        let l: ListLabelsParams = parse_params(&json!({"metric": "up", "label": " "})).unwrap();
        assert_eq!(l.one_liner(), "List Prometheus labels of up");
        let m: ListMetricsParams = parse_params(&json!({"match": "http"})).unwrap();
        assert_eq!(m.one_liner(), "List Prometheus metrics matching `http`");
    }
}
