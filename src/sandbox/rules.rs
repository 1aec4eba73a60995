//! The Landlock rules of one tool call, built in the parent with the `landlock` crate.
//!
//! Landlock only grants: a rule gives rights on a whole hierarchy, and nothing inside it can be
//! taken back. So a granted location that holds one of triage's own files (a config file under
//! `/etc`, say) is granted entry by entry instead, leaving the path to that file out: the
//! directories along it keep only the rights that do not reveal contents (listing, and for
//! approved calls creating and removing), every sibling gets the full rights. Symbolic links
//! need no rule (their targets are judged where they lie).

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

/// The Landlock ABI whose rights triage handles (6: Linux 6.12, with signal and abstract
/// unix-socket scoping); older kernels enforce what they know.
pub(super) const ABI_USED: i32 = 6;
const ABI_HANDLED: ABI = ABI::V6;

/// What one call may reach.
pub(super) struct Plan {
    /// Canonical locations to read.
    pub read: Vec<PathBuf>,
    /// Canonical locations to read and write.
    pub write: Vec<PathBuf>,
    /// The call's private directory: read and write.
    pub tmpdir: PathBuf,
    /// Canonical paths no rule may reach (triage's files; other calls' directories).
    pub excluded: Vec<PathBuf>,
    /// An approved call: read and write everywhere but `excluded`.
    pub everything: bool,
}

/// The kernel's Landlock ABI version, `None` without Landlock.
pub(super) fn kernel_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and the VERSION flag the call only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (v > 0).then(|| i32::try_from(v).unwrap_or(i32::MAX))
}

/// The ruleset for `plan`, ready for `landlock_restrict_self` in the child.
pub(super) fn build(plan: &Plan) -> io::Result<OwnedFd> {
    let all = AccessFs::from_all(ABI_HANDLED);
    let read = AccessFs::from_read(ABI_HANDLED);
    let mut grants = Vec::new();
    if plan.everything {
        grant(Path::new("/"), all, &plan.excluded, &mut grants);
    } else {
        for path in &plan.read {
            grant(path, read, &plan.excluded, &mut grants);
        }
        for path in &plan.write {
            grant(path, all, &plan.excluded, &mut grants);
        }
        // `2>/dev/null`.
        grants.push((
            PathBuf::from("/dev/null"),
            AccessFs::WriteFile | AccessFs::Truncate,
        ));
    }
    grants.push((plan.tmpdir.clone(), all));

    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .and_then(|r| r.scope(Scope::from_all(ABI_HANDLED)))
        .and_then(|r| r.create())
        .map_err(io::Error::other)?;
    for (path, access) in grants {
        // A location that vanished since start-up is simply not granted.
        let Ok(fd) = PathFd::new(&path) else {
            continue;
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(io::Error::other)?;
    }
    Option::<OwnedFd>::from(ruleset)
        .ok_or_else(|| io::Error::other("the kernel did not create a Landlock ruleset"))
}

/// A protected path in canonical form, also one that does not exist yet (a database's `-wal`
/// file before the first write, a data directory made later at start-up): its nearest
/// existing ancestor resolved and the rest appended. Each call's rules are built when it
/// starts, so such a path is kept out from the moment it appears.
pub(super) fn canonical_or_planned(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = std::fs::canonicalize(path) {
        return Some(real);
    }
    let absolute = std::path::absolute(path).ok()?;
    let mut names = Vec::new();
    let mut base = absolute.as_path();
    loop {
        // A `..` or the root: nothing sensible to append to.
        names.push(base.file_name()?);
        base = base.parent()?;
        if let Ok(real) = std::fs::canonicalize(base) {
            return Some(names.iter().rev().fold(real, |p, name| p.join(name)));
        }
    }
}

/// Grants `access` beneath `path`, except beneath any of `excluded`.
fn grant(
    path: &Path,
    access: BitFlags<AccessFs>,
    excluded: &[PathBuf],
    out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
) {
    if excluded.iter().any(|e| path.starts_with(e)) {
        return;
    }
    if !excluded.iter().any(|e| e.starts_with(path)) {
        out.push((path.to_owned(), access));
        return;
    }
    // `path` is a directory on the way to an excluded path: no right that reads contents
    // here (rights are inherited by everything beneath), its entries one by one.
    let outer = access & !(AccessFs::ReadFile | AccessFs::Execute);
    if !outer.is_empty() {
        out.push((path.to_owned(), outer));
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| !t.is_symlink()) {
            grant(&entry.path(), access, excluded, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(path: &str, excluded: &[&str]) -> Vec<(PathBuf, BitFlags<AccessFs>)> {
        let read = AccessFs::from_read(ABI_HANDLED);
        let excluded: Vec<PathBuf> = excluded.iter().map(PathBuf::from).collect();
        let mut out = Vec::new();
        grant(Path::new(path), read, &excluded, &mut out);
        out
    }

    #[test]
    fn a_hierarchy_without_excluded_paths_is_one_rule() {
        let out = granted("/usr", &["/etc/triage.toml"]);
        assert_eq!(
            out,
            vec![(PathBuf::from("/usr"), AccessFs::from_read(ABI_HANDLED))]
        );
        assert!(granted("/etc/x", &["/etc"]).is_empty());
    }

    #[test]
    fn an_excluded_file_is_cut_out_of_its_hierarchy() {
        let dir = std::env::temp_dir().join(format!("triage-rules-{}", rand::random::<u64>()));
        std::fs::create_dir_all(dir.join("conf/sub")).unwrap();
        for f in ["conf/secret.toml", "conf/other", "conf/sub/a", "b"] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        std::os::unix::fs::symlink(dir.join("conf/secret.toml"), dir.join("link")).unwrap();
        let secret = dir.join("conf/secret.toml");
        let mut out = Vec::new();
        let read = AccessFs::from_read(ABI_HANDLED);
        grant(&dir, read, std::slice::from_ref(&secret), &mut out);
        let _ = std::fs::remove_dir_all(&dir);
        out.sort();
        let listing = BitFlags::from(AccessFs::ReadDir);
        let mut expected = vec![
            (dir.clone(), listing),
            (dir.join("b"), read),
            (dir.join("conf"), listing),
            (dir.join("conf/other"), read),
            (dir.join("conf/sub"), read),
        ];
        expected.sort();
        assert_eq!(out, expected);
    }

    #[test]
    fn a_protected_path_that_does_not_exist_yet_is_kept_by_its_real_parent() {
        let dir = {
            let d = std::env::temp_dir().join(format!("triage-planned-{}", rand::random::<u64>()));
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let link = dir.join("link");
        std::os::unix::fs::symlink(&dir, &link).expect("symlink");
        let real = std::fs::canonicalize(&dir).expect("canonical");
        assert_eq!(
            canonical_or_planned(&link.join("data/triage.db-wal")),
            Some(real.join("data/triage.db-wal"))
        );
        assert_eq!(canonical_or_planned(&link), Some(real.clone()));
        // A protected directory (a data dir) is cut out whole, with files not yet made in it.
        std::fs::create_dir_all(real.join("data")).unwrap();
        std::fs::write(real.join("data/triage.db"), "x").unwrap();
        std::fs::write(real.join("other"), "x").unwrap();
        let read = AccessFs::from_read(ABI_HANDLED);
        let mut out = Vec::new();
        let excluded = [real.join("data"), real.join("data/triage.db-wal")];
        grant(&real, read, &excluded, &mut out);
        out.sort();
        assert_eq!(
            out,
            vec![
                (real.clone(), BitFlags::from(AccessFs::ReadDir)),
                (real.join("other"), read),
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
