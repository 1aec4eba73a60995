//! `.ci/run` checks its prerequisites before building anything and says how to get each one.

/// A directory of stand-ins for `node` and `kubectl` reporting the versions given.
fn old_tools(node: &str, kubectl: &str) -> std::path::PathBuf {
    let dir =
        crate::helpers::scratch().join(format!("old-tools-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("node"), format!("#!/bin/sh\necho v{node}\n")).unwrap();
    std::fs::write(
        dir.join("kubectl"),
        format!("#!/bin/sh\necho '{{\"clientVersion\": {{\"gitVersion\": \"v{kubectl}\"}}}}'\n"),
    )
    .unwrap();
    for tool in ["node", "kubectl"] {
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(dir.join(tool))
            .status()
            .unwrap();
    }
    dir
}

#[test]
fn too_old_node_and_kubectl_are_named_with_how_to_get_new_ones() {
    let dir = old_tools("18.1.0", "1.20.15");
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/prerequisites"))
        .env("PATH", path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Node >= 20") && err.contains("have: 18.1.0"),
        "{err}"
    );
    assert!(
        err.contains("kubectl >= 1.26") && err.contains("have: 1.20.15"),
        "{err}"
    );
    assert!(err.contains("https://kubernetes.io/"), "{err}");
}
