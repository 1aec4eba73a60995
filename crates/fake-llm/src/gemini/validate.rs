//! The request checks Gemini documents for `generateContent`, so a request the real API would
//! refuse fails the test with the same 400 `INVALID_ARGUMENT`: roles, alternation, function
//! responses answering the previous turn's calls, declared functions, the schema subset,
//! JSON responses beside function calling, and thought signatures sent back unchanged.

use serde_json::{Map, Value};

use super::sign;

type Check = Result<(), String>;

fn fail<T>(message: impl Into<String>) -> Result<T, String> {
    Err(message.into())
}

/// Keys of Gemini's `Schema`; any other is "Unknown name … Cannot find field."
const SCHEMA_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// Whether the request asks for thoughts (and so gets signed parts).
pub(crate) fn thinking_on(body: &Value) -> bool {
    body.pointer("/generationConfig/thinkingConfig/includeThoughts") == Some(&Value::Bool(true))
}

pub(crate) fn request(body: &Value, secret: &str) -> Check {
    let Some(object) = body.as_object() else {
        return fail("Invalid JSON payload received.");
    };
    let declared = tools(object.get("tools"))?;
    let mode = body
        .pointer("/toolConfig/functionCallingConfig/mode")
        .and_then(Value::as_str);
    if let Some(mode) = mode.filter(|m| !matches!(*m, "AUTO" | "ANY" | "NONE" | "VALIDATED")) {
        return fail(format!(
            "Invalid value at 'tool_config.function_calling_config.mode' ({mode})"
        ));
    }
    let json_out = body
        .pointer("/generationConfig/responseMimeType")
        .and_then(Value::as_str)
        == Some("application/json");
    if json_out && !declared.is_empty() {
        return fail(
            "Function calling with a response mime type: 'application/json' is unsupported",
        );
    }
    if let Some(schema) = body.pointer("/generationConfig/responseSchema") {
        check_schema(schema, "generation_config.response_schema")?;
    }
    if let Some(system) = object.get("systemInstruction") {
        parts(system.get("parts"), "system_instruction")?;
    }
    contents(object.get("contents"), &declared, secret, thinking_on(body))
}

fn tools(tools: Option<&Value>) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let Some(tools) = tools else { return Ok(names) };
    let Some(tools) = tools.as_array() else {
        return fail("tools: must be a list");
    };
    for (t, tool) in tools.iter().enumerate() {
        let declarations = tool
            .get("functionDeclarations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        for (d, declaration) in declarations.enumerate() {
            let at = format!("tools[{t}].function_declarations[{d}]");
            let Some(name) = declaration.get("name").and_then(Value::as_str) else {
                return fail(format!(
                    "* GenerateContentRequest.{at}.name: Field required"
                ));
            };
            let valid = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-:".contains(c));
            if !valid {
                return fail(format!(
                    "* GenerateContentRequest.{at}.name: Invalid function name"
                ));
            }
            if let Some(parameters) = declaration.get("parameters") {
                check_schema(parameters, &format!("{at}.parameters"))?;
                let empty = parameters
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_none_or(Map::is_empty);
                if parameters.get("type").and_then(Value::as_str) == Some("object") && empty {
                    return fail(format!(
                        "* GenerateContentRequest.{at}.parameters.properties: should be non-empty for OBJECT type"
                    ));
                }
            }
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

fn check_schema(schema: &Value, at: &str) -> Check {
    let Some(object) = schema.as_object() else {
        return fail(format!(
            "Invalid value at '{at}': a schema must be an object"
        ));
    };
    for (key, value) in object {
        if !SCHEMA_KEYS.contains(&key.as_str()) {
            return fail(format!(
                "Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."
            ));
        }
        match (key.as_str(), value) {
            ("type", Value::String(t)) => {
                let t = t.to_ascii_uppercase();
                if ![
                    "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL",
                ]
                .contains(&t.as_str())
                {
                    return fail(format!("Invalid value at '{at}.type' ({t})"));
                }
            }
            ("type", _) => {
                return fail(format!(
                    "Invalid value at '{at}.type': Proto field is not repeating, cannot start list."
                ));
            }
            ("enum", Value::Array(values)) if !values.iter().all(Value::is_string) => {
                return fail(format!(
                    "Invalid value at '{at}.enum': enum values must be strings"
                ));
            }
            ("properties", Value::Object(props)) => {
                for (name, s) in props {
                    check_schema(s, &format!("{at}.properties[{name}]"))?;
                }
            }
            ("items", s) => check_schema(s, &format!("{at}.items"))?,
            ("anyOf", Value::Array(members)) => {
                for (i, m) in members.iter().enumerate() {
                    check_schema(m, &format!("{at}.any_of[{i}]"))?;
                }
            }
            _ => {}
        }
    }
    if object.get("type").and_then(Value::as_str) == Some("array") && !object.contains_key("items")
    {
        return fail(format!("* {at}.items: missing field."));
    }
    Ok(())
}

fn parts(parts: Option<&Value>, at: &str) -> Result<Vec<Value>, String> {
    let Some(parts) = parts.and_then(Value::as_array) else {
        return fail(format!("* {at}.parts: contents.parts must not be empty."));
    };
    if parts.is_empty() {
        return fail(format!("* {at}.parts: contents.parts must not be empty."));
    }
    for (i, part) in parts.iter().enumerate() {
        let data = [
            "text",
            "inlineData",
            "fileData",
            "functionCall",
            "functionResponse",
        ]
        .iter()
        .filter(|k| part.get(**k).is_some())
        .count();
        if data != 1 {
            return fail(format!(
                "* {at}.parts[{i}].data: required oneof field 'data' must have one initialized field"
            ));
        }
        if let Some(inline) = part.get("inlineData") {
            let mime = inline.get("mimeType").and_then(Value::as_str).unwrap_or("");
            let b64 = inline.get("data").and_then(Value::as_str).unwrap_or("");
            if mime.is_empty() || b64.is_empty() {
                return fail(format!(
                    "* {at}.parts[{i}].inline_data: mime_type and data are required"
                ));
            }
        }
    }
    Ok(parts.clone())
}

fn contents(contents: Option<&Value>, declared: &[String], secret: &str, thinking: bool) -> Check {
    let Some(contents) = contents.and_then(Value::as_array).filter(|c| !c.is_empty()) else {
        return fail("* GenerateContentRequest.contents: contents is not specified");
    };
    let mut previous_role = "";
    let mut previous_calls: Vec<(String, Option<String>)> = Vec::new();
    for (i, content) in contents.iter().enumerate() {
        let at = format!("contents[{i}]");
        let role = content
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        if !matches!(role, "user" | "model") {
            return fail(format!("Please use a valid role: user, model. ({at})"));
        }
        if role == previous_role {
            return fail("Please ensure that multiturn requests alternate between user and model.");
        }
        let parts = parts(content.get("parts"), &at)?;
        let calls: Vec<(String, Option<String>)> = parts
            .iter()
            .filter_map(|p| p.get("functionCall"))
            .map(|c| {
                (
                    c.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    c.get("id").and_then(Value::as_str).map(str::to_owned),
                )
            })
            .collect();
        let responses: Vec<(String, Option<String>)> = parts
            .iter()
            .filter_map(|p| p.get("functionResponse"))
            .map(|r| {
                (
                    r.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    r.get("id").and_then(Value::as_str).map(str::to_owned),
                )
            })
            .collect();
        if role == "user" && !calls.is_empty() || role == "model" && !responses.is_empty() {
            return fail(format!(
                "* {at}: function calls belong to model turns and responses to user turns"
            ));
        }
        for (name, _) in calls.iter().chain(&responses) {
            if !declared.contains(name) {
                return fail(format!(
                    "* {at}: function '{name}' is not declared in tools (a function part needs its declaration)"
                ));
            }
        }
        if role == "user" {
            if !previous_calls.is_empty() && responses.len() != previous_calls.len() {
                return fail(
                    "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
                );
            }
            for (n, (name, id)) in responses.iter().enumerate() {
                let matches = previous_calls
                    .get(n)
                    .is_some_and(|(cn, cid)| cn == name && (cid.is_none() || cid == id));
                if !matches {
                    return fail(format!(
                        "* {at}.parts: function response '{name}' does not answer the function call at the same position of the previous model turn"
                    ));
                }
            }
        }
        if role == "model" {
            signatures(&parts, secret, thinking, &at)?;
        }
        previous_calls = calls;
        previous_role = role;
    }
    if !previous_calls.is_empty() {
        return fail(
            "Please ensure that function call turn comes immediately before a function response turn.",
        );
    }
    Ok(())
}

/// A signed part must come back with the signature the fake gave it; with thinking on, the
/// first function call of a model turn must carry one, as Gemini requires.
fn signatures(parts: &[Value], secret: &str, thinking: bool, at: &str) -> Check {
    for (i, part) in parts.iter().enumerate() {
        if let Some(sig) = part.get("thoughtSignature").and_then(Value::as_str) {
            // A call's signature is bound to the call; a text part's only to the fake (clients
            // join a streamed text's pieces, so its signature travels on the joined part).
            let text_signed = Value::String(super::TEXT_SIGNED.into());
            let content = part.get("functionCall").unwrap_or(&text_signed);
            if sig != sign(secret, content) {
                return fail(format!(
                    "* {at}.parts[{i}]: Thought signature is not valid."
                ));
            }
        }
    }
    let first_call = parts.iter().find(|p| p.get("functionCall").is_some());
    if thinking && first_call.is_some_and(|p| p.get("thoughtSignature").is_none()) {
        return fail(format!(
            "* {at}: Function call is missing a thought_signature in functionCall parts."
        ));
    }
    Ok(())
}
