//! The sandbox every tool process runs in, so that a command that slips past a toolset's own
//! checks (the bash allow list, kubectl's argument validation) still cannot read triage's
//! secrets or hurt the host.
//!
//! One [`Sandbox`] is built at start-up from `[sandbox]`; for each call a toolset asks it to
//! [`prepare`](Sandbox::prepare) a `tokio::process::Command` and keeps the returned
//! [`CallDir`] (the call's private `TMPDIR`, removed when dropped) until the process group is
//! gone. The child then, between fork and exec ([`child`]): gets its resource limits, drops to
//! the tools' user when triage is root (groups cleared, capability bounding set emptied), sets
//! `no_new_privs`, and enters a Landlock domain ([`rules`]) that lets it read only system
//! locations and write only its own `TMPDIR` — or, for a call the user approved, write
//! wherever the tools' user may. Neither can read triage's own files.

mod child;
mod guard;
mod network;
mod peers;
mod report;
mod rules;
mod spawner;

use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tokio::process::{Child, Command};

pub use child::Identity;
pub use network::NetworkWallInfo;
pub use peers::{Peer, PeerCheck};
pub use report::{LandlockInfo, SandboxInfo, SandboxLimits};
pub use spawner::ThreadWall;

/// `[sandbox]`: who tool processes run as, what they may read, and their limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSettings {
    /// The user tool processes run as when triage runs as root: a name, a uid, or `uid:gid`.
    pub user: String,
    /// More locations tools may read (besides /usr, /etc, /proc, … and the kubeconfigs).
    pub read_paths: Vec<PathBuf>,
    /// `RLIMIT_NPROC` of tool processes.
    pub max_processes: u64,
    /// `RLIMIT_FSIZE`: the largest file a tool process may write.
    pub max_file_size_mb: u64,
    /// `RLIMIT_CPU` of each tool process.
    pub max_cpu_secs: u64,
    /// Refuse to start when the kernel has no Landlock (instead of a loud warning).
    pub require_landlock: bool,
    /// The only TCP ports tool processes may connect to (unset: every port). triage's own
    /// listening ports are never reachable either way; a short list also makes each tool
    /// process start faster (Landlock copies the rules into every process's domain).
    pub tcp_ports: Option<Vec<u16>>,
    /// Tests only (no config key sets it): the first network wall stays down, so the second
    /// can be seen to hold alone, as on a kernel without Landlock's TCP rules.
    #[serde(skip)]
    pub tcp_rules_off_for_tests: bool,
    /// Tests only (no config key sets it): tools keep triage's uid even when it is root, as
    /// when triage runs unprivileged.
    #[serde(skip)]
    pub keep_uid_for_tests: bool,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            user: "nobody".into(),
            read_paths: Vec::new(),
            max_processes: 256,
            max_file_size_mb: 100,
            max_cpu_secs: 120,
            require_landlock: false,
            tcp_ports: None,
            tcp_rules_off_for_tests: false,
            keep_uid_for_tests: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("sandbox: {0}")]
    Config(String),
    #[error("sandbox: {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SandboxError {
    move |source| SandboxError::Io {
        what: what.into(),
        source,
    }
}

/// Locations every tool may read: programs, libraries, system configuration, process and
/// device information, system logs. Missing ones are skipped.
const SYSTEM_READ_PATHS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc",
    "/sys", "/dev", "/var/log",
];

/// What one toolset's processes need beyond the common rules.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Files or directories to read (e.g. the kubeconfig kubectl uses).
    pub read: Vec<PathBuf>,
    /// Directories to read and write (e.g. kubectl's configured cache).
    pub write: Vec<PathBuf>,
}

/// Whether the call was approved by the user: approved calls may write wherever the tools'
/// user may; others only in their private `TMPDIR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    Approved,
    NotApproved,
}

impl From<bool> for Approval {
    fn from(approved: bool) -> Self {
        if approved {
            Approval::Approved
        } else {
            Approval::NotApproved
        }
    }
}

/// The sandbox in force; cheap to clone.
#[derive(Debug, Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    identity: Identity,
    /// Landlock ABI of the kernel (`None`: no Landlock).
    kernel_abi: Option<i32>,
    limits: child::Limits,
    /// Canonical system locations (and `read_paths`) tools may read.
    read_roots: Vec<PathBuf>,
    /// triage's own files: never readable by a tool, even inside a readable location.
    protected: Vec<PathBuf>,
    /// Holds the private `TMPDIR`s (mode 0711: they can be entered, not listed).
    base_dir: PathBuf,
    /// The thread every tool process is forked from (the first network wall).
    spawner: spawner::Spawner,
    /// triage's listening ports, which no tool process may connect to.
    walled_ports: Vec<u16>,
    /// The second network wall: `Err` says why it is not up (tools keep triage's uid, or the
    /// kernel cannot name a socket's owner); `Ok(None)` when nothing listens.
    peer_check: Result<Option<Arc<PeerCheck>>, String>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base_dir);
    }
}

impl Sandbox {
    /// Builds the sandbox. `protected` are triage's own files (config, model list, keys):
    /// tools can never read them, even inside a location they may otherwise read.
    /// `walled_ports` are triage's listening ports: no tool process may make a request there.
    pub fn new(
        settings: &SandboxSettings,
        protected: &[PathBuf],
        walled_ports: &[u16],
    ) -> Result<Sandbox, SandboxError> {
        let identity = if settings.keep_uid_for_tests {
            // SAFETY: geteuid/getegid only read the process's credentials.
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            Identity::Same { uid, gid }
        } else {
            Identity::for_tools(&settings.user)?
        };
        Sandbox::with_identity(settings, protected, walled_ports, identity)
    }

    fn with_identity(
        settings: &SandboxSettings,
        protected: &[PathBuf],
        walled_ports: &[u16],
        identity: Identity,
    ) -> Result<Sandbox, SandboxError> {
        let kernel_abi = rules::kernel_abi();
        if kernel_abi.is_none() && settings.require_landlock {
            return Err(SandboxError::Config(
                "this kernel has no Landlock (it is not built in or not enabled at boot, see \
                 /sys/kernel/security/lsm) and `sandbox.require_landlock` is true"
                    .into(),
            ));
        }
        let limits = child::Limits {
            max_processes: settings.max_processes.max(1),
            max_file_size: settings.max_file_size_mb.max(1).saturating_mul(1024 * 1024),
            max_cpu_secs: settings.max_cpu_secs.max(1),
        };
        let read_roots = SYSTEM_READ_PATHS
            .iter()
            .map(PathBuf::from)
            .chain(settings.read_paths.iter().cloned())
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        let protected = protected
            .iter()
            .filter_map(|p| rules::canonical_or_planned(p))
            .collect();
        let base_dir = create_base_dir()?;
        let walled_ports = walled_ports.to_vec();
        let peer_check = match &identity {
            _ if walled_ports.is_empty() => Ok(None),
            Identity::Same { .. } => Err("tools keep triage's uid (triage is not root), so the \
                 kernel's socket tables cannot tell their connections from triage's"
                .to_owned()),
            Identity::Switch { uid, .. } => PeerCheck::new(*uid).map(|c| Some(Arc::new(c))),
        };
        let announce = network::announcer(walled_ports.clone(), &peer_check);
        // Tests of the second wall alone leave the first one down.
        let spawner = spawner::Spawner::start(
            walled_ports.clone(),
            settings.tcp_ports.clone(),
            settings.tcp_rules_off_for_tests,
            announce,
        );
        Ok(Sandbox {
            inner: Arc::new(Inner {
                identity,
                kernel_abi,
                limits,
                read_roots,
                protected,
                base_dir,
                spawner,
                walled_ports,
                peer_check,
            }),
        })
    }

    /// Starts `cmd` sandboxed: a private `TMPDIR` (also the working directory; `setup` may
    /// read its path, e.g. for `HOME`), the limits, the tools' user and the Landlock rules,
    /// forked from the walled spawner thread. Keep the returned [`CallDir`] until the process
    /// group is gone: dropping it removes the directory.
    pub async fn spawn(
        &self,
        mut cmd: Command,
        grants: &Grants,
        approval: Approval,
        setup: impl FnOnce(&mut Command, &Path),
    ) -> std::io::Result<(Child, CallDir)> {
        let dir = self
            .prepare(&mut cmd, grants, approval)
            .map_err(std::io::Error::other)?;
        setup(&mut cmd, &dir.path);
        let mut attempt = 0;
        loop {
            // tokio registers the child with the runtime entered where it is spawned: ours.
            let runtime = tokio::runtime::Handle::current();
            let (back, spawned) = self
                .inner
                .spawner
                .run(move || {
                    let _entered = runtime.enter();
                    let child = cmd.spawn();
                    (cmd, child)
                })
                .await?;
            cmd = back;
            match spawned {
                // A program just written (an upgrade in progress, or a file another thread's
                // fork still holds open for writing) cannot be executed for a moment.
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < 5 => {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20 * attempt)).await;
                }
                spawned => return spawned.map(|child| (child, dir)),
            }
        }
    }

    /// Sets up `cmd` to run sandboxed, for [`spawn`](Sandbox::spawn).
    fn prepare(
        &self,
        cmd: &mut Command,
        grants: &Grants,
        approval: Approval,
    ) -> Result<CallDir, SandboxError> {
        let inner = &self.inner;
        let dir = CallDir::create(&inner.base_dir, &inner.identity)?;
        cmd.env("TMPDIR", &dir.path).current_dir(&dir.path);
        let ruleset: Option<OwnedFd> = match inner.kernel_abi {
            Some(_) => Some(self.ruleset(grants, approval, &dir.path)?),
            None => None,
        };
        let plan = child::Plan::new(&inner.identity, &inner.limits, ruleset);
        // SAFETY: `Plan::apply` only makes async-signal-safe system calls (setrlimit,
        // setgroups, setgid, setuid, prctl, landlock_restrict_self, fork) on data prepared
        // here.
        unsafe {
            cmd.pre_exec(move || plan.apply());
        }
        Ok(dir)
    }

    fn ruleset(
        &self,
        grants: &Grants,
        approval: Approval,
        tmpdir: &Path,
    ) -> Result<OwnedFd, SandboxError> {
        let inner = &self.inner;
        let canonical = |paths: &[PathBuf]| -> Vec<PathBuf> {
            paths
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .collect()
        };
        let mut plan = rules::Plan {
            read: inner.read_roots.clone(),
            write: canonical(&grants.write),
            tmpdir: tmpdir.to_owned(),
            excluded: inner.protected.clone(),
            everything: approval == Approval::Approved,
        };
        plan.read.extend(canonical(&grants.read));
        if plan.everything {
            // Other calls' directories; this call's own is granted on its own.
            plan.excluded.push(inner.base_dir.clone());
        }
        rules::build(&plan).map_err(io_error("building the Landlock rules"))
    }

    /// Whether a grant of `path` would reach one of triage's own files: it is one, lies in
    /// one (the data directory) or holds one (the rules would cut them out, but a grant a
    /// toolset works out for itself should not name them at all). `/` holds them all.
    pub fn guards(&self, path: &Path) -> bool {
        let Some(path) = rules::canonical_or_planned(path) else {
            return true;
        };
        self.inner
            .protected
            .iter()
            .any(|own| own.starts_with(&path) || path.starts_with(own))
    }

    /// The default sandbox, for tests.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Sandbox {
        Sandbox::new(&SandboxSettings::default(), &[], &[]).expect("the default sandbox")
    }

    pub fn identity(&self) -> &Identity {
        &self.inner.identity
    }
}

/// The directory holding this process's private `TMPDIR`s, fresh and owned by triage.
fn create_base_dir() -> Result<PathBuf, SandboxError> {
    static N: AtomicU64 = AtomicU64::new(0);
    static CLEANED: std::sync::Once = std::sync::Once::new();
    CLEANED.call_once(remove_stale_base_dirs);
    let dir = std::env::temp_dir().join(format!(
        "triage-sandbox-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new()
        .mode(0o711)
        .create(&dir)
        .map_err(io_error(format!("creating {}", dir.display())))?;
    Ok(dir)
}

/// Removes the directories of triage processes that are gone (killed, or never dropped their
/// sandbox): a timeout kill leaves files there that no one else would remove.
fn remove_stale_base_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("triage-sandbox-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        // Our own pid: an earlier process's (this runs before we create any).
        let stale = pid.is_some_and(|pid| {
            pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists()
        });
        if stale {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A call's private `TMPDIR`: owned by the tools' user, mode 0700, removed (with whatever the
/// call left in it) when dropped.
pub struct CallDir {
    path: PathBuf,
}

impl CallDir {
    fn create(base: &Path, identity: &Identity) -> Result<CallDir, SandboxError> {
        let path = base.join(format!("call-{:016x}", rand::random::<u64>()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(io_error(format!("creating {}", path.display())))?;
        let dir = CallDir { path };
        if let Identity::Switch { uid, gid, .. } = identity {
            std::os::unix::fs::chown(&dir.path, Some(*uid), Some(*gid)).map_err(io_error(
                format!("giving {} to the tools' user", dir.path.display()),
            ))?;
        }
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CallDir {
    fn drop(&mut self) {
        let removal = Removal(std::mem::take(&mut self.path));
        // Thousands of files (a killed `sort`) take a while: off the async workers. A pool that
        // is shutting down discards the closure unrun; dropping it then removes the directory.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(move || drop(removal));
            }
            Err(_) => drop(removal),
        }
    }
}

/// A call's directory, removed when this is dropped, wherever that happens.
struct Removal(PathBuf);

impl Drop for Removal {
    fn drop(&mut self) {
        remove_when_quiet(&self.0);
    }
}

/// Removes a call's directory; a process killed a moment ago may still add a file, so a
/// failed attempt is retried briefly.
fn remove_when_quiet(path: &Path) {
    for attempt in 0..5u64 {
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                std::thread::sleep(std::time::Duration::from_millis(20 * (attempt + 1)));
            }
            _ => return,
        }
    }
    tracing::warn!(dir = %path.display(), "could not remove a tool call's TMPDIR");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_directory_dropped_while_its_runtime_stops_is_still_removed() {
        let base = create_base_dir().expect("dir");
        let dir = CallDir::create(&base, &Identity::Same { uid: 0, gid: 0 }).expect("call dir");
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("left.txt"), "x").expect("write");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        // A tool call still open when its runtime stops: its task (and the directory) is
        // dropped after the blocking pool has shut, so the removal cannot go there.
        runtime.spawn(async move {
            let _dir = dir;
            std::future::pending::<()>().await;
        });
        runtime.block_on(tokio::task::yield_now());
        runtime.shutdown_timeout(std::time::Duration::ZERO);
        assert!(!path.exists(), "{} is left", path.display());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn settings_default_and_refuse_unknown_keys() {
        let s: SandboxSettings = serde_json::from_value(json!({})).expect("defaults");
        assert_eq!(s.user, "nobody");
        assert_eq!(s.max_processes, 256);
        assert!(!s.require_landlock);
        assert!(serde_json::from_value::<SandboxSettings>(json!({"enabled": false})).is_err());
    }
}
