//! Drive-by protection: a web page may not POST to triage from another origin, and a keyless
//! triage answers only names a DNS-rebinding page cannot use.

use serde_json::{Value, json};

use crate::helpers::{TestApp, json_body, spawn_app, spawn_app_with};
use fake_llm::Step;

/// A chat request as a page's `fetch` without a preflight sends it: `text/plain`.
async fn browser_post(app: &TestApp, origin: Option<&str>, host: Option<&str>) -> (u16, Value) {
    let mut req = app
        .client
        .post(app.url("/api/chat"))
        .header("content-type", "text/plain;charset=UTF-8")
        .body(json!({"ask": "q"}).to_string());
    if let Some(origin) = origin {
        req = req.header("origin", origin);
    }
    if let Some(host) = host {
        req = req.header("host", host);
    }
    let resp = req.send().await.expect("request to triage");
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

fn own_origin(app: &TestApp) -> String {
    app.base.clone()
}

#[tokio::test]
async fn a_foreign_origin_cannot_post_but_the_console_and_plain_clients_can() {
    let app = spawn_app().await;
    let (status, body) = browser_post(&app, Some("http://evil.example"), None).await;
    assert_eq!(status, 403, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("http://evil.example") && detail.contains("cors_allowed_origins"),
        "{detail}"
    );
    assert_eq!(
        app.llm.request_count(),
        0,
        "the refused request reached the LLM"
    );
    // Another port on the same host is another origin.
    let port = app.base.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    let neighbour = format!("http://127.0.0.1:{}", port.wrapping_add(1));
    assert_eq!(browser_post(&app, Some(&neighbour), None).await.0, 403);
    // The console posts from triage's own origin.
    app.llm.push(Step::text("same origin"));
    let (status, body) = browser_post(&app, Some(&own_origin(&app)), None).await;
    assert_eq!(
        (status, body["analysis"].as_str()),
        (200, Some("same origin"))
    );
    // No Origin: curl, SDKs, HolmesGPT clients; no Content-Type at all either.
    app.llm.push(Step::text("no origin"));
    let resp = app
        .client
        .post(app.url("/api/chat"))
        .body(json!({"ask": "q"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // Reading is not refused: a cross-origin page cannot see the answer without CORS.
    let resp = app
        .client
        .get(app.url("/api/model"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn a_configured_cors_origin_may_post() {
    let app =
        spawn_app_with("[server]\ncors_allowed_origins = [\"http://console.example\"]\n").await;
    app.llm.push(Step::text("allowed"));
    let (status, body) = browser_post(&app, Some("http://console.example"), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        browser_post(&app, Some("http://evil.example"), None)
            .await
            .0,
        403
    );
}

#[tokio::test]
async fn a_keyless_server_refuses_rebound_host_names() {
    let app = spawn_app_with("[server]\nallowed_hosts = [\"triage.internal\"]\n").await;
    // DNS rebinding: the page at evil.example:5050 now resolves to 127.0.0.1; its requests are
    // same-origin to the browser, and only the Host header tells.
    let rebound = "evil.example:5050";
    for origin in [Some("http://evil.example:5050"), None] {
        let (status, body) = browser_post(&app, origin, Some(rebound)).await;
        assert_eq!(status, 403, "{body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains(rebound) && detail.contains("server.allowed_hosts"),
            "{detail}"
        );
    }
    let resp = app
        .client
        .get(app.url("/api/info"))
        .header("host", rebound)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        403,
        "reads are refused too: rebinding reads answers"
    );
    // Loopback names, IP addresses and the configured names are answered.
    for host in [
        "localhost:5050",
        "app.localhost",
        "[::1]:1",
        "10.0.0.7:5050",
        "triage.internal",
    ] {
        app.llm.push(Step::text("ok"));
        assert_eq!(browser_post(&app, None, Some(host)).await.0, 200, "{host}");
    }
    assert_eq!(app.llm.request_count(), 5);
}

#[tokio::test]
async fn with_api_keys_the_host_is_not_checked() {
    // A rebinding page cannot know the key, so a keyed server answers any name (as behind an
    // ingress with whatever host name it has).
    let app = spawn_app_with("[server]\napi_keys = [\"k-123\"]\n").await;
    app.llm.push(Step::text("keyed"));
    let resp = app
        .client
        .post(app.url("/api/chat"))
        .header("host", "triage.example.com")
        .header("x-api-key", "k-123")
        .body(json!({"ask": "q"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // Without the key it is the usual 401.
    let (status, _) = browser_post(&app, None, Some("triage.example.com")).await;
    assert_eq!(status, 401);
}
