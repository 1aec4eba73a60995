//! Conversation rows: create, read, update, delete, search, count, retention.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::db::{on_pool, placeholders};
use super::sealing::SecretKeys;
use super::statement::{Bind, Read, Statement};
use super::{
    ConversationQuery, ConversationRow, Page, SortOrder, Store, StoreError, from_micros,
    page_limit, paging, to_i64, to_micros, to_u64,
};
use crate::conversation_domain::ConversationStatus;

pub(super) const COLUMNS: &str = "id, title, tags, status, reason, config, state, state_event_id, stats, \
                       last_event_id, created_at, updated_at";

/// A row as stored (JSON as text, timestamps in µs).
#[derive(sqlx::FromRow)]
pub(super) struct Record {
    id: Uuid,
    title: Option<String>,
    tags: String,
    status: String,
    reason: Option<String>,
    config: String,
    state: String,
    state_event_id: i64,
    stats: String,
    last_event_id: i64,
    created_at: i64,
    updated_at: i64,
}

fn json_text(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Database(format!("serialising: {e}")))
}

fn parse<T: serde::de::DeserializeOwned>(column: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Database(format!("stored {column} is not valid JSON: {e}")))
}

impl Record {
    /// The row as the service reads it: its secrets opened, or `Sealed` naming it.
    pub(super) fn into_row(self, keys: &SecretKeys) -> Result<ConversationRow, StoreError> {
        let id = self.id;
        let mut row = self.into_row_sealed()?;
        keys.open_config(id, &mut row.config)
            .map_err(|reason| StoreError::Sealed { id, reason })?;
        Ok(row)
    }

    /// The row with its secrets left out, never opened: for webhook snapshots, which show none,
    /// so that a conversation whose secrets cannot be opened can still be changed and deleted.
    pub(super) fn into_row_without_secrets(self) -> Result<ConversationRow, StoreError> {
        let mut row = self.into_row_sealed()?;
        if let Some(run) = row.config.get_mut("run").and_then(|r| r.as_object_mut()) {
            run.insert("secrets".into(), serde_json::Value::Array(Vec::new()));
        }
        Ok(row)
    }

    fn into_row_sealed(self) -> Result<ConversationRow, StoreError> {
        Ok(ConversationRow {
            id: self.id,
            title: self.title,
            tags: parse("tags", &self.tags)?,
            status: self.status.parse().map_err(|e| {
                StoreError::Database(format!("conversation {}: stored {e}", self.id))
            })?,
            reason: self.reason,
            config: parse("config", &self.config)?,
            state: parse("state", &self.state)?,
            state_event_id: to_u64(self.state_event_id),
            stats: parse("stats", &self.stats)?,
            last_event_id: to_u64(self.last_event_id),
            created_at: from_micros(self.created_at)?,
            updated_at: from_micros(self.updated_at)?,
        })
    }
}

pub(super) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

impl Store {
    fn keys(&self) -> &SecretKeys {
        &self.inner.options.keys
    }

    /// The config's text as stored: its secrets sealed under the current key.
    pub(super) fn sealed_config(
        &self,
        id: Uuid,
        config: &serde_json::Value,
    ) -> Result<String, StoreError> {
        let sealed = self
            .keys()
            .seal_config(id, config)
            .map_err(|reason| StoreError::Sealed { id, reason })?;
        json_text(&sealed)
    }

    /// Inserts a new conversation (its `last_event_id` starts at 0); `Conflict` if the id
    /// exists.
    pub async fn create(&self, row: &ConversationRow) -> Result<(), StoreError> {
        let insert = Statement {
            sql: format!(
                "INSERT INTO conversations ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, $11)"
            ),
            binds: vec![
                Bind::Uuid(row.id),
                Bind::OptText(row.title.clone()),
                Bind::Text(json_text(&row.tags)?),
                Bind::Text(row.status.as_str().to_owned()),
                Bind::OptText(row.reason.clone()),
                Bind::Text(self.sealed_config(row.id, &row.config)?),
                Bind::Text(json_text(&row.state)?),
                Bind::Int(to_i64(row.state_event_id)),
                Bind::Text(json_text(&row.stats)?),
                Bind::Int(to_micros(row.created_at)),
                Bind::Int(to_micros(row.updated_at)),
            ],
        };
        self.write_reporting(row.id, insert, Read::After, None)
            .await
            .map(|_| ())
    }

    pub async fn get(&self, id: Uuid) -> Result<Option<ConversationRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM conversations WHERE id = $1");
        let record: Option<Record> = on_pool!(&self.inner.db, pool => sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(pool)
            .await?);
        record.map(|r| r.into_row(self.keys())).transpose()
    }

    /// The conversation's status alone (nothing to open).
    pub async fn status(&self, id: Uuid) -> Result<Option<ConversationStatus>, StoreError> {
        let sql = "SELECT status FROM conversations WHERE id = $1";
        let status: Option<String> = on_pool!(&self.inner.db, pool => sqlx::query_scalar(sql)
            .bind(id)
            .fetch_optional(pool)
            .await?);
        status
            .map(|s| {
                s.parse()
                    .map_err(|e| StoreError::Database(format!("conversation {id}: stored {e}")))
            })
            .transpose()
    }

    /// One answer per id, in order; `None` for unknown ids.
    pub async fn get_many(&self, ids: &[Uuid]) -> Result<Vec<Option<ConversationRow>>, StoreError> {
        let mut found = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let sql = format!(
                "SELECT {COLUMNS} FROM conversations WHERE id IN ({})",
                placeholders(1, chunk.len())
            );
            let records: Vec<Record> = on_pool!(&self.inner.db, pool => {
                let mut query = sqlx::query_as(&sql);
                for id in chunk {
                    query = query.bind(*id);
                }
                query.fetch_all(pool).await?
            });
            for record in records {
                let row = record.into_row(self.keys())?;
                found.insert(row.id, row);
            }
        }
        Ok(ids.iter().map(|id| found.get(id).cloned()).collect())
    }

    /// Stores what a run changes — status, reason, state, state_event_id, stats, updated_at —
    /// and nothing else: title and tags (`set_meta`) and the config (`set_config`) have
    /// writers of their own, which a run ending on another replica must not undo. `NotFound`
    /// if the row is gone.
    pub async fn update(&self, row: &ConversationRow) -> Result<(), StoreError> {
        if self.write_run_columns(row, None).await? == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// `update` and the lease given up, in one statement, if `owner` still holds the lease:
    /// a run's end. False if another replica took the conversation over (nothing written).
    pub async fn finish(&self, row: &ConversationRow, owner: Uuid) -> Result<bool, StoreError> {
        Ok(self.write_run_columns(row, Some(owner)).await? == 1)
    }

    async fn write_run_columns(
        &self,
        row: &ConversationRow,
        owner: Option<Uuid>,
    ) -> Result<u64, StoreError> {
        let (state, stats) = (json_text(&row.state)?, json_text(&row.stats)?);
        let sql = match owner {
            None => {
                "UPDATE conversations SET status = $2, reason = $3, state = $4, \
                 state_event_id = $5, stats = $6, updated_at = $7 WHERE id = $1"
            }
            Some(_) => {
                "UPDATE conversations SET status = $2, reason = $3, state = $4, \
                 state_event_id = $5, stats = $6, updated_at = $7, owner = NULL, \
                 lease_until = NULL WHERE id = $1 AND owner = $8"
            }
        };
        let written = on_pool!(&self.inner.db, pool => sqlx::query(sql)
            .bind(row.id)
            .bind(row.status.as_str())
            .bind(&row.reason)
            .bind(&state)
            .bind(to_i64(row.state_event_id))
            .bind(&stats)
            .bind(to_micros(row.updated_at))
            .bind(owner)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(written)
    }

    /// Sets the title and/or the tags (each left as is when `None`). False if the row is gone.
    pub async fn set_meta(
        &self,
        id: Uuid,
        title: Option<&str>,
        tags: Option<&BTreeMap<String, String>>,
        updated_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let update = Statement {
            sql: "UPDATE conversations SET title = COALESCE($2, title), \
                  tags = COALESCE($3, tags), updated_at = $4 WHERE id = $1"
                .into(),
            binds: vec![
                Bind::Uuid(id),
                Bind::OptText(title.map(str::to_owned)),
                Bind::OptText(tags.map(json_text).transpose()?),
                Bind::Int(to_micros(updated_at)),
            ],
        };
        Ok(self.write_reporting(id, update, Read::After, None).await? == 1)
    }

    /// Sets the title only where the conversation has none (one statement: a title a client
    /// sets meanwhile on any replica wins). False if nothing was written. Receivers get the
    /// new snapshot, as after a PATCH.
    pub async fn set_title_if_unset(
        &self,
        id: Uuid,
        title: &str,
        updated_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let update = Statement {
            sql: "UPDATE conversations SET title = $2, updated_at = $3 \
                  WHERE id = $1 AND title IS NULL"
                .into(),
            binds: vec![
                Bind::Uuid(id),
                Bind::Text(title.to_owned()),
                Bind::Int(to_micros(updated_at)),
            ],
        };
        Ok(self.write_reporting(id, update, Read::After, None).await? == 1)
    }

    /// Replaces the stored config (the service's settings, secrets included). False if the
    /// row is gone.
    pub async fn set_config(
        &self,
        id: Uuid,
        config: &serde_json::Value,
        updated_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let update = Statement {
            sql: "UPDATE conversations SET config = $2, updated_at = $3 WHERE id = $1".into(),
            binds: vec![
                Bind::Uuid(id),
                Bind::Text(self.sealed_config(id, config)?),
                Bind::Int(to_micros(updated_at)),
            ],
        };
        Ok(self.write_reporting(id, update, Read::After, None).await? == 1)
    }

    /// Deletes the conversation and its events (ON DELETE CASCADE); false if it did not exist.
    /// Webhook receivers get its last snapshot, status `deleted`.
    pub async fn delete(&self, id: Uuid) -> Result<bool, StoreError> {
        let delete = Statement {
            sql: "DELETE FROM conversations WHERE id = $1".into(),
            binds: vec![Bind::Uuid(id)],
        };
        Ok(self
            .write_reporting(id, delete, Read::Before, Some(ConversationStatus::Deleted))
            .await?
            > 0)
    }

    pub async fn search(&self, q: &ConversationQuery) -> Result<Page<ConversationRow>, StoreError> {
        let (column, descending) = match q.sort {
            SortOrder::CreatedAt => ("created_at", false),
            SortOrder::CreatedAtDesc => ("created_at", true),
            SortOrder::UpdatedAt => ("updated_at", false),
            SortOrder::UpdatedAtDesc => ("updated_at", true),
        };
        let cursor = q
            .page_id
            .as_deref()
            .map(|p| paging::conversation_cursor(p, q.sort))
            .transpose()?;
        let mut conditions = Vec::new();
        let mut next = 1;
        if q.status.is_some() {
            conditions.push(format!("status = ${next}"));
            next += 1;
        }
        if cursor.is_some() {
            let op = if descending { "<" } else { ">" };
            conditions.push(format!("({column}, id) {op} (${next}, ${})", next + 1));
            next += 2;
        }
        let direction = if descending { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT {COLUMNS} FROM conversations {} ORDER BY {column} {direction}, id {direction} LIMIT ${next}",
            where_clause(&conditions)
        );
        let limit = page_limit(q.limit);
        let records: Vec<Record> = on_pool!(&self.inner.db, pool => {
            let mut query = sqlx::query_as(&sql);
            if let Some(status) = &q.status {
                query = query.bind(status);
            }
            if let Some((micros, id)) = cursor {
                query = query.bind(micros).bind(id);
            }
            query.bind(limit + 1).fetch_all(pool).await?
        });
        let mut items = records
            .into_iter()
            .map(|r| r.into_row(self.keys()))
            .collect::<Result<Vec<_>, _>>()?;
        let next_page_id = if items.len() as i64 > limit {
            items.truncate(limit as usize);
            items.last().map(|last| {
                let key = match q.sort {
                    SortOrder::CreatedAt | SortOrder::CreatedAtDesc => last.created_at,
                    SortOrder::UpdatedAt | SortOrder::UpdatedAtDesc => last.updated_at,
                };
                paging::conversation_page(q.sort, to_micros(key), last.id)
            })
        } else {
            None
        };
        Ok(Page {
            items,
            next_page_id,
        })
    }

    pub async fn count(&self, status: Option<&str>) -> Result<u64, StoreError> {
        let sql = match status {
            Some(_) => "SELECT COUNT(*) FROM conversations WHERE status = $1",
            None => "SELECT COUNT(*) FROM conversations",
        };
        let n: i64 = on_pool!(&self.inner.db, pool => {
            let mut query = sqlx::query_scalar(sql);
            if let Some(status) = status {
                query = query.bind(status);
            }
            query.fetch_one(pool).await?
        });
        Ok(to_u64(n))
    }

    /// Conversations whose status is one of `statuses` (start-up recovery).
    pub async fn ids_with_status(
        &self,
        statuses: &[ConversationStatus],
    ) -> Result<Vec<Uuid>, StoreError> {
        if statuses.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id FROM conversations WHERE status IN ({})",
            placeholders(1, statuses.len())
        );
        Ok(on_pool!(&self.inner.db, pool => {
            let mut query = sqlx::query_scalar(&sql);
            for status in statuses {
                query = query.bind(status.as_str());
            }
            query.fetch_all(pool).await?
        }))
    }

    /// Retention: deletes conversations in `statuses` last updated before `cutoff`, with
    /// their events; returns how many. Each is deleted as `delete` does when webhook
    /// receivers want its `deleted` snapshot.
    pub async fn delete_older_than(
        &self,
        statuses: &[ConversationStatus],
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        if statuses.is_empty() {
            return Ok(0);
        }
        let reporting = self
            .inner
            .options
            .outbox
            .as_ref()
            .is_some_and(|p| p.wants_conversations());
        if reporting {
            let sql = format!(
                "SELECT id FROM conversations WHERE updated_at < $1 AND status IN ({})",
                placeholders(2, statuses.len())
            );
            let ids: Vec<(Uuid,)> = on_pool!(&self.inner.db, pool => {
                let mut query = sqlx::query_as(&sql).bind(to_micros(cutoff));
                for status in statuses {
                    query = query.bind(status.as_str());
                }
                query.fetch_all(pool).await?
            });
            let mut deleted = 0;
            for (id,) in ids {
                deleted += u64::from(self.delete(id).await?);
            }
            return Ok(deleted);
        }
        let sql = format!(
            "DELETE FROM conversations WHERE updated_at < $1 AND status IN ({})",
            placeholders(2, statuses.len())
        );
        Ok(on_pool!(&self.inner.db, pool => {
            let mut query = sqlx::query(&sql).bind(to_micros(cutoff));
            for status in statuses {
                query = query.bind(status.as_str());
            }
            query.execute(pool).await?.rows_affected()
        }))
    }
}

pub(super) fn where_clause(conditions: &[String]) -> String {
    if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    }
}
