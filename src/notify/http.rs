//! The notification sender's and the control-topic poller's requests: blocking, with a
//! whole-request timeout, through hank's one HTTP client ([`crate::http`]); nothing here
//! listens on a socket.

use std::time::Duration;

/// Largest response body read (bytes): an ntfy poll of a busy topic stays far below it.
pub const MAX_BODY: u64 = 4 * 1024 * 1024;

/// The client for one request to `url` ([`crate::http::agent`]: a loopback URL never goes
/// through `HTTP_PROXY`/`HTTPS_PROXY`, a proxy cannot reach this machine's loopback).
fn agent(url: &str, timeout: Duration) -> Result<ureq::Agent, String> {
    crate::http::agent(url, timeout).map_err(|e| e.to_string())
}

/// POSTs `body` to `url`; `Ok` for a 2xx answer, else why not (the status or the error).
pub fn post(url: &str, content_type: &str, body: &str, timeout: Duration) -> Result<(), String> {
    let resp = agent(url, timeout)?
        .post(url)
        .header("Content-Type", content_type)
        .send(body)
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// GETs `url` and hands each line of a 2xx answer's body to `line`, streamed: at most
/// `max_line` bytes are kept of a line (a longer one is handed cut, and a reader of JSON lines
/// skips it), and reading stops after `max_total` bytes. `Ok(true)` when the whole body was
/// read, `Ok(false)` when it was cut there or broke off after the first line (what was handed
/// stays handed: the caller moves on from the last line it took).
pub fn get_lines(
    url: &str,
    timeout: Duration,
    max_line: usize,
    max_total: u64,
    mut line: impl FnMut(&str),
) -> Result<bool, String> {
    use std::io::BufRead;
    let mut resp = get_ok(url, timeout)?;
    let mut reader = std::io::BufReader::new(resp.body_mut().as_reader());
    let (mut total, mut handed, mut current) = (0u64, 0usize, Vec::new());
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) => break,
            Ok(chunk) => chunk,
            Err(e) if handed == 0 => return Err(e.to_string()),
            Err(_) => return Ok(false),
        };
        let (take, end) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = max_line.saturating_sub(current.len());
        current.extend_from_slice(&chunk[..take.min(room)]);
        reader.consume(take);
        total += take as u64;
        if end {
            line(String::from_utf8_lossy(&current).trim_end_matches(['\n', '\r']));
            handed += 1;
            current.clear();
        }
        if total >= max_total {
            return Ok(false);
        }
    }
    if !current.is_empty() {
        line(String::from_utf8_lossy(&current).as_ref());
    }
    Ok(true)
}

/// GETs `url`: the answer when it is a 2xx, else why not (the status or the error).
fn get_ok(url: &str, timeout: Duration) -> Result<ureq::http::Response<ureq::Body>, String> {
    let resp = agent(url, timeout)?
        .get(url)
        .call()
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        Ok(resp)
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// GETs `url`: the body of a 2xx answer (at most [`MAX_BODY`] bytes), else why not.
pub fn get(url: &str, timeout: Duration) -> Result<String, String> {
    get_ok(url, timeout)?
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|e| e.to_string())
}
