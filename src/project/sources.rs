//! Fetching tasks from the outside: `bd`, `gh` and PRD files.
//!
//! Tools are found on PATH with `which`, spawned directly (no shell) in the project folder
//! with stdin null and a timeout; their output is parsed by [`super::tasks`]. A missing,
//! failing or unauthenticated tool gives an error that says what to do — never a panic.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{HankError, Result};

use super::detect::TaskSourceKind;
use super::tasks::{self, Task};

/// How long `bd` / `gh` may run.
pub(crate) const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// Default number of GitHub issues fetched.
pub(crate) const DEFAULT_LIMIT: u32 = 50;

/// What to import and with which options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SourceRequest {
    pub sources: Vec<TaskSourceKind>,
    /// GitHub label filter.
    pub label: Option<String>,
    /// Maximum tasks per source.
    pub limit: u32,
    /// The PRD document (relative to the project or absolute).
    pub prd: Option<PathBuf>,
}

/// Output of a finished tool.
#[derive(Debug)]
pub(crate) struct ToolOutput {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args…` in `dir` through [`crate::proc::Cmd`]: no shell, stdin null, its own
/// process group, killed with its group after `timeout`.
///
/// # Errors
/// The program cannot be started, or it ran longer than `timeout`.
pub(crate) fn run_tool(
    program: &Path,
    args: &[&str],
    dir: &Path,
    timeout: Duration,
) -> Result<ToolOutput> {
    let name = program.file_name().map_or_else(
        || program.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    // Cap what we keep: task lists are small.
    let done = crate::proc::Cmd::new(program)
        .args(args)
        .cwd(dir)
        .timeout(timeout)
        .stdout_max(16 * 1024 * 1024)
        .stderr_max(16 * 1024 * 1024)
        .run()
        .map_err(|e| match e {
            crate::proc::RunError::Spawn(e) => {
                HankError::Tool(format!("could not start `{name}`: {e}"))
            }
            crate::proc::RunError::Timeout | crate::proc::RunError::Interrupted => {
                HankError::Tool(format!(
                    "`{name} {}` did not finish within {}s and was stopped",
                    args.join(" "),
                    timeout.as_secs()
                ))
            }
            crate::proc::RunError::Io(e) => HankError::Tool(format!("waiting for `{name}`: {e}")),
        })?;
    Ok(ToolOutput {
        success: done.status.success(),
        code: done.status.code(),
        stdout: String::from_utf8_lossy(&done.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
    })
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// Imports open beads issues (`bd list --json`, falling back to the text form).
///
/// # Errors
/// `bd` is missing or fails.
pub(crate) fn fetch_beads(dir: &Path, limit: u32) -> Result<Vec<Task>> {
    let bd = which::which("bd").map_err(|_| {
        HankError::usage_hint(
            "beads: `bd` is not on PATH",
            "install beads (https://github.com/steveyegge/beads) or choose another task source",
        )
    })?;
    let out = run_tool(&bd, &["list", "--json"], dir, TOOL_TIMEOUT)?;
    let mut tasks = if out.success {
        match tasks::parse_beads_json(&out.stdout) {
            Ok(t) => t,
            Err(_) => tasks::parse_beads_text(&out.stdout),
        }
    } else {
        let text = run_tool(&bd, &["list"], dir, TOOL_TIMEOUT)?;
        if !text.success {
            return Err(HankError::Tool(format!(
                "beads: `bd list` failed (exit {}): {}",
                text.code.map_or_else(|| "signal".into(), |c| c.to_string()),
                first_line(&text.stderr)
            )));
        }
        tasks::parse_beads_text(&text.stdout)
    };
    tasks.truncate(limit as usize);
    Ok(tasks)
}

/// Imports open GitHub issues (`gh issue list --state open --json number,title,labels`).
///
/// # Errors
/// `gh` is missing, not logged in, or fails.
pub(crate) fn fetch_github(dir: &Path, label: Option<&str>, limit: u32) -> Result<Vec<Task>> {
    let gh = which::which("gh").map_err(|_| {
        HankError::usage_hint(
            "github: `gh` is not on PATH",
            "install the GitHub CLI (https://cli.github.com) and run `gh auth login`",
        )
    })?;
    let limit_s = limit.to_string();
    let mut args = vec![
        "issue",
        "list",
        "--state",
        "open",
        "--json",
        "number,title,labels",
        "--limit",
        &limit_s,
    ];
    let label = label.map(str::trim).filter(|l| !l.is_empty());
    if let Some(l) = label {
        args.push("--label");
        args.push(l);
    }
    let out = run_tool(&gh, &args, dir, TOOL_TIMEOUT)?;
    if !out.success {
        let lower = out.stderr.to_ascii_lowercase();
        if lower.contains("gh auth login") || lower.contains("not logged") || out.code == Some(4) {
            return Err(HankError::usage_hint(
                "github: `gh` is not authenticated",
                "run `gh auth login`, then try again",
            ));
        }
        return Err(HankError::Tool(format!(
            "github: `gh issue list` failed (exit {}): {}",
            out.code.map_or_else(|| "signal".into(), |c| c.to_string()),
            first_line(&out.stderr)
        )));
    }
    let mut tasks = tasks::parse_github_json(&out.stdout, label)?;
    tasks.truncate(limit as usize);
    Ok(tasks)
}

/// Reads a PRD file (path relative to `dir` unless absolute) as `hank import` does.
///
/// # Errors
/// The file cannot be read, is empty, binary, or a `.json` file that is not JSON.
pub(crate) fn read_prd(dir: &Path, prd: &Path) -> Result<super::import::Document> {
    let path = if prd.is_absolute() {
        prd.to_path_buf()
    } else {
        dir.join(prd)
    };
    let bytes = std::fs::read(&path).map_err(|e| HankError::io("reading PRD", &path, e))?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    super::import::parse_document(&name, &bytes)
}

/// Extracts tasks from a PRD file with the same rules as `hank import --no-ai` (checkboxes,
/// numbered items, bullets under task headings, must/should sentences).
///
/// # Errors
/// See [`read_prd`].
pub(crate) fn fetch_prd(dir: &Path, prd: &Path, limit: u32) -> Result<Vec<Task>> {
    let doc = read_prd(dir, prd)?;
    Ok(super::import::document_tasks(&doc, limit as usize))
}

/// `.hank/specs/requirements.md` for the PRD of `req`, when the PRD is one of its sources:
/// the whole document, as `hank import` keeps it.
///
/// # Errors
/// See [`read_prd`].
pub(crate) fn prd_requirements(dir: &Path, req: &SourceRequest) -> Result<Option<String>> {
    match (&req.prd, req.sources.contains(&TaskSourceKind::Prd)) {
        (Some(prd), true) => Ok(Some(super::import::render_requirements(&read_prd(
            dir, prd,
        )?))),
        _ => Ok(None),
    }
}

/// Fetches every requested source; tasks are deduplicated across sources.
///
/// # Errors
/// The first source that fails (nothing is written by the caller then).
pub(crate) fn fetch_all(dir: &Path, req: &SourceRequest) -> Result<Vec<Task>> {
    let mut all = Vec::new();
    for source in &req.sources {
        all.extend(fetch_one(dir, *source, req)?);
    }
    Ok(tasks::dedupe(all))
}

/// Fetches one source.
///
/// # Errors
/// See [`fetch_beads`], [`fetch_github`], [`fetch_prd`]; `prd` without a file.
pub(crate) fn fetch_one(
    dir: &Path,
    source: TaskSourceKind,
    req: &SourceRequest,
) -> Result<Vec<Task>> {
    match source {
        TaskSourceKind::Beads => fetch_beads(dir, req.limit),
        TaskSourceKind::Github => fetch_github(dir, req.label.as_deref(), req.limit),
        TaskSourceKind::Prd => match &req.prd {
            Some(p) => fetch_prd(dir, p, req.limit),
            None => Err(HankError::usage_hint(
                "prd: no PRD file given and none found",
                "pass --prd FILE",
            )),
        },
    }
}
