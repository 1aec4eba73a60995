//! How the two network walls between tool processes and triage's own listeners stand, for the
//! start-up log, `triage check` and `/api/info`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::spawner::ThreadWall;
use super::{PeerCheck, Sandbox};

// Documented where `SandboxInfo` refers to it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NetworkWallInfo {
    /// triage's listening ports: no process triage starts may make a request there.
    pub walled_ports: Vec<u16>,
    /// First wall: Landlock TCP rules (kernel ABI 4+) and a seccomp filter (no TCP Fast Open,
    /// no io_uring) around every tool process: connecting to a walled port fails.
    pub tcp_rules: bool,
    /// Second wall: a connection whose client socket belongs to the tools' uid is closed
    /// before it is read (needs tools to run as their own uid).
    pub peer_uid_check: bool,
    /// Which layers are active, in words.
    pub layers: String,
    /// Set when no wall holds, or one is missing.
    pub warning: Option<String>,
}

/// The start-up log lines, once the spawner thread knows how its wall stands.
pub(super) fn announcer(
    ports: Vec<u16>,
    peer_check: &Result<Option<Arc<PeerCheck>>, String>,
) -> impl FnOnce(&ThreadWall) + Send + 'static {
    let peer = peer_check
        .as_ref()
        .map(Option::is_some)
        .map_err(Clone::clone);
    move |thread: &ThreadWall| {
        if ports.is_empty() {
            return;
        }
        let info = describe(&ports, Some(thread), &peer);
        match &info.warning {
            None => tracing::info!(ports = ?ports, layers = %info.layers,
                "tool processes cannot reach triage's listeners"),
            Some(warning) if info.tcp_rules || info.peer_uid_check => tracing::warn!(
                ports = ?ports, layers = %info.layers, "{warning}"),
            Some(warning) => tracing::error!(ports = ?ports, "{warning}"),
        }
    }
}

/// Whether the second wall is up, or why not.
fn peer_state(peer_check: &Result<Option<Arc<PeerCheck>>, String>) -> Result<bool, String> {
    peer_check
        .as_ref()
        .map(Option::is_some)
        .map_err(Clone::clone)
}

fn describe(
    ports: &[u16],
    thread: Option<&ThreadWall>,
    peer: &Result<bool, String>,
) -> NetworkWallInfo {
    let tcp_rules = thread.is_some_and(ThreadWall::holds);
    let peer_uid_check = matches!(peer, Ok(true));
    let mut layers = Vec::new();
    if tcp_rules {
        layers.push("Landlock TCP rules + seccomp (connect refused)");
    }
    if peer_uid_check {
        layers.push("peer uid check (tools' connections closed before routing)");
    }
    let mut missing = Vec::new();
    match thread {
        None => missing.push("the TCP rules are still being set up".to_owned()),
        Some(t) if !t.holds() => missing.extend(t.problems.iter().cloned()),
        Some(_) => {}
    }
    if let Err(why) = peer {
        missing.push(format!("no peer uid check: {why}"));
    }
    let warning = match (tcp_rules || peer_uid_check, missing.is_empty()) {
        (_, true) => None,
        (true, false) => Some(format!("one network wall is down: {}", missing.join("; "))),
        (false, false) => Some(format!(
            "NO WALL BETWEEN TOOLS AND TRIAGE'S LISTENERS: a process triage starts can call \
             triage's own API (list conversations, approve its own calls). {}. Use a kernel with \
             Landlock ABI 4 (Linux 6.7+), or run triage as root so tools run as sandbox.user",
            missing.join("; ")
        )),
    };
    NetworkWallInfo {
        walled_ports: ports.to_vec(),
        tcp_rules,
        peer_uid_check,
        layers: if layers.is_empty() {
            "none".to_owned()
        } else {
            layers.join(", ")
        },
        warning,
    }
}

impl Sandbox {
    /// The network walls as they stand; `None` when nothing of triage's listens (the CLI).
    pub fn network_wall(&self) -> Option<NetworkWallInfo> {
        let inner = &self.inner;
        if inner.walled_ports.is_empty() {
            return None;
        }
        let peer = peer_state(&inner.peer_check);
        Some(describe(&inner.walled_ports, inner.spawner.wall(), &peer))
    }

    /// Waits until the spawner thread has built its wall (start-up: some 50 ms, spent beside
    /// the toolsets' checks).
    pub async fn wall_ready(&self) {
        let _ = self.inner.spawner.run(|| ()).await;
    }

    /// triage's listening ports (none for the CLI's own runs): triage's own HTTP clients, which
    /// run outside the wall, refuse URLs the model could point at them.
    pub fn walled_ports(&self) -> &[u16] {
        &self.inner.walled_ports
    }

    /// The second wall, for the accept loop: `None` when it is not up.
    pub fn peer_check(&self) -> Option<Arc<PeerCheck>> {
        self.inner.peer_check.as_ref().ok().cloned().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tcp: bool, seccomp: bool) -> ThreadWall {
        ThreadWall {
            tcp_rules: tcp,
            seccomp,
            problems: if tcp && seccomp {
                Vec::new()
            } else {
                vec!["old kernel".into()]
            },
        }
    }

    #[test]
    fn each_combination_of_walls_is_reported() {
        let both = describe(&[5050], Some(&thread(true, true)), &Ok(true));
        assert!(both.tcp_rules && both.peer_uid_check && both.warning.is_none());
        let first = describe(&[5050], Some(&thread(true, true)), &Err("same uid".into()));
        assert!(first.tcp_rules && !first.peer_uid_check);
        assert!(
            first
                .warning
                .as_deref()
                .unwrap()
                .contains("one network wall is down")
        );
        // Landlock without the seccomp half does not hold (TCP Fast Open gets through).
        let half = describe(&[5050], Some(&thread(true, false)), &Ok(true));
        assert!(!half.tcp_rules && half.peer_uid_check);
        let none = describe(
            &[5050],
            Some(&thread(false, false)),
            &Err("same uid".into()),
        );
        assert_eq!(none.layers, "none");
        assert!(
            none.warning.as_deref().unwrap().starts_with("NO WALL"),
            "{none:?}"
        );
    }
}
