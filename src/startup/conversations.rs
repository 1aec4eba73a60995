//! Opening the conversation store at start-up: migrated, its secrets resealed with the current
//! key, the runs a stopped process left marked, the webhook outbox's worker and the retention
//! sweep started.

use std::sync::Arc;
use std::time::Duration;

use super::{StartupError, store_files};
use crate::agent::CurrentAgent;
use crate::config::{ConfigError, Settings};
use crate::conversations::Conversations;
use crate::store::{Backend, Store, StoreOptions};

/// The conversation store (migrated), and the conversations that were running when the server
/// last stopped marked as such.
pub(super) async fn open_conversations(
    settings: &Settings,
    agent: Arc<CurrentAgent>,
) -> Result<Arc<Conversations>, StartupError> {
    let c = &settings.conversations;
    let keys = store_files::secret_keys(c)?;
    store_files::tighten_data_dir(c);
    let options = StoreOptions {
        max_events_per_conversation: c.max_events_per_conversation,
        outbox: crate::webhooks::outbox_plan(&settings.webhooks, settings.a2a.push_notifications),
        keys: Arc::new(keys),
        ..StoreOptions::default()
    };
    let store = Store::open(&c.database_url(), options)
        .await
        .map_err(|e| StartupError::Store(e.to_string()))?;
    reseal(&store).await?;
    // One SQLite file has one replica: the leases of the process that ran before are its own.
    if store.backend() == Backend::Sqlite {
        store
            .release_all()
            .await
            .map_err(|e| StartupError::Store(e.to_string()))?;
    }
    let lease = Duration::from_secs_f64(c.lease_secs);
    let default_steps = agent.current().options.max_steps;
    let conversations = Conversations::new(agent, store, c.max_running, lease, c.auto_title);
    let recovered = conversations
        .recover()
        .await
        .map_err(|e| StartupError::Store(e.to_string()))?;
    conversations.maintain();
    let roots = settings.outbound_roots()?;
    crate::webhooks::start(
        &settings.webhooks,
        conversations.store(),
        default_steps,
        &roots,
    )
    .await
    .map_err(|e| StartupError::Config(ConfigError::Invalid(e)))?;
    if settings.a2a.push_notifications {
        start_push(settings, &conversations, &roots)?;
    }
    if c.retention_days > 0 {
        let expiring = Arc::downgrade(&conversations);
        let days = c.retention_days;
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(3600));
            loop {
                every.tick().await;
                let Some(conversations) = expiring.upgrade() else {
                    return;
                };
                match conversations.expire(days).await {
                    Ok(0) => {}
                    Ok(gone) => tracing::info!(gone, days, "expired conversations deleted"),
                    Err(e) => tracing::warn!(error = %e, "deleting expired conversations failed"),
                }
            }
        });
    }
    if recovered > 0 {
        tracing::warn!(
            recovered,
            "conversations that were running when the server stopped are now `error`; `run` continues them"
        );
    }
    Ok(conversations)
}

/// The worker that sends A2A push notifications, with the webhooks' retry policy shaped by
/// `[a2a]`.
fn start_push(
    settings: &Settings,
    conversations: &Arc<Conversations>,
    roots: &crate::runtime::trust::ExtraRoots,
) -> Result<(), StartupError> {
    let a2a = &settings.a2a;
    let mut policy = crate::webhooks::WebhookSettings::new("push", "http://push.invalid");
    policy.timeout_secs = a2a.push_timeout_secs;
    policy.max_attempts = a2a.push_max_attempts;
    policy.signing_secret = a2a.push_signing_secret.clone();
    let retention = Duration::from_secs_f64(policy.dead_letter_retention_secs);
    let sender = crate::webhooks::push::PushSender::new(
        &policy,
        roots,
        crate::a2a::push::renderer(conversations.clone()),
        crate::a2a::push::CONTENT_TYPE,
    )
    .map_err(|e| StartupError::Config(ConfigError::Invalid(format!("a2a: {e}"))))?;
    crate::webhooks::push::spawn(sender, conversations.store(), retention);
    Ok(())
}

/// Seals the secrets an older triage stored in clear, and those under a previous key, with the
/// current key; conversations no configured key opens are named in the log, and refused with
/// an error naming them when used.
async fn reseal(store: &Store) -> Result<(), StartupError> {
    let done = store
        .reseal()
        .await
        .map_err(|e| StartupError::Store(e.to_string()))?;
    if done.plain > 0 {
        tracing::info!(
            conversations = done.plain,
            "conversation secrets stored in clear by an earlier version are now sealed"
        );
    }
    if done.rotated > 0 {
        tracing::info!(
            conversations = done.rotated,
            "conversation secrets sealed with a previous key are now sealed with conversations.secret_key"
        );
    }
    for (id, reason) in &done.unreadable {
        tracing::error!(conversation = %id, "conversation secrets cannot be read: {reason}");
    }
    Ok(())
}
