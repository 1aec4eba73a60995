//! Load shedding follows resources, not counts: with the default config, more streams than the
//! old fixed caps (512 requests, 256 LLM calls per model) all run, and a request refused for
//! want of memory is told which resource ran out.

use std::time::{Duration, Instant};

use fake_llm::Step;
use serde_json::json;

use crate::helpers::{read_events, spawn_app_with};

#[tokio::test]
async fn limits_default_config_runs_600_slow_streams_at_once() {
    // The default limits; only the LLM timeouts of the test base config (5 s) are relaxed, so
    // that a loaded CI machine cannot turn a slow answer into an error.
    let app =
        spawn_app_with("[llm]\nfirst_byte_timeout_secs = 60.0\nidle_timeout_secs = 60.0\n").await;
    // Every request gets the same slow answer: 2 s before its text.
    app.llm.set_default(Step::Paced {
        before: Duration::from_secs(2),
        between_chunks: Duration::ZERO,
        step: Box::new(Step::text("done")),
    });
    let started = Instant::now();
    let streams = (0..600).map(|_| {
        let app = &app;
        async move {
            let resp = app.post_chat(&json!({"ask": "q", "stream": true})).await;
            let status = resp.status().as_u16();
            if status != 200 {
                let body = resp.text().await.unwrap_or_default();
                return (status, Some(body));
            }
            let events = read_events(resp).await;
            let last = crate::helpers::last(&events);
            (status, Some(format!("{} {}", last.name, last.data)))
        }
    });
    let results = futures::future::join_all(streams).await;
    let elapsed = started.elapsed();
    let refused: Vec<_> = results
        .iter()
        .filter(|(status, _)| *status != 200)
        .collect();
    assert!(
        refused.is_empty(),
        "no request is shed below any resource limit: {} refused, first {:?}",
        refused.len(),
        refused.first()
    );
    let unfinished: Vec<_> = results
        .iter()
        .filter(|(_, last)| !last.as_deref().unwrap_or("").starts_with("ai_answer_end"))
        .collect();
    assert!(
        unfinished.is_empty(),
        "every stream ends with its answer: {} did not, first {:?}",
        unfinished.len(),
        unfinished.first()
    );
    // All ran at once: not queued behind one another.
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    assert!(app.llm.request_count() >= 600);
}

#[tokio::test]
async fn limits_an_exhausted_memory_budget_sheds_with_503_naming_memory() {
    let app = spawn_app_with("[server]\nmemory_budget_bytes = 1\n").await;
    app.llm.set_default(Step::text("never asked"));
    let resp = app.post_chat(&json!({"ask": "q"})).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body = crate::helpers::json_body(resp).await;
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("memory"), "{detail}");
    assert!(detail.contains("memory_budget_bytes"), "{detail}");
    assert_eq!(app.llm.request_count(), 0, "refused before any LLM call");
    // Probes always answer, and the metrics say why requests were shed.
    assert_eq!(app.get_json("/healthz").await.0, 200);
    assert_eq!(app.get_json("/readyz").await.0, 200);
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("triage_load_shed_total{resource=\"memory\"}"),
        "{metrics}"
    );
}
