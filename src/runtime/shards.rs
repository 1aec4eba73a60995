//! Serving threads: one single-threaded tokio runtime per core, each serving the connections
//! handed to it from accept to close.
//!
//! On one shared multi-threaded runtime a request's task moves between workers, and the task
//! driving its pooled LLM connection runs on whichever worker it last woke on: every hand-off
//! wakes another thread, and every block one worker frees that the other allocated waits on
//! glibc's arena lock (about one futex sleep and wake-up per request; BENCHMARKS.md, sessions
//! 12 and 13). Here a connection, the tasks its requests spawn and the LLM connections those
//! requests open (`PerShard` clients) all stay on one thread.
//!
//! The trade-off: no work stealing. Connections go to the shard serving the fewest, so load
//! spreads by connection; an HTTP/2 client multiplexing everything over one connection is
//! served by one core. Work that takes long on the CPU (counting a large tool output) already
//! runs off the async threads.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

thread_local! {
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
    /// On a shard: the runtime that started it (the main one), for work that outlives requests.
    static HOME: std::cell::RefCell<Option<Handle>> = const { std::cell::RefCell::new(None) };
}

/// How many shards a server runs: one per core this process may use (cgroup quotas
/// included), fixed for the process so that per-shard resources agree with the threads.
pub fn count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The shard the calling thread serves, if it is one.
pub fn current() -> Option<usize> {
    CURRENT.get()
}

/// Background tasks running now. The capacity sampler counts them as activity: a conversation
/// run outlives its request, and while it runs the server is not idle (idle is when it hands
/// its heap and code pages back).
static BACKGROUND: AtomicUsize = AtomicUsize::new(0);

pub fn background_tasks() -> usize {
    BACKGROUND.load(Ordering::Relaxed)
}

/// Counts one running task until dropped, with the task's future (a cancelled task too).
struct Running(&'static AtomicUsize);

impl Running {
    fn start(count: &'static AtomicUsize) -> Running {
        count.fetch_add(1, Ordering::Relaxed);
        Running(count)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Spawns work that outlives the request that starts it (a conversation's run, its title) on
/// the main runtime when called on a shard: shards are chosen by connections, so a client
/// starting many runs over one connection would otherwise pile them onto one core.
pub fn spawn_background<F>(task: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let running = Running::start(&BACKGROUND);
    let task = async move {
        let _running = running;
        task.await;
    };
    let home = HOME.with_borrow(Clone::clone);
    match home {
        Some(home) => drop(home.spawn(task)),
        None => drop(tokio::spawn(task)),
    }
}

/// One value per shard and one for every other thread (start-up, background tasks, the CLI):
/// each shard's requests use its own, so what the value spawns (a pooled connection's task)
/// runs on that shard. A shard's value is made on its first use: most processes never serve
/// on every core, and each made value may cost memory (an HTTP client's root certificates).
pub struct PerShard<T> {
    /// Serves threads outside the shards, and any shard whose own value could not be made.
    shared: T,
    own: Box<[OnceLock<T>]>,
    make: Box<dyn Fn() -> Result<T, String> + Send + Sync>,
}

impl<T: Clone> PerShard<T> {
    /// Makes the shared value now (its error is the caller's), the shards' values later.
    pub fn new<E: std::fmt::Display>(
        make: impl Fn() -> Result<T, E> + Send + Sync + 'static,
    ) -> Result<PerShard<T>, E> {
        Ok(PerShard {
            shared: make()?,
            own: (0..count()).map(|_| OnceLock::new()).collect(),
            make: Box::new(move || make().map_err(|e| e.to_string())),
        })
    }

    pub fn get(&self) -> &T {
        let Some(slot) = current().and_then(|shard| self.own.get(shard)) else {
            return &self.shared;
        };
        slot.get_or_init(|| {
            (self.make)().unwrap_or_else(|error| {
                // It was made once at start-up; the shared one works, only on any thread.
                tracing::warn!(%error, "cannot make this serving thread's own value; sharing");
                self.shared.clone()
            })
        })
    }
}

struct Shard {
    handle: Handle,
    /// Connections this shard is serving.
    open: Arc<AtomicUsize>,
    /// Sent, or dropped with the shard, to end its thread.
    stop: oneshot::Sender<()>,
    /// Answers once its runtime has shut down.
    stopped: oneshot::Receiver<()>,
}

/// The serving threads. Dropping this tells them to stop (a server future dropped mid-serve,
/// as tests do); `stop` also waits for them.
pub struct Shards {
    shards: Vec<Shard>,
    /// Where the search for the least busy shard starts, so ties rotate.
    next: AtomicUsize,
}

/// How long a stopping shard waits for its blocking tasks (a large tokenisation, a call
/// directory being removed) before leaving them behind.
const BLOCKING_GRACE: Duration = Duration::from_secs(2);

impl Shards {
    /// Starts `count()` shards; `on_park` runs on each when it goes idle (the allocator's
    /// per-thread trim).
    pub fn start(on_park: fn()) -> std::io::Result<Shards> {
        let n = count();
        let mut shards = Shards {
            shards: Vec::with_capacity(n),
            next: AtomicUsize::new(0),
        };
        for index in 0..n {
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let (stopped_tx, stopped_rx) = oneshot::channel::<()>();
            let (started_tx, started) = std::sync::mpsc::sync_channel(1);
            let home = Handle::try_current().ok();
            std::thread::Builder::new()
                .name(format!("triage-shard-{index}"))
                .spawn(move || {
                    // Built and dropped on this thread: a runtime cannot be dropped from async
                    // code, which the caller may be.
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .on_thread_park(on_park)
                        .build()
                    {
                        Ok(runtime) => runtime,
                        Err(e) => {
                            let _ = started_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = started_tx.send(Ok(runtime.handle().clone()));
                    CURRENT.set(Some(index));
                    HOME.set(home);
                    // Either a stop or the `Shards` dropped: both end the shard.
                    let _ = runtime.block_on(stop_rx);
                    // Blocking tasks get a moment to finish; open tasks are dropped.
                    runtime.shutdown_timeout(BLOCKING_GRACE);
                    let _ = stopped_tx.send(());
                })?;
            // A thread that is running answers at once.
            let handle = started.recv().map_err(|_| {
                std::io::Error::other(format!("serving thread {index} ended before starting"))
            })??;
            shards.shards.push(Shard {
                handle,
                open: Arc::new(AtomicUsize::new(0)),
                stop: stop_tx,
                stopped: stopped_rx,
            });
        }
        Ok(shards)
    }

    /// Runs `task` on the shard serving the fewest connections, counted as one of its
    /// connections until it ends. `task` is first polled on that shard: resources it creates
    /// there (sockets, timers) belong to that shard's runtime.
    pub fn serve_connection(&self, task: impl Future<Output = ()> + Send + 'static) {
        let n = self.shards.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let Some(shard) = (0..n)
            .map(|k| &self.shards[(start + k) % n])
            .min_by_key(|s| s.open.load(Ordering::Relaxed))
        else {
            return;
        };
        let open = Counted::new(shard.open.clone());
        shard.handle.spawn(async move {
            let _open = open;
            task.await;
        });
    }

    /// Tells every shard to stop (their open tasks are dropped) and waits until they have.
    pub async fn stop(self) {
        let stopped: Vec<_> = self
            .shards
            .into_iter()
            .map(|shard| {
                let _ = shard.stop.send(());
                shard.stopped
            })
            .collect();
        for shard in stopped {
            let _ = shard.await;
        }
    }
}

/// Counts one connection for as long as it lives.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(open: Arc<AtomicUsize>) -> Counted {
        open.fetch_add(1, Ordering::Relaxed);
        Counted(open)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_spread_over_the_shards_and_stay_on_their_thread() {
        let shards = Shards::start(|| {}).expect("shards start");
        let n = count();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (release_tx, release_rx) = tokio::sync::watch::channel(false);
        for _ in 0..2 * n {
            let tx = tx.clone();
            let mut release = release_rx.clone();
            shards.serve_connection(async move {
                let before = (current(), std::thread::current().id());
                // A spawned task stays on the shard too.
                let spawned = tokio::spawn(async { (current(), std::thread::current().id()) });
                let after_spawn = spawned.await.ok();
                let _ = release.wait_for(|r| *r).await;
                let after = (current(), std::thread::current().id());
                let _ = tx.send((before, after_spawn, after));
            });
        }
        drop(tx);
        // Every connection counted while open: the 2n spread evenly before any ends.
        tokio::time::timeout(Duration::from_secs(5), async {
            while shards
                .shards
                .iter()
                .map(|s| s.open.load(Ordering::Relaxed))
                .sum::<usize>()
                < 2 * n
            {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("all connections counted");
        for shard in &shards.shards {
            assert_eq!(shard.open.load(Ordering::Relaxed), 2);
        }
        let _ = release_tx.send(true);
        let mut seen = std::collections::HashSet::new();
        while let Some((before, after_spawn, after)) = rx.recv().await {
            assert!(before.0.is_some(), "runs on a shard");
            assert_eq!(
                Some(before),
                after_spawn,
                "a spawned task stays on its shard"
            );
            assert_eq!(before, after, "a task stays on its shard across a wait");
            seen.insert(before.0);
        }
        assert_eq!(seen.len(), n, "every shard served connections");
        // A connection's count drops just after its task's last send, on another thread.
        tokio::time::timeout(Duration::from_secs(5), async {
            while shards
                .shards
                .iter()
                .any(|s| s.open.load(Ordering::Relaxed) != 0)
            {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("finished connections are no longer counted");
        shards.stop().await;
    }

    #[tokio::test]
    async fn stopping_drops_open_tasks_and_waits_for_the_threads() {
        let shards = Shards::start(|| {}).expect("shards start");
        let (dropped_tx, dropped_rx) = oneshot::channel::<()>();
        struct OnDrop(Option<oneshot::Sender<()>>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                if let Some(tx) = self.0.take() {
                    let _ = tx.send(());
                }
            }
        }
        let guard = OnDrop(Some(dropped_tx));
        shards.serve_connection(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        tokio::time::timeout(Duration::from_secs(5), shards.stop())
            .await
            .expect("shards stop");
        dropped_rx.await.expect("the open task was dropped");
    }

    #[test]
    fn per_shard_values_are_made_on_first_use_and_chosen_by_the_calling_thread() {
        let made = Arc::new(AtomicUsize::new(0));
        let counter = made.clone();
        let values = PerShard::new(move || {
            let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
            // The third value cannot be made: its shard shares the first.
            if n == 3 { Err("no more") } else { Ok(n) }
        })
        .expect("the shared value");
        assert_eq!(
            made.load(Ordering::Relaxed),
            1,
            "only the shared value at first"
        );
        assert_eq!(*values.get(), 1, "outside the shards");
        CURRENT.set(Some(0));
        assert_eq!(*values.get(), 2);
        assert_eq!(*values.get(), 2, "made once");
        CURRENT.set(Some(count() - 1));
        let last = *values.get();
        assert!(last == 2 || last == 1, "{last}");
        if count() > 1 {
            assert_eq!(
                last, 1,
                "a value that cannot be made falls back to the shared one"
            );
        }
        CURRENT.set(Some(count()));
        assert_eq!(
            *values.get(),
            1,
            "an index past the shards gets the shared value"
        );
        CURRENT.set(None);
    }

    #[test]
    fn a_running_task_counts_until_its_future_is_dropped() {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let running = Running::start(&COUNT);
        let task = async move {
            let _running = running;
            std::future::pending::<()>().await;
        };
        assert_eq!(COUNT.load(Ordering::Relaxed), 1);
        drop(task);
        assert_eq!(COUNT.load(Ordering::Relaxed), 0, "cancelled before it ran");
    }

    #[tokio::test]
    async fn background_work_counts_while_it_runs() {
        let (release, wait) = oneshot::channel::<()>();
        let (started, running) = oneshot::channel();
        spawn_background(async move {
            let _ = started.send(background_tasks());
            let _ = wait.await;
        });
        assert!(running.await.expect("ran") >= 1);
        drop(release);
    }

    #[tokio::test]
    async fn background_work_started_on_a_shard_runs_on_the_runtime_that_started_it() {
        let shards = Shards::start(|| {}).expect("shards start");
        let (tx, rx) = oneshot::channel();
        shards.serve_connection(async move {
            spawn_background(async move {
                let _ = tx.send((current(), std::thread::current().id()));
            });
        });
        let (shard, thread) = rx.await.expect("ran");
        assert_eq!(shard, None, "not on a shard");
        assert_eq!(
            thread,
            std::thread::current().id(),
            "on this test's runtime"
        );
        shards.stop().await;
    }
}
