//! Bodies nobody reads (an SSE stream, or a JSON answer an HTTP/2 client grants no window
//! for). Over HTTP/2 a client that stops reading one stream exhausts its
//! flow-control window while the connection itself stays busy (pings, other streams), so the
//! connection's write deadline never fires and hyper simply stops asking for frames: the
//! request would hold its slot and its LLM call forever. Frames are therefore produced in a
//! task of their own and handed over one at a time; when a frame waits `write_timeout` to be
//! taken, the producer stops, which frees the slot and cancels the LLM call and tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;

type Frame = Result<Bytes, axum::Error>;

/// A body fed from `frames`, which stop being polled (and are dropped) when the client takes
/// nothing for `write_timeout` or goes away.
pub fn body<S>(frames: S, write_timeout: Duration) -> Body
where
    S: Stream<Item = Frame> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Frame>(1);
    let stalled = Arc::new(AtomicBool::new(false));
    let producer_stalled = stalled.clone();
    tokio::spawn(async move {
        let mut frames = std::pin::pin!(frames);
        loop {
            let next = tokio::select! {
                biased;
                () = tx.closed() => return,
                next = frames.next() => next,
            };
            let Some(frame) = next else { return };
            match tokio::time::timeout(write_timeout, tx.send(frame)).await {
                Ok(Ok(())) => {}
                Ok(Err(_client_gone)) => return,
                Err(_) => {
                    tracing::info!(
                        write_timeout_secs = write_timeout.as_secs_f64(),
                        "the client read nothing of its stream: ending the request"
                    );
                    producer_stalled.store(true, Ordering::SeqCst);
                    return;
                }
            }
        }
    });
    let frames = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).chain(
        futures::stream::once(async move {
            // Not the stream's end: reset the stream rather than end it cleanly.
            stalled.load(Ordering::SeqCst).then(|| {
                Err(axum::Error::new(
                    "the client read nothing for the write timeout",
                ))
            })
        })
        .filter_map(std::future::ready),
    );
    Body::from_stream(frames)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test(start_paused = true)]
    async fn a_frame_nobody_takes_ends_the_producer() {
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        let frames = async_stream::stream! {
            let _drop_guard = DropSignal(Some(dropped_tx));
            loop {
                yield Ok::<_, axum::Error>(Bytes::from_static(b"data"));
            }
        };
        let mut body = body(frames, Duration::from_secs(5));
        // One frame is read, then the client stops.
        assert!(body.frame().await.is_some());
        tokio::time::timeout(Duration::from_secs(60), dropped_rx)
            .await
            .expect("the producer outlived the write timeout")
            .unwrap();
        // What was queued is delivered, then an error instead of a clean end.
        let mut saw_error = false;
        while let Some(frame) = body.frame().await {
            saw_error |= frame.is_err();
        }
        assert!(saw_error);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reading_client_gets_every_frame_and_a_clean_end() {
        let frames = futures::stream::iter((0..50).map(|i| Ok(Bytes::from(format!("{i},")))));
        let collected = body(frames, Duration::from_secs(5))
            .collect()
            .await
            .unwrap()
            .to_bytes();
        let expected: String = (0..50).map(|i| format!("{i},")).collect();
        assert_eq!(collected, expected.as_bytes());
    }

    struct DropSignal(Option<tokio::sync::oneshot::Sender<()>>);

    impl Drop for DropSignal {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }
}
