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
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::cli;
use crate::error::Result;
use crate::exit;
use crate::settings::{self, AgentCommand};

use super::{out, project_dir};

const PROBE_LIMIT: Duration = Duration::from_secs(10);
const INSTALL: &str = "npm install -g @anthropic-ai/claude-code";
const LOGIN: &str = "run `claude` once and log in (/login), or set ANTHROPIC_API_KEY";

/// One `hank doctor` finding.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
    /// The command (or step) that fixes a failed check.
    fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }
    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
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

fn version_of(program: &Path, args: &[String]) -> Option<String> {
    let output = std::process::Command::new(program)
        .args(args)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output.status.success().then(|| {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    })
}

/// The client: found, its version, supported or not.
fn client_check(agent: &AgentCommand, shown: &str) -> Check {
    use crate::agent::client::{self, Support, Version};
    let range = client::tested_range();
    match client::probe(&agent.program, &agent.leading_args, PROBE_LIMIT) {
        Ok(line) => match Version::parse(&line) {
            Some(v) => {
                let detail = format!("{shown} — {}", range.describe(v));
                if range.support(v) == Support::TooOld {
                    Check::fail("claude", detail, client::UPGRADE_COMMAND)
                } else {
                    Check::ok("claude", detail)
                }
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
    }
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

/// `hank doctor [--json]`: exit 0 when every required check passes, 1 otherwise.
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
                    let client = client_check(&agent, &shown);
                    let usable = client.ok;
                    checks.push(client);
                    if usable {
                        checks.push(login_check(&agent, &dir));
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
        }
        Err(e) => checks.push(Check::fail(
            "config",
            e.to_string(),
            e.hint().map_or_else(
                || "correct the value named above in .hankrc or the environment".to_string(),
                ToString::to_string,
            ),
        )),
    }
    checks.push(
        match which::which("git").ok().and_then(|p| version_of(&p, &[])) {
            Some(v) => Check::ok("git", v),
            None => Check::fail(
                "git",
                "not found: progress falls back to file times",
                "install git (apt install git, brew install git, …)",
            ),
        },
    );
    let tmux = which::which("tmux").ok().map(|p| {
        std::process::Command::new(p)
            .arg("-V")
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    });
    checks.push(Check::ok(
        "tmux",
        tmux.unwrap_or_else(|| "not found (only needed for `hank --monitor`)".into()),
    ));
    checks.push(project_check(&dir));
    let all_ok = checks.iter().all(|c| c.ok);
    if args.json {
        let v = json!({
            "ok": all_ok,
            "checks": checks.iter().map(|c| json!({"name": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix})).collect::<Vec<_>>(),
            "settings": settings.as_ref().map(|s| s.describe().into_iter().map(|(k, v, src)| json!({"key": k, "value": v, "source": src})).collect::<Vec<_>>()).unwrap_or_default(),
        });
        out(&format!("{v}\n"))?;
    } else {
        let mut text = String::new();
        for c in &checks {
            text.push_str(&format!(
                "{} {:<8} {}\n",
                if c.ok { "ok  " } else { "FAIL" },
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
        for (text, want) in cases {
            let got = parse_auth_status(text);
            assert_eq!(
                got.as_ref().map(|l| (l.logged_in, l.method.as_str())),
                *want,
                "{text:?}"
            );
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
