//! The `/api/conversations` operations of the OpenAPI document.

use serde_json::{Value, json};

/// The schemas the conversation routes read and write (already under components).
pub(super) struct ConversationSchemas {
    pub create: Value,
    pub update: Value,
    pub send: Value,
    pub confirmation: Value,
    pub policy: Value,
    pub secrets: Value,
    pub ask: Value,
    pub generate_title: Value,
    pub fork: Value,
    pub final_response: Value,
    pub title: Value,
    pub info: Value,
    pub page: Value,
    pub events: Value,
    pub event: Value,
    pub success: Value,
}

pub(super) fn error(description: &str) -> Value {
    json!({
        "description": description,
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
    })
}

pub(super) fn ok(description: &str, schema: &Value) -> Value {
    json!({
        "description": description,
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {"application/json": {"schema": schema}},
    })
}

/// An error that tells the client when to retry (`Retry-After`).
fn retry_error(description: &str) -> Value {
    let mut e = error(description);
    e["headers"]["retry-after"] = json!({"$ref": "#/components/headers/RetryAfter"});
    e
}

/// A route that starts a run: refused, as `/api/chat` is, when the model's call slots are
/// full, and when `conversations.max_running` conversations run.
fn starts_a_run(mut responses: Value, stored: &str) -> Value {
    responses["429"] = retry_error(&format!(
        "`conversations.max_running` conversations are running{stored}; retry shortly."
    ));
    responses["503"] = retry_error(&format!(
        "Server busy, or the model's concurrent-call slots are full \
         (`llm.max_concurrent_calls_per_model`){stored}; retry shortly."
    ));
    responses
}

/// A route that makes one LLM call and answers its failure as `/api/chat` does.
fn calls_the_llm(mut responses: Value) -> Value {
    responses["429"] = error("The LLM provider rate-limited the call.");
    responses["500"] = error("The LLM call failed, or the conversation store failed.");
    responses["502"] = error("The LLM provider refused the model's credentials, or misbehaved.");
    responses["503"] = retry_error(
        "Server busy, or the model's concurrent-call slots are full \
         (`llm.max_concurrent_calls_per_model`); retry shortly.",
    );
    responses
}

fn body(schema: &Value) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": schema}}})
}

/// A body whose fields are all optional: it may be left out.
fn optional_body(schema: &Value) -> Value {
    json!({"required": false, "content": {"application/json": {"schema": schema}}})
}

fn id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true,
           "schema": {"type": "string", "format": "uuid"}})
}

pub(super) fn query(name: &str, schema: Value, description: &str) -> Value {
    json!({"name": name, "in": "query", "required": false, "schema": schema, "description": description})
}

/// Every conversation route answers these besides its own statuses.
pub(super) fn common(mut responses: Value, with_id: bool) -> Value {
    if responses.get("400").is_none() {
        responses["400"] = error("Malformed JSON, or an empty body where one is required.");
    }
    responses["401"] = json!({"$ref": "#/components/responses/Unauthorized"});
    responses["403"] = error("Refused for a browser (see `/api/chat`).");
    responses["422"] = error("A malformed id, body or query parameter; `detail` says which.");
    if responses.get("500").is_none() {
        responses["500"] = error("The conversation store failed.");
    }
    if responses.get("503").is_none() {
        responses["503"] = json!({"$ref": "#/components/responses/ServerBusy"});
    }
    if with_id {
        responses["404"] = error("No conversation has this id.");
    }
    responses
}

fn operation(
    id: &str,
    summary: &str,
    params: Vec<Value>,
    request: Option<Value>,
    responses: Value,
) -> Value {
    let mut op = json!({
        "tags": ["conversations"],
        "operationId": id,
        "summary": summary,
        "parameters": params,
        "responses": responses,
    });
    if let Some(request) = request {
        op["requestBody"] = request;
    }
    op
}

pub(super) fn add(doc: &mut Value, s: &ConversationSchemas) {
    let page_params = || {
        vec![
            query(
                "page_id",
                json!({"type": "string"}),
                "The `next_page_id` of the previous page.",
            ),
            query(
                "limit",
                json!({"type": "integer", "minimum": 1, "maximum": 100}),
                "Items per page (default 100).",
            ),
        ]
    };
    let event_params = || {
        let mut p = vec![id_param()];
        p.extend(page_params());
        p.extend([
            query(
                "kind",
                json!({"type": "string"}),
                "Only events of this kind.",
            ),
            query(
                "source",
                json!({"type": "string", "enum": ["user", "agent", "environment"]}),
                "Only events from this source.",
            ),
            query(
                "body",
                json!({"type": "string"}),
                "Only events whose payload contains this text.",
            ),
            query(
                "sort_order",
                json!({"type": "string", "enum": ["TIMESTAMP", "TIMESTAMP_DESC"]}),
                "Oldest or newest first.",
            ),
            query(
                "timestamp__gte",
                json!({"type": "string", "format": "date-time"}),
                "At or after.",
            ),
            query(
                "timestamp__lt",
                json!({"type": "string", "format": "date-time"}),
                "Before.",
            ),
        ]);
        p
    };
    let success = || ok("Done.", &s.success);
    let paths = json!({
        "/api/conversations": {
            "post": operation("createConversation", "Create a conversation (and run its first message)", vec![],
                Some(body(&s.create)),
                common(starts_a_run(json!({
                    "201": ok("The new conversation.", &s.info),
                    "400": error("An unknown model, invalid tags or title, frontend tools or response format."),
                    "409": error("The id is taken."),
                    "413": error("Too many or too large images in `initial_message`."),
                }), " (the conversation is stored with its message; `run` starts it)"), false)),
            "get": operation("getConversations", "Several conversations by id (`null` for unknown ones)",
                vec![query("ids", json!({"type": "array", "items": {"type": "string", "format": "uuid"}, "maxItems": 100}), "Conversation ids (repeat the parameter).")],
                None,
                common(json!({"200": ok("One entry per id.", &json!({"type": "array", "items": {"anyOf": [s.info, {"type": "null"}]}}))}), false)),
        },
        "/api/conversations/search": {"get": operation("searchConversations", "Conversations, newest first by default", {
            let mut p = page_params();
            p.push(query("status", json!({"type": "string"}), "Only conversations in this execution status."));
            p.push(query("sort_order", json!({"type": "string", "enum": ["CREATED_AT", "CREATED_AT_DESC", "UPDATED_AT", "UPDATED_AT_DESC"]}), "Order."));
            p
        }, None, common(json!({"200": ok("A page of conversations.", &s.page)}), false))},
        "/api/conversations/count": {"get": operation("countConversations", "How many conversations (in a status)",
            vec![query("status", json!({"type": "string"}), "Only this execution status.")], None,
            common(json!({"200": ok("The count.", &json!({"type": "integer", "minimum": 0}))}), false))},
        "/api/conversations/{id}": {
            "get": operation("getConversation", "A conversation", vec![id_param()], None,
                common(json!({"200": ok("The conversation.", &s.info)}), true)),
            "patch": operation("updateConversation", "Change the title or tags", vec![id_param()], Some(body(&s.update)),
                common(json!({"200": ok("The conversation.", &s.info), "400": error("Invalid tags or title.")}), true)),
            "delete": operation("deleteConversation", "Delete a conversation and its events (a run is stopped first)", vec![id_param()], None,
                common(json!({"200": success()}), true)),
        },
        "/api/conversations/{id}/events": {"post": operation("sendMessage",
            "Send a user message (taken at the next step while running; `run` starts a run)",
            vec![id_param()], Some(body(&s.send)),
            common(starts_a_run(json!({
                "200": success(),
                "400": error("An empty message, or images for a model without vision."),
                "409": error("The conversation waits for a confirmation, or already runs (with `run`)."),
                "413": error("Too many or too large images."),
            }), " (the message is stored)"), true))},
        "/api/conversations/{id}/run": {"post": operation("runConversation", "Run the conversation from where it stands", vec![id_param()], None,
            common(starts_a_run(json!({"200": success(), "409": error("Already running, or waiting for a confirmation.")}), ""), true))},
        "/api/conversations/{id}/confirmation_policy": {"post": operation("setConfirmationPolicy",
            "Change which calls wait for the user (from the next run on)", vec![id_param()], Some(body(&s.policy)),
            common(json!({"200": success()}), true))},
        "/api/conversations/{id}/secrets": {"post": operation("addSecrets",
            "More values to mask as `<secret-hidden>` (never returned)", vec![id_param()], Some(body(&s.secrets)),
            common(json!({"200": success()}), true))},
        "/api/conversations/{id}/ask_agent": {"post": operation("askAgent",
            "A side question answered from the conversation's context (no tools; nothing stored; allowed while running)",
            vec![id_param()], Some(body(&s.ask)),
            common(calls_the_llm(json!({
                "200": ok("The answer.", &s.final_response),
                "400": error("An empty question, or the conversation's model is unknown now."),
            })), true))},
        "/api/conversations/{id}/condense": {"post": operation("condenseConversation",
            "Summarise the history now, as a compaction in a run would (its events are logged); `success` is false when the summary was not smaller and the history was kept",
            vec![id_param()], None,
            common(calls_the_llm(json!({
                "200": success(),
                "409": error("Running, waiting for a confirmation, no history yet, or a message or run came in meanwhile."),
                "413": error("A single message is too large to summarise within the context window."),
            })), true))},
        "/api/conversations/{id}/generate_title": {"post": operation("generateTitle",
            "Title the conversation from its first user messages (one LLM call, no tools); the title is stored",
            vec![id_param()], Some(optional_body(&s.generate_title)),
            common(calls_the_llm(json!({
                "200": ok("The title.", &s.title),
                "400": error("Malformed JSON, or the conversation's model is unknown now."),
                "409": error("The conversation has no user message yet."),
            })), true))},
        "/api/conversations/{id}/fork": {"post": operation("forkConversation",
            "An idle copy (config, secrets, state) with the events up to `from_event_id` under the same ids; allowed while the source runs (committed events only)",
            vec![id_param()], Some(optional_body(&s.fork)),
            common(json!({
                "201": ok("The fork.", &s.info),
                "400": error("`from_event_id` is beyond the source's last event, or invalid tags or title."),
                "409": error("The fork's id is taken."),
                "413": error("The fork would exceed `conversations.max_events_per_conversation`."),
            }), true))},
        "/api/conversations/{id}/agent_final_response": {"get": operation("agentFinalResponse",
            "The agent's answer to the last user message (empty while there is none)", vec![id_param()], None,
            common(json!({"200": ok("The answer.", &s.final_response)}), true))},
        "/api/conversations/{id}/pause": {"post": operation("pauseConversation", "Stop after the current step", vec![id_param()], None,
            common(json!({"200": success()}), true))},
        "/api/conversations/{id}/interrupt": {"post": operation("interruptConversation", "Cancel the LLM call and the tools in flight now", vec![id_param()], None,
            common(json!({"200": success()}), true))},
        "/api/conversations/{id}/events/respond_to_confirmation": {"post": operation("respondToConfirmation",
            "Answer the pending calls (`accept` for all approvals, or `tool_decisions` / `frontend_tool_results`); the run continues",
            vec![id_param()], Some(body(&s.confirmation)),
            common(starts_a_run(json!({"200": success(), "409": error("Nothing waits for a confirmation.")}), ""), true))},
        "/api/conversations/{id}/events/search": {"get": operation("searchEvents", "The conversation's events, oldest first by default",
            event_params(), None, common(json!({"200": ok("A page of events.", &s.events)}), true))},
        "/api/conversations/{id}/events/count": {"get": operation("countEvents", "How many events match",
            event_params(), None, common(json!({"200": ok("The count.", &json!({"type": "integer", "minimum": 0}))}), true))},
        "/api/conversations/{id}/events/stream": {"get": operation("streamEvents",
            "The events as server-sent events: those after `Last-Event-ID` (or `after`), then live ones",
            vec![id_param(),
                 query("after", json!({"type": "integer", "minimum": 0}), "Start after this event id."),
                 query("stream_deltas", json!({"type": "boolean"}), "Also `ai_answer_delta` frames (no `id:`, not stored) of runs on the replica serving the stream."),
                 json!({"name": "last-event-id", "in": "header", "required": false, "schema": {"type": "string", "pattern": "^[0-9]+$"}})],
            None,
            common(json!({
                "200": {"description": "`id:` is the event id, `event:` its kind, `data:` its payload; `: keep-alive` comments in between.",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                "400": error("`Last-Event-ID` is not an event id."),
            }), true))},
        "/api/conversations/{id}/events/{event_id}": {"get": operation("getEvent", "One event",
            vec![id_param(), json!({"name": "event_id", "in": "path", "required": true, "schema": {"type": "integer", "minimum": 1}})],
            None, common(json!({"200": ok("The event.", &s.event)}), true))},
    });
    if let (Some(doc_paths), Value::Object(new)) = (doc["paths"].as_object_mut(), paths) {
        doc_paths.extend(new);
    }
    if let Some(tags) = doc["tags"].as_array_mut() {
        tags.push(json!({"name": "conversations", "description": "Server-side conversations: runs in the background, a stored event log."}));
    }
}
