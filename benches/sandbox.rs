//! The cost of the tool sandbox per call (criterion): a bash tool call of `echo` (sandboxed:
//! private TMPDIR, Landlock rules, user switch when root, limits) against the same bash
//! started bare, and an approved call (whose rules cover `/` minus triage's files); then the
//! network walls' share: `true` spawned through a sandbox that walls off a port (forked from
//! the walled spawner thread) against one that walls nothing.
//!
//! `cargo bench --bench sandbox`.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

use triage::sandbox::{Approval, Grants, Sandbox, SandboxSettings};
use triage::tools::ToolContext;
use triage::tools::bash::{BashConfig, toolset};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn calls(c: &mut Criterion) {
    let rt = runtime();
    let sandbox = Sandbox::new(&SandboxSettings::default(), &[], &[]).expect("sandbox");
    let bash = toolset(&BashConfig::default(), &sandbox);
    let tool = bash.tools[0].clone();
    let plain = ToolContext::default();
    let approved = ToolContext {
        user_approved: true,
        ..ToolContext::default()
    };
    let mut group = c.benchmark_group("bash_call");
    group.bench_function("bare_bash_spawn", |b| {
        b.iter(|| {
            rt.block_on(async {
                tokio::process::Command::new("bash")
                    .args(["--noprofile", "--norc", "-c", "exec 2>&1; eval \"$1\"", "x"])
                    .arg("echo hi")
                    .env_clear()
                    .output()
                    .await
                    .expect("bash runs")
            })
        })
    });
    group.bench_function("sandboxed_tool_call", |b| {
        b.iter(|| rt.block_on(tool.invoke(&json!({"command": "echo hi"}), &plain)))
    });
    group.bench_function("sandboxed_approved_call", |b| {
        b.iter(|| rt.block_on(tool.invoke(&json!({"command": "echo hi"}), &approved)))
    });
    group.finish();

    // The network walls' share: the same spawn with and without a walled port.
    let walled_port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = walled_port.local_addr().expect("addr").port();
    let walled = Sandbox::new(&SandboxSettings::default(), &[], &[port]).expect("sandbox");
    rt.block_on(walled.wall_ready());
    let listed = SandboxSettings {
        tcp_ports: Some(vec![443, 6443]),
        ..SandboxSettings::default()
    };
    let narrow = Sandbox::new(&listed, &[], &[port]).expect("sandbox");
    rt.block_on(narrow.wall_ready());
    let mut group = c.benchmark_group("sandbox_spawn");
    for (name, sandbox) in [
        ("no_walled_port", &sandbox),
        ("walled_port", &walled),
        ("walled_port_tcp_ports_listed", &narrow),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let cmd = tokio::process::Command::new("true");
                    let (mut child, _dir) = sandbox
                        .spawn(cmd, &Grants::default(), Approval::NotApproved, |_, _| {})
                        .await
                        .expect("spawned");
                    child.wait().await.expect("waited")
                })
            })
        });
    }
    group.finish();
}

/// The second wall's share of each accepted connection: one sock_diag lookup of the client's
/// socket (a live loopback connection; and a remote address, which the kernel does not have).
fn peer_check(c: &mut Criterion) {
    // SAFETY: geteuid only reads the process's credentials.
    let check = triage::sandbox::PeerCheck::new(unsafe { libc::geteuid() }).expect("sock_diag");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("c");
    let (server, from) = listener.accept().expect("accept");
    let here = server.local_addr().expect("addr");
    let remote: std::net::SocketAddr = "192.0.2.7:40000".parse().expect("addr");
    let mut group = c.benchmark_group("peer_check");
    group.bench_function("local_connection", |b| {
        b.iter(|| check.classify(from, here).expect("classified"))
    });
    group.bench_function("remote_connection", |b| {
        b.iter(|| check.classify(remote, here).expect("classified"))
    });
    group.finish();
    drop(client);
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
        .configure_from_args()
}

criterion_group! {
    name = benches;
    config = config();
    targets = calls, peer_check
}
criterion_main!(benches);
