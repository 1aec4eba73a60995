use crate::kube_standin;

#[tokio::test]
async fn explore() {
    let s = kube_standin::start().await;
    let kc = s.kubeconfig_path().to_str().unwrap().to_owned();
    for args in [
        vec!["version", "-o", "json"],
        vec!["get", "pods", "-n", "default", "-o", "wide"],
        vec!["get", "pods", "-A", "-o", "wide"],
        vec![
            "get",
            "pod",
            "checkout-6c9b5f4d7-abcde",
            "-n",
            "default",
            "-o",
            "wide",
        ],
        vec!["get", "pod", "nope", "-n", "default", "-o", "wide"],
        vec![
            "describe",
            "pod",
            "checkout-6c9b5f4d7-abcde",
            "-n",
            "default",
        ],
        vec![
            "logs",
            "checkout-6c9b5f4d7-abcde",
            "-n",
            "default",
            "--tail=500",
        ],
        vec![
            "logs",
            "checkout-6c9b5f4d7-abcde",
            "-n",
            "default",
            "--previous",
            "--tail=500",
        ],
        vec!["logs", "web-5d8f7b6c9-x2k4p", "-n", "default", "--previous"],
        vec!["events", "-n", "default"],
        vec!["events", "-A"],
        vec![
            "events",
            "-n",
            "default",
            "--for",
            "pod/checkout-6c9b5f4d7-abcde",
        ],
        vec!["get", "events", "-n", "default", "-o", "wide"],
        vec!["get", "nodes", "-o", "wide"],
        vec!["get", "deployments", "-n", "default"],
        vec!["get", "pods", "-n", "empty", "-o", "wide"],
        vec!["top", "pods", "-n", "default"],
        vec!["top", "nodes"],
    ] {
        let out = tokio::process::Command::new("kubectl")
            .args(&args)
            .arg("--kubeconfig")
            .arg(&kc)
            .output()
            .await
            .unwrap();
        eprintln!(
            "=== {:?} rc={:?}\n{}\n--- stderr\n{}",
            args,
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!("unknown: {:?}", s.unknown());
    for r in s.seen() {
        eprintln!("{} ? {} [{}]", r.path, r.query, r.accept);
    }
}
