//! Buffers started at the size of the last one of their kind.
//!
//! The JSON answer, the SSE answer-end frame and the LLM request body are tens of KiB (the
//! whole conversation, the system prompt, the tools). Grown from 128 bytes they took about
//! eight reallocations each, and with glibc every reallocation of a large block can wait for
//! the arena lock the other runtime worker holds (BENCHMARKS.md, session 12).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The most a buffer starts with: one outsized conversation must not make every later buffer
/// of its kind reserve as much (thousands may be open at once). Larger ones grow from here.
const MAX_START: usize = 64 * 1024;

pub struct SizeHint(AtomicUsize);

impl SizeHint {
    pub const fn new(initial: usize) -> SizeHint {
        SizeHint(AtomicUsize::new(initial))
    }

    /// An empty buffer with room for the last one's size and an eighth more.
    pub fn buffer(&self) -> Vec<u8> {
        let last = self.0.load(Ordering::Relaxed);
        Vec::with_capacity((last + last / 8).min(MAX_START))
    }

    /// Remembers a finished buffer's size for the next.
    pub fn learn(&self, len: usize) {
        self.0.store(len, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_has_room_for_the_last_and_no_more_than_the_cap() {
        let hint = SizeHint::new(1000);
        assert!(hint.buffer().capacity() >= 1125);
        hint.learn(40_000);
        assert!(hint.buffer().capacity() >= 45_000);
        hint.learn(50 << 20);
        assert!(hint.buffer().capacity() < 1 << 20);
    }
}
