//! One chunk of an OpenAI streaming answer, read into provider-neutral fragments.

use serde::Deserialize;

use super::provider::{Fragment, ToolCallFragment};
use crate::wire::response::Usage;

#[derive(Debug, Deserialize)]
pub(super) struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
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

impl Chunk {
    /// Appends the chunk's fragments to `out` (one buffer for a whole stream); an `error`
    /// object inside the stream is returned as its message.
    pub fn into_fragments(self, out: &mut Vec<Fragment>) -> Result<(), String> {
        if let Some(err) = self.error {
            let msg = err
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
                .unwrap_or_else(|| err.to_string());
            return Err(msg);
        }
        for choice in self.choices {
            if let Some(delta) = choice.delta.or(choice.message) {
                if let Some(c) = delta.content.filter(|c| !c.is_empty()) {
                    out.push(Fragment::Text(c));
                }
                if let Some(r) = delta.reasoning_content.or(delta.reasoning) {
                    out.push(Fragment::Reasoning(r));
                }
                for d in delta.tool_calls.unwrap_or_default() {
                    let (name, arguments) = match d.function {
                        Some(f) => (f.name, f.arguments),
                        None => (None, None),
                    };
                    out.push(Fragment::ToolCall(ToolCallFragment {
                        index: d.index,
                        id: d.id,
                        name,
                        arguments,
                    }));
                }
            }
            if let Some(reason) = choice.finish_reason {
                out.push(Fragment::Finish(reason));
            }
        }
        if let Some(u) = self.usage {
            out.push(Fragment::Usage(Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                total_tokens: u
                    .total_tokens
                    .unwrap_or(u.prompt_tokens + u.completion_tokens),
                ..Usage::default()
            }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::assemble::Assembler;

    fn push(a: &mut Assembler, json: &str) {
        let chunk: Chunk = serde_json::from_str(json).unwrap();
        let mut fragments = Vec::new();
        chunk.into_fragments(&mut fragments).unwrap();
        for f in fragments {
            a.push(f).unwrap();
        }
    }

    #[test]
    fn assembles_openai_chunks() {
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
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        );
        push(
            &mut a,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        );
        push(
            &mut a,
            r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}"#,
        );
        let out = a.finish();
        assert_eq!(out.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(out.usage.unwrap().total_tokens, 15);
        assert_eq!(out.content.as_deref(), Some("Let me look."));
        assert_eq!(out.tool_calls[0].function.arguments, "{}");
    }

    #[test]
    fn every_choice_of_a_chunk_counts() {
        let mut a = Assembler::default();
        push(
            &mut a,
            r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}},{"delta":{"content":"c"},"finish_reason":"stop"}]}"#,
        );
        let out = a.finish();
        assert_eq!(out.content.as_deref(), Some("abc"));
        assert_eq!(out.finish_reason.as_deref(), Some("stop"));
        assert!(serde_json::from_str::<Chunk>(r#"{"choices":null}"#).is_err());
        assert!(serde_json::from_str::<Chunk>(r#"{"choices":{}}"#).is_err());
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
        let chunk: Chunk = serde_json::from_str(r#"{"error":{"message":"overloaded"}}"#).unwrap();
        assert_eq!(
            chunk.into_fragments(&mut Vec::new()).unwrap_err(),
            "overloaded"
        );
    }
}
