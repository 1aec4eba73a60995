//! What the sandbox says about itself: the start-up log, `triage check` and `/api/info`.

use std::path::Path;

use schemars::JsonSchema;
use serde::Serialize;

use super::{Identity, Sandbox, rules};

impl Sandbox {
    /// One line for the start-up log, loud when Landlock is missing.
    pub fn log_summary(&self) {
        let inner = &self.inner;
        let who = inner.identity.describe();
        let limits = &inner.limits;
        match inner.kernel_abi {
            Some(abi) => tracing::info!(
                landlock_abi = abi,
                landlock_abi_used = abi.min(rules::ABI_USED),
                tools_user = %who,
                max_processes = limits.max_processes,
                max_file_size_bytes = limits.max_file_size,
                max_cpu_secs = limits.max_cpu_secs,
                "tool sandbox in force"
            ),
            None => tracing::error!(
                tools_user = %who,
                max_processes = limits.max_processes,
                max_file_size_bytes = limits.max_file_size,
                max_cpu_secs = limits.max_cpu_secs,
                "THIS KERNEL HAS NO LANDLOCK: tool processes are NOT confined to the files they \
                 need; only the user switch, no_new_privs and the limits apply. Use a kernel \
                 with Landlock (5.13+, enabled in the `lsm=` boot list), or set \
                 sandbox.require_landlock = true to refuse to start without it"
            ),
        }
        if std::process::id() == 1 {
            tracing::warn!(
                "triage runs as PID 1: the processes of a tool call it kills (timeouts, \
                 cancellations) are re-parented to it and never reaped; run it under an init \
                 (`docker run --init`, tini)"
            );
        }
        if inner.kernel_abi.is_none() {
            for file in inner
                .protected
                .iter()
                .filter(|f| readable_by(f, &inner.identity))
            {
                tracing::error!(
                    file = %file.display(),
                    tools_user = %who,
                    "without Landlock, tool processes can read this file of triage's: make it \
                     unreadable to the tools' user (e.g. mode 0600, owned by triage's user, with \
                     triage running as root so that tools run as sandbox.user)"
                );
            }
        }
    }

    /// One line for `triage check`.
    pub fn summary(&self) -> String {
        let inner = &self.inner;
        let landlock = match inner.kernel_abi {
            Some(abi) => format!("Landlock ABI {abi} (using {})", abi.min(rules::ABI_USED)),
            None => "NO LANDLOCK (tools are not confined to the files they need)".to_owned(),
        };
        let limits = &inner.limits;
        let network = match self.network_wall() {
            None => String::new(),
            Some(wall) => match &wall.warning {
                None => format!(
                    "; port(s) {:?} walled off by {}",
                    wall.walled_ports, wall.layers
                ),
                Some(warning) => format!(
                    "; port(s) {:?} walled off by {}: {warning}",
                    wall.walled_ports, wall.layers
                ),
            },
        };
        format!(
            "{landlock}, tools run as {}, at most {} processes, {} MiB per file, {} CPU s{network}",
            inner.identity.describe(),
            limits.max_processes,
            limits.max_file_size / (1024 * 1024),
            limits.max_cpu_secs
        )
    }

    /// The sandbox as `/api/info` reports it.
    pub fn describe(&self) -> SandboxInfo {
        let inner = &self.inner;
        let landlock = match inner.kernel_abi {
            Some(abi) => LandlockInfo {
                available: true,
                kernel_abi: Some(abi.unsigned_abs()),
                abi_used: Some(abi.min(rules::ABI_USED).unsigned_abs()),
                warning: None,
            },
            None => LandlockInfo {
                available: false,
                kernel_abi: None,
                abi_used: None,
                warning: Some(
                    "the kernel has no Landlock: tool processes are not confined to the files \
                     they need"
                        .into(),
                ),
            },
        };
        let (uid, gid) = inner.identity.ids();
        SandboxInfo {
            landlock,
            tools_uid: uid,
            tools_gid: gid,
            separate_user: matches!(inner.identity, Identity::Switch { .. }),
            no_new_privs: true,
            limits: SandboxLimits {
                max_processes: inner.limits.max_processes,
                max_file_size_mb: inner.limits.max_file_size / (1024 * 1024),
                max_cpu_secs: inner.limits.max_cpu_secs,
            },
            network: self.network_wall(),
        }
    }
}

// Documented where `InfoResponse` refers to it; a doc comment here would add a second
// description to the OpenAPI document.
#[derive(Serialize, JsonSchema)]
pub struct SandboxInfo {
    pub landlock: LandlockInfo,
    pub tools_uid: u32,
    pub tools_gid: u32,
    /// Tools run as `sandbox.user` because triage runs as root.
    pub separate_user: bool,
    pub no_new_privs: bool,
    pub limits: SandboxLimits,
    /// The walls between tool processes and triage's own listeners (absent when nothing
    /// listens).
    pub network: Option<super::NetworkWallInfo>,
}

#[derive(Serialize, JsonSchema)]
pub struct LandlockInfo {
    /// False on a kernel without Landlock: tools are not confined to the files they need.
    pub available: bool,
    pub kernel_abi: Option<u32>,
    /// The ABI whose rights triage enforces.
    pub abi_used: Option<u32>,
    pub warning: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct SandboxLimits {
    pub max_processes: u64,
    pub max_file_size_mb: u64,
    pub max_cpu_secs: u64,
}

/// Whether file permissions let the tools' user read `path` (the directories above aside).
fn readable_by(path: &Path, identity: &Identity) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    match identity {
        Identity::Same { .. } => true,
        Identity::Switch { uid, gid, .. } => {
            let mode = meta.mode();
            (meta.uid() == *uid && mode & 0o400 != 0)
                || (meta.gid() == *gid && mode & 0o040 != 0)
                || mode & 0o004 != 0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::create_base_dir;
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn file_permissions_decide_what_a_separate_user_can_read() {
        let dir = create_base_dir().expect("dir");
        let file = dir.join("config.toml");
        std::fs::write(&file, "x").expect("write");
        let nobody = Identity::Switch {
            uid: 65534,
            gid: 65534,
            name: "nobody".into(),
        };
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(readable_by(&file, &nobody));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        // SAFETY: geteuid only reads the process's credentials.
        let owner_is_nobody = unsafe { libc::geteuid() } == 65534;
        assert_eq!(readable_by(&file, &nobody), owner_is_nobody);
        assert!(readable_by(&file, &Identity::Same { uid: 1, gid: 1 }));
        assert!(!readable_by(&dir.join("missing"), &nobody));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
