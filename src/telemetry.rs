//! The tracing subscriber: human-readable by default, JSON with ENABLE_JSON_LOGS_FORMAT=true;
//! level from RUST_LOG, else LOG_LEVEL (HolmesGPT's), else info.

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| {
            EnvFilter::try_new(
                std::env::var("LOG_LEVEL")
                    .unwrap_or_default()
                    .to_lowercase(),
            )
        })
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let json =
        std::env::var("ENABLE_JSON_LOGS_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
