//! One fetch: every redirect hop checked by the SSRF guard, the body read up to a cap,
//! reduced to text by its kind, and the answer (or the error page) worded for the model.

use std::fmt::Write as _;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use url::Url;

use super::InternetConfig;
use super::content::{Kind, classify, sniff};
use super::html::{MAX_HTML_DEPTH, html_nesting_depth, html_title, html_to_text};
use super::ssrf::{PublicOnlyResolver, Rules, proxy_in_environment};
use crate::tools::capped::{Overflow, read_capped};
use crate::tools::{ToolOutput, describe_http_error};
use crate::wire::events::ToolStatus;

const MAX_REDIRECTS: usize = 5;
/// Bytes of an error page read for its excerpt, and characters shown.
const ERROR_BODY_BYTES: usize = 16 * 1024;
const ERROR_EXCERPT_CHARS: usize = 300;
const ACCEPT_VALUE: &str =
    "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.9,*/*;q=0.5";

pub(super) struct Fetcher {
    client: reqwest::Client,
    rules: Rules,
    max_bytes: usize,
    max_output_chars: usize,
    pub(super) timeout: Duration,
}

impl Fetcher {
    pub(super) fn new(
        cfg: &InternetConfig,
        roots: &crate::runtime::trust::ExtraRoots,
        own_ports: &[u16],
    ) -> Result<Fetcher, String> {
        let timeout = Duration::from_secs(cfg.timeout_secs.max(1));
        let mut builder = roots
            .client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(cfg.user_agent.as_str())
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .timeout(timeout);
        if !cfg.allow_private_addresses && !proxy_in_environment() {
            builder = builder.dns_resolver(PublicOnlyResolver);
        }
        let client = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Fetcher {
            client,
            rules: Rules::new(cfg, own_ports),
            max_bytes: cfg.max_bytes.max(1),
            max_output_chars: cfg.max_output_chars.max(1),
            timeout,
        })
    }

    pub(super) async fn fetch(&self, raw: &str) -> Result<ToolOutput, String> {
        let raw = raw.trim();
        let mut url = Url::parse(raw).map_err(|e| format!("invalid URL `{raw}`: {e}"))?;
        url.set_fragment(None);
        let requested = url.clone();
        let mut redirects = 0;
        let resp = loop {
            self.rules.check(&url).await?;
            let resp = self
                .client
                .get(url.clone())
                .header(ACCEPT, ACCEPT_VALUE)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "cannot fetch {url}: {}",
                        describe_http_error(&e, self.timeout)
                    )
                })?;
            let location = resp
                .headers()
                .get(LOCATION)
                .filter(|_| resp.status().is_redirection());
            let Some(location) = location else {
                break resp;
            };
            let location = location
                .to_str()
                .map_err(|_| format!("{url} redirected to an unreadable Location"))?;
            let mut next = url
                .join(location)
                .map_err(|e| format!("{url} redirected to an invalid URL `{location}`: {e}"))?;
            next.set_fragment(None);
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(format!(
                    "too many redirects (more than {MAX_REDIRECTS}) from {requested}; the last \
                     one pointed to {next}"
                ));
            }
            url = next;
        };
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if !status.is_success() {
            let body = read_capped(resp.bytes_stream(), ERROR_BODY_BYTES, Overflow::Stop)
                .await
                .map(|c| c.bytes)
                .unwrap_or_default();
            let excerpt = error_excerpt(&body, content_type.as_deref());
            let mut msg = format!("{url} answered HTTP {status}");
            if !excerpt.is_empty() {
                let _ = write!(msg, ": {excerpt}");
            }
            return Err(msg);
        }
        let declared = classify(content_type.as_deref()).map_err(|mime| {
            format!(
                "unsupported content type `{mime}` at {url}: only HTML, JSON and text can be read"
            )
        })?;
        let body = read_capped(resp.bytes_stream(), self.max_bytes, Overflow::Stop)
            .await
            .map_err(|e| {
                format!(
                    "cannot read {url}: {}",
                    describe_http_error(&e, self.timeout)
                )
            })?;
        let cut_bytes = body.truncated();
        let body = body.bytes;
        let kind = declared.or_else(|| sniff(&body)).ok_or_else(|| {
            format!("unsupported content type at {url}: none declared, and the body is not text")
        })?;
        let (text, title) = match kind {
            Kind::Html => {
                if html_nesting_depth(&body) > MAX_HTML_DEPTH {
                    return Err(format!(
                        "cannot convert the HTML page at {url} to text: its elements are nested \
                         more than {MAX_HTML_DEPTH} levels deep"
                    ));
                }
                // Off the async workers: conversion of a large page takes a while.
                let title = html_title(&body);
                let text = tokio::task::spawn_blocking(move || html_to_text(&body))
                    .await
                    .map_err(|_| format!("converting the HTML page at {url} to text failed"))??;
                (text, title)
            }
            Kind::Json | Kind::Text => (String::from_utf8_lossy(&body).into_owned(), None),
        };
        let (text, cut_chars) = clip_chars(text, self.max_output_chars);

        let mut out = format!("URL: {url}");
        if url != requested {
            let _ = write!(out, " (redirected from {requested})");
        }
        let _ = write!(
            out,
            "\nContent-Type: {}",
            content_type.as_deref().unwrap_or("(none)")
        );
        if let Some(title) = title {
            let _ = write!(out, "\nTitle: {title}");
        }
        let empty = text.trim().is_empty();
        if empty {
            out.push_str("\n\nThe page has no readable text.");
        } else {
            let _ = write!(out, "\n\n{}", text.trim_end());
        }
        if cut_bytes {
            let _ = write!(
                out,
                "\n\n[Truncated: the body is larger than {} bytes; only the first {} bytes \
                 were read.]",
                self.max_bytes, self.max_bytes
            );
        }
        if cut_chars {
            let _ = write!(
                out,
                "\n\n[Truncated: the text was cut at {} characters.]",
                self.max_output_chars
            );
        }
        let mut output = ToolOutput::success(out);
        if empty {
            output.status = ToolStatus::NoData;
        }
        output.invocation = Some(format!("GET {url}"));
        Ok(output)
    }
}

fn error_excerpt(body: &[u8], content_type: Option<&str>) -> String {
    let html = matches!(classify(content_type), Ok(Some(Kind::Html)))
        || (content_type.is_none() && sniff(body) == Some(Kind::Html));
    let text = if html {
        html_to_text(body).unwrap_or_default()
    } else {
        String::from_utf8_lossy(body).into_owned()
    };
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (clipped, cut) = clip_chars(one_line, ERROR_EXCERPT_CHARS);
    if cut {
        format!("{clipped}…")
    } else {
        clipped
    }
}

/// The text cut to `max` characters, and whether it was cut.
fn clip_chars(text: String, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((i, _)) => (text[..i].to_owned(), true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_chars_counts_characters() {
        assert_eq!(clip_chars("héllo".into(), 2), ("hé".into(), true));
        assert_eq!(clip_chars("hé".into(), 2), ("hé".into(), false));
    }
}
