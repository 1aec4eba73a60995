//! The `internet` toolset (stub: being written).

use serde::{Deserialize, Serialize};

use super::Toolset;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InternetConfig {
    pub enabled: bool,
}

impl Default for InternetConfig {
    fn default() -> Self {
        InternetConfig { enabled: true }
    }
}

pub fn toolset(cfg: &InternetConfig, http: &reqwest::Client) -> Toolset {
    let _ = http;
    if !cfg.enabled {
        return Toolset::disabled("internet");
    }
    Toolset::unavailable("internet", "not implemented yet")
}
