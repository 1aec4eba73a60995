//! What triage knows of common models without configuration: context window, output limit and
//! list prices, from `models.toml` (a table in the repository, updated by hand).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::Deserialize;

const TABLE: &str = include_str!("models.toml");

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownModel {
    pub window: u32,
    pub output: u32,
    /// Dollars per million input tokens.
    #[serde(default)]
    pub input: Option<f64>,
    /// Dollars per million output tokens.
    #[serde(default)]
    pub price_out: Option<f64>,
}

impl KnownModel {
    /// (input, output) dollars per token, when the table has both.
    pub fn prices_per_token(&self) -> Option<(f64, f64)> {
        Some((self.input? / 1e6, self.price_out? / 1e6))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Catalog {
    #[allow(dead_code)] // Read by people; the test checks it is there.
    updated: String,
    models: BTreeMap<String, KnownModel>,
}

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
    // The table is compiled in and checked by a test: a parse failure is a build defect.
    toml::from_str(TABLE).unwrap_or_else(|e| panic!("src/llm/models.toml: {e}"))
});

/// The table's row for a model name as configured (with or without provider prefix, in the
/// Bedrock or Vertex forms); the longest key that starts the reduced name wins.
pub fn lookup(model: &str) -> Option<KnownModel> {
    let name = reduce(model);
    CATALOG
        .models
        .iter()
        .filter(|(key, _)| name.starts_with(key.as_str()))
        .max_by_key(|(key, _)| key.len())
        .map(|(_, known)| *known)
}

/// `bedrock/us.anthropic.claude-3-5-sonnet-20240620-v1:0` → `claude-3-5-sonnet-20240620-v1:0`;
/// `vertex_ai/claude-3-7-sonnet@20250219` → `claude-3-7-sonnet`; `openrouter/openai/gpt-4.1`
/// → `gpt-4-1`.
fn reduce(model: &str) -> String {
    let last = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let without_date = last.split('@').next().unwrap_or(&last);
    // Bedrock: an optional inference-profile region, then the vendor, dot-separated.
    let mut rest = without_date;
    for region in [
        "us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca.",
    ] {
        if let Some(r) = rest.strip_prefix(region) {
            rest = r;
            break;
        }
    }
    for vendor in [
        "anthropic.",
        "meta.",
        "mistral.",
        "amazon.",
        "deepseek.",
        "openai.",
    ] {
        if let Some(r) = rest.strip_prefix(vendor) {
            rest = r;
            break;
        }
    }
    rest.replace('.', "-")
}

/// HolmesGPT's rule is `max(64000, 12% of the window)`; capped by what the model can emit and by
/// half the window so small local models keep room for their input.
pub fn default_output_budget(context_window: u32, model_max: Option<u32>) -> u32 {
    let budget = 64_000.max(context_window / 100 * 12);
    budget
        .min(model_max.unwrap_or(u32::MAX))
        .min(context_window / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_budgets() {
        assert_eq!(default_output_budget(128_000, Some(16_384)), 16_384);
        assert_eq!(default_output_budget(1_000_000, None), 120_000);
    }

    #[test]
    fn the_table_parses_and_is_dated() {
        assert!(CATALOG.updated.len() == 10, "{}", CATALOG.updated);
        assert!(CATALOG.models.len() > 40);
        for (key, known) in &CATALOG.models {
            assert_eq!(key, &key.to_ascii_lowercase(), "{key}");
            assert!(!key.contains('.'), "{key}: dots are written as dashes");
            assert!(known.output <= known.window, "{key}");
        }
    }

    #[test]
    fn names_in_every_form_find_their_row() {
        let window = |m: &str| lookup(m).map(|k| k.window);
        assert_eq!(window("gpt-4.1-mini-2025-04-14"), Some(1_047_576));
        assert_eq!(window("gpt-4o-mini"), Some(128_000));
        assert_eq!(window("gpt-4"), Some(8_192));
        assert_eq!(window("openrouter/openai/gpt-5"), Some(400_000));
        let sonnet = lookup("claude-3-5-sonnet-20241022").unwrap();
        assert_eq!(sonnet.output, 8192);
        for form in [
            "anthropic/claude-3.5-sonnet",
            "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0",
            "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
            "vertex_ai/claude-3-5-sonnet@20240620",
        ] {
            assert_eq!(lookup(form), Some(sonnet), "{form}");
        }
        assert_eq!(
            lookup("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0").map(|k| k.input),
            Some(Some(3.0))
        );
        assert_eq!(
            lookup("claude-opus-4-1-20250805").map(|k| k.output),
            Some(32000)
        );
        assert_eq!(window("gemini/gemini-2.5-pro"), Some(1_048_576));
        assert_eq!(window("groq/llama-3.3-70b-versatile"), Some(131_072));
        assert_eq!(window("qwen-unknown"), None);
    }

    #[test]
    fn prices_are_per_token() {
        let (input, output) = lookup("gpt-4o").unwrap().prices_per_token().unwrap();
        assert!((input - 2.5e-6).abs() < 1e-12 && (output - 10e-6).abs() < 1e-12);
        assert_eq!(lookup("llama-3.1-8b").unwrap().prices_per_token(), None);
    }
}
