//! One tool of a YAML toolset: the model's arguments checked against the parameters, the
//! template rendered with them shell-quoted ([`super::template`]), the approval asked when
//! the tool or its toolset requires one, and the command run by bash in the sandbox with the
//! toolset's environment, timeout and output cap.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::template::render_shell;
use crate::sandbox::{Approval, Grants, Sandbox};
use crate::tools::bash::run;
use crate::tools::{Tool, ToolContext, ToolOutput, ToolStatus};

/// What every command of one toolset shares.
pub struct Runner {
    pub bash: PathBuf,
    pub env: Vec<(String, String)>,
    pub sandbox: Sandbox,
    pub grants: Grants,
    pub max_output: usize,
    pub memory_limit_mb: u64,
}

impl Runner {
    /// Runs `command` and describes the outcome as a tool result.
    pub async fn run(&self, command: &str, timeout: Duration, approval: Approval) -> ToolOutput {
        let spec = run::Spec {
            bash: &self.bash,
            command,
            env: &self.env,
            sandbox: &self.sandbox,
            grants: &self.grants,
            approval,
            timeout,
            max_output: self.max_output,
            memory_limit_mb: self.memory_limit_mb,
        };
        let finished = match run::run(spec).await {
            Ok(f) => f,
            Err(e) => return ToolOutput::error(format!("Could not run bash: {e}")),
        };
        ToolOutput {
            invocation: Some(command.to_owned()),
            ..finished.into_tool_output(timeout, self.max_output, |_| {})
        }
    }
}

/// A declared (or inferred) parameter.
#[derive(Debug, Clone)]
pub struct Param {
    pub kind: ParamKind,
    pub required: bool,
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    String,
    Integer,
    Number,
    Boolean,
}

impl ParamKind {
    pub fn parse(kind: &str) -> Option<ParamKind> {
        match kind {
            "string" | "str" => Some(ParamKind::String),
            "integer" | "int" => Some(ParamKind::Integer),
            "number" | "float" => Some(ParamKind::Number),
            "boolean" | "bool" => Some(ParamKind::Boolean),
            _ => None,
        }
    }

    pub fn schema_name(self) -> &'static str {
        match self {
            ParamKind::String => "string",
            ParamKind::Integer => "integer",
            ParamKind::Number => "number",
            ParamKind::Boolean => "boolean",
        }
    }
}

/// Checks the model's arguments: no unknown ones, the required ones present, scalars of the
/// declared kind. Optional parameters not given are none (false in `{% if %}`).
pub fn template_values(
    params: &BTreeMap<String, Param>,
    args: &Value,
) -> Result<BTreeMap<String, minijinja::Value>, String> {
    let empty = Map::new();
    let args = args.as_object().unwrap_or(&empty);
    if let Some(unknown) = args.keys().find(|k| !params.contains_key(*k)) {
        let known: Vec<&str> = params.keys().map(String::as_str).collect();
        return Err(format!(
            "invalid parameters: unknown parameter `{unknown}` (parameters: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ));
    }
    let mut values = BTreeMap::new();
    for (name, param) in params {
        let value = match args.get(name) {
            None | Some(Value::Null) if param.required => {
                return Err(format!("invalid parameters: missing parameter `{name}`"));
            }
            None | Some(Value::Null) => minijinja::Value::from(()),
            Some(v) => scalar(name, param.kind, v)?,
        };
        values.insert(name.clone(), value);
    }
    Ok(values)
}

fn scalar(name: &str, kind: ParamKind, v: &Value) -> Result<minijinja::Value, String> {
    let wrong = || {
        format!(
            "invalid parameter `{name}`: expected a {}, got {v}",
            kind.schema_name()
        )
    };
    Ok(match (kind, v) {
        (ParamKind::String, Value::String(s)) => minijinja::Value::from(s.as_str()),
        // Models often send `3` for a string parameter; the text is what the command gets.
        (ParamKind::String, Value::Number(n)) => minijinja::Value::from(n.to_string()),
        (ParamKind::String, Value::Bool(b)) => minijinja::Value::from(b.to_string()),
        (ParamKind::Integer, Value::Number(n)) => match n.as_i64() {
            Some(i) => minijinja::Value::from(i),
            None => return Err(wrong()),
        },
        (ParamKind::Number, Value::Number(n)) => match n.as_f64() {
            Some(f) => minijinja::Value::from(f),
            None => return Err(wrong()),
        },
        (ParamKind::Boolean, Value::Bool(b)) => minijinja::Value::from(*b),
        _ => return Err(wrong()),
    })
}

/// The JSON Schema the model sees.
pub fn schema(params: &BTreeMap<String, Param>) -> Value {
    let properties: Map<String, Value> = params
        .iter()
        .map(|(name, p)| {
            let mut prop = serde_json::json!({"type": p.kind.schema_name()});
            if let Some(d) = &p.description {
                prop["description"] = Value::String(d.clone());
            }
            (name.clone(), prop)
        })
        .collect();
    let required: Vec<&String> = params
        .iter()
        .filter(|(_, p)| p.required)
        .map(|(n, _)| n)
        .collect();
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

pub struct CommandTool {
    pub name: String,
    pub toolset: String,
    pub description: String,
    pub schema: Value,
    pub params: BTreeMap<String, Param>,
    /// The template with `${VAR}` already expanded.
    pub template: String,
    pub requires_approval: bool,
    pub timeout: Duration,
    pub runner: Arc<Runner>,
}

impl CommandTool {
    fn render(&self, args: &Value) -> Result<String, String> {
        let values = template_values(&self.params, args)?;
        render_shell(&self.template, &values)
    }

    async fn call(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let command = match self.render(args) {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(e),
        };
        if self.requires_approval && !ctx.user_approved {
            return ToolOutput {
                status: ToolStatus::ApprovalRequired,
                data: String::new(),
                error: Some(format!(
                    "{} requires the user's approval (requires_approval in its toolset)",
                    self.name
                )),
                return_code: None,
                invocation: Some(command),
            };
        }
        self.runner
            .run(&command, self.timeout, Approval::from(ctx.user_approved))
            .await
    }
}

impl Tool for CommandTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn toolset(&self) -> &str {
        &self.toolset
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.schema
    }

    fn one_liner(&self, params: &Value) -> String {
        self.render(params)
            .unwrap_or_else(|_| crate::tools::invalid_parameters_line(&self.name))
    }

    fn timeout(&self) -> Duration {
        // The command enforces its own timeout; this only backs it up.
        self.timeout + Duration::from_secs(15)
    }

    fn invoke<'a>(&'a self, params: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.call(params, ctx))
    }
}
