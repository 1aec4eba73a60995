//! A request body read into this door's types, errors in OpenAI's words: JSON that does not
//! parse, a body that is not an object, an unknown parameter (OpenAI refuses those), a value
//! of the wrong type — each naming the parameter, as `messages[0].content`.

use serde::de::DeserializeOwned;

use super::error::OpenAiError;

pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, OpenAiError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        None => {
            return Err(OpenAiError::invalid(
                "The request body is empty: send a JSON object",
                None,
            ));
        }
        Some(b'{') => {}
        Some(_) => {
            return Err(OpenAiError::invalid(
                "The request body must be a JSON object",
                None,
            ));
        }
    }
    // The path costs an allocation per key: read without it, and again only to name a field.
    if let Ok(parsed) = serde_json::from_slice(bytes) {
        return Ok(parsed);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    let err = match parsed {
        Ok(_) => {
            let trailing = de.end().err().map_or_else(String::new, |e| e.to_string());
            return Err(OpenAiError::invalid(
                format!("We could not parse the JSON body of your request: {trailing}"),
                None,
            ));
        }
        Err(err) => err,
    };
    let inner = err.inner();
    if (inner.is_syntax() || inner.is_eof())
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err()
    {
        return Err(OpenAiError::invalid(
            format!("We could not parse the JSON body of your request: {inner}"),
            None,
        ));
    }
    let path = param_path(&err.path().to_string());
    let text = inner.to_string();
    if let Some(field) = unknown_field(&text) {
        // The path already ends at the unknown key.
        let param = if path.is_empty() {
            field.to_owned()
        } else {
            path.clone()
        };
        return Err(OpenAiError::invalid(
            format!("Unrecognized request argument supplied: {param}"),
            Some(&param),
        )
        .with_code("unknown_parameter"));
    }
    if let Some(field) = missing_field(&text) {
        let param = join(&path, field);
        return Err(OpenAiError::invalid(
            format!("Missing required parameter: '{param}'."),
            Some(&param),
        )
        .with_code("missing_required_parameter"));
    }
    let param = (!path.is_empty()).then_some(path.as_str());
    let message = match param {
        Some(p) => format!("Invalid value for '{p}': {}", strip_position(&text)),
        None => format!("Invalid request body: {}", strip_position(&text)),
    };
    Err(OpenAiError::invalid(message, param).with_code("invalid_value"))
}

/// serde_path_to_error's `a.b[0].c` is already OpenAI's form; only the root is `.`.
fn param_path(path: &str) -> String {
    if path == "." {
        String::new()
    } else {
        path.to_owned()
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

/// serde's "unknown field `x`, expected …".
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// serde's "missing field `x`".
fn missing_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next()
}

/// " at line 1 column 20" means nothing to a client that sent a body built by a library.
fn strip_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |at| &message[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        model: String,
        messages: Vec<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        role: String,
    }

    fn refused(body: &str) -> OpenAiError {
        parse::<Body>(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn each_refusal_names_its_parameter() {
        let e = refused(r#"{"model":"m","messages":[{"role":"user","colour":1}]}"#);
        assert_eq!(e.param.as_deref(), Some("messages[0].colour"));
        assert_eq!(e.code, Some("unknown_parameter"));
        let e = refused(r#"{"messages":[]}"#);
        assert_eq!(e.param.as_deref(), Some("model"));
        assert_eq!(e.code, Some("missing_required_parameter"));
        let e = refused(r#"{"model":7,"messages":[]}"#);
        assert_eq!(e.param.as_deref(), Some("model"));
        assert!(!e.message.contains("line 1"), "{}", e.message);
        let e = refused(r#"{"model":"m","#);
        assert!(e.message.contains("could not parse"), "{}", e.message);
        assert!(refused("[1]").message.contains("JSON object"));
        assert!(refused("  ").message.contains("empty"));
    }
}
