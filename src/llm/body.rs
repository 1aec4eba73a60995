//! LLM request bodies in parts. What every call repeats, the system prompt and the tool
//! definitions (9 of a first call's 10 KB with the default toolsets), is encoded once and
//! shared by every body that sends it; only the rest is the call's own. Thousands of calls
//! opening at once each held a copy until their answer began: at 10,000 streams that was a
//! fifth of a stream's memory (BENCHMARKS.md, session 14).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// A request body as a list of byte strings sent one after another.
#[derive(Clone, Debug, Default)]
pub struct Parts(Vec<Bytes>);

impl Parts {
    pub fn push(&mut self, part: Bytes) {
        if !part.is_empty() {
            self.0.push(part);
        }
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    /// The body in one piece: reqwest resends only such a body when it follows a 307 or 308.
    pub fn whole(&self) -> Bytes {
        match self.0.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            parts => Bytes::from(parts.concat()),
        }
    }

    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// Whether the two bodies send some of the same bytes (a shared part), not copies.
    #[cfg(test)]
    pub fn shares_with(&self, other: &Parts) -> bool {
        self.0.iter().any(|a| {
            other
                .0
                .iter()
                .any(|b| a.as_ptr() == b.as_ptr() && a.len() == b.len())
        })
    }

    /// The body for reqwest, its length known (so sent with `content-length`).
    pub fn to_reqwest(&self) -> reqwest::Body {
        match self.0.as_slice() {
            [] | [_] => reqwest::Body::from(self.whole()),
            _ => reqwest::Body::wrap(PartsBody {
                remaining: self.len() as u64,
                parts: self.0.clone().into_iter(),
            }),
        }
    }
}

struct PartsBody {
    parts: std::vec::IntoIter<Bytes>,
    remaining: u64,
}

impl http_body::Body for PartsBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let part = self.parts.next();
        if let Some(part) = &part {
            self.remaining -= part.len() as u64;
        }
        Poll::Ready(part.map(|part| Ok(Frame::data(part))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// Encoded parts that calls share, those used again first. A handful covers the prompts and
/// tool sets a server has (one per model and toolset choice). A new part goes in last and
/// moves up when it is used again, so parts used once (a run's own `additional_system_prompt`,
/// a client's frontend tools) only replace each other in the last place, never the server's.
pub struct SharedParts {
    entries: Mutex<VecDeque<Entry>>,
}

struct Entry {
    /// A shared prompt is recognised by its allocation, so a lookup compares no text.
    prompt: Option<Arc<str>>,
    encoded: Bytes,
}

const ENTRIES: usize = 8;

/// Larger parts are each call's own: kept here they would hold memory for as long as they
/// stay among the recent ones.
const MAX_SHARED: usize = 256 * 1024;

impl SharedParts {
    pub const fn new() -> SharedParts {
        SharedParts {
            entries: Mutex::new(VecDeque::new()),
        }
    }

    /// The encoding of a message built around `prompt`, made by `encode` the first time.
    pub fn prompt<E>(
        &self,
        prompt: &Arc<str>,
        encode: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Bytes, E> {
        let same = |e: &Entry| e.prompt.as_ref().is_some_and(|p| Arc::ptr_eq(p, prompt));
        if let Some(found) = self.find(same) {
            return Ok(found);
        }
        let encoded = Bytes::from(encode()?);
        Ok(self.keep(same, Some(prompt.clone()), encoded))
    }

    /// `text` as a shared part (the tool definitions: the same bytes on every call).
    pub fn text(&self, text: &str) -> Bytes {
        let same = |e: &Entry| e.prompt.is_none() && e.encoded == text.as_bytes();
        if let Some(found) = self.find(same) {
            return found;
        }
        self.keep(same, None, Bytes::copy_from_slice(text.as_bytes()))
    }

    fn find(&self, matches: impl Fn(&Entry) -> bool) -> Option<Bytes> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let at = entries.iter().position(matches)?;
        let entry = entries.remove(at)?;
        let found = entry.encoded.clone();
        entries.push_front(entry);
        Some(found)
    }

    /// Keeps `encoded` unless a call encoding the same part at once (`same`) kept it first.
    fn keep(
        &self,
        same: impl Fn(&Entry) -> bool,
        prompt: Option<Arc<str>>,
        encoded: Bytes,
    ) -> Bytes {
        if encoded.len() > MAX_SHARED {
            return encoded;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = entries.iter().find(|e| same(e)) {
            return kept.encoded.clone();
        }
        entries.truncate(ENTRIES - 1);
        entries.push_back(Entry {
            prompt,
            encoded: encoded.clone(),
        });
        encoded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn parts_are_sent_in_order_with_their_total_length() {
        let mut parts = Parts::default();
        for part in ["{\"a\":", "", "[1,2]", "}"] {
            parts.push(Bytes::from(part));
        }
        assert_eq!(parts.len(), 11);
        assert_eq!(parts.whole(), "{\"a\":[1,2]}");
        let body = PartsBody {
            remaining: parts.len() as u64,
            parts: parts.0.clone().into_iter(),
        };
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(11));
        let sent = body.collect().await.map(|b| b.to_bytes());
        assert_eq!(sent.ok().as_deref(), Some(&b"{\"a\":[1,2]}"[..]));
    }

    #[test]
    fn shared_parts_are_made_once_and_parts_used_once_do_not_push_out_the_others() {
        let shared = SharedParts::new();
        let prompt: Arc<str> = Arc::from("You are triage.");
        let made = std::cell::Cell::new(0);
        let encode = |p: &Arc<str>| {
            shared.prompt(p, || {
                made.set(made.get() + 1);
                Ok::<_, ()>(format!("{{\"content\":\"{p}\"}}").into_bytes())
            })
        };
        let first = encode(&prompt);
        let again = encode(&prompt);
        assert_eq!(first, again);
        assert_eq!(made.get(), 1, "encoded once");
        // The same text in another allocation is another prompt: recognised by pointer only.
        let copy: Arc<str> = Arc::from("You are triage.");
        let _ = encode(&copy);
        assert_eq!(made.get(), 2);

        let tools = shared.text("[{\"type\":\"function\"}]");
        let same = shared.text(&String::from("[{\"type\":\"function\"}]"));
        assert_eq!(tools.as_ptr(), same.as_ptr(), "one copy of the tools");

        // Parts used once replace each other in the last place; those used again stay.
        for i in 0..3 * ENTRIES {
            let _ = shared.text(&format!("other {i}"));
        }
        let kept = shared.text("[{\"type\":\"function\"}]");
        assert_eq!(tools.as_ptr(), kept.as_ptr(), "kept through many one-offs");
        let _ = encode(&prompt);
        assert_eq!(made.get(), 2, "the prompt too");
        let kept = |part: &Bytes| {
            let entries = shared.entries.lock().unwrap();
            entries.iter().any(|e| e.encoded == *part)
        };
        let last = 3 * ENTRIES - 1;
        assert!(
            kept(&Bytes::from(format!("other {last}"))),
            "the latest one-off"
        );
        assert!(
            !kept(&Bytes::from(format!("other {}", last - 1))),
            "replaced by it"
        );
        assert!(shared.entries.lock().map_or(0, |e| e.len()) <= ENTRIES);
    }

    #[test]
    fn a_part_too_large_to_keep_is_still_returned() {
        let shared = SharedParts::new();
        let large = "x".repeat(MAX_SHARED + 1);
        assert_eq!(shared.text(&large).len(), large.len());
        assert_eq!(shared.entries.lock().map_or(1, |e| e.len()), 0);
    }
}
