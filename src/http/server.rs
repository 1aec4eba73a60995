//! The accept loop: plain TCP or TLS, HTTP/1 and HTTP/2, timeouts against slow-loris clients
//! (first byte, headers, stalled writes), and graceful shutdown (stop accepting, let requests
//! finish for the grace period, then tell open streams to end with an `error` event). Each
//! accepted connection is served on one of the `shards`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::deadlines::Deadlines;

/// Tells streams how far shutdown has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Running,
    /// Grace period over: open streams must end now.
    Closing,
}

#[derive(Clone)]
pub struct ShutdownWatch(pub watch::Receiver<Phase>);

impl ShutdownWatch {
    /// Resolves when open streams must end.
    pub async fn closing(mut self) {
        let _ = self.0.wait_for(|p| *p == Phase::Closing).await;
    }
}

pub struct ServeOptions {
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Also the time from accepting a connection to its first byte.
    pub header_read_timeout: Duration,
    /// A connection whose peer takes no response bytes for this long is closed.
    pub write_timeout: Duration,
    pub grace: Duration,
    /// Counts open connections as descriptors in use.
    pub capacity: Arc<super::capacity::Capacity>,
    /// The threads connections are served on; this loop only accepts.
    pub shards: crate::runtime::shards::Shards,
    /// The second wall between tools and triage: connections from the tools' uid are closed
    /// before routing (`None` when it is not up).
    pub peer_check: Option<Arc<crate::sandbox::PeerCheck>>,
}

/// Serves `router` on `listener` until `signal` resolves, then shuts down gracefully.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    options: ServeOptions,
    phase: watch::Sender<Phase>,
    signal: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    // HTTP/2 has no header-read timeout: pings find connections whose peer went silent.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10));
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let mut signal = std::pin::pin!(signal);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut signal => break,
        };
        let accepted = tokio::time::Instant::now();
        if let Some(check) = &options.peer_check
            && from_a_tool(check, &stream, peer)
        {
            continue;
        }
        let (first_byte, write) = (options.header_read_timeout, options.write_timeout);
        let _ = stream.set_nodelay(true);
        // Handed over as a plain socket: the shard registers it with its own runtime.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "cannot hand the connection over");
                continue;
            }
        };
        // The peer's address, for handlers that record who sent a request.
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            router.clone(),
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                request
            },
        ));
        let builder = builder.clone();
        let tls = options.tls.clone();
        let watcher = graceful.watcher();
        let open = options.capacity.connection();
        options.shards.serve_connection(async move {
            let _open = open;
            let stream = match TcpStream::from_std(stream) {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "cannot serve the connection");
                    return;
                }
            };
            let result = match tls {
                None => {
                    let conn = builder.serve_connection_with_upgrades(
                        TokioIo::new(Deadlines::new(stream, accepted, first_byte, write)),
                        service,
                    );
                    watcher.watch(conn.into_owned()).await
                }
                Some(acceptor) => {
                    let tls_stream = match tokio::time::timeout(
                        Duration::from_secs(10),
                        acceptor.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    };
                    let conn = builder.serve_connection_with_upgrades(
                        TokioIo::new(Deadlines::new(tls_stream, accepted, first_byte, write)),
                        service,
                    );
                    watcher.watch(conn.into_owned()).await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!(
        grace_secs = options.grace.as_secs_f64(),
        "no longer accepting; letting requests finish"
    );
    let all_done = graceful.shutdown();
    let mut all_done = std::pin::pin!(all_done);
    tokio::select! {
        () = &mut all_done => {}
        () = tokio::time::sleep(options.grace) => {
            tracing::warn!("grace period over: ending open streams");
            let _ = phase.send(Phase::Closing);
            // Streams now send their final `error` event and close.
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut all_done).await;
        }
    }
    options.shards.stop().await;
    Ok(())
}

/// Whether the connection comes from a tool process (its client socket is the tools' uid's),
/// counted and logged when it does. A connection from this host whose client socket has no
/// owner any more, or that the kernel cannot look up, is refused too: the wall fails closed.
fn from_a_tool(check: &crate::sandbox::PeerCheck, stream: &TcpStream, peer: SocketAddr) -> bool {
    let verdict = stream
        .local_addr()
        .and_then(|local| check.classify(peer, local));
    let refused = match verdict {
        Ok(crate::sandbox::Peer::Other) => return false,
        Ok(crate::sandbox::Peer::Tool) => "tool",
        Ok(crate::sandbox::Peer::Unattributed) => "unattributed",
        Err(e) => {
            tracing::warn!(%peer, error = %e, "cannot tell who opened a connection: refused");
            "unknown"
        }
    };
    metrics::counter!("triage_tool_connections_refused_total", "peer" => refused).increment(1);
    if refused == "tool" {
        tracing::warn!(%peer, "refused a connection from a tool process to triage's listener");
    }
    true
}
