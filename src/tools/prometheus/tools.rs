//! The five `prometheus_*` tools: how each calls the API and words the answer for the model
//! (their parameters and names are in [`super::params`], which knows nothing of this file).

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::NAME;
use super::api::{Answer, Api};
use super::params::{
    ActiveAlertsParams, Command, ListLabelsParams, ListMetricsParams, QueryParams, QueryRangeParams,
};
use super::render::{self, fmt_time, render_alerts, render_result};
use super::time::{api_time, default_step, fmt_step, now_secs, parse_duration, parse_time};
use crate::tools::{Tool, ToolContext, ToolOutput, Typed, TypedTool};
use crate::wire::events::ToolStatus;

/// Metric names, label names or label values listed at most.
const MAX_NAMES: usize = 500;
const DEFAULT_RANGE_SECS: f64 = 3600.0;

/// The toolset's tools, in the order the model sees them.
pub(super) fn tools(api: &Arc<Api>) -> Vec<Arc<dyn Tool>> {
    fn tool<C: Run>(api: &Arc<Api>) -> Arc<dyn Tool> {
        Arc::new(Typed::new(PromTool::<C> {
            api: api.clone(),
            command: PhantomData,
        }))
    }
    vec![
        tool::<QueryParams>(api),
        tool::<QueryRangeParams>(api),
        tool::<ListMetricsParams>(api),
        tool::<ListLabelsParams>(api),
        tool::<ActiveAlertsParams>(api),
    ]
}

/// How each command runs: here, beside the queries, rather than with its parameters, so that
/// `params.rs` stays below this file.
trait Run: Command {
    /// Asks Prometheus and words the answer; `Err` is the error the model reads.
    fn run<'a>(
        self,
        api: &'a Api,
        fwd: &'a HeaderMap,
    ) -> impl Future<Output = Result<ToolOutput, String>> + Send + 'a;
}

/// Each command's `Run`: the query function that serves it.
macro_rules! runs_with {
    ($($params:ty => |$p:pat_param, $api:ident, $fwd:ident| $call:expr;)+) => {$(
        impl Run for $params {
            fn run<'a>(
                self,
                $api: &'a Api,
                $fwd: &'a HeaderMap,
            ) -> impl Future<Output = Result<ToolOutput, String>> + Send + 'a {
                let $p = self;
                $call
            }
        }
    )+};
}

runs_with! {
    QueryParams => |p, api, fwd| query(api, p, fwd);
    QueryRangeParams => |p, api, fwd| query_range(api, p, fwd);
    ListMetricsParams => |p, api, fwd| list_metrics(api, p, fwd);
    ListLabelsParams => |p, api, fwd| list_labels(api, p, fwd);
    ActiveAlertsParams => |_, api, fwd| active_alerts(api, fwd);
}

struct PromTool<C> {
    api: Arc<Api>,
    command: PhantomData<fn() -> C>,
}

impl<C: Run> TypedTool for PromTool<C> {
    type Params = C;

    fn name(&self) -> &str {
        C::NAME
    }

    fn toolset(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        C::DESCRIPTION
    }

    fn one_liner(&self, params: &C) -> String {
        params.one_liner()
    }

    fn timeout(&self) -> Duration {
        self.api.timeout + Duration::from_secs(5)
    }

    fn invoke<'a>(&'a self, params: C, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let fwd = self.api.forwarded(ctx);
            params
                .run(&self.api, &fwd)
                .await
                .unwrap_or_else(ToolOutput::error)
        })
    }
}

async fn get(
    api: &Api,
    segments: &[&str],
    query: &[(&str, &str)],
    fwd: &HeaderMap,
) -> Result<Answer, String> {
    api.get(segments, query, api.timeout, fwd)
        .await
        .map_err(|e| api.message(e))
}

pub(super) async fn query(
    api: &Api,
    p: QueryParams,
    fwd: &HeaderMap,
) -> Result<ToolOutput, String> {
    let q = non_empty_query(&p.query)?;
    let now = now_secs();
    let time = match &p.time {
        Some(t) => parse_time(t, now)?,
        None => now,
    };
    let answer = get(
        api,
        &["api", "v1", "query"],
        &[("query", q), ("time", &api_time(time))],
        fwd,
    )
    .await?;
    let when = fmt_time(time);
    Ok(match render_result(&answer.data, api.max_series)? {
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

pub(super) async fn query_range(
    api: &Api,
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
    let answer = get(
        api,
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
    Ok(match render_result(&answer.data, api.max_series)? {
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

pub(super) async fn list_metrics(
    api: &Api,
    p: ListMetricsParams,
    fwd: &HeaderMap,
) -> Result<ToolOutput, String> {
    let answer = get(api, &["api", "v1", "label", "__name__", "values"], &[], fwd).await?;
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

pub(super) async fn list_labels(
    api: &Api,
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
            let answer = get(api, &["api", "v1", "label", label, "values"], &query, fwd).await?;
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
            let answer = get(api, &["api", "v1", "labels"], &query, fwd).await?;
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

pub(super) async fn active_alerts(api: &Api, fwd: &HeaderMap) -> Result<ToolOutput, String> {
    let answer = get(api, &["api", "v1", "alerts"], &[], fwd).await?;
    Ok(match render_alerts(&answer.data, api.max_series)? {
        Some(text) => success(text, &answer),
        None => no_data(
            "No alerts are pending or firing in Prometheus.".into(),
            &answer,
        ),
    })
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
        let tools = tools(&api("http://prom:9090"));
        let [q, r, m, _, alerts] = &tools[..] else {
            panic!("five tools");
        };
        assert_eq!(q.parameters()["required"], json!(["query"]));
        assert_eq!(
            q.one_liner(&json!({"query": "up{job=\"x\"}"})),
            "PromQL instant query: up{job=\"x\"}"
        );
        assert_eq!(
            r.one_liner(&json!({"query": "up", "start": "now-6h", "step": "5m"})),
            "PromQL range query (now-6h to now, step 5m): up"
        );
        assert_eq!(alerts.name(), "prometheus_active_alerts");
        assert_eq!(alerts.parameters()["properties"], json!({}));
        assert!(m.parameters()["properties"]["match"].is_object());
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
