//! The agent CLIs other than Claude Code (driven through profiles, `templates/agents/*.toml`):
//! one suite of cases per CLI, each run with the **real** CLI against a fake of its
//! provider's API on 127.0.0.1.
//!
//! The CLIs come from `scripts/install-agents.sh` (npm, and PyPI for aider; pinned in
//! `scripts/agent-versions.env`) and are found through `HANK_REAL_AGENTS="codex=/path:…"` (what
//! the script prints). Each case is a trial named `<name>-<version>::<case>`. A suite whose CLI
//! `HANK_REAL_AGENTS` does not name is reported as **ignored** (`<name>::<case>`), with a
//! closing line saying why; under `CI=true` that is a failure instead.

use std::cell::RefCell;
use std::path::PathBuf;
use std::process::Command;

use libtest_mimic::{Failed, Trial};

/// A real agent CLI under test.
#[derive(Debug, Clone)]
pub(crate) struct Agent {
    /// The profile name (`codex`).
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    /// `0.169.0`, the first word of `--version` that starts with a digit.
    pub(crate) version: String,
}

thread_local! {
    static AGENT: RefCell<Option<Agent>> = const { RefCell::new(None) };
}

/// The agent CLI of the trial running on this thread.
pub(crate) fn agent() -> Agent {
    AGENT
        .with(|a| a.borrow().clone())
        .expect("an agent trial sets its CLI")
}

type Case = fn();

/// Every agent suite: the profile name and its cases. One line per CLI.
const SUITES: &[(&str, &[(&str, Case)])] = &[
    ("codex", crate::agent_codex::CASES),
    ("gemini", crate::agent_gemini::CASES),
    ("opencode", crate::agent_opencode::CASES),
    ("copilot", crate::agent_copilot::CASES),
    ("aider", crate::agent_aider::CASES),
];

/// `name=path` pairs of `HANK_REAL_AGENTS`, each checked with `--version`.
fn named() -> Result<Vec<Agent>, String> {
    let Ok(list) = std::env::var("HANK_REAL_AGENTS") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for pair in list.split(':').filter(|p| !p.trim().is_empty()) {
        let (name, path) = pair
            .split_once('=')
            .ok_or_else(|| format!("HANK_REAL_AGENTS: expected name=path, got {pair:?}"))?;
        let path = PathBuf::from(path.trim());
        let o = Command::new(&path)
            .arg("--version")
            .output()
            .map_err(|e| format!("HANK_REAL_AGENTS: {name}: {}: {e}", path.display()))?;
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        let version = text
            .split_whitespace()
            .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
            // "GitHub Copilot CLI 1.0.102." ends its sentence.
            .map(|w| w.trim_end_matches('.'))
            .filter(|_| o.status.success())
            .ok_or_else(|| {
                format!(
                    "HANK_REAL_AGENTS: {name}: {} --version printed {text:?}",
                    path.display()
                )
            })?
            .to_string();
        out.push(Agent {
            name: name.trim().to_string(),
            path,
            version,
        });
    }
    Ok(out)
}

/// Adds every suite's trials; returns the closing notes (suites skipped, and why).
pub(crate) fn trials(ci: bool, trials: &mut Vec<Trial>) -> Vec<String> {
    let agents = match named() {
        Ok(a) => a,
        Err(e) => {
            trials.push(Trial::test("agents", move || Err(Failed::from(e.clone()))));
            return Vec::new();
        }
    };
    let mut notes = Vec::new();
    for (name, cases) in SUITES {
        let Some(agent) = agents.iter().find(|a| a.name == *name) else {
            let why = format!(
                "HANK_REAL_AGENTS does not name {name} (export HANK_REAL_AGENTS=$(scripts/install-agents.sh))"
            );
            for (case, _) in *cases {
                let trial_name = format!("{name}::{case}");
                if ci {
                    let msg = format!("CI=true requires the real {name}: {why}");
                    trials.push(Trial::test(trial_name, move || {
                        Err(Failed::from(msg.clone()))
                    }));
                } else {
                    let msg = why.clone();
                    trials.push(
                        Trial::test(trial_name, move || Err(Failed::from(msg.clone())))
                            .with_kind("no agent CLI")
                            .with_ignored_flag(true),
                    );
                }
            }
            if !ci {
                notes.push(format!(
                    "{} {name} cases SKIPPED (reported as ignored): {why}",
                    cases.len()
                ));
            }
            continue;
        };
        for (case, run) in *cases {
            let agent = agent.clone();
            let run = *run;
            let trial_name = format!("{name}-{}::{case}", agent.version);
            trials.push(Trial::test(trial_name, move || {
                AGENT.with(|slot| *slot.borrow_mut() = Some(agent.clone()));
                crate::run_caught(run)
            }));
        }
    }
    notes
}
