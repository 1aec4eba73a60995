//! HolmesGPT's `toolsets:` entries mapped onto triage: a built-in name (`kubernetes/core`,
//! `prometheus/metrics`, `bash`, …) turns triage's equivalent on or off and passes on the
//! settings it understands; an entry with `tools` is a custom YAML toolset
//! (`yaml_toolsets.<name>`); a HolmesGPT built-in triage has no equivalent for, or a name it
//! does not know, is reported unavailable when enabled.

use std::path::Path;

use serde_json::{Value, json};

use super::ConfigError;
use super::holmes_report::HolmesReport;

/// HolmesGPT names → triage's toolset (`None`: triage's always-on core).
pub const BUILTIN_EQUIVALENTS: &[(&str, &str)] = &[
    ("kubernetes/core", "kubernetes"),
    ("kubernetes/logs", "kubernetes"),
    ("kubernetes/live-metrics", "kubernetes"),
    ("prometheus/metrics", "prometheus"),
    ("bash", "bash"),
    ("internet", "internet"),
    ("core_investigation", "core_investigation"),
    ("skills", "skills"),
    ("runbook", "skills"),
];

/// HolmesGPT built-ins triage has no equivalent for (reported by this name when enabled).
const WITHOUT_EQUIVALENT: &[&str] = &[
    "kubernetes/kube-prometheus-stack",
    "kubernetes/krew-extras",
    "kubernetes/kube-lineage-extras",
    "kubernetes/kube-lineage",
    "helm/core",
    "argocd/core",
    "aks/core",
    "aks/node-health",
    "grafana/loki",
    "grafana/tempo",
    "grafana/dashboards",
    "datadog/logs",
    "datadog/metrics",
    "datadog/traces",
    "datadog/rds",
    "datadog/general",
    "opensearch/logs",
    "opensearch/traces",
    "opensearch/status",
    "opensearch/query_assist",
    "elasticsearch/data",
    "elasticsearch/cluster",
    "coralogix/logs",
    "newrelic",
    "rabbitmq/core",
    "kafka/admin",
    "aws/security",
    "aws/rds",
    "azure/sql",
    "mongodb/atlas",
    "servicenow/tables",
    "confluence",
    "slab",
    "notion",
    "git",
    "robusta",
    "datetime",
    "connectivity_check",
    "cilium/core",
    "victoriametrics/metrics",
];

/// What the `toolsets:` entries of one file ask of triage.
#[derive(Default)]
pub struct ToolsetMapping {
    /// `toolsets.<triage name>.*` values.
    builtin: serde_json::Map<String, Value>,
    /// Explicit `enabled` per triage toolset, from every HolmesGPT name mapped onto it.
    votes: Vec<(&'static str, bool)>,
    custom: serde_json::Map<String, Value>,
    unavailable: Vec<(String, String)>,
}

/// Reads a `toolsets:` mapping (HolmesGPT's older list form is refused with the fix).
pub fn map_toolsets(
    v: &Value,
    file: &Path,
    mapping: &mut ToolsetMapping,
) -> Result<(), ConfigError> {
    let entries = match v {
        Value::Null => return Ok(()),
        Value::Object(m) => m,
        _ => {
            return Err(ConfigError::Invalid(format!(
                "`toolsets` in {} must be a mapping of toolset names (the list form is \
                 HolmesGPT's old format)",
                file.display()
            )));
        }
    };
    for (name, entry) in entries {
        let entry = match entry {
            Value::Null => json!({}),
            Value::Object(_) => entry.clone(),
            _ => {
                return Err(ConfigError::Invalid(format!(
                    "`toolsets.{name}` in {} must be a mapping",
                    file.display()
                )));
            }
        };
        let enabled = entry.get("enabled").and_then(Value::as_bool);
        if let Some((_, triage)) = BUILTIN_EQUIVALENTS.iter().find(|(h, _)| h == name) {
            let ignored: Vec<&str> = entry
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str())
                .filter(|k| !matches!(*k, "enabled" | "config"))
                .collect();
            if !ignored.is_empty() {
                tracing::info!(
                    toolset = %name,
                    file = %file.display(),
                    keys = %ignored.join(", "),
                    "keys of a built-in toolset ignored (only `enabled` and `config` apply)"
                );
            }
            mapping.builtin_entry(name, triage, enabled, entry.get("config"), file);
        } else if entry.get("tools").is_some() || entry.get("type").is_some() {
            mapping.custom.insert(name.clone(), entry);
        } else if enabled == Some(false) {
            tracing::info!(toolset = %name, file = %file.display(), "HolmesGPT toolset disabled");
        } else if WITHOUT_EQUIVALENT.contains(&name.as_str()) {
            mapping.unavailable.push((
                name.clone(),
                "a HolmesGPT built-in toolset triage has no equivalent for".into(),
            ));
        } else {
            mapping.unavailable.push((
                name.clone(),
                format!(
                    "neither a built-in toolset nor a custom one (no `tools`) in {}",
                    file.display()
                ),
            ));
        }
    }
    Ok(())
}

impl ToolsetMapping {
    fn builtin_entry(
        &mut self,
        holmes: &str,
        triage: &'static str,
        enabled: Option<bool>,
        config: Option<&Value>,
        file: &Path,
    ) {
        if let Some(on) = enabled {
            self.votes.push((triage, on));
        }
        let Some(config) = config.and_then(Value::as_object) else {
            return;
        };
        let mut ignored = Vec::new();
        let target = self.builtin.entry(triage).or_insert_with(|| json!({}));
        for (key, value) in config {
            match (triage, key.as_str()) {
                ("prometheus", "prometheus_url") => target["url"] = value.clone(),
                ("prometheus", "headers") => target["headers"] = value.clone(),
                ("bash", "allow" | "deny") => target[key.as_str()] = value.clone(),
                ("bash", "include_default_allow_deny_list") if value == &Value::Bool(false) => {
                    target["builtin_allowlist"] = json!("none")
                }
                _ => ignored.push(key.clone()),
            }
        }
        if !ignored.is_empty() {
            tracing::info!(
                toolset = holmes,
                file = %file.display(),
                keys = %ignored.join(", "),
                "HolmesGPT toolset settings triage does not use, ignored"
            );
        }
    }

    /// Writes the mapping into `layer` and the report.
    pub fn apply(self, layer: &mut Value, report: &mut HolmesReport) {
        let mut builtin = self.builtin;
        // One HolmesGPT name enabling a triage toolset is enough (kubernetes/core and
        // kubernetes/logs are one toolset here); it is off only when every mention says so.
        for (triage, _) in &self.votes {
            let on = self.votes.iter().any(|(t, v)| t == triage && *v);
            let target = builtin.entry(*triage).or_insert_with(|| json!({}));
            target["enabled"] = Value::Bool(on);
        }
        if let Some(core) = builtin.remove("core_investigation")
            && core.get("enabled") == Some(&Value::Bool(false))
        {
            tracing::warn!("core_investigation cannot be turned off in triage: it stays on");
        }
        if let Some(skills) = builtin.remove("skills")
            && let Some(on) = skills.get("enabled")
        {
            layer["skills"]["enabled"] = on.clone();
        }
        for (name, value) in builtin {
            for (key, v) in value.as_object().into_iter().flatten() {
                layer["toolsets"][name.as_str()][key.as_str()] = v.clone();
            }
        }
        for (name, def) in self.custom {
            layer["yaml_toolsets"][name.as_str()] = def;
        }
        report.unavailable.extend(self.unavailable);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(toolsets: Value) -> (Value, HolmesReport) {
        let mut mapping = ToolsetMapping::default();
        map_toolsets(
            &toolsets,
            Path::new("/etc/holmes/config.yaml"),
            &mut mapping,
        )
        .unwrap();
        let mut layer = json!({});
        let mut report = HolmesReport::default();
        mapping.apply(&mut layer, &mut report);
        (layer, report)
    }

    #[test]
    fn one_kubernetes_name_enabling_is_enough() {
        let (layer, _) = mapped(json!({
            "kubernetes/core": {"enabled": false}, "kubernetes/logs": {"enabled": true}
        }));
        assert_eq!(layer["toolsets"]["kubernetes"]["enabled"], true);
        let (layer, _) = mapped(json!({
            "kubernetes/core": {"enabled": false}, "kubernetes/logs": {"enabled": false}
        }));
        assert_eq!(layer["toolsets"]["kubernetes"]["enabled"], false);
    }

    #[test]
    fn config_keys_map_and_customs_and_unknowns_are_sorted_out() {
        let (layer, report) = mapped(json!({
            "bash": {"config": {"allow": ["helm list"], "include_default_allow_deny_list": false}},
            "prometheus/metrics": {"enabled": true, "config": {"prometheus_url": "http://p:9090"}},
            "skills": {"enabled": false},
            "core_investigation": {"enabled": false},
            "mine": {"tools": [{"name": "t", "command": "true"}]},
            "grafana/tempo": {"enabled": true},
            "made/up": {},
            "datadog/logs": {"enabled": false},
        }));
        assert_eq!(layer["toolsets"]["bash"]["allow"], json!(["helm list"]));
        assert_eq!(layer["toolsets"]["bash"]["builtin_allowlist"], "none");
        assert_eq!(layer["toolsets"]["prometheus"]["url"], "http://p:9090");
        assert_eq!(layer["toolsets"]["prometheus"]["enabled"], true);
        assert_eq!(layer["skills"]["enabled"], false);
        assert!(layer["toolsets"].get("core_investigation").is_none());
        assert_eq!(layer["yaml_toolsets"]["mine"]["tools"][0]["name"], "t");
        let names: Vec<&str> = report.unavailable.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["grafana/tempo", "made/up"]);
        assert!(report.unavailable[1].1.contains("no `tools`"));
    }

    #[test]
    fn the_old_list_form_is_refused() {
        let mut mapping = ToolsetMapping::default();
        let err = map_toolsets(&json!([{"name": "x"}]), Path::new("c.yaml"), &mut mapping)
            .unwrap_err()
            .to_string();
        assert!(err.contains("old format"), "{err}");
    }
}
