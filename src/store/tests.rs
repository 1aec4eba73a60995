//! The store's contract, each test on SQLite (a temp file) and on PostgreSQL (a fresh database
//! per test) when `POSTGRES_TEST_URL` names a server (`.ci/run` starts one).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use sqlx::Connection;
use uuid::Uuid;

use super::*;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Sqlite,
    Postgres,
}

/// A store on a database of its own, and how to remove that database.
struct Fixture {
    store: Store,
    url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    Dir(PathBuf),
    Database { admin_url: String, name: String },
}

const POSTGRES_VAR: &str = "POSTGRES_TEST_URL";

async fn fixture(kind: Kind, options: StoreOptions) -> Option<Fixture> {
    let (url, cleanup) = match kind {
        Kind::Sqlite => {
            let dir = std::env::temp_dir().join(format!("triage-store-{}", Uuid::new_v4()));
            // A directory that does not exist yet: open creates it.
            let url = format!("sqlite://{}", dir.join("nested/triage.db").display());
            (url, Cleanup::Dir(dir))
        }
        Kind::Postgres => {
            let Ok(admin_url) = std::env::var(POSTGRES_VAR) else {
                // `.ci/run` sets it: there a PostgreSQL test that cannot run fails.
                assert!(
                    std::env::var_os("POSTGRES_TEST_REQUIRED").is_none(),
                    "POSTGRES_TEST_REQUIRED is set but {POSTGRES_VAR} is not"
                );
                eprintln!("skipped on PostgreSQL: {POSTGRES_VAR} is not set");
                return None;
            };
            let name = format!("triage_test_{}", Uuid::new_v4().simple());
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
            (url.to_string(), Cleanup::Database { admin_url, name })
        }
    };
    let store = Store::open(&url, options).await.expect("open the store");
    Some(Fixture {
        store,
        url,
        cleanup,
    })
}

impl Fixture {
    async fn finish(self) {
        self.store.close().await;
        match self.cleanup {
            Cleanup::Dir(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::Database { admin_url, name } => {
                if let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await {
                    let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::query(&drop).execute(&mut admin).await;
                }
            }
        }
    }
}

/// One test per backend, named `<scenario>::sqlite` and `<scenario>::postgres`.
macro_rules! on_both {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                super::$scenario(super::Kind::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                super::$scenario(super::Kind::Postgres).await
            }
        }
    )*};
}

on_both!(
    rows_are_created_read_updated_and_deleted,
    concurrent_appends_get_gap_free_ids_in_order,
    event_pages_follow_filters_both_ways,
    conversations_page_by_status_and_sort_order,
    the_event_cap_is_enforced_per_append,
    subscribers_hear_of_every_commit,
    retention_deletes_old_conversations_in_the_given_statuses,
    a_reopened_store_sees_everything,
    one_replica_holds_a_lease_and_takes_its_commands,
    deliveries_are_written_with_their_change,
    one_claimer_sends_each_delivery_in_queue_order,
    push_targets_are_owed_each_status_change,
    secrets_are_sealed_in_the_row_and_opened_on_every_read,
    rows_of_older_versions_are_read_and_sealed_when_resealed,
    another_key_is_refused_naming_the_conversation_and_rotation_reseals,
);

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + seconds, 0)
        .single()
        .expect("a valid time")
}

fn row(status: &str, created: i64, updated: i64) -> ConversationRow {
    ConversationRow {
        id: Uuid::new_v4(),
        title: Some(format!("{status} {created}")),
        tags: BTreeMap::from([("team".to_owned(), "sre".to_owned())]),
        status: status.parse().expect("a status"),
        reason: None,
        config: json!({"model": "fake", "secrets": {"token": "s3cret"}}),
        state: json!({"messages": []}),
        state_event_id: 0,
        stats: json!({"llm_calls": 0}),
        last_event_id: 0,
        created_at: at(created),
        updated_at: at(updated),
    }
}

/// An event as its writer makes it: a status change is handed over typed, beside its payload.
fn event(kind: &str, source: &str, seconds: i64, payload: serde_json::Value) -> NewEvent {
    let kind: EventKind = kind.parse().expect("an event kind");
    NewEvent {
        status: (kind == EventKind::ConversationStateUpdate)
            .then(|| StatusChange::of_payload(&payload))
            .flatten(),
        kind,
        source: source.to_owned(),
        timestamp: at(seconds),
        payload,
    }
}

async fn rows_are_created_read_updated_and_deleted(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let s = &f.store;
    let mut a = row("idle", 1, 1);
    // The store owns last_event_id: a value in the row is not taken.
    a.last_event_id = 9;
    s.create(&a).await.expect("create");
    a.last_event_id = 0;
    assert_eq!(s.get(a.id).await.expect("get"), Some(a.clone()));
    assert!(matches!(s.create(&a).await, Err(StoreError::Conflict(id)) if id == a.id.to_string()));

    let unknown = Uuid::new_v4();
    let many = s.get_many(&[unknown, a.id]).await.expect("get_many");
    assert_eq!(many, vec![None, Some(a.clone())]);

    s.append(
        a.id,
        vec![event("user_message", "user", 2, json!({"content": "hi"}))],
    )
    .await
    .expect("append");
    let mut changed = a.clone();
    changed.title = None;
    changed.tags.insert("env".into(), "prod".into());
    changed.status = ConversationStatus::Error;
    changed.reason = Some("the server stopped".into());
    changed.state = json!({"messages": [{"role": "user"}]});
    changed.state_event_id = 1;
    changed.stats = json!({"llm_calls": 3});
    changed.created_at = at(100); // not stored: created_at is fixed
    changed.last_event_id = 0; // not stored: append maintains it
    changed.updated_at = at(5);
    changed.config = json!({"other": true}); // not stored: set_config writes it
    s.update(&changed).await.expect("update");
    let stored = s.get(a.id).await.expect("get").expect("the row");
    assert_eq!(stored.created_at, a.created_at);
    assert_eq!(stored.last_event_id, 1);
    assert_eq!(
        (&stored.title, &stored.tags, &stored.config),
        (&a.title, &a.tags, &a.config),
        "title, tags and config have writers of their own"
    );
    assert_eq!(
        (stored.status, stored.reason),
        (changed.status, changed.reason)
    );
    assert!(
        s.set_meta(a.id, None, Some(&changed.tags), at(6))
            .await
            .expect("set_meta")
    );
    assert!(
        s.set_config(a.id, &changed.config, at(7))
            .await
            .expect("set_config")
    );
    let stored = s.get(a.id).await.expect("get").expect("the row");
    assert_eq!(
        (stored.title, stored.tags, stored.config, stored.updated_at),
        (
            a.title.clone(),
            changed.tags.clone(),
            changed.config.clone(),
            at(7)
        )
    );
    assert_eq!(
        (stored.state_event_id, stored.stats),
        (1, json!({"llm_calls": 3}))
    );
    assert!(matches!(
        s.update(&row("idle", 1, 1)).await,
        Err(StoreError::NotFound)
    ));

    assert!(s.delete(a.id).await.expect("delete"));
    assert!(!s.delete(a.id).await.expect("delete again"));
    assert_eq!(s.get(a.id).await.expect("get"), None);
    assert_eq!(
        s.count_events(a.id, &EventQuery::default()).await.ok(),
        Some(0)
    );
    // The id is free again, and its events start over at 1.
    s.create(&a).await.expect("create again");
    let again = s
        .append(a.id, vec![event("user_message", "user", 3, json!({}))])
        .await
        .expect("append");
    assert_eq!(again[0].id, 1);
    f.finish().await;
}

async fn concurrent_appends_get_gap_free_ids_in_order(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let conversations: Vec<Uuid> = (0..10).map(|_| Uuid::new_v4()).collect();
    for (i, id) in conversations.iter().enumerate() {
        let mut r = row("running", i as i64, i as i64);
        r.id = *id;
        f.store.create(&r).await.expect("create");
    }
    let tasks: Vec<_> = (0..50)
        .map(|task| {
            let store = f.store.clone();
            let id = conversations[task % 10];
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..20 {
                    // Every other append carries two events: both must be consecutive.
                    let events: Vec<NewEvent> = (0..1 + i % 2)
                        .map(|part| {
                            event(
                                "message",
                                "agent",
                                i,
                                json!({"task": task, "i": i, "part": part}),
                            )
                        })
                        .collect();
                    let stored = store.append(id, events).await.expect("append");
                    if let [first, second] = stored.as_slice() {
                        assert_eq!(second.id, first.id + 1);
                    }
                    ids.extend(stored.iter().map(|e| e.id));
                }
                ids
            })
        })
        .collect();
    let mut returned = Vec::new();
    for task in tasks {
        let ids = task.await.expect("an appending task");
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "a task's own appends keep their order"
        );
        returned.push(ids);
    }
    for (c, id) in conversations.iter().enumerate() {
        let page = f
            .store
            .events(
                *id,
                &EventQuery {
                    limit: 1000,
                    ..Default::default()
                },
            )
            .await
            .expect("events");
        // 5 tasks × (10 single + 10 double) appends.
        let ids: Vec<u64> = page.items.iter().map(|e| e.id).collect();
        assert_eq!(ids, (1..=150).collect::<Vec<u64>>(), "conversation {c}");
        let row = f.store.get(*id).await.expect("get").expect("row");
        assert_eq!(row.last_event_id, 150);
        let mut stored_order: Vec<u64> = Vec::new();
        for task in (c..50).step_by(10) {
            stored_order.clear();
            stored_order.extend(
                page.items
                    .iter()
                    .filter(|e| e.payload["task"] == json!(task))
                    .map(|e| e.id),
            );
            assert_eq!(
                stored_order, returned[task],
                "task {task}: ids returned = ids stored"
            );
        }
    }
    f.finish().await;
}

mod outbox_tests;
use outbox_tests::{
    deliveries_are_written_with_their_change, one_claimer_sends_each_delivery_in_queue_order,
    push_targets_are_owed_each_status_change,
};
mod paging_tests;
mod sealing_tests;
use paging_tests::{
    a_reopened_store_sees_everything, conversations_page_by_status_and_sort_order,
    event_pages_follow_filters_both_ways,
    retention_deletes_old_conversations_in_the_given_statuses, subscribers_hear_of_every_commit,
    the_event_cap_is_enforced_per_append,
};
use sealing_tests::{
    another_key_is_refused_naming_the_conversation_and_rotation_reseals,
    rows_of_older_versions_are_read_and_sealed_when_resealed,
    secrets_are_sealed_in_the_row_and_opened_on_every_read,
};

/// Waits for the announcement `(id, seq)` or fails after 10 s.
async fn heard(
    receiver: &mut tokio::sync::broadcast::Receiver<(Uuid, u64)>,
    want: (Uuid, u64),
) -> bool {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match receiver.recv().await {
                Ok(got) if got == want => return true,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return false,
            }
        }
    })
    .await
    .unwrap_or(false)
}

async fn one_replica_holds_a_lease_and_takes_its_commands(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let s = &f.store;
    let (one, two) = (Uuid::new_v4(), Uuid::new_v4());
    let mut a = row("running", 1, 1);
    s.create(&a).await.expect("create");
    assert!(s.claim(a.id, one, at(0), at(10)).await.expect("claim"));
    assert!(
        !s.claim(a.id, two, at(5), at(15)).await.expect("claim"),
        "held until 10"
    );
    assert!(
        !s.claim(Uuid::new_v4(), two, at(5), at(15))
            .await
            .expect("claim")
    );
    assert_eq!(
        s.lease(a.id).await.expect("lease"),
        Some(Lease {
            owner: one,
            until: at(10)
        })
    );
    assert_eq!(
        s.orphaned(&[ConversationStatus::Running], at(5), 10)
            .await
            .expect("orphaned"),
        Vec::<Uuid>::new()
    );
    assert_eq!(s.renew(one, at(20)).await.expect("renew"), vec![a.id]);
    assert_eq!(
        s.orphaned(&[ConversationStatus::Running], at(21), 10)
            .await
            .expect("orphaned"),
        vec![a.id]
    );

    // Commands queue for the owner, in order, each taken once.
    let mut woken = s.subscribe_commands();
    s.push_command(a.id, "message", &json!({"content": "one"}))
        .await
        .expect("push");
    s.push_command(a.id, "pause", &json!({}))
        .await
        .expect("push");
    let heard = tokio::time::timeout(Duration::from_secs(5), woken.recv()).await;
    assert_eq!(heard.expect("woken").expect("an id"), a.id);
    assert!(matches!(
        s.push_command(Uuid::new_v4(), "pause", &json!({})).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        s.take_commands(two).await.expect("take"),
        vec![],
        "not two's"
    );
    let taken = s.take_commands(one).await.expect("take");
    let kinds: Vec<&str> = taken.iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(kinds, ["message", "pause"]);
    assert_eq!(taken[0].payload, json!({"content": "one"}));
    assert_eq!(s.take_commands(one).await.expect("take"), vec![]);

    // A run's end is written only while its replica still holds the lease.
    a.status = ConversationStatus::Finished;
    assert!(
        !s.finish(&a, two).await.expect("finish"),
        "two does not hold it"
    );
    assert!(
        s.claim(a.id, two, at(21), at(30))
            .await
            .expect("expired: taken over")
    );
    assert!(!s.finish(&a, one).await.expect("finish"), "one lost it");
    assert_eq!(
        s.get(a.id).await.expect("get").expect("row").status,
        ConversationStatus::Running
    );
    assert!(s.finish(&a, two).await.expect("finish"));
    assert_eq!(
        s.get(a.id).await.expect("get").expect("row").status,
        ConversationStatus::Finished
    );
    assert_eq!(
        s.lease(a.id).await.expect("lease"),
        None,
        "released with the end"
    );
    assert!(s.claim(a.id, one, at(0), at(1)).await.expect("free again"));
    assert!(!s.release(a.id, two).await.expect("release"));
    assert!(s.release(a.id, one).await.expect("release"));
    assert!(s.claim(a.id, two, at(0), at(1)).await.expect("claim"));
    assert_eq!(s.release_all().await.expect("release_all"), 1);
    f.finish().await;
}
