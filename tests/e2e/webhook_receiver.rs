//! A webhook receiver on loopback for the tests: it records every request (verifying its
//! signature with its own HMAC), and answers as scripted — 200, an error status, 429 with
//! `Retry-After`, a redirect, or never. It can be down (its port closed) and come back on the
//! same port.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::helpers::eventually;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// How the receiver answers a request.
#[derive(Debug, Clone)]
pub enum Answer {
    Ok,
    Status(u16),
    /// 429 with `Retry-After: N`.
    TooMany(u64),
    /// 307 to another place (which must never be followed).
    Redirect(String),
    /// Never answers.
    Hang,
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Got {
    pub path: String,
    pub delivery: String,
    pub sequence: u64,
    pub token: Option<String>,
    pub signature: Option<String>,
    /// The signature matches the receiver's own HMAC of the body.
    pub signature_ok: bool,
    pub raw: Bytes,
    pub body: Value,
    pub at: Instant,
    pub headers: HeaderMap,
}

struct Shared {
    script: Mutex<VecDeque<Answer>>,
    default: Mutex<Answer>,
    got: Mutex<Vec<Got>>,
    secret: Vec<u8>,
}

pub struct Receiver {
    pub port: u16,
    shared: Arc<Shared>,
    server: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Receiver {
    /// A receiver whose port is reserved but closed: connections are refused until `start`.
    pub fn down(secret: &str) -> Receiver {
        Receiver {
            port: crate::helpers::free_port(),
            shared: Arc::new(Shared {
                script: Mutex::default(),
                default: Mutex::new(Answer::Ok),
                got: Mutex::default(),
                secret: secret.as_bytes().to_vec(),
            }),
            server: Mutex::new(None),
        }
    }

    pub async fn up(secret: &str) -> Receiver {
        let receiver = Receiver::down(secret);
        receiver.start().await;
        receiver
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Listens on its port (again).
    pub async fn start(&self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("the receiver's port is free");
        let shared = self.shared.clone();
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri, headers, body| {
            let shared = shared.clone();
            async move { answer(shared, uri.path().to_owned(), headers, body).await }
        });
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        *self.server.lock().unwrap() = Some(server);
    }

    /// Closes its port (requests in progress are left as they are).
    pub fn stop(&self) {
        if let Some(server) = self.server.lock().unwrap().take() {
            server.abort();
        }
    }

    /// The next requests are answered so, in order; then `default`.
    pub fn script(&self, answers: Vec<Answer>) {
        self.shared.script.lock().unwrap().extend(answers);
    }

    pub fn set_default(&self, answer: Answer) {
        *self.shared.default.lock().unwrap() = answer;
    }

    /// Every request so far, in arrival order.
    pub fn got(&self) -> Vec<Got> {
        self.shared.got.lock().unwrap().clone()
    }

    /// The first arrival of each delivery id, in arrival order: what a receiver that
    /// de-duplicates processes. A repeated id must repeat the same body, byte for byte.
    pub fn unique(&self) -> Vec<Got> {
        let mut seen: Vec<Got> = Vec::new();
        for got in self.got() {
            match seen.iter().find(|g| g.delivery == got.delivery) {
                Some(first) => assert_eq!(
                    first.raw, got.raw,
                    "delivery {} was sent twice with different bodies",
                    got.delivery
                ),
                None => seen.push(got),
            }
        }
        seen
    }

    /// Waits (up to `within`) until `done` holds for the de-duplicated deliveries.
    pub async fn wait_for(&self, within: Duration, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        eventually("the receiver to get what was expected", within, || async {
            let unique = self.unique();
            if done(&unique) {
                return Ok(unique);
            }
            let seen: Vec<(String, u64)> = unique
                .iter()
                .map(|g| (g.path.clone(), g.sequence))
                .collect();
            Err(format!("{seen:?}"))
        })
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn answer(shared: Arc<Shared>, path: String, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let signature = header("x-triage-signature");
    let mut mac = Hmac::<Sha256>::new_from_slice(&shared.secret).unwrap();
    mac.update(&body);
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let got = Got {
        path,
        delivery: header("x-triage-delivery").unwrap_or_default(),
        sequence: header("x-triage-sequence")
            .and_then(|s| s.parse().ok())
            .unwrap_or(u64::MAX),
        token: header("x-access-token"),
        signature_ok: signature.as_deref() == Some(format!("sha256={expected}").as_str()),
        signature,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw: body,
        at: Instant::now(),
        headers,
    };
    shared.got.lock().unwrap().push(got);
    let next = shared.script.lock().unwrap().pop_front();
    let next = next.unwrap_or_else(|| shared.default.lock().unwrap().clone());
    match next {
        Answer::Ok => (StatusCode::OK, r#"{"success": true}"#).into_response(),
        Answer::Status(code) => {
            (StatusCode::from_u16(code).unwrap(), "the receiver says no").into_response()
        }
        Answer::TooMany(secs) => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", secs.to_string())],
            "slow down",
        )
            .into_response(),
        Answer::Redirect(to) => {
            (StatusCode::TEMPORARY_REDIRECT, [("location", to)], "").into_response()
        }
        Answer::Hang => {
            std::future::pending::<()>().await;
            StatusCode::OK.into_response()
        }
    }
}
