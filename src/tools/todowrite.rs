//! `TodoWrite`: the agent's planning list. It keeps no state; the list lives in the
//! conversation, and the tool renders it back so the model sees the current plan.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Tool, ToolContext, ToolOutput, parameters_schema, parse_params};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TodoWriteParams {
    /// The complete, updated task list.
    todos: Vec<TodoItem>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct TodoItem {
    id: String,
    content: String,
    status: TodoStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

pub struct TodoWrite {
    schema: Value,
}

impl TodoWrite {
    pub fn new() -> Self {
        TodoWrite {
            schema: parameters_schema::<TodoWriteParams>(),
        }
    }
}

impl Default for TodoWrite {
    fn default() -> Self {
        Self::new()
    }
}

impl Tool for TodoWrite {
    fn name(&self) -> &str {
        "TodoWrite"
    }

    fn toolset(&self) -> &str {
        "core_investigation"
    }

    fn description(&self) -> &str {
        "Save the investigation plan: the complete list of tasks with their status \
         (pending, in_progress, completed). Send the whole list on every call."
    }

    fn parameters(&self) -> &Value {
        &self.schema
    }

    fn one_liner(&self, _params: &Value) -> String {
        "Update investigation tasks".into()
    }

    fn invoke<'a>(&'a self, params: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match parse_params::<TodoWriteParams>(params) {
                Ok(p) => ToolOutput::success(render(&p.todos)),
                Err(e) => ToolOutput::error(e),
            }
        })
    }
}

fn render(todos: &[TodoItem]) -> String {
    let count = |s: TodoStatus| todos.iter().filter(|t| t.status == s).count();
    let mut out = format!(
        "Plan saved: {} tasks ({} completed, {} in progress, {} pending).\n",
        todos.len(),
        count(TodoStatus::Completed),
        count(TodoStatus::InProgress),
        count(TodoStatus::Pending),
    );
    for t in todos {
        let mark = match t.status {
            TodoStatus::Completed => "[x]",
            TodoStatus::InProgress => "[~]",
            TodoStatus::Pending => "[ ]",
        };
        out.push_str(&format!("\n{mark} {}. {}", t.id, t.content));
    }
    out.push_str("\n\nKeep exactly one task in progress and update the list as you go.");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn renders_the_plan() {
        let tool = TodoWrite::new();
        let out = tool
            .invoke(
                json!({"todos":[{"id":"1","content":"Check logs","status":"in_progress"},{"id":"2","content":"Check events","status":"pending"}]}),
                &ToolContext::default(),
            )
            .await;
        assert!(
            out.data
                .starts_with("Plan saved: 2 tasks (0 completed, 1 in progress, 1 pending).")
        );
        assert!(out.data.contains("[~] 1. Check logs\n[ ] 2. Check events"));
    }

    #[tokio::test]
    async fn rejects_unknown_status() {
        let out = TodoWrite::new()
            .invoke(
                json!({"todos":[{"id":"1","content":"x","status":"done"}]}),
                &ToolContext::default(),
            )
            .await;
        assert!(out.error.unwrap().contains("todos[0].status"));
    }
}
