//! The request's proof of identity, checked as AWS checks it: a bearer token must be the
//! trusted one; a SigV4 `Authorization` is recomputed from the request as received (method,
//! path as sent, the headers it names as signed, the body, its `x-amz-date`) with the secret
//! of its access key, and must match. aws-sigv4 computes it, as AWS's SDKs do.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_smithy_types::DateTime;
use aws_smithy_types::date_time::Format;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;

use super::{BedrockState, error};

const MISMATCH: &str = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.";

/// The refusal AWS would answer, if any.
pub(crate) fn check(
    state: &BedrockState,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<Response> {
    verify(state, uri, headers, body)
        .err()
        .map(|refusal| *refusal)
}

fn verify(
    state: &BedrockState,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), Box<Response>> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let authorization = header("authorization");
    if let Some(token) = authorization.strip_prefix("Bearer ") {
        let trusted = state
            .bearer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        return if trusted.as_deref() == Some(token) {
            Ok(())
        } else {
            Err(refuse(
                403,
                "AccessDeniedException",
                "Invalid API Key format: Must start with pre-defined prefix",
            ))
        };
    }
    let Some(fields) = authorization.strip_prefix("AWS4-HMAC-SHA256 ") else {
        return Err(refuse(
            403,
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        ));
    };
    let field = |name: &str| {
        fields
            .split(',')
            .map(str::trim)
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or("")
    };
    // Credential=AKID/20250101/us-east-1/bedrock/aws4_request
    let scope: Vec<&str> = field("Credential").split('/').collect();
    let [key_id, _date, region, service, "aws4_request"] = scope[..] else {
        return Err(refuse(
            403,
            "IncompleteSignatureException",
            "Authorization header requires a valid Credential",
        ));
    };
    if service != "bedrock" {
        return Err(refuse(
            403,
            "InvalidSignatureException",
            &format!("Credential should be scoped to correct service: 'bedrock', not '{service}'"),
        ));
    }
    let secret = state
        .credentials
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key_id)
        .cloned();
    let Some(secret) = secret else {
        return Err(refuse(
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        ));
    };
    let signed_at = signing_time(header("x-amz-date")).ok_or_else(|| {
        refuse(
            403,
            "IncompleteSignatureException",
            "x-amz-date is missing or malformed",
        )
    })?;
    let skew = SystemTime::now()
        .duration_since(signed_at)
        .or_else(|e| Ok::<_, ()>(e.duration()))
        .unwrap_or_default();
    if skew > Duration::from_secs(300) {
        return Err(refuse(
            403,
            "InvalidSignatureException",
            "Signature expired",
        ));
    }
    let names: Vec<&str> = field("SignedHeaders").split(';').collect();
    if !names.contains(&"host") || !names.contains(&"x-amz-date") {
        return Err(refuse(403, "InvalidSignatureException", MISMATCH));
    }
    let signed: Vec<(&str, &str)> = names.iter().map(|n| (*n, header(n))).collect();
    let token = header("x-amz-security-token");
    let credentials = Credentials::new(
        key_id,
        secret,
        (!token.is_empty()).then(|| token.to_owned()),
        None,
        "fake",
    );
    let identity = credentials.into();
    let Ok(params) = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(signed_at)
        .settings(SigningSettings::default())
        .build()
    else {
        return Err(refuse(403, "InvalidSignatureException", MISMATCH));
    };
    let url = format!(
        "http://{}{}",
        header("host"),
        uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let expected = SignableRequest::new("POST", url, signed.into_iter(), SignableBody::Bytes(body))
        .ok()
        .and_then(|r| sign(r, &params.into()).ok())
        .map(|out| out.signature().to_owned());
    if expected.as_deref() == Some(field("Signature")) {
        Ok(())
    } else {
        Err(refuse(403, "InvalidSignatureException", MISMATCH))
    }
}

fn refuse(status: u16, kind: &str, message: &str) -> Box<Response> {
    Box::new(error(status, kind, message))
}

/// `20250102T030405Z` as a time.
fn signing_time(amz_date: &str) -> Option<SystemTime> {
    if amz_date.len() != 16 || !amz_date.is_ascii() {
        return None;
    }
    let d = amz_date;
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &d[0..4],
        &d[4..6],
        &d[6..8],
        &d[9..11],
        &d[11..13],
        &d[13..15]
    );
    DateTime::from_str(&rfc3339, Format::DateTime)
        .ok()
        .and_then(|t| SystemTime::try_from(t).ok())
}
