//! `hank doctor [--json]`: the client and its version, git, tmux, the layout, the config.

use std::path::Path;
use std::process::Stdio;

use serde_json::json;

use crate::cli;
use crate::error::Result;
use crate::exit;
use crate::settings;

use super::{out, project_dir};

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
pub(crate) fn run(args: &cli::DoctorArgs) -> Result<u8> {
    let dir = project_dir()?;
    let mut checks = Vec::new();
    let settings = settings::load(&settings::Flags::default(), &dir);
    match &settings {
        Ok(s) => {
            match settings::resolve_agent(&s.claude_cmd, &dir) {
                Ok(agent) => {
                    use crate::agent::client::{self, Support, Version};
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
            let mut detail = "valid (.hankrc + environment)".to_string();
            for w in &s.warnings {
                detail.push_str("; ");
                detail.push_str(w);
            }
            checks.push(Check {
                name: "config",
                ok: true,
                detail,
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
