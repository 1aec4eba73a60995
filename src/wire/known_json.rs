//! The JSON of message contents. serde_json escapes a string a byte at a time, and every
//! request writes its messages several times (each LLM call, the answer's
//! `conversation_history`). The long strings every request repeats (the system prompts) are
//! written from their stored JSON: telling that a string is one of them is a length check and a
//! memcmp. Other contents are escaped here a word at a time. Only serde_json serialises
//! messages, and it writes such JSON as it is (`to_value` parses it back), so the output is
//! byte for byte serde_json's own.

use std::sync::{Arc, RwLock};

use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::value::RawValue;

/// Shorter strings are escaped as usual: the lookup would not pay.
const MIN_LEN: usize = 1024;
/// Shorter strings are left to serde_json: a buffer would cost more than its byte loop.
const MIN_ESCAPE_LEN: usize = 64;
/// serde_json's raw-value marker (its `raw_value` feature, which triage enables). Writing, its
/// `RawValue` serialises as a struct of this name with one field of this name, whose string is
/// JSON written as it is; reading, `Value` takes `{"<this>": "[1, 2]"}` as `[1,2]`.
pub(crate) const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";
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

/// A string, written from its stored JSON when it is a known one, else escaped here. For
/// serde_json only: another serializer (YAML, minijinja) would see serde_json's raw-value
/// marker, a struct, where a string of 64 bytes or more was.
pub struct Str<'a>(pub &'a str);

impl Serialize for Str<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Some(known) = lookup(self.0) {
            return known.json.serialize(s);
        }
        if self.0.len() < MIN_ESCAPE_LEN {
            return self.0.serialize(s);
        }
        let json = escaped(self.0);
        let mut raw = s.serialize_struct(RAW_VALUE_TOKEN, 1)?;
        raw.serialize_field(RAW_VALUE_TOKEN, json.as_str())?;
        raw.end()
    }
}

/// `text` as a JSON string, as serde_json writes it: `"` and `\` escaped, the control
/// characters as `\b \f \n \r \t` or `\u00xx`, everything else as it is. Eight bytes are
/// checked at once; most words of prose need no escape.
fn escaped(text: &str) -> String {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    // Nonzero when some byte of `word` is zero; exact as a yes/no answer.
    let has_zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGH;
    let needs_escape = |word: u64| {
        // Below 0x20: `word - 0x20…` borrows into the high bit of such a byte only, and a
        // byte of 0x80 or more has its own high bit set, which `!word` clears.
        let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
        control
            | has_zero(word ^ (ONES * u64::from(b'"')))
            | has_zero(word ^ (ONES * u64::from(b'\\')))
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(bytes.len() + bytes.len() / 16 + 2);
    out.push('"');
    let mut unicode = *b"\\u0000";
    let mut plain = 0; // start of the text not yet copied
    let mut at = 0;
    while at < bytes.len() {
        let byte = match bytes
            .get(at..at + 8)
            .and_then(|w| <[u8; 8]>::try_from(w).ok())
        {
            Some(word) => {
                let flags = needs_escape(u64::from_le_bytes(word));
                if flags == 0 {
                    at += 8;
                    continue;
                }
                // The lowest flag is exact: a borrow only runs upwards from a flagged byte.
                at += (flags.trailing_zeros() / 8) as usize;
                bytes[at]
            }
            None => bytes[at],
        };
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1f => {
                unicode[4] = HEX[usize::from(byte >> 4)];
                unicode[5] = HEX[usize::from(byte & 0xf)];
                std::str::from_utf8(&unicode).unwrap_or_default()
            }
            _ => {
                at += 1;
                continue;
            }
        };
        // `plain` and `at` are at ASCII bytes, so at character boundaries: slicing checks
        // that, and the text is not validated again.
        out.push_str(&text[plain..at]);
        out.push_str(escape);
        at += 1;
        plain = at;
    }
    out.push_str(&text[plain..]);
    out.push('"');
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Message;
    use crate::wire::message::ForLlm;
    use proptest::prelude::*;

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

    /// serde_json's own output for a string, and its `Value`, however the string is written.
    fn assert_as_serde_json(text: &str) {
        assert_eq!(
            serde_json::to_string(&Str(text)).unwrap(),
            serde_json::to_string(text).unwrap(),
            "{text:?}"
        );
        assert_eq!(
            serde_json::to_value(Str(text)).unwrap(),
            serde_json::Value::String(text.to_owned())
        );
    }

    #[test]
    fn every_ascii_byte_at_every_place_of_a_word_is_escaped_as_serde_json_does() {
        for byte in 0u8..0x80 {
            for at in 0..17 {
                let mut text = "a".repeat(MIN_ESCAPE_LEN + 9);
                text.replace_range(at..at + 1, &char::from(byte).to_string());
                assert_as_serde_json(&text);
                // Two in a word, and the same byte at its end.
                text.replace_range(at + 3..at + 4, &char::from(byte).to_string());
                text.push(char::from(byte));
                assert_as_serde_json(&text);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn contents_are_written_as_serde_json_writes_them(
            chars in proptest::collection::vec(
                prop_oneof![
                    4 => proptest::char::range('a', 'z'),
                    1 => proptest::char::range('\u{0}', '\u{20}'),
                    1 => proptest::sample::select(vec!['"', '\\', '/', '\u{7f}', 'é', '€', '𝄞', '\u{2028}']),
                    1 => any::<char>(),
                ],
                0..300,
            )
        ) {
            let text: String = chars.into_iter().collect();
            assert_as_serde_json(&text);
        }
    }
}
