//! The duplicate-call guard. A repeat of a call (same tool, same canonical arguments) can
//! bring new information — a rollout that moved on, a clock — so the first repeat runs; once
//! two runs in a row returned the same result the output is known to be stable, and further
//! repeats are refused with the model told why. A new user message starts afresh: what the
//! user says is new information too. The stuck detector then sees real observations: a
//! command whose output keeps changing is not a loop, one that keeps returning the same
//! result (then the same refusal) is.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The model reads this instead of a result once a call's output is known to be stable.
pub const REFUSAL: &str = "Refusing to run this tool call: an identical call (same tool, same \
     arguments) already ran twice in this turn and returned the same output both times. Use its \
     earlier output (or the summary, if the history was compacted), or change the arguments.";

/// What the guard remembers of the calls made since the user's last message.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RepeatGuard {
    /// By call key (`key`): what its last run returned.
    #[serde(default)]
    calls: BTreeMap<String, LastRun>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct LastRun {
    /// SHA-256 of the result as the model read it (a state is stored; results can be large).
    result: String,
    /// The last two runs returned the same result.
    stable: bool,
}

/// One reply's calls: an identical call asked for twice in one reply cannot learn anything
/// from the other (they run at the same moment), so the second is refused at once.
#[derive(Debug, Default)]
pub struct ReplyCalls(BTreeSet<String>);

impl ReplyCalls {
    /// False when the reply already asked for this call.
    pub fn first(&mut self, key: &str) -> bool {
        self.0.insert(key.to_owned())
    }
}

/// The guard's key of a call: its tool and canonical arguments, unambiguous whatever either
/// contains.
pub fn key(tool: &str, canonical_arguments: &str) -> String {
    serde_json::to_string(&(tool, canonical_arguments)).unwrap_or_default()
}

impl RepeatGuard {
    /// Whether a call must not run again: its output is known to be stable.
    pub fn refuses(&self, key: &str) -> bool {
        self.calls.get(key).is_some_and(|last| last.stable)
    }

    /// A call ran and the model read `result`.
    pub fn ran(&mut self, key: String, result: &str) {
        let digest = digest(result);
        match self.calls.get_mut(&key) {
            Some(last) => {
                last.stable = last.result == digest;
                last.result = digest;
            }
            None => {
                self.calls.insert(
                    key,
                    LastRun {
                        result: digest,
                        stable: false,
                    },
                );
            }
        }
    }

    /// The user spoke: every call may run again.
    pub fn new_turn(&mut self) {
        self.calls.clear();
    }
}

fn digest(result: &str) -> String {
    let hash = Sha256::digest(result.as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_runs_until_the_output_is_known_to_be_stable() {
        let mut guard = RepeatGuard::default();
        let date = key("bash", r#"{"command":"date +%s%N"}"#);
        assert!(!guard.refuses(&date));
        guard.ran(date.clone(), "1");
        assert!(!guard.refuses(&date), "the first repeat runs");
        guard.ran(date.clone(), "2");
        assert!(
            !guard.refuses(&date),
            "its output changed: it may change again"
        );
        guard.ran(date.clone(), "2");
        assert!(guard.refuses(&date), "twice the same: stable");
        guard.new_turn();
        assert!(!guard.refuses(&date), "the user spoke");
    }

    #[test]
    fn keys_do_not_collide_across_tool_and_arguments() {
        assert_ne!(key("a\",\"b", "c"), key("a", "b\",\"c"));
        let mut reply = ReplyCalls::default();
        assert!(reply.first("k"));
        assert!(!reply.first("k"));
    }

    #[test]
    fn a_state_written_before_the_guard_changed_still_loads() {
        // Earlier states kept a `calls_made` list: it is ignored, the guard starts empty.
        let state: super::super::RunState =
            serde_json::from_str(r#"{"messages": [], "calls_made": [["bash", "{}"]]}"#).unwrap();
        assert!(!state.repeats.refuses(&key("bash", "{}")));
    }
}
