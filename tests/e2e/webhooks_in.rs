//! Webhooks in: a conversation that waits gets a reply token in its outbound snapshot (and in
//! the `approval_required` event's delivery, never in the log); the approval system answers
//! with it and the run continues. Each status code, a duplicate, an early event, token
//! rotation, the failed-attempt limit, the audit event; on SQLite and PostgreSQL.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Connection;

use crate::conversations_pg::fresh_database;
use crate::helpers::{TestApp, eventually, json_body, spawn_app_with, tool_writable_dir};
use crate::webhook_receiver::{Got, Receiver};
use crate::webhooks_out::{SECRET, receiver_toml};
use fake_llm::Step;

async fn post(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let resp = app.post_raw(path, body.to_string()).await;
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

/// An inbound event with the token as a bearer token.
pub(crate) async fn answer(
    app: &TestApp,
    id: &str,
    state: &str,
    token: &str,
    body: Value,
) -> (u16, Value) {
    let resp = app
        .client
        .post(app.url(&format!("/api/webhook/{id}/{state}")))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

pub(crate) async fn wait_status(app: &TestApp, id: &str, status: &str) {
    let what = format!("conversation {id} to become {status}");
    eventually(&what, Duration::from_secs(10), || async {
        let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
        info["execution_status"] == status
    })
    .await
}

/// The reply token of the `n`-th snapshot in `status` the receiver got for `id`.
pub(crate) async fn token_of(receiver: &Receiver, id: &str, status: &str, n: usize) -> String {
    let snapshot = |got: &[Got]| {
        got.iter()
            .filter(|g| g.body["id"] == id && g.body["execution_status"] == status)
            .nth(n)
            .map(|g| g.body["reply_token"].clone())
    };
    let got = receiver
        .wait_for(Duration::from_secs(10), |got| snapshot(got).is_some())
        .await;
    let token = snapshot(&got).unwrap();
    token.as_str().expect("a reply token").to_owned()
}

pub(crate) async fn app_with(receiver: &Receiver, database: Option<&str>) -> TestApp {
    let store = database
        .map(crate::conversations_pg::pg_store_toml)
        .unwrap_or_default();
    spawn_app_with(&format!(
        "{store}{}",
        receiver_toml(&receiver.url(), "flush_delay_secs = 0.05")
    ))
    .await
}

/// A conversation whose risky call waits for an approval; returns its id and the file the
/// call creates.
async fn waiting(app: &TestApp) -> (String, std::path::PathBuf) {
    let dir = tool_writable_dir("webhook-approval");
    let file = dir.join("approved");
    app.llm.push(Step::tool(
        "risky",
        "bash",
        json!({"command": format!("touch {}", file.display())}),
    ));
    app.llm.push(Step::text("Restarted."));
    let (status, created) = post(
        app,
        "/api/conversations",
        json!({"initial_message": {"content": "restart the deployment"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    wait_status(app, &id, "waiting_for_confirmation").await;
    (id, file)
}

#[tokio::test]
async fn an_approval_arrives_by_webhook_and_the_run_continues() {
    let receiver = Receiver::up(SECRET).await;
    approval_flow(&app_with(&receiver, None).await, &receiver).await;
}

#[tokio::test]
async fn an_approval_arrives_by_webhook_on_postgres() {
    let Some(database) = fresh_database().await else {
        return;
    };
    let receiver = Receiver::up(SECRET).await;
    approval_flow(&app_with(&receiver, Some(&database)).await, &receiver).await;
}

async fn approval_flow(app: &TestApp, receiver: &Receiver) {
    let (id, file) = waiting(app).await;
    let token = token_of(receiver, &id, "waiting_for_confirmation", 0).await;
    assert!(token.len() >= 22, "at least 128 bits: {token}");
    // The approval_required event's delivery carries it too; the stored log never does.
    let delivered: Vec<Value> = receiver
        .unique()
        .iter()
        .filter_map(|g| g.body.as_array().cloned())
        .flatten()
        .filter(|e| e["kind"] == "approval_required")
        .collect();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0]["payload"]["reply_token"], token.as_str());
    let (_, log) = app
        .get_json(&format!("/api/conversations/{id}/events/search?limit=100"))
        .await;
    assert!(!log.to_string().contains(&token), "the token is in the log");

    // Refusals: a wrong or missing token (the same answer), another state, no conversation.
    let approve = json!({"event_key": "approval_granted",
                         "data": {"approver": "jane@example.com", "comment": "go"}});
    let (status, body) = answer(
        app,
        &id,
        "waiting_for_confirmation",
        "guess",
        approve.clone(),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    let resp = app
        .post_raw(
            &format!("/api/webhook/{id}/waiting_for_confirmation"),
            approve.to_string(),
        )
        .await;
    assert_eq!(resp.status(), 401);
    assert_eq!(json_body(resp).await, body, "one answer for any bad token");
    let (status, _) = answer(app, &id, "paused", &token, approve.clone()).await;
    assert_eq!(status, 409);
    let unknown = uuid::Uuid::new_v4();
    let (status, _) = answer(app, &unknown.to_string(), "paused", &token, approve.clone()).await;
    assert_eq!(status, 404);
    assert!(!file.exists(), "nothing ran yet");

    // The approval: applied once, however often it is sent.
    let (status, first) = answer(
        app,
        &id,
        "waiting_for_confirmation",
        &token,
        approve.clone(),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert!(first["state"].is_string(), "{first}");
    wait_status(app, &id, "finished").await;
    assert!(file.exists(), "the approved call ran");
    let (status, again) = answer(app, &id, "waiting_for_confirmation", &token, approve).await;
    assert_eq!((status, &again), (200, &first));
    // Another key with the same token, once the state was left: not early, refused.
    let deny = json!({"event_key": "approval_denied"});
    let (status, body) = answer(app, &id, "waiting_for_confirmation", &token, deny).await;
    assert_eq!(status, 409, "{body}");
    let (_, results) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/search?kind=tool_calling_result"
        ))
        .await;
    let ran = results["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["result"]["status"] != "approval_required")
        .count();
    assert_eq!(ran, 1, "applied once: {results}");
    // Who approved it: the log says.
    let (_, audit) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/search?kind=webhook"
        ))
        .await;
    let audit: Vec<&Value> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["payload"])
        .collect();
    let outcomes: Vec<&str> = audit
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["not_in_state", "applied", "not_in_state"],
        "a 409, the approval, a 409"
    );
    let audit = audit[1];
    assert_eq!(audit["event_key"], "approval_granted");
    assert_eq!(audit["data"]["approver"], "jane@example.com");
    assert!(
        audit["sender"].as_str().unwrap().contains("127.0.0.1"),
        "{audit}"
    );
    assert_eq!(audit["outcome"], "applied");
    // The receiver heard the end.
    receiver
        .wait_for(Duration::from_secs(10), |got| {
            got.iter()
                .any(|g| g.body["id"] == id.as_str() && g.body["execution_status"] == "finished")
        })
        .await;
}

#[tokio::test]
async fn a_paused_conversation_resumes_takes_a_message_and_rotates_its_token() {
    let receiver = Receiver::up(SECRET).await;
    let app = app_with(&receiver, None).await;
    let slow = |id: &str| Step::Paced {
        before: Duration::from_millis(600),
        between_chunks: Duration::ZERO,
        step: Box::new(Step::tool(id, "bash", json!({"command": "echo step"}))),
    };
    app.llm.push(slow("s1"));
    app.llm.push(Step::text("Resumed and done."));
    let (_, created) = post(
        &app,
        "/api/conversations",
        json!({"confirmation_policy": {"kind": "NeverConfirm"},
               "initial_message": {"content": "look around"}}),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    wait_status(&app, &id, "running").await;
    post(&app, &format!("/api/conversations/{id}/pause"), json!({})).await;
    wait_status(&app, &id, "paused").await;
    let first = token_of(&receiver, &id, "paused", 0).await;

    // A key that means nothing when paused changes nothing.
    let (status, body) = answer(
        &app,
        &id,
        "paused",
        &first,
        json!({"event_key": "approval_granted"}),
    )
    .await;
    assert_eq!((status, body), (200, json!({"no_transition": true})));
    // `?token=` works as well as the header.
    let resp = app
        .post_raw(
            &format!("/api/webhook/{id}/paused?token={first}"),
            json!({"event_key": "resume"}).to_string(),
        )
        .await;
    assert_eq!(resp.status(), 200);
    wait_status(&app, &id, "finished").await;

    // Paused again: a new token; the old one is refused.
    app.llm.push(slow("s2"));
    app.llm.push(Step::text("Nodes are fine."));
    post(
        &app,
        &format!("/api/conversations/{id}/events"),
        json!({"content": "and the pods?", "run": true}),
    )
    .await;
    wait_status(&app, &id, "running").await;
    post(&app, &format!("/api/conversations/{id}/pause"), json!({})).await;
    wait_status(&app, &id, "paused").await;
    let second = token_of(&receiver, &id, "paused", 1).await;
    assert_ne!(first, second);
    let message = json!({"event_key": "message", "data": {"content": "and the nodes?"}});
    let (status, _) = answer(&app, &id, "paused", &first, message.clone()).await;
    assert_eq!(status, 401, "a rotated token is stale");
    let (status, body) = answer(&app, &id, "paused", &second, message).await;
    assert_eq!(status, 200, "{body}");
    wait_status(&app, &id, "finished").await;
    let sent = app.llm.requests().last().unwrap()["messages"].to_string();
    assert!(sent.contains("and the nodes?"), "{sent}");
}

#[tokio::test]
async fn an_early_approval_waits_for_its_state() {
    let receiver = Receiver::up(SECRET).await;
    let app = app_with(&receiver, None).await;
    let (id, file) = waiting(&app).await;
    let token = token_of(&receiver, &id, "waiting_for_confirmation", 0).await;
    // The moment before the pause is stored: the token is out with `approval_required`, the
    // status still running (held by its run, so the server does not settle it as stopped).
    let url = format!(
        "sqlite://{}",
        app.data_dir.as_ref().unwrap().join("triage.db").display()
    );
    let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let uuid: uuid::Uuid = id.parse().unwrap();
    let until = (chrono::Utc::now() + chrono::Duration::seconds(60)).timestamp_micros();
    sqlx::query(
        "UPDATE conversations SET status = 'running', reply_entered = 0, owner = $2, \
         lease_until = $3 WHERE id = $1",
    )
    .bind(uuid)
    .bind(uuid::Uuid::new_v4())
    .bind(until)
    .execute(&mut db)
    .await
    .unwrap();
    let approve = json!({"event_key": "approval_granted"});
    let (status, body) = answer(
        &app,
        &id,
        "waiting_for_confirmation",
        &token,
        approve.clone(),
    )
    .await;
    assert_eq!((status, body), (202, json!({"queued": true})));
    let (status, body) = answer(&app, &id, "waiting_for_confirmation", &token, approve).await;
    assert_eq!(
        (status, body),
        (200, json!({"queued": true})),
        "a duplicate"
    );
    // An absence: given the time to go wrong.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!file.exists(), "not applied before the state is entered");
    // The pause is stored: the approval applies.
    sqlx::query(
        "UPDATE conversations SET status = 'waiting_for_confirmation', reply_entered = 1, \
         owner = NULL, lease_until = NULL WHERE id = $1",
    )
    .bind(uuid)
    .execute(&mut db)
    .await
    .unwrap();
    wait_status(&app, &id, "finished").await;
    assert!(file.exists(), "the early approval ran the call");
    let (_, audit) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/search?kind=webhook"
        ))
        .await;
    let outcomes: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["queued", "applied"]);
}

#[tokio::test]
async fn failed_token_attempts_are_limited_and_no_api_key_is_needed() {
    let receiver = Receiver::up(SECRET).await;
    let app = spawn_app_with(&format!(
        "[server]\napi_keys = [\"the-key\"]\n{}",
        receiver_toml(&receiver.url(), "updates = [\"conversations\"]")
    ))
    .await;
    let resp = app
        .client
        .post(app.url("/api/conversations"))
        .header("x-api-key", "the-key")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    let id = json_body(resp).await["id"].as_str().unwrap().to_owned();
    let huge = json!({"event_key": "message", "data": {"content": "x".repeat(70_000)}});
    let (status, _) = answer(&app, &id, "paused", "guess", huge).await;
    assert_eq!(status, 413, "an inbound body is small");
    let guess = json!({"event_key": "resume"});
    for n in 0..10 {
        let (status, _) = answer(&app, &id, "paused", &format!("guess-{n}"), guess.clone()).await;
        assert_eq!(
            status, 401,
            "attempt {n}: no API key needed, the token is checked"
        );
    }
    let resp = app
        .client
        .post(app.url(&format!("/api/webhook/{id}/paused")))
        .header("authorization", "Bearer guess-11")
        .header("content-type", "application/json")
        .body(guess.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().contains_key("retry-after"));
}
