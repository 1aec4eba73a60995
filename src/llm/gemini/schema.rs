//! JSON Schema (as tools and `response_format` carry it) translated to the OpenAPI subset
//! Gemini's `Schema` takes. Gemini refuses a request naming a key outside the subset
//! (`additionalProperties`, `$ref`, `$schema`, `const`, type arrays…), so: `$ref` is inlined from
//! `$defs`/`definitions` (a recursive one, past a depth, becomes a bare object); `oneOf` becomes
//! `anyOf`; a type array or an `anyOf` member of type `null` becomes `nullable`; `const` becomes
//! a one-value `enum`; enum values become strings (Gemini enums are string enums); a single
//! `allOf` member is inlined and several are merged; every other key outside the subset is
//! dropped, and `required` keeps only properties that exist.

use serde_json::{Map, Value, json};

/// How deep `$ref`s are followed: a recursive schema ends there as a bare object.
const MAX_REF_DEPTH: usize = 8;

/// Keys of Gemini's `Schema` whose value is kept as written.
const PLAIN_KEYS: &[&str] = &[
    "description",
    "title",
    "nullable",
    "maxItems",
    "minItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
];

/// String formats Gemini accepts, by type; others are dropped.
fn format_allowed(kind: &str, format: &str) -> bool {
    matches!(
        (kind, format),
        ("string", "enum" | "date-time")
            | ("integer", "int32" | "int64")
            | ("number", "float" | "double")
    )
}

/// `schema` in Gemini's subset.
pub fn translate(schema: &Value) -> Value {
    let defs = definitions(schema);
    convert(schema, &defs, 0)
}

fn definitions(schema: &Value) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = schema.get(key) {
            for (name, s) in d {
                defs.insert(format!("#/{key}/{name}"), s.clone());
            }
        }
    }
    defs
}

fn convert(schema: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    let Value::Object(obj) = schema else {
        // `true` / `{}`-like schemas: anything goes, which Gemini cannot say; a string is the
        // least surprising carrier.
        return json!({"type": "string"});
    };
    if let Some(target) = obj.get("$ref").and_then(Value::as_str) {
        return match defs.get(target) {
            Some(def) if depth < MAX_REF_DEPTH => {
                let mut inlined = convert(def, defs, depth + 1);
                if let (Some(d), Value::Object(o)) = (obj.get("description"), &mut inlined) {
                    o.insert("description".into(), d.clone());
                }
                inlined
            }
            _ => json!({"type": "object"}),
        };
    }
    if let Some(Value::Array(all)) = obj.get("allOf") {
        let mut merged = obj.clone();
        merged.remove("allOf");
        for member in all {
            let member = resolve_ref(member, defs);
            merge_into(&mut merged, &member);
        }
        return convert(&Value::Object(merged), defs, depth + 1);
    }
    let mut out = Map::new();
    let mut nullable = false;
    match obj.get("type") {
        Some(Value::String(t)) if t == "null" => nullable = true,
        Some(Value::String(t)) => {
            out.insert("type".into(), json!(t));
        }
        Some(Value::Array(types)) => {
            let real: Vec<&Value> = types
                .iter()
                .filter(|t| t.as_str() != Some("null"))
                .collect();
            nullable = real.len() < types.len();
            match real.as_slice() {
                [one] => {
                    out.insert("type".into(), (*one).clone());
                }
                [] => {}
                many => {
                    let mut members = Vec::new();
                    for t in many {
                        let mut member = obj.clone();
                        member.insert("type".into(), (*t).clone());
                        members.push(convert(&Value::Object(member), defs, depth + 1));
                    }
                    out.insert("anyOf".into(), Value::Array(members));
                }
            }
        }
        _ => {}
    }
    let union = obj.get("anyOf").or_else(|| obj.get("oneOf"));
    if let Some(Value::Array(members)) = union {
        let mut kept = Vec::new();
        for m in members {
            if m.get("type").and_then(Value::as_str) == Some("null") {
                nullable = true;
            } else {
                kept.push(convert(m, defs, depth + 1));
            }
        }
        match kept.len() {
            // `anyOf: [X, null]`, the usual optional field: X itself, nullable.
            1 => {
                if let Some(Value::Object(only)) = kept.pop() {
                    for (k, v) in only {
                        out.entry(k).or_insert(v);
                    }
                }
            }
            0 => {}
            _ => {
                out.insert("anyOf".into(), Value::Array(kept));
            }
        }
    }
    for key in PLAIN_KEYS {
        if let Some(v) = obj.get(*key) {
            out.insert((*key).into(), v.clone());
        }
    }
    let enum_values = match (obj.get("enum"), obj.get("const")) {
        (Some(Value::Array(values)), _) => Some(values.clone()),
        (None, Some(c)) => Some(vec![c.clone()]),
        _ => None,
    };
    if let Some(values) = enum_values {
        let strings: Vec<Value> = values
            .iter()
            .filter_map(|v| match v {
                Value::Null => {
                    nullable = true;
                    None
                }
                Value::String(s) => Some(json!(s)),
                other => Some(json!(other.to_string())),
            })
            .collect();
        out.insert("type".into(), json!("string"));
        out.insert("enum".into(), Value::Array(strings));
    }
    if let Some(Value::String(format)) = obj.get("format") {
        let kind = out.get("type").and_then(Value::as_str).unwrap_or("");
        if format_allowed(kind, format) {
            out.insert("format".into(), json!(format));
        }
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        let converted: Map<String, Value> = props
            .iter()
            .map(|(k, v)| (k.clone(), convert(v, defs, depth + 1)))
            .collect();
        if let Some(Value::Array(required)) = obj.get("required") {
            let required: Vec<Value> = required
                .iter()
                .filter(|r| r.as_str().is_some_and(|r| converted.contains_key(r)))
                .cloned()
                .collect();
            if !required.is_empty() {
                out.insert("required".into(), Value::Array(required));
            }
        }
        out.insert("properties".into(), Value::Object(converted));
        out.entry("type").or_insert_with(|| json!("object"));
    }
    if let Some(items) = obj.get("items") {
        let items = match items {
            // Tuple form: Gemini has one item schema; the first stands for all.
            Value::Array(list) => list.first().cloned().unwrap_or(json!({})),
            one => one.clone(),
        };
        out.insert("items".into(), convert(&items, defs, depth + 1));
        out.entry("type").or_insert_with(|| json!("array"));
    }
    if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
        out.insert("items".into(), json!({"type": "string"}));
    }
    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    Value::Object(out)
}

fn resolve_ref(schema: &Value, defs: &Map<String, Value>) -> Value {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| defs.get(r))
        .cloned()
        .unwrap_or_else(|| schema.clone())
}

/// `allOf` member merged into `into`: properties and `required` are unions, other keys kept
/// from the first that names them.
fn merge_into(into: &mut Map<String, Value>, member: &Value) {
    let Value::Object(member) = member else {
        return;
    };
    for (k, v) in member {
        match (k.as_str(), into.get_mut(k), v) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (p, s) in theirs {
                    mine.entry(p.clone()).or_insert_with(|| s.clone());
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                mine.extend(
                    theirs
                        .iter()
                        .filter(|r| !mine.contains(r))
                        .cloned()
                        .collect::<Vec<_>>(),
                );
            }
            (_, None, _) => {
                into.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
}

/// Keys anywhere in a translated schema that Gemini would refuse (for tests and the fake's
/// mirror of the rule): empty when the schema is within the subset.
#[cfg(test)]
fn outside_subset(schema: &Value, path: &str, found: &mut Vec<String>) {
    const ALLOWED: &[&str] = &[
        "type",
        "format",
        "description",
        "title",
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
        "anyOf",
        "items",
        "minimum",
        "maximum",
    ];
    let Value::Object(obj) = schema else { return };
    for (k, v) in obj {
        if !ALLOWED.contains(&k.as_str()) {
            found.push(format!("{path}.{k}"));
        }
        match (k.as_str(), v) {
            ("properties", Value::Object(props)) => {
                for (p, s) in props {
                    outside_subset(s, &format!("{path}.{p}"), found);
                }
            }
            ("items", s) => outside_subset(s, &format!("{path}[]"), found),
            ("anyOf", Value::Array(members)) => {
                for m in members {
                    outside_subset(m, &format!("{path}|"), found);
                }
            }
            ("type", t) if !t.is_string() => found.push(format!("{path}.type (not a string)")),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_schema_lands_inside_the_subset() {
        let hostile = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "x", "type": "object", "additionalProperties": false,
            "$defs": {
                "node": {"type": "object", "properties": {
                    "name": {"type": "string", "format": "hostname"},
                    "child": {"$ref": "#/$defs/node"}}},
                "mode": {"enum": ["a", 1, null]}
            },
            "properties": {
                "tree": {"$ref": "#/$defs/node", "description": "a tree"},
                "maybe": {"type": ["string", "null"], "examples": ["x"]},
                "either": {"oneOf": [{"type": "integer", "format": "int64"}, {"type": "string"}]},
                "optional": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": 1},
                "fixed": {"const": "v1"},
                "mode": {"$ref": "#/$defs/mode"},
                "list": {"type": "array", "uniqueItems": true},
                "merged": {"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]},
                                     {"properties": {"b": {"type": "boolean"}}}]},
                "free": {"type": "object", "patternProperties": {".*": {"type": "string"}}}
            },
            "required": ["tree", "ghost"]
        });
        let out = translate(&hostile);
        let mut found = Vec::new();
        outside_subset(&out, "$", &mut found);
        assert!(found.is_empty(), "{found:?}\n{out:#}");
        let p = &out["properties"];
        assert_eq!(out["required"], json!(["tree"]));
        assert_eq!(p["tree"]["description"], "a tree");
        assert_eq!(p["tree"]["properties"]["name"], json!({"type": "string"}));
        assert_eq!(p["maybe"], json!({"type": "string", "nullable": true}));
        assert_eq!(
            p["either"]["anyOf"][0],
            json!({"type": "integer", "format": "int64"})
        );
        assert_eq!(p["optional"], json!({"type": "number", "nullable": true}));
        assert_eq!(p["fixed"], json!({"type": "string", "enum": ["v1"]}));
        assert_eq!(
            p["mode"],
            json!({"type": "string", "enum": ["a", "1"], "nullable": true})
        );
        assert_eq!(p["list"]["items"], json!({"type": "string"}));
        assert_eq!(p["merged"]["required"], json!(["a"]));
        assert_eq!(p["merged"]["properties"]["b"], json!({"type": "boolean"}));
        // The recursion ends in a bare object rather than never.
        let mut depth = 0;
        let mut node = &p["tree"];
        while let Some(child) = node.pointer("/properties/child") {
            node = child;
            depth += 1;
        }
        assert!(depth <= MAX_REF_DEPTH + 1, "{depth}");
    }
}
