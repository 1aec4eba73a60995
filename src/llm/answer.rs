//! The early-stream retry every native provider shares: a call whose stream fails before
//! anything was passed on to the caller (a provider that accepts a call and then reports it
//! overloaded as the first event) is sent again like a failed open; once output has gone out,
//! an error ends the answer.

use std::future::Future;
use std::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;

use super::error::LlmError;
use super::model::ModelConfig;
use super::provider::Fragment;
use super::transport::Transport;

/// A provider's reader of one streamed answer.
pub trait AnswerReader: Default + Send {
    /// One unit of the provider's stream (a server-sent event, an eventstream frame).
    type Event: Send + 'static;

    /// The response body as events, bounded and under the idle timeout.
    fn events(
        transport: &Transport,
        response: reqwest::Response,
    ) -> BoxStream<'static, Result<Self::Event, LlmError>>;

    /// One event as fragments; an error event is an `Err`.
    fn push(&mut self, event: Self::Event) -> Result<Vec<Fragment>, LlmError>;

    /// The answer is whole and nothing after it needs reading (an explicit end event).
    fn is_done(&self) -> bool {
        false
    }

    /// At the end of the body: the closing fragments, or `None` when the answer was cut off.
    fn finish(self) -> Option<Vec<Fragment>>;
}

impl Transport {
    /// Streams one answer: `prepare` runs before every attempt (fresh tokens, signatures) and
    /// gives the request builder; the response is read by a new `R`. Opening failures and
    /// stream errors before the first output are retried under the retry policy.
    pub fn stream_answer<'a, R, P, Fut, B>(
        &'a self,
        model: &'a ModelConfig,
        prepare: P,
    ) -> BoxStream<'a, Result<Fragment, LlmError>>
    where
        R: AnswerReader + 'a,
        P: Fn() -> Fut + Send + 'a,
        Fut: Future<Output = Result<B, LlmError>> + Send + 'a,
        B: Fn() -> reqwest::RequestBuilder + Send + Sync + 'a,
    {
        // `prepare` and the builders it makes hold the request body (the whole history): a
        // builder lives only while its attempt opens, `prepare` until the answer has begun
        // (stream errors before then are retried), since a stream may then run for minutes.
        let mut prepare = Some(prepare);
        Box::pin(async_stream::try_stream! {
            let started = Instant::now();
            let mut attempt = 0;
            'call: loop {
                let Some(prepare_attempt) = prepare.as_ref() else {
                    Err(LlmError::Protocol("retried after the answer began".into()))?;
                    break 'call;
                };
                let build = prepare_attempt().await?;
                // Opening failures and failed streams count against one retry budget.
                let response = self.open_counting(model, &build, &mut attempt, started).await?;
                drop(build);
                let mut events = R::events(self, response);
                let mut answer = R::default();
                let mut any_output = false;
                while let Some(event) = events.next().await {
                    let fragments = match event.and_then(|e| answer.push(e)) {
                        Ok(f) => f,
                        Err(e) if !any_output => {
                            let Some(delay) = self.retry_delay(attempt, &e, started) else {
                                Err(e)?
                            };
                            tracing::warn!(
                                model = %model.key, attempt, delay_ms = delay.as_millis() as u64,
                                error = %e, "retrying LLM call"
                            );
                            tokio::time::sleep(delay).await;
                            continue 'call;
                        }
                        Err(e) => Err(e)?,
                    };
                    for fragment in fragments {
                        any_output |= !matches!(fragment, Fragment::Usage(_));
                        yield fragment;
                    }
                    if any_output {
                        prepare = None;
                    }
                    if answer.is_done() {
                        break;
                    }
                }
                match answer.finish() {
                    Some(closing) => {
                        for fragment in closing {
                            yield fragment;
                        }
                    }
                    None => Err(LlmError::Protocol(if any_output {
                        "the stream ended in the middle of the answer".into()
                    } else {
                        "the stream ended before any answer".into()
                    }))?,
                }
                break 'call;
            }
        })
    }

    /// The body as server-sent events, for readers of SSE streams.
    pub fn sse_data(
        &self,
        response: reqwest::Response,
    ) -> BoxStream<'static, Result<String, LlmError>> {
        Box::pin(self.events(response).map(|event| {
            let event = event?;
            std::str::from_utf8(event.data())
                .map(|data| data.trim().to_owned())
                .map_err(|e| LlmError::Protocol(format!("unreadable stream: {e}")))
        }))
    }
}
