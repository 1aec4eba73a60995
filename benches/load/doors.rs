//! The doors of the floor phase: `/api/chat` and the protocol adapters over the same agent
//! (issue 37), each with the request body it takes for the bench's question and how a
//! complete answer ends, so one harness measures them all with the same fake LLM replies.

use bytes::Bytes;
use serde_json::{Value, json};

/// The question every door asks (the same as `chat_body`'s).
const QUESTION: &str = "Why is the api pod in namespace prod restarting every few minutes?";

pub struct Door {
    pub path: &'static str,
    /// Headers the protocol needs beyond `content-type: application/json`.
    pub headers: &'static [(&'static str, &'static str)],
    /// Bytes found only in a complete answer, non-streaming and streaming.
    done_json: &'static [u8],
    done_stream: &'static [u8],
    body: fn(model: &str, stream: bool) -> Value,
}

impl Door {
    pub fn body(&self, model: &str, stream: bool) -> Bytes {
        Bytes::from((self.body)(model, stream).to_string())
    }

    pub fn done(&self, stream: bool) -> &'static [u8] {
        if stream {
            self.done_stream
        } else {
            self.done_json
        }
    }
}

pub const API_CHAT: Door = Door {
    path: "/api/chat",
    headers: &[],
    done_json: b"\"analysis\":\"The api pod restarts",
    done_stream: b"event: ai_answer_end\n",
    body: |model, stream| json!({"ask": QUESTION, "model": model, "stream": stream}),
};

pub const AGUI: Door = Door {
    path: "/api/agui/chat",
    headers: &[],
    done_json: b"RUN_FINISHED",
    done_stream: b"RUN_FINISHED",
    body: |model, _| {
        json!({
            "threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [],
            "forwardedProps": {"model": model},
            "messages": [{"id": "m1", "role": "user", "content": QUESTION}],
        })
    },
};

pub const CHAT_COMPLETIONS: Door = Door {
    path: "/v1/chat/completions",
    headers: &[],
    done_json: b"The api pod restarts",
    done_stream: b"data: [DONE]",
    body: |model, stream| {
        json!({"model": model, "stream": stream,
               "messages": [{"role": "user", "content": QUESTION}]})
    },
};

pub const RESPONSES: Door = Door {
    path: "/v1/responses",
    headers: &[],
    done_json: b"The api pod restarts",
    done_stream: b"response.completed",
    body: |model, stream| json!({"model": model, "stream": stream, "input": QUESTION}),
};

pub const MCP: Door = Door {
    path: "/mcp",
    headers: &[
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2025-06-18"),
    ],
    done_json: b"The api pod restarts",
    done_stream: b"The api pod restarts",
    body: |model, _| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "investigate",
                          "arguments": {"question": QUESTION, "model": model}}})
    },
};

/// A2A picks no model: the conversation runs on the default one (the bench config's first,
/// `fast`, whose script is a tool call then the answer).
pub const A2A: Door = Door {
    path: "/a2a",
    headers: &[("a2a-version", "1.0")],
    done_json: b"TASK_STATE_COMPLETED",
    done_stream: b"TASK_STATE_COMPLETED",
    body: |_, _| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
               "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
                                      "parts": [{"text": QUESTION}]}}})
    },
};
