//! `images` of a request → the OpenAI vision content array of the user message.

use serde_json::{Value, json};

use crate::wire::request::ImageInput;

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
