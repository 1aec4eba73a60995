//! The `kubernetes` toolset (stub: being written).

use serde::{Deserialize, Serialize};

use super::Toolset;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KubernetesConfig {
    pub enabled: bool,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig { enabled: true }
    }
}

pub async fn toolset(cfg: &KubernetesConfig) -> Toolset {
    if !cfg.enabled {
        return Toolset::disabled("kubernetes");
    }
    Toolset::unavailable("kubernetes", "not implemented yet")
}
