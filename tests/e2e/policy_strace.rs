//! A differential check of the bash allow list (issue 11): every command of a corpus that the
//! policy lets run without approval is run under `strace -f -e trace=execve`, and every program
//! it executed must be on the allow list (bash itself aside). A command that executes anything
//! else is a policy bug. The corpus: typical commands, the security probes' commands, and
//! variations generated from each allowed program's own `--help` (every option, alone and with
//! a value), run in a scratch directory on harmless inputs with a per-command time limit.
//!
//! Needs Debian's `strace`; `.ci/run` runs it: `cargo test --test e2e policy_strace --
//! --ignored`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use triage::tools::bash::{BuiltinAllowlist, Policy, Verdict, classify};

/// Limit of one command (a `tail -f` or `free -s 1` runs until killed).
const COMMAND_LIMIT: Duration = Duration::from_secs(3);
/// Options taken from one program's `--help`.
const MAX_OPTIONS: usize = 30;

/// Commands written out: everyday troubleshooting and what the security probes tried.
const SEED: &[&str] = &[
    "kubectl get pods -A | grep -v Running | head -20",
    "kubectl describe pod x -n kube-system 2>&1 | head -50",
    "kubectl get pods -o 'jsonpath={.items[*].metadata.name}'",
    "kubectl get --raw /api/v1/namespaces",
    "kubectl config current-context",
    "kubectl version --client",
    "echo hello && date",
    "cat input.txt | tail -5",
    "grep -c error input.txt 2>/dev/null",
    "grep 'a b' input.txt | wc -l",
    "ls -la . >/dev/null 2>&1 || echo missing",
    "sort -k2 -rn input.txt | uniq -c",
    "find . -name '*.txt' -mtime -1",
    "ps aux | grep kubelet",
    "cat /etc/passwd | cut -d: -f1 | sort | uniq | nl | tac | rev | column",
    "printf '%s\\n' a b | tr a-z A-Z",
    "printf '%d' 'a[$(id)]'",
    "echo '$(id)' '`id`'",
    "! grep -q x input.txt",
    "ip addr show; ip route show; ip link show",
    "ss -tln; netstat -tln",
    "df -h; du -sh .; free -m; uptime",
    "stat input.txt; file input.txt; base64 input.txt | base64 -d",
    "id; whoami; hostname; uname -a; which ls",
    "egrep x input.txt; fgrep x input.txt",
    "jq -n '1 + 1'",
    "jq . input.json",
    "jq -n 'input_filename'",
    "find . -newer input.txt -print0",
    "echo x | cat | cat | cat | cat | cat | cat | cat | cat | cat | cat | cat | cat | wc -c",
    "sort -S 1M input.txt",
    "sort -T . input.txt",
    "kubectl logs web -p --since=1h",
    "kubectl auth can-i get pods",
    // The probes of issue 11, with programs off the allow list (`env`, `sh`): refused now, a
    // regression would run them.
    "printf -v 'a[$(env >&2)]' x",
    "printf -v x y",
    "read 'a[$(env >&2)]'",
    "[[ -v 'a[$(env >&2)]' ]]",
    "test -v 'a[$(env >&2)]'",
    "printf '%s' '{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"current-context\":\"x\",\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://127.0.0.1:1\"}}],\"contexts\":[{\"name\":\"x\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}],\"users\":[{\"name\":\"u\",\"user\":{\"exec\":{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"command\":\"sh\",\"args\":[\"-c\",\"id\"]}}}]}' | kubectl get pods --kubeconfig=/dev/stdin",
    "kubectl evil-plugin",
    "find . -name input.txt -print0 | wc --files0-from=-",
    "sort --compress-program=true -S 1k input.txt",
];

#[test]
#[ignore = "needs strace; run by .ci/run"]
fn allowed_commands_execute_only_allowed_programs() {
    let strace = which("strace").expect("strace is not installed (Debian package `strace`)");
    let bash = which("bash").expect("bash");
    let scratch = scratch_dir();
    let policy = Policy::new(
        BuiltinAllowlist::Extended,
        &[],
        &[],
        Some(scratch.display().to_string()),
        scratch.display().to_string(),
    );
    let entries: Vec<String> = policy.allowed().collect();
    let mut expected: BTreeSet<String> = entries
        .iter()
        .filter_map(|e| e.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    expected.insert("bash".into());

    let mut candidates: Vec<String> = SEED.iter().map(|s| s.to_string()).collect();
    for entry in &entries {
        candidates.extend(variations(entry, &scratch));
    }
    let mut seen = BTreeSet::new();
    let allowed: Vec<String> = candidates
        .into_iter()
        .filter(|c| seen.insert(c.clone()))
        .filter(|c| classify(c, &policy) == Verdict::Allowed)
        .collect();
    assert!(
        allowed.len() > 500,
        "only {} commands allowed",
        allowed.len()
    );

    // The harness sees what a command executes (`env` and `true` are on no allow list).
    let (seen_by_strace, _) = traced(
        &strace,
        &bash,
        &scratch,
        &scratch.join("trace-self"),
        "echo | env true",
    );
    assert!(
        seen_by_strace.contains("env") && seen_by_strace.contains("true"),
        "strace saw only {seen_by_strace:?}: can it trace here (ptrace permitted)?"
    );

    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let bugs = Mutex::new(Vec::new());
    let timed_out = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (next, bugs, timed_out) = (&next, &bugs, &timed_out);
            let (allowed, expected) = (&allowed, &expected);
            let (strace, bash, scratch) = (&strace, &bash, &scratch);
            s.spawn(move || {
                let trace = scratch.join(format!("trace-{worker}"));
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(command) = allowed.get(i) else { break };
                    let (programs, finished) = traced(strace, bash, scratch, &trace, command);
                    if !finished {
                        timed_out.fetch_add(1, Ordering::Relaxed);
                    }
                    for p in programs.difference(expected) {
                        bugs.lock()
                            .unwrap()
                            .push(format!("{command:?} executed {p}"));
                    }
                }
            });
        }
    });
    eprintln!(
        "policy_strace: {} allowed commands traced in {:.0?} ({} stopped at the {:?} limit)",
        allowed.len(),
        started.elapsed(),
        timed_out.load(Ordering::Relaxed),
        COMMAND_LIMIT
    );
    let _ = std::fs::remove_dir_all(&scratch);
    let bugs = bugs.into_inner().unwrap();
    assert!(
        bugs.is_empty(),
        "allowed commands executed programs outside the allow list:\n{}",
        bugs.join("\n")
    );
}

/// A directory with harmless inputs, a HOME and a kubeconfig whose server refuses connections.
fn scratch_dir() -> PathBuf {
    let dir = crate::helpers::scratch().join(format!("policy-strace-{}", std::process::id()));
    std::fs::create_dir_all(dir.join(".kube")).unwrap();
    std::fs::write(dir.join("input.txt"), "b 2 error\na 1 ok\nb 2 error\n").unwrap();
    std::fs::write(dir.join("input.json"), "{\"a\": [1, 2]}\n").unwrap();
    std::fs::write(
        dir.join(".kube/config"),
        "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters:\n- name: c\n  cluster:\n    \
         server: https://127.0.0.1:1\ncontexts:\n- name: x\n  context:\n    cluster: c\n    \
         user: u\nusers:\n- name: u\n  user:\n    token: scratch\n",
    )
    .unwrap();
    dir
}

/// Commands made from an allow entry and the options its `--help` lists: each option alone,
/// with a value, in a pipe.
fn variations(entry: &str, scratch: &Path) -> Vec<String> {
    let mut out = vec![
        entry.to_owned(),
        format!("{entry} input.txt"),
        format!("echo hi | {entry}"),
        format!("{entry} input.txt 2>&1 | tac | head -3"),
    ];
    for opt in help_options(entry, scratch) {
        out.push(format!("{entry} {opt} input.txt"));
        if opt.starts_with("--") {
            out.push(format!("{entry} {opt}=true input.txt"));
        } else {
            out.push(format!("{entry} {opt} true input.txt"));
            out.push(format!("{entry} {opt}true"));
        }
    }
    out
}

/// The option names `ENTRY --help` prints (`-x`, `--long`), at most [`MAX_OPTIONS`].
fn help_options(entry: &str, scratch: &Path) -> Vec<String> {
    let mut words = entry.split_whitespace();
    let Some(program) = words.next() else {
        return Vec::new();
    };
    let mut cmd = Command::new(program);
    cmd.args(words)
        .arg("--help")
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", scratch)
        .current_dir(scratch);
    let Some((stdout, stderr)) = output_within(cmd, COMMAND_LIMIT) else {
        return Vec::new();
    };
    let text = format!("{stdout}\n{stderr}");
    let mut options = Vec::new();
    for raw in text.split(|c: char| c.is_whitespace() || ",[]()|".contains(c)) {
        let name: String = raw
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let name = name.trim_end_matches('-');
        let body = name.trim_start_matches('-');
        let dashes = name.len() - body.len();
        let ok = (dashes == 1 && body.len() == 1 || dashes == 2 && body.len() > 1)
            && body.starts_with(|c: char| c.is_ascii_alphanumeric());
        if ok && !options.iter().any(|o| o == name) {
            options.push(name.to_owned());
        }
    }
    options.truncate(MAX_OPTIONS);
    options
}

/// The programs (base names) one command executed, and whether it finished in time.
fn traced(
    strace: &Path,
    bash: &Path,
    scratch: &Path,
    trace: &Path,
    command: &str,
) -> (BTreeSet<String>, bool) {
    let _ = std::fs::remove_file(trace);
    let mut cmd = Command::new(strace);
    cmd.args([
        "-f",
        "-qq",
        "-z",
        "-e",
        "trace=execve",
        "-e",
        "signal=none",
        "-o",
    ])
    .arg(trace)
    .arg(bash)
    .args([
        "--noprofile",
        "--norc",
        "-c",
        "exec 2>&1; eval \"$1\"",
        "triage-bash",
    ])
    .arg(command)
    .env_clear()
    .env(
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    )
    .env("LANG", "C.UTF-8")
    .env("HOME", scratch)
    .current_dir(scratch);
    let finished = output_within(cmd, COMMAND_LIMIT).is_some();
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    let programs = text
        .lines()
        .filter_map(|line| {
            let path = line.split_once("execve(\"")?.1.split('"').next()?;
            Some(path.rsplit('/').next().unwrap_or(path).to_owned())
        })
        .collect();
    (programs, finished)
}

/// Runs a command in its own process group with stdin from /dev/null; its output, or `None`
/// when it was killed at `limit`.
fn output_within(mut cmd: Command, limit: Duration) -> Option<(String, String)> {
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .ok()?;
    let pid = child.id() as i32;
    let reader = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                // Enough to find the options; the rest is drained so the child never blocks.
                let _ = std::io::copy(&mut std::io::Read::take(&mut p, 1 << 20), &mut buf);
                let _ = std::io::copy(&mut p, &mut std::io::sink());
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + limit;
    let done = loop {
        match child.try_wait() {
            Ok(Some(_)) => break true,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => break false,
        }
    };
    // The whole group: the command's own children (a pipeline's stages) too.
    // SAFETY: killpg only sends a signal, to the group this function created (pid > 1).
    if pid > 1 {
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
    let _ = child.wait();
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    done.then_some((out, err))
}

fn which(program: &str) -> Option<PathBuf> {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}
