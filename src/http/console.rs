//! The browser console at `/`: one page, its scripts (the chat view, the conversations view)
//! and style sheet, embedded in the binary (no build step, nothing fetched at run time). The
//! page holds no secret, so its exact paths are exempt from API keys (`auth::EXEMPT`); the API
//! calls it makes are not.

use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use super::AppState;

pub const INDEX_PATH: &str = "/";
pub const SCRIPT_PATH: &str = "/console/app.js";
/// One server-side conversation's event log and stream, for the conversations view.
pub const CONVERSATION_LOG_SCRIPT_PATH: &str = "/console/conversation-log.js";
/// The conversations view (server-side conversations), beside the chat view of `app.js`.
pub const CONVERSATIONS_SCRIPT_PATH: &str = "/console/conversations.js";
pub const STYLE_PATH: &str = "/console/style.css";
/// The README, for the console's "how to configure a model" link (public documentation).
pub const README_PATH: &str = "/console/readme.md";

const INDEX_HTML: &str = include_str!("console/index.html");
const APP_JS: &str = include_str!("console/app.js");
const CONVERSATION_LOG_JS: &str = include_str!("console/conversation-log.js");
const CONVERSATIONS_JS: &str = include_str!("console/conversations.js");
/// Every script of the page, in the order it loads them.
const SCRIPTS: [(&str, &str); 3] = [
    (SCRIPT_PATH, APP_JS),
    (CONVERSATION_LOG_SCRIPT_PATH, CONVERSATION_LOG_JS),
    (CONVERSATIONS_SCRIPT_PATH, CONVERSATIONS_JS),
];
const STYLE_CSS: &str = include_str!("console/style.css");
const README: &str = include_str!("../../README.md");

/// The page only talks to this origin; no inline script or style, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

/// The page with its asset URLs versioned by content, so the assets can be cached for long
/// while a new binary's page never runs an old script.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    let mut hash = Sha256::new();
    for (_, script) in SCRIPTS {
        hash.update(script);
    }
    hash.update(STYLE_CSS);
    let version: String = hash.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    INDEX_HTML.replace("__ASSET_VERSION__", &version)
});

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(INDEX_PATH, get(index))
        .route(SCRIPT_PATH, get(|| async { script(APP_JS) }))
        .route(
            CONVERSATION_LOG_SCRIPT_PATH,
            get(|| async { script(CONVERSATION_LOG_JS) }),
        )
        .route(
            CONVERSATIONS_SCRIPT_PATH,
            get(|| async { script(CONVERSATIONS_JS) }),
        )
        .route(STYLE_PATH, get(style))
        .route(README_PATH, get(readme))
}

async fn readme() -> Response {
    asset(README, "text/markdown; charset=utf-8", "no-cache", &[])
}

async fn index() -> Response {
    asset(
        PAGE.as_str(),
        "text/html; charset=utf-8",
        // Revalidate: the page names the current assets.
        "no-cache",
        &[
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
    )
}

fn script(body: &'static str) -> Response {
    asset(
        body,
        "text/javascript; charset=utf-8",
        "public, max-age=86400",
        &[],
    )
}

async fn style() -> Response {
    asset(
        STYLE_CSS,
        "text/css; charset=utf-8",
        "public, max-age=86400",
        &[],
    )
}

fn asset(
    body: &'static str,
    content_type: &'static str,
    cache: &'static str,
    extra: &[(HeaderName, &'static str)],
) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    for (name, value) in extra {
        headers.insert(name.clone(), HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_its_versioned_assets() {
        assert!(!PAGE.contains("__ASSET_VERSION__"));
        for (path, _) in SCRIPTS {
            assert!(PAGE.contains(&format!("{path}?v=")), "{path}");
        }
        assert!(PAGE.contains(&format!("{STYLE_PATH}?v=")));
    }

    #[test]
    fn the_page_has_no_inline_script_or_style() {
        // The CSP allows only 'self' scripts and styles.
        assert!(!INDEX_HTML.contains("<script>"));
        assert!(!INDEX_HTML.contains("<style"));
        assert!(!INDEX_HTML.contains(" style="));
        let handler = INDEX_HTML.match_indices(" on").any(|(i, _)| {
            let rest = &INDEX_HTML[i + 3..];
            let name_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            name_len > 0 && rest[name_len..].starts_with('=')
        });
        assert!(!handler, "no inline event handlers");
    }
}
