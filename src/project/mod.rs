//! Project bootstrap: detection, task sources, templates, `setup`, `enable`, `enable-ci`,
//! `migrate`, `import`.
//!
//! | file | role |
//! |---|---|
//! | `templates` | the embedded `templates/` and the strict `{{name}}` renderer **[pure]** |
//! | `detect` | type, framework, package manager, commands, git/GitHub, task sources **[pure]** |
//! | `scan` | reads a folder into what `detect` needs |
//! | `tasks` | parsing `bd` / `gh` output and PRDs into tagged fix_plan items **[pure]** |
//! | `sources` | running `bd` / `gh` (no shell, stdin null, timeout), reading PRDs |
//! | `generate` | rendering and writing `.hank/*`, `.hankrc`, `.gitignore` entries |
//! | `setup`, `enable`, `ci`, `migrate`, `import` | the commands |
//!
//! A project is **enabled** when `.hank/PROMPT.md` exists: `enable`/`enable-ci` then stop with
//! exit 2 unless `--force`, and `migrate` says it is already migrated. The generator writes
//! `.hank/PROMPT.md` last, so an interrupted run can be repeated.

pub mod ci;
pub mod detect;
pub mod enable;
pub mod generate;
pub mod import;
pub mod migrate;
pub mod scan;
pub mod setup;
pub mod sources;
pub mod tasks;
pub mod templates;

use std::path::PathBuf;

use clap::{Args, ValueEnum};

pub use generate::{ProjectSpec, create_project_files};
pub use migrate::flat_layout_detected;

use crate::error::{HankError, Result};

/// A `--from` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FromSource {
    /// beads issues (`bd list --json`).
    Beads,
    /// open GitHub issues (`gh issue list`).
    Github,
    /// a PRD / requirements document (`--prd FILE`).
    Prd,
    /// no import: a starter fix_plan.
    None,
}

#[derive(Debug, Clone, Args)]
pub struct SetupArgs {
    /// Name of the new project folder (created in the current directory).
    pub name: String,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The answers `enable` and `enable-ci` share (each also a wizard question for `enable`).
#[derive(Debug, Clone, Default, Args)]
pub struct ProjectOptions {
    /// Task sources to import from (repeat or comma-separate) [default: `enable` asks, or with
    /// --yes takes the detected ones; `enable-ci` imports none].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "SOURCE")]
    pub from: Vec<FromSource>,
    /// The PRD document to extract tasks from (implies `--from prd`).
    #[arg(long, value_name = "FILE")]
    pub prd: Option<PathBuf>,
    /// Only GitHub issues with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Maximum tasks imported per source.
    #[arg(long, default_value_t = sources::DEFAULT_LIMIT, value_name = "N")]
    pub limit: u32,
    /// Project name [default: package name, else folder name].
    #[arg(long, value_name = "NAME")]
    pub project_name: Option<String>,
    /// Project type [default: detected: rust, typescript, javascript, python, go, unknown].
    #[arg(long, value_name = "TYPE")]
    pub project_type: Option<String>,
    /// MAX_CALLS_PER_HOUR written into `.hankrc` [default: 100].
    #[arg(long, value_name = "N")]
    pub calls: Option<u32>,
    /// Regenerate the hank files even if they exist.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub struct EnableArgs {
    #[command(flatten)]
    pub opts: ProjectOptions,
    /// Accept the detected defaults without asking (works without a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub struct EnableCiArgs {
    #[command(flatten)]
    pub opts: ProjectOptions,
    /// Print exactly one JSON object on stdout (errors too).
    #[arg(long)]
    pub json: bool,
    /// No human output on stderr (errors still go there without --json).
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub struct MigrateArgs {
    /// Project folder (default: current directory).
    pub dir: Option<PathBuf>,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The PRD / spec document: Markdown, plain text or JSON.
    pub file: PathBuf,
    /// Project name: the new folder in the current directory [default: from the file name].
    pub name: Option<String>,
    /// Import into this existing project folder instead of creating a new one.
    #[arg(long, value_name = "DIR")]
    pub into: Option<PathBuf>,
    /// With --into: replace existing .hank/PROMPT.md, fix_plan.md and specs/requirements.md.
    #[arg(long)]
    pub force: bool,
    /// Extract the tasks without AI (headings, checkboxes, numbered items, "must" sentences).
    #[arg(long)]
    pub no_ai: bool,
    /// Maximum tasks kept by the conversion without AI.
    #[arg(long, default_value_t = import::DEFAULT_TASK_LIMIT, value_name = "N")]
    pub limit: u32,
    /// The agent command: a path or a name on PATH [CLAUDE_CODE_CMD, default claude].
    #[arg(long, value_name = "PATH")]
    pub claude_cmd: Option<String>,
    /// Time limit of the AI conversion: minutes, or 90s / 2m / 1h [CLAUDE_TIMEOUT_MINUTES, default 15].
    #[arg(short = 't', long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Claude model [CLAUDE_MODEL].
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Print exactly one JSON result object on stdout (errors too).
    #[arg(long)]
    pub json: bool,
}

fn current_dir() -> Result<PathBuf> {
    std::env::current_dir().map_err(|e| HankError::io("reading", ".", e))
}

/// `hank setup NAME`.
///
/// # Errors
/// Invalid name, existing non-empty folder, I/O errors.
pub fn setup(args: &SetupArgs) -> Result<u8> {
    setup::run(&current_dir()?, args)
}

/// `hank enable`.
///
/// # Errors
/// See [`enable::run`].
pub fn enable(args: &EnableArgs) -> Result<u8> {
    enable::run(&current_dir()?, args)
}

/// `hank enable-ci`.
///
/// # Errors
/// See [`ci::run`] (with `--json`, errors are printed as JSON and only the code returned).
pub fn enable_ci(args: &EnableCiArgs) -> Result<u8> {
    ci::run(&current_dir()?, args)
}

/// `hank migrate`.
///
/// # Errors
/// Nothing to migrate (exit 1), a conflicting destination, I/O errors.
pub fn migrate(args: &MigrateArgs) -> Result<u8> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => current_dir()?,
    };
    if !dir.is_dir() {
        return Err(HankError::usage(format!("{}: not a folder", dir.display())));
    }
    let stamp = jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string();
    let result = migrate::migrate_dir(&dir, &stamp);
    let (code, message, moved, backup, created) = match &result {
        Ok(migrate::MigrateOutcome::AlreadyMigrated) => (
            crate::exit::OK,
            format!(
                "{} is already migrated (.hank/PROMPT.md exists)",
                dir.display()
            ),
            vec![],
            None,
            vec![],
        ),
        Ok(migrate::MigrateOutcome::NothingToMigrate) => (
            crate::exit::ERROR,
            format!(
                "nothing to migrate in {}: no PROMPT.md with fix_plan.md or @fix_plan.md at its root \
                 (use `hank enable` to add hank to a project)",
                dir.display()
            ),
            vec![],
            None,
            vec![],
        ),
        Ok(migrate::MigrateOutcome::Migrated {
            moves,
            backup,
            created,
            left,
        }) => {
            let mut message = format!(
                "migrated {} file(s) into .hank/; backup in {}",
                moves.len(),
                backup
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            );
            if !left.is_empty() {
                message.push_str(&format!(
                    "; left in place (a newer twin was moved): {}",
                    left.join(", ")
                ));
            }
            (
                crate::exit::OK,
                message,
                moves
                    .iter()
                    .map(|m| format!("{} -> {}", m.from, m.to))
                    .collect(),
                Some(backup.display().to_string()),
                created
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>(),
            )
        }
        Err(err) => {
            if !args.json {
                return Err(HankError::usage_hint(
                    err.to_string(),
                    err.hint().unwrap_or("nothing was moved").to_string(),
                ));
            }
            (crate::exit::ERROR, err.to_string(), vec![], None, vec![])
        }
    };
    if args.json {
        let obj = serde_json::json!({
            "success": code == crate::exit::OK,
            "code": code,
            "message": message,
            "moved": moved,
            "backup": backup,
            "files_created": created,
        });
        println!("{obj}");
    } else if code == crate::exit::OK {
        eprintln!("{message}");
        for m in &moved {
            eprintln!("  {m}");
        }
        for c in &created {
            eprintln!("  created {c}");
        }
    } else {
        return Err(HankError::WithCode { code, message });
    }
    Ok(code)
}

/// `hank import FILE [NAME]`.
///
/// # Errors
/// See [`import::run`] (with `--json`, errors are printed as JSON and only the code returned).
pub fn import(args: &ImportArgs) -> Result<u8> {
    import::run(&current_dir()?, args)
}
