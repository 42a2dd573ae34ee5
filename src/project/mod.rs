//! Project bootstrap: detection, task sources, templates, `setup`, `enable`, `enable-ci`,
//! `migrate`, `import`.
//!
//! | file | role |
//! |---|---|
//! | `templates` | the embedded `templates/` and the strict `{{name}}` renderer **\[pure\]** |
//! | `detect` | type, framework, package manager, commands, git/GitHub, task sources **\[pure\]** |
//! | `scan` | reads a folder into what `detect` needs |
//! | `tasks` | parsing `bd` / `gh` output and PRDs into tagged fix_plan items **\[pure\]** |
//! | `sources` | running `bd` / `gh` (no shell, stdin null, timeout), reading PRDs |
//! | `rules` | the `Bash(…)` rules for build/test/lint commands and the client's matching **\[pure\]** |
//! | `backup` | copies of files hank is about to replace, in `.hank/backup/<timestamp>/` |
//! | `generate` | rendering and writing `.hank/*`, `.hankrc`, `.gitignore` entries |
//! | `setup`, `enable`, `ci`, `migrate`, `import` | the commands |
//!
//! A project is **enabled** when `.hank/PROMPT.md` exists: `enable`/`enable-ci` then stop with
//! exit 2 unless `--force`, and `migrate` says it is already migrated. The generator writes
//! `.hank/PROMPT.md` last, so an interrupted run can be repeated.

pub(crate) mod backup;
pub(crate) mod ci;
pub(crate) mod detect;
pub(crate) mod enable;
pub(crate) mod generate;
pub(crate) mod import;
pub(crate) mod locate;
pub(crate) mod migrate;
pub(crate) mod rules;
pub(crate) mod scan;
pub(crate) mod setup;
pub(crate) mod sources;
pub(crate) mod tasks;
pub(crate) mod templates;

use std::path::PathBuf;

// The options of the project commands, as plain data: `crate::cli` holds their clap
// definitions (with the help texts and defaults) and `crate::commands` converts.

/// A `--from` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FromSource {
    /// beads issues (`bd list --json`).
    Beads,
    /// open GitHub issues (`gh issue list`).
    Github,
    /// a PRD / requirements document (`--prd FILE`).
    Prd,
    /// no import: a starter fix_plan.
    None,
}

#[derive(Debug, Clone)]
pub(crate) struct SetupArgs {
    /// Name of the new project folder (created in the current directory).
    pub name: String,
    /// The project type whose build/test/lint commands the agent may run (`--project-type`).
    pub project_type: Option<String>,
    /// Print the result as one JSON object on stdout.
    pub json: bool,
}

/// The answers `enable` and `enable-ci` share (each also a wizard question for `enable`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ProjectOptions {
    /// Task sources to import from (repeat or comma-separate) [default: `enable` asks, or with
    /// --yes takes the detected ones; `enable-ci` imports none].
    pub from: Vec<FromSource>,
    /// The PRD document to extract tasks from (implies `--from prd`).
    pub prd: Option<PathBuf>,
    /// Only GitHub issues with this label.
    pub label: Option<String>,
    /// Maximum tasks imported per source.
    pub limit: u32,
    /// Project name [default: package name, else folder name].
    pub project_name: Option<String>,
    /// Project type [default: detected: rust, typescript, javascript, python, go, unknown].
    pub project_type: Option<String>,
    /// MAX_CALLS_PER_HOUR written into `.hankrc` [default: 100].
    pub calls: Option<u32>,
    /// AGENT / AGENTS, in failover order (empty: detected or asked).
    pub agents: Vec<String>,
    /// Regenerate the hank files even if they exist (each replaced file is first copied to
    /// `.hank/backup/<timestamp>/`).
    pub force: bool,
    /// Recreate only the missing hank files; touch nothing that exists.
    pub repair: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct EnableArgs {
    pub opts: ProjectOptions,
    /// Accept the detected defaults without asking (works without a terminal).
    pub yes: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct EnableCiArgs {
    pub opts: ProjectOptions,
    /// Print exactly one JSON object on stdout (errors too).
    pub json: bool,
    /// No human output on stderr (errors still go there without --json).
    pub quiet: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct ImportArgs {
    /// The PRD / spec document: Markdown, plain text or JSON.
    pub file: PathBuf,
    /// Project name: the new folder in the current directory [default: from the file name].
    pub name: Option<String>,
    /// Import into this existing project folder instead of creating a new one.
    pub into: Option<PathBuf>,
    /// With --into: replace existing .hank/PROMPT.md, fix_plan.md and specs/requirements.md.
    pub force: bool,
    /// Extract the tasks without AI (headings, checkboxes, numbered items, "must" sentences).
    pub no_ai: bool,
    /// Maximum tasks kept by the conversion without AI.
    pub limit: u32,
    /// The agent command: a path or a name on PATH (CLAUDE_CODE_CMD, default claude).
    pub claude_cmd: Option<String>,
    /// Time limit of the AI conversion: minutes, or 90s / 2m / 1h (CLAUDE_TIMEOUT_MINUTES, default 15).
    pub timeout: Option<String>,
    /// Claude model (CLAUDE_MODEL).
    pub model: Option<String>,
    /// Print exactly one JSON result object on stdout (errors too).
    pub json: bool,
}

/// `--agents` checked: each name must be a built-in profile or have
/// `.hank/agents/NAME.toml` in `dir`; duplicates are dropped.
///
/// # Errors
/// A name that is neither, listing the built-in ones.
pub(crate) fn known_agents(
    dir: &std::path::Path,
    names: &[String],
) -> crate::error::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for raw in names {
        let name = raw.trim();
        if name.is_empty() || out.iter().any(|n| n == name) {
            continue;
        }
        let builtin = crate::agent::profile::BUILTIN
            .iter()
            .any(|(n, _)| *n == name);
        let own = crate::policy::failover::valid_name(name)
            && crate::agent::profile::project_folder(dir)
                .join(format!("{name}.toml"))
                .is_file();
        if !builtin && !own {
            return Err(crate::error::HankError::usage(format!(
                "--agents: unknown agent `{name}`; expected one of {} or a profile in .hank/agents/",
                crate::agent::profile::BUILTIN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        out.push(name.to_owned());
    }
    if out.is_empty() {
        return Err(crate::error::HankError::usage(
            "--agents: expected at least one agent name, e.g. claude or claude,codex",
        ));
    }
    Ok(out)
}
