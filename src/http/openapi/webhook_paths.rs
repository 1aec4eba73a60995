//! The `/api/webhooks` operations of the OpenAPI document.

use serde_json::{Value, json};

use super::conversation_paths::{common, error, ok, query};

/// The schemas the webhook routes read and write (already under components).
pub(super) struct WebhookSchemas {
    pub delivery: Value,
    pub page: Value,
    pub event: Value,
    pub answer: Value,
}

/// Adds the deliveries routes and the inbound webhook.
pub(super) fn add(doc: &mut Value, s: &WebhookSchemas) {
    let (delivery, page) = (&s.delivery, &s.page);
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
        "/api/webhook/{conversation_id}/{state_name}": {"post": {
            "tags": ["webhooks"],
            "operationId": "receiveWebhookEvent",
            "summary": "An event from elsewhere for a conversation that waits: approvals, a resume, a message",
            "description": "No API key: the conversation's reply token (in the `conversations` \
                webhook delivery that announced the state, and in `approval_required` events' \
                deliveries) is the credential, as `Authorization: Bearer <token>` or `?token=`. \
                A duplicate (same token and event key) gets the first answer and changes nothing.",
            "security": [],
            "parameters": [
                {"name": "conversation_id", "in": "path", "required": true,
                 "schema": {"type": "string", "format": "uuid"}},
                {"name": "state_name", "in": "path", "required": true,
                 "schema": {"type": "string"},
                 "description": "The state the sender expects: `waiting_for_confirmation` or `paused`."},
                query("token", json!({"type": "string"}), "The reply token (or `Authorization: Bearer`)."),
            ],
            "requestBody": {"required": true, "content": {"application/json": {"schema": s.event}}},
            "responses": {
                "200": ok("Applied (`state`: the status now), or `no_transition`: the key matches nothing in that state.", &s.answer),
                "202": ok("Early: kept, and applied when the conversation enters the state (`queued`).", &s.answer),
                "400": error("Malformed JSON, or a `message` without `data.content`."),
                "401": error("A missing, wrong or stale reply token (the same answer for each)."),
                "403": error("Refused for a browser (see `/api/chat`)."),
                "404": error("No conversation has this id."),
                "409": error("The conversation is not in `state_name`."),
                "413": error("A body over 64 KiB."),
                "422": error("A malformed conversation id, body or query parameter."),
                "429": error("Too many failed token attempts for this conversation; see `Retry-After`."),
                "500": error("The conversation store failed."),
                "503": {"$ref": "#/components/responses/ServerBusy"},
            },
        }},
    });
    if let (Some(doc_paths), Value::Object(new)) = (doc["paths"].as_object_mut(), paths) {
        doc_paths.extend(new);
    }
    if let Some(tags) = doc["tags"].as_array_mut() {
        tags.push(json!({"name": "webhooks", "description": "Deliveries to the receivers of `[[webhooks]]`."}));
    }
}
