//! Model lists as HolmesGPT users write them (issue 16): provider prefixes reach their server
//! with the model name they expect and their own key variable, model-list keys reach the
//! request, fallback models answer an outage and are announced, and the model table's windows
//! drive compaction.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::cli::{text, triage_env};
use crate::helpers::{Event, last, names, spawn_app_with};
use fake_llm::{FakeLlm, Step};

fn ask(stream: bool) -> Value {
    json!({"ask": "Why is my pod crashing?", "stream": stream})
}

fn fallback_frames(events: &[Event]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e.name == "model_fallback")
        .map(|e| &e.data)
        .collect()
}

#[tokio::test]
async fn each_prefix_sends_the_bare_model_name_and_its_own_key() {
    // Each prefix's key variable, as LiteLLM reads it; api_base points at the fake (as an
    // entry's api_base overrides the provider's address, the key still comes from its
    // variable). Only these tests read these variables.
    let cases = [
        (
            "openrouter/anthropic/claude-3.5-sonnet",
            "OPENROUTER_API_KEY",
            "anthropic/claude-3.5-sonnet",
        ),
        (
            "deepseek/deepseek-chat",
            "DEEPSEEK_API_KEY",
            "deepseek-chat",
        ),
        ("github/gpt-4o-mini", "GITHUB_API_KEY", "gpt-4o-mini"),
        (
            "groq/llama-3.3-70b-versatile",
            "GROQ_API_KEY",
            "llama-3.3-70b-versatile",
        ),
        (
            "mistral/mistral-large-latest",
            "MISTRAL_API_KEY",
            "mistral-large-latest",
        ),
        (
            "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo",
            "TOGETHERAI_API_KEY",
            "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        ),
        ("xai/grok-3-mini", "XAI_API_KEY", "grok-3-mini"),
        (
            "fireworks_ai/accounts/fireworks/models/llama-v3p1-8b-instruct",
            "FIREWORKS_AI_API_KEY",
            "accounts/fireworks/models/llama-v3p1-8b-instruct",
        ),
        (
            "hosted_vllm/Qwen/Qwen2.5-7B-Instruct",
            "HOSTED_VLLM_API_KEY",
            "Qwen/Qwen2.5-7B-Instruct",
        ),
    ];
    let mut toml = String::new();
    for (i, (model, var, _)) in cases.iter().enumerate() {
        // SAFETY: set before the app starts; no other test reads these variables.
        unsafe { std::env::set_var(var, format!("key-of-{var}")) };
        toml.push_str(&format!(
            "[models.p{i}]\nmodel = \"{model}\"\napi_base = \"{{LLM}}\"\n"
        ));
    }
    let app = spawn_app_with(&toml).await;
    for (i, (model, var, wire)) in cases.iter().enumerate() {
        app.llm.push(Step::text("ok"));
        let (status, body) = app
            .chat_json(&json!({"ask": "hi", "model": format!("p{i}")}))
            .await;
        assert_eq!(status, 200, "{model}: {body}");
        let sent = app.llm.requests().pop().unwrap();
        assert_eq!(sent["model"], *wire, "{model}");
        let headers = app.llm.request_headers().pop().unwrap();
        assert_eq!(
            headers["authorization"],
            format!("Bearer key-of-{var}").as_str(),
            "{model}"
        );
    }
}

#[tokio::test]
async fn ollama_takes_its_server_root_and_sends_no_key() {
    let llm = FakeLlm::start().await;
    llm.push(Step::text("local answer"));
    // OLLAMA_API_BASE names the server's root, as for LiteLLM; triage adds /v1.
    let root = llm.base_url().trim_end_matches("/v1").to_owned();
    let out = triage_env(
        &[
            ("MODEL", "ollama_chat/llama3.1:8b"),
            ("OLLAMA_API_BASE", &root),
            ("OPENAI_API_KEY", "sk-must-not-leak"),
        ],
        &["ask", "--json", "hi"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["analysis"], "local answer");
    assert_eq!(llm.requests()[0]["model"], "llama3.1:8b");
    assert!(llm.request_headers()[0].get("authorization").is_none());
}

#[tokio::test]
async fn model_list_keys_reach_the_request() {
    let app = spawn_app_with(
        "[llm]\ntemperature = 0.3\n\
         [models.fake]\nmax_tokens = 700\ntop_p = 0.5\nreasoning_effort = \"low\"\n\
         thinking = { type = \"enabled\", budget_tokens = 2048 }\n\
         extra_headers = { x-team = \"sre\" }\nseed = 7\n",
    )
    .await;
    app.llm.push(Step::text("ok"));
    let (status, _) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 200);
    let sent = &app.llm.requests()[0];
    assert_eq!(sent["max_tokens"], 700);
    assert_eq!(sent["top_p"], 0.5);
    assert_eq!(sent["temperature"], 0.3);
    assert_eq!(sent["reasoning_effort"], "low");
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(sent["seed"], 7);
    assert!(sent.get("max_completion_tokens").is_none(), "{sent}");
    assert_eq!(app.llm.request_headers()[0]["x-team"], "sre");
}

#[tokio::test]
async fn openai_reasoning_models_get_their_parameter_names() {
    let app = spawn_app_with(
        "[llm]\ntemperature = 0.3\n[models.fake]\nmodel = \"openai/o4-mini\"\nmax_tokens = 900\n",
    )
    .await;
    app.llm.push(Step::text("ok"));
    let (status, _) = app.chat_json(&ask(false)).await;
    assert_eq!(status, 200);
    let sent = &app.llm.requests()[0];
    assert_eq!(sent["model"], "o4-mini");
    assert_eq!(sent["max_completion_tokens"], 900, "{sent}");
    assert!(sent.get("max_tokens").is_none(), "{sent}");
    assert!(
        sent.get("temperature").is_none(),
        "o-series refuse a temperature: {sent}"
    );
}

/// A HolmesGPT model list file in YAML, with the variables HolmesGPT reads for every model.
fn model_list(llm: &FakeLlm, yaml: &str) -> PathBuf {
    let path = crate::helpers::scratch()
        .join(format!("model-list-{}.yaml", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, yaml.replace("{LLM}", &llm.base_url())).unwrap();
    path
}

#[tokio::test]
async fn holmesgpt_variables_set_defaults_an_entry_overrides() {
    let llm = FakeLlm::start().await;
    llm.push(Step::text("ok"));
    let list = model_list(
        &llm,
        "sonnet:\n  model: openai/claude-sonnet-4-5\n  api_base: \"{LLM}\"\n  api_key: k\n  extra_headers:\n    x-team: sre\n",
    );
    let out = triage_env(
        &[
            ("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap()),
            ("THINKING", r#"{"type": "enabled", "budget_tokens": 1024}"#),
            ("REASONING_EFFORT", "Medium"),
            ("EXTRA_HEADERS", r#"{"x-team": "default", "x-env": "prod"}"#),
            ("TEMPERATURE", "0"),
        ],
        &["ask", "--json", "hi"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent = &llm.requests()[0];
    assert_eq!(sent["model"], "claude-sonnet-4-5");
    assert_eq!(sent["thinking"]["budget_tokens"], 1024);
    assert_eq!(sent["reasoning_effort"], "medium");
    assert_eq!(sent["temperature"], 0.0);
    let headers = &llm.request_headers()[0];
    assert_eq!(headers["x-team"], "sre", "the entry's header wins");
    assert_eq!(headers["x-env"], "prod");

    // A bad variable is a start-up error naming it.
    let out = triage_env(
        &[
            ("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap()),
            ("THINKING", "enabled"),
        ],
        &["models"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("THINKING"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_file(list);
}

#[tokio::test]
async fn unknown_model_list_keys_and_fallbacks_are_start_up_errors() {
    let llm = FakeLlm::start().await;
    for (yaml, needle) in [
        (
            "m:\n  model: openai/x\n  api_base: \"{LLM}\"\n  reasoning_efort: low\n",
            "`reasoning_efort`",
        ),
        (
            "m:\n  model: openai/x\n  api_base: \"{LLM}\"\n  fallbacks: [nope]\n",
            "fallback 'nope'",
        ),
        (
            "a:\n  model: openai/x\n  api_base: \"{LLM}\"\n  fallbacks: [b]\nb:\n  model: openai/y\n  api_base: \"{LLM}\"\n  fallbacks: [a]\n",
            "cycle",
        ),
    ] {
        let list = model_list(&llm, yaml);
        let out = triage_env(
            &[("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap())],
            &["models"],
        )
        .await;
        let err = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{yaml}");
        assert!(err.contains(needle), "{yaml}: {err}");
        let _ = std::fs::remove_file(list);
    }
}

const FALLBACK: &str = "[llm]\nretry_max_attempts = 2\n\
    [models.fake]\nfallbacks = [\"backup\"]\n\
    [models.backup]\nmodel = \"openai/backup-model\"\napi_base = \"{LLM}\"\n";

#[tokio::test]
async fn an_outage_moves_to_the_fallback_and_says_so() {
    for (status, stream) in [(500, true), (529, false)] {
        let app = spawn_app_with(FALLBACK).await;
        app.llm.push(Step::error(status, "upstream down"));
        app.llm.push(Step::error(status, "upstream down"));
        app.llm.push(Step::text("answered by the backup"));
        if stream {
            let events = app.chat_sse(&ask(true)).await;
            let frames = fallback_frames(&events);
            assert_eq!(frames.len(), 1, "{:?}", names(&events));
            assert_eq!(frames[0]["requested_model"], "fake");
            assert_eq!(frames[0]["model"], "backup");
            assert!(
                frames[0]["reason"].as_str().unwrap().contains("HTTP 500"),
                "{}",
                frames[0]
            );
            let end = last(&events);
            assert_eq!(end.name, "ai_answer_end");
            assert_eq!(end.data["analysis"], "answered by the backup");
            assert_eq!(
                end.data["metadata"]["model_fallbacks"][0]["model"],
                "backup"
            );
        } else {
            let (code, body) = app.chat_json(&ask(false)).await;
            assert_eq!(code, 200, "{body}");
            assert_eq!(body["analysis"], "answered by the backup");
            let note = &body["metadata"]["model_fallbacks"][0];
            assert_eq!(note["requested_model"], "fake");
            assert!(note["reason"].as_str().unwrap().contains("529"), "{note}");
        }
        let models: Vec<Value> = app
            .llm
            .requests()
            .iter()
            .map(|r| r["model"].clone())
            .collect();
        assert_eq!(models, ["fake-model", "fake-model", "backup-model"]);
    }
}

#[tokio::test]
async fn no_connection_or_no_answer_in_time_moves_to_the_fallback() {
    // A primary nobody listens on, then one that never sends its headers.
    let closed = format!("http://127.0.0.1:{}/v1", crate::helpers::free_port());
    for (primary, step) in [
        (closed.as_str(), None),
        ("{LLM}", Some(Step::HangBeforeHeaders)),
    ] {
        let app = spawn_app_with(&format!(
            "[llm]\nretry_max_attempts = 1\nfirst_byte_timeout_secs = 0.5\n\
             [models.fake]\napi_base = \"{primary}\"\nfallbacks = [\"backup\"]\n\
             [models.backup]\nmodel = \"openai/backup-model\"\napi_base = \"{{LLM}}\"\n"
        ))
        .await;
        if let Some(step) = step {
            app.llm.push(step);
        }
        app.llm.push(Step::text("answered by the backup"));
        let events = app.chat_sse(&ask(true)).await;
        let frames = fallback_frames(&events);
        assert_eq!(frames.len(), 1, "{primary}: {:?}", names(&events));
        let reason = frames[0]["reason"].as_str().unwrap();
        assert!(
            reason.contains("cannot reach") || reason.contains("timed out"),
            "{reason}"
        );
        assert_eq!(last(&events).data["analysis"], "answered by the backup");
    }
}

#[tokio::test]
async fn a_conversation_on_the_server_logs_the_fallback() {
    use crate::conversations_api::{create, frames_until, state_is};
    let app = spawn_app_with(FALLBACK).await;
    app.llm.push(Step::error(502, "bad gateway"));
    app.llm.push(Step::error(502, "bad gateway"));
    app.llm.push(Step::text("answered by the backup"));
    let id = create(
        &app,
        json!({"initial_message": {"content": "Are my pods healthy?"}}),
    )
    .await;
    let frames = frames_until(&app, &id, None, state_is("finished")).await;
    let fallback = frames
        .iter()
        .find(|f| f.name == "model_fallback")
        .unwrap_or_else(|| panic!("{:?}", frames.iter().map(|f| &f.name).collect::<Vec<_>>()));
    assert_eq!(fallback.data["model"], "backup");
    let answer = frames.iter().find(|f| f.name == "ai_answer_end").unwrap();
    assert_eq!(
        answer.data["metadata"]["model_fallbacks"][0]["requested_model"],
        "fake"
    );
}

#[tokio::test]
async fn a_refusal_is_not_an_outage() {
    let app = spawn_app_with(FALLBACK).await;
    app.llm
        .push(Step::error(400, "bad request: tools malformed"));
    let events = app.chat_sse(&ask(true)).await;
    assert!(fallback_frames(&events).is_empty());
    assert_eq!(last(&events).name, "error");
    assert_eq!(app.llm.request_count(), 1, "no fallback, no retry");
}

#[tokio::test]
async fn without_fallbacks_an_outage_is_the_error() {
    let app = spawn_app_with("[llm]\nretry_max_attempts = 1\n").await;
    app.llm.push(Step::error(503, "overloaded"));
    let events = app.chat_sse(&ask(true)).await;
    assert_eq!(names(&events), ["error"]);
    assert!(fallback_frames(&events).is_empty());
}

/// Two turns of about 2,000 words each: more than an 8,192-token window holds with room to
/// answer, so the next request compacts first.
fn long_history() -> Value {
    let words = "pod node disk memory error ".repeat(400);
    json!([
        {"role": "user", "content": format!("Why is checkout slow? {words}")},
        {"role": "assistant", "content": format!("Looking into it. {words}")},
    ])
}

#[tokio::test]
async fn a_summary_answered_by_the_fallback_is_announced_too() {
    let app = spawn_app_with(&format!(
        "{FALLBACK}[models.fake.custom_args]\nmax_context_size = 8192\n\
         [toolsets.bash]\nenabled = false\n[toolsets.internet]\nenabled = false\n"
    ))
    .await;
    let history = long_history();
    // The summary request finds the primary down; the answer after it finds it back.
    app.llm.push(Step::error(503, "upstream down"));
    app.llm.push(Step::error(503, "upstream down"));
    app.llm.push(Step::text("<summary>\nSUMMARY\n</summary>"));
    app.llm.push(Step::text("answer"));
    let events = app
        .chat_sse(&json!({"ask": "Any news?", "conversation_history": history}))
        .await;
    let order = names(&events);
    let at = |name: &str| order.iter().position(|n| *n == name);
    let fallback = at("model_fallback").expect("a model_fallback event");
    assert!(
        at("conversation_history_compaction_start") < Some(fallback),
        "{order:?}"
    );
    assert!(
        Some(fallback) < at("conversation_history_compacted"),
        "{order:?}"
    );
    let end = last(&events);
    assert_eq!(end.data["analysis"], "answer", "{end:?}");
    let notes = end.data["metadata"]["model_fallbacks"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["model"], "backup");
    let models: Vec<Value> = app
        .llm
        .requests()
        .iter()
        .map(|r| r["model"].clone())
        .collect();
    assert_eq!(
        models,
        ["fake-model", "fake-model", "backup-model", "fake-model"]
    );
}

#[tokio::test]
async fn the_model_table_sets_the_window_that_drives_compaction() {
    // gpt-4 has an 8192-token window in the table; no max_context_size is configured.
    let app = spawn_app_with(
        "[models.fake]\nmodel = \"openai/gpt-4-0613\"\n[toolsets.bash]\nenabled = false\n[toolsets.internet]\nenabled = false\n",
    )
    .await;
    let history = long_history();
    app.llm.push(Step::text("<summary>\nSUMMARY\n</summary>"));
    app.llm.set_default(Step::text("answer"));
    let events = app
        .chat_sse(&json!({"ask": "Any news?", "conversation_history": history}))
        .await;
    assert_eq!(
        names(&events)[..2],
        [
            "conversation_history_compaction_start",
            "conversation_history_compacted"
        ],
        "{:?}",
        names(&events)
    );
    assert_eq!(events[0].data["metadata"]["max_context_size"], 8192);
    let end = last(&events);
    assert_eq!(end.data["metadata"]["max_tokens"], 8192, "{end:?}");
    // The table's prices: gpt-4 costs are reported without configuration.
    assert!(
        end.data["metadata"]["costs"]["total_cost"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[tokio::test]
async fn holmesgpt_thinking_reaches_claude_too() {
    let llm = FakeLlm::start().await;
    llm.push(Step::text("thought it through"));
    let list = model_list(
        &llm,
        "claude:\n  model: anthropic/claude-sonnet-4-5\n  api_base: \"{LLM}\"\n  api_key: sk-ant-test\n",
    );
    let out = triage_env(
        &[
            ("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap()),
            ("THINKING", r#"{"type": "enabled", "budget_tokens": 3000}"#),
            ("TEMPERATURE", "0"),
        ],
        &["ask", "--json", "hi"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent = &llm.requests()[0];
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 3000})
    );
    assert!(
        sent.get("temperature").is_none(),
        "not with thinking: {sent}"
    );
    // A THINKING budget the model's max_tokens cannot hold stops start-up, as an entry's would.
    let out = triage_env(
        &[
            ("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap()),
            ("THINKING", r#"{"type": "enabled", "budget_tokens": 100}"#),
        ],
        &["models"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("budget_tokens"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_file(list);
}
