//! The A2A door in the OpenAPI document, by reference: the JSON-RPC envelope and the agent
//! card's outline are described here; the methods' params and results are A2A 1.0's own
//! shapes, which the specification (`externalDocs`) defines.

use serde_json::{Value, json};

use super::conversation_paths::error;

const SPEC: &str = "https://a2a-protocol.org/latest/specification/";

/// A JSON-RPC 2.0 response: a result or an error, under the request's id.
fn rpc_response() -> Value {
    json!({
        "type": "object",
        "required": ["jsonrpc", "id"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "integer", "null"]},
            "result": {"description": "The method's result: a `SendMessageResponse` (`{\"task\": …}`), a `Task`, a `ListTasksResponse`, or (in a stream) a `StreamResponse` (`task`, `statusUpdate` or `artifactUpdate`)."},
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "integer"},
                    "message": {"type": "string"},
                    "data": {"type": "array", "items": {"type": "object"}},
                },
            },
        },
        "oneOf": [{"required": ["result"]}, {"required": ["error"]}],
    })
}

pub(super) fn add(doc: &mut Value) {
    let docs = json!({"description": "A2A 1.0 specification (JSON-RPC binding)", "url": SPEC});
    let paths = json!({
        "/.well-known/agent-card.json": {"get": {
            "tags": ["a2a"],
            "operationId": "a2aAgentCard",
            "summary": "The A2A agent card: the JSON-RPC interface, capabilities, skills, security",
            "description": "No API key needed (discovery). The interface URL is `/a2a` on the \
                host the request named (`Host`, and `X-Forwarded-Proto` for the scheme).",
            "externalDocs": docs,
            "security": [],
            "responses": {"200": {
                "description": "An `AgentCard` (A2A 1.0).",
                "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                "content": {"application/json": {"schema": {
                    "type": "object",
                    "required": ["name", "description", "version", "supportedInterfaces",
                        "capabilities", "defaultInputModes", "defaultOutputModes", "skills"],
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "version": {"type": "string"},
                        "supportedInterfaces": {"type": "array", "items": {"type": "object",
                            "required": ["url", "protocolBinding", "protocolVersion"]}},
                        "capabilities": {"type": "object"},
                        "defaultInputModes": {"type": "array", "items": {"type": "string"}},
                        "defaultOutputModes": {"type": "array", "items": {"type": "string"}},
                        "skills": {"type": "array", "items": {"type": "object"}},
                        "securitySchemes": {"type": "object"},
                        "securityRequirements": {"type": "array"},
                    },
                }}},
            }},
        }},
        "/a2a": {"post": {
            "tags": ["a2a"],
            "operationId": "a2aJsonRpc",
            "summary": "A2A 1.0 JSON-RPC: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask, push notification configs",
            "description": "One JSON-RPC 2.0 request per POST; see the A2A specification for \
                each method's params and result. A task is a server-side conversation (its id \
                is also its `contextId`; `/api/conversations/{id}` shows the same). A task \
                waiting for approval is `TASK_STATE_INPUT_REQUIRED`: reply on it with the text \
                `approve` or `deny`, or data parts `{\"approve\": bool, \"toolCallId\"?, \
                \"reason\"?}`. `CancelTask` interrupts a working task. \
                `Create`/`Get`/`List`/`DeleteTaskPushNotificationConfig` manage push \
                notification configs: each status change of the task is POSTed to the \
                config's URL as a `StreamResponse` (`statusUpdate`), durable and retried \
                (-32003 when `a2a.push_notifications` is off). Every JSON-RPC answer, error or not, is HTTP 200; \
                `SendStreamingMessage` and `SubscribeToTask` answer `text/event-stream`, each \
                event's `data` one JSON-RPC response, ending when the task completes, fails, is \
                canceled or needs input. Requests must send `A2A-Version: 1.0` (none means 0.3: \
                -32009).",
            "externalDocs": docs,
            "parameters": [{"name": "A2A-Version", "in": "header", "required": false,
                "schema": {"type": "string"}, "example": "1.0",
                "description": "The A2A version spoken: 1.0. Missing or empty means 0.3, which is refused (-32009)."}],
            "requestBody": {"required": true, "content": {"application/json": {
                "schema": {
                    "type": "object",
                    "required": ["jsonrpc", "id", "method"],
                    "properties": {
                        "jsonrpc": {"const": "2.0"},
                        "id": {"type": ["string", "integer"]},
                        "method": {"type": "string"},
                        "params": {"type": "object"},
                    },
                },
                "examples": {"getTask": {"summary": "Read a task",
                    "value": {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                        "params": {"id": "3f2c8a7e-2d1b-4c55-9a0e-5b7c1d2e3f40"}}}},
            }}},
            "responses": {
                "200": {
                    "description": "A JSON-RPC response, or (streaming methods) an SSE stream of them.",
                    "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                    "content": {
                        "application/json": {"schema": rpc_response()},
                        "text/event-stream": {"schema": {
                            "description": "One server-sent event: `data: JSON` where JSON is a JSON-RPC response (`result` a `StreamResponse`). Lines starting with `:` are keep-alives.",
                            "type": "object",
                            "required": ["data"],
                            "properties": {"data": {"type": "string",
                                "contentMediaType": "application/json",
                                "contentSchema": rpc_response()}},
                        }},
                    },
                },
                "401": {"$ref": "#/components/responses/Unauthorized"},
                "403": error("Refused for a browser (see `/api/chat`)."),
                "408": error("The body did not arrive within `server.body_read_timeout_secs`."),
                "413": error("A body over `server.body_limit_bytes`."),
                "503": {"$ref": "#/components/responses/ServerBusy"},
            },
        }},
    });
    if let (Some(doc_paths), Value::Object(new)) = (doc["paths"].as_object_mut(), paths) {
        doc_paths.extend(new);
    }
    if let Some(tags) = doc["tags"].as_array_mut() {
        tags.push(json!({"name": "a2a", "description": "A2A 1.0 (Agent2Agent), JSON-RPC binding: tasks are conversations.", "externalDocs": {"url": SPEC}}));
    }
}
