//! The conversation database is one of triage's protected files (issue 34): with the data dir
//! inside a tree tools may read, neither an allowed bash command nor a command that gets past
//! the allow list (a YAML tool, also an approved one) reads the database, its WAL or the key;
//! the data dir is 0700 and its files 0600; and no byte of the database holds a secret, also
//! after an older triage wrote one in clear.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sqlx::Connection;

use crate::conversations_api::{approve_until_finished, create, frames_until, post, state_is};
use crate::helpers::{TestApp, scratch, spawn_app_layers};
use fake_llm::Step;

pub(crate) const SECRET: &str = "sk-conv-e2e-4f9d2a7c31";
const SECOND: &str = "sk-conv-e2e-added-77b0e1";
/// Matches both secrets without containing either (the command is returned to the model).
const PATTERN: &str = "sk-conv-e2e-[0-9a-z-]*";

/// A directory under the scratch dir, not created.
pub(crate) fn new_dir(purpose: &str) -> PathBuf {
    scratch().join(format!("{purpose}-{}", uuid::Uuid::new_v4().simple()))
}

/// An app whose conversations are the default SQLite file in `data_dir`.
pub(crate) async fn app_in(data_dir: &Path, layers: &[&str]) -> TestApp {
    let store = format!(
        "[conversations]\ndatabase_url = \"\"\ndata_dir = \"{}\"\n",
        data_dir.display()
    );
    let mut all = vec![store.as_str()];
    all.extend(layers);
    spawn_app_layers(&all).await
}

/// A conversation holding both secrets (one at creation, one added later).
pub(crate) async fn conversation_with_secrets(app: &TestApp) -> String {
    let id = create(app, json!({"secrets": {"TOKEN": SECRET}})).await;
    let (status, body) = post(
        app,
        &format!("/api/conversations/{id}/secrets"),
        json!({"secrets": {"MORE": SECOND}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    id
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The database files of a data dir, as they are now.
fn db_bytes(data_dir: &Path) -> Vec<u8> {
    ["triage.db", "triage.db-wal"]
        .iter()
        .flat_map(|f| std::fs::read(data_dir.join(f)).unwrap_or_default())
        .collect()
}

fn holds(bytes: &[u8], text: &str) -> bool {
    bytes.windows(text.len()).any(|w| w == text.as_bytes())
}

/// The result of call `id` of a non-streaming answer (results come in the order calls end).
fn result<'a>(body: &'a Value, id: &str) -> &'a Value {
    body["tool_calls"]
        .as_array()
        .and_then(|calls| calls.iter().find(|c| c["tool_call_id"] == id))
        .map(|c| &c["result"])
        .unwrap_or_else(|| panic!("no result for {id}: {body}"))
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(
        !text.contains(SECRET) && !text.contains(SECOND),
        "{what} shows a secret: {text}"
    );
}

#[tokio::test]
async fn another_conversations_secrets_are_out_of_reach_of_tools() {
    // The data dir inside a `sandbox.read_paths` entry: tools may read that tree.
    let readable = new_dir("readable");
    std::fs::create_dir_all(&readable).expect("mkdir");
    chmod(&readable, 0o755);
    std::fs::write(readable.join("notes.txt"), "visible notes\n").expect("write");
    chmod(&readable.join("notes.txt"), 0o644);
    let data = readable.join("triage-data");
    let tools = format!(
        "[sandbox]\nread_paths = [\"{}\"]\n\
         [yaml_toolsets.files]\ndescription = \"Files\"\n\
         [[yaml_toolsets.files.tools]]\nname = \"read_file\"\ndescription = \"Prints a file\"\n\
         command = \"cat {{{{ path }}}}\"\n",
        readable.display()
    );
    let app = app_in(&data, &[&tools]).await;
    conversation_with_secrets(&app).await;
    let (db, wal, key) = (
        data.join("triage.db"),
        data.join("triage.db-wal"),
        data.join("secret.key"),
    );
    assert!(wal.exists() && key.exists());
    let key_text = std::fs::read_to_string(&key).expect("the key");

    // Allowed programs naming the database, its WAL, the key or the directory: refused.
    let commands = [
        format!("grep -a -o '{PATTERN}' {}", db.display()),
        format!("cat {}", wal.display()),
        format!("grep -r -a -o '{PATTERN}' {}/", data.display()),
        format!("cat {}", key.display()),
    ];
    let ids: Vec<String> = (0..commands.len()).map(|i| format!("b{i}")).collect();
    app.llm.push(Step::tools(
        ids.iter()
            .zip(&commands)
            .map(|(id, c)| (id.as_str(), "bash", json!({"command": c})))
            .collect(),
    ));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "find the tokens"})).await;
    assert_eq!(status, 200, "{body}");
    for (id, command) in ids.iter().zip(&commands) {
        let r = result(&body, id);
        let error = r["error"].as_str().unwrap_or_default();
        assert!(
            r["status"] == "error" && error.contains("is a sensitive path"),
            "{command}: {r}"
        );
    }
    assert_no_secret("bash", &body.to_string());
    assert!(!body.to_string().contains(key_text.trim()));

    // Past the allow list (a YAML tool), with the files' modes opened as if they had not been
    // made private: the sandbox alone keeps them closed. A file beside them stays readable.
    chmod(&data, 0o755);
    for f in [&db, &wal, &key] {
        chmod(f, 0o644);
    }
    let reads = [&db, &wal, &key, &readable.join("notes.txt")];
    let calls: Vec<(String, Value)> = reads
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("y{i}"), json!({"path": p.display().to_string()})))
        .collect();
    app.llm.push(Step::tools(
        calls
            .iter()
            .map(|(id, args)| (id.as_str(), "read_file", args.clone()))
            .collect(),
    ));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "read them"})).await;
    assert_eq!(status, 200, "{body}");
    for id in ["y0", "y1", "y2"] {
        let r = result(&body, id);
        assert!(r.to_string().contains("Permission denied"), "{r}");
    }
    assert_eq!(result(&body, "y3")["data"], "visible notes\n");
    assert_no_secret("a YAML tool", &body.to_string());
    assert!(!body.to_string().contains(key_text.trim()));

    // An approved call may write anywhere, and still reads none of them.
    app.llm.push(Step::tool(
        "approved",
        "read_file",
        json!({"path": wal.display().to_string()}),
    ));
    app.llm.push(Step::text("done"));
    let id = create(
        &app,
        json!({"confirmation_policy": {"kind": "AlwaysConfirm"},
               "initial_message": {"content": "read the WAL"}}),
    )
    .await;
    frames_until(&app, &id, None, state_is("waiting_for_confirmation")).await;
    let frames = approve_until_finished(&app, &id).await;
    let result = frames
        .iter()
        .find(|f| f.name == "tool_calling_result")
        .map(|f| f.data.to_string())
        .expect("the call's result");
    assert!(result.contains("Permission denied"), "{result}");
    assert_no_secret("an approved call", &result);
    let _ = std::fs::remove_dir_all(&readable);
}

#[tokio::test]
async fn the_data_dir_is_0700_and_every_file_in_it_0600() {
    let data = new_dir("modes");
    let app = app_in(&data, &[]).await;
    conversation_with_secrets(&app).await;
    assert_eq!(mode(&data), 0o700);
    for file in ["triage.db", "triage.db-wal", "triage.db-shm", "secret.key"] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    drop(app);
    // A data dir and database an earlier version left open to everyone are closed at start.
    let old = new_dir("modes-old");
    std::fs::create_dir_all(&old).expect("mkdir");
    chmod(&old, 0o755);
    std::fs::write(old.join("triage.db"), b"").expect("an empty database");
    chmod(&old.join("triage.db"), 0o644);
    let app = app_in(&old, &[]).await;
    conversation_with_secrets(&app).await;
    assert_eq!(mode(&old), 0o700);
    for file in ["triage.db", "triage.db-wal", "triage.db-shm", "secret.key"] {
        assert_eq!(mode(&old.join(file)), 0o600, "{file}");
    }
    drop(app);
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_dir_all(&old);
}

#[tokio::test]
async fn no_byte_of_the_database_holds_a_secret() {
    let data = new_dir("bytes");
    let app = app_in(&data, &[]).await;
    let id = conversation_with_secrets(&app).await;
    let (status, fork) = post(&app, &format!("/api/conversations/{id}/fork"), json!({})).await;
    assert_eq!(status, 201, "{fork}");
    let bytes = db_bytes(&data);
    assert!(!bytes.is_empty());
    assert!(!holds(&bytes, SECRET) && !holds(&bytes, SECOND));
    drop(app);

    // A row as an earlier triage wrote it: the secrets in clear, in the file.
    let url = format!("sqlite://{}", data.join("triage.db").display());
    let mut db = sqlx::SqliteConnection::connect(&url).await.expect("open");
    let text: String = sqlx::query_scalar("SELECT config FROM conversations WHERE id = ?")
        .bind(uuid::Uuid::parse_str(&id).expect("uuid"))
        .fetch_one(&mut db)
        .await
        .expect("the row");
    let mut config: Value = serde_json::from_str(&text).expect("JSON");
    config["run"]["secrets"] = json!([SECRET, SECOND]);
    sqlx::query("UPDATE conversations SET config = ? WHERE id = ?")
        .bind(config.to_string())
        .bind(uuid::Uuid::parse_str(&id).expect("uuid"))
        .execute(&mut db)
        .await
        .expect("write the old row");
    db.close().await.expect("close");
    assert!(
        holds(&db_bytes(&data), SECRET),
        "the old row is in the file"
    );

    // The next start seals it and rebuilds the file: the text is gone from every page.
    let app = app_in(&data, &[]).await;
    let (status, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 200, "{info}");
    let bytes = db_bytes(&data);
    assert!(!holds(&bytes, SECRET) && !holds(&bytes, SECOND));
    drop(app);
    let _ = std::fs::remove_dir_all(&data);
}
