//! The OpenAPI operation of `POST /api/agui/chat`, AG-UI's door (Headlamp's AI assistant).
//! The body and the events are AG-UI's own shapes, described here as far as triage reads and
//! writes them (the protocol's objects are open: other fields are ignored).

use serde_json::{Value, json};

use super::conversation_paths::error;

fn run_agent_input() -> Value {
    let message = json!({
        "type": "object",
        "required": ["id", "role"],
        "properties": {
            "id": {"type": "string"},
            "role": {"type": "string", "enum": ["developer", "system", "user", "assistant", "tool", "reasoning", "activity"]},
            "content": {"description": "A string, or (user and tool messages) content parts: `text`, and `image` with a `data` or `url` source."},
            "toolCalls": {"type": "array", "items": {"type": "object", "required": ["id", "function"],
                "properties": {"id": {"type": "string"}, "type": {"type": "string", "enum": ["function"]},
                    "function": {"type": "object", "required": ["name", "arguments"],
                        "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}}}}}},
            "toolCallId": {"type": "string", "description": "On a tool message: the call it answers."}
        }
    });
    json!({
        "type": "object",
        "required": ["threadId", "runId", "messages"],
        "properties": {
            "threadId": {"type": "string"},
            "runId": {"type": "string"},
            "parentRunId": {"type": "string"},
            "state": {"description": "Any JSON value: sent back as the run's STATE_SNAPSHOT."},
            "messages": {"type": "array", "items": message, "description": "The conversation as the client holds it (stateless: sent whole each run). System and developer messages are added to the system prompt; reasoning and activity messages are not sent to the model."},
            "tools": {"type": "array", "description": "Frontend tools: a call to one ends the run (`outcome.pendingToolCallIds`); the next run carries its result as a tool message.",
                "items": {"type": "object", "required": ["name", "description"],
                    "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "parameters": {"type": "object"}}}},
            "context": {"type": "array", "description": "Added to the system prompt as context.",
                "items": {"type": "object", "required": ["description", "value"],
                    "properties": {"description": {"type": "string"}, "value": {"type": "string"}}}},
            "forwardedProps": {"type": "object", "description": "`model`: a key of the model list (`GET /api/model`)."},
            "resume": {"type": "array", "description": "Answers to the interrupts of the last run: `resolved` approves (unless `payload.approved` is false; `payload.feedback` is passed to the model), `cancelled` denies.",
                "items": {"type": "object", "required": ["interruptId", "status"],
                    "properties": {"interruptId": {"type": "string"}, "status": {"type": "string", "enum": ["resolved", "cancelled"]}, "payload": {}}}}
        }
    })
}

pub(super) fn add(doc: &mut Value) {
    let paths = json!({
        "/api/agui/chat": {"post": {
            "tags": ["agui"],
            "operationId": "aguiChat",
            "summary": "Run the agent over AG-UI (Headlamp's AI assistant)",
            "description": "A `RunAgentInput` in; AG-UI events out as server-sent events (`data:` \
                lines, one JSON event each): RUN_STARTED, STATE_SNAPSHOT, TEXT_MESSAGE_START / \
                CONTENT / END as the model writes, REASONING_* spans, TOOL_CALL_START / ARGS / END \
                and TOOL_CALL_RESULT for the agent's tools, CUSTOM `triage.*` notes, and \
                RUN_FINISHED (with `usage`) or RUN_ERROR, after which nothing is sent. A call \
                that needs approval ends the run with `outcome: {type: \"interrupt\"}`, one \
                interrupt per call (its id carries a signed approval token bound to the call and \
                to the conversation before it, valid `approvals.token_ttl_secs`); the next run \
                answers it in `resume`. Stateless, as `/api/chat`, unless `threadId` is the id \
                of a stored conversation: then the run is that conversation's next turn (its \
                history and settings), the stream renders what its log records, and interrupt \
                ids are `<conversation id>:<tool call id>`.",
            "requestBody": {"required": true, "content": {"application/json": {
                "schema": run_agent_input(),
                "example": {"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "Why is my pod crashing?"}],
                    "tools": [], "context": [], "state": {}, "forwardedProps": {}},
            }}},
            "responses": {
                "200": {"description": "The run's AG-UI events.",
                    "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                    "content": {"text/event-stream": {"schema": {
                        "title": "AguiStreamEvent",
                        "description": "One server-sent event: `data: JSON`, an AG-UI event with its `type`. Lines starting with `:` are keep-alive comments.",
                        "type": "object", "required": ["data"],
                        "properties": {"data": {"type": "string", "contentMediaType": "application/json"},
                            "event": {"type": "string"}, "id": {"type": "string"}, "retry": {"type": "integer"}}}}}},
                "400": error("Malformed JSON, an unknown model, nothing to answer, a tool message \
                    for no call, or a resume entry whose interrupt is not a call of the last \
                    assistant message (or was issued for a different conversation), or, on a \
                    thread that is a stored conversation, a resume entry naming no call it waits \
                    for; `detail` says which."),
                "409": error("The thread is a stored conversation that is running a turn, or \
                    that waits for approval and the input has no `resume`."),
                "401": {"$ref": "#/components/responses/Unauthorized"},
                "403": error("Refused for a browser (see `/api/chat`)."),
                "408": error("The body did not arrive within `server.body_read_timeout_secs`."),
                "413": error("The body is over `server.body_limit_bytes`, or holds more than the agent's caps."),
                "422": error("The body is not a `RunAgentInput`; `detail` names the field."),
                "500": error("The server failed."),
                "503": {"$ref": "#/components/responses/ServerBusy"},
            },
        }},
    });
    if let (Some(doc_paths), Value::Object(new)) = (doc["paths"].as_object_mut(), paths) {
        doc_paths.extend(new);
    }
    if let Some(tags) = doc["tags"].as_array_mut() {
        tags.push(json!({"name": "agui", "description": "AG-UI (Headlamp's AI assistant)."}));
    }
}
