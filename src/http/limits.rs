//! Load shedding and request bookkeeping: 503 with Retry-After (never a queue) when memory or
//! file descriptors are near exhaustion (see `capacity`) or, if an operator set one, beyond
//! `server.max_concurrent_requests`; per-route metrics and the active-streams gauge. A request
//! takes its slot once its body has been read; the slot and the measurements then live as long
//! as the response body, so a long stream counts until it ends.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::Semaphore;

use super::body::buffer_body;
use super::{ApiError, AppState};

use super::capacity::Capacity;
use crate::meters::Handles;

#[derive(Clone)]
pub struct RequestLimit {
    /// `server.max_concurrent_requests`, when set.
    count: Option<Arc<Semaphore>>,
    capacity: Arc<Capacity>,
}

impl RequestLimit {
    pub fn new(max_concurrent_requests: Option<usize>, capacity: Arc<Capacity>) -> RequestLimit {
        RequestLimit {
            count: max_concurrent_requests.map(|n| Arc::new(Semaphore::new(n))),
            capacity,
        }
    }

    pub fn capacity(&self) -> &Arc<Capacity> {
        &self.capacity
    }

    /// Why new work must wait, if it must.
    fn refusal(&self) -> Option<Refusal> {
        if let Err(exhausted) = self.capacity.check() {
            return Some(Refusal::Resource(
                exhausted.resource(),
                exhausted.describe(),
            ));
        }
        self.count
            .as_ref()
            .filter(|s| s.available_permits() == 0)
            .map(|_| Refusal::Count)
    }
}

enum Refusal {
    /// The resource's metric label and the message naming it.
    Resource(&'static str, String),
    Count,
}

pub async fn track_and_limit<F: Future<Output = Response>>(
    state: &AppState,
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let route = route_meters(
        request
            .extensions()
            .get::<MatchedPath>()
            .map_or("unmatched", MatchedPath::as_str),
    );
    let started = Instant::now();
    // Probes must answer even when the server is saturated.
    if matches!(route.route.as_str(), "/healthz" | "/readyz" | "/metrics") {
        return next(request).await;
    }
    // Saturated: refuse before reading a body that could not run anyway.
    if let Some(refusal) = state.limit.refusal() {
        return busy(&route, refusal);
    }
    // The slot is taken once the body has arrived: clients trickling a body hold none.
    let request = match buffer_body(request, state.body_limit, state.body_read_timeout).await {
        Ok(request) => request,
        Err(refusal) => {
            route.count(refusal.status.as_u16());
            return refusal.into_response();
        }
    };
    let permit = match &state.limit.count {
        Some(slots) => match slots.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => return busy(&route, Refusal::Count),
        },
        None => None,
    };
    let in_flight = state.limit.capacity.request();
    let response = next(request).await;
    let status = response.status().as_u16();
    let is_stream = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let finished = Finished {
        route,
        status,
        started,
    };
    let (parts, body) = response.into_parts();
    if hyper::body::Body::size_hint(&body).exact().is_some() {
        // An answer already in memory (JSON; every streamed body is built from a stream, of
        // unknown size): nothing is left to cancel, so the slot is free now, even if the
        // client never takes the bytes (an HTTP/2 client can grant no window).
        drop((permit, in_flight, finished));
        return Response::from_parts(parts, body);
    }
    let mut data = body.into_data_stream();
    let guarded = async_stream::stream! {
        let _permit = permit;
        let _in_flight = in_flight;
        let _stream_gauge = is_stream.then(StreamGauge::open);
        let _finished = finished;
        while let Some(chunk) = data.next().await {
            yield chunk;
        }
    };
    let body = state.stall_watch.body(guarded);
    Response::from_parts(parts, body)
}

/// Counts a request when its answer ends: sent whole, or cut (the client went away or took
/// nothing for the write timeout).
struct Finished {
    route: Arc<RouteMeters>,
    status: u16,
    started: Instant,
}

impl Drop for Finished {
    fn drop(&mut self) {
        self.route.count(self.status);
        self.route
            .duration
            .record(self.started.elapsed().as_secs_f64());
    }
}

/// A route's request metrics, registered with its first request.
struct RouteMeters {
    route: String,
    duration: metrics::Histogram,
    by_status: Handles<u16, metrics::Counter>,
}

impl RouteMeters {
    fn count(&self, status: u16) {
        self.by_status
            .get(&status, || {
                metrics::counter!("triage_http_requests_total", "route" => self.route.clone(), "status" => status.to_string())
            })
            .increment(1);
    }
}

/// Routes are the router's patterns (or "unmatched"): a few dozen at most.
fn route_meters(route: &str) -> Arc<RouteMeters> {
    static ROUTES: Handles<String, Arc<RouteMeters>> = Handles::new();
    ROUTES.get(route, || {
        Arc::new(RouteMeters {
            route: route.to_owned(),
            duration: metrics::histogram!("triage_http_request_duration_seconds", "route" => route.to_owned()),
            by_status: Handles::new(),
        })
    })
}

fn busy(route: &RouteMeters, refusal: Refusal) -> Response {
    route.count(503);
    let (resource, message) = match refusal {
        Refusal::Resource(resource, message) => (resource, message),
        Refusal::Count => (
            "max_concurrent_requests",
            "Server busy: server.max_concurrent_requests requests in flight; retry shortly"
                .to_owned(),
        ),
    };
    metrics::counter!("triage_load_shed_total", "resource" => resource).increment(1);
    let mut response = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Counts an open SSE stream; the drop also runs when the client goes away mid-stream.
struct StreamGauge;

impl StreamGauge {
    fn open() -> StreamGauge {
        metrics::gauge!("triage_sse_streams_active").increment(1.0);
        StreamGauge
    }
}

impl Drop for StreamGauge {
    fn drop(&mut self) {
        metrics::gauge!("triage_sse_streams_active").decrement(1.0);
    }
}
