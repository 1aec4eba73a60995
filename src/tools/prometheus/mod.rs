//! The `prometheus` toolset: PromQL instant and range queries, metric and label discovery,
//! and active alerts, against a Prometheus-compatible HTTP API. Results are summarised to fit
//! the context budget (see [`render`]).

mod render;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use url::Url;

use super::{
    Tool, ToolContext, ToolOutput, Toolset, describe_http_error, parameters_schema, parse_params,
};
use crate::wire::events::ToolStatus;
use render::{fmt_time, render_alerts, render_result};

const NAME: &str = "prometheus";
const STARTUP_CHECK_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest API answer read; bigger ones mean the query must be narrowed.
const MAX_RESPONSE_BYTES: usize = 32 << 20;
/// Metric names, label names or label values listed at most.
const MAX_NAMES: usize = 500;
/// A default range-query step aims at about this many points per series.
const TARGET_POINTS: f64 = 200.0;
const DEFAULT_RANGE_SECS: f64 = 3600.0;

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusConfig {
    /// Offer the toolset (it also needs `url`).
    pub enabled: bool,
    /// Base URL of the Prometheus HTTP API, e.g. `http://127.0.0.1:9090`; a path prefix
    /// (`https://mimir.example/prometheus`) is kept.
    pub url: Option<String>,
    /// Extra request headers, e.g. `Authorization = "Bearer …"`.
    pub headers: BTreeMap<String, String>,
    /// Per-request timeout of the tools.
    pub timeout_secs: u64,
    /// Series (and alerts) shown per result; the rest are counted, not listed.
    pub max_series: usize,
    /// Check at start-up that the server answers; if not, the toolset is unavailable.
    pub check_on_startup: bool,
    /// Headers of the chat request passed on to Prometheus when present (e.g.
    /// `X-Scope-OrgID` for a multi-tenant Mimir); blocked headers are never passed.
    pub forward_headers: Vec<String>,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            enabled: true,
            url: None,
            headers: BTreeMap::new(),
            timeout_secs: 30,
            max_series: 50,
            check_on_startup: true,
            forward_headers: Vec::new(),
        }
    }
}

/// Header values may be credentials: never print them.
impl fmt::Debug for PrometheusConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: BTreeMap<&str, &str> = self
            .headers
            .keys()
            .map(|k| (k.as_str(), "<redacted>"))
            .collect();
        f.debug_struct("PrometheusConfig")
            .field("enabled", &self.enabled)
            .field("url", &self.url)
            .field("headers", &headers)
            .field("timeout_secs", &self.timeout_secs)
            .field("max_series", &self.max_series)
            .field("check_on_startup", &self.check_on_startup)
            .finish()
    }
}

/// Builds the toolset; when `check_on_startup` is set, first checks that the server answers.
pub async fn toolset(cfg: &PrometheusConfig, http: &reqwest::Client) -> Toolset {
    if !cfg.enabled {
        return Toolset::disabled(NAME);
    }
    let Some(raw) = cfg.url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
        return Toolset::unavailable(
            NAME,
            "set toolsets.prometheus.url to the Prometheus server's URL",
        );
    };
    let api = match Api::new(cfg, raw, http.clone()) {
        Ok(api) => Arc::new(api),
        Err(reason) => return Toolset::unavailable(NAME, reason),
    };
    let mut version = None;
    if cfg.check_on_startup {
        match api.check().await {
            Ok(v) => version = v,
            Err(reason) => return Toolset::unavailable(NAME, reason),
        }
    }
    let instructions = instructions(&api, version.as_deref());
    let tools: Vec<Arc<dyn Tool>> = [
        Kind::Query,
        Kind::QueryRange,
        Kind::ListMetrics,
        Kind::ListLabels,
        Kind::ActiveAlerts,
    ]
    .into_iter()
    .map(|kind| Arc::new(PromTool::new(kind, api.clone())) as Arc<dyn Tool>)
    .collect();
    Toolset::enabled(NAME, &instructions, tools)
}

fn instructions(api: &Api, version: Option<&str>) -> String {
    let version = version
        .map(|v| format!(" (version {v})"))
        .unwrap_or_default();
    format!(
        "Prometheus{version} at {url} holds the metrics and alerting rules. Using its tools:\n\
         - When investigating an alert, look it up with prometheus_active_alerts; check whether \
         targets are scraped with prometheus_query `up{{job=\"…\"}}` (0 = down).\n\
         - Do not guess metric names: find them with prometheus_list_metrics (a filter such as \
         `http_requests`) and their labels and values with prometheus_list_labels.\n\
         - Counters (names ending in _total, _count, _sum, _bucket) only grow: query \
         `rate(x[5m])` or `increase(x[1h])`, not their raw value.\n\
         - Narrow queries with label matchers (`{{namespace=\"…\", pod=~\"api-.*\"}}`) or \
         aggregate (`sum by (pod) (…)`, `topk(10, …)`); only the first {max} series of a result \
         are shown.\n\
         - For \"since when\" and trend questions use prometheus_query_range over a window that \
         covers the incident; it summarises each series (min/max/avg/last and sample points).",
        url = api.display,
        max = api.max_series,
    )
}

/// The HTTP side: base URL, headers, timeouts.
struct Api {
    http: reqwest::Client,
    base: Url,
    /// The base URL as shown in messages (no password, no trailing slash).
    display: String,
    headers: HeaderMap,
    /// Lower-case names of request headers to pass on (`forward_headers`).
    forward: Vec<String>,
    timeout: Duration,
    max_series: usize,
}

/// A successful API answer: its `data` and any warnings.
struct Answer {
    data: Value,
    warnings: Vec<String>,
    url: Url,
}

enum ApiError {
    /// Network, timeout or size trouble, described.
    Transport(String),
    /// A non-2xx answer that is not an API error envelope.
    Http { status: StatusCode, excerpt: String },
    /// `{"status":"error","errorType":…,"error":…}`.
    Api { kind: String, message: String },
    /// A 2xx answer that is not the Prometheus API.
    NotPrometheus(String),
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Value,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    infos: Vec<String>,
}

impl Api {
    fn new(cfg: &PrometheusConfig, raw: &str, http: reqwest::Client) -> Result<Api, String> {
        let invalid = |why: String| format!("invalid toolsets.prometheus.url `{raw}`: {why}");
        let mut base = Url::parse(raw).map_err(|e| invalid(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(invalid("expected an http:// or https:// URL".into()));
        }
        base.set_query(None);
        base.set_fragment(None);
        let mut shown = base.clone();
        let _ = shown.set_password(None);
        let display = shown.as_str().trim_end_matches('/').to_owned();
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("invalid header name `{k}` in toolsets.prometheus.headers"))?;
            let mut value = HeaderValue::from_str(v).map_err(|_| {
                format!("invalid value for header `{k}` in toolsets.prometheus.headers")
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(Api {
            http,
            base,
            display,
            headers,
            forward: cfg
                .forward_headers
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .collect(),
            timeout: Duration::from_secs(cfg.timeout_secs.max(1)),
            max_series: cfg.max_series.max(1),
        })
    }

    /// The chat request's headers this toolset is configured to pass on (the HTTP layer has
    /// already removed blocked ones such as Authorization and Cookie).
    fn forwarded(&self, ctx: &ToolContext) -> HeaderMap {
        let mut out = HeaderMap::new();
        for (name, value) in ctx.request_headers.iter() {
            if !self.forward.iter().any(|f| name.eq_ignore_ascii_case(f)) {
                continue;
            }
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                out.insert(n, v);
            }
        }
        out
    }

    fn endpoint(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    async fn get(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
        timeout: Duration,
        forwarded: &HeaderMap,
    ) -> Result<Answer, ApiError> {
        let url = self.endpoint(segments, query);
        let resp = self
            .http
            .get(url.clone())
            .headers(forwarded.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "application/json")
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| ApiError::Transport(describe_http_error(&e, timeout)))?;
        let status = resp.status();
        let body = read_capped(resp, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| ApiError::Transport(describe_http_error(&e, timeout)))?
            .ok_or_else(|| {
                ApiError::Transport(format!(
                    "the answer is larger than {} MiB; narrow the query",
                    MAX_RESPONSE_BYTES >> 20
                ))
            })?;
        match serde_json::from_slice::<Envelope>(&body) {
            Ok(env) if env.status == "success" => {
                let mut warnings = env.warnings;
                warnings.extend(env.infos);
                Ok(Answer {
                    data: env.data,
                    warnings,
                    url,
                })
            }
            Ok(env) if env.status == "error" => Err(ApiError::Api {
                kind: env.error_type.unwrap_or_else(|| "error".into()),
                message: env.error.unwrap_or_else(|| "(no message)".into()),
            }),
            _ if !status.is_success() => Err(ApiError::Http {
                status,
                excerpt: excerpt(&body),
            }),
            _ => Err(ApiError::NotPrometheus(excerpt(&body))),
        }
    }

    /// Start-up check: the build info, or (for Prometheus-compatible servers without that
    /// endpoint) a trivial query. Returns the version when known.
    async fn check(&self) -> Result<Option<String>, String> {
        let t = STARTUP_CHECK_TIMEOUT;
        match self
            .get(
                &["api", "v1", "status", "buildinfo"],
                &[],
                t,
                &HeaderMap::new(),
            )
            .await
        {
            Ok(a) => Ok(a
                .data
                .get("version")
                .and_then(Value::as_str)
                .map(str::to_owned)),
            Err(ApiError::Http { status, .. }) if status == StatusCode::NOT_FOUND => self
                .get(
                    &["api", "v1", "query"],
                    &[("query", "1")],
                    t,
                    &HeaderMap::new(),
                )
                .await
                .map(|_| None)
                .map_err(|e| self.startup_reason(e)),
            Err(e) => Err(self.startup_reason(e)),
        }
    }

    fn startup_reason(&self, e: ApiError) -> String {
        let url = &self.display;
        match e {
            ApiError::Transport(why) => format!("cannot reach Prometheus at {url}: {why}"),
            ApiError::Http { status, .. }
                if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN =>
            {
                format!(
                    "Prometheus at {url} refused access (HTTP {status}); check \
                     toolsets.prometheus.headers"
                )
            }
            ApiError::NotPrometheus(body) => {
                format!("{url} does not look like a Prometheus server; it answered: {body}")
            }
            other => self.message(other),
        }
    }

    /// The error as the LLM reads it.
    fn message(&self, e: ApiError) -> String {
        let url = &self.display;
        match e {
            ApiError::Transport(why) => format!("cannot reach Prometheus at {url}: {why}"),
            ApiError::Http { status, excerpt } => {
                format!("Prometheus at {url} answered HTTP {status}: {excerpt}")
            }
            ApiError::Api { kind, message } => format!("Prometheus error ({kind}): {message}"),
            ApiError::NotPrometheus(body) => {
                format!("unexpected answer from {url} (not the Prometheus API): {body}")
            }
        }
    }
}

/// The body, or `None` if it is longer than `cap`.
async fn read_capped(
    resp: reqwest::Response,
    cap: usize,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > cap {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None if one_line.is_empty() => "(empty body)".into(),
        None => one_line,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Query,
    QueryRange,
    ListMetrics,
    ListLabels,
    ActiveAlerts,
}

struct PromTool {
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
    fn new(kind: Kind, api: Arc<Api>) -> PromTool {
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
    fn new(pattern: &str) -> NameFilter {
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

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Unix seconds as the API wants them (millisecond precision).
fn api_time(t: f64) -> String {
    let s = format!("{t:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Reads a time: RFC 3339, a date-time without zone (UTC), a date, unix seconds (or
/// milliseconds), `now`, `now-1h` / `now+5m`, or `-1h` (before now).
fn parse_time(s: &str, now: f64) -> Result<f64, String> {
    let t = s.trim();
    let bad = || {
        format!(
            "cannot read the time `{t}`: use RFC 3339 (2024-05-01T10:00:00Z), unix seconds, \
             `now` or `now-1h`"
        )
    };
    if t.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    let relative = t
        .strip_prefix("now")
        .or_else(|| t.strip_prefix("NOW"))
        .map(str::trim)
        .or_else(|| t.starts_with('-').then_some(t));
    if let Some(rest) = relative {
        let (sign, dur) = if let Some(d) = rest.strip_prefix('-') {
            (-1.0, d)
        } else if let Some(d) = rest.strip_prefix('+') {
            (1.0, d)
        } else {
            return Err(bad());
        };
        let secs = parse_duration(dur.trim()).map_err(|_| bad())?;
        return Ok(now + sign * secs);
    }
    if let Ok(n) = t.parse::<f64>() {
        if !n.is_finite() || n < 0.0 {
            return Err(bad());
        }
        // Unix milliseconds (anything past the year 5000 in seconds).
        return Ok(if n > 1e11 { n / 1000.0 } else { n });
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.timestamp_millis() as f64 / 1000.0);
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(t, fmt) {
            return Ok(dt.and_utc().timestamp_millis() as f64 / 1000.0);
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d")
        && let Some(dt) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(dt.and_utc().timestamp() as f64);
    }
    Err(bad())
}

/// Reads a positive duration: seconds (`30`, `0.5`) or Prometheus style (`90s`, `5m`,
/// `1h30m`, `2d`, `1w`, `500ms`).
fn parse_duration(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let bad = || format!("cannot read the duration `{s}`: use e.g. `30s`, `5m`, `1h` or seconds");
    if let Ok(n) = s.parse::<f64>() {
        return if n.is_finite() && n > 0.0 {
            Ok(n)
        } else {
            Err(bad())
        };
    }
    let mut total = 0.0;
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "w" => 604_800.0,
            "y" => 31_536_000.0,
            _ => return Err(bad()),
        };
        total += n * factor;
        rest = &rest[unit_len..];
    }
    if total > 0.0 { Ok(total) } else { Err(bad()) }
}

/// A round step giving at most about [`TARGET_POINTS`] points over `range` seconds.
fn default_step(range: f64) -> f64 {
    const NICE: [f64; 20] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0,
        3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0,
    ];
    let raw = range / TARGET_POINTS;
    NICE.iter()
        .copied()
        .find(|&s| s >= raw)
        .unwrap_or_else(|| (raw / 86400.0).ceil() * 86400.0)
}

fn fmt_step(step: f64) -> String {
    if step >= 3600.0 && step % 3600.0 == 0.0 {
        format!("{}h", step / 3600.0)
    } else if step >= 60.0 && step % 60.0 == 0.0 {
        format!("{}m", step / 60.0)
    } else {
        format!("{}s", render::fmt_num(step))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn client() -> reqwest::Client {
        crate::startup::install_crypto_provider();
        reqwest::Client::new()
    }

    fn api(url: &str) -> Arc<Api> {
        let cfg = PrometheusConfig {
            url: Some(url.into()),
            ..Default::default()
        };
        Arc::new(Api::new(&cfg, url, client()).unwrap())
    }

    #[test]
    fn times_and_durations() {
        let now = 1_714_557_600.0;
        assert_eq!(parse_time("now", now), Ok(now));
        assert_eq!(parse_time("now-1h", now), Ok(now - 3600.0));
        assert_eq!(parse_time("now + 5m", now), Ok(now + 300.0));
        assert_eq!(parse_time("-30m", now), Ok(now - 1800.0));
        assert_eq!(parse_time("1714557600", now), Ok(now));
        assert_eq!(parse_time("1714557600500", now), Ok(now + 0.5));
        assert_eq!(parse_time("2024-05-01T10:00:00Z", now), Ok(now));
        assert_eq!(parse_time("2024-05-01T12:00:00+02:00", now), Ok(now));
        assert_eq!(parse_time("2024-05-01 10:00:00", now), Ok(now));
        assert_eq!(parse_time("2024-05-01", now), Ok(now - 36000.0));
        assert!(
            parse_time("yesterday", now)
                .unwrap_err()
                .contains("RFC 3339")
        );
        assert!(parse_time("nan", now).is_err());
        assert_eq!(parse_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration("15"), Ok(15.0));
        assert_eq!(parse_duration("500ms"), Ok(0.5));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("m").is_err());
        assert_eq!(default_step(3600.0), 20.0);
        assert_eq!(default_step(60.0), 1.0);
        assert_eq!(default_step(86400.0 * 7.0), 3600.0);
        assert_eq!(fmt_step(20.0), "20s");
        assert_eq!(fmt_step(300.0), "5m");
        assert_eq!(api_time(1714557600.0), "1714557600");
        assert_eq!(api_time(1714557600.25), "1714557600.25");
    }

    #[test]
    fn endpoints_keep_the_path_prefix() {
        let a = api("http://prom:9090");
        assert_eq!(
            a.endpoint(&["api", "v1", "query"], &[("query", "up{job=\"a b\"}")])
                .as_str(),
            "http://prom:9090/api/v1/query?query=up%7Bjob%3D%22a+b%22%7D"
        );
        let a = api("https://u:secret@mimir.example/prometheus/");
        assert_eq!(a.display, "https://u@mimir.example/prometheus");
        assert_eq!(
            a.endpoint(&["api", "v1", "label", "a/b", "values"], &[])
                .as_str(),
            "https://u:secret@mimir.example/prometheus/api/v1/label/a%2Fb/values"
        );
    }

    #[test]
    fn config_is_checked_and_headers_are_redacted() {
        let cfg = PrometheusConfig {
            headers: [("Authorization".to_owned(), "Bearer s3cret".to_owned())].into(),
            ..Default::default()
        };
        assert!(!format!("{cfg:?}").contains("s3cret"));
        let err = Api::new(&cfg, "ftp://x", client()).err().unwrap();
        assert!(err.contains("expected an http"), "{err}");
        let bad = PrometheusConfig {
            headers: [("Bad Header".to_owned(), "x".to_owned())].into(),
            ..Default::default()
        };
        let err = Api::new(&bad, "http://x", client()).err().unwrap();
        assert!(err.contains("invalid header name `Bad Header`"), "{err}");
    }

    #[tokio::test]
    async fn unconfigured_and_disabled_toolsets() {
        let http = client();
        let t = toolset(&PrometheusConfig::default(), &http).await;
        assert_eq!(
            t.status,
            super::super::ToolsetStatus::Unavailable(
                "set toolsets.prometheus.url to the Prometheus server's URL".into()
            )
        );
        let off = PrometheusConfig {
            enabled: false,
            ..Default::default()
        };
        assert_eq!(
            toolset(&off, &http).await.status,
            super::super::ToolsetStatus::Disabled
        );
        let unchecked = PrometheusConfig {
            url: Some("http://127.0.0.1:9".into()),
            check_on_startup: false,
            ..Default::default()
        };
        let t = toolset(&unchecked, &http).await;
        assert_eq!(t.status, super::super::ToolsetStatus::Enabled);
        assert_eq!(t.tools.len(), 5);
        assert!(t.instructions.contains("rate("));
    }

    #[test]
    fn errors_are_worded_for_the_model() {
        let a = api("http://prom:9090");
        let msg = a.message(ApiError::Api {
            kind: "bad_data".into(),
            message: "1:5: parse error: unexpected end of input".into(),
        });
        assert_eq!(
            msg,
            "Prometheus error (bad_data): 1:5: parse error: unexpected end of input"
        );
        let msg = a.message(ApiError::Http {
            status: StatusCode::BAD_GATEWAY,
            excerpt: excerpt(b"<html>\n  upstream   down</html>"),
        });
        assert_eq!(
            msg,
            "Prometheus at http://prom:9090 answered HTTP 502 Bad Gateway: <html> upstream down</html>"
        );
        let msg = a.startup_reason(ApiError::Transport(
            "Connection refused (os error 111)".into(),
        ));
        assert_eq!(
            msg,
            "cannot reach Prometheus at http://prom:9090: Connection refused (os error 111)"
        );
    }

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
