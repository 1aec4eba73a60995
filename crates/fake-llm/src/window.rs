//! The context window, enforced as OpenAI enforces it: a request whose prompt (plus the
//! completion it asks room for) does not fit is refused with HTTP 400
//! `context_length_exceeded` before anything is generated.

use serde_json::{Value, json};

/// Per message: the role and separators of OpenAI's chat format.
const MESSAGE_OVERHEAD: u64 = 3;
/// Every reply is primed with `<|start|>assistant<|message|>`.
const REPLY_PRIMING: u64 = 3;
/// One image, at OpenAI's price for a 1024×1024 high-detail one.
const IMAGE_TOKENS: u64 = 765;

/// The prompt tokens of a chat-completions request, counted with o200k as OpenAI counts
/// gpt-4o's: every message's role, name, text and tool calls, and the tool definitions.
pub(crate) fn prompt_tokens(body: &Value) -> u64 {
    let count = |text: &str| -> u64 {
        let bpe = tiktoken::get_encoding("o200k_base").expect("built-in o200k encoding");
        bpe.count(text) as u64
    };
    let str_of = |v: &Value| v.as_str().map_or(0, count);
    let mut tokens = REPLY_PRIMING;
    for m in body["messages"].as_array().into_iter().flatten() {
        tokens += MESSAGE_OVERHEAD + str_of(&m["role"]) + str_of(&m["name"]);
        match &m["content"] {
            Value::String(s) => tokens += count(s),
            Value::Array(parts) => {
                for part in parts {
                    tokens += if part["type"] == "image_url" {
                        IMAGE_TOKENS
                    } else {
                        str_of(&part["text"])
                    };
                }
            }
            _ => {}
        }
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            tokens += str_of(&call["function"]["name"]) + str_of(&call["function"]["arguments"]);
        }
    }
    if let Some(tools) = body.get("tools").filter(|t| !t.is_null()) {
        tokens += count(&tools.to_string());
    }
    tokens
}

/// OpenAI's error body for a request that needs more than `window` tokens; `None` when it
/// fits.
pub(crate) fn refusal(body: &Value, window: u64) -> Option<Value> {
    let prompt = prompt_tokens(body);
    let completion = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| body[k].as_u64())
        .unwrap_or(0);
    if prompt + completion <= window {
        return None;
    }
    let message = if completion == 0 {
        format!(
            "This model's maximum context length is {window} tokens. However, your messages \
             resulted in {prompt} tokens. Please reduce the length of the messages."
        )
    } else {
        format!(
            "This model's maximum context length is {window} tokens. However, you requested {} \
             tokens ({prompt} in the messages, {completion} in the completion). Please reduce \
             the length of the messages or completion.",
            prompt + completion
        )
    };
    Some(json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(content: &str) -> Value {
        json!({"model": "m", "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": content},
        ]})
    }

    #[test]
    fn counts_every_part_of_the_prompt() {
        let bare = prompt_tokens(&chat(""));
        // 2 messages of 3 + role; 2 tokens of "be brief"; the reply's priming.
        assert_eq!(bare, 3 + 2 * (3 + 1) + 2);
        assert_eq!(prompt_tokens(&chat("hello world")), bare + 2);
        let mut with_tools = chat("");
        with_tools["tools"] = json!([{"type": "function", "function": {"name": "bash"}}]);
        with_tools["messages"][1] = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]});
        let image = json!({"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]});
        with_tools["messages"].as_array_mut().unwrap().push(image);
        assert!(prompt_tokens(&with_tools) > bare + IMAGE_TOKENS + 10);
    }

    #[test]
    fn refuses_what_does_not_fit_as_openai_does() {
        let body = chat(&"word ".repeat(200));
        let prompt = prompt_tokens(&body);
        assert_eq!(refusal(&body, prompt), None);
        let error = refusal(&body, prompt - 1).expect("one token too many");
        assert_eq!(error["error"]["code"], "context_length_exceeded");
        assert_eq!(error["error"]["type"], "invalid_request_error");
        assert_eq!(
            error["error"]["message"],
            format!(
                "This model's maximum context length is {} tokens. However, your messages \
                 resulted in {prompt} tokens. Please reduce the length of the messages.",
                prompt - 1
            )
        );
        // The completion asked for needs room too.
        let mut asks_room = body.clone();
        asks_room["max_tokens"] = json!(100);
        let error = refusal(&asks_room, prompt + 99).expect("completion does not fit");
        let text = error["error"]["message"].as_str().unwrap();
        assert!(
            text.contains(&format!(
                "({prompt} in the messages, 100 in the completion)"
            )),
            "{text}"
        );
        assert_eq!(refusal(&asks_room, prompt + 100), None);
    }
}
