//! Reading a request body: whole, at most [`MAX_BODY_BYTES`], within the
//! body timeout, before any route sees the request. A client that sends a
//! head and then trickles (or withholds) the body is answered 408 and let go
//! instead of holding the connection and the request open; one that
//! declares a body over the limit is answered 413 before it is read.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::MAX_BODY_BYTES;
use super::failure::Failure;

/// The answer to a body over [`MAX_BODY_BYTES`], declared or sent.
fn too_large() -> Response {
    Failure::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "error: the request body is larger than {} KiB; send the flags, or a config.json of a few kilobytes",
            MAX_BODY_BYTES / 1024
        ),
    )
    .closing()
    .into_response()
}

/// Whether the request declares a body over [`MAX_BODY_BYTES`] in its
/// `content-length` (hyper has already refused a malformed or repeated
/// one with 400).
fn declared_too_large(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .is_some_and(|length| u64::try_from(MAX_BODY_BYTES).is_ok_and(|max| length > max))
}

/// The middleware; its state is the body timeout. A body declared too
/// large is answered 413 at once, before any of it is awaited.
pub async fn read_whole(State(timeout): State<Duration>, request: Request, next: Next) -> Response {
    if declared_too_large(&request) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(timeout, Limited::new(body, MAX_BODY_BYTES).collect()).await;
    let body = match read {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
            return too_large();
        }
        Ok(Err(error)) => {
            return Failure::bad(format!("error: cannot read the request body: {error}"))
                .closing()
                .into_response();
        }
        Err(_) => {
            return Failure::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "error: the request body did not arrive within {} s; send the whole request at once",
                    timeout.as_secs_f64()
                ),
            )
            .closing()
            .into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(body))).await
}
