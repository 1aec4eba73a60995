//! The tracing subscriber: human-readable by default, JSON with ENABLE_JSON_LOGS_FORMAT=true;
//! level from RUST_LOG, else LOG_LEVEL (HolmesGPT's), else a default. Every line is masked
//! like a response before it reaches stderr.

use std::io::Write;
use std::sync::{Arc, PoisonError, RwLock};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::agent::SecretMasker;

/// The server's logging: info unless RUST_LOG / LOG_LEVEL say otherwise.
pub fn init() {
    init_with_default("info");
}

/// `default_level` applies when neither RUST_LOG nor LOG_LEVEL is set (the CLI only warns:
/// its progress output is for people).
pub fn init_with_default(default_level: &str) {
    let level = std::env::var("LOG_LEVEL")
        .unwrap_or_default()
        .to_lowercase();
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| {
            EnvFilter::try_new(if level.is_empty() {
                default_level
            } else {
                &level
            })
        })
        .unwrap_or_else(|_| EnvFilter::new(default_level));
    let json =
        std::env::var("ENABLE_JSON_LOGS_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    // Colour codes only for a person reading a terminal, never into a log file or pipe.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(MaskedStderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// The secrets the server knows of; credentials issued at run time are masked without it.
static LOG_MASKER: RwLock<Option<Arc<SecretMasker>>> = RwLock::new(None);

/// From now on log lines are masked with `masker` (the agent's own): an error an LLM provider
/// or a tool sends back may quote a key, and a retry warning logs that error.
pub fn mask_logs(masker: Arc<SecretMasker>) {
    *LOG_MASKER.write().unwrap_or_else(PoisonError::into_inner) = Some(masker);
}

/// stderr, one masked write per event (the formatter writes each event whole).
struct MaskedStderr;

impl<'a> MakeWriter<'a> for MaskedStderr {
    type Writer = MaskedLine;

    fn make_writer(&'a self) -> MaskedLine {
        MaskedLine(Vec::with_capacity(256))
    }
}

struct MaskedLine(Vec<u8>);

impl Write for MaskedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for MaskedLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let line = masked(std::mem::take(&mut self.0));
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

fn masked(line: Vec<u8>) -> String {
    let mut line = String::from_utf8(line)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    // Like the issued credentials, never unmasked because a panic poisoned the lock.
    let masker = LOG_MASKER
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    match masker {
        Some(masker) => masker.mask(&mut line),
        None => SecretMasker::default().mask(&mut line),
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_masked_with_the_servers_secrets_and_issued_credentials() {
        mask_logs(Arc::new(SecretMasker::new([
            "sk-log-line-secret".to_owned()
        ])));
        crate::agent::remember_issued("issued-token-seen-in-a-log-line");
        let line = masked(
            b"WARN retrying LLM call error=401 Incorrect API key sk-log-line-secret; \
              token issued-token-seen-in-a-log-line\n"
                .to_vec(),
        );
        assert!(!line.contains("sk-log-line-secret"), "{line}");
        assert!(!line.contains("issued-token-seen"), "{line}");
        assert_eq!(line.matches("<secret-hidden>").count(), 2, "{line}");
        assert!(line.ends_with('\n'));
    }
}
