//! Interrupt ids: an approval token of `/api/chat` (the holmes signer's, bound to the call and
//! to the history before it) with the id of the call it approves in front, since a resume
//! entry names only its interrupt. Nothing here signs or checks: a resumed call goes back to
//! holmes flagged with the token, and is verified there as `/api/chat`'s are. A thread that is
//! a stored conversation has its own ids (`thread_interrupt_id`).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// `<call id, base64url>.<approval token>`; base64url has no `.`, so the first dot ends the id.
pub fn interrupt_id(call_id: &str, token: &str) -> String {
    format!("{}.{token}", URL_SAFE_NO_PAD.encode(call_id))
}

/// The call id and the token an interrupt id carries, or why it carries none.
pub fn parse_interrupt_id(id: &str) -> Result<(String, &str), &'static str> {
    let (call, token) = id
        .split_once('.')
        .ok_or("it is not an interrupt id this server issued (no token)")?;
    let call = URL_SAFE_NO_PAD
        .decode(call)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or("it is not an interrupt id this server issued (no tool call id)")?;
    Ok((call, token))
}

/// A thread's interrupt id for call `call_id` of conversation `conversation`:
/// `<conversation id>:<tool call id>`. The conversation holds the pending call, so there is
/// nothing to sign; the prefix binds the id to its thread.
pub fn thread_interrupt_id(conversation: uuid::Uuid, call_id: &str) -> String {
    format!("{conversation}:{call_id}")
}

/// The call a thread's interrupt id names, if it was issued for `conversation` (a UUID has no
/// `:`, so the first one ends it).
pub fn thread_call(conversation: uuid::Uuid, id: &str) -> Option<&str> {
    let (owner, call) = id.split_once(':')?;
    (uuid::Uuid::parse_str(owner).ok()? == conversation).then_some(call)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_whatever_the_call_id() {
        for call in ["call_1", "a.b.c", "tool:ü/42", ""] {
            let id = interrupt_id(call, "v2.1.d.sig");
            assert_eq!(parse_interrupt_id(&id), Ok((call.to_owned(), "v2.1.d.sig")));
        }
        assert!(parse_interrupt_id("no-dot").is_err());
        assert!(parse_interrupt_id("!!.v2.1.d.s").is_err());
    }

    #[test]
    fn thread_ids_name_their_conversation() {
        let here = uuid::Uuid::new_v4();
        let id = thread_interrupt_id(here, "call:1");
        assert_eq!(thread_call(here, &id), Some("call:1"));
        assert_eq!(thread_call(uuid::Uuid::new_v4(), &id), None);
        assert_eq!(thread_call(here, "call_1"), None);
    }
}
