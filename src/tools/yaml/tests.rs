//! YAML toolsets built from definitions and run in the test sandbox.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::tools::{ToolContext, ToolStatus, ToolsetStatus};

fn defs(yaml: &str) -> BTreeMap<String, YamlToolsetDef> {
    serde_norway::from_str(yaml).expect("toolset YAML")
}

async fn build(yaml: &str) -> Result<Vec<Toolset>, String> {
    let sandbox = Sandbox::for_tests();
    let lookup = |k: &str| match k {
        "HOME" => Some("/root".to_owned()),
        "TEST_GREETING" => Some("hello".to_owned()),
        "TEST_SECRET" => Some("s3cr3t".to_owned()),
        _ => None,
    };
    let shared = Shared {
        sandbox: &sandbox,
        memory_limit_mb: 0,
        lookup: &lookup,
        roots: &Default::default(),
    };
    toolsets(&defs(yaml), &shared).await
}

fn tool<'a>(ts: &'a Toolset, name: &str) -> &'a Arc<dyn Tool> {
    ts.tools.iter().find(|t| t.name() == name).expect("tool")
}

#[tokio::test]
async fn a_hostile_argument_is_one_literal_word() {
    let ts = build(
        "echoes:\n  tools:\n    - name: echo_arg\n      description: prints\n      command: printf '[%s]\\n' {{ arg }} ${TEST_GREETING}\n",
    )
    .await
    .unwrap();
    let echo = tool(&ts[0], "echo_arg");
    assert_eq!(echo.parameters()["required"], json!(["arg"]));
    for hostile in ["$(id)", "`id`", "x; id", "a\nb", "it's", "\"q\""] {
        let out = echo
            .invoke(&json!({"arg": hostile}), &ToolContext::default())
            .await;
        assert_eq!(out.status, ToolStatus::Success, "{out:?}");
        assert_eq!(out.data, format!("[{hostile}]\n[hello]\n"), "{hostile:?}");
    }
    let out = echo.invoke(&json!({}), &ToolContext::default()).await;
    assert!(out.error.unwrap().contains("missing parameter `arg`"));
    let out = echo
        .invoke(&json!({"arg": "a", "extra": 1}), &ToolContext::default())
        .await;
    assert!(out.error.unwrap().contains("unknown parameter `extra`"));
}

#[tokio::test]
async fn prerequisites_that_fail_make_the_toolset_unavailable() {
    let ts = build(
        "needs_env:\n  prerequisites:\n    - env: [TEST_GREETING, TEST_MISSING]\n  tools:\n    - name: a\n      command: 'true'\n\
         needs_cmd:\n  prerequisites:\n    - command: 'exit 3'\n  tools:\n    - name: b\n      command: 'true'\n\
         fine:\n  prerequisites:\n    - command: 'true'\n    - env: [TEST_SECRET]\n  tools:\n    - name: c\n      command: printf %s \"$TEST_SECRET\"\n",
    )
    .await
    .unwrap();
    let status = |name: &str| ts.iter().find(|t| t.name == name).unwrap().status.clone();
    assert!(
        matches!(status("needs_env"), ToolsetStatus::Unavailable(r) if r.contains("TEST_MISSING is not set")),
        "{:?}",
        status("needs_env")
    );
    assert!(
        matches!(status("needs_cmd"), ToolsetStatus::Unavailable(r) if r.contains("`exit 3`") && r.contains("code 3"))
    );
    assert_eq!(status("fine"), ToolsetStatus::Enabled);
    // A variable an `env` prerequisite names reaches the commands; nothing else of triage's.
    let fine = ts.iter().find(|t| t.name == "fine").unwrap();
    let out = tool(fine, "c")
        .invoke(&json!({}), &ToolContext::default())
        .await;
    assert_eq!(out.data, "s3cr3t");
}

#[tokio::test]
async fn timeout_and_approval() {
    let ts = build(
        "slow:\n  timeout_secs: 1\n  tools:\n    - name: sleepy\n      command: sleep 30\n    - name: guarded\n      requires_approval: true\n      timeout_secs: 5\n      command: echo ran {{ what }}\n",
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let out = tool(&ts[0], "sleepy")
        .invoke(&json!({}), &ToolContext::default())
        .await;
    assert!(out.error.unwrap().contains("timed out after 1 s"));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let guarded = tool(&ts[0], "guarded");
    let out = guarded
        .invoke(&json!({"what": "x"}), &ToolContext::default())
        .await;
    assert_eq!(out.status, ToolStatus::ApprovalRequired);
    let approved = ToolContext {
        user_approved: true,
        ..ToolContext::default()
    };
    let out = guarded.invoke(&json!({"what": "x"}), &approved).await;
    assert_eq!(out.data, "ran x\n");
}

#[tokio::test]
async fn output_goes_through_additional_instructions() {
    let ts = build(
        "post:\n  tools:\n    - name: upper\n      command: printf '%s\\n' {{ word }} other\n      additional_instructions: tr a-z A-Z\n",
    )
    .await
    .unwrap();
    let out = tool(&ts[0], "upper")
        .invoke(&json!({"word": "ab; echo x"}), &ToolContext::default())
        .await;
    assert_eq!(out.data, "AB; ECHO X\nOTHER\n", "{out:?}");
}

#[tokio::test]
async fn declared_parameters_and_bad_definitions() {
    let ts = build(
        "k:\n  tools:\n    - name: get\n      command: kubectl get {{ kind }}{% if ns %} -n {{ ns }}{% endif %}\n      parameters:\n        kind: {type: string, description: the kind}\n        ns: {required: false}\n",
    )
    .await
    .unwrap();
    let get = tool(&ts[0], "get");
    assert_eq!(get.parameters()["required"], json!(["kind"]));
    assert_eq!(
        get.parameters()["properties"]["kind"]["description"],
        "the kind"
    );
    assert_eq!(
        get.one_liner(&json!({"kind": "pods"})),
        "kubectl get 'pods'"
    );
    assert_eq!(
        get.one_liner(&json!({"kind": "pods", "ns": "a b"})),
        "kubectl get 'pods' -n 'a b'"
    );
    for (bad, needle) in [
        (
            "t:\n  tools:\n    - name: x\n",
            "needs a `command` or a `script`",
        ),
        (
            "t:\n  tools:\n    - name: x\n      command: a\n      script: b\n",
            "both",
        ),
        (
            "t:\n  tools:\n    - name: 'x y'\n      command: a\n",
            "tool name",
        ),
        (
            "t:\n  tools:\n    - name: x\n      command: a {{ b }}\n      parameters: {c: {}}\n",
            "does not declare",
        ),
        (
            "t:\n  tools:\n    - name: x\n      command: a {{ b }}\n      parameters: {b: {type: object}}\n",
            "type `object`",
        ),
    ] {
        let err = build(bad).await.err().unwrap_or_default();
        assert!(err.contains(needle), "{bad}: {err}");
    }
}
