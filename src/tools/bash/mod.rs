//! The `bash` toolset (stub: being written).

use serde::{Deserialize, Serialize};

use super::Toolset;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BashConfig {
    pub enabled: bool,
}

impl Default for BashConfig {
    fn default() -> Self {
        BashConfig { enabled: true }
    }
}

pub fn toolset(cfg: &BashConfig) -> Toolset {
    if !cfg.enabled {
        return Toolset::disabled("bash");
    }
    Toolset::unavailable("bash", "not implemented yet")
}
