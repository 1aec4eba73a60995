//! `POST /mcp`: the MCP server's HTTP edge (`mcp_server/`). The request has passed the
//! admission layer by now (browser guard, API key — a 401 before any MCP handling —, load
//! shedding, the body read within its limits) and is handed to rmcp's streamable-HTTP
//! service. What is not a JSON-RPC message is answered here with a JSON-RPC error object
//! (rmcp answers those in plain text), and so are rmcp's own plain-text refusals (a missing
//! `Accept`, an unknown `MCP-Protocol-Version`): MCP clients read JSON-RPC errors.

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use http_body_util::BodyExt;
use rmcp::model::{ClientJsonRpcMessage, ErrorCode};
use serde_json::{Value, json};

use super::chat::passthrough_headers;
use super::{AppState, RequestId};
use crate::mcp_server::{Caller, McpServer, McpService, ServiceOptions};

/// The longest refusal of rmcp's that is turned into a JSON-RPC error (they are one line).
const REFUSAL_LIMIT: usize = 64 * 1024;

pub(super) fn routes(state: &AppState) -> Router<AppState> {
    let service = McpServer::new(
        state.chat.clone(),
        state.conversations.clone(),
        state.serving.clone(),
        state.deadline,
    )
    .service(ServiceOptions {
        body_limit: state.body_limit,
        keepalive: state.keepalive,
    });
    Router::new().route(
        "/mcp",
        post(move |State(state): State<AppState>, request: Request| {
            serve(service.clone(), state, request)
        }),
    )
}

async fn serve(service: McpService, state: AppState, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    // Already in memory: the admission layer read it whole within `server.body_limit_bytes`.
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                None,
                ErrorCode::PARSE_ERROR,
                format!("cannot read the request body: {e}"),
            );
        }
    };
    if let Some(refusal) = not_a_message(&bytes) {
        return refusal;
    }
    let request_id = parts
        .extensions
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    parts.extensions.insert(Caller {
        request_id,
        headers: passthrough_headers(&parts.headers, &state.blocked_headers),
    });
    let response = service
        .handle(Request::from_parts(parts, Body::from(bytes)))
        .await
        .map(Body::new);
    as_jsonrpc_refusal(response).await
}

/// The JSON-RPC error for a body that is not one JSON-RPC message, or `None` when it is one.
/// The message is parsed once more by rmcp: only a failed parse pays for the diagnosis.
fn not_a_message(bytes: &Bytes) -> Option<Response> {
    if serde_json::from_slice::<ClientJsonRpcMessage>(bytes).is_ok() {
        return None;
    }
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(e) => {
            return Some(jsonrpc_error(
                StatusCode::BAD_REQUEST,
                None,
                ErrorCode::PARSE_ERROR,
                format!("Parse error: the body is not JSON ({e})"),
            ));
        }
    };
    let refuse =
        |id, code, message: String| Some(jsonrpc_error(StatusCode::BAD_REQUEST, id, code, message));
    let Some(message) = value.as_object() else {
        let what = if value.is_array() {
            "a batch (an array): MCP takes one message per request"
        } else {
            "not a JSON-RPC message (an object)"
        };
        return refuse(
            None,
            ErrorCode::INVALID_REQUEST,
            format!("Invalid Request: {what}"),
        );
    };
    // An id the client can match, when it sent a usable one.
    let id = message
        .get("id")
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
        .cloned();
    if message.get("jsonrpc") != Some(&json!("2.0")) {
        return refuse(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: `jsonrpc` must be \"2.0\"".into(),
        );
    }
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return refuse(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: no `method` (a string), or a response this server never asked for"
                .into(),
        );
    };
    if message.get("id").is_some() && id.is_none() {
        return refuse(
            None,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: `id` must be a string or an integer".into(),
        );
    }
    // The envelope is sound: what does not fit is the method's params.
    let why = serde_json::from_value::<ClientJsonRpcMessage>(value.clone())
        .err()
        .map_or_else(String::new, |e| format!(": {e}"));
    refuse(
        id,
        ErrorCode::INVALID_PARAMS,
        format!("Invalid params for `{method}`{why}"),
    )
}

/// rmcp refuses some requests with a status and a line of plain text: the same status with
/// that line as a JSON-RPC error object. Everything else passes untouched.
async fn as_jsonrpc_refusal(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, REFUSAL_LIMIT).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => status.canonical_reason().unwrap_or("Error").to_owned(),
    };
    let code = if status.is_server_error() {
        ErrorCode::INTERNAL_ERROR
    } else {
        ErrorCode::INVALID_REQUEST
    };
    let mut refusal = jsonrpc_error(status, None, code, text);
    // `Allow` on a 405, and whatever else rmcp said in headers.
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            refusal.headers_mut().insert(name.clone(), value.clone());
        }
    }
    refusal
}

fn jsonrpc_error(
    status: StatusCode,
    id: Option<Value>,
    code: ErrorCode,
    message: String,
) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code.0, "message": message},
    });
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
