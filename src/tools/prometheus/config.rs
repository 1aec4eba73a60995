//! `[toolsets.prometheus]`: where the Prometheus API is and how to call it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

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
