//! Micro-benchmarks of the per-request hot paths (criterion).
//!
//! `cargo bench --bench micro` runs them all; add a filter to run some
//! (`cargo bench --bench micro -- tokens`). Only the library's public API is used.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

use triage::agent::Agent;
use triage::config::Settings;
use triage::context::conversation::Conversation;
use triage::context::tokens::Tokenizer;
use triage::context::truncation::ToolBudget;
use triage::http::body::parse_json;
use triage::http::sse::encode;
use triage::tools::{TodoWrite, Tool, ToolContext, ToolRegistry, Typed, execute};
use triage::wire::events::AnswerEnd;
use triage::wire::message::ForLlm;
use triage::wire::{ChatRequest, FollowUpAction, Message, Metadata, StreamEvent, ToolCall};

/// The load benchmark's configuration: default prompt sections and toolsets, minus the two
/// toolsets that need a cluster.
const BENCH_TOML: &str = r#"
[toolsets.kubernetes]
enabled = false
[toolsets.prometheus]
enabled = false
[models.fake]
model = "openai/gpt-4.1"
api_base = "http://127.0.0.1:9/v1"
"#;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn agent(rt: &tokio::runtime::Runtime) -> Arc<Agent> {
    let settings = Settings::from_toml(BENCH_TOML).expect("bench settings");
    rt.block_on(triage::startup::build_agent(&settings, &[]))
        .expect("agent builds")
}

/// Deterministic prose-like text of about `bytes` bytes (log lines, words, numbers).
fn sample_text(bytes: usize) -> String {
    const WORDS: &[&str] = &[
        "pod",
        "container",
        "restarted",
        "OOMKilled",
        "namespace",
        "deployment",
        "the",
        "memory",
        "limit",
        "exceeded",
        "readiness",
        "probe",
        "failed",
        "with",
        "status",
        "503",
        "error",
        "connection",
        "refused",
        "to",
        "10.0.3.17:8080",
        "after",
        "retries",
        "backoff",
        "kubelet",
        "scheduled",
        "node",
        "ip-10-0-1-23",
        "image",
        "pulled",
        "successfully",
    ];
    let mut out = String::with_capacity(bytes + 64);
    let mut i = 0usize;
    let mut line = 0usize;
    while out.len() < bytes {
        if i.is_multiple_of(12) {
            line += 1;
            out.push_str(&format!(
                "\n2026-01-0{}T12:{:02}:{:02}Z level=info ",
                line % 9 + 1,
                line % 60,
                (line * 7) % 60
            ));
        }
        out.push_str(WORDS[(i * 7 + line) % WORDS.len()]);
        out.push(' ');
        i += 1;
    }
    out.truncate(bytes);
    out
}

/// A conversation of `n` messages: user questions, assistant tool calls, tool results and
/// answers, about `bytes_each` bytes of text per message.
fn history(n: usize, bytes_each: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(n);
    out.push(Message::system(sample_text(bytes_each)));
    let mut i = 0;
    while out.len() < n {
        let m = match i % 4 {
            0 => Message::user(Value::String(sample_text(bytes_each / 4))),
            1 => Message::assistant(
                None,
                None,
                vec![ToolCall::new(
                    format!("call_{i}"),
                    "bash".into(),
                    json!({"command": format!("kubectl logs pod-{i} -n prod --tail 200")})
                        .to_string(),
                )],
            ),
            2 => Message::tool(&format!("call_{}", i - 1), "bash", sample_text(bytes_each)),
            _ => Message::assistant(Some(sample_text(bytes_each / 2)), None, Vec::new()),
        };
        out.push(m);
        i += 1;
    }
    out
}

fn with_counts(messages: &[Message]) -> Vec<Message> {
    Conversation::new(Tokenizer::O200k, messages.to_vec()).into_messages()
}

fn prompts(c: &mut Criterion) {
    let rt = runtime();
    let agent = agent(&rt);
    let p = &agent.prompts;
    let tok = Tokenizer::O200k;
    let minimal: HashMap<String, bool> = [
        "intro",
        "ask_user",
        "todowrite_instructions",
        "ai_safety",
        "toolset_instructions",
        "permission_errors",
        "general_instructions",
        "style_guide",
        "cluster_name",
        "system_prompt_additions",
        "files",
        "todowrite_reminder",
        "time_runbooks",
    ]
    .iter()
    .map(|k| ((*k).to_owned(), *k == "intro"))
    .collect();
    let default_len = p.system_prompt(p.sections(None), None, tok).text.len();
    let mut g = c.benchmark_group("prompt");
    g.throughput(Throughput::Bytes(default_len as u64));
    // What `prepare` does per request: pick sections, fetch the (cached) system prompt,
    // render the user prompt (question + files, todo reminder, time) and count its tokens.
    g.bench_function("assemble/default_controls", |b| {
        b.iter(|| {
            let sections = p.sections(None);
            let system = p.system_prompt(sections, None, tok);
            let user = p
                .user_prompt(
                    black_box("why is my pod crashing?"),
                    sections,
                    chrono::Utc::now(),
                )
                .unwrap();
            black_box((system.tokens, user.tokens(tok)))
        })
    });
    g.bench_function("assemble/minimal_controls", |b| {
        b.iter(|| {
            let sections = p.sections(Some(&minimal));
            let system = p.system_prompt(sections, None, tok);
            let user = p
                .user_prompt(
                    black_box("why is my pod crashing?"),
                    sections,
                    chrono::Utc::now(),
                )
                .unwrap();
            black_box((system.tokens, user.tokens(tok)))
        })
    });
    // `additional_system_prompt` makes the system prompt per-request (not cached).
    g.bench_function("assemble/default_plus_additional_system_prompt", |b| {
        b.iter(|| {
            let sections = p.sections(None);
            let system = p.system_prompt(sections, Some("Answer in French."), tok);
            black_box(system.tokens)
        })
    });
    g.finish();
}

fn tokens(c: &mut Criterion) {
    let tok = Tokenizer::O200k;
    Tokenizer::warm_up();
    let mut g = c.benchmark_group("tokens");
    // ~5k tokens of system-prompt-like text.
    let mut prompt = String::new();
    while tok.count(&prompt) < 5_000 {
        prompt.push_str(&sample_text(2_000));
    }
    g.throughput(Throughput::Bytes(prompt.len() as u64));
    g.bench_function("count/system_prompt_5k_tokens", |b| {
        b.iter(|| tok.count(black_box(&prompt)))
    });
    let output = sample_text(1 << 20);
    g.throughput(Throughput::Bytes(output.len() as u64));
    g.sample_size(10);
    g.bench_function("count/tool_output_1MiB", |b| {
        b.iter(|| tok.count(black_box(&output)))
    });
    // What happens to a 1 MiB result: cut to the default budget (25k tokens).
    let budget = ToolBudget::new(200_000, 15.0, 25_000);
    g.bench_function("truncate/tool_output_1MiB_to_25k_tokens", |b| {
        b.iter(|| budget.cut(tok, black_box(&output)).map(|c| c.1))
    });
    // The same cut as the agent makes it: the longest an async worker waits for its next turn
    // while the cut runs (it was the whole cut, ~37 ms, when it ran on the worker).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    g.bench_function("truncate/tool_output_1MiB_longest_worker_stall", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut stalled = Duration::ZERO;
                for _ in 0..iters {
                    let cut = tokio::spawn(budget.cut_result_off_workers(
                        tok,
                        output.clone(),
                        output.clone(),
                    ));
                    let mut longest = Duration::ZERO;
                    while !cut.is_finished() {
                        let turn = std::time::Instant::now();
                        tokio::task::yield_now().await;
                        longest = longest.max(turn.elapsed());
                    }
                    stalled += longest;
                }
                stalled
            })
        })
    });
    // The common case: a small result (a TodoWrite plan, a short command output) checked
    // against the budget; counting the same text is what the check cost when it encoded.
    let small = sample_text(400);
    g.sample_size(50);
    g.throughput(Throughput::Bytes(small.len() as u64));
    g.bench_function("count/tool_output_400B", |b| {
        b.iter(|| tok.count(black_box(&small)))
    });
    g.bench_function("truncate/tool_output_400B_fits", |b| {
        b.iter(|| budget.cut(tok, black_box(&small)).is_none())
    });
    g.sample_size(30);
    let hist = history(150, 800);
    let bytes: usize = hist.iter().map(|m| m.text().len()).sum();
    g.throughput(Throughput::Bytes(bytes as u64));
    // First sight of a history: every message counted.
    g.bench_function("history_150/count_all", |b| {
        b.iter_batched(
            || hist.clone(),
            // Returned, so dropping it is not timed.
            |h| Conversation::new(tok, h),
            BatchSize::LargeInput,
        )
    });
    // A follow-up turn: the history carries `token_count`, so nothing is counted again.
    let counted = with_counts(&hist);
    g.bench_function("history_150/cached_counts", |b| {
        b.iter_batched(
            || counted.clone(),
            |h| Conversation::new(tok, h),
            BatchSize::LargeInput,
        )
    });
    // The loop: one new message joins a 150-message conversation.
    let conv = Conversation::new(tok, counted.clone());
    let next = Message::tool("call_x", "bash", sample_text(800));
    g.throughput(Throughput::Bytes(800));
    g.bench_function("history_150/push_one", |b| {
        b.iter_batched(
            || (conv.clone(), next.clone()),
            |(mut conv, m)| {
                conv.push(m);
                conv
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn sse(c: &mut Criterion) {
    // An `ai_answer_end` of about 30 KiB: the history carries most of it.
    let conversation_history = history(12, 4_700);
    let end = StreamEvent::AnswerEnd(Box::new(AnswerEnd {
        analysis: sample_text(2_000),
        conversation_history,
        follow_up_actions: FollowUpAction::defaults(),
        metadata: Metadata::default(),
    }));
    let size = encode(&end).len();
    assert!(
        (25 * 1024..40 * 1024).contains(&size),
        "frame is {size} bytes"
    );
    let mut g = c.benchmark_group("sse");
    g.throughput(Throughput::Bytes(size as u64));
    g.bench_function(format!("encode/ai_answer_end_{}KiB", size / 1024), |b| {
        b.iter(|| encode(black_box(&end)).len())
    });
    g.finish();
}

fn request(c: &mut Criterion) {
    // A follow-up turn whose history is about 200 KiB.
    let hist = with_counts(&history(150, 2_800));
    let body = serde_json::to_vec(&json!({
        "ask": "and what about the other pods?",
        "conversation_history": hist,
        "model": "fake",
        "stream": true,
    }))
    .unwrap();
    assert!(
        (190 * 1024..230 * 1024).contains(&body.len()),
        "body is {} bytes",
        body.len()
    );
    let mut g = c.benchmark_group("request");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function(
        format!("parse_json/chat_{}KiB_history", body.len() / 1024),
        |b| {
            b.iter(|| {
                parse_json::<ChatRequest>(black_box(&body))
                    .map(|r| r.conversation_history.map(|h| h.len()))
                    .ok()
            })
        },
    );
    // The LLM request: the same history serialised in OpenAI's shape (twice per tool loop).
    let messages: Vec<ForLlm> = hist.iter().map(ForLlm).collect();
    g.bench_function("encode_for_llm/200KiB_history", |b| {
        b.iter(|| serde_json::to_vec(black_box(&messages)).unwrap().len())
    });
    g.finish();
}

fn tool_args(c: &mut Criterion) {
    let mut g = c.benchmark_group("tool_args");
    // A frontend tool's parameters schema, as a console would declare it.
    let schema = json!({
        "type": "object",
        "properties": {
            "namespace": {"type": "string", "minLength": 1},
            "kind": {"type": "string", "enum": ["Pod", "Deployment", "StatefulSet", "Node"]},
            "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
            "tail": {"type": "integer", "minimum": 1, "maximum": 10000},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["namespace", "kind", "name"],
        "additionalProperties": false,
    });
    let args = json!({"namespace": "prod", "kind": "Pod", "name": "api-7d9f8c6b5-x2k4p",
                      "tail": 200, "labels": {"app": "api", "tier": "backend"}});
    // `prepare` compiles each frontend tool's schema to check it.
    g.bench_function("jsonschema/compile_frontend_schema", |b| {
        b.iter(|| jsonschema::validator_for(black_box(&schema)).is_ok())
    });
    let validator = jsonschema::validator_for(&schema).unwrap();
    g.bench_function("jsonschema/validate_frontend_args", |b| {
        b.iter(|| validator.is_valid(black_box(&args)))
    });
    // TodoWrite through the Tool trait: typed parsing of the arguments and the rendered plan.
    let todos: Vec<Value> = (1..=8)
        .map(|i| {
            let status = ["pending", "in_progress", "completed"][i % 3];
            json!({"id": i.to_string(), "content": format!("Check step {i} of the investigation"),
                   "status": status})
        })
        .collect();
    let params = json!({ "todos": todos });
    let rt = runtime();
    let tool = Typed::new(TodoWrite);
    let ctx = ToolContext::default();
    g.bench_function("todowrite/invoke_8_items", |b| {
        b.iter(|| {
            rt.block_on(tool.invoke(black_box(&params), &ctx))
                .data
                .len()
        })
    });
    // The whole tool step of the loop for one call: parse the JSON arguments, find the tool,
    // run it (timeout and panic guard), build the result.
    let registry = ToolRegistry::builtin();
    let call = ToolCall::new("call_1".into(), "TodoWrite".into(), params.to_string());
    g.bench_function("todowrite/execute_call", |b| {
        b.iter(|| {
            rt.block_on(execute(&registry, black_box(&call), &ctx))
                .content
                .len()
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
        .configure_from_args()
}

criterion_group! {
    name = benches;
    config = config();
    targets = prompts, tokens, sse, request, tool_args
}
criterion_main!(benches);
