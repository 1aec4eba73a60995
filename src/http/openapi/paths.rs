//! The operations of the OpenAPI document, written by hand: paths, status codes and what
//! each means, headers, security, examples. Schemas come in from the generated types.

use serde_json::{Map, Value, json};

use super::SCHEMAS;
use crate::http::console::{
    CONVERSATION_LOG_SCRIPT_PATH, CONVERSATIONS_SCRIPT_PATH, INDEX_PATH, README_PATH, SCRIPT_PATH,
    STYLE_PATH,
};

fn chat_examples() -> Value {
    let paused = json!([
        {"role": "user", "content": "Restart the payments deployment"},
        {"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1",
            "type": "function",
            "function": {
                "name": "bash",
                "arguments": "{\"command\": \"kubectl rollout restart deployment/payments\"}"
            },
            "pending_approval": true,
            "approval_token": "v1.1767225600.c2lnbmF0dXJl"
        }]}
    ]);
    json!({
        "question": {
            "summary": "A question, one JSON answer",
            "value": {"ask": "Why is the payments pod in CrashLoopBackOff?"},
        },
        "streamed": {
            "summary": "A follow-up, streamed as server-sent events",
            "value": {
                "ask": "And what about its memory?",
                "stream": true,
                "conversation_history": [
                    {"role": "user", "content": "Why is the payments pod in CrashLoopBackOff?"},
                    {"role": "assistant", "content": "It runs out of memory at start-up."}
                ],
            },
        },
        "resume": {
            "summary": "Resume after `approval_required` with the user's decisions",
            "value": {
                "ask": "",
                "stream": true,
                "enable_tool_approval": true,
                "conversation_history": paused,
                "tool_decisions": [{"tool_call_id": "call_1", "approved": false, "feedback": "not during business hours"}],
            },
        },
    })
}

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("{SCHEMAS}{name}") })
}

fn response_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/responses/{name}") })
}

/// A JSON response with the request-id header.
fn json_response(description: &str, schema: Value) -> Value {
    json!({
        "description": description,
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {"application/json": {"schema": schema}},
    })
}

fn error_response(description: &str) -> Value {
    json_response(description, schema_ref("ErrorResponse"))
}

/// An error that tells the client when to retry.
fn retry_response(description: &str) -> Value {
    let mut r = error_response(description);
    r["headers"]["retry-after"] = json!({"$ref": "#/components/headers/RetryAfter"});
    r
}

/// Statuses every authenticated, load-shed route may answer.
fn guarded(mut responses: Value) -> Value {
    responses["401"] = response_ref("Unauthorized");
    responses["403"] = error_response(
        "Refused for a browser: an `Origin` that is neither this server's nor in \
        `server.cors_allowed_origins` (non-GET requests), or, without API keys, a `Host` other \
        than localhost, an IP address or a name in `server.allowed_hosts`.",
    );
    responses["503"] = response_ref("ServerBusy");
    responses
}

#[allow(clippy::too_many_arguments)]
pub(super) fn paths_document(
    chat_request: Value,
    chat_response: Value,
    models_response: Value,
    health_response: Value,
    ready_response: Value,
    info_response: Value,
    schemas: Map<String, Value>,
) -> Value {
    let chat_responses = {
        let mut r = guarded(json!({
            "200": {
                "description": "The answer. `stream: false` (default): one JSON body. \
                    `stream: true`: server-sent events (see `ChatStreamEvent`), whose errors \
                    after the start arrive as an `error` event with status 200.",
                "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                "content": {
                    "application/json": {"schema": chat_response},
                    "text/event-stream": {"schema": schema_ref("ChatStreamEvent")},
                },
            },
            "400": error_response("Malformed JSON, an empty `ask` outside a resume, an unknown \
                `model`, invalid `frontend_tools` or `response_format`, images for a model \
                without vision, an approval token issued for a different conversation."),
            "408": error_response("The body did not arrive within \
                `server.body_read_timeout_secs`."),
            "413": error_response("The body exceeds `server.body_limit_bytes`; too many or too \
                large images (`agent.max_images_*`, `agent.max_image_bytes_total`); a history \
                that alone does not fit the model's context window (non-streaming)."),
            "422": error_response("Valid JSON of the wrong shape; `detail` lists the fields."),
            "429": error_response("The LLM provider rate-limited the request (non-streaming)."),
            "500": error_response("The agent failed (non-streaming): LLM error, too many \
                steps, a conversation that no longer fits the context window."),
            "502": error_response("The LLM provider refused the model's credentials, the \
                answer did not match `response_format` after one repair attempt, or the LLM \
                sent a streamed event over 4 MiB (non-streaming)."),
            "504": error_response("The request exceeded `server.request_deadline_secs` \
                (non-streaming)."),
        }));
        r["401"]["description"] = json!("Invalid or missing API key.");
        r["503"] = retry_response(
            "Server busy (memory or file descriptors near exhaustion, or an optional cap: \
            `server.max_concurrent_requests`, `llm.max_concurrent_calls_per_model`), or no \
            model configured.",
        );
        r
    };
    let metrics = json!({
        "description": "Prometheus text exposition format (version 0.0.4).",
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {"text/plain": {"schema": {"type": "string"}}},
    });
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "triage",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A HolmesGPT-compatible troubleshooting agent server: `POST /api/chat` \
                and `GET /api/model` follow HolmesGPT's API. When API keys are configured every \
                route but `/healthz` and `/readyz` needs one, in `X-API-Key` or as a bearer token.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "security": [{"ApiKeyHeader": []}, {"BearerAuth": []}],
        "tags": [
            {"name": "chat", "description": "The agent."},
            {"name": "operations", "description": "Probes, metrics, server information."},
            {"name": "console", "description": "The browser console and this document."},
        ],
        "paths": {
            "/api/chat": {"post": {
                "tags": ["chat"],
                "operationId": "chat",
                "summary": "Ask the agent, or resume a paused conversation",
                "description": "Runs the agent on `ask` (with `conversation_history` for a \
                    follow-up). A streaming run that pauses (`approval_required`) is resumed by \
                    a request with `ask: \"\"`, the returned `conversation_history`, and \
                    `tool_decisions` and/or `frontend_tool_results`. The body is read as JSON \
                    whatever its `Content-Type`.",
                "requestBody": {
                    "required": true,
                    "content": {"application/json": {
                        "schema": chat_request,
                        "examples": chat_examples(),
                    }},
                },
                "responses": chat_responses,
            }},
            "/api/model": {"get": {
                "tags": ["chat"],
                "operationId": "listModels",
                "summary": "The model keys a request may name in `model`",
                "responses": guarded(json!({"200": json_response("The configured models.", models_response)})),
            }},
            "/api/info": {"get": {
                "tags": ["operations"],
                "operationId": "info",
                "summary": "Version, uptime, models and toolset status",
                "responses": guarded(json!({"200": json_response("Server information.", info_response)})),
            }},
            "/api/openapi.json": {"get": {
                "tags": ["console"],
                "operationId": "openapi",
                "summary": "This document",
                "responses": guarded(json!({"200": json_response("The OpenAPI 3.1 document.", json!({"type": "object"}))})),
            }},
            "/metrics": {"get": {
                "tags": ["operations"],
                "operationId": "metrics",
                "summary": "Prometheus metrics",
                "description": "Never shed under load; needs an API key when keys are configured.",
                "responses": {"200": metrics, "401": response_ref("Unauthorized")},
            }},
            "/healthz": {"get": {
                "tags": ["operations"],
                "operationId": "healthz",
                "summary": "Liveness probe",
                "security": [],
                "responses": {"200": json_response("The process is serving.", health_response)},
            }},
            "/readyz": {"get": {
                "tags": ["operations"],
                "operationId": "readyz",
                "summary": "Readiness probe",
                "security": [],
                "responses": {
                    "200": json_response("Ready: at least one model is configured.", ready_response),
                    "503": error_response("Not ready: no model is configured."),
                },
            }},
        },
        "components": {
            "schemas": schemas,
            "responses": {
                "Unauthorized": {
                    "description": "Invalid or missing API key.",
                    "headers": {
                        "x-request-id": {"$ref": "#/components/headers/RequestId"},
                        "www-authenticate": {"schema": {"type": "string", "const": "Bearer"}},
                    },
                    "content": {"application/json": {"schema": schema_ref("ErrorResponse")}},
                },
                "ServerBusy": retry_response("Server busy: memory or file descriptors near \
                    exhaustion (the `detail` names which), or the optional \
                    `server.max_concurrent_requests` cap reached."),
            },
            "headers": {
                "RequestId": {
                    "description": "The request's id, also in its log lines and `metadata.request_id`.",
                    "schema": {"type": "string"},
                },
                "RetryAfter": {
                    "description": "Seconds to wait before retrying.",
                    "schema": {"type": "string"},
                },
            },
            "securitySchemes": {
                "ApiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "BearerAuth": {"type": "http", "scheme": "bearer", "description": "The API key as a bearer token."},
            },
        },
    });
    for (path, id, summary, media) in [
        (INDEX_PATH, "console", "The browser console", "text/html"),
        (
            SCRIPT_PATH,
            "consoleScript",
            "The console's script",
            "text/javascript",
        ),
        (
            CONVERSATION_LOG_SCRIPT_PATH,
            "consoleConversationLogScript",
            "The console's conversation log and event stream",
            "text/javascript",
        ),
        (
            CONVERSATIONS_SCRIPT_PATH,
            "consoleConversationsScript",
            "The console's conversations view",
            "text/javascript",
        ),
        (
            STYLE_PATH,
            "consoleStyle",
            "The console's style sheet",
            "text/css",
        ),
        (
            README_PATH,
            "consoleReadme",
            "The README, which the console links when no model is configured",
            "text/markdown",
        ),
    ] {
        doc["paths"][path] = json!({"get": {
            "tags": ["console"],
            "operationId": id,
            "summary": summary,
            "description": "Embedded in the binary; needs no API key (the page holds no secret, \
                the API calls it makes do).",
            "security": [],
            "responses": {
                "200": {
                    "description": summary,
                    "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                    "content": {media: {"schema": {"type": "string"}}},
                },
                "503": response_ref("ServerBusy"),
            },
        }});
    }
    doc
}
