//! HTTP: routes, middleware (request ids, browser origin checks, API keys, load shedding, CORS), the `{"detail": …}`
//! error shape, JSON body parsing and SSE framing. Handlers only translate between HTTP and
//! the agent.

mod a2a;
pub mod admin;
mod agui;
pub mod auth;
pub mod body;
pub mod capacity;
mod chat;
mod checks;
mod console;
mod conversation_actions;
mod conversation_stream;
mod conversations;
mod deadlines;
mod error;
mod extract;
mod inbound;
mod limits;
mod mcp;
mod openai_compat;
mod openapi;
pub mod ops;
mod origin;
pub mod responses;
pub mod server;
pub mod sse;
pub mod tls;
mod unread;
mod webhooks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tracing::Instrument;

use crate::agent::{Agent, CurrentAgent};
pub use auth::ApiKeys;
pub use error::ApiError;
pub use limits::RequestLimit;
pub use origin::BrowserGuard;
use responses::{ModelNames, ModelsResponse};
pub use server::ShutdownWatch;
pub use unread::StallWatch;

/// What every handler and layer shares. Cloned for each layer and extractor of every request,
/// so it is one `Arc`: a clone is one atomic increment, not one per field and a copy of each
/// list.
#[derive(Clone)]
pub struct AppState(Arc<SharedState>);

impl AppState {
    pub fn new(shared: SharedState) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.0
    }
}

pub struct SharedState {
    /// The agent serving new requests (swapped by an admin reload); see `agent()`.
    pub serving: Arc<CurrentAgent>,
    /// `POST /api/checks/execute`.
    pub checks: Arc<crate::checks::Checks>,
    /// The reload behind `/api/admin/reload*`; `None` when the admin API is off (404).
    pub admin: Option<Arc<dyn admin::Reload>>,
    pub chat: Arc<crate::holmes::StatelessChat>,
    pub conversations: Arc<crate::conversations::Conversations>,
    /// A2A's push notification settings (`[a2a]`).
    pub a2a: Arc<crate::config::a2a::A2aSettings>,
    /// Events from elsewhere for conversations that wait (reply tokens).
    pub inbound: Arc<crate::inbound::Inbound>,
    pub keepalive: Option<Duration>,
    pub body_limit: usize,
    /// Time a client has to send its whole body.
    pub body_read_timeout: Duration,
    /// Ends an answer whose client takes nothing for `server.write_timeout_secs`.
    pub stall_watch: StallWatch,
    pub model_name_as_string: bool,
    pub api_keys: ApiKeys,
    pub limit: RequestLimit,
    pub deadline: Duration,
    pub shutdown: ShutdownWatch,
    pub started: Instant,
    pub cors_allowed_origins: Vec<String>,
    pub browser_guard: Arc<BrowserGuard>,
    /// Lower-case header names never passed to tools.
    pub blocked_headers: Arc<Vec<String>>,
}

impl SharedState {
    /// The agent serving now: a handler takes it once and keeps it to its end.
    pub fn agent(&self) -> Arc<Agent> {
        self.serving.current()
    }
}

/// The id of a request: in every log line of it, the `x-request-id` header and `metadata`.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

pub fn router(state: AppState) -> Router {
    let cors = cors_layer(&state.cors_allowed_origins);
    let router = Router::new()
        .route("/api/chat", post(chat::chat))
        .route("/api/agui/chat", post(agui::chat))
        .route("/api/model", get(models))
        .route("/api/checks/execute", post(checks::execute))
        .route("/api/admin/reload", post(admin::reload_all))
        .route("/api/admin/reload/toolsets", post(admin::reload_toolsets))
        .route("/api/admin/reload/models", post(admin::reload_models))
        .route(
            "/api/conversations",
            post(conversations::create).get(conversations::batch),
        )
        .route("/api/conversations/search", get(conversations::search))
        .route("/api/conversations/count", get(conversations::count))
        .route(
            "/api/conversations/{id}",
            get(conversations::get)
                .patch(conversations::update)
                .delete(conversations::delete),
        )
        .route("/api/conversations/{id}/events", post(conversations::send))
        .route("/api/conversations/{id}/run", post(conversations::run))
        .route(
            "/api/conversations/{id}/confirmation_policy",
            post(conversations::set_policy),
        )
        .route(
            "/api/conversations/{id}/secrets",
            post(conversations::add_secrets),
        )
        .route(
            "/api/conversations/{id}/ask_agent",
            post(conversations::ask),
        )
        .route(
            "/api/conversations/{id}/agent_final_response",
            get(conversations::final_response),
        )
        .route(
            "/api/conversations/{id}/condense",
            post(conversation_actions::condense),
        )
        .route(
            "/api/conversations/{id}/generate_title",
            post(conversation_actions::generate_title),
        )
        .route(
            "/api/conversations/{id}/fork",
            post(conversation_actions::fork),
        )
        .route("/api/conversations/{id}/pause", post(conversations::pause))
        .route(
            "/api/conversations/{id}/interrupt",
            post(conversations::interrupt),
        )
        .route(
            "/api/conversations/{id}/events/respond_to_confirmation",
            post(conversations::respond),
        )
        .route(
            "/api/conversations/{id}/events/search",
            get(conversations::events),
        )
        .route(
            "/api/conversations/{id}/events/count",
            get(conversations::count_events),
        )
        .route(
            "/api/conversations/{id}/events/stream",
            get(conversation_stream::stream),
        )
        .route(
            "/api/conversations/{id}/events/{event_id}",
            get(conversations::event),
        )
        .route(
            "/api/webhook/{conversation_id}/{state_name}",
            post(inbound::receive),
        )
        .route("/api/webhooks/deliveries", get(webhooks::list))
        .route("/.well-known/agent-card.json", get(a2a::card))
        .route("/a2a", post(a2a::rpc))
        .route("/api/webhooks/deliveries/{id}/retry", post(webhooks::retry))
        .route("/v1/models", get(openai_compat::models))
        .route(
            "/v1/chat/completions",
            post(openai_compat::chat_completions),
        )
        .route("/v1/responses", post(openai_compat::responses))
        .merge(console::routes())
        .merge(mcp::routes(&state))
        .route("/api/info", get(ops::info))
        .route("/api/openapi.json", get(openapi::openapi))
        .route("/metrics", get(ops::metrics))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .fallback(|| async { ApiError::new(axum::http::StatusCode::NOT_FOUND, "Not Found") })
        .layer(DefaultBodyLimit::max(state.body_limit))
        .layer(from_fn_with_state(state.clone(), admission));
    let router = match cors {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router.layer(from_fn(request_context)).with_state(state)
}

/// Every request's checks, in this order: the browser origin, the API key, then load
/// shedding and the body (limits), then the query. One layer, not one each: a layer costs
/// every request a clone of the service below it and a boxed future.
async fn admission(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let origin = state
        .browser_guard
        .check(request.method(), request.uri(), request.headers());
    if let Err(refusal) = origin {
        return refusal.into_response();
    }
    if let Some(refusal) = auth::refusal(&state.api_keys, &request) {
        return refusal;
    }
    limits::track_and_limit(&state, request, |request| async move {
        match refuse_nul_in_query(&request) {
            Some(refusal) => refusal,
            None => next.run(request).await,
        }
    })
    .await
}

/// A NUL in a query value: PostgreSQL refuses it in any text it compares (a 500 otherwise),
/// and no stored value holds one, so it is the client's mistake (`%00` is its only spelling).
fn refuse_nul_in_query(request: &Request) -> Option<Response> {
    request
        .uri()
        .query()
        .is_some_and(|q| q.contains("%00"))
        .then(|| {
            ApiError::new(
                axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                "query parameters may not contain NUL (%00)",
            )
            .into_response()
        })
}

/// Gives each request an id and a tracing span that carries it, and errors axum answers
/// itself their `{"detail": …}` body (OpenAI's error object under `/v1/`).
async fn request_context(mut request: Request, next: Next) -> Response {
    let id = uuid::Uuid::new_v4().to_string();
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %request.method(),
        path = %request.uri().path(),
    );
    let method = request.method().clone();
    let openai = request.uri().path().starts_with(openai_compat::PREFIX);
    request.extensions_mut().insert(RequestId(id.clone()));
    let response = next.run(request).instrument(span).await;
    let mut response = error::with_json_body(&method, response);
    if openai {
        // The OpenAI-compatible door's clients read OpenAI's error shape, whoever refused.
        response = openai_compat::reshape(response).await;
    }
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

fn cors_layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            // PATCH and DELETE: /api/conversations/{id}; Last-Event-ID: a conversation's event
            // stream resumed by a browser client (fetch-event-source sends it on reconnect).
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PATCH,
                Method::DELETE,
                Method::OPTIONS,
            ])
            .allow_headers([
                header::CONTENT_TYPE,
                header::AUTHORIZATION,
                header::ACCEPT,
                header::HeaderName::from_static("x-api-key"),
                header::HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([header::HeaderName::from_static("x-request-id")])
            .max_age(Duration::from_secs(600)),
    )
}

async fn models(State(state): State<AppState>) -> Json<ModelsResponse> {
    let keys = state.agent().models.keys();
    let model_name = if state.model_name_as_string {
        // HolmesGPT's code sends the list JSON-encoded inside a string.
        ModelNames::Encoded(serde_json::to_string(&keys).unwrap_or_else(|_| "[]".into()))
    } else {
        ModelNames::List(keys)
    };
    Json(ModelsResponse { model_name })
}
