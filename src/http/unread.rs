//! Bodies nobody reads (an SSE stream, or a JSON answer an HTTP/2 client grants no window
//! for). Over HTTP/2 a client that stops reading one stream exhausts its flow-control window
//! while the connection itself stays busy (pings, other streams), so the connection's write
//! deadline never fires and hyper simply stops asking for frames: the request would hold its
//! slot and its LLM call forever.
//!
//! hyper polls each body itself; a `StallWatch` notes when a body was last waiting for hyper
//! to ask for its next frame (from its creation, and after each frame), and one sweeper task
//! drops the frames' stream of any body hyper has not asked for `write_timeout`, which frees
//! the slot and cancels the LLM call and tools. (A task per response, handing frames over a
//! channel, cost every request a spawn and a cross-thread wake-up per frame: 0.35 → 0.31 ms of
//! CPU per JSON request at concurrency 1 without it.)

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures::Stream;
use hyper::body::Frame;
use tokio::time::Instant;

type Frames = Pin<Box<dyn Stream<Item = Result<Bytes, axum::Error>> + Send>>;

/// Watches the bodies it makes; cheap to clone.
#[derive(Clone)]
pub struct StallWatch(Arc<Watch>);

struct Watch {
    write_timeout: Duration,
    base: Instant,
    /// The bodies alive, and whether a sweeper runs; one lock so that a body registered as
    /// the sweeper finds the list empty is never left unwatched.
    watched: Mutex<Watched>,
}

#[derive(Default)]
struct Watched {
    bodies: Vec<Weak<Shared>>,
    sweeping: bool,
}

struct Shared {
    frames: Mutex<Option<Frames>>,
    /// Milliseconds since `base`, plus one, at which the body began waiting for hyper to ask
    /// for a frame; 0 while hyper is waiting for the body (or it has ended).
    waiting_since: AtomicU64,
    stalled: AtomicBool,
}

impl StallWatch {
    pub fn new(write_timeout: Duration) -> Self {
        StallWatch(Arc::new(Watch {
            write_timeout,
            base: Instant::now(),
            watched: Mutex::new(Watched::default()),
        }))
    }

    /// A body fed from `frames`, which are dropped when hyper asks for nothing for
    /// `write_timeout` (the client takes nothing, or goes away).
    pub fn body<S>(&self, frames: S) -> Body
    where
        S: Stream<Item = Result<Bytes, axum::Error>> + Send + 'static,
    {
        let shared = Arc::new(Shared {
            frames: Mutex::new(Some(Box::pin(frames))),
            waiting_since: AtomicU64::new(self.0.now_mark()),
            stalled: AtomicBool::new(false),
        });
        self.0.register(&shared);
        Body::new(WatchedBody {
            shared,
            watch: self.0.clone(),
        })
    }
}

impl Watch {
    fn register(self: &Arc<Self>, body: &Arc<Shared>) {
        // Nothing panics under these locks; were one poisoned, watching goes on regardless.
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        watched.bodies.push(Arc::downgrade(body));
        if !watched.sweeping {
            watched.sweeping = true;
            tokio::spawn(sweep(Sweeper {
                watch: Arc::downgrade(self),
                finished: false,
            }));
        }
    }

    fn now_mark(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Drops the frames of every body stalled for `write_timeout`; false once none is left
    /// to watch (the sweeper then ends, and the next body starts another).
    fn sweep_once(self: &Arc<Self>) -> bool {
        let now = self.now_mark();
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        // Every body looked at is kept here until the lock is released: one whose response
        // hyper drops meanwhile is torn down (LLM call, tools) outside the lock.
        let mut looked_at = Vec::with_capacity(watched.bodies.len());
        let mut stalled = Vec::new();
        watched.bodies.retain(|body| {
            let Some(body) = body.upgrade() else {
                return false;
            };
            let stalled_now = self.stalled_at(&body, now);
            if stalled_now {
                stalled.push(body);
            } else {
                looked_at.push(body);
            }
            !stalled_now
        });
        if watched.bodies.is_empty() {
            watched.sweeping = false;
        }
        let keep_sweeping = watched.sweeping;
        drop(watched);
        drop(looked_at);
        for body in stalled {
            let mut frames = body.frames.lock().unwrap_or_else(PoisonError::into_inner);
            // hyper may have asked for a frame since: it holds this lock while it asks.
            if !self.stalled_at(&body, self.now_mark()) {
                drop(frames);
                self.register(&body);
                continue;
            }
            tracing::info!(
                write_timeout_secs = self.write_timeout.as_secs_f64(),
                "the client read nothing of its answer: ending the request"
            );
            body.stalled.store(true, Ordering::Release);
            let stream = frames.take();
            drop(frames);
            // The LLM call and tools are cancelled here, under no lock.
            drop(stream);
        }
        keep_sweeping
    }

    fn stalled_at(&self, body: &Shared, now: u64) -> bool {
        let limit = u64::try_from(self.write_timeout.as_millis()).unwrap_or(u64::MAX);
        let since = body.waiting_since.load(Ordering::Acquire);
        since != 0 && now.saturating_sub(since) >= limit
    }
}

/// The sweeper's hold on its watch. Should the sweeper end otherwise than by finding nothing
/// to watch (a panic while dropping a stalled stream), the next body starts another.
struct Sweeper {
    watch: Weak<Watch>,
    finished: bool,
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        if !self.finished
            && let Some(watch) = self.watch.upgrade()
        {
            watch
                .watched
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .sweeping = false;
        }
    }
}

async fn sweep(mut sweeper: Sweeper) {
    loop {
        let tick = match sweeper.watch.upgrade() {
            Some(w) => {
                (w.write_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
            }
            None => break,
        };
        tokio::time::sleep(tick).await;
        match sweeper.watch.upgrade() {
            Some(w) if w.sweep_once() => {}
            _ => break,
        }
    }
    sweeper.finished = true;
}

struct WatchedBody {
    shared: Arc<Shared>,
    watch: Arc<Watch>,
}

impl hyper::body::Body for WatchedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let shared = &self.shared;
        // Under the lock, so the sweeper, which checks again under it, never drops a stream
        // hyper is waiting on (whose waker would then never fire).
        let mut frames = shared.frames.lock().unwrap_or_else(PoisonError::into_inner);
        shared.waiting_since.store(0, Ordering::Release);
        let Some(stream) = frames.as_mut() else {
            // Not the stream's end: reset the stream rather than end it cleanly.
            return Poll::Ready(shared.stalled.swap(false, Ordering::AcqRel).then(|| {
                Err(axum::Error::new(
                    "the client read nothing for the write timeout",
                ))
            }));
        };
        match stream.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(data))) => {
                shared
                    .waiting_since
                    .store(self.watch.now_mark(), Ordering::Release);
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(Some(Err(e))) => {
                *frames = None;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                *frames = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
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
        let mut body = StallWatch::new(Duration::from_secs(5)).body(frames);
        // One frame is read, then the client stops.
        assert!(body.frame().await.is_some());
        tokio::time::timeout(Duration::from_secs(60), dropped_rx)
            .await
            .expect("the producer outlived the write timeout")
            .unwrap();
        // Then an error instead of a clean end.
        let mut saw_error = false;
        while let Some(frame) = body.frame().await {
            saw_error |= frame.is_err();
        }
        assert!(saw_error);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reading_client_gets_every_frame_and_a_clean_end() {
        let frames = futures::stream::iter((0..50).map(|i| Ok(Bytes::from(format!("{i},")))));
        let collected = StallWatch::new(Duration::from_secs(5))
            .body(frames)
            .collect()
            .await
            .unwrap()
            .to_bytes();
        let expected: String = (0..50).map(|i| format!("{i},")).collect();
        assert_eq!(collected, expected.as_bytes());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_never_asked_for_is_dropped_and_one_waiting_for_its_stream_is_not() {
        let watch = StallWatch::new(Duration::from_secs(5));
        let (never_tx, never_rx) = tokio::sync::oneshot::channel::<()>();
        let never_polled = watch.body(guarded_pending(never_tx));
        let (waiting_tx, mut waiting_rx) = tokio::sync::oneshot::channel::<()>();
        let mut waiting = watch.body(guarded_pending(waiting_tx));
        // hyper asks the second body for a frame; its stream has none yet (a slow LLM).
        let asked = tokio::time::timeout(Duration::from_millis(1), waiting.frame()).await;
        assert!(asked.is_err(), "no frame yet");
        tokio::time::timeout(Duration::from_secs(10), never_rx)
            .await
            .expect("a body hyper never asked for outlived the write timeout")
            // Sent, or the sender dropped with a stream that never started: gone either way.
            .ok();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(
            matches!(
                waiting_rx.try_recv(),
                Err(tokio::sync::oneshot::error::TryRecvError::Empty)
            ),
            "a body waiting for its own stream was dropped"
        );
        drop(never_polled);
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_sweeper_watches_bodies_after_the_last_one_ended() {
        let watch = StallWatch::new(Duration::from_secs(5));
        let read = watch.body(futures::stream::iter([Ok(Bytes::from_static(b"x"))]));
        read.collect().await.unwrap();
        // Past a tick: the sweeper found nothing left to watch and ended.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let _never_polled = watch.body(guarded_pending(tx));
        tokio::time::timeout(Duration::from_secs(10), rx)
            .await
            .expect("a body made after the sweeper ended was not watched")
            .ok();
    }

    /// A stream that never yields, signalling when it is dropped.
    fn guarded_pending(
        dropped: tokio::sync::oneshot::Sender<()>,
    ) -> impl Stream<Item = Result<Bytes, axum::Error>> + Send {
        async_stream::stream! {
            let _drop_guard = DropSignal(Some(dropped));
            std::future::pending::<()>().await;
            yield Ok(Bytes::new());
        }
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
