//! Gemini's streamed answer (`streamGenerateContent?alt=sse`: each event a whole
//! `GenerateContentResponse` holding the next parts) read into fragments: text, thought parts
//! as reasoning, `functionCall` parts as whole calls, thought signatures kept as thinking blocks
//! (sent back unchanged, as Gemini requires), `usageMetadata` as usage, `finishReason` as the
//! finish — a blocked answer (SAFETY, RECITATION, …) or prompt is an error naming the reason.

use serde_json::{Value, json};

use super::contents::{LOCAL_ID_PREFIX, SIGNATURE_BLOCK};
use crate::llm::Transport;
use crate::llm::answer::AnswerReader;
use crate::llm::error::LlmError;
use crate::llm::provider::{Fragment, ToolCallFragment};
use crate::wire::response::Usage;

impl AnswerReader for AnswerStream {
    type Event = String;

    fn events(
        transport: &Transport,
        response: reqwest::Response,
    ) -> futures::stream::BoxStream<'static, Result<String, LlmError>> {
        transport.sse_data(response)
    }

    fn push(&mut self, data: String) -> Result<Vec<Fragment>, LlmError> {
        if data.is_empty() {
            return Ok(Vec::new());
        }
        AnswerStream::push(self, &data)
    }

    /// Usage may follow the finish reason: the stream is read to its end.
    fn finish(self) -> Option<Vec<Fragment>> {
        self.is_complete().then(|| self.closing())
    }
}

#[derive(Default)]
pub struct AnswerStream {
    calls: usize,
    saw_text: bool,
    usage: Option<Usage>,
    finish: Option<String>,
}

impl AnswerStream {
    /// A finish reason was received: the answer is whole once the stream ends.
    pub fn is_complete(&self) -> bool {
        self.finish.is_some()
    }

    /// The fragments that close a complete answer: usage, then the finish.
    fn closing(self) -> Vec<Fragment> {
        let mut out: Vec<Fragment> = self.usage.map(Fragment::Usage).into_iter().collect();
        let reason = match self.finish.as_deref() {
            Some("MAX_TOKENS") => "length",
            _ if self.calls > 0 => "tool_calls",
            _ => "stop",
        };
        out.push(Fragment::Finish(reason.into()));
        out
    }

    pub fn push(&mut self, data: &str) -> Result<Vec<Fragment>, LlmError> {
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::Protocol(format!(
                "malformed event ({e}): {}",
                data.chars().take(200).collect::<String>()
            ))
        })?;
        if let Some(error) = chunk.get("error") {
            return Err(stream_error(error));
        }
        if let Some(reason) = chunk
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            return Err(blocked(&format!("Gemini blocked the prompt ({reason})")));
        }
        if let Some(usage) = chunk.get("usageMetadata") {
            self.usage = Some(read_usage(usage));
        }
        let mut out = Vec::new();
        let Some(candidate) = chunk.pointer("/candidates/0") else {
            return Ok(out);
        };
        for part in candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let signature = part.get("thoughtSignature").and_then(Value::as_str);
            if let Some(call) = part.get("functionCall") {
                let index = self.calls;
                self.calls += 1;
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty())
                    .map_or_else(
                        || format!("{LOCAL_ID_PREFIX}{}", uuid::Uuid::new_v4().simple()),
                        str::to_owned,
                    );
                let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
                out.push(Fragment::ToolCall(ToolCallFragment {
                    index: Some(index),
                    id: Some(id),
                    name: Some(
                        call.get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .into(),
                    ),
                    arguments: Some(args.to_string()),
                }));
                if let Some(sig) = signature {
                    out.push(Fragment::ThinkingBlock(json!({
                        "type": SIGNATURE_BLOCK, "part": "call", "call": index, "signature": sig,
                    })));
                }
                continue;
            }
            let Some(text) = part.get("text").and_then(Value::as_str) else {
                continue;
            };
            if part.get("thought") == Some(&Value::Bool(true)) {
                if !text.is_empty() {
                    out.push(Fragment::Reasoning(text.to_owned()));
                }
                continue;
            }
            if let Some(sig) = signature.filter(|_| !self.saw_text) {
                out.push(Fragment::ThinkingBlock(json!({
                    "type": SIGNATURE_BLOCK, "part": "text", "signature": sig,
                })));
            }
            if !text.is_empty() {
                self.saw_text = true;
                out.push(Fragment::Text(text.to_owned()));
            }
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            match reason {
                "STOP" | "MAX_TOKENS" | "FINISH_REASON_UNSPECIFIED" => {
                    self.finish = Some(reason.to_owned());
                }
                "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" => {
                    // The model's own slip: another attempt usually succeeds.
                    return Err(LlmError::Upstream {
                        status: 500,
                        message: format!("Gemini ended the answer with {reason}"),
                        retry_after: None,
                    });
                }
                other => {
                    return Err(blocked(&format!(
                        "Gemini stopped the answer: finishReason {other} (its safety or \
                         recitation filters blocked it)"
                    )));
                }
            }
        }
        Ok(out)
    }
}

/// An answer the provider refused to give: not worth retrying.
fn blocked(message: &str) -> LlmError {
    LlmError::Upstream {
        status: 200,
        message: message.to_owned(),
        retry_after: None,
    }
}

/// Gemini's `promptTokenCount` includes the cached tokens; thoughts are billed as output.
fn read_usage(usage: &Value) -> Usage {
    let get = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
    let prompt = get("promptTokenCount") + get("toolUsePromptTokenCount");
    let completion = get("candidatesTokenCount") + get("thoughtsTokenCount");
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        cache_read_input_tokens: get("cachedContentTokenCount"),
        cache_creation_input_tokens: 0,
    }
}

/// An error object in the stream: `{code, message, status}`.
fn stream_error(error: &Value) -> LlmError {
    let code = error.get("code").and_then(Value::as_u64).unwrap_or(500) as u16;
    let status = error
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("ERROR");
    let message = format!(
        "{status}: {}",
        error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the provider reported an error")
    );
    if code == 429 {
        return LlmError::RateLimited {
            message,
            retry_after: crate::llm::error::retry_info(error),
        };
    }
    LlmError::Upstream {
        status: code,
        message,
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_become_fragments_with_signatures_and_usage() {
        let mut s = AnswerStream::default();
        let f = s
            .push(r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"hmm","thought":true},{"text":"Hi","thoughtSignature":"S1"}]}}]}"#)
            .unwrap();
        assert_eq!(f[0], Fragment::Reasoning("hmm".into()));
        assert!(
            matches!(&f[1], Fragment::ThinkingBlock(b) if b["part"] == "text" && b["signature"] == "S1")
        );
        assert_eq!(f[2], Fragment::Text("Hi".into()));
        let f = s
            .push(r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"bash","args":{"c":"ls"}},"thoughtSignature":"S2"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":7,"thoughtsTokenCount":30}}"#)
            .unwrap();
        let Fragment::ToolCall(call) = &f[0] else {
            panic!("{f:?}")
        };
        assert!(call.id.as_deref().unwrap().starts_with(LOCAL_ID_PREFIX));
        assert_eq!(call.arguments.as_deref(), Some(r#"{"c":"ls"}"#));
        assert!(matches!(&f[1], Fragment::ThinkingBlock(b) if b["call"] == 0));
        assert!(s.is_complete());
        let end = s.closing();
        let Fragment::Usage(u) = &end[0] else {
            panic!()
        };
        assert_eq!(
            (
                u.prompt_tokens,
                u.completion_tokens,
                u.cache_read_input_tokens
            ),
            (100, 37, 60)
        );
        assert_eq!(end[1], Fragment::Finish("tool_calls".into()));
    }

    #[test]
    fn blocked_answers_and_stream_errors_are_errors() {
        let mut s = AnswerStream::default();
        let e = s
            .push(r#"{"candidates":[{"finishReason":"SAFETY"}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("SAFETY") && !e.is_retryable(), "{e}");
        let e = AnswerStream::default()
            .push(r#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}"#)
            .unwrap_err();
        assert!(e.is_rate_limit());
        assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(2)));
    }
}
