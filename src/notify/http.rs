//! The one HTTP client of hank: blocking requests with a whole-request timeout, over rustls
//! (`ureq`). Used by the notification sender and the control-topic poller; nothing here
//! listens on a socket.

use std::time::Duration;

/// Largest response body read (bytes): an ntfy poll of a busy topic stays far below it.
pub const MAX_BODY: u64 = 4 * 1024 * 1024;

/// The client for one request to `url`: a loopback URL (127.0.0.1, localhost, ::1) never
/// goes through `HTTP_PROXY`/`HTTPS_PROXY` (a proxy cannot reach this machine's loopback).
fn agent(url: &str, timeout: Duration) -> ureq::Agent {
    let mut builder = ureq::Agent::config_builder();
    if crate::policy::notify::is_loopback(url) {
        builder = builder.proxy(None);
    }
    let config = builder
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("hank/", env!("CARGO_PKG_VERSION")))
        .build();
    ureq::Agent::new_with_config(config)
}

/// POSTs `body` to `url`; `Ok` for a 2xx answer, else why not (the status or the error).
pub fn post(url: &str, content_type: &str, body: &str, timeout: Duration) -> Result<(), String> {
    let resp = agent(url, timeout)
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

/// GETs `url`: the body of a 2xx answer (at most [`MAX_BODY`] bytes), else why not.
pub fn get(url: &str, timeout: Duration) -> Result<String, String> {
    let mut resp = agent(url, timeout)
        .get(url)
        .call()
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(format!("HTTP {status}"));
    }
    resp.body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|e| e.to_string())
}
