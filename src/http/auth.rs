//! API keys: `X-API-Key: <key>` or `Authorization: Bearer <key>`, compared in constant time.
//! Only exact paths are exempt: the health probes, the A2A agent card and the console's static page and assets,
//! which hold no secrets (the API calls the page makes still need a key); and inbound
//! webhooks (`/api/webhook/…`), whose handler checks the reply token instead.

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::ApiError;

/// Routes anyone may call: the liveness and readiness probes, and the browser console's page
/// and assets (they hold no secret; the API calls the page makes still need a key).
const EXEMPT: &[&str] = &[
    "/healthz",
    "/readyz",
    // The A2A agent card: discovery, before a client knows it needs a key (it says so).
    super::a2a::CARD_PATH,
    super::console::INDEX_PATH,
    super::console::SCRIPT_PATH,
    super::console::CONVERSATION_LOG_SCRIPT_PATH,
    super::console::CONVERSATIONS_SCRIPT_PATH,
    super::console::STYLE_PATH,
    super::console::README_PATH,
];

/// SHA-256 digests of the accepted keys: comparing digests keeps the comparison's time
/// independent of the key's length and content.
#[derive(Clone, Default)]
pub struct ApiKeys(Vec<[u8; 32]>);

impl ApiKeys {
    pub fn new(keys: &[String]) -> ApiKeys {
        ApiKeys(keys.iter().map(|k| digest(k)).collect())
    }

    pub fn enabled(&self) -> bool {
        !self.0.is_empty()
    }

    fn accepts(&self, presented: &str) -> bool {
        let d = digest(presented);
        // Check every key so the time does not reveal which one matched.
        self.0
            .iter()
            .fold(false, |ok, k| ok | constant_time_eq(k, &d))
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(k) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(k.trim());
    }
    let auth = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let (scheme, token) = auth.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The 401 for a request that needs a key and presents none that is accepted.
pub fn refusal(keys: &ApiKeys, request: &Request) -> Option<Response> {
    // An inbound webhook's reply token is its credential (checked by its handler).
    let path = request.uri().path();
    if !keys.enabled() || EXEMPT.contains(&path) || path.starts_with(super::inbound::PREFIX) {
        return None;
    }
    match presented_key(request.headers()) {
        Some(key) if keys.accepts(key) => None,
        _ => {
            let mut response =
                ApiError::new(StatusCode::UNAUTHORIZED, "Invalid or missing API key")
                    .into_response();
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
            Some(response)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_from_either_header() {
        let keys = ApiKeys::new(&["k1".into(), "k2".into()]);
        let mut h = HeaderMap::new();
        h.insert("authorization", "bearer k2".parse().unwrap());
        assert!(keys.accepts(presented_key(&h).unwrap()));
        h.insert("x-api-key", "nope".parse().unwrap());
        assert!(
            !keys.accepts(presented_key(&h).unwrap()),
            "X-API-Key is checked first"
        );
        let mut h = HeaderMap::new();
        h.insert("authorization", "Basic k1".parse().unwrap());
        assert!(presented_key(&h).is_none());
    }
}
