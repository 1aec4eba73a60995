//! `POST /api/chat`: parse, let the agent prepare the conversation (refusals become HTTP
//! errors), then stream its events as SSE or collect them into one JSON body.

use axum::Extension;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::Stream;

use super::body::{parse_json, read_body};
use super::sse::StreamLimits;
use super::{ApiError, AppState, RequestId, sse};
use crate::context::tokens::count_off_workers;
use crate::holmes::RequestMeta;
use crate::wire::{ChatRequest, StreamEvent};

pub async fn chat(
    State(state): State<AppState>,
    request_id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let id = request_id.map_or_else(|| uuid::Uuid::new_v4().to_string(), |Extension(r)| r.0);
    let meta = RequestMeta {
        request_id: id,
        headers: passthrough_headers(&headers, &state.blocked_headers),
    };
    match handle(state, meta, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// The request's headers tools may see: everything but the blocked names (credentials).
pub(super) fn passthrough_headers(
    headers: &HeaderMap,
    blocked: &[String],
) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| {
            !blocked
                .iter()
                .any(|b| name.as_str().eq_ignore_ascii_case(b))
        })
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

async fn handle(
    state: AppState,
    meta: RequestMeta,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = read_body(body)?;
    let request: ChatRequest = parse_json(&bytes)?;
    let size = bytes.len();
    let warnings = ignored_fields(&bytes);
    drop(bytes);
    if !warnings.is_empty() {
        tracing::warn!(?warnings, "request fields ignored");
    }
    let stream = request.stream;
    // Starting counts the tokens of the whole history: a large one goes to the blocking pool.
    let chat = state.chat.clone();
    let started = count_off_workers(size, move || chat.start(request, meta))
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("preparing the request failed: {e}"),
            )
        })?;
    let run = started?;
    if stream {
        let events = in_span(run, tracing::Span::current());
        let events = futures::StreamExt::map(events, move |event| with_warnings(event, &warnings));
        return Ok(sse::response(events, StreamLimits::of(&state)));
    }
    let answer = tracing::Instrument::in_current_span(run.collect());
    match tokio::time::timeout(state.deadline, answer).await {
        Ok(Ok(mut response)) => {
            response.metadata.warnings = warnings;
            Ok(json_response(&response))
        }
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "The request exceeded its deadline of {} s (server.request_deadline_secs)",
                state.deadline.as_secs_f64()
            ),
        )),
    }
}

/// What the request carries that triage does not read: unknown top-level fields and unknown
/// `behavior_controls` keys, as sentences for `metadata.warnings`.
/// One pass over the body that reads names only: values are skipped, not built (a `Value` of
/// the whole body copied every message of a long history once more).
fn ignored_fields(bytes: &[u8]) -> Vec<String> {
    // The body parsed as a `ChatRequest` already, so a failure here cannot be news.
    serde_json::from_slice::<IgnoredFields>(bytes)
        .map(|found| found.0)
        .unwrap_or_default()
}

struct IgnoredFields(Vec<String>);

impl<'de> serde::Deserialize<'de> for IgnoredFields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(IgnoredFieldsVisitor)
    }
}

struct IgnoredFieldsVisitor;

impl<'de> serde::de::Visitor<'de> for IgnoredFieldsVisitor {
    type Value = IgnoredFields;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a chat request")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<IgnoredFields, A::Error> {
        use std::collections::BTreeSet;

        use serde::de::IgnoredAny;

        let known = known_fields();
        let mut fields = BTreeSet::new();
        let mut controls = BTreeSet::new();
        while let Some(Name(name)) = map.next_key()? {
            if name == "behavior_controls" {
                let names: Option<std::collections::BTreeMap<String, IgnoredAny>> =
                    map.next_value()?;
                controls.extend(
                    names
                        .into_iter()
                        .flat_map(|names| names.into_keys())
                        .filter(|k| crate::prompt::Section::from_key(k).is_none()),
                );
            } else {
                map.next_value::<IgnoredAny>()?;
                if !known.contains(name.as_ref()) {
                    fields.insert(name.into_owned());
                }
            }
        }
        let fields = fields
            .into_iter()
            .map(|k| format!("unknown request field `{k}` ignored"));
        let controls = controls
            .into_iter()
            .map(|k| format!("unknown behavior_controls key `{k}` ignored"));
        Ok(IgnoredFields(fields.chain(controls).collect()))
    }
}

/// A field's name, borrowed from the body unless it had escapes (serde's own `Cow` always
/// copies).
struct Name<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Name<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> serde::de::Visitor<'de> for NameVisitor {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(name.into()))
            }
            fn visit_str<E>(self, name: &str) -> Result<Name<'de>, E> {
                Ok(Name(name.to_owned().into()))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

/// The request fields triage reads, found once (serialising a default request each time cost
/// about 2.5% of a request's instructions).
fn known_fields() -> &'static std::collections::HashSet<String> {
    static KNOWN: std::sync::OnceLock<std::collections::HashSet<String>> =
        std::sync::OnceLock::new();
    KNOWN.get_or_init(|| match serde_json::to_value(ChatRequest::default()) {
        Ok(serde_json::Value::Object(fields)) => fields.into_iter().map(|(k, _)| k).collect(),
        _ => std::collections::HashSet::new(),
    })
}

/// The answer as JSON, in a buffer started at the last answer's size (`size_hint`): an
/// answer carries the whole conversation.
fn json_response(response: &crate::wire::ChatResponse) -> Response {
    static ANSWER: crate::runtime::size_hint::SizeHint =
        crate::runtime::size_hint::SizeHint::new(16 * 1024);
    let mut body = ANSWER.buffer();
    if let Err(e) = serde_json::to_writer(&mut body, response) {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the answer could not be written as JSON: {e}"),
        )
        .into_response();
    }
    let body = ANSWER.finish(body);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// The final event carries the request's warnings in its metadata.
fn with_warnings(event: StreamEvent, warnings: &[String]) -> StreamEvent {
    match event {
        StreamEvent::AnswerEnd(mut end) if !warnings.is_empty() => {
            end.metadata.warnings = warnings.to_vec();
            StreamEvent::AnswerEnd(end)
        }
        other => other,
    }
}

/// Polls the agent's stream inside the request's span, so its logs carry the request id.
pub(super) fn in_span<S: Stream + Send + 'static>(
    inner: S,
    span: tracing::Span,
) -> impl Stream<Item = S::Item> + Send + 'static {
    let mut inner = Box::pin(inner);
    futures::stream::poll_fn(move |cx| {
        let _entered = span.enter();
        inner.as_mut().poll_next(cx)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn ignored_fields_are_named_once_each_in_order_escaped_or_not() {
        let body = br#"{"zeta":1,"\u0061sk":"q","alpha":{"ask":2},"zeta":3,
            "behavior_controls":{"z\u007a":true,"style_guide":false,"aa":1},"stream":false}"#;
        assert_eq!(
            super::ignored_fields(body),
            [
                "unknown request field `alpha` ignored",
                "unknown request field `zeta` ignored",
                "unknown behavior_controls key `aa` ignored",
                "unknown behavior_controls key `zz` ignored",
            ]
        );
        assert!(super::ignored_fields(br#"{"ask":"q","behavior_controls":null}"#).is_empty());
    }
}
