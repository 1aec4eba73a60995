//! The `prometheus` toolset (stub: being written).

use serde::{Deserialize, Serialize};

use super::Toolset;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusConfig {
    pub enabled: bool,
}

pub async fn toolset(cfg: &PrometheusConfig, http: &reqwest::Client) -> Toolset {
    let _ = http;
    if !cfg.enabled {
        return Toolset::disabled("prometheus");
    }
    Toolset::unavailable("prometheus", "not implemented yet")
}
