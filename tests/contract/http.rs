//! The HTTP/1.1 transport every provider fake shares: a listener on 127.0.0.1 (a free port),
//! one thread per keep-alive connection, requests read with `Content-Length` or chunked bodies,
//! secret header values redacted, and an optional request log file. What to answer is each
//! fake's own business (`fake_api.rs`, `fake_openai.rs`, `fake_gemini.rs`, `fake_openai_chat.rs`).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::marker::PhantomData;
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

/// One provider's API, as a fake plays it: how its requests are told apart, read and
/// answered. Each `fake_*.rs` implements it on a marker type.
pub(crate) trait Provider: Sized + Send + Sync + 'static {
    /// A scripted answer to a conversation turn.
    type Reply: Send + 'static;
    /// What the base URL clients are given ends with (`/v1`, or nothing).
    const BASE_PATH: &'static str;
    /// A model call (what a scripted reply answers).
    fn is_turn(req: &Request<Self>) -> bool;
    /// The text the newest message adds when it is the user's (what this turn added to the
    /// conversation); empty when it holds only tool results.
    fn last_user_text(req: &Request<Self>) -> String;
    /// What a turn is answered when the script is used up.
    fn unscripted() -> Self::Reply;
    /// Answers `req` on the connection it came on.
    fn respond(
        fake: &Scripted<Self>,
        req: &Request<Self>,
        out: &mut TcpStream,
    ) -> std::io::Result<()>;
}

/// A request as a fake of provider `P` received it.
pub(crate) struct Request<P> {
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Lower-case names; secret values redacted ([`redact`]).
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Value::Null` when absent or not JSON).
    pub body: Value,
    provider: PhantomData<fn() -> P>,
}

impl<P> Clone for Request<P> {
    fn clone(&self) -> Self {
        Self {
            method: self.method.clone(),
            path: self.path.clone(),
            headers: self.headers.clone(),
            body: self.body.clone(),
            provider: PhantomData,
        }
    }
}

impl<P> std::fmt::Debug for Request<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.method, self.path, self.body)
    }
}

impl<P: Provider> Request<P> {
    fn from_wire(i: Incoming) -> Self {
        Self {
            method: i.method,
            path: i.path,
            headers: i.headers,
            body: i.body,
            provider: PhantomData,
        }
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The model the body names, else `default`.
    pub(crate) fn body_model(&self, default: &str) -> String {
        self.body["model"].as_str().unwrap_or(default).to_string()
    }

    /// The whole body as text (for `contains` checks).
    pub(crate) fn text(&self) -> String {
        self.body.to_string()
    }

    /// A model call (what a scripted reply answers).
    pub(crate) fn is_turn(&self) -> bool {
        P::is_turn(self)
    }

    /// See [`Provider::last_user_text`].
    pub(crate) fn last_user_text(&self) -> String {
        P::last_user_text(self)
    }

    /// The `<hank-loop-context>` block this turn's newest user message starts a loop with,
    /// if it does (the first request of each hank loop).
    pub(crate) fn loop_context(&self) -> Option<String> {
        let text = self.last_user_text();
        let start = text.find("<hank-loop-context>")? + "<hank-loop-context>".len();
        let end = text[start..].find("</hank-loop-context>")? + start;
        Some(text[start..end].trim().to_string())
    }
}

/// The text of a message's content: a string as it is, or the `text` of every part joined
/// with newlines.
pub(crate) fn parts_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Splits on a char boundary near the middle (so the client must join deltas).
pub(crate) fn split_in_two(s: &str) -> Vec<String> {
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid -= 1;
    }
    vec![s[..mid].to_string(), s[mid..].to_string()]
}

/// An answer ending with a HANK_STATUS block: `opening`, then the block with `tests` as its
/// TESTS_STATUS.
pub(crate) fn status_block(
    opening: &str,
    tests: &str,
    status: &str,
    exit_signal: bool,
    recommendation: &str,
) -> String {
    format!(
        "{opening}\n\n---HANK_STATUS---\nSTATUS: {status}\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 1\nTESTS_STATUS: {tests}\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: {exit_signal}\nRECOMMENDATION: {recommendation}\n---END_HANK_STATUS---"
    )
}

/// A scripted HTTP error: the status, the JSON body and extra response headers.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: u16,
    pub body: Value,
    pub headers: Vec<(String, String)>,
}

impl ApiError {
    pub(crate) fn new(status: u16, body: Value) -> Self {
        Self {
            status,
            body,
            headers: Vec::new(),
        }
    }

    /// The response header `name: value` (replacing one of that name).
    pub(crate) fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// The whole response: `headers` are the provider's own lines (see [`response`]).
    pub(crate) fn response(&self, headers: &str) -> Vec<u8> {
        response(
            self.status,
            headers,
            &self.headers,
            self.body.to_string().as_bytes(),
        )
    }
}

/// An answer ending with a HANK_STATUS block, tests passing (what the fakes of the other
/// agents' providers answer).
pub(crate) fn status_text(status: &str, exit_signal: bool, recommendation: &str) -> String {
    status_block(
        "Done with this step.",
        "PASSING",
        status,
        exit_signal,
        recommendation,
    )
}

/// Writes `bytes` and flushes.
pub(crate) fn send(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(bytes)?;
    out.flush()
}

/// Writes one chunk of a chunked body.
pub(crate) fn send_chunk(out: &mut impl Write, data: &[u8]) -> std::io::Result<()> {
    let mut bytes = format!("{:x}\r\n", data.len()).into_bytes();
    bytes.extend_from_slice(data);
    bytes.extend_from_slice(b"\r\n");
    send(out, &bytes)
}

/// What every scripted fake keeps: the replies not used yet, every request in order (also
/// appended to the log file), and the ids its answers are numbered with.
pub(crate) struct Scripted<P: Provider> {
    script: Mutex<VecDeque<P::Reply>>,
    log: Mutex<Vec<Request<P>>>,
    log_file: Option<PathBuf>,
    ids: AtomicU64,
}

impl<P: Provider> Scripted<P> {
    /// The next scripted reply; [`Provider::unscripted`] once the script is used up.
    pub(crate) fn next_reply(&self) -> P::Reply {
        self.script
            .lock()
            .ok()
            .and_then(|mut q| q.pop_front())
            .unwrap_or_else(P::unscripted)
    }

    /// A new id for an answer (1, 2, …).
    pub(crate) fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::SeqCst)
    }
}

/// A scripted fake of provider `P` on 127.0.0.1: the server and what it keeps.
pub(crate) struct Fake<P: Provider> {
    server: Server,
    shared: Arc<Scripted<P>>,
}

impl<P: Provider> Fake<P> {
    /// Starts on a free port with `script`; every request is logged (to `log_file` too) and
    /// answered by [`Provider::respond`].
    pub(crate) fn start(script: Vec<P::Reply>, log_file: Option<&Path>) -> Self {
        let shared = Arc::new(Scripted {
            script: Mutex::new(script.into()),
            log: Mutex::new(Vec::new()),
            log_file: log_file.map(Path::to_path_buf),
            ids: AtomicU64::new(1),
        });
        let s = Arc::clone(&shared);
        let server = Server::start(std::any::type_name::<P>(), move |inc, out| {
            append_log(s.log_file.as_deref(), &inc);
            let req = Request::from_wire(inc);
            if let Ok(mut l) = s.log.lock() {
                l.push(req.clone());
            }
            P::respond(&s, &req, out)
        });
        Self { server, shared }
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The base URL clients are given (`http://127.0.0.1:PORT`, then [`Provider::BASE_PATH`]).
    pub(crate) fn url(&self) -> String {
        format!("http://{}{}", self.addr(), P::BASE_PATH)
    }

    /// Every request so far.
    pub(crate) fn requests(&self) -> Vec<Request<P>> {
        self.shared
            .log
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }

    /// The model calls so far.
    pub(crate) fn turns(&self) -> Vec<Request<P>> {
        self.requests().into_iter().filter(P::is_turn).collect()
    }
}
