//! What really runs out under load, watched cheaply so that new work is refused (503 with
//! Retry-After) only when a resource is near exhaustion, never at a fixed count:
//! - file descriptors: the soft RLIMIT_NOFILE is raised to the hard limit at start-up, and the
//!   descriptors in use are estimated from counters (those open at start-up, inbound
//!   connections, requests in flight — each may hold one connection to the LLM), no /proc scan;
//! - memory: the resident set, sampled every 100 ms from /proc/self/statm by a background task,
//!   against a budget (configured, else derived from the cgroup limit or physical memory).
//!
//! The provider's own 429s are the third limit; the LLM client retries them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Descriptors kept free for what is not counted: log files, DNS, tool processes, MCP servers.
const DEFAULT_RESERVE: usize = 256;
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Idle LLM connections stay pooled for 4 s after a burst, and the pool sweeps them on its
/// own timer: by then they are closed and their buffers free.
const TRIM_AGAIN_AFTER_IDLE: Duration = Duration::from_secs(10);
/// Growth of the resident set while busy after which the heap is trimmed, at most once a
/// second: a burst of arrivals leaves its temporaries' pages free among the pages of the
/// streams it opened, resident until trimmed (about a fifth of 10,000 streams' memory).
const TRIM_AFTER_GROWTH: u64 = 16 * 1024 * 1024;
const TRIM_WHILE_BUSY_EVERY: Duration = Duration::from_secs(1);

pub struct Capacity {
    descriptor_limit: usize,
    descriptor_reserve: usize,
    /// Open before serving (listener, log, database, runtime).
    descriptors_at_start: usize,
    connections: AtomicUsize,
    requests: AtomicUsize,
    /// Requests admitted since start: with `requests`, tells a pause between sequential
    /// requests (in flight 0 at the sample, but some ran since the last) from a burst's end.
    admitted: AtomicU64,
    memory_budget: u64,
    /// Last sampled resident set, bytes.
    rss: AtomicU64,
}

/// The resource a refusal names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    Descriptors { in_use: usize, limit: usize },
    Memory { rss: u64, budget: u64 },
}

impl Exhausted {
    pub fn resource(self) -> &'static str {
        match self {
            Exhausted::Descriptors { .. } => "file_descriptors",
            Exhausted::Memory { .. } => "memory",
        }
    }

    pub fn describe(self) -> String {
        match self {
            Exhausted::Descriptors { in_use, limit } => format!(
                "Server busy: file descriptors nearly exhausted ({in_use} of {limit} in use, \
                 server.descriptor_reserve kept free); retry shortly"
            ),
            Exhausted::Memory { rss, budget } => format!(
                "Server busy: memory near its budget (resident {} MiB of {} MiB, \
                 server.memory_budget_bytes); retry shortly",
                rss >> 20,
                budget >> 20
            ),
        }
    }
}

impl Capacity {
    /// Measures the starting point; `memory_budget` of `None` derives one from the machine.
    pub fn new(memory_budget: Option<u64>, descriptor_reserve: Option<usize>) -> Capacity {
        let descriptor_limit = nofile_limits().map_or(1024, |(soft, _)| soft);
        let capacity = Capacity {
            descriptor_limit: usize::try_from(descriptor_limit).unwrap_or(usize::MAX),
            descriptor_reserve: descriptor_reserve.unwrap_or(DEFAULT_RESERVE),
            descriptors_at_start: open_descriptors().unwrap_or(64),
            connections: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            admitted: AtomicU64::new(0),
            memory_budget: memory_budget.unwrap_or_else(derived_memory_budget),
            rss: AtomicU64::new(resident_bytes().unwrap_or(0)),
        };
        metrics::gauge!("triage_memory_budget_bytes").set(capacity.memory_budget as f64);
        metrics::gauge!("triage_descriptor_limit").set(capacity.descriptor_limit as f64);
        tracing::info!(
            memory_budget_bytes = capacity.memory_budget,
            descriptor_limit = capacity.descriptor_limit,
            descriptor_reserve = capacity.descriptor_reserve,
            "load shedding follows memory and file descriptors"
        );
        capacity
    }

    /// Samples the resident set in the background for as long as `this` is used elsewhere.
    pub fn start_sampling(this: &Arc<Capacity>) {
        let weak = Arc::downgrade(this);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut was_busy = false;
            // Start-up's pages are handed back once; a first trim after the first idle spell
            // catches what the first moments of serving mapped.
            let mut idle_since = Some(tokio::time::Instant::now());
            let mut growth = GrowthTrim::new(resident_bytes().unwrap_or(0), Instant::now());
            let mut activity = Activity::default();
            loop {
                tick.tick().await;
                let Some(capacity) = weak.upgrade() else {
                    return;
                };
                // The allocator keeps freed pages and the binary's pages stay mapped: hand
                // them back when a burst is over, again once the LLM connections it pooled
                // have closed, and before refusing work for memory that may be free already.
                let busy = activity.busy(
                    capacity.requests.load(Ordering::Relaxed)
                        + crate::runtime::shards::background_tasks(),
                    capacity.admitted.load(Ordering::Relaxed),
                );
                let rss = capacity.rss.load(Ordering::Relaxed);
                let over = rss >= capacity.memory_budget;
                let now = tokio::time::Instant::now();
                let grown = growth.due(busy, rss, now.into_std());
                if was_busy && !busy {
                    idle_since = Some(now);
                }
                let pool_drained = idle_since
                    .is_some_and(|since| now.duration_since(since) >= TRIM_AGAIN_AFTER_IDLE);
                if (was_busy && !busy) || pool_drained {
                    let _ =
                        tokio::task::spawn_blocking(crate::runtime::memory::release_unused).await;
                } else if over || grown {
                    // Code pages are not the heap: dropping them every tick would only refault.
                    let _ = tokio::task::spawn_blocking(crate::runtime::allocator::trim_heap).await;
                    growth.trimmed(resident_bytes().unwrap_or(rss), now.into_std());
                }
                if busy || pool_drained {
                    idle_since = None;
                }
                was_busy = busy;
                if let Some(rss) = resident_bytes() {
                    capacity.rss.store(rss, Ordering::Relaxed);
                    metrics::gauge!("triage_memory_resident_bytes").set(rss as f64);
                }
                metrics::gauge!("triage_descriptors_in_use").set(capacity.descriptors() as f64);
            }
        });
    }

    /// Descriptors in use, estimated: each request may hold one connection to the LLM.
    fn descriptors(&self) -> usize {
        self.descriptors_at_start
            + self.connections.load(Ordering::Relaxed)
            + self.requests.load(Ordering::Relaxed)
    }

    /// Whether new work may start now.
    pub fn check(&self) -> Result<(), Exhausted> {
        let rss = self.rss.load(Ordering::Relaxed);
        if rss >= self.memory_budget {
            return Err(Exhausted::Memory {
                rss,
                budget: self.memory_budget,
            });
        }
        let in_use = self.descriptors();
        if in_use + self.descriptor_reserve >= self.descriptor_limit {
            return Err(Exhausted::Descriptors {
                in_use,
                limit: self.descriptor_limit,
            });
        }
        Ok(())
    }

    /// Counts an accepted connection until the guard drops.
    pub fn connection(self: &Arc<Self>) -> Held {
        self.connections.fetch_add(1, Ordering::Relaxed);
        Held(self.clone(), Counter::Connections)
    }

    /// Counts a request in flight until the guard drops.
    pub fn request(self: &Arc<Self>) -> Held {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.admitted.fetch_add(1, Ordering::Relaxed);
        Held(self.clone(), Counter::Requests)
    }
}

enum Counter {
    Connections,
    Requests,
}

/// One counted connection or request; released on drop.
pub struct Held(Arc<Capacity>, Counter);

impl Drop for Held {
    fn drop(&mut self) {
        let counter = match self.1 {
            Counter::Connections => &self.0.connections,
            Counter::Requests => &self.0.requests,
        };
        counter.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Raises the soft RLIMIT_NOFILE to the hard limit: the default soft limit (often 1,024) and
/// not the machine is what would refuse the 1,025th connection. Returns (before, after, hard).
pub fn raise_descriptor_limit() -> Option<(u64, u64, u64)> {
    let (soft, hard) = nofile_limits()?;
    if soft < hard {
        let raised = libc::rlimit {
            rlim_cur: hard as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit reads the struct we pass; no memory is shared.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Some((soft, soft, hard));
        }
    }
    let (now, hard) = nofile_limits()?;
    Some((soft, now, hard))
}

fn nofile_limits() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    Some((limit.rlim_cur as u64, limit.rlim_max as u64))
}

fn open_descriptors() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// Whether the server was busy over the last tick. A client sending one request after another
/// has none in flight at many samples; counting those gaps as idle would hand the binary's
/// pages back (and trim the heap) several times a second, only to fault them in again.
#[derive(Default)]
struct Activity {
    admitted_before: u64,
}

impl Activity {
    fn busy(&mut self, in_flight: usize, admitted: u64) -> bool {
        let ran_since = admitted != self.admitted_before;
        self.admitted_before = admitted;
        in_flight > 0 || ran_since
    }
}

/// When to trim the heap while requests are running: once the resident set has grown by
/// `TRIM_AFTER_GROWTH` since the last trim (or its lowest since), at most once a second.
struct GrowthTrim {
    trimmed_at: u64,
    last: Instant,
}

impl GrowthTrim {
    fn new(rss: u64, now: Instant) -> GrowthTrim {
        GrowthTrim {
            trimmed_at: rss,
            last: now,
        }
    }

    fn due(&mut self, busy: bool, rss: u64, now: Instant) -> bool {
        // 0: not sampled yet.
        if rss > 0 {
            self.trimmed_at = self.trimmed_at.min(rss);
        }
        busy && rss >= self.trimmed_at.saturating_add(TRIM_AFTER_GROWTH)
            && now.duration_since(self.last) >= TRIM_WHILE_BUSY_EVERY
    }

    fn trimmed(&mut self, rss_after: u64, now: Instant) {
        self.trimmed_at = rss_after;
        self.last = now;
    }
}

/// Resident set from /proc/self/statm (one short read).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).unwrap_or(4096))
}

/// 80 % of the cgroup's memory limit when there is one, else half the machine's memory: room
/// for what the budget does not see (the kernel's socket buffers, tool processes).
fn derived_memory_budget() -> u64 {
    let cgroup = cgroup_memory_limit();
    let total = physical_memory();
    match (cgroup, total) {
        (Some(limit), Some(total)) if limit < total => limit / 10 * 8,
        (Some(limit), None) => limit / 10 * 8,
        (_, Some(total)) => total / 2,
        (None, None) => 1 << 30,
    }
}

fn cgroup_memory_limit() -> Option<u64> {
    // cgroup v2, then v1 (whose "no limit" is a huge number, caught by the caller's min).
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok()?.trim().parse().ok())
}

fn physical_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_is_trimmed_while_busy_only_after_growth_and_at_most_once_a_second() {
        const MIB: u64 = 1024 * 1024;
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut growth = GrowthTrim::new(30 * MIB, start);
        // A steady load at a flat resident set never trims.
        assert!(!growth.due(true, 40 * MIB, at(5_000)));
        // Growth while idle is the idle trim's business.
        assert!(!growth.due(false, 60 * MIB, at(5_000)));
        assert!(growth.due(true, 46 * MIB, at(5_000)));
        growth.trimmed(40 * MIB, at(5_000));
        // Grown again, but within a second of the last trim.
        assert!(!growth.due(true, 80 * MIB, at(5_900)));
        assert!(growth.due(true, 80 * MIB, at(6_000)));
        growth.trimmed(70 * MIB, at(6_000));
        // The lowest point since counts: after falling to 50 MiB, 66 MiB is growth enough.
        assert!(!growth.due(true, 50 * MIB, at(7_000)));
        assert!(growth.due(true, 66 * MIB, at(7_000)));
        // An unsampled 0 is not a low point.
        growth.trimmed(60 * MIB, at(8_000));
        assert!(!growth.due(true, 0, at(9_000)));
        assert!(!growth.due(true, 70 * MIB, at(9_000)));
    }

    #[test]
    fn a_tick_is_busy_with_a_request_in_flight_or_one_that_ran_during_it() {
        let mut activity = Activity::default();
        assert!(!activity.busy(0, 0), "nothing yet");
        assert!(activity.busy(1, 1), "in flight");
        // Sequential requests: none in flight at the sample, three ran since the last one.
        assert!(activity.busy(0, 4));
        // Only a whole tick without a request ends the burst.
        assert!(!activity.busy(0, 4));
        assert!(activity.busy(0, 5));
    }

    #[test]
    fn admitting_a_request_counts_it_until_its_guard_drops_and_for_good() {
        let capacity = Arc::new(Capacity::new(Some(u64::MAX), None));
        let held = capacity.request();
        assert_eq!(capacity.requests.load(Ordering::Relaxed), 1);
        drop(held);
        assert_eq!(capacity.requests.load(Ordering::Relaxed), 0);
        assert_eq!(capacity.admitted.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_tiny_memory_budget_refuses_and_names_memory() {
        let capacity = Capacity::new(Some(1), None);
        let refused = capacity.check().expect_err("over budget");
        assert_eq!(refused.resource(), "memory");
        assert!(refused.describe().contains("memory"));
    }

    #[test]
    fn descriptors_near_the_limit_refuse_and_free_ones_admit() {
        let capacity = Arc::new(Capacity::new(Some(u64::MAX), None));
        assert!(capacity.check().is_ok());
        let room =
            capacity.descriptor_limit - capacity.descriptor_reserve - capacity.descriptors_at_start;
        let held: Vec<Held> = (0..room).map(|_| capacity.request()).collect();
        let refused = capacity.check().expect_err("at the reserve");
        assert_eq!(refused.resource(), "file_descriptors");
        drop(held);
        assert!(capacity.check().is_ok());
    }

    #[test]
    fn the_derived_budget_is_some_memory() {
        assert!(derived_memory_budget() >= 1 << 20);
    }
}
