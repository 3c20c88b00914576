//! Which `Host` and `Origin` the server answers: its loopback names and the
//! `--host` it was started with, nothing else.
//!
//! A page on any web site can make the browser send requests to
//! `127.0.0.1:8080` only cross-origin, which the browser does not let it read;
//! but with DNS rebinding the site's own name comes to point to 127.0.0.1,
//! and the page reads our answers as its own. Such a request still carries
//! the site's name in `Host` (and in `Origin`): refusing names that are not
//! ours closes that door.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, Version, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::failure::Failure;

/// The names a request may give for this server.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// The `--host` value, lowercased, without IPv6 brackets.
    listening: String,
}

impl Hosts {
    /// The loopback names and `listening`, the host the server listens on.
    pub fn new(listening: &str) -> Hosts {
        let listening = listening.trim().to_ascii_lowercase();
        let listening = listening
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&listening)
            .to_string();
        Hosts { listening }
    }

    /// Whether `name` (no port, no brackets, lowercased) is this server.
    fn accepts(&self, name: &str) -> bool {
        name == "localhost"
            || name.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
            || name.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback())
            || name == self.listening
    }

    /// What is accepted, for the messages.
    fn accepted(&self) -> String {
        format!(
            "localhost, 127.x.x.x, [::1] and the --host `{}`",
            self.listening
        )
    }

    /// Refuses a request whose `Host`, absolute URI or any `Origin` names
    /// another server, and one with two `Host` headers (a proxy and the
    /// server could each read a different one); an HTTP/1.1 request must
    /// name one.
    pub fn check(&self, version: Version, uri: &Uri, headers: &HeaderMap) -> Result<(), Failure> {
        let mut hosts = headers.get_all(header::HOST).iter();
        let host = hosts.next();
        if hosts.next().is_some() {
            return Err(Failure::bad(
                "error: the request has more than one `host` header; send one",
            ));
        }
        if host.is_none() && version == Version::HTTP_11 {
            return Err(Failure::bad(
                "error: the request has no `host` header, which HTTP/1.1 requires; send one such as `host: 127.0.0.1:8080`",
            ));
        }
        let named = host
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            .into_iter()
            .chain(uri.authority().map(ToString::to_string));
        for authority in named {
            if !host_of(&authority).is_some_and(|name| self.accepts(&name)) {
                return Err(Failure::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "error: refused host `{authority}`: this server answers only to {}",
                        self.accepted()
                    ),
                ));
            }
        }
        // Every `Origin`, not the first only: a request naming a foreign page
        // in any of them is refused, whatever the others say.
        for origin in headers.get_all(header::ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            if !origin_host(&origin).is_some_and(|name| self.accepts(&name)) {
                return Err(Failure::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "error: refused origin `{origin}`: this server answers only pages from {}",
                        self.accepted()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The host name of `host`, `host:port`, `[v6]` or `[v6]:port`, lowercased
/// and without brackets; `None` if it is not one of those.
fn host_of(authority: &str) -> Option<String> {
    let (name, port) = match authority.strip_prefix('[') {
        Some(rest) => {
            let (name, after) = rest.split_once(']')?;
            name.parse::<Ipv6Addr>().ok()?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':')?),
            };
            (name, port)
        }
        None => match authority.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        },
    };
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
    let valid_port =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    (valid_name && valid_port).then(|| name.to_ascii_lowercase())
}

/// The host name of an `Origin` (`http://localhost:8080`); `None` for
/// `null` and anything else that is not `http(s)://authority`.
fn origin_host(origin: &str) -> Option<String> {
    let lowered = origin.to_ascii_lowercase();
    let authority = lowered
        .strip_prefix("http://")
        .or_else(|| lowered.strip_prefix("https://"))?;
    host_of(authority)
}

/// The middleware: a request for another server gets 403 before any route.
pub async fn guard(State(hosts): State<Arc<Hosts>>, request: Request, next: Next) -> Response {
    match hosts.check(request.version(), request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(failure) => failure.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn check(hosts: &Hosts, host: Option<&str>, origin: Option<&str>) -> Result<(), StatusCode> {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        hosts
            .check(Version::HTTP_11, &Uri::from_static("/"), &headers)
            .map_err(|failure| failure.status)
    }

    #[test]
    fn loopback_names_are_accepted_with_or_without_a_port() {
        let hosts = Hosts::new("127.0.0.1");
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8080",
        ] {
            assert_eq!(check(&hosts, Some(host), None), Ok(()), "{host}");
        }
        for origin in [
            "http://localhost:8080",
            "http://127.0.0.1",
            "https://[::1]:1",
        ] {
            assert_eq!(
                check(&hosts, Some("localhost"), Some(origin)),
                Ok(()),
                "{origin}"
            );
        }
    }

    #[test]
    fn the_listening_host_is_accepted() {
        let hosts = Hosts::new("Workstation.lan");
        assert_eq!(check(&hosts, Some("workstation.lan:8080"), None), Ok(()));
        let origin = Some("http://workstation.lan:8080");
        assert_eq!(check(&hosts, Some("workstation.lan"), origin), Ok(()));
        let hosts = Hosts::new("[fd00::1]");
        assert_eq!(check(&hosts, Some("[fd00::1]:80"), None), Ok(()));
        let hosts = Hosts::new("fd00::1");
        assert_eq!(check(&hosts, Some("[fd00::1]"), None), Ok(()));
    }

    #[test]
    fn other_names_are_forbidden() {
        let hosts = Hosts::new("127.0.0.1");
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "128.0.0.1",
            "0.0.0.0",
            "[::2]",
            "::1",
            "localhost:",
            "localhost:80:80",
            "localhost:http",
            "user@localhost",
            "localhost/x",
            "",
        ] {
            assert_eq!(
                check(&hosts, Some(host), None),
                Err(StatusCode::FORBIDDEN),
                "{host}"
            );
        }
        for origin in [
            "http://evil.example",
            "https://evil.example:8080",
            "null",
            "file://",
            "http://localhost.evil.example",
            "ftp://localhost",
        ] {
            assert_eq!(
                check(&hosts, Some("localhost"), Some(origin)),
                Err(StatusCode::FORBIDDEN),
                "{origin}"
            );
        }
    }

    #[test]
    fn every_origin_is_checked_and_two_hosts_are_refused() {
        let hosts = Hosts::new("127.0.0.1");
        let uri = Uri::from_static("/");
        for origins in [
            ["http://localhost:8080", "http://evil.example"],
            ["http://evil.example", "http://localhost:8080"],
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_static("localhost"));
            for origin in origins {
                headers.append(header::ORIGIN, HeaderValue::from_static(origin));
            }
            let refused = hosts.check(Version::HTTP_11, &uri, &headers).unwrap_err();
            assert_eq!(refused.status, StatusCode::FORBIDDEN, "{origins:?}");
            assert!(
                refused.message.contains("`http://evil.example`"),
                "{refused:?}"
            );
        }
        let mut headers = HeaderMap::new();
        headers.append(header::HOST, HeaderValue::from_static("localhost"));
        headers.append(header::HOST, HeaderValue::from_static("localhost"));
        let refused = hosts.check(Version::HTTP_11, &uri, &headers).unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn http_1_1_must_name_a_host() {
        let hosts = Hosts::new("127.0.0.1");
        assert_eq!(check(&hosts, None, None), Err(StatusCode::BAD_REQUEST));
        let headers = HeaderMap::new();
        let uri = Uri::from_static("/");
        assert!(hosts.check(Version::HTTP_10, &uri, &headers).is_ok());
        let absolute = Uri::from_static("http://evil.example/");
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("localhost"));
        let refused = hosts
            .check(Version::HTTP_11, &absolute, &headers)
            .unwrap_err();
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert!(refused.message.contains("`evil.example`"), "{refused:?}");
    }
}
