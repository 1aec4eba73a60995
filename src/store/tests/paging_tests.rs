//! Paging, counts, the event cap, subscriptions, retention and reopening (run on both
//! backends by `on_both!` in the parent module).

use super::*;

/// All pages of a query, following `next_page_id`.
async fn all_pages(store: &Store, id: Uuid, mut q: EventQuery) -> Vec<u64> {
    let mut ids = Vec::new();
    loop {
        let page = store.events(id, &q).await.expect("a page");
        assert!(page.items.len() <= q.limit as usize);
        ids.extend(page.items.iter().map(|e| e.id));
        match page.next_page_id {
            Some(next) => q.page_id = Some(next),
            None => return ids,
        }
    }
}

pub(super) async fn event_pages_follow_filters_both_ways(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let s = &f.store;
    let r = row("idle", 0, 0);
    s.create(&r).await.expect("create");
    // Events 1..=25: odd ones are tool results, even ones messages; every fifth mentions a
    // disk ("DISK" in capitals for the 10th); event n happens at second n.
    let events = (1..=25)
        .map(|n| {
            let (kind, source) = if n % 2 == 1 {
                ("tool_calling_result", "environment")
            } else {
                ("ai_message", "agent")
            };
            let text = match n {
                10 => "DISK full 100%".to_owned(),
                n if n % 5 == 0 => format!("disk at {n}%"),
                n => format!("step {n}"),
            };
            event(kind, source, n, json!({"text": text}))
        })
        .collect();
    let stored = s.append(r.id, events).await.expect("append");
    assert_eq!(stored.last().map(|e| e.id), Some(25));
    assert_eq!(
        s.event(r.id, 10).await.expect("event"),
        Some(stored[9].clone())
    );
    assert_eq!(s.event(r.id, 26).await.expect("event"), None);

    let q = |limit| EventQuery {
        limit,
        ..Default::default()
    };
    let first = s.events(r.id, &q(10)).await.expect("page");
    assert_eq!(first.items, stored[..10].to_vec());
    assert_eq!(
        all_pages(s, r.id, q(10)).await,
        (1..=25).collect::<Vec<_>>()
    );
    let descending = EventQuery {
        descending: true,
        ..q(7)
    };
    assert_eq!(
        all_pages(s, r.id, descending.clone()).await,
        (1..=25).rev().collect::<Vec<_>>()
    );
    // A page id is bound to its direction, and only this store's page ids are taken.
    let next = first.next_page_id.clone().expect("a second page");
    let wrong_way = EventQuery {
        page_id: Some(next),
        ..descending
    };
    assert!(matches!(
        s.events(r.id, &wrong_way).await,
        Err(StoreError::InvalidPageId)
    ));
    let forged = EventQuery {
        page_id: Some("bm90IGEgcGFnZQ".into()),
        ..q(10)
    };
    assert!(matches!(
        s.events(r.id, &forged).await,
        Err(StoreError::InvalidPageId)
    ));

    let filtered = [
        (
            EventQuery {
                kind: Some("ai_message".into()),
                ..q(3)
            },
            (2..=25).step_by(2).collect::<Vec<u64>>(),
        ),
        (
            EventQuery {
                source: Some("environment".into()),
                descending: true,
                ..q(4)
            },
            (1..=25).rev().step_by(2).collect(),
        ),
        // A literal, case-insensitive substring: `%` is not a wildcard.
        (
            EventQuery {
                body: Some("disk".into()),
                ..q(2)
            },
            vec![5, 10, 15, 20, 25],
        ),
        (
            EventQuery {
                body: Some("0%".into()),
                ..q(2)
            },
            vec![10, 20],
        ),
        (
            EventQuery {
                timestamp_gte: Some(at(5)),
                timestamp_lt: Some(at(9)),
                ..q(3)
            },
            vec![5, 6, 7, 8],
        ),
        (
            EventQuery {
                after: Some(20),
                kind: Some("tool_calling_result".into()),
                ..q(1)
            },
            vec![21, 23, 25],
        ),
    ];
    for (query, want) in filtered {
        assert_eq!(all_pages(s, r.id, query.clone()).await, want, "{query:?}");
        let count = s.count_events(r.id, &query).await.expect("count");
        assert_eq!(count, want.len() as u64, "count of {query:?}");
    }
    assert_eq!(s.count_events(r.id, &q(1)).await.ok(), Some(25));
    assert_eq!(s.count_events(Uuid::new_v4(), &q(1)).await.ok(), Some(0));
    f.finish().await;
}

pub(super) async fn conversations_page_by_status_and_sort_order(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let s = &f.store;
    // Created at 0..7 s, updated in the reverse order; statuses alternate.
    let mut rows = Vec::new();
    for n in 0..7 {
        let status = if n % 2 == 0 { "finished" } else { "running" };
        let r = row(status, n, 100 - n);
        s.create(&r).await.expect("create");
        rows.push(r);
    }
    let ids = |picks: &[usize]| picks.iter().map(|&n| rows[n].id).collect::<Vec<_>>();
    let cases = [
        (SortOrder::CreatedAt, None, ids(&[0, 1, 2, 3, 4, 5, 6])),
        (SortOrder::CreatedAtDesc, None, ids(&[6, 5, 4, 3, 2, 1, 0])),
        (SortOrder::UpdatedAt, None, ids(&[6, 5, 4, 3, 2, 1, 0])),
        (
            SortOrder::UpdatedAtDesc,
            Some("finished"),
            ids(&[0, 2, 4, 6]),
        ),
        (SortOrder::CreatedAtDesc, Some("running"), ids(&[5, 3, 1])),
    ];
    for (sort, status, want) in cases {
        let mut q = ConversationQuery {
            limit: 3,
            status: status.map(str::to_owned),
            sort,
            page_id: None,
        };
        let mut got = Vec::new();
        loop {
            let page = s.search(&q).await.expect("search");
            assert!(page.items.len() <= 3);
            got.extend(page.items.iter().map(|r| r.id));
            match page.next_page_id {
                Some(next) => q.page_id = Some(next),
                None => break,
            }
        }
        assert_eq!(got, want, "{sort:?} {status:?}");
    }
    let first = s
        .search(&ConversationQuery {
            limit: 1,
            ..Default::default()
        })
        .await
        .expect("search");
    assert_eq!(first.items, vec![rows[6].clone()]);
    let other_order = ConversationQuery {
        limit: 1,
        page_id: first.next_page_id,
        sort: SortOrder::UpdatedAt,
        status: None,
    };
    assert!(matches!(
        s.search(&other_order).await,
        Err(StoreError::InvalidPageId)
    ));
    assert_eq!(s.count(None).await.ok(), Some(7));
    assert_eq!(s.count(Some("finished")).await.ok(), Some(4));
    assert_eq!(s.count(Some("paused")).await.ok(), Some(0));
    let mut running = s
        .ids_with_status(&[ConversationStatus::Running, ConversationStatus::Paused])
        .await
        .expect("ids");
    running.sort();
    let mut want = ids(&[1, 3, 5]);
    want.sort();
    assert_eq!(running, want);
    f.finish().await;
}

pub(super) async fn the_event_cap_is_enforced_per_append(kind: Kind) {
    let options = StoreOptions {
        max_events_per_conversation: 5,
        ..Default::default()
    };
    let Some(f) = fixture(kind, options).await else {
        return;
    };
    let s = &f.store;
    let r = row("running", 0, 0);
    s.create(&r).await.expect("create");
    let three = || {
        (0..3)
            .map(|n| event("message", "agent", n, json!(n)))
            .collect::<Vec<_>>()
    };
    s.append(r.id, three()).await.expect("3 of 5");
    // All or nothing: 3 more would pass the cap, so none is stored.
    assert!(matches!(
        s.append(r.id, three()).await,
        Err(StoreError::TooManyEvents { max: 5 })
    ));
    let two = s.append(r.id, three()[..2].to_vec()).await.expect("5 of 5");
    assert_eq!(two.iter().map(|e| e.id).collect::<Vec<_>>(), vec![4, 5]);
    assert!(matches!(
        s.append(r.id, three()[..1].to_vec()).await,
        Err(StoreError::TooManyEvents { max: 5 })
    ));
    assert!(matches!(
        s.append(Uuid::new_v4(), three()).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        s.count_events(r.id, &EventQuery::default()).await.ok(),
        Some(5)
    );
    f.finish().await;
}

pub(super) async fn subscribers_hear_of_every_commit(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let (a, b) = (row("running", 0, 0), row("running", 1, 1));
    f.store.create(&a).await.expect("create");
    f.store.create(&b).await.expect("create");
    let mut receiver = f.store.subscribe();
    let two = vec![
        event("message", "agent", 0, json!(1)),
        event("message", "agent", 0, json!(2)),
    ];
    f.store.append(a.id, two).await.expect("append");
    f.store
        .append(b.id, vec![event("message", "agent", 0, json!(3))])
        .await
        .expect("append");
    assert!(
        heard(&mut receiver, (a.id, 2)).await,
        "a's append announced"
    );
    assert!(
        heard(&mut receiver, (b.id, 1)).await,
        "b's append announced"
    );

    if let Kind::Postgres = kind {
        // Another replica on the same database: its appends reach this one through NOTIFY.
        let other = Store::open(&f.url, StoreOptions::default())
            .await
            .expect("second replica");
        let mut seq = 1;
        let mut seen = false;
        for _ in 0..20 {
            seq += 1;
            other
                .append(b.id, vec![event("message", "agent", 0, json!(seq))])
                .await
                .expect("append on the other replica");
            if heard_within(&mut receiver, (b.id, seq), Duration::from_millis(500)).await {
                seen = true;
                break;
            }
        }
        assert!(
            seen,
            "another replica's append reached this replica's subscribers"
        );
        other.close().await;
    }
    f.finish().await;
}

async fn heard_within(
    receiver: &mut tokio::sync::broadcast::Receiver<(Uuid, u64)>,
    want: (Uuid, u64),
    wait: Duration,
) -> bool {
    tokio::time::timeout(wait, heard(receiver, want))
        .await
        .unwrap_or(false)
}

pub(super) async fn retention_deletes_old_conversations_in_the_given_statuses(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let s = &f.store;
    let old_finished = row("finished", 0, 10);
    let new_finished = row("finished", 0, 30);
    let old_running = row("running", 0, 10);
    let old_error = row("error", 0, 10);
    for r in [&old_finished, &new_finished, &old_running, &old_error] {
        s.create(r).await.expect("create");
    }
    s.append(
        old_finished.id,
        vec![event("message", "agent", 0, json!({}))],
    )
    .await
    .expect("append");
    let deleted = s
        .delete_older_than(
            &[ConversationStatus::Finished, ConversationStatus::Error],
            at(20),
        )
        .await
        .expect("retention");
    assert_eq!(deleted, 2);
    let left = s
        .get_many(&[
            old_finished.id,
            new_finished.id,
            old_running.id,
            old_error.id,
        ])
        .await
        .expect("get_many");
    let left: Vec<bool> = left.iter().map(Option::is_some).collect();
    assert_eq!(left, vec![false, true, true, false]);
    assert_eq!(s.event(old_finished.id, 1).await.expect("event"), None);
    assert_eq!(s.delete_older_than(&[], at(20)).await.ok(), Some(0));
    f.finish().await;
}

pub(super) async fn a_reopened_store_sees_everything(kind: Kind) {
    let Some(f) = fixture(kind, StoreOptions::default()).await else {
        return;
    };
    let r = row("running", 0, 0);
    f.store.create(&r).await.expect("create");
    let appends = (0..5).map(|n| {
        let store = f.store.clone();
        async move {
            store
                .append(r.id, vec![event("message", "agent", n, json!({"n": n}))])
                .await
        }
    });
    let stored: Vec<StoredEvent> = futures::future::try_join_all(appends)
        .await
        .expect("appends")
        .into_iter()
        .flatten()
        .collect();
    f.store.close().await;
    // Closed: an append fails at once instead of waiting.
    let late = tokio::time::timeout(
        Duration::from_secs(5),
        f.store
            .append(r.id, vec![event("message", "agent", 9, json!({}))]),
    )
    .await
    .expect("an answer, not a hang");
    assert!(matches!(late, Err(StoreError::Database(_))));

    let reopened = Store::open(&f.url, StoreOptions::default())
        .await
        .expect("reopen");
    let row = reopened.get(r.id).await.expect("get").expect("the row");
    assert_eq!(row.last_event_id, 5);
    let mut events = reopened
        .events(
            r.id,
            &EventQuery {
                limit: 100,
                ..Default::default()
            },
        )
        .await
        .expect("events")
        .items;
    events.sort_by_key(|e| e.id);
    let mut want = stored;
    want.sort_by_key(|e| e.id);
    assert_eq!(events, want);
    let next = reopened
        .append(r.id, vec![event("message", "agent", 6, json!({}))])
        .await
        .expect("append after reopening");
    assert_eq!(next[0].id, 6);
    reopened.close().await;
    f.finish().await;
}
