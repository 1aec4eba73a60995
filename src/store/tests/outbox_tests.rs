//! The webhook outbox (run on both backends by `on_both!` in the parent module): deliveries
//! written with their change and only then, one claimer per delivery, queues in order,
//! batches sealed before the first attempt, dead letters and their retry; push targets.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::*;
use crate::store::Put;
use crate::store::db::on_pool;
use crate::store::outbox::{CONVERSATIONS, EVENTS};

fn plan() -> Arc<OutboxPlan> {
    let receiver = |name: &str, kinds: Option<&[&str]>| OutboxReceiver {
        name: name.into(),
        conversations: kinds.is_none(),
        events: true,
        event_kinds: kinds.map(|k| k.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>()),
        batch_size: 2,
        flush_delay: Duration::ZERO,
    };
    Arc::new(OutboxPlan {
        push: false,
        receivers: vec![
            receiver("all", None),
            receiver("answers", Some(&["ai_answer_end"])),
        ],
    })
}

fn with_outbox() -> StoreOptions {
    StoreOptions {
        max_events_per_conversation: 6,
        outbox: Some(plan()),
        ..StoreOptions::default()
    }
}

/// Every undelivered delivery of `receiver`: (kind, sequence, event count, status).
async fn queue(s: &Store, receiver: &str) -> Vec<(String, u64, u64, String)> {
    let q = DeliveryQuery {
        receiver: Some(receiver.into()),
        limit: 100,
        ..DeliveryQuery::default()
    };
    let page = s.deliveries(&q).await.expect("deliveries");
    page.items
        .into_iter()
        .map(|d| (d.kind, d.sequence, d.event_count, d.status))
        .collect()
}

fn owed(kind: &str, sequence: u64, count: u64) -> (String, u64, u64, String) {
    (kind.into(), sequence, count, "pending".into())
}

pub(super) async fn deliveries_are_written_with_their_change(kind: Kind) {
    let Some(f) = fixture(kind, with_outbox()).await else {
        return;
    };
    let s = &f.store;
    let wake = s.subscribe_outbox();
    let r = row("idle", 0, 0);
    s.create(&r).await.expect("create");
    assert!(
        wake.has_changed().expect("the store is open"),
        "create wakes the worker"
    );
    let events = vec![
        event("message", "agent", 1, json!({"n": 1})),
        event("ai_answer_end", "agent", 2, json!({"analysis": "ok"})),
        event(
            "conversation_state_update",
            "environment",
            3,
            json!({"execution_status": "finished"}),
        ),
    ];
    s.append(r.id, events).await.expect("append");
    // Refused appends owe nothing.
    let unknown = s.append(
        Uuid::new_v4(),
        vec![event("message", "agent", 4, json!({}))],
    );
    assert!(matches!(unknown.await, Err(StoreError::NotFound)));
    let too_many = (0..5)
        .map(|n| event("message", "agent", n, json!({})))
        .collect();
    assert!(matches!(
        s.append(r.id, too_many).await,
        Err(StoreError::TooManyEvents { .. })
    ));
    assert!(
        s.set_meta(r.id, Some("renamed"), None, at(5))
            .await
            .expect("meta")
    );
    assert!(
        !s.set_meta(Uuid::new_v4(), Some("x"), None, at(5))
            .await
            .expect("meta")
    );
    assert!(s.delete(r.id).await.expect("delete"));
    assert!(
        !s.delete(r.id).await.expect("delete"),
        "nothing to report twice"
    );
    assert_eq!(
        queue(s, "all").await,
        [
            owed(CONVERSATIONS, 0, 0),
            owed(EVENTS, 2, 2),
            owed(EVENTS, 3, 1),
            owed(CONVERSATIONS, 3, 0),
            owed(CONVERSATIONS, 3, 0),
            owed(CONVERSATIONS, 3, 0),
        ]
    );
    assert_eq!(queue(s, "answers").await, [owed(EVENTS, 2, 1)]);

    // The bodies: each snapshot keeps its own change, the deleted one the row it removed (the
    // webhook worker renders what is sent from them).
    let owner = Uuid::new_v4();
    let mut bodies = Vec::new();
    loop {
        let heads = s.outbox_heads("all", Utc::now(), 10).await.expect("heads");
        let Some(&head) = heads.first() else { break };
        assert_eq!(heads.len(), 1, "one conversation, one head");
        let until = Utc::now() + chrono::Duration::seconds(30);
        assert!(
            s.outbox_claim(head, owner, Utc::now(), until)
                .await
                .expect("claim")
        );
        let (delivery, body) = s
            .outbox_seal(head, owner, 2)
            .await
            .expect("seal")
            .expect("held");
        assert_eq!(delivery.receiver, "all");
        bodies.push(serde_json::from_str::<serde_json::Value>(&body).expect("JSON"));
        assert!(s.outbox_delivered(head, owner).await.expect("delivered"));
    }
    let changes: Vec<(&str, u64)> = bodies
        .iter()
        .filter_map(|b| {
            Some((
                b["change"]["status"].as_str()?,
                b["change"]["last_event_id"].as_u64()?,
            ))
        })
        .collect();
    assert_eq!(
        changes,
        [("idle", 0), ("finished", 3), ("idle", 3), ("deleted", 3)]
    );
    assert_eq!(bodies.last().expect("deleted")["title"], "renamed");
    let ids: Vec<u64> = bodies
        .iter()
        .filter_map(|b| b.as_array())
        .flatten()
        .map(|e| e["id"].as_u64().expect("an id"))
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    f.finish().await;
}

pub(super) async fn one_claimer_sends_each_delivery_in_queue_order(kind: Kind) {
    let options = StoreOptions {
        outbox: Some(plan()),
        ..StoreOptions::default()
    };
    let Some(f) = fixture(kind, options.clone()).await else {
        return;
    };
    let s = &f.store;
    // A second replica on the same database.
    let other = Store::open(&f.url, options).await.expect("a second store");
    let (a, b) = (row("idle", 0, 0), row("idle", 0, 0));
    s.create(&a).await.expect("create");
    s.create(&b).await.expect("create");
    for n in 1..=3 {
        let one = vec![event("message", "agent", n, json!({"n": n}))];
        s.append(a.id, one).await.expect("append");
    }
    let now = Utc::now();
    let later = now + chrono::Duration::seconds(30);
    let heads = s.outbox_heads("all", now, 10).await.expect("heads");
    assert_eq!(heads.len(), 2, "one head per conversation: {heads:?}");
    let (me, them) = (Uuid::new_v4(), Uuid::new_v4());
    let claims = futures::future::join(
        s.outbox_claim(heads[0], me, now, later),
        other.outbox_claim(heads[0], them, now, later),
    )
    .await;
    let (mine, theirs) = (claims.0.expect("claim"), claims.1.expect("claim"));
    assert!(mine ^ theirs, "exactly one replica claims a delivery");
    let winner = if mine { me } else { them };
    let loser = if winner == me { them } else { me };
    assert_eq!(
        s.outbox_heads("all", now, 10).await.expect("heads"),
        [heads[1]],
        "a claimed head is nobody else's"
    );
    assert_eq!(s.outbox_seal(heads[0], loser, 2).await.expect("seal"), None);
    // A's snapshot is sent alone; then A's three single-event deliveries are sealed as one
    // batch of two, and the third waits for it.
    assert!(
        s.outbox_delivered(heads[0], winner)
            .await
            .expect("delivered")
    );
    let next = s.outbox_heads("all", now, 10).await.expect("heads");
    let a_head = next
        .iter()
        .copied()
        .find(|h| *h != heads[1])
        .expect("A's next");
    assert!(s.outbox_claim(a_head, me, now, later).await.expect("claim"));
    let (batch, body) = s
        .outbox_seal(a_head, me, 2)
        .await
        .expect("seal")
        .expect("held");
    assert_eq!(
        (batch.kind.as_str(), batch.event_count, batch.sequence),
        (EVENTS, 2, 2)
    );
    let sent: Vec<u64> = serde_json::from_str::<Vec<serde_json::Value>>(&body)
        .expect("an array")
        .iter()
        .map(|e| e["id"].as_u64().expect("an id"))
        .collect();
    assert_eq!(sent, [1, 2]);
    // Sealed: the same bytes on every attempt.
    let again = s
        .outbox_seal(a_head, me, 2)
        .await
        .expect("seal")
        .expect("held");
    assert_eq!((again.0.id, &again.1), (batch.id, &body));

    // A failure: retried later, then dead-lettered; a dead letter holds nothing back.
    let failure = Failure {
        error: "HTTP 500".into(),
        status: Some(500),
    };
    let soon = Utc::now() + chrono::Duration::milliseconds(200);
    assert!(
        s.outbox_failed(a_head, me, &failure, Some(soon))
            .await
            .expect("failed")
    );
    assert!(
        !s.outbox_heads("all", Utc::now(), 10)
            .await
            .expect("heads")
            .contains(&a_head)
    );
    tokio::time::sleep(Duration::from_millis(250)).await;
    let now = Utc::now();
    assert!(
        s.outbox_heads("all", now, 10)
            .await
            .expect("heads")
            .contains(&a_head)
    );
    assert!(
        s.outbox_claim(a_head, me, now, now + chrono::Duration::seconds(30))
            .await
            .expect("claim")
    );
    assert!(
        s.outbox_failed(a_head, me, &failure, None)
            .await
            .expect("dead")
    );
    let dead = s.delivery(batch.id).await.expect("read").expect("kept");
    assert_eq!((dead.status.as_str(), dead.attempts), ("failed", 2));
    assert_eq!(dead.last_status, Some(500));
    let heads = s.outbox_heads("all", Utc::now(), 10).await.expect("heads");
    assert_eq!(heads.len(), 2, "A's third event is next: {heads:?}");
    let stats = s.outbox_stats().await.expect("stats");
    let all = stats.iter().find(|q| q.receiver == "all").expect("all");
    assert_eq!((all.pending, all.failed), (2, 1));
    assert!(all.oldest_pending.is_some());

    // Retried by hand: pending again, attempts from zero, same id and body.
    let retried = s.retry_delivery(batch.id).await.expect("retry");
    assert_eq!((retried.status.as_str(), retried.attempts), ("pending", 0));
    assert!(matches!(
        s.retry_delivery(batch.id).await,
        Err(RetryError::NotFailed)
    ));
    assert!(matches!(
        s.retry_delivery(Uuid::new_v4()).await,
        Err(RetryError::NotFound)
    ));
    let now = Utc::now();
    assert!(
        s.outbox_heads("all", now, 10)
            .await
            .expect("heads")
            .contains(&a_head)
    );
    assert!(
        s.outbox_claim(a_head, me, now, now + chrono::Duration::seconds(30))
            .await
            .expect("claim")
    );
    let resent = s
        .outbox_seal(a_head, me, 2)
        .await
        .expect("seal")
        .expect("held");
    assert_eq!(resent.1, again.1);

    // An expired claim (its replica died) is another's to take.
    assert!(s.outbox_delivered(a_head, me).await.expect("delivered"));
    let stale = Utc::now();
    let heads = s.outbox_heads("all", stale, 10).await.expect("heads");
    let expired = stale - chrono::Duration::seconds(1);
    assert!(
        s.outbox_claim(heads[0], me, stale, expired)
            .await
            .expect("claim")
    );
    assert!(
        other
            .outbox_claim(heads[0], them, stale, later)
            .await
            .expect("taken over")
    );
    assert_eq!(s.release_outbox_claims().await.expect("release"), 1);
    other.close().await;
    f.finish().await;
}

/// Push targets: stored sealed, capped, replaced by id; every status change of their
/// conversation owes each a snapshot in the append's transaction (events owe them nothing);
/// their queues are read apart from the configured receivers'; deleting one drops what was
/// still queued for it; deleting the conversation deletes its targets.
pub(super) async fn push_targets_are_owed_each_status_change(kind: Kind) {
    let options = StoreOptions {
        outbox: Some(Arc::new(OutboxPlan {
            push: true,
            receivers: Vec::new(),
        })),
        ..StoreOptions::default()
    };
    let Some(f) = fixture(kind, options).await else {
        return;
    };
    let s = &f.store;
    let r = row("idle", 0, 0);
    s.create(&r).await.expect("create");
    let target = |id: &str| crate::store::PushTarget {
        conversation_id: r.id,
        id: id.into(),
        url: format!("https://hooks.example/{id}"),
        scheme: Some("Bearer".into()),
        credentials: Some("cred-secret".into()),
        token: Some("token-secret".into()),
        created_at: at(1),
    };
    assert_eq!(
        s.put_push_target(&target("a"), 2).await.expect("put"),
        Put::Stored
    );
    assert_eq!(
        s.put_push_target(&target("b"), 2).await.expect("put"),
        Put::Stored
    );
    assert_eq!(
        s.put_push_target(&target("c"), 2).await.expect("put"),
        Put::Full { max: 2 }
    );
    assert_eq!(
        s.put_push_target(&target("a"), 2).await.expect("put"),
        Put::Stored,
        "replacing one is not adding one"
    );
    let mut elsewhere = target("a");
    elsewhere.conversation_id = Uuid::new_v4();
    assert_eq!(
        s.put_push_target(&elsewhere, 2).await.expect("put"),
        Put::NoConversation
    );
    let read = s.push_target(r.id, "a").await.expect("read").expect("kept");
    assert_eq!(read, target("a"));
    let sealed: (String,) = on_pool!(&s.inner.db, pool => sqlx::query_as(
        "SELECT secrets FROM push_targets WHERE target_id = 'a'")
        .fetch_one(pool)
        .await
        .expect("row"));
    assert!(!sealed.0.contains("secret"), "sealed at rest: {}", sealed.0);

    let events = vec![
        event("message", "agent", 2, json!({})),
        event(
            "conversation_state_update",
            "environment",
            3,
            json!({"execution_status": "running"}),
        ),
        event("message", "agent", 4, json!({})),
    ];
    s.append(r.id, events).await.expect("append");
    let a = crate::store::push::receiver_name(r.id, "a");
    let b = crate::store::push::receiver_name(r.id, "b");
    assert_eq!(queue(s, &a).await, [owed(CONVERSATIONS, 2, 0)]);
    assert_eq!(queue(s, &b).await, [owed(CONVERSATIONS, 2, 0)]);
    // One head per target's queue, and none under a configured receiver's name.
    let heads = s.outbox_push_heads(Utc::now(), 10).await.expect("heads");
    assert_eq!(heads.len(), 2);
    assert!(
        s.outbox_heads("a", Utc::now(), 10)
            .await
            .expect("heads")
            .is_empty()
    );
    assert_eq!(
        s.push_target_of(&a).await.expect("read").map(|t| t.id),
        Some("a".to_owned())
    );

    assert!(s.delete_push_target(r.id, "a").await.expect("delete"));
    assert!(!s.delete_push_target(r.id, "a").await.expect("delete"));
    assert!(
        queue(s, &a).await.is_empty(),
        "nothing more goes to a deleted target"
    );
    assert_eq!(s.push_targets(r.id).await.expect("list").len(), 1);
    assert!(s.delete(r.id).await.expect("delete"));
    assert!(s.push_target_of(&b).await.expect("read").is_none());
    f.finish().await;
}
