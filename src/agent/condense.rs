//! A compaction asked for (`POST …/condense`), outside any run: the same summary as a run's
//! compaction, reported by the same events. A run keeps the question it is answering; here the
//! last exchange is kept whole when it was answered, so the history still reads question,
//! answer, and the next message follows an answer.

use std::sync::Arc;

use super::compaction::CompactionError;
use super::error::{RunError, RunErrorKind};
use super::event::AgentEvent;
use super::run::{Emitter, Live};
use super::{Agent, RunConfig, RunState};
use crate::wire::Message;

/// What a forced compaction did.
pub struct Condensed {
    /// The state to keep: compacted, or as it was (with the summary's usage counted).
    pub state: RunState,
    /// The compaction's events, for the log.
    pub events: Vec<AgentEvent>,
    /// Whether the history was replaced (a summary no smaller than the history is not kept).
    pub compacted: bool,
}

impl Agent {
    /// Summarises `state`'s history now, whatever its size. The caller makes sure no call
    /// waits for a result: a summary would drop the message that asked for it.
    pub async fn condense(
        &self,
        config: &RunConfig,
        state: RunState,
    ) -> Result<Condensed, RunError> {
        let setup = self.compile(config)?;
        let emit = Emitter::new(setup.masker.clone());
        let system = self.system_message(&setup, config);
        let mut live = Live::new(state, &setup, system, emit.clone(), Arc::default(), None);
        let tail = kept_after_summary(live.conv.messages());
        let compacted = match self.compact_and_report(&setup, &mut live, tail).await {
            Ok(compacted) => compacted,
            Err(CompactionError::Llm(e)) => return Err(self.llm_failure(&setup, &e)),
            Err(CompactionError::MessageTooLarge) => {
                return Err(RunError::new(
                    RunErrorKind::TooLarge,
                    CompactionError::MessageTooLarge.to_string(),
                ));
            }
            Err(e) => return Err(RunError::new(RunErrorKind::Provider, e.to_string())),
        };
        if compacted {
            // A smaller history may be worth compacting again later.
            live.state.compaction_gave_up = false;
        } else {
            emit.emit(AgentEvent::Notice(
                "The summary was not smaller than the conversation history: the history was kept."
                    .into(),
            ));
        }
        Ok(Condensed {
            events: emit.drain(),
            state: live.into_state(),
            compacted,
        })
    }
}

/// The last user message, and the answer that ended its turn when there is one.
fn kept_after_summary(messages: &[Message]) -> Vec<usize> {
    let Some(question) = messages.iter().rposition(|m| m.is_role("user")) else {
        return Vec::new();
    };
    let answer = messages[question + 1..]
        .iter()
        .rposition(|m| m.is_role("assistant") && m.tool_calls().is_empty())
        .map(|i| question + 1 + i);
    std::iter::once(question).chain(answer).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn user(text: &str) -> Message {
        Message::user(Value::String(text.into()))
    }

    fn answer(text: &str) -> Message {
        Message::assistant(Some(text.into()), None, Vec::new())
    }

    #[test]
    fn keeps_the_last_exchange_when_it_was_answered() {
        let call =
            crate::wire::ToolCall::new("c1".into(), "bash".into(), "{\"command\":\"ls\"}".into());
        let history = vec![
            Message::system("s"),
            user("q1"),
            answer("a1"),
            user("q2"),
            Message::assistant(None, None, vec![call]),
            Message::tool("c1", "bash", "out".into()),
            answer("a2"),
        ];
        assert_eq!(kept_after_summary(&history), [3, 6]);
        // Paused mid-turn: only the question, which the next run answers.
        assert_eq!(kept_after_summary(&history[..6]), [3]);
        assert!(kept_after_summary(&history[..1]).is_empty());
    }
}
