//! Secret masking: configured secrets, the values of named environment variables and triage's
//! own credentials never reach the LLM or the client; tool output and error messages carry
//! `<secret-hidden>` instead.

use std::sync::Arc;

use super::mask::{Mask, Secrets, mask_each};
use crate::secrets::{IssuedSecrets, MIN_SECRET_LEN};

#[derive(Debug, Default)]
pub struct SecretMasker {
    /// Longest first, so a secret containing another is masked whole.
    secrets: Vec<String>,
    /// The credentials the application issued so far (its model registry's).
    issued: IssuedSecrets,
}

impl SecretMasker {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> SecretMasker {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .flat_map(|s| with_variants(s.trim()))
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        longest_first(&mut secrets);
        SecretMasker {
            secrets,
            issued: IssuedSecrets::default(),
        }
    }

    /// Also masks the credentials recorded in `issued` (the application's registry).
    pub fn with_issued(self, issued: IssuedSecrets) -> SecretMasker {
        SecretMasker { issued, ..self }
    }

    pub fn issued(&self) -> &IssuedSecrets {
        &self.issued
    }

    /// Masks the configured secrets and every credential the application issued so far.
    pub fn mask(&self, text: &mut String) {
        mask_each(&self.secrets, text);
        let issued = self.issued.read();
        if !issued.is_empty() {
            mask_each(&issued, text);
        }
    }
}

/// Longest first (a secret that contains another is masked whole), each once.
fn longest_first(secrets: &mut Vec<String>) {
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
}

/// What a run masks everything it reports with: the server's secrets, the run's own
/// (`RunConfig::secrets`) and the credentials issued so far. Cheap to clone (an `Arc`).
#[derive(Debug, Clone, Default)]
pub struct RunMasker {
    /// The server's masker itself when the run has no secrets of its own; else both lists
    /// in one, longest first: a run's secret that contains a server's is masked whole.
    secrets: Arc<SecretMasker>,
}

impl RunMasker {
    pub fn new(server: Arc<SecretMasker>, own: SecretMasker) -> RunMasker {
        if own.secrets.is_empty() {
            return RunMasker { secrets: server };
        }
        let mut secrets = own.secrets;
        secrets.extend(server.secrets.iter().cloned());
        longest_first(&mut secrets);
        RunMasker {
            secrets: Arc::new(SecretMasker {
                secrets,
                issued: server.issued.clone(),
            }),
        }
    }

    fn secrets<'a>(&'a self, issued: &'a [String]) -> Secrets<'a> {
        Secrets {
            lists: [&self.secrets.secrets, issued],
        }
    }

    /// Masks every string `value` holds. Nothing is copied when no secret occurs, and
    /// nothing is even looked at when there is no secret to mask.
    pub fn mask<T: Mask + ?Sized>(&self, value: &mut T) {
        let issued = self.secrets.issued.read();
        let secrets = self.secrets(&issued);
        if !secrets.is_empty() {
            value.mask(&secrets);
        }
    }

    pub fn masked<T: Mask>(&self, mut value: T) -> T {
        self.mask(&mut value);
        value
    }

    /// Masks a piece of streamed text that follows `held` (what an earlier piece left
    /// unsent): returns what can go out now and keeps in `held` an end that may be the start
    /// of a secret the next piece completes. A secret split across pieces is masked whole.
    pub fn mask_piece(&self, held: &mut String, piece: String) -> String {
        let issued = self.secrets.issued.read();
        let secrets = self.secrets(&issued);
        if secrets.is_empty() && held.is_empty() {
            return piece;
        }
        let mut text = if held.is_empty() {
            piece
        } else {
            std::mem::take(held) + &piece
        };
        secrets.text(&mut text);
        let start = secrets
            .lists
            .iter()
            .map(|list| unfinished_start(list, &text))
            .min()
            .unwrap_or(text.len());
        *held = text.split_off(start);
        text
    }
}

/// Where the end of `text` may begin one of `secrets`: the start of the longest suffix that
/// is a proper prefix of a secret, or `text.len()` when there is none.
fn unfinished_start(secrets: &[String], text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut start = text.len();
    for secret in secrets {
        let from = bytes.len().saturating_sub(secret.len().saturating_sub(1));
        // The smallest position first: the longest suffix.
        if let Some(i) = (from..start)
            .find(|&i| text.is_char_boundary(i) && secret.as_bytes().starts_with(&bytes[i..]))
        {
            start = i;
        }
    }
    start
}

/// Lines of a multi-line secret (a PEM key) no shorter than this are masked on their own: a
/// tool may print the key re-wrapped or quoted, never line for line as configured.
const MIN_SECRET_LINE_LEN: usize = 16;

/// A secret as configured, as it appears inside a JSON string (a key file printed whole; as
/// serde_json writes it, and as Go's encoding/json and Python's json.dumps do, which also
/// escape `<`, `>`, `&` and non-ASCII: kubectl's `-o json`, Go and Python MCP servers), and,
/// for a multi-line one, each of its long lines.
fn with_variants(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_owned()];
    if secret.contains(['\n', '\r', '"', '\\']) || secret.chars().any(char::is_control) {
        let escaped = serde_json::Value::String(secret.to_owned()).to_string();
        out.push(escaped[1..escaped.len() - 1].to_owned());
        out.extend(
            secret
                .lines()
                .map(str::trim)
                .filter(|line| line.len() >= MIN_SECRET_LINE_LEN)
                .map(str::to_owned),
        );
    }
    let ascii = ascii_json_escaped(secret);
    if !out.contains(&ascii) {
        out.push(ascii);
    }
    out
}

/// `secret` inside a JSON string written ASCII-only with HTML characters escaped (Go's
/// encoding/json; Python's json.dumps escapes the non-ASCII alike).
fn ascii_json_escaped(secret: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(secret.len());
    for c in secret.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if c.is_ascii_control() || !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::MASK;
    use crate::secrets::IssuedSecrets;

    #[test]
    fn secrets_are_masked_as_go_and_python_escape_them_in_json() {
        let m = SecretMasker::new(["p&ssw0rd<1>".to_owned(), "mot-de-passé".to_owned()]);
        let mut go = r#"{"password":"p\u0026ssw0rd\u003c1\u003e"}"#.to_owned();
        m.mask(&mut go);
        assert_eq!(go, r#"{"password":"<secret-hidden>"}"#);
        let mut python = r#"{"p": "mot-de-pass\u00e9"}"#.to_owned();
        m.mask(&mut python);
        assert_eq!(python, r#"{"p": "<secret-hidden>"}"#);
    }

    #[test]
    fn masks_every_occurrence_longest_first() {
        let m = SecretMasker::new([
            "sk-abcdef".to_owned(),
            "sk-abcdef-longer".to_owned(),
            "abc".to_owned(),
        ]);
        let mut t = "key=sk-abcdef-longer and sk-abcdef; abc stays".to_owned();
        m.mask(&mut t);
        assert_eq!(t, "key=<secret-hidden> and <secret-hidden>; abc stays");
    }

    #[test]
    fn multi_line_keys_are_masked_whole_escaped_and_line_by_line() {
        let key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n";
        let m = SecretMasker::new([key.to_owned()]);
        let mut whole = format!("key: {key}");
        m.mask(&mut whole);
        assert_eq!(whole.trim_end(), format!("key: {MASK}"));
        let mut json = format!("{{\"private_key\": {}}}", serde_json::json!(key));
        m.mask(&mut json);
        // The configured value is trimmed: its final newline stays.
        assert_eq!(json, format!("{{\"private_key\": \"{MASK}\\n\"}}"));
        let mut line = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC".to_owned();
        m.mask(&mut line);
        assert_eq!(line, MASK);
    }

    #[test]
    fn a_secret_split_across_streamed_pieces_is_masked_whole() {
        let m = RunMasker::new(
            Arc::new(SecretMasker::new(["sk-split-secret".to_owned()])),
            SecretMasker::new(["own-value-42".to_owned()]),
        );
        let mut held = String::new();
        let mut out = String::new();
        for piece in [
            "the key is sk-sp",
            "lit-sec",
            "ret, and own-",
            "value-42 too; sk-",
            "no",
        ] {
            let sent = m.mask_piece(&mut held, piece.to_owned());
            assert!(
                !sent.contains("sk-sp") && !sent.contains("own-v"),
                "{sent:?}"
            );
            out.push_str(&sent);
        }
        out.push_str(&held);
        assert_eq!(out, format!("the key is {MASK}, and {MASK} too; sk-no"));
        // A piece that cannot begin a secret is sent whole, at once.
        let mut held = String::new();
        assert_eq!(m.mask_piece(&mut held, "plain é".to_owned()), "plain é");
        assert!(held.is_empty());
    }

    #[test]
    fn a_runs_secret_that_contains_a_servers_is_masked_whole() {
        let server = Arc::new(SecretMasker::new(["inner-key-99".to_owned()]));
        let m = RunMasker::new(
            server.clone(),
            SecretMasker::new(["outer-inner-key-99-x".to_owned()]),
        );
        assert_eq!(
            m.masked("a outer-inner-key-99-x b".to_owned()),
            format!("a {MASK} b")
        );
        assert_eq!(m.masked("inner-key-99".to_owned()), MASK);
        // Without secrets of its own a run masks with the server's masker itself.
        let plain = RunMasker::new(server.clone(), SecretMasker::default());
        assert!(Arc::ptr_eq(&plain.secrets, &server));
    }

    #[test]
    fn the_unfinished_start_is_the_longest_suffix_that_begins_a_secret() {
        let secrets = ["abcdef".to_owned(), "cdxyzw".to_owned()];
        assert_eq!(unfinished_start(&secrets, "xx abcd"), 3);
        assert_eq!(unfinished_start(&secrets, "xx abcdq"), 8);
        // "cd" begins the second secret, but "abcd" (earlier) the first.
        assert_eq!(unfinished_start(&secrets, "abcd"), 0);
        assert_eq!(unfinished_start(&secrets, ""), 0);
        // Never inside a character.
        assert_eq!(unfinished_start(&["éabcde".to_owned()], "xé"), 1);
    }

    #[test]
    fn credentials_issued_at_run_time_are_masked_by_the_applications_maskers() {
        let issued = IssuedSecrets::default();
        let configured =
            SecretMasker::new(["configured-secret".to_owned()]).with_issued(issued.clone());
        let empty = SecretMasker::default().with_issued(issued.clone());
        let other_application = SecretMasker::default();
        let token = "ASIA-issued-session-token-for-the-masker-test";
        let mut before = format!("token {token}");
        empty.mask(&mut before);
        assert!(before.contains(token), "not yet issued: {before}");
        issued.remember(token);
        issued.remember(token);
        for masker in [&configured, &empty] {
            let mut text = format!("token {token} and configured-secret");
            masker.mask(&mut text);
            assert!(!text.contains(token), "{text}");
        }
        let run = RunMasker::new(
            Arc::new(empty),
            SecretMasker::new(["run-secret".to_owned()]),
        );
        assert_eq!(
            run.masked(format!("{token} run-secret")),
            format!("{MASK} {MASK}")
        );
        let mut elsewhere = format!("token {token}");
        other_application.mask(&mut elsewhere);
        assert!(
            elsewhere.contains(token),
            "another application's: {elsewhere}"
        );
        assert_eq!(issued.read().len(), 1, "remembered once");
    }
}
