//! The caps on what one server's listing can make triage send with every LLM request: a
//! tool's description over `max_description_bytes` is trimmed (prose cut short still says
//! what the tool does, so the tool stays usable), a schema over `max_schema_bytes` costs its
//! tool (a schema cut short is no schema). The cap on all definitions together is the
//! registry's (`tools/catalog.rs`).

use serde::Serialize;

/// A description cut to fit its cap.
#[derive(Debug)]
pub struct Trimmed {
    /// At most the cap: the kept start and the note.
    pub text: String,
    /// Bytes of the original kept.
    pub kept: usize,
}

/// `text` cut at a character boundary so that, with a note telling the model it was cut and
/// how long it was, it takes at most `max` bytes; `None` when it fits as it is.
pub fn trim_description(text: &str, max: usize) -> Option<Trimmed> {
    if text.len() <= max {
        return None;
    }
    let note = |kept: usize| {
        format!(
            "\u{2026} [description trimmed by triage: the first {kept} of its {} bytes]",
            text.len()
        )
    };
    // The longest the note can be: `kept` has at most as many digits as the whole length.
    let room = max.saturating_sub(note(text.len()).len());
    let cut = (0..=room)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    let kept = text[..cut].trim_end();
    let mut out = String::with_capacity(max);
    out.push_str(kept);
    out.push_str(&note(kept.len()));
    Some(Trimmed {
        text: out,
        kept: kept.len(),
    })
}

/// The length of `value` as compact JSON, counted without building the text.
pub fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A map of JSON values always serialises; a failure would count what was written.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_description_that_fits_is_kept_as_it_is() {
        assert!(trim_description("short", 256).is_none());
        assert!(trim_description(&"x".repeat(256), 256).is_none());
    }

    #[test]
    fn a_long_description_is_cut_at_a_character_boundary_with_a_note() {
        for unit in ["a", "é", "€", "🦀", "a€🦀 "] {
            let text = unit.repeat((1 << 20) / unit.len());
            for max in [256, 257, 258, 259, 4096] {
                let t = trim_description(&text, max).expect("trimmed");
                assert!(t.text.len() <= max, "{max}: {}", t.text.len());
                assert!(text.starts_with(&t.text[..t.kept]), "{unit} {max}");
                assert!(t.kept > max / 2, "most of the room is text: {}", t.kept);
                let note = &t.text[t.kept..];
                assert_eq!(
                    note,
                    format!(
                        "\u{2026} [description trimmed by triage: the first {} of its {} bytes]",
                        t.kept,
                        text.len()
                    )
                );
            }
        }
    }

    #[test]
    fn trailing_space_is_not_kept() {
        let text = format!("{}{}", "word ".repeat(100), "x".repeat(400));
        let t = trim_description(&text, 300).expect("trimmed");
        assert!(!t.text[..t.kept].ends_with(' '), "{}", t.text);
    }

    #[test]
    fn the_json_length_is_the_compact_encoding() {
        let v = json!({"type": "object", "properties": {"a": {"enum": ["x", "é"]}}});
        assert_eq!(json_len(&v), serde_json::to_string(&v).unwrap().len());
    }
}
