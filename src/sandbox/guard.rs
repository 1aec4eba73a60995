//! A tool's processes die with triage, `kill -9` included. `PR_SET_PDEATHSIG` alone would
//! reach only the process triage started, not what that shell started in turn (`a | b`,
//! background jobs), so the forked child splits in two before exec: the exec'd command runs
//! below a small guard that stays in the tool's process group. The guard waits for two
//! things: its command ending — it then ends the same way, so triage sees the command's own
//! exit status — or triage dying, signalled by the parent-death signal — it then kills the
//! whole process group. triage's own timeouts and cancellations kill that group as before.
//! The guard ignores every other signal, cannot dump core and cannot be read by its command
//! (it is a copy of triage's memory); it counts as one of the tools' processes.
//!
//! Everything here runs between fork and exec in a child of a multi-threaded process: raw
//! system calls on plain data, nothing that allocates or locks.

use std::io;

/// Sent to the guard when the thread that forked it exits: triage died, or (if its process
/// lives on, the guard's parent unchanged) one of its threads did.
const PARENT_DIED: libc::c_int = libc::SIGUSR1;

/// Splits the forked child: returns `Ok` in the process that goes on to exec the command;
/// the guard never returns. `triage` is triage's pid, to tell its death from a thread's.
///
/// # Safety
/// Call only in a child forked from triage, before exec; it forks again and never returns in
/// the parent of that fork.
pub(super) unsafe fn split(triage: libc::pid_t) -> io::Result<()> {
    // SAFETY (whole block): plain system calls on stack values; see the module doc.
    unsafe {
        let mut watched: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut watched);
        libc::sigaddset(&mut watched, libc::SIGCHLD);
        libc::sigaddset(&mut watched, PARENT_DIED);
        let mut before: libc::sigset_t = std::mem::zeroed();
        // Blocked first, so that neither signal is lost between here and the wait.
        if libc::sigprocmask(libc::SIG_BLOCK, &watched, &mut before) != 0 {
            return Err(io::Error::last_os_error());
        }
        // Set after any change of credentials, which clears it.
        if libc::prctl(libc::PR_SET_PDEATHSIG, PARENT_DIED, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != triage {
            libc::_exit(127); // triage died before the signal was set up
        }
        // Inherited handlers are triage's: the defaults, which the command would get from
        // exec anyway, except that ignored signals would stay ignored. Before the fork: in the
        // guard, changing SIGCHLD's disposition would discard a pending one (the command's end).
        for signal in 1..32 {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
        let guard = libc::getpid();
        // The system call, not glibc's fork(): that one runs fork handlers and takes locks
        // that the first fork may have copied in a held state from another thread.
        let forked = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0);
        match forked as libc::pid_t {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                // The command: dies with its guard, and starts with the mask it had.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != guard {
                    libc::_exit(127);
                }
                if libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            }
            command => guard_until_done(command, triage, &watched),
        }
    }
}

/// The guard's life: holds no file (so triage's pipes see the command's end, not the
/// guard's), ends as its command ends, or kills the group when triage dies.
unsafe fn guard_until_done(
    command: libc::pid_t,
    triage: libc::pid_t,
    watched: &libc::sigset_t,
) -> ! {
    // SAFETY (whole block): plain system calls on stack values; see the module doc.
    unsafe {
        // The guard's memory is a copy of triage's (keys, other conversations' secrets): no
        // core dump of it, and no reading it through /proc or ptrace by its command, which
        // runs as the same user.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        // Signals the command sends its own group (`kill 0`) are the command's business: the
        // guard ignores them, so that its death cannot kill a command that survives them.
        // Only SIGKILL (triage's timeouts) ends it. SIGCHLD and the parent-death signal stay
        // as they are: changing SIGCHLD's disposition would discard a pending one.
        for signal in 1..32 {
            if ![libc::SIGKILL, libc::SIGSTOP, libc::SIGCHLD, PARENT_DIED].contains(&signal) {
                libc::signal(signal, libc::SIG_IGN);
            }
        }
        close_every_file();
        // A lost SIGCHLD must not leave the guard waiting: it looks every second anyway.
        let second = libc::timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        loop {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let signal = libc::sigtimedwait(watched, &mut info, &second);
            if signal == PARENT_DIED {
                if libc::getppid() != triage {
                    libc::kill(0, libc::SIGKILL);
                }
                continue;
            }
            let mut status = 0;
            if libc::waitpid(command, &mut status, libc::WNOHANG) != command {
                continue;
            }
            if libc::WIFEXITED(status) {
                libc::_exit(libc::WEXITSTATUS(status));
            }
            if libc::WIFSIGNALED(status) {
                let signal = libc::WTERMSIG(status);
                libc::signal(signal, libc::SIG_DFL);
                let mut only: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut only);
                libc::sigaddset(&mut only, signal);
                libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
                libc::kill(libc::getpid(), signal);
                libc::_exit(128 + signal);
            }
        }
    }
}

unsafe fn close_every_file() {
    // SAFETY: closing descriptors this process holds; nothing here uses them afterwards.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            for fd in 0..4096 {
                libc::close(fd);
            }
        }
    }
}
