//! The conversation store's append rate (issue 14's target: ≥ 20,000 events/s with group
//! commit). 1, 16 and 256 tasks each append one event at a time to a conversation of their
//! own, for a few seconds, on SQLite (a temp file) and, when `POSTGRES_TEST_URL` is set,
//! on a fresh database of that PostgreSQL server.
//!
//! `cargo bench --bench store` (about 20 s per backend); `-- --secs N` changes each phase's length.

use std::time::{Duration, Instant};

use sqlx::Connection;
use triage::store::{ConversationRow, NewEvent, Store, StoreOptions};
use uuid::Uuid;

const CONCURRENCY: [usize; 3] = [1, 16, 256];

fn main() {
    let secs = std::env::args()
        .skip_while(|a| a != "--secs")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        println!("| backend | appenders | events/s | append p50 | append p99 |");
        println!("| --- | ---: | ---: | ---: | ---: |");
        for concurrency in CONCURRENCY {
            let dir = std::env::temp_dir().join(format!("triage-bench-store-{}", Uuid::new_v4()));
            let url = format!("sqlite://{}", dir.join("triage.db").display());
            run("SQLite", &url, concurrency, secs).await;
            let _ = std::fs::remove_dir_all(dir);
        }
        match std::env::var("POSTGRES_TEST_URL") {
            Ok(admin) => {
                for concurrency in CONCURRENCY {
                    let (url, name) = fresh_database(&admin).await;
                    run("PostgreSQL", &url, concurrency, secs).await;
                    drop_database(&admin, &name).await;
                }
            }
            Err(_) => println!("(PostgreSQL skipped: POSTGRES_TEST_URL is not set)"),
        }
    });
}

async fn run(backend: &str, url: &str, concurrency: usize, secs: f64) {
    let store = Store::open(url, StoreOptions::default())
        .await
        .expect("open the store");
    let now = chrono::Utc::now();
    let mut ids = Vec::new();
    for _ in 0..concurrency {
        let row = ConversationRow {
            id: Uuid::new_v4(),
            title: None,
            tags: Default::default(),
            status: "running".into(),
            reason: None,
            config: serde_json::json!({}),
            state: serde_json::json!({}),
            state_event_id: 0,
            stats: serde_json::json!({}),
            last_event_id: 0,
            created_at: now,
            updated_at: now,
        };
        store.create(&row).await.expect("create");
        ids.push(row.id);
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = ids
        .into_iter()
        .map(|id| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    // A typical event: an agent message of a few hundred bytes.
                    let event = NewEvent {
                        kind: "ai_message".into(),
                        source: "agent".into(),
                        timestamp: chrono::Utc::now(),
                        payload: serde_json::json!({"content": "x".repeat(300)}),
                    };
                    let t = Instant::now();
                    store.append(id, vec![event]).await.expect("append");
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("an appender"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let pick = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "| {backend} | {concurrency} | {:.0} | {:.2} ms | {:.2} ms |",
        latencies.len() as f64 / elapsed,
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.99).as_secs_f64() * 1e3,
    );
    store.close().await;
}

async fn fresh_database(admin: &str) -> (String, String) {
    let name = format!("triage_bench_{}", Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(admin)
        .await
        .expect("connect to POSTGRES_TEST_URL");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create a bench database");
    let mut url = url::Url::parse(admin).expect("a postgres:// URL");
    url.set_path(&format!("/{name}"));
    (url.to_string(), name)
}

async fn drop_database(admin: &str, name: &str) {
    if let Ok(mut conn) = sqlx::PgConnection::connect(admin).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn)
            .await;
    }
}
