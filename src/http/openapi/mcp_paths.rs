//! `POST /mcp`, by reference: the MCP server speaks the Model Context Protocol's streamable
//! HTTP transport, whose messages the MCP specification defines; the document says where, and
//! which HTTP statuses triage's edge adds.

use serde_json::{Value, json};

use super::conversation_paths::error;

/// The transport's definition in the revision this server's clients mostly speak (it also
/// negotiates the others rmcp knows).
const SPEC: &str =
    "https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#streamable-http";

/// A JSON-RPC 2.0 message: the request and answer bodies, whose `params` and `result` the
/// MCP specification defines per method.
fn message() -> Value {
    json!({
        "type": "object",
        "description": "One JSON-RPC 2.0 message of the Model Context Protocol (a request, \
            or a notification); its methods and their params are defined by the MCP \
            specification.",
        "required": ["jsonrpc"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "integer"]},
            "method": {"type": "string"},
            "params": {"type": "object"},
        },
    })
}

fn jsonrpc_error() -> Value {
    json!({
        "type": "object",
        "required": ["jsonrpc", "error"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "integer", "null"]},
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "integer"},
                    "message": {"type": "string"},
                    "data": {},
                },
            },
        },
    })
}

fn refusal(description: &str) -> Value {
    json!({
        "description": description,
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {"application/json": {"schema": jsonrpc_error()}},
    })
}

pub(super) fn add(doc: &mut Value) {
    let operation = json!({"post": {
        "tags": ["mcp"],
        "operationId": "mcp",
        "summary": "The MCP server (streamable HTTP, stateless): tools for IDE and in-cluster agents",
        "description": "triage as a Model Context Protocol server, over the streamable HTTP \
            transport, stateless: every POST stands alone, no `Mcp-Session-Id` is issued or \
            needed, and there is no GET stream. Send `Accept: application/json, \
            text/event-stream`; the protocol version is negotiated in `initialize` and named \
            in `MCP-Protocol-Version` afterwards. Tools: `investigate` (one question, one \
            answer; calls that need approval are refused), `list_models`, and \
            `start_conversation`, `conversation_status`, `conversation_events`, \
            `send_message`, `approve`, `deny` over the server-side conversations. The API key \
            goes in `Authorization: Bearer` or `X-API-Key`; a missing one is a 401 before any \
            MCP handling.",
        "externalDocs": {"description": "MCP specification: streamable HTTP transport", "url": SPEC},
        "requestBody": {"required": true, "content": {"application/json": {
            "schema": message(),
            "examples": {
                "initialize": {"summary": "The handshake", "value": {
                    "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "curl", "version": "1"}}}},
                "investigate": {"summary": "A question, with progress notifications", "value": {
                    "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                        "name": "investigate",
                        "arguments": {"question": "Why is the payments pod in CrashLoopBackOff?"},
                        "_meta": {"progressToken": "p1"}}}},
            },
        }}},
        "responses": {
            "200": {
                "description": "The answer: one JSON-RPC response (`application/json`), or, \
                    when notifications (progress) come before it, an SSE stream of JSON-RPC \
                    messages ending with the response. A failed tool is a result with \
                    `isError: true`; an unknown tool or method a JSON-RPC error.",
                "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                "content": {
                    "application/json": {"schema": {"type": "object"}},
                    "text/event-stream": {"schema": {"type": "string"}},
                },
            },
            "202": {"description": "A notification, accepted (no answer)."},
            "400": refusal("Not one JSON-RPC message (parse error -32700, invalid request \
                -32600, invalid params -32602), or an unknown `MCP-Protocol-Version`."),
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "403": error("Refused for a browser: a foreign `Origin`, or a `Host` that is not \
                allowed (see `/api/chat`)."),
            "406": refusal("`Accept` does not name both `application/json` and \
                `text/event-stream`."),
            "408": error("The body did not arrive within `server.body_read_timeout_secs`."),
            "413": error("The body is over `server.body_limit_bytes`."),
            "415": refusal("`Content-Type` is not `application/json`."),
            "503": {"$ref": "#/components/responses/ServerBusy"},
        },
    }});
    if let Some(paths) = doc["paths"].as_object_mut() {
        paths.insert("/mcp".into(), operation);
    }
    if let Some(tags) = doc["tags"].as_array_mut() {
        tags.push(
            json!({"name": "mcp", "description": "The MCP server (IDE and in-cluster agents).",
            "externalDocs": {"url": SPEC}}),
        );
    }
}
