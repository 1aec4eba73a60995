//! The tracing subscriber: human-readable by default, JSON with ENABLE_JSON_LOGS_FORMAT=true;
//! level from RUST_LOG, else LOG_LEVEL (HolmesGPT's), else a default.

use tracing_subscriber::EnvFilter;

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
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
