//! A message's `content`: JSON as clients and models write it, or the text of a system prompt
//! that every run using it shares. The prompt is several KB and a server holds thousands of
//! runs at once; each kept its own copy (6.6 KB of the ~49 KB an open stream costs).

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::known_json;

#[derive(Debug, Clone, Default)]
pub enum Content {
    /// No `content` key (an assistant reply that only calls tools).
    #[default]
    Absent,
    /// A string, or an array of content parts (vision).
    Json(Value),
    /// A string shared with other messages; written and compared as the string it holds.
    Shared(Arc<str>),
}

impl Content {
    pub fn text(text: impl Into<String>) -> Self {
        Content::Json(Value::String(text.into()))
    }

    pub fn is_absent(&self) -> bool {
        matches!(self, Content::Absent)
    }

    /// The string, when the content is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Content::Json(Value::String(s)) => Some(s),
            Content::Shared(s) => Some(s),
            _ => None,
        }
    }

    /// The content parts, when the content is an array of them.
    pub fn parts(&self) -> Option<&[Value]> {
        match self {
            Content::Json(Value::Array(parts)) => Some(parts),
            _ => None,
        }
    }

    /// The content as JSON; a shared string is copied.
    pub fn as_value(&self) -> Option<Cow<'_, Value>> {
        match self {
            Content::Absent => None,
            Content::Json(v) => Some(Cow::Borrowed(v)),
            Content::Shared(s) => Some(Cow::Owned(Value::String(s.to_string()))),
        }
    }
}

impl From<Option<Value>> for Content {
    /// `null` is read as no content, as `Option<Value>` reads it.
    fn from(value: Option<Value>) -> Self {
        match value {
            None | Some(Value::Null) => Content::Absent,
            Some(v) => Content::Json(v),
        }
    }
}

impl PartialEq for Content {
    fn eq(&self, other: &Self) -> bool {
        match (self.as_str(), other.as_str()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => match (self, other) {
                (Content::Json(a), Content::Json(b)) => a == b,
                (Content::Absent, Content::Absent) => true,
                _ => false,
            },
            _ => false,
        }
    }
}

impl Serialize for Content {
    /// Strings go through `known_json`, so a system prompt is written from its stored JSON.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Content::Absent => s.serialize_none(),
            Content::Json(Value::String(text)) => known_json::Str(text).serialize(s),
            Content::Json(v) => v.serialize(s),
            Content::Shared(text) => known_json::Str(text).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<Value>::deserialize(d).map(Content::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_shared_string_reads_writes_and_compares_as_the_string() {
        let shared = Content::Shared(Arc::from("You are a helpful SRE."));
        let owned = Content::text("You are a helpful SRE.");
        assert_eq!(shared, owned);
        assert_ne!(shared, Content::text("something else"));
        assert_eq!(shared.as_str(), Some("You are a helpful SRE."));
        assert_eq!(
            serde_json::to_value(&shared).unwrap(),
            json!("You are a helpful SRE.")
        );
        assert_eq!(
            shared.as_value().as_deref(),
            Some(&json!("You are a helpful SRE."))
        );
    }

    #[test]
    fn null_and_parts_read_as_option_value_did() {
        let absent: Content = serde_json::from_value(Value::Null).unwrap();
        assert!(absent.is_absent());
        let parts: Content =
            serde_json::from_value(json!([{"type": "text", "text": "hi"}])).unwrap();
        assert_eq!(parts.parts().map(<[Value]>::len), Some(1));
        assert_eq!(parts.as_str(), None);
        assert_ne!(parts, Content::Absent);
    }
}
