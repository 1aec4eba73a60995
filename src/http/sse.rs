//! Server-sent events: `event: NAME\ndata: ONE-LINE-JSON\n\n` frames, and `: keep-alive`
//! comments whenever nothing else was sent for the keep-alive interval, so proxies with idle
//! timeouts do not cut long tool runs.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::ShutdownWatch;
use crate::runtime::size_hint::SizeHint;
use crate::wire::StreamEvent;
use crate::wire::events::ErrorEvent;

pub const KEEPALIVE_FRAME: &[u8] = b": keep-alive\n\n";

/// One SSE frame. The final frame carries the whole conversation: it starts with room for the
/// last one's size (`size_hint`).
pub fn encode(event: &StreamEvent) -> Bytes {
    static END_FRAME: SizeHint = SizeHint::new(16 * 1024);
    let name = event.name();
    let is_end = matches!(event, StreamEvent::AnswerEnd(_));
    let mut buf = if is_end {
        END_FRAME.buffer()
    } else {
        Vec::with_capacity(128)
    };
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    if let Err(e) = event.write_data(&mut buf) {
        // Not reachable with our types (no non-string map keys); never send half a frame.
        tracing::error!(event = name, error = %e, "cannot encode an SSE event");
        buf.clear();
        buf.extend_from_slice(b"event: error\ndata: ");
        let fallback = StreamEvent::Error(ErrorEvent::new(
            format!("cannot encode event {name}"),
            false,
        ));
        let _ = fallback.write_data(&mut buf);
    }
    buf.extend_from_slice(b"\n\n");
    if is_end {
        buf = END_FRAME.finish(buf);
    }
    Bytes::from(buf)
}

/// What bounds a stream besides its own end.
#[derive(Clone)]
pub struct StreamLimits {
    /// Comment frame after this much silence.
    pub keepalive: Option<Duration>,
    pub deadline: Duration,
    pub shutdown: Option<ShutdownWatch>,
}

impl StreamLimits {
    /// A request's stream as the server is set up: its keep-alive, its deadline, its
    /// shutdown.
    pub fn of(state: &super::SharedState) -> StreamLimits {
        StreamLimits {
            keepalive: state.keepalive,
            deadline: state.deadline,
            shutdown: Some(state.shutdown.clone()),
        }
    }
}

/// An event of a front door that streams: its frame, whether the stream ends after it, and
/// the event that ends a stream cut short (the deadline, the server shutting down).
pub trait Frame: Sized {
    fn frame(&self) -> Bytes;
    fn is_terminal(&self) -> bool;
    fn cut_short(message: String) -> Self;
}

impl Frame for StreamEvent {
    fn frame(&self) -> Bytes {
        encode(self)
    }

    fn is_terminal(&self) -> bool {
        StreamEvent::is_terminal(self)
    }

    fn cut_short(message: String) -> Self {
        StreamEvent::Error(ErrorEvent::new(message, false))
    }
}

/// The streaming response: headers go out at once, then one frame per event. The stream ends
/// after a terminal event, or with the front door's error event at the deadline or on server
/// shutdown.
pub fn response<S, F>(events: S, limits: StreamLimits) -> Response
where
    S: Stream<Item = F> + Send + 'static,
    F: Frame + Send + 'static,
{
    let frames = async_stream::stream! {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let terminal = event.is_terminal();
            yield event.frame();
            if terminal {
                break;
            }
        }
    };
    frames_response(frames, limits, |message| F::cut_short(message).frame())
}

/// A stream of encoded frames as the response, for every SSE door: keep-alive comments in
/// silences, and `error_frame` (the door's own shape) ending it at the deadline or on server
/// shutdown.
pub fn frames_response<S>(
    frames: S,
    limits: StreamLimits,
    error_frame: fn(String) -> Bytes,
) -> Response
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let frames = async_stream::stream! {
        let mut frames = std::pin::pin!(frames);
        let deadline = tokio::time::sleep(limits.deadline);
        let mut deadline = std::pin::pin!(deadline);
        let closing = async move {
            match limits.shutdown {
                Some(watch) => watch.closing().await,
                None => std::future::pending().await,
            }
        };
        let mut closing = std::pin::pin!(closing);
        loop {
            let silence = async {
                match limits.keepalive {
                    Some(interval) => tokio::time::sleep(interval).await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                biased;
                () = &mut closing => {
                    yield Ok::<Bytes, Infallible>(error_frame(
                        "The server is shutting down: this stream was ended before the answer was complete. Send the request again.".into(),
                    ));
                    break;
                }
                () = &mut deadline => {
                    yield Ok(error_frame(format!(
                        "The request exceeded its deadline of {} s (server.request_deadline_secs)",
                        limits.deadline.as_secs_f64()
                    )));
                    break;
                }
                next = frames.next() => next,
                () = silence => {
                    yield Ok(Bytes::from_static(KEEPALIVE_FRAME));
                    continue;
                }
            };
            let Some(frame) = next else { break };
            yield Ok(frame);
        }
    };
    event_stream(frames)
}

/// Encoded SSE frames as a response, with the headers every streaming door sends.
pub fn event_stream<S>(frames: S) -> Response
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    (
        [
            (header::CONTENT_TYPE, "text/event-stream; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
            // Tells nginx-style proxies not to buffer the stream.
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(frames),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::events::StartToolCalling;

    #[test]
    fn frames_are_exact() {
        let e = StreamEvent::StartToolCalling(StartToolCalling {
            tool_name: "kubectl_describe".into(),
            id: "call_1".into(),
        });
        assert_eq!(
            encode(&e),
            "event: start_tool_calling\ndata: {\"tool_name\":\"kubectl_describe\",\"id\":\"call_1\"}\n\n"
        );
    }

    #[test]
    fn data_stays_on_one_line() {
        let e = StreamEvent::Error(ErrorEvent::new("line one\nline two\r\n".into(), false));
        let frame = encode(&e);
        let text = std::str::from_utf8(&frame).unwrap();
        assert_eq!(text.matches('\n').count(), 3, "{text}");
        assert!(text.contains("\"error_code\":1") && text.contains("\"success\":false"));
        assert!(!text.contains("http_status"));
    }

    #[test]
    fn rate_limits_have_their_code() {
        let e = StreamEvent::Error(ErrorEvent::new("slow down".into(), true));
        let text = String::from_utf8(encode(&e).to_vec()).unwrap();
        assert!(text.starts_with("event: error\ndata: {"));
        assert!(
            text.contains("\"error_code\":5204")
                && text.contains("\"msg\":\"Rate limit exceeded\"")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn keepalive_fills_silence() {
        use http_body_util::BodyExt;
        let events = async_stream::stream! {
            tokio::time::sleep(Duration::from_secs(35)).await;
            yield StreamEvent::Error(ErrorEvent::new("x".into(), false));
        };
        let limits = StreamLimits {
            keepalive: Some(Duration::from_secs(15)),
            deadline: Duration::from_secs(3600),
            shutdown: None,
        };
        let body = response(events, limits).into_body();
        let bytes = body.collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&bytes).unwrap();
        assert_eq!(text.matches(": keep-alive\n\n").count(), 2, "{text}");
        assert!(text.ends_with("}\n\n"));
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_ends_the_stream_with_an_error() {
        use http_body_util::BodyExt;
        let events = futures::stream::pending::<StreamEvent>();
        let limits = StreamLimits {
            keepalive: None,
            deadline: Duration::from_secs(5),
            shutdown: None,
        };
        let bytes = response(events, limits)
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes();
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(
            text.starts_with("event: error\n") && text.contains("deadline of 5 s"),
            "{text}"
        );
    }
}
