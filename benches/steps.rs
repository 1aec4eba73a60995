//! Agent steps per second with a zero-latency LLM and a no-op tool (issue 14's target:
//! ≥ 1,000 steps/s; the OpenHands agent server: 28). A step is one LLM call and, but for the
//! last, the tool call it asks for. Two surfaces:
//! - `core`: `Agent::start` on an in-process provider (the `scripted/…` model seam), events
//!   consumed and dropped: the agent loop alone (prompt, token ledger, tool execution, events).
//! - `service`: the same agent behind `Conversations` on a SQLite file: each conversation is
//!   created with its first message and runs in the background, and every event of every step
//!   is appended to the store before the conversation counts as finished.
//!
//! `cargo bench --bench steps` (about 25 s); `-- --secs N` changes each phase's length.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use uuid::Uuid;

use triage::agent::{
    Agent, AgentEvent, AgentOptions, CompactionOptions, ImageLimits, Input, RunConfig, RunState,
    UserMessage,
};
use triage::config::Settings;
use triage::conversations::Conversations;
use triage::conversations::api::{CreateConversation, SendMessage};
use triage::llm::{
    CompletionRequest, Fragment, Llm, LlmError, ModelRegistry, Provider, ToolCallFragment,
};
use triage::prompt::{PromptInputs, Prompts};
use triage::store::{Store, StoreOptions};
use triage::tools::{Tool, ToolContext, ToolOutput, ToolRegistry, Toolset};
use triage::wire::response::Usage;

/// Tool calls per run before the final answer: a run is `TOOL_STEPS + 1` LLM calls.
const TOOL_STEPS: usize = 10;
const QUESTION: &str = "Why is the api pod in namespace prod restarting every few minutes?";

/// Answers at once: a call of the no-op tool (with a new argument each time, so neither the
/// duplicate guard nor stuck detection fires) until the turn holds `TOOL_STEPS` results, then
/// a short text.
struct ZeroLatency;

impl Provider for ZeroLatency {
    fn stream<'a>(
        &'a self,
        request: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>> {
        let done = request
            .messages
            .iter()
            .rev()
            .take_while(|m| !m.is_role("user"))
            .filter(|m| m.is_role("tool"))
            .count();
        let usage = Fragment::Usage(Usage {
            prompt_tokens: 1000,
            completion_tokens: 20,
            total_tokens: 1020,
            ..Usage::default()
        });
        let fragments = if done < TOOL_STEPS && request.offers_tools() {
            vec![
                Ok(Fragment::ToolCall(ToolCallFragment {
                    index: Some(0),
                    id: Some(format!("call_{done}")),
                    name: Some("noop".into()),
                    arguments: Some(format!(r#"{{"step":{done}}}"#)),
                })),
                Ok(Fragment::Finish("tool_calls".into())),
                Ok(usage),
            ]
        } else {
            vec![
                Ok(Fragment::Text(
                    "The container is OOMKilled: raise its memory limit.".into(),
                )),
                Ok(Fragment::Finish("stop".into())),
                Ok(usage),
            ]
        };
        Box::pin(futures::stream::iter(fragments))
    }
}

struct Noop {
    schema: Value,
}

impl Tool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn toolset(&self) -> &str {
        "bench"
    }
    fn description(&self) -> &str {
        "does nothing"
    }
    fn parameters(&self) -> &Value {
        &self.schema
    }
    fn one_liner(&self, params: &Value) -> String {
        format!("noop {}", params["step"])
    }
    fn invoke<'a>(
        &'a self,
        _params: &'a Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { ToolOutput::success("ok") })
    }
}

fn agent() -> Arc<Agent> {
    let settings = Settings::from_toml(
        "[models.bench]\nmodel = \"scripted/bench\"\napi_base = \"http://scripted.invalid\"\n\
         [llm]\nmax_concurrent_calls_per_model = 10000\n",
    )
    .expect("bench settings");
    let provider: Arc<dyn Provider> = Arc::new(ZeroLatency);
    let noop = Noop {
        schema: json!({"type": "object", "properties": {"step": {"type": "integer"}}}),
    };
    Arc::new(Agent {
        models: Arc::new(ModelRegistry::from_settings(&settings).expect("models")),
        llm: Llm::new(
            provider.clone(),
            Duration::from_secs(5),
            Duration::from_secs(5),
        )
        .with_scripted(provider),
        prompts: Arc::new(Prompts::new(&PromptInputs::default(), None, None).expect("prompts")),
        tools: Arc::new(ToolRegistry::new(vec![Toolset::enabled(
            "bench",
            "",
            vec![Arc::new(noop)],
        )])),
        options: AgentOptions {
            max_steps: 40,
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
            threshold_pct: 95,
        },
        masker: Default::default(),
    })
}

fn config() -> RunConfig {
    RunConfig {
        max_steps: Some(TOOL_STEPS as u32 + 1),
        stuck_detection: true,
        ..RunConfig::default()
    }
}

/// One run on the core; its LLM calls, or why it did not finish.
async fn core_run(agent: &Arc<Agent>, config: &RunConfig) -> Result<u64, String> {
    let input = Input {
        message: Some(UserMessage {
            text: QUESTION.into(),
            images: Vec::new(),
        }),
        ..Input::default()
    };
    let mut run = agent
        .start(config, RunState::default(), input)
        .map_err(|e| e.message)?;
    let (mut finished, mut tools) = (false, 0);
    while let Some(event) = run.next().await {
        match event {
            AgentEvent::ToolFinished(_) => tools += 1,
            AgentEvent::Finished(_) => finished = true,
            AgentEvent::Failed(e) => return Err(e.message),
            _ => {}
        }
    }
    let state = run.take_state().ok_or("no state")?;
    if !finished || tools != TOOL_STEPS {
        return Err(format!(
            "the run ended after {tools} tool calls, answered: {finished}"
        ));
    }
    Ok(state.usage.totals().0)
}

/// Runs `one` in `concurrency` loops for `secs`; (steps/s, runs, errors).
async fn drive<F, Fut>(concurrency: usize, secs: f64, one: F) -> (f64, u64, u64)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<u64, String>> + Send,
{
    let steps = Arc::new(AtomicU64::new(0));
    let runs = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (one, steps, runs, errors) =
                (one.clone(), steps.clone(), runs.clone(), errors.clone());
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    match one().await {
                        Ok(n) => {
                            steps.fetch_add(n, Ordering::Relaxed);
                            runs.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            if errors.fetch_add(1, Ordering::Relaxed) == 0 {
                                eprintln!("first error: {e}");
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    (
        steps.load(Ordering::Relaxed) as f64 / elapsed,
        runs.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
    )
}

/// Tells each waiter its conversation's final status. The last event of a run is the
/// `conversation_state_update` appended after its state is saved; a conversation's events are
/// looked at only once it has as many as a finished run writes (`final_seq`, learnt from a
/// first run), so watching costs about one read per conversation. A sweep every second
/// catches a conversation that ended early (an error).
struct Finishes {
    waiting: Mutex<HashMap<Uuid, oneshot::Sender<String>>>,
    final_seq: AtomicU64,
}

impl Finishes {
    fn watch(store: Store) -> Arc<Finishes> {
        let finishes = Arc::new(Finishes {
            waiting: Mutex::default(),
            final_seq: AtomicU64::new(1),
        });
        let mut news = store.subscribe();
        let f = finishes.clone();
        tokio::spawn(async move {
            let mut sweep = tokio::time::interval(Duration::from_secs(1));
            loop {
                let check: Vec<Uuid> = tokio::select! {
                    note = news.recv() => match note {
                        Ok((id, seq)) => {
                            let watched = f.lock().contains_key(&id);
                            if watched && seq >= f.final_seq.load(Ordering::Relaxed) {
                                vec![id]
                            } else {
                                continue;
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            f.lock().keys().copied().collect()
                        }
                        Err(_) => return,
                    },
                    _ = sweep.tick() => f.lock().keys().copied().collect(),
                };
                for id in check {
                    // `idle` until the run starts (the first message is stored before).
                    if let Ok(Some(row)) = store.get(id).await
                        && !matches!(row.status.as_str(), "running" | "idle")
                        && let Some(tx) = f.lock().remove(&id)
                    {
                        let _ = tx.send(row.status.to_string());
                    }
                }
            }
        });
        finishes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, oneshot::Sender<String>>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn expect(&self, id: Uuid) -> oneshot::Receiver<String> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        rx
    }
}

/// One conversation through the service: created with its message, run in the background,
/// every event stored; its LLM calls once it is `finished`.
async fn service_run(
    conversations: &Arc<Conversations>,
    finishes: &Finishes,
) -> Result<u64, String> {
    let id = Uuid::new_v4();
    let done = finishes.expect(id);
    conversations
        .create(CreateConversation {
            id: Some(id),
            max_iterations: Some(TOOL_STEPS as u32 + 1),
            initial_message: Some(SendMessage {
                content: QUESTION.into(),
                images: None,
                run: Some(true),
            }),
            ..CreateConversation::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let status = tokio::time::timeout(Duration::from_secs(30), done)
        .await
        .map_err(|_| "not finished within 30 s".to_string())?
        .map_err(|_| "the watcher stopped".to_string())?;
    if status != "finished" {
        return Err(format!("conversation ended {status}"));
    }
    let info = conversations.info(id).await.map_err(|e| e.to_string())?;
    if info.stats.llm_calls != TOOL_STEPS as u64 + 1 {
        return Err(format!("{} LLM calls", info.stats.llm_calls));
    }
    Ok(info.stats.llm_calls)
}

fn main() {
    let secs: f64 = std::env::args()
        .skip_while(|a| a != "--secs")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4.0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let agent = agent();
        let config = Arc::new(config());
        // The first run pays for the lazy set-up (tokenizer, tool definitions' tokens).
        core_run(&agent, &config).await.expect("a first run");
        println!(
            "{TOOL_STEPS} tool calls + 1 answer per run = {} LLM calls (steps) per run, {secs} s per row",
            TOOL_STEPS + 1
        );
        println!("| surface | concurrent runs | steps/s | runs | errors |");
        println!("| --- | ---: | ---: | ---: | ---: |");
        for concurrency in [1, 16] {
            let (agent, config) = (agent.clone(), config.clone());
            let (rate, runs, errors) = drive(concurrency, secs, move || {
                let (agent, config) = (agent.clone(), config.clone());
                async move { core_run(&agent, &config).await }
            })
            .await;
            println!("| core (in-process) | {concurrency} | {rate:.0} | {runs} | {errors} |");
        }

        let dir = std::env::temp_dir().join(format!("triage-bench-steps-{}", Uuid::new_v4()));
        let url = format!("sqlite://{}", dir.join("triage.db").display());
        let store = Store::open(&url, StoreOptions::default())
            .await
            .expect("open the store");
        let conversations =
            Conversations::new(triage::agent::CurrentAgent::new(agent.clone()), store.clone(), 10_000, Duration::from_secs(10), false);
        let finishes = Finishes::watch(store.clone());
        // A first conversation tells how many events a finished run writes.
        service_run(&conversations, &finishes)
            .await
            .expect("a first conversation");
        let first = store
            .search(&triage::store::ConversationQuery {
                limit: 1,
                ..Default::default()
            })
            .await
            .expect("search");
        let final_seq = first.items.first().map_or(1, |r| r.last_event_id);
        finishes.final_seq.store(final_seq, Ordering::Relaxed);
        for concurrency in [1, 16, 64] {
            let (conversations, finishes) = (conversations.clone(), finishes.clone());
            let (rate, runs, errors) = drive(concurrency, secs, move || {
                let (conversations, finishes) = (conversations.clone(), finishes.clone());
                async move { service_run(&conversations, &finishes).await }
            })
            .await;
            println!(
                "| conversations service, SQLite | {concurrency} | {rate:.0} | {runs} | {errors} |"
            );
        }
        let stored = store.count(None).await.unwrap_or(0);
        println!(
            "({stored} conversations stored, {final_seq} events each; {:.0} MiB on disk)",
            dir_size(&dir) as f64 / 1048576.0
        );
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    });
}

fn dir_size(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
