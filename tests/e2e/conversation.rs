//! Follow-up turns and prompt gating: history round-trips, the system prompt is regenerated at
//! index 0 every turn, `behavior_controls`, the `[prompts] enabled` cap (ENABLED_PROMPTS) and
//! the prompt additions.

use serde_json::{Value, json};

use crate::helpers::{spawn_app, spawn_app_with};
use fake_llm::Step;

/// The trimmed text of a prompt template that has no template syntax, i.e. exactly what the
/// section renders to.
fn section_text(name: &str) -> String {
    let path = format!("{}/prompts/{name}.jinja", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(
        !text.contains("{{") && !text.contains("{%"),
        "{path} has template syntax: pick a static section"
    );
    let text = text.trim().to_owned();
    assert!(!text.is_empty(), "{path} is empty");
    text
}

/// The first non-empty line of a static section: enough to tell whether it is present.
fn first_line(name: &str) -> String {
    section_text(name)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap()
        .trim()
        .to_owned()
}

/// The static start of the date/time paragraph of `time_runbooks.jinja`.
fn time_paragraph_start() -> String {
    let path = format!("{}/prompts/time_runbooks.jinja", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("now_utc"))
        .expect("time_runbooks.jinja mentions now_utc");
    let prefix = line.split("{{").next().unwrap().trim().to_owned();
    assert!(prefix.len() > 10, "a distinctive prefix: {prefix:?}");
    prefix
}

fn content(m: &Value) -> &str {
    m["content"]
        .as_str()
        .unwrap_or_else(|| panic!("string content: {m}"))
}

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

fn without_token_count(m: &Value) -> Value {
    let mut m = m.clone();
    if let Some(o) = m.as_object_mut() {
        o.remove("token_count");
    }
    m
}

/// Only standard OpenAI message fields, recursively for tool calls.
fn assert_openai_only(messages: &[Value]) {
    for m in messages {
        let obj = m.as_object().unwrap();
        for key in obj.keys() {
            assert!(
                ["role", "content", "tool_calls", "tool_call_id", "name"].contains(&key.as_str()),
                "non-OpenAI key {key:?} sent to the LLM: {m}"
            );
        }
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            for key in call.as_object().unwrap().keys() {
                assert!(
                    ["id", "type", "function"].contains(&key.as_str()),
                    "non-OpenAI key {key:?} in a tool call sent to the LLM: {call}"
                );
            }
        }
    }
}

#[tokio::test]
async fn follow_up_sends_history_then_the_new_question() {
    let app = spawn_app().await;
    app.llm.push(Step::text("The pod is OOMKilled."));
    app.llm.push(Step::text("Raise the memory limit to 512Mi."));

    let (status, first) = app
        .chat_json(&json!({"ask": "Why is my pod crashing?"}))
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["follow_up_actions"].as_array().unwrap().len(), 3);
    let history = first["conversation_history"].as_array().unwrap().clone();
    assert_eq!(roles(&history), ["system", "user", "assistant"]);

    let (status, second) = app
        .chat_json(&json!({"ask": "How do I fix it?", "conversation_history": history}))
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["analysis"], "Raise the memory limit to 512Mi.");
    assert_eq!(
        second["follow_up_actions"],
        json!([]),
        "history has an assistant message"
    );

    assert_eq!(app.llm.request_count(), 2);
    let sent = app.llm_messages(1);
    assert_eq!(roles(&sent), ["system", "user", "assistant", "user"]);
    assert_eq!(content(&sent[0]), content(&history[0]));
    assert_eq!(content(&sent[0]), app.system_prompt_sent(0));
    assert_eq!(content(&sent[1]), content(&history[1]));
    assert!(content(&sent[1]).starts_with("Why is my pod crashing?"));
    assert_eq!(content(&sent[2]), "The pod is OOMKilled.");
    assert!(content(&sent[3]).starts_with("How do I fix it?"));
    assert_openai_only(&sent);

    let new_history = second["conversation_history"].as_array().unwrap();
    assert_eq!(
        roles(new_history),
        ["system", "user", "assistant", "user", "assistant"]
    );
    assert_eq!(new_history[1..3], history[1..3]);
    assert_eq!(content(&new_history[4]), "Raise the memory limit to 512Mi.");
}

#[tokio::test]
async fn follow_up_over_sse_has_no_follow_up_actions() {
    let app = spawn_app().await;
    app.llm.push(Step::text("Second answer."));
    let events = app
        .chat_sse(&json!({
            "ask": "And now?",
            "conversation_history": [
                {"role": "user", "content": "First question"},
                {"role": "assistant", "content": "First answer."}
            ]
        }))
        .await;
    let end = crate::helpers::last(&events);
    assert_eq!(end.name, "ai_answer_end");
    assert_eq!(end.data["follow_up_actions"], json!([]));
}

#[tokio::test]
async fn unknown_history_keys_round_trip_but_never_reach_the_llm() {
    let app = spawn_app().await;
    app.llm.push(Step::tool(
        "call_1",
        "TodoWrite",
        json!({"todos": [{"id": "1", "content": "Check logs", "status": "in_progress"}]}),
    ));
    app.llm.push(Step::text("Planned."));
    app.llm.push(Step::text("Follow-up answer."));

    let (status, first) = app.chat_json(&json!({"ask": "Plan it"})).await;
    assert_eq!(status, 200, "{first}");
    let mut history = first["conversation_history"].as_array().unwrap().clone();
    assert_eq!(
        roles(&history),
        ["system", "user", "assistant", "tool", "assistant"]
    );
    // What a client (or LiteLLM-based tooling) may add to the messages it keeps.
    history[2]["tool_calls"][0]["client_annotation"] = json!({"seen": true});
    history[2]["provider_specific_fields"] = json!({"refusal": null});
    history[4]["provider_specific_fields"] = json!({"refusal": null});
    history[3]["ui_collapsed"] = json!(true);

    let (status, second) = app
        .chat_json(&json!({"ask": "Go on", "conversation_history": history}))
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["follow_up_actions"], json!([]));

    // Round-trip: every client message comes back unchanged (the system prompt is regenerated).
    let back = second["conversation_history"].as_array().unwrap();
    assert_eq!(
        roles(back),
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant"
        ]
    );
    for i in 1..5 {
        assert_eq!(back[i], history[i], "history[{i}] changed");
    }
    assert_eq!(
        back[2]["tool_calls"][0]["client_annotation"],
        json!({"seen": true})
    );
    assert_eq!(
        back[4]["provider_specific_fields"],
        json!({"refusal": null})
    );

    // The LLM only sees standard OpenAI fields.
    let sent = app.llm_messages(2);
    assert_eq!(
        roles(&sent),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_openai_only(&sent);
    assert_eq!(sent[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(sent[2]["tool_calls"][0]["function"]["name"], "TodoWrite");
    assert_eq!(
        sent[2]["tool_calls"][0]["function"]["arguments"],
        history[2]["tool_calls"][0]["function"]["arguments"]
    );
    assert_eq!(sent[3]["tool_call_id"], "call_1");
    assert_eq!(content(&sent[4]), "Planned.");
    let raw = app.llm.requests()[2]["messages"].to_string();
    for key in [
        "provider_specific_fields",
        "client_annotation",
        "ui_collapsed",
        "token_count",
    ] {
        assert!(!raw.contains(key), "{key} reached the LLM: {raw}");
    }
}

#[tokio::test]
async fn client_system_message_is_replaced_by_triage_prompt() {
    let app = spawn_app().await;
    app.llm.push(Step::text("Healthy."));
    let (status, body) = app
        .chat_json(&json!({
            "ask": "What is the status of my cluster?",
            "conversation_history": [
                {"role": "system", "content": "You are a helpful assistant."}
            ]
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let sent = app.llm_messages(0);
    assert_eq!(roles(&sent), ["system", "user"]);
    let system = content(&sent[0]);
    assert!(
        system.starts_with(&first_line("intro")),
        "triage's prompt: {system}"
    );
    assert!(
        !app.llm.requests()[0]
            .to_string()
            .contains("You are a helpful assistant.")
    );

    let history = body["conversation_history"].as_array().unwrap();
    assert_eq!(roles(history), ["system", "user", "assistant"]);
    assert_eq!(content(&history[0]), system);
    assert!(!body.to_string().contains("You are a helpful assistant."));
}

#[tokio::test]
async fn history_without_system_message_gets_one_inserted() {
    let app = spawn_app().await;
    app.llm.push(Step::text("Fixed."));
    let client_history = vec![
        json!({"role": "user", "content": "Why is api-7d9f restarting?"}),
        json!({"role": "assistant", "content": "It runs out of memory."}),
    ];
    let (status, body) = app
        .chat_json(&json!({
            "ask": "How do I fix it?",
            "conversation_history": client_history
        }))
        .await;
    assert_eq!(status, 200, "{body}");

    let sent = app.llm_messages(0);
    assert_eq!(roles(&sent), ["system", "user", "assistant", "user"]);
    assert!(content(&sent[0]).starts_with(&first_line("intro")));
    assert_eq!(sent[1], client_history[0]);
    assert_eq!(sent[2], client_history[1]);
    assert!(content(&sent[3]).starts_with("How do I fix it?"));

    let history = body["conversation_history"].as_array().unwrap();
    assert_eq!(
        roles(history),
        ["system", "user", "assistant", "user", "assistant"]
    );
    assert_eq!(without_token_count(&history[1]), client_history[0]);
    assert_eq!(without_token_count(&history[2]), client_history[1]);
}

#[tokio::test]
async fn default_sections_and_ai_safety_opt_in() {
    let app = spawn_app().await;
    app.llm.push(Step::text("one"));
    app.llm.push(Step::text("two"));
    let (s1, _) = app.chat_json(&json!({"ask": "q"})).await;
    let (s2, _) = app
        .chat_json(&json!({"ask": "q", "behavior_controls": {"ai_safety": true}}))
        .await;
    assert_eq!((s1, s2), (200, 200));

    let default = app.system_prompt_sent(0);
    for name in [
        "intro",
        "ask_user",
        "todowrite_instructions",
        "permission_errors",
        "general_instructions",
        "style_guide",
    ] {
        assert!(
            default.contains(&section_text(name)),
            "{name} is on by default"
        );
    }
    assert!(
        !default.contains(&first_line("ai_safety")),
        "ai_safety is off by default"
    );

    let with_safety = app.system_prompt_sent(1);
    assert!(with_safety.contains(&section_text("ai_safety")));
    assert!(with_safety.contains(&section_text("style_guide")));

    // User sections are on by default too.
    let user = content(&app.llm_messages(0)[1]).to_owned();
    assert!(user.starts_with("q\n\n"), "{user}");
    assert!(user.contains(&section_text("todowrite_reminder")));
    assert!(user.contains(&time_paragraph_start()));
}

#[tokio::test]
async fn behavior_controls_disable_sections() {
    let app = spawn_app().await;
    app.llm.push(Step::text("ok"));
    let (status, body) = app
        .chat_json(&json!({
            "ask": "List pods",
            "behavior_controls": {"style_guide": false, "general_instructions": false}
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let system = app.system_prompt_sent(0);
    assert!(!system.contains(&first_line("style_guide")), "{system}");
    assert!(
        !system.contains(&first_line("general_instructions")),
        "{system}"
    );
    assert!(system.contains(&section_text("intro")));
    assert!(system.contains(&section_text("ask_user")));
    // The returned history carries the same prompt.
    assert_eq!(content(&body["conversation_history"][0]), system);
}

#[tokio::test]
async fn time_runbooks_false_drops_the_date_paragraph() {
    let app = spawn_app().await;
    app.llm.push(Step::text("ok"));
    app.llm.push(Step::text("ok"));
    let (s1, _) = app.chat_json(&json!({"ask": "When did it fail?"})).await;
    let (s2, _) = app
        .chat_json(
            &json!({"ask": "When did it fail?", "behavior_controls": {"time_runbooks": false}}),
        )
        .await;
    assert_eq!((s1, s2), (200, 200));
    let marker = time_paragraph_start();
    let with = content(&app.llm_messages(0)[1]).to_owned();
    let without = content(&app.llm_messages(1)[1]).to_owned();
    assert!(with.contains(&marker), "{with}");
    assert!(!without.contains(&marker), "{without}");
    assert!(without.starts_with("When did it fail?"));
    // Only the user message changes.
    assert_eq!(app.system_prompt_sent(0), app.system_prompt_sent(1));
}

#[tokio::test]
async fn unknown_behavior_controls_are_ignored() {
    let app = spawn_app().await;
    app.llm.push(Step::text("ok"));
    app.llm.push(Step::text("ok"));
    let (s1, _) = app.chat_json(&json!({"ask": "q"})).await;
    let (s2, body) = app
        .chat_json(&json!({
            "ask": "q",
            "behavior_controls": {"no_such_section": false, "fast_mode": true}
        }))
        .await;
    assert_eq!((s1, s2), (200, 200), "{body}");
    assert_eq!(app.system_prompt_sent(0), app.system_prompt_sent(1));
    let user = |n: usize| content(&app.llm_messages(n)[1]).to_owned();
    // The user message differs at most in the clock; its sections are the same.
    assert!(user(1).contains(&section_text("todowrite_reminder")));
    assert!(user(1).contains(&time_paragraph_start()));
    assert_eq!(user(0).len(), user(1).len());
}

#[tokio::test]
async fn enabled_prompts_caps_the_sections() {
    let app = spawn_app_with("[prompts]\nenabled = \"intro,style_guide\"\n").await;
    app.llm.push(Step::text("ok"));
    app.llm.push(Step::text("ok"));
    let (s1, _) = app.chat_json(&json!({"ask": "Is it up?"})).await;
    let (s2, _) = app
        .chat_json(&json!({
            "ask": "Is it up?",
            "behavior_controls": {"general_instructions": true, "ai_safety": true, "time_runbooks": true}
        }))
        .await;
    assert_eq!((s1, s2), (200, 200));

    let intro = section_text("intro");
    let style = section_text("style_guide");
    for n in 0..2 {
        let system = app.system_prompt_sent(n);
        assert!(system.contains(&intro), "request {n}: {system}");
        assert!(system.contains(&style), "request {n}: {system}");
        for other in [
            "ask_user",
            "todowrite_instructions",
            "ai_safety",
            "permission_errors",
            "general_instructions",
        ] {
            assert!(
                !system.contains(&first_line(other)),
                "request {n}: {other} is outside the cap"
            );
        }
        assert!(
            system.len() <= intro.len() + style.len() + 8,
            "request {n}: only intro and style guide: {system}"
        );
        // No user section is allowed either: the user message is the bare question.
        let sent = app.llm_messages(n);
        assert_eq!(roles(&sent), ["system", "user"]);
        assert_eq!(sent[1]["content"], "Is it up?");
    }
}

#[tokio::test]
async fn enabled_prompts_none_sends_no_system_message() {
    let app = spawn_app_with("[prompts]\nenabled = \"none\"\n").await;
    app.llm.push(Step::text("ok"));
    let (status, body) = app
        .chat_json(&json!({
            "ask": "Why is my pod crashing?",
            "behavior_controls": {"intro": true}
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let sent = app.llm_messages(0);
    assert_eq!(roles(&sent), ["user"], "{sent:?}");
    assert_eq!(sent[0]["content"], "Why is my pod crashing?");
    assert_eq!(app.system_prompt_sent(0), "");
    let history = body["conversation_history"].as_array().unwrap();
    assert_eq!(roles(history), ["user", "assistant"]);
}

#[tokio::test]
async fn additions_and_cluster_name_are_in_the_system_prompt() {
    let app = spawn_app_with(
        "[prompts]\ncluster_name = \"prod-eu-1\"\nsystem_prompt_additions = \"Always answer in English.\"\n",
    )
    .await;
    app.llm.push(Step::text("ok"));
    let (status, body) = app
        .chat_json(&json!({
            "ask": "q",
            "additional_system_prompt": "Mention ticket ABC-123 in every answer."
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let system = app.system_prompt_sent(0);
    assert!(system.contains("prod-eu-1"), "{system}");
    assert!(system.contains("Always answer in English."), "{system}");
    assert!(
        system.ends_with("Mention ticket ABC-123 in every answer."),
        "appended at the end: {system}"
    );
    assert!(system.starts_with(&first_line("intro")));
}

#[tokio::test]
async fn additional_system_prompt_is_appended_with_default_config() {
    let app = spawn_app().await;
    app.llm.push(Step::text("ok"));
    app.llm.push(Step::text("ok"));
    let (s1, _) = app.chat_json(&json!({"ask": "q"})).await;
    let (s2, _) = app
        .chat_json(&json!({"ask": "q", "additional_system_prompt": "Answer in haiku."}))
        .await;
    assert_eq!((s1, s2), (200, 200));
    let base = app.system_prompt_sent(0);
    let extended = app.system_prompt_sent(1);
    assert!(!base.contains("Answer in haiku."));
    assert!(!base.contains("The cluster the user is asking about"));
    assert!(extended.starts_with(&base), "the base prompt is unchanged");
    assert!(extended.ends_with("Answer in haiku."), "{extended}");
}
