//! The heap allocator, and handing its free memory back to the system.
//!
//! The default build uses the system's malloc: it holds the least memory at idle and per open
//! stream. glibc's arena locks cost CPU when one thread frees a large block another allocated;
//! serving each connection on one thread (`shards`) keeps a request's blocks on its thread
//! (BENCHMARKS.md, sessions 12 and 13).
//!
//! The `mimalloc` feature frees across threads without a lock and allocates faster. Out of the
//! box mimalloc backs its arenas with transparent huge pages (a 2 MiB
//! page is resident as a whole), purges free pages a second late and keeps them in each
//! thread's heap: an idle server held 100 MiB and kept most of a burst. So here: no huge
//! pages, free pages purged at once, and the heaps collected when the server goes idle. A
//! thread's heap can only be collected by that thread, so `trim_heap` raises a flag and each
//! runtime thread (workers and shards) collects its own heap the next time it parks
//! (`on_worker_park`): at once for one that was busy, at its next wake-up (a request, a timer)
//! for one already asleep.

#[cfg(feature = "mimalloc")]
mod chosen {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, PoisonError};
    use std::time::{Duration, Instant};

    use libmimalloc_sys as mi;

    /// Bumped for every trim; a worker collects when it has not seen the latest.
    static TRIMS: AtomicU64 = AtomicU64::new(0);

    thread_local! {
        static COLLECTED_AT: Cell<u64> = const { Cell::new(0) };
    }

    /// `mi_option_purge_delay` in mimalloc 3's `mimalloc.h`: the Rust bindings name only the
    /// options of older versions. A test checks the number by the option's documented default.
    pub(super) const PURGE_DELAY: mi::mi_option_t = 15;

    pub fn configure() {
        // mimalloc read its options from the environment when the process loaded, and decided
        // about huge pages then; an operator's variables are left to stand.
        // SAFETY: reading and setting an option have no precondition; the delay is read on
        // each purge. Set only where it reads as its documented default, so another version
        // numbering its options differently is left alone.
        unsafe {
            if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none()
                && mi::mi_option_get(PURGE_DELAY) == 1000
            {
                mi::mi_option_set(PURGE_DELAY, 0);
            }
        }
        #[cfg(target_os = "linux")]
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
            // SAFETY: prctl(PR_SET_THP_DISABLE, 1) changes a flag of this process and nothing
            // else. The kernel applies it to every mapping, those made before `main` included.
            // Children inherit it: tools are short commands, for which huge pages matter little.
            unsafe {
                libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            }
        }
    }

    pub fn trim_heap() {
        // Over the memory budget the sampler trims every tick; a forced collect on every
        // worker ten times a second would delay the work it is short of memory for.
        static LAST_TRIM: Mutex<Option<Instant>> = Mutex::new(None);
        let mut last = LAST_TRIM.lock().unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|at| at.elapsed() < MIN_TRIM_INTERVAL) {
            return;
        }
        *last = Some(Instant::now());
        TRIMS.fetch_add(1, Ordering::Relaxed);
        collect_here();
    }

    const MIN_TRIM_INTERVAL: Duration = Duration::from_secs(1);

    pub fn on_worker_park() {
        if COLLECTED_AT.get() != TRIMS.load(Ordering::Relaxed) {
            collect_here();
        }
    }

    fn collect_here() {
        COLLECTED_AT.set(TRIMS.load(Ordering::Relaxed));
        // SAFETY: collects the calling thread's own heap; no pointer is involved.
        unsafe { mi::mi_collect(true) };
    }
}

#[cfg(not(feature = "mimalloc"))]
mod chosen {
    pub fn configure() {}

    pub fn trim_heap() {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only returns free heap pages to the kernel; it touches no live
        // data.
        unsafe {
            libc::malloc_trim(0);
        }
    }

    pub fn on_worker_park() {}
}

/// Sets the allocator's defaults: first thing in `main`, before the runtime starts.
pub use chosen::configure;
/// Runs on each runtime worker when it has nothing to do (tokio's `on_thread_park`).
pub use chosen::on_worker_park;
/// Returns the heap's free pages to the system: this thread's now, the workers' when they
/// next go idle.
pub use chosen::trim_heap;

#[cfg(all(test, feature = "mimalloc"))]
mod tests {
    #[test]
    fn the_purge_delay_option_number_is_mimalloc_3s() {
        // SAFETY: reading an option has no precondition. mimalloc 3 documents a purge delay of
        // 1000 ms; no neighbouring option has that default. Tests never call `configure`.
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::chosen::PURGE_DELAY) };
        assert_eq!(delay, 1000);
    }
}
