//! `POST /api/checks/execute`: HolmesGPT's health check. The verdict (or its absence) is a
//! 200 with `status` pass, fail or error; only a request that cannot run is an HTTP error.

use axum::extract::State;
use axum::http::StatusCode;

use super::extract::Json;
use super::{ApiError, AppState};
use crate::checks::{CheckError, CheckRequest, CheckResponse};

pub async fn execute(
    State(state): State<AppState>,
    Json(request): Json<CheckRequest>,
) -> Result<Json<CheckResponse>, ApiError> {
    match state.checks.execute(request).await {
        Ok(response) => Ok(Json(response)),
        // FastAPI's status for a body that reads but does not validate, as HolmesGPT answers.
        Err(CheckError::Invalid(detail)) => {
            Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, detail))
        }
        Err(CheckError::Refused(e)) => Err(e.into()),
    }
}
