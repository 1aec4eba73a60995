//! Reading a conversation's event log: pages with filters, counts, one event.

use uuid::Uuid;

use super::conversations::where_clause;
use super::db::on_pool;
use super::{
    EventQuery, Page, Store, StoreError, StoredEvent, from_micros, page_limit, paging, to_i64,
    to_u64,
};

#[derive(sqlx::FromRow)]
pub(super) struct EventRecord {
    seq: i64,
    kind: String,
    source: String,
    timestamp: i64,
    payload: String,
}

impl EventRecord {
    fn into_event(self) -> Result<StoredEvent, StoreError> {
        Ok(StoredEvent {
            id: to_u64(self.seq),
            // Every stored kind was written from an `EventKind`.
            kind: self
                .kind
                .parse()
                .map_err(|e| StoreError::Database(format!("stored event {}: {e}", self.seq)))?,
            source: self.source,
            timestamp: from_micros(self.timestamp)?,
            payload: serde_json::from_str(&self.payload).map_err(|e| {
                StoreError::Database(format!("stored event {} is not valid JSON: {e}", self.seq))
            })?,
        })
    }
}

/// A bound value of a dynamically built filter.
enum Bind {
    Text(String),
    Int(i64),
}

/// `conversation_id = $1 AND …` for the query's filters (not its page), with the values to
/// bind from `$2` on.
fn filters(q: &EventQuery, postgres: bool) -> (Vec<String>, Vec<Bind>) {
    let mut conditions = vec!["conversation_id = $1".to_owned()];
    let mut binds = Vec::new();
    let mut add = |condition: &str, bind: Bind| {
        binds.push(bind);
        conditions.push(condition.replace('?', &format!("${}", binds.len() + 1)));
    };
    if let Some(kind) = &q.kind {
        add("kind = ?", Bind::Text(kind.clone()));
    }
    if let Some(source) = &q.source {
        add("source = ?", Bind::Text(source.clone()));
    }
    if let Some(body) = &q.body {
        // A literal substring: LIKE's wildcards in it are escaped. SQLite's LIKE ignores ASCII
        // case; PostgreSQL's ILIKE does the same (and beyond ASCII).
        let escaped = body
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        let like = if postgres { "ILIKE" } else { "LIKE" };
        add(
            &format!("payload {like} ? ESCAPE '\\'"),
            Bind::Text(format!("%{escaped}%")),
        );
    }
    if let Some(t) = q.timestamp_gte {
        add("timestamp >= ?", Bind::Int(t.timestamp_micros()));
    }
    if let Some(t) = q.timestamp_lt {
        add("timestamp < ?", Bind::Int(t.timestamp_micros()));
    }
    if let Some(after) = q.after {
        add("seq > ?", Bind::Int(to_i64(after)));
    }
    (conditions, binds)
}

/// Binds `$binds` in order on `$query` (a sqlx query of either backend).
macro_rules! bind_all {
    ($query:ident, $binds:expr) => {
        for bind in $binds {
            $query = match bind {
                Bind::Text(text) => $query.bind(text),
                Bind::Int(n) => $query.bind(n),
            };
        }
    };
}

impl Store {
    /// A page of the conversation's events (empty for an unknown conversation).
    pub async fn events(&self, id: Uuid, q: &EventQuery) -> Result<Page<StoredEvent>, StoreError> {
        let cursor = q
            .page_id
            .as_deref()
            .map(|p| paging::event_cursor(p, q.descending))
            .transpose()?;
        let (mut conditions, mut binds) = filters(q, self.inner.db.is_postgres());
        if let Some(seq) = cursor {
            binds.push(Bind::Int(seq));
            let op = if q.descending { "<" } else { ">" };
            conditions.push(format!("seq {op} ${}", binds.len() + 1));
        }
        let limit = page_limit(q.limit);
        let direction = if q.descending { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT seq, kind, source, timestamp, payload FROM events {} ORDER BY seq {direction} LIMIT ${}",
            where_clause(&conditions),
            binds.len() + 2
        );
        let records: Vec<EventRecord> = on_pool!(&self.inner.db, pool => {
            let mut query = sqlx::query_as(&sql).bind(id);
            bind_all!(query, binds);
            query.bind(limit + 1).fetch_all(pool).await?
        });
        let mut items = records
            .into_iter()
            .map(EventRecord::into_event)
            .collect::<Result<Vec<_>, _>>()?;
        let next_page_id = if items.len() as i64 > limit {
            items.truncate(limit as usize);
            items
                .last()
                .map(|last| paging::event_page(to_i64(last.id), q.descending))
        } else {
            None
        };
        Ok(Page {
            items,
            next_page_id,
        })
    }

    /// How many events match the query's filters (its page, limit and order are ignored).
    pub async fn count_events(&self, id: Uuid, q: &EventQuery) -> Result<u64, StoreError> {
        let (conditions, binds) = filters(q, self.inner.db.is_postgres());
        let sql = format!("SELECT COUNT(*) FROM events {}", where_clause(&conditions));
        let n: i64 = on_pool!(&self.inner.db, pool => {
            let mut query = sqlx::query_scalar(&sql).bind(id);
            bind_all!(query, binds);
            query.fetch_one(pool).await?
        });
        Ok(to_u64(n))
    }

    pub async fn event(&self, id: Uuid, seq: u64) -> Result<Option<StoredEvent>, StoreError> {
        let sql = "SELECT seq, kind, source, timestamp, payload FROM events \
                   WHERE conversation_id = $1 AND seq = $2";
        let record: Option<EventRecord> = on_pool!(&self.inner.db, pool => sqlx::query_as(sql)
            .bind(id)
            .bind(to_i64(seq))
            .fetch_optional(pool)
            .await?);
        record.map(EventRecord::into_event).transpose()
    }
}
