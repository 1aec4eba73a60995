//! Bedrock's runtime, faked: `POST /model/{model id}/converse-stream` checks the request's
//! SigV4 signature by recomputing it (403 `InvalidSignatureException` on a mismatch, as AWS
//! answers) or its bearer token, validates the Converse body as Bedrock does ([`validate`]),
//! then answers the next scripted [`crate::Step`] as `application/vnd.amazon.eventstream`
//! frames ([`render`]). With Claude's thinking on, answers start with a reasoning block whose
//! signature is checked when it comes back; cache points are simulated (the first call writes
//! the prefix, later ones read it). `POST /sts` is STS's AssumeRoleWithWebIdentity for a
//! trusted web identity token, issuing credentials the runtime then accepts.

mod render;
mod signature;
mod validate;

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use crate::wire::json_response;
use crate::{EXHAUSTED_MESSAGE, Inner, parse};

pub(crate) struct BedrockState {
    secret: String,
    /// Access key id → secret key: the credentials whose signatures are accepted.
    pub credentials: Mutex<HashMap<String, String>>,
    /// The bearer token (Bedrock API key) accepted, if any.
    pub bearer: Mutex<Option<String>>,
    /// (role ARN, web identity token) STS accepts.
    pub web_identity: Mutex<Option<(String, String)>>,
    pub sts_requests: std::sync::atomic::AtomicUsize,
    /// (length, hash) of the prompt prefixes written to the cache.
    cached_prefixes: Mutex<HashSet<(usize, u64)>>,
}

impl Default for BedrockState {
    fn default() -> Self {
        BedrockState {
            secret: uuid::Uuid::new_v4().to_string(),
            credentials: Mutex::default(),
            bearer: Mutex::default(),
            web_identity: Mutex::default(),
            sts_requests: Default::default(),
            cached_prefixes: Mutex::default(),
        }
    }
}

/// The signature of a reasoning text: changed in any way, it fails the check.
pub(crate) fn sign(secret: &str, text: &str) -> String {
    let mut h = DefaultHasher::new();
    ("bedrock", secret, text).hash(&mut h);
    format!("br_sig_{:016x}", h.finish())
}

/// Bedrock's error: the type in `x-amzn-ErrorType`, the message in the body.
pub(crate) fn error(status: u16, kind: &str, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(code, &json!({"message": message}));
    if let Ok(v) = HeaderValue::from_str(kind) {
        response.headers_mut().insert("x-amzn-errortype", v);
    }
    response
}

/// Bedrock's exception name for an HTTP status.
pub(crate) fn exception_kind(status: u16) -> &'static str {
    match status {
        400 => "ValidationException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 => "ModelTimeoutException",
        429 => "ThrottlingException",
        503 => "ServiceUnavailableException",
        _ => "InternalServerException",
    }
}

pub(crate) async fn converse_stream(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let url_model = uri
        .path()
        .strip_prefix("/model/")
        .and_then(|p| p.strip_suffix("/converse-stream"));
    let rule = inner.receive(url_model, &raw, Some(&headers));
    if let Some(refusal) = signature::check(&inner.bedrock, &uri, &headers, &raw) {
        return refusal;
    }
    let Some(model) = uri
        .path()
        .strip_prefix("/model/")
        .and_then(|p| p.strip_suffix("/converse-stream"))
    else {
        return error(404, "UnknownOperationException", "unknown operation");
    };
    if model.contains(':') {
        // A client that sent the id unencoded signed a different path than AWS reads.
        return error(
            400,
            "ValidationException",
            "the model id must be percent-encoded in the path",
        );
    }
    let body = parse(&raw);
    if let Err(message) = validate::request(&body, &inner.bedrock.secret) {
        return error(400, "ValidationException", &message);
    }
    let Some(step) = inner.step(rule.as_ref(), &body, &raw) else {
        return error(500, "InternalServerException", EXHAUSTED_MESSAGE);
    };
    let prompt_tokens = ((raw.len() / 4) as u64).max(1);
    let ctx = render::Ctx {
        prompt_tokens,
        cached: cache_use(&inner, &body, prompt_tokens),
        thinking: body.pointer("/additionalModelRequestFields/thinking/type")
            == Some(&json!("enabled")),
        secret: inner.bedrock.secret.clone(),
    };
    render::answer(inner.clone(), ctx, step).await
}

/// (read, written) tokens at the cache points: the prompt (system, tools, messages, in that
/// order, the cache points themselves left out) up to each cache point is a prefix; the
/// longest one seen before is read, and the rest up to the last point is written.
fn cache_use(inner: &Inner, body: &Value, prompt_tokens: u64) -> (u64, u64) {
    let mut prompt = String::new();
    let mut points = Vec::new();
    let mut add = |block: &Value, prompt: &mut String| {
        if block.get("cachePoint").is_some() {
            points.push(prompt.len());
        } else {
            prompt.push_str(&block.to_string());
        }
    };
    for block in body["system"].as_array().into_iter().flatten() {
        add(block, &mut prompt);
    }
    prompt.push_str(&body["toolConfig"].to_string());
    for message in body["messages"].as_array().into_iter().flatten() {
        prompt.push_str(message["role"].as_str().unwrap_or(""));
        for block in message["content"].as_array().into_iter().flatten() {
            add(block, &mut prompt);
        }
    }
    let Some(&last) = points.last() else {
        return (0, 0);
    };
    let hash = |end: usize| {
        let mut h = DefaultHasher::new();
        prompt.as_bytes()[..end].hash(&mut h);
        h.finish()
    };
    let mut written = inner
        .bedrock
        .cached_prefixes
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // The longest prefix written before that this prompt starts with, up to its last point.
    let read = written
        .iter()
        .filter(|(len, h)| *len <= last && hash(*len) == *h)
        .map(|(len, _)| *len)
        .max()
        .unwrap_or(0);
    for end in &points {
        written.insert((*end, hash(*end)));
    }
    let tokens = |bytes: usize| ((bytes / 4) as u64).min(prompt_tokens);
    (tokens(read), tokens(last) - tokens(read))
}

/// STS's `AssumeRoleWithWebIdentity` (form-encoded, as the SDKs send it): the trusted role and
/// token get fresh credentials, which the runtime then accepts.
pub(crate) async fn sts(State(inner): State<Arc<Inner>>, raw: Bytes) -> Response {
    inner.bedrock.sts_requests.fetch_add(1, Ordering::SeqCst);
    let form: HashMap<String, String> = String::from_utf8_lossy(&raw)
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), percent_decode(v)))
        .collect();
    let field = |k: &str| form.get(k).map(String::as_str).unwrap_or("");
    let trusted = inner
        .bedrock
        .web_identity
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if field("Action") != "AssumeRoleWithWebIdentity"
        || trusted.is_none_or(|(role, token)| {
            role != field("RoleArn") || token != field("WebIdentityToken")
        })
    {
        let xml = "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>";
        return xml_response(StatusCode::FORBIDDEN, xml);
    }
    let key_id = format!(
        "ASIAFAKE{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
    .to_uppercase();
    let secret = uuid::Uuid::new_v4().simple().to_string();
    inner
        .bedrock
        .credentials
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key_id.clone(), secret.clone());
    let expires = "2099-01-01T00:00:00Z";
    let xml = format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>{key_id}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey><SessionToken>fake-session-token</SessionToken><Expiration>{expires}</Expiration></Credentials><AssumedRoleUser><Arn>{role}/fake</Arn><AssumedRoleId>AROAFAKE:fake</AssumedRoleId></AssumedRoleUser><SubjectFromWebIdentityToken>fake</SubjectFromWebIdentityToken></AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>fake</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>",
        role = field("RoleArn"),
    );
    xml_response(StatusCode::OK, &xml)
}

fn xml_response(status: StatusCode, xml: &str) -> Response {
    let mut response = Response::new(axum::body::Body::from(xml.to_owned()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("text/xml"));
    response
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
