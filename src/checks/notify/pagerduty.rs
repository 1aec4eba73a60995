//! PagerDuty's Events API v2: a `trigger` event with the integration's routing key in the
//! body (the API takes no other credential), accepted with 202 `{"status": "success"}`.

use serde::Deserialize;
use serde_json::json;

use super::{Alert, answer_text, excerpt, transport_error};

/// PagerDuty's limit on `payload.summary`.
const MAX_SUMMARY_CHARS: usize = 1024;

#[derive(Deserialize)]
struct EventsAnswer {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    errors: Vec<String>,
}

pub async fn trigger(
    client: &reqwest::Client,
    enqueue_url: &str,
    routing_key: &str,
    alert: &Alert<'_>,
) -> Result<(), String> {
    let summary: String = format!(
        "Health check failed [{}]: {}",
        alert.source, alert.check_name
    )
    .chars()
    .take(MAX_SUMMARY_CHARS)
    .collect();
    let body = json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        // One incident per check while it keeps failing, as HolmesGPT's destination keys it.
        "dedup_key": format!("holmes-check-{}", alert.check_name),
        "payload": {
            "summary": summary,
            "source": alert.source,
            "severity": "error",
            "component": "HealthCheck",
            "group": "health-checks",
            "class": "health-check-failure",
            "custom_details": {
                "check": alert.check_name,
                "query": alert.query,
                "analysis": alert.analysis,
            },
        },
    });
    let response = client
        .post(enqueue_url)
        .json(&body)
        .send()
        .await
        .map_err(transport_error)?;
    let status = response.status();
    let text = answer_text(response).await;
    let answer = serde_json::from_str::<EventsAnswer>(&text).ok();
    if status.is_success() && answer.as_ref().and_then(|a| a.status.as_deref()) == Some("success") {
        return Ok(());
    }
    let said = match answer {
        Some(a) => [a.status, a.message]
            .into_iter()
            .flatten()
            .chain(a.errors)
            .collect::<Vec<_>>()
            .join("; "),
        None => text,
    };
    Err(format!(
        "PagerDuty answered HTTP {}: {}",
        status.as_u16(),
        excerpt(&said.replace(routing_key, crate::agent::MASK))
    ))
}
