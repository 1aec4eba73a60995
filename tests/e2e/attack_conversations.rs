//! A hostile client and a hostile model against server-side conversations and inbound
//! webhooks: each test is an attack that once worked.

use serde_json::{Value, json};

use crate::helpers::{TestApp, json_body, spawn_app, tool_writable_dir};
use crate::webhook_receiver::Receiver;
use crate::webhooks_in::{answer, app_with, token_of, wait_status};
use crate::webhooks_out::SECRET;
use fake_llm::Step;

async fn post(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let resp = app.post_raw(path, body.to_string()).await;
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

/// A malformed `data.tool_call_ids` (a string, numbers) once read as "no list": the event
/// approved every pending call, where the sender meant one (and the others denied).
#[tokio::test]
async fn a_malformed_tool_call_id_list_approves_nothing() {
    let receiver = Receiver::up(SECRET).await;
    let app = app_with(&receiver, None).await;
    let dir = tool_writable_dir("attack-tool-call-ids");
    let (wanted, other) = (dir.join("wanted"), dir.join("other"));
    app.llm.push(Step::tools(vec![
        (
            "call_wanted",
            "bash",
            json!({"command": format!("touch {}", wanted.display())}),
        ),
        (
            "call_other",
            "bash",
            json!({"command": format!("touch {}", other.display())}),
        ),
    ]));
    app.llm.push(Step::text("Done."));
    let (status, created) = post(
        &app,
        "/api/conversations",
        json!({"initial_message": {"content": "restart both"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    wait_status(&app, &id, "waiting_for_confirmation").await;
    let token = token_of(&receiver, &id, "waiting_for_confirmation", 0).await;
    let state = "waiting_for_confirmation";
    for ids in [
        json!("call_wanted"),
        json!([7]),
        json!({"call_wanted": true}),
    ] {
        let event = json!({"event_key": "approval_granted", "data": {"tool_call_ids": ids}});
        let (status, body) = answer(&app, &id, state, &token, event).await;
        assert_eq!(status, 400, "{ids}: {body}");
    }
    // A NUL in the key: PostgreSQL refused it where the key is kept (a 500).
    let event = json!({"event_key": "approval_granted\u{0}"});
    let (status, body) = answer(&app, &id, state, &token, event).await;
    assert_eq!(status, 422, "{body}");
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["execution_status"], state, "nothing was decided");
    assert!(!wanted.exists() && !other.exists());
    // The well-formed list still works: the one approved, the other denied.
    let event =
        json!({"event_key": "approval_granted", "data": {"tool_call_ids": ["call_wanted"]}});
    let (status, body) = answer(&app, &id, state, &token, event).await;
    assert_eq!(status, 200, "{body}");
    wait_status(&app, &id, "finished").await;
    assert!(wanted.exists(), "the approved call ran");
    assert!(!other.exists(), "the call not listed did not run");
}

/// The model names the conversation with terminal escapes, NULs and bidi overrides: a title
/// is shown in terminals and UIs, so it keeps only printable text.
#[tokio::test]
async fn a_hostile_generated_title_is_inert() {
    let app = spawn_app().await;
    app.llm.push(Step::text("Checked."));
    let (status, created) = post(
        &app,
        "/api/conversations",
        json!({"initial_message": {"content": "why does checkout restart?"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    crate::webhooks_in::wait_status(&app, &id, "finished").await;
    // The background title first: the hostile one is the next title asked for.
    let what = "the automatic title";
    crate::helpers::eventually(what, std::time::Duration::from_secs(10), || async {
        let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
        info["title"] == crate::helpers::FAKE_TITLE
    })
    .await;
    let hostile = format!(
        "\u{1b}[2J\u{1b}]0;pwned\u{7}Checkout\u{0}\u{202e}restarts\u{8}\u{7f} {}",
        "x".repeat(100_000)
    );
    app.titles.push(Step::text(&hostile));
    let (status, body) = post(
        &app,
        &format!("/api/conversations/{id}/generate_title"),
        json!({"max_length": 200}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let title = body["title"].as_str().unwrap().to_owned();
    assert!(title.chars().count() <= 200, "{title}");
    assert!(
        !title
            .chars()
            .any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)),
        "{title:?}"
    );
    assert!(
        title.starts_with("[2J]0;pwnedCheckoutrestarts x"),
        "{title:?}"
    );
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["title"], title.as_str());
}

/// Anyone who knows a conversation's id sent ten wrong tokens a minute: the limit then
/// refused every attempt, the approver's live token included, so the run never went on.
#[tokio::test]
async fn guessing_does_not_lock_out_the_live_token() {
    let receiver = Receiver::up(SECRET).await;
    let app = app_with(&receiver, None).await;
    let dir = tool_writable_dir("attack-lockout");
    let file = dir.join("approved");
    app.llm.push(Step::tool(
        "risky",
        "bash",
        json!({"command": format!("touch {}", file.display())}),
    ));
    app.llm.push(Step::text("Done."));
    let (status, created) = post(
        &app,
        "/api/conversations",
        json!({"initial_message": {"content": "restart it"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let state = "waiting_for_confirmation";
    wait_status(&app, &id, state).await;
    let token = token_of(&receiver, &id, state, 0).await;
    let approve = json!({"event_key": "approval_granted"});
    for n in 0..12 {
        let (status, _) = answer(&app, &id, state, &format!("guess-{n}"), approve.clone()).await;
        assert!(status == 401 || status == 429, "guess {n}: {status}");
    }
    let (status, _) = answer(&app, &id, state, "guess-more", approve.clone()).await;
    assert_eq!(status, 429, "wrong tokens are throttled");
    let (status, body) = answer(&app, &id, state, &token, approve).await;
    assert_eq!(status, 200, "the live token is taken: {body}");
    wait_status(&app, &id, "finished").await;
    assert!(file.exists());
}

/// Twenty senders race the same and opposite answers: one decision applies (one result for
/// the call), and every answer is a clear status.
#[tokio::test]
async fn racing_answers_apply_once() {
    let receiver = Receiver::up(SECRET).await;
    let app = app_with(&receiver, None).await;
    let dir = tool_writable_dir("attack-race");
    let file = dir.join("decided");
    app.llm.push(Step::tool(
        "risky",
        "bash",
        json!({"command": format!("touch {}", file.display())}),
    ));
    app.llm.push(Step::text("Done."));
    let (_, created) = post(
        &app,
        "/api/conversations",
        json!({"initial_message": {"content": "restart it"}}),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let state = "waiting_for_confirmation";
    wait_status(&app, &id, state).await;
    let token = token_of(&receiver, &id, state, 0).await;
    let sends = (0..20).map(|n| {
        let key = if n % 2 == 0 {
            "approval_granted"
        } else {
            "approval_denied"
        };
        answer(&app, &id, state, &token, json!({"event_key": key}))
    });
    let answers = futures::future::join_all(sends).await;
    for (status, body) in &answers {
        assert!([200, 409].contains(status), "{status}: {body}");
    }
    wait_status(&app, &id, "finished").await;
    let (_, results) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/search?kind=tool_calling_result"
        ))
        .await;
    let decided = results["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["result"]["status"] != "approval_required")
        .count();
    assert_eq!(decided, 1, "{results}");
}

/// A client names a conversation with a NUL: PostgreSQL refused the write (a 500 with the
/// database's message). Refused on create, PATCH and fork, on every store, like a title of
/// more than 500 characters.
#[tokio::test]
async fn a_title_with_nul_is_refused() {
    hostile_titles(&spawn_app().await).await;
}

#[tokio::test]
async fn a_title_with_nul_is_refused_on_postgres() {
    let Some(database) = crate::conversations_pg::fresh_database().await else {
        return;
    };
    let config = crate::conversations_pg::pg_store_toml(&database);
    hostile_titles(&crate::helpers::spawn_app_with(&config).await).await;
}

async fn hostile_titles(app: &TestApp) {
    let (status, created) = post(app, "/api/conversations", json!({"title": "fine"})).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let long = "é".repeat(501);
    for title in ["a\u{0}b", "\u{0}", long.as_str()] {
        let body = json!({"title": title});
        let (status, answer) = post(app, "/api/conversations", body.clone()).await;
        assert_eq!(status, 400, "create {title:?}: {answer}");
        let resp = app
            .client
            .patch(app.url(&format!("/api/conversations/{id}")))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "PATCH {title:?}");
        let path = format!("/api/conversations/{id}/fork");
        let (status, answer) = post(app, &path, body).await;
        assert_eq!(status, 400, "fork {title:?}: {answer}");
    }
    let (status, _) = post(app, "/api/conversations", json!({"title": "é".repeat(500)})).await;
    assert_eq!(status, 201, "500 characters are a title");
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["title"], "fine");
    let (_, page) = app.get_json("/api/conversations/search").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 2, "{page}");
}

/// `%00` in a filter (`status`, `kind`, `body`, `receiver`): PostgreSQL refused the query and
/// the client got a 500 with the database's message.
#[tokio::test]
async fn a_nul_in_a_query_is_refused() {
    nul_queries(&spawn_app().await).await;
}

#[tokio::test]
async fn a_nul_in_a_query_is_refused_on_postgres() {
    let Some(database) = crate::conversations_pg::fresh_database().await else {
        return;
    };
    let config = crate::conversations_pg::pg_store_toml(&database);
    nul_queries(&crate::helpers::spawn_app_with(&config).await).await;
}

async fn nul_queries(app: &TestApp) {
    let (_, created) = post(app, "/api/conversations", json!({})).await;
    let id = created["id"].as_str().unwrap();
    for path in [
        "/api/webhooks/deliveries?receiver=a%00b".to_owned(),
        "/api/conversations/search?status=a%00b".to_owned(),
        "/api/conversations/count?status=a%00b".to_owned(),
        format!("/api/conversations/{id}/events/search?kind=a%00b"),
        format!("/api/conversations/{id}/events/search?body=a%00b"),
    ] {
        let (status, body) = app.get_json(&path).await;
        assert_eq!(status, 422, "{path}: {body}");
        assert!(!body.to_string().contains("database"), "{body}");
    }
    let (status, _) = app
        .get_json(&format!("/api/conversations/{id}/events/search?kind=a%01b"))
        .await;
    assert_eq!(status, 200, "only NUL is refused");
}

/// An inbound webhook event is logged as received, for the audit: a `message` whose text
/// quotes the conversation's secret was once stored (and replayed, forked, delivered) in clear.
#[tokio::test]
async fn an_inbound_webhook_event_is_logged_masked() {
    const SECRET_VALUE: &str = "conv-secret-5551234";
    let receiver = Receiver::up(SECRET).await;
    let app = app_with(&receiver, None).await;
    let marker = tool_writable_dir("attack-inbound-mask").join("never");
    app.llm.push(Step::tools(vec![(
        "call_wait",
        "bash",
        json!({"command": format!("touch {}", marker.display())}),
    )]));
    let (status, created) = post(
        &app,
        "/api/conversations",
        json!({"initial_message": {"content": "fix it"}, "secrets": {"k": SECRET_VALUE}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    wait_status(&app, &id, "waiting_for_confirmation").await;
    let token = token_of(&receiver, &id, "waiting_for_confirmation", 0).await;
    let event = json!({"event_key": "message", "data": {"content": format!("use {SECRET_VALUE}")}});
    let _ = answer(&app, &id, "waiting_for_confirmation", &token, event).await;
    let (_, events) = app
        .get_json(&format!("/api/conversations/{id}/events/search"))
        .await;
    let text = events.to_string();
    assert!(
        text.contains("\"webhook\""),
        "no webhook event logged: {text}"
    );
    assert!(!text.contains(SECRET_VALUE), "{text}");
}
