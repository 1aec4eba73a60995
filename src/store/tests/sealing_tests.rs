//! Conversation secrets at rest (run on both backends by `on_both!` in the parent module):
//! sealed in the row, opened on every read, rows of older versions read and sealed when the
//! store opens, a wrong key refused naming the conversation, rotation.

use std::sync::Arc;

use super::*;
use crate::store::db::on_pool;
use crate::store::sealing::{SecretKeys, key_id, random_key};

const SECRET: &str = "sk-at-rest-7f3a9c";

fn with_keys(keys: SecretKeys) -> StoreOptions {
    StoreOptions {
        keys: Arc::new(keys),
        ..StoreOptions::default()
    }
}

fn with_secret(status: &str) -> ConversationRow {
    ConversationRow {
        config: json!({"run": {"model": "fake", "secrets": [SECRET]}, "policy": "ConfirmRisky"}),
        ..row(status, 0, 0)
    }
}

/// The config column exactly as stored.
async fn stored_config(store: &Store, id: Uuid) -> String {
    on_pool!(&store.inner.db, pool => sqlx::query_scalar("SELECT config FROM conversations WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .expect("the row"))
}

pub(super) async fn secrets_are_sealed_in_the_row_and_opened_on_every_read(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let r = with_secret("idle");
    f.store.create(&r).await.expect("create");
    let text = stored_config(&f.store, r.id).await;
    assert!(!text.contains(SECRET), "{text}");
    assert!(text.contains(f.store.options().keys.current_id()), "{text}");
    let got = f.store.get(r.id).await.expect("get").expect("found");
    assert_eq!(got.config, r.config);
    let many = f.store.get_many(&[r.id]).await.expect("get_many");
    assert_eq!(many[0].as_ref().map(|r| &r.config), Some(&r.config));
    let page = f
        .store
        .search(&ConversationQuery::default())
        .await
        .expect("search");
    assert_eq!(page.items[0].config, r.config);
    let mut changed = r.config.clone();
    changed["run"]["secrets"] = json!([SECRET, "second-secret-0042"]);
    assert!(
        f.store
            .set_config(r.id, &changed, at(1))
            .await
            .expect("set")
    );
    let text = stored_config(&f.store, r.id).await;
    assert!(
        !text.contains(SECRET) && !text.contains("second-secret-0042"),
        "{text}"
    );
    let got = f.store.get(r.id).await.expect("get").expect("found");
    assert_eq!(got.config, changed);
    f.finish().await;
}

pub(super) async fn rows_of_older_versions_are_read_and_sealed_when_resealed(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let (old, empty) = (with_secret("finished"), row("idle", 1, 1));
    for r in [&old, &empty] {
        f.store.create(r).await.expect("create");
    }
    // As an earlier triage wrote them: the list in clear.
    let plain = old.config.to_string();
    on_pool!(&f.store.inner.db, pool => sqlx::query("UPDATE conversations SET config = $2 WHERE id = $1")
        .bind(old.id)
        .bind(&plain)
        .execute(pool)
        .await
        .expect("write an old row")
        .rows_affected());
    let got = f.store.get(old.id).await.expect("get").expect("found");
    assert_eq!(got.config, old.config);
    let done = f.store.reseal().await.expect("reseal");
    assert_eq!((done.plain, done.rotated), (1, 0), "{done:?}");
    assert!(done.unreadable.is_empty());
    let text = stored_config(&f.store, old.id).await;
    assert!(!text.contains(SECRET), "{text}");
    assert_eq!(
        f.store
            .get(old.id)
            .await
            .expect("get")
            .expect("found")
            .config,
        old.config
    );
    let again = f.store.reseal().await.expect("reseal");
    assert_eq!((again.plain, again.rotated), (0, 0));
    f.finish().await;
}

pub(super) async fn another_key_is_refused_naming_the_conversation_and_rotation_reseals(
    kind: Kind,
) {
    let (first, second) = (random_key(), random_key());
    let Some(f) = fixture(kind, with_keys(SecretKeys::new(&first, &[]))).await else {
        return;
    };
    let (r, other) = (with_secret("idle"), with_secret("finished"));
    for r in [&r, &other] {
        f.store.create(r).await.expect("create");
    }
    let wrong = Store::open(&f.url, with_keys(SecretKeys::new(&second, &[])))
        .await
        .expect("open");
    let err = wrong.get(r.id).await.expect_err("another key");
    assert!(
        matches!(&err, StoreError::Sealed { id, .. } if *id == r.id),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&r.id.to_string()) && message.contains(&key_id(&first)),
        "{message}"
    );
    assert!(!message.contains(SECRET));
    let done = wrong.reseal().await.expect("reseal");
    assert_eq!(done.unreadable.len(), 2, "{done:?}");
    // Still deleted: nothing needs its secrets for that.
    assert!(wrong.delete(other.id).await.expect("delete"));
    wrong.close().await;

    let rotated = Store::open(&f.url, with_keys(SecretKeys::new(&second, &[first])))
        .await
        .expect("open");
    assert_eq!(
        rotated.get(r.id).await.expect("get").expect("found").config,
        r.config
    );
    let done = rotated.reseal().await.expect("reseal");
    assert_eq!((done.plain, done.rotated), (0, 1), "{done:?}");
    let text = stored_config(&rotated, r.id).await;
    assert!(
        text.contains(&key_id(&second)) && !text.contains(&key_id(&first)),
        "{text}"
    );
    rotated.close().await;
    // The previous key can go now.
    let later = Store::open(&f.url, with_keys(SecretKeys::new(&second, &[])))
        .await
        .expect("open");
    assert_eq!(
        later.get(r.id).await.expect("get").expect("found").config,
        r.config
    );
    later.close().await;
    f.finish().await;
}
