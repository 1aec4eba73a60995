//! Skills (HolmesGPT's successor of runbooks): `SKILL.md` files whose frontmatter gives a
//! `description` and a `name` (by default the file's directory). The system prompt lists them; the model loads one with
//! `fetch_skill`. The files are found once at start-up in the configured directories and a
//! call names a skill, never a path: triage reads the file it indexed, so a name such as
//! `../../etc/passwd` is only an unknown skill.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolContext, ToolOutput, Toolset, Typed, TypedTool};

const TOOLSET: &str = "skills";
/// A skill larger than this is cut (a skill is instructions, not data).
const MAX_SKILL_BYTES: u64 = 256 * 1024;

/// `[skills]`: where `SKILL.md` files are (HolmesGPT's `custom_skill_paths`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SkillSettings {
    pub enabled: bool,
    /// Directories holding `SKILL.md` directly or one level down (`<dir>/<skill>/SKILL.md`).
    pub paths: Vec<PathBuf>,
    /// HolmesGPT's `skill_repos` (git URLs): reported as not supported.
    pub repos: Vec<String>,
}

impl Default for SkillSettings {
    fn default() -> Self {
        SkillSettings {
            enabled: true,
            paths: Vec::new(),
            repos: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Canonical path of the file, inside `root`.
    path: PathBuf,
    /// Canonical configured directory it was found in.
    root: PathBuf,
}

#[derive(Deserialize)]
struct Frontmatter {
    name: Option<String>,
    description: Option<String>,
}

/// The skills in `dirs`, and what was wrong with the files that were skipped.
pub fn discover(dirs: &[PathBuf]) -> (Vec<Skill>, Vec<String>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut problems = Vec::new();
    for dir in dirs {
        let Ok(root) = dir.canonicalize() else {
            problems.push(format!("skill directory {} does not exist", dir.display()));
            continue;
        };
        let mut candidates = vec![root.join("SKILL.md")];
        if let Ok(entries) = std::fs::read_dir(&root) {
            let mut subdirs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            subdirs.sort();
            candidates.extend(subdirs.into_iter().map(|d| d.join("SKILL.md")));
        }
        for file in candidates.into_iter().filter(|f| f.is_file()) {
            match read_skill(&file, &root) {
                // As in HolmesGPT, a later directory's skill replaces an earlier one of that name
                // (a team's directory listed after the shared one overrides it).
                Ok(skill) => {
                    if let Some(earlier) = skills.iter_mut().find(|s| s.name == skill.name) {
                        problems.push(format!(
                            "{}: overrides the skill `{}` of {}",
                            file.display(),
                            skill.name,
                            earlier.path.display()
                        ));
                        *earlier = skill;
                    } else {
                        skills.push(skill);
                    }
                }
                Err(e) => problems.push(format!("{}: {e}", file.display())),
            }
        }
    }
    (skills, problems)
}

fn read_skill(file: &Path, root: &Path) -> Result<Skill, String> {
    let path = file.canonicalize().map_err(|e| e.to_string())?;
    if !path.starts_with(root) {
        return Err("links outside its skill directory".into());
    }
    let text = read_capped(&path)?;
    let (front, _) =
        split_frontmatter(&text).ok_or("no `---` frontmatter with name and description")?;
    let front: Frontmatter =
        serde_norway::from_str(front).map_err(|e| format!("frontmatter: {e}"))?;
    // HolmesGPT's default: the directory the file is in, as it is named where it was found
    // (a ConfigMap mount's `<skill>` link, not the timestamped directory behind it).
    let name = front
        .name
        .filter(|n| !n.trim().is_empty())
        .or_else(|| {
            file.parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
        })
        .ok_or("frontmatter has no `name`")?;
    let description = front
        .description
        .filter(|d| !d.trim().is_empty())
        .ok_or("frontmatter has no `description`")?;
    Ok(Skill {
        name: name.trim().to_owned(),
        description: description.trim().to_owned(),
        path,
        root: root.to_path_buf(),
    })
}

fn read_capped(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    file.take(MAX_SKILL_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}

/// `---\n<yaml>\n---\n<body>` → (yaml, body).
fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix("---")?.trim_start_matches([' ', '\t']);
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))?;
    let end = rest.find("\n---")?;
    let body = &rest[end + 4..];
    let body = body.split_once('\n').map_or("", |(_, b)| b);
    Some((&rest[..end], body))
}

/// The `skills` toolset: `fetch_skill` and the list of skills for the system prompt.
pub fn toolset(settings: &SkillSettings) -> Vec<Toolset> {
    let mut out = Vec::new();
    if !settings.repos.is_empty() {
        out.push(Toolset::unavailable(
            "skill_repos",
            format!(
                "not supported: triage does not fetch git repositories at run time ({}); clone \
                 them where triage runs and list the directories in custom_skill_paths",
                settings.repos.join(", ")
            ),
        ));
    }
    if !settings.enabled || settings.paths.is_empty() {
        out.push(Toolset::disabled(TOOLSET));
        return out;
    }
    let (skills, problems) = discover(&settings.paths);
    for problem in &problems {
        tracing::warn!(%problem, "skill skipped");
    }
    if skills.is_empty() {
        out.push(Toolset::unavailable(
            TOOLSET,
            format!(
                "no usable SKILL.md in {}{}",
                settings
                    .paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                if problems.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", problems.join("; "))
                }
            ),
        ));
        return out;
    }
    let mut instructions = String::from(
        "# Skills\nSkills are instructions written for specific investigations. When one \
         matches the question, load it with `fetch_skill` first and follow it.\n",
    );
    for skill in &skills {
        instructions.push_str(&format!("- {}: {}\n", skill.name, skill.description));
    }
    out.push(Toolset::enabled(
        TOOLSET,
        &instructions,
        vec![Arc::new(Typed::new(FetchSkill {
            skills: Arc::new(skills),
        }))],
    ));
    out
}

/// Parameters of `fetch_skill`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchSkillParams {
    /// The skill's name, as listed in the system prompt.
    skill_name: String,
}

pub struct FetchSkill {
    skills: Arc<Vec<Skill>>,
}

impl FetchSkill {
    fn fetch(&self, name: &str) -> ToolOutput {
        let Some(skill) = self.skills.iter().find(|s| s.name == name) else {
            let known: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
            return ToolOutput::error(format!(
                "no skill named `{name}`; the skills are: {}",
                known.join(", ")
            ));
        };
        // Read again (an edit applies at once), checked again (a link swapped in since).
        let text = skill
            .path
            .canonicalize()
            .map_err(|e| e.to_string())
            .and_then(|p| match p.starts_with(&skill.root) {
                true => read_capped(&p),
                false => Err("the file now links outside its skill directory".into()),
            });
        match text {
            Ok(text) => {
                let body = split_frontmatter(&text).map_or(text.as_str(), |(_, b)| b);
                ToolOutput::success(format!(
                    "# Skill: {}\n{}\n\n{}",
                    skill.name,
                    skill.description,
                    body.trim()
                ))
            }
            Err(e) => ToolOutput::error(format!("cannot read skill `{name}`: {e}")),
        }
    }
}

impl TypedTool for FetchSkill {
    type Params = FetchSkillParams;

    fn name(&self) -> &str {
        "fetch_skill"
    }

    fn toolset(&self) -> &str {
        TOOLSET
    }

    fn description(&self) -> &str {
        "Load a skill: step-by-step instructions for a kind of investigation. Call it with a \
         skill name from the list in the system prompt before investigating a matching question."
    }

    fn one_liner(&self, params: &FetchSkillParams) -> String {
        format!("fetch_skill {}", params.skill_name)
    }

    fn invoke<'a>(
        &'a self,
        params: FetchSkillParams,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { self.fetch(&params.skill_name) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            let dir = std::env::temp_dir()
                .join(format!("triage-skills-{}", uuid::Uuid::new_v4().simple()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn skills_are_found_listed_and_fetched_by_name_only() {
        let dir = TempDir::new();
        write(
            dir.path(),
            "oom/SKILL.md",
            "---\nname: oom-kills\ndescription: Pods killed for memory\n---\n1. kubectl describe the pod\n",
        );
        write(dir.path(), "broken/SKILL.md", "no frontmatter\n");
        write(dir.path(), "secret.txt", "TOP SECRET\n");
        let settings = SkillSettings {
            paths: vec![dir.path().to_path_buf()],
            ..SkillSettings::default()
        };
        let (skills, problems) = discover(&settings.paths);
        assert_eq!(skills.len(), 1);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let toolsets = toolset(&settings);
        let ts = &toolsets[0];
        assert!(
            ts.instructions
                .contains("- oom-kills: Pods killed for memory")
        );
        let fetch = FetchSkill {
            skills: Arc::new(skills),
        };
        let ok = fetch.fetch("oom-kills");
        assert!(ok.data.contains("kubectl describe the pod"), "{}", ok.data);
        assert!(!ok.data.contains("---"), "frontmatter is not repeated");
        for hostile in [
            "../../etc/passwd",
            "/etc/passwd",
            "oom/../secret.txt",
            "secret.txt",
        ] {
            let out = fetch.fetch(hostile);
            assert!(
                out.error
                    .as_deref()
                    .unwrap_or("")
                    .contains("no skill named"),
                "{hostile}"
            );
            assert!(!out.data.contains("TOP SECRET") && !out.data.contains("root:"));
        }
    }

    #[test]
    fn a_link_out_of_the_directory_is_refused() {
        let dir = TempDir::new();
        let outside = TempDir::new();
        write(
            outside.path(),
            "SKILL.md",
            "---\nname: escape\ndescription: d\n---\nOUTSIDE\n",
        );
        std::fs::create_dir_all(dir.path().join("x")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("SKILL.md"),
            dir.path().join("x/SKILL.md"),
        )
        .unwrap();
        let (skills, problems) = discover(&[dir.path().to_path_buf()]);
        assert!(skills.is_empty());
        assert!(problems[0].contains("outside"), "{problems:?}");
    }

    /// The layout a Kubernetes ConfigMap volume has (HolmesGPT's chart mounts `customSkills`
    /// so): `<skill>` links to `..data/<skill>`, `..data` to a timestamped directory. The
    /// chart's skills carry no `name`: each is named after its directory. Of two skills with
    /// one name, the later directory's wins.
    #[test]
    fn configmap_mounts_and_unnamed_skills_load_as_in_holmesgpt() {
        let dir = TempDir::new();
        write(
            dir.path(),
            "..2026_01_01_00_00_00.1/dns/SKILL.md",
            "---\ndescription: DNS failures\n---\nCheck CoreDNS\n",
        );
        std::os::unix::fs::symlink("..2026_01_01_00_00_00.1", dir.path().join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/dns", dir.path().join("dns")).unwrap();
        let team = TempDir::new();
        write(
            team.path(),
            "dns/SKILL.md",
            "---\nname: dns\ndescription: Our DNS runbook\n---\nAsk the network team\n",
        );
        let (skills, problems) = discover(&[dir.path().to_path_buf(), team.path().to_path_buf()]);
        assert_eq!(skills.len(), 1, "{skills:?} {problems:?}");
        assert_eq!(skills[0].name, "dns");
        assert_eq!(skills[0].description, "Our DNS runbook");
        assert!(problems[0].contains("overrides"), "{problems:?}");
        let (alone, problems) = discover(&[dir.path().to_path_buf()]);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            (alone[0].name.as_str(), alone[0].description.as_str()),
            ("dns", "DNS failures")
        );
    }

    #[test]
    fn repos_are_reported_not_supported() {
        let toolsets = toolset(&SkillSettings {
            repos: vec!["https://git.example/skills.git".into()],
            ..SkillSettings::default()
        });
        assert!(matches!(
            &toolsets[0].status,
            super::super::ToolsetStatus::Unavailable(r) if r.contains("not supported")
        ));
    }
}
