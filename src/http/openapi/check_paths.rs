//! The OpenAPI operations of the routes HolmesGPT's deployment calls besides `/api/chat`:
//! `POST /api/checks/execute` (its operator's health checks) and the admin reloads.

use serde_json::{Value, json};

use super::conversation_paths::{error, ok};

pub(super) struct CheckSchemas {
    pub request: Value,
    pub response: Value,
    pub reload: Value,
}

/// Statuses the edge answers on any authenticated route.
fn guarded(mut responses: Value) -> Value {
    responses["401"] = json!({"$ref": "#/components/responses/Unauthorized"});
    responses["403"] = error("Refused for a browser (see `/api/chat`).");
    if responses.get("503").is_none() {
        responses["503"] = json!({"$ref": "#/components/responses/ServerBusy"});
    }
    responses
}

pub(super) fn add(doc: &mut Value, s: &CheckSchemas) {
    let reload = |id: &str, summary: &str| {
        json!({"post": {
            "tags": ["admin"],
            "operationId": id,
            "summary": summary,
            "description": "Only with `ENABLE_ADMIN_API=true` (`admin.enabled`); 404 otherwise. \
                The config files are read again and what this route names is rebuilt, then \
                swapped in whole: requests in flight finish on the configuration they started \
                with. Server settings (address, API keys, TLS), the store and webhooks need a \
                restart.",
            "responses": guarded(json!({
                "200": ok("Reloaded; `counts` says what serves now.", &s.reload),
                "404": error("The admin API is off (`ENABLE_ADMIN_API`)."),
                "500": error("A file did not read or something did not build: `detail` says \
                    what. The previous configuration is still serving."),
            })),
        }})
    };
    let paths = json!({
        "/api/checks/execute": {"post": {
            "tags": ["checks"],
            "operationId": "executeCheck",
            "summary": "Run a health check: a yes/no question answered by the agent (HolmesGPT's operator calls it)",
            "description": "The agent investigates with its tools (calls that need approval are \
                refused: nobody is there to approve) and answers in a fixed JSON shape. \
                `status: error` when there is no verdict: the model would not answer in that \
                shape, the provider failed, or the check ran past `timeout`. In `alert` mode a \
                check that fails is announced to its `destinations`, each delivery's outcome in \
                `notifications`.",
            "requestBody": {"required": true, "content": {"application/json": {
                "schema": s.request,
                "examples": {
                    "monitor": {"summary": "A check, nobody notified",
                        "value": {"name": "payments-pods", "query": "Are all pods in namespace payments running?", "timeout": 60}},
                    "alert": {"summary": "A check that alerts Slack and a webhook when it fails",
                        "value": {"query": "Is the checkout error rate below 1%?", "mode": "alert",
                            "destinations": [{"type": "slack", "config": {"channel": "#alerts"}},
                                {"type": "webhook", "config": {"url": "https://alerts.example.com/hook",
                                    "payload_template": {"text": "{{check_name}}: {{analysis}}"}}}]}},
                },
            }}},
            "responses": guarded(json!({
                "200": ok("The check ran: `pass`, `fail` or `error`.", &s.response),
                "400": error("Malformed JSON, or an unknown `model`."),
                "408": error("The body did not arrive within `server.body_read_timeout_secs`."),
                "413": error("The body is over `server.body_limit_bytes`."),
                "422": error("A field is missing or wrong (an empty `query`, a `timeout` out of \
                    range, an unknown `mode`, a destination without what it needs or aimed at \
                    a link-local or cloud metadata address); `detail` names it."),
                "500": error("The server failed."),
                "503": {"description": "Server busy, no model configured, or the model's \
                    concurrent-call slots are full; see `Retry-After` when sent.",
                    "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}},
            })),
        }},
        "/api/admin/reload": reload("reloadAll", "Reload models and toolsets from the config files"),
        "/api/admin/reload/toolsets": reload("reloadToolsets", "Reload the toolsets (MCP servers, YAML toolsets, skills)"),
        "/api/admin/reload/models": reload("reloadModels", "Reload the model list"),
    });
    if let (Some(doc_paths), Value::Object(new)) = (doc["paths"].as_object_mut(), paths) {
        doc_paths.extend(new);
    }
    if let Some(tags) = doc["tags"].as_array_mut() {
        tags.push(json!({"name": "checks", "description": "HolmesGPT's health checks."}));
        tags.push(
            json!({"name": "admin", "description": "Configuration reloads (`ENABLE_ADMIN_API`)."}),
        );
    }
}
