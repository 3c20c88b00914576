//! `trainmem serve`: a local web page and a JSON API over the same engine.
//!
//! This module and the command line are the only parts of trainmem that do
//! I/O. The API deserializes `POST /api/estimate`'s JSON into the same typed
//! [`crate::request::EstimateRequest`] that `trainmem estimate`'s flags fill,
//! and resolves, prices and renders it by the same calls, so the page and the
//! CLI cannot disagree; `POST /api/techniques` is `trainmem techniques` on
//! that request; `POST /api/plan` is `trainmem plan` on it and the plan's
//! keys; `GET /api/presets` and `GET /api/options` list the
//! catalogues for the page's menus; `GET /` is the page, embedded in the
//! binary, and `GET /favicon.ico` its icon.
//!
//! The server is meant for one person's browser but must survive any client:
//! it answers only requests naming it (`host.rs`), bounds every connection in
//! number and time (`connections.rs`), reads bodies whole within a size and a
//! time (`body.rs`), runs the engine on a bounded pool with a deadline,
//! heavy work in a queue of its own (`pool.rs`), and stops within a bounded time on ctrl-c or SIGTERM.

mod api;
mod body;
mod connections;
mod failure;
mod host;
mod json;
mod page;
mod pool;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use tokio::net::TcpListener;

use crate::error::{Error, Result};

/// The largest request body accepted: a request is a few flags, or a pasted
/// config.json of a few kilobytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Open connections at most: a page uses a handful, so this leaves room for
/// many tabs and clients while bounding the memory idle connections hold.
pub const MAX_CONNECTIONS: usize = 4096;

/// Time to send a request head, and the longest a kept-alive connection may
/// wait for its next one. A head is a few hundred bytes, sent at once by any
/// client; 5 s is also Apache's and Node's keep-alive timeout.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Time to send a body once its head is in: 64 KiB on a slow link.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Light requests waiting for the engine; beyond them the server answers
/// 503 at once. 128 waiting bodies hold at most 8 MiB.
pub const QUEUE: usize = 128;

/// Heavy requests (a pasted config, the techniques' ladder) waiting for a
/// worker of their own; beyond them, 503 at once. Two: a waiting one starts
/// within about one piece of heavy work, so that a flood of them is shed at
/// once instead of each waiting out the deadline in a long line.
pub const HEAVY_QUEUE: usize = 2;

/// Time from the start of a request's work to its answer, and the longest
/// a request waits for a worker. An estimate of a real model takes
/// milliseconds, even in a debug build.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// On ctrl-c or SIGTERM, how long requests in flight may finish.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Estimates running at once, whatever the machine: two, so that one slow
/// request never holds the only worker.
const MIN_WORKERS: usize = 2;

/// After the server stops, how long estimates still running (past their
/// deadline) may hold up the exit.
const EXIT_WAIT: Duration = Duration::from_millis(100);

/// What the server allows its clients; [`Limits::default`] is what
/// `trainmem serve` uses, from the constants of this module.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections at most; fewer if the open-file limit is lower.
    pub max_connections: usize,
    /// Time to send a request head, and to start the next on a kept-alive
    /// connection.
    pub header_timeout: Duration,
    /// Time to send a request body once its head is in.
    pub body_timeout: Duration,
    /// Estimates computed at once.
    pub workers: usize,
    /// Light requests waiting for a worker.
    pub queue: usize,
    /// Heavy requests waiting for a worker.
    pub heavy_queue: usize,
    /// Time from the start of a request's work to its answer (the work is
    /// then told to stop), and the longest a request waits for a worker.
    pub deadline: Duration,
    /// On stopping, how long requests in flight may finish.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: MAX_CONNECTIONS,
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            workers: std::thread::available_parallelism()
                .map_or(MIN_WORKERS, NonZeroUsize::get)
                .max(MIN_WORKERS),
            queue: QUEUE,
            heavy_queue: HEAVY_QUEUE,
            deadline: DEADLINE,
            shutdown_grace: SHUTDOWN_GRACE,
        }
    }
}

/// Every route of a server listening on `host`, behind the host check and
/// the body reader.
pub fn router(host: &str, limits: &Limits) -> Router {
    let pool = Arc::new(pool::Pool::new(
        limits.workers,
        limits.queue,
        limits.heavy_queue,
        limits.deadline,
    ));
    Router::new()
        .route("/", get(page::index))
        .route("/favicon.ico", get(page::favicon))
        .route("/api/estimate", post(api::estimate))
        .route("/api/techniques", post(api::techniques))
        .route("/api/plan", post(api::plan))
        .route("/api/presets", get(api::presets))
        .route("/api/options", get(api::options))
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .with_state(pool)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(
            limits.body_timeout,
            body::read_whole,
        ))
        .layer(middleware::from_fn_with_state(
            Arc::new(host::Hosts::new(host)),
            host::guard,
        ))
}

/// Listens on `host:port` (port 0: any free port) with the default limits and
/// returns the address bound and the future that serves until dropped.
pub async fn bind(
    host: &str,
    port: u16,
) -> io::Result<(
    SocketAddr,
    impl Future<Output = io::Result<()>> + Send + 'static,
)> {
    bind_with(host, port, Limits::default()).await
}

/// [`bind`] with other limits.
pub async fn bind_with(
    host: &str,
    port: u16,
    limits: Limits,
) -> io::Result<(
    SocketAddr,
    impl Future<Output = io::Result<()>> + Send + 'static,
)> {
    let listener = TcpListener::bind((host, port)).await?;
    let address = listener.local_addr()?;
    let app = router(host, &limits);
    Ok((address, async move {
        connections::serve(listener, app, limits, std::future::pending()).await;
        Ok(())
    }))
}

/// Serves on `host:port` until ctrl-c or SIGTERM, then stops within the
/// shutdown grace; `listening` is called with the bound address once
/// requests can come in.
pub fn run(host: &str, port: u16, listening: impl FnOnce(SocketAddr)) -> Result<()> {
    let failed = |problem: io::Error| Error::InvalidValue {
        what: "address",
        value: format!("{host}:{port}"),
        reason: format!("cannot serve there: {problem}"),
    };
    connections::raise_open_file_limit();
    let limits = Limits::default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    let served = runtime.block_on(async {
        // Watched before the first request can come in, so that a signal is
        // never met by the default action, which exits at once.
        let stop = stop_signal();
        let listener = TcpListener::bind((host, port)).await.map_err(failed)?;
        listening(listener.local_addr().map_err(failed)?);
        connections::serve(listener, router(host, &limits), limits, stop).await;
        Ok(())
    });
    // Estimates past their deadline run on blocking threads that cannot be
    // stopped: exit without them.
    runtime.shutdown_timeout(EXIT_WAIT);
    served
}

/// Resolves on ctrl-c (SIGINT) or SIGTERM; never, if they cannot be watched.
fn stop_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                }
                _ => std::future::pending().await,
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
