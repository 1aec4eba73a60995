//! Compaction: a conversation that nears the context window is summarised by the LLM and
//! replaced by [system, summary, last user message]; when even that cannot fit, an error.

use serde_json::{Value, json};

use crate::helpers::{TestApp, last, names, spawn_app_with};
use fake_llm::Step;

/// An 8000-token window (4000 reserved for answers): compaction starts near 3600 tokens of
/// conversation. Only the built-in planning tool, so tool definitions stay small and fixed.
/// The fake LLM refuses prompts over the same window, as OpenAI does.
async fn small_window_app(extra: &str) -> TestApp {
    let app = spawn_app_with(&format!(
        "[models.fake]\ncustom_args = {{ max_context_size = 8000 }}\n[toolsets.bash]\nenabled = false\n[toolsets.internet]\nenabled = false\n{extra}"
    ))
    .await;
    app.llm.set_context_window(Some(8000));
    app
}

/// About `n` tokens: common words are one token each; `tag` starts the text.
fn words(n: usize, tag: &str) -> String {
    const WORDS: [&str; 10] = [
        "pod", "node", "disk", "memory", "error", "restart", "log", "cpu", "network", "service",
    ];
    let mut text = format!("{tag} ");
    text.extend((0..n).map(|i| format!("{} ", WORDS[i % 10])));
    text
}

fn long_history() -> Value {
    json!([
        {"role": "user", "content": format!("Why is checkout slow? {}", words(1200, "u"))},
        {"role": "assistant", "content": format!("Looking into it. {}", words(1200, "a"))},
    ])
}

const SUMMARY: &str = "<analysis>\nchronology\n</analysis>\n<summary>\n1. User asked why checkout is slow.\nSUMMARY-MARKER\n</summary>";

#[tokio::test]
async fn long_incoming_history_is_compacted_before_the_first_call() {
    let app = small_window_app("").await;
    app.llm.push(Step::text(SUMMARY));
    app.llm
        .push(Step::text("Checkout is slow because of the database."));
    let events = app
        .chat_sse(&json!({"ask": "Any news?", "conversation_history": long_history()}))
        .await;
    assert_eq!(
        names(&events),
        [
            "conversation_history_compaction_start",
            "conversation_history_compacted",
            "ai_message",
            "token_count",
            "token_count",
            "ai_answer_end"
        ]
    );
    let start = &events[0].data;
    let initial = start["metadata"]["initial_tokens"].as_u64().unwrap();
    assert!(initial > 2400, "{start}");
    // The token_count right after the notice already shows the compacted conversation.
    let after = events[3].data["metadata"]["tokens"]["total_tokens"]
        .as_u64()
        .unwrap();
    let compacted = events[1].data["metadata"]["compacted_tokens"]
        .as_u64()
        .unwrap();
    assert!(after < initial, "{after} after, {initial} before");
    assert!(
        after >= compacted,
        "{after} counts the compacted history ({compacted}) and more"
    );
    assert_eq!(start["metadata"]["num_messages"], 4);
    assert_eq!(start["metadata"]["max_context_size"], 8000);
    assert_eq!(start["metadata"]["threshold_pct"], 95);
    assert_eq!(
        start["content"],
        format!("Compacting conversation history ({initial} tokens, 4 messages)...")
    );

    let compacted = &events[1].data;
    let meta = &compacted["metadata"];
    assert_eq!(meta["initial_tokens"].as_u64().unwrap(), initial);
    let after = meta["compacted_tokens"].as_u64().unwrap();
    assert!(after < initial);
    assert_eq!(
        compacted["content"],
        format!("The conversation history has been compacted from {initial} to {after} tokens")
    );
    assert_eq!(compacted["compaction_summary"], SUMMARY);
    assert_eq!(meta["num_messages_before"], 4);
    assert_eq!(meta["num_messages_after"], 3);
    assert!(meta["compression_ratio_pct"].as_f64().unwrap() > 10.0);
    assert!(meta["compaction_cost"]["total_tokens"].as_u64().unwrap() > 0);
    // Keys HolmesGPT always sends, with the values that are true of triage.
    assert_eq!(meta["fallback_used"], false);
    assert!(meta.get("fallback_reason").is_none());
    assert_eq!(meta["summarization_requests"], 1);
    assert_eq!(meta["compaction_cost"]["cached_tokens"], Value::Null);
    assert!(
        meta["compaction_cost"]
            .as_object()
            .unwrap()
            .contains_key("cache_creation_tokens")
    );
    let messages = compacted["messages"].as_array().unwrap();
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "user"]);
    let summary_msg = messages[1]["content"].as_str().unwrap();
    assert!(summary_msg.contains("SUMMARY-MARKER") && !summary_msg.contains("<analysis>"));
    assert!(
        messages[2]["content"]
            .as_str()
            .unwrap()
            .starts_with("Any news?")
    );
    assert!(
        events[2].data["content"]
            .as_str()
            .unwrap()
            .contains("compacted")
    );

    // The summary request: no tools, the whole history, then our instructions.
    let summary_req = &app.llm.requests()[0];
    assert!(summary_req.get("tools").is_none());
    let sent = summary_req["messages"].as_array().unwrap();
    assert!(
        sent.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("<analysis>")
    );
    assert!(sent.iter().any(|m| {
        m["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Looking into it."))
    }));
    // The answer request ran on the compacted history.
    assert_eq!(app.llm_messages(1).len(), 3);
    let end = &events[5].data;
    assert_eq!(end["conversation_history"].as_array().unwrap().len(), 4);
    assert_eq!(end["metadata"]["costs"], Value::Null);
}

/// `token_count` in a history is the client's hint: a 0 on messages of ~9000 tokens in all
/// must not skip compaction, or the provider refuses the prompt as too long.
#[tokio::test]
async fn understated_token_counts_in_the_history_do_not_skip_compaction() {
    let app = small_window_app("").await;
    // Summary requests carry no tools; the answer request does.
    app.llm.set_responder(|request| {
        Step::text(if request.get("tools").is_none() {
            SUMMARY
        } else {
            "Checkout waits on the database."
        })
    });
    let history = json!([
        {"role": "user", "content": words(3000, "u1"), "token_count": 0},
        {"role": "assistant", "content": words(3000, "a1"), "token_count": 0},
        {"role": "user", "content": words(3000, "u2"), "token_count": 0},
        {"role": "assistant", "content": "Still looking.", "token_count": 0},
    ]);
    let events = app
        .chat_sse(&json!({"ask": "Any news?", "conversation_history": history}))
        .await;
    let n = names(&events);
    assert!(
        n.starts_with(&[
            "conversation_history_compaction_start",
            "conversation_history_compacted"
        ]),
        "{n:?}: {}",
        last(&events).data
    );
    assert_eq!(n.last(), Some(&"ai_answer_end"), "{}", last(&events).data);
    // Counted, not taken from the client: three messages of ~3000 tokens.
    let initial = events[0].data["metadata"]["initial_tokens"]
        .as_u64()
        .unwrap();
    assert!(initial > 9000, "{initial}");
    let end = &last(&events).data;
    assert_eq!(end["analysis"], "Checkout waits on the database.");
    for m in end["conversation_history"].as_array().unwrap() {
        assert!(m["token_count"].as_u64().unwrap() > 0, "{m}");
    }
}

#[tokio::test]
async fn growth_during_a_request_triggers_compaction() {
    let app = small_window_app("").await;
    // Each round adds ~600 tokens of arguments and ~600 of result: two rounds cross the threshold.
    for i in 0..2 {
        let content = words(600, &format!("r{i}-"));
        app.llm.push(Step::tool(
            &format!("t{i}"),
            "TodoWrite",
            json!({"todos": [{"id": "1", "content": content, "status": "pending"}]}),
        ));
    }
    app.llm.push(Step::text(SUMMARY));
    app.llm.push(Step::text("Done."));
    let events = app.chat_sse(&json!({"ask": "Investigate checkout"})).await;
    let n = names(&events);
    let start = n
        .iter()
        .position(|e| *e == "conversation_history_compaction_start")
        .expect("compaction started");
    assert_eq!(
        &n[start..],
        [
            "conversation_history_compaction_start",
            "conversation_history_compacted",
            "ai_message",
            "token_count",
            "token_count",
            "ai_answer_end"
        ]
    );
    assert_eq!(n.iter().filter(|e| **e == "tool_calling_result").count(), 2);
    let compacted = &events[start + 1].data;
    assert_eq!(compacted["metadata"]["num_messages_before"], 6);
    // The summary covered both tool calls with their results, flattened to text.
    let summary_req = app.llm.requests()[2]["messages"].to_string();
    for id in ["t0", "t1"] {
        assert!(
            summary_req.contains(&format!("(call {id}) with arguments")),
            "call {id}"
        );
        assert!(
            summary_req.contains(&format!("[Result of tool TodoWrite (call {id})]")),
            "result {id}"
        );
    }
}

#[tokio::test]
async fn summary_request_failing_once_is_retried() {
    let app = small_window_app("").await;
    app.llm
        .push(Step::error(400, "the summary request was refused"));
    app.llm.push(Step::text(SUMMARY));
    app.llm.push(Step::text("ok"));
    let events = app
        .chat_sse(&json!({"ask": "Any news?", "conversation_history": long_history()}))
        .await;
    assert_eq!(
        &names(&events)[..2],
        [
            "conversation_history_compaction_start",
            "conversation_history_compacted"
        ]
    );
    assert_eq!(names(&events).last(), Some(&"ai_answer_end"));
    assert_eq!(app.llm.request_count(), 3);
}

#[tokio::test]
async fn a_history_too_large_for_one_summary_is_summarised_in_chunks() {
    let app = small_window_app("").await;
    // About 7000 tokens of tool traffic: more than one summary request can carry.
    let mut history = vec![json!({"role": "user", "content": "Why is checkout slow?"})];
    for i in 0..7 {
        let id = format!("h{i}");
        history.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "TodoWrite", "arguments": "{}"}}]}));
        history.push(json!({"role": "tool", "tool_call_id": id, "name": "TodoWrite", "content": words(900, &format!("o{i}-"))}));
    }
    for _ in 0..3 {
        app.llm.push(Step::text(SUMMARY));
    }
    app.llm.push(Step::text("ok"));
    let events = app
        .chat_sse(&json!({"ask": "And now?", "conversation_history": history}))
        .await;
    assert!(
        names(&events).contains(&"conversation_history_compacted"),
        "{:?}",
        names(&events)
    );
    let requests = app.llm.requests();
    let summary_requests: Vec<&Value> = requests
        .iter()
        .filter(|r| r.get("tools").is_none())
        .collect();
    assert!(
        summary_requests.len() >= 2,
        "needed {} summary requests",
        summary_requests.len()
    );
    // Never a tool call in one request and its result in another.
    for req in &summary_requests {
        let text = req["messages"].to_string();
        for i in 0..7 {
            let called = text.contains(&format!("(call h{i}) with arguments"));
            let result = text.contains(&format!("[Result of tool TodoWrite (call h{i})]"));
            assert_eq!(called, result, "call h{i} split across summary requests");
        }
    }
    // Later chunks carry the earlier summary.
    assert!(
        summary_requests[1]["messages"]
            .to_string()
            .contains("SUMMARY-MARKER")
    );
}

#[tokio::test]
async fn when_nothing_can_fit_the_answer_is_an_error_not_a_provider_400() {
    let app = small_window_app("").await;
    app.llm.push(Step::text(SUMMARY));
    // The question itself is kept after compaction and is too large on its own.
    let huge_ask = words(5000, "q");
    let events = app.chat_sse(&json!({"ask": huge_ask})).await;
    let n = names(&events);
    assert_eq!(&n[n.len() - 2..], ["ai_message", "error"], "{n:?}");
    let error = &events.last().unwrap().data;
    assert_eq!(error["error_code"], 1);
    assert!(
        error["description"]
            .as_str()
            .unwrap()
            .contains("context window")
    );
    // Only the summary request reached the LLM, never an oversized chat request.
    assert!(app.llm.requests().iter().all(|r| r.get("tools").is_none()));
}

#[tokio::test]
async fn compaction_disabled_and_too_long_is_an_error() {
    let app = small_window_app("[compaction]\nenabled = false\n").await;
    let events = app
        .chat_sse(&json!({"ask": "q", "conversation_history": [{"role": "user", "content": words(7000, "x")}]}))
        .await;
    assert_eq!(names(&events), ["ai_message", "error"]);
    assert!(
        events[1].data["description"]
            .as_str()
            .unwrap()
            .contains("compaction is disabled")
    );
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn non_streaming_responses_carry_the_compacted_history() {
    let app = small_window_app("").await;
    app.llm.push(Step::text(SUMMARY));
    app.llm.push(Step::text("Answer."));
    let (status, body) = app
        .chat_json(&json!({"ask": "Any news?", "conversation_history": long_history()}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Answer.");
    let history = body["conversation_history"].as_array().unwrap();
    assert_eq!(history.len(), 4);
    assert!(
        history[1]["content"]
            .as_str()
            .unwrap()
            .contains("SUMMARY-MARKER")
    );
    assert_eq!(body["metadata"]["costs"], Value::Null);
}

#[tokio::test]
async fn a_failed_compaction_is_not_retried_every_step() {
    // Threshold 50%: every step is over it, yet the conversation fits the window.
    let app = small_window_app("[compaction]\nthreshold_pct = 50\n").await;
    app.llm.push(Step::error(400, "summary refused"));
    app.llm.push(Step::error(400, "summary refused again"));
    app.llm
        .push(Step::tool("t1", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("done"));
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    let n = names(&events);
    assert_eq!(
        n.iter()
            .filter(|e| **e == "conversation_history_compaction_start")
            .count(),
        1,
        "{n:?}"
    );
    assert!(!n.contains(&"conversation_history_compacted"));
    assert_eq!(n.last(), Some(&"ai_answer_end"), "{n:?}");
    assert_eq!(app.llm.request_count(), 4);
}
