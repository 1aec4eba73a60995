//! Conversation secrets sealed at rest (issue 34). A conversation's config holds the values its
//! runs mask (`run.secrets`, `POST …/{id}/secrets`); the store never writes them in clear. On
//! every write the list becomes an envelope in the same place of the config's JSON:
//!
//! ```json
//! "secrets": {"v": 1, "kid": "<key id>", "nonce": "<base64, 24 bytes>", "ct": "<base64>"}
//! ```
//!
//! `ct` is the JSON array of the values, sealed with XChaCha20-Poly1305 under the key `kid`
//! names; the associated data binds it to its conversation, its key id and the format version,
//! so an envelope copied into another row, or edited, fails to open instead of reading as
//! someone else's secrets. The envelope replaces the list inside the JSON rather than living in
//! a column of its own: the config stays one value that every writer (create, config changes,
//! fork) already passes whole, no migration changes the schema, and a row written before this
//! (a plain array) is told apart by its type and still read. Rows like that are sealed when
//! the store opens ([`Store::reseal`](super::Store::reseal)).
//!
//! Keys are 32 random bytes; a key's id is a short hash of it, so the id names the key without
//! revealing it and a row says which key sealed it. New writes use the current key; the
//! previous keys only open what they sealed (rotation).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde_json::{Value, json};
use sha2::Digest;
use uuid::Uuid;

/// The envelope format (in the associated data too: a future format cannot be mistaken for it).
const VERSION: u64 = 1;
const NONCE_LEN: usize = 24;
pub use crate::config::keys::{KEY_LEN, parse_key};
/// Where the conversation service keeps a run's secrets in the stored config
/// (`StoredConfig.run.secrets`).
const SECRETS_AT: [&str; 2] = ["run", "secrets"];

/// One key: its id and its cipher.
struct Key {
    id: String,
    cipher: XChaCha20Poly1305,
}

impl Key {
    fn new(bytes: &[u8; KEY_LEN]) -> Key {
        Key {
            id: key_id(bytes),
            cipher: XChaCha20Poly1305::new(bytes.into()),
        }
    }
}

/// The keys conversation secrets are sealed with: the current one (every write) and the
/// previous ones (reading what they sealed).
pub struct SecretKeys {
    current: Key,
    previous: Vec<Key>,
}

impl std::fmt::Debug for SecretKeys {
    // Ids only: never a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretKeys")
            .field("current", &self.current.id)
            .field(
                "previous",
                &self.previous.iter().map(|k| &k.id).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Why a sealed list could not be opened. Never holds a secret or a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error(
        "they were sealed with key id {kid}, which is not configured (known key ids: {known}); \
         add that key to conversations.previous_secret_keys"
    )]
    UnknownKey { kid: String, known: String },
    #[error(
        "they do not open with key id {kid}: the stored row was altered or copied from another \
         conversation"
    )]
    Tampered { kid: String },
    #[error("the stored envelope is malformed: {0}")]
    Malformed(String),
}

/// The id of a key: the first 8 bytes of a SHA-256 over it, in hex. Domain-separated so the id
/// is not a hash of the bare key that something else might also publish.
pub fn key_id(key: &[u8; KEY_LEN]) -> String {
    let digest = sha2::Sha256::new()
        .chain_update(b"triage conversation secret key id\0")
        .chain_update(key)
        .finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// 32 bytes from the operating system's generator.
pub fn random_key() -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    rand::Rng::fill(&mut rand::rng(), &mut key[..]);
    key
}

/// A key in the configuration's form.
pub fn encode_key(key: &[u8; KEY_LEN]) -> String {
    BASE64.encode(key)
}

impl SecretKeys {
    /// `previous` may repeat `current` or each other; repeats are dropped.
    pub fn new(current: &[u8; KEY_LEN], previous: &[[u8; KEY_LEN]]) -> SecretKeys {
        let current = Key::new(current);
        let mut kept: Vec<Key> = Vec::new();
        for key in previous.iter().map(Key::new) {
            if key.id != current.id && !kept.iter().any(|k| k.id == key.id) {
                kept.push(key);
            }
        }
        SecretKeys {
            current,
            previous: kept,
        }
    }

    /// A key of this process alone: stores in memory, and tests.
    pub fn ephemeral() -> SecretKeys {
        SecretKeys::new(&random_key(), &[])
    }

    pub fn current_id(&self) -> &str {
        &self.current.id
    }

    fn find(&self, kid: &str) -> Option<&Key> {
        std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == kid)
    }

    /// `secrets` of conversation `id` as an envelope, under the current key.
    pub fn seal(&self, id: Uuid, secrets: &[Value]) -> Result<Value, SealError> {
        let nonce: [u8; NONCE_LEN] = rand::random();
        let plaintext = Value::Array(secrets.to_vec()).to_string();
        let key = &self.current;
        let aad = associated_data(id, &key.id);
        // Fails only beyond 256 GiB; reported rather than stored as an envelope that never opens.
        let ct = key
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::Malformed("the secrets could not be sealed".into()))?;
        Ok(
            json!({"v": VERSION, "kid": key.id, "nonce": BASE64.encode(nonce), "ct": BASE64.encode(ct)}),
        )
    }

    /// The values an envelope of conversation `id` holds.
    pub fn open(&self, id: Uuid, envelope: &Value) -> Result<Vec<Value>, SealError> {
        let field = |name: &str| {
            envelope
                .get(name)
                .ok_or_else(|| SealError::Malformed(format!("no `{name}`")))
        };
        let version = field("v")?.as_u64();
        if version != Some(VERSION) {
            return Err(SealError::Malformed(format!(
                "format version {} is not {VERSION} (written by a newer triage?)",
                field("v")?
            )));
        }
        let text = |name: &str| {
            field(name)?
                .as_str()
                .ok_or_else(|| SealError::Malformed(format!("`{name}` is not a string")))
        };
        let kid = text("kid")?;
        let bytes = |name: &str| {
            BASE64
                .decode(text(name)?)
                .map_err(|_| SealError::Malformed(format!("`{name}` is not base64")))
        };
        let nonce = bytes("nonce")?;
        if nonce.len() != NONCE_LEN {
            return Err(SealError::Malformed(format!(
                "the nonce is {} bytes, not {NONCE_LEN}",
                nonce.len()
            )));
        }
        let ct = bytes("ct")?;
        let key = self.find(kid).ok_or_else(|| SealError::UnknownKey {
            kid: kid.to_owned(),
            known: std::iter::once(&self.current)
                .chain(&self.previous)
                .map(|k| k.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        let tampered = || SealError::Tampered {
            kid: kid.to_owned(),
        };
        let plaintext = key
            .cipher
            .decrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &ct,
                    aad: &associated_data(id, kid),
                },
            )
            .map_err(|_| tampered())?;
        // Authenticated, so written by a triage holding the key: anything but an array is a
        // bug, reported as tampering rather than trusted.
        match serde_json::from_slice(&plaintext) {
            Ok(Value::Array(values)) => Ok(values),
            _ => Err(tampered()),
        }
    }

    /// The config as it is stored: its secrets sealed (also an empty list, so that every row
    /// written has one form). A config without secrets is stored as it is.
    pub(super) fn seal_config(&self, id: Uuid, config: &Value) -> Result<Value, SealError> {
        let mut sealed = config.clone();
        if let Some(slot) = secrets_slot(&mut sealed)
            && let Value::Array(values) = slot
        {
            *slot = self.seal(id, values)?;
        }
        Ok(sealed)
    }

    /// The stored config with its secrets opened in place; a plain list (a row written before
    /// secrets were sealed) is left as it is.
    pub(super) fn open_config(&self, id: Uuid, config: &mut Value) -> Result<(), SealError> {
        if let Some(slot) = secrets_slot(config)
            && slot.is_object()
        {
            *slot = Value::Array(self.open(id, slot)?);
        }
        Ok(())
    }

    /// What a stored config needs to be stored as the current key seals it: a plain list with
    /// values in it, or an envelope of another key. `None`: nothing to do.
    pub(super) fn stale(&self, config: &Value) -> Option<Stale> {
        let slot = SECRETS_AT.iter().try_fold(config, |v, name| v.get(name))?;
        match slot {
            Value::Array(values) if !values.is_empty() => Some(Stale::Plain),
            Value::Object(envelope) => match envelope.get("kid").and_then(Value::as_str) {
                Some(kid) if kid == self.current.id => None,
                _ => Some(Stale::OtherKey),
            },
            _ => None,
        }
    }
}

/// Why a stored config is sealed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stale {
    Plain,
    OtherKey,
}

fn secrets_slot(config: &mut Value) -> Option<&mut Value> {
    SECRETS_AT
        .iter()
        .try_fold(config, |v, name| v.get_mut(name))
}

fn associated_data(id: Uuid, kid: &str) -> Vec<u8> {
    let mut aad = format!("triage conversation secrets v{VERSION}\0{kid}\0").into_bytes();
    aad.extend_from_slice(id.as_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(secrets: Value) -> Value {
        json!({"run": {"model": "m", "secrets": secrets}, "policy": "never_confirm"})
    }

    #[test]
    fn a_sealed_list_opens_to_the_same_values_and_holds_none_in_clear() {
        let keys = SecretKeys::ephemeral();
        let id = Uuid::new_v4();
        let plain = config(json!(["sk-live-123456", "hunter2"]));
        let stored = keys.seal_config(id, &plain).expect("sealed");
        let text = stored.to_string();
        assert!(
            !text.contains("sk-live-123456") && !text.contains("hunter2"),
            "{text}"
        );
        assert_eq!(stored["run"]["secrets"]["kid"], keys.current_id());
        assert_eq!(stored["run"]["model"], "m");
        assert_eq!(stored["policy"], "never_confirm");
        let mut opened = stored.clone();
        keys.open_config(id, &mut opened).expect("opens");
        assert_eq!(opened, plain);
        // A fresh nonce every time: two seals of one list differ.
        assert_ne!(keys.seal_config(id, &plain).expect("sealed"), stored);
    }

    #[test]
    fn an_empty_list_is_sealed_too_and_a_config_without_secrets_is_left_alone() {
        let keys = SecretKeys::ephemeral();
        let id = Uuid::new_v4();
        let stored = keys.seal_config(id, &config(json!([]))).expect("sealed");
        assert!(stored["run"]["secrets"].is_object());
        let mut opened = stored;
        keys.open_config(id, &mut opened).expect("opens");
        assert_eq!(opened["run"]["secrets"], json!([]));
        let other = json!({"run": {"model": "m"}});
        assert_eq!(keys.seal_config(id, &other).expect("as it is"), other);
    }

    #[test]
    fn a_plain_list_of_an_older_row_is_read_as_it_is() {
        let keys = SecretKeys::ephemeral();
        let mut old = config(json!(["s1"]));
        keys.open_config(Uuid::new_v4(), &mut old).expect("read");
        assert_eq!(old["run"]["secrets"], json!(["s1"]));
        assert_eq!(keys.stale(&old), Some(Stale::Plain));
        assert_eq!(keys.stale(&config(json!([]))), None);
    }

    #[test]
    fn a_wrong_key_is_an_error_naming_the_key_id_never_garbage() {
        let id = Uuid::new_v4();
        let writer = SecretKeys::ephemeral();
        let stored = writer
            .seal_config(id, &config(json!(["s1"])))
            .expect("sealed");
        let reader = SecretKeys::ephemeral();
        let err = reader
            .open_config(id, &mut stored.clone())
            .expect_err("another key");
        let SealError::UnknownKey { kid, known } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(kid, writer.current_id());
        assert_eq!(known, reader.current_id());
        assert!(err.to_string().contains("previous_secret_keys"), "{err}");
        // The same id with other key bytes (a key file replaced): the tag does not verify.
        let mut forged = stored.clone();
        forged["run"]["secrets"]["kid"] = json!(reader.current_id());
        assert!(matches!(
            reader.open_config(id, &mut forged),
            Err(SealError::Tampered { .. })
        ));
    }

    #[test]
    fn an_envelope_moved_to_another_conversation_or_edited_does_not_open() {
        let keys = SecretKeys::ephemeral();
        let id = Uuid::new_v4();
        let stored = keys
            .seal_config(id, &config(json!(["s1"])))
            .expect("sealed");
        assert!(matches!(
            keys.open_config(Uuid::new_v4(), &mut stored.clone()),
            Err(SealError::Tampered { .. })
        ));
        let envelope = &stored["run"]["secrets"];
        let mut ct = BASE64.decode(envelope["ct"].as_str().unwrap()).unwrap();
        ct[0] ^= 1;
        let mut edited = stored.clone();
        edited["run"]["secrets"]["ct"] = json!(BASE64.encode(ct));
        assert!(matches!(
            keys.open_config(id, &mut edited),
            Err(SealError::Tampered { .. })
        ));
        for (field, value) in [
            ("v", json!(2)),
            ("nonce", json!("AAAA")),
            ("ct", json!("not base64!")),
            ("kid", json!(7)),
        ] {
            let mut bad = stored.clone();
            bad["run"]["secrets"][field] = value;
            assert!(
                matches!(keys.open_config(id, &mut bad), Err(SealError::Malformed(_))),
                "{field}"
            );
        }
    }

    #[test]
    fn previous_keys_open_what_they_sealed_and_new_writes_use_the_current_key() {
        let (old, new) = (random_key(), random_key());
        let id = Uuid::new_v4();
        let before = SecretKeys::new(&old, &[]);
        let stored = before
            .seal_config(id, &config(json!(["s1"])))
            .expect("sealed");
        let after = SecretKeys::new(&new, &[old, new, old]);
        assert_eq!(format!("{after:?}").matches(&key_id(&old)).count(), 1);
        assert_eq!(after.stale(&stored), Some(Stale::OtherKey));
        let mut opened = stored.clone();
        after
            .open_config(id, &mut opened)
            .expect("the previous key opens it");
        assert_eq!(opened["run"]["secrets"], json!(["s1"]));
        let resealed = after.seal_config(id, &opened).expect("sealed");
        assert_eq!(resealed["run"]["secrets"]["kid"], key_id(&new));
        assert_eq!(after.stale(&resealed), None);
    }

    #[test]
    fn keys_are_32_bytes_of_base64_and_ids_are_short_and_stable() {
        let key = random_key();
        assert_eq!(parse_key(&encode_key(&key)), Ok(key));
        assert_eq!(parse_key(&format!(" {}\n", encode_key(&key))), Ok(key));
        assert!(parse_key("c2hvcnQ=").unwrap_err().contains("5 bytes"));
        assert!(parse_key("***").unwrap_err().contains("not base64"));
        assert_eq!(key_id(&key), key_id(&key));
        assert_eq!(key_id(&key).len(), 16);
        assert_ne!(key_id(&key), key_id(&random_key()));
        // Debug shows ids, never key bytes.
        let debug = format!("{:?}", SecretKeys::new(&key, &[]));
        assert!(!debug.contains(&encode_key(&key)) && debug.contains(&key_id(&key)));
    }
}
