//! The JSON of long strings that every request repeats: the system prompts. Serialising a
//! 9 KB prompt escapes it byte by byte, and each request does it at least twice (the LLM call
//! and the answer's `conversation_history`); telling that a string is one of these is a
//! length check and a memcmp. Only serde_json serialises messages, which writes the stored
//! text as it is (and `to_value` parses it back), so the output is byte for byte the same.

use std::sync::{Arc, RwLock};

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// Shorter strings are escaped as usual: the lookup would not pay.
const MIN_LEN: usize = 1024;
/// One per (section set, tokenizer) in use; a bound, not a cache to evict from.
const MAX_ENTRIES: usize = 64;

struct Known {
    text: Box<str>,
    json: Box<RawValue>,
}

static KNOWN: RwLock<Vec<Arc<Known>>> = RwLock::new(Vec::new());

/// Keeps the escaped JSON of `text` for later serialisations (the prompt cache calls this).
pub fn remember(text: &str) {
    if text.len() < MIN_LEN || lookup(text).is_some() {
        return;
    }
    let Ok(json) = serde_json::value::to_raw_value(text) else {
        return;
    };
    if let Ok(mut known) = KNOWN.write()
        && known.len() < MAX_ENTRIES
    {
        known.push(Arc::new(Known {
            text: text.into(),
            json,
        }));
    }
}

fn lookup(text: &str) -> Option<Arc<Known>> {
    if text.len() < MIN_LEN {
        return None;
    }
    let known = KNOWN.read().ok()?;
    known
        .iter()
        .find(|k| k.text.len() == text.len() && *k.text == *text)
        .cloned()
}

/// A string, written from its stored JSON when it is a known one.
pub struct Str<'a>(pub &'a str);

impl Serialize for Str<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match lookup(self.0) {
            Some(known) => known.json.serialize(s),
            None => self.0.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Message;
    use crate::wire::message::ForLlm;

    #[test]
    fn a_known_string_serialises_as_any_other() {
        let text = format!("Line \"one\"\n\ttab \u{1} ünïcode {}", "x".repeat(MIN_LEN));
        let message = Message::system(text.clone());
        let before = serde_json::to_string(&message).unwrap();
        let before_llm = serde_json::to_string(&ForLlm(&message)).unwrap();
        remember(&text);
        assert!(lookup(&text).is_some(), "remembered");
        assert_eq!(serde_json::to_string(&message).unwrap(), before);
        assert_eq!(
            serde_json::to_string(&ForLlm(&message)).unwrap(),
            before_llm
        );
        let value = serde_json::to_value(&message).unwrap();
        assert_eq!(value["content"], serde_json::Value::String(text.clone()));
        let back: Message = serde_json::from_str(&before).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn short_and_unknown_strings_are_not_looked_up() {
        remember("short");
        assert!(lookup("short").is_none());
        let other = "y".repeat(MIN_LEN + 5);
        assert!(lookup(&other).is_none());
    }
}
