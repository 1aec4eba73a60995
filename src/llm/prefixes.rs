//! Provider prefixes that speak OpenAI's chat-completions wire at a known address, with the
//! variables LiteLLM (and so HolmesGPT) reads for their base URL and key, so a HolmesGPT
//! user's environment works unchanged. The prefix is stripped from the model name sent.

pub struct Prefix {
    pub name: &'static str,
    /// Variables naming the base URL, in LiteLLM's order; an entry's `api_base` comes first.
    pub base_vars: &'static [&'static str],
    /// `None`: the entry must name its server (`api_base` or a variable above).
    pub default_base: Option<&'static str>,
    /// Variables holding the key, in LiteLLM's order; an entry's `api_key` comes first.
    pub key_vars: &'static [&'static str],
    /// Ollama's variable and LiteLLM's `api_base` name the server's root; its OpenAI-compatible
    /// API is under `/v1`.
    pub appends_v1: bool,
}

const fn prefix(
    name: &'static str,
    base_vars: &'static [&'static str],
    default_base: Option<&'static str>,
    key_vars: &'static [&'static str],
) -> Prefix {
    Prefix {
        name,
        base_vars,
        default_base,
        key_vars,
        appends_v1: false,
    }
}

const OLLAMA: Prefix = Prefix {
    name: "ollama",
    base_vars: &["OLLAMA_API_BASE"],
    default_base: Some("http://localhost:11434"),
    key_vars: &[],
    appends_v1: true,
};

pub const PREFIXES: &[Prefix] = &[
    prefix(
        "openrouter",
        &["OPENROUTER_API_BASE"],
        Some("https://openrouter.ai/api/v1"),
        &["OPENROUTER_API_KEY", "OR_API_KEY"],
    ),
    prefix(
        "deepseek",
        &["DEEPSEEK_API_BASE"],
        Some("https://api.deepseek.com/beta"),
        &["DEEPSEEK_API_KEY"],
    ),
    OLLAMA,
    Prefix {
        name: "ollama_chat",
        ..OLLAMA
    },
    prefix(
        "github",
        &["GITHUB_API_BASE"],
        Some("https://models.inference.ai.azure.com"),
        &["GITHUB_API_KEY"],
    ),
    prefix(
        "groq",
        &["GROQ_API_BASE"],
        Some("https://api.groq.com/openai/v1"),
        &["GROQ_API_KEY"],
    ),
    prefix(
        "mistral",
        &["MISTRAL_API_BASE", "MISTRAL_AZURE_API_BASE"],
        Some("https://api.mistral.ai/v1"),
        &["MISTRAL_API_KEY", "MISTRAL_AZURE_API_KEY"],
    ),
    prefix(
        "together_ai",
        &["TOGETHER_AI_API_BASE"],
        Some("https://api.together.xyz/v1"),
        &[
            "TOGETHER_API_KEY",
            "TOGETHER_AI_API_KEY",
            "TOGETHERAI_API_KEY",
            "TOGETHER_AI_TOKEN",
        ],
    ),
    prefix(
        "xai",
        &["XAI_API_BASE"],
        Some("https://api.x.ai/v1"),
        &["XAI_API_KEY"],
    ),
    prefix(
        "fireworks_ai",
        &["FIREWORKS_API_BASE", "FIREWORKS_AI_API_BASE"],
        Some("https://api.fireworks.ai/inference/v1"),
        &[
            "FIREWORKS_API_KEY",
            "FIREWORKS_AI_API_KEY",
            "FIREWORKSAI_API_KEY",
            "FIREWORKS_AI_TOKEN",
        ],
    ),
    prefix(
        "hosted_vllm",
        &["HOSTED_VLLM_API_BASE"],
        None,
        &["HOSTED_VLLM_API_KEY"],
    ),
    prefix(
        "lm_studio",
        &["LM_STUDIO_API_BASE"],
        None,
        &["LM_STUDIO_API_KEY"],
    ),
    prefix(
        "litellm_proxy",
        &["LITELLM_PROXY_API_BASE"],
        None,
        &["LITELLM_PROXY_API_KEY"],
    ),
    prefix("openai_like", &[], None, &[]),
    prefix("llamacpp", &[], None, &[]),
];

pub fn find(name: &str) -> Option<&'static Prefix> {
    PREFIXES.iter().find(|p| p.name == name)
}

fn env(var: &str) -> Option<String> {
    std::env::var(var)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

impl Prefix {
    /// The chat-completions URL: `api_base`, else the first variable set, else the default.
    pub fn endpoint(&self, api_base: Option<&str>) -> Result<String, String> {
        let base = api_base
            .map(str::to_owned)
            .or_else(|| self.base_vars.iter().find_map(|v| env(v)))
            .or_else(|| self.default_base.map(str::to_owned))
            .ok_or_else(|| {
                let vars = if self.base_vars.is_empty() {
                    String::new()
                } else {
                    format!(" (or {})", self.base_vars.join(", "))
                };
                format!(
                    "{}/ models need api_base{vars}: the URL of the OpenAI-compatible server",
                    self.name
                )
            })?;
        let base = base.trim_end_matches('/');
        Ok(if self.appends_v1 && !base.ends_with("/v1") {
            format!("{base}/v1/chat/completions")
        } else {
            format!("{base}/chat/completions")
        })
    }

    /// The entry's key, else the first key variable set.
    pub fn key(&self, api_key: Option<&str>) -> Option<String> {
        api_key
            .map(str::to_owned)
            .or_else(|| self.key_vars.iter().find_map(|v| env(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let openrouter = find("openrouter").unwrap();
        assert_eq!(
            openrouter.endpoint(None).unwrap(),
            "https://openrouter.ai/api/v1/chat/completions"
        );
        assert_eq!(
            openrouter.endpoint(Some("http://proxy:4000/")).unwrap(),
            "http://proxy:4000/chat/completions"
        );
        let ollama = find("ollama_chat").unwrap();
        assert_eq!(
            ollama.endpoint(Some("http://gpu:11434")).unwrap(),
            "http://gpu:11434/v1/chat/completions"
        );
        assert_eq!(
            ollama.endpoint(Some("http://gpu:11434/v1")).unwrap(),
            "http://gpu:11434/v1/chat/completions"
        );
        let err = find("hosted_vllm").unwrap().endpoint(None).unwrap_err();
        assert!(err.contains("HOSTED_VLLM_API_BASE"), "{err}");
        assert_eq!(
            find("litellm_proxy")
                .unwrap()
                .endpoint(Some("http://litellm:4000"))
                .unwrap(),
            "http://litellm:4000/chat/completions"
        );
        assert_eq!(find("groq").unwrap().key(Some("k")), Some("k".into()));
    }

    #[test]
    fn every_prefix_is_listed_once() {
        for p in PREFIXES {
            assert_eq!(PREFIXES.iter().filter(|q| q.name == p.name).count(), 1);
        }
    }
}
