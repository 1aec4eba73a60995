//! Slack's Web API `chat.postMessage`: a bot token as a bearer credential, a JSON body with the
//! channel, a plain-text fallback and blocks. Slack answers HTTP 200 for most failures, with
//! `{"ok": false, "error": "channel_not_found"}`: the `ok` field decides, not the status.

use serde::Deserialize;
use serde_json::json;

use super::{Alert, answer_text, excerpt, transport_error};

/// Slack refuses a section's text past 3,000 characters.
const MAX_SECTION_CHARS: usize = 2900;

#[derive(Deserialize)]
struct SlackAnswer {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
}

/// Slack reads `&`, `<` and `>` as markup (`<!channel>` notifies everyone in it): the
/// model's words and the query are shown as text.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub async fn post(
    client: &reqwest::Client,
    api_base: &str,
    token: &str,
    channel: &str,
    alert: &Alert<'_>,
) -> Result<(), String> {
    let title = format!("Health check failed: {}", alert.check_name);
    let analysis: String = alert.analysis.chars().take(MAX_SECTION_CHARS).collect();
    let query: String = alert.query.chars().take(MAX_SECTION_CHARS).collect();
    let body = json!({
        "channel": channel,
        "text": escaped(&format!("{title}\n{analysis}")),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": title.chars().take(150).collect::<String>()}},
            {"type": "section", "text": {"type": "mrkdwn", "text": format!("*Check:* `{}`\n*Query:* {}", escaped(alert.check_name), escaped(&query))}},
            {"type": "section", "text": {"type": "plain_text", "text": if analysis.is_empty() { "(no analysis)".to_owned() } else { analysis }}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": format!("Source: {}", escaped(alert.source))}]},
        ],
    });
    let response = client
        .post(format!("{api_base}/chat.postMessage"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .map_err(transport_error)?;
    let status = response.status();
    let text = answer_text(response).await;
    if !status.is_success() {
        return Err(format!(
            "Slack answered HTTP {}: {}",
            status.as_u16(),
            excerpt(&text.replace(token, crate::agent::MASK))
        ));
    }
    match serde_json::from_str::<SlackAnswer>(&text) {
        Ok(SlackAnswer { ok: true, .. }) => Ok(()),
        Ok(SlackAnswer { error, .. }) => Err(format!(
            "Slack refused the message: {}",
            excerpt(
                &error
                    .unwrap_or_else(|| "no error given".into())
                    .replace(token, crate::agent::MASK)
            )
        )),
        Err(_) => Err("Slack's answer is not its JSON (`ok` missing)".into()),
    }
}
