//! Gemini faked, as Google AI Studio and Vertex AI serve it:
//! `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` (and `:generateContent`) with an
//! API key (`x-goog-api-key` or `key=`), `POST /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:…`
//! with a bearer token this fake issued, `GET` of either model path (`models.get`); Claude on
//! Vertex at `…/publishers/anthropic/models/{m}:streamRawPredict` / `:rawPredict`, checked for
//! Vertex's body (`anthropic_version`, no `model`) and then answered by the Anthropic fake.
//! Tokens come from `POST /token` (a service-account JWT whose RS256 signature is checked
//! against the trusted key, see [`crate::FakeLlm::trust_service_account`]) or the metadata
//! server's `GET /computeMetadata/v1/instance/service-accounts/default/token`.

mod render;
mod validate;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::wire::json_response;
use crate::{EXHAUSTED_MESSAGE, Inner, Rule, parse};

#[derive(Default)]
pub(crate) struct GoogleState {
    secret: String,
    /// The API key AI Studio requests must carry, when set (else any non-empty key).
    pub api_key: Mutex<Option<String>>,
    /// The service account whose JWTs the token endpoint accepts: (email, RSAPublicKey DER).
    pub trusted: Mutex<Option<(String, Vec<u8>)>>,
    pub tokens: Mutex<Vec<String>>,
    pub token_requests: AtomicUsize,
}

impl GoogleState {
    pub(crate) fn new() -> GoogleState {
        GoogleState {
            secret: uuid::Uuid::new_v4().to_string(),
            ..GoogleState::default()
        }
    }
}

/// What a text part's signature is computed over.
const TEXT_SIGNED: &str = "text part";

/// The signature of a part's content: a part changed in any way fails the check.
fn sign(secret: &str, content: &Value) -> String {
    let mut h = DefaultHasher::new();
    (secret, content.to_string()).hash(&mut h);
    STANDARD.encode(format!("sig{:016x}", h.finish()))
}

/// Google's error body.
fn error(status: u16, message: &str, retry_secs: Option<f64>) -> Response {
    let mut body = json!({"error": {"code": status, "message": message,
                                    "status": render::status_name(status)}});
    if let Some(s) = retry_secs {
        body["error"]["details"] = json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                           "retryDelay": format!("{s}s")}]);
    }
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &body)
}

/// The model of a `{model}:{action}` path segment.
fn model_of(model_action: &str) -> Option<&str> {
    model_action.split_once(':').map(|(model, _)| model)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn query_param<'a>(uri: &'a Uri, name: &str) -> Option<&'a str> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// AI Studio's key check: a missing key is 403, a wrong one 400 as Google answers them.
fn check_key(inner: &Inner, headers: &HeaderMap, uri: &Uri) -> Option<Response> {
    let key = Some(header(headers, "x-goog-api-key"))
        .filter(|k| !k.is_empty())
        .or_else(|| query_param(uri, "key"));
    let Some(key) = key else {
        return Some(error(
            403,
            "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
            None,
        ));
    };
    let expected = inner
        .google
        .api_key
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if expected.is_some_and(|k| k != key) {
        return Some(error(
            400,
            "API key not valid. Please pass a valid API key.",
            None,
        ));
    }
    None
}

/// Vertex's token check: a bearer token this fake issued.
fn check_token(inner: &Inner, headers: &HeaderMap) -> Option<Response> {
    let token = header(headers, "authorization")
        .strip_prefix("Bearer ")
        .unwrap_or("");
    let known = inner
        .google
        .tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|t| t == token);
    if token.is_empty() || !known {
        return Some(error(
            401,
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
            None,
        ));
    }
    None
}

pub(crate) async fn ai_studio(
    State(inner): State<Arc<Inner>>,
    Path(model_action): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let rule = inner.receive(model_of(&model_action), &raw, None);
    if let Some(refused) = check_key(&inner, &headers, &uri) {
        return refused;
    }
    generate(inner, rule, &model_action, &uri, raw).await
}

pub(crate) async fn vertex(
    State(inner): State<Arc<Inner>>,
    Path((_project, _location, publisher, model_action)): Path<(String, String, String, String)>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let rule = inner.receive(model_of(&model_action), &raw, None);
    if let Some(refused) = check_token(&inner, &headers) {
        return refused;
    }
    match publisher.as_str() {
        "google" => generate(inner, rule, &model_action, &uri, raw).await,
        "anthropic" => claude(inner, rule, &model_action, raw).await,
        other => error(404, &format!("Publisher model `{other}` not found."), None),
    }
}

/// Vertex's `models.get` of a publisher model, for `triage check`.
pub(crate) async fn vertex_get_model(
    State(inner): State<Arc<Inner>>,
    Path((_project, _location, _publisher, model)): Path<(String, String, String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = check_token(&inner, &headers) {
        return refused;
    }
    json_response(
        StatusCode::OK,
        &json!({"name": format!("publishers/google/models/{model}")}),
    )
}

/// `models.get`: the model exists for any name starting with `gemini`.
pub(crate) async fn get_model(
    State(inner): State<Arc<Inner>>,
    Path(model): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = check_key(&inner, &headers, &uri) {
        return refused;
    }
    if !model.starts_with("gemini") {
        return error(
            404,
            &format!("models/{model} is not found for API version v1beta"),
            None,
        );
    }
    json_response(
        StatusCode::OK,
        &json!({"name": format!("models/{model}"), "inputTokenLimit": 1_048_576}),
    )
}

async fn generate(
    inner: Arc<Inner>,
    rule: Option<Rule>,
    model_action: &str,
    uri: &Uri,
    raw: Bytes,
) -> Response {
    let Some((_model, action)) = model_action.split_once(':') else {
        return error(404, "The requested URL was not found on this server.", None);
    };
    let streaming = match action {
        "streamGenerateContent" if query_param(uri, "alt") == Some("sse") => true,
        "streamGenerateContent" => {
            return error(
                400,
                "fake llm: only alt=sse streams are served (a JSON array stream otherwise)",
                None,
            );
        }
        "generateContent" => false,
        _ => return error(404, "The requested URL was not found on this server.", None),
    };
    let body = parse(&raw);
    if let Err(message) = validate::request(&body, &inner.google.secret) {
        return error(400, &message, None);
    }
    if !streaming {
        return error(
            500,
            "fake llm: generateContent (not streamed) is not scripted",
            None,
        );
    }
    let Some(step) = inner.step(rule.as_ref(), &body, &raw) else {
        return error(500, EXHAUSTED_MESSAGE, None);
    };
    let ctx = render::Ctx {
        prompt_tokens: ((raw.len() / 4) as u64).max(1),
        thinking: validate::thinking_on(&body),
        calls_allowed: body
            .pointer("/toolConfig/functionCallingConfig/mode")
            .and_then(Value::as_str)
            != Some("NONE"),
        secret: inner.google.secret.clone(),
    };
    render::answer(inner, ctx, step).await
}

/// Claude on Vertex: Vertex's body rules, then the Anthropic fake with the model from the URL.
async fn claude(inner: Arc<Inner>, rule: Option<Rule>, model_action: &str, raw: Bytes) -> Response {
    let anthropic_error =
        |message: &str| crate::anthropic::error(400, "invalid_request_error", message);
    let Some((model, action)) = model_action.split_once(':') else {
        return error(404, "The requested URL was not found on this server.", None);
    };
    let mut body = parse(&raw);
    let stream = body.get("stream") == Some(&Value::Bool(true));
    match action {
        "streamRawPredict" if stream => {}
        "rawPredict" if !stream => {}
        _ => {
            return anthropic_error(
                "stream must be true for streamRawPredict and absent for rawPredict",
            );
        }
    }
    if body.get("anthropic_version").and_then(Value::as_str) != Some("vertex-2023-10-16") {
        return anthropic_error("anthropic_version: Input should be 'vertex-2023-10-16'");
    }
    let Some(object) = body.as_object_mut() else {
        return anthropic_error("the request body must be a JSON object");
    };
    if object.contains_key("model") {
        return anthropic_error("model: Extra inputs are not permitted");
    }
    object.remove("anthropic_version");
    object.insert("model".into(), json!(model));
    crate::anthropic::answer_body(inner, rule, &raw, body).await
}

/// Parses an `application/x-www-form-urlencoded` body (only `%3A`-style escapes matter here).
fn form_field<'a>(body: &'a str, name: &str) -> Option<String> {
    let value: &'a str = body
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?;
    Some(value.replace("%3A", ":").replace("%3a", ":"))
}

/// `POST /token`: the JWT-bearer grant, its RS256 signature checked with the trusted key.
pub(crate) async fn token(State(inner): State<Arc<Inner>>, raw: Bytes) -> Response {
    inner.google.token_requests.fetch_add(1, Ordering::SeqCst);
    let refuse = |m: &str| {
        json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": "invalid_grant", "error_description": m}),
        )
    };
    let body = String::from_utf8_lossy(&raw);
    if form_field(&body, "grant_type").as_deref()
        != Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    {
        return refuse("unsupported grant_type");
    }
    let Some(assertion) = form_field(&body, "assertion") else {
        return refuse("assertion is required");
    };
    let Some((email, public_key)) = inner
        .google
        .trusted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
    else {
        return refuse("no service account is trusted by the fake");
    };
    let mut pieces = assertion.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (pieces.next(), pieces.next(), pieces.next(), pieces.next())
    else {
        return refuse("the assertion is not a JWT");
    };
    let decode = |p: &str| URL_SAFE_NO_PAD.decode(p).ok();
    let header: Option<Value> = decode(h).and_then(|b| serde_json::from_slice(&b).ok());
    let claims: Option<Value> = decode(c).and_then(|b| serde_json::from_slice(&b).ok());
    let (Some(header), Some(claims), Some(signature)) = (header, claims, decode(s)) else {
        return refuse("the assertion is not a JWT");
    };
    if header["alg"] != "RS256" {
        return refuse("the JWT must be signed RS256");
    }
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        &public_key,
    );
    if key
        .verify(format!("{h}.{c}").as_bytes(), &signature)
        .is_err()
    {
        return refuse("Invalid JWT Signature.");
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let claim = |k: &str| claims.get(k).and_then(Value::as_str).unwrap_or("");
    let times_ok = claims["exp"]
        .as_u64()
        .is_some_and(|e| e > now && e <= now + 3700)
        && claims["iat"].as_u64().is_some_and(|i| i <= now + 60);
    if claim("iss") != email
        || !claim("aud").ends_with("/token")
        || !claim("scope").contains("https://www.googleapis.com/auth/cloud-platform")
        || !times_ok
    {
        return refuse("Invalid JWT: iss, aud, scope, iat or exp is wrong");
    }
    issue(&inner)
}

/// The metadata server's token: only with `Metadata-Flavor: Google`, as GCE requires.
pub(crate) async fn metadata_token(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
) -> Response {
    inner.google.token_requests.fetch_add(1, Ordering::SeqCst);
    if header(&headers, "metadata-flavor") != "Google" {
        return json_response(
            StatusCode::FORBIDDEN,
            &json!({"error": "Missing Metadata-Flavor:Google header"}),
        );
    }
    issue(&inner)
}

fn issue(inner: &Inner) -> Response {
    let token = format!("ya29.fake-{}", uuid::Uuid::new_v4().simple());
    inner
        .google
        .tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(token.clone());
    json_response(
        StatusCode::OK,
        &json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}),
    )
}

/// The RSAPublicKey DER of a PKCS#8 PEM private key.
pub(crate) fn public_key_of(pem: &str) -> Option<Vec<u8>> {
    use ring::signature::KeyPair;
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let der = STANDARD.decode(body).ok()?;
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&der).ok()?;
    Some(pair.public_key().as_ref().to_vec())
}
