//! A webhook's `payload_template`: any JSON, whose strings may hold `{{key}}` placeholders
//! filled from the alert. One pass over the template's own text: a value put in is never read
//! again, so an analysis (the model's words) holding `{{check_name}}` or a JSON fragment stays
//! the literal text it was, and the payload stays the template's shape (values are JSON
//! strings, encoded by serde_json). Object keys are not templated. Unknown placeholders are
//! left as written, as HolmesGPT leaves them.
//!
//! The filled strings are capped at [`MAX_FILLED_BYTES`]: a template of a few kilobytes of
//! `{{analysis}}` would otherwise make triage build (and send) the analysis thousands of
//! times over, gigabytes from one request.

use serde_json::Value;

/// Far more than any receiver accepts in one alert (Slack takes 40,000 characters).
pub const MAX_FILLED_BYTES: usize = 1024 * 1024;

/// Fills every string of `template`; `None` when the strings filled in would be over
/// [`MAX_FILLED_BYTES`] (found before building more than that).
pub fn render(template: &Value, fields: &[(&str, &str)]) -> Option<Value> {
    let mut left = MAX_FILLED_BYTES;
    render_within(template, fields, &mut left)
}

fn render_within(template: &Value, fields: &[(&str, &str)], left: &mut usize) -> Option<Value> {
    Some(match template {
        Value::String(s) => Value::String(fill(s, fields, left)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| render_within(v, fields, left))
                .collect::<Option<_>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Some((k.clone(), render_within(v, fields, left)?)))
                .collect::<Option<_>>()?,
        ),
        other => other.clone(),
    })
}

/// `text` filled in, taking its length from `left`; `None` past it.
fn fill(text: &str, fields: &[(&str, &str)], left: &mut usize) -> Option<String> {
    let mut out = String::with_capacity(text.len().min(*left));
    let mut rest = text;
    let mut push = |out: &mut String, piece: &str| {
        *left = left.checked_sub(piece.len())?;
        out.push_str(piece);
        Some(())
    };
    while let Some(start) = rest.find("{{") {
        push(&mut out, &rest[..start])?;
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
                push(&mut out, value)?;
                rest = &after[end + 2..];
            }
            None => {
                push(&mut out, "{{")?;
                rest = after;
            }
        }
    }
    push(&mut out, rest)?;
    Some(out)
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
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"text": "pods: {{status}}\", \"injected\": \"yes {{unknown}}", "n": 3,
                "list": ["fail", {"{{status}}": "fail"}]})
        );
        let mut left = 100;
        assert_eq!(
            fill("{{ {{status}} }}", &[("status", "x")], &mut left).unwrap(),
            "{{ x }}"
        );
        assert_eq!(
            fill("{{status", &[("status", "x")], &mut left).unwrap(),
            "{{status"
        );
    }

    #[test]
    fn a_template_filling_past_the_cap_is_refused() {
        let big = "a".repeat(MAX_FILLED_BYTES / 4 + 1);
        let template = json!(["{{analysis}}", {"k": "{{analysis}}{{analysis}}"}, "{{analysis}}"]);
        assert!(render(&template, &[("analysis", &big)]).is_none());
        let fits = json!(["{{analysis}}", "{{analysis}}", "{{analysis}}"]);
        assert!(render(&fits, &[("analysis", &big)]).is_some());
    }
}
