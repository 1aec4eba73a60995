//! Assembles an OpenAI streaming answer from its chunks: content, reasoning and tool-call
//! deltas (by index), finish reason and usage.

use serde::Deserialize;

use crate::wire::ToolCall;
use crate::wire::response::Usage;

#[derive(Debug, Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

impl Chunk {
    /// The answer text this chunk adds (joined over choices, as the assembler joins them).
    pub fn content_delta(&self) -> Option<String> {
        let text: String = self
            .choices
            .iter()
            .filter_map(|c| c.delta.as_ref().or(c.message.as_ref()))
            .filter_map(|d| d.content.as_deref())
            .collect();
        (!text.is_empty()).then_some(text)
    }
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    /// Non-streaming servers that ignore `stream:true` answer with a whole message.
    #[serde(default)]
    message: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// vLLM and Ollama name it `reasoning`.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
}

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
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

pub(crate) struct Assembled {
    pub content: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCall>,
}

impl Assembler {
    /// Folds one chunk in; an `error` object inside the stream is returned as its message.
    pub fn push(&mut self, chunk: Chunk) -> Result<(), String> {
        if let Some(err) = chunk.error {
            let msg = err
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
                .unwrap_or_else(|| err.to_string());
            return Err(msg);
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                total_tokens: u
                    .total_tokens
                    .unwrap_or(u.prompt_tokens + u.completion_tokens),
            });
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta.or(choice.message) {
                self.push_delta(delta)?;
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Ok(())
    }

    fn push_delta(&mut self, delta: Delta) -> Result<(), String> {
        if let Some(c) = delta.content {
            self.content.push_str(&c);
        }
        if let Some(r) = delta.reasoning_content.or(delta.reasoning) {
            self.reasoning.push_str(&r);
        }
        for d in delta.tool_calls.unwrap_or_default() {
            // Servers that omit `index` send one call at a time: a new id starts a new call,
            // the same id (or none) continues the last one.
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
            if let Some(f) = d.function {
                if let Some(name) = f.name {
                    call.name.push_str(&name);
                }
                if let Some(args) = f.arguments {
                    call.arguments.push_str(&args);
                }
            }
        }
        Ok(())
    }

    /// Bytes of answer received so far (content, reasoning, tool-call arguments).
    pub fn output_len(&self) -> usize {
        self.content.len()
            + self.reasoning.len()
            + self
                .calls
                .iter()
                .map(|c| c.arguments.len() + c.name.len())
                .sum::<usize>()
    }

    pub fn has_output(&self) -> bool {
        !self.content.is_empty() || !self.reasoning.is_empty() || !self.calls.is_empty()
    }

    pub fn finish(self) -> Assembled {
        let non_empty = |s: String| (!s.is_empty()).then_some(s);
        Assembled {
            content: non_empty(self.content),
            reasoning: non_empty(self.reasoning),
            tool_calls: self
                .calls
                .into_iter()
                .filter(|c| !c.name.is_empty())
                .map(|c| {
                    let id = if c.id.is_empty() {
                        format!("call_{}", uuid::Uuid::new_v4().simple())
                    } else {
                        c.id
                    };
                    ToolCall::new(id, c.name, c.arguments)
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(a: &mut Assembler, json: &str) {
        a.push(serde_json::from_str(json).unwrap()).unwrap();
    }

    #[test]
    fn assembles_interleaved_tool_calls() {
        let mut a = Assembler::default();
        push(
            &mut a,
            r#"{"choices":[{"delta":{"role":"assistant","content":"Let me "}}]}"#,
        );
        push(&mut a, r#"{"choices":[{"delta":{"content":"look."}}]}"#);
        push(
            &mut a,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"x","arguments":""}}]}}]}"#,
        );
        push(
            &mut a,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"y","arguments":"{\"q\""}}]}}]}"#,
        );
        push(
            &mut a,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        );
        push(
            &mut a,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":":1}"}}]}}]}"#,
        );
        push(
            &mut a,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        );
        push(
            &mut a,
            r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}"#,
        );
        assert_eq!(a.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(a.usage.unwrap().total_tokens, 15);
        let out = a.finish();
        assert_eq!(out.content.as_deref(), Some("Let me look."));
        assert_eq!(out.tool_calls.len(), 2);
        assert_eq!(out.tool_calls[1].function.arguments, "{\"q\":1}");
        assert_eq!(out.tool_calls[0].id, "a");
    }

    #[test]
    fn out_of_sequence_indices_are_errors_not_allocations() {
        let mut a = Assembler::default();
        let chunk: Chunk = serde_json::from_str(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1000000000000,"function":{"name":"x"}}]}}]}"#,
        )
        .unwrap();
        assert!(a.push(chunk).unwrap_err().contains("out of sequence"));
    }

    #[test]
    fn calls_without_index_continue_by_id() {
        let mut a = Assembler::default();
        push(
            &mut a,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{\"q\""}}]}}]}"#,
        );
        push(
            &mut a,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"arguments":":1}"}}]}}]}"#,
        );
        push(
            &mut a,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y","arguments":"{}"}}]}}]}"#,
        );
        let out = a.finish();
        assert_eq!(out.tool_calls.len(), 2);
        assert_eq!(out.tool_calls[0].function.arguments, "{\"q\":1}");
        assert_eq!(out.tool_calls[1].id, "b");
    }

    #[test]
    fn reasoning_under_either_name() {
        let mut a = Assembler::default();
        push(
            &mut a,
            r#"{"choices":[{"delta":{"reasoning_content":"hm "}}]}"#,
        );
        push(&mut a, r#"{"choices":[{"delta":{"reasoning":"ok"}}]}"#);
        assert_eq!(a.finish().reasoning.as_deref(), Some("hm ok"));
    }

    #[test]
    fn error_objects_in_the_stream_are_errors() {
        let mut a = Assembler::default();
        let chunk: Chunk = serde_json::from_str(r#"{"error":{"message":"overloaded"}}"#).unwrap();
        assert_eq!(a.push(chunk).unwrap_err(), "overloaded");
    }
}
