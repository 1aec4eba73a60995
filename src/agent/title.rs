//! A conversation's title: one LLM call over its first user messages, without tools.

use serde_json::Value;

use super::error::RunError;
use super::{Agent, RunConfig};
use crate::llm::CompletionRequest;
use crate::wire::Message;

/// Characters of each opening message the title request quotes: a title needs the gist, and a
/// pasted log must not make the request large.
const QUOTED_CHARS: usize = 2000;

const INSTRUCTIONS: &str = "You name troubleshooting conversations. Reply with a title for the \
conversation that starts with the user's messages below: a few words saying what is being \
investigated, in the user's language, without quotes, without a trailing full stop, nothing else.";

impl Agent {
    /// A title of at most `max_chars` characters for a conversation that opens with `opening`.
    pub async fn title(
        &self,
        config: &RunConfig,
        opening: &[String],
        max_chars: usize,
    ) -> Result<String, RunError> {
        let setup = self.compile(config)?;
        let quoted: Vec<String> = opening
            .iter()
            .map(|text| text.chars().take(QUOTED_CHARS).collect())
            .collect();
        let messages = [
            Message::system(format!(
                "{INSTRUCTIONS} The title is at most {max_chars} characters long."
            )),
            Message::user(Value::String(quoted.join("\n\n---\n\n"))),
        ];
        let request = CompletionRequest {
            model: &setup.model,
            messages: &messages,
            tools: None,
            allow_tool_calls: false,
            response_format: None,
        };
        let completion = self
            .llm
            .complete(&request, None, |_| {})
            .await
            .map_err(|e| self.llm_failure(&setup, &e))?;
        if let Some(fallback) = &completion.fallback {
            // No stream to announce it in: the log says it.
            let note = self.fallback_note(&setup, fallback);
            tracing::warn!(requested_model = %note.requested_model, model = %note.model, reason = %note.reason, "a fallback model answered the title request");
        }
        // Not an event: masked as it is made, before it is cut (a cut secret is no longer
        // found whole).
        let answer = setup.masker.masked(completion.content.unwrap_or_default());
        let title = clean_title(&answer, max_chars);
        if title.is_empty() {
            return Err(RunError::new(
                super::RunErrorKind::Provider,
                "the LLM answered the title request with no text",
            ));
        }
        Ok(title)
    }
}

/// The first line of the answer, without a `Title:` label, quotes or a trailing full stop,
/// whitespace collapsed, cut to `max_chars` (at a word boundary when one is near).
fn clean_title(answer: &str, max_chars: usize) -> String {
    let line = answer
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let line = line
        .strip_prefix("Title:")
        .or_else(|| line.strip_prefix("title:"))
        .unwrap_or(line);
    // Shown in terminals and UIs: no escape sequences, NULs or text-direction overrides.
    let printable: String = line
        .chars()
        .filter(|&c| c.is_whitespace() || !(c.is_control() || is_bidi_control(c)))
        .collect();
    let words: Vec<&str> = printable.split_whitespace().collect();
    let joined = words.join(" ");
    let quotes: &[char] = &['"', '\'', '`', '*', '“', '”', '«', '»'];
    let title = joined.trim_matches(quotes).trim().trim_end_matches('.');
    if title.chars().count() <= max_chars {
        return title.to_owned();
    }
    let cut: String = title.chars().take(max_chars).collect();
    // A word cut in half reads worse than a shorter title, unless that loses most of it.
    match cut.rfind(' ') {
        Some(space) if space * 2 >= cut.len() => cut[..space].trim_end().to_owned(),
        _ => cut.trim_end().to_owned(),
    }
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::clean_title;

    #[test]
    fn takes_the_first_line_without_decoration() {
        assert_eq!(
            clean_title("\n  Title: \"Checkout pod   restarts.\"\nmore", 50),
            "Checkout pod restarts"
        );
        assert_eq!(clean_title("**OOM in payments**", 50), "OOM in payments");
    }

    #[test]
    fn cuts_to_the_limit_at_a_word_boundary_in_characters() {
        let title = clean_title("Checkout pod restarts after deploy", 20);
        assert_eq!(title, "Checkout pod");
        let accented = clean_title("Ééééééééééééééééééééééé", 5);
        assert_eq!(accented, "Ééééé");
        assert!(
            clean_title("a verylongwordthatdoesnotfit", 10)
                .chars()
                .count()
                <= 10
        );
        assert_eq!(clean_title("", 10), "");
    }
}
