//! The `/api/webhooks` operations of the OpenAPI document.

use serde_json::{Value, json};

use super::conversation_paths::{common, error, ok, query};

/// Adds the deliveries routes; `delivery` and `page` are the schemas they write.
pub(super) fn add(doc: &mut Value, delivery: &Value, page: &Value) {
    let op = |id: &str, summary: &str, params: Vec<Value>, responses: Value| {
        json!({
            "tags": ["webhooks"],
            "operationId": id,
            "summary": summary,
            "parameters": params,
            "responses": responses,
        })
    };
    let paths = json!({
        "/api/webhooks/deliveries": {"get": op("listWebhookDeliveries",
            "Webhook deliveries not delivered yet, oldest first: pending ones and dead letters",
            vec![
                query("status", json!({"type": "string", "enum": ["pending", "failed"]}),
                      "`failed`: dead-lettered (after `max_attempts`, `max_age_secs` or a permanent refusal)."),
                query("receiver", json!({"type": "string"}), "Only this receiver's (its `name`)."),
                query("conversation_id", json!({"type": "string", "format": "uuid"}), "Only this conversation's."),
                query("limit", json!({"type": "integer", "minimum": 1, "maximum": 100}), "Items per page (default 100)."),
                query("page_id", json!({"type": "string"}), "The `next_page_id` of the previous page."),
            ],
            common(json!({"200": ok("A page of deliveries.", page)}), false))},
        "/api/webhooks/deliveries/{id}/retry": {"post": op("retryWebhookDelivery",
            "Queue a dead letter again (same id and body; attempts and age start over)",
            vec![json!({"name": "id", "in": "path", "required": true,
                        "schema": {"type": "string", "format": "uuid"},
                        "description": "The delivery's id (`X-Triage-Delivery`)."})],
            common(json!({
                "200": ok("The delivery, pending again.", delivery),
                "404": error("No undelivered delivery has this id."),
                "409": error("The delivery is not dead-lettered."),
            }), false))},
    });
    if let (Some(doc_paths), Value::Object(new)) = (doc["paths"].as_object_mut(), paths) {
        doc_paths.extend(new);
    }
    if let Some(tags) = doc["tags"].as_array_mut() {
        tags.push(json!({"name": "webhooks", "description": "Deliveries to the receivers of `[[webhooks]]`."}));
    }
}
