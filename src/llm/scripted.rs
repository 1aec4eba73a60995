//! An in-process provider that answers from a script, for models named `scripted/…`: the
//! agent's loop, resume, compaction and structured-output repair are tested without HTTP.

use std::collections::VecDeque;
use std::sync::Mutex;

use futures::stream::BoxStream;

use super::error::LlmError;
use super::provider::{CompletionRequest, Fragment, Provider, ToolCallFragment};
use crate::wire::Message;
use crate::wire::response::Usage;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Text(String),
    /// Tool calls: (id, name, arguments).
    Calls(Vec<(String, String, String)>),
    /// The call fails with this error message (as a provider 500 would).
    Fail(String),
}

/// What the provider was asked: the messages and whether tools were offered.
#[derive(Debug, Clone)]
pub struct Seen {
    pub messages: Vec<Message>,
    pub tools_offered: bool,
}

#[derive(Default)]
pub struct ScriptedProvider {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
}

impl ScriptedProvider {
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> ScriptedProvider {
        ScriptedProvider {
            replies: Mutex::new(replies.into_iter().collect()),
            seen: Mutex::default(),
        }
    }

    pub fn push(&self, reply: Reply) {
        lock(&self.replies).push_back(reply);
    }

    /// Every request made so far.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Provider for ScriptedProvider {
    fn stream<'a>(
        &'a self,
        request: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>> {
        lock(&self.seen).push(Seen {
            messages: request.messages.to_vec(),
            tools_offered: request.offers_tools(),
        });
        let reply = lock(&self.replies).pop_front();
        let usage = Fragment::Usage(Usage {
            prompt_tokens: 100,
            completion_tokens: 10,
            total_tokens: 110,
            ..Usage::default()
        });
        let fragments: Vec<Result<Fragment, LlmError>> = match reply {
            None => vec![Err(LlmError::Protocol(
                "the script has no more answers".into(),
            ))],
            Some(Reply::Fail(message)) => vec![Err(LlmError::Upstream {
                status: 500,
                message,
                retry_after: None,
            })],
            Some(Reply::Text(text)) => {
                // Two pieces, so text deltas are seen arriving in parts.
                let mid = text.char_indices().nth(text.chars().count() / 2);
                let (a, b) = text.split_at(mid.map_or(0, |(i, _)| i));
                vec![
                    Ok(Fragment::Text(a.to_owned())),
                    Ok(Fragment::Text(b.to_owned())),
                    Ok(Fragment::Finish("stop".into())),
                    Ok(usage),
                ]
            }
            Some(Reply::Calls(calls)) => calls
                .into_iter()
                .enumerate()
                .map(|(index, (id, name, arguments))| {
                    Ok(Fragment::ToolCall(ToolCallFragment {
                        index: Some(index),
                        id: Some(id),
                        name: Some(name),
                        arguments: Some(arguments),
                    }))
                })
                .chain([Ok(Fragment::Finish("tool_calls".into())), Ok(usage)])
                .collect(),
        };
        Box::pin(futures::stream::iter(fragments))
    }
}
