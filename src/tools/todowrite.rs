//! `TodoWrite`: the agent's planning list. It keeps no state; the list lives in the
//! conversation, and the tool renders it back so the model sees the current plan.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolContext, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoWriteParams {
    /// The complete, updated task list.
    todos: Vec<TodoItem>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TodoItem {
    id: String,
    content: String,
    status: TodoStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

pub struct TodoWrite;

impl TypedTool for TodoWrite {
    type Params = TodoWriteParams;

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

    fn one_liner(&self, _params: &TodoWriteParams) -> String {
        "Update investigation tasks".into()
    }

    fn invoke<'a>(
        &'a self,
        params: TodoWriteParams,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { ToolOutput::success(render(&params.todos)) })
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
    use crate::tools::{Tool, Typed};
    use serde_json::json;

    #[tokio::test]
    async fn renders_the_plan() {
        let tool = Typed::new(TodoWrite);
        let out = tool
            .invoke(
                &json!({"todos":[{"id":"1","content":"Check logs","status":"in_progress"},{"id":"2","content":"Check events","status":"pending"}]}),
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
        let out = Typed::new(TodoWrite)
            .invoke(
                &json!({"todos":[{"id":"1","content":"x","status":"done"}]}),
                &ToolContext::default(),
            )
            .await;
        assert!(out.error.unwrap().contains("todos[0].status"));
    }
}
