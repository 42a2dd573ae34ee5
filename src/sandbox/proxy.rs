//! hank's egress proxy for a sandboxed agent: a listener on 127.0.0.1 (its own threads, std
//! only) that takes `CONNECT host:port` and plain `http://` requests and lets through only the
//! allowed `host:port` entries. Every refusal is kept with the host and the time.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// The longest request head read (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// A client that sends no complete head within this long is dropped.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Refusals kept per proxy (the first ones; later ones are counted only).
const MAX_DENIED: usize = 200;

/// One refused connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// `host:port` the agent asked for.
    pub host: String,
    /// When, as an RFC 3339 UTC time.
    pub at: String,
}

#[derive(Default)]
struct Shared {
    allowed: Mutex<Vec<String>>,
    denied: Mutex<Vec<Denied>>,
    stop: AtomicBool,
}

/// The running proxy; dropped, it stops accepting.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (a free port) and serves until dropped.
    ///
    /// # Errors
    /// The listener cannot be opened.
    pub fn start(allowed: Vec<String>) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            allowed: Mutex::new(allowed),
            ..Shared::default()
        });
        let serving = Arc::clone(&shared);
        thread::Builder::new()
            .name("hank-egress".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if serving.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let shared = Arc::clone(&serving);
                    let _ = thread::Builder::new()
                        .name("hank-egress-conn".into())
                        .spawn(move || serve(conn, &shared));
                }
            })?;
        Ok(Self { port, shared })
    }

    /// The port on 127.0.0.1.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Replaces the allowed `host:port` entries (the next call's agent).
    pub fn set_allowed(&self, allowed: Vec<String>) {
        if let Ok(mut a) = self.shared.allowed.lock() {
            *a = allowed;
        }
    }

    /// The refusals since the last take.
    #[must_use]
    pub fn take_denied(&self) -> Vec<Denied> {
        self.shared
            .denied
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default()
    }

    /// `http://127.0.0.1:PORT`, for the agent's proxy variables.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so that it sees the stop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// The request head: up to the blank line, and what came after it.
fn read_head(conn: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Some((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Where a request goes: `CONNECT h:p` (a tunnel) or `METHOD http://h[:p]/path` (forwarded
/// with the path alone). `None` for anything else (pure).
fn target(request_line: &str) -> Option<(bool, String, String)> {
    let mut parts = request_line.split_whitespace();
    let (method, uri, version) = (parts.next()?, parts.next()?, parts.next()?);
    if method.eq_ignore_ascii_case("CONNECT") {
        let host = super::host_port(uri)?;
        return Some((true, host, String::new()));
    }
    let rest = uri.strip_prefix("http://")?;
    let host = super::host_port(uri)?;
    let path = rest.find('/').map_or("/", |i| &rest[i..]);
    Some((false, host, format!("{method} {path} {version}")))
}

fn serve(mut conn: TcpStream, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(HEAD_TIMEOUT));
    let Some((head, rest)) = read_head(&mut conn) else {
        return;
    };
    let first = head.lines().next().unwrap_or("");
    let Some((tunnel, host, line)) = target(first) else {
        let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let allowed = shared.allowed.lock().is_ok_and(|a| a.contains(&host));
    if !allowed {
        if let Ok(mut d) = shared.denied.lock()
            && d.len() < MAX_DENIED
        {
            d.push(Denied {
                host: host.clone(),
                at: jiff::Timestamp::now()
                    .round(jiff::Unit::Second)
                    .map_or_else(|_| jiff::Timestamp::now().to_string(), |t| t.to_string()),
            });
        }
        let body =
            format!("hank's sandbox refuses {host} (not an allowed host: SANDBOX_ALLOW_HOSTS)\n");
        let _ = conn.write_all(
            format!(
                "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        return;
    }
    let (name, port) = host.rsplit_once(':').unwrap_or((host.as_str(), "443"));
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let Ok(mut upstream) = port
        .parse::<u16>()
        .map_err(io::Error::other)
        .and_then(|p| TcpStream::connect((name, p)))
    else {
        let _ = conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let _ = conn.set_read_timeout(None);
    let sent = if tunnel {
        conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
    } else {
        // The request again in origin form, hop-by-hop proxy headers left out.
        let mut out = format!("{line}\r\n");
        for h in head.lines().skip(1).filter(|l| !l.is_empty()) {
            let lower = h.to_ascii_lowercase();
            if !lower.starts_with("proxy-") {
                out.push_str(h);
                out.push_str("\r\n");
            }
        }
        out.push_str("\r\n");
        upstream.write_all(out.as_bytes())
    };
    if sent.is_err() || upstream.write_all(&rest).is_err() {
        return;
    }
    relay(conn, upstream);
}

/// Copies both ways until either side ends.
fn relay(conn: TcpStream, upstream: TcpStream) {
    let (Ok(mut c_read), Ok(mut u_write)) = (conn.try_clone(), upstream.try_clone()) else {
        return;
    };
    let up = thread::Builder::new()
        .name("hank-egress-up".into())
        .spawn(move || {
            let _ = io::copy(&mut c_read, &mut u_write);
            let _ = u_write.shutdown(Shutdown::Write);
        });
    let (mut u_read, mut c_write) = (upstream, conn);
    let _ = io::copy(&mut u_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Both);
    if let Ok(up) = up {
        let _ = up.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_of_request_lines() {
        let cases = [
            (
                "CONNECT api.anthropic.com:443 HTTP/1.1",
                Some((true, "api.anthropic.com:443", "")),
            ),
            (
                "GET http://127.0.0.1:8080/v1/x?y=1 HTTP/1.1",
                Some((false, "127.0.0.1:8080", "GET /v1/x?y=1 HTTP/1.1")),
            ),
            (
                "POST http://Example.com HTTP/1.1",
                Some((false, "example.com:80", "POST / HTTP/1.1")),
            ),
            ("GET /relative HTTP/1.1", None),
            ("garbage", None),
        ];
        for (line, want) in cases {
            let got = target(line);
            let want = want.map(|(t, h, l)| (t, h.to_string(), l.to_string()));
            assert_eq!(got, want, "{line}");
        }
    }

    fn ask(port: u16, request: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn forwards_allowed_hosts_and_records_refused_ones() {
        let upstream = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let up_port = upstream.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut c, _) = upstream.accept().unwrap();
            let mut buf = [0u8; 1024];
            let n = c.read(&mut buf).unwrap();
            let got = String::from_utf8_lossy(&buf[..n]).into_owned();
            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .unwrap();
            got
        });
        let proxy = Proxy::start(vec![format!("127.0.0.1:{up_port}")]).unwrap();
        let answer = ask(
            proxy.port(),
            &format!(
                "GET http://127.0.0.1:{up_port}/v1/m HTTP/1.1\r\nHost: x\r\nProxy-Authorization: a\r\n\r\n"
            ),
        );
        assert!(answer.ends_with("ok"), "{answer}");
        let seen = server.join().unwrap();
        assert!(seen.starts_with("GET /v1/m HTTP/1.1\r\n"), "{seen}");
        assert!(!seen.contains("Proxy-Authorization"), "{seen}");
        assert!(proxy.take_denied().is_empty());

        let refused = ask(proxy.port(), "CONNECT evil.example:443 HTTP/1.1\r\n\r\n");
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        let denied = proxy.take_denied();
        assert_eq!(denied.len(), 1);
        assert_eq!(denied[0].host, "evil.example:443");
        assert!(denied[0].at.ends_with('Z'), "{}", denied[0].at);
    }
}
