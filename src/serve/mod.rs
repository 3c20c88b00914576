//! `trainmem serve`: a local web page and a JSON API over the same engine.
//!
//! This module and the command line are the only parts of trainmem that do
//! I/O. The API answers `POST /api/estimate` by running the very command line
//! `trainmem estimate ... --format json` would run, so the page and the CLI
//! cannot disagree; `GET /api/presets` and `GET /api/options` list the
//! catalogues for the page's menus; `GET /` is the page, embedded in the binary.

mod api;
mod page;

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tokio::net::TcpListener;

use crate::error::{Error, Result};

/// The largest request body accepted: a request is a few flags, or a pasted
/// config.json of a few kilobytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Every route of the server.
pub fn router() -> Router {
    Router::new()
        .route("/", get(page::index))
        .route("/api/estimate", post(api::estimate))
        .route("/api/presets", get(api::presets))
        .route("/api/options", get(api::options))
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// Listens on `host:port` (port 0: any free port) and returns the address
/// bound and the future that serves until dropped or failed.
pub async fn bind(
    host: &str,
    port: u16,
) -> io::Result<(
    SocketAddr,
    impl Future<Output = io::Result<()>> + Send + 'static,
)> {
    let listener = TcpListener::bind((host, port)).await?;
    let address = listener.local_addr()?;
    Ok((
        address,
        async move { axum::serve(listener, router()).await },
    ))
}

/// Serves on `host:port` until interrupted (ctrl-c); `listening` is called
/// with the bound address once requests can come in.
pub fn run(host: &str, port: u16, listening: impl FnOnce(SocketAddr)) -> Result<()> {
    let failed = |problem: io::Error| Error::InvalidValue {
        what: "address",
        value: format!("{host}:{port}"),
        reason: format!("cannot serve there: {problem}"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    runtime.block_on(async {
        let listener = TcpListener::bind((host, port)).await.map_err(failed)?;
        listening(listener.local_addr().map_err(failed)?);
        axum::serve(listener, router())
            .with_graceful_shutdown(async {
                // If the signal cannot be watched, serve until killed.
                if tokio::signal::ctrl_c().await.is_err() {
                    std::future::pending::<()>().await;
                }
            })
            .await
            .map_err(failed)
    })
}
