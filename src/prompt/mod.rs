//! System and user prompt assembly from the section templates in `prompts/`.
//!
//! Templates are compiled into the binary (a `prompts.dir` may replace them at start-up) and
//! compiled once with strict undefined variables. System sections depend only on start-up
//! configuration, so they are rendered once; a request picks the enabled ones, and the joined
//! prompt and its token count are cached per (section set, tokenizer).

mod sections;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use minijinja::{Environment, UndefinedBehavior, context};
use serde::Serialize;

use crate::context::tokens::Tokenizer;
pub use sections::{Section, SectionSet};

const TEMPLATES: &[(&str, &str)] = &[
    ("intro", include_str!("../../prompts/intro.jinja")),
    ("ask_user", include_str!("../../prompts/ask_user.jinja")),
    (
        "todowrite_instructions",
        include_str!("../../prompts/todowrite_instructions.jinja"),
    ),
    ("ai_safety", include_str!("../../prompts/ai_safety.jinja")),
    (
        "toolset_instructions",
        include_str!("../../prompts/toolset_instructions.jinja"),
    ),
    (
        "permission_errors",
        include_str!("../../prompts/permission_errors.jinja"),
    ),
    (
        "general_instructions",
        include_str!("../../prompts/general_instructions.jinja"),
    ),
    (
        "style_guide",
        include_str!("../../prompts/style_guide.jinja"),
    ),
    (
        "cluster_name",
        include_str!("../../prompts/cluster_name.jinja"),
    ),
    (
        "system_prompt_additions",
        include_str!("../../prompts/system_prompt_additions.jinja"),
    ),
    ("files", include_str!("../../prompts/files.jinja")),
    (
        "todowrite_reminder",
        include_str!("../../prompts/todowrite_reminder.jinja"),
    ),
    (
        "time_runbooks",
        include_str!("../../prompts/time_runbooks.jinja"),
    ),
    ("compaction", include_str!("../../prompts/compaction.jinja")),
    (
        "compaction_preamble",
        include_str!("../../prompts/compaction_preamble.jinja"),
    ),
];

#[derive(Debug, Clone, Serialize)]
pub struct ToolsetPrompt {
    pub name: String,
    pub instructions: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DisabledToolset {
    pub name: String,
    pub reason: String,
}

/// What the system sections are rendered from: fixed for the life of the process.
#[derive(Debug, Clone, Default)]
pub struct PromptInputs {
    pub cluster_name: String,
    pub system_prompt_additions: String,
    pub toolsets: Vec<ToolsetPrompt>,
    pub disabled_toolsets: Vec<DisabledToolset>,
}

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("prompt template '{name}': {source}")]
    Template {
        name: String,
        #[source]
        source: minijinja::Error,
    },
    #[error("prompt directory {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug)]
pub struct SystemPrompt {
    /// Shared by the system message of every run that uses this prompt.
    pub text: Arc<str>,
    pub tokens: u32,
}

pub struct Prompts {
    env: Environment<'static>,
    /// Sections the server allows (ENABLED_PROMPTS).
    allowed: SectionSet,
    /// Rendered system sections, indexed by `Section as usize`; empty when they render nothing.
    system_sections: Vec<String>,
    cache: RwLock<HashMap<(SectionSet, Tokenizer), Arc<SystemPrompt>>>,
    /// The user sections last rendered: they depend only on the section set and the time to
    /// the second, so requests in the same second share them (three template renders and two
    /// date formats were about 5% of a request's instructions).
    user_sections: RwLock<Option<UserSections>>,
}

struct UserSections {
    sections: SectionSet,
    unix_second: i64,
    rendered: Arc<RenderedSections>,
}

/// The user sections of one second, with the token count of all but their leading blank line
/// per tokenizer, counted once: every question of that second shares it.
struct RenderedSections {
    text: String,
    tail_tokens: [std::sync::OnceLock<u32>; 2],
}

impl RenderedSections {
    /// Tokens of the text after its leading blank line, when they add up with any question
    /// before it (`Tokenizer::splits_after_newline`).
    fn tail_tokens(&self, tokenizer: Tokenizer) -> Option<u32> {
        let tail = self.text.strip_prefix("\n\n")?;
        Tokenizer::splits_after_newline(tail)
            .then(|| *self.tail_tokens[tokenizer as usize].get_or_init(|| tokenizer.count(tail)))
    }
}

/// The user message text: the question, then the enabled user sections.
pub struct UserPrompt {
    pub text: String,
    ask_len: usize,
    sections: Arc<RenderedSections>,
}

impl UserPrompt {
    /// The tokens of `text`, as `Tokenizer::count` gives them, counting only the question and
    /// the blank line after it: the sections' share is counted once a second.
    pub fn tokens(&self, tokenizer: Tokenizer) -> u32 {
        match self.sections.tail_tokens(tokenizer) {
            Some(tail) => tokenizer.count(&self.text[..self.ask_len + 2]) + tail,
            None => tokenizer.count(&self.text),
        }
    }
}

impl Prompts {
    pub fn new(
        inputs: &PromptInputs,
        enabled_prompts: Option<&str>,
        dir: Option<&Path>,
    ) -> Result<Prompts, PromptError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        for (name, source) in TEMPLATES {
            let source = match dir.map(|d| d.join(format!("{name}.jinja"))) {
                Some(path) if path.is_file() => {
                    std::fs::read_to_string(&path).map_err(|source| PromptError::Io {
                        path: path.display().to_string(),
                        source,
                    })?
                }
                _ => (*source).to_owned(),
            };
            env.add_template_owned(*name, source)
                .map_err(|source| PromptError::Template {
                    name: (*name).to_owned(),
                    source,
                })?;
        }
        let system_sections = Section::ALL
            .iter()
            .map(|section| {
                if !section.is_system() {
                    return Ok(String::new());
                }
                let ctx = context! {
                    toolsets => minijinja::Value::from(minijinja::value::Serde(&inputs.toolsets)),
                    disabled_toolsets => minijinja::Value::from(minijinja::value::Serde(&inputs.disabled_toolsets)),
                    cluster_name => &inputs.cluster_name,
                    additions => &inputs.system_prompt_additions,
                };
                render(&env, section.key(), ctx)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let prompts = Prompts {
            env,
            allowed: SectionSet::from_enabled_prompts(enabled_prompts),
            system_sections,
            cache: RwLock::new(HashMap::new()),
            user_sections: RwLock::new(None),
        };
        // Fail at start-up, not on the first request, if a user template is broken.
        prompts.user_prompt("check", SectionSet::all(), chrono::Utc::now())?;
        prompts.render_compaction_preamble("check")?;
        Ok(prompts)
    }

    /// Sections enabled for a request: the server's cap, then `behavior_controls`, then defaults.
    pub fn sections(&self, controls: Option<&HashMap<String, bool>>) -> SectionSet {
        SectionSet::for_request(self.allowed, controls)
    }

    /// The system prompt for a section set, plus the request's `additional_system_prompt`
    /// (part of the `system_prompt_additions` section). Empty text means "no system prompt".
    pub fn system_prompt(
        &self,
        sections: SectionSet,
        additional: Option<&str>,
        tokenizer: Tokenizer,
    ) -> Arc<SystemPrompt> {
        let base = self.cached_system_prompt(sections, tokenizer);
        match additional.map(str::trim).filter(|a| !a.is_empty()) {
            Some(extra) if sections.contains(Section::SystemPromptAdditions) => {
                let text = if base.text.is_empty() {
                    extra.to_owned()
                } else {
                    format!("{}\n\n{extra}", base.text)
                };
                let tokens = tokenizer.count(&text);
                Arc::new(SystemPrompt {
                    text: text.into(),
                    tokens,
                })
            }
            _ => base,
        }
    }

    fn cached_system_prompt(
        &self,
        sections: SectionSet,
        tokenizer: Tokenizer,
    ) -> Arc<SystemPrompt> {
        let key = (sections, tokenizer);
        if let Some(hit) = self.cache.read().ok().and_then(|c| c.get(&key).cloned()) {
            return hit;
        }
        let text = Section::ALL
            .iter()
            .filter(|s| s.is_system() && sections.contains(**s))
            .map(|s| self.system_sections[*s as usize].as_str())
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n");
        let tokens = tokenizer.count(&text);
        crate::wire::known_json::remember(&text);
        let prompt = Arc::new(SystemPrompt {
            text: text.into(),
            tokens,
        });
        if let Ok(mut cache) = self.cache.write() {
            cache.insert(key, prompt.clone());
        }
        prompt
    }

    /// The user message text: the question, then the enabled user sections.
    pub fn user_prompt(
        &self,
        ask: &str,
        sections: SectionSet,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<UserPrompt, PromptError> {
        let rendered = self.user_sections(sections, now)?;
        let mut text = String::with_capacity(ask.len() + rendered.text.len());
        text.push_str(ask);
        text.push_str(&rendered.text);
        Ok(UserPrompt {
            text,
            ask_len: ask.len(),
            sections: rendered,
        })
    }

    /// The enabled user sections, each after a blank line, for this second.
    fn user_sections(
        &self,
        sections: SectionSet,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Arc<RenderedSections>, PromptError> {
        let unix_second = now.timestamp();
        if let Ok(last) = self.user_sections.read()
            && let Some(last) = last.as_ref()
            && last.sections == sections
            && last.unix_second == unix_second
        {
            return Ok(last.rendered.clone());
        }
        let mut text = String::new();
        for section in [
            Section::Files,
            Section::TodowriteReminder,
            Section::TimeRunbooks,
        ] {
            if !sections.contains(section) {
                continue;
            }
            let empty: [(); 0] = [];
            let ctx = context! {
                files => &empty,
                runbooks => &empty,
                now_utc => now.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                now_unix => unix_second,
                current_year => now.format("%Y").to_string().parse::<i32>().unwrap_or(1970),
            };
            let rendered = self.render(section.key(), ctx)?;
            if !rendered.is_empty() {
                text.push_str("\n\n");
                text.push_str(&rendered);
            }
        }
        let rendered = Arc::new(RenderedSections {
            text,
            tail_tokens: Default::default(),
        });
        if let Ok(mut last) = self.user_sections.write() {
            *last = Some(UserSections {
                sections,
                unix_second,
                rendered: rendered.clone(),
            });
        }
        Ok(rendered)
    }

    pub fn compaction_instructions(&self) -> Result<String, PromptError> {
        self.render("compaction", context! {})
    }

    pub fn render_compaction_preamble(&self, summary: &str) -> Result<String, PromptError> {
        self.render("compaction_preamble", context! { summary => summary })
    }

    fn render(&self, name: &str, ctx: minijinja::Value) -> Result<String, PromptError> {
        render(&self.env, name, ctx)
    }
}

/// Renders a template, trimmed; an error names the template.
fn render(
    env: &Environment<'static>,
    name: &str,
    ctx: minijinja::Value,
) -> Result<String, PromptError> {
    env.get_template(name)
        .and_then(|t| t.render(ctx))
        .map(|s| s.trim().to_owned())
        .map_err(|source| PromptError::Template {
            name: name.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompts(enabled: Option<&str>) -> Prompts {
        let inputs = PromptInputs {
            cluster_name: "prod-eu".into(),
            system_prompt_additions: "Always answer in English.".into(),
            ..PromptInputs::default()
        };
        Prompts::new(&inputs, enabled, None).unwrap()
    }

    #[test]
    fn default_prompt_has_sections_in_order() {
        let p = prompts(None);
        let sp = p.system_prompt(p.sections(None), Some("Be nice."), Tokenizer::O200k);
        assert!(sp.text.contains("prod-eu"));
        assert!(sp.text.ends_with("Always answer in English.\n\nBe nice."));
        assert!(sp.tokens > 300);
    }

    #[test]
    fn requests_without_additions_share_one_prompt_text() {
        let p = prompts(None);
        let first = p.system_prompt(p.sections(None), None, Tokenizer::O200k);
        let second = p.system_prompt(p.sections(None), Some("  "), Tokenizer::O200k);
        assert!(Arc::ptr_eq(&first.text, &second.text));
        let message = crate::wire::Message::shared_system(first.text.clone());
        assert_eq!(message.content.as_str(), Some(&*second.text));
        assert_eq!(
            Arc::strong_count(&first.text),
            2,
            "the cached prompt and the message"
        );
    }

    #[test]
    fn disabled_additions_drop_the_request_prompt() {
        let p = prompts(None);
        let controls = HashMap::from([("system_prompt_additions".to_owned(), false)]);
        let sp = p.system_prompt(
            p.sections(Some(&controls)),
            Some("Be nice."),
            Tokenizer::O200k,
        );
        assert!(!sp.text.contains("Be nice.") && !sp.text.contains("English"));
    }

    #[test]
    fn none_means_no_system_prompt_and_bare_ask() {
        let p = prompts(Some("none"));
        let sections = p.sections(None);
        assert!(
            p.system_prompt(sections, None, Tokenizer::O200k)
                .text
                .is_empty()
        );
        assert_eq!(
            p.user_prompt("q", sections, chrono::Utc::now())
                .unwrap()
                .text,
            "q"
        );
    }

    #[test]
    fn user_prompt_tokens_are_those_of_its_whole_text() {
        let now = chrono::Utc::now();
        let asks = [
            "",
            "why?",
            "why? ",
            "ok.\n",
            "path /var/log/",
            "tabs\t",
            "日本語",
            "emoji 😀",
            "42",
        ];
        for p in [prompts(None), prompts(Some("none"))] {
            for ask in asks {
                let prompt = p.user_prompt(ask, p.sections(None), now).unwrap();
                for tok in [Tokenizer::O200k, Tokenizer::Cl100k] {
                    assert_eq!(
                        prompt.tokens(tok),
                        tok.count(&prompt.text),
                        "{ask:?} {tok:?}"
                    );
                }
            }
        }
        // The default sections after a question are counted once, not per question.
        let p = prompts(None);
        let prompt = p.user_prompt("why?", p.sections(None), now).unwrap();
        assert!(prompt.sections.tail_tokens(Tokenizer::O200k).is_some());
    }

    #[test]
    fn user_prompt_carries_the_time() {
        let p = prompts(None);
        let now = chrono::DateTime::from_timestamp(1_795_300_769, 0).unwrap();
        let text = p.user_prompt("why?", p.sections(None), now).unwrap().text;
        assert!(text.starts_with("why?\n\n"));
        assert!(text.contains("1795300769") && text.contains("2026"));
        // The same second reuses the rendered sections; the next one renders afresh.
        assert_eq!(
            p.user_prompt("why?", p.sections(None), now).unwrap().text,
            text
        );
        let later = now + chrono::Duration::seconds(1);
        let next = p.user_prompt("why?", p.sections(None), later).unwrap().text;
        assert!(next.contains("1795300770") && !next.contains("1795300769"));
        let bare = p
            .user_prompt(
                "why?",
                p.sections(Some(&HashMap::from([("time_runbooks".to_owned(), false)]))),
                later,
            )
            .unwrap()
            .text;
        assert!(!bare.contains("1795300770"), "{bare}");
    }
}
