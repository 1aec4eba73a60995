//! Hostile clients, hostile check definitions and a hostile model against
//! `POST /api/checks/execute` and `POST /api/admin/reload*`: what `checks_api.rs` and
//! `admin_reload.rs` do not already cover. Each test asserts the behaviour triage must keep.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use triage::config::HolmesFiles;

use crate::helpers::{
    TestApp, eventually, json_body, scratch, spawn_app_reloadable, spawn_app_with,
};
use crate::notification_fakes::Fakes;
use fake_llm::{Step, When};

async fn execute(app: &TestApp, body: &Value) -> (u16, Value) {
    let resp = app.post_raw("/api/checks/execute", body.to_string()).await;
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

fn verdict(passed: bool, rationale: &str) -> Step {
    Step::text(&json!({"rationale": rationale, "passed": passed}).to_string())
}

fn webhook(url: String) -> Value {
    json!({"type": "webhook", "config": {"url": url}})
}

/// A receiver of our own for what `notification_fakes` does not answer: a 404 quoting the
/// request's path and query back (as many frameworks' default pages do), and a redirect.
#[derive(Clone, Default)]
struct Hits(Arc<Mutex<Vec<String>>>);

struct Receiver {
    base: String,
    hits: Hits,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn receiver() -> Receiver {
    async fn answer(State(hits): State<Hits>, uri: Uri, _h: HeaderMap, _b: Bytes) -> Response {
        let path = uri.path().to_owned();
        hits.0.lock().unwrap().push(path.clone());
        if path.starts_with("/redirect") {
            return (
                StatusCode::TEMPORARY_REDIRECT,
                [("location", "/internal/target")],
            )
                .into_response();
        }
        if path.starts_with("/internal") {
            return StatusCode::OK.into_response();
        }
        let quoted = uri.path_and_query().map(|p| p.as_str()).unwrap_or("");
        (StatusCode::NOT_FOUND, format!("Cannot POST {quoted}")).into_response()
    }
    let hits = Hits::default();
    let app = Router::new()
        .route("/{*rest}", post(answer))
        .with_state(hits.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Receiver { base, hits, server }
}

/// Every spelling of a metadata or non-receiver address a URL parser accepts is refused
/// before the model is asked anything: decimal, hex and short IPv4 forms, a trailing dot,
/// IPv4-mapped IPv6, upper case names, the unspecified addresses.
#[tokio::test]
async fn metadata_addresses_in_any_spelling_are_refused_before_the_check_runs() {
    let app = spawn_app_with("").await;
    for url in [
        "http://2852039166/latest/meta-data/",
        "http://0xa9fea9fe/",
        "http://169.254.43518/",
        "http://0251.0376.0251.0376/",
        "http://169.254.169.254./",
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[fe80::1]/",
        "http://METADATA.google.internal./",
        "http://metadata/",
        "http://instance-data.ec2.internal/",
        "http://100.100.100.200/",
        "http://0/",
        "http://0.0.0.0:8080/",
        "http://[::]/",
        "http://255.255.255.255/",
        "http://224.0.0.1/",
    ] {
        let (status, answer) = execute(
            &app,
            &json!({"query": "q?", "mode": "alert", "destinations": [webhook(url.to_owned())]}),
        )
        .await;
        assert_eq!(status, 422, "{url} → {answer}");
        assert!(
            answer["detail"]
                .as_str()
                .unwrap()
                .contains("destinations[0]"),
            "{url} → {answer}"
        );
    }
    assert_eq!(app.llm.request_count(), 0, "the model was asked");
}

/// A receiver answering with a redirect does not get the alert followed elsewhere: the
/// delivery fails with the status, and the redirect's target is never requested.
#[tokio::test]
async fn a_redirecting_receiver_is_not_followed() {
    let r = receiver().await;
    let app = spawn_app_with("").await;
    app.llm.push(verdict(false, "down"));
    let (status, answer) = execute(
        &app,
        &json!({"query": "q?", "mode": "alert", "destinations": [webhook(format!("{}/redirect", r.base))]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let note = &answer["notifications"][0];
    assert_eq!(note["status"], "failed", "{answer}");
    assert!(
        note["error"].as_str().unwrap().contains("HTTP 307"),
        "{answer}"
    );
    assert_eq!(*r.hits.0.lock().unwrap(), ["/redirect"]);
}

/// A webhook's path and query are credentials (Slack's incoming webhooks are one): a receiver
/// that quotes them back in its error page must not put them into the answer.
#[tokio::test]
async fn a_receiver_quoting_the_url_back_does_not_leak_its_path_or_query() {
    const PATH_SECRET: &str = "T0AAA/B0BBB/xyzPathSecret123";
    const QUERY_SECRET: &str = "q-token-55aa77";
    let r = receiver().await;
    let app = spawn_app_with("").await;
    app.llm.push(verdict(false, "down"));
    let (status, answer) = execute(
        &app,
        &json!({"query": "q?", "mode": "alert", "destinations": [
            webhook(format!("{}/services/{PATH_SECRET}?token={QUERY_SECRET}", r.base))]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let note = &answer["notifications"][0];
    assert_eq!(note["status"], "failed", "{answer}");
    let error = note["error"].as_str().unwrap();
    assert!(error.contains("HTTP 404"), "{error}");
    for secret in [PATH_SECRET, "xyzPathSecret123", QUERY_SECRET] {
        assert!(!answer.to_string().contains(secret), "{secret} in {answer}");
    }
}

/// Header values from a check cannot smuggle a second header or a second request: CR/LF and
/// NUL are refused; a header may not replace what the client sets from the body.
#[tokio::test]
async fn header_injection_through_a_webhooks_headers_is_refused() {
    let app = spawn_app_with("").await;
    for headers in [
        json!({"X-A": "ok\r\nX-Injected: 1"}),
        json!({"X-A": "ok\nHost: evil"}),
        json!({"X-A": "nul\u{0}"}),
        json!({"X-A\r\nX-B": "v"}),
        json!({"Bad Name": "v"}),
        json!({"Host": "evil.example"}),
        json!({"Transfer-Encoding": "chunked"}),
        json!({"Content-Length": "0"}),
        json!({"X-A": ["a", "b"]}),
    ] {
        let (status, answer) = execute(
            &app,
            &json!({"query": "q?", "mode": "alert", "destinations": [
                {"type": "webhook", "config": {"url": "http://127.0.0.1:9/x", "headers": headers}}]}),
        )
        .await;
        assert_eq!(status, 422, "{headers} → {answer}");
        assert!(
            answer["detail"]
                .as_str()
                .unwrap()
                .contains("config.headers"),
            "{headers} → {answer}"
        );
    }
    assert_eq!(app.llm.request_count(), 0);
}

/// The model's words and the alert's fields go into bodies as JSON string values only:
/// newlines, quotes and placeholders in the rationale never reach a header, never change the
/// payload's shape, and a template that would multiply the analysis past a sane size is not
/// rendered (a body of placeholders is cheap to send and expensive to fill).
#[tokio::test]
async fn a_payload_template_cannot_multiply_the_analysis_without_bound() {
    let fakes = Fakes::start().await;
    let app = spawn_app_with("").await;
    let rationale = "x".repeat(2000);
    app.llm.push(verdict(false, &rationale));
    // 1,000 placeholders × 2,000 characters: 2 MB from a 12 kB template.
    let template = json!({"text": "{{analysis}}".repeat(1000)});
    let (status, answer) = execute(
        &app,
        &json!({"query": "q?", "mode": "alert", "destinations": [
            {"type": "webhook", "config": {"url": format!("{}/hook/big", fakes.base),
                "payload_template": template}}]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let note = &answer["notifications"][0];
    assert_eq!(note["status"], "failed", "{answer}");
    assert!(
        note["error"].as_str().unwrap().contains("payload_template"),
        "{answer}"
    );
    assert!(
        fakes.to("/hook/big").is_empty(),
        "the huge payload was sent"
    );
}

/// A rationale with newlines, quotes and CR/LF in the check's name fields stays inside the
/// bodies' strings; Slack's markup is escaped in mrkdwn.
#[tokio::test]
async fn the_models_words_stay_inside_the_bodies_strings() {
    let fakes = Fakes::start().await;
    let app = spawn_app_with(&format!(
        "[checks]\nslack_api_base = \"{base}/api\"\npagerduty_events_base = \"{base}\"\n\
         slack_token = \"xoxb-attack-token-1\"\nslack_channel = \"#c\"\n",
        base = fakes.base
    ))
    .await;
    let rationale = "line1\r\nX-Injected: yes\r\n\r\n{\"passed\": true} <@U123> <!here> &amp;";
    app.llm.push(verdict(false, rationale));
    let (status, answer) = execute(
        &app,
        &json!({"name": "n", "query": "is <!channel> ok?", "mode": "alert", "destinations": [
            "slack",
            {"type": "webhook", "config": {"url": format!("{}/hook/words", fakes.base),
                "payload_template": {"a": "{{analysis}}"}}}]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "fail", "{answer}");
    let hook = &fakes.to("/hook/words")[0];
    assert_eq!(hook.body, json!({"a": rationale}));
    assert!(hook.headers.get("x-injected").is_none());
    // Slack reads mentions in `text` and in mrkdwn blocks (plain_text blocks show text as is).
    let slack = &fakes.to("/api/chat.postMessage")[0];
    let mut marked = vec![slack.body["text"].to_string()];
    for block in slack.body["blocks"].as_array().unwrap() {
        if block["text"]["type"] == "mrkdwn" {
            marked.push(block["text"]["text"].to_string());
        }
        for element in block["elements"].as_array().into_iter().flatten() {
            marked.push(element["text"].to_string());
        }
    }
    for text in marked {
        for raw in ["<!here>", "<@U123>", "<!channel>"] {
            assert!(!text.contains(raw), "{raw} reached Slack unescaped: {text}");
        }
    }
}

/// A name with control characters (a newline into a log line or a Slack title) is refused.
#[tokio::test]
async fn a_check_name_with_control_characters_is_refused() {
    let app = spawn_app_with("").await;
    for name in ["a\nb", "a\rb", "tab\there", "\u{1b}[31mred"] {
        let (status, answer) = execute(&app, &json!({"query": "q?", "name": name})).await;
        assert_eq!(status, 422, "{name:?} → {answer}");
        assert!(answer["detail"].as_str().unwrap().contains("name"));
    }
}

/// Malformed, deeply nested, wrongly typed and oversized bodies: each a precise 4xx, never a
/// panic, a hang or a model call.
#[tokio::test]
async fn hostile_bodies_are_refused_precisely() {
    let app = spawn_app_with("[server]\nbody_limit_bytes = 65536\n").await;
    let nested = format!(
        "{{\"query\": \"q\", \"destinations\": [{{\"type\": \"webhook\", \"config\": {{\"url\": \"http://127.0.0.1:9/\", \"payload_template\": {}1{}}}}}]}}",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let cases: Vec<(String, u16)> = vec![
        (nested, 400),
        ("[]".into(), 422),
        ("null".into(), 422),
        ("\"query\"".into(), 422),
        (json!({"query": 5}).to_string(), 422),
        (json!({"query": ["q"]}).to_string(), 422),
        (json!({"query": "q", "timeout": 1.5}).to_string(), 422),
        (json!({"query": "q", "timeout": 1e300}).to_string(), 422),
        (json!({"query": "q", "timeout": u64::MAX}).to_string(), 422),
        (json!({"query": "q", "timeout": i64::MIN}).to_string(), 422),
        (json!({"query": "q", "timeout": null}).to_string(), 422),
        (json!({"query": "q", "mode": null}).to_string(), 422),
        (json!({"query": "q", "mode": "ALERT"}).to_string(), 422),
        (
            json!({"query": "q", "destinations": {"type": "slack"}}).to_string(),
            422,
        ),
        (json!({"query": "q", "destinations": [5]}).to_string(), 422),
        (
            json!({"query": "q", "destinations": [{"type": 5}]}).to_string(),
            422,
        ),
        (
            json!({"query": "q", "destinations": [{"type": "slack", "config": []}]}).to_string(),
            422,
        ),
        (
            json!({"query": "q", "destinations": [{"type": "slack", "extra": 1}]}).to_string(),
            422,
        ),
        (json!({"query": "q", "model": 7}).to_string(), 422),
        ("{\"query\": \"q\", \"query\": \"r\"}".into(), 422),
        ("{\"query\": \"\\ud800\"}".into(), 400),
        (format!("{{\"query\": \"{}\"}}", "a".repeat(70_000)), 413),
    ];
    for (body, expected) in cases {
        let resp = app.post_raw("/api/checks/execute", body.clone()).await;
        let status = resp.status().as_u16();
        let answer = json_body(resp).await;
        let shown: String = body.chars().take(120).collect();
        assert_eq!(status, expected, "{shown} → {answer}");
        assert!(!answer["detail"].is_null(), "{shown} → {answer}");
    }
    assert_eq!(app.llm.request_count(), 0, "the model was asked");
}

/// A page in a browser cannot make triage run a check (and notify, with the server's Slack
/// token) or reload: a cross-origin POST is refused before anything runs, `text/plain`
/// (no preflight) and `null` origins included.
#[tokio::test]
async fn a_foreign_page_cannot_run_checks_or_reload() {
    let app = spawn_app_with("[admin]\nenabled = true\n").await;
    for (path, body) in [
        (
            "/api/checks/execute",
            json!({"query": "q", "mode": "alert", "destinations": ["slack"]}).to_string(),
        ),
        ("/api/admin/reload", String::new()),
        ("/api/admin/reload/models", String::new()),
        ("/api/admin/reload/toolsets", String::new()),
    ] {
        for origin in ["http://evil.example", "null"] {
            let resp = app
                .client
                .post(app.url(path))
                .header("origin", origin)
                .header("content-type", "text/plain;charset=UTF-8")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 403, "{path} from {origin}");
        }
        // A rebinding page's Host on a keyless server.
        let resp = app
            .client
            .post(app.url(path))
            .header("host", "rebound.example:5050")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 403, "{path} with a foreign Host");
    }
    assert_eq!(app.llm.request_count(), 0);
}

/// With API keys, a wrong, empty or almost-right key is refused on every route of both doors,
/// and the admin API stays 404 when off even with the right key.
#[tokio::test]
async fn forged_keys_are_refused_and_the_admin_api_is_off_by_default() {
    let app = spawn_app_with("[server]\napi_keys = [\"real-key-12345\"]\n").await;
    for path in [
        "/api/checks/execute",
        "/api/admin/reload",
        "/api/admin/reload/models",
        "/api/admin/reload/toolsets",
    ] {
        for (header, value) in [
            ("x-api-key", "real-key-1234"),
            ("x-api-key", "real-key-123456"),
            ("x-api-key", ""),
            ("x-api-key", "REAL-KEY-12345"),
            ("authorization", "Bearer "),
            ("authorization", "Basic cmVhbC1rZXktMTIzNDU="),
        ] {
            let resp = app
                .client
                .post(app.url(path))
                .header(header, value)
                .body(json!({"query": "q"}).to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 401, "{path} {header}: {value}");
        }
    }
    for path in ["/api/admin/reload", "/api/admin/reload/models"] {
        let resp = app
            .client
            .post(app.url(path))
            .header("x-api-key", "real-key-12345")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{path}: the admin API is on by default");
    }
    assert_eq!(app.llm.request_count(), 0);
}

/// A hostile model that writes a configured secret with JSON escapes gets past masking of
/// the raw answer; the verdict read from it must be masked again, in the response and in
/// every notification body.
#[tokio::test]
async fn a_secret_spelled_with_json_escapes_is_masked_in_the_verdict_and_the_notifications() {
    const SECRET: &str = "s3cr3t-token-value-42";
    let fakes = Fakes::start().await;
    let app = spawn_app_with(&format!("[security]\nsecrets = [\"{SECRET}\"]\n")).await;
    // `\u0074` is `t`: the raw text does not hold the secret, the parsed rationale does.
    app.llm.push(Step::text(
        r#"{"rationale": "found s3cr3\u0074-token-value-42 and s3cr3t-token-value-42 in env", "passed": false}"#,
    ));
    let (status, answer) = execute(
        &app,
        &json!({"query": "q?", "mode": "alert", "destinations": [
            webhook(format!("{}/hook/leak", fakes.base)),
            {"type": "webhook", "config": {"url": format!("{}/hook/leak-t", fakes.base),
                "payload_template": {"t": "{{analysis}}"}}}]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "fail", "{answer}");
    assert!(!answer.to_string().contains(SECRET), "{answer}");
    assert!(
        answer["rationale"]
            .as_str()
            .unwrap()
            .contains("<secret-hidden>"),
        "{answer}"
    );
    for got in fakes.got() {
        assert!(
            !got.body.to_string().contains(SECRET),
            "{}: {}",
            got.path,
            got.body
        );
    }
    assert_eq!(fakes.got().len(), 2);
}

/// Answers that break the verdict's schema are `error`, never a `pass` or a page: a string
/// `passed`, a missing field, extra fields, an array, a huge answer.
#[tokio::test]
async fn answers_that_break_the_verdict_schema_are_error_and_notify_nobody() {
    let fakes = Fakes::start().await;
    let app = spawn_app_with("").await;
    let huge = format!("{{\"rationale\": \"{}\"", "z".repeat(300_000));
    for bad in [
        r#"{"rationale": "ok", "passed": "false"}"#.to_owned(),
        r#"{"rationale": "ok"}"#.to_owned(),
        r#"[{"rationale": "ok", "passed": false}]"#.to_owned(),
        r#"{"rationale": 5, "passed": false}"#.to_owned(),
        r#"{"rationale": "ok", "passed": null}"#.to_owned(),
        huge,
    ] {
        // The answer and the repair round's answer.
        app.llm.push(Step::text(&bad));
        app.llm.push(Step::text(&bad));
        let (status, answer) = execute(
            &app,
            &json!({"query": "q?", "mode": "alert", "destinations": [webhook(format!("{}/hook/s", fakes.base))]}),
        )
        .await;
        let shown: String = bad.chars().take(60).collect();
        assert_eq!(status, 200, "{shown} → {answer}");
        assert_eq!(answer["status"], "error", "{shown} → {answer}");
        assert!(answer["notifications"].is_null(), "{shown}");
    }
    assert!(
        fakes.got().is_empty(),
        "an unreadable verdict paged someone"
    );
}

/// The model cannot reach a notifier itself: a tool call that would POST to the receiver is a
/// command needing approval, refused in a check, and the receiver sees nothing but the real
/// notification.
#[tokio::test]
async fn a_tool_call_aimed_at_the_receiver_does_not_reach_it() {
    let fakes = Fakes::start().await;
    let app = spawn_app_with("").await;
    app.llm.push(Step::tool(
        "c1",
        "bash",
        json!({"command": format!("curl -s -X POST -d '{{}}' {}/hook/from-tool", fakes.base)}),
    ));
    app.llm.push(verdict(true, "all good"));
    let (status, answer) = execute(
        &app,
        &json!({"query": "q?", "mode": "alert", "destinations": [webhook(format!("{}/hook/real", fakes.base))]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "pass");
    assert!(fakes.got().is_empty(), "{:?}", fakes.got());
}

/// A client that leaves while its check runs stops the check: the LLM call is cancelled at
/// once, not at the check's timeout.
#[tokio::test]
async fn a_client_that_leaves_cancels_its_check() {
    let app = spawn_app_with("").await;
    app.llm.push(Step::HangBeforeHeaders);
    let request = {
        let client = app.client.clone();
        let url = app.url("/api/checks/execute");
        tokio::spawn(async move {
            client
                .post(url)
                .json(&json!({"query": "q?", "timeout": 300}))
                .send()
                .await
        })
    };
    eventually("the check's LLM call", Duration::from_secs(10), || async {
        app.llm.request_count() == 1
    })
    .await;
    crate::helpers::assert_leaving_cancels(&app, || request.abort(), "check").await;
}

fn scratch_file(name: &str, text: &str) -> PathBuf {
    let dir = scratch().join(format!("attack-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file
}

fn model_list(llm_base: &str, key: &str, id: &str) -> String {
    format!("{key}:\n  model: openai/{id}\n  api_base: {llm_base}\n")
}

/// A check in flight during a model reload finishes on the model it started with; reloads
/// racing each other all answer, and the last file read is what serves.
#[tokio::test]
async fn reloads_racing_a_running_check_and_each_other() {
    let list = scratch_file(
        "model_list.yaml",
        "placeholder: {model: openai/p, api_base: \"http://127.0.0.1:9/v1\"}\n",
    );
    let extras = format!(
        "model_list_file = \"{}\"\n[admin]\nenabled = true\n",
        list.display()
    );
    let app = spawn_app_reloadable(HolmesFiles::default(), &[&extras]).await;
    let base = app.llm.base_url();
    let post = |path: &'static str| {
        let client = app.client.clone();
        let url = app.url(path);
        async move {
            let resp = client.post(url).send().await.unwrap();
            (resp.status().as_u16(), json_body(resp).await)
        }
    };
    std::fs::write(&list, model_list(&base, "checker", "old-model")).unwrap();
    assert_eq!(post("/api/admin/reload/models").await.0, 200);
    let old = app.llm.when(When::model("old-model"));
    old.push(Step::Paced {
        before: Duration::from_millis(2500),
        between_chunks: Duration::ZERO,
        step: Box::new(verdict(true, "answered by the old model")),
    });
    let check = {
        let client = app.client.clone();
        let url = app.url("/api/checks/execute");
        tokio::spawn(async move {
            let resp = client
                .post(url)
                .json(&json!({"query": "q?", "model": "checker", "timeout": 30}))
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), json_body(resp).await)
        })
    };
    eventually("the old model's call", Duration::from_secs(10), || async {
        old.request_count() == 1
    })
    .await;
    std::fs::write(&list, model_list(&base, "checker", "new-model")).unwrap();
    let racing: Vec<_> = (0..6)
        .map(|i| {
            tokio::spawn(post(match i % 3 {
                0 => "/api/admin/reload",
                1 => "/api/admin/reload/models",
                _ => "/api/admin/reload/toolsets",
            }))
        })
        .collect();
    for r in racing {
        let (status, body) = r.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
    let (status, answer) = check.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "pass", "{answer}");
    assert_eq!(answer["rationale"], "answered by the old model");
    let new = app.llm.when(When::model("new-model"));
    new.push(verdict(false, "answered by the new model"));
    let (status, answer) = execute(&app, &json!({"query": "q?", "model": "checker"})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["rationale"], "answered by the new model", "{answer}");
}

/// A broken model list answers 500 without quoting the file's secrets back: a model entry
/// holding an API key that fails to read.
#[tokio::test]
async fn a_failed_reload_does_not_quote_the_files_secrets() {
    const KEY: &str = "sk-reload-secret-0987654321";
    let list = scratch_file("model_list.yaml", "");
    let extras = format!(
        "model_list_file = \"{}\"\n[admin]\nenabled = true\n",
        list.display()
    );
    std::fs::write(
        &list,
        "placeholder: {model: openai/p, api_base: \"http://127.0.0.1:9/v1\"}\n",
    )
    .unwrap();
    let app = spawn_app_reloadable(HolmesFiles::default(), &[&extras]).await;
    for broken in [
        format!("m:\n  model: openai/x\n  api_key: {KEY}\n  temperature: {KEY}\n"),
        format!("m:\n  model: openai/x\n  api_key: [{KEY}\n"),
        format!("m:\n  model: openai/x\n  api_base: \"http://{KEY}@[::1\"\n"),
    ] {
        std::fs::write(&list, &broken).unwrap();
        let resp = app
            .client
            .post(app.url("/api/admin/reload/models"))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let body = json_body(resp).await;
        assert_eq!(status, 500, "{broken} → {body}");
        assert!(!body.to_string().contains(KEY), "{broken} → {body}");
    }
}
