//! `hank doctor [--json] [--claude-cmd CMD]`: the client (honouring `--claude-cmd` /
//! `CLAUDE_CODE_CMD`), its version and whether it is supported, whether it is logged in or has
//! a key, git, tmux, the layout, the config. Every problem comes with the command that fixes
//! it.
//!
//! The login check never calls the model: it asks the client (`claude auth status`, which
//! prints `{"loggedIn": …, "authMethod": …}` and exits 1 when logged out); a client that
//! cannot answer that is judged by the credentials it documents (`ANTHROPIC_API_KEY`,
//! `CLAUDE_CODE_OAUTH_TOKEN`, `~/.claude/.credentials.json`).

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::cli;
use crate::error::Result;
use crate::exit;
use crate::settings::{self, AgentCommand};

use super::{out, project_dir};

const PROBE_LIMIT: Duration = Duration::from_secs(10);
/// How long a tool's version check (git, tmux) may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
const INSTALL: &str = "npm install -g @anthropic-ai/claude-code";
const LOGIN: &str = "run `claude` once and log in (/login), or set ANTHROPIC_API_KEY";

/// One `hank doctor` finding.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
    /// The command (or step) that fixes a failed check.
    fix: Option<String>,
    /// A finding that does not fail the check (ok, with a fix worth knowing).
    warning: bool,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            ok: true,
            detail: detail.into(),
            fix: None,
            warning: false,
        }
    }
    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
            warning: false,
        }
    }
    /// A failed check from an error: its message, and its hint as the fix (else `fix`).
    fn failed(name: &'static str, e: &crate::error::HankError, fix: &str) -> Self {
        Self::fail(name, e.to_string(), e.hint().unwrap_or(fix))
    }
    fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            ok: true,
            detail: detail.into(),
            fix: Some(fix.into()),
            warning: true,
        }
    }
}

/// The first client whose `claude doctor` has an "API connectivity" section (2.1.331).
pub(crate) const CONNECTIVITY_SINCE: crate::agent::client::Version =
    crate::agent::client::Version {
        major: 2,
        minor: 1,
        patch: 331,
    };
/// Longest wait for `claude doctor` and for hank's own bounded request.
const API_PROBE_LIMIT: Duration = Duration::from_secs(20);
const API_CONNECT_LIMIT: Duration = Duration::from_secs(5);
const API_FIX: &str = "check the network, a proxy (HTTPS_PROXY) or firewall, and ANTHROPIC_BASE_URL; every call fails (network errors, backoff) until the API answers";

/// The API line of `claude doctor`'s "API connectivity" section (2.1.331+), e.g.
/// `- API (custom host): answered HTTP 200 in 2 ms` or `- API (custom host): failed after
/// 14 ms: Connection refused — …`: whether it answered, and the line. **\[pure\]**
#[must_use]
pub(crate) fn parse_connectivity(stdout: &str) -> Option<(bool, String)> {
    let mut lines = stdout
        .lines()
        .skip_while(|l| l.trim() != "API connectivity");
    lines.next()?;
    let line = lines
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .find(|l| l.starts_with("- API"))?;
    let line = line.trim_start_matches("- ").to_owned();
    let answered = line.contains("answered HTTP");
    Some((answered, line))
}

/// Host, port and whether it is plain HTTP, from a base URL (`https://api.anthropic.com`,
/// `http://127.0.0.1:8080/x`). **\[pure\]**
#[must_use]
pub(crate) fn url_endpoint(url: &str) -> Option<(String, u16, bool)> {
    let url = url.trim();
    let (plain, rest) = if let Some(r) = url.strip_prefix("http://") {
        (true, r)
    } else {
        (false, url.strip_prefix("https://")?)
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = if let Some(h) = authority.strip_prefix('[') {
        let (h, after) = h.split_once(']')?;
        let port = after.strip_prefix(':').map(str::parse).transpose().ok()?;
        (h.to_owned(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p.parse().ok()?)),
            None => (authority.to_owned(), None),
        }
    };
    if host.is_empty() {
        return None;
    }
    Some((host, port.unwrap_or(if plain { 80 } else { 443 }), plain))
}

/// Hank's own bounded request to the API base URL: a TCP connection (5 s), and for plain
/// HTTP one `HEAD /api/hello` whose status line is read (5 s). TLS is not checked.
fn probe_base_url(base: &str) -> std::result::Result<String, String> {
    use std::io::{Read as _, Write as _};
    use std::net::{TcpStream, ToSocketAddrs};
    let (host, port, plain) = url_endpoint(base)
        .ok_or_else(|| format!("ANTHROPIC_BASE_URL {base:?} is not an http(s) URL"))?;
    let started = std::time::Instant::now();
    let addrs: Vec<_> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}: cannot resolve ({e})"))?
        .collect();
    let mut last = format!("{host}:{port}: no address");
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, API_CONNECT_LIMIT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("{host}:{port}: {e}"),
        }
    }
    let mut stream = stream.ok_or(last)?;
    if !plain {
        return Ok(format!(
            "{host}:{port} accepted a connection in {} ms (TLS not checked)",
            started.elapsed().as_millis()
        ));
    }
    let _ = stream.set_read_timeout(Some(API_CONNECT_LIMIT));
    let _ = stream.set_write_timeout(Some(API_CONNECT_LIMIT));
    let request = format!("HEAD /api/hello HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("{host}:{port}: {e}"))?;
    let mut head = [0u8; 256];
    let n = stream
        .read(&mut head)
        .map_err(|e| format!("{host}:{port}: no answer ({e})"))?;
    let status = String::from_utf8_lossy(&head[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    if status.starts_with("HTTP/") {
        Ok(format!(
            "{host}:{port} answered {status:?} in {} ms",
            started.elapsed().as_millis()
        ))
    } else {
        Err(format!("{host}:{port} did not answer HTTP"))
    }
}

/// Whether the API is reachable: the client's own connectivity check where it has one
/// (`claude doctor`, 2.1.331+), else a bounded request to the configured base URL.
fn api_check(
    agent: &AgentCommand,
    dir: &Path,
    version: Option<crate::agent::client::Version>,
) -> Check {
    if version.is_some_and(|v| v >= CONNECTIVITY_SINCE) {
        let mut args: Vec<&str> = agent.leading_args.iter().map(String::as_str).collect();
        args.push("doctor");
        let answer = crate::project::sources::run_tool(&agent.program, &args, dir, API_PROBE_LIMIT)
            .ok()
            .and_then(|o| {
                parse_connectivity(&crate::sanitize::for_terminal(
                    &o.stdout,
                    crate::sanitize::Lines::Keep,
                ))
            });
        match answer {
            Some((true, line)) => return Check::ok("api", format!("{line} (claude doctor)")),
            Some((false, line)) => {
                return Check::fail("api", format!("{line} (claude doctor)"), API_FIX);
            }
            None => {}
        }
    }
    let base = std::env::var("ANTHROPIC_BASE_URL")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| "https://api.anthropic.com".to_owned());
    match probe_base_url(&base) {
        Ok(how) => Check::ok("api", how),
        Err(why) => Check::fail("api", format!("not reachable: {why}"), API_FIX),
    }
}

/// What in the user's Claude Code settings can wedge `claude -p` in an unattended run: Stop
/// hooks and enabled plugins. **\[pure\]**
#[must_use]
pub(crate) fn user_settings_risks(settings_json: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(settings_json) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for event in ["Stop", "SubagentStop"] {
        if v.pointer(&format!("/hooks/{event}"))
            .and_then(serde_json::Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            out.push(format!("{event} hooks"));
        }
    }
    let plugins: Vec<&str> = v
        .get("enabledPlugins")
        .and_then(serde_json::Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(_, on)| on.as_bool() != Some(false))
                .map(|(k, _)| k.as_str())
                .collect()
        })
        .unwrap_or_default();
    if !plugins.is_empty() {
        out.push(format!("plugins ({})", plugins.join(", ")));
    }
    out
}

/// Warns when the user's settings (`~/.claude/settings.json`, or `$CLAUDE_CONFIG_DIR`) define
/// Stop hooks or plugins, which load in every `claude -p` call unless CLIENT_SETTINGS=project.
fn user_settings_check(client_settings: Option<crate::settings::ClientSettings>) -> Option<Check> {
    let dir = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".claude")))?;
    let path = dir.join("settings.json");
    let text = crate::fsread::read(&path, 4 * 1024 * 1024, crate::fsread::Follow::Yes).ok()?;
    let risks = user_settings_risks(&String::from_utf8_lossy(&text));
    if risks.is_empty() {
        return None;
    }
    let what = format!("{} defines {}", path.display(), risks.join(" and "));
    Some(
        if client_settings == Some(crate::settings::ClientSettings::Project) {
            Check::ok(
                "settings",
                format!("{what}; not loaded by the agent (CLIENT_SETTINGS=project)"),
            )
        } else {
            Check::warn(
                "settings",
                format!("{what}: they run in every unattended `claude -p` call and can wedge it"),
                "set CLIENT_SETTINGS=project in .hankrc (or --client-settings project): the agent then loads only the project's settings (--setting-sources project,local)",
            )
        },
    )
}

/// What the client says about its login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Login {
    pub logged_in: bool,
    /// `claude.ai`, `api_key`, `oauth_token`, … as the client names it.
    pub method: String,
}

/// Reads `claude auth status` output (JSON, pretty-printed or not). **\[pure\]**
#[must_use]
pub(crate) fn parse_auth_status(stdout: &str) -> Option<Login> {
    let start = stdout.find('{')?;
    let v: serde_json::Value = serde_json::from_str(stdout[start..].trim()).ok()?;
    let logged_in = v.get("loggedIn")?.as_bool()?;
    let method = v
        .get("authMethod")
        .and_then(|m| m.as_str())
        .unwrap_or("unknown")
        .to_string();
    let source = v.get("apiKeySource").and_then(|m| m.as_str());
    Some(Login {
        logged_in,
        method: match source {
            Some(s) => format!("{method} from {s}"),
            None => method,
        },
    })
}

/// The login a client that cannot answer `auth status` would use, from the credentials it
/// documents: `env` looks a variable up, `credentials_file` says whether
/// `~/.claude/.credentials.json` exists. **\[pure\]**
#[must_use]
pub(crate) fn login_from_credentials(
    env: &dyn Fn(&str) -> Option<String>,
    credentials_file: bool,
) -> Option<String> {
    for var in [
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_AUTH_TOKEN",
    ] {
        if env(var).is_some_and(|v| !v.trim().is_empty()) {
            return Some(format!("{var} is set"));
        }
    }
    credentials_file.then(|| "~/.claude/.credentials.json exists".to_string())
}

/// The client: found, its version, supported or not.
fn client_check(
    agent: &AgentCommand,
    shown: &str,
) -> (Check, Option<crate::agent::client::Version>) {
    use crate::agent::client::{self, Support, Version};
    let range = client::tested_range();
    let check = match client::probe(&agent.program, &agent.leading_args, PROBE_LIMIT) {
        Ok(line) => match Version::parse(&line) {
            Some(v) => {
                let detail = format!("{shown} — {}", range.describe(v));
                return (
                    if range.support(v) == Support::TooOld {
                        Check::fail("claude", detail, client::UPGRADE_COMMAND)
                    } else {
                        Check::ok("claude", detail)
                    },
                    Some(v),
                );
            }
            None => Check::fail(
                "claude",
                format!(
                    "{shown} --version printed {line:?}: not a Claude Code version (tested {}–{})",
                    range.oldest, range.newest
                ),
                format!(
                    "point --claude-cmd / CLAUDE_CODE_CMD at Claude Code, or install it: {INSTALL}"
                ),
            ),
        },
        Err(why) => Check::fail(
            "claude",
            why,
            format!("reinstall it: {INSTALL}, or point --claude-cmd / CLAUDE_CODE_CMD at it"),
        ),
    };
    (check, None)
}

/// Logged in or a key, without calling the model.
fn login_check(agent: &AgentCommand, dir: &Path) -> Check {
    let mut args: Vec<&str> = agent.leading_args.iter().map(String::as_str).collect();
    args.extend(["auth", "status"]);
    let answer = crate::project::sources::run_tool(&agent.program, &args, dir, PROBE_LIMIT)
        .ok()
        .and_then(|o| parse_auth_status(&o.stdout));
    match answer {
        Some(Login {
            logged_in: true,
            method,
        }) => Check::ok("login", format!("logged in ({method})")),
        Some(Login { .. }) => Check::fail("login", "the client is not logged in", LOGIN),
        None => {
            let home_creds = std::env::var_os("HOME")
                .map(|h| Path::new(&h).join(".claude/.credentials.json").is_file())
                .unwrap_or(false);
            match login_from_credentials(&|k| std::env::var(k).ok(), home_creds) {
                Some(how) => Check::ok(
                    "login",
                    format!("{how} (this client cannot report its login: `auth status` failed)"),
                ),
                None => Check::fail(
                    "login",
                    "no login found: `auth status` gave no answer and there is no \
                     ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN or ~/.claude/.credentials.json",
                    LOGIN,
                ),
            }
        }
    }
}

/// The project layout.
/// Who hank's commits (delivery's, a fleet task's, `hank setup`'s) are made as: the
/// environment's `GIT_AUTHOR_EMAIL`, else git's `user.email`; without either they are made as
/// `hank <hank@localhost>`, which is said here. `None` outside a repository.
fn identity_check(dir: &Path) -> Option<Check> {
    let at = crate::git::Checkout::at(dir);
    if at.git().read(&["rev-parse", "--git-dir"]).is_err() {
        return None;
    }
    if let Ok(email) = std::env::var("GIT_AUTHOR_EMAIL")
        && !email.trim().is_empty()
    {
        return Some(Check::ok(
            "identity",
            format!("commits are made as {} (GIT_AUTHOR_EMAIL)", email.trim()),
        ));
    }
    match at.git().read(&["config", "user.email"]) {
        Ok(out) if !String::from_utf8_lossy(&out).trim().is_empty() => Some(Check::ok(
            "identity",
            format!(
                "commits are made as {} (git config user.email)",
                String::from_utf8_lossy(&out).trim()
            ),
        )),
        _ => Some(Check::warn(
            "identity",
            format!(
                "git has no user.email here: hank's commits are made as `{}`",
                crate::git::IDENTITY
            ),
            "git config --global user.name \"Your Name\" && git config --global user.email you@example.com",
        )),
    }
}

fn project_check(dir: &Path) -> Check {
    let missing = crate::project::generate::missing_required(dir);
    if missing.is_empty() {
        return Check::ok(
            "project",
            format!("{} is ready for the loop", dir.display()),
        );
    }
    let detail = format!("missing {}", missing.join(", "));
    let fix = if crate::project::migrate::flat_layout_detected(dir) {
        "hank migrate"
    } else if dir.join(".hank/PROMPT.md").is_file() {
        "hank enable --repair"
    } else {
        "hank enable (or `hank setup NAME` for a new project)"
    };
    Check::fail("project", detail, fix)
}

/// Shell builtins a check may start with (no program to look for).
const SHELL_BUILTINS: &[&str] = &[
    "cd", "exit", "test", "[", "true", "false", ":", ".", "source", "set", "export", "if", "for",
    "while", "case", "{", "(", "!", "eval", "command", "echo", "printf",
];

/// VERIFY_COMMAND's program exists here (on PATH, or relative to the project when it has a
/// `/`), so that `hank verify` and the run's check can run: `None` without a check.
fn verify_check(command: Option<&str>, dir: &Path) -> Option<Check> {
    let command = command?;
    let program = crate::policy::verify::first_program(command)?;
    let shown = format!("VERIFY_COMMAND=\"{}\"", crate::sanitize::line(command));
    if SHELL_BUILTINS.contains(&program.as_str()) {
        return Some(Check::ok("verify", shown));
    }
    let found = if program.contains('/') {
        let path = dir.join(&program);
        std::fs::metadata(&path).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt as _;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        })
    } else {
        which::which(&program).is_ok()
    };
    Some(if found {
        Check::ok("verify", shown)
    } else {
        Check::fail(
            "verify",
            format!(
                "not ready: `{}` (the program of {shown}) was not found{}",
                crate::sanitize::line(&program),
                if program.contains('/') {
                    " or is not executable"
                } else {
                    " on PATH"
                }
            ),
            "install it, or set VERIFY_COMMAND in .hankrc to a command that exists here",
        )
    })
}

/// REVIEW_AGENT (issue 39): the reviewer's profile and program, found as a run would find them,
/// and its limits (`None` when no reviewer is set).
fn review_check(s: &settings::Settings) -> Option<Check> {
    let name = s.review_agent.value.as_deref()?;
    Some(match crate::agent::profile::resolve_reviewer(s) {
        Ok(Some(agent)) => Check::ok(
            "review",
            format!(
                "REVIEW_AGENT={} ({}), read-only, in a fresh session; at most {} round(s), reviews stop past {:.0}% of the run's cost",
                crate::sanitize::line(name),
                agent.command.program.display(),
                s.review_max_rounds.value,
                s.review_max_share.value * 100.0
            ),
        ),
        Ok(None) => return None,
        Err(e) => Check::failed(
            "review",
            &e,
            "install the reviewer's client, or set REVIEW_AGENT_CMD to its path (or unset REVIEW_AGENT)",
        ),
    })
}

/// `hank doctor [--json]`: exit 0 when every required check passes, 1 otherwise.
/// With DELIVER set: the remote, the forge login and the push permission, each with its fix.
fn delivery_checks(s: &settings::Settings, dir: &Path) -> Vec<Check> {
    if s.deliver.value == settings::DeliverMode::None {
        return Vec::new();
    }
    let remote = &s.deliver_remote.value;
    let url = match crate::deliver::remote_url(dir, remote) {
        Ok(u) => u,
        Err(e) => {
            return vec![Check::failed(
                "remote",
                &e,
                &format!("git remote add {remote} URL"),
            )];
        }
    };
    let mut checks = vec![Check::ok(
        "remote",
        format!("{remote} → {}", crate::sanitize::line(&url)),
    )];
    let forge = match crate::forge::detect(dir, &url, &crate::forge::Env::from_process()) {
        Ok(f) => f,
        Err(e) => {
            checks.push(Check::failed(
                "forge",
                &e,
                "run `gh auth login`, or set GH_TOKEN",
            ));
            return checks;
        }
    };
    match forge.access() {
        Ok(a) => {
            checks.push(Check::ok("forge", format!("{} as {} for {}", forge.describe(), a.login, forge.repo())));
            checks.push(match a.can_push {
                Some(true) => Check::ok("push", format!("{} may push to {}", a.login, forge.repo())),
                Some(false) => Check::fail(
                    "push",
                    format!("{} may not push to {}", a.login, forge.repo()),
                    "ask for write access to the repository, or deliver to a fork (DELIVER_REMOTE and GH_REPO)",
                ),
                None => Check::warn(
                    "push",
                    format!("{} did not say whether {} may push", forge.describe(), a.login),
                    "`git push --dry-run` to the remote tells",
                ),
            });
        }
        Err(e) => checks.push(Check::fail(
            "forge",
            format!("{}: {e}", forge.describe()),
            "run `gh auth login` (or `glab auth login`), or set GH_TOKEN to a token that may push and open pull requests",
        )),
    }
    checks
}

/// A workspace's repositories (`.hank/workspace.toml`, issue 51): one `repo` line each —
/// present, a checkout of its own, clean, on its base, its `origin` answering and taking a
/// push (`git push --dry-run`) —, or the file's problem. Nothing without the file.
fn workspace_checks(dir: &Path, deliver: bool) -> Vec<Check> {
    use crate::policy::workspace as rules;
    let ws = match crate::workspace::load(dir) {
        Ok(Some(ws)) => ws,
        Ok(None) => return Vec::new(),
        Err(e) => {
            return vec![Check::failed(
                "workspace",
                &e,
                "correct .hank/workspace.toml (docs/fleet.md, Workspaces)",
            )];
        }
    };
    let mut checks = vec![Check::ok(
        "workspace",
        format!(
            "{} repositor{}: {}",
            ws.repos.len(),
            if ws.repos.len() == 1 { "y" } else { "ies" },
            ws.names()
        ),
    )];
    for (r, f) in ws.repos.iter().zip(crate::workspace::facts(dir, &ws)) {
        let one = rules::Workspace {
            repos: vec![r.clone()],
        };
        let refused = rules::refusals(&one, std::slice::from_ref(&f));
        if !refused.is_empty() {
            checks.push(Check::fail(
                "repo",
                refused.join("; "),
                "fix the repository, or its table in .hank/workspace.toml",
            ));
            continue;
        }
        let origin = f.origin.clone().unwrap_or_default();
        let remote = crate::workspace::remote_facts(r, &f);
        let on = f.branch.as_deref().unwrap_or("?");
        let head = format!(
            "{} ({}): clean, on {on}, origin {}",
            r.name,
            r.given,
            crate::sanitize::line(&origin)
        );
        checks.push(match (&remote.reachable, &remote.push) {
            (Ok(()), Ok(())) => Check::ok(
                "repo",
                format!("{head} answers and would take a push (dry run)"),
            ),
            (Err(e), _) => Check::fail(
                "repo",
                format!("{head} does not answer: {e}"),
                "check the remote's URL (`git remote -v`) and the network or login to it",
            ),
            (Ok(()), Err(e)) => Check::fail(
                "repo",
                format!("{head} would refuse a push: {e}"),
                "ask for write access to the repository, or point origin at one you may push to",
            ),
        });
        if deliver {
            checks.push(repo_forge_check(r, &origin));
        }
    }
    checks
}

/// With DELIVER set, a workspace repository's forge: its login and push permission, its
/// `forge` key standing for `GH_REPO`.
fn repo_forge_check(r: &crate::policy::workspace::Repo, origin: &str) -> Check {
    let mut env = crate::forge::Env::from_process();
    if let Some(f) = &r.forge {
        env.gh_repo = Some(f.clone());
    }
    let fix = "run `gh auth login` (or `glab auth login`), or set GH_TOKEN to a token that may push and open pull requests; name the forge repository with `forge = \"OWNER/NAME\"` in its table";
    let forge = match crate::forge::detect(&r.path, origin, &env) {
        Ok(f) => f,
        Err(e) => return Check::fail("repo", format!("{}: forge: {e}", r.name), fix),
    };
    match forge.access() {
        Ok(a) => match a.can_push {
            Some(false) => Check::fail(
                "repo",
                format!(
                    "{}: {} as {} may not push to {}",
                    r.name,
                    forge.describe(),
                    a.login,
                    forge.repo()
                ),
                "ask for write access to the repository",
            ),
            can => Check::ok(
                "repo",
                format!(
                    "{}: {} as {} for {}{}",
                    r.name,
                    forge.describe(),
                    a.login,
                    forge.repo(),
                    if can == Some(true) {
                        ", may push"
                    } else {
                        " (push permission not said)"
                    }
                ),
            ),
        },
        Err(e) => Check::fail(
            "repo",
            format!("{}: {}: {e}", r.name, forge.describe()),
            fix,
        ),
    }
}

/// SANDBOX: what confinement the next run's agent gets on this kernel, and why.
fn sandbox_check(s: &settings::Settings) -> Check {
    let mode = s.sandbox.value;
    match crate::sandbox::decide(
        mode,
        crate::sandbox::available(),
        crate::sandbox::Extras::here(),
        crate::proc::agent::netns_probe,
    ) {
        Ok(c @ crate::sandbox::Confinement::Unconfined { warn: true, .. }) => Check::warn(
            "sandbox",
            c.describe(),
            "a kernel with Landlock ABI 4 (Linux 6.7+) confines it; SANDBOX=off silences this",
        ),
        Ok(c) => {
            let detail = format!(
                "{} (SANDBOX={} from {})",
                c.describe(),
                mode.name(),
                s.sandbox.source
            );
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let refused = match c {
                crate::sandbox::Confinement::Landlock { .. } => crate::sandbox::refused_grants(
                    &s.sandbox_read.value,
                    &s.sandbox_write.value,
                    home.as_deref(),
                ),
                crate::sandbox::Confinement::Unconfined { .. } => Vec::new(),
            };
            if refused.is_empty() {
                Check::ok("sandbox", detail)
            } else {
                Check::warn(
                    "sandbox",
                    format!("{detail}; {}", refused.join("; ")),
                    "name the folders the agent needs in SANDBOX_READ / SANDBOX_WRITE, never one that holds credentials",
                )
            }
        }
        Err(e) => Check::fail(
            "sandbox",
            e,
            "run on a kernel with Landlock ABI 4 (Linux 6.7+), or set SANDBOX=auto / off",
        ),
    }
}

/// The client check when `.hankrc` cannot be read: the program of `--claude-cmd`, else of
/// `CLAUDE_CODE_CMD`, else `claude` (never one `.hankrc` names).
fn default_client_check(flag: Option<&str>, dir: &std::path::Path) -> Check {
    use crate::settings::{Source, Sourced};
    let cmd = match (flag, std::env::var("CLAUDE_CODE_CMD").ok()) {
        (Some(f), _) => Sourced {
            value: f.to_string(),
            source: Source::Flag("--claude-cmd"),
        },
        (None, Some(e)) if !e.trim().is_empty() => Sourced {
            value: e,
            source: Source::Env,
        },
        _ => Sourced {
            value: "claude".to_string(),
            source: Source::Default,
        },
    };
    match settings::resolve_agent(&cmd, dir) {
        Ok(agent) => {
            let shown = format!(
                "{} (from {}; .hankrc is not read until it is fixed)",
                cmd.value, cmd.source
            );
            client_check(&agent, &shown).0
        }
        Err(e) => Check::fail(
            "claude",
            e.to_string(),
            format!("{INSTALL}, or pass --claude-cmd / set CLAUDE_CODE_CMD to its path"),
        ),
    }
}

pub(crate) fn run(args: &cli::DoctorArgs) -> Result<u8> {
    let dir = project_dir()?;
    crate::approval::require(&dir, args.accept_config, "hank doctor")?;
    let mut checks = Vec::new();
    let flags = settings::Flags {
        claude_cmd: args.claude_cmd.clone(),
        ..settings::Flags::default()
    };
    let settings = settings::load(&flags, &dir);
    match &settings {
        Ok(s) => {
            match settings::resolve_agent(&s.claude_cmd, &dir) {
                Ok(agent) => {
                    let shown = format!("{} (from {})", s.claude_cmd.value, s.claude_cmd.source);
                    let (client, version) = client_check(&agent, &shown);
                    let usable = client.ok;
                    checks.push(client);
                    if usable {
                        checks.push(login_check(&agent, &dir));
                        checks.push(api_check(&agent, &dir, version));
                    }
                }
                Err(e) => checks.push(Check::fail(
                    "claude",
                    e.to_string(),
                    format!("{INSTALL}, or pass --claude-cmd / set CLAUDE_CODE_CMD to its path"),
                )),
            }
            let mut detail = "valid (.hankrc + environment)".to_string();
            for w in &s.warnings {
                detail.push_str("; ");
                detail.push_str(w);
            }
            checks.push(Check::ok("config", detail));
            if let Some(c) = user_settings_check(Some(s.client_settings.value)) {
                checks.push(c);
            }
            if let Some(c) = verify_check(s.verify_command.value.as_deref(), &dir) {
                checks.push(c);
            }
            checks.extend(review_check(s));
            checks.push(sandbox_check(s));
            checks.extend(delivery_checks(s, &dir));
            checks.extend(workspace_checks(
                &dir,
                s.deliver.value != settings::DeliverMode::None,
            ));
        }
        Err(e) => {
            checks.push(Check::failed(
                "config",
                e,
                "correct the value named above in .hankrc or the environment",
            ));
            // The client is still checked — the flag's, CLAUDE_CODE_CMD's or `claude` — so
            // that both are fixed in one go.
            checks.push(default_client_check(args.claude_cmd.as_deref(), &dir));
        }
    }
    checks.push(match crate::git::version() {
        Some(v) => Check::ok("git", v),
        None => Check::fail(
            "git",
            "not found: progress falls back to file times",
            "install git (apt install git, brew install git, …)",
        ),
    });
    let tmux = which::which("tmux").ok().map(|p| {
        crate::proc::Cmd::new(p)
            .arg("-V")
            .timeout(CHECK_TIMEOUT)
            .run()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    });
    checks.push(Check::ok(
        "tmux",
        tmux.unwrap_or_else(|| "not found (only needed for `hank --monitor`)".into()),
    ));
    checks.extend(identity_check(&dir));
    checks.push(project_check(&dir));
    let all_ok = checks.iter().all(|c| c.ok);
    if args.json {
        let v = json!({
            "ok": all_ok,
            "checks": checks.iter().map(|c| json!({"name": c.name, "ok": c.ok, "warning": c.warning, "detail": c.detail, "fix": c.fix})).collect::<Vec<_>>(),
            "settings": settings.as_ref().map(|s| s.describe().into_iter().map(|(k, v, src)| json!({"key": k, "value": v, "source": src})).collect::<Vec<_>>()).unwrap_or_default(),
        });
        out(&format!("{v}\n"))?;
    } else {
        let mut text = String::new();
        for c in &checks {
            text.push_str(&format!(
                "{} {:<8} {}\n",
                match (c.ok, c.warning) {
                    (true, false) => "ok  ",
                    (true, true) => "warn",
                    (false, _) => "FAIL",
                },
                c.name,
                c.detail
            ));
            if let Some(fix) = &c.fix {
                text.push_str(&format!("              fix: {fix}\n"));
            }
        }
        if let Ok(s) = &settings {
            text.push_str("\neffective settings (value, source):\n");
            for (k, v, src) in s.describe() {
                text.push_str(&format!("  {k:<32} {v:<24} {src}\n"));
            }
        }
        out(&text)?;
    }
    Ok(if all_ok { exit::OK } else { exit::ERROR })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the released clients print (2.1.197 and 2.1.330, run with an empty HOME).
    #[test]
    fn auth_status_table() {
        let cases: &[(&str, Option<(bool, &str)>)] = &[
            (
                "{\n  \"loggedIn\": false,\n  \"authMethod\": \"none\",\n  \"apiProvider\": \"firstParty\"\n}\n",
                Some((false, "none")),
            ),
            (
                "{\"loggedIn\": true, \"authMethod\": \"api_key\", \"apiProvider\": \"firstParty\", \"apiKeySource\": \"ANTHROPIC_API_KEY\"}",
                Some((true, "api_key from ANTHROPIC_API_KEY")),
            ),
            (
                "{\"loggedIn\":true,\"authMethod\":\"claude.ai\",\"loginExpiresAt\":null}",
                Some((true, "claude.ai")),
            ),
            ("error: unknown command 'auth'", None),
            ("", None),
            ("{\"authMethod\":\"none\"}", None),
        ];
        answers_table(cases, |text| {
            parse_auth_status(text).map(|l| (l.logged_in, l.method))
        });
    }

    /// Each case's client output read by `parse` (a yes or no and its text), compared with the
    /// case; a failure names the output.
    fn answers_table(
        cases: &[(&str, Option<(bool, &str)>)],
        parse: impl Fn(&str) -> Option<(bool, String)>,
    ) {
        for (text, want) in cases {
            let got = parse(text);
            assert_eq!(
                got.as_ref().map(|(yes, what)| (*yes, what.as_str())),
                *want,
                "{text:?}"
            );
        }
    }

    /// What `claude doctor` printed (2.1.332, against 127.0.0.1: a closed port, then a fake
    /// that answers 200), and clients without the section.
    #[test]
    fn connectivity_table() {
        let cases: &[(&str, Option<(bool, &str)>)] = &[
            (
                "Claude Code doctor\n\nAPI connectivity\n- API (custom host): answered HTTP 200 in 2 ms\n- ANTHROPIC_BASE_URL: set to a custom host\n\nRemote Control\n",
                Some((true, "API (custom host): answered HTTP 200 in 2 ms")),
            ),
            (
                "API connectivity\n- API (custom host): failed after 14 ms: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)\n",
                Some((
                    false,
                    "API (custom host): failed after 14 ms: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
                )),
            ),
            // 2.1.330: no section.
            (
                "Claude Code doctor\n\nRemote Control\n- Not connected\n\nNo installation issues found.\n",
                None,
            ),
            // A section without an API line, and an API line after the section.
            (
                "API connectivity\n- ANTHROPIC_BASE_URL: set\n\n- API (x): answered HTTP 200\n",
                None,
            ),
            ("", None),
        ];
        answers_table(cases, parse_connectivity);
    }

    #[test]
    fn base_url_endpoints() {
        type Endpoint<'a> = Option<(&'a str, u16, bool)>;
        let cases: &[(&str, Endpoint<'_>)] = &[
            (
                "https://api.anthropic.com",
                Some(("api.anthropic.com", 443, false)),
            ),
            (
                "https://api.anthropic.com/",
                Some(("api.anthropic.com", 443, false)),
            ),
            (
                "http://127.0.0.1:8080/v1?x",
                Some(("127.0.0.1", 8080, true)),
            ),
            (
                "http://user:pw@proxy.local",
                Some(("proxy.local", 80, true)),
            ),
            ("http://[::1]:9000", Some(("::1", 9000, true))),
            ("https://h:notaport", None),
            ("ftp://h", None),
            ("api.anthropic.com", None),
            ("https://", None),
        ];
        for (url, want) in cases {
            let got = url_endpoint(url);
            assert_eq!(
                got.as_ref().map(|(h, p, plain)| (h.as_str(), *p, *plain)),
                *want,
                "{url}"
            );
        }
    }

    #[test]
    fn user_settings_risks_table() {
        let cases: &[(&str, &[&str])] = &[
            (r#"{"hooks":{"Stop":[{"hooks":[]}]}}"#, &["Stop hooks"]),
            (r#"{"hooks":{"Stop":[]}}"#, &[]),
            (
                r#"{"hooks":{"SubagentStop":[{}],"PreToolUse":[{}]}}"#,
                &["SubagentStop hooks"],
            ),
            (
                r#"{"enabledPlugins":{"a@m":true,"b@m":false}}"#,
                &["plugins (a@m)"],
            ),
            (r#"{"enabledPlugins":{"b@m":false}}"#, &[]),
            (r#"{"model":"opus"}"#, &[]),
            ("not json", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(user_settings_risks(text), *want, "{text}");
        }
    }

    #[test]
    fn credentials_fallback_table() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        assert_eq!(
            login_from_credentials(&env(&[("ANTHROPIC_API_KEY", "sk-x")]), false).as_deref(),
            Some("ANTHROPIC_API_KEY is set")
        );
        assert_eq!(
            login_from_credentials(&env(&[("CLAUDE_CODE_OAUTH_TOKEN", "t")]), false).as_deref(),
            Some("CLAUDE_CODE_OAUTH_TOKEN is set")
        );
        assert_eq!(
            login_from_credentials(&env(&[("ANTHROPIC_API_KEY", " ")]), true).as_deref(),
            Some("~/.claude/.credentials.json exists")
        );
        assert_eq!(login_from_credentials(&env(&[]), false), None);
    }
}
