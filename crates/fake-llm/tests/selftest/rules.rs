//! Rules: a request is answered by what it is, not by when it comes.

use serde_json::{Value, json};

use crate::common::*;
use fake_llm::{EXHAUSTED_MESSAGE, FakeLlm, Step, When};

fn with_system(system: &str, user: &str) -> Value {
    json!({
        "model": "fake-model",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    })
}

fn answer_text(body: &Value) -> &str {
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_request_a_rule_matches_takes_no_scripted_step_and_is_recorded_on_the_rule() {
    let fake = FakeLlm::start().await;
    fake.push(Step::text("the scripted answer"));
    let titles = fake.when(When::system_contains("You name conversations"));
    titles.always(Step::text("Checkout latency"));

    // The background request arrives first; the script's answer still goes to the turn.
    let title = json_body(post(&fake, &with_system("You name conversations.", "hi")).await).await;
    assert_eq!(answer_text(&title), "Checkout latency");
    let again = json_body(post(&fake, &with_system("You name conversations.", "yo")).await).await;
    assert_eq!(
        answer_text(&again),
        "Checkout latency",
        "answered every time"
    );
    let turn = json_body(post(&fake, &with_system("You are triage.", "why?")).await).await;
    assert_eq!(answer_text(&turn), "the scripted answer");

    assert_eq!(fake.remaining(), 0);
    assert_eq!(fake.request_count(), 1, "only the turn is the script's");
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.requests()[0]["messages"][1]["content"], "why?");
    assert_eq!(titles.request_count(), 2);
    assert_eq!(titles.requests()[1]["messages"][1]["content"], "yo");
}

#[tokio::test]
async fn a_model_named_for_a_scenario_keeps_its_own_script() {
    let fake = FakeLlm::start().await;
    let a = fake.when(When::model("scenario-a"));
    a.push(Step::text("a1")).push(Step::text("a2"));
    let b = fake.when(When::model("scenario-b"));
    b.push(Step::text("b1"));
    let ask = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "?"}]});

    let b1 = json_body(post(&fake, &ask("scenario-b")).await).await;
    let a1 = json_body(post(&fake, &ask("scenario-a")).await).await;
    let a2 = json_body(post(&fake, &ask("scenario-a")).await).await;
    assert_eq!(
        [answer_text(&a1), answer_text(&a2), answer_text(&b1)],
        ["a1", "a2", "b1"]
    );
    assert_eq!((a.remaining(), b.remaining()), (0, 0));

    // A rule's script used up is exhausted as the shared one is, without falling through.
    fake.push(Step::text("the shared script"));
    let resp = post(&fake, &ask("scenario-b")).await;
    assert_eq!(resp.status(), 500);
    assert_eq!(json_body(resp).await["error"]["message"], EXHAUSTED_MESSAGE);
    assert_eq!(fake.remaining(), 1);
    assert_eq!(b.request_count(), 2);
}

#[tokio::test]
async fn rules_are_checked_in_the_order_added_and_content_matches_any_text() {
    let fake = FakeLlm::start().await;
    let first = fake.when(When::contains("kubectl"));
    first.always(Step::text("first"));
    let second = fake.when(When::model("fake-model"));
    second.always(Step::text("second"));

    let body = json!({
        "model": "fake-model",
        "messages": [{"role": "tool", "tool_call_id": "c1", "content": "ran kubectl get pods"}],
    });
    assert_eq!(
        answer_text(&json_body(post(&fake, &body).await).await),
        "first"
    );
    let other = with_system("You are triage.", "why?");
    assert_eq!(
        answer_text(&json_body(post(&fake, &other).await).await),
        "second"
    );
    assert_eq!((first.request_count(), second.request_count()), (1, 1));
    assert_eq!(fake.request_count(), 0);
}

#[tokio::test]
async fn rules_answer_the_anthropic_api_too() {
    let fake = FakeLlm::start().await;
    let rule = fake.when(When::system_contains("You name conversations"));
    rule.always(Step::text("Disk pressure"));
    let resp = http_client()
        .post(format!("{}/messages", fake.base_url()))
        .header("x-api-key", "k")
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(
            json!({
                "model": "claude-x",
                "max_tokens": 100,
                "system": "You name conversations.",
                "messages": [{"role": "user", "content": "nodes are full"}],
            })
            .to_string(),
        )
        .send()
        .await
        .expect("request to the fake");
    assert_eq!(resp.status(), 200);
    let body = json_body(resp).await;
    assert_eq!(body["content"][0]["text"], "Disk pressure", "{body}");
    assert_eq!((rule.request_count(), fake.request_count()), (1, 0));
}
