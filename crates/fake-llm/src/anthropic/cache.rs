//! Anthropic's prompt cache, simulated: a request writes the prefix up to each of its
//! `cache_control` breakpoints; a later request reads the longest cached prefix that ends at
//! one of its block boundaries. Prefixes under 1024 tokens are not cached, as on Sonnet.
//! Tokens are counted as bytes / 4, as the fake counts prompts.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

const MIN_CACHED_TOKENS: u64 = 1024;

#[derive(Default)]
pub(crate) struct PromptCache {
    prefixes: HashSet<u64>,
}

/// Tokens of one request's prompt read from and written to the cache.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CacheUse {
    pub read: u64,
    pub creation: u64,
}

impl PromptCache {
    pub fn apply(&mut self, body: &Value) -> CacheUse {
        // (hash of the prefix ending here, its tokens, a breakpoint ends here)
        let mut boundaries: Vec<(u64, u64, bool)> = Vec::new();
        let mut hasher = DefaultHasher::new();
        let mut bytes = 0u64;
        let mut unit = |block: &Value, prefix: &str| {
            let mut block = block.clone();
            let breakpoint = block
                .as_object_mut()
                .and_then(|b| b.remove("cache_control"))
                .is_some();
            let text = format!("{prefix}{block}");
            text.hash(&mut hasher);
            bytes += text.len() as u64;
            boundaries.push((hasher.finish(), bytes / 4, breakpoint));
        };
        for tool in body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            unit(tool, "tool:");
        }
        for block in body
            .get("system")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            unit(block, "system:");
        }
        for message in body
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let role = message.get("role").and_then(Value::as_str).unwrap_or("");
            for block in message
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                unit(block, role);
            }
        }
        let Some(last_breakpoint) = boundaries.iter().rposition(|b| b.2) else {
            return CacheUse::default();
        };
        let read = boundaries[..=last_breakpoint]
            .iter()
            .filter(|(hash, _, _)| self.prefixes.contains(hash))
            .map(|b| b.1)
            .max()
            .unwrap_or(0);
        let mut creation = 0;
        for (hash, tokens, breakpoint) in &boundaries[..=last_breakpoint] {
            if *breakpoint && *tokens >= MIN_CACHED_TOKENS && self.prefixes.insert(*hash) {
                creation = creation.max(tokens.saturating_sub(read));
            }
        }
        CacheUse { read, creation }
    }
}
