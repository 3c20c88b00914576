//! The hub's answers over HTTPS, each bounded: a connect and a per-read
//! timeout, a total time per request, a byte cap on every body, a bounded
//! number of redirects (the hub answers a file in large-file storage with a
//! 302 to its CDN), and the token sent to the hub's own host only.
//!
//! The client is ureq 3 with rustls (no OpenSSL, no async runtime); bodies
//! are never decompressed, so the caps count the bytes sent.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ureq::Agent;
use ureq::config::RedirectAuthHeaders;

use super::settings::HubSettings;

/// Redirects followed per request: the hub's 302 to its CDN, a renamed
/// repository's redirect to its new name, and room for one more.
const MAX_REDIRECTS: u32 = 5;

/// A request's whole time, in units of the timeout: a slow trickle of
/// bytes, each within the per-read timeout, still ends.
const TOTAL_TIMEOUTS_PER_REQUEST: u32 = 6;

/// When a fetch has taken this long, progress is written to stderr.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Why a request did not give the expected bytes.
#[derive(Debug)]
pub enum Failure {
    /// The server answered with this status (after redirects), and the
    /// hub's `X-Error-Code` header when it sent one (`GatedRepo`,
    /// `RepoNotFound`, `RevisionNotFound`, `EntryNotFound`).
    Status(u16, Option<String>),
    /// No connection: the host is unknown or refuses, or TLS failed.
    Unreachable(String),
    /// No answer, or no next bytes, within the timeout.
    Timeout,
    /// The answer broke a bound or the protocol: said in the phrase.
    Refused(String),
}

/// An answer's body and the headers trainmem reads.
pub struct Answer {
    /// The body, at most the cap asked for.
    pub body: Vec<u8>,
    /// `X-Linked-Etag`, else `ETag`, normalized as huggingface_hub does.
    pub etag: Option<String>,
    /// The total length from `Content-Range: bytes a-b/TOTAL`.
    pub total_length: Option<u64>,
}

/// A client for one lookup.
pub struct Client {
    agent: Agent,
    token: Option<String>,
    started: Instant,
}

impl Client {
    /// A client with the settings' timeout.
    pub fn new(settings: &HubSettings) -> Client {
        let timeout = settings.timeout;
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(MAX_REDIRECTS)
            .redirect_auth_headers(RedirectAuthHeaders::SameHost)
            .timeout_connect(Some(timeout))
            .timeout_resolve(Some(timeout))
            .timeout_recv_response(Some(timeout))
            .timeout_per_read(Some(timeout))
            .timeout_global(Some(timeout.saturating_mul(TOTAL_TIMEOUTS_PER_REQUEST)))
            .user_agent(concat!("trainmem/", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            agent: config.into(),
            token: settings.token.clone(),
            started: Instant::now(),
        }
    }

    /// `GET url`: the body of a 200 answer, at most `cap` bytes.
    pub fn get(&mut self, url: &str, what: &str, cap: u64) -> Result<Answer, Failure> {
        self.request(url, what, None, cap)
    }

    /// `GET url` with `Range: bytes=start-(start+length-1)`: exactly
    /// `length` bytes of a 206 answer. A server that ignores the range (a
    /// 200 with the whole file) is refused after `length` bytes, unread.
    pub fn get_range(
        &mut self,
        url: &str,
        what: &str,
        start: u64,
        length: u64,
    ) -> Result<Answer, Failure> {
        let last = start
            .checked_add(length)
            .and_then(|end| end.checked_sub(1))
            .ok_or_else(|| Failure::Refused("an empty or overflowing byte range".to_string()))?;
        let answer = self.request(url, what, Some((start, last)), length)?;
        if answer.body.len() as u64 != length {
            return Err(Failure::Refused(format!(
                "the server sent {} bytes for a range of {length}",
                answer.body.len()
            )));
        }
        Ok(answer)
    }

    fn request(
        &mut self,
        url: &str,
        what: &str,
        range: Option<(u64, u64)>,
        cap: u64,
    ) -> Result<Answer, Failure> {
        // Progress once the lookup has taken a second: now, or from a
        // watchdog if this request is the one that takes it there.
        let progress = format!("fetching {what} from the hub (metadata only) ...");
        let elapsed = self.started.elapsed();
        let done = Arc::new(AtomicBool::new(false));
        if elapsed >= PROGRESS_AFTER {
            eprintln!("{progress}");
        } else {
            let done = Arc::clone(&done);
            let wait = PROGRESS_AFTER - elapsed;
            std::thread::spawn(move || {
                std::thread::sleep(wait);
                if !done.load(Ordering::Relaxed) {
                    eprintln!("{progress}");
                }
            });
        }
        let answered = self.answer(url, what, range, cap);
        done.store(true, Ordering::Relaxed);
        answered
    }

    fn answer(
        &mut self,
        url: &str,
        what: &str,
        range: Option<(u64, u64)>,
        cap: u64,
    ) -> Result<Answer, Failure> {
        let mut request = self.agent.get(url);
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        if let Some((first, last)) = range {
            request = request.header("Range", format!("bytes={first}-{last}"));
        }
        let response = request.call().map_err(failure)?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string)
        };
        let expected = if range.is_some() { 206 } else { 200 };
        if status != expected {
            if range.is_some() && status == 200 {
                return Err(Failure::Refused(
                    "the server ignored the byte range and began sending the whole file; trainmem reads only the header, so it stopped"
                        .to_string(),
                ));
            }
            return Err(Failure::Status(status, header("x-error-code")));
        }
        let etag = header("x-linked-etag")
            .or_else(|| header("etag"))
            .map(|etag| normalized_etag(&etag));
        let total_length = header("content-range").and_then(|text| range_total(&text));
        if let (Some((first, _)), Some(content_range)) = (range, header("content-range"))
            && !content_range.trim().starts_with(&format!("bytes {first}-"))
        {
            return Err(Failure::Refused(
                "the server answered another byte range than the one asked for".to_string(),
            ));
        }
        let mut body = Vec::new();
        response
            .into_body()
            .into_reader()
            .take(cap.saturating_add(1))
            .read_to_end(&mut body)
            .map_err(|error| read_failure(&error))?;
        if body.len() as u64 > cap {
            return Err(Failure::Refused(format!(
                "the answer is longer than the {cap}-byte limit for {what}"
            )));
        }
        Ok(Answer {
            body,
            etag,
            total_length,
        })
    }
}

/// `W/"abc"` is `abc`: huggingface_hub's `_normalize_etag`.
fn normalized_etag(etag: &str) -> String {
    let etag = etag.trim();
    etag.strip_prefix("W/")
        .unwrap_or(etag)
        .trim_matches('"')
        .to_string()
}

/// `TOTAL` of `bytes FIRST-LAST/TOTAL`.
fn range_total(content_range: &str) -> Option<u64> {
    content_range.rsplit_once('/')?.1.trim().parse().ok()
}

fn failure(error: ureq::Error) -> Failure {
    match error {
        ureq::Error::Timeout(_) => Failure::Timeout,
        // Before any answer: resolving the host, connecting, sending.
        ureq::Error::Io(io) => match read_failure(&io) {
            Failure::Timeout => Failure::Timeout,
            _ => Failure::Unreachable(crate::checkpoint::io_problem(&io)),
        },
        ureq::Error::HostNotFound => Failure::Unreachable("the host is not found".to_string()),
        ureq::Error::ConnectionFailed => Failure::Unreachable("the connection failed".to_string()),
        ureq::Error::TooManyRedirects => Failure::Refused(format!(
            "more than {MAX_REDIRECTS} redirects; the hub sends one, to its CDN"
        )),
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => {
            Failure::Unreachable(format!("the TLS connection failed ({error})"))
        }
        other => Failure::Refused(format!("the answer could not be read ({other})")),
    }
}

fn read_failure(error: &std::io::Error) -> Failure {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => Failure::Timeout,
        ErrorKind::ConnectionRefused | ErrorKind::NotConnected | ErrorKind::AddrNotAvailable => {
            Failure::Unreachable(format!("the connection failed ({error})"))
        }
        // ureq wraps its own errors (a timeout while reading) in io::Error.
        _ => match error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<ureq::Error>())
        {
            Some(ureq::Error::Timeout(_)) => Failure::Timeout,
            _ => Failure::Refused(format!("the answer broke off ({error})")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_and_ranges_are_read_as_the_hub_writes_them() {
        assert_eq!(normalized_etag("W/\"abc\""), "abc");
        assert_eq!(normalized_etag("\"abc\""), "abc");
        assert_eq!(range_total("bytes 0-7/1234"), Some(1234));
        assert_eq!(range_total("bytes 0-7/*"), None);
    }
}
