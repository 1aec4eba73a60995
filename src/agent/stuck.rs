//! Stuck detection, on the turn's history (everything after the user's last message): the
//! same call and result four times; the same call failing three times (the model is nudged)
//! or four (stuck); two calls alternating three times each with the same results; three
//! answers in a row with no tool call. The patterns and thresholds are OpenHands'.

use crate::wire::Message;

use super::canonical::canonical;

/// The `name` of the user message that carries a nudge: it does not start a new turn.
pub const NUDGE_NAME: &str = "stuck_detection";

/// The nudge as the model reads it.
pub fn nudge_message(text: String) -> Message {
    let mut message = Message::user(serde_json::Value::String(text));
    message.name = Some(NUDGE_NAME.into());
    message
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assessment {
    Fine,
    /// Worth telling the model before it is called stuck.
    Nudge(String),
    Stuck(String),
}

/// One tool call of the turn and what came back.
#[derive(Debug, PartialEq, Eq)]
struct Step<'a> {
    tool: &'a str,
    arguments: String,
    result: &'a str,
}

impl Step<'_> {
    fn same_call(&self, other: &Step<'_>) -> bool {
        self.tool == other.tool && self.arguments == other.arguments
    }

    fn failed(&self) -> bool {
        self.result.starts_with("Error")
    }
}

pub fn assess(messages: &[Message]) -> Assessment {
    let turn_start = messages
        .iter()
        .rposition(|m| m.is_role("user") && m.name.as_deref() != Some(NUDGE_NAME))
        .map_or(0, |i| i + 1);
    let turn = &messages[turn_start..];
    let steps = steps_of(turn);
    if let Some(last) = steps.last() {
        let same_results = steps.iter().rev().take_while(|s| *s == last).count();
        let same_failures = steps
            .iter()
            .rev()
            .take_while(|s| s.same_call(last) && s.failed())
            .count();
        if same_results >= 4 && !last.failed() {
            return Assessment::Stuck(format!(
                "the same call of {} returned the same result {same_results} times",
                last.tool
            ));
        }
        if same_failures >= 4 {
            return Assessment::Stuck(format!(
                "the same call of {} failed {same_failures} times",
                last.tool
            ));
        }
        if same_failures == 3 {
            return Assessment::Nudge(format!(
                "The same call of {} has failed 3 times in a row with the same arguments. \
                 Do not repeat it: change the arguments, try another approach, or answer with \
                 what you know.",
                last.tool
            ));
        }
        if alternating(&steps) {
            return Assessment::Stuck(
                "two tool calls alternated with the same results 3 times each".into(),
            );
        }
    }
    let answers_in_a_row = turn
        .iter()
        .rev()
        .filter(|m| !m.is_role("tool") && m.name.as_deref() != Some(NUDGE_NAME))
        .take_while(|m| m.is_role("assistant") && m.tool_calls().is_empty())
        .count();
    if answers_in_a_row >= 3 {
        return Assessment::Stuck(format!(
            "{answers_in_a_row} answers in a row without a tool call"
        ));
    }
    Assessment::Fine
}

fn steps_of(turn: &[Message]) -> Vec<Step<'_>> {
    let mut steps = Vec::new();
    for (i, m) in turn.iter().enumerate() {
        for call in m.tool_calls() {
            let result = turn[i + 1..]
                .iter()
                .find(|r| r.is_role("tool") && r.tool_call_id.as_deref() == Some(call.id.as_str()))
                .and_then(|r| r.content.as_str())
                .unwrap_or_default();
            steps.push(Step {
                tool: &call.function.name,
                arguments: canonical(&call.function.arguments),
                result,
            });
        }
    }
    steps
}

/// A, B, A, B, A, B at the end, with A's results all the same and B's too.
fn alternating(steps: &[Step<'_>]) -> bool {
    let Some(last6) = steps.len().checked_sub(6).map(|i| &steps[i..]) else {
        return false;
    };
    let (a, b) = (&last6[0], &last6[1]);
    !a.same_call(b)
        && last6
            .iter()
            .enumerate()
            .all(|(i, s)| if i % 2 == 0 { s == a } else { s == b })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ToolCall;
    use serde_json::json;

    fn turn(steps: &[(&str, &str, &str)]) -> Vec<Message> {
        let mut messages = vec![Message::user(json!("go"))];
        for (i, (tool, args, result)) in steps.iter().enumerate() {
            let id = format!("c{i}");
            messages.push(Message::assistant(
                None,
                None,
                vec![ToolCall::new(id.clone(), (*tool).into(), (*args).into())],
            ));
            messages.push(Message::tool(&id, tool, (*result).into()));
        }
        messages
    }

    #[test]
    fn the_same_call_and_result_four_times_is_stuck() {
        let same = ("bash", r#"{"command":"ls"}"#, "a b");
        assert_eq!(assess(&turn(&[same; 3])), Assessment::Fine);
        assert!(matches!(assess(&turn(&[same; 4])), Assessment::Stuck(_)));
    }

    #[test]
    fn the_same_command_with_changing_output_is_not_stuck() {
        let steps: Vec<_> = ["1", "2", "3", "4", "5"]
            .iter()
            .map(|out| ("bash", r#"{"command":"date"}"#, *out))
            .collect();
        assert_eq!(assess(&turn(&steps)), Assessment::Fine);
    }

    #[test]
    fn three_identical_failures_nudge_and_a_fourth_is_stuck() {
        let failing = (
            "bash",
            r#"{"command":"kubectl get podz"}"#,
            "Error: no such resource",
        );
        assert!(matches!(assess(&turn(&[failing; 3])), Assessment::Nudge(_)));
        assert!(matches!(assess(&turn(&[failing; 4])), Assessment::Stuck(_)));
        // Re-ordered arguments are the same call.
        let respelled = (
            "bash",
            r#"{ "command" : "kubectl get podz" }"#,
            "Error: no such resource",
        );
        assert!(matches!(
            assess(&turn(&[failing, respelled, failing, respelled])),
            Assessment::Stuck(_)
        ));
    }

    #[test]
    fn an_alternation_of_two_calls_is_stuck() {
        let a = ("bash", r#"{"command":"ls"}"#, "x");
        let b = ("bash", r#"{"command":"pwd"}"#, "/");
        assert_eq!(assess(&turn(&[a, b, a, b, a])), Assessment::Fine);
        assert!(matches!(
            assess(&turn(&[a, b, a, b, a, b])),
            Assessment::Stuck(_)
        ));
    }

    #[test]
    fn three_answers_without_a_tool_call_are_stuck() {
        let mut messages = vec![Message::user(json!("go"))];
        for text in ["one", "two"] {
            messages.push(Message::assistant(Some(text.into()), None, Vec::new()));
        }
        assert_eq!(assess(&messages), Assessment::Fine);
        messages.push(Message::assistant(Some("three".into()), None, Vec::new()));
        assert!(matches!(assess(&messages), Assessment::Stuck(_)));
        // A new user message starts a new turn.
        messages.push(Message::user(json!("again")));
        assert_eq!(assess(&messages), Assessment::Fine);
    }
}
