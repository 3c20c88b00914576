//! Reading a request body: whole, at most [`MAX_BODY_BYTES`], within the
//! body timeout, before any route sees the request. A client that sends a
//! head and then trickles (or withholds) the body is answered 408 and let go
//! instead of holding the connection and the request open.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::MAX_BODY_BYTES;
use super::failure::Failure;

/// The middleware; its state is the body timeout.
pub async fn read_whole(State(timeout): State<Duration>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(timeout, Limited::new(body, MAX_BODY_BYTES).collect()).await;
    let body = match read {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
            return Failure::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "error: the request body is larger than {} KiB; send the flags, or a config.json of a few kilobytes",
                    MAX_BODY_BYTES / 1024
                ),
            )
            .closing()
            .into_response();
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
