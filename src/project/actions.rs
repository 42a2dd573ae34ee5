//! `hank enable-ci --github-actions`: the workflow `.github/workflows/hank.yml` rendered from
//! `templates/github/hank.yml` (a plan job, then a matrix of run-task jobs; see README
//! "Running on GitHub Actions").

use std::path::{Path, PathBuf};

use crate::error::{HankError, Result};
use crate::store::{AtomicWrite, write_file_atomic};

/// The template of the workflow.
pub(crate) const WORKFLOW_TEMPLATE: &str = include_str!("../../templates/github/hank.yml");
/// Where the workflow goes in the project.
pub(crate) const WORKFLOW_PATH: &str = ".github/workflows/hank.yml";
/// An example of `--action` for the messages. hank names no published repository (no
/// `repository` in Cargo.toml, none in README or install.sh), so the workflow has no default
/// action: `--action` is required with `--github-actions`.
pub(crate) const EXAMPLE_ACTION: &str = "OWNER/hank@v0.1.0";
/// Tasks run at once unless `--agents-parallel` says otherwise.
pub(crate) const DEFAULT_PARALLEL: u32 = 2;
/// The run-task job's limit in minutes (hank's `--max-runtime` defaults to it minus a margin).
pub(crate) const DEFAULT_TIMEOUT_MINUTES: u32 = 330;
/// When the schedule starts the workflow (every 6 hours, off the hour).
pub(crate) const DEFAULT_CRON: &str = "17 */6 * * *";

/// The workflow text (pure).
#[must_use]
pub(crate) fn render(action: &str, parallel: u32, timeout_minutes: u32) -> String {
    WORKFLOW_TEMPLATE
        .replace("__ACTION__", action)
        .replace("__AGENTS__", &parallel.to_string())
        .replace("__TIMEOUT__", &timeout_minutes.to_string())
        .replace("__CRON__", DEFAULT_CRON)
}

/// `--action` as given; its absence is an error naming the flag (there is no default: hank is
/// published nowhere that this program knows of).
///
/// # Errors
/// `--action` was not given.
pub(crate) fn required_action(action: Option<&str>) -> Result<&str> {
    action.ok_or_else(|| {
        HankError::usage_hint(
            "--github-actions needs --action OWNER/REPO@REF: the repository (and tag or branch) the workflow takes hank's action from",
            format!(
                "name the fork or mirror of hank you install from, e.g. --action {EXAMPLE_ACTION}, or --action ./PATH for a copy inside the project"
            ),
        )
    })
}

/// Checks `--action`: `OWNER/REPO@REF` or `./PATH` (a local action).
///
/// # Errors
/// Anything else (the message names `--action`).
pub(crate) fn check_action(action: &str) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/');
    let ok = if let Some(local) = action.strip_prefix("./") {
        !local.is_empty() && local.chars().all(ok_char)
    } else {
        action.split_once('@').is_some_and(|(repo, r)| {
            repo.split('/').count() >= 2
                && repo.split('/').all(|p| !p.is_empty())
                && repo.chars().all(ok_char)
                && !r.is_empty()
                && r.chars().all(ok_char)
        })
    };
    if ok {
        Ok(())
    } else {
        Err(HankError::usage(format!(
            "--action {action:?}: expected OWNER/REPO@REF (e.g. {EXAMPLE_ACTION}) or ./PATH"
        )))
    }
}

/// Writes the workflow into `dir` (never over an existing one). Returns its path.
///
/// # Errors
/// The workflow exists already, or cannot be written.
pub(crate) fn write_workflow(dir: &Path, action: &str) -> Result<PathBuf> {
    check_action(action)?;
    let path = dir.join(WORKFLOW_PATH);
    if path.symlink_metadata().is_ok() {
        return Err(HankError::usage_hint(
            format!("{} exists already", path.display()),
            "remove it (or move it aside) to generate it again",
        ));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| HankError::io("failed to create", parent, e))?;
    }
    let text = render(action, DEFAULT_PARALLEL, DEFAULT_TIMEOUT_MINUTES);
    let how = AtomicWrite {
        mode: 0o644,
        durable: true,
        replace: false,
    };
    write_file_atomic(&path, text.as_bytes(), &how)
        .map_err(|e| HankError::io("failed to write", &path, e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workflow_is_rendered_without_placeholders() {
        let w = render("o/hank@v1", 3, 200);
        assert!(!w.contains("__"), "{w}");
        assert!(w.contains("uses: o/hank@v1"));
        assert!(w.contains("timeout-minutes: 200"));
        assert!(w.contains("HANK_JOB_TIMEOUT_MINUTES: \"200\""));
        assert!(w.contains("inputs.agents || '3'"));
        // Least permissions, secrets only as inputs of the step that runs the agent.
        assert!(w.contains(
            "permissions:\n  contents: write\n  pull-requests: write\n  issues: write\n\n"
        ));
        assert_eq!(w.matches("secrets.").count(), 2);
        assert!(!w.contains("env:\n      CLAUDE_CODE_OAUTH_TOKEN"));
    }

    #[test]
    fn actions_are_checked() {
        for ok in ["o/r@v1", "o/r/sub@main", "./tools/hank"] {
            assert!(check_action(ok).is_ok(), "{ok}");
        }
        for bad in ["", "o/r", "r@v1", "o/r@", "o/r@v1; rm", "./", "o//r@x"] {
            assert!(check_action(bad).is_err(), "{bad}");
        }
    }
}
