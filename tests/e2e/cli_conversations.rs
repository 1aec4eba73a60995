//! `triage conversations …`: the real binary against the real server and the fake LLM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::cli::{text, triage};
use crate::helpers::{
    TestApp, eventually, free_port, spawn_app, spawn_app_with, tool_writable_dir,
};
use fake_llm::Step;

/// `triage conversations --server <app> ARGS…`, bounded in time.
async fn cli(app: &TestApp, args: &[&str]) -> Output {
    cli_at(&app.base, args).await
}

async fn cli_at(base: &str, args: &[&str]) -> Output {
    let mut all = vec!["conversations", "--server", base];
    all.extend_from_slice(args);
    run(None, &all).await
}

async fn run(config: Option<&PathBuf>, args: &[&str]) -> Output {
    tokio::time::timeout(Duration::from_secs(60), triage(config, args))
        .await
        .unwrap_or_else(|_| panic!("triage {args:?} did not end"))
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited")
}

/// The ids of the `#N …` event lines, in order.
fn event_ids(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix('#')?.split(' ').next()?.parse().ok())
        .collect()
}

/// The ids of the stored events `watch` prints (it leaves out stored messages and token counts).
async fn printed_kinds_ids(app: &TestApp, id: &str) -> Vec<u64> {
    let (_, page) = app
        .get_json(&format!("/api/conversations/{id}/events/search?limit=100"))
        .await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            let silent_message = e["kind"] == "ai_message"
                && e["payload"]["content"]
                    .as_str()
                    .unwrap_or("")
                    .trim()
                    .is_empty();
            let internal = matches!(
                e["kind"].as_str().unwrap(),
                "message" | "message_replaced" | "token_count"
            );
            !internal && !silent_message
        })
        .map(|e| e["id"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_conversation_from_the_command_line_start_to_delete() {
    let app = spawn_app().await;
    app.llm
        .push(Step::tool("t1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text(
        "All pods are \u{1b}[31mhealthy\u{1b}]0;pwned\u{7}.",
    ));
    let out = cli(
        &app,
        &[
            "send",
            "--new",
            "--title",
            "pods \u{1b}[2J check",
            "Are my pods healthy?",
            "--watch",
        ],
    )
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}{}", text(&out.stderr));
    let id = stdout.lines().next().unwrap().to_owned();
    uuid::Uuid::parse_str(&id).expect("the new id comes first");
    for expected in [
        "you: Are my pods healthy?",
        "● running",
        "✓ TodoWrite",
        "answer:\nAll pods are \\u{1b}[31mhealthy\\u{1b}]0;pwned\\u{7}.",
        "● finished",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in {stdout}");
    }
    assert!(!stdout.contains('\u{1b}'), "an escape reached the terminal");
    assert_eq!(event_ids(&stdout), printed_kinds_ids(&app, &id).await);

    let out = cli(&app, &["list"]).await;
    let listed = text(&out.stdout);
    assert_eq!(code(&out), 0);
    assert!(listed.starts_with("STATUS"), "{listed}");
    let row = listed.lines().find(|l| l.contains(&id)).expect("listed");
    assert!(row.starts_with("finished"), "{row}");
    assert!(row.contains("pods \\u{1b}[2J check"), "{row}");
    let out = cli(&app, &["list", "--status", "running"]).await;
    assert_eq!(code(&out), 0);
    assert_eq!(text(&out.stdout), "");
    assert!(text(&out.stderr).contains("no conversations with status running"));

    let out = cli(&app, &["show", &id]).await;
    let shown = text(&out.stdout);
    assert_eq!(code(&out), 0);
    assert!(shown.contains("status:   finished"), "{shown}");
    assert!(shown.contains("2 LLM calls"), "{shown}");
    assert!(
        shown.contains("last events:") && shown.contains("answer:"),
        "{shown}"
    );
    let out = cli(&app, &["show", &id, "--json"]).await;
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["execution_status"], "finished");
    assert_eq!(info["title"], "pods \u{1b}[2J check");

    // A follow-up, run and watched: only what came after it is printed.
    app.llm.push(Step::text("Still healthy."));
    let out = cli(&app, &["send", &id, "And now?", "--run", "--watch"]).await;
    let followed = text(&out.stdout);
    assert_eq!(code(&out), 0, "{followed}{}", text(&out.stderr));
    assert!(followed.starts_with("#"), "{followed}");
    assert!(followed.contains("you: And now?") && followed.contains("Still healthy."));
    assert!(!followed.contains("All pods"), "{followed}");
    assert!(
        app.llm_messages(2)
            .iter()
            .any(|m| m["content"].as_str().unwrap_or("").contains("All pods are"))
    );
    // Watching a finished conversation replays it and exits; past its end, prints nothing.
    let out = cli(&app, &["watch", &id]).await;
    assert_eq!(code(&out), 0);
    assert!(text(&out.stdout).contains("Still healthy."));
    let last = *event_ids(&text(&out.stdout)).last().unwrap();
    let out = cli(&app, &["watch", &id, "--after", &last.to_string()]).await;
    assert_eq!(code(&out), 0);
    assert_eq!(text(&out.stdout), "");

    let out = cli(&app, &["delete", &id]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = cli(&app, &["show", &id]).await;
    assert_eq!(code(&out), 1);
    assert!(
        text(&out.stderr).contains("HTTP 404"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("not found"));
}

#[tokio::test]
async fn approvals_wait_then_approve_or_deny_from_the_command_line() {
    let app = spawn_app().await;
    let dir = tool_writable_dir("cli-approve");
    let approved = dir.join("approved");
    app.llm.push(Step::tool(
        "risky",
        "bash",
        json!({"command": format!("touch {}", approved.display())}),
    ));
    app.llm.push(Step::text("Done."));
    let out = cli(&app, &["send", "--new", "make the file", "--watch"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 3, "{stdout}{}", text(&out.stderr));
    let id = stdout.lines().next().unwrap().to_owned();
    assert!(stdout.contains("waiting for approval:"), "{stdout}");
    assert!(stdout.contains(&format!("touch {}", approved.display())));
    assert!(stdout.contains("● waiting_for_confirmation"));
    assert!(text(&out.stderr).contains(&format!("triage conversations approve {id}")));
    let out = cli(&app, &["show", &id]).await;
    assert!(
        text(&out.stdout).contains("approve? bash — touch"),
        "{}",
        text(&out.stdout)
    );
    assert!(!approved.exists());

    let out = cli(&app, &["approve", &id]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = cli(&app, &["watch", &id]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stdout));
    assert!(approved.exists(), "the approved command ran");

    let denied = dir.join("denied");
    app.llm.push(Step::tool(
        "risky2",
        "bash",
        json!({"command": format!("touch {}", denied.display())}),
    ));
    app.llm.push(Step::text("Left it alone."));
    let out = cli(&app, &["send", &id, "another one", "--run", "--watch"]).await;
    assert_eq!(code(&out), 3, "{}", text(&out.stdout));
    let out = cli(
        &app,
        &["approve", &id, "--deny", "--reason", "not on this host"],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = cli(&app, &["watch", &id]).await;
    assert_eq!(code(&out), 0);
    assert!(!denied.exists());
    let sent = app.llm_messages(app.llm.requests().len() - 1);
    let tool = sent.iter().find(|m| m["tool_call_id"] == "risky2").unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("not on this host")
    );
    // Nothing pending any more: the server's 409, with its detail.
    let out = cli(&app, &["approve", &id]).await;
    assert_eq!(code(&out), 1);
    assert!(
        text(&out.stderr).contains("HTTP 409") && text(&out.stderr).contains("nothing is waiting"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn interrupt_and_pause_from_the_command_line() {
    let app = spawn_app().await;
    app.llm.push(Step::HangAfterFirstChunk {
        first: "thinking".into(),
    });
    let out = cli(&app, &["send", "--new", "think forever"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_owned();
    eventually(
        "the LLM call to be in flight",
        Duration::from_secs(5),
        || async { app.llm.in_flight() == 1 },
    )
    .await;
    let out = cli(&app, &["interrupt", &id]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = cli(&app, &["watch", &id]).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 4, "{stdout}");
    assert!(stdout.contains("interrupted") && stdout.contains("● paused (interrupted)"));
    // Pausing what does not run is not an error; the status stays.
    let out = cli(&app, &["pause", &id]).await;
    assert_eq!(code(&out), 0);
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["execution_status"], "paused");
}

#[tokio::test]
async fn a_cut_stream_is_resumed_without_a_gap_or_a_repeat() {
    let app = spawn_app().await;
    let pace = |step: Step| Step::Paced {
        before: Duration::from_millis(300),
        between_chunks: Duration::from_millis(20),
        step: Box::new(step),
    };
    app.llm.push(pace(Step::tool(
        "t1",
        "TodoWrite",
        json!({"todos": [{"id": "1", "content": "look", "status": "in_progress"}]}),
    )));
    app.llm
        .push(pace(Step::tool("t2", "TodoWrite", json!({"todos": []}))));
    app.llm.push(pace(Step::text("Found it.")));
    let target: SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let (proxy, streams) = cutting_proxy(target, 3).await;
    let out = cli_at(&proxy, &["send", "--new", "look around", "--watch"]).await;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 0, "{stdout}{stderr}");
    assert!(stderr.contains("reconnecting"), "{stderr}");
    assert!(
        streams.load(Ordering::SeqCst) >= 2,
        "the stream was reopened"
    );
    let id = stdout.lines().next().unwrap();
    assert_eq!(event_ids(&stdout), printed_kinds_ids(&app, id).await);
    assert!(stdout.contains("Found it.") && stdout.ends_with("● finished\n"));
}

#[tokio::test]
async fn refusals_and_a_missing_server_say_what_is_wrong() {
    let app = spawn_app().await;
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let out = cli_at(&nobody, &["list"]).await;
    assert_eq!(code(&out), 1);
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot reach triage at") && err.contains("triage serve"),
        "{err}"
    );
    let out = cli(&app, &["show", "not-an-id"]).await;
    assert_eq!(code(&out), 2);
    assert!(text(&out.stderr).contains("not a conversation id"));
    let missing = "6f1c3a52-5d0b-4c53-9f69-2d1f6a1b9e10";
    let out = cli(&app, &["watch", missing]).await;
    assert_eq!(code(&out), 1);
    assert!(text(&out.stderr).contains("not found"));
    let out = cli(&app, &["send", missing]).await;
    assert_eq!(code(&out), 2, "ID without TEXT");
    let out = cli(&app, &["list", "--status", "bogus"]).await;
    assert_eq!(code(&out), 2);
    let out = cli_at("localhost:5050", &["list"]).await;
    assert_eq!(code(&out), 2);
    // The server's 400, as a usage error with its detail.
    let out = cli(&app, &["send", "--new", "x", "--model", "nope"]).await;
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("HTTP 400"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn without_server_the_configured_listen_address_and_key_are_used() {
    let port = free_port();
    let app = spawn_app_with(&format!(
        "[server]\nport = {port}\napi_keys = [\"cli-config-key\"]\n"
    ))
    .await;
    let config =
        crate::helpers::scratch().join(format!("cli-conv-{}.toml", uuid::Uuid::new_v4().simple()));
    std::fs::write(
        &config,
        format!("[server]\nhost = \"0.0.0.0\"\nport = {port}\napi_keys = [\"cli-config-key\"]\n"),
    )
    .unwrap();
    let out = run(Some(&config), &["conversations", "list"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no conversations"));
    let out = run(
        Some(&config),
        &["conversations", "--api-key", "wrong", "list"],
    )
    .await;
    assert_eq!(code(&out), 1);
    assert!(text(&out.stderr).contains("HTTP 401"));
    // A key from the config never goes to a --server URL.
    let out = run(
        Some(&config),
        &["conversations", "list", "--server", &app.base],
    )
    .await;
    assert_eq!(code(&out), 1);
    assert!(text(&out.stderr).contains("HTTP 401"));
    let _ = std::fs::remove_file(&config);
}

/// A loopback proxy to `target` that cuts the first event-stream connection after `frames`
/// SSE frames (mid-chunk, as a network failure would). Returns its URL and a count of the
/// event-stream requests it saw.
async fn cutting_proxy(target: SocketAddr, frames: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let streams = Arc::new(AtomicUsize::new(0));
    let seen = streams.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(upstream) = TcpStream::connect(target).await else {
                continue;
            };
            tokio::spawn(relay(client, upstream, seen.clone(), frames));
        }
    });
    (url, streams)
}

async fn relay(client: TcpStream, upstream: TcpStream, streams: Arc<AtomicUsize>, frames: usize) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut up_read, mut up_write) = upstream.into_split();
    // Set once this connection carries an event-stream request (connections are reused).
    let cut_this = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let marker = cut_this.clone();
    let requests = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if String::from_utf8_lossy(&buf[..n]).contains("/events/stream")
                && streams.fetch_add(1, Ordering::SeqCst) == 0
            {
                marker.store(true, Ordering::SeqCst);
            }
            if up_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 16 * 1024];
    let mut seen_frames = 0;
    loop {
        let n = match up_read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut chunk = &buf[..n];
        if cut_this.load(Ordering::SeqCst) {
            seen_frames += chunk.windows(2).filter(|w| w == b"\n\n").count();
            if seen_frames >= frames {
                // Half of this chunk goes through: the client sees a frame cut in two.
                chunk = &chunk[..chunk.len() / 2];
                let _ = client_write.write_all(chunk).await;
                break;
            }
        }
        if client_write.write_all(chunk).await.is_err() {
            break;
        }
    }
    requests.abort();
}
