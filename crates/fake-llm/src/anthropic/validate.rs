//! The request checks Anthropic documents for `POST /v1/messages`, so a request the real API
//! would refuse fails the test with the same 400 `invalid_request_error`.

use serde_json::Value;

use super::sign;

type Check = Result<(), String>;

fn fail<T>(message: impl Into<String>) -> Result<T, String> {
    Err(message.into())
}

fn kind(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Whether the request turns extended thinking on.
pub(crate) fn thinking_on(body: &Value) -> bool {
    body.pointer("/thinking/type").and_then(Value::as_str) == Some("enabled")
}

pub(crate) fn request(body: &Value, secret: &str) -> Check {
    let Some(object) = body.as_object() else {
        return fail("the request body must be a JSON object");
    };
    if !object.get("model").is_some_and(Value::is_string) {
        return fail("model: Field required");
    }
    let max_tokens = match object.get("max_tokens").and_then(Value::as_u64) {
        Some(n) if n > 0 => n,
        _ => return fail("max_tokens: Field required"),
    };
    system(object.get("system"))?;
    let tools = tools(object.get("tools"))?;
    let thinking = thinking_on(body);
    if let Some(choice) = object.get("tool_choice") {
        let choice_kind = kind(choice);
        if !matches!(choice_kind, "auto" | "any" | "tool" | "none") {
            return fail(format!("tool_choice.type: unknown type '{choice_kind}'"));
        }
        if !tools {
            return fail("tool_choice may only be specified while providing tools");
        }
        if thinking && matches!(choice_kind, "any" | "tool") {
            return fail("Thinking may not be enabled when tool_choice forces tool use.");
        }
    }
    if thinking {
        let budget = body
            .pointer("/thinking/budget_tokens")
            .and_then(Value::as_u64);
        match budget {
            Some(b) if b >= 1024 && b < max_tokens => {}
            _ => return fail("thinking.budget_tokens: must be ≥ 1024 and less than max_tokens"),
        }
        if object
            .get("temperature")
            .is_some_and(|t| t.as_f64() != Some(1.0))
        {
            return fail(
                "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#important-considerations-when-using-extended-thinking",
            );
        }
    }
    let Some(messages) = object.get("messages").and_then(Value::as_array) else {
        return fail("messages: Field required");
    };
    messages_valid(messages, tools, thinking, secret)?;
    let breakpoints = body.to_string().matches("\"cache_control\"").count();
    if breakpoints > 4 {
        return fail(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    Ok(())
}

fn system(system: Option<&Value>) -> Check {
    match system {
        None | Some(Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => blocks.iter().try_for_each(|b| {
            if kind(b) != "text" {
                return fail("system: blocks must be of type text");
            }
            text_block(b, "system")
        }),
        Some(_) => fail("system: Input should be a valid string or list"),
    }
}

/// `true` when tools are defined.
fn tools(tools: Option<&Value>) -> Result<bool, String> {
    let Some(tools) = tools else { return Ok(false) };
    let Some(tools) = tools.as_array() else {
        return fail("tools: Input should be a valid list");
    };
    for (i, tool) in tools.iter().enumerate() {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
        let name_ok = !name.is_empty()
            && name.len() <= 128
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return fail(format!(
                "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            ));
        }
        if tool.pointer("/input_schema/type").and_then(Value::as_str) != Some("object") {
            return fail(format!(
                "tools.{i}.custom.input_schema.type: Input should be 'object'"
            ));
        }
    }
    Ok(!tools.is_empty())
}

fn text_block(block: &Value, at: &str) -> Check {
    match block.get("text").and_then(Value::as_str) {
        Some(t) if !t.is_empty() => Ok(()),
        _ => fail(format!("{at}: text content blocks must be non-empty")),
    }
}

fn messages_valid(messages: &[Value], tools: bool, thinking: bool, secret: &str) -> Check {
    if messages.is_empty() {
        return fail("messages: at least one message is required");
    }
    let mut previous_tool_uses: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            return fail(format!(
                "messages: roles must alternate between \"user\" and \"assistant\", starting with \"user\"; message {i} is \"{role}\""
            ));
        }
        let blocks: Vec<Value> = match message.get("content") {
            Some(Value::String(s)) if s.is_empty() => {
                return fail(format!(
                    "messages.{i}: text content blocks must be non-empty"
                ));
            }
            Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
            Some(Value::Array(b)) if !b.is_empty() => b.clone(),
            _ => {
                return fail(format!(
                    "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
                ));
            }
        };
        let at = format!("messages.{i}.content");
        let mut tool_uses = Vec::new();
        let mut answered = Vec::new();
        for (j, block) in blocks.iter().enumerate() {
            let at = format!("{at}.{j}");
            match (role, kind(block)) {
                (_, "text") => text_block(block, &at)?,
                ("user", "image") => image(block, &at)?,
                ("user", "tool_result") => {
                    if j > answered.len() {
                        return fail(format!(
                            "{at}: tool_result blocks must come first in the user message"
                        ));
                    }
                    let id = block
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    if !previous_tool_uses.iter().any(|u| u == id) {
                        return fail(format!(
                            "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    answered.push(id.to_owned());
                }
                ("assistant", "tool_use") => {
                    if !block.get("input").is_some_and(Value::is_object) {
                        return fail(format!("{at}.input: Input should be a valid dictionary"));
                    }
                    let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                    tool_uses.push(id.to_owned());
                }
                ("assistant", "thinking") => {
                    if !thinking {
                        continue;
                    }
                    let text = block.get("thinking").and_then(Value::as_str).unwrap_or("");
                    let signature = block.get("signature").and_then(Value::as_str).unwrap_or("");
                    if signature != sign(secret, text) {
                        return fail(format!("{at}: Invalid `signature` in `thinking` block"));
                    }
                }
                ("assistant", "redacted_thinking") => {}
                (_, other) => {
                    return fail(format!(
                        "{at}: block type '{other}' is not valid in a {role} message"
                    ));
                }
            }
            let tool_block = matches!(kind(block), "tool_use" | "tool_result");
            if tool_block && !tools {
                return fail(
                    "Requests which include `tool_use` or `tool_result` blocks must define tools.",
                );
            }
        }
        if role == "user" {
            if let Some(missing) = previous_tool_uses.iter().find(|u| !answered.contains(u)) {
                return fail(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                ));
            }
            previous_tool_uses.clear();
        } else {
            let last = i + 2 == messages.len();
            if thinking && last && !tool_uses.is_empty() {
                let first = blocks.first().map(kind).unwrap_or("");
                if !matches!(first, "thinking" | "redacted_thinking") {
                    return fail(format!(
                        "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
                    ));
                }
            }
            previous_tool_uses = tool_uses;
        }
    }
    if !previous_tool_uses.is_empty() {
        return fail("the last assistant message has `tool_use` blocks without results");
    }
    Ok(())
}

fn image(block: &Value, at: &str) -> Check {
    let source = block.get("source").unwrap_or(&Value::Null);
    match kind(source) {
        "base64" => {
            let media = source
                .get("media_type")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !matches!(
                media,
                "image/jpeg" | "image/png" | "image/gif" | "image/webp"
            ) {
                return fail(format!(
                    "{at}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
                ));
            }
            match source.get("data").and_then(Value::as_str) {
                Some(d) if !d.is_empty() => Ok(()),
                _ => fail(format!("{at}.source.data: Field required")),
            }
        }
        "url" if source.get("url").is_some_and(Value::is_string) => Ok(()),
        _ => fail(format!(
            "{at}.source: Input tag does not match 'base64' or 'url'"
        )),
    }
}
