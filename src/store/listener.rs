//! PostgreSQL: LISTEN on `triage_events` and `triage_commands`, so that appends and commands
//! committed by other replicas reach this replica's subscribers. Reconnects with back-off when the connection drops;
//! notifications sent while disconnected are lost, which subscribers survive because an
//! announcement only says "read the store up to N" and the next one carries the newest N.

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::{COMMANDS_CHANNEL, NOTIFY_CHANNEL};

const MAX_BACKOFF: Duration = Duration::from_secs(5);

pub(crate) fn spawn(
    pool: PgPool,
    announce: broadcast::Sender<(Uuid, u64)>,
    commands: broadcast::Sender<Uuid>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            match listen(&pool, &announce, &commands).await {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(e) => tracing::warn!(error = %e, "LISTEN {NOTIFY_CHANNEL} failed; retrying"),
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    })
}

/// Listens until the connection drops (`Ok`) or cannot be made (`Err`).
async fn listen(
    pool: &PgPool,
    announce: &broadcast::Sender<(Uuid, u64)>,
    commands: &broadcast::Sender<Uuid>,
) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener
        .listen_all([NOTIFY_CHANNEL, COMMANDS_CHANNEL])
        .await?;
    while let Some(notification) = listener.try_recv().await? {
        if notification.channel() == COMMANDS_CHANNEL {
            match notification.payload().parse() {
                Ok(id) => {
                    let _ = commands.send(id);
                }
                Err(_) => tracing::warn!(
                    payload = notification.payload(),
                    "ignoring a malformed {COMMANDS_CHANNEL} notification"
                ),
            }
            continue;
        }
        match parse(notification.payload()) {
            Some(announcement) => {
                let _ = announce.send(announcement);
            }
            None => tracing::warn!(
                payload = notification.payload(),
                "ignoring a malformed {NOTIFY_CHANNEL} notification"
            ),
        }
    }
    tracing::warn!("the LISTEN connection to PostgreSQL dropped; reconnecting");
    Ok(())
}

/// `uuid:seq`.
pub(crate) fn parse(payload: &str) -> Option<(Uuid, u64)> {
    let (id, seq) = payload.split_once(':')?;
    Some((id.parse().ok()?, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn payloads_are_uuid_colon_seq() {
        let id = uuid::Uuid::new_v4();
        assert_eq!(super::parse(&format!("{id}:12")), Some((id, 12)));
        assert_eq!(super::parse("nonsense"), None);
        assert_eq!(super::parse(&format!("{id}:-1")), None);
    }
}
