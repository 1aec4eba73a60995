//! The two backends: opening them (connection settings, migrations) and running one body of
//! code against either.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
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
            if let Some(file) = sqlite_file(url) {
                prepare_sqlite_file(&file)?;
            }
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

/// The file of a `sqlite:` URL; `None` for another backend or an in-memory database.
pub fn sqlite_file(url: &str) -> Option<PathBuf> {
    if !url.starts_with("sqlite:") {
        return None;
    }
    let options = SqliteConnectOptions::from_str(url).ok()?;
    let file = options.get_filename();
    // In-memory databases are named `file:…` (or `:memory:`), with no file to protect.
    let name = file.to_string_lossy();
    if name.starts_with("file:") || name == ":memory:" || name.is_empty() {
        return None;
    }
    Some(file.to_path_buf())
}

/// The files SQLite keeps beside a database (`-wal`, `-shm` in WAL mode, `-journal` when it
/// is switched back), each with the database's own mode.
pub fn sqlite_companions(file: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| {
            let mut name = file.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        })
        .collect()
}

/// Creates `dir` and the directories above it that are missing, each mode 0700: they hold
/// the conversations and their key. Existing directories keep their mode.
pub fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| StoreError::Config(format!("cannot create directory {}: {e}", dir.display())))
}

/// Before SQLite opens `file`: its directory made (0700), the file created 0600 if new, and
/// an existing one (and its companions) made 0600. SQLite creates the WAL and shared-memory
/// files with the database's mode, so they follow it; the process's umask would otherwise
/// leave all three readable by every user of the host.
fn prepare_sqlite_file(file: &Path) -> Result<(), StoreError> {
    if let Some(dir) = file.parent() {
        create_private_dir(dir)?;
    }
    let private = |e: std::io::Error, path: &Path| {
        StoreError::Config(format!(
            "cannot make {} private (0600): {e}",
            path.display()
        ))
    };
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(private(e, file)),
    }
    for path in std::iter::once(file.to_path_buf()).chain(sqlite_companions(file)) {
        match std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(private(e, &path)),
            _ => {}
        }
    }
    Ok(())
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
