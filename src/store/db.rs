//! The two backends: opening them (connection settings, migrations) and running one body of
//! code against either.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::StoreError;

#[derive(Clone)]
pub(crate) enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the concrete pool. The body is written once and
/// type-checked for each backend; the SQL text is shared (both accept `$N` placeholders).
macro_rules! on_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::store::db::Db::Sqlite($pool) => $body,
            $crate::store::db::Db::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

/// How long a query waits for a pooled connection, and SQLite for another writer's lock,
/// before it fails (an error, never a hang).
const WAIT: Duration = Duration::from_secs(10);

impl Db {
    pub(crate) async fn open(url: &str) -> Result<Db, StoreError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url)
                .map_err(|e| StoreError::Config(format!("database_url: {e}")))?;
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(WAIT)
                .connect_with(options)
                .await?;
            sqlx::migrate!("./migrations/postgres")
                .run(&pool)
                .await
                .map_err(migration_error)?;
            Ok(Db::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)
                .map_err(|e| StoreError::Config(format!("database_url: {e}")))?
                .create_if_missing(true)
                .foreign_keys(true)
                .journal_mode(SqliteJournalMode::Wal)
                // With WAL, NORMAL does not fsync at each commit, but a commit is in the WAL
                // file (the OS page cache) before COMMIT returns: a killed process (kill -9)
                // loses nothing the store acknowledged. Only an OS crash or power loss can
                // lose the last commits, never corrupt the file; FULL would fsync each group
                // commit to cover that too, at several times the cost.
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(WAIT);
            create_parent_dir(options.get_filename())?;
            let pool = SqlitePoolOptions::new()
                .max_connections(8)
                .acquire_timeout(WAIT)
                // A connection to a file in this process cannot drop, and sqlx still pings
                // each one it returns to the pool; pinging on acquire too put one more round
                // trip to the connection's thread before every query.
                .test_before_acquire(false)
                .connect_with(options)
                .await?;
            sqlx::migrate!("./migrations/sqlite")
                .run(&pool)
                .await
                .map_err(migration_error)?;
            Ok(Db::Sqlite(pool))
        } else {
            Err(StoreError::Config(
                "database_url must start with sqlite: or postgres://".into(),
            ))
        }
    }

    pub(crate) async fn close(&self) {
        on_pool!(self, pool => pool.close().await)
    }

    /// Dialect differences in otherwise shared SQL.
    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// As [`placeholders`], for a statement whose parameters are all written by this and bound
    /// in the order written: anonymous `?` on SQLite. SQLite finds a named parameter (`$N`) by
    /// a linear search, when it prepares the statement and again (sqlx) for every bind, so the
    /// appender's multi-row INSERTs cost time quadratic in their rows (a third of its CPU at
    /// 256 appenders).
    pub(crate) fn placeholders(&self, start: usize, count: usize) -> String {
        match self {
            Db::Postgres(_) => placeholders(start, count),
            Db::Sqlite(_) => vec!["?"; count].join(", "),
        }
    }
}

fn create_parent_dir(file: &Path) -> Result<(), StoreError> {
    // In-memory databases are named `file:…`, with no directory to create.
    if file.to_string_lossy().starts_with("file:") {
        return Ok(());
    }
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Config(format!("cannot create directory {}: {e}", dir.display()))
        }),
        _ => Ok(()),
    }
}

/// `$start, $start+1, …` for `count` parameters.
pub(crate) fn placeholders(start: usize, count: usize) -> String {
    (start..start + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A database a newer triage has migrated is the common case (an upgrade rolled back, two
/// versions sharing a data dir): say so instead of sqlx's "previously applied but missing".
fn migration_error(e: sqlx::migrate::MigrateError) -> StoreError {
    match e {
        sqlx::migrate::MigrateError::VersionMissing(version) => StoreError::Database(format!(
            "migrations: the database has migration {version}, which this triage does not know: \
             a newer triage used it. Run that version, or give this one another database \
             (conversations.database_url or conversations.data_dir)"
        )),
        other => StoreError::Database(format!("migrations: {other}")),
    }
}
