//! Oversized tool output: each result gets at most `min(pct% of the window, N tokens)`; a
//! larger one is cut, ends with `[TRUNCATED]`, and the cut is reported in `metadata.truncations`.

use crate::context::tokens::{Tokenizer, count_off_workers};
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

/// A tool result after the budget: its content and data, and where the content was cut (its
/// end index and original token count) if it was.
#[derive(Debug, PartialEq, Eq)]
pub struct CutResult {
    pub content: String,
    pub data: String,
    pub truncated: Option<(usize, u32)>,
}

impl ToolBudget {
    /// Cuts a tool result's content, and its data when the content was cut.
    pub fn cut_result(&self, tok: Tokenizer, content: String, data: String) -> CutResult {
        let Some((cut, end_index, original)) = self.cut(tok, &content) else {
            return CutResult {
                content,
                data,
                truncated: None,
            };
        };
        // A successful result's data is the content itself: reuse the cut, tokenising once.
        let data = if data == content {
            cut.clone()
        } else {
            self.cut(tok, &data).map_or(data, |(cut, _, _)| cut)
        };
        CutResult {
            content: cut,
            data,
            truncated: Some((end_index, original)),
        }
    }

    /// `cut_result` where it cannot stall the async workers: a 1 MiB output takes tens of
    /// milliseconds to tokenise. `None` only if the counting panicked.
    pub async fn cut_result_off_workers(
        self,
        tok: Tokenizer,
        content: String,
        data: String,
    ) -> Option<CutResult> {
        let size = content.len() + if data == content { 0 } else { data.len() };
        count_off_workers(size, move || self.cut_result(tok, content, data))
            .await
            .ok()
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

    #[tokio::test]
    async fn a_large_result_cut_off_the_workers_is_the_same_cut() {
        let budget = ToolBudget { tokens: 25_000 };
        let content = "line 42: error=timeout pod/api-7f9c ready ".repeat(25_000);
        assert!(content.len() > 1 << 20);
        let other_data = "{\"x\": 1} ".repeat(200_000);
        for data in [content.clone(), other_data] {
            let inline = budget.cut_result(Tokenizer::O200k, content.clone(), data.clone());
            let off = budget
                .cut_result_off_workers(Tokenizer::O200k, content.clone(), data.clone())
                .await
                .expect("counted");
            assert_eq!(off, inline);
            let (cut, end, original) = budget.cut(Tokenizer::O200k, &content).expect("cut");
            assert_eq!(off.content, cut);
            assert_eq!(off.truncated, Some((end, original)));
            assert_ne!(off.data, data, "the data is cut too");
        }
        let small = budget
            .cut_result_off_workers(Tokenizer::O200k, "ok".into(), "ok".into())
            .await
            .expect("counted");
        assert_eq!(small.truncated, None);
        assert_eq!(small.content, "ok");
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
