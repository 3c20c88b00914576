//! The web page: one self-contained HTML file (CSS and JavaScript inline, no
//! network), embedded in the binary.

use axum::http::header;
use axum::response::IntoResponse;

/// The page, as written in `page.html`.
const PAGE: &str = include_str!("page.html");

/// The page may run only its own inline code and talk only to this server.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'";

/// `GET /`.
pub async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE,
    )
}
