//! Tool-call arguments in a canonical form (sorted keys, no spaces): re-serialisation by a
//! client changes nothing, any change of meaning does. The duplicate guard and approval
//! tokens compare calls by it, and the stuck detector canonicalises every call of a turn at
//! each step, so it is read into a tree that borrows the arguments' strings: no `Value`, whose
//! maps hash every key and whose strings are copies, and no formatter per key.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

use crate::wire::known_json::RAW_VALUE_TOKEN;

/// Arguments in a canonical form (sorted keys, no spaces) so that re-serialisation by a client
/// does not break the signature, while any change of meaning does. Text that is not JSON is
/// its own canonical form.
pub fn canonical(arguments: &str) -> String {
    let mut out = Vec::with_capacity(arguments.len());
    if let Ok(node) = serde_json::from_str::<Node<'_>>(arguments) {
        node.write(&mut out);
    } else if let Ok(value) = serde_json::from_str::<Value>(arguments) {
        // What the borrowed tree refuses but a `Value` reads (serde_json's raw-value object,
        // which `Value` reads as the JSON it wraps, as the tool will): read as the tool reads it.
        Node::from(&value).write(&mut out);
    } else {
        return arguments.to_owned();
    }
    into_string(out)
}

/// The canonical form of arguments already read as a `Value`: `canonical` of the text they
/// were read from, without reading it again.
pub fn canonical_value(v: &Value) -> String {
    let mut bytes = Vec::new();
    Node::from(v).write(&mut bytes);
    into_string(bytes)
}

/// Appends `v` in the canonical form.
pub fn write_canonical(v: &Value, out: &mut String) {
    out.push_str(&canonical_value(v));
}

/// Only serde_json's output and ASCII punctuation are ever written.
fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
}

/// A JSON document as parsed, strings borrowed where they hold no escapes.
enum Node<'a> {
    Scalar(Scalar<'a>),
    Array(Vec<Node<'a>>),
    /// In document order; a repeated key's last value counts, as in `Value`.
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

enum Scalar<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
}

/// A parsed `Value` as a tree borrowing its strings, so one writer serves both.
impl<'a> From<&'a Value> for Node<'a> {
    fn from(v: &'a Value) -> Node<'a> {
        match v {
            Value::Null => Node::Scalar(Scalar::Null),
            Value::Bool(b) => Node::Scalar(Scalar::Bool(*b)),
            Value::Number(n) => Node::Scalar(Scalar::Number(n.clone())),
            Value::String(s) => Node::Scalar(Scalar::String(Cow::Borrowed(s))),
            Value::Array(items) => Node::Array(items.iter().map(Node::from).collect()),
            Value::Object(map) => Node::Object(
                map.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Node::from(v)))
                    .collect(),
            ),
        }
    }
}

impl Node<'_> {
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Node::Scalar(Scalar::Null) => out.extend_from_slice(b"null"),
            Node::Scalar(Scalar::Bool(b)) => {
                out.extend_from_slice(if *b { b"true" } else { b"false" })
            }
            Node::Scalar(Scalar::Number(n)) => write_json(out, n),
            Node::Scalar(Scalar::String(s)) => write_json(out, s.as_ref()),
            Node::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write(out);
                }
                out.push(b']');
            }
            Node::Object(entries) => {
                let mut sorted: Vec<&(Cow<'_, str>, Node<'_>)> = entries.iter().collect();
                // Stable: of a repeated key, the last in the document stays last.
                sorted.sort_by(|a, b| a.0.cmp(&b.0));
                out.push(b'{');
                let mut first = true;
                for (i, (key, value)) in sorted.iter().map(|e| (&e.0, &e.1)).enumerate() {
                    if sorted.get(i + 1).is_some_and(|next| next.0 == *key) {
                        continue;
                    }
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    write_json(out, key.as_ref());
                    out.push(b':');
                    value.write(out);
                }
                out.push(b'}');
            }
        }
    }
}

/// serde_json's compact form of a key or scalar, as `Value`'s `Display` writes it.
fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing to memory cannot fail, and strings and numbers always serialise.
    let _ = serde_json::to_writer(out, value);
}

/// An object key, borrowed when it holds no escape.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
                checked(Cow::Borrowed(s))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                checked(Cow::Owned(s.to_owned()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Key<'de>, E> {
                checked(Cow::Owned(s))
            }
        }
        /// The raw-value key, however escaped, sends the arguments to the `Value` reader.
        fn checked<E: de::Error>(key: Cow<'_, str>) -> Result<Key<'_>, E> {
            if key == RAW_VALUE_TOKEN {
                return Err(E::custom("a serde_json raw value"));
            }
            Ok(Key(key))
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Node<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Node<'de>, E> {
                Ok(Node::Scalar(Scalar::Null))
            }
            fn visit_bool<E>(self, b: bool) -> Result<Node<'de>, E> {
                Ok(Node::Scalar(Scalar::Bool(b)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Node<'de>, E> {
                Ok(Node::Scalar(Scalar::Number(n.into())))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Node<'de>, E> {
                Ok(Node::Scalar(Scalar::Number(n.into())))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Node<'de>, E> {
                // As `Value` reads it: a float JSON cannot hold is null.
                Ok(Node::Scalar(
                    Number::from_f64(n).map_or(Scalar::Null, Scalar::Number),
                ))
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Node<'de>, E> {
                Ok(Node::Scalar(Scalar::String(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Node<'de>, E> {
                Ok(Node::Scalar(Scalar::String(Cow::Owned(s.to_owned()))))
            }
            fn visit_string<E>(self, s: String) -> Result<Node<'de>, E> {
                Ok(Node::Scalar(Scalar::String(Cow::Owned(s))))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<Key<'de>, Node<'de>>()? {
                    entries.push((key.0, value));
                }
                Ok(Node::Object(entries))
            }
        }
        d.deserialize_any(NodeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The form approval tokens were signed with before the borrowed tree: the reference.
    fn reference(arguments: &str) -> String {
        fn write(v: &Value, out: &mut String) {
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
                        write(&map[k], out);
                    }
                    out.push('}');
                }
                Value::Array(items) => {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        write(item, out);
                    }
                    out.push(']');
                }
                other => out.push_str(&other.to_string()),
            }
        }
        match serde_json::from_str::<Value>(arguments) {
            Ok(v) => {
                let mut out = String::new();
                write(&v, &mut out);
                out
            }
            Err(_) => arguments.to_owned(),
        }
    }

    #[test]
    fn canonical_sorts_nested_keys() {
        assert_eq!(
            canonical(r#"{"b":1,"a":{"d":[1,{"f":2,"e":3}],"c":null}}"#),
            r#"{"a":{"c":null,"d":[1,{"e":3,"f":2}]},"b":1}"#
        );
    }

    #[test]
    fn escapes_numbers_repeats_and_non_json_read_as_before() {
        for text in [
            r#"{"k\u0065y":"a\"b\\c\n\u00e9\ud83d\ude00","key":1}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#"{ "n": [1.0, -0, 1e2, 12345678901234567890, -9223372036854775808, 0.1] }"#,
            r#"{"é":1,"e":2,"E":3,"":4}"#,
            r#"[true,false,null,"x",{}]"#,
            "\"just a string\"",
            "42",
            r#"{"$serde_json::private::RawValue":"[1, 2]"}"#,
            r#"{"\u0024serde_json::private::RawValue":"{\"b\":1,\"a\":2}"}"#,
            r#"[{"$serde_json::private::RawValue":" 5 "}]"#,
            r#"{"a":1,"$serde_json::private::RawValue":"2"}"#,
            r#"{"\u0024serde_json::private::RawValue":true, "x": -0.0}"#,
            "not json",
            "{\"a\":1",
            "",
        ] {
            assert_eq!(canonical(text), reference(text), "{text}");
        }
        assert_eq!(canonical(r#"{"a":1,"b":2,"a":3}"#), r#"{"a":3,"b":2}"#);
    }

    #[test]
    fn json_content_is_written_in_the_same_form() {
        let v: Value = serde_json::from_str(r#"[{"type":"text","text":"hi","a":[2,1]}]"#).unwrap();
        let mut out = String::from("j:");
        write_canonical(&v, &mut out);
        assert_eq!(out, r#"j:[{"a":[2,1],"text":"hi","type":"text"}]"#);
    }

    fn json_text() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            Just("a".to_owned()),
            Just("b".to_owned()),
            Just("\\u0061".to_owned()),
            Just("é".to_owned()),
            Just("\\n".to_owned()),
            Just(RAW_VALUE_TOKEN.to_owned()),
            Just("\\u0024serde_json::private::RawValue".to_owned()),
            "[a-zA-Z_]{0,6}",
        ];
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            "[ -~]{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap()),
            Just(r#""\u00e9\ud83d\ude00\t""#.to_owned()),
        ];
        leaf.prop_recursive(4, 32, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5)
                    .prop_map(|items| format!("[ {} ]", items.join(" , "))),
                prop::collection::vec((key.clone(), inner), 0..5).prop_map(|entries| {
                    let body: Vec<String> = entries
                        .iter()
                        .map(|(k, v)| format!("\"{k}\" : {v}"))
                        .collect();
                    format!("{{{}}}", body.join(","))
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Tokens signed before this change still verify: the same text for any document,
        /// repeated keys, escapes and number forms included.
        #[test]
        fn canonical_form_is_unchanged(text in json_text()) {
            prop_assert_eq!(canonical(&text), reference(&text));
        }

        /// The duplicate guard keys a call by the arguments it already read for the tool.
        #[test]
        fn a_value_read_from_text_has_the_texts_canonical_form(text in json_text()) {
            match serde_json::from_str::<Value>(&text) {
                Ok(value) => prop_assert_eq!(canonical_value(&value), canonical(&text)),
                Err(_) => prop_assert_eq!(text.clone(), canonical(&text)),
            }
        }
    }
}
