//! The thread every tool process is forked from, walled off from triage's own listeners.
//!
//! Landlock's TCP rules (ABI 4) only grant: a domain that handles `connect` allows the ports it
//! has a rule for and no others, so keeping tools away from one port means a rule for each of
//! the other 65,535. Entering such a domain costs 17–40 ms per process (the rules are copied
//! into each new domain), far too much per tool call. A domain is a property of the thread that
//! entered it, though, and a forked child inherits the forking thread's: so one thread enters
//! it once, at start-up, and forks every tool process. triage's other threads stay outside
//! (Landlock and seccomp confine the calling thread only), so triage itself still reaches any
//! port. Each call then adds its own file-system domain on top, as before.
//!
//! Landlock checks `connect` on TCP sockets, but `sendto`/`sendmsg` with `MSG_FASTOPEN` open a
//! TCP connection without it, and so does `connect` on an MPTCP socket, which falls back to
//! plain TCP (both seen here on Linux 6.18: the server accepted); io_uring's operations pass no
//! system call a filter could see. The same thread therefore also installs a seccomp filter that
//! refuses all three, inherited the same way.

use std::io;
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};

use landlock::{
    AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus,
};
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

type Job = Box<dyn FnOnce() + Send>;

/// What the spawner thread managed to put around itself (and so around every tool process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadWall {
    /// Landlock denies `connect` to the walled ports.
    pub tcp_rules: bool,
    /// The seccomp filter refuses TCP Fast Open sends and io_uring.
    pub seccomp: bool,
    /// Why a part is missing.
    pub problems: Vec<String>,
}

impl ThreadWall {
    /// Both parts: no tool process can open a TCP connection to a walled port.
    pub fn holds(&self) -> bool {
        self.tcp_rules && self.seccomp
    }
}

/// The thread tool processes are forked from; cheap to clone.
#[derive(Clone)]
pub(super) struct Spawner {
    jobs: mpsc::Sender<Job>,
    wall: Arc<OnceLock<ThreadWall>>,
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner")
            .field("wall", &self.wall.get())
            .finish()
    }
}

impl Spawner {
    /// Starts the thread; it walls itself off from `ports` before it takes its first job (the
    /// rules take some 50 ms to build, spent beside the rest of start-up). With no ports it
    /// walls nothing: nothing of triage's listens.
    /// `switched_off` (tests only) builds no wall and says so. `only` (`sandbox.tcp_ports`)
    /// narrows the ports tools may connect to at all.
    pub fn start(
        ports: Vec<u16>,
        only: Option<Vec<u16>>,
        switched_off: bool,
        on_ready: impl FnOnce(&ThreadWall) + Send + 'static,
    ) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let wall = Arc::new(OnceLock::new());
        let ready = wall.clone();
        let started = std::thread::Builder::new()
            .name("triage-tool-spawner".into())
            .spawn(move || {
                let built = if switched_off {
                    ThreadWall {
                        tcp_rules: false,
                        seccomp: false,
                        problems: vec!["the TCP rules are switched off (a test)".into()],
                    }
                } else {
                    wall_off(&ports, only.as_deref())
                };
                on_ready(&built);
                let _ = ready.set(built);
                // Ends when the last Spawner (the sandbox) is dropped.
                for job in queue {
                    job();
                }
            });
        if let Err(e) = started {
            // The jobs' sender then fails every spawn with the reason below.
            let _ = wall.set(ThreadWall {
                tcp_rules: false,
                seccomp: false,
                problems: vec![format!("cannot start the tool spawner thread: {e}")],
            });
        }
        Spawner { jobs, wall }
    }

    /// The wall once the thread has built it (`None` in the first moments of start-up).
    pub fn wall(&self) -> Option<&ThreadWall> {
        self.wall.get()
    }

    /// Runs `job` (a spawn) on the walled thread and returns what it returns.
    pub async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let gone = || io::Error::other("the tool spawner thread is not running");
        self.jobs
            .send(Box::new(move || {
                let _ = tx.send(job());
            }))
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }
}

/// Puts the calling thread behind the wall: Landlock TCP rules for every port but `ports`, and
/// the seccomp filter. Either may fail alone (an old kernel); the result says which held.
fn wall_off(ports: &[u16], only: Option<&[u16]>) -> ThreadWall {
    let mut wall = ThreadWall {
        tcp_rules: false,
        seccomp: false,
        problems: Vec::new(),
    };
    if ports.is_empty() {
        return wall;
    }
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) only sets a flag on the calling thread. Landlock and
    // seccomp need it (or CAP_SYS_ADMIN); this thread never executes a program itself.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        wall.problems
            .push(format!("no_new_privs: {}", io::Error::last_os_error()));
        return wall;
    }
    match tcp_rules(ports, only) {
        Ok(()) => wall.tcp_rules = true,
        Err(why) => wall.problems.push(why),
    }
    match seccomp_filter() {
        Ok(()) => wall.seccomp = true,
        Err(why) => wall.problems.push(why),
    }
    wall
}

/// Landlock ABI 4's TCP rules: `connect` allowed to every port (or every port of `only`) but
/// `ports`. Each nested domain a tool process enters copies these rules (about 0.2 µs each):
/// all 65,535 cost some 13 ms per process, a short `only` list a few µs.
fn tcp_rules(ports: &[u16], only: Option<&[u16]>) -> Result<(), String> {
    let connect = AccessNet::ConnectTcp;
    let created = Ruleset::default()
        // An older kernel must be reported, not silently ignored.
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(connect)
        .and_then(|r| r.create())
        .map_err(|e| format!("Landlock TCP rules need Linux 6.7 (ABI 4): {e}"))?;
    let mut ruleset = created;
    let allowed: Box<dyn Iterator<Item = u16>> = match only {
        Some(list) => Box::new(list.iter().copied()),
        None => Box::new(0..=u16::MAX),
    };
    for port in allowed.filter(|p| !ports.contains(p)) {
        ruleset = ruleset
            .add_rule(NetPort::new(port, connect))
            .map_err(|e| format!("Landlock TCP rule for port {port}: {e}"))?;
    }
    let status = ruleset
        .restrict_self()
        .map_err(|e| format!("entering the Landlock TCP domain: {e}"))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        other => Err(format!("Landlock TCP rules not enforced ({other:?})")),
    }
}

/// `MSG_FASTOPEN` on `sendto`/`sendmsg`/`sendmmsg`, MPTCP sockets and io_uring fail with
/// EPERM.
fn seccomp_filter() -> Result<(), String> {
    let fast_open = u64::try_from(libc::MSG_FASTOPEN).unwrap_or(0x2000_0000);
    let with_fast_open = |flags_arg: u8| -> Result<Vec<SeccompRule>, String> {
        let condition = SeccompCondition::new(
            flags_arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(fast_open),
            fast_open,
        )
        .map_err(|e| e.to_string())?;
        Ok(vec![
            SeccompRule::new(vec![condition]).map_err(|e| e.to_string())?,
        ])
    };
    // MPTCP sockets fall back to plain TCP against a server that does not speak it, and their
    // `connect` passes no Landlock TCP check (seen here on 6.18): no MPTCP socket at all.
    let mptcp = || -> Result<Vec<SeccompRule>, String> {
        let condition = SeccompCondition::new(
            2,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            u64::try_from(libc::IPPROTO_MPTCP).unwrap_or(262),
        )
        .map_err(|e| e.to_string())?;
        Ok(vec![
            SeccompRule::new(vec![condition]).map_err(|e| e.to_string())?,
        ])
    };
    let mut rules = std::collections::BTreeMap::new();
    rules.insert(libc::SYS_socket, mptcp()?);
    rules.insert(libc::SYS_sendto, with_fast_open(3)?);
    rules.insert(libc::SYS_sendmsg, with_fast_open(2)?);
    rules.insert(libc::SYS_sendmmsg, with_fast_open(3)?);
    for call in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(call, Vec::new());
    }
    #[cfg(target_arch = "x86_64")]
    {
        // The x32 numbers of the same calls (a kernel may accept them from an x86_64 process).
        const X32: i64 = 0x4000_0000;
        rules.insert(X32 | 41, mptcp()?);
        rules.insert(X32 | 44, with_fast_open(3)?);
        rules.insert(X32 | 518, with_fast_open(2)?);
        rules.insert(X32 | 538, with_fast_open(3)?);
        for call in [425, 426, 427] {
            rules.insert(X32 | call, Vec::new());
        }
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp on this architecture: {e}"))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp filter: {e}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("installing the seccomp filter: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};

    fn connect_from_the_thread(spawner: &Spawner, to: SocketAddr) -> io::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime
            .block_on(spawner.run(move || TcpStream::connect(to).map(drop)))
            .and_then(|r| r)
    }

    #[test]
    fn the_thread_cannot_reach_a_walled_port_and_triage_still_can() {
        let walled = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let open = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let walled_addr = walled.local_addr().expect("addr");
        let open_addr = open.local_addr().expect("addr");
        let spawner = Spawner::start(vec![walled_addr.port()], None, false, |_| {});
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        // The first job runs once the wall is up.
        runtime.block_on(spawner.run(|| ())).expect("runs");
        let wall = spawner.wall().expect("built").clone();
        // Landlock ABI 4 brought the TCP rules.
        if super::super::rules::kernel_abi().is_none_or(|abi| abi < 4) {
            assert!(!wall.tcp_rules, "{wall:?}");
            return;
        }
        assert!(wall.holds(), "{wall:?}");
        let refused = connect_from_the_thread(&spawner, walled_addr).expect_err("walled");
        assert_eq!(refused.raw_os_error(), Some(libc::EACCES), "{refused}");
        connect_from_the_thread(&spawner, open_addr).expect("other ports stay open");
        // This thread is outside the wall.
        TcpStream::connect(walled_addr).expect("triage itself connects");
        // TCP Fast Open opens a connection without `connect`: the filter refuses it.
        let fast_open = runtime
            .block_on(spawner.run(move || fast_open_send(walled_addr)))
            .expect("runs");
        assert_eq!(fast_open, Err(libc::EPERM));
        // SAFETY: io_uring_setup with a null params pointer only returns an error.
        let uring = runtime
            .block_on(spawner.run(|| unsafe {
                libc::syscall(
                    libc::SYS_io_uring_setup,
                    1,
                    std::ptr::null_mut::<libc::c_void>(),
                )
            }))
            .expect("runs");
        assert_eq!(uring, -1);
        // SAFETY: socket only returns a descriptor or an error; a descriptor is closed.
        let mptcp = runtime
            .block_on(spawner.run(|| unsafe {
                let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_MPTCP);
                let errno = std::io::Error::last_os_error().raw_os_error();
                if fd >= 0 {
                    libc::close(fd);
                }
                (fd, errno)
            }))
            .expect("runs");
        assert_eq!(mptcp, (-1, Some(libc::EPERM)));
    }

    /// `sendto(MSG_FASTOPEN)` to `to`: the errno, or Ok.
    fn fast_open_send(to: SocketAddr) -> Result<(), i32> {
        let SocketAddr::V4(v4) = to else {
            return Err(-1);
        };
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: a socket is made and closed here; sendto reads `addr` and the message only.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            let msg = b"GET / HTTP/1.0\r\n\r\n";
            let rc = libc::sendto(
                fd,
                msg.as_ptr().cast(),
                msg.len(),
                libc::MSG_FASTOPEN,
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            );
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            libc::close(fd);
            if rc < 0 { Err(errno) } else { Ok(()) }
        }
    }

    #[test]
    fn a_port_list_narrows_what_tools_reach() {
        let walled = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let listed = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let unlisted = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let (walled, listed, unlisted) = (
            walled.local_addr().expect("addr"),
            listed.local_addr().expect("addr"),
            unlisted.local_addr().expect("addr"),
        );
        // triage's own port stays walled even when listed.
        let only = vec![walled.port(), listed.port()];
        let spawner = Spawner::start(vec![walled.port()], Some(only), false, |_| {});
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime.block_on(spawner.run(|| ())).expect("runs");
        if super::super::rules::kernel_abi().is_none_or(|abi| abi < 4) {
            return;
        }
        assert!(connect_from_the_thread(&spawner, walled).is_err());
        connect_from_the_thread(&spawner, listed).expect("a listed port");
        assert!(connect_from_the_thread(&spawner, unlisted).is_err());
    }

    #[test]
    fn no_ports_no_wall() {
        let spawner = Spawner::start(Vec::new(), None, false, |_| {});
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        assert_eq!(runtime.block_on(spawner.run(|| 7)).expect("runs"), 7);
        let wall = spawner.wall().expect("built");
        assert!(!wall.tcp_rules && !wall.seccomp && wall.problems.is_empty());
    }
}
