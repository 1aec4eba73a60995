//! The conversation store's files as start-up sees them: which of them tools may never read,
//! and the data directory's mode (issue 34).

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::config::ConversationSettings;
use crate::store::{sqlite_companions, sqlite_file};

/// The files and directories of the conversation store no tool may read: the data directory,
/// and for SQLite the database and its `-wal`, `-shm` and `-journal` files, wherever
/// `database_url` puts them. Paths that do not exist yet are listed too: the sandbox
/// protects a path that appears later.
pub(super) fn protected(c: &ConversationSettings) -> Vec<PathBuf> {
    let mut paths = vec![c.data_dir()];
    if let Some(db) = sqlite_file(&c.database_url()) {
        paths.extend(sqlite_companions(&db));
        paths.push(db);
    }
    paths
        .into_iter()
        .map(|p| std::path::absolute(&p).unwrap_or(p))
        .collect()
}

/// The data directory is triage's own: when the SQLite database is in it, an existing one
/// (made before it was created 0700) is closed to other users. A directory named only through
/// `database_url` is left as it is: it may be shared with other files.
pub(super) fn tighten_data_dir(c: &ConversationSettings) {
    let Some(db) = sqlite_file(&c.database_url()) else {
        return;
    };
    let dir = c.data_dir();
    if db.parent() != Some(dir.as_path()) || !dir.is_dir() {
        return;
    }
    if let Err(e) = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)) {
        tracing::warn!(dir = %dir.display(), error = %e, "could not make the data directory private (0700)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_its_companions_and_the_data_dir_are_protected() {
        let c =
            crate::config::Settings::from_toml("[conversations]\ndata_dir = \"/var/lib/triage\"\n")
                .expect("settings")
                .conversations;
        let protected = protected(&c);
        for path in [
            "/var/lib/triage",
            "/var/lib/triage/triage.db",
            "/var/lib/triage/triage.db-wal",
            "/var/lib/triage/triage.db-shm",
            "/var/lib/triage/triage.db-journal",
        ] {
            assert!(
                protected.contains(&PathBuf::from(path)),
                "{path}: {protected:?}"
            );
        }
    }
}
