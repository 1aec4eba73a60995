//! What a stdio MCP server may read besides the system locations: where it is installed. A
//! server installed with npm or pip (what HolmesGPT users configure) lives in a `node_modules`
//! tree or a virtual environment outside `/usr`, and cannot load its own code without it. So
//! the command's real file and its install root are granted, and so are the existing files
//! and directories its arguments name (`node …/dist/index.js`), each with its install root —
//! never one of triage's own files, a directory holding one, or `/`.
//!
//! When a server still cannot start, [`denied_path`] reads its stderr for the path it could
//! not open, so its status names the path and the key that grants it.

use std::path::{Path, PathBuf};

use crate::sandbox::Sandbox;

/// The locations to grant `command args` and the ones refused (triage's own), both
/// canonical.
#[derive(Debug, Default, PartialEq)]
pub struct InstallGrants {
    pub read: Vec<PathBuf>,
    pub refused: Vec<PathBuf>,
}

/// The locations `command args` needs to read, found in the file system; `path` is the
/// server's `PATH`, where a bare command name is looked up.
pub fn install_grants(
    sandbox: &Sandbox,
    command: &str,
    args: &[String],
    path: &str,
) -> InstallGrants {
    let mut named: Vec<PathBuf> = resolve(command, path).into_iter().collect();
    named.extend(args.iter().filter_map(|arg| named_path(arg)));
    let mut grants = InstallGrants::default();
    for given in named {
        let Ok(real) = std::fs::canonicalize(&given) else {
            continue;
        };
        // The link's own tree too (`node_modules/.bin/x` → the package): both are its install.
        let roots = [install_root(&given), install_root(&real)];
        for location in std::iter::once(real.clone()).chain(roots.into_iter().flatten()) {
            let Ok(location) = std::fs::canonicalize(&location) else {
                continue;
            };
            let list = if location == Path::new("/") || sandbox.guards(&location) {
                &mut grants.refused
            } else {
                &mut grants.read
            };
            if !list.contains(&location) {
                list.push(location);
            }
        }
    }
    grants
}

/// The file `command` runs: itself when it names a path, else the first match on `path`.
fn resolve(command: &str, path: &str) -> Option<PathBuf> {
    if command.contains('/') {
        return Some(PathBuf::from(command)).filter(|p| p.is_absolute());
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
}

/// The absolute path an argument names, as itself or as a flag's value (`--dir=/srv/x`),
/// when it exists. A relative one would be read from the server's private directory.
fn named_path(arg: &str) -> Option<PathBuf> {
    let value = arg.split_once('=').map_or(arg, |(_, v)| v);
    let path = Path::new(value);
    (path.is_absolute() && path.exists()).then(|| path.to_path_buf())
}

/// The tree `path` was installed into: the outermost `node_modules` above it (Node looks for
/// dependencies in every `node_modules` up the tree), else the virtual environment holding
/// it (the directory with `pyvenv.cfg`).
fn install_root(path: &Path) -> Option<PathBuf> {
    let ancestors = || path.ancestors().skip(1);
    ancestors()
        .filter(|dir| dir.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .or_else(|| ancestors().find(|dir| dir.join("pyvenv.cfg").is_file()))
        .map(Path::to_path_buf)
}

/// What a line of a server's stderr says it could not open, when it says so: the path in a
/// permission or not-found error (Node's `EACCES … open '/x'`, Python's `[Errno 13]
/// Permission denied: '/x'`, a shell's `/x: Permission denied`, Node's `Cannot find module
/// '/x'`).
pub fn denied_path(line: &str) -> Option<String> {
    const SIGNS: &[&str] = &[
        "EACCES",
        "EPERM",
        "ENOENT",
        "ermission denied",
        "No such file",
        "Cannot find module",
        "Errno 13",
        "Errno 2",
    ];
    if !SIGNS.iter().any(|sign| line.contains(sign)) {
        return None;
    }
    let quoted = ['\'', '"'].into_iter().find_map(|q| {
        line.split(q)
            .skip(1)
            .step_by(2)
            .find(|s| s.starts_with('/'))
            .map(str::to_owned)
    });
    quoted.or_else(|| {
        line.split_whitespace()
            .map(|w| w.trim_end_matches([':', ',', ';', ')']))
            .find(|w| w.starts_with('/') && w.len() > 1)
            .map(str::to_owned)
    })
}

/// The advice to add to a failed server's status for a path it could not open: the path, or
/// the install tree it lies in, else its directory.
pub fn advice(path: &str) -> String {
    let dir = install_root(Path::new(path))
        .or_else(|| Path::new(path).parent().map(Path::to_path_buf))
        .filter(|d| d != Path::new("/"))
        .map_or_else(|| path.to_owned(), |d| d.display().to_string());
    format!(
        "the server could not open {path} in the sandbox: if it exists and the server needs \
         it, add it (or {dir}) to `sandbox.read_paths`"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::SandboxSettings;

    struct TempDir(PathBuf);
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn temp_dir() -> TempDir {
        let dir = std::env::temp_dir().join(format!("triage-install-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(std::fs::canonicalize(&dir).unwrap())
    }
    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }

    #[test]
    fn a_node_package_and_a_venv_are_granted_their_install_trees() {
        let dir = temp_dir();
        let modules = dir.0.join("app/node_modules");
        let entry = modules.join("@scope/server/dist/index.js");
        touch(&entry);
        std::fs::create_dir_all(modules.join(".bin")).unwrap();
        std::os::unix::fs::symlink(
            "../@scope/server/dist/index.js",
            modules.join(".bin/server"),
        )
        .unwrap();
        let venv = dir.0.join("venv");
        touch(&venv.join("pyvenv.cfg"));
        touch(&venv.join("bin/mcp-server-x"));
        let plain = dir.0.join("plain.conf");
        touch(&plain);
        let sandbox = Sandbox::for_tests();

        let link = modules.join(".bin/server").display().to_string();
        let g = install_grants(&sandbox, &link, &["stdio".into()], "/usr/bin");
        assert_eq!(g.read, [entry.clone(), modules.clone()], "{g:?}");

        let args = [
            entry.display().to_string(),
            format!("--config={}", plain.display()),
        ];
        let g = install_grants(&sandbox, "sh", &args, "/usr/bin:/bin");
        assert!(
            g.read.contains(&entry) && g.read.contains(&modules),
            "{g:?}"
        );
        assert!(g.read.contains(&plain), "{g:?}");
        assert!(
            g.read.iter().any(|p| p.to_string_lossy().ends_with("sh")),
            "the resolved command: {g:?}"
        );

        let program = venv.join("bin/mcp-server-x").display().to_string();
        let g = install_grants(&sandbox, &program, &["/no/such/file".into()], "");
        assert_eq!(
            g.read,
            [venv.join("bin/mcp-server-x"), venv.clone()],
            "{g:?}"
        );
    }

    /// An argument naming triage's config file, its data directory, a directory holding them
    /// or `/` is never granted: the sandbox's own list of triage's files decides.
    #[test]
    fn triages_own_files_and_the_root_are_never_granted() {
        let dir = temp_dir();
        let config = dir.0.join("etc/triage.toml");
        touch(&config);
        let data = dir.0.join("data");
        touch(&data.join("triage.db"));
        let sandbox = Sandbox::new(
            &SandboxSettings::default(),
            &[config.clone(), data.clone()],
            &[],
        )
        .expect("sandbox");
        let args: Vec<String> = [&config, &data, &data.join("triage.db"), &dir.0.join("etc")]
            .iter()
            .map(|p| p.display().to_string())
            .chain(["/".to_owned()])
            .collect();
        let g = install_grants(&sandbox, "/bin/sh", &args, "");
        assert!(
            g.read
                .iter()
                .all(|p| !p.starts_with(&dir.0) && p != Path::new("/")),
            "{g:?}"
        );
        assert_eq!(g.refused.len(), 5, "{g:?}");
    }

    #[test]
    fn the_path_a_server_could_not_open_is_read_from_its_stderr() {
        for (line, path) in [
            (
                "Error: EACCES: permission denied, open '/opt/x/node_modules/a/index.js'",
                Some("/opt/x/node_modules/a/index.js"),
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/srv/venv/pyvenv.cfg'",
                Some("/srv/venv/pyvenv.cfg"),
            ),
            (
                "bash: line 1: /home/u/server.sh: Permission denied",
                Some("/home/u/server.sh"),
            ),
            ("Error: Cannot find module \"/a/b.js\"", Some("/a/b.js")),
            ("Node.js v20.20.2", None),
            ("listening on stdio", None),
        ] {
            assert_eq!(denied_path(line).as_deref(), path, "{line}");
        }
        let advice = advice("/opt/x/node_modules/a/index.js");
        assert!(
            advice.contains("`sandbox.read_paths`") && advice.contains("(or /opt/x/node_modules)"),
            "{advice}"
        );
        assert!(super::advice("/srv/server.py").contains("(or /srv)"));
    }
}
