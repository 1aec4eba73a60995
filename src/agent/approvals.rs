//! Signed approval tokens. A paused call carries a token over its id, tool name and canonical
//! arguments; on resume only calls whose token verifies may run, so a client cannot smuggle an
//! "approved" command in through the history. The key comes from config so any replica can
//! verify; without one a random per-process key is used (resumes then need the same process).

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

const VERSION: &str = "v1";
/// How long a pending approval stays valid.
const TTL_SECS: u64 = 30 * 24 * 3600;

pub struct ApprovalSigner {
    key: Vec<u8>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum TokenError {
    Missing,
    Malformed,
    Expired,
    BadSignature,
}

impl ApprovalSigner {
    /// `key` from config (`approvals.signing_key`, HOLMES_APPROVAL_SIGNING_KEY).
    pub fn new(key: Option<&str>) -> ApprovalSigner {
        match key.map(str::trim).filter(|k| !k.is_empty()) {
            Some(k) => ApprovalSigner {
                key: k.as_bytes().to_vec(),
            },
            // The server warns about this at start-up; a one-shot CLI command has no one to
            // resume elsewhere.
            None => {
                let key: [u8; 32] = rand::random();
                ApprovalSigner { key: key.to_vec() }
            }
        }
    }

    pub fn sign(&self, call_id: &str, tool_name: &str, arguments: &str) -> String {
        self.sign_until(call_id, tool_name, arguments, now() + TTL_SECS)
    }

    fn sign_until(&self, call_id: &str, tool_name: &str, arguments: &str, expires: u64) -> String {
        let sig = self
            .mac(call_id, tool_name, arguments, expires)
            .finalize()
            .into_bytes();
        format!("{VERSION}.{expires}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    pub fn verify(
        &self,
        token: Option<&str>,
        call_id: &str,
        tool_name: &str,
        arguments: &str,
    ) -> Result<(), TokenError> {
        let token = token.ok_or(TokenError::Missing)?;
        let mut parts = token.splitn(3, '.');
        let (Some(VERSION), Some(expires), Some(sig)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let expires: u64 = expires.parse().map_err(|_| TokenError::Malformed)?;
        let sig = URL_SAFE_NO_PAD
            .decode(sig)
            .map_err(|_| TokenError::Malformed)?;
        // Constant-time comparison.
        self.mac(call_id, tool_name, arguments, expires)
            .verify_slice(&sig)
            .map_err(|_| TokenError::BadSignature)?;
        if expires < now() {
            return Err(TokenError::Expired);
        }
        Ok(())
    }

    fn mac(&self, call_id: &str, tool_name: &str, arguments: &str, expires: u64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        for part in [
            VERSION,
            &expires.to_string(),
            call_id,
            tool_name,
            &canonical(arguments),
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac
    }
}

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

fn write_canonical(v: &Value, out: &mut String) {
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

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tampering() {
        let s = ApprovalSigner::new(Some("k"));
        let t = s.sign("c1", "bash", r#"{"command":"rm -rf /tmp/x","timeout":5}"#);
        assert_eq!(
            s.verify(
                Some(&t),
                "c1",
                "bash",
                r#"{"timeout": 5, "command": "rm -rf /tmp/x"}"#
            ),
            Ok(())
        );
        assert_eq!(
            s.verify(
                Some(&t),
                "c1",
                "bash",
                r#"{"command":"rm -rf /","timeout":5}"#
            ),
            Err(TokenError::BadSignature)
        );
        assert_eq!(
            s.verify(
                Some(&t),
                "c2",
                "bash",
                r#"{"command":"rm -rf /tmp/x","timeout":5}"#
            ),
            Err(TokenError::BadSignature)
        );
        assert_eq!(
            s.verify(
                Some(&t),
                "c1",
                "kubectl",
                r#"{"command":"rm -rf /tmp/x","timeout":5}"#
            ),
            Err(TokenError::BadSignature)
        );
        assert_eq!(s.verify(None, "c1", "bash", "{}"), Err(TokenError::Missing));
        assert_eq!(
            s.verify(Some("v1.x.y"), "c1", "bash", "{}"),
            Err(TokenError::Malformed)
        );
        let other = ApprovalSigner::new(Some("other key"));
        assert_eq!(
            other.verify(
                Some(&t),
                "c1",
                "bash",
                r#"{"command":"rm -rf /tmp/x","timeout":5}"#
            ),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn expired_tokens_fail() {
        let s = ApprovalSigner::new(Some("k"));
        let t = s.sign_until("c", "bash", "{}", 1);
        assert_eq!(
            s.verify(Some(&t), "c", "bash", "{}"),
            Err(TokenError::Expired)
        );
        // Moving the expiry breaks the signature.
        let forged = t.replacen(".1.", &format!(".{}.", now() + 100), 1);
        assert_eq!(
            s.verify(Some(&forged), "c", "bash", "{}"),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn canonical_sorts_nested_keys() {
        assert_eq!(
            canonical(r#"{"b":1,"a":{"d":[1,{"f":2,"e":3}],"c":null}}"#),
            r#"{"a":{"c":null,"d":[1,{"e":3,"f":2}]},"b":1}"#
        );
    }
}
