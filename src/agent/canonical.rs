//! Tool-call arguments in a canonical form (sorted keys, no spaces): re-serialisation by a
//! client changes nothing, any change of meaning does. The duplicate guard and approval
//! tokens compare calls by it.

use serde_json::Value;

/// Arguments in a canonical form (sorted keys, no spaces) so that re-serialisation by a client
/// does not break the signature, while any change of meaning does.
pub fn canonical(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v) => {
            let mut out = String::new();
            write_canonical(&v, &mut out);
            out
        }
        Err(_) => arguments.to_owned(),
    }
}

pub fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_sorts_nested_keys() {
        assert_eq!(
            canonical(r#"{"b":1,"a":{"d":[1,{"f":2,"e":3}],"c":null}}"#),
            r#"{"a":{"c":null,"d":[1,{"e":3,"f":2}]},"b":1}"#
        );
    }
}
