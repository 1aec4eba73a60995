//! `POST /api/checks/execute`, HolmesGPT's health check, against the fake LLM and local fakes
//! of Slack, PagerDuty and a webhook receiver (`notification_fakes.rs`): the verdict from a
//! schema-enforced answer, pass / fail / error / timeout, notifications only for a failed
//! check in `alert` mode, each delivery's outcome, and hostile input.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::{TestApp, eventually, json_body, spawn_app_with};
use crate::notification_fakes::{Fakes, ROUTING_KEY};
use fake_llm::Step;

const SERVER_SLACK_TOKEN: &str = "xoxb-server-token-0451";
const HEADER_SECRET: &str = "hook-secret-9f2c";

async fn execute(app: &TestApp, body: &Value) -> (u16, Value) {
    let resp = app.post_raw("/api/checks/execute", body.to_string()).await;
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

/// The model's answer in the verdict's shape.
fn verdict(passed: bool, rationale: &str) -> Step {
    Step::text(&json!({"rationale": rationale, "passed": passed}).to_string())
}

/// An app whose notifications go to `fakes`, with a server-wide Slack token and channel.
async fn app_with(fakes: &Fakes) -> TestApp {
    spawn_app_with(&format!(
        "[checks]\nslack_api_base = \"{base}/api\"\npagerduty_events_base = \"{base}\"\n\
         slack_token = \"{SERVER_SLACK_TOKEN}\"\nslack_channel = \"#server-default\"\n",
        base = fakes.base
    ))
    .await
}

#[tokio::test]
async fn a_passing_check_is_pass_its_answer_held_to_the_verdict_schema() {
    let fakes = Fakes::start().await;
    let app = app_with(&fakes).await;
    app.llm
        .push(verdict(true, "All 3 pods in payments are Running."));
    let (status, body) = execute(
        &app,
        &json!({"name": "payments-pods", "query": "Are all pods in namespace payments running?",
                "mode": "alert", "destinations": ["slack"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "pass", "{body}");
    assert_eq!(body["rationale"], "All 3 pods in payments are Running.");
    assert_eq!(
        body["message"],
        "Check passed. All 3 pods in payments are Running."
    );
    assert_eq!(body["model_used"], "fake");
    assert!(
        body["error"].is_null() && body["notifications"].is_null(),
        "{body}"
    );
    assert!(body["duration"].as_f64().unwrap() > 0.0);
    // The core sent the verdict's schema and the question as the user's message.
    let sent = &app.llm.requests()[0];
    assert_eq!(
        sent["response_format"]["json_schema"]["name"],
        "check_response"
    );
    let schema = &sent["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["required"], json!(["rationale", "passed"]));
    let messages = sent["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "user" && m["content"].to_string().contains("namespace payments"))
    );
    assert!(
        messages[0]["content"]
            .to_string()
            .contains("automated health check")
    );
    // A passing check notifies nobody, in alert mode too.
    assert!(fakes.got().is_empty(), "{:?}", fakes.got());
}

#[tokio::test]
async fn a_failing_check_in_alert_mode_notifies_each_destination_in_its_documented_shape() {
    let fakes = Fakes::start().await;
    let app = app_with(&fakes).await;
    // The model's words try to break out of the webhook's template and to ping a Slack channel.
    let rationale =
        "2 of 3 pods CrashLoopBackOff <!channel>. {{check_name}}\", \"injected\": true, \"x\": \"";
    app.llm.push(verdict(false, rationale));
    let body = json!({
        "name": "payments-pods",
        "query": "Are all pods in namespace payments running?",
        "mode": "alert",
        "timeout": 20,
        "destinations": [
            {"type": "slack", "config": {"channel": "#alerts"}},
            {"type": "pagerduty", "config": {"routing_key": ROUTING_KEY}},
            {"type": "webhook", "config": {"url": format!("{}/hook/plain?token=in-the-path", fakes.base)}},
            {"type": "webhook", "config": {
                "url": format!("{}/hook/templated", fakes.base),
                "headers": {"Authorization": format!("Bearer {HEADER_SECRET}"), "X-Team": "payments"},
                "payload_template": {"text": "[{{status}}] {{check_name}}: {{analysis}}", "fixed": 7,
                                     "nested": ["{{source_type}}", "{{unknown}}"]}}},
        ],
    });
    let (status, answer) = execute(&app, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "fail", "{answer}");
    assert_eq!(answer["message"], format!("Check failed. {rationale}"));
    let notes = answer["notifications"].as_array().unwrap();
    let kinds: Vec<&str> = notes.iter().map(|n| n["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["slack", "pagerduty", "webhook", "webhook"]);
    for n in notes {
        assert_eq!(n["status"], "sent", "{n}");
        assert!(n["error"].is_null(), "{n}");
    }
    assert_eq!(notes[0]["channel"], "#alerts");
    // A webhook is named by its origin: its path and query may be credentials.
    assert_eq!(notes[2]["channel"], fakes.base);

    let slack = fakes.to("/api/chat.postMessage");
    assert_eq!(slack.len(), 1);
    assert_eq!(slack[0].verdict, "ok");
    assert_eq!(
        slack[0].headers["authorization"],
        format!("Bearer {SERVER_SLACK_TOKEN}")
    );
    assert_eq!(slack[0].body["channel"], "#alerts");
    let slack_text = slack[0].body["text"].as_str().unwrap();
    assert!(slack_text.contains("payments-pods"), "{slack_text}");
    assert!(
        slack_text.contains("&lt;!channel&gt;") && !slack_text.contains("<!channel>"),
        "{slack_text}"
    );

    let pd = fakes.to("/v2/enqueue");
    assert_eq!(pd.len(), 1);
    assert_eq!(pd[0].verdict, "ok", "{}", pd[0].body);
    assert_eq!(pd[0].body["routing_key"], ROUTING_KEY);
    assert_eq!(pd[0].body["event_action"], "trigger");
    assert_eq!(pd[0].body["payload"]["severity"], "error");
    assert!(
        pd[0].body["payload"]["summary"]
            .as_str()
            .unwrap()
            .contains("payments-pods")
    );

    let plain = fakes.to("/hook/plain");
    assert_eq!(plain.len(), 1);
    assert_eq!(
        plain[0].body,
        json!({"check_name": "payments-pods", "status": "fail", "analysis": rationale,
               "source_type": "HealthCheck", "url": ""})
    );
    let templated = fakes.to("/hook/templated");
    assert_eq!(templated.len(), 1);
    let t = &templated[0];
    assert_eq!(
        t.headers["authorization"],
        format!("Bearer {HEADER_SECRET}")
    );
    assert_eq!(t.headers["x-team"], "payments");
    assert!(
        t.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    // The template's shape, the model's text inside one string, never read again.
    assert_eq!(
        t.body,
        json!({"text": format!("[fail] payments-pods: {rationale}"), "fixed": 7,
               "nested": ["HealthCheck", "{{unknown}}"]})
    );
    // No credential comes back in the answer.
    let text = answer.to_string();
    for secret in [
        SERVER_SLACK_TOKEN,
        ROUTING_KEY,
        HEADER_SECRET,
        "in-the-path",
    ] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

#[tokio::test]
async fn monitor_mode_never_notifies_and_failed_deliveries_are_reported_not_raised() {
    let fakes = Fakes::start().await;
    let app = app_with(&fakes).await;
    app.llm
        .push(verdict(false, "the deployment has 0 ready replicas"));
    let (status, answer) = execute(
        &app,
        &json!({"query": "Is checkout available?", "destinations": ["slack",
            {"type": "webhook", "config": {"url": format!("{}/hook/x", fakes.base)}}]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "fail");
    assert!(answer["notifications"].is_null(), "{answer}");
    assert!(fakes.got().is_empty());

    // Alert mode: Slack refuses the channel with 200 + ok:false (a failure), a receiver
    // answers 500, a name alone uses the server's Slack settings, and PagerDuty refuses a key
    // of the wrong length: each is its own outcome; the verdict stands.
    app.llm
        .push(verdict(false, "the deployment has 0 ready replicas"));
    let (status, answer) = execute(
        &app,
        &json!({"query": "Is checkout available?", "mode": "alert", "destinations": [
            {"type": "slack", "config": {"channel": "#nope", "token": "xoxb-request-token-77"}},
            {"type": "webhook", "config": {"url": format!("{}/hook/fail", fakes.base)}},
            "slack",
            {"type": "pagerduty", "config": {"integration_key": "short-key-0001"}},
        ]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "fail");
    let notes = answer["notifications"].as_array().unwrap();
    assert_eq!(notes[0]["status"], "failed", "{answer}");
    assert!(
        notes[0]["error"]
            .as_str()
            .unwrap()
            .contains("channel_not_found")
    );
    assert_eq!(notes[1]["status"], "failed");
    assert!(
        notes[1]["error"].as_str().unwrap().contains("HTTP 500"),
        "{answer}"
    );
    assert_eq!(notes[2]["status"], "sent");
    assert_eq!(notes[2]["channel"], "#server-default");
    assert_eq!(notes[3]["status"], "failed");
    assert!(
        notes[3]["error"].as_str().unwrap().contains("routing_key"),
        "{answer}"
    );
    let slack = fakes.to("/api/chat.postMessage");
    assert_eq!(
        slack[0].headers["authorization"],
        "Bearer xoxb-request-token-77"
    );
    let text = answer.to_string();
    assert!(
        !text.contains("xoxb-") && !text.contains("short-key-0001"),
        "{text}"
    );
}

/// A receiver that answers with a body that never ends is read up to a cap, not until the
/// delivery times out: its status and the start of its answer are reported.
#[tokio::test]
async fn a_receiver_answering_without_end_is_read_only_up_to_a_cap() {
    let fakes = Fakes::start().await;
    let app = spawn_app_with("[checks]\nnotification_timeout_secs = 5\n").await;
    app.llm.push(verdict(false, "the queue is stuck"));
    let (status, answer) = execute(
        &app,
        &json!({"query": "Is the queue draining?", "mode": "alert", "destinations": [
            {"type": "webhook", "config": {"url": format!("{}/hook/endless", fakes.base)}}]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let error = answer["notifications"][0]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.contains("HTTP 500") && error.contains("endless answer"),
        "{answer}"
    );
}

#[tokio::test]
async fn slack_without_a_token_is_skipped_and_says_what_to_set() {
    let app = spawn_app_with("").await;
    app.llm.push(verdict(false, "no"));
    let (status, answer) = execute(
        &app,
        &json!({"query": "q?", "mode": "alert", "destinations": ["slack"]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let note = &answer["notifications"][0];
    assert_eq!(note["status"], "skipped", "{answer}");
    assert!(note["error"].as_str().unwrap().contains("SLACK_TOKEN"));
}

#[tokio::test]
async fn a_check_past_its_timeout_is_error_and_its_llm_call_is_cancelled() {
    let fakes = Fakes::start().await;
    let app = app_with(&fakes).await;
    app.llm.push(Step::HangBeforeHeaders);
    let started = Instant::now();
    let (status, answer) = execute(
        &app,
        &json!({"query": "Is the queue drained?", "timeout": 1, "mode": "alert",
                "destinations": [{"type": "webhook", "config": {"url": format!("{}/hook/t", fakes.base)}}]}),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "error", "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("timeout of 1 s"),
        "{answer}"
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    let d = answer["duration"].as_f64().unwrap();
    assert!((1.0..3.0).contains(&d), "{d}");
    // No verdict, no page; the LLM call was dropped with the run.
    assert!(answer["notifications"].is_null());
    assert!(fakes.got().is_empty());
    eventually("the LLM call cancelled", Duration::from_secs(5), || async {
        app.llm.cancellations() >= 1
    })
    .await;
}

#[tokio::test]
async fn a_model_that_will_not_answer_json_is_error_not_fail() {
    let fakes = Fakes::start().await;
    let app = app_with(&fakes).await;
    // The answer, then the repair round's answer: prose both times.
    app.llm.push(Step::text("Everything looks fine to me."));
    app.llm.push(Step::text("Still fine, honestly."));
    let (status, answer) = execute(
        &app,
        &json!({"query": "Is DNS resolving?", "mode": "alert",
                "destinations": [{"type": "webhook", "config": {"url": format!("{}/hook/j", fakes.base)}}]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "error", "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("response_format"),
        "{answer}"
    );
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .starts_with("Check errored:")
    );
    assert_eq!(app.llm.request_count(), 2, "one repair round");
    assert!(fakes.got().is_empty(), "no verdict, no notification");
}

#[tokio::test]
async fn a_risky_tool_call_is_refused_and_the_model_reads_why() {
    let app = spawn_app_with("").await;
    let dir = crate::helpers::tool_writable_dir("check-approval");
    let marker = dir.join("restarted");
    app.llm.push(Step::tool(
        "risky",
        "bash",
        json!({"command": format!("touch {}", marker.display())}),
    ));
    app.llm
        .push(verdict(false, "could not restart; the check fails"));
    let (status, answer) = execute(&app, &json!({"query": "Restart payments; is it up?"})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "fail");
    assert!(!marker.exists(), "the refused command ran");
    let second = app.llm_messages(1);
    let tool = second
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool result");
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("rejected for security reasons"),
        "{tool}"
    );
}

#[tokio::test]
async fn bad_input_is_refused_precisely_before_the_model_is_asked() {
    let app = spawn_app_with("").await;
    let huge = "pods? ".repeat(4000);
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"name": "x"}), 422, "query"),
        (json!({"query": "   "}), 422, "`query` is empty"),
        (json!({"query": huge}), 422, "at most 10000"),
        (json!({"query": "q", "timeout": 0}), 422, "`timeout`"),
        (json!({"query": "q", "timeout": -5}), 422, "`timeout`"),
        (
            json!({"query": "q", "timeout": 86400}),
            422,
            "checks.max_timeout_secs",
        ),
        (json!({"query": "q", "timeout": "soon"}), 422, "timeout"),
        (json!({"query": "q", "mode": "panic"}), 422, "mode"),
        (json!({"query": "q", "model": "nope"}), 400, "nope"),
        (
            json!({"query": "q", "destinations": ["carrier-pigeon"]}),
            422,
            "unknown destination type",
        ),
        (
            json!({"query": "q", "destinations": [{"type": "slack", "config": {"chanel": "#a"}}]}),
            422,
            "config.chanel",
        ),
        (
            json!({"query": "q", "destinations": [{"type": "pagerduty"}]}),
            422,
            "routing_key",
        ),
        (
            json!({"query": "q", "destinations": [{"type": "webhook", "config": {}}]}),
            422,
            "config.url",
        ),
        (
            json!({"query": "q", "destinations": [{"type": "webhook", "config": {"url": "file:///etc/passwd"}}]}),
            422,
            "http or https",
        ),
        (
            json!({"query": "q", "destinations": [{"type": "webhook", "config": {"url": "http://169.254.169.254/latest/meta-data/"}}]}),
            422,
            "link-local",
        ),
        (
            json!({"query": "q", "destinations": [{"type": "webhook", "config": {"url": "http://[fd00:ec2::254]/"}}]}),
            422,
            "metadata",
        ),
        (
            json!({"query": "q", "destinations": [{"type": "webhook", "config": {"url": "http://metadata.google.internal/computeMetadata/v1/"}}]}),
            422,
            "metadata",
        ),
        (
            json!({"query": "q", "destinations": [{"type": "webhook", "config": {"url": "http://user:pw@example.com/"}}]}),
            422,
            "credentials",
        ),
        (
            json!({"query": "q", "destinations": [{"type": "webhook", "config": {"url": "http://example.com/", "headers": {"Authorization": 5}}}]}),
            422,
            "config.headers.Authorization",
        ),
        (
            json!({"query": "q", "destinations": ["slack", "slack", "slack", "slack", "slack", "slack", "slack", "slack", "slack", "slack", "slack"]}),
            422,
            "at most 10",
        ),
    ];
    for (body, expected, says) in cases {
        let (status, answer) = execute(&app, &body).await;
        assert_eq!(status, expected, "{body} → {answer}");
        let detail = answer["detail"].to_string();
        assert!(detail.contains(says), "{body}: `{says}` not in {detail}");
    }
    let resp = app
        .post_raw("/api/checks/execute", "{\"query\": ".into())
        .await;
    assert_eq!(resp.status(), 400);
    assert_eq!(app.llm.request_count(), 0, "the model was asked nothing");
}

#[tokio::test]
async fn checks_need_the_api_key() {
    let app = spawn_app_with("[server]\napi_keys = [\"check-key-1\"]\n").await;
    let resp = app
        .post_raw("/api/checks/execute", json!({"query": "q"}).to_string())
        .await;
    assert_eq!(resp.status(), 401);
    app.llm.push(verdict(true, "fine"));
    let resp = app
        .client
        .post(app.url("/api/checks/execute"))
        .header("X-API-Key", "check-key-1")
        .json(&json!({"query": "q"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(json_body(resp).await["status"], "pass");
}
