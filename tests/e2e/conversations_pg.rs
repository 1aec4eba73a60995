//! The conversation lifecycle on PostgreSQL (a fresh database per test on the server that
//! `.ci/run` starts; skipped with a note when `POSTGRES_TEST_URL` is not set).

use sqlx::Connection;

use crate::conversations_api::{approval_flow, lifecycle};
use crate::helpers::{TestApp, spawn_app_with};

const POSTGRES_VAR: &str = "POSTGRES_TEST_URL";

/// A new PostgreSQL database of its own on the test server, or `None` (with a note) when
/// `POSTGRES_TEST_URL` is not set.
pub(crate) async fn fresh_database() -> Option<String> {
    let Ok(admin_url) = std::env::var(POSTGRES_VAR) else {
        eprintln!("skipped on PostgreSQL: {POSTGRES_VAR} is not set");
        return None;
    };
    let name = format!("triage_e2e_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .expect("connect to POSTGRES_TEST_URL");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .expect("create a test database");
    let _ = admin.close().await;
    let mut url = url::Url::parse(&admin_url).expect("a postgres:// URL");
    url.set_path(&format!("/{name}"));
    Some(url.to_string())
}

/// An app whose conversations live in a new PostgreSQL database of their own: two apps on one
/// database would each take the other's running conversations for stopped ones at start-up.
async fn postgres_app() -> Option<TestApp> {
    let url = fresh_database().await?;
    Some(spawn_app_with(&format!("[conversations]\ndatabase_url = \"{url}\"\n")).await)
}

#[tokio::test]
async fn the_lifecycle_on_postgres() {
    if let Some(app) = postgres_app().await {
        lifecycle(&app).await;
    }
}

#[tokio::test]
async fn approvals_on_postgres() {
    if let Some(app) = postgres_app().await {
        approval_flow(&app).await;
    }
}
