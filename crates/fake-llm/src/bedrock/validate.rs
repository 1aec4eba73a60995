//! What Bedrock's Converse refuses (HTTP 400 `ValidationException`): messages that do not
//! alternate starting with the user, empty text, tool blocks without `toolConfig`
//! (HolmesGPT #1142), a `toolResult` that answers no `toolUse` of the assistant turn just
//! before (or a `toolUse` left unanswered), unsigned or altered reasoning, a temperature with
//! Claude's thinking on, a malformed `toolConfig` or image.

use std::collections::HashSet;

use serde_json::Value;

use super::sign;

pub(crate) fn request(body: &Value, secret: &str) -> Result<(), String> {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or("The messages field is required and must not be empty.")?;
    let max_tokens = body.pointer("/inferenceConfig/maxTokens");
    if max_tokens.is_some_and(|m| m.as_u64().is_none_or(|n| n == 0)) {
        return Err("inferenceConfig.maxTokens must be a positive integer.".into());
    }
    let thinking = body.pointer("/additionalModelRequestFields/thinking/type")
        == Some(&Value::String("enabled".into()));
    if thinking && body.pointer("/inferenceConfig/temperature").is_some() {
        return Err("temperature may only be set to 1 when thinking is enabled.".into());
    }
    if let Some(system) = body.get("system") {
        for block in system.as_array().ok_or("system must be a list")? {
            check_block(block, "system", secret)?;
        }
    }
    let mut uses_tools = false;
    let mut open_calls: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            return Err(format!(
                "A conversation must alternate between user and assistant roles, starting with user. messages.{i}.role is {role}."
            ));
        }
        let content = message
            .get("content")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| format!("messages.{i}.content must not be empty."))?;
        let mut answered = HashSet::new();
        let mut calls = Vec::new();
        for block in content {
            check_block(block, &format!("messages.{i}"), secret)?;
            if let Some(call) = block.get("toolUse") {
                uses_tools = true;
                if role != "assistant" {
                    return Err(format!(
                        "messages.{i}: toolUse blocks belong to assistant messages."
                    ));
                }
                calls.push(call["toolUseId"].as_str().unwrap_or("").to_owned());
            }
            if let Some(result) = block.get("toolResult") {
                uses_tools = true;
                let id = result["toolUseId"].as_str().unwrap_or("");
                if role != "user" || !open_calls.iter().any(|c| c == id) {
                    return Err(format!(
                        "messages.{i}: the toolResult block with id {id} does not match any toolUse block of the previous assistant message."
                    ));
                }
                answered.insert(id.to_owned());
            }
        }
        if role == "user" {
            let missing: Vec<&String> = open_calls
                .iter()
                .filter(|c| !answered.contains(*c))
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "Expected toolResult blocks at messages.{i}.content for the following Ids: {missing:?}"
                ));
            }
            open_calls.clear();
        } else {
            if thinking
                && !calls.is_empty()
                && i + 1 == messages.len() - 1
                && content[0].get("reasoningContent").is_none()
            {
                return Err(format!(
                    "messages.{i}: with thinking enabled, an assistant message with toolUse must start with its reasoning block."
                ));
            }
            open_calls = calls;
        }
    }
    if !open_calls.is_empty() {
        // The last message is the assistant's with unanswered calls.
        return Err("The final assistant message has toolUse blocks without results.".into());
    }
    match body.get("toolConfig") {
        None if uses_tools => Err(
            "The toolConfig field must be defined when using toolUse and toolResult content blocks."
                .into(),
        ),
        None => Ok(()),
        Some(config) => check_tool_config(config),
    }
}

fn check_tool_config(config: &Value) -> Result<(), String> {
    let tools = config
        .get("tools")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty())
        .ok_or("toolConfig.tools must hold at least one tool.")?;
    for tool in tools {
        let spec = tool.get("toolSpec").ok_or("each tool must be a toolSpec")?;
        let name = spec.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("toolSpec.name '{name}' must match [a-zA-Z0-9_-]+."));
        }
        if !spec
            .pointer("/inputSchema/json")
            .is_some_and(Value::is_object)
        {
            return Err(format!(
                "toolSpec {name}: inputSchema.json must be an object."
            ));
        }
    }
    match config.get("toolChoice") {
        None => Ok(()),
        Some(Value::Object(choice))
            if choice.len() == 1
                && ["auto", "any", "tool"]
                    .iter()
                    .any(|k| choice.contains_key(*k)) =>
        {
            Ok(())
        }
        Some(other) => Err(format!("toolChoice {other} is not one of auto, any, tool.")),
    }
}

fn check_block(block: &Value, at: &str, secret: &str) -> Result<(), String> {
    let Some(fields) = block.as_object().filter(|o| o.len() == 1) else {
        return Err(format!(
            "{at}: each content block must hold exactly one member."
        ));
    };
    let (kind, value) = fields.iter().next().ok_or("empty block")?;
    match kind.as_str() {
        "text" => {
            if value.as_str().is_none_or(|t| t.trim().is_empty()) {
                return Err(format!(
                    "{at}: The text field in the ContentBlock object is blank. Add text to the text field, and try again."
                ));
            }
        }
        "cachePoint" if value.get("type") == Some(&Value::String("default".into())) => {}
        "toolUse" => {
            let id = value.get("toolUseId").and_then(Value::as_str).unwrap_or("");
            if id.is_empty()
                || id.len() > 64
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "{at}: toolUseId '{id}' must match [a-zA-Z0-9_-]{{1,64}}."
                ));
            }
            if !value.get("input").is_some_and(Value::is_object)
                || value.get("name").and_then(Value::as_str).is_none()
            {
                return Err(format!("{at}: toolUse needs a name and an object input."));
            }
        }
        "toolResult" => {
            let content = value
                .get("content")
                .and_then(Value::as_array)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("{at}: toolResult.content must not be empty."))?;
            for part in content {
                check_block(part, at, secret)?;
            }
            match value.get("status").and_then(Value::as_str) {
                None | Some("success" | "error") => {}
                Some(other) => {
                    return Err(format!(
                        "{at}: toolResult.status '{other}' is not success or error."
                    ));
                }
            }
        }
        "image" => {
            let format = value.get("format").and_then(Value::as_str).unwrap_or("");
            let bytes = value
                .pointer("/source/bytes")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !["png", "jpeg", "gif", "webp"].contains(&format) || bytes.is_empty() {
                return Err(format!(
                    "{at}: an image needs a format (png, jpeg, gif, webp) and bytes."
                ));
            }
        }
        "reasoningContent" => {
            if value.get("redactedContent").is_some() {
                return Ok(());
            }
            let text = value
                .pointer("/reasoningText/text")
                .and_then(Value::as_str)
                .unwrap_or("");
            let signature = value
                .pointer("/reasoningText/signature")
                .and_then(Value::as_str);
            if signature != Some(sign(secret, text).as_str()) {
                return Err(format!(
                    "{at}: the reasoning block's signature is missing or does not match its text."
                ));
            }
        }
        other => return Err(format!("{at}: unknown content block member '{other}'.")),
    }
    Ok(())
}
