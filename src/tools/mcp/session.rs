//! A server's supervisor: opens the session (starting a stdio server in the sandbox), lists
//! the tools, re-lists them on `notifications/tools/list_changed`, and when the session ends
//! (the process exited, the connection dropped, a call found the transport closed) opens a
//! new one after a back-off that doubles up to a minute and starts again once a session has
//! held.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use rmcp::model::{ClientRequest, PingRequest};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::Notify;

use super::config::{Endpoint, McpMode};
use super::sse::{SseTransport, header_map};
use super::stdio::{ServerProcess, spawn};
use super::{Phase, Server, tool};
use crate::sandbox::Sandbox;

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A session that lasted this long resets the back-off.
const HELD: Duration = Duration::from_secs(30);
/// Time to open a session (process start and `initialize`) and to list the tools.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often an idle session's transport is checked.
const CHECK_EVERY: Duration = Duration::from_secs(5);
/// How often an idle streamable-HTTP session is pinged: it holds no connection whose loss
/// would tell that the server went away, so without a ping it would show as connected until
/// the next call failed.
const PING_EVERY: Duration = Duration::from_secs(10);
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// Wakes the supervisor when the server says its tools changed.
struct Handler {
    relist: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.relist.notify_one();
        std::future::ready(())
    }
}

type Session = RunningService<RoleClient, Handler>;

pub async fn supervise(server: Arc<Server>, sandbox: Sandbox, client: reqwest::Client) {
    let resolved = match server.settings.resolve(&|k| std::env::var(k).ok()) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(mcp_server = %server.name, error = %e, "MCP server not started");
            let mut st = server.lock();
            st.phase = Phase::Failed;
            st.last_error = Some(e);
            st.attempted = true;
            return;
        }
    };
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = Instant::now();
        let ended = run_once(&server, &resolved.endpoint, &sandbox, &client).await;
        {
            let mut st = server.lock();
            st.phase = Phase::Disconnected;
            st.peer = None;
            st.pid = None;
            st.last_error = Some(ended.clone());
            st.attempted = true;
        }
        server.changed();
        tracing::warn!(mcp_server = %server.name, error = %ended, retry_in_secs = backoff.as_secs(), "MCP session ended");
        if started.elapsed() >= HELD {
            backoff = FIRST_BACKOFF;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
        server.lock().phase = Phase::Connecting;
    }
}

/// One session from opening to its end; returns why it ended.
async fn run_once(
    server: &Server,
    endpoint: &Endpoint,
    sandbox: &Sandbox,
    client: &reqwest::Client,
) -> String {
    let relist = Arc::new(Notify::new());
    let handler = Handler {
        relist: relist.clone(),
    };
    let mut process: Option<ServerProcess> = None;
    let opened = tokio::time::timeout(
        CONNECT_TIMEOUT,
        open(server, endpoint, sandbox, client, handler, &mut process),
    )
    .await;
    let session = match opened {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return with_stderr(e, process.as_mut()),
        Err(_) => {
            return with_stderr(
                format!("no session within {} s", CONNECT_TIMEOUT.as_secs()),
                process.as_mut(),
            );
        }
    };
    let peer = session.peer().clone();
    if let Err(e) = list(server, &peer).await {
        return with_stderr(e, process.as_mut());
    }
    {
        let mut st = server.lock();
        st.phase = Phase::Connected;
        st.peer = Some(peer.clone());
        st.connections += 1;
        st.pid = process.as_ref().and_then(ServerProcess::pid);
        st.last_error = None;
        st.attempted = true;
    }
    server.changed();
    tracing::info!(mcp_server = %server.name, tools = server.lock().tools.len(), "MCP server connected");
    // A call that failed on the previous session must not end this one.
    let _ = server.broken.notified().now_or_never();
    let waiting = session.waiting();
    tokio::pin!(waiting);
    let mut check = tokio::time::interval(CHECK_EVERY);
    let pings = matches!(
        endpoint,
        Endpoint::Http {
            mode: McpMode::StreamableHttp,
            ..
        }
    );
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            quit = &mut waiting => {
                let why = match quit {
                    Ok(reason) => format!("session closed ({reason:?})"),
                    Err(e) => format!("session task failed: {e}"),
                };
                return with_stderr(why, process.as_mut());
            }
            () = relist.notified() => {
                if let Err(e) = list(server, &peer).await {
                    tracing::warn!(mcp_server = %server.name, error = %e, "re-listing MCP tools failed");
                    server.lock().last_error = Some(e);
                }
            }
            () = server.broken.notified() => {
                let why = server.lock().last_error.clone().unwrap_or_default();
                return with_stderr(format!("a call found the connection broken ({why})"), process.as_mut());
            }
            _ = ping.tick(), if pings => {
                if let Err(why) = alive(&peer).await {
                    return format!("the server stopped answering pings ({why})");
                }
            }
            _ = check.tick() => {
                if peer.is_transport_closed() {
                    return with_stderr("the connection dropped".into(), process.as_mut());
                }
                if let Some(p) = process.as_mut() && let Some(status) = p.exit_status() {
                    return with_stderr(format!("the server process exited ({status})"), Some(p));
                }
            }
        }
    }
}

/// Pings the server. Any answer, an error included, says it is there; a transport failure or
/// no answer in time says it is not.
async fn alive(peer: &rmcp::Peer<RoleClient>) -> Result<(), String> {
    let request = ClientRequest::PingRequest(PingRequest {
        method: Default::default(),
        extensions: Default::default(),
    });
    match tokio::time::timeout(PING_TIMEOUT, peer.send_request(request)).await {
        Ok(Ok(_) | Err(ServiceError::McpError(_))) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", PING_TIMEOUT.as_secs())),
    }
}

/// Adds how a stdio server ended and what it last said on stderr.
fn with_stderr(error: String, process: Option<&mut ServerProcess>) -> String {
    let Some(p) = process else {
        return error;
    };
    let mut error = error;
    if let Some(status) = p.exit_status()
        && !error.contains("exited")
    {
        error.push_str(&format!("; the server process exited ({status})"));
    }
    if let Some(advice) = p.sandbox_advice() {
        error.push_str(&format!("; {advice}"));
    }
    match p.stderr_tail() {
        tail if tail.is_empty() => error,
        tail => format!("{error}; stderr: {tail}"),
    }
}

async fn open(
    server: &Server,
    endpoint: &Endpoint,
    sandbox: &Sandbox,
    client: &reqwest::Client,
    handler: Handler,
    process: &mut Option<ServerProcess>,
) -> Result<Session, String> {
    let failed = |e: &dyn std::fmt::Display| format!("initialize: {e}");
    match endpoint {
        Endpoint::Stdio { command, args, env } => {
            let (child, stdout, stdin) = spawn(sandbox, &server.name, command, args, env)
                .await
                .map_err(|e| format!("cannot start {command}: {e}"))?;
            *process = Some(child);
            handler.serve((stdout, stdin)).await.map_err(|e| failed(&e))
        }
        Endpoint::Http {
            mode: McpMode::Sse,
            url,
            headers,
        } => {
            let transport =
                SseTransport::connect(client.clone(), url, header_map(headers)?).await?;
            handler.serve(transport).await.map_err(|e| failed(&e))
        }
        Endpoint::Http { url, headers, .. } => {
            let custom: HashMap<_, _> = header_map(headers)?
                .into_iter()
                .filter_map(|(k, v)| Some((k?, v)))
                .collect();
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
            handler.serve(transport).await.map_err(|e| failed(&e))
        }
    }
}

/// Lists the tools and installs those that pass the filter.
async fn list(server: &Server, peer: &rmcp::Peer<RoleClient>) -> Result<(), String> {
    let pages = all_pages(|cursor| async move {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        peer.list_tools(Some(params))
            .await
            .map(|page| (page.tools, page.next_cursor))
            .map_err(|e| e.to_string())
    });
    let tools = tokio::time::timeout(CONNECT_TIMEOUT, pages)
        .await
        .map_err(|_| {
            format!(
                "tools/list: no answer within {} s",
                CONNECT_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("tools/list: {e}"))?;
    let listed = tools.len();
    let listing = tool::accept(&server.name, &server.settings, tools);
    for r in &listing.rejected {
        tracing::warn!(mcp_server = %server.name, tool = %r.name, reason = %r.reason, "MCP tool rejected");
    }
    for t in &listing.trimmed {
        tracing::warn!(mcp_server = %server.name, tool = %t.name, reason = %t.reason, "MCP tool description trimmed");
    }
    if listed == 0 {
        tracing::warn!(mcp_server = %server.name, "the MCP server lists no tools");
    }
    {
        let mut st = server.lock();
        st.tools = listing.accepted;
        st.rejected = listing.rejected;
        st.trimmed = listing.trimmed;
        st.listed = Some(listed);
    }
    server.changed();
    Ok(())
}

/// More tools than any model can choose among; a server listing more is refused.
const MAX_LISTED_TOOLS: usize = 1000;

/// Follows `tools/list`'s cursors up to [`MAX_LISTED_TOOLS`]. rmcp's own loop follows them for
/// as long as the server hands out cursors, keeping every page: a hostile server answering
/// each page with another cursor grew triage's memory until the listing's timeout.
async fn all_pages<T, F, Fut>(mut page: F) -> Result<Vec<T>, String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), String>>,
{
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let (more, next) = page(cursor).await?;
        items.extend(more);
        if items.len() > MAX_LISTED_TOOLS {
            return Err(format!(
                "the server lists more than {MAX_LISTED_TOOLS} tools"
            ));
        }
        match next {
            Some(next) => cursor = Some(next),
            None => return Ok(items),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn endless_pages_stop_at_the_cap() {
        let mut asked = 0usize;
        let result = all_pages(|_| {
            asked += 1;
            async { Ok((vec![0u8; 7], Some("again".to_owned()))) }
        })
        .await;
        let err = result.expect_err("refused");
        assert!(err.contains("more than 1000 tools"), "{err}");
        assert!(asked <= MAX_LISTED_TOOLS / 7 + 1, "{asked} pages");
        let single = all_pages(|_| async { Ok((vec![1, 2], None)) }).await;
        assert_eq!(single, Ok(vec![1, 2]));
    }
}
