//! The tracing subscriber: human-readable by default, JSON with ENABLE_JSON_LOGS_FORMAT=true;
//! level from RUST_LOG, else LOG_LEVEL (HolmesGPT's), else a default. Every line is masked
//! like a response before it reaches stderr.

use std::io::Write;
use std::sync::{Arc, PoisonError, RwLock, Weak};

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

/// The maskers of the applications alive in this process (one in a server; several in the
/// end-to-end tests, which start many in one process). The subscriber is process-wide and a
/// log line does not say which application wrote it: a line from a task spawned without the
/// application's span, from reqwest, hyper or rustls, belongs to none. So every line passes
/// every live application's masker rather than looking its own up: a line is never unmasked
/// because its origin is unknown, and no application's start replaces another's masker.
/// Weak, so an application dropped (its masker with it) leaves the list at the next line.
static LOG_MASKERS: RwLock<Vec<Weak<SecretMasker>>> = RwLock::new(Vec::new());

/// From now on log lines are masked with `masker` too (an application's own, its issued
/// credentials included): an error an LLM provider or a tool sends back may quote a key,
/// and a retry warning logs that error.
pub fn mask_logs(masker: &Arc<SecretMasker>) {
    let mut maskers = LOG_MASKERS.write().unwrap_or_else(PoisonError::into_inner);
    maskers.retain(|m| m.strong_count() > 0);
    maskers.push(Arc::downgrade(masker));
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
    // Never unmasked because a panic poisoned the lock.
    let maskers = LOG_MASKERS.read().unwrap_or_else(PoisonError::into_inner);
    for masker in maskers.iter().filter_map(Weak::upgrade) {
        masker.mask(&mut line);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::IssuedSecrets;

    #[test]
    fn log_lines_are_masked_with_every_live_applications_secrets() {
        let issued = IssuedSecrets::default();
        let first = Arc::new(
            SecretMasker::new(["sk-log-line-secret".to_owned()]).with_issued(issued.clone()),
        );
        let second = Arc::new(SecretMasker::new(["sk-second-application".to_owned()]));
        mask_logs(&first);
        mask_logs(&second);
        issued.remember("issued-token-seen-in-a-log-line");
        let line = masked(
            b"WARN retrying LLM call error=401 Incorrect API key sk-log-line-secret; \
              token issued-token-seen-in-a-log-line; sk-second-application\n"
                .to_vec(),
        );
        assert!(!line.contains("sk-log-line-secret"), "{line}");
        assert!(!line.contains("issued-token-seen"), "{line}");
        assert!(
            !line.contains("sk-second-application"),
            "a later start replaced none: {line}"
        );
        assert_eq!(line.matches("<secret-hidden>").count(), 3, "{line}");
        assert!(line.ends_with('\n'));
        drop(second);
        let line = masked(b"sk-second-application\n".to_vec());
        assert_eq!(
            line, "sk-second-application\n",
            "a dropped application masks nothing"
        );
    }
}
