//! A write built as SQL text and its values, run on either backend (`run_statement!`), and
//! when a conversation write reads the row its webhook snapshot shows. A leaf of `store/`: the
//! conversation writes build these, the outbox runs them with the deliveries they owe.

use uuid::Uuid;

/// A statement with its values, run against either backend by `run_statement!`.
pub(super) struct Statement {
    pub sql: String,
    pub binds: Vec<Bind>,
}

pub(super) enum Bind {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    Uuid(Uuid),
}

/// Runs a `Statement` on `$executor` (a transaction or pool of either backend): its
/// `sqlx::Result`.
macro_rules! run_statement {
    ($executor:expr, $statement:expr) => {{
        let statement = $statement;
        let mut query = sqlx::query(&statement.sql);
        for bind in &statement.binds {
            query = match bind {
                $crate::store::statement::Bind::Text(text) => query.bind(text.as_str()),
                $crate::store::statement::Bind::OptText(text) => query.bind(text.as_deref()),
                $crate::store::statement::Bind::Int(n) => query.bind(*n),
                $crate::store::statement::Bind::Uuid(id) => query.bind(*id),
            };
        }
        query.execute($executor).await
    }};
}
pub(super) use run_statement;

/// When a conversation write reads the row its snapshot shows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Read {
    /// After the write (create, PATCH, a config change): the row as it now is.
    After,
    /// Before it (delete): the row as it was.
    Before,
}
