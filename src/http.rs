//! hank's one HTTP client: blocking HTTP/1.1 by `ureq`, TLS by rustls, no redirects followed.
//! Every request hank makes is built by [`agent`]: the forge's and the trackers' REST
//! ([`crate::forge::transport::Http`], which sends through [`send`]: an HTTP error status is
//! handed back as a [`Reply`], the caller reads the forge's `message`), the NOTIFY targets
//! and the ntfy control topic (`notify::http`).
//!
//! - **Timeout**: one bound on the whole request, the caller's
//!   ([`crate::forge::transport::REQUEST_TIMEOUT`] for the forge).
//! - **Proxy**: `ALL_PROXY`, `HTTPS_PROXY`, `HTTP_PROXY` (and lower-case) with `NO_PROXY`, as
//!   `ureq` reads them; a loopback base (`127.0.0.1`, `localhost`, `::1`) is reached directly.
//! - **Certificates**: the PEM bundle named by `SSL_CERT_FILE` when set (a private CA), else
//!   the system's bundle (`/etc/ssl/certs/ca-certificates.crt` and its kin on other
//!   distributions), else the Mozilla roots built in.
//! - **Reply**: at most [`REPLY_LIMIT`] bytes of body; every header kept (`ETag`,
//!   `Retry-After`, the rate-limit headers, `Link`).

use std::time::Duration;

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

use serde_json::Value;

use crate::error::{HankError, Result};

/// Most bytes of a reply read.
pub const REPLY_LIMIT: u64 = 16 * 1024 * 1024;

/// Where distributions keep the system's certificate bundle (Debian/Ubuntu/Arch, Fedora/RHEL,
/// openSUSE, Alpine/macOS).
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// The response's headers as sent (names as written), for `ETag`, `Retry-After` and the
    /// rate-limit headers.
    pub headers: Vec<(String, String)>,
}

impl Reply {
    /// 2xx.
    #[must_use]
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON (`null` when it is not).
    #[must_use]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// A header's value (the name is case-insensitive).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The forge's `message` (GitHub) or `message`/`error` (GitLab), for errors.
    #[must_use]
    pub fn message(&self) -> String {
        let v = self.json();
        let m = v
            .get("message")
            .or_else(|| v.get("error"))
            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
            .unwrap_or_else(|| self.body.chars().take(200).collect());
        crate::sanitize::line(&m)
    }
}

/// The client for requests under `base` (a URL or its start), each bounded by `timeout`.
///
/// # Errors
/// `SSL_CERT_FILE` is set and holds no readable certificate.
pub fn agent(base: &str, timeout: Duration) -> Result<ureq::Agent> {
    let mut builder = ureq::Agent::config_builder();
    if crate::policy::notify::is_loopback(base) {
        builder = builder.proxy(None);
    }
    if base.starts_with("https://") {
        builder = builder.tls_config(TlsConfig::builder().root_certs(roots()?).build());
    }
    let config = builder
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .max_idle_connections(0)
        .user_agent(concat!("hank/", env!("CARGO_PKG_VERSION")))
        .build();
    Ok(ureq::Agent::new_with_config(config))
}

/// The certificates a server's chain must end in, read once per process.
fn roots() -> Result<RootCerts> {
    static ROOTS: std::sync::OnceLock<std::result::Result<RootCerts, String>> =
        std::sync::OnceLock::new();
    ROOTS
        .get_or_init(|| read_roots().map_err(|e| e.to_string()))
        .clone()
        .map_err(HankError::usage)
}

/// [`roots`], read.
fn read_roots() -> Result<RootCerts> {
    if let Some(file) = std::env::var_os("SSL_CERT_FILE").filter(|f| !f.is_empty()) {
        let shown = std::path::Path::new(&file).display().to_string();
        let certs = std::fs::read(&file)
            .ok()
            .map(|pem| certificates(&pem))
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                HankError::usage(format!(
                    "SSL_CERT_FILE={shown}: expected a readable PEM file of certificates"
                ))
            })?;
        return Ok(RootCerts::new_with_certs(&certs));
    }
    let system = SYSTEM_BUNDLES
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .map(|pem| certificates(&pem))
        .find(|c| !c.is_empty());
    Ok(system.map_or(RootCerts::WebPki, |c| RootCerts::new_with_certs(&c)))
}

/// The certificates of a PEM bundle (keys and unreadable sections skipped).
fn certificates(pem: &[u8]) -> Vec<Certificate<'static>> {
    ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect()
}

/// Sends `req` (its method, URL and headers set) with `body` (none for an empty `GET`) and
/// reads the answer.
///
/// # Errors
/// The connection, the TLS handshake or the reading failed, or the request could not be
/// formed; an HTTP error status is a [`Reply`].
pub fn send(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    req: ureq::http::request::Builder,
    body: String,
) -> Result<Reply> {
    let fail = |e: &dyn std::fmt::Display| {
        HankError::Tool(format!(
            "{method} {url}: {}",
            crate::sanitize::line(&e.to_string())
        ))
    };
    let sent = if body.is_empty() && method == "GET" {
        agent.run(req.body(()).map_err(|e| fail(&e))?)
    } else {
        agent.run(req.body(body).map_err(|e| fail(&e))?)
    };
    let mut resp = sent.map_err(|e| fail(&e))?;
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let bytes = resp
        .body_mut()
        .with_config()
        .limit(REPLY_LIMIT)
        .read_to_vec()
        .map_err(|e| fail(&e))?;
    Ok(Reply {
        status: resp.status().as_u16(),
        body: String::from_utf8_lossy(&bytes).into_owned(),
        headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_gives_its_certificates_and_nothing_else() {
        assert!(certificates(b"not a certificate").is_empty());
        assert!(
            certificates(b"-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n")
                .is_empty()
        );
        let r = Reply {
            status: 404,
            body: "{\"message\":\"Not \\u001b[1mFound\"}".into(),
            headers: vec![("link".into(), "<x?page=2>; rel=\"next\"".into())],
        };
        assert!(!r.ok());
        assert_eq!(r.message(), "Not Found");
        assert_eq!(r.header("Link"), Some("<x?page=2>; rel=\"next\""));
    }

    /// A loopback base is reached directly, whatever proxy the environment names; nothing
    /// listens on port 1, so the request fails as a connection error naming the URL.
    #[test]
    fn a_refused_connection_is_an_error_naming_the_request() {
        let agent = agent("http://127.0.0.1:1", Duration::from_secs(5)).unwrap();
        let req = ureq::http::Request::builder()
            .method("GET")
            .uri("http://127.0.0.1:1/repos/o/r");
        let e = send(
            &agent,
            "GET",
            "http://127.0.0.1:1/repos/o/r",
            req,
            String::new(),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("GET http://127.0.0.1:1/repos/o/r"),
            "{e}"
        );
    }
}
