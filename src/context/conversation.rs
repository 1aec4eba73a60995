//! A conversation with its token ledger: each message is counted once, when it joins, and the
//! count is cached in the message (`token_count`) so a follow-up turn does not count it again.

use std::ops::RangeInclusive;

use serde_json::Value;

use crate::context::tokens::{
    IMAGE_TOKENS, MAX_TOKEN_BYTES, MESSAGE_OVERHEAD, MessageTokens, Tokenizer, count_message,
};
use crate::wire::Message;
use crate::wire::response::TokenBreakdown;

#[derive(Debug, Clone)]
pub struct Conversation {
    tokenizer: Tokenizer,
    messages: Vec<Message>,
    counts: Vec<MessageTokens>,
    total: u32,
}

impl Conversation {
    pub fn new(tokenizer: Tokenizer, messages: Vec<Message>) -> Self {
        let mut conv = Conversation {
            tokenizer,
            messages: Vec::with_capacity(messages.len() + 4),
            counts: Vec::with_capacity(messages.len() + 4),
            total: 0,
        };
        for m in messages {
            conv.push(m);
        }
        conv
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }

    /// Tokens of all messages (not counting tool definitions).
    pub fn total(&self) -> u32 {
        self.total
    }

    pub fn push(&mut self, message: Message) {
        let at = self.messages.len();
        self.insert(at, message);
    }

    pub fn insert(&mut self, at: usize, mut message: Message) {
        let counts = self.measure(&mut message);
        self.total = self.total.saturating_add(counts.total());
        self.messages.insert(at, message);
        self.counts.insert(at, counts);
    }

    pub fn replace(&mut self, at: usize, mut message: Message) {
        let counts = self.measure(&mut message);
        self.total = self
            .total
            .saturating_sub(self.counts[at].total())
            .saturating_add(counts.total());
        self.messages[at] = message;
        self.counts[at] = counts;
    }

    /// Mutable access for edits that do not change the counted text (flags on tool calls).
    pub fn message_mut(&mut self, at: usize) -> &mut Message {
        &mut self.messages[at]
    }

    /// Counts a message unless it carries a plausible cached count; a cached total is split
    /// into text and tool calls by counting only the (small) tool-call part again. A cached
    /// count is the client's word, so one its message's size rules out (in either direction:
    /// too many tokens, or too few, which would skip compaction) is recounted.
    fn measure(&self, message: &mut Message) -> MessageTokens {
        if let Some(total) = message.token_count
            && plausible_counts(message).contains(&total)
        {
            if message.tool_calls().is_empty() {
                return MessageTokens {
                    text: total,
                    tool_calls: 0,
                };
            }
            let tool_calls: u32 = message
                .tool_calls()
                .iter()
                .map(|c| {
                    MESSAGE_OVERHEAD
                        + self.tokenizer.count(&c.function.name)
                        + self.tokenizer.count(&c.function.arguments)
                })
                .sum();
            return MessageTokens {
                text: total.saturating_sub(tool_calls),
                tool_calls: tool_calls.min(total),
            };
        }
        let counts = count_message(self.tokenizer, message);
        message.token_count = Some(counts.total());
        counts
    }

    pub fn breakdown(&self, tools_tokens: u32) -> TokenBreakdown {
        let mut b = TokenBreakdown {
            tools_tokens,
            ..TokenBreakdown::default()
        };
        for (m, c) in self.messages.iter().zip(&self.counts) {
            match m.role.as_str() {
                "system" | "developer" => b.system_tokens += c.total(),
                "user" => b.user_tokens += c.total(),
                "assistant" => {
                    b.assistant_tokens += c.text;
                    b.tools_to_call_tokens += c.tool_calls;
                }
                _ => b.other_tokens += c.total(),
            }
        }
        b.total_tokens = b.tools_tokens
            + b.system_tokens
            + b.user_tokens
            + b.tools_to_call_tokens
            + b.assistant_tokens
            + b.other_tokens;
        b
    }
}

/// The counts a message of this size can have: at most one token per byte of text, at least
/// one per `MAX_TOKEN_BYTES`; images count the fixed estimate, and every message and tool call
/// its overhead, as `count_message` does. Cheap: lengths only.
fn plausible_counts(m: &Message) -> RangeInclusive<u32> {
    let mut fixed = u64::from(MESSAGE_OVERHEAD);
    let mut text_bytes = 0u64;
    if let Some(s) = m.content.as_str() {
        text_bytes += s.len() as u64;
    }
    for p in m.content.parts().unwrap_or_default() {
        if p.get("type").and_then(Value::as_str) == Some("image_url") {
            fixed += u64::from(IMAGE_TOKENS);
        } else if let Some(t) = p.get("text").and_then(Value::as_str) {
            text_bytes += t.len() as u64;
        }
    }
    text_bytes += m.reasoning_content.as_ref().map_or(0, |r| r.len() as u64);
    for c in m.tool_calls() {
        fixed += u64::from(MESSAGE_OVERHEAD);
        text_bytes += (c.function.name.len() + c.function.arguments.len()) as u64;
    }
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    clamp(fixed + text_bytes / MAX_TOKEN_BYTES)..=clamp(fixed + text_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ToolCall;
    use serde_json::json;

    #[test]
    fn counts_once_and_caches_in_the_message() {
        let mut conv = Conversation::new(Tokenizer::O200k, vec![Message::system("be brief")]);
        conv.push(Message::user(json!("why is the pod crashing")));
        assert!(conv.messages().iter().all(|m| m.token_count.is_some()));
        let total: u32 = conv.messages().iter().filter_map(|m| m.token_count).sum();
        assert_eq!(conv.total(), total);
    }

    #[test]
    fn trusts_cached_counts_and_splits_tool_calls() {
        // 1200 bytes of text: a cached 1000 is plausible (the real count is ~600).
        let mut m = Message::assistant(
            Some("ab ".repeat(400)),
            None,
            vec![ToolCall::new(
                "c".into(),
                "bash".into(),
                "{\"command\":\"ls\"}".into(),
            )],
        );
        m.token_count = Some(1000);
        let conv = Conversation::new(Tokenizer::O200k, vec![m]);
        let b = conv.breakdown(7);
        assert_eq!(b.tools_to_call_tokens + b.assistant_tokens, 1000);
        assert!(b.tools_to_call_tokens > 0 && b.tools_to_call_tokens < 100);
        assert_eq!(b.total_tokens, 1007);
    }

    #[test]
    fn forged_counts_are_recounted() {
        let mut m = Message::user(json!("short"));
        m.token_count = Some(u32::MAX);
        let mut conv = Conversation::new(Tokenizer::O200k, vec![m.clone(), m]);
        assert!(conv.total() < 100, "{}", conv.total());
        conv.push(Message::user(json!("more")));
        assert_eq!(
            conv.messages()[0].token_count,
            conv.messages()[1].token_count
        );
    }

    #[test]
    fn implausibly_small_counts_are_recounted() {
        // 101 kB of prose, ~13,000 tokens: a cached 0 (or 700) would hide it from compaction.
        let text = "checkout latency error ".repeat(4_400);
        let real = count_message(Tokenizer::O200k, &Message::user(json!(text))).total();
        for claimed in [0, 100, 700] {
            let mut m = Message::user(json!(text));
            m.token_count = Some(claimed);
            let conv = Conversation::new(Tokenizer::O200k, vec![m]);
            assert_eq!(conv.total(), real, "claimed {claimed}");
            assert_eq!(conv.messages()[0].token_count, Some(real));
        }
    }

    /// The densest texts either encoding packs, and the sparsest: their true counts are
    /// always plausible, so a count triage itself cached is never recounted.
    #[test]
    fn true_counts_of_extreme_texts_are_plausible() {
        let base64: String = (0..100_000u32)
            .map(|i| {
                let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                char::from(alphabet[(i.wrapping_mul(2_654_435_761) >> 7) as usize % 64])
            })
            .collect();
        let texts = [
            " ".repeat(100_000),
            "-".repeat(100_000),
            "\n".repeat(100_000),
            "a".repeat(100_000),
            "1234567890".repeat(10_000),
            "日本語".repeat(10_000),
            "😀".repeat(25_000),
            base64,
            String::new(),
        ];
        let call = |args: &str| ToolCall::new("c".into(), "bash".into(), args.into());
        for tok in [Tokenizer::O200k, Tokenizer::Cl100k] {
            for text in &texts {
                let messages = [
                    Message::user(json!(text)),
                    Message::user(json!([{"type": "text", "text": text},
                        {"type": "image_url", "image_url": {"url": "data:x"}}])),
                    Message::assistant(Some(text.clone()), None, vec![call(text), call("{}")]),
                ];
                for m in messages {
                    let real = count_message(tok, &m).total();
                    let range = plausible_counts(&m);
                    assert!(range.contains(&real), "{tok:?}: {real} not in {range:?}");
                }
            }
        }
    }

    #[test]
    fn a_count_at_the_lower_bound_is_trusted() {
        // 100 kB of spaces: 786 tokens, the densest text there is; the bound allows 785.
        let mut m = Message::user(json!(" ".repeat(100_000)));
        let floor = *plausible_counts(&m).start();
        assert_eq!(floor, MESSAGE_OVERHEAD + 781);
        m.token_count = Some(floor);
        assert_eq!(Conversation::new(Tokenizer::O200k, vec![m]).total(), floor);
    }

    #[test]
    fn breakdown_by_role() {
        let mut conv = Conversation::new(Tokenizer::O200k, vec![]);
        conv.push(Message::system("s"));
        conv.push(Message::user(json!("u")));
        conv.push(Message::tool("c", "bash", "out".into()));
        conv.replace(0, Message::system("a longer system prompt"));
        let b = conv.breakdown(0);
        assert_eq!(b.system_tokens, conv.messages()[0].token_count.unwrap());
        assert_eq!(b.other_tokens, conv.messages()[2].token_count.unwrap());
        assert_eq!(b.total_tokens, conv.total());
    }
}
