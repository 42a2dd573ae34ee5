//! The HTTP/1.1 transport every provider fake shares: a listener on 127.0.0.1 (a free port),
//! one thread per keep-alive connection, requests read with `Content-Length` or chunked bodies,
//! secret header values redacted, and an optional request log file. What to answer is each
//! fake's own business (`fake_api.rs`, `fake_openai.rs`, `fake_gemini.rs`, `fake_openai_chat.rs`).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

/// The reason phrase of a status line.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Error",
    }
}

/// A whole response with a `content-length`: `headers` are the provider's own lines (each
/// ended by `\r\n`, the content type first), then `extra`.
pub(crate) fn response(
    status: u16,
    headers: &str,
    extra: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\n{headers}content-length: {}\r\nconnection: keep-alive\r\n",
        reason(status),
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

/// A request type a fake can tell model turns by.
pub(crate) trait Turn {
    /// A model call (what a scripted reply answers).
    fn is_turn(&self) -> bool;
}

/// What every scripted fake keeps: the replies not used yet, every request in order (also
/// appended to the log file), and the ids its answers are numbered with.
pub(crate) struct Scripted<R, Q> {
    script: Mutex<VecDeque<R>>,
    log: Mutex<Vec<Q>>,
    log_file: Option<PathBuf>,
    ids: AtomicU64,
}

impl<R, Q: Clone> Scripted<R, Q> {
    /// The next scripted reply, if any is left.
    pub(crate) fn next_reply(&self) -> Option<R> {
        self.script.lock().ok().and_then(|mut q| q.pop_front())
    }

    /// A new id for an answer (1, 2, …).
    pub(crate) fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::SeqCst)
    }
}

/// A scripted fake provider on 127.0.0.1: the server and what it keeps. The provider's fake
/// wraps it and says how to read a request and how to answer it.
pub(crate) struct Fake<R, Q> {
    server: Server,
    shared: Arc<Scripted<R, Q>>,
}

impl<R: Send + 'static, Q: Clone + Send + 'static> Fake<R, Q> {
    /// Starts on a free port with `script`; every request is logged (to `log_file` too), read
    /// into a `Q` by `read`, and answered by `respond`. `what` names the fake in errors.
    pub(crate) fn start<F, A>(
        what: &str,
        script: Vec<R>,
        log_file: Option<&Path>,
        read: F,
        respond: A,
    ) -> Self
    where
        F: Fn(Incoming) -> Q + Send + Sync + 'static,
        A: Fn(&Scripted<R, Q>, &Q, &mut TcpStream) -> std::io::Result<()> + Send + Sync + 'static,
    {
        let shared = Arc::new(Scripted {
            script: Mutex::new(script.into()),
            log: Mutex::new(Vec::new()),
            log_file: log_file.map(Path::to_path_buf),
            ids: AtomicU64::new(1),
        });
        let s = Arc::clone(&shared);
        let server = Server::start(what, move |inc, out| {
            append_log(s.log_file.as_deref(), &inc);
            let req = read(inc);
            if let Ok(mut l) = s.log.lock() {
                l.push(req.clone());
            }
            respond(&s, &req, out)
        });
        Self { server, shared }
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Every request so far.
    pub(crate) fn requests(&self) -> Vec<Q> {
        self.shared
            .log
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }
}

impl<R: Send + 'static, Q: Turn + Clone + Send + 'static> Fake<R, Q> {
    /// The model calls so far.
    pub(crate) fn turns(&self) -> Vec<Q> {
        self.requests().into_iter().filter(Q::is_turn).collect()
    }
}
