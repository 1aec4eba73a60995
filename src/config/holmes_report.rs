//! What reading HolmesGPT's files reports: filled by `holmes.rs` (the files) and
//! `holmes_toolsets.rs` (the toolsets without an equivalent).

use std::path::PathBuf;

/// What HolmesGPT's files asked for that triage reports instead of doing, and which files
/// were read (the sandbox keeps tools from reading them: they may hold keys).
#[derive(Debug, Clone, Default)]
pub struct HolmesReport {
    pub files: Vec<PathBuf>,
    /// A HolmesGPT toolset (or add-on) that is enabled but has no equivalent, and why.
    pub unavailable: Vec<(String, String)>,
}
