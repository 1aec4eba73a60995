//! Request bodies: read whole with a size limit and a time limit, then parsed as JSON
//! regardless of `Content-Type` (as the reference server does; browsers are kept out by the
//! origin guard), errors naming the offending field.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ApiError;
use super::responses::{LocSegment, ValidationError};
use crate::wire::rules::broken_rule;

/// Reads the whole body into memory within `timeout`: 413 beyond `limit` bytes, 408 when the
/// client is too slow. Handlers then find the body complete.
pub async fn buffer_body(
    request: Request,
    limit: usize,
    timeout: Duration,
) -> Result<Request, ApiError> {
    let (parts, body) = request.into_parts();
    let collected = tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await;
    let bytes = match collected {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<LengthLimitError>() => {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "Request body too large: the limit is {limit} bytes (server.body_limit_bytes)"
                ),
            ));
        }
        Ok(Err(e)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("Cannot read the request body: {e}"),
            ));
        }
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "The request body did not arrive within {} s (server.body_read_timeout_secs)",
                    timeout.as_secs_f64()
                ),
            ));
        }
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// The body `buffer_body` already read; extraction can fail only on a server bug.
pub fn read_body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| ApiError::new(rejection.status(), rejection.body_text()))
}

/// Malformed JSON → 400; valid JSON of the wrong shape → 422 with a FastAPI-style list of
/// `{type, loc, msg}` naming the field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // serde lets a struct be read from an array; a request body must be an object.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|b| *b != b'{') && serde_json::from_slice::<Value>(bytes).is_ok() {
        return Err(ApiError::invalid(vec![ValidationError {
            kind: "model_attributes_type".into(),
            loc: vec![LocSegment::Key("body".into())],
            msg: "the request body must be a JSON object".into(),
        }]));
    }
    // Tracking the path costs an allocation per key: a body that reads is read without it,
    // and only a failing one is read again to name the field.
    if let Ok(parsed) = serde_json::from_slice(bytes) {
        return Ok(parsed);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    if parsed.is_ok()
        && let Err(e) = de.end()
    {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("Malformed JSON body: {e}"),
        ));
    }
    parsed.map_err(|err| {
        let inner = err.inner();
        // serde_json reports some type mismatches of valid JSON (`null` where an enum is
        // expected) as syntax errors: only JSON that does not parse as a `Value` (which also
        // enforces the nesting limit) is malformed.
        if (inner.is_syntax() || inner.is_eof()) && serde_json::from_slice::<Value>(bytes).is_err()
        {
            let what = if bytes.iter().all(u8::is_ascii_whitespace) {
                "Request body is empty: expected a JSON object".to_owned()
            } else {
                format!("Malformed JSON body: {inner}")
            };
            return ApiError::new(StatusCode::BAD_REQUEST, what);
        }
        let mut loc = vec![LocSegment::Key("body".into())];
        loc.extend(err.path().iter().filter_map(|seg| match seg {
            serde_path_to_error::Segment::Seq { index } => Some(LocSegment::Index(*index as u64)),
            serde_path_to_error::Segment::Map { key } => Some(LocSegment::Key(key.clone())),
            serde_path_to_error::Segment::Enum { variant } => {
                Some(LocSegment::Key(variant.clone()))
            }
            serde_path_to_error::Segment::Unknown => None,
        }));
        let field = err.path().to_string();
        let inner = inner.to_string();
        // A value that reads but breaks one of the service's rules: the request is well
        // formed, the service refuses it.
        if let Some(rule) = broken_rule(&inner) {
            return ApiError::new(StatusCode::BAD_REQUEST, format!("{field}: {rule}"));
        }
        let msg = if field == "." {
            inner
        } else {
            format!("{field}: {inner}")
        };
        ApiError::invalid(vec![ValidationError {
            kind: "value_error".into(),
            loc,
            msg,
        }])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ChatRequest;
    use serde_json::json;

    /// The detail as the client reads it.
    fn detail(e: &ApiError) -> Value {
        serde_json::to_value(&e.detail).unwrap()
    }

    #[test]
    fn null_for_an_enum_is_a_422_not_malformed_json() {
        // Found by the fuzz test: serde_json calls this a syntax error.
        let e = parse_json::<crate::wire::ChatRequest>(
            br#"{"ask": "q", "frontend_tools": [{"name": "n", "description": "d", "mode": null}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", e.detail);
    }

    #[test]
    fn syntax_errors_are_400() {
        let e = parse_json::<ChatRequest>(b"{\"ask\": ").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        let e = parse_json::<ChatRequest>(b"").unwrap_err();
        assert!(detail(&e).as_str().unwrap().contains("empty"));
    }

    #[test]
    fn shape_errors_name_the_field() {
        let e =
            parse_json::<ChatRequest>(br#"{"ask":"q","conversation_history":[{"role":"user"},3]}"#)
                .unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            detail(&e)[0]["loc"],
            json!(["body", "conversation_history", 1])
        );
        let e = parse_json::<ChatRequest>(br#"{"stream":true}"#).unwrap_err();
        assert!(
            detail(&e)[0]["msg"].as_str().unwrap().contains("ask"),
            "{}",
            detail(&e)
        );
        let e = parse_json::<ChatRequest>(br#"["q"]"#).unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        let e = parse_json::<ChatRequest>(br#"{"ask":"q","stream":"yes"}"#).unwrap_err();
        assert_eq!(detail(&e)[0]["loc"], json!(["body", "stream"]));
    }
}
