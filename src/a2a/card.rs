//! The agent card (`/.well-known/agent-card.json`): who triage is, where its JSON-RPC
//! interface is, what it can do and how a client authenticates.

use serde_json::{Value, json};

/// The protocol version spoken, as the card and the `A2A-Version` header name it.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The card for a server reached at `base` (`scheme://host[:port]`, no trailing slash);
/// `keys`: whether API keys are required, and so named as the card's security; `push`:
/// whether clients may add push notification configs.
pub fn card(base: &str, keys: bool, push: bool) -> Value {
    let mut card = json!({
        "name": "triage",
        "description": "A troubleshooting agent for Kubernetes and the services on it: it \
            investigates a question with read-only tools (kubectl, Prometheus, logs, MCP \
            servers) and answers with its findings. Risky calls wait for approval \
            (TASK_STATE_INPUT_REQUIRED): reply \"approve\" or \"deny\" on the task.",
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{base}/a2a"),
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "capabilities": {
            "streaming": true,
            "pushNotifications": push,
            "extendedAgentCard": false,
        },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{
            "id": "investigate",
            "name": "Investigate",
            "description": "Finds the cause of a problem in a cluster or service and says \
                how to fix it. A task is one investigation that can be continued: send \
                follow-up questions with the task's contextId.",
            "tags": ["kubernetes", "troubleshooting", "observability", "sre"],
            "examples": [
                "Why is the checkout pod in namespace shop crash-looping?",
                "Which deployments in namespace payments have unavailable replicas?",
            ],
            "inputModes": ["text/plain", "application/json"],
            "outputModes": ["text/plain"],
        }],
    });
    if keys {
        card["securitySchemes"] = json!({
            "apiKey": {"apiKeySecurityScheme": {
                "description": "triage's API key",
                "location": "header",
                "name": "X-API-Key",
            }},
            "bearer": {"httpAuthSecurityScheme": {
                "description": "triage's API key as a bearer token",
                "scheme": "Bearer",
            }},
        });
        card["securityRequirements"] = json!([
            {"schemes": {"apiKey": {"list": []}}},
            {"schemes": {"bearer": {"list": []}}},
        ]);
    }
    card
}
