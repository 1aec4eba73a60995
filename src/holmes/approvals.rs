//! Signed approval tokens. A paused call carries a token over its id, tool name, canonical
//! arguments and a digest of the conversation before it; on resume only calls whose token
//! verifies may run, so a client cannot smuggle an "approved" command in through the history,
//! nor move a real token into a conversation it built. The key comes from config so any replica
//! can verify; without one a random per-process key is used (resumes then need the same process).

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::agent::canonical::{canonical, write_canonical};
use crate::wire::Message;
use crate::wire::message::Content;

const VERSION: &str = "v2";

pub struct ApprovalSigner {
    key: Vec<u8>,
    /// How long a pending approval stays valid (approvals.token_ttl_secs).
    ttl_secs: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum TokenError {
    Missing,
    Malformed,
    Expired,
    BadSignature,
    /// A genuine token, issued for another conversation than the one it arrived in.
    OtherConversation,
}

impl ApprovalSigner {
    /// `key` from config (`approvals.signing_key`, HOLMES_APPROVAL_SIGNING_KEY).
    pub fn new(key: Option<&str>, ttl_secs: u64) -> ApprovalSigner {
        let key = match key.map(str::trim).filter(|k| !k.is_empty()) {
            Some(k) => k.as_bytes().to_vec(),
            // The server warns about this at start-up; a one-shot CLI command has no one to
            // resume elsewhere.
            None => rand::random::<[u8; 32]>().to_vec(),
        };
        ApprovalSigner { key, ttl_secs }
    }

    pub fn ttl_secs(&self) -> u64 {
        self.ttl_secs
    }

    /// A token for a call paused after `digest` (`conversation_digest` of the history up to
    /// and including the assistant message that asked for it).
    pub fn sign(&self, call_id: &str, tool_name: &str, arguments: &str, digest: &str) -> String {
        self.sign_until(call_id, tool_name, arguments, digest, now() + self.ttl_secs)
    }

    fn sign_until(
        &self,
        call_id: &str,
        tool_name: &str,
        arguments: &str,
        digest: &str,
        expires: u64,
    ) -> String {
        let sig = self
            .mac(call_id, tool_name, arguments, digest, expires)
            .finalize()
            .into_bytes();
        format!(
            "{VERSION}.{expires}.{digest}.{}",
            URL_SAFE_NO_PAD.encode(sig)
        )
    }

    /// Checks a token against the call and the digest of the history it arrived in. A token
    /// this server signed for another history is `OtherConversation`, told apart from a forgery.
    pub fn verify(
        &self,
        token: Option<&str>,
        call_id: &str,
        tool_name: &str,
        arguments: &str,
        digest: &str,
    ) -> Result<(), TokenError> {
        let token = token.ok_or(TokenError::Missing)?;
        let mut parts = token.splitn(4, '.');
        let (Some(VERSION), Some(expires), Some(bound), Some(sig)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let expires: u64 = expires.parse().map_err(|_| TokenError::Malformed)?;
        let sig = URL_SAFE_NO_PAD
            .decode(sig)
            .map_err(|_| TokenError::Malformed)?;
        // Constant-time comparison.
        self.mac(call_id, tool_name, arguments, bound, expires)
            .verify_slice(&sig)
            .map_err(|_| TokenError::BadSignature)?;
        if bound != digest {
            return Err(TokenError::OtherConversation);
        }
        if expires < now() {
            return Err(TokenError::Expired);
        }
        Ok(())
    }

    fn mac(
        &self,
        call_id: &str,
        tool_name: &str,
        arguments: &str,
        digest: &str,
        expires: u64,
    ) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        for part in [
            VERSION,
            &expires.to_string(),
            digest,
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

/// Why a request is refused whose pending call carries a genuine token issued for another
/// conversation.
pub fn moved_token_message(call_id: &str) -> String {
    format!(
        "The approval token of tool call '{call_id}' was issued for a different conversation: a \
         token is bound to the history before the call it approves, which must be sent back \
         unchanged"
    )
}

/// A digest of a conversation prefix, over what a client cannot change without changing the
/// conversation: each message's role, content, tool-call id and tool calls (id, name, canonical
/// arguments). System messages are left out (triage regenerates the prompt every turn), as are
/// triage's bookkeeping (`token_count`, approval flags) and fields a client may re-serialise.
pub fn conversation_digest(prefix: &[Message]) -> String {
    let mut hash = Sha256::new();
    let mut part = |text: &str| {
        hash.update((text.len() as u64).to_be_bytes());
        hash.update(text.as_bytes());
    };
    for m in prefix.iter().filter(|m| !m.is_role("system")) {
        part(&m.role);
        match (&m.content, m.content.as_str()) {
            (_, Some(text)) => part(&format!("s:{text}")),
            (Content::Json(other), None) if !other.is_null() => {
                let mut json = String::from("j:");
                write_canonical(other, &mut json);
                part(&json);
            }
            _ => part("s:"),
        }
        part(m.tool_call_id.as_deref().unwrap_or_default());
        part(&m.tool_calls().len().to_string());
        for call in m.tool_calls() {
            part(&call.id);
            part(&call.function.name);
            part(&canonical(&call.function.arguments));
        }
    }
    // 128 bits: collisions are out of reach, and the token stays short.
    URL_SAFE_NO_PAD.encode(&hash.finalize()[..16])
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
    use crate::wire::ToolCall;
    use serde_json::json;

    const D: &str = "digest";

    #[test]
    fn round_trip_and_tampering() {
        let s = ApprovalSigner::new(Some("k"), 3600);
        let args = r#"{"command":"rm -rf /tmp/x","timeout":5}"#;
        let t = s.sign("c1", "bash", args, D);
        let reordered = r#"{"timeout": 5, "command": "rm -rf /tmp/x"}"#;
        assert_eq!(s.verify(Some(&t), "c1", "bash", reordered, D), Ok(()));
        let bad = Err(TokenError::BadSignature);
        let altered = r#"{"command":"rm -rf /","timeout":5}"#;
        assert_eq!(s.verify(Some(&t), "c1", "bash", altered, D), bad);
        assert_eq!(s.verify(Some(&t), "c2", "bash", args, D), bad);
        assert_eq!(s.verify(Some(&t), "c1", "kubectl", args, D), bad);
        assert_eq!(
            s.verify(Some(&t), "c1", "bash", args, "other"),
            Err(TokenError::OtherConversation)
        );
        // Rebinding the token to the other digest breaks the signature.
        let rebound = t.replacen(&format!(".{D}."), ".other.", 1);
        assert_eq!(s.verify(Some(&rebound), "c1", "bash", args, "other"), bad);
        assert_eq!(
            s.verify(None, "c1", "bash", "{}", D),
            Err(TokenError::Missing)
        );
        let malformed = Err(TokenError::Malformed);
        assert_eq!(s.verify(Some("v2.x.y.z"), "c1", "bash", "{}", D), malformed);
        // A token of the earlier format (not bound to a conversation) is not accepted.
        assert_eq!(
            s.verify(Some("v1.9.AAAA"), "c1", "bash", "{}", D),
            malformed
        );
        let other = ApprovalSigner::new(Some("other key"), 3600);
        assert_eq!(other.verify(Some(&t), "c1", "bash", args, D), bad);
    }

    #[test]
    fn expired_tokens_fail() {
        let s = ApprovalSigner::new(Some("k"), 3600);
        let t = s.sign_until("c", "bash", "{}", D, 1);
        assert_eq!(
            s.verify(Some(&t), "c", "bash", "{}", D),
            Err(TokenError::Expired)
        );
        // Moving the expiry breaks the signature.
        let forged = t.replacen(".1.", &format!(".{}.", now() + 100), 1);
        assert_eq!(
            s.verify(Some(&forged), "c", "bash", "{}", D),
            Err(TokenError::BadSignature)
        );
        // The lifetime is the configured one.
        let t = ApprovalSigner::new(Some("k"), 60).sign("c", "bash", "{}", D);
        let expires: u64 = t.split('.').nth(1).unwrap().parse().unwrap();
        assert!(expires <= now() + 60 && expires + 5 >= now() + 60);
    }

    fn history(question: &str) -> Vec<Message> {
        let call = ToolCall::new("c".into(), "bash".into(), r#"{"command":"rm x"}"#.into());
        vec![
            Message::system("prompt"),
            Message::user(json!(question)),
            Message::assistant(None, None, vec![call]),
        ]
    }

    #[test]
    fn the_digest_ignores_what_clients_re_serialise_and_nothing_else() {
        let base = conversation_digest(&history("why?"));
        let mut same = history("why?");
        same[0] = Message::system("another prompt");
        same[1].token_count = Some(7);
        same[2].content = Content::Json(serde_json::Value::Null);
        let calls = same[2].tool_calls.as_mut().unwrap();
        calls[0].pending_approval = Some(true);
        calls[0].approval_token = Some("t".into());
        calls[0].function.arguments = r#"{ "command" : "rm x" }"#.into();
        assert_eq!(conversation_digest(&same), base);
        assert_ne!(conversation_digest(&history("why not?")), base);
        let mut more = history("why?");
        more.insert(1, Message::user(json!("earlier")));
        assert_ne!(conversation_digest(&more), base);
    }
}
