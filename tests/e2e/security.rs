//! Production safety: API keys, fail-closed start-up, secret masking, header passthrough,
//! CORS and TLS.

use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use triage::config::Settings;

use crate::helpers::{eventually, http_client, json_body, spawn_app_with, spawn_with_settings};
use fake_llm::{FakeLlm, Step};

const KEYS: &str = "[server]\napi_keys = [\"key-one-111\", \"key-two-222\"]\n";

#[tokio::test]
async fn api_keys_guard_everything_but_the_probes() {
    let app = spawn_app_with(KEYS).await;
    let chat = json!({"ask": "q"}).to_string();
    let post = |key: Option<(&'static str, String)>| {
        let mut req = app
            .client
            .post(app.url("/api/chat"))
            .header("content-type", "application/json")
            .body(chat.clone());
        if let Some((name, value)) = key {
            req = req.header(name, value);
        }
        req.send()
    };
    let resp = post(None).await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(
        json_body(resp).await,
        json!({"detail": "Invalid or missing API key"})
    );
    assert_eq!(
        post(Some(("x-api-key", "wrong".into())))
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        post(Some(("authorization", "Basic key-one-111".into())))
            .await
            .unwrap()
            .status(),
        401
    );
    app.llm.push(Step::text("a"));
    assert_eq!(
        post(Some(("x-api-key", "key-one-111".into())))
            .await
            .unwrap()
            .status(),
        200
    );
    app.llm.push(Step::text("b"));
    // Rotation: the second key works too, as a bearer token.
    assert_eq!(
        post(Some(("authorization", "Bearer key-two-222".into())))
            .await
            .unwrap()
            .status(),
        200
    );
    for path in [
        "/api/model",
        "/api/info",
        "/metrics",
        "/api/openapi.json",
        "/nope",
    ] {
        let resp = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 401, "{path}");
    }
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            app.client.get(app.url(path)).send().await.unwrap().status(),
            200,
            "{path}"
        );
    }
    // Crafted paths that merely contain an exempt route are not exempt.
    for raw in [
        "/healthz/../api/model",
        "/api/model?/healthz",
        "//healthz",
        "/healthz%2F..%2Fapi%2Fmodel",
        "/HEALTHZ",
    ] {
        let status = raw_get_status(&app.base, raw).await;
        assert_eq!(status, 401, "{raw}");
    }
    assert_eq!(app.llm.request_count(), 2);
}

/// Sends a request line verbatim (clients normalise paths; attackers do not).
async fn raw_get_status(base: &str, path: &str) -> u16 {
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// `triage serve` with `env` on a free port of every interface: its exit output, or `None`
/// once it answers /readyz (the child is then killed).
async fn serve_on_all_interfaces(env: &[(&str, &str)]) -> Option<std::process::Output> {
    let llm = FakeLlm::start().await;
    let port = crate::helpers::free_port();
    let config = crate::cli::config_for(&llm, "");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRIAGE_CONFIG", &config)
        // No HOME here: the conversation store must not land in the working tree.
        .env("XDG_DATA_HOME", crate::helpers::test_data_dir())
        .env("HOLMES_HOST", "0.0.0.0")
        .env("HOLMES_PORT", port.to_string())
        .envs(env.iter().copied())
        .arg("serve")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut server = cmd.spawn().unwrap();
    let client = http_client();
    // 30 s, as `wait_until_ready`: a debug build starting on a loaded machine takes seconds.
    let what = "triage serve to exit or become ready";
    let (client, ready) = (&client, &format!("http://127.0.0.1:{port}/readyz"));
    let exited = eventually(what, std::time::Duration::from_secs(30), || {
        let exited = server.try_wait().unwrap();
        async move {
            if exited.is_some() {
                return Some(exited);
            }
            let up = client
                .get(ready)
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            up.then_some(None)
        }
    })
    .await;
    let status = exited?;
    let mut output = server.wait_with_output().await.unwrap();
    output.status = status;
    Some(output)
}

#[tokio::test]
async fn refuses_to_start_open_to_the_network_without_a_key() {
    let refused = serve_on_all_interfaces(&[])
        .await
        .expect("refuses to serve 0.0.0.0 without a key");
    let err = crate::cli::text(&refused.stderr);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "a configuration error: {err}"
    );
    assert!(
        err.contains("HOLMES_UNSAFE_ALLOW_UNAUTHENTICATED=true"),
        "names the way out: {err}"
    );
    // The two ways to serve the network: a key, or saying it is meant.
    for env in [
        ("HOLMES_API_KEY", "k-123456"),
        ("HOLMES_UNSAFE_ALLOW_UNAUTHENTICATED", "true"),
    ] {
        let exited = serve_on_all_interfaces(&[env]).await;
        assert!(exited.is_none(), "{env:?}: {exited:?}");
    }
}

#[tokio::test]
async fn secrets_never_reach_the_llm_or_the_client() {
    let app = spawn_app_with("[security]\nsecrets = [\"s3cr3t-value-123\"]\n[models.fake]\napi_key = \"sk-model-key-999\"\n").await;
    app.llm.push(Step::tool(
        "leak",
        "bash",
        json!({"command": "echo token=s3cr3t-value-123"}),
    ));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    let data = body["tool_calls"][0]["result"]["data"].as_str().unwrap();
    assert_eq!(data.trim(), "token=<secret-hidden>");
    // The tool output the LLM reads is masked (the command itself is the model's own text).
    let sent = app.llm_messages(1);
    let tool_msg = sent.iter().find(|m| m["role"] == "tool").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !tool_msg.contains("s3cr3t-value-123") && tool_msg.contains("<secret-hidden>"),
        "{tool_msg}"
    );
    // A provider error that echoes the key.
    app.llm
        .push(Step::error(400, "bad request for key sk-model-key-999"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 500);
    let detail = body["detail"].as_str().unwrap();
    assert!(
        !detail.contains("sk-model-key-999") && detail.contains("<secret-hidden>"),
        "{detail}"
    );
}

#[tokio::test]
async fn only_allowed_headers_reach_tools() {
    // A stand-in Prometheus API that records the headers it receives.
    let seen: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
    let seen2 = seen.clone();
    let router = axum::Router::new().route(
        "/api/v1/query",
        axum::routing::get(move |headers: HeaderMap| {
            seen2.lock().unwrap().push(headers);
            async {
                axum::Json(
                    json!({"status": "success", "data": {"resultType": "vector", "result": []}}),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let prom = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let app = spawn_app_with(&format!(
        "{KEYS}[toolsets.prometheus]\nenabled = true\nurl = \"{prom}\"\ncheck_on_startup = false\nforward_headers = [\"X-Scope-OrgID\", \"Authorization\", \"Cookie\", \"X-API-Key\"]\n"
    ))
    .await;
    app.llm
        .push(Step::tool("p", "prometheus_query", json!({"query": "up"})));
    app.llm.push(Step::text("ok"));
    let resp = app
        .client
        .post(app.url("/api/chat"))
        .header("content-type", "application/json")
        .header("x-api-key", "key-one-111")
        .header("authorization", "Bearer key-two-222")
        .header("cookie", "session=abc")
        .header("x-scope-orgid", "tenant-a")
        .header("x-other", "not forwarded")
        .body(json!({"ask": "q"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let headers = seen.lock().unwrap().pop().expect("prometheus was queried");
    assert_eq!(headers["x-scope-orgid"], "tenant-a");
    assert!(
        headers.get("authorization").is_none(),
        "blocked header forwarded"
    );
    assert!(headers.get("cookie").is_none(), "blocked header forwarded");
    assert!(
        headers.get("x-other").is_none(),
        "unlisted header forwarded"
    );
}

/// The checks every request passes run in one order: origin (403), API key (401), then load
/// shedding and the body (413), then the query (422); each refusal carries a request id and
/// the `{"detail"}` body, and a preflight needs no key.
#[tokio::test]
async fn refusals_come_in_order_each_with_a_request_id() {
    let app = spawn_app_with(
        "[server]\napi_keys = [\"key-one-111\"]\nbody_limit_bytes = 2048\n\
         cors_allowed_origins = [\"http://console.example\"]\n",
    )
    .await;
    let big = "x".repeat(4096);
    let post = |path: &str, origin: Option<&'static str>, key: bool, body: String| {
        let mut req = app
            .client
            .post(app.url(path))
            .header("content-type", "application/json")
            .body(body);
        if let Some(origin) = origin {
            req = req.header("origin", origin);
        }
        if key {
            req = req.header("x-api-key", "key-one-111");
        }
        req.send()
    };
    let refused = |resp: reqwest::Response, status: u16, detail: &'static str| async move {
        assert_eq!(resp.status(), status, "{detail}");
        assert!(resp.headers().contains_key("x-request-id"), "{detail}");
        let body = json_body(resp).await;
        let text = body["detail"].as_str().unwrap_or_default().to_owned();
        assert!(text.contains(detail), "{text}");
    };
    // A foreign page without a key, with a body over the limit: the origin is refused first.
    let resp = post("/api/chat", Some("http://evil.example"), false, big.clone());
    refused(resp.await.unwrap(), 403, "Cross-origin request refused").await;
    // No key and a body over the limit: the key is checked before the body is read.
    let resp = post("/api/chat", None, false, big.clone());
    refused(resp.await.unwrap(), 401, "Invalid or missing API key").await;
    // A NUL in the query with a body over the limit: the body is refused first.
    let resp = post("/api/conversations?x=%00", None, true, big);
    refused(resp.await.unwrap(), 413, "Request body too large").await;
    let resp = post("/api/conversations?x=%00", None, true, "{}".into());
    refused(resp.await.unwrap(), 422, "NUL").await;
    // A method the route refuses still asks for the key first.
    let resp = app
        .client
        .delete(app.url("/api/chat"))
        .send()
        .await
        .unwrap();
    refused(resp, 401, "Invalid or missing API key").await;
    let resp = app
        .client
        .delete(app.url("/api/chat"))
        .header("x-api-key", "key-one-111")
        .send()
        .await
        .unwrap();
    refused(resp, 405, "DELETE is not accepted here").await;
    // A browser's preflight carries no key and is answered.
    let resp = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/api/chat"))
        .header("origin", "http://console.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type,x-api-key")
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    assert_eq!(
        resp.headers()["access-control-allow-origin"],
        "http://console.example"
    );
}

#[tokio::test]
async fn cors_is_off_by_default_and_follows_the_allow_list() {
    let preflight = |app: &crate::helpers::TestApp, origin: &'static str| {
        app.client
            .request(reqwest::Method::OPTIONS, app.url("/api/chat"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type,x-api-key")
            .send()
    };
    let closed = spawn_app_with("").await;
    let resp = preflight(&closed, "http://console.example").await.unwrap();
    assert!(resp.headers().get("access-control-allow-origin").is_none());
    let open =
        spawn_app_with("[server]\ncors_allowed_origins = [\"http://console.example\"]\n").await;
    let resp = preflight(&open, "http://console.example").await.unwrap();
    assert_eq!(
        resp.headers()["access-control-allow-origin"],
        "http://console.example"
    );
    let allowed = resp.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(allowed.contains("x-api-key") && allowed.contains("content-type"));
    // A browser resuming a conversation's event stream sends Last-Event-ID.
    assert!(allowed.contains("last-event-id"), "{allowed}");
    let resp = preflight(&open, "http://evil.example").await.unwrap();
    assert!(resp.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn serves_tls_from_pem_files() {
    let dir = crate::helpers::scratch().join(format!("tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = crate::helpers::self_signed_cert(&dir);
    let llm = FakeLlm::start().await;
    let settings = Settings::from_toml(&format!(
        "[server]\nhost = \"127.0.0.1\"\nport = 0\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n[toolsets.kubernetes]\nenabled = false\n[models.fake]\nmodel = \"openai/m\"\napi_base = \"{}\"\n",
        cert.display(),
        key.display(),
        llm.base_url()
    ))
    .unwrap();
    let app = spawn_with_settings(settings, llm).await;
    let https = app.base.replacen("http://", "https://", 1);
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let resp = client.get(format!("{https}/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    app.llm.push(Step::text("over TLS"));
    let resp = client
        .post(format!("{https}/api/chat"))
        .header("content-type", "application/json")
        .body(json!({"ask": "q", "stream": true}).to_string())
        .send()
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    assert!(text.contains("over TLS"));
    // Plain HTTP to the TLS port gets no HTTP answer.
    assert!(app.client.get(app.url("/healthz")).send().await.is_err());
    let _ = std::fs::remove_dir_all(dir);
}
