//! Hostile commands run through the sandbox with the policy check bypassed ([`run::run`] is
//! called directly, as if a command had slipped past the allow list). The test process plays
//! triage: its `/proc` entry, its files and its signals must stay out of reach.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::find_bash;
use super::run::{self, Finished, Outcome};
use crate::sandbox::{Approval, Grants, Sandbox, SandboxSettings};

/// Runs `command` in `sandbox` as the bash tool would, minus the policy.
async fn hostile(sandbox: &Sandbox, command: &str, approval: Approval, secs: u64) -> Finished {
    let bash = find_bash().expect("bash installed");
    let env = run::child_env(|k| std::env::var(k).ok());
    run::run(run::Spec {
        bash: &bash,
        command,
        env: &env,
        sandbox,
        grants: &Grants::default(),
        approval,
        timeout: Duration::from_secs(secs),
        max_output: 1 << 20,
        memory_limit_mb: 800,
    })
    .await
    .expect("the command ran")
}

fn text(f: &Finished) -> String {
    String::from_utf8_lossy(&f.output).into_owned()
}

/// A fresh directory with the given mode, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(mode: u32) -> TempDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("triage-hostile-{:x}", rand::random::<u64>()));
        std::fs::create_dir(&dir).expect("temp dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
        TempDir(dir)
    }

    /// A world-readable file: only the sandbox can keep it from the tools' user.
    fn file(&self, name: &str, content: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, content).expect("write");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Tests that switch users need root (as in CI); elsewhere they say so and pass.
fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid only reads the process's credentials.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("{test}: skipped, it needs root to run tools as another user");
    }
    root
}

/// Both ways tools may run: as the separate user (triage is root) and as triage's own user,
/// where Landlock alone must hold (as root here, it holds against every capability too).
fn both_sandboxes(settings: &SandboxSettings, protected: &[PathBuf]) -> [Sandbox; 2] {
    [
        Sandbox::new(settings, protected, &[]).expect("sandbox"),
        // Tools keep the test process's uid (root here): what confines them is Landlock
        // alone, since root passes every permission check.
        Sandbox::new(
            &SandboxSettings {
                keep_uid_for_tests: true,
                ..settings.clone()
            },
            protected,
            &[],
        )
        .expect("a sandbox keeping the uid"),
    ]
}

/// What a tool may try against a process: read its environment, memory map and open files,
/// signal it.
fn prying_at(pid: u32) -> String {
    format!(
        "cat /proc/{pid}/environ; cat /proc/{pid}/task/{pid}/environ; head -c 64 /proc/{pid}/maps; \
         ls -l /proc/{pid}/fd; kill -0 {pid} && echo SIGNAL-SENT; grep NoNewPrivs /proc/self/status"
    )
}

fn assert_nothing_leaked(out: &str, secret: &str) {
    assert!(!out.contains(secret), "the environment leaked:\n{out}");
    assert!(!out.contains("r-xp"), "the memory map leaked:\n{out}");
    assert!(!out.contains("SIGNAL-SENT"), "a signal got through:\n{out}");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
}

#[tokio::test]
async fn triage_s_proc_entry_and_signals_are_out_of_reach() {
    // triage as root, tools as `nobody`: the test process plays triage (cargo sets CARGO_* in
    // its environment).
    let sandbox = Sandbox::for_tests();
    let out = text(
        &hostile(
            &sandbox,
            &prying_at(std::process::id()),
            Approval::Approved,
            10,
        )
        .await,
    );
    assert_nothing_leaked(&out, "CARGO");
}

#[tokio::test]
async fn landlock_alone_keeps_a_same_user_process_out_of_reach() {
    use std::os::unix::process::CommandExt;
    if !root_or_skip("landlock_alone") {
        return;
    }
    // triage not root: tools share its uid. A dumpable process of that uid plays triage
    // (triage itself is also non-dumpable), so only Landlock stands in the way.
    const UID: u32 = 65532;
    let mut triage = std::process::Command::new("sleep")
        .arg("30")
        .env("TRIAGE_PLAYED_SECRET", "SECRET-IN-ENV")
        .uid(UID)
        .gid(UID)
        .spawn()
        .expect("spawn the stand-in");
    let settings = SandboxSettings {
        user: format!("{UID}:{UID}"),
        ..SandboxSettings::default()
    };
    let sandbox = Sandbox::new(&settings, &[], &[]).expect("sandbox");
    let out = text(&hostile(&sandbox, &prying_at(triage.id()), Approval::Approved, 10).await);
    let _ = triage.kill();
    let _ = triage.wait();
    assert_nothing_leaked(&out, "SECRET-IN-ENV");
}

#[tokio::test]
async fn triage_s_files_are_unreadable_even_inside_readable_locations() {
    // A location tools may read, holding triage's config and model list beside a plain file.
    let dir = TempDir::new(0o755);
    let config = dir.file("config.toml", "api_key = \"SECRET-CONFIG\"\n");
    let models = dir.file("model_list.yaml", "key: SECRET-MODELS\n");
    dir.file("notes.txt", "PLAIN-NOTES\n");
    let settings = SandboxSettings {
        read_paths: vec![dir.0.clone()],
        ..SandboxSettings::default()
    };
    let command = format!(
        "cat {0}/notes.txt; cat {1}; cat {2}; ls {0}",
        dir.0.display(),
        config.display(),
        models.display()
    );
    for sandbox in both_sandboxes(&settings, &[config.clone(), models.clone()]) {
        for approval in [Approval::NotApproved, Approval::Approved] {
            let out = text(&hostile(&sandbox, &command, approval, 10).await);
            assert!(out.contains("PLAIN-NOTES"), "{approval:?}:\n{out}");
            assert!(
                !out.contains("SECRET-"),
                "{approval:?} read triage's files:\n{out}"
            );
            assert!(out.contains("Permission denied"), "{out}");
            // Names may be listed; contents may not be read.
            assert!(out.contains("model_list.yaml"), "{out}");
        }
    }
}

#[tokio::test]
async fn writes_outside_tmpdir_need_approval() {
    // Writable by anyone: only the sandbox stands in the way.
    let dir = TempDir::new(0o777);
    let target = dir.0.join("written");
    let command = format!(
        "echo inside > \"$TMPDIR/f\" && cat \"$TMPDIR/f\" && echo here > relative && cat relative; \
         echo outside > {}",
        target.display()
    );
    for sandbox in both_sandboxes(&SandboxSettings::default(), &[]) {
        let out = text(&hostile(&sandbox, &command, Approval::NotApproved, 10).await);
        assert!(out.contains("inside\nhere\n"), "{out}");
        assert!(out.contains("Permission denied"), "{out}");
        assert!(
            !target.exists(),
            "an unapproved command wrote outside its TMPDIR"
        );

        let out = text(&hostile(&sandbox, &command, Approval::Approved, 10).await);
        assert!(!out.contains("Permission denied"), "{out}");
        assert_eq!(
            std::fs::read_to_string(&target).ok().as_deref(),
            Some("outside\n")
        );
        std::fs::remove_file(&target).expect("remove");
    }
}

#[tokio::test]
async fn tools_run_as_an_unprivileged_user_without_capabilities() {
    if !root_or_skip("unprivileged_user") {
        return;
    }
    let sandbox = Sandbox::for_tests();
    let out = text(
        &hostile(
            &sandbox,
            "id -u; id -G; grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; cd \"$TMPDIR\" && \
             stat -c '%a %u' . && pwd",
            Approval::Approved,
            10,
        )
        .await,
    );
    let (uid, gid) = sandbox.identity().ids();
    assert_ne!(uid, 0);
    assert!(out.starts_with(&format!("{uid}\n{gid}\n")), "{out}");
    for cap in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
        assert!(out.contains(&format!("{cap}:\t0000000000000000")), "{out}");
    }
    assert!(out.contains(&format!("700 {uid}\n")), "{out}");
}

/// Processes whose real uid is `uid`.
fn processes_of(uid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read_to_string(e.path().join("status")).is_ok_and(|s| {
                s.lines()
                    .find(|l| l.starts_with("Uid:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .is_some_and(|u| u == uid.to_string())
            })
        })
        .count()
}

#[tokio::test]
async fn a_fork_bomb_stops_at_the_process_limit_and_is_cleaned_up() {
    if !root_or_skip("fork_bomb") {
        return;
    }
    // A uid of its own: the process count is per uid, and other tests run as `nobody`.
    const UID: u32 = 65531;
    let settings = SandboxSettings {
        user: format!("{UID}:{UID}"),
        max_processes: 40,
        ..SandboxSettings::default()
    };
    let sandbox = Sandbox::new(&settings, &[], &[]).expect("sandbox");
    let bomb = hostile(
        &sandbox,
        "bomb() { bomb | bomb & }; bomb; sleep 5",
        Approval::Approved,
        2,
    );
    tokio::pin!(bomb);
    let mut most = 0;
    let finished = loop {
        tokio::select! {
            f = &mut bomb => break f,
            _ = tokio::time::sleep(Duration::from_millis(10)) => most = most.max(processes_of(UID)),
        }
    };
    assert_eq!(finished.outcome, Outcome::TimedOut);
    assert!(most > 5, "the bomb never ran ({most} processes)");
    assert!(most <= 40, "{most} processes, above RLIMIT_NPROC");
    let started = Instant::now();
    while processes_of(UID) > 0 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(processes_of(UID), 0, "the bomb outlived its call");
}

#[tokio::test]
async fn a_disk_filler_stops_at_the_file_size_limit() {
    let settings = SandboxSettings {
        max_file_size_mb: 1,
        ..SandboxSettings::default()
    };
    let sandbox = Sandbox::new(&settings, &[], &[]).expect("sandbox");
    let out = text(
        &hostile(
            &sandbox,
            "head -c 5000000 /dev/zero > fill; stat -c 'size %s' fill",
            Approval::Approved,
            10,
        )
        .await,
    );
    assert!(out.contains("size 1048576\n"), "{out}");
}

#[tokio::test]
async fn the_tmpdir_is_removed_after_a_timeout_kill() {
    let sandbox = Sandbox::for_tests();
    // `sort` killed mid-way leaves its temporary files; so does this.
    let finished = hostile(
        &sandbox,
        "echo \"$TMPDIR\"; i=0; while :; do i=$((i+1)); echo x > \"$TMPDIR/tmp$i\"; done",
        Approval::NotApproved,
        1,
    )
    .await;
    assert_eq!(finished.outcome, Outcome::TimedOut);
    let out = text(&finished);
    let dir = PathBuf::from(out.lines().next().unwrap_or_default());
    assert!(dir.starts_with(std::env::temp_dir()), "{out}");
    let started = Instant::now();
    while dir.exists() && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !Path::new(&dir).exists(),
        "{} survived the call",
        dir.display()
    );
}

#[tokio::test]
async fn the_guard_passes_the_command_s_end_through() {
    let sandbox = Sandbox::for_tests();
    let exited = hostile(&sandbox, "echo out; exit 3", Approval::NotApproved, 10).await;
    assert!(matches!(exited.outcome, Outcome::Exited(3)), "{exited:?}");
    assert_eq!(text(&exited), "out\n");
    let killed = hostile(&sandbox, "kill -SEGV $$", Approval::NotApproved, 10).await;
    assert!(
        matches!(killed.outcome, Outcome::Signaled(libc::SIGSEGV)),
        "{killed:?}"
    );
    // A signal the command sends its own group is the command's business: the guard ignores
    // it, so the command's trap runs to its own exit status.
    let trapped = hostile(
        &sandbox,
        "trap 'echo trapped; exit 4' TERM; kill -TERM 0; sleep 5 & wait",
        Approval::NotApproved,
        10,
    )
    .await;
    assert!(matches!(trapped.outcome, Outcome::Exited(4)), "{trapped:?}");
    assert!(text(&trapped).contains("trapped"), "{trapped:?}");
}

#[tokio::test]
async fn the_guard_s_memory_is_not_the_command_s_to_read() {
    // The guard is a copy of triage's memory: its command (same user) must not read it. (A
    // sandbox keeping the uid is not tried: as root here, its commands keep CAP_SYS_PTRACE,
    // which a non-root triage's never have.)
    {
        let sandbox = Sandbox::for_tests();
        let out = text(
            &hostile(
                &sandbox,
                "grep -E 'PPid|Uid' /proc/$PPID/status; head -c 64 /proc/$PPID/maps; \
                 head -c 16 /proc/$PPID/mem | od | head -1; cat /proc/$PPID/environ | head -c 64; \
                 echo END",
                Approval::Approved,
                10,
            )
            .await,
        );
        let who = sandbox.identity().describe();
        assert!(
            !out.contains("r-xp"),
            "the guard's memory map leaked ({who}):\n{out}"
        );
        assert!(
            !out.contains("CARGO"),
            "the guard's environment leaked ({who}):\n{out}"
        );
        assert!(
            out.contains("PPid"),
            "the guard is the command's parent: {out}"
        );
        assert!(out.contains("END"), "{out}");
    }
}
