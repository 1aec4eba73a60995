//! `kill -9` of the real binary while deliveries are owed — one in flight to a receiver that
//! hangs, the rest queued behind it — then a restart on the same SQLite file: every delivery
//! still arrives, in order, the one cut mid-attempt again under the same id. The receiver's
//! token comes from an environment variable (`${NAME}`).

use std::time::Duration;

use fake_llm::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::cli::config_for;
use crate::helpers::{eventually, free_port, http_client, json_body, wait_until_ready};
use crate::webhook_receiver::{Answer, Receiver};
use crate::webhooks_out::SECRET;

const TOKEN_VAR: &str = "WEBHOOK_E2E_TOKEN";
const TOKEN: &str = "token-from-the-environment-8812";

async fn serve(config: &std::path::Path, port: u16) -> tokio::process::Child {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRIAGE_CONFIG", config)
        .env(TOKEN_VAR, TOKEN)
        .arg("serve")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_until_ready(&http_client(), &format!("http://127.0.0.1:{port}")).await;
    child
}

async fn get(base: &str, path: &str) -> Value {
    json_body(
        http_client()
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn kill_9_loses_no_delivery() {
    let llm = FakeLlm::start().await;
    llm.push(Step::tool(
        "stuck",
        "bash",
        json!({"command": "tail -n 7342 -f /dev/null | cat", "timeout": 60}),
    ));
    let receiver = Receiver::up(SECRET).await;
    receiver.set_default(Answer::Hang);
    let port = free_port();
    let hooks = format!(
        "[[webhooks]]\nname = \"tickets\"\nbase_url = \"{}/hooks\"\ntoken = \"${{{TOKEN_VAR}}}\"\n\
         signing_secret = \"{SECRET}\"\nflush_delay_secs = 0.1\ntimeout_secs = 30.0\n\
         retry_base_delay_ms = 50\nretry_max_delay_secs = 0.4\n",
        receiver.url()
    );
    let config = config_for(&llm, &format!("[server]\nport = {port}\n{hooks}"));
    let base = format!("http://127.0.0.1:{port}");
    let mut server = serve(&config, port).await;
    let resp = http_client()
        .post(format!("{base}/api/conversations"))
        .header("content-type", "application/json")
        .body(
            json!({"confirmation_policy": {"kind": "NeverConfirm"},
                   "initial_message": {"content": "wait for it"}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let id = json_body(resp).await["id"].as_str().unwrap().to_owned();
    // The tool runs, its events are logged and owed; the first delivery hangs at the receiver.
    let started = format!("/api/conversations/{id}/events/count?kind=start_tool_calling");
    let what = "the tool to start and the first delivery to reach the receiver";
    eventually(what, Duration::from_secs(15), || async {
        get(&base, &started).await == 1 && !receiver.got().is_empty()
    })
    .await;
    let owed = get(&base, "/api/webhooks/deliveries?status=pending").await;
    assert!(
        owed["items"].as_array().unwrap().len() >= 2,
        "deliveries owed at the kill: {owed}"
    );
    let cut = receiver.got()[0].delivery.clone();
    server.start_kill().unwrap();
    server.wait().await.unwrap();

    receiver.set_default(Answer::Ok);
    let mut server = serve(&config, port).await;
    let what = "the cut run to be settled as an error";
    let info = eventually(what, Duration::from_secs(15), || async {
        let info = get(&base, &format!("/api/conversations/{id}")).await;
        match info["execution_status"] == "error" {
            true => Ok(info),
            false => Err(info),
        }
    })
    .await;
    let last = info["last_event_id"].as_u64().unwrap();
    let got = receiver
        .wait_for(Duration::from_secs(30), |got| {
            got.iter().any(|g| g.body["execution_status"] == "error")
                && got
                    .iter()
                    .filter_map(|g| g.body.as_array())
                    .flatten()
                    .any(|e| e["id"] == last)
        })
        .await;
    let events: Vec<u64> = got
        .iter()
        .filter_map(|g| g.body.as_array())
        .flatten()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(events, (1..=last).collect::<Vec<_>>());
    let statuses: Vec<&str> = got
        .iter()
        .filter(|g| g.path == "/hooks/conversations")
        .map(|g| g.body["execution_status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["idle", "running", "error"]);
    for g in &got {
        assert!(g.signature_ok);
        assert_eq!(g.token.as_deref(), Some(TOKEN));
    }
    // The delivery cut by the kill was sent again after the restart, under the same id.
    let cut_arrivals = receiver.got().iter().filter(|g| g.delivery == cut).count();
    assert_eq!(
        cut_arrivals, 2,
        "sent before the kill and after the restart"
    );
    server.start_kill().unwrap();
    let _ = server.wait().await;
}

/// Two replicas (the real binary) on one PostgreSQL database, both sending to the same
/// receiver: every delivery arrives once — no delivery is sent by both — and in order.
#[tokio::test]
async fn two_replicas_send_each_delivery_once() {
    let Some(database) = crate::conversations_pg::fresh_database().await else {
        return;
    };
    let llm = FakeLlm::start().await;
    crate::helpers::answer_titles(&llm);
    let receiver = Receiver::up(SECRET).await;
    let hooks = format!(
        "[[webhooks]]\nname = \"tickets\"\nbase_url = \"{}/hooks\"\ntoken = \"${{{TOKEN_VAR}}}\"\n\
         signing_secret = \"{SECRET}\"\nflush_delay_secs = 0.05\nbatch_size = 2\n\
         max_in_flight = 8\n",
        receiver.url()
    );
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let port = free_port();
        let config = crate::helpers::scratch().join(format!(
            "webhook-replica-{}.toml",
            uuid::Uuid::new_v4().simple()
        ));
        let text = format!(
            "[server]\nport = {port}\n[toolsets.kubernetes]\nenabled = false\n\
             [toolsets.prometheus]\nenabled = false\n[llm]\nretry_max_attempts = 1\n\
             [conversations]\ndatabase_url = \"{database}\"\n\
             secret_key = \"{key}\"\n\
             [models.fake]\nmodel = \"openai/fake-model\"\napi_base = \"{}\"\n{hooks}",
            llm.base_url(),
            key = crate::conversations_pg::PG_SECRET_KEY,
        );
        std::fs::write(&config, text).unwrap();
        replicas.push((port, serve(&config, port).await));
    }
    // Three conversations, created on alternate replicas, each with a few tool steps.
    llm.set_default(Step::text("Done."));
    let mut ids = Vec::new();
    for n in 0..3 {
        for step in 0..3 {
            llm.push(Step::tool(
                &format!("c{n}{step}"),
                "bash",
                json!({"command": format!("echo {n}{step}")}),
            ));
        }
        llm.push(Step::text("Done."));
        let base = format!("http://127.0.0.1:{}", replicas[n % 2].0);
        let resp = http_client()
            .post(format!("{base}/api/conversations"))
            .header("content-type", "application/json")
            .body(
                json!({"confirmation_policy": {"kind": "NeverConfirm"},
                       "initial_message": {"content": "check"}})
                .to_string(),
            )
            .send()
            .await
            .unwrap();
        let id = json_body(resp).await["id"].as_str().unwrap().to_owned();
        eventually("the run to finish", Duration::from_secs(10), || async {
            get(&base, &format!("/api/conversations/{id}")).await["execution_status"] == "finished"
        })
        .await;
        let last = get(&base, &format!("/api/conversations/{id}")).await["last_event_id"]
            .as_u64()
            .unwrap();
        ids.push((id, last));
    }
    let got = receiver
        .wait_for(Duration::from_secs(30), |got| {
            ids.iter().all(|(id, last)| {
                got.iter()
                    .filter(|g| g.path == format!("/hooks/events/{id}"))
                    .filter_map(|g| g.body.as_array())
                    .flatten()
                    .any(|e| e["id"] == *last)
            })
        })
        .await;
    assert_eq!(
        receiver.got().len(),
        got.len(),
        "a delivery was sent more than once"
    );
    for (id, last) in &ids {
        let events: Vec<u64> = got
            .iter()
            .filter(|g| g.path == format!("/hooks/events/{id}"))
            .filter_map(|g| g.body.as_array())
            .flatten()
            .map(|e| e["id"].as_u64().unwrap())
            .collect();
        assert_eq!(events, (1..=*last).collect::<Vec<_>>(), "{id}");
    }
    for (_, process) in &mut replicas {
        process.start_kill().unwrap();
        let _ = process.wait().await;
    }
}
