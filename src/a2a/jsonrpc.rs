//! JSON-RPC 2.0 as A2A's binding uses it: one request object per POST (no batches: A2A
//! defines none), an `id` on every request (every A2A method has a result), errors with the
//! standard codes and A2A's own (-32001 …), their details as `google.rpc.ErrorInfo`.

use serde::Serialize;
use serde_json::{Value, json};

/// The A2A errors triage answers, by the spec's names (section 5.4 gives the codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    Parse,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Internal,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    ExtendedAgentCardNotConfigured,
    VersionNotSupported,
}

impl ErrorCode {
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::Parse => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::Internal => -32603,
            ErrorCode::TaskNotFound => -32001,
            ErrorCode::TaskNotCancelable => -32002,
            ErrorCode::PushNotificationNotSupported => -32003,
            ErrorCode::UnsupportedOperation => -32004,
            ErrorCode::ContentTypeNotSupported => -32005,
            ErrorCode::ExtendedAgentCardNotConfigured => -32007,
            ErrorCode::VersionNotSupported => -32009,
        }
    }

    /// `ErrorInfo.reason` for A2A's own errors; the standard JSON-RPC ones carry no details.
    fn reason(self) -> Option<&'static str> {
        Some(match self {
            ErrorCode::TaskNotFound => "TASK_NOT_FOUND",
            ErrorCode::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            ErrorCode::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ErrorCode::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            ErrorCode::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            ErrorCode::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ErrorCode::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            _ => return None,
        })
    }
}

/// A JSON-RPC error: its code, a message that says what to change, and the `ErrorInfo`
/// metadata the A2A errors carry (`taskId`, `supportedVersions` …).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
    pub metadata: serde_json::Map<String, Value>,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            metadata: serde_json::Map::new(),
        }
    }

    /// The same error with `key: value` in its details (strings only, as `ErrorInfo` wants).
    pub fn with(mut self, key: &str, value: impl Into<String>) -> RpcError {
        self.metadata
            .insert(key.to_owned(), Value::String(value.into()));
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::InvalidParams, message)
    }

    pub fn task_not_found(id: &str) -> RpcError {
        RpcError::new(ErrorCode::TaskNotFound, format!("task {id} not found")).with("taskId", id)
    }

    fn to_value(&self) -> Value {
        let mut error = json!({"code": self.code.code(), "message": self.message});
        if let Some(reason) = self.code.reason() {
            error["data"] = json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "a2a-protocol.org",
                "metadata": self.metadata,
            }]);
        }
        error
    }
}

/// A request that is well-formed JSON-RPC: its id, method and params (an object; absent
/// params read as `{}`).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRequest {
    pub id: Value,
    pub method: String,
    pub params: Value,
}

/// Reads a request body. On failure, the error and the id to answer it under (null when the
/// body gave none that can be trusted).
pub fn parse_request(body: &[u8]) -> Result<RpcRequest, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            Value::Null,
            RpcError::new(ErrorCode::Parse, format!("Invalid JSON payload: {e}")),
        )
    })?;
    let invalid = |id: Value, why: &str| {
        Err((
            id,
            RpcError::new(
                ErrorCode::InvalidRequest,
                format!("Request payload validation error: {why}"),
            ),
        ))
    };
    let Value::Object(mut object) = value else {
        return invalid(
            Value::Null,
            "the body must be one JSON-RPC request object (batches are not supported)",
        );
    };
    let id = match object.remove("id") {
        Some(id @ Value::String(_)) => id,
        // JSON-RPC: numbers "SHOULD NOT contain fractional parts"; one that does is refused
        // rather than echoed back.
        Some(id @ Value::Number(_)) if id.is_i64() || id.is_u64() => id,
        Some(Value::Null) | None => {
            return invalid(
                Value::Null,
                "`id` is required (a string or an integer): every A2A method answers",
            );
        }
        Some(_) => return invalid(Value::Null, "`id` must be a string or an integer"),
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id, "`jsonrpc` must be \"2.0\"");
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        _ => return invalid(id, "`method` must be a string"),
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
        Some(params @ Value::Object(_)) => params,
        Some(_) => {
            return Err((
                id,
                RpcError::invalid_params(
                    "`params` must be an object (A2A has no positional params)",
                ),
            ));
        }
    };
    if let Some(extra) = object.keys().find(|k| k.as_str() != "jsonrpc") {
        let why = format!("unknown member `{extra}`");
        return invalid(id, &why);
    }
    Ok(RpcRequest { id, method, params })
}

/// `{"jsonrpc": "2.0", "id": …, "result": …}`.
pub fn success(id: &Value, result: &impl Serialize) -> Value {
    match serde_json::to_value(result) {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => failure(
            id,
            &RpcError::new(
                ErrorCode::Internal,
                format!("cannot encode the result: {e}"),
            ),
        ),
    }
}

/// `{"jsonrpc": "2.0", "id": …, "error": …}`.
pub fn failure(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_value()})
}

/// Reads a method's params into its request type; the serde message names the field.
pub fn params<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|e| RpcError::invalid_params(format!("Invalid parameters: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_requests_get_precise_errors() {
        let code = |body: &str| parse_request(body.as_bytes()).unwrap_err().1.code;
        assert_eq!(code("{"), ErrorCode::Parse);
        assert_eq!(code("[]"), ErrorCode::InvalidRequest);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","method":"GetTask"}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}"#),
            ErrorCode::InvalidParams
        );
        let (id, e) =
            parse_request(br#"{"jsonrpc":"2.0","id":"x","method":"m","extra":1}"#).unwrap_err();
        assert_eq!((id, e.code), (json!("x"), ErrorCode::InvalidRequest));
        let ok = parse_request(br#"{"jsonrpc":"2.0","id":3,"method":"GetTask"}"#).unwrap();
        assert_eq!(ok.params, json!({}));
    }

    #[test]
    fn a2a_errors_carry_error_info() {
        let e = failure(&json!(1), &RpcError::task_not_found("abc"));
        assert_eq!(e["error"]["code"], -32001);
        assert_eq!(e["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(e["error"]["data"][0]["metadata"]["taskId"], "abc");
        let e = failure(&json!(1), &RpcError::invalid_params("x"));
        assert!(e["error"].get("data").is_none());
    }
}
