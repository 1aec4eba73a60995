//! Token counting with tiktoken's encodings, built once per process.
//!
//! The `tiktoken` crate gives the same tokens as OpenAI's tiktoken (and as tiktoken-rs, checked
//! on 20,286 texts per encoding) from a compact vocabulary: o200k holds ~10 MiB where tiktoken-rs
//! held ~46 MiB in three copies, and counting is several times faster.

use serde_json::Value;

use crate::wire::Message;

/// Fixed per-message overhead (role and separators), as OpenAI's chat format counts it.
pub const MESSAGE_OVERHEAD: u32 = 4;
/// Estimate for one image: OpenAI's cost of a 1024×1024 high-detail image (85 + 4×170); the
/// real size is unknown without decoding it, and a generous estimate keeps compaction safe.
pub const IMAGE_TOKENS: u32 = 765;
/// The longest token of both encodings, in bytes (128 spaces), so no text has fewer tokens than
/// its bytes / 128. Text comes close only in long runs: spaces pack ~128 bytes a token, runs of
/// `=`, `-`, `*` or `/` 64, newlines 16-32, a repeated letter 8, prose 5-6, CJK and emoji 2-4.5,
/// digits and JSON 3, base64 1.5 (measured with both encodings on 100 kB samples).
pub const MAX_TOKEN_BYTES: u64 = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tokenizer {
    O200k,
    Cl100k,
}

impl Tokenizer {
    /// cl100k for the GPT-4 / GPT-3.5 generation, o200k for the o-series, gpt-4o and later, and
    /// for unknown models (the closest guess for current models).
    pub fn for_model(name: &str) -> Tokenizer {
        let name = name.to_ascii_lowercase();
        let name = name.rsplit('/').next().unwrap_or(&name);
        let cl100k = ["gpt-4-", "gpt-3.5", "text-embedding"]
            .iter()
            .any(|p| name.starts_with(p))
            || name == "gpt-4";
        if cl100k && !name.starts_with("gpt-4o") {
            Tokenizer::Cl100k
        } else {
            Tokenizer::O200k
        }
    }

    pub fn count(self, text: &str) -> u32 {
        if text.is_empty() {
            return 0;
        }
        u32::try_from(self.encoding().count(text)).unwrap_or(u32::MAX)
    }

    /// The longest prefix of `text` that fits in `max_tokens`, with its token count before the
    /// cut; `None` when the whole text fits.
    pub fn prefix_within(self, text: &str, max_tokens: u32) -> Option<(String, u32)> {
        // A token is at least one byte: text no longer than the budget fits without encoding
        // it (most tool results, which are counted again when they join the conversation).
        if text.len() <= max_tokens as usize {
            return None;
        }
        let bpe = self.encoding();
        let tokens = bpe.encode(text);
        let total = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
        if total <= max_tokens {
            return None;
        }
        let bytes = bpe.decode(&tokens[..max_tokens as usize]);
        // A cut inside a multi-byte character leaves a partial one: drop it.
        let prefix = String::from_utf8_lossy(&bytes)
            .trim_end_matches('\u{FFFD}')
            .to_owned();
        Some((prefix, total))
    }

    /// Whether `count(a + b) == count(a) + count(b)` for every `a` that ends with a newline:
    /// true when `b` starts with a character that no pre-tokenizer piece ending in a newline
    /// takes in (whitespace, and `/`, which o200k joins to punctuation and newlines before it).
    /// BPE merges only inside a piece, and no piece pattern looks behind.
    pub fn splits_after_newline(b: &str) -> bool {
        b.chars()
            .next()
            .is_some_and(|c| !c.is_whitespace() && c != '/')
    }

    /// Special-token text such as `<|endoftext|>` is counted as ordinary text, as it is sent.
    fn encoding(self) -> &'static tiktoken::CoreBpe {
        let name = match self {
            Tokenizer::O200k => "o200k_base",
            Tokenizer::Cl100k => "cl100k_base",
        };
        // Both names are built into the crate; `None` would be a build-time mistake.
        tiktoken::get_encoding(name).expect("built-in tiktoken encoding")
    }

    /// Builds the encodings now, so the first request does not pay for it.
    pub fn warm_up() {
        Tokenizer::O200k.count("warm up");
        Tokenizer::Cl100k.count("warm up");
    }
}

/// Inputs at least this large are counted on tokio's blocking pool: tokenising runs at tens of
/// MB/s, so a 10 MB request would hold a serving thread (and every connection on it, its
/// `/healthz` probes included) for about a second; smaller ones cost less than the hand-off.
pub const BLOCKING_THRESHOLD_BYTES: usize = 256 * 1024;

/// Runs `work`, which tokenises about `size` bytes of input, where it cannot stall the async
/// workers: inline when small, on the blocking pool when large.
pub async fn count_off_workers<T: Send + 'static>(
    size: usize,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    if size < BLOCKING_THRESHOLD_BYTES {
        Ok(work())
    } else {
        tokio::task::spawn_blocking(work).await
    }
}

/// Token counts of one message, split the way `metadata.tokens` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageTokens {
    /// Text content (and overhead).
    pub text: u32,
    /// Tool-call requests (names and arguments) of an assistant message.
    pub tool_calls: u32,
}

impl MessageTokens {
    pub fn total(self) -> u32 {
        self.text + self.tool_calls
    }
}

pub fn count_message(tok: Tokenizer, m: &Message) -> MessageTokens {
    let mut text = MESSAGE_OVERHEAD;
    if let Some(s) = m.content.as_str() {
        text += tok.count(s);
    }
    for part in m.content.parts().unwrap_or_default() {
        match part.get("type").and_then(Value::as_str) {
            Some("image_url") => text += IMAGE_TOKENS,
            _ => {
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    text += tok.count(t);
                }
            }
        }
    }
    if let Some(r) = &m.reasoning_content {
        text += tok.count(r);
    }
    let tool_calls = m
        .tool_calls()
        .iter()
        .map(|c| MESSAGE_OVERHEAD + tok.count(&c.function.name) + tok.count(&c.function.arguments))
        .sum();
    MessageTokens { text, tool_calls }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ToolCall;
    use serde_json::json;

    #[test]
    fn large_inputs_are_counted_off_the_async_workers() {
        // A current-thread runtime runs its tasks on this thread; the blocking pool does not.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let here = std::thread::current().id();
        let thread_of = |size| {
            runtime
                .block_on(count_off_workers(size, || std::thread::current().id()))
                .unwrap()
        };
        assert_eq!(thread_of(BLOCKING_THRESHOLD_BYTES - 1), here);
        assert_ne!(thread_of(BLOCKING_THRESHOLD_BYTES), here);
    }

    #[test]
    fn picks_encoding_by_model() {
        assert_eq!(Tokenizer::for_model("gpt-4o-mini"), Tokenizer::O200k);
        assert_eq!(
            Tokenizer::for_model("openai/gpt-4-turbo"),
            Tokenizer::Cl100k
        );
        assert_eq!(Tokenizer::for_model("gpt-4"), Tokenizer::Cl100k);
        assert_eq!(Tokenizer::for_model("qwen2.5"), Tokenizer::O200k);
    }

    #[test]
    fn counts_match_openai_tiktoken() {
        // (text, o200k, cl100k) as OpenAI's tiktoken (and tiktoken-rs) count them.
        let cases = [
            (
                "kubectl get pods -n kube-system -o wide | grep -v Running",
                16,
                15,
            ),
            ("日本語のテキストと中文，한국어 😀🚀👍🏽", 17, 26),
            ("  \n\n\t  trailing   spaces   \n", 6, 6),
            ("{\"command\":\"ls -la /var/log\",\"timeout\":30}", 14, 14),
            ("<|endoftext|> is ordinary text here", 11, 11),
            ("12345678901234567890 3.14159 0xdeadbeef", 18, 18),
        ];
        for (text, o200k, cl100k) in cases {
            assert_eq!(Tokenizer::O200k.count(text), o200k, "o200k: {text:?}");
            assert_eq!(Tokenizer::Cl100k.count(text), cl100k, "cl100k: {text:?}");
        }
    }

    /// The same tokens as tiktoken-rs (OpenAI's tiktoken in Rust), which triage used before.
    fn assert_same_as_tiktoken_rs(text: &str) {
        let cases = [
            (Tokenizer::O200k, tiktoken_rs::o200k_base_singleton()),
            (Tokenizer::Cl100k, tiktoken_rs::cl100k_base_singleton()),
        ];
        for (ours, reference) in cases {
            let want = reference.encode_ordinary(text);
            assert_eq!(ours.encoding().encode(text), want, "{ours:?}: {text:?}");
            assert_eq!(ours.count(text) as usize, want.len(), "{ours:?}: {text:?}");
        }
    }

    #[test]
    fn the_repositorys_own_texts_tokenize_as_with_tiktoken_rs() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("README.md"), root.join("BENCHMARKS.md")];
        for dir in ["prompts", "src/context", "src/http/console"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                files.push(entry.unwrap().path());
            }
        }
        for file in files {
            assert_same_as_tiktoken_rs(&std::fs::read_to_string(&file).unwrap());
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(300))]
        #[test]
        fn mixed_scripts_tokenize_as_with_tiktoken_rs(
            chars in proptest::collection::vec(proptest::sample::select(
                " \t\n\r\u{a0}aAzZ09'sllvedre.,;:!?()[]{}<>/\\\"-_=+*&^%$#@~`|日本語のテキスト中文한국어ßéüñøΩπ€😀🚀👍🏽\u{200d}\u{301}\u{feff}"
                    .chars()
                    .collect::<Vec<char>>(),
            ), 0..300)
        ) {
            assert_same_as_tiktoken_rs(&chars.into_iter().collect::<String>());
        }
    }

    /// Whitespace of every kind, letters of every case class, digits, punctuation (`/` and
    /// `'` among them), CJK, kana, emoji and a combining mark.
    fn split_alphabet() -> Vec<char> {
        " \t\n\r\u{a0}\u{b}\u{c}\u{85}\u{2028}\u{3000}\u{feff}aZ09'sSlL.?!/\\\"-=<>日本ｱǅʰ😀\u{301}"
            .chars()
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2000))]
        #[test]
        fn counts_add_up_after_a_newline(
            head in proptest::collection::vec(proptest::sample::select(split_alphabet()), 0..40),
            tail in proptest::collection::vec(proptest::sample::select(split_alphabet()), 0..40),
        ) {
            let head = head.into_iter().collect::<String>() + "\n";
            let tail = tail.into_iter().collect::<String>();
            if Tokenizer::splits_after_newline(&tail) {
                for tok in [Tokenizer::O200k, Tokenizer::Cl100k] {
                    proptest::prop_assert_eq!(
                        tok.count(&format!("{head}{tail}")),
                        tok.count(&head) + tok.count(&tail),
                        "{:?} {:?} + {:?}", tok, head, tail
                    );
                }
            }
        }
    }

    #[test]
    fn counts_do_not_add_up_where_a_newline_piece_goes_on() {
        // Whitespace and (for o200k) `/` join the piece that ends in the newline.
        let splits = |tok: Tokenizer, head: &str, tail: &str| {
            tok.count(&format!("{head}{tail}")) == tok.count(head) + tok.count(tail)
        };
        assert!(!Tokenizer::splits_after_newline("/var/log"));
        assert!(!Tokenizer::splits_after_newline("\nnext"));
        assert!(!Tokenizer::splits_after_newline(""));
        assert!(!splits(Tokenizer::O200k, "ok.\n", "/var/log"));
        assert!(!splits(Tokenizer::O200k, "why?\n", "\n\nnext"));
        assert!(Tokenizer::splits_after_newline("<system-reminder>"));
        assert!(splits(Tokenizer::O200k, "why?\n\n", "<system-reminder>"));
    }

    #[test]
    fn counts_text_and_tool_calls_separately() {
        let tok = Tokenizer::O200k;
        assert_eq!(tok.count("hello world"), 2);
        let m = Message::assistant(
            Some("hello world".into()),
            None,
            vec![ToolCall::new(
                "c".into(),
                "bash".into(),
                "{\"command\":\"ls\"}".into(),
            )],
        );
        let counts = count_message(tok, &m);
        assert_eq!(counts.text, 2 + MESSAGE_OVERHEAD);
        assert!(counts.tool_calls > MESSAGE_OVERHEAD);
    }

    #[test]
    fn prefix_within_cuts_only_what_does_not_fit() {
        let tok = Tokenizer::O200k;
        // Fits by its byte length alone, and by its tokens.
        assert!(tok.prefix_within("hello world", 11).is_none());
        assert!(tok.prefix_within(&"word ".repeat(100), 200).is_none());
        let (prefix, total) = tok.prefix_within(&"word ".repeat(100), 50).unwrap();
        assert_eq!(total, tok.count(&"word ".repeat(100)));
        assert!(tok.count(&prefix) <= 50);
        // Multi-byte characters: fewer tokens than bytes, still cut by tokens.
        let text = "日本語".repeat(100);
        assert!(tok.prefix_within(&text, text.len() as u32).is_none());
        let (prefix, _) = tok.prefix_within(&text, 20).unwrap();
        assert!(tok.count(&prefix) <= 20 && text.starts_with(&prefix));
    }

    #[test]
    fn no_token_is_longer_than_max_token_bytes() {
        for tok in [Tokenizer::O200k, Tokenizer::Cl100k] {
            let bpe = tok.encoding();
            // Ranks may have gaps: walk them until every token of the vocabulary was seen.
            let longest = (0..u32::MAX)
                .map(|rank| bpe.decode(&[rank]).len())
                .filter(|&len| len > 0)
                .take(bpe.vocab_size())
                .max()
                .unwrap();
            assert_eq!(longest as u64, MAX_TOKEN_BYTES, "{tok:?}");
            // And text reaches it: a long run of spaces.
            let spaces = " ".repeat(128 * 1000);
            assert!(tok.count(&spaces) <= 1001, "{tok:?}");
        }
    }

    #[test]
    fn images_use_the_estimate() {
        let m = Message::user(
            json!([{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:x"}}]),
        );
        assert_eq!(
            count_message(Tokenizer::O200k, &m).text,
            MESSAGE_OVERHEAD + 1 + IMAGE_TOKENS
        );
    }
}
