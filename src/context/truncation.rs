//! Oversized tool output: each result gets at most `min(pct% of the window, N tokens)`; a
//! larger one is cut, ends with `[TRUNCATED]`, and the cut is reported in `metadata.truncations`.

use crate::context::tokens::Tokenizer;
use crate::wire::response::Truncation;

pub const MARKER: &str = "\n\n[TRUNCATED]";
/// Tokens kept free for the marker.
const MARKER_TOKENS: u32 = 8;

#[derive(Debug, Clone, Copy)]
pub struct ToolBudget {
    pub tokens: u32,
}

impl ToolBudget {
    pub fn new(context_window: u32, pct: f64, max_tokens: u32) -> ToolBudget {
        let share = (f64::from(context_window) * pct / 100.0) as u32;
        ToolBudget {
            tokens: share.min(max_tokens).max(MARKER_TOKENS * 4),
        }
    }

    /// Cuts `text` to the budget; `None` when it fits.
    pub fn cut(&self, tok: Tokenizer, text: &str) -> Option<(String, usize, u32)> {
        let (prefix, original) = tok.prefix_within(text, self.tokens - MARKER_TOKENS)?;
        let end_index = prefix.chars().count();
        Some((format!("{prefix}{MARKER}"), end_index, original))
    }
}

pub fn record(tool_call_id: &str, tool_name: &str, end_index: usize, original: u32) -> Truncation {
    Truncation {
        tool_call_id: tool_call_id.to_owned(),
        start_index: 0,
        end_index,
        tool_name: tool_name.to_owned(),
        original_token_count: original,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_the_smaller_bound() {
        assert_eq!(ToolBudget::new(200_000, 15.0, 25_000).tokens, 25_000);
        assert_eq!(ToolBudget::new(10_000, 15.0, 25_000).tokens, 1_500);
    }

    #[test]
    fn cuts_to_the_budget_with_a_marker() {
        let budget = ToolBudget { tokens: 100 };
        let text = "word ".repeat(1000);
        let (cut, end, original) = budget.cut(Tokenizer::O200k, &text).unwrap();
        assert!(cut.ends_with("[TRUNCATED]"));
        assert!(Tokenizer::O200k.count(&cut) <= 100);
        assert_eq!(original, Tokenizer::O200k.count(&text));
        assert!(text.starts_with(&cut[..end]));
        assert!(budget.cut(Tokenizer::O200k, "short").is_none());
    }

    #[test]
    fn never_splits_a_character() {
        let text = "é🚀".repeat(2000);
        let (cut, end, _) = ToolBudget { tokens: 50 }
            .cut(Tokenizer::O200k, &text)
            .unwrap();
        assert!(!cut.contains('\u{FFFD}'));
        assert!(text.starts_with(&cut.chars().take(end).collect::<String>()));
    }
}
