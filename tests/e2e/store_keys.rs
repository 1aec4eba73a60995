//! The keys conversation secrets are sealed with (issue 34): a wrong key is a clear error
//! naming the conversation, never garbage; a previous key still opens what it sealed and new
//! writes use the current key; PostgreSQL rows hold no secret, and PostgreSQL without a
//! configured key is refused at start-up.

use serde_json::json;
use sqlx::Connection;
use triage::config::Settings;
use triage::startup::Application;
use triage::store::sealing::{encode_key, key_id, parse_key, random_key};

use crate::conversations_api::{create, frames_until, post, state_is};
use crate::conversations_pg::{PG_SECRET_KEY, fresh_database, pg_store_toml};
use crate::helpers::{TestApp, spawn_app_with};
use crate::store_files::{SECRET, app_in, conversation_with_secrets, new_dir};
use fake_llm::Step;

fn keyed(key: &str, previous: &[&str]) -> String {
    format!("[conversations]\nsecret_key = \"{key}\"\nprevious_secret_keys = {previous:?}\n")
}

/// The stored config of conversation `id` in a data dir's SQLite file.
async fn stored_config(data_dir: &std::path::Path, id: &str) -> String {
    let url = format!("sqlite://{}", data_dir.join("triage.db").display());
    let mut db = sqlx::SqliteConnection::connect(&url).await.expect("open");
    let text = sqlx::query_scalar("SELECT config FROM conversations WHERE id = ?")
        .bind(uuid::Uuid::parse_str(id).expect("uuid"))
        .fetch_one(&mut db)
        .await
        .expect("the row");
    db.close().await.expect("close");
    text
}

/// Runs the conversation once with a tool call that prints its secret (from two halves, so
/// that the call itself does not hold it): the result must come back masked, which only a
/// correctly opened secret can do.
async fn secret_is_masked_in_a_run(app: &TestApp, id: &str) {
    let (head, tail) = SECRET.split_at(8);
    app.llm.push(Step::tool(
        "echo",
        "bash",
        json!({"command": format!("printf '%s%s\\n' {head} {tail}")}),
    ));
    app.llm.push(Step::text("done"));
    let (status, body) = post(
        app,
        &format!("/api/conversations/{id}/events"),
        json!({"content": "print it", "run": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let frames = frames_until(app, id, None, state_is("finished")).await;
    let result = frames
        .iter()
        .find(|f| f.name == "tool_calling_result")
        .expect("the call's result");
    assert_eq!(
        result.data["result"]["data"], "<secret-hidden>\n",
        "{}",
        result.data
    );
}

#[tokio::test]
async fn a_wrong_key_is_an_error_naming_the_conversation_never_garbage() {
    let data = new_dir("wrong-key");
    let (first, second) = (encode_key(&random_key()), encode_key(&random_key()));
    let app = app_in(&data, &[&keyed(&first, &[])]).await;
    let id = conversation_with_secrets(&app).await;
    drop(app);

    let app = app_in(&data, &[&keyed(&second, &[])]).await;
    let first_id = key_id(&parse_key(&first).expect("a key"));
    for (what, status, body) in [
        {
            let (s, b) = app.get_json(&format!("/api/conversations/{id}")).await;
            ("GET", s, b)
        },
        {
            let (s, b) = post(&app, &format!("/api/conversations/{id}/run"), json!({})).await;
            ("run", s, b)
        },
    ] {
        let detail = body["detail"].as_str().unwrap_or_default();
        assert_eq!(status, 500, "{what}: {body}");
        assert!(
            detail.contains(&id)
                && detail.contains(&first_id)
                && detail.contains("conversations.previous_secret_keys"),
            "{what}: {body}"
        );
        assert!(!body.to_string().contains(SECRET), "{what}: {body}");
    }
    // The server goes on: other conversations work, and this one can still be deleted.
    let other = create(&app, json!({"secrets": {"X": "other-secret-93af"}})).await;
    let (status, _) = app.get_json(&format!("/api/conversations/{other}")).await;
    assert_eq!(status, 200);
    let resp = app
        .client
        .delete(app.url(&format!("/api/conversations/{id}")))
        .send()
        .await
        .expect("DELETE");
    assert!(resp.status().is_success(), "{}", resp.status());
    drop(app);
    let _ = std::fs::remove_dir_all(&data);
}

#[tokio::test]
async fn a_previous_key_opens_what_it_sealed_and_new_writes_use_the_current_key() {
    let data = new_dir("rotation");
    let (first, second) = (encode_key(&random_key()), encode_key(&random_key()));
    let kid = |k: &str| key_id(&parse_key(k).expect("a key"));
    let app = app_in(&data, &[&keyed(&first, &[])]).await;
    let id = conversation_with_secrets(&app).await;
    drop(app);
    assert!(stored_config(&data, &id).await.contains(&kid(&first)));

    let app = app_in(&data, &[&keyed(&second, &[&first])]).await;
    secret_is_masked_in_a_run(&app, &id).await;
    // Sealed again with the current key at start-up; new conversations too.
    let text = stored_config(&data, &id).await;
    assert!(
        text.contains(&kid(&second)) && !text.contains(&kid(&first)),
        "{text}"
    );
    let new = create(&app, json!({"secrets": {"X": SECRET}})).await;
    assert!(stored_config(&data, &new).await.contains(&kid(&second)));
    drop(app);

    // Once every row is sealed again, the previous key can go.
    let app = app_in(&data, &[&keyed(&second, &[])]).await;
    let (status, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 200, "{info}");
    drop(app);
    let _ = std::fs::remove_dir_all(&data);
}

#[tokio::test]
async fn postgres_rows_hold_no_secret() {
    let Some(database) = fresh_database().await else {
        return;
    };
    let app = spawn_app_with(&pg_store_toml(&database)).await;
    let id = conversation_with_secrets(&app).await;
    let (status, fork) = post(&app, &format!("/api/conversations/{id}/fork"), json!({})).await;
    assert_eq!(status, 201, "{fork}");
    secret_is_masked_in_a_run(&app, &id).await;
    let mut db = sqlx::PgConnection::connect(&database)
        .await
        .expect("connect");
    let rows: Vec<String> = sqlx::query_scalar("SELECT c::text FROM conversations c")
        .fetch_all(&mut db)
        .await
        .expect("rows");
    assert_eq!(rows.len(), 2);
    let kid = key_id(&parse_key(PG_SECRET_KEY).expect("a key"));
    for row in &rows {
        assert!(row.contains(&kid), "{row}");
    }
    let events: Vec<String> = sqlx::query_scalar("SELECT e::text FROM events e")
        .fetch_all(&mut db)
        .await
        .expect("events");
    for text in rows.iter().chain(&events) {
        assert!(!text.contains(SECRET), "{text}");
    }
    db.close().await.expect("close");
}

#[tokio::test]
async fn postgres_without_a_configured_key_is_refused_naming_the_key() {
    let settings = Settings::from_toml(
        "[server]\nport = 0\n[toolsets.kubernetes]\nenabled = false\n\
         [conversations]\ndatabase_url = \"postgres://127.0.0.1:1/none\"\n",
    )
    .expect("settings");
    let err = Application::build(settings)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("conversations.secret_key")
            && err.contains("TRIAGE_CONVERSATIONS__SECRET_KEY"),
        "{err}"
    );
}

#[tokio::test]
async fn the_key_can_come_from_the_environment() {
    let llm = fake_llm::FakeLlm::start().await;
    let port = crate::helpers::free_port();
    let config = crate::cli::config_for(&llm, &format!("[server]\nport = {port}\n"));
    let key = encode_key(&random_key());
    let _server = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRIAGE_CONFIG", &config)
        .env("TRIAGE_CONVERSATIONS__SECRET_KEY", &key)
        .arg("serve")
        .kill_on_drop(true)
        .spawn()
        .expect("triage serve");
    let base = format!("http://127.0.0.1:{port}");
    let client = crate::helpers::http_client();
    crate::helpers::wait_until_ready(&client, &base).await;
    let resp = client
        .post(format!("{base}/api/conversations"))
        .header("content-type", "application/json")
        .body(json!({"secrets": {"TOKEN": SECRET}}).to_string())
        .send()
        .await
        .expect("create");
    let created = crate::helpers::json_body(resp).await;
    let id = created["id"].as_str().expect("an id");
    let url = format!("sqlite://{}", config.with_extension("db").display());
    let mut db = sqlx::SqliteConnection::connect(&url).await.expect("open");
    let text: String = sqlx::query_scalar("SELECT config FROM conversations WHERE id = ?")
        .bind(uuid::Uuid::parse_str(id).expect("uuid"))
        .fetch_one(&mut db)
        .await
        .expect("the row");
    db.close().await.expect("close");
    let kid = key_id(&parse_key(&key).expect("a key"));
    assert!(text.contains(&kid) && !text.contains(SECRET), "{text}");
}
