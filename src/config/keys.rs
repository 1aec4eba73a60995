//! The form of the conversation store's sealing keys in the configuration, checked when the
//! configuration loads; `store/sealing.rs` seals with them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

pub const KEY_LEN: usize = 32;

/// A key written as base64 (the configuration's form): exactly 32 bytes.
pub fn parse_key(text: &str) -> Result<[u8; KEY_LEN], String> {
    let bytes = BASE64
        .decode(text.trim())
        .map_err(|_| "is not base64 (make one with `openssl rand -base64 32`)".to_owned())?;
    <[u8; KEY_LEN]>::try_from(bytes.as_slice()).map_err(|_| {
        format!(
            "is {} bytes, not {KEY_LEN} (make one with `openssl rand -base64 32`)",
            bytes.len()
        )
    })
}
