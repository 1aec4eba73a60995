//! A tool call's arguments read into its typed arguments. A bad argument is the caller's
//! model's mistake, so it comes back as an error result naming the argument (which that model
//! reads and can correct), not as a protocol error.

use rmcp::model::JsonObject;
use serde::de::DeserializeOwned;

pub fn read<T: DeserializeOwned>(tool: &str, args: JsonObject) -> Result<T, String> {
    serde_path_to_error::deserialize(serde_json::Value::Object(args)).map_err(|e| {
        let at = e.path().to_string();
        let what = e.into_inner();
        if at == "." {
            format!("{tool}: invalid arguments: {what}")
        } else {
            format!("{tool}: invalid argument `{at}`: {what}")
        }
    })
}

/// A text argument that must say something.
pub fn non_empty(tool: &str, name: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err(format!("{tool}: `{name}` is empty"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp_server::tools::{EventsArgs, InvestigateArgs};
    use serde_json::json;

    fn object(v: serde_json::Value) -> JsonObject {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn bad_arguments_are_named() {
        let e = read::<InvestigateArgs>("investigate", object(json!({}))).unwrap_err();
        assert!(e.contains("missing field `question`"), "{e}");
        let e = read::<InvestigateArgs>("investigate", object(json!({"question": "q", "x": 1})))
            .unwrap_err();
        assert!(e.contains("unknown field `x`"), "{e}");
        let e = read::<EventsArgs>(
            "conversation_events",
            object(json!({"conversation_id": "c", "after": -1})),
        )
        .unwrap_err();
        assert!(e.contains("`after`"), "{e}");
        assert!(non_empty("investigate", "question", " \n").is_err());
    }
}
