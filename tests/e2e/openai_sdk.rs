//! The official OpenAI Python SDK (PyPI `openai`, pinned in tests/openai_sdk/requirements.txt)
//! against triage's OpenAI-compatible routes: models, a completion, a stream with tool
//! activity and usage, structured output parsed into a pydantic model, the Responses API both
//! ways, and errors raised as the SDK's own exception types. The venv comes from
//! `.ci/openai-sdk` (`OPENAI_SDK_VENV`); without it the test is skipped with a note, except
//! when `OPENAI_SDK_TEST_REQUIRED=1` (CI), where it fails.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::helpers::spawn_app_with;
use fake_llm::{Step, Usage};

fn python() -> Option<PathBuf> {
    let venv = std::env::var_os("OPENAI_SDK_VENV").map(PathBuf::from);
    let python = venv.map(|v| v.join("bin/python")).filter(|p| p.is_file());
    if python.is_none() {
        assert!(
            std::env::var("OPENAI_SDK_TEST_REQUIRED").as_deref() != Ok("1"),
            "OPENAI_SDK_VENV is not a venv with the openai SDK (run .ci/openai-sdk)"
        );
        eprintln!("skipped: set OPENAI_SDK_VENV to the venv `.ci/openai-sdk` prints");
    }
    python
}

fn text(content: &str) -> Step {
    Step::Text {
        content: content.into(),
        reasoning: None,
        usage: Some(Usage {
            prompt_tokens: 20,
            completion_tokens: 5,
        }),
    }
}

#[tokio::test]
async fn the_official_sdk_speaks_to_triage() {
    let Some(python) = python() else { return };
    let app = spawn_app_with("[server]\napi_keys = [\"sk-sdk-test\"]\n").await;
    // In the order client.py asks.
    app.llm.push(text("All pods are running."));
    app.llm.push(Step::ToolCalls {
        content: None,
        calls: vec![fake_llm::ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            arguments: json!({"command": "echo from-the-tool"}).to_string(),
        }],
        usage: Some(Usage {
            prompt_tokens: 20,
            completion_tokens: 5,
        }),
    });
    app.llm.push(text("The tool printed from-the-tool."));
    app.llm
        .push(text(r#"{"healthy": true, "reason": "every pod is ready"}"#));
    app.llm.push(text("Nothing changed."));
    app.llm.push(text("Still nothing."));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openai_sdk/client.py");
    let output = tokio::process::Command::new(python)
        .arg(script)
        .arg(app.url("/v1"))
        .arg("sk-sdk-test")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .await
        .expect("client.py runs");
    assert!(
        output.status.success(),
        "client.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "client.py printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    assert_eq!(seen["models"], json!(["fake"]));
    assert_eq!(seen["sync"]["content"], "All pods are running.");
    assert_eq!(seen["sync"]["finish_reason"], "stop");
    assert_eq!(seen["sync"]["total_tokens"], 25);
    let stream = &seen["stream"];
    assert_eq!(stream["content"], "The tool printed from-the-tool.");
    assert!(stream["pieces"].as_u64().unwrap() >= 3, "{stream}");
    assert!(
        stream["reasoning"]
            .as_str()
            .unwrap()
            .contains("echo from-the-tool"),
        "{stream}"
    );
    assert_eq!(stream["total_tokens"], 50, "both LLM calls counted");
    assert_eq!(
        seen["parsed"],
        json!({"healthy": true, "reason": "every pod is ready"})
    );
    // parse() sent the pydantic model as a strict json_schema.
    let format = &app.llm.requests()[3]["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "Health");
    assert_eq!(
        seen["responses"],
        json!({"output_text": "Nothing changed.", "status": "completed"})
    );
    let types = seen["responses_stream"]["types"].as_array().unwrap();
    assert_eq!(types.first().unwrap(), "response.created");
    assert_eq!(types.last().unwrap(), "response.completed");
    assert_eq!(seen["responses_stream"]["text"], "Still nothing.");
    assert_eq!(seen["responses_stream_usage"], 25);
    assert_eq!(
        seen["unknown_model"],
        json!({"type": "NotFoundError", "code": "model_not_found", "status": 404})
    );
    assert_eq!(
        seen["bad_key"],
        json!({"type": "AuthenticationError", "code": "invalid_api_key"})
    );
    assert_eq!(
        seen["stateful"],
        json!({"type": "BadRequestError", "param": "previous_response_id"})
    );
}
