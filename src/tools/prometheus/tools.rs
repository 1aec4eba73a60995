//! The five `prometheus_*` tools: their parameters, and how each calls the API and words the
//! answer for the model.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::HeaderMap;
use schemars::JsonSchema;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::NAME;
use super::api::{Answer, Api};
use super::render::{self, fmt_time, render_alerts, render_result};
use super::time::{api_time, default_step, fmt_step, now_secs, parse_duration, parse_time};
use crate::tools::{Tool, ToolContext, ToolOutput, parameters_schema, parse_params};
use crate::wire::events::ToolStatus;

/// Metric names, label names or label values listed at most.
const MAX_NAMES: usize = 500;
const DEFAULT_RANGE_SECS: f64 = 3600.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Query,
    QueryRange,
    ListMetrics,
    ListLabels,
    ActiveAlerts,
}

pub(super) struct PromTool {
    kind: Kind,
    api: Arc<Api>,
    schema: Value,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueryParams {
    /// The PromQL expression, e.g. `sum by (pod) (rate(http_requests_total{job="api"}[5m]))`.
    query: String,
    /// Evaluation time: RFC 3339 (`2024-05-01T10:00:00Z`), unix seconds, or `now-1h`.
    /// Default: now.
    #[serde(default, deserialize_with = "string_or_number")]
    #[schemars(with = "String")]
    time: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueryRangeParams {
    /// The PromQL expression, e.g. `rate(container_cpu_usage_seconds_total{pod="x"}[5m])`.
    query: String,
    /// Start of the range: RFC 3339, unix seconds, or `now-6h`. Default: one hour before end.
    #[serde(default, deserialize_with = "string_or_number")]
    #[schemars(with = "String")]
    start: Option<String>,
    /// End of the range: RFC 3339, unix seconds, or `now`. Default: now.
    #[serde(default, deserialize_with = "string_or_number")]
    #[schemars(with = "String")]
    end: Option<String>,
    /// Resolution: a duration such as `30s`, `5m`, or seconds. Default: about 200 points.
    #[serde(default, deserialize_with = "string_or_number")]
    #[schemars(with = "String")]
    step: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListMetricsParams {
    /// Keep only names matching this case-insensitive regex or substring,
    /// e.g. `http_request` or `^node_(cpu|memory)`.
    #[serde(default, rename = "match")]
    pattern: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListLabelsParams {
    /// Only consider series of this metric name or series selector, e.g. `up` or
    /// `kube_pod_info{namespace="prod"}`.
    #[serde(default)]
    metric: Option<String>,
    /// List the values of this label (e.g. `job`, `namespace`) instead of the label names.
    #[serde(default)]
    label: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoParams {}

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

impl PromTool {
    pub(super) fn new(kind: Kind, api: Arc<Api>) -> PromTool {
        let mut schema = match kind {
            Kind::Query => parameters_schema::<QueryParams>(),
            Kind::QueryRange => parameters_schema::<QueryRangeParams>(),
            Kind::ListMetrics => parameters_schema::<ListMetricsParams>(),
            Kind::ListLabels => parameters_schema::<ListLabelsParams>(),
            Kind::ActiveAlerts => parameters_schema::<NoParams>(),
        };
        if let Some(obj) = schema.as_object_mut() {
            obj.entry("properties")
                .or_insert_with(|| Value::Object(Default::default()));
        }
        PromTool { kind, api, schema }
    }

    async fn run(&self, params: Value, fwd: &HeaderMap) -> Result<ToolOutput, String> {
        match self.kind {
            Kind::Query => self.query(parse_params(params)?, fwd).await,
            Kind::QueryRange => self.query_range(parse_params(params)?, fwd).await,
            Kind::ListMetrics => self.list_metrics(parse_params(params)?, fwd).await,
            Kind::ListLabels => self.list_labels(parse_params(params)?, fwd).await,
            Kind::ActiveAlerts => {
                parse_params::<NoParams>(params)?;
                self.active_alerts(fwd).await
            }
        }
    }

    async fn get(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
        fwd: &HeaderMap,
    ) -> Result<Answer, String> {
        self.api
            .get(segments, query, self.api.timeout, fwd)
            .await
            .map_err(|e| self.api.message(e))
    }

    async fn query(&self, p: QueryParams, fwd: &HeaderMap) -> Result<ToolOutput, String> {
        let q = non_empty_query(&p.query)?;
        let now = now_secs();
        let time = match &p.time {
            Some(t) => parse_time(t, now)?,
            None => now,
        };
        let answer = self
            .get(
                &["api", "v1", "query"],
                &[("query", q), ("time", &api_time(time))],
                fwd,
            )
            .await?;
        let when = fmt_time(time);
        Ok(match render_result(&answer.data, self.api.max_series)? {
            Some(text) => success(
                format!("Instant query `{q}` at {when} returned {text}"),
                &answer,
            ),
            None => no_data(
                format!(
                    "The query `{q}` matched no series at {when}. Check the metric name \
                     (prometheus_list_metrics) and label values (prometheus_list_labels), or \
                     loosen the label matchers."
                ),
                &answer,
            ),
        })
    }

    async fn query_range(
        &self,
        p: QueryRangeParams,
        fwd: &HeaderMap,
    ) -> Result<ToolOutput, String> {
        let q = non_empty_query(&p.query)?;
        let now = now_secs();
        let end = match &p.end {
            Some(t) => parse_time(t, now)?,
            None => now,
        };
        let start = match &p.start {
            Some(t) => parse_time(t, now)?,
            None => end - DEFAULT_RANGE_SECS,
        };
        if start >= end {
            return Err(format!(
                "`start` ({}) must be before `end` ({})",
                fmt_time(start),
                fmt_time(end)
            ));
        }
        let step = match &p.step {
            Some(s) => parse_duration(s).map_err(|e| format!("invalid `step`: {e}"))?,
            None => default_step(end - start),
        };
        let answer = self
            .get(
                &["api", "v1", "query_range"],
                &[
                    ("query", q),
                    ("start", &api_time(start)),
                    ("end", &api_time(end)),
                    ("step", &api_time(step)),
                ],
                fwd,
            )
            .await?;
        let range = format!(
            "from {} to {} (step {})",
            fmt_time(start),
            fmt_time(end),
            fmt_step(step)
        );
        Ok(match render_result(&answer.data, self.api.max_series)? {
            Some(text) => success(
                format!("Range query `{q}` {range} returned {text}"),
                &answer,
            ),
            None => no_data(
                format!(
                    "The query `{q}` matched no series {range}. Check the metric name \
                     (prometheus_list_metrics) and label values (prometheus_list_labels), \
                     loosen the label matchers, or widen the time range."
                ),
                &answer,
            ),
        })
    }

    async fn list_metrics(
        &self,
        p: ListMetricsParams,
        fwd: &HeaderMap,
    ) -> Result<ToolOutput, String> {
        let answer = self
            .get(&["api", "v1", "label", "__name__", "values"], &[], fwd)
            .await?;
        let all = string_list(&answer.data)?;
        let pattern = p
            .pattern
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let names: Vec<&str> = match pattern {
            None => all.iter().map(String::as_str).collect(),
            Some(pat) => {
                let matcher = NameFilter::new(pat);
                all.iter()
                    .map(String::as_str)
                    .filter(|n| matcher.matches(n))
                    .collect()
            }
        };
        let filter = pattern
            .map(|p| format!(" matching `{p}`"))
            .unwrap_or_default();
        if names.is_empty() {
            let msg = if all.is_empty() {
                "Prometheus has no metrics.".to_owned()
            } else {
                format!(
                    "No metric names{filter} (out of {} metrics). Try a shorter or different \
                     filter.",
                    all.len()
                )
            };
            return Ok(no_data(msg, &answer));
        }
        Ok(success(
            name_list("metric name", &filter, &names, "\n"),
            &answer,
        ))
    }

    async fn list_labels(
        &self,
        p: ListLabelsParams,
        fwd: &HeaderMap,
    ) -> Result<ToolOutput, String> {
        let metric = p.metric.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let label = p.label.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let query: Vec<(&str, &str)> = metric.map(|m| ("match[]", m)).into_iter().collect();
        let scope = metric
            .map(|m| format!(" on series matching `{m}`"))
            .unwrap_or_default();
        match label {
            Some("." | "..") => Err("invalid label name".into()),
            Some(label) => {
                let answer = self
                    .get(&["api", "v1", "label", label, "values"], &query, fwd)
                    .await?;
                let values = string_list(&answer.data)?;
                if values.is_empty() {
                    return Ok(no_data(
                        format!("Label `{label}` has no values{scope}."),
                        &answer,
                    ));
                }
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                Ok(success(
                    name_list(
                        "value",
                        &format!(" of label `{label}`{scope}"),
                        &values,
                        "\n",
                    ),
                    &answer,
                ))
            }
            None => {
                let answer = self.get(&["api", "v1", "labels"], &query, fwd).await?;
                let names = string_list(&answer.data)?;
                if names.is_empty() {
                    return Ok(no_data(format!("No labels{scope}."), &answer));
                }
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let mut text = name_list("label name", &scope, &names, ", ");
                text.push_str("\nPass `label` to list the values of one of them.");
                Ok(success(text, &answer))
            }
        }
    }

    async fn active_alerts(&self, fwd: &HeaderMap) -> Result<ToolOutput, String> {
        let answer = self.get(&["api", "v1", "alerts"], &[], fwd).await?;
        Ok(match render_alerts(&answer.data, self.api.max_series)? {
            Some(text) => success(text, &answer),
            None => no_data(
                "No alerts are pending or firing in Prometheus.".into(),
                &answer,
            ),
        })
    }
}

impl Tool for PromTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Query => "prometheus_query",
            Kind::QueryRange => "prometheus_query_range",
            Kind::ListMetrics => "prometheus_list_metrics",
            Kind::ListLabels => "prometheus_list_labels",
            Kind::ActiveAlerts => "prometheus_active_alerts",
        }
    }

    fn toolset(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        match self.kind {
            Kind::Query => {
                "Evaluate a PromQL expression at one instant (default: now) and return the \
                 matching series with their values."
            }
            Kind::QueryRange => {
                "Evaluate a PromQL expression over a time range (default: the last hour) and \
                 return, per series, the number of points, min/max/avg/last and a few sample \
                 points. Use it to see trends and since when something changed."
            }
            Kind::ListMetrics => {
                "List the metric names Prometheus knows, optionally filtered by a \
                 case-insensitive regex or substring."
            }
            Kind::ListLabels => {
                "List label names (optionally only on the series of one metric or selector), \
                 or the values of one label, e.g. label=`namespace` with metric=`kube_pod_info`."
            }
            Kind::ActiveAlerts => {
                "List the alerts of Prometheus's alerting rules that are pending or firing, \
                 with their labels, start time and summary."
            }
        }
    }

    fn parameters(&self) -> &Value {
        &self.schema
    }

    fn one_liner(&self, params: &Value) -> String {
        let text = |k: &str| match params.get(k) {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let query = text("query").unwrap_or_default();
        match self.kind {
            Kind::Query => match text("time") {
                Some(t) => format!("PromQL instant query at {t}: {query}"),
                None => format!("PromQL instant query: {query}"),
            },
            Kind::QueryRange => {
                let range = match (text("start"), text("end")) {
                    (None, None) => "last 1h".to_owned(),
                    (start, end) => format!(
                        "{} to {}",
                        start.unwrap_or_else(|| "end-1h".into()),
                        end.unwrap_or_else(|| "now".into())
                    ),
                };
                let step = text("step")
                    .map(|s| format!(", step {s}"))
                    .unwrap_or_default();
                format!("PromQL range query ({range}{step}): {query}")
            }
            Kind::ListMetrics => match text("match") {
                Some(m) => format!("List Prometheus metrics matching `{m}`"),
                None => "List Prometheus metrics".into(),
            },
            Kind::ListLabels => {
                let scope = text("metric")
                    .map(|m| format!(" of {m}"))
                    .unwrap_or_default();
                match text("label") {
                    Some(l) => format!("List values of Prometheus label `{l}`{scope}"),
                    None => format!("List Prometheus labels{scope}"),
                }
            }
            Kind::ActiveAlerts => "List active Prometheus alerts".into(),
        }
    }

    fn timeout(&self) -> Duration {
        self.api.timeout + Duration::from_secs(5)
    }

    fn invoke<'a>(&'a self, params: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let fwd = self.api.forwarded(ctx);
            self.run(params, &fwd)
                .await
                .unwrap_or_else(ToolOutput::error)
        })
    }
}

fn success(data: String, answer: &Answer) -> ToolOutput {
    let mut data = data;
    if !answer.warnings.is_empty() {
        data.push_str("\n\nPrometheus warnings: ");
        data.push_str(&answer.warnings.join("; "));
    }
    let mut out = ToolOutput::success(data);
    out.invocation = Some(answer.url.to_string());
    out
}

fn no_data(data: String, answer: &Answer) -> ToolOutput {
    let mut out = success(data, answer);
    out.status = ToolStatus::NoData;
    out
}

fn non_empty_query(q: &str) -> Result<&str, String> {
    let q = q.trim();
    if q.is_empty() {
        Err("`query` is empty: pass a PromQL expression".into())
    } else {
        Ok(q)
    }
}

fn string_list(data: &Value) -> Result<Vec<String>, String> {
    let items = data
        .as_array()
        .ok_or("unexpected answer from Prometheus: expected a list")?;
    Ok(items
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect())
}

/// "12 metric names matching `x`:" and the names, capped at [`MAX_NAMES`].
fn name_list(noun: &str, scope: &str, names: &[&str], sep: &str) -> String {
    let shown = names.len().min(MAX_NAMES);
    let counted = render::plural(names.len(), noun);
    let mut text = if shown == names.len() {
        format!("{counted}{scope}:\n")
    } else {
        format!("{counted}{scope} (showing the first {shown}):\n")
    };
    text.push_str(&names[..shown].join(sep));
    if shown < names.len() {
        text.push_str(&format!(
            "\n… {} more not shown; narrow the list with a filter.",
            names.len() - shown
        ));
    }
    text
}

/// A metric-name filter: a case-insensitive regex, or a plain substring if the pattern is not
/// a valid regex.
enum NameFilter {
    Regex(regex::Regex),
    Substring(String),
}

impl NameFilter {
    pub(super) fn new(pattern: &str) -> NameFilter {
        match regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .size_limit(1 << 20)
            .build()
        {
            Ok(re) => NameFilter::Regex(re),
            Err(_) => NameFilter::Substring(pattern.to_lowercase()),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            NameFilter::Regex(re) => re.is_match(name),
            NameFilter::Substring(s) => name.to_lowercase().contains(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::prometheus::api::tests::api;
    use serde_json::json;

    #[test]
    fn schemas_and_one_liners() {
        let a = api("http://prom:9090");
        let q = PromTool::new(Kind::Query, a.clone());
        assert_eq!(q.parameters()["required"], json!(["query"]));
        assert_eq!(
            q.one_liner(&json!({"query": "up{job=\"x\"}"})),
            "PromQL instant query: up{job=\"x\"}"
        );
        let r = PromTool::new(Kind::QueryRange, a.clone());
        assert_eq!(
            r.one_liner(&json!({"query": "up", "start": "now-6h", "step": "5m"})),
            "PromQL range query (now-6h to now, step 5m): up"
        );
        let alerts = PromTool::new(Kind::ActiveAlerts, a.clone());
        assert_eq!(alerts.parameters()["properties"], json!({}));
        let m = PromTool::new(Kind::ListMetrics, a);
        assert!(m.parameters()["properties"]["match"].is_object());
        let p: QueryRangeParams =
            parse_params(json!({"query": "up", "start": 1714557600, "step": 30})).unwrap();
        assert_eq!(p.start.as_deref(), Some("1714557600"));
        assert_eq!(p.step.as_deref(), Some("30"));
        let err = parse_params::<QueryParams>(json!({"query": "up", "time": [1]})).unwrap_err();
        assert!(err.contains("`time`"), "{err}");
    }

    #[test]
    fn name_filters() {
        assert!(NameFilter::new("HTTP_req").matches("http_requests_total"));
        assert!(NameFilter::new("^node_(cpu|memory)").matches("node_cpu_seconds_total"));
        assert!(!NameFilter::new("^node_(cpu|memory)").matches("go_memory"));
        // Not a valid regex: a substring.
        assert!(NameFilter::new("up{").matches("xup{"));
        let list = name_list("thing", " here", &["a"; 600], "\n");
        assert!(list.starts_with("600 things here (showing the first 500):\n"));
        assert_eq!(name_list("value", "", &["x"], "\n"), "1 value:\nx");
        assert!(list.ends_with("… 100 more not shown; narrow the list with a filter."));
    }
}
