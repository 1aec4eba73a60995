//! Reading a child's output or an HTTP body up to a byte cap: what kubectl printed, a fetched
//! page, a Prometheus answer. One rule for all of them: the first `cap` bytes are kept, and
//! the read counts as truncated as soon as one byte more has arrived.

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes asked of a reader at a time.
const READ_CHUNK: usize = 64 * 1024;

/// What a capped read kept, and how much there was.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Capped {
    /// The first `cap` bytes.
    pub bytes: Vec<u8>,
    /// Bytes seen in all: everything with [`Overflow::Drain`]; with [`Overflow::Stop`], up to
    /// the chunk that overflowed.
    pub total: u64,
}

impl Capped {
    /// Keeps what still fits under `cap` of `chunk`, and counts all of it.
    pub fn push(&mut self, chunk: &[u8], cap: usize) {
        self.total += chunk.len() as u64;
        let room = cap.saturating_sub(self.bytes.len());
        self.bytes
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// More arrived than was kept.
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len() as u64
    }
}

/// What a capped read does once more than the cap has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Stop reading: the rest is not wanted (an HTTP body; dropping it closes the connection).
    Stop,
    /// Read on to the end, keeping nothing more: a child must never block on a full pipe, and
    /// the total tells the model how much it missed.
    Drain,
}

/// Reads `chunks` keeping at most `cap` bytes; the first error ends the read.
pub async fn read_capped<S, B, E>(chunks: S, cap: usize, overflow: Overflow) -> Result<Capped, E>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    let mut chunks = std::pin::pin!(chunks);
    let mut capped = Capped::default();
    while let Some(chunk) = chunks.next().await {
        capped.push(chunk?.as_ref(), cap);
        if overflow == Overflow::Stop && capped.truncated() {
            break;
        }
    }
    Ok(capped)
}

/// A reader (a child's stdout or stderr) as the chunk stream [`read_capped`] takes.
pub fn chunks<R: AsyncRead + Unpin>(reader: R) -> impl Stream<Item = std::io::Result<Bytes>> {
    futures::stream::unfold(
        (reader, BytesMut::new()),
        |(mut reader, mut buf)| async move {
            // The frozen chunk is dropped before the next read, so this reuses its memory.
            buf.reserve(READ_CHUNK);
            match reader.read_buf(&mut buf).await {
                Ok(0) => None,
                Ok(_) => Some((Ok(buf.split().freeze()), (reader, buf))),
                Err(e) => Some((Err(e), (reader, buf))),
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(parts: &[&'static str]) -> impl Stream<Item = Result<&'static [u8], String>> {
        futures::stream::iter(parts.iter().map(|p| Ok(p.as_bytes())).collect::<Vec<_>>())
    }

    #[tokio::test]
    async fn keeps_everything_under_the_cap() {
        let c = read_capped(stream(&["ab", "cd"]), 4, Overflow::Stop)
            .await
            .unwrap();
        assert_eq!((c.bytes.as_slice(), c.total), (&b"abcd"[..], 4));
        assert!(!c.truncated(), "exactly the cap is not a cut");
    }

    #[tokio::test]
    async fn stop_ends_at_the_chunk_that_overflows() {
        let c = read_capped(stream(&["ab", "cde", "fg"]), 4, Overflow::Stop)
            .await
            .unwrap();
        assert_eq!(c.bytes, b"abcd");
        assert_eq!(c.total, 5, "the last chunk was never read");
        assert!(c.truncated());
    }

    #[tokio::test]
    async fn drain_reads_to_the_end_and_counts() {
        let c = read_capped(stream(&["ab", "cde", "fg"]), 4, Overflow::Drain)
            .await
            .unwrap();
        assert_eq!(c.bytes, b"abcd");
        assert_eq!(c.total, 7);
        let nothing = read_capped(stream(&["ab"]), 0, Overflow::Drain)
            .await
            .unwrap();
        assert!(nothing.bytes.is_empty() && nothing.truncated());
    }

    #[tokio::test]
    async fn an_error_ends_the_read() {
        let parts: Vec<Result<&[u8], String>> = vec![Ok(b"ab"), Err("reset".into()), Ok(b"c")];
        let r = read_capped(futures::stream::iter(parts), 10, Overflow::Drain).await;
        assert_eq!(r, Err("reset".into()));
    }

    #[tokio::test]
    async fn a_reader_is_drained_past_the_cap() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let c = read_capped(chunks(&data[..]), 100_000, Overflow::Drain)
            .await
            .unwrap();
        assert_eq!(c.bytes, &data[..100_000]);
        assert_eq!(c.total, 200_000);
        let c = read_capped(chunks(&data[..10]), 100, Overflow::Drain)
            .await
            .unwrap();
        assert_eq!((c.bytes.as_slice(), c.total), (&data[..10], 10));
    }
}
