//! The floor: a bare pass-through proxy that does the least triage must do for `/api/chat`.
//! It reads the request, sends the equivalent chat-completions call (triage's own system prompt
//! and tool definitions, captured from triage's first LLM request) to the same fake LLM with the
//! same client stack (reqwest, rustls on ring, the same pool settings, triage's SSE reader),
//! and relays the answer: JSON, or the LLM's SSE bytes as they come. When the LLM asks for a
//! tool, it makes the second call a tool round needs, with a fixed tool result. No prompt
//! assembly, no token counting, no tools, no limits, no logging: what is left is HTTP in, JSON
//! in and out, HTTP out.
//!
//! It runs in its own process (the bench binary started again with `--serve-proxy`), so its CPU
//! time is its own, read from /proc like triage's.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::{FutureExt as _, StreamExt};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `/api/chat` model keys the bench uses, and the upstream model each stands for (as in
/// the bench's triage config).
pub const MODELS: &[(&str, &str)] = &[("fast", "gpt-4.1"), ("answer", "gpt-4.1-answer")];

/// What every call shares, built once from triage's captured request: the bytes before the
/// messages (model left out), the system message, and the bytes after the messages.
struct Template {
    system: Bytes,
    rest: Bytes,
}

impl Template {
    fn from_captured(body: &[u8]) -> Result<Template, String> {
        let mut v: Value = serde_json::from_slice(body).map_err(|e| format!("template: {e}"))?;
        let obj = v.as_object_mut().ok_or("template: not an object")?;
        obj.remove("model");
        let messages = obj.remove("messages").ok_or("template: no messages")?;
        let system = messages
            .get(0)
            .filter(|m| m["role"] == "system")
            .ok_or("template: no system message")?;
        let rest = serde_json::to_string(obj).map_err(|e| e.to_string())?;
        Ok(Template {
            system: Bytes::from(serde_json::to_vec(system).map_err(|e| e.to_string())?),
            // `{"tools":…}` → `,"tools":…}`, to follow the messages.
            rest: Bytes::from(format!(",{}", &rest[1..])),
        })
    }

    /// One chat-completions body: model, system message, the user's ask, then `more`
    /// (the tool round's messages, already JSON with a leading comma).
    fn body(&self, model: &str, ask: &str, more: &[u8]) -> Bytes {
        let mut buf = BytesMut::with_capacity(self.system.len() + self.rest.len() + 512);
        buf.put_slice(b"{\"model\":");
        write_json(&mut buf, model);
        buf.put_slice(b",\"messages\":[");
        buf.put_slice(&self.system);
        buf.put_slice(b",{\"role\":\"user\",\"content\":");
        write_json(&mut buf, ask);
        buf.put_slice(b"}");
        buf.put_slice(more);
        buf.put_slice(b"]");
        buf.put_slice(&self.rest);
        buf.freeze()
    }
}

fn write_json(buf: &mut BytesMut, value: &(impl Serialize + ?Sized)) {
    let mut w = buf.writer();
    // Writing to memory cannot fail, and a `str` always serialises.
    let _ = serde_json::to_writer(&mut w, value);
}

#[derive(Deserialize)]
struct ChatRequest {
    ask: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: bool,
}

/// One LLM stream chunk: only what the proxy reads.
#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Delta,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// What one LLM call answered.
#[derive(Default, Serialize)]
struct ToolCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Default)]
struct Answer {
    text: String,
    tool_call: Option<ToolCall>,
}

#[derive(Serialize)]
struct ChatResponse<'a> {
    analysis: &'a str,
    tool_calls: &'a [ToolCall],
}

struct Proxy {
    http: reqwest::Client,
    endpoint: String,
    template: Template,
}

type Body = BoxBody<Bytes, Infallible>;
type Relay = tokio::sync::mpsc::Sender<Bytes>;

impl Proxy {
    /// One LLM call; every body chunk also goes to `relay` (SSE mode) as it arrives.
    async fn call(&self, body: Bytes, relay: Option<&Relay>) -> Result<Answer, String> {
        let resp = self
            .http
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("LLM: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("LLM answered {}", resp.status()));
        }
        let bytes = resp.bytes_stream().then(move |chunk| async move {
            if let (Ok(b), Some(r)) = (&chunk, relay) {
                let _ = r.send(b.clone()).await;
            }
            chunk
        });
        // Triage's own reader of server-sent events: the floor pays what triage's client does.
        let mut events = triage::sse_reader::sse_events(bytes, usize::MAX);
        let mut answer = Answer::default();
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| format!("LLM stream: {e}"))?;
            if event.data() == b"[DONE]" {
                break;
            }
            let chunk: Chunk =
                serde_json::from_slice(event.data()).map_err(|e| format!("LLM chunk: {e}"))?;
            for choice in chunk.choices {
                if let Some(c) = choice.delta.content {
                    answer.text.push_str(&c);
                }
                for d in choice.delta.tool_calls {
                    let call = answer.tool_call.get_or_insert_with(ToolCall::default);
                    if let Some(id) = d.id {
                        call.id = id;
                    }
                    if let Some(f) = d.function {
                        if let Some(n) = f.name {
                            call.name = n;
                        }
                        if let Some(a) = f.arguments {
                            call.arguments.push_str(&a);
                        }
                    }
                }
            }
        }
        Ok(answer)
    }

    /// The whole exchange: one LLM call, and a second one when the first asked for a tool.
    async fn exchange(
        &self,
        req: &ChatRequest,
        relay: Option<&Relay>,
    ) -> Result<(Answer, Vec<ToolCall>), String> {
        let key = req.model.as_deref().unwrap_or("fast");
        let model = MODELS
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(key, |(_, m)| *m);
        let first = self
            .call(self.template.body(model, &req.ask, b""), relay)
            .await?;
        let Some(call) = first.tool_call else {
            return Ok((first, Vec::new()));
        };
        // The tool round: the assistant's call and a fixed result, as triage sends them.
        let mut more = BytesMut::with_capacity(call.arguments.len() + 256);
        more.put_slice(b",{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":");
        write_json(&mut more, &call.id);
        more.put_slice(b",\"type\":\"function\",\"function\":{\"name\":");
        write_json(&mut more, &call.name);
        more.put_slice(b",\"arguments\":");
        write_json(&mut more, &call.arguments);
        more.put_slice(b"}}]},{\"role\":\"tool\",\"tool_call_id\":");
        write_json(&mut more, &call.id);
        more.put_slice(b",\"content\":\"Todo list updated: 3 items.\"}");
        let second = self
            .call(self.template.body(model, &req.ask, &more), relay)
            .await?;
        Ok((second, vec![call]))
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if req.uri().path() == "/readyz" {
            return text(StatusCode::OK, "ready");
        }
        let body = match req.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        let chat: ChatRequest = match serde_json::from_slice(&body) {
            Ok(c) => c,
            Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        if !chat.stream {
            return match self.exchange(&chat, None).await {
                Ok((answer, calls)) => {
                    let json = serde_json::to_vec(&ChatResponse {
                        analysis: &answer.text,
                        tool_calls: &calls,
                    })
                    .unwrap_or_default();
                    let mut resp = Response::new(Full::new(Bytes::from(json)).boxed());
                    resp.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static("application/json"),
                    );
                    resp
                }
                Err(e) => text(StatusCode::BAD_GATEWAY, &e),
            };
        }
        // SSE: the LLM's bytes as they come, then the end event the bench looks for.
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
        tokio::spawn(async move {
            let end = match self.exchange(&chat, Some(&tx)).await {
                Ok(_) => Bytes::from_static(b"event: ai_answer_end\ndata: {}\n\n"),
                Err(e) => Bytes::from(format!("event: error\ndata: {}\n\n", Value::from(e))),
            };
            let _ = tx.send(end).await;
        });
        let frames = futures::stream::unfold(rx, |mut rx| async move {
            let bytes = rx.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(bytes)), rx))
        });
        let body = StreamBody::new(frames);
        let mut resp = Response::new(BodyExt::boxed(body));
        resp.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/event-stream"),
        );
        resp
    }
}

fn text(status: StatusCode, msg: &str) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(msg.to_owned())).boxed());
    *resp.status_mut() = status;
    resp
}

/// `--serve-proxy PORT LLM_ADDR TEMPLATE_FILE`: serves until killed.
pub fn serve(args: &[String]) -> Result<(), String> {
    let [port, llm, template] = args else {
        return Err("usage: --serve-proxy PORT LLM_ADDR TEMPLATE_FILE".into());
    };
    let port: u16 = port.parse().map_err(|e| format!("port: {e}"))?;
    let llm: SocketAddr = llm.parse().map_err(|e| format!("LLM address: {e}"))?;
    let template = std::fs::read(template).map_err(|e| format!("{template}: {e}"))?;
    triage::runtime::install_crypto_provider();
    // Triage's LLM client settings (src/llm/transport.rs).
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(4))
        .tcp_nodelay(true)
        .build()
        .map_err(|e| e.to_string())?;
    let proxy = Arc::new(Proxy {
        http,
        endpoint: format!("http://{llm}/v1/chat/completions"),
        template: Template::from_captured(&template)?,
    });
    // The runtime triage's binary uses: `Runtime::new()`, one worker per core.
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| format!("bind: {e}"))?;
        let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (proxy, builder) = (proxy.clone(), builder.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    proxy.clone().handle(req).map(Ok::<_, Infallible>)
                });
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
