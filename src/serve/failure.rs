//! An answer other than 200: a status and the one-line message the command
//! line would print, sent as `{"error": "error: ..."}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::Error;

/// A refused or failed request.
#[derive(Debug)]
pub struct Failure {
    pub status: StatusCode,
    pub message: String,
    /// Close the connection after answering: what is left of the request on
    /// it (an unread body) cannot be told from the next request.
    pub close: bool,
}

impl Failure {
    /// An answer with this status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
            close: false,
        }
    }

    /// A bad request, with the line the CLI prints (`error: ...`).
    pub fn bad(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, message)
    }

    /// A bad request from a library error, printed as the CLI prints it.
    pub fn from_error(error: &Error) -> Failure {
        Failure::bad(format!("error: {error}"))
    }

    /// The same answer, closing the connection after it.
    pub fn closing(self) -> Failure {
        Failure {
            close: true,
            ..self
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.message }).to_string();
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body + "\n",
        )
            .into_response();
        if self.close {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_one_json_line_with_their_headers() {
        let response = Failure::bad("error: no").into_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert!(!response.headers().contains_key(header::CONNECTION));
        let busy = Failure::new(StatusCode::SERVICE_UNAVAILABLE, "error: busy").into_response();
        assert_eq!(busy.headers()[header::RETRY_AFTER], "1");
        let closing = Failure::new(StatusCode::REQUEST_TIMEOUT, "error: slow")
            .closing()
            .into_response();
        assert_eq!(closing.headers()[header::CONNECTION], "close");
    }
}
