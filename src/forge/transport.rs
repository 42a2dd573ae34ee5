//! How a forge request travels: through the user's logged-in CLI (`gh api` / `glab api`, which
//! add the login, the host and the proxy themselves) or over HTTP with a token from the
//! environment (in-process through `ureq`, [`crate::http`]). The token is never in argv, never
//! logged, never in an error message.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::error::{HankError, Result};

use super::exec;
use crate::http;

pub use crate::http::Reply;

/// How long one forge request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// One request: `method path` (relative to the API root, e.g. `repos/o/r/pulls`) with an
/// optional JSON body.
pub trait Api {
    /// What carries the requests, for messages (`gh`, `REST at http://…`).
    fn describe(&self) -> String;

    /// Sends the request with request headers added (`If-None-Match` of a conditional
    /// request; they carry no secret).
    ///
    /// # Errors
    /// The request could not be made (the program failed to start, the connection failed);
    /// an HTTP error status is a [`Reply`], not an error.
    fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(String, String)],
    ) -> Result<Reply>;

    /// Sends the request ([`Api::call_with`] without headers).
    ///
    /// # Errors
    /// As [`Api::call_with`].
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Reply> {
        self.call_with(method, path, body, &[])
    }
}

impl<A: Api + ?Sized> Api for Box<A> {
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Reply> {
        (**self).call(method, path, body)
    }
    fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(String, String)],
    ) -> Result<Reply> {
        (**self).call_with(method, path, body, headers)
    }
}

// ---------------------------------------------------------------------------------------------
// The user's CLI

/// `gh api` / `glab api`: the CLI adds the login and the host.
#[derive(Debug, Clone)]
pub struct CliApi {
    pub program: PathBuf,
    /// `--hostname` (a GitHub Enterprise / self-managed GitLab host), when not the default.
    pub hostname: Option<String>,
    pub dir: PathBuf,
}

impl CliApi {
    /// The argv of a request (the body goes on stdin with `--input -`).
    #[must_use]
    pub fn argv(&self, method: &str, path: &str, has_body: bool) -> Vec<String> {
        self.argv_with(method, path, has_body, &[])
    }

    /// [`CliApi::argv`] with request headers (`-H NAME: VALUE`; never a secret).
    #[must_use]
    pub fn argv_with(
        &self,
        method: &str,
        path: &str,
        has_body: bool,
        headers: &[(String, String)],
    ) -> Vec<String> {
        let mut a = vec![
            "api".to_string(),
            "--include".to_string(),
            "--method".to_string(),
            method.to_string(),
        ];
        if let Some(h) = &self.hostname {
            a.push("--hostname".into());
            a.push(h.clone());
        }
        if has_body {
            a.push("--input".into());
            a.push("-".into());
        }
        for (k, v) in headers {
            a.push("-H".into());
            a.push(format!("{k}: {v}"));
        }
        a.push(path.to_string());
        a
    }
}

impl Api for CliApi {
    fn describe(&self) -> String {
        self.program
            .file_name()
            .map_or_else(|| "cli".to_string(), |n| n.to_string_lossy().into_owned())
    }

    fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(String, String)],
    ) -> Result<Reply> {
        let argv = self.argv_with(method, path, body.is_some(), headers);
        let args: Vec<&str> = argv.iter().map(String::as_str).collect();
        let input = body.map(Value::to_string).unwrap_or_default();
        let out = exec::run(
            &self.program,
            &args,
            input.as_bytes(),
            &self.dir,
            REQUEST_TIMEOUT,
        )?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        match parse_response(&text) {
            Some(reply) => Ok(reply),
            None => Err(HankError::Tool(format!(
                "`{} api {method} {path}` failed ({}): {}",
                self.describe(),
                out.code
                    .map_or_else(|| "killed".to_string(), |c| format!("exit {c}")),
                crate::sanitize::line(out.stderr.trim())
            ))),
        }
    }
}

/// An HTTP response as text (`HTTP/1.1 201 Created`, headers, a blank line, the body) →
/// status and body. `None` when it does not start with a status line. A chunked body is
/// decoded.
#[must_use]
pub fn parse_response(text: &str) -> Option<Reply> {
    let text = text.trim_start_matches(['\r', '\n']);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .or_else(|| text.split_once("\n\n"))
        .unwrap_or((text, ""));
    let mut lines = head.lines();
    let status_line = lines.next()?;
    if !status_line.starts_with("HTTP/") {
        return None;
    }
    let status: u16 = status_line.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some(Reply {
        status,
        body,
        headers,
    })
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            out.push_str(rest.get(..n.min(rest.len())).unwrap_or(""));
            break;
        }
        out.push_str(rest.get(..n).unwrap_or(""));
        s = rest.get(n..).unwrap_or("").trim_start_matches("\r\n");
    }
    out
}

/// Request headers a request may carry: a header with a line break or another control
/// character in it is dropped (it would end the header block).
fn sendable(extra: &[(String, String)]) -> impl Iterator<Item = &(String, String)> + '_ {
    extra
        .iter()
        .filter(|(k, v)| !format!("{k}{v}").contains(|c: char| c.is_control() && c != '\t'))
}

// ---------------------------------------------------------------------------------------------
// REST with a token

/// GitHub's REST API at `base` (`GITHUB_API_URL`) with a token (`GH_TOKEN` / `GITHUB_TOKEN`),
/// or another tracker's API with its own credential headers ([`Http::with_headers`]), spoken
/// in-process over HTTP/1.1 (`ureq`, TLS by rustls) — see [`crate::http`] for timeouts, proxies and
/// certificates.
pub struct Http {
    pub base: String,
    /// The headers every request carries, the credential's among them.
    fixed: Vec<(String, String)>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Http {
    /// A client of `base` with `token`.
    ///
    /// # Errors
    /// `base` is neither `http://` nor `https://`; the token holds a line break or another
    /// control character; the certificates named by `SSL_CERT_FILE` cannot be read.
    pub fn new(base: &str, token: String) -> Result<Self> {
        if token.contains(char::is_control) {
            return Err(HankError::usage(
                "the token in GH_TOKEN / GITHUB_TOKEN holds a line break or a control character: expected a token",
            ));
        }
        let headers = vec![
            ("Authorization".to_string(), format!("Bearer {token}")),
            (
                "Accept".to_string(),
                "application/vnd.github+json".to_string(),
            ),
            ("X-GitHub-Api-Version".to_string(), "2022-11-28".to_string()),
        ];
        Self::with_headers(base, "GITHUB_API_URL", "GH_TOKEN / GITHUB_TOKEN", headers)
    }

    /// A client of `base` (named by the variable `base_var` in messages) whose requests carry
    /// `headers` (the credential's among them, from the variables `secret_vars`).
    ///
    /// # Errors
    /// `base` is neither `http://` nor `https://`; a header value holds a line break; the
    /// certificates named by `SSL_CERT_FILE` cannot be read.
    pub fn with_headers(
        base: &str,
        base_var: &str,
        secret_vars: &str,
        headers: Vec<(String, String)>,
    ) -> Result<Self> {
        let base = base.trim().trim_end_matches('/').to_string();
        if !base.starts_with("https://") && !base.starts_with("http://") {
            return Err(HankError::usage(format!(
                "{base_var}=`{base}`: expected an http:// or https:// URL"
            )));
        }
        // A line break would end the header block.
        if headers
            .iter()
            .any(|(k, v)| format!("{k}{v}").contains(char::is_control))
        {
            return Err(HankError::usage(format!(
                "the credential in {secret_vars} holds a line break: expected a token"
            )));
        }
        let mut fixed = headers;
        fixed.push((
            "User-Agent".to_string(),
            format!("hank/{}", env!("CARGO_PKG_VERSION")),
        ));
        let agent = http::agent(&base, REQUEST_TIMEOUT)?;
        Ok(Self { base, fixed, agent })
    }

    /// A name of the token that is not the token (FNV-1a of it, in hex): the rate budget
    /// every hank process of the user shares per token is kept under it.
    #[must_use]
    pub fn token_key(&self) -> String {
        let lines: Vec<String> = self
            .fixed
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        format!(
            "{:016x}",
            crate::store::userdir::fnv1a(format!("{}\n{}", self.base, lines.join("\n")).as_bytes())
        )
    }

    fn url(&self, path: &str) -> String {
        let path = path.trim_start_matches('/');
        if path.is_empty() {
            // A GraphQL endpoint is the base itself.
            return self.base.clone();
        }
        format!("{}/{}", self.base, path)
    }
}

impl Api for Http {
    fn describe(&self) -> String {
        format!("REST at {}", self.base)
    }

    fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(String, String)],
    ) -> Result<Reply> {
        let url = self.url(path);
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Connection", "close");
        for (k, v) in self.fixed.iter().chain(sendable(headers)) {
            req = req.header(k.as_str(), v.as_str());
        }
        let body = body.map(Value::to_string);
        if body.is_some() || method != "GET" {
            req = req.header("Content-Type", "application/json");
        }
        http::send(&self.agent, method, &url, req, body.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_parse() {
        let r = parse_response(
            "HTTP/2.0 201 Created\r\nContent-Type: application/json\r\n\r\n{\"number\":3}",
        )
        .unwrap();
        assert_eq!((r.status, r.json()["number"].as_u64()), (201, Some(3)));
        let r = parse_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n2\r\nef\r\n0\r\n\r\n").unwrap();
        assert_eq!(r.body, "abcdef");
        assert!(parse_response("gh: not found").is_none());
        let r = parse_response(
            "HTTP/1.1 422 Unprocessable\n\n{\"message\":\"Validation \\u001b[31mFailed\"}",
        )
        .unwrap();
        assert_eq!(r.message(), "Validation Failed");
    }

    #[test]
    fn the_cli_argv_has_no_token_and_reads_the_body_from_stdin() {
        let api = CliApi {
            program: "gh".into(),
            hostname: Some("ghe.example.com".into()),
            dir: ".".into(),
        };
        assert_eq!(
            api.argv("POST", "repos/o/r/pulls", true),
            [
                "api",
                "--include",
                "--method",
                "POST",
                "--hostname",
                "ghe.example.com",
                "--input",
                "-",
                "repos/o/r/pulls"
            ]
        );
    }

    #[test]
    fn headers_are_read_and_sent() {
        let r = parse_response(
            "HTTP/1.1 304 Not Modified\r\nETag: \"abc\"\r\nX-RateLimit-Remaining: 12\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.status, 304);
        assert_eq!(r.header("etag"), Some("\"abc\""));
        assert_eq!(r.header("X-RATELIMIT-REMAINING"), Some("12"));
        let api = CliApi {
            program: "glab".into(),
            hostname: None,
            dir: ".".into(),
        };
        let h = [("If-None-Match".to_string(), "\"abc\"".to_string())];
        assert_eq!(
            api.argv_with("GET", "projects/o%2Fr/issues", false, &h),
            [
                "api",
                "--include",
                "--method",
                "GET",
                "-H",
                "If-None-Match: \"abc\"",
                "projects/o%2Fr/issues"
            ]
        );
        // A header that would end the header block is never sent.
        let bad = [("X".to_string(), "a\r\nInjected: 1".to_string())];
        assert_eq!(sendable(&bad).count(), 0);
        assert_eq!(sendable(&h).collect::<Vec<_>>(), [&h[0]]);
    }

    #[test]
    fn a_token_with_a_line_break_is_refused_and_never_printed() {
        let e = Http::new("http://127.0.0.1:1", "abc\r\nX-Evil: 1".into()).unwrap_err();
        assert!(!e.to_string().contains("abc"), "{e}");
        let h = Http::new("http://127.0.0.1:1", "tok-secret-123".into()).unwrap();
        assert!(!format!("{h:?}").contains("tok-secret"));
        assert!(Http::new("ftp://x", "t".into()).is_err());
    }
}
