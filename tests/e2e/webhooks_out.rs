//! Webhooks out: a receiver on loopback gets every conversation change — a snapshot per status
//! change, create and PATCH, the stored events in batches — exactly once per delivery id and
//! in order, through a receiver that is down, fails, throttles and hangs; signed, with its
//! token, never a secret; dead letters are listed and retried; a hung receiver never slows a
//! run. On SQLite, and on PostgreSQL when `POSTGRES_TEST_URL` is set (required in CI).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::conversations_pg::fresh_database;
use crate::helpers::{TestApp, eventually, json_body, spawn_app_with};
use crate::webhook_receiver::{Answer, Got, Receiver};
use fake_llm::Step;

pub(crate) const SECRET: &str = "receiver-signing-secret-9931";
pub(crate) const TOKEN: &str = "receiver-token-5521";

/// A `[[webhooks]]` receiver with fast retries; `extra` keys are added or replace those.
pub(crate) fn receiver_toml(url: &str, extra: &str) -> String {
    let defaults = [
        "name = \"tickets\"".to_owned(),
        format!("base_url = \"{url}/hooks/\""),
        format!("token = \"{TOKEN}\""),
        format!("signing_secret = \"{SECRET}\""),
        "flush_delay_secs = 0.2".into(),
        "timeout_secs = 1.0".into(),
        "retry_base_delay_ms = 50".into(),
        "retry_max_delay_secs = 0.4".into(),
    ];
    let replaced = |line: &String| {
        let key = line.split(" =").next().unwrap_or_default();
        extra.lines().any(|l| l.starts_with(&format!("{key} =")))
    };
    let kept: Vec<&String> = defaults.iter().filter(|l| !replaced(l)).collect();
    format!(
        "[[webhooks]]\n{}\n{extra}\n",
        kept.iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    )
}

async fn post(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let resp = app.post_raw(path, body.to_string()).await;
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

async fn wait_status(app: &TestApp, id: &str, status: &str) -> Value {
    eventually(
        &format!("conversation {id} to become {status}"),
        Duration::from_secs(10),
        || async {
            let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
            (info["execution_status"] == status).then_some(info)
        },
    )
    .await
}

fn snapshots(got: &[Got]) -> Vec<&Got> {
    got.iter()
        .filter(|g| g.path == "/hooks/conversations")
        .collect()
}

/// Every event id the receiver got for `id`, in arrival order.
fn event_ids(got: &[Got], id: &str) -> Vec<u64> {
    got.iter()
        .filter(|g| g.path == format!("/hooks/events/{id}"))
        .flat_map(|g| g.body.as_array().unwrap().iter())
        .map(|e| e["id"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn every_change_arrives_once_in_order_through_a_receiver_that_fails() {
    let receiver = Receiver::down(SECRET);
    let app = spawn_app_with(&receiver_toml(&receiver.url(), "")).await;
    every_change_arrives(&app, &receiver).await;
}

#[tokio::test]
async fn every_change_arrives_on_postgres() {
    let Some(database) = fresh_database().await else {
        return;
    };
    let receiver = Receiver::down(SECRET);
    let app = spawn_app_with(&format!(
        "{}{}",
        crate::conversations_pg::pg_store_toml(&database),
        receiver_toml(&receiver.url(), "")
    ))
    .await;
    every_change_arrives(&app, &receiver).await;
}

/// The receiver is down while a conversation runs; it comes back answering 500, 429 with
/// `Retry-After: 1`, then hanging past the timeout, then 200.
async fn every_change_arrives(app: &TestApp, receiver: &Receiver) {
    // The tool prints the conversation's secret (the command itself does not hold it).
    app.llm.push(Step::tool(
        "c1",
        "bash",
        json!({"command": "printf 'db-password-s3cr3t-%s' 4711"}),
    ));
    app.llm.push(Step::text("All good."));
    let (status, created) = post(
        app,
        "/api/conversations",
        json!({"title": "checkout", "tags": {"team": "sre"},
               "confirmation_policy": {"kind": "NeverConfirm"},
               "secrets": {"DB": "db-password-s3cr3t-4711"},
               "initial_message": {"content": "Is checkout healthy?"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    wait_status(app, &id, "finished").await;

    // Nothing can arrive yet; the deliveries wait, each failed attempt recorded.
    eventually(
        "a pending delivery with a failed attempt recorded",
        Duration::from_secs(10),
        || async {
            let (status, pending) = app
                .get_json("/api/webhooks/deliveries?status=pending&receiver=tickets")
                .await;
            assert_eq!(status, 200, "{pending}");
            pending["items"][0]["attempts"].as_u64() >= Some(1)
                && !pending["items"][0]["last_error"].is_null()
        },
    )
    .await;

    receiver.script(vec![Answer::Status(500), Answer::TooMany(1), Answer::Hang]);
    receiver.start().await;
    let (status, _) = app
        .client
        .patch(app.url(&format!("/api/conversations/{id}")))
        .header("content-type", "application/json")
        .body(json!({"title": "checkout (renamed)"}).to_string())
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 200);
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    let last = info["last_event_id"].as_u64().unwrap();
    let got = receiver
        .wait_for(Duration::from_secs(30), |got| {
            snapshots(got)
                .iter()
                .any(|s| s.body["title"] == "checkout (renamed)")
                && event_ids(got, &id).last() == Some(&last)
        })
        .await;

    // Exactly once, in order: every event id once, the sequence never going back.
    assert_eq!(event_ids(&got, &id), (1..=last).collect::<Vec<_>>());
    let sequences: Vec<u64> = got.iter().map(|g| g.sequence).collect();
    assert!(sequences.windows(2).all(|w| w[0] <= w[1]), "{sequences:?}");
    let statuses: Vec<&str> = snapshots(&got)
        .iter()
        .map(|s| s.body["execution_status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["idle", "running", "finished", "finished"]);
    for g in &got {
        assert!(g.signature_ok, "signature of {}: {:?}", g.path, g.signature);
        assert_eq!(g.token.as_deref(), Some(TOKEN));
        let last_in_it = if g.path.ends_with("/conversations") {
            g.body["last_event_id"].as_u64().unwrap()
        } else {
            let events = g.body.as_array().unwrap();
            assert!(!events.is_empty() && events.len() <= 20, "{}", g.body);
            events.last().unwrap()["id"].as_u64().unwrap()
        };
        assert_eq!(g.sequence, last_in_it, "X-Triage-Sequence of {}", g.path);
        for secret in ["db-password-s3cr3t-4711", SECRET, TOKEN] {
            assert!(
                !String::from_utf8_lossy(&g.raw).contains(secret),
                "{secret} in {}",
                g.body
            );
        }
    }
    assert!(
        got.iter()
            .any(|g| g.body.as_array().is_some_and(|e| e.len() > 1)),
        "events are batched"
    );
    // The snapshot: the seed's names, triage's own, no credentials.
    let finished = snapshots(&got)[2].body.clone();
    assert_eq!(finished["id"], id.as_str());
    assert_eq!(finished["title"], "checkout");
    assert_eq!(finished["tags"]["team"], "sre");
    assert_eq!(finished["confirmation_policy"]["kind"], "NeverConfirm");
    assert_eq!(finished["stuck_detection"], true);
    assert!(finished["max_iterations"].as_u64().unwrap() > 0);
    assert!(finished["metrics"]["accumulated_token_usage"]["prompt_tokens"].is_u64());
    assert_eq!(finished["model"], Value::Null);
    assert!(finished["agent"]["llm"]["api_key"].is_null());
    assert!(finished["pending_actions"].as_array().unwrap().is_empty());
    assert!(finished["created_at"].is_string() && finished["updated_at"].is_string());
    assert!(finished.get("reply_token").is_some());

    // The failures were real attempts of one delivery: 500, 429 (the next attempt waited for
    // its Retry-After), a hang past the timeout, then 200 — sent four times with one id.
    let all = receiver.got();
    let head = &all[0].delivery;
    let tries: Vec<&Got> = all.iter().filter(|g| &g.delivery == head).collect();
    assert_eq!(tries.len(), 4, "500, 429, hang, 200");
    assert!(
        tries[2].at - tries[1].at >= Duration::from_millis(950),
        "Retry-After honoured: {:?}",
        tries[2].at - tries[1].at
    );
    // Nothing left to send.
    eventually(
        "no delivery left to send",
        Duration::from_secs(5),
        || async {
            let (_, pending) = app.get_json("/api/webhooks/deliveries").await;
            pending["items"] == json!([])
        },
    )
    .await;
}

#[tokio::test]
async fn dead_letters_are_listed_and_retried() {
    let receiver = Receiver::up(SECRET).await;
    receiver.set_default(Answer::Status(500));
    let app = spawn_app_with(&receiver_toml(
        &receiver.url(),
        "max_attempts = 2\nupdates = [\"conversations\"]",
    ))
    .await;
    let (_, first) = post(&app, "/api/conversations", json!({"title": "one"})).await;
    let failed = wait_failed(&app, 1).await;
    let dead = &failed[0];
    assert_eq!(dead["conversation_id"], first["id"]);
    assert_eq!(dead["kind"], "conversations");
    assert_eq!(dead["attempts"], 2);
    assert_eq!(dead["last_status"], 500);
    assert!(
        dead["last_error"]
            .as_str()
            .unwrap()
            .contains("the receiver says no")
    );
    // A refusal that cannot change (400) and a redirect (never followed) are dead at once.
    // One at a time: two conversations' deliveries may be sent concurrently, in either order.
    receiver.script(vec![Answer::Status(400)]);
    let (_, two) = post(&app, "/api/conversations", json!({"title": "two"})).await;
    wait_failed(&app, 2).await;
    receiver.script(vec![Answer::Redirect(
        "http://example.com/elsewhere".into(),
    )]);
    let (_, three) = post(&app, "/api/conversations", json!({"title": "three"})).await;
    let failed = wait_failed(&app, 3).await;
    let of = |conversation: &Value| {
        failed
            .iter()
            .find(|d| d["conversation_id"] == conversation["id"])
            .unwrap_or_else(|| panic!("no dead letter for {conversation}: {failed:?}"))
    };
    assert_eq!(of(&two)["attempts"], 1, "{failed:?}");
    assert_eq!(of(&two)["last_status"], 400, "{failed:?}");
    assert_eq!(of(&three)["attempts"], 1, "{failed:?}");
    assert!(
        of(&three)["last_error"]
            .as_str()
            .unwrap()
            .contains("not followed"),
        "{failed:?}"
    );
    let arrivals = |id: &str| receiver.got().iter().filter(|g| g.delivery == id).count();
    let before: Vec<(String, usize)> = failed
        .iter()
        .map(|d| {
            let id = d["id"].as_str().unwrap().to_owned();
            let n = arrivals(&id);
            (id, n)
        })
        .collect();

    // The receiver is fixed; each dead letter is queued again and arrives, same id and body.
    receiver.set_default(Answer::Ok);
    for (id, _) in &before {
        let (status, retried) = post(
            &app,
            &format!("/api/webhooks/deliveries/{id}/retry"),
            json!({}),
        )
        .await;
        assert_eq!(status, 200, "{retried}");
        assert_eq!(retried["status"], "pending");
        assert_eq!(retried["attempts"], 0);
    }
    receiver
        .wait_for(Duration::from_secs(10), |_| {
            before.iter().all(|(id, n)| arrivals(id) > *n)
        })
        .await;
    eventually("no dead letter left", Duration::from_secs(5), || async {
        let (_, left) = app.get_json("/api/webhooks/deliveries?status=failed").await;
        left["items"] == json!([])
    })
    .await;
    // Refusals: an unknown id, a malformed one, one still being sent.
    let unknown = uuid::Uuid::new_v4();
    let (status, _) = post(
        &app,
        &format!("/api/webhooks/deliveries/{unknown}/retry"),
        json!({}),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = post(&app, "/api/webhooks/deliveries/nope/retry", json!({})).await;
    assert_eq!(status, 422);
    receiver.set_default(Answer::Hang);
    post(&app, "/api/conversations", json!({"title": "four"})).await;
    let pending = eventually("a pending delivery", Duration::from_secs(10), || async {
        let (_, page) = app
            .get_json("/api/webhooks/deliveries?status=pending")
            .await;
        page["items"].as_array().unwrap().first().cloned()
    })
    .await;
    let (status, _) = post(
        &app,
        &format!(
            "/api/webhooks/deliveries/{}/retry",
            pending["id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = app
        .get_json("/api/webhooks/deliveries?status=delivered")
        .await;
    assert_eq!(status, 422);
}

#[tokio::test]
async fn dead_letters_are_deleted_after_their_retention() {
    let receiver = Receiver::up(SECRET).await;
    receiver.set_default(Answer::Status(400));
    let app = spawn_app_with(&receiver_toml(
        &receiver.url(),
        "updates = [\"conversations\"]\ndead_letter_retention_secs = 1",
    ))
    .await;
    post(&app, "/api/conversations", json!({"title": "one"})).await;
    let failed = wait_failed(&app, 1).await;
    let id = failed[0]["id"].as_str().unwrap().to_owned();
    // The purge runs with the queue gauges, every few seconds.
    eventually(
        &format!("the dead letter {id} to be purged after its retention"),
        Duration::from_secs(15),
        || async {
            let (_, page) = app.get_json("/api/webhooks/deliveries?status=failed").await;
            page["items"] == json!([])
        },
    )
    .await;
    // Deleted, not queued again: nothing is pending either.
    let (_, pending) = app.get_json("/api/webhooks/deliveries").await;
    assert_eq!(pending["items"], json!([]), "{pending}");
}

async fn wait_failed(app: &TestApp, n: usize) -> Vec<Value> {
    eventually(
        &format!("{n} dead letters"),
        Duration::from_secs(10),
        || async {
            let (status, page) = app.get_json("/api/webhooks/deliveries?status=failed").await;
            assert_eq!(status, 200, "{page}");
            let items = page["items"].as_array().unwrap().clone();
            (items.len() >= n).then_some(items)
        },
    )
    .await
}

#[tokio::test]
async fn the_deliveries_api_needs_an_api_key() {
    let app = spawn_app_with("[server]\napi_keys = [\"the-key\"]\n").await;
    let (status, _) = app.get_json("/api/webhooks/deliveries").await;
    assert_eq!(status, 401);
    let resp = app
        .client
        .get(app.url("/api/webhooks/deliveries"))
        .header("x-api-key", "the-key")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

/// How long a two-step run takes from create to `finished`, its stream read to the end.
async fn run_time(app: &TestApp) -> Duration {
    app.llm
        .push(Step::tool("c1", "bash", json!({"command": "echo ok"})));
    app.llm.push(Step::text("Fine."));
    let started = Instant::now();
    let (status, created) = post(
        app,
        "/api/conversations",
        json!({"confirmation_policy": {"kind": "NeverConfirm"},
               "initial_message": {"content": "check"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let resp = app
        .client
        .get(app.url(&format!("/api/conversations/{id}/events/stream")))
        .send()
        .await
        .unwrap();
    let mut stream = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
    while let Some(Ok(event)) = tokio::time::timeout(
        Duration::from_secs(20),
        futures::StreamExt::next(&mut stream),
    )
    .await
    .expect("the stream stalled")
    {
        if event.event == "conversation_state_update" && event.data.contains("finished") {
            break;
        }
    }
    let elapsed = started.elapsed();
    let (status, _) = app
        .client
        .delete(app.url(&format!("/api/conversations/{id}")))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 200);
    elapsed
}

#[tokio::test]
async fn a_hung_receiver_never_slows_a_run() {
    let baseline = spawn_app_with("").await;
    let mut plain = Duration::ZERO;
    for _ in 0..3 {
        plain = plain.max(run_time(&baseline).await);
    }
    drop(baseline);
    let receiver = Receiver::up(SECRET).await;
    receiver.set_default(Answer::Hang);
    let app = spawn_app_with(&receiver_toml(
        &receiver.url(),
        "timeout_secs = 30.0\nflush_delay_secs = 0.0\nmax_in_flight = 1",
    ))
    .await;
    for _ in 0..3 {
        let hung = run_time(&app).await;
        assert!(
            hung < plain + Duration::from_millis(1500),
            "a run took {hung:?} with a hung receiver, {plain:?} without"
        );
    }
    assert!(!receiver.got().is_empty(), "the receiver was called");
}

/// A raw HTTP server answering every connection with `head`, then `body_chunk` forever.
async fn endless_server(head: &'static str) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![b'x'; 64 * 1024];
                // Endless and slow: the hostile answer itself, not a wait.
                while socket.write_all(&chunk).await.is_ok() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
        }
    });
    (url, server)
}

/// A hostile receiver: an error answer with an endless body costs one bounded read and a
/// short error; a success with an endless body is delivered without reading it.
#[tokio::test]
async fn an_endless_answer_costs_little() {
    let (failing, _a) = endless_server(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 1000000000\r\n\r\n\u{1b}[31m",
    )
    .await;
    let app = spawn_app_with(&receiver_toml(
        &failing,
        "max_attempts = 1\ntimeout_secs = 5.0\nupdates = [\"conversations\"]",
    ))
    .await;
    let started = Instant::now();
    post(&app, "/api/conversations", json!({})).await;
    let failed = wait_failed(&app, 1).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the error answer was read to its end: {:?}",
        started.elapsed()
    );
    let error = failed[0]["last_error"].as_str().unwrap();
    assert!(
        error.len() < 700 && error.starts_with("HTTP 500"),
        "{error}"
    );
    assert!(
        !error.contains('\u{1b}'),
        "control characters are dropped: {error:?}"
    );

    let (ok, _b) = endless_server("HTTP/1.1 200 OK\r\ncontent-length: 1000000000\r\n\r\n").await;
    let app = spawn_app_with(&receiver_toml(
        &ok,
        "timeout_secs = 5.0\nupdates = [\"conversations\"]",
    ))
    .await;
    post(&app, "/api/conversations", json!({})).await;
    eventually(
        "the delivery to be done, its endless body not read",
        Duration::from_secs(4),
        || async {
            let (_, page) = app.get_json("/api/webhooks/deliveries").await;
            page["items"] == json!([])
        },
    )
    .await;
}
