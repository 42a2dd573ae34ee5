//! How a forge request travels: through the user's logged-in CLI (`gh api` / `glab api`, which
//! add the login, the host and the proxy themselves) or over HTTP with a token from the
//! environment (plain `http://` in-process; `https://` through `curl`, its headers and body
//! on stdin). The token is never in argv, never logged, never in an error message.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::error::{HankError, Result};

use super::exec;

/// How long one forge request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Most bytes of a reply read.
const REPLY_LIMIT: u64 = 16 * 1024 * 1024;

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

/// Request headers as `Name: value` lines; a header with a line break in it is dropped (it
/// would end the header block; curl's config quotes the rest).
fn header_lines(extra: &[(String, String)]) -> impl Iterator<Item = String> + '_ {
    extra
        .iter()
        .filter(|(k, v)| !format!("{k}{v}").contains(['\r', '\n']))
        .map(|(k, v)| format!("{k}: {v}"))
}

// ---------------------------------------------------------------------------------------------
// REST with a token

/// GitHub's REST API at `base` (`GITHUB_API_URL`) with a token (`GH_TOKEN` / `GITHUB_TOKEN`),
/// or another tracker's API with its own credential headers ([`Http::with_headers`]).
pub struct Http {
    pub base: String,
    /// The headers every request carries, the credential's among them (`Name: value`).
    fixed: Vec<String>,
    /// Where `curl` is, for `https://`.
    curl: Option<PathBuf>,
    dir: PathBuf,
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
    /// `base` is neither `http://` nor `https://`, or it is `https://` and `curl` is not
    /// installed.
    pub fn new(base: &str, token: String, dir: &Path) -> Result<Self> {
        if token.contains(['\r', '\n', '"', '\\']) {
            return Err(HankError::usage(
                "the token in GH_TOKEN / GITHUB_TOKEN holds a line break, quote or backslash: expected a token",
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
        Self::with_headers(
            base,
            "GITHUB_API_URL",
            "GH_TOKEN / GITHUB_TOKEN",
            headers,
            dir,
        )
    }

    /// A client of `base` (named by the variable `base_var` in messages) whose requests carry
    /// `headers` (the credential's among them, from the variables `secret_vars`).
    ///
    /// # Errors
    /// `base` is neither `http://` nor `https://`, or it is `https://` and `curl` is not
    /// installed; a header value holds a line break.
    pub fn with_headers(
        base: &str,
        base_var: &str,
        secret_vars: &str,
        headers: Vec<(String, String)>,
        dir: &Path,
    ) -> Result<Self> {
        let base = base.trim().trim_end_matches('/').to_string();
        let curl = if base.starts_with("https://") {
            Some(which::which("curl").map_err(|_| {
                HankError::usage_hint(
                    format!("{base_var}={base}: https needs `curl`, which is not on PATH"),
                    "install curl",
                )
            })?)
        } else if base.starts_with("http://") {
            None
        } else {
            return Err(HankError::usage(format!(
                "{base_var}=`{base}`: expected an http:// or https:// URL"
            )));
        };
        // A line break would end the header block (curl's config quotes the rest).
        if headers
            .iter()
            .any(|(k, v)| format!("{k}{v}").contains(['\r', '\n']))
        {
            return Err(HankError::usage(format!(
                "the credential in {secret_vars} holds a line break: expected a token"
            )));
        }
        let mut fixed: Vec<String> = headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        fixed.push(format!("User-Agent: hank/{}", env!("CARGO_PKG_VERSION")));
        Ok(Self {
            base,
            fixed,
            curl,
            dir: dir.to_path_buf(),
        })
    }

    /// A name of the token that is not the token (FNV-1a of it, in hex): the rate budget
    /// every hank process of the user shares per token is kept under it.
    #[must_use]
    pub fn token_key(&self) -> String {
        format!(
            "{:016x}",
            crate::store::userdir::fnv1a(
                format!("{}\n{}", self.base, self.fixed.join("\n")).as_bytes()
            )
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

    fn headers(&self) -> Vec<String> {
        self.fixed.clone()
    }

    /// A request over plain HTTP/1.1 (a GitHub Enterprise instance or a fake on loopback).
    fn plain(
        &self,
        method: &str,
        url: &str,
        body: Option<&str>,
        extra: &[(String, String)],
    ) -> Result<Reply> {
        let rest = url.strip_prefix("http://").unwrap_or(url);
        let (authority, path) = rest
            .split_once('/')
            .map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
        let addr = if authority.contains(':') {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let fail = |e: std::io::Error| HankError::Tool(format!("{method} {url}: {e}"));
        let mut stream = TcpStream::connect(&addr).map_err(fail)?;
        stream
            .set_read_timeout(Some(REQUEST_TIMEOUT))
            .map_err(fail)?;
        stream
            .set_write_timeout(Some(REQUEST_TIMEOUT))
            .map_err(fail)?;
        let mut req =
            format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
        for h in self.headers().into_iter().chain(header_lines(extra)) {
            req.push_str(&h);
            req.push_str("\r\n");
        }
        let body = body.unwrap_or("");
        if !body.is_empty() || method != "GET" {
            req.push_str("Content-Type: application/json\r\n");
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        req.push_str(body);
        stream.write_all(req.as_bytes()).map_err(fail)?;
        let mut buf = Vec::new();
        stream
            .take(REPLY_LIMIT)
            .read_to_end(&mut buf)
            .map_err(fail)?;
        parse_response(&String::from_utf8_lossy(&buf))
            .ok_or_else(|| HankError::Tool(format!("{method} {url}: not an HTTP response")))
    }

    /// A request over HTTPS through `curl`: everything (URL, headers with the token, body) in
    /// the config curl reads on stdin.
    fn tls(
        &self,
        curl: &Path,
        method: &str,
        url: &str,
        body: Option<&str>,
        extra: &[(String, String)],
    ) -> Result<Reply> {
        let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        let mut cfg = String::new();
        cfg.push_str(&format!("url = {}\n", q(url)));
        cfg.push_str(&format!("request = {}\n", q(method)));
        for h in self.headers().into_iter().chain(header_lines(extra)) {
            cfg.push_str(&format!("header = {}\n", q(&h)));
        }
        if let Some(b) = body {
            cfg.push_str("header = \"Content-Type: application/json\"\n");
            cfg.push_str(&format!("data-binary = {}\n", q(b)));
        }
        let args = [
            "--silent",
            "--show-error",
            "--include",
            "--proto",
            "=https",
            "--config",
            "-",
        ];
        let out = exec::run(curl, &args, cfg.as_bytes(), &self.dir, REQUEST_TIMEOUT)?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // `--include` prints every response's head (a proxy's `200 Connection established`,
        // a `100 Continue` first): the answer is the last one.
        let mut last = parse_response(&text);
        while let Some(r) = &last {
            if r.body.trim_start().starts_with("HTTP/") {
                last = parse_response(&r.body.clone());
            } else {
                break;
            }
        }
        match last {
            Some(r) => Ok(r),
            None => Err(HankError::Tool(format!(
                "{method} {url} through curl failed: {}",
                crate::sanitize::line(out.stderr.trim())
            ))),
        }
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
        let body = body.map(Value::to_string);
        match &self.curl {
            Some(curl) => self.tls(curl, method, &url, body.as_deref(), headers),
            None => self.plain(method, &url, body.as_deref(), headers),
        }
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
        assert_eq!(header_lines(&bad).count(), 0);
        assert_eq!(
            header_lines(&h).collect::<Vec<_>>(),
            ["If-None-Match: \"abc\""]
        );
    }

    #[test]
    fn a_token_with_a_line_break_is_refused_and_never_printed() {
        let e = Http::new(
            "http://127.0.0.1:1",
            "abc\r\nX-Evil: 1".into(),
            Path::new("."),
        )
        .unwrap_err();
        assert!(!e.to_string().contains("abc"), "{e}");
        let h = Http::new(
            "http://127.0.0.1:1",
            "tok-secret-123".into(),
            Path::new("."),
        )
        .unwrap();
        assert!(!format!("{h:?}").contains("tok-secret"));
        assert!(Http::new("ftp://x", "t".into(), Path::new(".")).is_err());
    }
}
