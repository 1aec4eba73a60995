//! What the providers speaking to Google share (Gemini, and Claude on Vertex AI): a JSON body
//! streamed to the model's endpoint with the entry's key or a fresh Google token.

use futures::stream::BoxStream;

use super::answer::AnswerReader;
use super::error::LlmError;
use super::model::{Auth, ModelConfig};
use super::provider::Fragment;
use super::transport::Transport;

/// What Claude on Vertex takes in place of the `anthropic-version` header.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// The model's Google OAuth token, when it has Google credentials.
pub async fn with_google_token(
    transport: &Transport,
    model: &ModelConfig,
) -> Result<Option<String>, LlmError> {
    match &model.auth {
        Auth::Google(auth) => auth.token(transport.http(), &model.key).await.map(Some),
        _ => Ok(None),
    }
}

/// Streams the answer to a JSON `body` posted to the model's endpoint, authorized by the
/// entry's key or, on Vertex, a Google token fetched afresh for each attempt.
pub fn stream_json<'a, R: AnswerReader + 'a>(
    transport: &'a Transport,
    model: &'a ModelConfig,
    body: bytes::Bytes,
) -> BoxStream<'a, Result<Fragment, LlmError>> {
    transport.stream_answer::<R, _, _, _>(model, move || {
        let body = body.clone();
        async move {
            let token = with_google_token(transport, model).await?;
            Ok(move || {
                let builder = model.authorize(transport.post(model, body.clone()));
                match &token {
                    Some(t) => builder.bearer_auth(t),
                    None => builder,
                }
            })
        }
    })
}
