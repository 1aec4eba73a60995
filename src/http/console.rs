//! The browser console at `/` (stub: being written).

use axum::response::Html;

pub async fn index() -> Html<&'static str> {
    Html("<!doctype html><title>triage</title><p>triage console: coming soon</p>")
}
