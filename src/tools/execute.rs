//! Running one tool call of the LLM: its arguments read, the tool found and run under a
//! timeout, the result described for the history and counted in the metrics.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;

use super::{ToolContext, ToolOutcome, ToolOutput, ToolRegistry, ToolStatus};
use crate::meters::Handles;
use crate::wire::ToolCall;

/// Runs one tool call of the LLM. Every failure (bad arguments, unknown tool, timeout, panic)
/// becomes an error result the model can read and recover from.
pub async fn execute(registry: &ToolRegistry, call: &ToolCall, ctx: &ToolContext) -> ToolOutcome {
    let arguments = parse_arguments(&call.function.arguments);
    execute_with(registry, call, arguments, ctx).await
}

/// `execute`, with the call's arguments already read (`tool_arguments`).
pub async fn execute_with(
    registry: &ToolRegistry,
    call: &ToolCall,
    arguments: Result<Value, String>,
    ctx: &ToolContext,
) -> ToolOutcome {
    let name = call.function.name.as_str();
    let started = Instant::now();
    let params = match arguments {
        Ok(p) => p,
        Err(msg) => {
            return finish(
                call,
                None,
                Value::Object(Default::default()),
                ToolOutput::error(msg),
                None,
            );
        }
    };
    let Some(tool) = registry.get(name) else {
        return finish(
            call,
            None,
            params,
            ToolOutput::error(format!(
                "Failed to find tool {name}: no tool of that name exists"
            )),
            None,
        );
    };
    let description = tool.one_liner(&params);
    let limit = tool.timeout();
    let run = AssertUnwindSafe(tool.invoke(&params, ctx)).catch_unwind();
    let output = match tokio::time::timeout(limit, run).await {
        Ok(Ok(output)) => output,
        Ok(Err(_panic)) => {
            tracing::error!(tool = name, "tool panicked");
            ToolOutput::error(format!("Tool call failed: {name} crashed"))
        }
        Err(_) => ToolOutput::error(format!(
            "Tool call failed: {name} did not finish within {:.1} s",
            limit.as_secs_f64()
        )),
    };
    let elapsed = started.elapsed();
    record_call(name, output.status, elapsed);
    finish(
        call,
        Some((tool.toolset(), description)),
        params,
        output,
        Some(elapsed),
    )
}

/// Counts a call of a registered tool (names are the registry's, so label values are bounded),
/// with handles kept per tool instead of built by the macros on every call.
fn record_call(name: &str, status: ToolStatus, elapsed: Duration) {
    static TOOLS: Handles<String, Arc<ToolMeters>> = Handles::new();
    let meters = TOOLS.get(name, || {
        Arc::new(ToolMeters {
            duration: metrics::histogram!("triage_tool_call_duration_seconds", "tool" => name.to_owned()),
            calls: Default::default(),
        })
    });
    meters.duration.record(elapsed.as_secs_f64());
    let (slot, label) = match status {
        ToolStatus::Success => (0, "success"),
        ToolStatus::Error => (1, "error"),
        ToolStatus::NoData => (2, "no_data"),
        ToolStatus::ApprovalRequired => (3, "approval_required"),
    };
    meters.calls[slot]
        .get_or_init(|| {
            metrics::counter!("triage_tool_calls_total", "tool" => name.to_owned(), "status" => label)
        })
        .increment(1);
}

/// One tool's call metrics; a status's counter is registered when a call first ends with it.
struct ToolMeters {
    duration: metrics::Histogram,
    calls: [OnceLock<metrics::Counter>; 4],
}

/// A result for a call that was answered without running a tool (denied, paused, canned).
pub fn executed_from(
    call: &ToolCall,
    toolset: &str,
    description: &str,
    output: ToolOutput,
) -> ToolOutcome {
    let params = parse_arguments(&call.function.arguments)
        .unwrap_or_else(|_| Value::Object(Default::default()));
    finish(
        call,
        Some((toolset, description.to_owned())),
        params,
        output,
        None,
    )
}

/// A call's arguments as its tool reads them, read from their text (`tool_arguments`).
pub fn parse_arguments(raw: &str) -> Result<Value, String> {
    tool_arguments(raw, serde_json::from_str(raw))
}

/// A call's arguments as its tool reads them, from their text and that text read as JSON: an
/// object (blank text is an empty one), or why they are not one.
pub fn tool_arguments(raw: &str, read: serde_json::Result<Value>) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match read {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("Invalid tool arguments: expected a JSON object".into()),
        Err(e) => Err(format!("Invalid tool arguments: not valid JSON ({e})")),
    }
}

fn finish(
    call: &ToolCall,
    tool: Option<(&str, String)>,
    params: Value,
    output: ToolOutput,
    elapsed: Option<Duration>,
) -> ToolOutcome {
    let name = call.function.name.clone();
    let content = message_content(&output);
    let (toolset, description) = match tool {
        Some((toolset, description)) => (
            (!toolset.is_empty()).then(|| toolset.to_owned()),
            description,
        ),
        None => (None, name.clone()),
    };
    ToolOutcome {
        call_id: call.id.clone(),
        tool_name: name,
        toolset,
        description,
        params,
        output,
        elapsed,
        content,
    }
}

/// What the LLM reads in the tool message.
fn message_content(output: &ToolOutput) -> String {
    match (output.status, &output.error) {
        (ToolStatus::Error, Some(err)) if output.data.is_empty() => format!("Error: {err}"),
        (ToolStatus::Error, Some(err)) => format!("Error: {err}\n\n{}", output.data),
        (ToolStatus::NoData, _) if output.data.is_empty() => "The tool returned no data.".into(),
        _ => output.data.clone(),
    }
}
