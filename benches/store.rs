//! The conversation store's append rate (issue 14's target: ≥ 20,000 events/s with group
//! commit). 1, 16 and 256 tasks each append one event at a time to a conversation of their
//! own, for a few seconds, on SQLite (a temp file) and, when `POSTGRES_TEST_URL` is set,
//! on a fresh database of that PostgreSQL server.
//!
//! `cargo bench --bench store` (about 20 s per backend); `-- --secs N` changes each phase's length.

use std::time::{Duration, Instant};

use sqlx::Connection;
use triage::conversation_domain::{ConversationStatus, EventKind};
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
        println!("| backend | appenders | events/s | append p50 | append p99 | CPU µs per event: bench process / PostgreSQL server |");
        println!("| --- | ---: | ---: | ---: | ---: | ---: |");
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
            status: ConversationStatus::Running,
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
    let cpu_before = (
        cpu_secs(|comm| comm == "self"),
        cpu_secs(|comm| comm == "postgres"),
    );
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
                        kind: EventKind::AiMessage,
                        source: "agent".into(),
                        timestamp: chrono::Utc::now(),
                        payload: serde_json::json!({"content": "x".repeat(300)}),
                        status: None,
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
    let per_event = |before: f64, after: f64| (after - before) * 1e6 / latencies.len() as f64;
    let own = per_event(cpu_before.0, cpu_secs(|comm| comm == "self"));
    let server = per_event(cpu_before.1, cpu_secs(|comm| comm == "postgres"));
    latencies.sort();
    let pick = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "| {backend} | {concurrency} | {:.0} | {:.2} ms | {:.2} ms | {own:.0} / {} |",
        latencies.len() as f64 / elapsed,
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.99).as_secs_f64() * 1e3,
        if backend == "PostgreSQL" {
            format!("{server:.0}")
        } else {
            "–".into()
        },
    );
    store.close().await;
}

/// CPU time (user + system, seconds) of this process (`"self"`) or of every process with that
/// command name (`"postgres"`: the server and its backends), from /proc.
fn cpu_secs(which: impl Fn(&str) -> bool) -> f64 {
    let stats: Vec<String> = if which("self") {
        vec![std::fs::read_to_string("/proc/self/stat").unwrap_or_default()]
    } else {
        std::fs::read_dir("/proc")
            .map(|d| {
                d.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let ticks: u64 = stats
        .iter()
        .filter(|stat| {
            let comm = stat
                .split_once('(')
                .and_then(|(_, rest)| rest.rsplit_once(')'))
                .map_or("", |(comm, _)| comm);
            which("self") || which(comm)
        })
        .map(|stat| {
            // utime and stime: the 12th and 13th fields after the command name.
            stat.rsplit(')')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 / hz
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
