//! Small commands: `status`, `circuit`, `reset circuit|session`, `doctor`, `completions`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use clap::CommandFactory;
use jiff::Timestamp;
use serde_json::json;

use crate::cli::{self, Cli, ResetWhat};
use crate::config;
use crate::error::{HankError, Result};
use crate::exit;
use crate::state::Store;

fn project_dir() -> Result<PathBuf> {
    std::env::current_dir()
        .map_err(|e| HankError::Other(format!("cannot read the current directory: {e}")))
}

fn out(text: &str) -> Result<()> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(HankError::Other(format!("failed to write to stdout: {e}"))),
    }
}

fn require_hank_dir(dir: &Path) -> Result<Store> {
    let store = Store::new(dir);
    if !store.dir().is_dir() {
        return Err(HankError::usage_hint(
            format!("{} is not a hank project (no .hank/ folder)", dir.display()),
            "run `hank enable` here, or `hank setup NAME` for a new project",
        ));
    }
    Ok(store)
}

/// `hank status [--json]`.
pub fn status(args: &cli::StatusArgs) -> Result<u8> {
    let dir = project_dir()?;
    let store = require_hank_dir(&dir)?;
    let path = store.status_path();
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if args.json {
                out("null\n")?;
            } else {
                out(
                    "no status yet: the loop has not run in this project (start it with `hank`)\n",
                )?;
            }
            return Ok(exit::OK);
        }
        Err(e) => return Err(HankError::io("failed to read", &path, e)),
    };
    if args.json {
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        return out(&text).map(|()| exit::OK);
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        HankError::Other(format!(
            "{} is not valid JSON ({e}); is a loop writing it?",
            path.display()
        ))
    })?;
    out(&render_status(&v))?;
    Ok(exit::OK)
}

/// Human rendering of a status.json value (tolerant of missing fields).
#[must_use]
pub fn render_status(v: &serde_json::Value) -> String {
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(ToString::to_string);
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
    let mut lines = Vec::new();
    lines.push(format!(
        "state:        {}{}",
        s("state").unwrap_or_else(|| "unknown".into()),
        s("exit_reason")
            .map(|r| format!(" ({r}, exit {})", n("exit_code").unwrap_or(0)))
            .unwrap_or_default()
    ));
    lines.push(format!("loop:         {}", n("loop_count").unwrap_or(0)));
    lines.push(format!(
        "calls:        {}/{} in the last hour{}",
        n("calls_in_window").unwrap_or(0),
        n("max_calls_per_hour").unwrap_or(0),
        s("next_call_at")
            .map(|t| format!(", next free slot {t}"))
            .unwrap_or_default()
    ));
    if let Some(reason) = s("wait_reason") {
        lines.push(format!(
            "waiting:      {reason} until {}",
            s("waiting_until").unwrap_or_default()
        ));
    }
    lines.push(format!(
        "circuit:      {}{}",
        s("circuit_state").unwrap_or_else(|| "?".into()),
        s("circuit_reason")
            .filter(|r| !r.is_empty())
            .map(|r| format!(" — {r}"))
            .unwrap_or_default()
    ));
    if let Some(plan) = v.get("fix_plan") {
        lines.push(format!(
            "fix_plan:     {}/{} done",
            plan.get("done")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
            plan.get("total")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        ));
    }
    lines.push(format!(
        "cost:         ${:.4}",
        v.get("total_cost_usd")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0)
    ));
    if let Some(id) = s("session_id") {
        lines.push(format!("session:      {id}"));
    }
    if let Some(last) = v.get("last_loop").filter(|l| !l.is_null()) {
        let g = |k: &str| {
            last.get(k)
                .map(|x| x.to_string().trim_matches('"').to_string())
                .unwrap_or_default()
        };
        lines.push(format!(
            "last loop:    #{} {} · status {} · {} · {} file(s) · EXIT_SIGNAL {}",
            g("number"),
            g("outcome"),
            g("status"),
            g("work_type"),
            g("files_changed"),
            g("exit_signal")
        ));
        let rec = g("recommendation");
        if !rec.is_empty() && rec != "null" {
            lines.push(format!("next:         {rec}"));
        }
    }
    lines.push(format!(
        "updated:      {}",
        s("updated_at").unwrap_or_default()
    ));
    lines.join("\n") + "\n"
}

/// `hank circuit [--json]`.
pub fn circuit(args: &cli::CircuitArgs) -> Result<u8> {
    let dir = project_dir()?;
    let store = require_hank_dir(&dir)?;
    let loaded = read_state_readonly(&store)?;
    let b = &loaded.breaker;
    if args.json {
        let v = json!({
            "state": b.state.as_str(),
            "reason": b.reason,
            "opened_at": b.opened_at.map(|t| t.to_string()),
            "no_progress_streak": b.no_progress_streak,
            "same_error_streak": b.same_error_streak,
            "failure_streak": b.failure_streak,
            "history": b.history,
        });
        out(&format!("{v}\n"))?;
        return Ok(exit::OK);
    }
    let mut text = format!(
        "circuit: {}{}\ncounters: no progress {} · same error {} · failed calls {}\n",
        b.state.as_str(),
        if b.reason.is_empty() {
            String::new()
        } else {
            format!(" — {}", b.reason)
        },
        b.no_progress_streak,
        b.same_error_streak,
        b.failure_streak
    );
    if let Some(at) = b.opened_at {
        text.push_str(&format!("opened at: {at}\n"));
    }
    if b.history.is_empty() {
        text.push_str("no transitions yet\n");
    } else {
        text.push_str("recent transitions:\n");
        for t in b.history.iter().rev().take(10) {
            text.push_str(&format!(
                "  {} {} → {}: {}\n",
                t.at,
                t.from.as_str(),
                t.to.as_str(),
                t.reason
            ));
        }
    }
    out(&text)?;
    Ok(exit::OK)
}

fn read_state_readonly(store: &Store) -> Result<crate::state::State> {
    let path = store.state_path();
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            HankError::Other(format!(
                "{} is unreadable ({e}); the next `hank run` will move it aside",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(crate::state::State::default()),
        Err(e) => Err(HankError::io("failed to read", &path, e)),
    }
}

/// `hank reset circuit|session`. Refuses while a loop runs (it owns state.json).
pub fn reset(what: ResetWhat) -> Result<u8> {
    let dir = project_dir()?;
    let store = require_hank_dir(&dir)?;
    let _lock = store.lock().map_err(|e| match e {
        HankError::Usage { message, .. } => {
            HankError::usage_hint(message, "stop the running loop first (Ctrl-C), then reset")
        }
        other => other,
    })?;
    let loaded = store.load_state(Timestamp::now())?;
    let mut state = loaded.state;
    let msg = match what {
        ResetWhat::Circuit => {
            let t = state
                .breaker
                .reset(Timestamp::now(), "manual reset (`hank reset circuit`)");
            if let Some(t) = &t {
                let line = json!({
                    "schema_version": crate::state::STATUS_SCHEMA, "type": "circuit_changed",
                    "at": t.at.to_string(), "from": t.from.as_str(), "to": t.to.as_str(), "reason": t.reason,
                });
                store.append_event(&line.to_string())?;
            }
            "circuit breaker reset to CLOSED"
        }
        ResetWhat::Session => {
            state.session = None;
            "session forgotten: the next loop starts a new conversation"
        }
    };
    store.save_state(&state)?;
    if let Some(mut status) = store.read_status() {
        status.circuit_state = state.breaker.state;
        status.circuit_reason = state.breaker.reason.clone();
        status.session_id = state.session.as_ref().map(|s| s.id.clone());
        status.updated_at = Timestamp::now();
        store.write_status(&status)?;
    }
    eprintln!("hank: {msg}");
    Ok(exit::OK)
}

/// One `hank doctor` finding.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
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

/// `hank doctor [--json]`: exit 0 when every required check passes, 1 otherwise.
pub fn doctor(args: &cli::DoctorArgs) -> Result<u8> {
    let dir = project_dir()?;
    let mut checks = Vec::new();
    let settings = config::load(&cli::RunArgs::default(), &dir);
    match &settings {
        Ok(s) => {
            match config::resolve_agent(&s.claude_cmd, &dir) {
                Ok(agent) => {
                    use crate::runner::client::{self, Support, Version};
                    let range = client::tested_range();
                    let probe = client::probe(
                        &agent.program,
                        &agent.leading_args,
                        std::time::Duration::from_secs(10),
                    );
                    let (ok, detail) = match probe {
                        Ok(line) => match Version::parse(&line) {
                            Some(v) => (
                                range.support(v) != Support::TooOld,
                                format!("{} — {}", agent.program.display(), range.describe(v)),
                            ),
                            None => (
                                false,
                                format!(
                                    "{} --version printed {line:?}: not a Claude Code version \
                                     (tested {}–{})",
                                    agent.program.display(),
                                    range.oldest,
                                    range.newest
                                ),
                            ),
                        },
                        Err(why) => (false, why),
                    };
                    checks.push(Check {
                        name: "claude",
                        ok,
                        detail,
                    });
                }
                Err(e) => checks.push(Check {
                    name: "claude",
                    ok: false,
                    detail: e.to_string(),
                }),
            }
            checks.push(Check {
                name: "config",
                ok: true,
                detail: "valid (.hankrc + environment)".into(),
            });
        }
        Err(e) => checks.push(Check {
            name: "config",
            ok: false,
            detail: e.to_string(),
        }),
    }
    let git = which::which("git").ok().and_then(|p| version_of(&p, &[]));
    checks.push(Check {
        name: "git",
        ok: git.is_some(),
        detail: git.unwrap_or_else(|| "not found: progress falls back to file times".into()),
    });
    let tmux = which::which("tmux").ok().map(|p| {
        std::process::Command::new(p)
            .arg("-V")
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    });
    checks.push(Check {
        name: "tmux",
        ok: true,
        detail: tmux.unwrap_or_else(|| "not found (only needed for `hank --monitor`)".into()),
    });
    let layout: Vec<&str> = [
        ".hank/PROMPT.md",
        ".hank/fix_plan.md",
        ".hank/AGENT.md",
        ".hankrc",
    ]
    .into_iter()
    .filter(|f| !dir.join(f).is_file())
    .collect();
    checks.push(Check {
        name: "project",
        ok: layout.is_empty(),
        detail: if layout.is_empty() {
            format!("{} is ready for the loop", dir.display())
        } else {
            format!("missing {} (run `hank enable`)", layout.join(", "))
        },
    });
    let all_ok = checks.iter().all(|c| c.ok);
    if args.json {
        let v = json!({
            "ok": all_ok,
            "checks": checks.iter().map(|c| json!({"name": c.name, "ok": c.ok, "detail": c.detail})).collect::<Vec<_>>(),
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

/// `hank completions SHELL`.
pub fn completions(args: &cli::CompletionsArgs) -> Result<u8> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "hank", &mut buf);
    out(&String::from_utf8_lossy(&buf))?;
    Ok(exit::OK)
}
