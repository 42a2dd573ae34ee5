//! `hank import FILE [NAME]`: a PRD or spec document (Markdown, plain text or JSON) becomes
//! `.hank/PROMPT.md`, `.hank/fix_plan.md` and `.hank/specs/requirements.md`, in a new project
//! folder `NAME` (like `hank setup`) or, with `--into DIR`, in an existing project.
//!
//! Two conversions:
//! - **AI** (default): the configured `claude` (resolved like the loop does) runs in a temp
//!   working folder with `-p --output-format json --allowedTools=Read,Write` and no Bash at
//!   all. Its stdin is `templates/import_prompt.md` with the document quoted between two
//!   marker lines that carry a random nonce, declared as data whose instructions are never to
//!   be followed. The answer goes through the loop's analyzer (auth, usage limit, … → exit 1
//!   naming the kind); the three files it wrote are then verified (present, regular files,
//!   UTF-8, fix_plan with checkbox items) before anything is moved into the target.
//! - **Deterministic** (`--no-ai`, and with a warning when `claude` cannot be found): headings
//!   become fix_plan sections, checkbox and numbered items (via [`super::tasks`]) become tasks,
//!   sentences that state a requirement ("must", "shall", "should", and their German and
//!   Japanese forms) become tasks under `## Requirements`; tasks are deduplicated and capped
//!   (`--limit`), and the whole document is kept as `specs/requirements.md`.
//!
//! In a workspace of several repositories (`--into` a project whose `.hank/workspace.toml`
//! names more than one, issue 51) the prompt lists them and asks for `(repos: …; after: …)`
//! in every section heading; the written plan is then checked as `hank fleet` checks it, and
//! each section it would refuse (no `repos:`, an unknown repository) is a warning naming the
//! section: the plan is written (the conversion is paid for, the fix is an edit of a heading)
//! and the user is told what to change. Without a workspace, or with one repository, nothing
//! of this applies.
//!
//! Nothing in the target changes until a conversion has succeeded and been verified; a new
//! project folder that cannot be completed is removed again. The pure parts (document
//! parsing, extraction, rendering, the prompt, the argv, verification) take contents as
//! arguments; [`run`] does the I/O.
//!
//! | file | job |
//! |---|---|
//! | `document` | reading the document (Markdown, text, JSON), its project name, JSON as Markdown **\[pure\]** |
//! | `extract` | the deterministic conversion: tasks from sections, items and requirement sentences **\[pure\]** |
//! | `ai` | the AI conversion: prompt, argv, answer and file checks (pure), the call |
//! | `install` | writing the verified files into the target, the new project's scaffold, the git commit |
//! | this file | the command: the target, which conversion, the report |

mod ai;
mod document;
mod extract;
mod install;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use crate::agent::call;
use crate::agent::process::Spawn;
use crate::analysis::{self, Analysis, ErrorKind, Outcome};
use crate::error::{HankError, Result};
use crate::exit;
use crate::policy::fixplan;
use crate::policy::workspace::Workspace;
use crate::policy::{fleet as fleet_rules, workspace as ws_policy};
use crate::settings::{self, AgentCommand};

use super::generate::{self, ProjectSpec};
use super::tasks::{self, Task, TaskOrigin};
use super::templates::{self, Vars};
use super::{ImportArgs, detect, scan, setup};

// The parts share this file's imports and constants (`use super::*`); the command uses theirs.
use ai::*;
use document::*;
use extract::*;
use install::*;

pub(crate) use document::{Document, parse_document};
pub(crate) use extract::{document_tasks, render_requirements};

/// Default maximum number of tasks the deterministic conversion keeps.
pub(crate) const DEFAULT_TASK_LIMIT: u32 = 100;
/// Largest document read at all.
pub(crate) const MAX_DOCUMENT_BYTES: u64 = 16 * 1024 * 1024;
/// Largest document sent to the agent (every byte is paid for; the rest would not fit).
pub(crate) const MAX_AI_DOCUMENT_BYTES: usize = 400 * 1024;
/// Largest file accepted from the agent.
const MAX_AGENT_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// The tools the conversion agent may use: files only, no Bash.
pub(crate) const IMPORT_TOOLS: &str = "Read,Write";

/// `.hank/PROMPT.md`, relative to the project.
pub(crate) const PROMPT_PATH: &str = ".hank/PROMPT.md";
/// `.hank/fix_plan.md`, relative to the project.
pub(crate) const FIX_PLAN_PATH: &str = ".hank/fix_plan.md";
/// `.hank/specs/requirements.md`, relative to the project.
pub(crate) const REQUIREMENTS_PATH: &str = ".hank/specs/requirements.md";
/// The files an import produces, in the order they are written (PROMPT.md last).
pub(crate) const IMPORTED_FILES: [&str; 3] = [REQUIREMENTS_PATH, FIX_PLAN_PATH, PROMPT_PATH];

const GRACE: Duration = Duration::from_secs(5);

/// How the document was converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
    Ai,
    Deterministic,
}

/// The `--json` result (errors too).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ImportReport {
    pub success: bool,
    pub code: u8,
    pub project_name: Option<String>,
    pub project_dir: Option<String>,
    pub files_created: Vec<String>,
    pub tasks_found: usize,
    pub tasks_dropped: usize,
    pub mode: Option<Mode>,
    pub cost_usd: f64,
    pub message: String,
    pub warnings: Vec<String>,
}

/// What is known while the import runs (kept for the error report).
#[derive(Debug, Default)]
struct Ctx {
    project_name: Option<String>,
    mode: Option<Mode>,
    cost_usd: f64,
    warnings: Vec<String>,
    json: bool,
}

impl Ctx {
    fn warn(&mut self, msg: String) {
        errln!("warning: {msg}");
        self.warnings.push(msg);
    }
}

enum Target {
    /// A new folder `name` under `parent`.
    New { parent: PathBuf, name: String },
    /// An existing project folder.
    Into { dir: PathBuf },
}

fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

fn read_document(path: &Path) -> Result<Document> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| HankError::io("reading", path, e))?;
    if !meta.is_file() {
        return Err(HankError::usage(format!(
            "{shown} is not a file (expected a Markdown, plain text or JSON document)"
        )));
    }
    if meta.len() > MAX_DOCUMENT_BYTES {
        return Err(HankError::usage(format!(
            "{shown} is too large ({} bytes; at most {MAX_DOCUMENT_BYTES})",
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| HankError::io("reading", path, e))?;
    let name = path
        .file_name()
        .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned());
    let mut doc = parse_document(&name, &bytes).map_err(|e| match e {
        HankError::Usage { message, hint } => HankError::Usage {
            message: message.replacen(&name, &shown, 1),
            hint,
        },
        other => other,
    })?;
    doc.file_name = name;
    Ok(doc)
}

/// Whether the file `rel` of the project `dir` is the starter `hank setup` / `enable`
/// rendered for it, unchanged (rendered again from `.hankrc`'s PROJECT_NAME and PROJECT_TYPE).
fn is_starter(dir: &Path, rel: &str) -> bool {
    let Ok(current) = std::fs::read_to_string(dir.join(rel)) else {
        return false;
    };
    let rc_path = dir.join(".hankrc");
    let Some(mut rc) = std::fs::read_to_string(&rc_path)
        .ok()
        .and_then(|t| crate::settings::hankrc::parse_hankrc(&t, &rc_path).ok())
    else {
        return false;
    };
    let (Some(name), Some(ty)) = (rc.remove("PROJECT_NAME"), rc.remove("PROJECT_TYPE")) else {
        return false;
    };
    let mut tools = std::collections::BTreeSet::new();
    if let Some(cmd) = rc.remove("VERIFY_COMMAND")
        && cmd.value.starts_with("uv ")
    {
        tools.insert("uv".to_string());
    }
    let facts = if ty.value == "unknown" {
        super::detect::facts_for_type(&name.value, "unknown", &tools)
    } else {
        super::detect::facts_for_type(&name.value, &ty.value, &tools)
    };
    let Ok(facts) = facts else { return false };
    let mut spec = ProjectSpec::from_facts(&facts);
    spec.name.clone_from(&name.value);
    generate::plan(&spec)
        .is_ok_and(|files| files.iter().any(|f| f.path == rel && f.content == current))
}

/// Checks the target before any work, and the spec its files are rendered from.
fn prepare_target(cwd: &Path, args: &ImportArgs, ctx: &mut Ctx) -> Result<(Target, ProjectSpec)> {
    if let Some(into) = &args.into {
        let dir = absolute(cwd, into);
        if !dir.is_dir() {
            return Err(HankError::usage_hint(
                format!("--into {}: not an existing folder", dir.display()),
                "create it first, or leave out --into to create a new project folder",
            ));
        }
        let facts = scan::detect_dir(&dir);
        let mut spec = ProjectSpec::from_facts(&facts);
        if let Some(name) = &args.name {
            generate::validate_value("project name (NAME)", name)?;
            spec.name.clone_from(name);
        } else {
            generate::validate_value("project name (from the folder; pass NAME)", &spec.name)?;
        }
        ctx.project_name = Some(spec.name.clone());
        let existing: Vec<&str> = IMPORTED_FILES
            .iter()
            .copied()
            .filter(|f| dir.join(f).exists())
            .collect();
        // `hank setup NAME` then `hank import DOC --into NAME` (the README's two starts)
        // compose: the starter PROMPT.md and fix_plan.md setup wrote, still as written, hold
        // nothing of the user's and are replaced (backed up like any replaced file).
        let starter = !existing.is_empty() && existing.iter().all(|f| is_starter(&dir, f));
        if starter && !args.force {
            errln!(
                "hank: replacing the starter {} written by `hank setup` (unchanged since)",
                existing.join(", ")
            );
        }
        if !existing.is_empty() && !args.force && !starter {
            return Err(HankError::usage_hint(
                format!(
                    "{} already has {}; nothing was changed",
                    dir.display(),
                    existing.join(", ")
                ),
                "pass --force to replace them (your other files are kept)",
            ));
        }
        return Ok((Target::Into { dir }, spec));
    }
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| project_name_from_file(&args.file));
    ctx.project_name = Some(name.clone());
    setup::validate_name(&name)?;
    let dir = cwd.join(&name);
    if let Ok(meta) = std::fs::symlink_metadata(&dir) {
        let empty = meta.is_dir()
            && std::fs::read_dir(&dir)
                .map_err(|e| HankError::io("reading", &dir, e))?
                .next()
                .is_none();
        if !empty {
            return Err(HankError::usage_hint(
                format!(
                    "{} already exists and is not an empty folder",
                    dir.display()
                ),
                format!("choose another NAME, or import into it with `--into {name}`"),
            ));
        }
    }
    // The same spec `hank setup` renders.
    let facts = detect::ProjectFacts {
        name: name.clone(),
        project_type: "unknown".into(),
        git: true,
        ..detect::ProjectFacts::default()
    };
    Ok((
        Target::New {
            parent: cwd.to_path_buf(),
            name,
        },
        ProjectSpec::from_facts(&facts),
    ))
}

/// The most sections a workspace warning lists one by one.
const WORKSPACE_PROBLEMS_SHOWN: usize = 10;

/// What `hank fleet` would refuse in the imported `fix_plan` of a workspace of several
/// repositories: each section without `repos:` or naming a repository the workspace does not
/// have (the fleet's own check, [`ws_policy::check_tasks`], section by section), or the
/// plan's own problem when its tasks do not read (a repeated or empty `repos:`, an `after:`
/// naming no section, a cycle). Empty without a workspace or with one repository.  **\[pure\]**
#[must_use]
pub(crate) fn workspace_problems(fix_plan: &str, ws: Option<&Workspace>) -> Vec<String> {
    let Some(ws) = ws.filter(|w| w.is_multi()) else {
        return Vec::new();
    };
    let tasks = match fleet_rules::tasks_from_plan(fix_plan, &fixplan::default_optional_sections())
    {
        Ok(tasks) => tasks,
        Err(e) => return vec![e],
    };
    tasks
        .iter()
        .filter_map(|t| ws_policy::check_tasks(std::slice::from_ref(t), Some(ws)).err())
        .collect()
}

/// The warnings for [`workspace_problems`]: one per section (at most
/// `WORKSPACE_PROBLEMS_SHOWN`, then how many more), each saying `hank fleet` refuses the plan
/// until it is fixed.  **\[pure\]**
#[must_use]
pub(crate) fn workspace_warnings(problems: &[String]) -> Vec<String> {
    let mut out: Vec<String> = problems
        .iter()
        .take(WORKSPACE_PROBLEMS_SHOWN)
        .map(|p| {
            format!("{FIX_PLAN_PATH}: {p} (`hank fleet` refuses the plan until this is fixed)")
        })
        .collect();
    if problems.len() > WORKSPACE_PROBLEMS_SHOWN {
        out.push(format!(
            "{FIX_PLAN_PATH}: {} more sections need the same fix",
            problems.len() - WORKSPACE_PROBLEMS_SHOWN
        ));
    }
    out
}

fn standard_prompt(spec: &ProjectSpec) -> Result<String> {
    generate::plan(spec)?
        .into_iter()
        .find(|f| f.path == PROMPT_PATH)
        .map(|f| f.content)
        .ok_or_else(|| HankError::Internal("the PROMPT.md template is missing".into()))
}

fn import(cwd: &Path, args: &ImportArgs, ctx: &mut Ctx) -> Result<ImportReport> {
    if args.limit == 0 {
        return Err(HankError::usage("--limit must be at least 1"));
    }
    let doc = read_document(&absolute(cwd, &args.file))?;
    let (target, spec) = prepare_target(cwd, args, ctx)?;
    // A workspace's repositories go into the prompt and the plan is checked against them
    // (a file that does not read is refused now, before anything is paid for).
    let workspace = match &target {
        Target::Into { dir } => crate::workspace::load(dir)?,
        Target::New { .. } => None,
    };
    let base = match &target {
        Target::Into { dir } => dir.clone(),
        Target::New { parent, .. } => parent.clone(),
    };
    let agent = if args.no_ai {
        None
    } else {
        let run_args = crate::settings::Flags {
            claude_cmd: args.claude_cmd.clone(),
            timeout: args.timeout.clone(),
            model: args.model.clone(),
            ..crate::settings::Flags::default()
        };
        let settings = settings::load(&run_args, &base)?;
        match settings::resolve_agent(&settings.claude_cmd, &base) {
            Ok(agent) => Some((agent, settings)),
            Err(e) => {
                ctx.warn(format!(
                    "{e}; using the deterministic conversion instead (as with --no-ai)"
                ));
                None
            }
        }
    };
    let converted = match &agent {
        Some((agent, settings)) => {
            ctx.mode = Some(Mode::Ai);
            if !ctx.json {
                errln!(
                    "Converting {} with {} (tools: {IMPORT_TOOLS}) …",
                    doc.file_name,
                    agent.program.display()
                );
            }
            convert_ai(&doc, &spec, workspace.as_ref(), agent, settings, ctx)?
        }
        None => {
            ctx.mode = Some(Mode::Deterministic);
            let standard = standard_prompt(&spec)?;
            convert_deterministic(&doc, &spec.name, &standard, args.limit as usize)
        }
    };
    for w in &converted.warnings {
        ctx.warn(w.clone());
    }
    for w in workspace_warnings(&workspace_problems(
        &converted.fix_plan_md,
        workspace.as_ref(),
    )) {
        ctx.warn(w);
    }
    let (dir, files) = install(&target, &spec, &converted, &doc, ctx)?;
    let mode = ctx.mode.unwrap_or(Mode::Deterministic);
    let how = match mode {
        Mode::Ai => format!("AI conversion, ${:.4}", ctx.cost_usd),
        Mode::Deterministic => "deterministic conversion".to_string(),
    };
    let dropped = if converted.tasks_dropped > 0 {
        format!(", {} dropped over --limit", converted.tasks_dropped)
    } else {
        String::new()
    };
    Ok(ImportReport {
        success: true,
        code: exit::OK,
        project_name: Some(spec.name.clone()),
        project_dir: Some(dir.display().to_string()),
        files_created: files,
        tasks_found: converted.tasks_found,
        tasks_dropped: converted.tasks_dropped,
        mode: Some(mode),
        cost_usd: ctx.cost_usd,
        message: format!(
            "imported {} into {} ({how}; {} task(s){dropped})",
            doc.file_name,
            dir.display(),
            converted.tasks_found
        ),
        warnings: Vec::new(),
    })
}

/// `hank import` in `cwd`.
///
/// # Errors
/// Without `--json`: an unusable document, an occupied target, a failed or partial AI
/// conversion (exit 1), an interrupt (exit 130), I/O errors. With `--json` the error is
/// printed as the JSON result and only its code returned.
pub(crate) fn run(cwd: &Path, args: &ImportArgs) -> Result<u8> {
    let mut ctx = Ctx {
        json: args.json,
        ..Ctx::default()
    };
    let result = import(cwd, args, &mut ctx);
    if args.json {
        let report = match result {
            Ok(mut r) => {
                r.warnings = std::mem::take(&mut ctx.warnings);
                r
            }
            Err(e) => ImportReport {
                success: false,
                code: e.exit_code(),
                project_name: ctx.project_name.clone(),
                project_dir: None,
                files_created: Vec::new(),
                tasks_found: 0,
                tasks_dropped: 0,
                mode: ctx.mode,
                cost_usd: ctx.cost_usd,
                message: e.with_hint(),
                warnings: std::mem::take(&mut ctx.warnings),
            },
        };
        let text = serde_json::to_string(&report)
            .map_err(|e| HankError::Internal(format!("encoding the JSON result: {e}")))?;
        outln!("{text}");
        return Ok(report.code);
    }
    let report = result?;
    errln!("{}", report.message);
    for f in &report.files_created {
        errln!("  {f}");
    }
    if let Some(dir) = &report.project_dir {
        let shown = Path::new(dir)
            .strip_prefix(cwd)
            .map_or_else(|_| dir.clone(), |p| p.display().to_string());
        let cd = if shown.is_empty() {
            String::new()
        } else {
            format!("cd {shown}, ")
        };
        errln!("Next: {cd}review .hank/fix_plan.md, then run `hank`.");
    }
    Ok(report.code)
}
