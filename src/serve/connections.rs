//! The connections: accepting them, a cap on how many are open, how long each
//! may take to send a request, and how they end when the server stops.
//!
//! Every connection must send a whole request head within the header timeout,
//! counted from its opening or from the end of its previous answer; one that
//! is slow, silent or idle is closed then. At the cap, the connection idle the
//! longest is closed to make room, so idle and slow connections cannot keep a
//! fresh request out; a new connection is refused only when every open one is
//! in the middle of a request. The cap stays below the open-file limit, which
//! `trainmem serve` first raises as far as the system allows.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tower::ServiceExt;

use super::Limits;

/// The largest request head (request line and headers); a larger one is
/// answered 431. Node's default: room for the cookies every local web app
/// sets on `localhost`.
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The most a connection buffers of what it reads: a head and a body, so
/// that idle-but-chatty connections cannot hold hyper's default 400 KB each.
const MAX_BUFFER_BYTES: usize = MAX_HEAD_BYTES + super::MAX_BODY_BYTES;

/// Open files kept for everything but connections: the standard streams, the
/// listener, the runtime's own descriptors.
const RESERVED_FILES: usize = 64;

/// After a failed accept, wait this long before the next.
const ACCEPT_PAUSE: Duration = Duration::from_millis(10);

/// On stopping, a connection with no request in flight has this long to
/// finish writing an answer already given.
const FLUSH_GRACE: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `stop` resolves; then stops accepting,
/// lets requests in flight finish for at most the shutdown grace, and returns.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
) {
    let open = Arc::new(Open::new(connection_cap(limits.max_connections)));
    let (stopping, stopped) = watch::channel(false);
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(_) => {
                // Out of files or memory, or a connection reset before it
                // was accepted: pause rather than spin, and go on.
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        // Every open connection is answering a request: refuse this one.
        let Some(entry) = Open::admit(&open) else {
            continue;
        };
        tokio::spawn(connection(
            stream,
            ClientAddress(peer),
            app.clone(),
            limits.clone(),
            entry,
            stopped.clone(),
        ));
    }
    drop(listener);
    let _ = stopping.send(true);
    let _ = tokio::time::timeout(limits.shutdown_grace + FLUSH_GRACE, open.all_closed()).await;
}

/// The address of the client of a request, put in its extensions: a hub id
/// is looked up on the hub only for a client on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub std::net::SocketAddr);

impl ClientAddress {
    /// Whether the client is on this machine (127.0.0.0/8 or ::1).
    pub fn is_loopback(&self) -> bool {
        match self.0.ip() {
            std::net::IpAddr::V4(ip) => ip.is_loopback(),
            std::net::IpAddr::V6(ip) => {
                ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|ip| ip.is_loopback())
            }
        }
    }
}

/// One connection, from its opening to its end.
async fn connection(
    stream: TcpStream,
    client: ClientAddress,
    app: Router,
    limits: Limits,
    entry: Entry,
    mut stopped: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let state = Arc::clone(&entry.state);
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(client);
        let answering = Answering::start(Arc::clone(&state));
        let answer = app.clone().oneshot(request);
        async move {
            let response = answer.await;
            drop(answering);
            response
        }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(MAX_BUFFER_BYTES)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        () = entry.state.shed.notified() => return,
        _ = stopped.wait_for(|stopped| *stopped) => {}
    }
    let grace = if entry.state.requests.load(Ordering::SeqCst) > 0 {
        limits.shutdown_grace
    } else {
        // Silent, idle, or part-way through a head: no answer is owed.
        FLUSH_GRACE
    };
    connection.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(grace, connection).await;
}

/// What the server knows of one open connection.
#[derive(Debug)]
struct State {
    /// Requests being answered (one at a time in HTTP/1.1).
    requests: AtomicUsize,
    /// When it last finished a request or was opened, in milliseconds from
    /// `epoch`.
    idle_since: AtomicU64,
    epoch: Instant,
    /// Notified when the server closes it to make room.
    shed: Notify,
}

impl State {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// A request in flight on a connection, from its head to its answer.
struct Answering(Arc<State>);

impl Answering {
    fn start(state: Arc<State>) -> Answering {
        state.requests.fetch_add(1, Ordering::SeqCst);
        Answering(state)
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.idle_since.store(self.0.now(), Ordering::SeqCst);
        self.0.requests.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The open connections, by the order they were opened.
#[derive(Debug)]
struct Open {
    cap: usize,
    epoch: Instant,
    next: AtomicU64,
    connections: Mutex<BTreeMap<u64, Arc<State>>>,
    /// Notified when the last connection closes.
    emptied: Notify,
}

/// A connection's place in [`Open`]; leaving it frees the place.
struct Entry {
    open: Arc<Open>,
    id: u64,
    state: Arc<State>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut connections = self.open.lock();
        connections.remove(&self.id);
        if connections.is_empty() {
            self.open.emptied.notify_waiters();
        }
    }
}

impl Open {
    fn new(cap: usize) -> Open {
        Open {
            cap: cap.max(1),
            epoch: Instant::now(),
            next: AtomicU64::new(0),
            connections: Mutex::new(BTreeMap::new()),
            emptied: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<State>>> {
        // The map stays consistent whatever panicked while holding it.
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a new connection: at the cap, the one idle the longest is
    /// closed to make room; `None` when every connection is busy.
    fn admit(open: &Arc<Open>) -> Option<Entry> {
        let state = Arc::new(State {
            requests: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            epoch: open.epoch,
            shed: Notify::new(),
        });
        state.idle_since.store(state.now(), Ordering::SeqCst);
        let mut connections = open.lock();
        if connections.len() >= open.cap {
            let (&oldest, _) = connections
                .iter()
                .filter(|(_, c)| c.requests.load(Ordering::SeqCst) == 0)
                .min_by_key(|(_, c)| c.idle_since.load(Ordering::SeqCst))?;
            if let Some(shed) = connections.remove(&oldest) {
                shed.shed.notify_one();
            }
        }
        let id = open.next.fetch_add(1, Ordering::SeqCst);
        connections.insert(id, Arc::clone(&state));
        drop(connections);
        Some(Entry {
            open: Arc::clone(open),
            id,
            state,
        })
    }

    /// Resolves once no connection is open.
    async fn all_closed(&self) {
        loop {
            let emptied = self.emptied.notified();
            tokio::pin!(emptied);
            emptied.as_mut().enable();
            if self.lock().is_empty() {
                return;
            }
            emptied.await;
        }
    }
}

/// The cap on open connections: `wanted`, or fewer if the open-file limit
/// would be reached first.
fn connection_cap(wanted: usize) -> usize {
    match open_file_limit() {
        Some(limit) => wanted.min(limit.saturating_sub(RESERVED_FILES)),
        None => wanted,
    }
}

/// The soft limit on open files of this process, if it has one.
#[cfg(unix)]
fn open_file_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    usize::try_from(limit.rlim_cur).ok()
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<usize> {
    None
}

/// Raises this process's soft limit on open files to its hard limit, so
/// that connections run out later (the soft limit is often 1024).
pub fn raise_open_file_limit() {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit into the struct it is given;
        // setrlimit reads one.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur < limit.rlim_max
            {
                let raised = libc::rlimit {
                    rlim_cur: limit.rlim_max,
                    rlim_max: limit.rlim_max,
                };
                // Refused (macOS caps an unlimited hard limit): keep the soft one.
                let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &raised);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(entry: &Entry) -> Answering {
        Answering::start(Arc::clone(&entry.state))
    }

    #[test]
    fn at_the_cap_the_longest_idle_connection_makes_room() {
        let open = Arc::new(Open::new(3));
        let first = Open::admit(&open).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let second = Open::admit(&open).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let third = Open::admit(&open).unwrap();
        // The first answers a request; the second was idle the longest.
        let answering = busy(&first);
        let fourth = Open::admit(&open).unwrap();
        let ids: Vec<u64> = open.lock().keys().copied().collect();
        assert_eq!(ids, [first.id, third.id, fourth.id]);
        drop(second);
        assert_eq!(open.lock().len(), 3);
        // The first finishes its request: it is now the most recently idle.
        std::thread::sleep(Duration::from_millis(5));
        drop(answering);
        let fifth = Open::admit(&open).unwrap();
        let ids: Vec<u64> = open.lock().keys().copied().collect();
        assert_eq!(ids, [first.id, fourth.id, fifth.id]);
        drop((third, fourth, fifth));
    }

    #[test]
    fn when_every_connection_is_busy_a_new_one_is_refused() {
        let open = Arc::new(Open::new(2));
        let entries = [Open::admit(&open).unwrap(), Open::admit(&open).unwrap()];
        let answering: Vec<Answering> = entries.iter().map(busy).collect();
        assert!(Open::admit(&open).is_none());
        drop(answering);
        assert!(Open::admit(&open).is_some());
    }

    #[test]
    fn the_cap_stays_below_the_file_limit() {
        raise_open_file_limit();
        let cap = connection_cap(usize::MAX);
        if let Some(limit) = open_file_limit() {
            assert_eq!(cap, limit - RESERVED_FILES);
        }
        assert_eq!(connection_cap(10), 10);
    }
}
