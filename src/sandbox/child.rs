//! What a tool process does to itself between fork and exec. Everything is prepared in the
//! parent (allocation, name look-ups, opening files); [`Plan::apply`] runs in the forked child
//! of a multi-threaded process, where only async-signal-safe calls are allowed, so it makes raw
//! system calls on plain data and nothing else.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::SandboxError;

/// The user tool processes run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// triage runs as root: tools switch to this unprivileged user.
    Switch { uid: u32, gid: u32, name: String },
    /// triage is not root: tools keep its uid (Landlock and no_new_privs isolate them).
    Same { uid: u32, gid: u32 },
}

impl Identity {
    /// The identity for tool processes: `user` when triage is root, else triage's own.
    pub fn for_tools(user: &str) -> Result<Identity, SandboxError> {
        // SAFETY: getuid/getgid only read the calling process's credentials.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if uid != 0 {
            return Ok(Identity::Same { uid, gid });
        }
        let (uid, gid) = resolve_user(user)?;
        if uid == 0 {
            return Err(SandboxError::Config(format!(
                "`sandbox.user` is {user:?}, which is root: tool processes must run as an \
                 unprivileged user (the default is `nobody`)"
            )));
        }
        Ok(Identity::Switch {
            uid,
            gid,
            name: user.to_owned(),
        })
    }

    pub fn ids(&self) -> (u32, u32) {
        match self {
            Identity::Switch { uid, gid, .. } | Identity::Same { uid, gid } => (*uid, *gid),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Identity::Switch { uid, gid, name } => format!("{name} (uid {uid}, gid {gid})"),
            Identity::Same { uid, gid } => {
                format!("triage's own (uid {uid}, gid {gid}; triage is not root)")
            }
        }
    }
}

/// `name`, `uid` or `uid:gid` → (uid, gid); a name's group is its primary group.
fn resolve_user(spec: &str) -> Result<(u32, u32), SandboxError> {
    let spec = spec.trim();
    let bad = |why: &str| SandboxError::Config(format!("`sandbox.user` = {spec:?}: {why}"));
    if let Some((u, g)) = spec.split_once(':') {
        let uid = u.parse().map_err(|_| bad("expected uid:gid numbers"))?;
        let gid = g.parse().map_err(|_| bad("expected uid:gid numbers"))?;
        return Ok((uid, gid));
    }
    if let Ok(uid) = spec.parse::<u32>() {
        return Ok((uid, uid));
    }
    let name = CString::new(spec).map_err(|_| bad("not a user name"))?;
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r writes into `pwd` and `buf` (whose length is passed) and sets `found`
    // to `&pwd` or null; nothing outlives this call.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Err(bad(
            "no such user on this system; name an existing unprivileged user, or give \
             numeric ids (e.g. \"65534:65534\")",
        ));
    }
    Ok((pwd.pw_uid, pwd.pw_gid))
}

#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

#[derive(Debug, Clone)]
pub(super) struct Limits {
    pub max_processes: u64,
    pub max_file_size: u64,
    pub max_cpu_secs: u64,
}

/// Everything the child does, prepared in the parent.
pub(super) struct Plan {
    /// (uid, gid) to switch to.
    switch: Option<(libc::uid_t, libc::gid_t)>,
    rlimits: [(Resource, libc::rlim_t, libc::rlim_t); 3],
    /// Highest capability number, for emptying the bounding set.
    last_cap: libc::c_ulong,
    /// The Landlock ruleset to enter (`None`: the kernel has no Landlock).
    ruleset: Option<OwnedFd>,
    /// triage's pid: the tool's processes die when it does (`guard`).
    triage: libc::pid_t,
}

impl Plan {
    pub fn new(identity: &Identity, limits: &Limits, ruleset: Option<OwnedFd>) -> Plan {
        let switch = match identity {
            Identity::Switch { uid, gid, .. } => Some((*uid, *gid)),
            Identity::Same { .. } => None,
        };
        let nproc = match switch {
            // The count is per real uid across the machine: the tools' own user is counted
            // alone, so the limit is the budget of all tool processes together.
            Some(_) => limits.max_processes,
            // Shared with triage's user and everything else it runs: allow what runs now
            // (an upper bound: every task on the machine) plus the budget.
            None => tasks_on_the_machine().saturating_add(limits.max_processes),
        };
        Plan {
            switch,
            rlimits: [
                (libc::RLIMIT_NPROC, nproc, nproc),
                (
                    libc::RLIMIT_FSIZE,
                    limits.max_file_size,
                    limits.max_file_size,
                ),
                // SIGXCPU at the soft limit, SIGKILL a little later if it is ignored.
                (
                    libc::RLIMIT_CPU,
                    limits.max_cpu_secs,
                    limits.max_cpu_secs.saturating_add(5),
                ),
            ],
            last_cap: last_capability(),
            ruleset,
            // SAFETY: getpid only reads the calling process's id.
            triage: unsafe { libc::getpid() },
        }
    }

    /// Runs in the forked child: async-signal-safe system calls only.
    pub fn apply(&self) -> io::Result<()> {
        let check = |rc: libc::c_int| {
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        // SAFETY (whole block): each call is a plain system call on values prepared by the
        // parent; none allocates, locks or touches memory shared with other threads.
        unsafe {
            for (resource, soft, hard) in self.rlimits {
                let limit = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                check(libc::setrlimit(resource, &limit))?;
            }
            if let Some((uid, gid)) = self.switch {
                check(libc::setgroups(0, std::ptr::null()))?;
                check(libc::setgid(gid))?;
                // Needs CAP_SETPCAP, so before the uid changes. Unknown numbers fail with
                // EINVAL, which is fine.
                for cap in 0..=self.last_cap {
                    libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
                }
                check(libc::setuid(uid))?;
                // Fail closed: the switch must be complete and irreversible.
                if libc::getuid() != uid || libc::geteuid() != uid || libc::setuid(0) == 0 {
                    return Err(io::Error::from_raw_os_error(libc::EPERM));
                }
            }
            // Ambient capabilities survive exec for non-root users: none. EINVAL on kernels
            // before 4.3, which have none.
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            // Before Landlock: the guard stays outside its command's Landlock domain, which
            // keeps the command from reading or signalling it (it is a copy of triage). It
            // runs no code of the command's.
            super::guard::split(self.triage)?;
            if let Some(fd) = &self.ruleset {
                // The landlock crate's `restrict_self` consumes its ruleset and is not
                // documented as async-signal-safe, so the one system call is made here on
                // the ruleset the crate built in the parent.
                let rc = libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32);
                if rc != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// Tasks (threads included) on the machine now, from `/proc/loadavg`; 0 if unknown.
fn tasks_on_the_machine() -> u64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(3)
                .and_then(|f| f.split_once('/'))
                .and_then(|(_, total)| total.parse().ok())
        })
        .unwrap_or(0)
}

fn last_capability() -> libc::c_ulong {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_resolve_by_name_or_number() {
        assert_eq!(resolve_user("65534:65533").unwrap(), (65534, 65533));
        assert_eq!(resolve_user("1234").unwrap(), (1234, 1234));
        assert_eq!(resolve_user("root").unwrap(), (0, 0));
        let err = resolve_user("no-such-user-here").unwrap_err().to_string();
        assert!(err.contains("no such user"), "{err}");
        assert!(resolve_user("1:x").is_err());
    }

    #[test]
    fn the_task_count_is_read() {
        assert!(tasks_on_the_machine() > 0);
        assert!(last_capability() >= 30);
    }
}
