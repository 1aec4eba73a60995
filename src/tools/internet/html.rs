//! HTML reduced to readable text for the model: html2text, blank lines squeezed, the title
//! kept, and a guard against nesting so deep that conversion would take too long.

/// Text width HTML is rendered at.
const HTML_WIDTH: usize = 100;
/// HTML nested deeper than this is not converted: html2text takes quadratic time on it.
pub(super) const MAX_HTML_DEPTH: usize = 1000;

pub(super) fn html_to_text(body: &[u8]) -> Result<String, String> {
    let text = html2text::from_read(body, HTML_WIDTH)
        .map_err(|e| format!("cannot convert the HTML page to text: {e}"))?;
    // Trailing spaces off, and no more than one blank line in a row.
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(out.trim().to_owned())
}

/// The deepest nesting of block containers (`div`, `ul`, `blockquote`…), counted from their
/// start and end tags: a cheap guard, not a parse.
pub(super) fn html_nesting_depth(body: &[u8]) -> usize {
    const CONTAINERS: [&[u8]; 20] = [
        b"div",
        b"ul",
        b"ol",
        b"dl",
        b"blockquote",
        b"section",
        b"article",
        b"aside",
        b"nav",
        b"main",
        b"header",
        b"footer",
        b"form",
        b"fieldset",
        b"details",
        b"figure",
        b"table",
        b"pre",
        b"center",
        b"menu",
    ];
    let (mut depth, mut max) = (0usize, 0usize);
    let mut i = 0;
    while let Some(offset) = body[i..].iter().position(|&b| b == b'<') {
        let mut j = i + offset + 1;
        let closing = body.get(j) == Some(&b'/');
        if closing {
            j += 1;
        }
        let len = body[j..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        let name = body[j..j + len].to_ascii_lowercase();
        if CONTAINERS.contains(&name.as_slice()) {
            if closing {
                depth = depth.saturating_sub(1);
            } else {
                depth += 1;
                max = max.max(depth);
            }
        }
        i = j + len;
    }
    max
}

/// The `<title>` of an HTML page (html2text drops the head).
pub(super) fn html_title(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(64 * 1024)]);
    let lower = head.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let raw = format!("<p>{}</p>", &head[start..end]);
    let title = html2text::from_read(raw.as_bytes(), 10_000).ok()?;
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_reduced() {
        let html = b"<html><head><title>Run &amp; book</title><style>p{color:red}</style>\
            </head><body><script>var secret=1;</script><h1>Restart</h1>\n\n\n<p>Do   it.</p></body></html>";
        let text = html_to_text(html).unwrap();
        assert!(text.contains("Restart"), "{text}");
        assert!(text.contains("Do it."), "{text}");
        assert!(
            !text.contains("secret") && !text.contains("color"),
            "{text}"
        );
        assert_eq!(html_title(html).as_deref(), Some("Run & book"));
        assert_eq!(html_nesting_depth(html), 0);
        assert_eq!(html_nesting_depth(b"<div><DIV>x</div></div><div></div>"), 2);
        assert_eq!(html_nesting_depth("<ul><li>".repeat(5).as_bytes()), 5);
        assert_eq!(
            html_nesting_depth("<div>x</div>".repeat(5000).as_bytes()),
            1
        );
        assert_eq!(html_nesting_depth(b"<"), 0);
    }
}
