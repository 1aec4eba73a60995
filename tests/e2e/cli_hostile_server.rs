//! `triage conversations` against a hostile server: escape sequences and bidirectional
//! overrides in every field it prints, a redirect that would carry the API key elsewhere, and a
//! stream ended as soon as it opens. Nothing reaches the terminal raw, the key stays home, and
//! the CLI does not hammer the server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::cli::{text, triage};

const EVIL: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}gnp.exe\r";
const STORY: &str = "6f1c3a52-5d0b-4c53-9f69-2d1f6a1b9e10";
const SILENT: &str = "0b5e2c1a-9d7f-4e3b-8a6c-1f2e3d4c5b6a";

fn info(id: &str, status: &str) -> Value {
    json!({
        "id": id, "title": format!("title {EVIL}"), "tags": {"team": EVIL},
        "execution_status": status, "reason": EVIL, "model": EVIL,
        "confirmation_policy": {"kind": "ConfirmRisky"}, "max_iterations": 10,
        "stuck_detection": true,
        "pending_actions": [{"tool_call_id": EVIL, "tool_name": EVIL, "arguments": {"x": EVIL},
                             "waits_for": "approval", "description": EVIL}],
        "stats": {"llm_calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "cost": 0.0,
                  "context_tokens": 1},
        "last_event_id": 0, "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z"
    })
}

fn frame(id: u64, name: &str, data: Value) -> String {
    format!("id: {id}\nevent: {name}\ndata: {data}\n\n")
}

fn story() -> String {
    [
        frame(1, "user_message", json!({"content": EVIL})),
        frame(2, &format!("kind{EVIL}"), json!({})),
        frame(3, "ai_message", json!({"content": EVIL})),
        frame(
            4,
            "tool_calling_result",
            json!({"name": EVIL, "description": EVIL,
            "tool_call_id": "c", "result": {"status": "error", "error": EVIL}}),
        ),
        frame(
            5,
            "approval_required",
            json!({"pending_approvals": [
            {"tool_call_id": EVIL, "tool_name": EVIL, "description": EVIL}]}),
        ),
        frame(6, "error", json!({"description": EVIL})),
        frame(7, "stuck", json!({"pattern": EVIL})),
        frame(8, "ai_answer_end", json!({"analysis": EVIL})),
        frame(
            9,
            "conversation_state_update",
            json!({"execution_status": "finished", "reason": EVIL}),
        ),
    ]
    .concat()
}

/// Characters that would act on a terminal instead of being shown.
fn raw_controls(s: &str) -> Vec<char> {
    s.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    base
}

/// The CLI exited 1 with `needle` in what it told the user.
fn fails_saying(out: &std::process::Output, needle: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(needle), "{}", text(&out.stderr));
}

fn sse(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

#[tokio::test]
async fn a_hostile_server_cannot_write_to_the_terminal_or_take_the_key_elsewhere() {
    let stolen = Arc::new(AtomicUsize::new(0));
    let thief = stolen.clone();
    let elsewhere = serve(Router::new().fallback(move || {
        thief.fetch_add(1, Ordering::SeqCst);
        async { "ok" }
    }))
    .await;
    let opens = Arc::new(AtomicUsize::new(0));
    let counted = opens.clone();
    let hostile = serve(
        Router::new()
            .route(
                "/api/conversations/search",
                get(|| async {
                    axum::Json(json!({"items": [info(STORY, "finished")], "next_page_id": EVIL}))
                }),
            )
            .route(
                "/api/conversations/{id}",
                get(
                    |axum::extract::Path(id): axum::extract::Path<String>| async move {
                        axum::Json(info(&id, "running"))
                    },
                ),
            )
            .route(
                "/api/conversations/{id}/events/search",
                get(|| async {
                    axum::Json(json!({"items": [
                        {"id": 1, "kind": "user_message", "source": "user",
                         "timestamp": "2024-01-01T00:00:00Z", "payload": {"content": EVIL}},
                        {"id": 2, "kind": EVIL, "source": EVIL,
                         "timestamp": "2024-01-01T00:00:00Z", "payload": {}}
                    ], "next_page_id": null}))
                }),
            )
            .route(
                "/api/conversations/{id}/events/stream",
                get(
                    move |axum::extract::Path(id): axum::extract::Path<String>| {
                        let counted = counted.clone();
                        async move {
                            if id == SILENT {
                                counted.fetch_add(1, Ordering::SeqCst);
                                return sse(String::new()); // ends at once, every time
                            }
                            sse(story())
                        }
                    },
                ),
            )
            .route(
                "/api/conversations/{id}/pause",
                post(move |_: HeaderMap| {
                    let to = format!("{elsewhere}/steal");
                    async move { (StatusCode::FOUND, [(header::LOCATION, to)]).into_response() }
                }),
            )
            .route(
                "/api/conversations/{id}/interrupt",
                post(|| async {
                    (StatusCode::CONFLICT, axum::Json(json!({"detail": EVIL}))).into_response()
                }),
            ),
    )
    .await;

    let cli = |args: &[&str]| {
        let mut all = vec![
            "conversations",
            "--server",
            &hostile,
            "--api-key",
            "secret-key",
        ];
        all.extend_from_slice(args);
        let all: Vec<String> = all.into_iter().map(str::to_owned).collect();
        async move {
            let refs: Vec<&str> = all.iter().map(String::as_str).collect();
            tokio::time::timeout(Duration::from_secs(30), triage(None, &refs))
                .await
                .expect("triage ended")
        }
    };
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["show", STORY],
        vec!["show", STORY, "--json"],
        vec!["watch", STORY],
        vec!["interrupt", STORY],
    ] {
        let out = cli(&args).await;
        let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(
            raw_controls(&printed),
            Vec::<char>::new(),
            "{args:?}: {printed}"
        );
        assert!(
            printed.contains("\\u{1b}") || printed.contains("\\u001b"),
            "{args:?}: {printed}"
        );
    }
    let out = cli(&["watch", STORY]).await;
    assert_eq!(out.status.code(), Some(0), "the story ends finished");
    let events = text(&out.stdout);
    assert_eq!(
        events.lines().filter(|l| l.starts_with('#')).count(),
        9,
        "{events}"
    );

    let out = cli(&["pause", STORY]).await;
    fails_saying(&out, "HTTP 302");
    assert_eq!(
        stolen.load(Ordering::SeqCst),
        0,
        "the redirect was not followed"
    );

    // A stream that ends as soon as it opens: retried with a growing pause, not in a loop.
    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .args(["conversations", "--server", &hostile, "watch", SILENT])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _ = watch.start_kill();
    let n = opens.load(Ordering::SeqCst);
    assert!((1..=6).contains(&n), "{n} connections in 3 s");
}

#[tokio::test]
async fn ask_prints_a_hostile_model_escaped_too() {
    let llm = fake_llm::FakeLlm::start().await;
    llm.push(fake_llm::Step::tool(
        "t",
        "TodoWrite",
        json!({"todos": [{"id": "1", "content": EVIL, "status": "pending"}]}),
    ));
    llm.push(fake_llm::Step::text(&format!("## Answer {EVIL}\nfine")));
    let config = crate::cli::config_for(&llm, "");
    let out = triage(Some(&config), &["ask", "q"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(raw_controls(&printed), Vec::<char>::new(), "{printed}");
    assert!(text(&out.stdout).starts_with("## Answer \\u{1b}]0;pwned"));
    llm.push(fake_llm::Step::text(EVIL));
    let out = triage(Some(&config), &["ask", "--json", "q"]).await;
    assert_eq!(raw_controls(&text(&out.stdout)), Vec::<char>::new());
    let body: Value = serde_json::from_slice(&out.stdout).expect("still JSON");
    assert_eq!(body["analysis"], EVIL);
}

#[tokio::test]
async fn ask_says_why_a_servers_stream_could_not_be_read() {
    // A frame that is not UTF-8, then a stream that ends inside a frame with no blank line.
    let app = Router::new().route(
        "/api/chat",
        post(|| async {
            let mut body = b"event: ai_message\ndata: {\"content\": \"\xFF\"}\n\n".to_vec();
            body.extend_from_slice(b"event: ai_answer_end\ndata: {\"analysis\": \"late\"}\n\n");
            ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
        }),
    );
    let base = serve(app).await;
    let out = triage(None, &["ask", "--server", &base, "q"]).await;
    fails_saying(&out, "`ai_message` event that is not UTF-8");
    // Whatever came after the unreadable frame is not taken for the answer.
    assert!(!text(&out.stdout).contains("late"), "{}", text(&out.stdout));
}

#[tokio::test]
async fn watch_stops_at_an_event_over_its_bound_instead_of_fetching_it_again() {
    let opens = Arc::new(AtomicUsize::new(0));
    let counted = opens.clone();
    // One `data:` line that never ends, made as it is sent (64 MiB is the CLI's bound).
    let endless = move || {
        counted.fetch_add(1, Ordering::SeqCst);
        let chunk = axum::body::Bytes::from(vec![b'x'; 1 << 20]);
        let body = futures::stream::once(async { axum::body::Bytes::from_static(b"data: ") })
            .chain(futures::stream::repeat(chunk).take(80))
            .map(Ok::<_, std::convert::Infallible>);
        async move {
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                axum::body::Body::from_stream(body),
            )
        }
    };
    let base = serve(
        Router::new()
            .route(
                "/api/conversations/{id}",
                get(
                    |axum::extract::Path(id): axum::extract::Path<String>| async move {
                        axum::Json(info(&id, "running"))
                    },
                ),
            )
            .route("/api/conversations/{id}/events/stream", get(endless)),
    )
    .await;
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        triage(None, &["conversations", "--server", &base, "watch", STORY]),
    )
    .await
    .expect("watch ended");
    fails_saying(&out, "exceeded 67108864 bytes");
    assert_eq!(
        opens.load(Ordering::SeqCst),
        1,
        "the stream was opened again"
    );
}
