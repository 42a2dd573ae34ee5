//! `hank serve`: a read-only web view of the user's projects — every run and fleet — with
//! live updates (server-sent events), on 127.0.0.1 by default.
//!
//! - **What it reads**: the per-user state's project records
//!   ([`crate::store::userdir::known_projects`]) and, for each project, the records `hank
//!   status`, `hank report` and `hank fleet status` read, through the same readers
//!   ([`data`]: [`crate::monitor::snapshot`], the typed events of
//!   [`crate::store::schema`]): `.hank/status.json`, `events.jsonl`, `live.log`,
//!   `state.json`, `fix_plan.md`, `fleet.json`, and a fleet task's `.hank/events.jsonl` in its
//!   worktree under the per-user state. A project is named in a URL by its per-user key,
//!   never by a path: nothing else can be asked for. Nothing is written (no run's state
//!   changes because a page is open).
//! - **Who may read**: [`auth`]. Every request's `Host` must name the server (an IP address
//!   or `localhost` with the port served: DNS rebinding refused, 421); the random token of
//!   the printed URL (`?token=`, compared in constant time) sets an `HttpOnly`,
//!   `SameSite=Strict` cookie and sends the browser to the same page without it; a request
//!   with neither gets a status and a line of text, no data (401, 403).
//! - **What the browser may do**: every answer carries a strict Content-Security-Policy
//!   (`default-src 'none'`; the page's own stylesheet, script, and `connect-src 'self'`
//!   only; no inline script or style, no frame), `nosniff`, `no-referrer`, `no-store`.
//!   Every text a record holds is escaped ([`html::esc`]); the charts are SVG drawn by
//!   hank ([`svg`]), the pages plain HTML ([`pages`], the shell and assets compiled in from
//!   `templates/serve/`).
//! - **Live**: the page's script opens `/events?watch=KEY` (`*` on the list); the server
//!   stats the watched records every [`TICK`] ([`crate::monitor::snapshot::Fingerprint`]: a
//!   few `stat` calls, no read) and sends a `change` event when they moved; the script then
//!   fetches the page again and swaps its `<main>` in.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `hank serve` (issue 52): the read-only web view on axum — `auth.rs` token/cookie/Host
//! **\[pure\]**, `data.rs` the records through `monitor::snapshot` and the typed events (projects
//! from `userdir::known_projects`), `pages.rs`/`svg.rs`/`html.rs` HTML and SVG **\[pure\]** (every
//! record's text through `html::esc`), `mod.rs` the router, guard, CSP, SSE; the assets in
//! `templates/serve/`; `scripts/browser-serve.py` the Chromium test (module doc: the rest)

mod auth;
pub(crate) mod data;
mod html;
mod pages;
mod svg;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use crate::error::{HankError, Result};
use data::ProjectRef;

/// How often the live updates look at the watched records.
pub(crate) const TICK: Duration = Duration::from_millis(250);

/// The Content-Security-Policy of every answer.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// What `hank serve` was asked for.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub bind: IpAddr,
    /// 0: a free one.
    pub port: u16,
    /// The per-user state's root ([`crate::store::userdir::root`]).
    pub state_root: PathBuf,
    /// The project `hank serve` was started in: `/` opens on it.
    pub home: Option<ProjectRef>,
}

struct App {
    token: String,
    bind: IpAddr,
    port: u16,
    state_root: PathBuf,
    home: Option<ProjectRef>,
    /// The fleet tasks' events as last read ([`data::fleet_data`]).
    seen: std::sync::Mutex<data::TaskEvents>,
}

impl App {
    fn projects(&self) -> Vec<ProjectRef> {
        data::projects(&self.state_root, self.home.as_ref())
    }

    fn project(&self, key: &str) -> Option<ProjectRef> {
        self.projects().into_iter().find(|p| p.key == key)
    }
}

/// A fresh token: 32 random bytes as hex.
fn new_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| HankError::usage(format!("no random bytes for the token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The URL to open: the address the server listens on, 127.0.0.1 when it listens
/// everywhere (`0.0.0.0`, `::`).
#[must_use]
pub(crate) fn url(bind: IpAddr, port: u16, token: &str) -> String {
    // `::` also takes IPv4 connections (Linux's default), `::1` does not.
    let host = match bind {
        IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".to_owned(),
        IpAddr::V6(v6) if v6.is_unspecified() => "127.0.0.1".to_owned(),
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    };
    format!("http://{host}:{port}/?token={token}")
}

/// Serves until SIGINT or SIGTERM (then exit code 130); `started` is told the URL once the
/// socket listens.
///
/// # Errors
/// The address cannot be listened on, or the runtime cannot start.
pub(crate) fn serve(cfg: Config, started: impl FnOnce(&str) -> Result<()>) -> Result<u8> {
    let listener =
        std::net::TcpListener::bind(SocketAddr::new(cfg.bind, cfg.port)).map_err(|e| {
            HankError::usage(format!(
                "--bind {} --port {}: cannot listen there: {e}",
                cfg.bind, cfg.port
            ))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| HankError::usage(format!("the listening socket has no address: {e}")))?
        .port();
    listener
        .set_nonblocking(true)
        .map_err(|e| HankError::usage(format!("the listening socket: {e}")))?;
    let app = Arc::new(App {
        token: new_token()?,
        bind: cfg.bind,
        port,
        state_root: cfg.state_root,
        home: cfg.home,
        seen: std::sync::Mutex::default(),
    });
    started(&url(cfg.bind, port, &app.token))?;
    let rt = crate::proc::runtime()
        .map_err(|e| HankError::usage(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| HankError::usage(format!("the listening socket: {e}")))?;
        // At a signal the server and its open connections (the live streams never end on
        // their own) are dropped: nothing is written, so nothing is left half-done.
        tokio::select! {
            served = axum::serve(listener, router(app)) => served
                .map_err(|e| HankError::usage(format!("the web server stopped: {e}"))),
            () = stopped() => Ok(()),
        }
    })?;
    // A signal is the only way it ends.
    Ok(crate::exit::INTERRUPTED)
}

/// Resolves on SIGINT or SIGTERM.
async fn stopped() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/projects", get(projects))
        .route("/p/{key}", get(run_page))
        .route("/p/{key}/fleet", get(fleet_page))
        .route("/p/{key}/log", get(log_page))
        .route("/events", get(events))
        .route(
            "/static/app.css",
            get(|| async { asset("text/css", html::CSS) }),
        )
        .route(
            "/static/app.js",
            get(|| async { asset("text/javascript", html::JS) }),
        )
        .route(
            "/favicon.svg",
            get(|| async { asset("image/svg+xml", html::ICON) }),
        )
        .route(
            "/favicon.ico",
            get(|| async { asset("image/svg+xml", html::ICON) }),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, page_response(pages::not_found())) })
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Every request: the Host and the token ([`auth::decide`]), then the security headers on
/// whatever is answered.
async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    fn text(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
        h.get(name).and_then(|v| v.to_str().ok())
    }
    let host_ok = auth::host_allowed(text(req.headers(), header::HOST), app.bind, app.port);
    let access = auth::decide(
        host_ok,
        req.uri().query(),
        text(req.headers(), header::COOKIE),
        &app.token,
    );
    let mut res = match access {
        auth::Access::Refused(code, why) => (
            StatusCode::from_u16(code).unwrap_or(StatusCode::FORBIDDEN),
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            why,
        )
            .into_response(),
        auth::Access::SetCookie => {
            let mut res = Redirect::to(auth::same_page(req.uri().path())).into_response();
            let cookie = format!(
                "{}={}; Path=/; HttpOnly; SameSite=Strict",
                auth::COOKIE,
                app.token
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                res.headers_mut().insert(header::SET_COOKIE, v);
            }
            res
        }
        auth::Access::Allowed => next.run(req).await,
    };
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

fn page_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// Runs a page's reads and rendering off the runtime's thread (the live streams go on).
async fn blocking(f: impl FnOnce() -> Response + Send + 'static) -> Response {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|_| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the page could not be built\n",
        )
            .into_response()
    })
}

async fn root(State(app): State<Arc<App>>) -> Response {
    match &app.home {
        Some(h) => Redirect::to(&format!("/p/{}", h.key)).into_response(),
        None => Redirect::to("/projects").into_response(),
    }
}

async fn projects(State(app): State<Arc<App>>) -> Response {
    blocking(move || {
        let list: Vec<data::Overview> = app
            .projects()
            .iter()
            .map(|p| data::overview(p, &data::snapshot(p)))
            .collect();
        page_response(pages::projects(&list, jiff::Timestamp::now()))
    })
    .await
}

async fn run_page(State(app): State<Arc<App>>, Path(key): Path<String>) -> Response {
    blocking(move || match app.project(&key) {
        Some(p) => page_response(pages::run(&data::run_data(&p), jiff::Timestamp::now())),
        None => (StatusCode::NOT_FOUND, page_response(pages::not_found())).into_response(),
    })
    .await
}

async fn fleet_page(State(app): State<Arc<App>>, Path(key): Path<String>) -> Response {
    blocking(move || match app.project(&key) {
        Some(p) => {
            let now = jiff::Timestamp::now();
            let mut seen = app
                .seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let d = data::fleet_data(&p, &app.state_root, now, &mut seen);
            drop(seen);
            page_response(pages::fleet(&d, now))
        }
        None => (StatusCode::NOT_FOUND, page_response(pages::not_found())).into_response(),
    })
    .await
}

async fn log_page(State(app): State<Arc<App>>, Path(key): Path<String>) -> Response {
    blocking(move || match app.project(&key) {
        Some(p) => {
            let snap = data::snapshot(&p);
            page_response(pages::log(&data::overview(&p, &snap), &snap.live_tail))
        }
        None => (StatusCode::NOT_FOUND, page_response(pages::not_found())).into_response(),
    })
    .await
}

/// The fingerprints of what a page watches: one project's records, or (`*`) every
/// project's and the list itself.
fn watched(app: &App, watch: &str) -> Vec<(String, crate::monitor::snapshot::Fingerprint)> {
    app.projects()
        .into_iter()
        .filter(|p| watch == "*" || p.key == watch)
        .map(|p| {
            let f = data::fingerprint(&p);
            (p.key, f)
        })
        .collect()
}

/// `/events?watch=KEY`: a `change` event whenever the watched records move (looked at every
/// [`TICK`]), a comment every 15 s to keep the connection.
async fn events(State(app): State<Arc<App>>, uri: Uri) -> Response {
    // A project key is letters, digits, `-` and `_` (nothing to decode); anything else
    // watches every project.
    let watch = uri
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|p| p.strip_prefix("watch="))
        .filter(|k| {
            !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .unwrap_or("*")
        .to_owned();
    let (a, w) = (app.clone(), watch.clone());
    let first = tokio::task::spawn_blocking(move || watched(&a, &w))
        .await
        .unwrap_or_default();
    let stream = futures_util::stream::unfold(
        (app, watch, first),
        |(app, watch, mut last): (Arc<App>, String, Vec<_>)| async move {
            loop {
                tokio::time::sleep(TICK).await;
                // The stats and the list's reads run off the runtime's thread.
                let (a, w) = (app.clone(), watch.clone());
                let Ok(now) = tokio::task::spawn_blocking(move || watched(&a, &w)).await else {
                    return None;
                };
                if now != last {
                    last = now;
                    let ev = Event::default().event("change").data("changed");
                    return Some((
                        Ok::<Event, std::convert::Infallible>(ev),
                        (app, watch, last),
                    ));
                }
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_the_loopback_address_unless_another_was_asked_for() {
        let table = [
            ("127.0.0.1", "http://127.0.0.1:8080/?token=T"),
            ("::1", "http://[::1]:8080/?token=T"),
            ("::", "http://127.0.0.1:8080/?token=T"),
            ("127.0.0.2", "http://127.0.0.2:8080/?token=T"),
            ("0.0.0.0", "http://127.0.0.1:8080/?token=T"),
            ("192.168.1.5", "http://192.168.1.5:8080/?token=T"),
            ("fe80::1", "http://[fe80::1]:8080/?token=T"),
        ];
        for (bind, want) in table {
            assert_eq!(url(bind.parse().unwrap(), 8080, "T"), want);
        }
    }

    #[test]
    fn tokens_are_fresh_and_long() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
