//! `hank enable-ci`: enable without questions, from flags only, for scripts and CI.
//!
//! With `--json`, exactly one JSON object goes to stdout, whatever happens:
//! `{"success", "code", "project_name", "project_type", "files_created", "tasks_imported",
//! "message"}`. Task sources are fetched before anything is written: a failing `bd`/`gh` or
//! an unreadable PRD is exit 1 with nothing changed. Default source: none.

use std::path::Path;

use serde::Serialize;

use crate::error::{HankError, Result};
use crate::exit;

use super::enable::{existing_mode, preflight, repair, sources_from_flags};
use super::generate::{self, ProjectSpec};
use super::sources::{self, SourceRequest};
use super::{EnableCiArgs, scan};

/// The `--json` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CiReport {
    pub success: bool,
    pub code: u8,
    pub project_name: Option<String>,
    pub project_type: Option<String>,
    pub files_created: Vec<String>,
    pub tasks_imported: usize,
    /// Where the files `--force` replaced were copied (`.hank/backup/<timestamp>`).
    pub backup: Option<String>,
    pub message: String,
}

impl CiReport {
    /// The report of a failure.
    #[must_use]
    pub(crate) fn failure(err: &HankError) -> Self {
        Self {
            success: false,
            code: err.exit_code(),
            project_name: None,
            project_type: None,
            files_created: Vec::new(),
            tasks_imported: 0,
            backup: None,
            message: err.with_hint(),
        }
    }
}

fn enable(dir: &Path, args: &EnableCiArgs) -> Result<CiReport> {
    preflight(dir, &args.opts)?;
    if args.opts.repair {
        let (spec, mut outcome) = repair(dir, &args.opts)?;
        outcome
            .written
            .extend(super::enable::workspace_file(dir, &args.opts)?);
        let n = outcome.written.len();
        return Ok(CiReport {
            success: true,
            code: exit::OK,
            message: if n == 0 {
                "nothing was missing; no file was touched".to_string()
            } else {
                format!("recreated {n} missing file(s); nothing else was touched")
            },
            project_name: Some(spec.name),
            project_type: Some(spec.project_type),
            files_created: outcome
                .written
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            tasks_imported: 0,
            backup: None,
        });
    }
    let facts = scan::detect_dir(dir);
    let mut spec = ProjectSpec::from_facts(&facts);
    if let Some(name) = &args.opts.project_name {
        generate::validate_value("--project-name", name)?;
        spec.name.clone_from(name);
    } else {
        generate::validate_value(
            "project name (from the folder; pass --project-name)",
            &spec.name,
        )?;
    }
    if !args.opts.agents.is_empty() {
        spec.agents = super::known_agents(dir, &args.opts.agents)?;
    }
    let mut warnings = Vec::new();
    if let Some(ty) = &args.opts.project_type {
        generate::validate_value("--project-type", ty)?;
        warnings.extend(spec.set_type(ty, &facts));
    }
    if let Some(calls) = args.opts.calls {
        if calls == 0 {
            return Err(HankError::usage("--calls must be at least 1"));
        }
        spec.max_calls = calls;
    }
    let request = SourceRequest {
        sources: sources_from_flags(&args.opts.from, args.opts.prd.as_deref()).unwrap_or_default(),
        label: args.opts.label.clone(),
        limit: args.opts.limit,
        prd: args
            .opts
            .prd
            .clone()
            .or_else(|| facts.prd_files.first().map(Into::into)),
    };
    spec.tasks = sources::fetch_all(dir, &request)?;
    spec.requirements = sources::prd_requirements(dir, &request)?;
    let mut outcome = generate::create_and_verify(dir, &spec, existing_mode(&args.opts))?;
    outcome
        .written
        .extend(super::enable::workspace_file(dir, &args.opts)?);
    let written = &outcome.written;
    let tasks_imported = spec.tasks.len();
    let mut message = format!(
        "hank enabled for {} ({} file(s) written, {tasks_imported} task(s) imported)",
        spec.name,
        written.len()
    );
    for extra in warnings.iter().cloned().chain(outcome.backup_message()) {
        message.push_str("; ");
        message.push_str(&extra);
    }
    Ok(CiReport {
        success: true,
        code: exit::OK,
        backup: outcome
            .backup
            .as_ref()
            .and_then(super::backup::Backup::location)
            .map(|p| p.display().to_string()),
        message,
        project_name: Some(spec.name),
        project_type: Some(spec.project_type),
        files_created: written.iter().map(|p| p.display().to_string()).collect(),
        tasks_imported,
    })
}

/// The name and type of a project hank is enabled in: `.hankrc`'s PROJECT_NAME and
/// PROJECT_TYPE, else the name detection gives the folder.
fn enabled_project(dir: &Path) -> (String, Option<String>) {
    let rc_path = dir.join(".hankrc");
    let mut rc = std::fs::read_to_string(&rc_path)
        .ok()
        .and_then(|text| crate::settings::hankrc::parse_hankrc(&text, &rc_path).ok())
        .unwrap_or_default();
    let mut value = |key: &str| {
        rc.remove(key)
            .map(|e| e.value)
            .filter(|v| !v.trim().is_empty())
    };
    let name = value("PROJECT_NAME").unwrap_or_else(|| scan::detect_dir(dir).name);
    (name, value("PROJECT_TYPE"))
}

/// `--github-actions`: the workflow, after enabling hank unless the project has it already
/// (then the workflow alone). The workflow is checked before anything is written.
fn with_workflow(dir: &Path, args: &EnableCiArgs) -> Result<CiReport> {
    let action = super::actions::required_action(args.action.as_deref())?;
    super::actions::check_action(action)?;
    let workflow = dir.join(super::actions::WORKFLOW_PATH);
    if workflow.symlink_metadata().is_ok() {
        return Err(HankError::usage_hint(
            format!("{} exists already", workflow.display()),
            "remove it (or move it aside) to generate it again",
        ));
    }
    let mut report = if dir.join(".hank").is_dir() && !args.opts.repair {
        let (project_name, project_type) = enabled_project(dir);
        CiReport {
            success: true,
            code: exit::OK,
            project_name: Some(project_name),
            project_type,
            files_created: Vec::new(),
            tasks_imported: 0,
            backup: None,
            message: "hank was already enabled here; added the GitHub Actions workflow".into(),
        }
    } else {
        enable(dir, args)?
    };
    let path = super::actions::write_workflow(dir, action)?;
    // Relative to the project, as every other file of the report.
    report.files_created.push(
        path.strip_prefix(dir)
            .unwrap_or(&path)
            .display()
            .to_string(),
    );
    report
        .message
        .push_str("; the workflow runs `hank fleet plan` / `hank fleet run-task` (hank fleet)");
    Ok(report)
}

/// `hank enable-ci` in `dir`.
///
/// # Errors
/// Without `--json`: already enabled (exit 2), invalid flags, a failing task source, I/O.
/// With `--json` the error is printed as JSON and its code returned.
pub(crate) fn run(dir: &Path, args: &EnableCiArgs) -> Result<u8> {
    let result = if args.github_actions {
        with_workflow(dir, args)
    } else {
        enable(dir, args)
    };
    if args.json {
        let report = match &result {
            Ok(r) => r.clone(),
            Err(e) => CiReport::failure(e),
        };
        let text = serde_json::to_string(&report)
            .map_err(|e| HankError::Internal(format!("encoding the JSON result: {e}")))?;
        outln!("{text}");
        return Ok(report.code);
    }
    let report = result?;
    if !args.quiet {
        errln!("{}", report.message);
        for f in &report.files_created {
            errln!("  {f}");
        }
    }
    Ok(report.code)
}
