//! Rules: answers picked by what a request is (the model it names, its system prompt, its
//! text) rather than by when it arrives, as a dummy provider picks its behaviour by model name.
//!
//! A request that matches a rule belongs to that rule: it is answered from the rule's own
//! steps, and counted and recorded on the rule, not in the shared script's record
//! ([`crate::FakeLlm::requests`], [`crate::FakeLlm::request_count`]). So a background request
//! (a conversation's title) never takes a test's next scripted answer nor shifts the indices
//! of its recorded requests, and concurrent scenarios each keep a script under a model name.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use serde_json::Value;

use crate::{Step, parse};

/// What a rule matches.
#[derive(Clone, Debug)]
pub enum When {
    /// The request names this model: its body's `model`, or the model in the URL (Gemini,
    /// Vertex, Bedrock).
    Model(String),
    /// The system prompt contains this text (OpenAI `system`/`developer` messages, Anthropic
    /// and Bedrock `system`, Gemini `systemInstruction`).
    SystemContains(String),
    /// Some string of the request body (a message, a tool result, a tool's description…)
    /// contains this text.
    Contains(String),
}

impl When {
    pub fn model(name: &str) -> When {
        When::Model(name.to_owned())
    }

    pub fn system_contains(text: &str) -> When {
        When::SystemContains(text.to_owned())
    }

    pub fn contains(text: &str) -> When {
        When::Contains(text.to_owned())
    }

    fn matches(&self, url_model: Option<&str>, body: &Value) -> bool {
        match self {
            When::Model(name) => {
                url_model.or_else(|| body.get("model").and_then(Value::as_str)) == Some(name)
            }
            When::SystemContains(text) => system_strings(body).any(|s| s.contains(text.as_str())),
            When::Contains(text) => any_string(body, &|s| s.contains(text.as_str())),
        }
    }
}

/// The texts of a request's system prompt, in any of the providers' shapes.
fn system_strings(body: &Value) -> impl Iterator<Item = &str> {
    let openai = body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| matches!(m["role"].as_str(), Some("system" | "developer")))
        .map(|m| &m["content"]);
    let others = ["system", "systemInstruction"]
        .into_iter()
        .filter_map(|key| body.get(key));
    openai.chain(others).flat_map(texts)
}

/// A content value's texts: a string, or the `text` of its parts (`[{text}]`, `{parts: […]}`).
fn texts(content: &Value) -> Box<dyn Iterator<Item = &str> + '_> {
    match content {
        Value::String(s) => Box::new(std::iter::once(s.as_str())),
        Value::Array(parts) => Box::new(parts.iter().filter_map(|p| p["text"].as_str())),
        Value::Object(o) => match o.get("parts") {
            Some(parts) => texts(parts),
            None => Box::new(o.get("text").and_then(Value::as_str).into_iter()),
        },
        _ => Box::new(std::iter::empty()),
    }
}

fn any_string(value: &Value, pred: &dyn Fn(&str) -> bool) -> bool {
    match value {
        Value::String(s) => pred(s),
        Value::Array(items) => items.iter().any(|v| any_string(v, pred)),
        Value::Object(o) => o.values().any(|v| any_string(v, pred)),
        _ => false,
    }
}

#[derive(Default)]
struct RuleState {
    steps: VecDeque<Step>,
    /// Answered once the steps are used up, as many times as asked.
    always: Option<Step>,
    requests: Vec<Bytes>,
}

/// A rule added with [`crate::FakeLlm::when`]: give it answers, read what it received. Clones
/// share the rule.
#[derive(Clone)]
pub struct Rule {
    when: When,
    state: Arc<Mutex<RuleState>>,
}

impl Rule {
    pub(crate) fn new(when: When) -> Rule {
        Rule {
            when,
            state: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, RuleState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append a step to this rule's own script (FIFO, used before [`Rule::always`]).
    pub fn push(&self, step: Step) -> &Rule {
        self.state().steps.push_back(step);
        self
    }

    /// Answer with a clone of `step` whenever this rule's own script is empty (else its
    /// requests are answered HTTP 500, script exhausted).
    pub fn always(&self, step: Step) -> &Rule {
        self.state().always = Some(step);
        self
    }

    /// Bodies of the requests this rule answered (parsed JSON), in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.state().requests.iter().map(|b| parse(b)).collect()
    }

    pub fn request_count(&self) -> usize {
        self.state().requests.len()
    }

    /// Steps of this rule's own script not yet used.
    pub fn remaining(&self) -> usize {
        self.state().steps.len()
    }

    pub(crate) fn matches(&self, url_model: Option<&str>, body: &Value) -> bool {
        self.when.matches(url_model, body)
    }

    pub(crate) fn record(&self, raw: &Bytes) {
        self.state().requests.push(raw.clone());
    }

    /// The step answering the next request, `None` when exhausted.
    pub(crate) fn next(&self) -> Option<Step> {
        let mut state = self.state();
        state.steps.pop_front().or_else(|| state.always.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::When;

    #[test]
    fn finds_the_system_prompt_in_every_provider_shape() {
        let wanted = When::system_contains("name conversations");
        let shapes = [
            json!({"messages": [{"role": "system", "content": "You name conversations."}]}),
            json!({"messages": [{"role": "developer", "content": [{"type": "text", "text": "You name conversations."}]}]}),
            json!({"system": "You name conversations."}),
            json!({"system": [{"text": "You name conversations."}]}),
            json!({"systemInstruction": {"parts": [{"text": "You name conversations."}]}}),
        ];
        for body in &shapes {
            assert!(wanted.matches(None, body), "{body}");
        }
        let user_only =
            json!({"messages": [{"role": "user", "content": "You name conversations."}]});
        assert!(!wanted.matches(None, &user_only));
        assert!(When::contains("name conv").matches(None, &user_only));
    }

    #[test]
    fn a_model_is_read_from_the_url_before_the_body() {
        let body = json!({"model": "fake-model"});
        assert!(When::model("fake-model").matches(None, &body));
        assert!(When::model("scenario-a").matches(Some("scenario-a"), &body));
        assert!(!When::model("fake-model").matches(Some("scenario-a"), &body));
    }
}
