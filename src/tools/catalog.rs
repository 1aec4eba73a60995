//! The tools on offer at one moment, with their OpenAI definitions serialised once.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use serde_json::value::RawValue;

use super::Tool;

/// The tools on offer at one moment.
pub(super) struct Catalog {
    /// The MCP hub's generation it was built at (0: no hub).
    pub generation: u64,
    pub tools: Vec<Arc<dyn Tool>>,
    pub definitions: Arc<RawValue>,
    /// Tokens of `definitions` per encoding (O200k, Cl100k), counted on first use: loading an
    /// encoding that no configured model uses would cost tens of MiB and start-up time.
    pub tokens: [OnceLock<u32>; 2],
}

impl Catalog {
    pub fn new(generation: u64, tools: Vec<Arc<dyn Tool>>) -> Catalog {
        let defs: Vec<Value> = tools
            .iter()
            .map(|t| definition(t.name(), t.description(), t.parameters()))
            .collect();
        let text = serde_json::to_string(&defs).unwrap_or_else(|_| "[]".into());
        let definitions = RawValue::from_string(text)
            .map(Arc::from)
            .unwrap_or_else(|_| Arc::from(RawValue::NULL.to_owned()));
        Catalog {
            generation,
            tools,
            definitions,
            tokens: [OnceLock::new(), OnceLock::new()],
        }
    }
}

fn definition(name: &str, description: &str, parameters: &Value) -> Value {
    serde_json::json!({
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters}
    })
}
