//! `hank setup NAME`: a new project folder with the `.hank/` layout, `.hankrc`,
//! `.gitignore`, `git init` and a first commit.
//!
//! An existing empty folder is used; a non-empty one is refused. Without git the project is
//! still created (with a warning). The commit uses the user's git identity, or
//! `hank <hank@localhost>` when none is configured.

use std::path::{Path, PathBuf};

use crate::error::{HankError, Result};
use crate::exit;

use super::generate::{self, ProjectSpec};
use super::{SetupArgs, detect};

/// Checks a project name used as a folder name.  **\[pure\]**
///
/// # Errors
/// Empty, `.`/`..`, a path separator, a leading `-`, quotes or control characters.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    let hint = "use a plain folder name such as `my-project`";
    if name.trim().is_empty() {
        return Err(HankError::usage_hint("project name is empty", hint));
    }
    if name == "." || name == ".." {
        return Err(HankError::usage_hint(
            format!("project name `{name}` is not a new folder"),
            hint,
        ));
    }
    if name.contains('/') || name.contains('\\') {
        return Err(HankError::usage_hint(
            format!("project name `{name}` contains a path separator"),
            hint,
        ));
    }
    if name.starts_with('-') || name.trim() != name {
        return Err(HankError::usage_hint(
            format!("project name `{name}` starts with `-` or has surrounding spaces"),
            hint,
        ));
    }
    generate::validate_value("project name", name)
}

/// What happened with git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GitOutcome {
    /// The first commit; `as_hank`: made as `hank <hank@localhost>` (git has no identity
    /// here), which is said.
    Committed { as_hank: bool },
    /// Skipped or failed, with the reason (the project exists anyway).
    Skipped(String),
}

fn git_init_and_commit(dir: &Path) -> GitOutcome {
    // Through the git door: nothing the new repository could configure runs.
    let at = crate::git::Checkout::at(dir);
    let made = at
        .git()
        .act(&["init", "-q"])
        .and_then(crate::git::GitRun::checked)
        .and_then(|_| at.commit_everything("Set up hank project"));
    match made {
        Ok(as_hank) => GitOutcome::Committed { as_hank },
        Err(crate::git::GitError::Spawn(_)) => {
            GitOutcome::Skipped("git is not on PATH; no repository was created".into())
        }
        Err(e) => GitOutcome::Skipped(e.to_string()),
    }
}

fn is_empty_dir(path: &Path) -> Result<bool> {
    let mut entries = std::fs::read_dir(path).map_err(|e| HankError::io("reading", path, e))?;
    Ok(entries.next().is_none())
}

/// What a Python project's check can use here: "pytest" (on PATH), "python3" (on PATH),
/// "python3-pytest" (python3 imports pytest), and "python-probed" (looked).
fn python_tools() -> Vec<String> {
    let mut tools = vec!["python-probed".to_string()];
    if which::which("pytest").is_ok() {
        tools.push("pytest".to_string());
    }
    if which::which("python3").is_ok() {
        tools.push("python3".to_string());
        let imports = crate::proc::Cmd::new("python3")
            .args(["-c", "import pytest"])
            .timeout(std::time::Duration::from_secs(20))
            .stdout_max(4096)
            .stderr_max(4096)
            .run()
            .is_ok_and(|done| done.status.success());
        if imports {
            tools.push("python3-pytest".to_string());
        }
    }
    tools
}

/// Creates the project `name` under `parent`; returns its path, the files written and the
/// git outcome.
///
/// # Errors
/// Invalid name, existing non-empty folder or file, I/O errors.
pub(crate) fn create(
    parent: &Path,
    name: &str,
    project_type: Option<&str>,
    repos: &[String],
) -> Result<(PathBuf, Vec<PathBuf>, GitOutcome)> {
    validate_name(name)?;
    // A bad `--repo` is refused before the folder is made.
    if !repos.is_empty() {
        crate::workspace::file_text(&parent.join(name), repos)?;
    }
    let mut tools = std::collections::BTreeSet::new();
    if which::which("uv").is_ok() {
        tools.insert("uv".to_string());
    }
    if project_type == Some("python") {
        tools.extend(python_tools());
    }
    let mut facts = detect::facts_for_type(name, project_type.unwrap_or("unknown"), &tools)
        .map_err(|e| {
            HankError::usage_hint(
                format!("--project-type: {e}"),
                "leave it out for a project whose commands you add to .hankrc yourself",
            )
        })?;
    let dir = parent.join(name);
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) if !meta.is_dir() => {
            return Err(HankError::usage(format!(
                "{} exists and is not a folder",
                dir.display()
            )));
        }
        Ok(_) if !is_empty_dir(&dir)? => {
            return Err(HankError::usage_hint(
                format!("{} already exists and is not empty", dir.display()),
                "choose another name, or run `hank enable` inside that folder",
            ));
        }
        Ok(_) => {}
        Err(_) => {
            std::fs::create_dir(&dir).map_err(|e| HankError::io("creating folder", &dir, e))?
        }
    }
    facts.git = true;
    let spec = ProjectSpec::from_facts(&facts);
    let mut written =
        generate::create_project_files(&dir, &spec, generate::Existing::Keep)?.written;
    // Before the first commit: a workspace file left out of it would make the project dirty.
    if crate::workspace::write(&dir, repos, false)? {
        written.push(PathBuf::from(crate::workspace::FILE));
    }
    let git = git_init_and_commit(&dir);
    Ok((dir, written, git))
}

/// `hank setup NAME` in `cwd`.
///
/// # Errors
/// See [`create`]; with `--json` the error is printed as JSON and its code returned.
pub(crate) fn run(cwd: &Path, args: &SetupArgs) -> Result<u8> {
    let result = create(cwd, &args.name, args.project_type.as_deref(), &args.repos);
    if args.json {
        let obj = match &result {
            Ok((dir, written, git)) => serde_json::json!({
                "success": true,
                "code": exit::OK,
                "project_name": args.name,
                "project_type": args.project_type.as_deref().unwrap_or("unknown"),
                "path": dir.display().to_string(),
                "files_created": written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "git": match git { GitOutcome::Committed { .. } => "committed".to_string(), GitOutcome::Skipped(r) => r.clone() },
                "git_identity": match git { GitOutcome::Committed { as_hank: true } => Some(crate::git::IDENTITY), _ => None },
                "message": format!("created {}", args.name),
            }),
            Err(e) => serde_json::json!({
                "success": false,
                "code": e.exit_code(),
                "project_name": args.name,
                "message": e.to_string(),
            }),
        };
        outln!("{obj}");
        return Ok(result.map_or_else(|e| e.exit_code(), |_| exit::OK));
    }
    let (dir, written, git) = result?;
    errln!("Created {}:", dir.display());
    for w in &written {
        errln!("  {}", w.display());
    }
    match git {
        GitOutcome::Committed { as_hank: false } => {
            errln!("  git repository with a first commit");
        }
        GitOutcome::Committed { as_hank: true } => {
            errln!(
                "  git repository with a first commit, made as `{}`",
                crate::git::IDENTITY
            );
            errln!(
                "warning: git has no user.name/user.email here, so hank's commits are made as `{}`; set yours: git config --global user.name \"Your Name\" && git config --global user.email you@example.com",
                crate::git::IDENTITY
            );
        }
        GitOutcome::Skipped(reason) => errln!("warning: {reason}"),
    }
    if args.project_type.as_deref() == Some("python") && which::which("uv").is_err() {
        let check = crate::settings::hankrc::parse_hankrc(
            &std::fs::read_to_string(dir.join(".hankrc")).unwrap_or_default(),
            &dir.join(".hankrc"),
        )
        .ok()
        .and_then(|mut rc| rc.remove("VERIFY_COMMAND"))
        .map(|e| e.value);
        if let Some(check) = check {
            let why = if check == "pytest" {
                "pytest is on PATH"
            } else if check.contains("pytest") {
                "python3 imports pytest; no `pytest` on PATH"
            } else {
                "pytest is not installed here: the standard library's unittest"
            };
            errln!(
                "note: VERIFY_COMMAND=\"{check}\" ({why}); change it in .hankrc after installing your test runner"
            );
        }
    }
    if args.project_type.is_none() {
        errln!(
            "note: no --project-type: the agent may not run any build or test command yet; \
             add `Bash(<command> *)` entries to ALLOWED_TOOLS in .hankrc, or run \
             `hank setup NAME --project-type rust|typescript|javascript|python|go`"
        );
    }
    errln!(
        "Next: cd {}, describe the project in .hank/specs/ and .hank/fix_plan.md, then run `hank`.",
        args.name
    );
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_table() {
        let cases = [
            ("my-project", true),
            ("app_2", true),
            ("", false),
            ("  ", false),
            (".", false),
            ("..", false),
            ("a/b", false),
            ("/abs", false),
            ("a\\b", false),
            ("-x", false),
            ("a\"b", false),
            ("a\nb", false),
        ];
        for (name, ok) in cases {
            assert_eq!(validate_name(name).is_ok(), ok, "{name:?}");
        }
    }

    #[test]
    fn refuses_non_empty_folder_and_uses_empty_one() {
        let parent = tempfile::tempdir().unwrap();
        std::fs::create_dir(parent.path().join("full")).unwrap();
        std::fs::write(parent.path().join("full/x"), "x").unwrap();
        assert!(create(parent.path(), "full", None, &[]).is_err());
        std::fs::write(parent.path().join("file"), "x").unwrap();
        assert!(create(parent.path(), "file", None, &[]).is_err());
        assert!(create(parent.path(), "typo", Some("rsut"), &[]).is_err());
        assert!(!parent.path().join("typo").exists());
        std::fs::create_dir(parent.path().join("empty")).unwrap();
        let (dir, written, _) = create(parent.path(), "empty", None, &[]).unwrap();
        assert!(written.contains(&PathBuf::from(".hank/PROMPT.md")));
        assert!(dir.join(".hank/specs").is_dir());
        assert!(generate::missing_required(&dir).is_empty());
    }
}
