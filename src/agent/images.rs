//! `images` of a request → the OpenAI vision content array of the user message.

use serde_json::{Value, json};

use crate::wire::Message;
use crate::wire::request::ImageInput;

/// Images cost memory and tokens out of proportion to their bytes in the body (300,000 tiny
/// ones once took 450 MB): a request's images are bounded by count and decoded size.
#[derive(Debug, Clone, Copy)]
pub struct ImageLimits {
    pub per_request: usize,
    pub total: usize,
    pub bytes_total: usize,
}

impl ImageLimits {
    /// Checks the request's `images` and the images already in the history against the caps;
    /// the error names the cap and its key.
    pub fn check(&self, history: &[Message], images: &[ImageInput]) -> Result<(), String> {
        if images.len() > self.per_request {
            return Err(format!(
                "too many images: {} in `images`, at most {} per request (agent.max_images_per_request)",
                images.len(),
                self.per_request
            ));
        }
        let in_history = history
            .iter()
            .filter_map(|m| m.content.parts())
            .flatten()
            .filter_map(|part| part.get("image_url"))
            .map(|image| image.get("url").and_then(Value::as_str).unwrap_or_default());
        let in_request = images.iter().map(|image| match image {
            ImageInput::Url(url) => url.as_str(),
            ImageInput::Detailed(spec) => spec.url.as_deref().unwrap_or_default(),
        });
        let (mut count, mut bytes) = (0usize, 0usize);
        for url in in_history.chain(in_request) {
            count += 1;
            bytes = bytes.saturating_add(decoded_len(url));
        }
        if count > self.total {
            return Err(format!(
                "too many images: {count} in the conversation, at most {} (agent.max_images_total)",
                self.total
            ));
        }
        if bytes > self.bytes_total {
            return Err(format!(
                "images too large: {bytes} bytes of image data in the conversation, at most {} \
                 (agent.max_image_bytes_total)",
                self.bytes_total
            ));
        }
        Ok(())
    }
}

/// The decoded size of a base64 `data:` URI (0 for a URL the provider fetches itself).
fn decoded_len(url: &str) -> usize {
    match url.strip_prefix("data:").and_then(|r| r.split_once(',')) {
        Some((_, payload)) => payload.trim_end_matches('=').len() / 4 * 3,
        None => 0,
    }
}

/// Builds `[{"type":"text"…}, {"type":"image_url"…}…]`, or says what is wrong with an image.
pub(super) fn vision_content(text: &str, images: &[ImageInput]) -> Result<Value, String> {
    let mut parts = vec![json!({"type": "text", "text": text})];
    for (i, image) in images.iter().enumerate() {
        let (url, detail, format) = match image {
            ImageInput::Url(url) => (url.as_str(), None, None),
            ImageInput::Detailed(spec) => {
                let Some(url) = spec.url.as_deref() else {
                    return Err(format!(
                        "images[{i}]: an image object must contain a 'url' key"
                    ));
                };
                (url, spec.detail.as_deref(), spec.format.as_deref())
            }
        };
        check_url(url).map_err(|e| format!("images[{i}]: {e}"))?;
        if let Some(d) = detail
            && !matches!(d, "low" | "high" | "auto")
        {
            return Err(format!(
                "images[{i}]: detail must be low, high or auto, got '{d}'"
            ));
        }
        let mut image_url = json!({"url": url});
        if let Some(d) = detail {
            image_url["detail"] = json!(d);
        }
        if let Some(f) = format {
            image_url["format"] = json!(f);
        }
        parts.push(json!({"type": "image_url", "image_url": image_url}));
    }
    Ok(Value::Array(parts))
}

fn check_url(url: &str) -> Result<(), String> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (header, payload) = rest
            .split_once(',')
            .ok_or("malformed data URI: no ',' before the data")?;
        let (mime, encoding) = header
            .split_once(';')
            .ok_or("malformed data URI: expected data:<mime>;base64,<data>")?;
        if !mime.starts_with("image/") {
            return Err(format!("data URI is not an image (type '{mime}')"));
        }
        if encoding != "base64" {
            return Err("malformed data URI: only base64 data is supported".into());
        }
        let valid = !payload.is_empty()
            && payload.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_')
            });
        if !valid {
            return Err("malformed data URI: the data is not base64".into());
        }
        return Ok(());
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(());
    }
    Err("an image must be an http(s) URL or a data: URI".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::request::ImageSpec;

    #[test]
    fn caps_count_per_request_in_total_and_bytes() {
        let limits = ImageLimits {
            per_request: 2,
            total: 3,
            bytes_total: 30,
        };
        let url = |s: &str| ImageInput::Url(s.into());
        let small = "data:image/png;base64,AAAAAAAA"; // 6 bytes
        assert!(limits.check(&[], &[url(small), url(small)]).is_ok());
        let err = limits.check(&[], &[url(small), url(small), url(small)]);
        assert!(err.unwrap_err().contains("agent.max_images_per_request"));
        let history = vec![Message::user(
            vision_content("x", &[url(small), url("https://x/a.png")]).unwrap(),
        )];
        let err = limits.check(&history, &[url(small), url(small)]);
        assert!(err.unwrap_err().contains("4 in the conversation"));
        let big = format!("data:image/png;base64,{}", "A".repeat(44)); // 33 bytes
        let err = limits.check(&[], &[url(&big)]);
        assert!(err.unwrap_err().contains("agent.max_image_bytes_total"));
    }

    #[test]
    fn builds_content_parts() {
        let images = vec![
            ImageInput::Url("https://x/a.png".into()),
            ImageInput::Detailed(ImageSpec {
                url: Some("data:image/png;base64,iVBORw0KGgo=".into()),
                detail: Some("high".into()),
                format: Some("image/png".into()),
            }),
        ];
        let v = vision_content("look", &images).unwrap();
        assert_eq!(v[0], json!({"type":"text","text":"look"}));
        assert_eq!(v[1]["image_url"]["url"], "https://x/a.png");
        assert_eq!(v[2]["image_url"]["detail"], "high");
        assert_eq!(v[2]["image_url"]["format"], "image/png");
    }

    #[test]
    fn rejects_bad_images() {
        let missing = ImageInput::Detailed(ImageSpec {
            url: None,
            detail: None,
            format: None,
        });
        assert!(
            vision_content("", &[missing])
                .unwrap_err()
                .contains("'url'")
        );
        for bad in [
            "data:image/png;base64",
            "data:text/plain;base64,aGk=",
            "data:image/png;base64,@@",
            "ftp://x",
        ] {
            assert!(
                vision_content("", &[ImageInput::Url(bad.into())]).is_err(),
                "{bad}"
            );
        }
    }
}
