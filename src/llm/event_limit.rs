//! A bound on one server-sent event of an LLM stream. The SSE parser keeps everything up to
//! the end of a line (and an event's `data:` lines up to the blank line that ends it) in
//! memory; a server sending megabytes without a newline would grow that buffer without limit.
//! This counts the bytes of the event in progress on the raw body, before the parser sees it.

use bytes::Bytes;
use futures::{Stream, StreamExt};

/// Largest event accepted. A chunk carries one delta (bytes to a few KiB); a server that
/// ignores `stream: true` sends its whole answer as one event, and answers are cut at about
/// eight bytes a token of the output budget (512 KiB for 64k tokens). 4 MiB leaves room for
/// JSON escaping and larger budgets while bounding what one call can hold.
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("{0}")]
    Read(reqwest::Error),
    #[error("one streamed event exceeded {0} bytes without ending (no blank line)")]
    EventTooLarge(usize),
}

/// Event boundaries seen so far: bytes of the current event and of its current line.
#[derive(Debug, Default)]
struct EventSize {
    event: usize,
    line: usize,
    after_cr: bool,
}

impl EventSize {
    /// Folds in a piece of the body; `false` once the current event is over `max`. Runs of
    /// bytes between line ends are counted at once (memchr finds the ends).
    fn feed(&mut self, bytes: &[u8], max: usize) -> bool {
        let mut rest = bytes;
        loop {
            let text = memchr::memchr2(b'\n', b'\r', rest).unwrap_or(rest.len());
            if text > 0 {
                self.after_cr = false;
                self.line += text;
                self.event += text;
                if self.event > max {
                    return false;
                }
            }
            let Some(&end) = rest.get(text) else {
                return true;
            };
            if end == b'\n' && self.after_cr {
                // The `\n` of a `\r\n` ends nothing more.
                self.after_cr = false;
            } else {
                self.after_cr = end == b'\r';
                // An empty line ends the event.
                if self.line == 0 {
                    self.event = 0;
                }
                self.line = 0;
            }
            rest = &rest[text + 1..];
        }
    }
}

/// The body, failing with `EventTooLarge` as soon as one event passes `max` bytes.
pub fn limit_events(
    body: impl Stream<Item = Result<Bytes, reqwest::Error>>,
    max: usize,
) -> impl Stream<Item = Result<Bytes, BodyError>> {
    let mut size = EventSize::default();
    body.map(move |piece| {
        let piece = piece.map_err(BodyError::Read)?;
        if size.feed(&piece, max) {
            Ok(piece)
        } else {
            Err(BodyError::EventTooLarge(max))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_lines_end_events_in_every_line_ending() {
        for ending in ["\n", "\r\n", "\r"] {
            let mut size = EventSize::default();
            let event = format!("data: abcd{ending}{ending}");
            for _ in 0..100 {
                assert!(size.feed(event.as_bytes(), 12), "{ending:?}");
            }
            // Many short data lines without a blank line form one growing event.
            let line = format!("data: abcd{ending}");
            let mut size = EventSize::default();
            assert!(size.feed(line.as_bytes(), 12));
            assert!(!size.feed(line.as_bytes(), 12), "{ending:?}");
        }
    }

    #[test]
    fn a_crlf_split_between_pieces_ends_one_line() {
        let mut size = EventSize::default();
        assert!(size.feed(b"data: ab\r", 10));
        // `\n` completes the `\r\n`; the next `\r\n` is the blank line ending the event.
        assert!(size.feed(b"\n\r\n", 10));
        assert!(size.feed(b"data: abcd", 10));
    }

    #[test]
    fn a_line_without_end_fails_once_over_the_cap() {
        let mut size = EventSize::default();
        assert!(size.feed(&[b'x'; 100], 150));
        assert!(!size.feed(&[b'x'; 100], 150));
    }
}
