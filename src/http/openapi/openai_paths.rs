//! The OpenAPI operations of the OpenAI-compatible door (`/v1/models`,
//! `/v1/chat/completions`, `/v1/responses`), with their schemas written here: the request
//! types refuse unknown parameters (`additionalProperties: false`, as OpenAI does) and read the
//! conversation's parts by hand, so the schemas say what `openai_compat/` accepts and writes.

use serde_json::{Value, json};

const REF: &str = "#/components/schemas/";

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{REF}{name}")})
}

fn error(description: &str) -> Value {
    json!({
        "description": description,
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {"application/json": {"schema": schema_ref("OpenAIError")}},
    })
}

/// Every status these routes answer besides success, each an OpenAI error object.
fn errors(mut responses: Value) -> Value {
    let statuses = [
        (
            "400",
            "Malformed JSON, an unknown parameter, a value of the wrong type or one this server does not support; `param` names it.",
        ),
        (
            "401",
            "Invalid or missing API key (`Authorization: Bearer`, or `X-API-Key`).",
        ),
        (
            "403",
            "Refused for a browser (the origin guard, as on `/api/chat`).",
        ),
        (
            "404",
            "`model` is not a key of the model list (`code: model_not_found`).",
        ),
        (
            "408",
            "The body did not arrive within `server.body_read_timeout_secs`.",
        ),
        (
            "413",
            "The body is over `server.body_limit_bytes`, or the conversation does not fit the model.",
        ),
        ("429", "The LLM provider rate-limited the run."),
        (
            "500",
            "The run failed (provider error, context overflow, step budget).",
        ),
        (
            "502",
            "The provider refused triage's credentials, or the answer did not match `response_format`.",
        ),
        (
            "503",
            "No model is configured, the model's call slots are full (`Retry-After`), or the server is busy.",
        ),
        ("504", "The run exceeded `server.request_deadline_secs`."),
    ];
    for (status, description) in statuses {
        if responses.get(status).is_none() {
            responses[status] = error(description);
        }
    }
    responses["401"]["headers"]["www-authenticate"] =
        json!({"schema": {"type": "string", "const": "Bearer"}});
    for status in ["429", "503"] {
        responses[status]["headers"]["retry-after"] =
            json!({"$ref": "#/components/headers/RetryAfter"});
    }
    responses
}

fn ok_json(description: &str, schema: Value) -> Value {
    json!({
        "description": description,
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {"application/json": {"schema": schema}},
    })
}

/// Any JSON value: parameters read and left alone (sampling, metadata).
fn any() -> Value {
    json!({})
}

fn nullable(kind: &str) -> Value {
    json!({"type": [kind, "null"]})
}

fn schemas() -> Value {
    let ignored = [
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "seed",
        "user",
        "metadata",
        "parallel_tool_calls",
        "reasoning_effort",
        "service_tier",
        "store",
        "logprobs",
        "top_logprobs",
        "prompt_cache_key",
        "safety_identifier",
        "verbosity",
    ];
    let mut chat_properties = json!({
        "model": {"type": "string", "description": "A key of the model list (`GET /v1/models`)."},
        "messages": {"type": "array", "items": schema_ref("ChatMessageIn"), "description": "The conversation; the last message is a user message, or tool results answering the previous reply's calls of the client's tools."},
        "stream": nullable("boolean"),
        "stream_options": {"type": ["object", "null"], "additionalProperties": false, "properties": {
            "include_usage": nullable("boolean"), "include_obfuscation": any()}},
        "response_format": {"type": ["object", "null"], "description": "`{type: text}`, `{type: json_object}` or `{type: json_schema, json_schema: {name, schema, strict}}`: the answer is checked (one repair round)."},
        "tools": {"type": ["array", "null"], "items": schema_ref("ChatFunctionTool"), "description": "The client's function tools: a reply calling them ends the run with `finish_reason: tool_calls`."},
        "tool_choice": {"description": "`auto` or `none`.", "enum": ["auto", "none", null]},
        "n": {"type": ["integer", "null"], "description": "1 only."},
    });
    for name in ignored {
        chat_properties[name] =
            json!({"description": "Accepted and ignored: the model entry decides."});
    }
    let mut responses_properties = json!({
        "model": {"type": "string"},
        "input": {"description": "A string (the question) or input items: messages (`role`, `content` as a string or `input_text`/`output_text`/`input_image` parts), `function_call`, `function_call_output`, `reasoning` (ignored).",
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
        "instructions": nullable("string"),
        "stream": nullable("boolean"),
        "text": {"type": ["object", "null"], "additionalProperties": false, "properties": {
            "format": {"type": ["object", "null"]}, "verbosity": any()}},
        "tools": {"type": ["array", "null"], "items": {"type": "object"}},
        "tool_choice": {"enum": ["auto", "none", null]},
        "previous_response_id": {"type": "null", "description": "Refused: nothing is stored."},
        "store": {"enum": [false, null], "description": "`true` is refused: nothing is stored."},
        "conversation": {"type": "null", "description": "Refused: nothing is stored."},
        "background": {"enum": [false, null]},
    });
    for name in [
        "temperature",
        "top_p",
        "max_output_tokens",
        "metadata",
        "parallel_tool_calls",
        "reasoning",
        "user",
        "truncation",
        "include",
        "service_tier",
        "stream_options",
        "prompt_cache_key",
        "safety_identifier",
        "max_tool_calls",
    ] {
        responses_properties[name] = json!({"description": "Accepted and ignored."});
    }
    let usage = json!({"type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"], "properties": {
        "prompt_tokens": {"type": "integer"}, "completion_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"},
        "prompt_tokens_details": {"type": "object", "properties": {"cached_tokens": {"type": "integer"}}}}});
    let call_out = json!({"type": "object", "required": ["id", "type", "function"], "properties": {
        "index": {"type": "integer"}, "id": {"type": "string"}, "type": {"const": "function"},
        "function": {"type": "object", "required": ["name", "arguments"], "properties": {
            "name": {"type": "string"}, "arguments": {"type": "string"}}}}});
    json!({
        "OpenAIError": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["message", "type", "param", "code"], "properties": {
                "message": {"type": "string"}, "type": {"type": "string"},
                "param": nullable("string"), "code": nullable("string")}}}},
        "OpenAIModelList": {"type": "object", "required": ["object", "data"], "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"type": "object", "required": ["id", "object", "created", "owned_by"], "properties": {
                "id": {"type": "string"}, "object": {"const": "model"}, "created": {"type": "integer"}, "owned_by": {"type": "string"}}}}}},
        "ChatCompletionRequest": {"type": "object", "required": ["model", "messages"], "additionalProperties": false, "properties": chat_properties},
        "ChatMessageIn": {"type": "object", "required": ["role"], "additionalProperties": false, "properties": {
            "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
            "content": {"description": "A string, null, or content parts: `{type: text, text}` and (user messages) `{type: image_url, image_url: {url, detail}}`.",
                "anyOf": [{"type": "string"}, {"type": "null"}, {"type": "array", "items": {"type": "object"}}]},
            "tool_calls": {"type": ["array", "null"], "items": {"type": "object", "required": ["id", "function"], "additionalProperties": false, "properties": {
                "id": {"type": "string"}, "type": any(), "function": {"type": "object", "required": ["name"], "additionalProperties": false, "properties": {
                    "name": {"type": "string"}, "arguments": {"type": "string"}}}}}},
            "tool_call_id": nullable("string"),
            "name": any(), "reasoning_content": any(), "refusal": any()}},
        "ChatFunctionTool": {"type": "object", "required": ["type", "function"], "additionalProperties": false, "properties": {
            "type": {"type": "string", "description": "`function` only."},
            "function": {"type": "object", "required": ["name"], "additionalProperties": false, "properties": {
                "name": {"type": "string"}, "description": nullable("string"), "parameters": any(), "strict": any()}}}},
        "ChatCompletion": {"type": "object", "required": ["id", "object", "created", "model", "choices", "usage"], "properties": {
            "id": {"type": "string"}, "object": {"const": "chat.completion"}, "created": {"type": "integer"}, "model": {"type": "string"},
            "choices": {"type": "array", "minItems": 1, "maxItems": 1, "items": {"type": "object", "required": ["index", "message", "finish_reason"], "properties": {
                "index": {"type": "integer"}, "logprobs": {"type": "null"},
                "finish_reason": {"enum": ["stop", "length", "tool_calls"]},
                "message": {"type": "object", "required": ["role", "content"], "properties": {
                    "role": {"const": "assistant"}, "content": nullable("string"),
                    "reasoning_content": {"type": "string", "description": "The investigation's tool activity and the model's reasoning."},
                    "tool_calls": {"type": "array", "items": call_out}, "refusal": {"type": "null"}}}}}},
            "usage": usage}},
        "ChatCompletionChunk": {"type": "object", "required": ["id", "object", "created", "model", "choices"], "properties": {
            "id": {"type": "string"}, "object": {"const": "chat.completion.chunk"}, "created": {"type": "integer"}, "model": {"type": "string"},
            "choices": {"type": "array", "items": {"type": "object", "required": ["index", "delta"], "properties": {
                "index": {"type": "integer"}, "logprobs": {"type": "null"},
                "finish_reason": {"enum": ["stop", "length", "tool_calls", null]},
                "delta": {"type": "object", "properties": {
                    "role": {"const": "assistant"}, "content": {"type": "string"}, "reasoning_content": {"type": "string"},
                    "tool_calls": {"type": "array", "items": call_out}}}}}},
            "usage": usage}},
        "ChatStreamFrame": {"title": "ChatStreamFrame", "description": "One server-sent event of a streaming completion: `data: JSON` (a `ChatCompletionChunk`, or an `OpenAIError` that ends the stream), and `data: [DONE]` last. Lines starting with `:` are keep-alive comments.",
            "type": "object", "required": ["data"], "properties": {"data": {"type": "string"}, "event": {"type": "string"}, "id": {"type": "string"}, "retry": {"type": "integer"}}},
        "ResponsesRequest": {"type": "object", "required": ["model", "input"], "additionalProperties": false, "properties": responses_properties},
        "ResponseObject": {"type": "object", "required": ["id", "object", "created_at", "status", "model", "output"], "properties": {
            "id": {"type": "string"}, "object": {"const": "response"}, "created_at": {"type": "integer"},
            "status": {"enum": ["in_progress", "completed"]}, "model": {"type": "string"},
            "output": {"type": "array", "items": {"type": "object", "required": ["type", "id"], "properties": {
                "type": {"enum": ["reasoning", "message", "function_call"]}, "id": {"type": "string"}}}},
            "usage": {"type": ["object", "null"], "properties": {
                "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}}}}},
        "ResponsesStreamEvent": {"title": "ResponsesStreamEvent", "description": "One server-sent event of a streaming response: `event: TYPE` and `data: JSON` with the same `type` and a `sequence_number`: `response.created`, `response.in_progress`, `response.output_item.added`/`done`, `response.reasoning_summary_part.added`/`done`, `response.reasoning_summary_text.delta`/`done` (tool activity), `response.content_part.added`/`done`, `response.output_text.delta`/`done`, `response.function_call_arguments.done`, then `response.completed` (with usage), or `error`, which ends the stream.",
            "type": "object", "required": ["event", "data"], "properties": {"event": {"type": "string"}, "data": {"type": "string", "contentMediaType": "application/json"}, "id": {"type": "string"}, "retry": {"type": "integer"}}},
    })
}

pub(super) fn add(doc: &mut Value) {
    let tags = doc["tags"].as_array_mut();
    if let Some(tags) = tags {
        tags.push(json!({"name": "openai", "description": "The agent as an OpenAI-compatible model (stateless)."}));
    }
    if let (Some(target), Value::Object(new)) =
        (doc["components"]["schemas"].as_object_mut(), schemas())
    {
        target.extend(new);
    }
    let paths = json!({
        "/v1/models": {"get": {
            "tags": ["openai"],
            "operationId": "openaiListModels",
            "summary": "The model list's keys as OpenAI model objects",
            "responses": errors(json!({"200": ok_json("The models.", schema_ref("OpenAIModelList"))})),
        }},
        "/v1/chat/completions": {"post": {
            "tags": ["openai"],
            "operationId": "openaiChatCompletions",
            "summary": "An investigation as a chat completion",
            "description": "The agent runs the investigation server-side (its tools, compaction, `response_format`) and answers as `chat.completion`, or with `stream: true` as `chat.completion.chunk` events ending with `data: [DONE]` (usage in a last chunk with `stream_options.include_usage`). Tool activity comes as `reasoning_content`. Calls that need approval are refused (nobody can approve here) and the model is told.",
            "requestBody": {"required": true, "content": {"application/json": {"schema": schema_ref("ChatCompletionRequest"),
                "example": {"model": "fake", "messages": [{"role": "user", "content": "Why is my pod crashing?"}]}}}},
            "responses": errors(json!({"200": {
                "description": "The completion, or (`stream: true`) its chunks.",
                "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                "content": {
                    "application/json": {"schema": schema_ref("ChatCompletion")},
                    "text/event-stream": {"schema": schema_ref("ChatStreamFrame")},
                },
            }})),
        }},
        "/v1/responses": {"post": {
            "tags": ["openai"],
            "operationId": "openaiResponses",
            "summary": "An investigation as a Responses object (stateless)",
            "description": "`input` and `instructions` in; a Responses object out (tool activity as a reasoning item's summary), or with `stream: true` Responses events. Nothing is stored: `previous_response_id`, `conversation`, `store: true` and `background: true` are refused.",
            "requestBody": {"required": true, "content": {"application/json": {"schema": schema_ref("ResponsesRequest"),
                "example": {"model": "fake", "input": "Why is my pod crashing?"}}}},
            "responses": errors(json!({"200": {
                "description": "The response, or (`stream: true`) its events.",
                "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                "content": {
                    "application/json": {"schema": schema_ref("ResponseObject")},
                    "text/event-stream": {"schema": schema_ref("ResponsesStreamEvent")},
                },
            }})),
        }},
    });
    if let (Some(target), Value::Object(new)) = (doc["paths"].as_object_mut(), paths) {
        target.extend(new);
    }
}
