//! What a client names a conversation by: its id, title and tags, each a type checked as it is
//! read, so a bad one is refused at the edge naming the field and the code past it holds only
//! good ones.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer};
use uuid::Uuid;

use crate::wire::rules::broken;

/// A title is a line in a list, and each webhook snapshot carries it: its length is bounded.
const TITLE_MAX: usize = 500;
const TAG_VALUE_MAX: usize = 256;

/// A conversation's id as a path or query names it: a UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConversationId(pub Uuid);

impl ConversationId {
    pub fn parse(raw: &str) -> Result<ConversationId, String> {
        Uuid::parse_str(raw)
            .map(ConversationId)
            .map_err(|_| format!("'{raw}' is not a conversation id (a UUID)"))
    }
}

impl From<ConversationId> for Uuid {
    fn from(id: ConversationId) -> Uuid {
        id.0
    }
}

impl<'de> Deserialize<'de> for ConversationId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Cow::<str>::deserialize(deserializer)?;
        ConversationId::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// A title without NUL (PostgreSQL refuses it in text: a 500 otherwise) of at most
/// `TITLE_MAX` characters. Other control characters are kept: what shows a title neutralises
/// them (the CLI does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Title(String);

impl Title {
    pub fn parse(title: String) -> Result<Title, String> {
        if title.contains('\0') {
            return Err("NUL characters are not allowed".into());
        }
        if title.chars().count() > TITLE_MAX {
            return Err(format!("at most {TITLE_MAX} characters"));
        }
        Ok(Title(title))
    }

    pub fn into_inner(self) -> String {
        self.0
    }
}

impl Deref for Title {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Title {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Title {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Title::parse(String::deserialize(deserializer)?).map_err(broken)
    }
}

impl JsonSchema for Title {
    fn schema_name() -> Cow<'static, str> {
        "Title".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "maxLength": TITLE_MAX})
    }
}

/// Tags: keys of lowercase letters and digits, values of at most `TAG_VALUE_MAX` characters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tags(BTreeMap<String, String>);

impl Tags {
    pub fn parse(tags: BTreeMap<String, String>) -> Result<Tags, String> {
        for (key, value) in &tags {
            let lowercase = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
            if key.is_empty() || !key.chars().all(lowercase) {
                return Err(format!(
                    "key '{key}': keys are lowercase letters and digits"
                ));
            }
            if value.chars().count() > TAG_VALUE_MAX {
                return Err(format!(
                    "the value of '{key}': at most {TAG_VALUE_MAX} characters"
                ));
            }
        }
        Ok(Tags(tags))
    }

    pub fn into_inner(self) -> BTreeMap<String, String> {
        self.0
    }
}

impl Deref for Tags {
    type Target = BTreeMap<String, String>;
    fn deref(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Tags::parse(BTreeMap::deserialize(deserializer)?).map_err(broken)
    }
}

impl JsonSchema for Tags {
    fn schema_name() -> Cow<'static, str> {
        "Tags".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "propertyNames": {"pattern": "^[a-z0-9]+$"},
            "additionalProperties": {"type": "string", "maxLength": TAG_VALUE_MAX},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::rules::broken_rule;
    use serde_json::json;

    fn rule_of<T: serde::de::DeserializeOwned + fmt::Debug>(value: serde_json::Value) -> String {
        let e = serde_json::from_value::<T>(value).unwrap_err().to_string();
        broken_rule(&e)
            .unwrap_or_else(|| panic!("not a rule: {e}"))
            .to_owned()
    }

    #[test]
    fn titles_without_nul_up_to_the_limit_read() {
        let long = "é".repeat(TITLE_MAX);
        let title: Title = serde_json::from_value(json!(long)).unwrap();
        assert_eq!(&*title, long);
        assert!(rule_of::<Title>(json!("a\u{0}b")).contains("NUL"));
        assert!(rule_of::<Title>(json!("é".repeat(TITLE_MAX + 1))).contains("at most 500"));
        // A number is a wrong shape, not a broken rule.
        let shape = serde_json::from_value::<Title>(json!(3)).unwrap_err();
        assert_eq!(broken_rule(&shape.to_string()), None);
    }

    #[test]
    fn tag_keys_are_lowercase_alphanumeric_and_values_bounded() {
        let tags: Tags = serde_json::from_value(json!({"team": "sre", "a1": ""})).unwrap();
        assert_eq!(tags.get("team").map(String::as_str), Some("sre"));
        assert!(rule_of::<Tags>(json!({"Team": "x"})).contains("'Team'"));
        assert!(rule_of::<Tags>(json!({"": "x"})).contains("lowercase"));
        assert!(rule_of::<Tags>(json!({"t": "x".repeat(257)})).contains("at most 256"));
    }

    #[test]
    fn a_conversation_id_is_a_uuid_named_when_it_is_not() {
        let id: ConversationId =
            serde_json::from_value(json!("6f1c3a52-5d0b-4c53-9f69-2d1f6a1b9e10")).unwrap();
        assert_eq!(id.0.to_string(), "6f1c3a52-5d0b-4c53-9f69-2d1f6a1b9e10");
        let e = serde_json::from_value::<ConversationId>(json!("nope")).unwrap_err();
        assert_eq!(e.to_string(), "'nope' is not a conversation id (a UUID)");
    }
}
