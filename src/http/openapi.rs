//! `GET /api/openapi.json`: the OpenAPI 3.1 document, built once at first use. Every schema
//! comes from the wire types through schemars (requests as serde reads them, responses as serde
//! writes them); only the operations (paths, status codes, headers) are written here.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::console::{INDEX_PATH, README_PATH, SCRIPT_PATH, STYLE_PATH};
use super::responses::{
    ErrorResponse, HealthResponse, InfoResponse, ModelsResponse, ReadyResponse,
};
use crate::wire::events::{
    AiMessage, AnswerDelta, AnswerEnd, ApprovalRequired, Compacted, CompactionStart, ErrorEvent,
    StartToolCalling, TokenCount, ToolCallResult,
};
use crate::wire::{ChatRequest, ChatResponse};

/// Where the schemas live in the document; schemars writes its references against it.
const SCHEMAS: &str = "#/components/schemas/";

pub async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document_bytes().clone(),
    )
        .into_response()
}

/// The serialised document, built on first use.
fn document_bytes() -> &'static Bytes {
    static BYTES: OnceLock<Bytes> = OnceLock::new();
    BYTES.get_or_init(|| Bytes::from(serde_json::to_vec(document()).unwrap_or_default()))
}

/// The document as JSON.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(build)
}

/// The SSE events of `POST /api/chat` with `stream: true`: name, payload schema, when sent.
fn stream_events(g: &mut SchemaGenerator) -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "start_tool_calling",
            schema::<StartToolCalling>(g),
            "A tool call starts.",
        ),
        (
            "tool_calling_result",
            schema::<ToolCallResult>(g),
            "A tool call finished, was refused, denied, or answered by the client (resume).",
        ),
        (
            "ai_message",
            schema::<AiMessage>(g),
            "Assistant text (or reasoning) sent beside tool calls, and server notices.",
        ),
        (
            "ai_answer_delta",
            schema::<AnswerDelta>(g),
            "Only with `stream_deltas: true` (a triage extension): the next piece of the \
             assistant's text while the LLM writes it. The `ai_message` or `ai_answer_end` that \
             follows carries the whole text; if the LLM call fails, an `error` follows instead.",
        ),
        (
            "token_count",
            schema::<TokenCount>(g),
            "Token usage of the conversation: after each LLM call, after tool results join it, and \
             after a compaction.",
        ),
        (
            "conversation_history_compaction_start",
            schema::<CompactionStart>(g),
            "The history is about to be summarised to fit the model's context window.",
        ),
        (
            "conversation_history_compacted",
            schema::<Compacted>(g),
            "The history was summarised; `messages` replaces it.",
        ),
        (
            "approval_required",
            schema::<ApprovalRequired>(g),
            "Terminal: the run paused for tool approvals and/or frontend tool results. Resume \
             by sending `conversation_history` back with `tool_decisions` and/or \
             `frontend_tool_results`.",
        ),
        (
            "ai_answer_end",
            schema::<AnswerEnd>(g),
            "Terminal: the final answer.",
        ),
        (
            "error",
            schema::<ErrorEvent>(g),
            "Terminal: the request failed after the stream started (LLM failure, deadline, \
             shutdown, …). `error_code` 5204 means the LLM provider rate-limited the request.",
        ),
    ]
}

fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    g.subschema_for::<T>().to_value()
}

fn generator(contract: Contract) -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = SCHEMAS.into();
            s.meta_schema = None;
            s.contract = contract;
        })
        .into_generator()
}

fn build() -> Value {
    // Requests: what serde accepts (defaults make fields optional).
    let mut input = generator(Contract::Deserialize);
    let chat_request = schema::<ChatRequest>(&mut input);
    // Responses: what serde writes (a field is required when it is always sent).
    let mut output = generator(Contract::Serialize);
    let mut frames = stream_events(&mut output);
    let mut responses = json!({
        "ChatResponse": schema::<ChatResponse>(&mut output),
        "ErrorResponse": schema::<ErrorResponse>(&mut output),
        "ModelsResponse": schema::<ModelsResponse>(&mut output),
        "HealthResponse": schema::<HealthResponse>(&mut output),
        "ReadyResponse": schema::<ReadyResponse>(&mut output),
        "InfoResponse": schema::<InfoResponse>(&mut output),
    });
    let mut output_defs = output.take_definitions(true);
    let input_defs = input.take_definitions(true);

    // A type both read and written (e.g. `Message`) can differ between the contracts: the
    // written one then becomes `<Name>Output`, and references to it follow (to a fixed point,
    // since renaming a type changes every schema that refers to it).
    let mut renamed: BTreeSet<String> = BTreeSet::new();
    loop {
        let before = renamed.len();
        for (name, schema) in &output_defs {
            let mut schema = schema.clone();
            rename_refs(&mut schema, &renamed);
            if input_defs.get(name).is_some_and(|s| *s != schema) {
                renamed.insert(name.clone());
            }
        }
        if renamed.len() == before {
            break;
        }
    }
    for schema in output_defs.values_mut() {
        rename_refs(schema, &renamed);
    }
    rename_refs(&mut responses, &renamed);
    for (_, payload, _) in &mut frames {
        rename_refs(payload, &renamed);
    }
    let mut schemas = input_defs;
    for (name, schema) in output_defs {
        let name = if renamed.contains(&name) {
            format!("{name}Output")
        } else {
            name
        };
        schemas.insert(name, schema);
    }
    schemas.insert("ChatStreamEvent".into(), stream_event_schema(&frames));

    let r = |name: &str| responses[name].clone();
    paths_document(
        chat_request,
        r("ChatResponse"),
        r("ModelsResponse"),
        r("HealthResponse"),
        r("ReadyResponse"),
        r("InfoResponse"),
        schemas,
    )
}

/// Rewrites `$ref`s to renamed output types.
fn rename_refs(value: &mut Value, renamed: &BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get_mut("$ref")
                && let Some(name) = target.strip_prefix(SCHEMAS)
                && renamed.contains(name)
            {
                *target = format!("{SCHEMAS}{name}Output");
            }
            for v in map.values_mut() {
                rename_refs(v, renamed);
            }
        }
        Value::Array(items) => {
            for v in items {
                rename_refs(v, renamed);
            }
        }
        _ => {}
    }
}

/// One SSE event as OpenAPI 3.2 describes event streams (and schemathesis validates them):
/// `event` is the name, `data` the payload as one line of JSON.
fn stream_event_schema(frames: &[(&str, Value, &str)]) -> Value {
    let variants: Vec<Value> = frames
        .iter()
        .map(|(name, payload, when)| {
            json!({
                "title": name,
                "description": format!("`event: {name}`: {when}"),
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {"const": name},
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": payload,
                    },
                    "id": {"type": "string"},
                    "retry": {"type": "integer"},
                },
            })
        })
        .collect();
    let names: Vec<String> = frames.iter().map(|(n, _, _)| format!("`{n}`")).collect();
    json!({
        "title": "ChatStreamEvent",
        "description": format!(
            "One server-sent event of a streaming chat (`stream: true`). OpenAPI 3.1 cannot \
             describe SSE framing, so this schema describes a single event: on the wire each \
             is `event: NAME\\ndata: JSON\\n\\n`, where `data` is one line of JSON matching the \
             payload schema of its event (`contentSchema`). Lines starting with `:` are \
             keep-alive comments, sent after silences of `server.keepalive_interval_secs`. The \
             stream ends after `ai_answer_end`, `approval_required` or `error`. Events: {}.",
            names.join(", ")
        ),
        "oneOf": variants,
    })
}

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
fn paths_document(
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
            "Server busy (`server.max_concurrent_requests`), the model \
            at `llm.max_concurrent_calls_per_model`, or no model configured.",
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
                "ServerBusy": retry_response("Server busy: `server.max_concurrent_requests` \
                    requests are in flight."),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r.clone());
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_resolves_under_components() {
        let doc = document();
        assert_eq!(doc["openapi"], "3.1.0");
        let mut all = Vec::new();
        refs(doc, &mut all);
        for r in &all {
            let pointer = r.strip_prefix('#').expect("local reference");
            assert!(doc.pointer(pointer).is_some(), "unresolved {r}");
        }
        assert!(!doc.to_string().contains("$defs"));
    }

    #[test]
    fn types_read_and_written_differently_get_an_output_schema() {
        let schemas = &document()["components"]["schemas"];
        // `type` has a default when read, and is always written.
        let required = |name: &str| schemas[name]["required"].clone();
        assert!(
            !required("ToolCall")
                .as_array()
                .unwrap()
                .contains(&json!("type"))
        );
        assert!(
            required("ToolCallOutput")
                .as_array()
                .unwrap()
                .contains(&json!("type"))
        );
        // A response refers to the written forms, a request to the read ones.
        let history = |name: &str| schemas[name]["properties"]["conversation_history"].to_string();
        assert!(history("ChatResponse").contains("MessageOutput"));
        assert!(history("ChatRequest").contains("/Message\""));
        // A type the same either way is not duplicated.
        assert!(
            schemas.get("FollowUpAction").is_some()
                && schemas.get("FollowUpActionOutput").is_none()
        );
    }
}
