//! `fallbacks = ["key2", …]`: the models a call moves to when its model's provider is out.
//! Linked once at start-up; an unknown key or a cycle is a configuration error.

use std::sync::Arc;

use super::error::LlmError;
use super::model::ModelConfig;
use crate::config::ConfigError;

/// Links each model to its fallbacks, keeping the models' order. A fallback's own fallbacks
/// are not followed by a call (each model lists what it moves to), but a cycle through them is
/// refused: it is always a mistake, and refusing it lets every fallback be built before the
/// models that name it.
pub fn link(models: Vec<(ModelConfig, Vec<String>)>) -> Result<Vec<Arc<ModelConfig>>, ConfigError> {
    let keys: Vec<String> = models.iter().map(|(m, _)| m.key.clone()).collect();
    let index_of = |key: &str| keys.iter().position(|k| k == key);
    let mut edges: Vec<Vec<usize>> = Vec::with_capacity(models.len());
    for (model, fallbacks) in &models {
        let mut targets = Vec::new();
        for fallback in fallbacks {
            let target = index_of(fallback).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "model '{}': fallback '{fallback}' is not a model key. Valid keys: {}",
                    model.key,
                    keys.join(", ")
                ))
            })?;
            targets.push(target);
        }
        edges.push(targets);
    }
    let order = build_order(&edges).map_err(|cycle| {
        let names: Vec<&str> = cycle.iter().map(|&i| keys[i].as_str()).collect();
        ConfigError::Invalid(format!(
            "model fallbacks form a cycle: {}",
            names.join(" -> ")
        ))
    })?;
    let mut slots: Vec<Option<ModelConfig>> = models.into_iter().map(|(m, _)| Some(m)).collect();
    let mut built: Vec<Option<Arc<ModelConfig>>> = vec![None; slots.len()];
    for i in order {
        let Some(mut model) = slots[i].take() else {
            continue;
        };
        model.fallbacks = edges[i].iter().filter_map(|&t| built[t].clone()).collect();
        built[i] = Some(Arc::new(model));
    }
    Ok(built.into_iter().flatten().collect())
}

/// A post-order of the graph (every model after its fallbacks), or the cycle found.
fn build_order(edges: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        node: usize,
        edges: &[Vec<usize>],
        marks: &mut [Mark],
        path: &mut Vec<usize>,
        order: &mut Vec<usize>,
    ) -> Result<(), Vec<usize>> {
        match marks[node] {
            Mark::Done => return Ok(()),
            Mark::Open => {
                let start = path.iter().position(|&n| n == node).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(node);
                return Err(cycle);
            }
            Mark::New => {}
        }
        marks[node] = Mark::Open;
        path.push(node);
        for &next in &edges[node] {
            visit(next, edges, marks, path, order)?;
        }
        path.pop();
        marks[node] = Mark::Done;
        order.push(node);
        Ok(())
    }
    let mut marks = vec![Mark::New; edges.len()];
    let mut order = Vec::with_capacity(edges.len());
    for node in 0..edges.len() {
        visit(node, edges, &mut marks, &mut Vec::new(), &mut order)?;
    }
    Ok(order)
}

/// A provider outage that a fallback model may answer instead: a 5xx (529 included), no
/// connection, or no answer in time. A refusal of the request itself (4xx), a rate limit on
/// this key and a protocol error are the caller's business, not an outage.
pub fn is_outage(error: &LlmError) -> bool {
    match error {
        LlmError::Upstream { status, .. } => *status >= 500,
        LlmError::Connect { .. } | LlmError::Timeout(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::llm::ModelRegistry;

    fn registry(toml: &str) -> Result<ModelRegistry, String> {
        let settings = Settings::from_toml(toml).map_err(|e| e.to_string())?;
        ModelRegistry::from_settings(&settings).map_err(|e| e.to_string())
    }

    const BASE: &str = "api_base = \"http://h/v1\"\n";

    #[test]
    fn fallbacks_are_linked_in_order() {
        let r = registry(&format!(
            "[models.a]\nmodel = \"openai/a\"\n{BASE}fallbacks = [\"c\", \"b\"]\n\
             [models.b]\nmodel = \"openai/b\"\n{BASE}[models.c]\nmodel = \"openai/c\"\n{BASE}fallbacks = [\"b\"]\n"
        ))
        .unwrap();
        assert_eq!(r.keys(), ["a", "b", "c"]);
        let a = r.resolve(Some("a")).unwrap();
        let names: Vec<&str> = a.fallbacks.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(names, ["c", "b"]);
        assert_eq!(a.fallbacks[0].fallbacks[0].key, "b");
    }

    #[test]
    fn unknown_fallbacks_and_cycles_are_refused() {
        let err = registry(&format!(
            "[models.a]\nmodel = \"openai/a\"\n{BASE}fallbacks = [\"nope\"]\n"
        ))
        .unwrap_err();
        assert!(
            err.contains("fallback 'nope'") && err.contains("model 'a'"),
            "{err}"
        );
        let err = registry(&format!(
            "[models.a]\nmodel = \"openai/a\"\n{BASE}fallbacks = [\"b\"]\n\
             [models.b]\nmodel = \"openai/b\"\n{BASE}fallbacks = [\"a\"]\n"
        ))
        .unwrap_err();
        assert!(
            err.contains("cycle") && err.contains("a -> b -> a"),
            "{err}"
        );
        let err = registry(&format!(
            "[models.a]\nmodel = \"openai/a\"\n{BASE}fallbacks = [\"a\"]\n"
        ))
        .unwrap_err();
        assert!(err.contains("a -> a"), "{err}");
    }

    #[test]
    fn outages_are_told_from_refusals() {
        let upstream = |status| LlmError::Upstream {
            status,
            message: String::new(),
            retry_after: None,
        };
        assert!(is_outage(&upstream(500)) && is_outage(&upstream(529)));
        assert!(!is_outage(&upstream(400)));
    }
}
