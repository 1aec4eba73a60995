//! `GET /api/openapi.json` (stub: being written).

use axum::Json;
use serde_json::{Value, json};

pub async fn openapi() -> Json<Value> {
    Json(json!({"openapi": "3.1.0", "info": {"title": "triage", "version": env!("CARGO_PKG_VERSION")}, "paths": {}}))
}
