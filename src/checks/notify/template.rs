//! A webhook's `payload_template`: any JSON, whose strings may hold `{{key}}` placeholders
//! filled from the alert. One pass over the template's own text: a value put in is never read
//! again, so an analysis (the model's words) holding `{{check_name}}` or a JSON fragment stays
//! the literal text it was, and the payload stays the template's shape (values are JSON
//! strings, encoded by serde_json). Object keys are not templated. Unknown placeholders are
//! left as written, as HolmesGPT leaves them.

use serde_json::Value;

/// Fills every string of `template`.
pub fn render(template: &Value, fields: &[(&str, &str)]) -> Value {
    match template {
        Value::String(s) => Value::String(fill(s, fields)),
        Value::Array(items) => Value::Array(items.iter().map(|v| render(v, fields)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), render(v, fields)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn fill(text: &str, fields: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let known = after.find("}}").and_then(|end| {
            let key = &after[..end];
            fields
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v, end))
        });
        match known {
            Some((value, end)) => {
                out.push_str(value);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_are_filled_once_and_values_are_never_read_again() {
        let template = json!({"text": "{{check_name}}: {{analysis}} {{unknown}}", "n": 3,
            "list": ["{{status}}", {"{{status}}": "{{status}}"}]});
        let out = render(
            &template,
            &[
                ("check_name", "pods"),
                ("analysis", "{{status}}\", \"injected\": \"yes"),
                ("status", "fail"),
            ],
        );
        assert_eq!(
            out,
            json!({"text": "pods: {{status}}\", \"injected\": \"yes {{unknown}}", "n": 3,
                "list": ["fail", {"{{status}}": "fail"}]})
        );
        assert_eq!(fill("{{ {{status}} }}", &[("status", "x")]), "{{ x }}");
        assert_eq!(fill("{{status", &[("status", "x")]), "{{status");
    }
}
