//! The `internet` toolset (`fetch_webpage`) against a local web server: HTML reduction, JSON
//! passthrough, size caps, redirects, HTTP errors, and the SSRF / allowed-host / scheme guards.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use triage::tools::internet::{InternetConfig, toolset};
use triage::tools::{Tool, ToolContext, ToolOutput, Toolset, ToolsetStatus};
use triage::wire::events::ToolStatus;

const PAGE: &str = r#"<!DOCTYPE html>
<html><head><title>Runbook: disk full</title>
<style>body { color: red } .STYLE_JUNK { display: none }</style>
<script>var SCRIPT_JUNK = "tracking"; console.log(SCRIPT_JUNK);</script>
</head><body>
<nav><script type="text/javascript">document.write("MORE_SCRIPT_JUNK")</script></nav>
<h1>Disk full on the database node</h1>
<p>When the <b>DiskFull</b> alert fires, check the volume usage first.</p>
<h2>Remediation</h2>
<ol><li>Delete old snapshots.</li><li>Resize the volume.</li></ol>
<p>See <a href="https://docs.example/volumes">the volume docs</a>.</p>
</body></html>"#;

const JSON_DOC: &str = r#"{"status":"degraded","components":[{"name":"api","status":"down"}]}"#;

/// The local web server; stops on drop.
struct Site {
    base: String,
    port: u16,
    hits: Arc<AtomicUsize>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Site {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn typed(content_type: &'static str, body: impl Into<Body>) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body.into()).into_response()
}

fn redirect(status: StatusCode, to: String) -> Response {
    (status, [(header::LOCATION, to)]).into_response()
}

async fn start_site() -> Site {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the test site");
    let port = listener.local_addr().expect("local address").port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = Router::new()
        .route(
            "/page.html",
            get(|| async { typed("text/html; charset=utf-8", PAGE) }),
        )
        .route(
            "/doc.json",
            get(|| async { typed("application/json", JSON_DOC) }),
        )
        .route(
            "/big.txt",
            get(|| async { typed("text/plain", "0123456789abcdef\n".repeat(20_000)) }),
        )
        .route(
            "/deep.html",
            get(|| async { typed("text/html", "<div>".repeat(5_000)) }),
        )
        .route(
            "/image.png",
            get(|| async { typed("image/png", &b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"[..]) }),
        )
        .route(
            "/untyped",
            get(|| async { Response::new(Body::from("<!doctype html><h1>Sniffed heading</h1>")) }),
        )
        .route(
            "/missing",
            get(|| async {
                (
                    StatusCode::NOT_FOUND,
                    [(header::CONTENT_TYPE, "text/html")],
                    "<html><body><h1>Not found</h1><p>no such runbook here</p></body></html>",
                )
                    .into_response()
            }),
        )
        .route(
            "/r1",
            get(|| async { redirect(StatusCode::FOUND, "/r2#frag".into()) }),
        )
        .route(
            "/r2",
            get(move || async move {
                redirect(
                    StatusCode::MOVED_PERMANENTLY,
                    format!("http://127.0.0.1:{port}/page.html"),
                )
            }),
        )
        .route(
            "/loop",
            get(|| async { redirect(StatusCode::TEMPORARY_REDIRECT, "/loop".into()) }),
        )
        .route(
            "/to-localhost",
            get(move || async move {
                redirect(
                    StatusCode::FOUND,
                    format!("http://localhost:{port}/page.html"),
                )
            }),
        )
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    next.run(req).await
                }
            },
        ));
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Site {
        base: format!("http://127.0.0.1:{port}"),
        port,
        hits,
        server,
    }
}

fn fetcher(cfg: &InternetConfig) -> Toolset {
    let ts = toolset(cfg, &Default::default(), &[]);
    assert_eq!(ts.status, ToolsetStatus::Enabled);
    assert_eq!(ts.tools.len(), 1);
    ts
}

fn private_allowed() -> InternetConfig {
    InternetConfig {
        allow_private_addresses: true,
        ..InternetConfig::default()
    }
}

async fn fetch(ts: &Toolset, url: &str) -> ToolOutput {
    let tool: &Arc<dyn Tool> = &ts.tools[0];
    tool.invoke(&json!({ "url": url }), &ToolContext::default())
        .await
}

fn ok(out: &ToolOutput) -> &str {
    assert_eq!(out.status, ToolStatus::Success, "{out:?}");
    &out.data
}

fn err(out: &ToolOutput) -> &str {
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    out.error.as_deref().unwrap_or_default()
}

#[tokio::test]
async fn fetches_html_json_redirects_and_errors() {
    let site = start_site().await;
    let ts = fetcher(&private_allowed());
    let base = &site.base;
    let tool = &ts.tools[0];
    assert_eq!(tool.name(), "fetch_webpage");
    assert_eq!(
        tool.one_liner(&json!({"url": format!("{base}/page.html")})),
        format!("Fetch {base}/page.html")
    );
    assert!(ts.instructions.contains("runbook"), "{}", ts.instructions);

    // HTML: readable text, no script or style content.
    let out = fetch(&ts, &format!("{base}/page.html")).await;
    let text = ok(&out);
    assert!(
        text.starts_with(&format!(
            "URL: {base}/page.html\nContent-Type: text/html; charset=utf-8\nTitle: Runbook: disk full\n\n"
        )),
        "{text}"
    );
    assert!(text.contains("Disk full on the database node"), "{text}");
    assert!(text.contains("Remediation"), "{text}");
    assert!(text.contains("Delete old snapshots."), "{text}");
    assert!(text.contains("check the volume usage first"), "{text}");
    assert!(text.contains("https://docs.example/volumes"), "{text}");
    for junk in [
        "SCRIPT_JUNK",
        "STYLE_JUNK",
        "color: red",
        "console.log",
        "<p>",
        "<h1>",
    ] {
        assert!(!text.contains(junk), "{junk} in {text}");
    }

    // JSON as it is.
    let out = fetch(&ts, &format!("{base}/doc.json")).await;
    let text = ok(&out);
    assert!(
        text.ends_with(&format!("Content-Type: application/json\n\n{JSON_DOC}")),
        "{text}"
    );

    // No content type: sniffed as HTML.
    let out = fetch(&ts, &format!("{base}/untyped")).await;
    let text = ok(&out);
    assert!(
        text.contains("Sniffed heading") && !text.contains("<h1>"),
        "{text}"
    );

    // A redirect chain (relative, then absolute) is followed.
    let out = fetch(&ts, &format!("{base}/r1")).await;
    let text = ok(&out);
    assert!(
        text.starts_with(&format!(
            "URL: {base}/page.html (redirected from {base}/r1)\n"
        )),
        "{text}"
    );
    assert!(text.contains("Delete old snapshots."), "{text}");

    // Endless redirects stop.
    let out = fetch(&ts, &format!("{base}/loop")).await;
    assert!(
        err(&out).starts_with(&format!(
            "too many redirects (more than 5) from {base}/loop"
        )),
        "{out:?}"
    );

    // HTTP errors carry the status and an excerpt of the page.
    let out = fetch(&ts, &format!("{base}/missing")).await;
    let e = err(&out);
    assert!(
        e.starts_with(&format!("{base}/missing answered HTTP 404 Not Found: ")),
        "{e}"
    );
    assert!(e.contains("no such runbook here"), "{e}");
    assert!(!e.contains("<p>"), "{e}");

    // Binary content is refused.
    let out = fetch(&ts, &format!("{base}/image.png")).await;
    assert!(
        err(&out).starts_with("unsupported content type `image/png`"),
        "{out:?}"
    );

    // Pathologically nested HTML is not converted (html2text is quadratic on it).
    let out = fetch(&ts, &format!("{base}/deep.html")).await;
    assert!(
        err(&out).contains("nested more than 1000 levels deep"),
        "{out:?}"
    );

    // Bad parameters.
    let tool: &Arc<dyn Tool> = &ts.tools[0];
    let out = tool
        .invoke(&json!({"href": "x"}), &ToolContext::default())
        .await;
    assert!(err(&out).contains("href"), "{out:?}");
}

#[tokio::test]
async fn caps_the_download_and_the_output() {
    let site = start_site().await;
    let url = format!("{}/big.txt", site.base);

    let ts = fetcher(&InternetConfig {
        max_bytes: 10_000,
        ..private_allowed()
    });
    let out = fetch(&ts, &url).await;
    let text = ok(&out);
    assert!(
        text.ends_with(
            "[Truncated: the body is larger than 10000 bytes; only the first 10000 bytes were read.]"
        ),
        "{}",
        &text[text.len().saturating_sub(300)..]
    );
    assert!(text.len() < 10_300, "{}", text.len());
    assert!(text.contains("0123456789abcdef\n0123456789abcdef"));

    let ts = fetcher(&InternetConfig {
        max_output_chars: 1_000,
        ..private_allowed()
    });
    let out = fetch(&ts, &url).await;
    let text = ok(&out);
    assert!(
        text.ends_with("[Truncated: the text was cut at 1000 characters.]"),
        "{text}"
    );
    assert!(text.len() < 1_200, "{}", text.len());
}

#[tokio::test]
async fn default_config_refuses_private_addresses() {
    let site = start_site().await;
    let ts = fetcher(&InternetConfig::default());

    let out = fetch(&ts, &format!("{}/page.html", site.base)).await;
    let e = err(&out);
    assert!(
        e.starts_with(&format!(
            "refused to fetch {}/page.html: 127.0.0.1 is a loopback address.",
            site.base
        )),
        "{e}"
    );
    assert!(e.contains("server-side request forgery (SSRF)"), "{e}");
    assert!(
        e.contains("toolsets.internet.allow_private_addresses = true"),
        "{e}"
    );

    let out = fetch(&ts, &format!("http://localhost:{}/page.html", site.port)).await;
    let e = err(&out);
    assert!(e.contains("`localhost` resolves to "), "{e}");
    assert!(e.contains("SSRF"), "{e}");

    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:0:127.0.0.1]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:7f00:1::1]/",
        "http://10.0.0.1/",
        "http://0x7f000001/",
    ] {
        let out = fetch(&ts, url).await;
        assert!(err(&out).contains("SSRF"), "{url}: {out:?}");
    }
    assert!(
        err(&fetch(&ts, "http://169.254.169.254/").await).contains("link-local"),
        "cloud metadata"
    );
    // Nothing reached the server.
    assert_eq!(site.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn allowed_hosts_are_enforced_on_every_hop() {
    let site = start_site().await;

    let ts = fetcher(&InternetConfig {
        allowed_hosts: vec![".example.com".into()],
        ..private_allowed()
    });
    assert!(
        ts.instructions
            .contains("Only these hosts can be fetched: .example.com.")
    );
    let out = fetch(&ts, &format!("{}/page.html", site.base)).await;
    assert!(
        err(&out).contains("host `127.0.0.1` is not in toolsets.internet.allowed_hosts"),
        "{out:?}"
    );
    assert_eq!(site.hits.load(Ordering::SeqCst), 0);

    let ts = fetcher(&InternetConfig {
        allowed_hosts: vec!["127.0.0.1".into()],
        ..private_allowed()
    });
    ok(&fetch(&ts, &format!("{}/page.html", site.base)).await);
    // A redirect to another host is checked too.
    let out = fetch(&ts, &format!("{}/to-localhost", site.base)).await;
    assert!(
        err(&out).starts_with(&format!(
            "refused to fetch http://localhost:{}/page.html: host `localhost` is not in \
             toolsets.internet.allowed_hosts",
            site.port
        )),
        "{out:?}"
    );
}

#[tokio::test]
async fn only_http_urls() {
    let ts = fetcher(&private_allowed());
    for url in [
        "file:///etc/passwd",
        "ftp://127.0.0.1/x",
        "gopher://127.0.0.1/",
        "javascript:alert(1)",
    ] {
        let out = fetch(&ts, url).await;
        assert!(
            err(&out).contains("only http:// and https:// URLs can be fetched"),
            "{url}: {out:?}"
        );
    }
    let out = fetch(&ts, "not a url").await;
    assert!(err(&out).starts_with("invalid URL `not a url`"), "{out:?}");

    let off = toolset(
        &InternetConfig {
            enabled: false,
            ..InternetConfig::default()
        },
        &Default::default(),
        &[],
    );
    assert_eq!(off.status, ToolsetStatus::Disabled);
}
