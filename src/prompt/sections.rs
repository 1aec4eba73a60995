//! Prompt section keys and their gating: `ENABLED_PROMPTS` caps what the server allows,
//! `behavior_controls` toggles within that, and every section defaults to on but `ai_safety`.

use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    Intro,
    AskUser,
    TodowriteInstructions,
    AiSafety,
    ToolsetInstructions,
    PermissionErrors,
    GeneralInstructions,
    StyleGuide,
    ClusterName,
    SystemPromptAdditions,
    Files,
    TodowriteReminder,
    TimeRunbooks,
}

impl Section {
    /// In prompt order: the system sections, then the user sections.
    pub const ALL: [Section; 13] = [
        Section::Intro,
        Section::AskUser,
        Section::TodowriteInstructions,
        Section::AiSafety,
        Section::ToolsetInstructions,
        Section::PermissionErrors,
        Section::GeneralInstructions,
        Section::StyleGuide,
        Section::ClusterName,
        Section::SystemPromptAdditions,
        Section::Files,
        Section::TodowriteReminder,
        Section::TimeRunbooks,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Section::Intro => "intro",
            Section::AskUser => "ask_user",
            Section::TodowriteInstructions => "todowrite_instructions",
            Section::AiSafety => "ai_safety",
            Section::ToolsetInstructions => "toolset_instructions",
            Section::PermissionErrors => "permission_errors",
            Section::GeneralInstructions => "general_instructions",
            Section::StyleGuide => "style_guide",
            Section::ClusterName => "cluster_name",
            Section::SystemPromptAdditions => "system_prompt_additions",
            Section::Files => "files",
            Section::TodowriteReminder => "todowrite_reminder",
            Section::TimeRunbooks => "time_runbooks",
        }
    }

    pub fn from_key(key: &str) -> Option<Section> {
        let key = key.trim().to_ascii_lowercase();
        Section::ALL.into_iter().find(|s| s.key() == key)
    }

    pub fn is_system(self) -> bool {
        !matches!(
            self,
            Section::Files | Section::TodowriteReminder | Section::TimeRunbooks
        )
    }

    fn default_enabled(self) -> bool {
        self != Section::AiSafety
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of sections as a bit mask (cheap to copy, hash and compare).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SectionSet(u16);

impl SectionSet {
    pub fn all() -> SectionSet {
        SectionSet(Section::ALL.iter().fold(0, |m, s| m | s.bit()))
    }

    pub fn contains(self, s: Section) -> bool {
        self.0 & s.bit() != 0
    }

    /// `ENABLED_PROMPTS`: unset or empty allows everything, `none` nothing, otherwise a comma
    /// list of keys (case-insensitive; unknown keys ignored).
    pub fn from_enabled_prompts(value: Option<&str>) -> SectionSet {
        match value.map(str::trim) {
            None | Some("") => SectionSet::all(),
            Some(v) if v.eq_ignore_ascii_case("none") => SectionSet(0),
            Some(v) => SectionSet(
                v.split(',')
                    .filter_map(Section::from_key)
                    .fold(0, |m, s| m | s.bit()),
            ),
        }
    }

    pub fn for_request(
        allowed: SectionSet,
        controls: Option<&HashMap<String, bool>>,
    ) -> SectionSet {
        let mut mask = 0;
        for s in Section::ALL {
            let wanted = controls
                .and_then(|c| {
                    c.iter()
                        .find(|(k, _)| k.trim().eq_ignore_ascii_case(s.key()))
                        .map(|(_, v)| *v)
                })
                .unwrap_or(s.default_enabled());
            if wanted && allowed.contains(s) {
                mask |= s.bit();
            }
        }
        SectionSet(mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controls(pairs: &[(&str, bool)]) -> HashMap<String, bool> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn defaults_all_on_but_ai_safety() {
        let s = SectionSet::for_request(SectionSet::all(), None);
        assert!(
            Section::ALL
                .iter()
                .all(|x| s.contains(*x) == (*x != Section::AiSafety))
        );
    }

    #[test]
    fn controls_toggle_within_the_cap() {
        let allowed = SectionSet::from_enabled_prompts(Some("intro, AI_SAFETY,style_guide,bogus"));
        let s = SectionSet::for_request(
            allowed,
            Some(&controls(&[
                ("ai_safety", true),
                ("style_guide", false),
                ("files", true),
            ])),
        );
        assert!(s.contains(Section::Intro));
        assert!(s.contains(Section::AiSafety));
        assert!(!s.contains(Section::StyleGuide));
        // The cap wins: `files` is not allowed even though the request asks for it.
        assert!(!s.contains(Section::Files));
        assert!(!s.contains(Section::GeneralInstructions));
    }

    #[test]
    fn none_disables_everything_and_unknown_keys_are_ignored() {
        let s = SectionSet::for_request(
            SectionSet::from_enabled_prompts(Some("none")),
            Some(&controls(&[("intro", true)])),
        );
        assert!(Section::ALL.iter().all(|x| !s.contains(*x)));
        let s = SectionSet::for_request(SectionSet::all(), Some(&controls(&[("nope", false)])));
        assert_eq!(s, SectionSet::for_request(SectionSet::all(), None));
    }

    #[test]
    fn empty_env_allows_everything() {
        assert_eq!(
            SectionSet::from_enabled_prompts(Some("  ")),
            SectionSet::all()
        );
    }
}
