//! Command templates: `${VAR}` from triage's environment when the toolset loads, then
//! minijinja (strict) with the model's values at each call.
//!
//! The model's values never become shell code. Every `{{ … }}` output is first written as a
//! marker inside single quotes; the rendered text is parsed with tree-sitter-bash, and each
//! marker must sit in a single-quoted word of its own (not inside double quotes, a heredoc, a
//! comment or a syntax error, where quotes would not protect it). Only then is each marker
//! replaced by its value with every `'` written as `'\''`, so bash reads the value as one
//! literal argument whatever it holds: `$(…)`, backticks, `;`, newlines, quotes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use minijinja::value::ValueKind;
use minijinja::{Environment, UndefinedBehavior, Value};
use tree_sitter::{Node, Parser};

/// Functions minijinja offers as globals: not parameters. (`namespace` is one too, but far
/// more often a parameter; a value given for it shadows the function.)
const GLOBALS: &[&str] = &["range", "dict", "debug"];

/// Replaces `${NAME}` by the variable's value where `lookup` has one; an unset variable is
/// left for bash (which sees the toolset's clean environment).
pub fn expand_env(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        let closed = after[name_len..].starts_with('}');
        match lookup(name).filter(|_| closed && !name.is_empty()) {
            Some(value) => {
                out.push_str(&value);
                rest = &after[name_len + 1..];
            }
            None => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The variables a template reads: the parameters it needs when none are declared.
pub fn placeholders(template: &str) -> Result<BTreeSet<String>, String> {
    let env = Environment::new();
    let tmpl = env
        .template_from_str(template)
        .map_err(|e| format!("template does not parse: {e}"))?;
    Ok(tmpl
        .undeclared_variables(false)
        .into_iter()
        .filter(|v| !GLOBALS.contains(&v.as_str()))
        .collect())
}

/// A value as the text it stands for: strings as they are, numbers and booleans written out,
/// none (an optional parameter not given) as the empty string.
fn as_text(value: &Value) -> String {
    match value.kind() {
        ValueKind::None | ValueKind::Undefined => String::new(),
        _ => value
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| value.to_string()),
    }
}

/// Renders `template` with `values` for bash: each output value one single-quoted word.
pub fn render_shell(template: &str, values: &BTreeMap<String, Value>) -> Result<String, String> {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let inserted: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let sink = inserted.clone();
    let marker_prefix = format!("TRIAGEARG{nonce}N");
    let prefix = marker_prefix.clone();
    // Whatever an expression yields (a filter's result, a `| safe` string) goes through here.
    env.set_formatter(move |out, _state, value| {
        let mut list = sink.lock().unwrap_or_else(|e| e.into_inner());
        let index = list.len();
        list.push(as_text(value));
        write!(out, "'{prefix}{index}E'")
            .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::WriteFailure, e.to_string()))
    });
    let tmpl = env
        .template_from_str(template)
        .map_err(|e| format!("template does not parse: {e}"))?;
    let rendered = tmpl
        .render(values)
        .map_err(|e| format!("template failed: {e}"))?;
    drop(tmpl);
    drop(env);
    let inserted = Arc::try_unwrap(inserted)
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .unwrap_or_else(|shared| shared.lock().map(|l| l.clone()).unwrap_or_default());
    check_markers(&rendered, &marker_prefix, inserted.len())?;
    let mut command = rendered;
    // Highest index first, so `…N1E` is never taken for the start of `…N10E`.
    for (index, value) in inserted.iter().enumerate().rev() {
        if value.contains('\0') {
            return Err("a value contains a NUL byte".into());
        }
        command = command.replace(
            &format!("{marker_prefix}{index}E"),
            &value.replace('\'', r"'\''"),
        );
    }
    Ok(command)
}

/// Bytes a value keeps as they are in a URL: RFC 3986's unreserved characters.
const URL_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Renders a URL template: each output value percent-encoded, so it stays inside the path
/// segment or query value it was put in (a `/`, `?`, `#`, `@` or `:` in it cannot move it).
pub fn render_url(template: &str, values: &BTreeMap<String, Value>) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_formatter(|out, _state, value| {
        let text = as_text(value);
        // URL parsers read `.`/`..` (also percent-encoded) as dot segments: a value could
        // climb out of the path the template gave it.
        if text == "." || text == ".." {
            return Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                "a value may not be `.` or `..`",
            ));
        }
        let encoded = percent_encoding::utf8_percent_encode(&text, URL_VALUE);
        write!(out, "{encoded}")
            .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::WriteFailure, e.to_string()))
    });
    env.template_from_str(template)
        .and_then(|t| t.render(values))
        .map_err(|e| format!("template failed: {e}"))
}

/// Every marker must be the whole content of a single-quoted word outside any string,
/// heredoc, comment or parse error.
fn check_markers(rendered: &str, prefix: &str, count: usize) -> Result<(), String> {
    if count == 0 {
        return Ok(());
    }
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .map_err(|e| format!("bash grammar: {e}"))?;
    let tree = parser
        .parse(rendered, None)
        .ok_or("the command could not be parsed")?;
    let mut seen = 0;
    for (start, _) in rendered.match_indices(prefix) {
        seen += 1;
        // The marker with its quotes: `'PREFIX…E'`.
        let quote = start.checked_sub(1).ok_or(UNSAFE)?;
        let digits = start + prefix.len();
        let digits_end = rendered[digits..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(rendered.len(), |i| digits + i);
        if !rendered[digits_end..].starts_with("E'") {
            return Err(UNSAFE.into());
        }
        let end = digits_end + 2;
        let node = tree
            .root_node()
            .descendant_for_byte_range(quote, end)
            .ok_or(UNSAFE)?;
        if node.kind() != "raw_string" || node.start_byte() != quote || node.end_byte() != end {
            return Err(UNSAFE.into());
        }
        if ancestors(node).any(|n| {
            n.is_error()
                || n.is_missing()
                || matches!(
                    n.kind(),
                    "string" | "heredoc_body" | "comment" | "arithmetic_expansion"
                )
                // Inside backticks a backquote in the value would end the substitution.
                || (n.kind() == "command_substitution" && text(rendered, n).starts_with('`'))
        }) {
            return Err(UNSAFE.into());
        }
    }
    if seen != count {
        return Err(UNSAFE.into());
    }
    Ok(())
}

const UNSAFE: &str = "the template puts a parameter where quoting cannot protect it (inside \
     double quotes, backticks, a heredoc or a comment): write {{ name }} as a word of its own";

fn text<'a>(source: &'a str, node: Node) -> &'a str {
    source.get(node.start_byte()..node.end_byte()).unwrap_or("")
}

fn ancestors(node: Node) -> impl Iterator<Item = Node> {
    std::iter::successors(node.parent(), |n| n.parent())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect()
    }

    /// What bash makes of a rendered command: its arguments, one per line.
    fn argv(command: &str) -> Vec<String> {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("set -- {command}; printf '%s\\0' \"$@\""))
            .env_clear()
            .output()
            .expect("bash runs");
        String::from_utf8_lossy(&out.stdout)
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn hostile_values_stay_one_literal_argument() {
        for hostile in [
            "$(touch /tmp/pwned)",
            "`id`",
            "a; rm -rf /",
            "line1\nline2",
            "it's",
            "'; id; '",
            "\"quoted\" $HOME",
            "a\\'b",
            "*",
        ] {
            let cmd = render_shell("x {{ arg }} y", &values(&[("arg", hostile)])).unwrap();
            assert_eq!(argv(&cmd), ["x", hostile, "y"], "{hostile:?} → {cmd}");
        }
    }

    #[test]
    fn filters_and_safe_still_quote() {
        let v = values(&[("a", "$(id)")]);
        let cmd = render_shell("{{ a | upper }} {{ a | safe }}", &v).unwrap();
        assert_eq!(argv(&cmd), ["$(ID)", "$(id)"]);
    }

    #[test]
    fn placeholders_where_quotes_do_not_protect_are_refused() {
        let v = values(&[("a", "x")]);
        for bad in [
            "echo \"{{ a }}\"",
            "echo `echo {{ a }}`x",
            "cat <<EOF\n{{ a }}\nEOF",
            "echo x # {{ a }}",
            "{% filter upper %}{{ a }}{% endfilter %}",
        ] {
            let err = render_shell(bad, &v).unwrap_err();
            assert!(err.contains("quoting cannot protect"), "{bad}: {err}");
        }
        let ok = render_shell("echo --name={{ a }} pre{{ a }} $(echo {{ a }})", &v).unwrap();
        assert_eq!(argv(&ok), ["echo", "--name=x", "prex", "x"]);
    }

    #[test]
    fn strict_undefined_and_optional_none() {
        assert!(render_shell("{{ missing }}", &BTreeMap::new()).is_err());
        let mut v = BTreeMap::new();
        v.insert("ns".to_owned(), Value::from(()));
        let cmd = render_shell("get {% if ns %}-n {{ ns }}{% endif %}", &v).unwrap();
        assert_eq!(cmd, "get ");
    }

    #[test]
    fn url_values_are_percent_encoded() {
        let v = values(&[("q", "a b/../?x=1#@evil.example:80")]);
        let url = render_url("https://api.example/items/{{ q }}?name={{ q }}", &v).unwrap();
        assert_eq!(
            url,
            "https://api.example/items/a%20b%2F..%2F%3Fx%3D1%23%40evil.example%3A80?name=a%20b%2F..%2F%3Fx%3D1%23%40evil.example%3A80"
        );
    }

    #[test]
    fn dot_segments_are_refused() {
        for dots in [".", ".."] {
            let err = render_url(
                "https://api.example/v1/items/{{ id }}",
                &values(&[("id", dots)]),
            )
            .unwrap_err();
            assert!(err.contains("may not be"), "{err}");
        }
    }

    #[test]
    fn env_expansion_and_inference() {
        let lookup = |k: &str| (k == "TOKEN").then(|| "s3cr3t".to_owned());
        assert_eq!(
            expand_env("a ${TOKEN} ${UNSET} ${ x", &lookup),
            "a s3cr3t ${UNSET} ${ x"
        );
        let names = placeholders(
            "kubectl get {{ kind }} -n {{ ns }} {% for i in range(2) %}{{ i }}{% endfor %}",
        )
        .unwrap();
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["kind", "ns"]);
    }
}
