//! `response_format` enforcement: the final answer must be JSON (and match the schema when one
//! is given). Code fences are stripped first; an invalid answer gets one repair round.

use serde_json::Value;

/// The compiled expectation of a request's `response_format`.
#[derive(Debug)]
pub struct FormatCheck {
    /// `None` for `json_object`: any JSON object passes.
    validator: Option<jsonschema::Validator>,
}

impl FormatCheck {
    /// `Ok(None)` when the format asks for nothing checkable (`text`).
    pub fn compile(format: &Value) -> Result<Option<FormatCheck>, String> {
        match format.get("type").and_then(Value::as_str) {
            Some("text") => Ok(None),
            Some("json_object") => Ok(Some(FormatCheck { validator: None })),
            Some("json_schema") => {
                let spec = format.get("json_schema").filter(|s| s.is_object()).ok_or(
                    "type json_schema needs a `json_schema` object with `name` and `schema`",
                )?;
                if !spec.get("name").is_some_and(Value::is_string) {
                    return Err("json_schema.name must be a string".into());
                }
                if spec.get("strict").is_some_and(|s| !s.is_boolean()) {
                    return Err("json_schema.strict must be a boolean".into());
                }
                let schema = spec
                    .get("schema")
                    .filter(|s| s.is_object())
                    .ok_or("json_schema.schema must be a JSON Schema object")?;
                let validator = jsonschema::validator_for(schema)
                    .map_err(|e| format!("invalid JSON Schema: {e}"))?;
                Ok(Some(FormatCheck {
                    validator: Some(validator),
                }))
            }
            Some(other) => Err(format!(
                "unsupported type '{other}' (use json_schema or json_object)"
            )),
            None => Err("a `type` is required (json_schema or json_object)".into()),
        }
    }

    /// The answer as clean JSON text, or the list of violations.
    pub fn check(&self, answer: &str) -> Result<String, Vec<String>> {
        let text = strip_fences(answer);
        let value: Value = serde_json::from_str(text)
            .map_err(|e| vec![format!("the answer is not valid JSON: {e}")])?;
        match &self.validator {
            None if value.is_object() => Ok(text.to_owned()),
            None => Err(vec!["the answer must be a JSON object".into()]),
            Some(v) => {
                let errors = violations(v, &value, 20);
                if errors.is_empty() {
                    Ok(text.to_owned())
                } else {
                    Err(errors)
                }
            }
        }
    }
}

/// A checked JSON answer with its strings masked as a client decodes them: a model can spell
/// a secret with escapes (`s3cr\u0065t`) that masking the text does not see, and every JSON
/// reader turns back into the secret. `None` when nothing was hidden that way (the answer
/// stays byte for byte as the model wrote it); otherwise the masked value, re-serialized.
pub fn mask_decoded(text: &str, masker: &super::RunMasker) -> Option<String> {
    // Without a backslash every decoded string is a piece of the text, which is masked.
    if !text.contains('\\') {
        return None;
    }
    let value: Value = serde_json::from_str(text).ok()?;
    let masked = masker.masked(value.clone());
    (masked != value).then(|| masked.to_string())
}

/// A schema's complaints about a value, each with the path it concerns, at most `max`.
pub fn violations(validator: &jsonschema::Validator, value: &Value, max: usize) -> Vec<String> {
    validator
        .iter_errors(value)
        .take(max)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                format!("(root): {e}")
            } else {
                format!("{path}: {e}")
            }
        })
        .collect()
}

/// The instruction sent back to the model when its answer does not validate.
pub fn repair_prompt(violations: &[String]) -> String {
    format!(
        "Your previous answer does not match the required response format:\n- {}\n\nReply again \
         with only the corrected JSON: no prose, no code fences.",
        violations.join("\n- ")
    )
}

/// Removes a surrounding Markdown code fence (```json … ```), if any.
fn strip_fences(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    // Drop the info string (e.g. `json`) on the opening line.
    match body.split_once('\n') {
        Some((info, inner)) if !info.trim().contains(['{', '[']) => inner.trim(),
        _ => body.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema_check() -> FormatCheck {
        FormatCheck::compile(&json!({"type": "json_schema", "json_schema": {"name": "R", "strict": true, "schema": {
            "type": "object",
            "properties": {"healthy": {"type": "boolean"}, "issues": {"type": "array", "items": {"type": "string"}}},
            "required": ["healthy", "issues"], "additionalProperties": false
        }}}))
        .unwrap()
        .unwrap()
    }

    #[test]
    fn accepts_valid_and_fenced_json() {
        let c = schema_check();
        assert_eq!(
            c.check(r#"{"healthy": true, "issues": []}"#).unwrap(),
            r#"{"healthy": true, "issues": []}"#
        );
        assert_eq!(
            c.check("```json\n{\"healthy\": false, \"issues\": [\"x\"]}\n```")
                .unwrap(),
            "{\"healthy\": false, \"issues\": [\"x\"]}"
        );
        assert!(
            c.check("```\n{\"healthy\": true, \"issues\": []}\n```")
                .is_ok()
        );
    }

    #[test]
    fn lists_violations_with_paths() {
        let errors = schema_check()
            .check(r#"{"healthy": "yes", "extra": 1}"#)
            .unwrap_err();
        let joined = errors.join("\n");
        assert!(joined.contains("/healthy"), "{joined}");
        assert!(joined.contains("issues"), "{joined}");
        assert!(
            schema_check().check("The cluster is fine.").unwrap_err()[0].contains("not valid JSON")
        );
    }

    #[test]
    fn json_object_needs_an_object() {
        let c = FormatCheck::compile(&json!({"type": "json_object"}))
            .unwrap()
            .unwrap();
        assert!(c.check("{}").is_ok());
        assert!(c.check("[1]").is_err());
    }

    #[test]
    fn rejects_bad_formats() {
        assert!(FormatCheck::compile(&json!({"type": "xml"})).is_err());
        assert!(
            FormatCheck::compile(
                &json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}})
            )
            .unwrap_err()
            .contains("invalid JSON Schema")
        );
        assert!(
            FormatCheck::compile(&json!({"type": "json_schema", "json_schema": {"schema": {}}}))
                .is_err()
        );
        assert!(
            FormatCheck::compile(&json!({"type": "text"}))
                .unwrap()
                .is_none()
        );
    }
}
