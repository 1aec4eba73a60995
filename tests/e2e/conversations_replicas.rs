//! Two replicas (the real binary, twice) on one real PostgreSQL database: either answers any
//! request, exactly one runs a conversation, commands sent to the other reach it, the other's
//! event stream sees its events live, and when the running one is killed (`kill -9`) the
//! other settles its run and continues it. Skipped with a note without `POSTGRES_TEST_URL`
//! (failed when `POSTGRES_TEST_REQUIRED` is set, as in CI).

use std::path::PathBuf;
use std::time::Duration;

use crate::conversations_pg::fresh_database;
use crate::helpers::{eventually, free_port, http_client, json_body, wait_until_ready};
use eventsource_stream::Eventsource;
use fake_llm::{FakeLlm, Step};
use futures::StreamExt;
use serde_json::{Value, json};

struct Replica {
    base: String,
    process: tokio::process::Child,
}

fn config(llm: &FakeLlm, database: &str, port: u16) -> PathBuf {
    // Titles are answered aside from the script, whichever replica asks.
    crate::helpers::answer_titles(llm);
    let path =
        crate::helpers::scratch().join(format!("replica-{}.toml", uuid::Uuid::new_v4().simple()));
    let text = format!(
        "[server]\nport = {port}\n\
         [toolsets.kubernetes]\nenabled = false\n[toolsets.prometheus]\nenabled = false\n\
         [llm]\nretry_max_attempts = 1\n\
         [conversations]\ndatabase_url = \"{database}\"\nlease_secs = 1.5\n\
         secret_key = \"{key}\"\n\
         [models.fake]\nmodel = \"openai/fake-model\"\napi_base = \"{}\"\n",
        llm.base_url(),
        key = crate::conversations_pg::PG_SECRET_KEY,
    );
    std::fs::write(&path, text).unwrap();
    path
}

async fn replica(llm: &FakeLlm, database: &str) -> Replica {
    let port = free_port();
    let process = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRIAGE_CONFIG", config(llm, database, port))
        .arg("serve")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    wait_until_ready(&http_client(), &base).await;
    Replica { base, process }
}

impl Replica {
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let resp = http_client()
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, json_body(resp).await)
    }

    async fn get(&self, path: &str) -> Value {
        json_body(
            http_client()
                .get(format!("{}{path}", self.base))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    async fn status(&self, id: &str) -> String {
        self.get(&format!("/api/conversations/{id}")).await["execution_status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Polls until the conversation has `status` (up to 20 s).
    async fn wait_for(&self, id: &str, status: &str) {
        eventually(
            &format!("conversation {id} to become {status}"),
            Duration::from_secs(20),
            || async { self.status(id).await == status },
        )
        .await
    }
}

/// The stream's frames (name, data) until `until`, read on another task.
fn watch(
    replica: &Replica,
    id: &str,
    until: &'static str,
) -> tokio::task::JoinHandle<Vec<(u64, String, Value)>> {
    let url = format!("{}/api/conversations/{id}/events/stream", replica.base);
    tokio::spawn(async move {
        let resp = http_client().get(url).send().await.unwrap();
        let mut events = resp.bytes_stream().eventsource();
        let mut seen = Vec::new();
        while let Ok(Some(Ok(event))) =
            tokio::time::timeout(Duration::from_secs(30), events.next()).await
        {
            let data: Value = serde_json::from_str(&event.data).unwrap();
            let done =
                event.event == "conversation_state_update" && data["execution_status"] == until;
            seen.push((event.id.parse().unwrap(), event.event, data));
            if done {
                break;
            }
        }
        seen
    })
}

#[tokio::test]
async fn two_replicas_share_conversations_and_one_takes_over_when_the_other_dies() {
    let Some(database) = fresh_database().await else {
        return;
    };
    let llm = FakeLlm::start().await;
    let mut a = replica(&llm, &database).await;
    let mut b = replica(&llm, &database).await;

    // A runs it: its first LLM answer comes late, so a message sent to B meanwhile reaches A
    // through the database and is taken at A's next step.
    llm.push(Step::Paced {
        before: Duration::from_millis(1500),
        between_chunks: Duration::ZERO,
        step: Box::new(Step::tool("c1", "bash", json!({"command": "echo checked"}))),
    });
    llm.push(Step::text("Both looked at."));
    let (status, created) = a
        .post(
            "/api/conversations",
            json!({"confirmation_policy": {"kind": "NeverConfirm"},
                   "initial_message": {"content": "look at the pods"}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let watched = watch(&b, &id, "finished");
    assert_eq!(b.status(&id).await, "running");
    let (status, body) = b
        .post(
            &format!("/api/conversations/{id}/events"),
            json!({"content": "and the nodes"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // A second run, asked of B, is refused: A runs it.
    let (status, body) = b
        .post(&format!("/api/conversations/{id}/run"), json!({}))
        .await;
    assert_eq!(status, 409, "{body}");
    b.wait_for(&id, "finished").await;
    let second = &llm.requests()[1]["messages"];
    assert!(
        second.to_string().contains("and the nodes"),
        "the message sent to B reached A's run: {second}"
    );
    // B's subscriber saw A's events live, in order, each once.
    let frames = watched.await.unwrap();
    let ids: Vec<u64> = frames.iter().map(|f| f.0).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "{frames:?}"
    );
    let names: Vec<&str> = frames.iter().map(|f| f.1.as_str()).collect();
    for expected in ["user_message", "tool_calling_result", "ai_answer_end"] {
        assert!(names.contains(&expected), "{names:?}");
    }

    // Pause sent to B stops A's run after its current step: no further LLM call.
    let calls_before = llm.request_count();
    llm.push(Step::Paced {
        before: Duration::from_millis(1500),
        between_chunks: Duration::ZERO,
        step: Box::new(Step::tool("c2", "bash", json!({"command": "echo again"}))),
    });
    llm.push(Step::text("never asked for"));
    let (status, body) = a
        .post(
            &format!("/api/conversations/{id}/events"),
            json!({"content": "once more", "run": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    a.wait_for(&id, "running").await;
    let (status, body) = b
        .post(&format!("/api/conversations/{id}/pause"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    b.wait_for(&id, "paused").await;
    assert_eq!(
        llm.request_count(),
        calls_before + 1,
        "paused after one step"
    );

    // Exactly one of two simultaneous runs starts.
    llm.reset(vec![Step::HangBeforeHeaders]);
    let path = format!("/api/conversations/{id}/run");
    let (on_a, on_b) = tokio::join!(a.post(&path, json!({})), b.post(&path, json!({})));
    let mut statuses = [on_a.0, on_b.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{on_a:?} {on_b:?}");

    // The runner dies mid-call; the other settles the run once the lease expires, and
    // continues it with a valid history.
    let (runner, survivor) = if on_a.0 == 200 {
        (&mut a.process, &b)
    } else {
        (&mut b.process, &a)
    };
    runner.start_kill().unwrap();
    runner.wait().await.unwrap();
    continue_on(survivor, &id, &llm).await;
}

async fn continue_on(survivor: &Replica, id: &str, llm: &FakeLlm) {
    survivor.wait_for(id, "error").await;
    let info = survivor.get(&format!("/api/conversations/{id}")).await;
    assert!(
        info["reason"].as_str().unwrap().contains("server stopped"),
        "{info}"
    );
    llm.reset(vec![Step::text("Picked up where it stopped.")]);
    let (status, body) = survivor
        .post(&format!("/api/conversations/{id}/run"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    survivor.wait_for(id, "finished").await;
    let answer = survivor
        .get(&format!("/api/conversations/{id}/agent_final_response"))
        .await;
    assert_eq!(answer["response"], "Picked up where it stopped.");
}
