//! OpenAI's SSE frames: `data: JSON` for chat chunks, `event: TYPE` + `data: JSON` for
//! Responses events, `data: [DONE]` ending a chat stream.

use bytes::Bytes;
use serde::Serialize;

pub const DONE: &[u8] = b"data: [DONE]\n\n";

pub fn data_frame(value: &impl Serialize) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"data: ");
    write_json(&mut buf, value);
    buf.extend_from_slice(b"\n\n");
    Bytes::from(buf)
}

pub fn event_frame(name: &str, value: &impl Serialize) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    write_json(&mut buf, value);
    buf.extend_from_slice(b"\n\n");
    Bytes::from(buf)
}

fn write_json(buf: &mut Vec<u8>, value: &impl Serialize) {
    let start = buf.len();
    if let Err(e) = serde_json::to_writer(&mut *buf, value) {
        // Not reachable with our types (no non-string map keys); never half a frame.
        tracing::error!(error = %e, "cannot encode an SSE frame");
        buf.truncate(start);
        buf.extend_from_slice(
            br#"{"error":{"message":"cannot encode a frame","type":"server_error","param":null,"code":null}}"#,
        );
    }
}
