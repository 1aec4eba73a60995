//! triage as an MCP server (IDE agents, in-cluster agents): rmcp's streamable-HTTP server,
//! stateless (every POST stands alone, no `Mcp-Session-Id`), over the two front doors that
//! already exist. `investigate` is one `/api/chat` run (`holmes::StatelessChat`, approvals
//! refused); the conversation tools steer `conversations::Conversations`, where a call that
//! needs approval waits for `approve` / `deny`. No loop and no approval logic of its own: this
//! module turns tool calls into those front doors' requests and their answers into tool
//! results. `http/mcp.rs` mounts it at `/mcp` behind the usual admission (origin, API key,
//! limits).

mod arguments;
mod conversation_tools;
mod investigate;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::agent::CurrentAgent;
use crate::conversations::Conversations;
use crate::holmes::StatelessChat;

pub use tools::TOOL_NAMES;

/// The rmcp service the HTTP edge hands `/mcp` requests to.
pub type McpService = StreamableHttpService<McpServer, NeverSessionManager>;

/// What the HTTP edge knows of a request besides its JSON-RPC message, put in the request's
/// extensions for the tools (rmcp hands the tools the request's parts).
#[derive(Clone, Debug, Default)]
pub struct Caller {
    pub request_id: String,
    /// Request headers tools may see (blocked ones already removed), as on `/api/chat`.
    pub headers: Vec<(String, String)>,
}

/// The MCP server: one per request (rmcp's stateless mode asks its factory for each), all
/// sharing the front doors below.
#[derive(Clone)]
pub struct McpServer(Arc<Doors>);

struct Doors {
    chat: Arc<StatelessChat>,
    conversations: Arc<Conversations>,
    /// The agent serving now: `list_models` reads its models at each call.
    serving: Arc<CurrentAgent>,
    /// `server.request_deadline_secs`: the longest an `investigate` runs.
    deadline: Duration,
}

/// What the HTTP edge sets from the server's settings.
pub struct ServiceOptions {
    pub body_limit: usize,
    pub keepalive: Option<Duration>,
}

impl McpServer {
    pub fn new(
        chat: Arc<StatelessChat>,
        conversations: Arc<Conversations>,
        serving: Arc<CurrentAgent>,
        deadline: Duration,
    ) -> McpServer {
        McpServer(Arc::new(Doors {
            chat,
            conversations,
            serving,
            deadline,
        }))
    }

    /// The streamable-HTTP service over this server. Stateless: no session is kept between
    /// requests, so any replica answers any request and a client needs no session id. Host
    /// and Origin are checked by triage's own guard before the request gets here (rmcp's
    /// would refuse every host but loopback, whatever `allowed_hosts` says), and the body was
    /// read within triage's limits.
    pub fn service(self, options: ServiceOptions) -> McpService {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            // A plain JSON answer when nothing is sent before it (progress switches to SSE).
            .with_json_response(true)
            .with_sse_keep_alive(options.keepalive)
            .with_sse_retry(None)
            .with_max_request_body_bytes(options.body_limit)
            .disable_allowed_hosts()
            .disable_allowed_origins();
        StreamableHttpService::new(
            move || Ok(self.clone()),
            Arc::new(NeverSessionManager::default()),
            config,
        )
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut server = Implementation::new("triage", env!("CARGO_PKG_VERSION"));
        server.title = Some("triage troubleshooting agent".into());
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(server)
            .with_instructions(tools::INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            tools::definitions().to_vec(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .unwrap_or_default();
        let doors = &self.0;
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            tools::INVESTIGATE => investigate::call(doors, args, &context, caller).await,
            tools::LIST_MODELS => arguments::read::<tools::NoArgs>(tools::LIST_MODELS, args)
                .map(|_| list_models(doors)),
            name => match conversation_tools::call(&doors.conversations, name, args).await {
                Some(result) => result,
                // An unknown tool is a protocol error, as the MCP specification words it.
                None => {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "unknown tool '{name}': this server has {}",
                            TOOL_NAMES.join(", ")
                        ),
                        None,
                    ));
                }
            },
        };
        Ok(result.unwrap_or_else(failure).into())
    }

    /// rmcp hands over, as a custom request, every request it could not read, a standard
    /// method with params of the wrong shape too: that is invalid params, not an unknown
    /// method.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let method = request.method;
        if method == "tools/call" {
            let params = request.params.unwrap_or_default();
            let why = serde_json::from_value::<CallToolRequestParams>(params)
                .err()
                .map_or_else(String::new, |e| format!(": {e}"));
            return Err(ErrorData::invalid_params(
                format!("invalid params for `tools/call`{why}"),
                None,
            ));
        }
        if STANDARD_METHODS.contains(&method.as_str()) {
            return Err(ErrorData::invalid_params(
                format!("invalid params for `{method}`"),
                None,
            ));
        }
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("unknown method '{method}'"),
            None,
        ))
    }
}

/// The client-to-server methods of the MCP revisions rmcp speaks.
const STANDARD_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "logging/setLevel",
    "completion/complete",
    "subscriptions/listen",
];

/// `list_models`: the model-list keys of the agent serving now, the default first.
fn list_models(doors: &Doors) -> CallToolResult {
    let agent = doors.serving.current();
    let models = agent.models.keys();
    let default = agent.models.default_key().map(str::to_owned);
    json_result(serde_json::json!({"models": models, "default": default}))
}

/// A tool's answer as JSON: structured content, and the same as text for clients that read
/// only text.
fn json_result(value: serde_json::Value) -> CallToolResult {
    let text = value.to_string();
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

/// A tool that could not do its work: the reason as an error result the caller's model reads.
fn failure(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}
