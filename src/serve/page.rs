//! The web page: one self-contained HTML document (CSS and JavaScript
//! inline, no network), embedded in the binary. Its sources live in
//! `page/`, one file a concern, joined here in the order they run.

use axum::http::header;
use axum::response::IntoResponse;

/// The page: `page/`'s files joined into one document. The head's script
/// (the controls' table and the request they make) asks the first estimate
/// while the rest of the page is parsed (`first.js`); the body's script
/// builds the controls and draws the answers.
const PAGE: &str = concat!(
    include_str!("page/head.html"),
    include_str!("page/state.js"),
    include_str!("page/request.js"),
    include_str!("page/first.js"),
    "</script>\n<style>\n",
    include_str!("page/style.css"),
    include_str!("page/body.html"),
    // The body's script is a second script: strict too.
    "\"use strict\";\n",
    include_str!("page/settings.js"),
    include_str!("page/model.js"),
    include_str!("page/answer.js"),
    include_str!("page/suggest.js"),
    include_str!("page/plan.js"),
    include_str!("page/charts.js"),
    include_str!("page/compare.js"),
    include_str!("page/downloads.js"),
    include_str!("page/start.js"),
    include_str!("page/tail.html"),
);

/// The page may run only its own inline code and talk only to this server.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'";

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

/// The tab's icon: a bar against a line, drawn in SVG (browsers take an SVG
/// under `/favicon.ico` when its content type says so).
const ICON: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#2f5f98"/><rect x="3" y="4" width="4" height="9" fill="#fff"/><rect x="9" y="7" width="4" height="6" fill="#9fc0e8"/><path d="M2 3.5h12" stroke="#fff" stroke-width="1.2"/></svg>"##;

/// `GET /favicon.ico`.
pub async fn favicon() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "max-age=86400"),
        ],
        ICON,
    )
}
