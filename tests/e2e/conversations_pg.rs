//! The conversation tests on both stores: each body (a fn taking the app) runs as
//! `<name>::sqlite` on the default SQLite store and as `<name>::postgres` on a fresh database
//! of the PostgreSQL server that `.ci/run` starts (skipped with a note when
//! `POSTGRES_TEST_URL` is not set, failed when `POSTGRES_TEST_REQUIRED` is).

use sqlx::Connection;

use crate::helpers::{TestApp, spawn_app_layers};

const POSTGRES_VAR: &str = "POSTGRES_TEST_URL";

/// The key conversation secrets are sealed with on PostgreSQL, which triage requires there
/// (every replica must use one key): the same for every test replica.
pub(crate) const PG_SECRET_KEY: &str = "dHJpYWdlLWUyZS1wb3N0Z3Jlcy1zZWNyZXQta2V5ISE=";

/// The `[conversations]` table of an app on PostgreSQL database `url`.
pub(crate) fn pg_store_toml(url: &str) -> String {
    format!("[conversations]\ndatabase_url = \"{url}\"\nsecret_key = \"{PG_SECRET_KEY}\"\n")
}

/// Set by `.ci/run` beside `POSTGRES_TEST_URL`: a PostgreSQL variant that cannot run there
/// fails instead of passing green. (Not `TRIAGE_`-prefixed: triage refuses unknown ones.)
const REQUIRED_VAR: &str = "POSTGRES_TEST_REQUIRED";

/// A new PostgreSQL database of its own on the test server, or `None` (with a note) when
/// `POSTGRES_TEST_URL` is not set: a developer's `cargo test` skips the PostgreSQL variants.
/// Panics instead when `POSTGRES_TEST_REQUIRED` is set (CI).
pub(crate) async fn fresh_database() -> Option<String> {
    let Ok(admin_url) = std::env::var(POSTGRES_VAR) else {
        assert!(
            std::env::var_os(REQUIRED_VAR).is_none(),
            "{REQUIRED_VAR} is set but {POSTGRES_VAR} is not: the PostgreSQL variant cannot run"
        );
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

/// An app (with `extra` TOML) whose conversations live in a new PostgreSQL database of their
/// own, so a test sees only its own conversations.
pub(crate) async fn postgres_app(extra: &str) -> Option<TestApp> {
    let url = fresh_database().await?;
    let store = pg_store_toml(&url);
    Some(spawn_app_layers(&[extra, &store]).await)
}

/// `on_both_stores! { name: body; other: body2, "extra TOML"; }` makes `name::sqlite` and
/// `name::postgres`, each running `body(&app)` on a fresh app of that store.
macro_rules! on_both_stores {
    ($($name:ident: $body:ident $(, $extra:expr)?;)+) => {$(
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                let extra: &str = $crate::conversations_pg::on_both_stores!(@extra $($extra)?);
                let app = $crate::helpers::spawn_app_layers(&[extra]).await;
                super::$body(&app).await;
            }

            #[tokio::test]
            async fn postgres() {
                let extra: &str = $crate::conversations_pg::on_both_stores!(@extra $($extra)?);
                if let Some(app) = $crate::conversations_pg::postgres_app(extra).await {
                    super::$body(&app).await;
                }
            }
        }
    )+};
    (@extra) => { "" };
    (@extra $extra:expr) => { $extra };
}

pub(crate) use on_both_stores;
