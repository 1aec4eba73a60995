//! Assembles a streamed completion from its fragments: text, reasoning, tool calls (by index,
//! or by id for providers that send none), usage and finish reason.

use super::provider::{Completion, Fragment, ToolCallFragment};
use crate::wire::ToolCall;
use crate::wire::response::Usage;

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// How far ahead of the calls seen so far a tool-call `index` may point.
const MAX_INDEX_GAP: usize = 16;

#[derive(Debug, Default)]
pub(crate) struct Assembler {
    content: String,
    reasoning: String,
    calls: Vec<PartialCall>,
    thinking_blocks: Vec<serde_json::Value>,
    thinking_extra_len: usize,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

/// Appends one streamed piece, starting with room for a short answer: grown from the first
/// piece's size, a few hundred bytes took several reallocations.
fn append(to: &mut String, piece: &str) {
    if to.capacity() == 0 {
        to.reserve(piece.len().max(1024));
    }
    to.push_str(piece);
}

impl Assembler {
    pub fn push(&mut self, fragment: Fragment) -> Result<(), String> {
        match fragment {
            Fragment::Text(t) => append(&mut self.content, &t),
            Fragment::Reasoning(r) => append(&mut self.reasoning, &r),
            Fragment::ToolCall(call) => self.push_call(call)?,
            Fragment::ThinkingBlock(block) => {
                // The text streamed as reasoning; signatures and redacted data count here.
                self.thinking_extra_len += ["signature", "data"]
                    .iter()
                    .filter_map(|k| block.get(k).and_then(serde_json::Value::as_str))
                    .map(str::len)
                    .sum::<usize>();
                self.thinking_blocks.push(block);
            }
            Fragment::Usage(u) => self.usage = Some(u),
            Fragment::Finish(reason) => self.finish_reason = Some(reason),
        }
        Ok(())
    }

    fn push_call(&mut self, d: ToolCallFragment) -> Result<(), String> {
        // Without `index`, a new id starts a new call; the same id (or none) continues the
        // last one.
        let last = self.calls.len().checked_sub(1);
        let index = d.index.unwrap_or_else(|| match (&d.id, last) {
            (Some(id), Some(l)) if self.calls[l].id == *id => l,
            (Some(_), _) => self.calls.len(),
            (None, _) => last.unwrap_or(0),
        });
        // Indices count up from 0; a far jump would size a vector from untrusted input.
        if index > self.calls.len() + MAX_INDEX_GAP {
            return Err(format!("tool call index {index} is out of sequence"));
        }
        while self.calls.len() <= index {
            self.calls.push(PartialCall::default());
        }
        let call = &mut self.calls[index];
        if let Some(id) = d.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(name) = d.name {
            call.name.push_str(&name);
        }
        if let Some(args) = d.arguments {
            call.arguments.push_str(&args);
        }
        Ok(())
    }

    /// Bytes of answer received so far (content, reasoning, tool-call arguments).
    pub fn output_len(&self) -> usize {
        self.content.len()
            + self.reasoning.len()
            + self.thinking_extra_len
            + self
                .calls
                .iter()
                .map(|c| c.arguments.len() + c.name.len())
                .sum::<usize>()
    }

    pub fn finish(self) -> Completion {
        // Text started with room for a short answer (`append`): held only for what it is.
        let non_empty = |mut s: String| {
            s.shrink_to_fit();
            (!s.is_empty()).then_some(s)
        };
        let mut seen = std::collections::HashSet::new();
        Completion {
            content: non_empty(self.content),
            reasoning: non_empty(self.reasoning),
            tool_calls: self
                .calls
                .into_iter()
                .filter(|c| !c.name.is_empty())
                .map(|c| {
                    // Results, decisions and approval tokens find a call by its id: a missing
                    // or repeated one (some servers let the model write ids) gets a fresh id,
                    // or the user could approve one call and another would be signed and run.
                    let id = if c.id.is_empty() || !seen.insert(c.id.clone()) {
                        format!("call_{}", uuid::Uuid::new_v4().simple())
                    } else {
                        c.id
                    };
                    ToolCall::new(id, c.name, c.arguments)
                })
                .collect(),
            thinking_blocks: self.thinking_blocks,
            usage: self.usage,
            finish_reason: self.finish_reason,
            fallback: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(index: Option<usize>, id: Option<&str>, name: Option<&str>, args: &str) -> Fragment {
        Fragment::ToolCall(ToolCallFragment {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: Some(args.to_owned()),
        })
    }

    #[test]
    fn assembles_interleaved_tool_calls() {
        let mut a = Assembler::default();
        for f in [
            Fragment::Text("Let me ".into()),
            Fragment::Text("look.".into()),
            call(Some(0), Some("a"), Some("x"), ""),
            call(Some(1), Some("b"), Some("y"), "{\"q\""),
            call(Some(0), None, None, "{}"),
            call(Some(1), None, None, ":1}"),
            Fragment::Finish("tool_calls".into()),
        ] {
            a.push(f).unwrap();
        }
        let out = a.finish();
        assert_eq!(out.content.as_deref(), Some("Let me look."));
        assert_eq!(out.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(out.tool_calls.len(), 2);
        assert_eq!(out.tool_calls[1].function.arguments, "{\"q\":1}");
        assert_eq!(out.tool_calls[0].id, "a");
    }

    #[test]
    fn repeated_ids_are_replaced() {
        let mut a = Assembler::default();
        a.push(call(Some(0), Some("a"), Some("x"), "{}")).unwrap();
        a.push(call(Some(1), Some("a"), Some("y"), "{}")).unwrap();
        let out = a.finish();
        assert_eq!(out.tool_calls[0].id, "a");
        assert_ne!(out.tool_calls[1].id, "a");
        assert!(out.tool_calls[1].id.starts_with("call_"));
    }

    #[test]
    fn out_of_sequence_indices_are_errors_not_allocations() {
        let mut a = Assembler::default();
        let err = a
            .push(call(Some(1_000_000_000_000), None, Some("x"), ""))
            .unwrap_err();
        assert!(err.contains("out of sequence"));
    }

    #[test]
    fn calls_without_index_continue_by_id() {
        let mut a = Assembler::default();
        a.push(call(None, Some("a"), Some("x"), "{\"q\"")).unwrap();
        a.push(call(None, Some("a"), None, ":1}")).unwrap();
        a.push(call(None, Some("b"), Some("y"), "{}")).unwrap();
        let out = a.finish();
        assert_eq!(out.tool_calls.len(), 2);
        assert_eq!(out.tool_calls[0].function.arguments, "{\"q\":1}");
        assert_eq!(out.tool_calls[1].id, "b");
    }
}
