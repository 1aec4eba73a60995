//! `Llm`: picks the provider of a model, bounds each call (a call slot, a deadline, the
//! answer's size) and assembles the fragments into a completion.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::OwnedSemaphorePermit;

use super::assemble::Assembler;
use super::error::LlmError;
use super::model::{Api, ModelConfig};
use super::provider::{AnsweredByFallback, Completion, CompletionRequest, Fragment, Provider};
use crate::meters::Handles;

/// The providers, chosen per model, and the bounds every call gets.
pub struct Llm {
    openai: Arc<dyn Provider>,
    /// The Messages API, for `anthropic/…` models.
    anthropic: Option<Arc<dyn Provider>>,
    /// Gemini's generateContent, for `gemini/…` and `vertex_ai/gemini-…` models.
    gemini: Option<Arc<dyn Provider>>,
    /// ConverseStream, for `bedrock/…` models.
    bedrock: Option<Arc<dyn Provider>>,
    /// In-process scripted answers for models named `scripted/…` (tests of the agent).
    scripted: Option<Arc<dyn Provider>>,
    /// A whole call, retries included (llm.request_timeout_secs).
    request_timeout: Duration,
    /// How long a call waits for one of the model's slots.
    slot_wait: Duration,
}

pub const SCRIPTED_PREFIX: &str = "scripted/";

impl Llm {
    pub fn new(openai: Arc<dyn Provider>, request_timeout: Duration, slot_wait: Duration) -> Llm {
        Llm {
            openai,
            anthropic: None,
            gemini: None,
            bedrock: None,
            scripted: None,
            request_timeout,
            slot_wait,
        }
    }

    pub fn with_scripted(mut self, provider: Arc<dyn Provider>) -> Llm {
        self.scripted = Some(provider);
        self
    }

    pub fn with_anthropic(mut self, provider: Arc<dyn Provider>) -> Llm {
        self.anthropic = Some(provider);
        self
    }

    pub fn with_gemini(mut self, provider: Arc<dyn Provider>) -> Llm {
        self.gemini = Some(provider);
        self
    }

    pub fn with_bedrock(mut self, provider: Arc<dyn Provider>) -> Llm {
        self.bedrock = Some(provider);
        self
    }

    fn provider(&self, model: &ModelConfig) -> Result<&dyn Provider, LlmError> {
        let missing = |provider: &str| {
            LlmError::Protocol(format!(
                "model '{}' needs the {provider} provider, which this process was built without",
                model.key
            ))
        };
        match (&self.scripted, model.api) {
            (Some(scripted), _) if model.model_id.starts_with(SCRIPTED_PREFIX) => {
                Ok(scripted.as_ref())
            }
            (_, Api::OpenAiChat) => Ok(self.openai.as_ref()),
            (_, Api::AnthropicMessages) => self
                .anthropic
                .as_deref()
                .ok_or_else(|| missing("Anthropic")),
            (_, Api::GeminiGenerate) => self.gemini.as_deref().ok_or_else(|| missing("Gemini")),
            (_, Api::BedrockConverse) => self.bedrock.as_deref().ok_or_else(|| missing("Bedrock")),
        }
    }

    /// One completion. `slot` is a call slot the caller reserved earlier (else one is waited
    /// for, boundedly); `on_text` receives each piece of answer text as it arrives. When the
    /// model's provider is out before it sent anything, the model's `fallbacks` are tried in
    /// order; the completion then names the one that answered.
    pub async fn complete(
        &self,
        request: &CompletionRequest<'_>,
        slot: Option<OwnedSemaphorePermit>,
        mut on_text: impl FnMut(&str) + Send,
    ) -> Result<Completion, LlmError> {
        let (mut error, output_seen) = match self.complete_one(request, slot, &mut on_text).await {
            Ok(completion) => return Ok(completion),
            Err(failed) => failed,
        };
        if output_seen {
            return Err(error);
        }
        for fallback in &request.model.fallbacks {
            if !super::fallbacks::is_outage(&error) {
                break;
            }
            tracing::warn!(
                model = %request.model.key, fallback = %fallback.key, error = %error,
                "model unavailable: moving to its fallback"
            );
            let moved = CompletionRequest {
                model: fallback,
                messages: request.messages,
                tools: request.tools,
                allow_tool_calls: request.allow_tool_calls,
                response_format: request.response_format,
            };
            match self.complete_one(&moved, None, &mut on_text).await {
                Ok(mut completion) => {
                    completion.fallback = Some(AnsweredByFallback {
                        model: fallback.clone(),
                        reason: error.to_string(),
                    });
                    return Ok(completion);
                }
                Err((next, true)) => return Err(next),
                Err((next, false)) => error = next,
            }
        }
        Err(error)
    }

    /// One model's answer; on failure, the error and whether anything had arrived (then no
    /// fallback may answer instead: the client may have seen part of this one).
    async fn complete_one(
        &self,
        request: &CompletionRequest<'_>,
        slot: Option<OwnedSemaphorePermit>,
        on_text: &mut (impl FnMut(&str) + Send),
    ) -> Result<Completion, (LlmError, bool)> {
        let model = request.model;
        let _slot = match slot {
            Some(permit) => permit,
            None => model
                .reserve_slot_within(self.slot_wait)
                .await
                .ok_or_else(|| (LlmError::Overloaded(model.key.clone()), false))?,
        };
        let started = Instant::now();
        let mut output_seen = false;
        let call = async {
            // A runaway answer (a server that never stops) is cut at twice the output budget;
            // four bytes a token is a generous estimate that needs no tokenizer here.
            let cap_bytes = (model.max_output_tokens as usize)
                .saturating_mul(8)
                .max(64 * 1024);
            let mut fragments = self.provider(model)?.stream(request);
            let mut answer = Assembler::default();
            while let Some(fragment) = fragments.next().await {
                let fragment = fragment?;
                output_seen = true;
                if let Fragment::Text(text) = &fragment {
                    on_text(text);
                }
                answer.push(fragment).map_err(LlmError::Protocol)?;
                if answer.output_len() > cap_bytes {
                    return Err(LlmError::Protocol(format!(
                        "the answer exceeded the per-answer cap of about {} tokens (twice the model's output budget); the stream was stopped",
                        model.max_output_tokens.saturating_mul(2)
                    )));
                }
            }
            Ok(answer.finish())
        };
        let result = tokio::time::timeout(self.request_timeout, call)
            .await
            .unwrap_or_else(|_| {
                Err(LlmError::Timeout(format!(
                    "no complete answer within {} s (llm.request_timeout_secs / LLM_REQUEST_TIMEOUT)",
                    self.request_timeout.as_secs_f64()
                )))
            });
        record_metrics(&model.key, started.elapsed(), &result);
        result.map_err(|e| (e, output_seen))
    }
}

fn record_metrics(model: &str, elapsed: Duration, result: &Result<Completion, LlmError>) {
    static CALLS: Handles<String, Arc<CallMeters>> = Handles::new();
    let meters = CALLS.get(model, || Arc::new(CallMeters::register(model)));
    meters.duration.record(elapsed.as_secs_f64());
    match result {
        Ok(c) => {
            meters.ok.increment(1);
            if let Some(u) = c.usage {
                meters.prompt_tokens.increment(u.prompt_tokens);
                meters.completion_tokens.increment(u.completion_tokens);
                // Of the prompt tokens, those read from and written to a prompt cache.
                meters
                    .cache_read_tokens
                    .increment(u.cache_read_input_tokens);
                meters
                    .cache_creation_tokens
                    .increment(u.cache_creation_input_tokens);
            }
        }
        Err(e) => {
            meters.failed.increment(1);
            metrics::counter!("triage_llm_errors_total", "model" => model.to_owned(), "kind" => e.kind())
                .increment(1);
        }
    }
}

/// One model's call metrics, registered on its first call.
struct CallMeters {
    duration: metrics::Histogram,
    ok: metrics::Counter,
    failed: metrics::Counter,
    prompt_tokens: metrics::Counter,
    completion_tokens: metrics::Counter,
    cache_read_tokens: metrics::Counter,
    cache_creation_tokens: metrics::Counter,
}

impl CallMeters {
    fn register(model: &str) -> CallMeters {
        let tokens = |kind: &'static str| metrics::counter!("triage_llm_tokens_total", "model" => model.to_owned(), "kind" => kind);
        let calls = |outcome: &'static str| metrics::counter!("triage_llm_calls_total", "model" => model.to_owned(), "outcome" => outcome);
        CallMeters {
            duration: metrics::histogram!("triage_llm_call_duration_seconds", "model" => model.to_owned()),
            ok: calls("ok"),
            failed: calls("error"),
            prompt_tokens: tokens("prompt"),
            completion_tokens: tokens("completion"),
            cache_read_tokens: tokens("cache_read"),
            cache_creation_tokens: tokens("cache_creation"),
        }
    }
}
