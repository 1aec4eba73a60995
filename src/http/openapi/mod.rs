//! `GET /api/openapi.json`: the OpenAPI 3.1 document, built once at first use. Every schema
//! comes from the wire types through schemars (requests as serde reads them, responses as serde
//! writes them); only the operations (paths, status codes, headers) are written by hand, in
//! [`paths`].

mod a2a_paths;
mod agui_paths;
mod check_paths;
mod conversation_paths;
mod mcp_paths;
mod openai_paths;
mod paths;
mod webhook_paths;

use std::collections::BTreeSet;
use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Value, json};

use crate::conversations::api;

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
            "model_fallback",
            schema::<crate::wire::events::ModelFallback>(g),
            "A triage extension: the model asked for was out (5xx, 529, no connection, timeout \
             before any output), so this call went to the next model of its `fallbacks`. The \
             answer's `metadata.model_fallbacks` lists them again; clients that do not know the \
             event ignore it.",
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
    let check_request = schema::<crate::checks::CheckRequest>(&mut input);
    let mut conversation_inputs = json!({
        "create": schema::<api::CreateConversation>(&mut input),
        "update": schema::<api::UpdateConversation>(&mut input),
        "send": schema::<api::SendMessage>(&mut input),
        "confirmation": schema::<api::ConfirmationResponse>(&mut input),
        "policy": schema::<api::PolicyUpdate>(&mut input),
        "secrets": schema::<api::SecretsUpdate>(&mut input),
        "ask": schema::<api::AskAgent>(&mut input),
        "generate_title": schema::<api::GenerateTitle>(&mut input),
        "fork": schema::<api::ForkConversation>(&mut input),
        "webhook_event": schema::<crate::inbound::WebhookEvent>(&mut input),
    });
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
        "ConversationInfo": schema::<api::ConversationInfo>(&mut output),
        "ConversationPage": schema::<api::ConversationPage>(&mut output),
        "EventPage": schema::<api::EventPage>(&mut output),
        "StoredEventView": schema::<api::StoredEventView>(&mut output),
        "Success": schema::<api::Success>(&mut output),
        "FinalResponse": schema::<api::FinalResponse>(&mut output),
        "GeneratedTitle": schema::<api::GeneratedTitle>(&mut output),
        "DeliveryView": schema::<super::webhooks::DeliveryView>(&mut output),
        "DeliveryPage": schema::<super::webhooks::DeliveryPage>(&mut output),
        "WebhookAnswer": schema::<crate::inbound::WebhookAnswer>(&mut output),
        "CheckResponse": schema::<crate::checks::CheckResponse>(&mut output),
        "ReloadResponse": schema::<super::admin::ReloadResponse>(&mut output),
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
    rename_refs(&mut conversation_inputs, &renamed);
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
    let i = |name: &str| conversation_inputs[name].clone();
    let conversations = conversation_paths::ConversationSchemas {
        create: i("create"),
        update: i("update"),
        send: i("send"),
        confirmation: i("confirmation"),
        policy: i("policy"),
        secrets: i("secrets"),
        ask: i("ask"),
        generate_title: i("generate_title"),
        fork: i("fork"),
        final_response: r("FinalResponse"),
        title: r("GeneratedTitle"),
        info: r("ConversationInfo"),
        page: r("ConversationPage"),
        events: r("EventPage"),
        event: r("StoredEventView"),
        success: r("Success"),
    };
    let mut doc = paths::paths_document(
        chat_request,
        r("ChatResponse"),
        r("ModelsResponse"),
        r("HealthResponse"),
        r("ReadyResponse"),
        r("InfoResponse"),
        schemas,
    );
    conversation_paths::add(&mut doc, &conversations);
    let webhooks = webhook_paths::WebhookSchemas {
        delivery: r("DeliveryView"),
        page: r("DeliveryPage"),
        event: i("webhook_event"),
        answer: r("WebhookAnswer"),
    };
    webhook_paths::add(&mut doc, &webhooks);
    let checks = check_paths::CheckSchemas {
        request: check_request,
        response: r("CheckResponse"),
        reload: r("ReloadResponse"),
    };
    check_paths::add(&mut doc, &checks);
    mcp_paths::add(&mut doc);
    openai_paths::add(&mut doc);
    a2a_paths::add(&mut doc);
    agui_paths::add(&mut doc);
    doc
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
