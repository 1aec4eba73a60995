//! The tools on offer at one moment, with their OpenAI definitions serialised once, kept
//! under the cap on the bytes all definitions may take in one request
//! (`agent.max_tool_definitions_bytes`).
//!
//! Every definition goes out with every LLM call, so the cap bounds what a request costs
//! whatever the servers list. Over it, tools are left out by origin: MCP tools first (their
//! server decides what they are and may change them at any time), then YAML tools (an
//! operator wrote each), built-in tools never (triage's own, a known size). Within an origin
//! the toolset offering the most bytes gives up its largest tool first, again and again
//! until the rest fits: a server that floods the list pays for it before a modest one loses
//! anything, and the fewest tools are lost.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, OnceLock};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Tool;

/// Where a tool comes from; the order in which tools are left out when the definitions
/// exceed the cap is `Mcp`, then `Yaml`; `Builtin` ones always stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolOrigin {
    #[default]
    Builtin,
    /// A custom toolset in HolmesGPT's YAML format.
    Yaml,
    Mcp,
}

/// A tool left out of the requests by the cap on all definitions, and why.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WithheldTool {
    pub toolset: String,
    /// The name it would be offered under.
    pub name: String,
    pub origin: ToolOrigin,
    /// Bytes its definition takes.
    pub bytes: u64,
    pub reason: String,
}

/// The tools on offer at one moment.
pub(super) struct Catalog {
    /// The MCP hub's generation it was built at (0: no hub).
    pub generation: u64,
    pub tools: Vec<Arc<dyn Tool>>,
    pub definitions: Arc<RawValue>,
    /// Tokens of `definitions` per encoding (O200k, Cl100k), counted on first use: loading an
    /// encoding that no configured model uses would cost tens of MiB and start-up time.
    pub tokens: [OnceLock<u32>; 2],
    pub withheld: Vec<WithheldTool>,
    /// Names a withheld tool answers to (an MCP tool also to `<server>__<tool>`): a call to
    /// one finds no tool.
    pub hidden: HashSet<String>,
}

impl Catalog {
    /// The tools that fit in `max_bytes` of definitions, left out as the module says.
    pub fn new(
        generation: u64,
        tools: Vec<(Arc<dyn Tool>, ToolOrigin)>,
        max_bytes: Option<usize>,
    ) -> Catalog {
        let encoded: Vec<String> = tools
            .iter()
            .map(|(t, _)| {
                serde_json::to_string(&definition(t.name(), t.description(), t.parameters()))
                    .unwrap_or_default()
            })
            .collect();
        let sizes: Vec<usize> = encoded.iter().map(String::len).collect();
        let origins: Vec<ToolOrigin> = tools.iter().map(|(_, o)| *o).collect();
        let toolsets: Vec<&str> = tools.iter().map(|(t, _)| t.toolset()).collect();
        let left_out: HashSet<usize> = match max_bytes {
            Some(max) => left_out(&sizes, &origins, &toolsets, max)
                .into_iter()
                .collect(),
            None => HashSet::new(),
        };
        let before = array_len(sizes.iter().copied());
        let mut withheld = Vec::new();
        let mut hidden = HashSet::new();
        let mut kept = Vec::new();
        let mut text = String::from("[");
        for (i, ((tool, origin), def)) in tools.into_iter().zip(encoded).enumerate() {
            if left_out.contains(&i) {
                let max = max_bytes.unwrap_or_default();
                let own_prefix = format!("{}{}", tool.toolset(), super::mcp::QUALIFIER);
                if origin == ToolOrigin::Mcp && !tool.name().starts_with(&own_prefix) {
                    hidden.insert(format!("{own_prefix}{}", tool.name()));
                }
                hidden.insert(tool.name().to_owned());
                withheld.push(WithheldTool {
                    toolset: tool.toolset().to_owned(),
                    name: tool.name().to_owned(),
                    origin,
                    bytes: def.len() as u64,
                    reason: format!(
                        "left out of every request: the tool definitions came to {before} bytes, \
                         more than agent.max_tool_definitions_bytes ({max}); MCP tools are left \
                         out first, then YAML tools (the toolset offering the most bytes gives up \
                         its largest tool first), built-in tools never"
                    ),
                });
                continue;
            }
            if !kept.is_empty() {
                text.push(',');
            }
            text.push_str(&def);
            kept.push(tool);
        }
        text.push(']');
        if !withheld.is_empty() {
            let names: Vec<String> = withheld
                .iter()
                .take(20)
                .map(|w| format!("{}/{}", w.toolset, w.name))
                .collect();
            tracing::warn!(
                withheld = withheld.len(),
                bytes_listed = before,
                bytes_offered = text.len(),
                max_bytes = max_bytes.unwrap_or_default(),
                tools = %names.join(", "),
                "tool definitions exceed agent.max_tool_definitions_bytes: tools left out of \
                 every request (see /api/info, tool_definitions)"
            );
        }
        if let Some(max) = max_bytes
            && text.len() > max
        {
            tracing::warn!(
                bytes = text.len(),
                max_bytes = max,
                "the built-in tools alone exceed agent.max_tool_definitions_bytes; they are \
                 never left out"
            );
        }
        let definitions = RawValue::from_string(text)
            .map(Arc::from)
            .unwrap_or_else(|_| Arc::from(RawValue::NULL.to_owned()));
        Catalog {
            generation,
            tools: kept,
            definitions,
            tokens: [OnceLock::new(), OnceLock::new()],
            withheld,
            hidden,
        }
    }
}

/// Bytes of a JSON array of elements of these sizes.
fn array_len(sizes: impl Iterator<Item = usize>) -> usize {
    let (count, sum) = sizes.fold((0usize, 0usize), |(n, s), len| (n + 1, s + len));
    2 + sum + count.saturating_sub(1)
}

/// The indexes of the tools to leave out so that the array fits in `max` bytes, if it can.
fn left_out(sizes: &[usize], origins: &[ToolOrigin], toolsets: &[&str], max: usize) -> Vec<usize> {
    let mut count = sizes.len();
    let mut sum: usize = sizes.iter().sum();
    let len = |count: usize, sum: usize| 2 + sum + count.saturating_sub(1);
    let mut out = Vec::new();
    for origin in [ToolOrigin::Mcp, ToolOrigin::Yaml] {
        // Per toolset: its bytes, and its tools largest last (popped first).
        let mut groups: BTreeMap<&str, (usize, Vec<usize>)> = BTreeMap::new();
        for i in (0..sizes.len()).filter(|&i| origins[i] == origin) {
            let group = groups.entry(toolsets[i]).or_default();
            group.0 += sizes[i];
            group.1.push(i);
        }
        for (_, tools) in groups.values_mut() {
            // Equal sizes: the one listed later goes first.
            tools.sort_by_key(|&i| (sizes[i], i));
        }
        while len(count, sum) > max {
            let Some((_, (bytes, tools))) = groups
                .iter_mut()
                .filter(|(_, (_, tools))| !tools.is_empty())
                .max_by_key(|(name, (bytes, _))| (*bytes, *name))
            else {
                break;
            };
            let Some(i) = tools.pop() else { break };
            *bytes -= sizes[i];
            sum -= sizes[i];
            count -= 1;
            out.push(i);
        }
    }
    out
}

fn definition(name: &str, description: &str, parameters: &Value) -> Value {
    serde_json::json!({
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_goes_first_then_yaml_largest_toolset_first_never_builtins() {
        use ToolOrigin::*;
        //           0: builtin 1: yaml 2: mcp a 3: mcp a 4: mcp b
        let sizes = [100, 50, 40, 30, 60];
        let origins = [Builtin, Yaml, Mcp, Mcp, Mcp];
        let toolsets = ["core", "pods", "a", "a", "b"];
        let total = array_len(sizes.iter().copied());
        assert_eq!(total, 2 + 280 + 4);
        // Fits: nothing goes.
        assert!(left_out(&sizes, &origins, &toolsets, total).is_empty());
        // One byte over: `a` offers 70 bytes against `b`'s 60, so `a`'s largest goes.
        assert_eq!(left_out(&sizes, &origins, &toolsets, total - 1), [2]);
        // Exactly the first one's 40 bytes and comma over: it alone goes; one more byte, then `b`
        // (60 against `a`'s 30), then `a`'s last.
        assert_eq!(left_out(&sizes, &origins, &toolsets, total - 41), [2]);
        assert_eq!(left_out(&sizes, &origins, &toolsets, total - 42), [2, 4]);
        assert_eq!(left_out(&sizes, &origins, &toolsets, 160), [2, 4, 3]);
        // Every MCP tool gone and still over: the YAML tool too, the built-in stays.
        assert_eq!(left_out(&sizes, &origins, &toolsets, 1), [2, 4, 3, 1]);
    }

    #[test]
    fn the_array_matches_what_is_counted() {
        for sizes in [vec![], vec![5], vec![5, 7, 9]] {
            let text = format!(
                "[{}]",
                sizes
                    .iter()
                    .map(|n| "x".repeat(*n))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            assert_eq!(array_len(sizes.iter().copied()), text.len());
        }
    }
}
