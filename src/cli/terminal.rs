//! Text from elsewhere (a server, a model, another user) made safe to print on a terminal:
//! control characters (escape sequences that recolour, retitle or rewrite the screen, carriage
//! returns that overwrite a line, the 8-bit CSI) and bidirectional overrides that reorder what
//! follows them are shown escaped, as `\u{1b}`.

use serde_json::Value;

/// `s` safe for a terminal, keeping line breaks and tabs.
pub(crate) fn clean_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\n' || c == '\t' || !unsafe_char(c) {
            out.push(c);
        } else {
            out.push_str(&escaped(c));
        }
    }
    out
}

/// `s` safe for a terminal on one line: line breaks become spaces.
pub(crate) fn clean_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\t' => out.push(' '),
            c if unsafe_char(c) => out.push_str(&escaped(c)),
            c => out.push(c),
        }
    }
    out
}

/// Control characters (C0, DEL, C1 — C1 includes the 8-bit CSI), the bidirectional controls
/// that reorder what follows them, and the line/paragraph separators.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{2028}' | '\u{2029}')
}

fn escaped(c: char) -> String {
    format!("\\u{{{:x}}}", c as u32)
}

/// JSON for a terminal: serde escapes C0 controls, this escapes the rest `unsafe_char` names
/// (they can only stand inside strings, so the result is the same JSON).
pub(crate) fn json_for_terminal(value: &Value) -> String {
    json_text_for_terminal(&serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into()))
}

/// Pretty JSON text (serde's: line breaks are its only control characters) for a terminal.
pub(crate) fn json_text_for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c != '\n' && unsafe_char(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// At most `max` characters of `s`, with an ellipsis and the count of what was cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((at, _)) => {
            let rest = s[at..].chars().count();
            format!("{}… ({rest} more characters)", &s[..at])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escape_sequences_never_reach_the_terminal() {
        let hostile = "red\x1b[31m title\x1b]0;pwned\x07 \r over\u{9b}2J \u{202e}txt.exe";
        for out in [clean_text(hostile), clean_line(hostile)] {
            assert!(
                !out.chars().any(unsafe_char),
                "an unsafe character survived: {out:?}"
            );
            assert!(out.contains("\\u{1b}[31m"), "{out}");
        }
        assert_eq!(clean_text("a\nb\tc"), "a\nb\tc");
        assert_eq!(clean_line("a\nb"), "a b");
        let json = json_for_terminal(&json!({"t": "\u{1b}\u{9b}\u{202e}x"}));
        assert!(!json.chars().any(|c| c != '\n' && unsafe_char(c)), "{json}");
        assert_eq!(
            serde_json::from_str::<Value>(&json).unwrap()["t"],
            "\u{1b}\u{9b}\u{202e}x"
        );
    }

    #[test]
    fn long_text_is_cut_and_says_so() {
        assert_eq!(truncate("abcdef", 3), "abc… (3 more characters)");
        assert_eq!(truncate("abc", 3), "abc");
    }
}
