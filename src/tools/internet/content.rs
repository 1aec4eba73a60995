//! What a fetched body is (HTML, JSON or text): from its `Content-Type`, or sniffed.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Html,
    Json,
    Text,
}

/// The kind of a `Content-Type`: `Ok(None)` when absent (sniff the body), `Err` when
/// unsupported.
pub(super) fn classify(content_type: Option<&str>) -> Result<Option<Kind>, String> {
    let Some(ct) = content_type else {
        return Ok(None);
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    Ok(Some(match mime.as_str() {
        "" => return Ok(None),
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "application/json" | "application/x-ndjson" => Kind::Json,
        m if m.ends_with("+json") => Kind::Json,
        m if m.starts_with("text/") => Kind::Text,
        "application/xml" | "application/yaml" | "application/x-yaml" | "application/toml" => {
            Kind::Text
        }
        m if m.ends_with("+xml") => Kind::Text,
        _ => return Err(mime),
    }))
}

/// Guesses the kind of a body sent without a content type.
pub(super) fn sniff(body: &[u8]) -> Option<Kind> {
    let head = &body[..body.len().min(4096)];
    if head.contains(&0) {
        return None;
    }
    let text = String::from_utf8_lossy(head);
    let start = text.trim_start().to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") || start.contains("<body")
    {
        Some(Kind::Html)
    } else if start.starts_with('{') || start.starts_with('[') {
        Some(Kind::Json)
    } else {
        Some(Kind::Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(
            classify(Some("text/html; charset=utf-8")),
            Ok(Some(Kind::Html))
        );
        assert_eq!(
            classify(Some("application/problem+json")),
            Ok(Some(Kind::Json))
        );
        assert_eq!(classify(Some("text/markdown")), Ok(Some(Kind::Text)));
        assert_eq!(classify(None), Ok(None));
        assert_eq!(classify(Some("image/png")), Err("image/png".into()));
        assert_eq!(sniff(b"  <!DOCTYPE html><p>x"), Some(Kind::Html));
        assert_eq!(sniff(b"{\"a\":1}"), Some(Kind::Json));
        assert_eq!(sniff(b"\x89PNG\0\0"), None);
    }
}
