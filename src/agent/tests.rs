//! The core's loop, resume, compaction and structured-output repair on the in-process scripted
//! provider: no HTTP, no processes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::*;
use crate::config::Settings;
use crate::llm::scripted::{Reply, ScriptedProvider};
use crate::prompt::PromptInputs;
use crate::tools::{Tool, ToolContext, ToolOutput, ToolRegistry, ToolStatus, Toolset};
use crate::wire::request::{FrontendToolDefinition, FrontendToolMode};

/// Echoes `text`; with `wait`, first waits for the test to open the gate.
struct Echo {
    schema: Value,
    gate: Arc<tokio::sync::Notify>,
}

impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn toolset(&self) -> &str {
        "test"
    }
    fn description(&self) -> &str {
        "echoes"
    }
    fn parameters(&self) -> &Value {
        &self.schema
    }
    fn one_liner(&self, params: &Value) -> String {
        format!("echo {}", params["text"].as_str().unwrap_or_default())
    }
    fn invoke<'a>(&'a self, params: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if params["guarded"] == true && !ctx.user_approved {
                return ToolOutput {
                    status: ToolStatus::ApprovalRequired,
                    error: Some("echo of a guarded text needs approval".into()),
                    ..ToolOutput::success("")
                };
            }
            if params["wait"] == true {
                self.gate.notified().await;
            }
            ToolOutput::success(params["text"].as_str().unwrap_or_default())
        })
    }
}

pub(super) struct Harness {
    pub agent: Arc<Agent>,
    pub llm: Arc<ScriptedProvider>,
    pub gate: Arc<tokio::sync::Notify>,
}

pub(super) fn harness(extra_toml: &str, replies: Vec<Reply>) -> Harness {
    let toml = format!(
        "[models.test]\nmodel = \"scripted/test\"\napi_base = \"http://scripted.invalid\"\n{extra_toml}"
    );
    let settings = Settings::from_toml(&toml).expect("settings");
    let llm = Arc::new(ScriptedProvider::new(replies));
    let gate = Arc::new(tokio::sync::Notify::new());
    let echo = Echo {
        schema: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        gate: gate.clone(),
    };
    let agent = Agent {
        models: Arc::new(crate::llm::ModelRegistry::from_settings(&settings).expect("models")),
        llm: crate::llm::Llm::new(llm.clone(), Duration::from_secs(5), Duration::from_secs(1))
            .with_scripted(llm.clone()),
        prompts: Arc::new(
            crate::prompt::Prompts::new(&PromptInputs::default(), None, None).expect("prompts"),
        ),
        tools: Arc::new(ToolRegistry::new(vec![Toolset::enabled(
            "test",
            "",
            vec![Arc::new(echo)],
        )])),
        options: AgentOptions {
            max_steps: settings.agent.max_steps,
            tool_budget_pct: 15.0,
            tool_budget_tokens: 25_000,
            duplicate_call_guard: true,
            max_tool_calls_per_answer: 32,
            images: ImageLimits {
                per_request: 4,
                total: 8,
                bytes_total: 1 << 20,
            },
        },
        compaction: CompactionOptions {
            enabled: true,
            threshold_pct: settings.compaction.threshold_pct,
        },
        masker: Default::default(),
    };
    Harness {
        agent: Arc::new(agent),
        llm,
        gate,
    }
}

pub(super) fn ask(text: &str) -> Input {
    Input {
        message: Some(UserMessage {
            text: text.into(),
            images: Vec::new(),
        }),
        ..Input::default()
    }
}

pub(super) fn call(id: &str, args: Value) -> Reply {
    Reply::Calls(vec![(id.into(), "echo".into(), args.to_string())])
}

/// Every event of a run and its final state.
pub(super) async fn drain(mut run: Run) -> (Vec<AgentEvent>, RunState) {
    let mut events = Vec::new();
    while let Some(event) = run.next().await {
        events.push(event);
    }
    let state = run.take_state().expect("a finished run has a state");
    (events, state)
}

pub(super) fn tool_results(events: &[AgentEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolFinished(o) => Some((o.call_id.clone(), o.content.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_question_runs_tools_then_answers() {
    let h = harness(
        "",
        vec![
            call("c1", json!({"text": "pods"})),
            Reply::Text("All fine.".into()),
        ],
    );
    let run = h
        .agent
        .start(&RunConfig::default(), RunState::default(), ask("why?"))
        .unwrap();
    let (events, state) = drain(run).await;
    assert_eq!(
        tool_results(&events),
        [("c1".to_owned(), "pods".to_owned())]
    );
    let Some(AgentEvent::Finished(answer)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(answer.text, "All fine.");
    let roles: Vec<&str> = state.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
    assert_eq!(state.steps, 2);
    // Events are small: no event carries the history.
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, AgentEvent::Paused { .. }))
    );
    // The second LLM call saw the tool's result.
    let seen = h.llm.seen();
    assert!(
        seen[1]
            .messages
            .iter()
            .any(|m| m.role == "tool" && m.text() == "pods")
    );
}

#[tokio::test]
async fn a_paused_run_resumes_from_its_state_and_the_turn_keeps_its_step_budget() {
    let h = harness(
        "[agent]\nmax_steps = 2\n",
        vec![
            call("g1", json!({"text": "secret", "guarded": true})),
            Reply::Text("Done.".into()),
        ],
    );
    let config = RunConfig {
        approvals: ApprovalMode::Pause,
        can_pause: true,
        ..RunConfig::default()
    };
    let (events, state) = drain(
        h.agent
            .start(&config, RunState::default(), ask("go"))
            .unwrap(),
    )
    .await;
    let Some(AgentEvent::Paused { pending }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(pending.len(), 1);
    assert!(pending[0].is_approval());
    assert_eq!(state.steps, 1);
    // The state survives a store: serialised and read back.
    let state: RunState = serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap();
    let resume = Input {
        decisions: vec![Decision {
            call_id: "g1".into(),
            verdict: Verdict::Approved,
        }],
        ..Input::default()
    };
    let (events, state) = drain(h.agent.start(&config, state, resume).unwrap()).await;
    assert_eq!(
        tool_results(&events),
        [("g1".to_owned(), "secret".to_owned())]
    );
    assert!(matches!(events.last(), Some(AgentEvent::Finished(_))));
    assert!(state.pending.is_empty());
    // Step 2 of 2 was the turn's last: tools were withheld, whatever the resume.
    let seen = h.llm.seen();
    assert!(seen[0].tools_offered);
    assert!(!seen[1].tools_offered);
}

#[tokio::test]
async fn resumed_calls_are_reported_as_each_finishes() {
    let h = harness(
        "",
        vec![
            Reply::Calls(vec![
                (
                    "slow".into(),
                    "echo".into(),
                    json!({"text": "slow", "guarded": true, "wait": true}).to_string(),
                ),
                (
                    "fast".into(),
                    "echo".into(),
                    json!({"text": "fast", "guarded": true}).to_string(),
                ),
            ]),
            Reply::Text("Both.".into()),
        ],
    );
    let config = RunConfig {
        approvals: ApprovalMode::Pause,
        can_pause: true,
        ..RunConfig::default()
    };
    let (_, state) = drain(
        h.agent
            .start(&config, RunState::default(), ask("go"))
            .unwrap(),
    )
    .await;
    let approve = |id: &str| Decision {
        call_id: id.into(),
        verdict: Verdict::Approved,
    };
    let resume = Input {
        decisions: vec![approve("slow"), approve("fast")],
        ..Input::default()
    };
    let mut run = h.agent.start(&config, state, resume).unwrap();
    // The fast call's result arrives while the slow one still waits at the gate.
    let first = tokio::time::timeout(Duration::from_secs(5), run.next())
        .await
        .unwrap();
    let Some(AgentEvent::ToolFinished(outcome)) = first else {
        panic!("{first:?}")
    };
    assert_eq!(outcome.call_id, "fast");
    h.gate.notify_one();
    let (events, state) = drain(run).await;
    assert_eq!(
        tool_results(&events),
        [("slow".to_owned(), "slow".to_owned())]
    );
    // The history keeps the model's order.
    let ids: Vec<&str> = state
        .messages
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(ids, ["slow", "fast"]);
}

#[tokio::test]
async fn denied_and_refused_calls_become_errors_the_model_reads() {
    let h = harness(
        "",
        vec![
            Reply::Calls(vec![
                (
                    "a".into(),
                    "echo".into(),
                    json!({"text": "a", "guarded": true}).to_string(),
                ),
                (
                    "b".into(),
                    "echo".into(),
                    json!({"text": "b", "guarded": true}).to_string(),
                ),
            ]),
            Reply::Text("ok".into()),
        ],
    );
    let config = RunConfig {
        approvals: ApprovalMode::Pause,
        can_pause: true,
        ..RunConfig::default()
    };
    let (_, state) = drain(
        h.agent
            .start(&config, RunState::default(), ask("go"))
            .unwrap(),
    )
    .await;
    let resume = Input {
        decisions: vec![
            Decision {
                call_id: "a".into(),
                verdict: Verdict::Denied {
                    feedback: Some("not now".into()),
                },
            },
            // A front door's refusal outranks the client's approval.
            Decision {
                call_id: "b".into(),
                verdict: Verdict::Approved,
            },
            Decision {
                call_id: "b".into(),
                verdict: Verdict::Refused {
                    reason: "token failed".into(),
                },
            },
        ],
        ..Input::default()
    };
    let (events, _) = drain(h.agent.start(&config, state, resume).unwrap()).await;
    let results = tool_results(&events);
    assert_eq!(
        results[0].1,
        "Error: Tool execution was denied by the user. User feedback: not now"
    );
    assert_eq!(results[1].1, "Error: token failed");
}

#[tokio::test]
async fn decisions_for_nothing_fail_as_bad_input() {
    let h = harness("", vec![Reply::Text("never asked".into())]);
    let input = Input {
        decisions: vec![Decision {
            call_id: "x".into(),
            verdict: Verdict::Approved,
        }],
        ..ask("go")
    };
    let (events, _) = drain(
        h.agent
            .start(&RunConfig::default(), RunState::default(), input)
            .unwrap(),
    )
    .await;
    let Some(AgentEvent::Failed(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(e.kind, RunErrorKind::BadInput);
    assert!(h.llm.seen().is_empty());
}

#[tokio::test]
async fn more_pending_calls_than_one_answer_makes_are_refused() {
    let h = harness("", vec![Reply::Text("never asked".into())]);
    let cap = h.agent.options.max_tool_calls_per_answer;
    let pending = (0..=cap)
        .map(|i| PendingCall {
            message_index: 0,
            call: crate::wire::ToolCall::new(format!("c{i}"), "echo".into(), "{}".into()),
            waits_for: Waiting::Frontend {
                arguments: Value::Null,
            },
        })
        .collect();
    let state = RunState {
        pending,
        ..RunState::default()
    };
    let Err(e) = h.agent.start(&RunConfig::default(), state, ask("go")) else {
        panic!("{} pending calls were accepted", cap + 1)
    };
    assert_eq!(e.kind, RunErrorKind::BadInput);
    assert!(e.message.contains("max_tool_calls_per_answer"), "{e}");
}

#[tokio::test]
async fn an_invalid_structured_answer_gets_one_repair_round() {
    let h = harness(
        "",
        vec![
            Reply::Text("It is healthy.".into()),
            Reply::Text("{\"healthy\": true}".into()),
        ],
    );
    let config = RunConfig {
        response_format: Some(
            json!({"type": "json_schema", "json_schema": {"name": "r", "schema": {
            "type": "object", "properties": {"healthy": {"type": "boolean"}}, "required": ["healthy"]}}}),
        ),
        ..RunConfig::default()
    };
    let (events, state) = drain(
        h.agent
            .start(&config, RunState::default(), ask("ok?"))
            .unwrap(),
    )
    .await;
    let Some(AgentEvent::Finished(answer)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(answer.text, "{\"healthy\": true}");
    assert!(answer.format.is_some_and(|f| f.repaired));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::MessageReplaced { .. }))
    );
    assert_eq!(
        state.messages.last().map(|m| m.text()),
        Some("{\"healthy\": true}".to_owned())
    );
    // The repair round saw the violations.
    assert!(
        h.llm.seen()[1]
            .messages
            .last()
            .unwrap()
            .text()
            .contains("does not match")
    );
}

#[tokio::test]
async fn a_frontend_call_with_arguments_off_its_schema_is_answered_to_the_model_not_paused() {
    let h = harness(
        "",
        vec![
            Reply::Calls(vec![(
                "f1".into(),
                "chart".into(),
                "{\"minutes\": \"ten\"}".into(),
            )]),
            Reply::Calls(vec![(
                "f2".into(),
                "chart".into(),
                "{\"minutes\": 10}".into(),
            )]),
        ],
    );
    let config = RunConfig {
        frontend_tools: vec![FrontendToolDefinition {
            name: "chart".into(),
            description: "draws".into(),
            parameters: Some(
                json!({"type": "object", "properties": {"minutes": {"type": "integer"}}, "required": ["minutes"]}),
            ),
            mode: FrontendToolMode::Pause,
            noop_response: None,
        }],
        can_pause: true,
        ..RunConfig::default()
    };
    let (events, _) = drain(
        h.agent
            .start(&config, RunState::default(), ask("chart"))
            .unwrap(),
    )
    .await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("/minutes"), "{}", results[0].1);
    let Some(AgentEvent::Paused { pending }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(pending[0].call.id, "f2");
    assert!(
        matches!(&pending[0].waits_for, Waiting::Frontend { arguments } if arguments["minutes"] == 10)
    );
}

#[tokio::test]
async fn a_long_history_is_compacted_before_the_call() {
    let extra =
        "[models.test.custom_args]\nmax_context_size = 8000\n[llm]\nmax_output_tokens = 500\n";
    let summary = || Reply::Text("<summary>earlier: pods crashed</summary>".into());
    let h = harness(
        extra,
        vec![
            summary(),
            summary(),
            summary(),
            Reply::Text("Answer.".into()),
        ],
    );
    let long = "word ".repeat(700);
    let messages = (0..10)
        .map(|i| {
            if i % 2 == 0 {
                crate::wire::Message::user(json!(long))
            } else {
                crate::wire::Message::assistant(Some(long.clone()), None, Vec::new())
            }
        })
        .collect();
    let state = RunState {
        messages,
        ..RunState::default()
    };
    let (events, state) = drain(
        h.agent
            .start(&RunConfig::default(), state, ask("and now?"))
            .unwrap(),
    )
    .await;
    let report = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Compacted(r) => Some(r),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{events:?}"));
    assert!(report.compacted_tokens < report.initial_tokens);
    // Too long for one summary request: summarised in chunks, each counted.
    assert!(report.summarization_requests >= 2, "{report:?}");
    assert!(matches!(events.last(), Some(AgentEvent::Finished(_))));
    assert!(state.messages.iter().all(|m| !m.text().contains(&long)));
    assert!(
        state
            .messages
            .iter()
            .any(|m| m.text().contains("pods crashed"))
    );
}

#[tokio::test]
async fn a_full_model_refuses_the_run_before_it_starts() {
    let h = harness("[llm]\nmax_concurrent_calls_per_model = 1\n", vec![]);
    let first = h
        .agent
        .start(&RunConfig::default(), RunState::default(), ask("a"))
        .unwrap();
    let refused = h
        .agent
        .start(&RunConfig::default(), RunState::default(), ask("b"));
    assert_eq!(
        refused.err().map(|e| e.kind),
        Some(RunErrorKind::Overloaded)
    );
    drop(first);
    assert!(
        h.agent
            .start(&RunConfig::default(), RunState::default(), ask("c"))
            .is_ok()
    );
}

#[tokio::test]
async fn a_provider_failure_fails_the_run_with_its_kind() {
    let h = harness("", vec![Reply::Fail("boom".into())]);
    let (events, _) = drain(
        h.agent
            .start(&RunConfig::default(), RunState::default(), ask("a"))
            .unwrap(),
    )
    .await;
    let Some(AgentEvent::Failed(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(e.kind, RunErrorKind::Provider);
    assert!(e.message.contains("boom"));
}
