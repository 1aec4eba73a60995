//! `investigate`: one stateless run, as `POST /api/chat` without streaming makes it (approvals
//! refused: nobody can approve within one tool call), its tool calls reported as progress
//! notifications when the client sent a progress token. The run is dropped — its LLM request
//! and tool processes stopped — when the client cancels the request or goes away
//! (rmcp cancels the request's token either way), and at the request deadline.

use futures::StreamExt;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};

use super::tools::{INVESTIGATE, InvestigateArgs};
use super::{Caller, Doors, arguments};
use crate::context::tokens::count_off_workers;
use crate::holmes::{ChatRun, RequestMeta};
use crate::wire::events::ToolCallResult;
use crate::wire::events::ToolStatus;
use crate::wire::{ChatRequest, StreamEvent};

/// Longest tool description a progress message quotes, in characters.
const DESCRIPTION_CHARS: usize = 200;

pub(super) async fn call(
    doors: &Doors,
    args: JsonObject,
    context: &RequestContext<RoleServer>,
    caller: Caller,
) -> Result<CallToolResult, String> {
    let args: InvestigateArgs = arguments::read(INVESTIGATE, args)?;
    arguments::non_empty(INVESTIGATE, "question", &args.question)?;
    let size = args.question.len();
    let request = ChatRequest {
        ask: args.question,
        model: args.model,
        ..ChatRequest::default()
    };
    let meta = RequestMeta {
        request_id: caller.request_id,
        headers: caller.headers,
    };
    // Starting counts the question's tokens: a large one goes to the blocking pool.
    let chat = doors.chat.clone();
    let run = count_off_workers(size, move || chat.start(request, meta))
        .await
        .map_err(|e| format!("{INVESTIGATE}: preparing the run failed: {e}"))?
        .map_err(|e| format!("{INVESTIGATE}: {}", e.message))?;
    let progress = Progress {
        token: context.meta.get_progress_token(),
        peer: context.peer.clone(),
        sent: 0,
    };
    let deadline = doors.deadline;
    tokio::select! {
        biased;
        // Nobody reads this answer: the point is that `follow`, and the run with it, is dropped.
        () = context.ct.cancelled() => Err(format!("{INVESTIGATE}: cancelled")),
        answer = tokio::time::timeout(deadline, follow(run, progress)) => match answer {
            Ok(answer) => answer.map(|text| CallToolResult::success(vec![ContentBlock::text(text)])),
            Err(_) => Err(format!(
                "{INVESTIGATE}: the investigation exceeded the server's deadline of {} s \
                 (server.request_deadline_secs); ask a narrower question, or use \
                 start_conversation for a long investigation",
                deadline.as_secs_f64()
            )),
        },
    }
}

/// Reads the run to its end: the answer, or why there is none.
async fn follow(mut run: ChatRun, mut progress: Progress) -> Result<String, String> {
    while let Some(frame) = run.next().await {
        match frame {
            StreamEvent::StartToolCalling(start) => {
                progress.send(format!("running {}", start.tool_name)).await;
            }
            StreamEvent::ToolCallingResult(result) => progress.send(finished(&result)).await,
            StreamEvent::AnswerEnd(end) => return Ok(end.analysis),
            StreamEvent::Error(error) => {
                return Err(format!(
                    "{INVESTIGATE}: the investigation failed: {}",
                    error.description
                ));
            }
            // Approvals are refused in a stateless run: the core never pauses one.
            StreamEvent::ApprovalRequired(_) => {
                return Err(format!(
                    "{INVESTIGATE}: the investigation paused for an approval, which one call \
                     cannot give; use start_conversation"
                ));
            }
            _ => {}
        }
    }
    Err(format!(
        "{INVESTIGATE}: the agent stopped without an answer"
    ))
}

/// A finished call in a few words: the tool, how it went and what it ran (already masked,
/// as every event is).
fn finished(result: &ToolCallResult) -> String {
    let how = match result.result.status {
        ToolStatus::Success => "done",
        ToolStatus::NoData => "no data",
        ToolStatus::Error => "failed",
        ToolStatus::ApprovalRequired => "refused (needs approval)",
    };
    let mut description: String = result.description.chars().take(DESCRIPTION_CHARS).collect();
    if description.len() < result.description.len() {
        description.push('…');
    }
    if description.is_empty() {
        format!("{}: {how}", result.tool_name)
    } else {
        format!("{}: {how} — {description}", result.tool_name)
    }
}

/// Progress notifications for the request, when its client asked for them.
struct Progress {
    token: Option<ProgressToken>,
    peer: Peer<RoleServer>,
    sent: u32,
}

impl Progress {
    async fn send(&mut self, message: String) {
        let Some(token) = &self.token else {
            return;
        };
        self.sent += 1;
        let mut note = ProgressNotificationParam::new(token.clone(), f64::from(self.sent));
        note.message = Some(message);
        // A client that went away is noticed by the request's cancellation, not here.
        if let Err(e) = self.peer.notify_progress(note).await {
            tracing::debug!(error = %e, "progress notification not sent");
        }
    }
}
