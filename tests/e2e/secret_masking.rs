//! Every credential triage knows is masked in what the model and the client see, wherever it
//! was configured: here a key from the HolmesGPT model list file and a provider variable
//! (`AZURE_API_KEY`) that no model uses, on the real binary started as an operator would; the
//! files it read its configuration from are closed to the bash tool. The server's log masks
//! them too: a provider error quoting a key is logged when the call is retried.

use serde_json::json;

use crate::helpers::http_client;
use fake_llm::{FakeLlm, Step};

const LIST_KEY: &str = "sk-list-file-key-4711";
const AZURE_KEY: &str = "azure-key-0815-abcdef";

#[tokio::test]
async fn model_list_keys_and_provider_variables_are_masked() {
    let llm = FakeLlm::start().await;
    let dir = crate::helpers::scratch().join(format!("mask-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("models.yaml");
    std::fs::write(
        &list,
        format!(
            "listed:\n  model: openai/fake-model\n  api_base: {}\n  api_key: {LIST_KEY}\n",
            llm.base_url()
        ),
    )
    .unwrap();
    let config = dir.join("triage.toml");
    let port = crate::helpers::free_port();
    std::fs::write(
        &config,
        format!(
            "[server]\nport = {port}\n[toolsets.kubernetes]\nenabled = false\n[toolsets.prometheus]\nenabled = false\n[llm]\nretry_max_attempts = 2\nretry_base_delay_ms = 10\n"
        ),
    )
    .unwrap();
    let log = dir.join("stderr.log");
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRIAGE_CONFIG", &config)
        // No HOME here: the conversation store must not land in the working tree.
        .env("XDG_DATA_HOME", crate::helpers::test_data_dir())
        .env("MODEL_LIST_FILE_LOCATION", &list)
        .env("AZURE_API_KEY", AZURE_KEY)
        .arg("serve")
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = http_client();
    let base = format!("http://127.0.0.1:{port}");
    crate::helpers::wait_until_ready(&client, &base).await;

    // The provider's first answer is an error that quotes both keys: retried, and logged.
    llm.push(Step::error(
        503,
        &format!("overloaded; key {LIST_KEY} and {AZURE_KEY} were rejected"),
    ));
    // A prompt-injected model prints both credentials through an allowed command.
    // And tries to read the files triage reads its configuration from.
    llm.push(Step::tools(vec![
        (
            "leak",
            "bash",
            json!({"command": format!("echo list={LIST_KEY} azure={AZURE_KEY}")}),
        ),
        (
            "list",
            "bash",
            json!({"command": format!("cat {}", list.display())}),
        ),
        (
            "config",
            "bash",
            json!({"command": format!("cat {}", config.display())}),
        ),
    ]));
    llm.push(Step::text("done"));
    let resp = client
        .post(format!("{base}/api/chat"))
        .header("content-type", "application/json")
        .body(json!({"ask": "q", "stream": true}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let events = crate::helpers::read_events(resp).await;
    let result_of = |id: &str| {
        events
            .iter()
            .find(|e| e.name == "tool_calling_result" && e.data["tool_call_id"] == id)
            .expect("a tool result")
    };
    for id in ["list", "config"] {
        let refused = &result_of(id).data["result"];
        assert_ne!(refused["status"], "success", "{id}: {refused}");
        assert!(!refused.to_string().contains("api_key"), "{id}: {refused}");
    }
    let result = result_of("leak");
    let data = result.data["result"]["data"].as_str().unwrap();
    assert_eq!(data.trim(), "list=<secret-hidden> azure=<secret-hidden>");
    // Nothing the client received carries either key outside the model's own command text.
    let end = events.last().unwrap();
    assert_eq!(end.name, "ai_answer_end");
    let history = end.data["conversation_history"].to_string();
    let tool_message = end.data["conversation_history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == "leak")
        .unwrap()
        .to_string();
    assert!(
        !tool_message.contains(LIST_KEY) && !tool_message.contains(AZURE_KEY),
        "{history}"
    );
    // The model read the masked result too.
    let sent = llm.requests()[2]["messages"].to_string();
    assert!(
        sent.contains("list=<secret-hidden> azure=<secret-hidden>"),
        "{sent}"
    );
    server.kill().await.unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("retrying LLM call"), "{logged}");
    assert!(
        !logged.contains(LIST_KEY) && !logged.contains(AZURE_KEY),
        "{logged}"
    );
    assert!(logged.contains("<secret-hidden>"), "{logged}");
    std::fs::remove_dir_all(&dir).unwrap();
}
