//! Reading server-sent events (an LLM's answer, a legacy MCP server, `triage watch`), with a
//! bound on the size of one event.
//!
//! Events are cut straight out of the body's pieces: a line that arrived whole in one piece is a
//! slice of it (no copy), and only a line split across pieces, or the data of an event with
//! several `data:` lines, is copied. An LLM answer is thousands of small events, and the parser
//! this replaces built each one character by character and copied the rest of its buffer for
//! every line (BENCHMARKS.md, session 11).
//!
//! Parsing follows the HTML standard's event stream rules: lines end in CR, LF or CRLF; a
//! leading BOM is skipped; `:` starts a comment; a field without a colon has an empty value and
//! one space after the colon is dropped; `data:` lines join with LF; a blank line dispatches an
//! event that had data; the last event id carries over; unknown fields and `retry:` (nobody
//! reconnects by it) are ignored; an event the body ends in the middle of is dropped.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::Stream;

/// One dispatched event. Its text is UTF-8 as far as the stream's was: `name` and `id` are
/// decoded with replacement like a browser's, `data` is kept as bytes for a JSON parser (which
/// checks it) and `text()` checks it for anyone else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    name: Option<Bytes>,
    data: Bytes,
    id: Option<Bytes>,
}

impl SseEvent {
    /// The `event:` field, `message` when there was none (as a browser's `EventSource` has it).
    pub fn name(&self) -> &str {
        match &self.name {
            Some(name) if !name.is_empty() => as_text(name),
            _ => "message",
        }
    }

    /// The last event id seen on the stream so far, empty when none.
    pub fn id(&self) -> &str {
        self.id.as_ref().map_or("", |id| as_text(id))
    }

    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The data as text, `None` when it is not UTF-8.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.data).ok()
    }
}

/// Names and ids are made valid UTF-8 when read, so this never falls back.
fn as_text(bytes: &Bytes) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

/// A name or id as the stream sent it, or with replacement characters where it was not UTF-8.
fn decoded(value: Bytes) -> Bytes {
    match std::str::from_utf8(&value) {
        Ok(_) => value,
        Err(_) => Bytes::from(String::from_utf8_lossy(&value).into_owned()),
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError<E> {
    #[error("{0}")]
    Body(E),
    #[error("one event exceeded {0} bytes without ending (no blank line)")]
    TooLarge(usize),
}

/// A buffer for lines split across pieces is kept for the next one up to this size.
const KEEP_LINE_BUFFER: usize = 64 * 1024;

/// The data of the event being read.
#[derive(Debug, Default)]
enum Data {
    #[default]
    None,
    /// One `data:` line: a slice of what was received.
    One(Bytes),
    /// Several, joined.
    Joined(BytesMut),
}

/// The parser's state between pieces of the body.
#[derive(Debug)]
pub struct SseDecoder {
    /// What is left of the last piece.
    piece: Bytes,
    /// A line begun in an earlier piece, without its end.
    partial: BytesMut,
    data: Data,
    name: Option<Bytes>,
    last_id: Option<Bytes>,
    /// Bytes of the current event's lines as received (line ends aside), for the bound.
    event_bytes: usize,
    max_event_bytes: usize,
    /// The last line ended in CR: an LF first in the next piece belongs to it.
    after_cr: bool,
    at_start: bool,
}

impl SseDecoder {
    pub fn new(max_event_bytes: usize) -> SseDecoder {
        SseDecoder {
            piece: Bytes::new(),
            partial: BytesMut::new(),
            data: Data::None,
            name: None,
            last_id: None,
            event_bytes: 0,
            max_event_bytes,
            after_cr: false,
            at_start: true,
        }
    }

    /// Takes the next piece of the body; call `next_event` until it has nothing before the
    /// next piece.
    pub fn feed(&mut self, piece: Bytes) {
        debug_assert!(self.piece.is_empty(), "fed before the last piece was read");
        self.piece = piece;
    }

    /// The next whole event in what was fed, `Ok(None)` when more of the body is needed, or
    /// `TooLarge` when the event being read has passed the bound.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, usize> {
        loop {
            if self.piece.is_empty() {
                // Not a slice of a piece that may be large while the next is awaited.
                self.piece = Bytes::new();
                return Ok(None);
            }
            if std::mem::take(&mut self.after_cr) && self.piece[0] == b'\n' {
                self.piece.advance(1);
                continue;
            }
            let Some(end) = memchr::memchr2(b'\n', b'\r', &self.piece) else {
                // No line end: keep the start of the line for the next piece.
                if self.event_bytes + self.partial.len() + self.piece.len() > self.max_event_bytes {
                    return Err(self.max_event_bytes);
                }
                self.partial.put(std::mem::take(&mut self.piece));
                return Ok(None);
            };
            self.after_cr = self.piece[end] == b'\r';
            let line = if self.partial.is_empty() {
                self.piece.slice(..end)
            } else {
                self.partial.put_slice(&self.piece[..end]);
                // A split-off line shares its buffer with what is left, which owns it all once
                // the line is dropped: a long line's buffer goes with the line instead of
                // staying for the rest of the stream.
                if self.partial.capacity() > KEEP_LINE_BUFFER {
                    std::mem::take(&mut self.partial).freeze()
                } else {
                    self.partial.split().freeze()
                }
            };
            self.piece.advance(end + 1);
            if let Some(event) = self.line(line)? {
                return Ok(Some(event));
            }
        }
    }

    fn line(&mut self, mut line: Bytes) -> Result<Option<SseEvent>, usize> {
        // The bound counts bytes as received, a leading BOM included, exactly as the check on a
        // line without its end does: so whether an event passes it never depends on where the
        // body was cut.
        self.event_bytes += line.len();
        if self.event_bytes > self.max_event_bytes {
            return Err(self.max_event_bytes);
        }
        if std::mem::take(&mut self.at_start) && line.starts_with(b"\xEF\xBB\xBF") {
            line.advance(3);
        }
        if line.is_empty() {
            self.event_bytes = 0;
            return Ok(self.dispatch());
        }
        let (field, value) = match memchr::memchr(b':', &line) {
            Some(0) => return Ok(None), // a comment
            Some(colon) => {
                let mut value = line.slice(colon + 1..);
                if value.first() == Some(&b' ') {
                    value.advance(1);
                }
                line.truncate(colon);
                (line, value)
            }
            None => (line, Bytes::new()),
        };
        match &field[..] {
            b"data" => self.add_data(value),
            b"event" => self.name = Some(decoded(value)),
            // An id with NUL is ignored whole (the standard says so).
            // Kept for the rest of the stream: a copy, not a slice of its piece.
            b"id" if !value.contains(&0) && self.last_id.as_deref() != Some(&value[..]) => {
                self.last_id = Some(decoded(Bytes::copy_from_slice(&value)));
            }
            _ => {}
        }
        Ok(None)
    }

    fn add_data(&mut self, value: Bytes) {
        self.data = match std::mem::take(&mut self.data) {
            Data::None => Data::One(value),
            Data::One(first) => {
                let mut joined = BytesMut::with_capacity(first.len() + 1 + value.len());
                joined.put(first);
                joined.put_u8(b'\n');
                joined.put(value);
                Data::Joined(joined)
            }
            Data::Joined(mut joined) => {
                joined.put_u8(b'\n');
                joined.put(value);
                Data::Joined(joined)
            }
        };
    }

    /// The event a blank line ends; none when it had no data.
    fn dispatch(&mut self) -> Option<SseEvent> {
        let name = self.name.take();
        let data = match std::mem::take(&mut self.data) {
            Data::None => return None,
            Data::One(data) => data,
            Data::Joined(data) => data.freeze(),
        };
        Some(SseEvent {
            name,
            data,
            id: self.last_id.clone(),
        })
    }
}

/// A body of pieces as its events. After an error it ends.
pub struct SseStream<S> {
    body: S,
    decoder: SseDecoder,
    ended: bool,
}

impl<S> SseStream<S> {
    pub fn new(body: S, max_event_bytes: usize) -> SseStream<S> {
        SseStream {
            body,
            decoder: SseDecoder::new(max_event_bytes),
            ended: false,
        }
    }
}

impl<S, E> Stream for SseStream<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<SseEvent, SseError<E>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            match this.decoder.next_event() {
                Ok(Some(event)) => return Poll::Ready(Some(Ok(event))),
                Ok(None) => {}
                Err(max) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(SseError::TooLarge(max))));
                }
            }
            match std::task::ready!(Pin::new(&mut this.body).poll_next(cx)) {
                Some(Ok(piece)) => this.decoder.feed(piece),
                Some(Err(e)) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(SseError::Body(e))));
                }
                None => {
                    this.ended = true;
                    return Poll::Ready(None);
                }
            }
        }
    }
}

/// The events of `body`, each at most `max_event_bytes`.
pub fn sse_events<S, E>(body: S, max_event_bytes: usize) -> SseStream<Pin<Box<S>>>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    SseStream::new(Box::pin(body), max_event_bytes)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod hostile_tests;
