//! `GET /api/openapi.json`: OpenAPI 3.1, every route of the router documented, every `$ref`
//! resolves, and real responses (JSON bodies and SSE events) validate against the schemas the
//! document gives for their status and media type.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::helpers::{Event, TestApp, json_body, spawn_app, spawn_app_with};
use fake_llm::Step;

/// Path → methods of every `.route(PATH, METHOD(…))` in `src/http` (the router and the
/// routers it merges). `PATH` is a literal or a `const` of the same file. A `.nest*` prefix is
/// recorded with the method `*`: some documented path must start with it.
fn routed() -> BTreeMap<String, BTreeSet<String>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http");
    let mut files = vec![dir.clone()];
    let mut sources = Vec::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.extension().is_some_and(|e| e == "rs") {
            sources.push(std::fs::read_to_string(&path).unwrap());
        }
    }
    let method = regex::Regex::new(r"\b(get|post|put|delete|patch|head|options|any)\(").unwrap();
    let constant = regex::Regex::new(r#"const ([A-Z_]+): &str = "([^"]*)";"#).unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for source in &sources {
        let consts: BTreeMap<&str, &str> = constant
            .captures_iter(source)
            .map(|c| (c.get(1).unwrap().as_str(), c.get(2).unwrap().as_str()))
            .collect();
        for (call, nested) in [
            (".route(", false),
            (".route_service(", true),
            (".nest(", true),
            (".nest_service(", true),
        ] {
            for (start, _) in source.match_indices(call) {
                let rest = &source[start + call.len()..];
                // The call's arguments, up to its closing parenthesis.
                let mut depth = 1;
                let end = rest
                    .char_indices()
                    .find(|&(_, c)| {
                        match c {
                            '(' => depth += 1,
                            ')' => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })
                    .map_or(rest.len(), |(i, _)| i);
                let args = &rest[..end];
                let first = args.split(',').next().unwrap_or_default().trim();
                let path = match first.strip_prefix('"') {
                    Some(p) => p.trim_end_matches('"'),
                    None => consts
                        .get(first.rsplit("::").next().unwrap_or(first))
                        .unwrap_or_else(|| panic!("cannot resolve the route path `{first}`")),
                };
                let methods = out.entry(path.to_owned()).or_default();
                if nested {
                    methods.insert("*".into());
                } else {
                    for m in method.captures_iter(args) {
                        methods.insert(m[1].to_owned());
                    }
                }
            }
        }
    }
    out
}

/// A documented operation called as it stands, with an empty JSON object as the body.
async fn call_documented(app: &TestApp, method: &str, path: &str) -> reqwest::Response {
    app.client
        .request(method.to_uppercase().parse().unwrap(), app.url(path))
        .body("{}")
        .send()
        .await
        .unwrap()
}

async fn fetch_document(app: &TestApp) -> Value {
    let resp = app
        .client
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    json_body(resp).await
}

/// Follows a local `$ref` (`#/a/b`) in the document.
fn resolve<'a>(doc: &'a Value, reference: &str) -> Option<&'a Value> {
    doc.pointer(reference.strip_prefix('#')?)
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// Validates `instance` against `schema`, whose `$ref`s point into the document.
fn validate(doc: &Value, schema: &Value, instance: &Value, what: &str) {
    let errors = schema_errors(doc, schema, instance, what);
    assert!(
        errors.is_empty(),
        "{what}: the response does not match its documented schema:\n{}\n{instance:#}",
        errors.join("\n")
    );
}

fn schema_errors(doc: &Value, schema: &Value, instance: &Value, what: &str) -> Vec<String> {
    let mut root = json!({"components": doc["components"].clone()});
    match schema {
        Value::Object(map) => {
            for (k, v) in map {
                root[k] = v.clone();
            }
        }
        other => panic!("{what}: schema is not an object: {other}"),
    }
    let validator = jsonschema::draft202012::new(&root)
        .unwrap_or_else(|e| panic!("{what}: schema does not compile: {e}"));
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// The schema the document gives for a response of `path`/`method` with `status` and
/// `media_type` (following `#/components/responses/` references).
fn documented_schema(
    doc: &Value,
    path: &str,
    method: &str,
    status: u16,
    media_type: &str,
) -> Value {
    let op = &doc["paths"][path][method];
    assert!(op.is_object(), "{method} {path} is not documented");
    let mut response = &op["responses"][status.to_string()];
    assert!(
        !response.is_null(),
        "{method} {path}: status {status} is not documented"
    );
    if let Some(r) = response["$ref"].as_str() {
        response = resolve(doc, r).expect("response ref resolves");
    }
    response["content"][media_type]["schema"]
        .as_object()
        .map(|s| Value::Object(s.clone()))
        .unwrap_or_else(|| panic!("{method} {path} {status}: no {media_type} schema"))
}

/// Checks a JSON response against its documented schema.
async fn check_json(
    doc: &Value,
    path: &str,
    method: &str,
    resp: reqwest::Response,
) -> (u16, Value) {
    let status = resp.status().as_u16();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    assert!(
        resp.headers().contains_key("x-request-id"),
        "documented header"
    );
    let body = json_body(resp).await;
    let schema = documented_schema(doc, path, method, status, "application/json");
    validate(doc, &schema, &body, &format!("{method} {path} → {status}"));
    (status, body)
}

/// Checks each SSE event against the documented `ChatStreamEvent` variant of its name:
/// the frame shape, and its `data` against the variant's `contentSchema`.
fn check_events(doc: &Value, events: &[Event]) {
    let errors = event_errors(doc, events);
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

fn event_errors(doc: &Value, events: &[Event]) -> Vec<String> {
    let schema = documented_schema(doc, "/api/chat", "post", 200, "text/event-stream");
    let stream_event = resolve(doc, schema["$ref"].as_str().unwrap()).unwrap();
    let mut errors = Vec::new();
    for event in events {
        let frame = json!({"event": event.name, "data": event.data.to_string()});
        let what = format!("SSE frame {}", event.name);
        errors.extend(schema_errors(doc, stream_event, &frame, &what));
        let Some(variant) = stream_event["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["properties"]["event"]["const"] == event.name.as_str())
        else {
            errors.push(format!("event {} is not documented", event.name));
            continue;
        };
        let schema = &variant["properties"]["data"]["contentSchema"];
        let what = format!("event {}", event.name);
        for e in schema_errors(doc, schema, &event.data, &what) {
            errors.push(format!("{what}: {e}\n{:#}", event.data));
        }
    }
    errors
}

#[tokio::test]
async fn the_document_is_openapi_3_1_and_covers_every_route() {
    // The admin routes answer 404 while the admin API is off.
    let app = spawn_app_with("[admin]\nenabled = true\n").await;
    let doc = fetch_document(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));

    let routes = routed();
    assert!(
        routes.len() >= 10,
        "the router source parsed to too few routes: {routes:?}"
    );
    let paths = doc["paths"].as_object().unwrap();
    for (path, methods) in &routes {
        for method in methods {
            if method == "*" {
                assert!(
                    paths.keys().any(|p| p.starts_with(path.as_str())),
                    "nothing documented under {path}"
                );
                continue;
            }
            let op = &paths
                .get(path)
                .unwrap_or_else(|| panic!("{path} is routed but not documented"))[method];
            assert!(
                op.is_object(),
                "{method} {path} is routed but not documented"
            );
            assert!(
                op["responses"]["200"].is_object() || op["responses"]["201"].is_object(),
                "{method} {path}: no success response"
            );
        }
    }
    // And nothing documented that the server does not serve.
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            let resp = call_documented(&app, method, path).await;
            assert!(
                ![404, 405].contains(&resp.status().as_u16()),
                "{method} {path} is documented but answers {}",
                resp.status()
            );
        }
    }

    // Every reference resolves; schemars' `$defs` were all moved under components.
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(refs.len() > 50, "{}", refs.len());
    for r in &refs {
        assert!(r.starts_with("#/components/"), "non-local ref {r}");
        assert!(resolve(&doc, r).is_some(), "unresolved ref {r}");
    }
    assert!(!doc.to_string().contains("$defs"));

    // Security: keys in a header or as a bearer token; probes need none.
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["ApiKeyHeader"]["name"], "X-API-Key");
    assert_eq!(schemes["BearerAuth"]["scheme"], "bearer");
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(doc["paths"][probe]["get"]["security"], json!([]), "{probe}");
    }
    assert!(doc["paths"]["/api/chat"]["post"]["responses"]["401"].is_object());

    // Streaming events: every event name the server sends is a documented variant.
    let variants = doc["components"]["schemas"]["ChatStreamEvent"]["oneOf"]
        .as_array()
        .unwrap();
    let names: BTreeSet<&str> = variants
        .iter()
        .map(|v| v["properties"]["event"]["const"].as_str().unwrap())
        .collect();
    for name in [
        "start_tool_calling",
        "tool_calling_result",
        "ai_message",
        "token_count",
        "approval_required",
        "conversation_history_compaction_start",
        "conversation_history_compacted",
        "ai_answer_end",
        "error",
    ] {
        assert!(names.contains(name), "{name}");
    }
}

#[tokio::test]
async fn real_responses_match_their_schemas() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;

    // A non-streaming answer after a tool call.
    app.llm
        .push(Step::tool("call_1", "bash", json!({"command": "echo hi"})));
    app.llm.push(Step::text("All good."));
    let resp = app.post_chat(&json!({"ask": "check"})).await;
    let (status, body) = check_json(&doc, "/api/chat", "post", resp).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tool_calls"].as_array().unwrap().len(), 1);
    // The check has teeth: a body missing a field, or with a wrong type deep inside, fails.
    let schema = documented_schema(&doc, "/api/chat", "post", 200, "application/json");
    let mut broken = body.clone();
    broken.as_object_mut().unwrap().remove("analysis");
    assert!(!schema_errors(&doc, &schema, &broken, "broken").is_empty());
    let mut broken = body.clone();
    broken["tool_calls"][0]["result"]["status"] = json!("exploded");
    assert!(!schema_errors(&doc, &schema, &broken, "broken").is_empty());

    // The same as a stream.
    app.llm
        .push(Step::tool("call_2", "bash", json!({"command": "echo hi"})));
    app.llm
        .push(Step::text_with_reasoning("thinking", "All good."));
    let events = app.chat_sse(&json!({"ask": "check"})).await;
    assert_eq!(events.last().unwrap().name, "ai_answer_end");
    check_events(&doc, &events);
    let mut broken = events.last().unwrap().clone();
    broken.data["metadata"]["usage"] = json!("lots");
    assert!(!event_errors(&doc, &[broken]).is_empty());

    // A pause for approval, its resume, and a stream that ends in an error.
    let dir = crate::helpers::scratch().join(format!("openapi-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let command = format!("touch {}/marker", dir.display());
    app.llm
        .push(Step::tool("risky", "bash", json!({"command": command})));
    let events = app
        .chat_sse(&json!({"ask": "fix", "enable_tool_approval": true}))
        .await;
    assert_eq!(events.last().unwrap().name, "approval_required");
    check_events(&doc, &events);
    let history = events.last().unwrap().data["conversation_history"].clone();
    app.llm.push(Step::text("Done."));
    let events = app
        .chat_sse(&json!({"ask": "", "conversation_history": history,
            "tool_decisions": [{"tool_call_id": "risky", "approved": false}]}))
        .await;
    check_events(&doc, &events);
    app.llm
        .push(Step::error(400, "bad request to the provider"));
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    assert_eq!(events.last().unwrap().name, "error");
    check_events(&doc, &events);
    let _ = std::fs::remove_dir_all(&dir);

    // Errors, each with a documented status and the `detail` shape.
    for (body, expected) in [
        ("{\"ask\": ".to_owned(), 400),
        (json!({"ask": ""}).to_string(), 400),
        (json!({"ask": "q", "model": "nope"}).to_string(), 400),
        (json!({"ask": 3}).to_string(), 422),
        (
            json!({"ask": "q", "conversation_history": [{"role": 1}]}).to_string(),
            422,
        ),
    ] {
        let resp = app.post_raw("/api/chat", body.clone()).await;
        let (status, _) = check_json(&doc, "/api/chat", "post", resp).await;
        assert_eq!(status, expected, "{body}");
    }
    app.llm
        .push(Step::error(400, "bad request to the provider"));
    let resp = app.post_chat(&json!({"ask": "q"})).await;
    let (status, _) = check_json(&doc, "/api/chat", "post", resp).await;
    assert!(status >= 500, "{status}");

    // The other JSON routes.
    for path in ["/api/model", "/api/info", "/healthz", "/readyz"] {
        let resp = app.client.get(app.url(path)).send().await.unwrap();
        let (status, _) = check_json(&doc, path, "get", resp).await;
        assert_eq!(status, 200, "{path}");
    }
    for (path, media) in [
        ("/metrics", "text/plain"),
        ("/", "text/html"),
        ("/console/app.js", "text/javascript"),
        ("/console/conversation-log.js", "text/javascript"),
        ("/console/conversations.js", "text/javascript"),
        ("/console/style.css", "text/css"),
        ("/console/readme.md", "text/markdown"),
    ] {
        let resp = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let content_type = resp.headers()["content-type"].to_str().unwrap();
        assert!(content_type.starts_with(media), "{path}: {content_type}");
        documented_schema(&doc, path, "get", 200, media);
    }
}

#[tokio::test]
async fn security_is_as_documented() {
    let app = spawn_app_with("[server]\napi_keys = [\"k1\"]\n").await;
    let resp = app
        .client
        .get(app.url("/api/openapi.json"))
        .header("x-api-key", "k1")
        .send()
        .await
        .unwrap();
    let doc = json_body(resp).await;
    // Without a key: operations marked `security: []` answer, every other one is a 401.
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let resp = call_documented(&app, method, path).await;
            let open = op["security"] == json!([]);
            let status = resp.status().as_u16();
            if open {
                assert_ne!(status, 401, "{method} {path} is documented as open");
            } else {
                assert_eq!(resp.headers()["www-authenticate"], "Bearer");
                let (status, _) = check_json(&doc, path, method, resp).await;
                assert_eq!(
                    status, 401,
                    "{method} {path} is documented as needing a key"
                );
            }
        }
    }
    // With a key, in either documented header.
    for (name, value) in [("x-api-key", "k1"), ("authorization", "Bearer k1")] {
        let resp = app
            .client
            .get(app.url("/api/model"))
            .header(name, value)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{name}");
    }
}

#[tokio::test]
async fn check_and_reload_answers_match_their_schemas() {
    let app = spawn_app_with("[admin]\nenabled = true\n").await;
    let doc = fetch_document(&app).await;
    let path = "/api/checks/execute";
    app.llm.push(Step::text(
        r#"{"rationale": "all pods run", "passed": true}"#,
    ));
    let resp = app
        .post_raw(path, json!({"query": "Are pods running?"}).to_string())
        .await;
    let (status, body) = check_json(&doc, path, "post", resp).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("pass")),
        "{body}"
    );
    // A failed delivery's outcome, and a check without a verdict.
    app.llm
        .push(Step::text(r#"{"rationale": "no", "passed": false}"#));
    let resp = app
        .post_raw(
            path,
            json!({"query": "q", "mode": "alert", "destinations": ["slack"]}).to_string(),
        )
        .await;
    let (_, body) = check_json(&doc, path, "post", resp).await;
    assert_eq!(body["notifications"][0]["status"], "skipped", "{body}");
    app.llm
        .push(Step::error(400, "bad request to the provider"));
    let resp = app.post_raw(path, json!({"query": "q"}).to_string()).await;
    let (_, body) = check_json(&doc, path, "post", resp).await;
    assert_eq!(body["status"], "error", "{body}");
    let resp = app.post_raw(path, json!({"query": ""}).to_string()).await;
    assert_eq!(check_json(&doc, path, "post", resp).await.0, 422);
    // The schema has teeth.
    let schema = documented_schema(&doc, path, "post", 200, "application/json");
    let mut broken = body.clone();
    broken["status"] = json!("maybe");
    assert!(!schema_errors(&doc, &schema, &broken, "broken").is_empty());

    let reload = "/api/admin/reload/models";
    let resp = app.client.post(app.url(reload)).send().await.unwrap();
    let (status, body) = check_json(&doc, reload, "post", resp).await;
    assert_eq!(status, 200, "{body}");
    let off = spawn_app().await;
    let resp = off.client.post(off.url(reload)).send().await.unwrap();
    assert_eq!(check_json(&doc, reload, "post", resp).await.0, 404);
}
