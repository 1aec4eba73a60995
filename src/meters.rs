//! The Prometheus recorder, and metric handles kept by label value. The `metrics` macros build
//! their key (every label's string) and look it up in the recorder's registry on each use: on
//! `/api/chat` that was about 45 allocations of 280 per request (heaptrack, BENCHMARKS.md
//! session 11). The labels here take few values (configured models, routes, statuses, registered
//! tools), so a handle is registered once and then only cloned (a reference count).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{OnceLock, PoisonError, RwLock};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The process-wide recorder, installed on first use (tests build many apps in one process).
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let seconds = [
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
        ];
        let recorder = PrometheusBuilder::new()
            .set_buckets(&seconds)
            .map(PrometheusBuilder::build_recorder)
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed");
        }
        handle
    })
}

/// Handles by label value, each registered on first use.
pub struct Handles<K, V> {
    by_label: OnceLock<RwLock<HashMap<K, V>>>,
}

impl<K: Eq + Hash, V: Clone> Handles<K, V> {
    pub const fn new() -> Handles<K, V> {
        Handles {
            by_label: OnceLock::new(),
        }
    }

    /// The handles for `label`, registered by `register` the first time.
    pub fn get<Q>(&self, label: &Q, register: impl FnOnce() -> V) -> V
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ToOwned<Owned = K> + ?Sized,
    {
        let map = self.by_label.get_or_init(Default::default);
        if let Some(handles) = map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(label)
        {
            return handles.clone();
        }
        // A handle registered before the recorder is installed would count nowhere, for good.
        recorder();
        let handles = register();
        map.write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(label.to_owned())
            .or_insert(handles)
            .clone()
    }
}

impl<K: Eq + Hash, V: Clone> Default for Handles<K, V> {
    fn default() -> Self {
        Handles::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_is_registered_once_per_label_and_counts_in_the_recorder() {
        static COUNTERS: Handles<String, metrics::Counter> = Handles::new();
        let mut registered = 0;
        for _ in 0..3 {
            COUNTERS
                .get("meters-test-a", || {
                    registered += 1;
                    metrics::counter!("triage_meters_test_total", "label" => "a")
                })
                .increment(2);
        }
        assert_eq!(registered, 1);
        let text = recorder().render();
        assert!(
            text.contains("triage_meters_test_total{label=\"a\"} 6"),
            "{text}"
        );
    }
}
