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

    /// Remembers a finished buffer's size for the next, and cuts it to that size (in place,
    /// on the thread that allocated it): a small answer after a large one would otherwise hold
    /// the large one's room for as long as a slow client takes to read it.
    pub fn finish(&self, mut buffer: Vec<u8>) -> Vec<u8> {
        self.0.store(buffer.len(), Ordering::Relaxed);
        buffer.shrink_to_fit();
        buffer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_has_room_for_the_last_no_more_than_the_cap_and_ends_at_its_size() {
        let hint = SizeHint::new(1000);
        assert!(hint.buffer().capacity() >= 1125);
        let finished = hint.finish(vec![b'x'; 40_000]);
        assert_eq!(finished.capacity(), 40_000);
        assert!(hint.buffer().capacity() >= 45_000);
        hint.finish(vec![b'x'; 50 << 20]);
        assert!(hint.buffer().capacity() < 1 << 20);
        let mut small = hint.buffer();
        small.extend_from_slice(b"short");
        assert_eq!(hint.finish(small).capacity(), 5);
    }
}
