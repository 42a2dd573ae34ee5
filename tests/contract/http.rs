//! The HTTP/1.1 transport every provider fake shares: a listener on 127.0.0.1 (a free port),
//! one thread per keep-alive connection, requests read with `Content-Length` or chunked bodies,
//! secret header values redacted, and an optional request log file. What to answer is each
//! fake's own business (`fake_api.rs`, `fake_openai.rs`, `fake_gemini.rs`, `fake_openai_chat.rs`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

/// One request as read from the wire.
#[derive(Debug, Clone)]
pub(crate) struct Incoming {
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Lower-case names; secret values redacted ([`redact`]).
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Value::Null` when absent or not JSON).
    pub body: Value,
}

/// A running server; stops accepting when dropped.
pub(crate) struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Starts listening; `handle` answers each request on the connection it came on (an error
    /// closes the connection). `what` names the fake in a bind failure.
    pub(crate) fn start<H>(what: &str, handle: H) -> Self
    where
        H: Fn(Incoming, &mut TcpStream) -> std::io::Result<()> + Send + Sync + 'static,
    {
        let listener =
            TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind {what}: {e}"));
        let addr = listener.local_addr().expect("local addr");
        let stop = Arc::new(AtomicBool::new(false));
        let handle = Arc::new(handle);
        let stopped = Arc::clone(&stop);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let handle = Arc::clone(&handle);
                std::thread::spawn(move || serve(conn, &*handle));
            }
        });
        Self { addr, stop }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Header values never logged: keys and tokens of every provider.
fn redact(name: &str, value: &str) -> String {
    if matches!(
        name,
        "authorization"
            | "x-api-key"
            | "api-key"
            | "x-goog-api-key"
            | "cookie"
            | "openai-organization"
            | "openai-project"
    ) {
        format!("<redacted {} bytes>", value.len())
    } else {
        value.to_string()
    }
}

/// Serves one keep-alive connection until the client closes it.
fn serve(conn: TcpStream, handle: &dyn Fn(Incoming, &mut TcpStream) -> std::io::Result<()>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(120)));
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
            return;
        };
        let (method, path) = (method.to_string(), path.to_string());
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            match r.read_line(&mut h) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let body = if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            read_chunked(&mut r)
        } else {
            let n: usize = get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let mut b = vec![0u8; n];
            if r.read_exact(&mut b).is_err() {
                return;
            }
            b
        };
        let req = Incoming {
            method,
            path,
            headers: headers
                .iter()
                .map(|(k, v)| (k.clone(), redact(k, v)))
                .collect(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        if handle(req, &mut out).and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

fn read_chunked(r: &mut impl BufRead) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        if r.read_line(&mut size).unwrap_or(0) == 0 {
            return body;
        }
        let n =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        let mut chunk = vec![0u8; n + 2];
        if r.read_exact(&mut chunk).is_err() {
            return body;
        }
        if n == 0 {
            return body;
        }
        body.extend_from_slice(&chunk[..n]);
    }
}

/// Appends a request to the debug log file, if there is one.
pub(crate) fn append_log(file: Option<&Path>, req: &Incoming) {
    let Some(path) = file else { return };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let headers: Vec<String> = req
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(
            f,
            "==> {} {}\n{}\n{}\n",
            req.method,
            req.path,
            headers.join("\n"),
            req.body
        );
    }
}
