//! The tools the MCP server offers: their names, what their descriptions promise, and their
//! arguments (serde reads them, schemars writes the input schema clients see).

use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::conversations::Title;

pub const INVESTIGATE: &str = "investigate";
pub const LIST_MODELS: &str = "list_models";
pub const START_CONVERSATION: &str = "start_conversation";
pub const CONVERSATION_STATUS: &str = "conversation_status";
pub const CONVERSATION_EVENTS: &str = "conversation_events";
pub const SEND_MESSAGE: &str = "send_message";
pub const APPROVE: &str = "approve";
pub const DENY: &str = "deny";

pub const TOOL_NAMES: [&str; 8] = [
    INVESTIGATE,
    LIST_MODELS,
    START_CONVERSATION,
    CONVERSATION_STATUS,
    CONVERSATION_EVENTS,
    SEND_MESSAGE,
    APPROVE,
    DENY,
];

/// What `initialize` tells the client's model about this server.
pub const INSTRUCTIONS: &str = "triage investigates problems in the infrastructure it runs \
    next to (Kubernetes, Prometheus, logs, its configured tools) with its own LLM and answers \
    in prose. Use `investigate` for a question answered in one call. For a long \
    investigation, or one where risky commands may need a human's approval, use \
    `start_conversation`, then poll `conversation_status` (and `conversation_events`) until \
    it is `finished`, answering `waiting_for_confirmation` with `approve` or `deny`.";

const INVESTIGATE_DESCRIPTION: &str = "Investigate a question about the infrastructure \
    (e.g. \"why is pod api-7f9 crash-looping?\") and return the answer. The agent runs its own \
    tools (kubectl, Prometheus, logs, …) while it works; progress notifications report each \
    tool call when a progress token is sent. It can take minutes; cancelling the request \
    stops the investigation. Read-only in effect: a command that would need a human's approval \
    is refused and the agent is told so (nothing can approve within one call) — use \
    start_conversation when approvals are needed.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvestigateArgs {
    /// The question, in plain words, with what you know (names, namespaces, symptoms).
    pub question: String,
    /// A model-list key from `list_models`; the server's default when left out.
    #[serde(default)]
    pub model: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartConversationArgs {
    /// The question the conversation starts with.
    pub question: String,
    /// A model-list key from `list_models`; the server's default when left out.
    #[serde(default)]
    pub model: Option<String>,
    /// A title for the conversation (at most 500 characters); generated when left out.
    #[serde(default)]
    pub title: Option<Title>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationArgs {
    /// The id `start_conversation` returned.
    pub conversation_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsArgs {
    /// The id `start_conversation` returned.
    pub conversation_id: String,
    /// Only events after this sequence number (0, the default, from the start); pass the
    /// `next_after` of the previous page.
    #[serde(default)]
    pub after: u64,
    /// Events per page, 1 to 100 (default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessageArgs {
    /// The id `start_conversation` returned.
    pub conversation_id: String,
    /// What to tell or ask the agent; a running conversation takes it at its next step, an
    /// idle one runs again.
    pub message: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionArgs {
    /// The id `start_conversation` returned.
    pub conversation_id: String,
    /// The pending call to decide (`pending_approvals[].tool_call_id` of
    /// `conversation_status`); every pending call when left out.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// Why, for the agent to read (optional).
    #[serde(default)]
    pub comment: Option<String>,
}

/// The tools as `tools/list` shows them, built once.
pub fn definitions() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(build)
}

fn tool<T: JsonSchema + 'static>(name: &'static str, description: &'static str) -> Tool {
    Tool::new(name, description, Arc::new(JsonObject::new())).with_input_schema::<T>()
}

fn build() -> Vec<Tool> {
    let reads = || ToolAnnotations::new().read_only(true).open_world(false);
    let steers = || {
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .open_world(true)
    };
    vec![
        tool::<InvestigateArgs>(INVESTIGATE, INVESTIGATE_DESCRIPTION)
            .with_title("Investigate")
            .annotate(
                ToolAnnotations::new()
                    .read_only(true)
                    .idempotent(false)
                    .open_world(true),
            ),
        tool::<NoArgs>(
            LIST_MODELS,
            "List the models this server can investigate with (the keys `model` takes), \
             and which is the default.",
        )
        .with_title("List models")
        .annotate(reads()),
        tool::<StartConversationArgs>(
            START_CONVERSATION,
            "Start a server-side investigation that runs in the background and survives this \
             connection; returns its `conversation_id` at once. Poll `conversation_status` \
             until `status` is `finished` (its `answer` is then the result) or `error`. A \
             command that needs a human's approval pauses it in `waiting_for_confirmation` \
             until `approve` or `deny`.",
        )
        .with_title("Start a conversation")
        .annotate(steers()),
        tool::<ConversationArgs>(
            CONVERSATION_STATUS,
            "A conversation's status (`idle`, `running`, `waiting_for_confirmation`, \
             `paused`, `finished`, `error`, `stuck`), the calls waiting for approval (each \
             with its `tool_call_id` and what it would run), the last event's sequence \
             number and, once there is one, the agent's latest answer.",
        )
        .with_title("Conversation status")
        .annotate(reads()),
        tool::<EventsArgs>(
            CONVERSATION_EVENTS,
            "A conversation's events (messages, tool calls and results, status changes) \
             after a sequence number, oldest first; `next_after` continues.",
        )
        .with_title("Conversation events")
        .annotate(reads()),
        tool::<SendMessageArgs>(
            SEND_MESSAGE,
            "Send a message to a conversation: a follow-up question, or more context. An idle \
             or finished conversation runs again; a running one reads it at its next step.",
        )
        .with_title("Send a message")
        .annotate(steers()),
        tool::<DecisionArgs>(
            APPROVE,
            "Approve a call a conversation waits on (one `tool_call_id`, or all of them): \
             the command runs and the investigation continues. Only approve what you have \
             read in `conversation_status`.",
        )
        .with_title("Approve a pending call")
        .annotate(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .open_world(true),
        ),
        tool::<DecisionArgs>(
            DENY,
            "Deny a call a conversation waits on (one `tool_call_id`, or all of them): it \
             does not run, the agent reads `comment` and continues without it.",
        )
        .with_title("Deny a pending call")
        .annotate(steers()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_named_once_and_has_an_object_schema() {
        let tools = definitions();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, TOOL_NAMES);
        for t in tools {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
        }
        let investigate = &tools[0].input_schema;
        assert_eq!(investigate["required"], serde_json::json!(["question"]));
        assert_eq!(investigate["additionalProperties"], false);
    }
}
