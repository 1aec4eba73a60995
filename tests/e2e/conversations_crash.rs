//! `kill -9` in the middle of a run: the real binary, a stand-in LLM that never finishes, a
//! restart on the same SQLite file. What a client was sent is still there, the conversation
//! says the server stopped, and `run` continues it with a history the LLM accepts; the tool's
//! processes, a pipeline's included, died with the server.

use std::time::Duration;

use serde_json::{Value, json};

use crate::cli::config_for;
use crate::helpers::eventually;
use fake_llm::{FakeLlm, Step};

async fn serve(config: &std::path::Path, port: u16) -> tokio::process::Child {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRIAGE_CONFIG", config)
        .arg("serve")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    crate::helpers::wait_until_ready(&crate::helpers::http_client(), &base).await;
    child
}

async fn get(base: &str, path: &str) -> Value {
    let resp = crate::helpers::http_client()
        .get(format!("{base}{path}"))
        .send()
        .await
        .unwrap();
    crate::helpers::json_body(resp).await
}

#[tokio::test]
async fn a_run_cut_by_kill_9_comes_back_as_error_and_continues_with_a_valid_history() {
    let llm = FakeLlm::start().await;
    // The first answer asks for an allowed command that never ends by itself: the run is
    // mid-tool when the server dies.
    llm.push(Step::tool(
        "stuck",
        "bash",
        json!({"command": "tail -n 7341 -f /dev/null | cat", "timeout": 60}),
    ));
    let port = crate::helpers::free_port();
    let config = config_for(&llm, &format!("[server]\nport = {port}\n"));
    let base = format!("http://127.0.0.1:{port}");
    let mut server = serve(&config, port).await;
    let client = crate::helpers::http_client();
    let body = json!({"confirmation_policy": {"kind": "NeverConfirm"},
                      "initial_message": {"content": "wait for it"}});
    let resp = client
        .post(format!("{base}/api/conversations"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let created = crate::helpers::json_body(resp).await;
    let id = created["id"].as_str().unwrap().to_owned();
    // Wait until the tool has started (its event is in the log), then kill -9.
    let started = format!("/api/conversations/{id}/events/count?kind=start_tool_calling");
    eventually("the tool to start", Duration::from_secs(15), || async {
        get(&base, &started).await == 1
    })
    .await;
    let seen = get(&base, &format!("/api/conversations/{id}")).await["last_event_id"]
        .as_u64()
        .unwrap();
    eventually("the command to run", Duration::from_secs(5), || async {
        !processes_with("7341").is_empty()
    })
    .await;
    server.start_kill().unwrap();
    server.wait().await.unwrap();
    // No orphan: the pipeline's processes die with the server.
    eventually(
        "the command to die with the server",
        Duration::from_secs(5),
        || async { processes_with("7341").is_empty() },
    )
    .await;
    assert_eq!(processes_with("7341"), Vec::<u32>::new(), "orphaned");

    let mut server = serve(&config, port).await;
    let info = get(&base, &format!("/api/conversations/{id}")).await;
    assert_eq!(info["execution_status"], "error", "{info}");
    assert!(info["reason"].as_str().unwrap().contains("server stopped"));
    // Nothing a client could have seen is lost.
    assert!(info["last_event_id"].as_u64().unwrap() > seen);
    let errors = get(
        &base,
        &format!("/api/conversations/{id}/events/count?kind=error"),
    )
    .await;
    assert_eq!(errors, 1);

    // `run` continues: the LLM gets the cut call with an error result after it.
    llm.push(Step::text("Recovered."));
    let resp = client
        .post(format!("{base}/api/conversations/{id}/run"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    eventually("the run to finish", Duration::from_secs(15), || async {
        get(&base, &format!("/api/conversations/{id}")).await["execution_status"] == "finished"
    })
    .await;
    let requests = llm.requests();
    let messages = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let call_at = messages
        .iter()
        .position(|m| m["tool_calls"][0]["id"] == "stuck")
        .expect("the cut call is in the history");
    assert_eq!(messages[call_at + 1]["role"], "tool");
    assert_eq!(messages[call_at + 1]["tool_call_id"], "stuck");
    assert!(
        messages[call_at + 1]["content"]
            .as_str()
            .unwrap()
            .contains("server stopped")
    );
    server.start_kill().unwrap();
    let _ = server.wait().await;
}

/// Processes whose command line has `marker` as an argument.
fn processes_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == marker.as_bytes()))
        })
        .collect()
}
