//! Generating a project's hank files: `.hank/PROMPT.md`, `.hank/fix_plan.md`,
//! `.hank/AGENT.md`, `.hank/specs/`, `.hank/logs/`, `.hankrc` and the `.gitignore` entries.
//!
//! [`plan`] is pure (validation + rendering); [`create_project_files`] writes the plan. Every
//! file is rendered before the first one is written, each is written to a temp file beside
//! its target and renamed into place (mode 0644), and `.hank/PROMPT.md` — the file that makes
//! a project "enabled" — is written last, so a failed run can simply be repeated.

use std::path::{Path, PathBuf};

use crate::error::{HankError, Result};

use super::detect::{Commands, ProjectFacts};
use super::tasks::{self, Task};
use super::templates::{self, Vars};

/// Default MAX_CALLS_PER_HOUR written into `.hankrc`.
pub(crate) const DEFAULT_MAX_CALLS: u32 = 100;

/// Everything the templates need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProjectSpec {
    pub name: String,
    pub project_type: String,
    pub commands: Commands,
    /// VERIFY_COMMAND: the project's test command when one is known.
    pub verify_cmd: Option<String>,
    pub allowed_tools: Vec<String>,
    pub max_calls: u32,
    pub tasks: Vec<Task>,
    /// AGENT (the first) and, with more than one, AGENTS (the failover order).
    pub agents: Vec<String>,
    /// `.hank/specs/requirements.md`: the PRD the tasks came from (`enable --from prd`).
    pub requirements: Option<String>,
}

impl ProjectSpec {
    /// The spec detection suggests (no tasks, default call budget).
    #[must_use]
    pub(crate) fn from_facts(facts: &ProjectFacts) -> Self {
        Self {
            name: facts.name.clone(),
            project_type: facts.project_type.clone(),
            commands: facts.commands.clone(),
            verify_cmd: facts.verify_cmd().map(str::to_owned),
            allowed_tools: facts.allowed_tools(),
            max_calls: DEFAULT_MAX_CALLS,
            tasks: Vec::new(),
            agents: default_agents(facts),
            requirements: None,
        }
    }

    /// Sets the project type chosen by the user. A known type other than the detected one
    /// brings that type's commands and rules (what detection finds in a fresh project of that
    /// type); returns a warning for a type hank has no commands for.
    pub(crate) fn set_type(&mut self, ty: &str, detected: &ProjectFacts) -> Option<String> {
        let ty = ty.trim();
        if ty == detected.project_type {
            return None;
        }
        let mut tools = std::collections::BTreeSet::new();
        if detected.uv_available {
            tools.insert("uv".to_string());
        }
        match super::detect::facts_for_type(&self.name, ty, &tools) {
            Ok(facts) => {
                self.use_commands_of(&facts);
                None
            }
            Err(_) => {
                self.project_type = ty.to_string();
                Some(format!(
                    "hank knows no build or test commands for project type `{ty}` (it knows {}): \
                     fill in .hank/AGENT.md and add `Bash(<command> *)` entries for them to \
                     ALLOWED_TOOLS and VERIFY_COMMAND in .hankrc",
                    super::detect::PROJECT_TYPES.join(", ")
                ))
            }
        }
    }

    /// Takes the commands and rules of `facts` (a project type chosen by the user).
    pub(crate) fn use_commands_of(&mut self, facts: &ProjectFacts) {
        self.project_type.clone_from(&facts.project_type);
        self.commands.clone_from(&facts.commands);
        self.verify_cmd = facts.verify_cmd().map(str::to_owned);
        self.allowed_tools = facts.allowed_tools();
    }
}

/// One file of the plan, path relative to the project folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedFile {
    pub path: &'static str,
    pub content: String,
}

/// Where `enable --from prd` keeps the document (the same place as `hank import`).
pub(crate) const REQUIREMENTS_FILE: &str = ".hank/specs/requirements.md";

/// Relative paths of the files the loop requires (its integrity check).
pub(crate) const REQUIRED_FILES: [&str; 4] = [
    ".hank/PROMPT.md",
    ".hank/fix_plan.md",
    ".hank/AGENT.md",
    ".hankrc",
];

/// Rejects a value that cannot go into a `KEY="VALUE"` line or a one-line template slot.
///
/// # Errors
/// Empty value, `"`, a line break or another control character; the message names `what`.
pub(crate) fn validate_value(what: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(HankError::usage(format!("{what} is empty")));
    }
    if value.contains('"') {
        return Err(HankError::usage(format!(
            "{what} `{value}` contains a double quote, which .hankrc values cannot hold"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(HankError::usage(format!(
            "{what} {value:?} contains a line break or control character"
        )));
    }
    Ok(())
}

/// The agent a new project uses: Claude Code when it is installed (or when no agent is), else
/// the first built-in agent found on PATH.
#[must_use]
pub(crate) fn default_agents(facts: &ProjectFacts) -> Vec<String> {
    let first = facts
        .agents_installed
        .iter()
        .find(|a| *a == "claude")
        .or_else(|| facts.agents_installed.first())
        .map_or("claude", String::as_str);
    vec![first.to_owned()]
}

fn code_or(cmd: Option<&String>) -> String {
    cmd.map_or_else(
        || "not detected yet — fill in".to_string(),
        |c| format!("`{c}`"),
    )
}

/// Validates the spec and renders every file. **\[pure\]**
///
/// # Errors
/// An invalid value (see [`validate_value`]) or a template error.
pub(crate) fn plan(spec: &ProjectSpec) -> Result<Vec<PlannedFile>> {
    validate_value("project name", &spec.name)?;
    validate_value("project type", &spec.project_type)?;
    for (what, cmd) in [
        ("build command", &spec.commands.build_cmd),
        ("test command", &spec.commands.test_cmd),
        ("run command", &spec.commands.run_cmd),
        ("lint command", &spec.commands.lint_cmd),
        ("verify command", &spec.verify_cmd),
    ] {
        if let Some(c) = cmd {
            validate_value(what, c)?;
        }
    }
    for tool in &spec.allowed_tools {
        validate_value("allowed tool", tool)?;
        if tool.contains(',') {
            return Err(HankError::usage(format!(
                "allowed tool `{tool}` contains a comma, which separates ALLOWED_TOOLS entries"
            )));
        }
    }
    if spec.agents.is_empty() {
        return Err(HankError::usage("at least one agent is needed"));
    }
    for a in &spec.agents {
        if !crate::policy::failover::valid_name(a) {
            return Err(HankError::usage(format!(
                "agent `{a}`: expected a profile name (letters, digits, - and _)"
            )));
        }
    }
    if spec.max_calls == 0 {
        return Err(HankError::usage("calls per hour must be at least 1"));
    }
    let mut vars = Vars::new();
    vars.insert("project_name", spec.name.trim().to_string());
    vars.insert("project_type", spec.project_type.trim().to_string());
    // The prompt names the type only when hank knows it ("calc", not "calc (unknown)").
    let kind = spec.project_type.trim();
    vars.insert(
        "project_label",
        if kind.is_empty() || kind == "unknown" {
            spec.name.trim().to_string()
        } else {
            format!("{} ({kind})", spec.name.trim())
        },
    );
    vars.insert("build_cmd", code_or(spec.commands.build_cmd.as_ref()));
    vars.insert("test_cmd", code_or(spec.commands.test_cmd.as_ref()));
    vars.insert("run_cmd", code_or(spec.commands.run_cmd.as_ref()));
    vars.insert("lint_cmd", code_or(spec.commands.lint_cmd.as_ref()));
    vars.insert(
        "verify_line",
        spec.verify_cmd.as_ref().map_or_else(
            || "#VERIFY_COMMAND=\"make test\"".to_string(),
            |c| format!("VERIFY_COMMAND=\"{c}\""),
        ),
    );
    vars.insert("max_calls", spec.max_calls.to_string());
    vars.insert("allowed_tools", spec.allowed_tools.join(","));
    vars.insert("tasks", tasks::plan_items(&spec.tasks));
    vars.insert("agent", spec.agents[0].clone());
    vars.insert(
        "agents_line",
        if spec.agents.len() > 1 {
            format!("AGENTS=\"{}\"", spec.agents.join(","))
        } else {
            "#AGENTS=\"claude,codex\"".to_string()
        },
    );
    let render = |name: &str, t: &str| templates::render(name, t, &vars);
    let mut files = vec![PlannedFile {
        path: ".hankrc",
        content: render("hankrc", templates::HANKRC)?,
    }];
    if let Some(req) = &spec.requirements {
        files.push(PlannedFile {
            path: REQUIREMENTS_FILE,
            content: req.clone(),
        });
    }
    // PROMPT.md last: it marks the project as enabled.
    files.extend([
        PlannedFile {
            path: ".hank/fix_plan.md",
            content: render("fix_plan.md", templates::FIX_PLAN_MD)?,
        },
        PlannedFile {
            path: ".hank/AGENT.md",
            content: render("AGENT.md", templates::AGENT_MD)?,
        },
        PlannedFile {
            path: ".hank/PROMPT.md",
            content: render("PROMPT.md", templates::PROMPT_MD)?,
        },
    ]);
    Ok(files)
}

/// The `.gitignore` content with hank's runtime entries added, or `None` when all are there.
/// **\[pure\]**
#[must_use]
pub(crate) fn merge_gitignore(existing: Option<&str>) -> Option<String> {
    let existing = existing.unwrap_or("");
    let present: Vec<&str> = existing.lines().map(str::trim).collect();
    let missing: Vec<&str> = templates::GITIGNORE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter(|l| !present.contains(l))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let mut out = existing.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str("# hank runtime files\n");
    for line in missing {
        out.push_str(line);
        out.push('\n');
    }
    Some(out)
}

/// Writes `content` to `path` through a temp file in the same folder and a rename, mode 0644.
/// With `overwrite` false an existing file is an error.
///
/// # Errors
/// Any I/O error, naming `path`.
pub(crate) fn write_file(path: &Path, content: &str, overwrite: bool) -> Result<()> {
    crate::store::write_file_atomic(
        path,
        content.as_bytes(),
        &crate::store::AtomicWrite {
            mode: 0o644,
            durable: true,
            replace: overwrite,
        },
    )
    .map_err(|e| HankError::io("writing", path, e))
}

fn create_dir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|e| HankError::io("creating folder", path, e))
}

/// What to do with hank files that already exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    /// Keep them; write the missing ones; add missing `.gitignore` entries.
    Keep,
    /// Replace them, each first copied to `.hank/backup/<timestamp>/` (`--force`).
    Replace,
    /// Write only the missing files; touch nothing that exists, `.gitignore` included
    /// (`--repair`).
    Repair,
}

/// What [`create_project_files`] did.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Relative paths written.
    pub written: Vec<PathBuf>,
    /// The backup of the files replaced, if any was replaced.
    pub backup: Option<super::backup::Backup>,
}

impl Outcome {
    /// "backed up … to …" when files were replaced.
    #[must_use]
    pub(crate) fn backup_message(&self) -> Option<String> {
        self.backup
            .as_ref()
            .and_then(super::backup::Backup::message)
    }
}

/// Creates the hank files of the project in `dir`; `existing` says what happens to files
/// that are already there (never lost: see [`Existing`]).
///
/// # Errors
/// An invalid spec (nothing written then) or an I/O error naming the file.
pub(crate) fn create_project_files(
    dir: &Path,
    spec: &ProjectSpec,
    existing: Existing,
) -> Result<Outcome> {
    let files = plan(spec)?;
    let mut out = Outcome::default();
    for sub in [".hank", ".hank/specs", ".hank/logs"] {
        create_dir(&dir.join(sub))?;
    }
    let gitignore = dir.join(".gitignore");
    let current = match std::fs::read(&gitignore) {
        Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(HankError::io("reading", &gitignore, e)),
    };
    let touch_gitignore = existing != Existing::Repair || current.is_none();
    if touch_gitignore && let Some(content) = merge_gitignore(current.as_deref()) {
        // Only adds lines: nothing the user wrote is lost.
        write_file(&gitignore, &content, true)?;
        out.written.push(PathBuf::from(".gitignore"));
    }
    let mut backup = super::backup::Backup::new(dir, &super::backup::stamp_now());
    for file in files {
        let path = dir.join(file.path);
        let exists = path.exists();
        if exists && existing != Existing::Replace {
            continue;
        }
        if exists {
            backup.save_if_changed(file.path, file.content.as_bytes())?;
        }
        write_file(&path, &file.content, exists)?;
        out.written.push(PathBuf::from(file.path));
    }
    if !backup.saved().is_empty() {
        out.backup = Some(backup);
    }
    Ok(out)
}

/// [`create_project_files`], then checks that every required file is there (`enable`,
/// `enable-ci`: the project must be ready for the loop when they say so).
///
/// # Errors
/// As [`create_project_files`]; a required file still missing after writing.
pub(crate) fn create_and_verify(
    dir: &Path,
    spec: &ProjectSpec,
    existing: Existing,
) -> Result<Outcome> {
    let outcome = create_project_files(dir, spec, existing)?;
    let missing = missing_required(dir);
    if !missing.is_empty() {
        return Err(HankError::Internal(format!(
            "verification failed: missing {}",
            missing.join(", ")
        )));
    }
    Ok(outcome)
}

/// The required files that are missing in `dir` (empty when the loop can run).
#[must_use]
pub(crate) fn missing_required(dir: &Path) -> Vec<&'static str> {
    REQUIRED_FILES
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::tasks::TaskOrigin;

    fn spec() -> ProjectSpec {
        ProjectSpec {
            name: "reports".into(),
            project_type: "rust".into(),
            commands: Commands {
                build_cmd: Some("cargo build".into()),
                test_cmd: Some("cargo test".into()),
                run_cmd: None,
                lint_cmd: Some("cargo clippy".into()),
            },
            verify_cmd: Some("cargo test".into()),
            requirements: None,
            allowed_tools: vec!["Read".into(), "Bash(cargo test *)".into()],
            max_calls: 40,
            agents: vec!["claude".into()],
            tasks: vec![
                Task {
                    title: "Fix {{login}}".into(),
                    origin: TaskOrigin::Github(42),
                },
                Task {
                    title: "Add export".into(),
                    origin: TaskOrigin::Beads("bd-7".into()),
                },
            ],
        }
    }

    fn rendered(path: &str) -> String {
        plan(&spec())
            .unwrap()
            .into_iter()
            .find(|f| f.path == path)
            .unwrap()
            .content
    }

    /// Each generated file against its snapshot (`snapshots/…__<name>.snap`).
    #[test]
    fn snapshots_of_the_generated_files() {
        let files = [
            ("snapshot_prompt", ".hank/PROMPT.md"),
            ("snapshot_fix_plan", ".hank/fix_plan.md"),
            ("snapshot_agent", ".hank/AGENT.md"),
            ("snapshot_hankrc", ".hankrc"),
        ];
        for (name, path) in files {
            insta::assert_snapshot!(name, rendered(path));
        }
    }

    /// The `.hankrc` of a new project of each type (`setup --project-type`, and `enable` on a
    /// project of that type): its ALLOWED_TOOLS and VERIFY_COMMAND.
    #[test]
    fn snapshot_hankrc_per_project_type() {
        let uv: std::collections::BTreeSet<String> = ["uv".to_string()].into();
        let none = std::collections::BTreeSet::new();
        let mut cases: Vec<(String, ProjectFacts)> = super::super::detect::PROJECT_TYPES
            .iter()
            .map(|ty| {
                (
                    (*ty).to_string(),
                    super::super::detect::facts_for_type("demo", ty, &none).unwrap(),
                )
            })
            .collect();
        cases.push((
            "python_uv".into(),
            super::super::detect::facts_for_type("demo", "python", &uv).unwrap(),
        ));
        for (name, facts) in cases {
            let spec = ProjectSpec::from_facts(&facts);
            let rc = plan(&spec)
                .unwrap()
                .into_iter()
                .find(|f| f.path == ".hankrc")
                .unwrap()
                .content;
            insta::assert_snapshot!(format!("hankrc_{name}"), rc);
        }
    }

    #[test]
    fn snapshot_gitignore() {
        insta::assert_snapshot!(merge_gitignore(Some("target/\n")).unwrap());
    }

    #[test]
    fn prompt_is_last() {
        let files = plan(&spec()).unwrap();
        assert_eq!(files.last().map(|f| f.path), Some(".hank/PROMPT.md"));
    }

    #[test]
    fn invalid_values_are_rejected_with_their_name() {
        type Mutate = Box<dyn Fn(&mut ProjectSpec)>;
        let cases: Vec<(Mutate, &str)> = vec![
            (Box::new(|s| s.name = "a\"b".into()), "project name"),
            (Box::new(|s| s.name = "a\nb".into()), "project name"),
            (Box::new(|s| s.name = "  ".into()), "project name"),
            (Box::new(|s| s.project_type = "x\"".into()), "project type"),
            (
                Box::new(|s| s.commands.test_cmd = Some("t\r".into())),
                "test command",
            ),
            (
                Box::new(|s| s.allowed_tools.push("Bash(a,b)".into())),
                "allowed tool",
            ),
            (Box::new(|s| s.max_calls = 0), "calls per hour"),
        ];
        for (mutate, needle) in cases {
            let mut s = spec();
            mutate(&mut s);
            let err = plan(&s).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn gitignore_merge_table() {
        let full = templates::GITIGNORE;
        let cases: &[(Option<&str>, bool)] = &[
            (None, true),
            (Some(""), true),
            (Some("node_modules"), true),
            (Some(full), false),
        ];
        for (existing, changes) in cases {
            let merged = merge_gitignore(*existing);
            assert_eq!(merged.is_some(), *changes, "{existing:?}");
            if let Some(m) = merged {
                assert!(m.starts_with(existing.unwrap_or("")));
                assert_eq!(
                    merge_gitignore(Some(&m)),
                    None,
                    "merging twice adds nothing"
                );
            }
        }
    }

    #[test]
    fn create_keeps_existing_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".hankrc"), "MINE=\"1\"\n").unwrap();
        let written = create_project_files(dir.path(), &spec(), Existing::Keep)
            .unwrap()
            .written;
        let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            names,
            vec![
                ".gitignore",
                ".hank/fix_plan.md",
                ".hank/AGENT.md",
                ".hank/PROMPT.md"
            ]
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(".hankrc")).unwrap(),
            "MINE=\"1\"\n"
        );
        assert!(dir.path().join(".hank/specs").is_dir() && dir.path().join(".hank/logs").is_dir());
        assert!(missing_required(dir.path()).is_empty());
        // Second run: nothing to do.
        assert!(
            create_project_files(dir.path(), &spec(), Existing::Keep)
                .unwrap()
                .written
                .is_empty()
        );
        // Forced: everything rewritten except the (complete) .gitignore.
        let forced = create_project_files(dir.path(), &spec(), Existing::Replace).unwrap();
        assert_eq!(forced.written.len(), 4);
        // The user's .hankrc was copied before it was replaced; unchanged files were not.
        let backup = forced.backup.as_ref().unwrap();
        assert_eq!(backup.saved(), &[PathBuf::from(".hankrc")]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(backup.location().unwrap()).join(".hankrc"))
                .unwrap(),
            "MINE=\"1\"\n"
        );
        assert!(forced.backup_message().unwrap().contains(".hank/backup/"));
        assert!(
            std::fs::read_to_string(dir.path().join(".hankrc"))
                .unwrap()
                .contains("PROJECT_NAME=\"reports\"")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(".hank/PROMPT.md"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o644);
        }
    }

    #[test]
    fn repair_writes_exactly_the_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        create_project_files(d, &spec(), Existing::Keep).unwrap();
        std::fs::write(d.join(".hank/fix_plan.md"), "- [ ] my own plan\n").unwrap();
        std::fs::write(d.join(".gitignore"), "target/\n").unwrap();
        std::fs::remove_file(d.join(".hankrc")).unwrap();
        std::fs::remove_file(d.join(".hank/AGENT.md")).unwrap();
        let before_prompt = std::fs::read(d.join(".hank/PROMPT.md")).unwrap();
        let out = create_project_files(d, &spec(), Existing::Repair).unwrap();
        assert_eq!(
            out.written,
            vec![PathBuf::from(".hankrc"), PathBuf::from(".hank/AGENT.md")]
        );
        assert!(out.backup.is_none());
        assert_eq!(
            std::fs::read_to_string(d.join(".hank/fix_plan.md")).unwrap(),
            "- [ ] my own plan\n"
        );
        assert_eq!(
            std::fs::read_to_string(d.join(".gitignore")).unwrap(),
            "target/\n"
        );
        assert_eq!(
            std::fs::read(d.join(".hank/PROMPT.md")).unwrap(),
            before_prompt
        );
        assert!(!d.join(".hank/backup").exists());
    }

    #[test]
    fn invalid_spec_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spec();
        s.name = "bad\"name".into();
        assert!(create_project_files(dir.path(), &s, Existing::Keep).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
