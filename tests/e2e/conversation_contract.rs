//! Two promises of a conversation's status, on SQLite and PostgreSQL: a pause keeps the
//! conversation paused even when the step in flight was the one that answered, and a model
//! re-running a command whose output changes is investigating, not stuck.

use std::time::Duration;

use serde_json::json;

use crate::conversations_api::{Frame, create, frames_until, post, state_is};
use crate::conversations_pg::on_both_stores;
use crate::helpers::TestApp;
use fake_llm::Step;

on_both_stores! {
    pause_while_answering: a_pause_during_the_final_answer_keeps_the_conversation_paused;
    changing_output: a_command_whose_output_changes_is_not_a_loop;
    stable_output: a_command_whose_output_is_stable_is_refused_then_stuck;
    new_turn: a_new_message_lets_every_command_run_again;
}

fn named<'a>(frames: &'a [Frame], name: &str) -> Vec<&'a Frame> {
    frames.iter().filter(|f| f.name == name).collect()
}

async fn a_pause_during_the_final_answer_keeps_the_conversation_paused(app: &TestApp) {
    app.llm.push(Step::Paced {
        before: Duration::from_millis(400),
        between_chunks: Duration::ZERO,
        step: Box::new(Step::text("The pods restart because of OOM.")),
    });
    let id = create(app, json!({"initial_message": {"content": "why"}})).await;
    assert!(app.llm.wait_for_requests(1, Duration::from_secs(10)).await);
    let (status, _) = post(app, &format!("/api/conversations/{id}/pause"), json!({})).await;
    assert_eq!(status, 200);
    let frames = frames_until(app, &id, None, state_is("paused")).await;
    // The late answer is recorded…
    let answers = named(&frames, "ai_answer_end");
    assert_eq!(answers.len(), 1, "{frames:?}");
    assert_eq!(
        answers[0].data["analysis"],
        "The pods restart because of OOM."
    );
    // …and never flips the status.
    assert!(
        !frames
            .iter()
            .any(|f| f.name == "conversation_state_update"
                && f.data["execution_status"] == "finished"),
        "{frames:?}"
    );
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["execution_status"], "paused", "{info}");
    let (_, answer) = app
        .get_json(&format!("/api/conversations/{id}/agent_final_response"))
        .await;
    assert_eq!(answer["response"], "The pods restart because of OOM.");

    // `run` continues: the turn had its answer, so it finishes without asking the model again.
    let last = info["last_event_id"].as_u64().unwrap();
    let (status, _) = post(app, &format!("/api/conversations/{id}/run"), json!({})).await;
    assert_eq!(status, 200);
    frames_until(app, &id, Some(last), state_is("finished")).await;
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["execution_status"], "finished", "{info}");
    assert_eq!(
        app.llm.requests().len(),
        1,
        "no second answer was asked for"
    );

    // It goes on as any finished conversation does.
    let last = info["last_event_id"].as_u64().unwrap();
    app.llm.push(Step::text("Raise the memory limit."));
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/events"),
        json!({"content": "and the fix?", "run": true}),
    )
    .await;
    assert_eq!(status, 200);
    let frames = frames_until(app, &id, Some(last), state_is("finished")).await;
    assert!(
        named(&frames, "ai_answer_end")
            .iter()
            .any(|f| f.data["analysis"] == "Raise the memory limit."),
        "{frames:?}"
    );
}

/// The results the model read, in order.
fn results(frames: &[Frame]) -> Vec<(String, String)> {
    named(frames, "tool_calling_result")
        .iter()
        .map(|f| {
            let result = &f.data["result"];
            let status = result["status"].as_str().unwrap_or_default().to_owned();
            let text = if status == "success" {
                result["data"].as_str()
            } else {
                result["error"].as_str()
            };
            let text = text.unwrap_or_default().to_owned();
            (status, text)
        })
        .collect()
}

async fn a_command_whose_output_changes_is_not_a_loop(app: &TestApp) {
    // Watching a clock, as a model watches a rollout: five identical calls, five readings.
    for i in 0..5 {
        app.llm.push(Step::tool(
            &format!("tick{i}"),
            "bash",
            json!({"command": "date +%s%N"}),
        ));
    }
    app.llm.push(Step::text("The clock moves."));
    let id = create(
        app,
        json!({"initial_message": {"content": "watch the clock"}}),
    )
    .await;
    let frames = frames_until(app, &id, None, |f| {
        state_is("finished")(f) || state_is("stuck")(f) || state_is("error")(f)
    })
    .await;
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["execution_status"], "finished", "{info}");
    assert!(named(&frames, "stuck").is_empty(), "{frames:?}");
    let results = results(&frames);
    assert_eq!(results.len(), 5, "{results:?}");
    assert!(
        results.iter().all(|(status, _)| status == "success"),
        "{results:?}"
    );
    let mut readings: Vec<&str> = results.iter().map(|(_, text)| text.trim()).collect();
    readings.dedup();
    assert_eq!(readings.len(), 5, "every call ran: {results:?}");
    assert_eq!(app.llm.requests().len(), 6);
}

async fn a_command_whose_output_is_stable_is_refused_then_stuck(app: &TestApp) {
    // The first repeat runs (it could have learnt something); it returned the same, so the
    // guard refuses the rest, and four identical refusals are a loop.
    for i in 0..6 {
        app.llm.push(Step::tool(
            &format!("same{i}"),
            "bash",
            json!({"command": "echo same"}),
        ));
    }
    let id = create(app, json!({"initial_message": {"content": "loop"}})).await;
    let frames = frames_until(app, &id, None, state_is("stuck")).await;
    let results = results(&frames);
    assert_eq!(results.len(), 6, "{results:?}");
    for (status, text) in &results[..2] {
        assert_eq!(status, "success");
        assert_eq!(text.trim(), "same");
    }
    for (status, text) in &results[2..] {
        assert_eq!(status, "error");
        assert!(text.contains("returned the same output"), "{text}");
    }
    let stuck = named(&frames, "stuck");
    assert!(
        stuck[0].data["pattern"]
            .as_str()
            .unwrap()
            .contains("failed 4 times"),
        "{:?}",
        stuck[0].data
    );
    // The model was told before it was stopped.
    let sixth = app.llm_messages(5);
    assert!(
        sixth.iter().any(|m| m["role"] == "user"
            && m["content"]
                .as_str()
                .unwrap_or("")
                .contains("failed 3 times")),
        "no nudge in {sixth:?}"
    );
    assert_eq!(app.llm.requests().len(), 6);
}

async fn a_new_message_lets_every_command_run_again(app: &TestApp) {
    // Turn one learns that the output is stable…
    app.llm
        .push(Step::tool("a", "bash", json!({"command": "echo ready"})));
    app.llm
        .push(Step::tool("b", "bash", json!({"command": "echo ready"})));
    app.llm.push(Step::text("It is ready."));
    let id = create(app, json!({"initial_message": {"content": "is it ready?"}})).await;
    let frames = frames_until(app, &id, None, state_is("finished")).await;
    let last = frames.last().map(|f| f.id);
    // …and the user asking again is new information: the same command runs.
    app.llm
        .push(Step::tool("c", "bash", json!({"command": "echo ready"})));
    app.llm.push(Step::text("Still ready."));
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/events"),
        json!({"content": "and now?", "run": true}),
    )
    .await;
    assert_eq!(status, 200);
    let frames = frames_until(app, &id, last, state_is("finished")).await;
    let results = results(&frames);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, "success", "{results:?}");
    assert_eq!(results[0].1.trim(), "ready");
}
