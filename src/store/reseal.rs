//! Sealing what is not sealed under the current key, when the server starts: rows an older
//! triage wrote with their secrets in clear, and rows sealed under a previous key (after a
//! rotation, so that the previous key can later be dropped). Each row is rewritten only if no
//! one changed it meanwhile (another replica's write is sealed already), without touching
//! `updated_at` or telling webhook receivers: nothing a client sees changes.
//!
//! On SQLite the file is then rebuilt (`VACUUM`) and the WAL emptied: an `UPDATE` leaves the
//! old text in free space of the file and in old WAL frames, where a copy of the file would
//! still show it. PostgreSQL keeps old row versions until its own vacuum reuses their space;
//! `docs/security.md` says what to run there.

use uuid::Uuid;

use super::db::{Db, on_pool};
use super::sealing::{SealError, Stale};
use super::{Store, StoreError};

/// Rows read per round.
const PAGE: i64 = 500;

/// What [`Store::reseal`] did.
#[derive(Debug, Default)]
pub struct Resealed {
    /// Rows whose secrets were in clear, now sealed.
    pub plain: u64,
    /// Rows sealed under a previous key, now under the current one.
    pub rotated: u64,
    /// Rows whose secrets do not open with any configured key: left as they are.
    pub unreadable: Vec<(Uuid, SealError)>,
}

impl Store {
    /// Seals every stored config whose secrets are in clear or under a previous key with the
    /// current key.
    pub async fn reseal(&self) -> Result<Resealed, StoreError> {
        let keys = &self.inner.options.keys;
        let db = &self.inner.db;
        // Only rows that may need it: a non-empty plain list as serde_json writes it, or an
        // envelope of another key. Rows this matches by chance are parsed and left alone.
        let plain = r#"%"secrets":["%"#;
        let any_key = r#"%"kid":"%"#;
        let current = format!(r#"%"kid":"{}"%"#, keys.current_id());
        let sql = format!(
            "SELECT id, config FROM conversations WHERE {} \
             AND (config LIKE $1 OR (config LIKE $2 AND config NOT LIKE $3)) \
             ORDER BY id LIMIT {PAGE}",
            if db.is_postgres() {
                "($4::uuid IS NULL OR id > $4)"
            } else {
                "($4 IS NULL OR id > $4)"
            }
        );
        let mut done = Resealed::default();
        let mut after: Option<Uuid> = None;
        loop {
            let rows: Vec<(Uuid, String)> = on_pool!(db, pool => sqlx::query_as(&sql)
                .bind(plain)
                .bind(any_key)
                .bind(&current)
                .bind(after)
                .fetch_all(pool)
                .await?);
            let Some((last, _)) = rows.last() else {
                break;
            };
            after = Some(*last);
            let full = rows.len() as i64 == PAGE;
            for (id, text) in rows {
                let Ok(mut config) = serde_json::from_str::<serde_json::Value>(&text) else {
                    continue; // reported when the row is read
                };
                let Some(stale) = keys.stale(&config) else {
                    continue;
                };
                if let Err(reason) = keys.open_config(id, &mut config) {
                    done.unreadable.push((id, reason));
                    continue;
                }
                let sealed = self.sealed_config(id, &config)?;
                let written = on_pool!(db, pool => sqlx::query(
                    "UPDATE conversations SET config = $2 WHERE id = $1 AND config = $3",
                )
                .bind(id)
                .bind(&sealed)
                .bind(&text)
                .execute(pool)
                .await?
                .rows_affected());
                match (written, stale) {
                    (0, _) => {}
                    (_, Stale::Plain) => done.plain += 1,
                    (_, Stale::OtherKey) => done.rotated += 1,
                }
            }
            if !full {
                break;
            }
        }
        if done.plain + done.rotated > 0
            && let Db::Sqlite(pool) = db
        {
            sqlx::query("VACUUM").execute(pool).await?;
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(pool)
                .await?;
        }
        Ok(done)
    }
}
