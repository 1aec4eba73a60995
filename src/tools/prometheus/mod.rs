//! The `prometheus` toolset: PromQL instant and range queries, metric and label discovery,
//! and active alerts, against a Prometheus-compatible HTTP API. Results are summarised to fit
//! the context budget (see [`render`]).
//!
//! [`config`] is the `[toolsets.prometheus]` section, [`api`] the HTTP client, [`time`] reads
//! the times and durations the model writes, [`params`] holds the tools' parameters and
//! names, [`tools`] what they do.

mod api;
mod config;
mod params;
mod render;
mod time;
mod tools;

use std::sync::Arc;

pub use config::PrometheusConfig;

use super::Toolset;
use api::Api;

const NAME: &str = "prometheus";

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
    Toolset::enabled(NAME, &instructions, tools::tools(&api))
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

#[cfg(test)]
mod tests {
    use super::*;
    use api::tests::client;

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
}
