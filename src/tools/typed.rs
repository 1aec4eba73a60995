//! Tools with a typed parameter struct. A built-in tool implements [`TypedTool`] and never
//! reads a `serde_json::Value`; [`Typed`] adapts it to the object-safe [`Tool`] the registry
//! stores: it derives the JSON Schema of the parameters once, parses the model's arguments
//! once before the run (an error names the offending field), and for the one-liner parses
//! them leniently (arguments that do not fit get a generic line, not an error).
//!
//! No tool overrides its derived schema: the one adjustment there was (an empty `properties`
//! on a parameterless Prometheus tool) is a schemars attribute.

use std::time::Duration;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{DEFAULT_TOOL_TIMEOUT, Tool, ToolContext, ToolOutput, parameters_schema, parse_params};

pub trait TypedTool: Send + Sync + 'static {
    type Params: DeserializeOwned + JsonSchema + Send;

    fn name(&self) -> &str;
    fn toolset(&self) -> &str;
    /// Shown to the LLM.
    fn description(&self) -> &str;
    /// One line for `tool_calling_result.description`, e.g. the command it will run.
    fn one_liner(&self, params: &Self::Params) -> String;
    fn timeout(&self) -> Duration {
        DEFAULT_TOOL_TIMEOUT
    }
    fn invoke<'a>(
        &'a self,
        params: Self::Params,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput>;
}

/// The one-liner of a call whose parameters are not valid for the tool.
pub fn invalid_parameters_line(tool: &str) -> String {
    format!("{tool} (invalid parameters)")
}

/// A [`TypedTool`] as a [`Tool`]. A wrapper rather than a blanket impl: the schema is derived
/// once and needs a place to live.
pub struct Typed<T> {
    tool: T,
    schema: Value,
}

impl<T: TypedTool> Typed<T> {
    pub fn new(tool: T) -> Typed<T> {
        Typed {
            tool,
            schema: parameters_schema::<T::Params>(),
        }
    }
}

impl<T: TypedTool> Tool for Typed<T> {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn toolset(&self) -> &str {
        self.tool.toolset()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn parameters(&self) -> &Value {
        &self.schema
    }

    fn one_liner(&self, params: &Value) -> String {
        // Also called for calls that will fail (and for denied or paused ones): never an error.
        match T::Params::deserialize(params) {
            Ok(p) => self.tool.one_liner(&p),
            Err(_) => invalid_parameters_line(self.tool.name()),
        }
    }

    fn timeout(&self) -> Duration {
        self.tool.timeout()
    }

    fn invoke<'a>(&'a self, params: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        match parse_params::<T::Params>(params) {
            Ok(p) => self.tool.invoke(p, ctx),
            Err(e) => Box::pin(std::future::ready(ToolOutput::error(e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::events::ToolStatus;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct EchoParams {
        /// What to say.
        text: String,
        #[serde(default)]
        times: Option<u8>,
    }

    struct Echo;

    impl TypedTool for Echo {
        type Params = EchoParams;
        fn name(&self) -> &str {
            "echo"
        }
        fn toolset(&self) -> &str {
            "test"
        }
        fn description(&self) -> &str {
            "says it again"
        }
        fn one_liner(&self, p: &EchoParams) -> String {
            format!("echo {}", p.text)
        }
        fn timeout(&self) -> Duration {
            Duration::from_secs(7)
        }
        fn invoke<'a>(&'a self, p: EchoParams, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
            let n = usize::from(p.times.unwrap_or(1));
            Box::pin(async move { ToolOutput::success(p.text.repeat(n)) })
        }
    }

    #[tokio::test]
    async fn arguments_are_parsed_once_and_errors_name_the_field() {
        let tool = Typed::new(Echo);
        let ctx = ToolContext::default();
        let out = tool.invoke(&json!({"text": "ab", "times": 2}), &ctx).await;
        assert_eq!(out.data, "abab");
        let out = tool
            .invoke(&json!({"text": "ab", "times": 300}), &ctx)
            .await;
        assert_eq!(out.status, ToolStatus::Error);
        let error = out.error.unwrap_or_default();
        assert!(error.starts_with("invalid parameter `times`"), "{error}");
        let out = tool
            .invoke(&json!({"text": "ab", "loud": true}), &ctx)
            .await;
        assert!(out.error.unwrap_or_default().contains("loud"));
    }

    #[test]
    fn schema_and_one_liner() {
        let tool = Typed::new(Echo);
        assert_eq!(tool.parameters()["required"], json!(["text"]));
        assert_eq!(
            tool.parameters()["properties"]["text"]["description"],
            "What to say."
        );
        assert!(tool.parameters().get("$schema").is_none());
        assert_eq!(tool.one_liner(&json!({"text": "hi"})), "echo hi");
        assert_eq!(
            tool.one_liner(&json!({"txt": "hi"})),
            "echo (invalid parameters)"
        );
        assert_eq!(
            (tool.name(), tool.toolset(), tool.description()),
            ("echo", "test", "says it again")
        );
        assert_eq!(tool.timeout(), Duration::from_secs(7));
    }
}
