//! The secret registry, a leaf every layer may use: the credentials an application obtains
//! while it runs, and how a name says its value is a credential. The providers that obtain
//! credentials (`llm/`) record them here; the masker (`agent/secrets.rs`) reads them.

use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

/// Shorter values are too likely to occur by chance (and masking them would garble output).
pub const MIN_SECRET_LEN: usize = 6;

/// Rotated credentials keep arriving (an STS session lasts an hour, a Google token too): the
/// oldest are dropped past this many, ten days of hourly pairs, long expired by then.
const MAX_ISSUED: usize = 512;

/// Credentials one application obtains while it runs (AWS session keys from STS or the
/// metadata service, Google access tokens): unknown at start-up, so its maskers also mask
/// these once they are issued. One per application (its model registry makes it), shared by
/// cloning; oldest first. Issued credentials are random strings that do not contain one
/// another, so their order does not matter.
#[derive(Debug, Clone, Default)]
pub struct IssuedSecrets(Arc<RwLock<Vec<String>>>);

impl IssuedSecrets {
    /// The list, also after a panic elsewhere poisoned its lock: masking never fails open.
    pub fn read(&self) -> RwLockReadGuard<'_, Vec<String>> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a credential obtained at run time, so that no response, event or log line
    /// shows it.
    pub fn remember(&self, secret: &str) {
        let secret = secret.trim();
        if secret.len() < MIN_SECRET_LEN || self.read().iter().any(|s| s == secret) {
            return;
        }
        let mut issued = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if issued.iter().any(|s| s == secret) {
            return;
        }
        if issued.len() >= MAX_ISSUED {
            issued.remove(0);
        }
        issued.push(secret.to_owned());
    }
}

/// A name that says its value is a credential (`*_API_KEY`, `*_TOKEN`, `*_PASSWORD`, …).
pub fn is_credential_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    [
        "API_KEY",
        "APIKEY",
        "SECRET",
        "TOKEN",
        "PASSWORD",
        "PASSWD",
        "PRIVATE_KEY",
        "ACCESS_KEY",
    ]
    .iter()
    .any(|marker| name.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_registry_keeps_its_own_credentials_once() {
        let (a, b) = (IssuedSecrets::default(), IssuedSecrets::default());
        a.remember("issued-to-a-only");
        a.remember(" issued-to-a-only ");
        a.remember("short");
        assert_eq!(*a.read(), ["issued-to-a-only"]);
        assert!(b.read().is_empty());
        a.clone().remember("issued-through-a-clone");
        assert_eq!(a.read().len(), 2);
    }
}

/// A configuration error as it may be shown (an HTTP answer, a log line): serde and figment
/// quote the value they could not read (`invalid type: string "sk-…", expected f64`), and in a
/// settings file that value may be a credential put under the wrong key. The quoted strings
/// are replaced by `"…"`; the key path and the expected type, which say what to fix, stay.
pub fn without_quoted_values(message: &str) -> String {
    static QUOTED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"(string|str|char|bytes) "(?:[^"\\]|\\.)*""#).expect("valid regex")
    });
    QUOTED.replace_all(message, r#"$1 "…""#).into_owned()
}

#[cfg(test)]
mod quoted_value_tests {
    use super::without_quoted_values;

    #[test]
    fn quoted_values_are_dropped_and_the_rest_kept() {
        assert_eq!(
            without_quoted_values(
                r#"model 'm': invalid type: string "sk-a\"b", expected f64 at line 3"#
            ),
            r#"model 'm': invalid type: string "…", expected f64 at line 3"#
        );
        assert_eq!(
            without_quoted_values(r#"invalid type: found string "tok", expected a map"#),
            r#"invalid type: found string "…", expected a map"#
        );
        assert_eq!(
            without_quoted_values("unknown field `x`"),
            "unknown field `x`"
        );
    }
}
