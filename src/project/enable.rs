//! `hank enable`: the wizard (detection → task sources → settings → generation →
//! verification).
//!
//! The questions go through the [`Prompter`] trait: [`DialoguerPrompter`] on a terminal,
//! [`DefaultsPrompter`] for `--yes` (takes every default), a scripted one in tests. Every
//! answer also has a flag; a flag given skips its question. [`ask`] holds the wizard's logic
//! and does no I/O besides the prompter.
//!
//! A task source that fails (`gh` not logged in, `bd` missing, …) is a warning here: the
//! wizard asks whether to go on without those tasks (`--yes` goes on). `enable-ci`, meant
//! for scripts, fails instead.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{HankError, Result};
use crate::exit;

use super::detect::{ProjectFacts, TaskSourceKind};
use super::generate::{self, ProjectSpec};
use super::sources::{self, SourceRequest};
use super::{EnableArgs, FromSource, scan};

/// Validates a typed answer: `Err(message)` asks again.
pub(crate) type Validator<'a> = &'a dyn Fn(&str) -> std::result::Result<(), String>;

/// The questions the wizard asks.
pub(crate) trait Prompter {
    /// Yes/no.
    ///
    /// # Errors
    /// The prompt failed or was interrupted.
    fn confirm(&mut self, prompt: &str, default: bool) -> Result<bool>;
    /// Pick any of `items`; `defaults` pre-checks them. Returns the chosen indexes.
    ///
    /// # Errors
    /// The prompt failed or was interrupted.
    fn multi_select(
        &mut self,
        prompt: &str,
        items: &[String],
        defaults: &[bool],
    ) -> Result<Vec<usize>>;
    /// A line of text with a default, checked by `validate`.
    ///
    /// # Errors
    /// The prompt failed or was interrupted, or (non-interactive) the answer is invalid.
    fn input(&mut self, prompt: &str, default: &str, validate: Validator<'_>) -> Result<String>;
}

/// Takes every default (`--yes`).
#[derive(Debug, Default)]
pub(crate) struct DefaultsPrompter;

impl Prompter for DefaultsPrompter {
    fn confirm(&mut self, _prompt: &str, default: bool) -> Result<bool> {
        Ok(default)
    }
    fn multi_select(
        &mut self,
        _p: &str,
        _items: &[String],
        defaults: &[bool],
    ) -> Result<Vec<usize>> {
        Ok(defaults
            .iter()
            .enumerate()
            .filter(|(_, d)| **d)
            .map(|(i, _)| i)
            .collect())
    }
    fn input(&mut self, prompt: &str, default: &str, validate: Validator<'_>) -> Result<String> {
        validate(default).map_err(|e| HankError::usage(format!("{prompt}: {e}")))?;
        Ok(default.to_string())
    }
}

fn map_dialoguer(err: dialoguer::Error) -> HankError {
    let dialoguer::Error::IO(io) = err;
    if io.kind() == std::io::ErrorKind::Interrupted {
        let _ = console::Term::stderr().show_cursor();
        return HankError::WithCode {
            code: exit::INTERRUPTED,
            message: "interrupted".into(),
        };
    }
    HankError::Tool(format!("the terminal prompt failed: {io}"))
}

/// The real terminal prompts (dialoguer, on stderr).
#[derive(Default)]
pub(crate) struct DialoguerPrompter {
    theme: dialoguer::theme::ColorfulTheme,
}

impl Prompter for DialoguerPrompter {
    fn confirm(&mut self, prompt: &str, default: bool) -> Result<bool> {
        dialoguer::Confirm::with_theme(&self.theme)
            .with_prompt(prompt)
            .default(default)
            .interact_on(&console::Term::stderr())
            .map_err(map_dialoguer)
    }
    fn multi_select(
        &mut self,
        prompt: &str,
        items: &[String],
        defaults: &[bool],
    ) -> Result<Vec<usize>> {
        dialoguer::MultiSelect::with_theme(&self.theme)
            .with_prompt(prompt)
            .items(items)
            .defaults(defaults)
            .interact_on(&console::Term::stderr())
            .map_err(map_dialoguer)
    }
    fn input(&mut self, prompt: &str, default: &str, validate: Validator<'_>) -> Result<String> {
        dialoguer::Input::<String>::with_theme(&self.theme)
            .with_prompt(prompt)
            .default(default.to_string())
            .validate_with(|v: &String| validate(v))
            .interact_text_on(&console::Term::stderr())
            .map_err(map_dialoguer)
    }
}

/// The wizard's answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answers {
    pub name: String,
    pub project_type: String,
    pub max_calls: u32,
    pub request: SourceRequest,
    /// AGENT / AGENTS, in failover order.
    pub agents: Vec<String>,
}

fn validate_name(v: &str) -> std::result::Result<(), String> {
    generate::validate_value("project name", v).map_err(|e| e.to_string())
}

fn validate_calls(v: &str) -> std::result::Result<(), String> {
    match v.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(()),
        _ => Err(format!(
            "expected a whole number of calls per hour (1 or more), got `{v}`"
        )),
    }
}

fn validate_label(v: &str) -> std::result::Result<(), String> {
    if v.chars().any(char::is_control) {
        return Err("the label cannot contain control characters".into());
    }
    Ok(())
}

/// Source list from `--from` flags: `None` when not given; `none` clears the list.
#[must_use]
pub(crate) fn sources_from_flags(
    from: &[FromSource],
    prd: Option<&Path>,
) -> Option<Vec<TaskSourceKind>> {
    if from.is_empty() {
        return prd.map(|_| vec![TaskSourceKind::Prd]);
    }
    let mut out: Vec<TaskSourceKind> = Vec::new();
    for f in from {
        let kind = match f {
            FromSource::None => continue,
            FromSource::Beads => TaskSourceKind::Beads,
            FromSource::Github => TaskSourceKind::Github,
            FromSource::Prd => TaskSourceKind::Prd,
        };
        if !out.contains(&kind) {
            out.push(kind);
        }
    }
    Some(out)
}

fn source_label(kind: TaskSourceKind, facts: &ProjectFacts) -> String {
    match kind {
        TaskSourceKind::Beads => {
            let state = match (facts.beads_dir, facts.bd_available) {
                (true, true) => ".beads/ found",
                (true, false) => ".beads/ found, but `bd` is not installed",
                (false, _) => "no .beads/ here",
            };
            format!("beads issues ({state})")
        }
        TaskSourceKind::Github => {
            let state = match (&facts.github_repo, facts.gh_available) {
                (Some(repo), true) => repo.clone(),
                (Some(repo), false) => format!("{repo}, but `gh` is not installed"),
                (None, _) => "no GitHub remote".into(),
            };
            format!("GitHub issues ({state})")
        }
        TaskSourceKind::Prd => {
            let state = facts
                .prd_files
                .first()
                .map_or_else(|| "no document found".to_string(), Clone::clone);
            format!("a PRD / requirements document ({state})")
        }
    }
}

/// The wizard's questions: task sources, project name, calls per hour, GitHub label, PRD
/// path. A flag given in `args` skips its question.
///
/// # Errors
/// A prompt failed or was interrupted, or an answer/flag is invalid.
pub(crate) fn ask(
    facts: &ProjectFacts,
    args: &EnableArgs,
    p: &mut dyn Prompter,
) -> Result<Answers> {
    let all = [
        TaskSourceKind::Beads,
        TaskSourceKind::Github,
        TaskSourceKind::Prd,
    ];
    let sources = match sources_from_flags(&args.opts.from, args.opts.prd.as_deref()) {
        Some(s) => s,
        None => {
            let available = facts.available_sources();
            let items: Vec<String> = all.iter().map(|k| source_label(*k, facts)).collect();
            let defaults: Vec<bool> = all.iter().map(|k| available.contains(k)).collect();
            let picked = p.multi_select(
                "Import tasks from (space toggles, enter confirms)",
                &items,
                &defaults,
            )?;
            all.iter()
                .enumerate()
                .filter(|(i, _)| picked.contains(i))
                .map(|(_, k)| *k)
                .collect()
        }
    };
    let name = match &args.opts.project_name {
        Some(n) => {
            validate_name(n).map_err(HankError::usage)?;
            n.clone()
        }
        None => p
            .input("Project name", &facts.name, &validate_name)?
            .trim()
            .to_string(),
    };
    let project_type = args
        .opts
        .project_type
        .clone()
        .unwrap_or_else(|| facts.project_type.clone());
    generate::validate_value("--project-type", &project_type)?;
    let max_calls = match args.opts.calls {
        Some(0) => return Err(HankError::usage("--calls must be at least 1")),
        Some(n) => n,
        None => {
            let answer = p.input(
                "Agent calls per hour",
                &generate::DEFAULT_MAX_CALLS.to_string(),
                &validate_calls,
            )?;
            answer.trim().parse::<u32>().map_err(|_| {
                HankError::usage(format!("calls per hour: expected a number, got `{answer}`"))
            })?
        }
    };
    let label = if sources.contains(&TaskSourceKind::Github) {
        match &args.opts.label {
            Some(l) => Some(l.clone()),
            None => {
                let l = p.input(
                    "GitHub label filter (empty: all open issues)",
                    "",
                    &validate_label,
                )?;
                Some(l.trim().to_string()).filter(|l| !l.is_empty())
            }
        }
    } else {
        args.opts.label.clone()
    };
    let prd = if sources.contains(&TaskSourceKind::Prd) {
        match &args.opts.prd {
            Some(p) => Some(p.clone()),
            None => {
                let default = facts.prd_files.first().cloned().unwrap_or_default();
                let path = p.input("PRD file", &default, &|v: &str| {
                    if v.trim().is_empty() {
                        Err("a file path is needed".into())
                    } else {
                        Ok(())
                    }
                })?;
                Some(PathBuf::from(path.trim()))
            }
        }
    } else {
        args.opts.prd.clone()
    };
    let agents = if !args.opts.agents.is_empty() {
        args.opts.agents.clone()
    } else if facts.agents_installed.len() > 1 {
        let items: Vec<String> = facts
            .agents_installed
            .iter()
            .map(|a| format!("{a} (installed)"))
            .collect();
        let defaults = generate::default_agents(facts);
        let checked: Vec<bool> = facts
            .agents_installed
            .iter()
            .map(|a| defaults.contains(a))
            .collect();
        let picked = p.multi_select(
            "Agents to use; more than one = failover in this order (space toggles)",
            &items,
            &checked,
        )?;
        let chosen: Vec<String> = facts
            .agents_installed
            .iter()
            .enumerate()
            .filter(|(i, _)| picked.contains(i))
            .map(|(_, a)| a.clone())
            .collect();
        if chosen.is_empty() { defaults } else { chosen }
    } else {
        generate::default_agents(facts)
    };
    Ok(Answers {
        name,
        project_type,
        max_calls,
        agents,
        request: SourceRequest {
            sources,
            label,
            limit: args.opts.limit,
            prd,
        },
    })
}

/// Installs a Ctrl-C handler for the wizard: restores the cursor and exits 130 (dialoguer
/// leaves the cursor hidden otherwise). Returns once the handler is registered.
fn install_ctrlc_handler() {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let Ok(rt) = crate::proc::runtime() else {
            let _ = ready_tx.send(());
            return;
        };
        rt.block_on(async move {
            let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
            let _ = ready_tx.send(());
            if let Ok(mut signal) = signal
                && signal.recv().await.is_some()
            {
                let term = console::Term::stderr();
                let _ = term.show_cursor();
                errln!("\nhank: interrupted");
                std::process::exit(i32::from(exit::INTERRUPTED));
            }
        });
    });
    let _ = ready_rx.recv_timeout(Duration::from_secs(2));
}

fn spinner(message: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

fn describe(facts: &ProjectFacts) -> String {
    let mut lines = vec![format!("  type: {}", facts.project_type)];
    if let Some(f) = &facts.framework {
        lines.push(format!("  framework: {f}"));
    }
    if let Some(pm) = &facts.package_manager {
        lines.push(format!("  package manager: {pm}"));
    }
    for (what, cmd) in [
        ("build", &facts.commands.build_cmd),
        ("test", &facts.commands.test_cmd),
        ("run", &facts.commands.run_cmd),
    ] {
        if let Some(c) = cmd {
            lines.push(format!("  {what}: {c}"));
        }
    }
    lines.push(format!(
        "  git: {}{}",
        if facts.git { "yes" } else { "no" },
        facts
            .github_repo
            .as_ref()
            .map_or_else(String::new, |r| format!(" (GitHub {r})"))
    ));
    lines.join("\n")
}

/// Checks shared by `enable` and `enable-ci` before anything is asked or written.
///
/// # Errors
/// Already enabled (exit 2) unless `--force` or `--repair`; both at once; a flat layout to
/// migrate first (exit 1).
pub(crate) fn preflight(dir: &Path, opts: &super::ProjectOptions) -> Result<()> {
    // A bad `--repo` is refused before any file is written.
    if !opts.repos.is_empty() {
        crate::workspace::file_text(dir, &opts.repos)?;
    }
    if opts.force && opts.repair {
        return Err(HankError::usage(
            "--force and --repair exclude each other: --repair recreates only missing files, \
             --force regenerates every file (with a backup)",
        ));
    }
    if super::migrate::flat_layout_detected(dir) {
        return Err(HankError::usage_hint(
            "this project has the old flat layout (PROMPT.md and fix_plan.md at the root)",
            "run `hank migrate` to move it into .hank/",
        ));
    }
    if dir.join(".hank/PROMPT.md").exists() && !opts.force && !opts.repair {
        let missing = generate::missing_required(dir);
        let what = if missing.is_empty() {
            String::new()
        } else {
            format!("; missing: {}", missing.join(", "))
        };
        return Err(HankError::WithCode {
            code: exit::HALTED,
            message: format!(
                "hank is already enabled here (.hank/PROMPT.md exists){what}. \
                 `hank enable --repair` recreates missing files and touches nothing else; \
                 --force regenerates every file (the old ones are copied to .hank/backup/)"
            ),
        });
    }
    Ok(())
}

/// The files `--repair` writes: only the missing ones, from the detected project (and the
/// name, type and agents flags). Nothing is asked and no task is imported.
///
/// # Errors
/// Invalid flags, I/O errors.
pub(crate) fn repair(
    dir: &Path,
    opts: &super::ProjectOptions,
) -> Result<(ProjectSpec, generate::Outcome)> {
    let facts = scan::detect_dir(dir);
    let mut spec = ProjectSpec::from_facts(&facts);
    if let Some(name) = &opts.project_name {
        generate::validate_value("--project-name", name)?;
        spec.name.clone_from(name);
    }
    if let Some(ty) = &opts.project_type {
        generate::validate_value("--project-type", ty)?;
        if let Some(w) = spec.set_type(ty, &facts) {
            errln!("warning: {w}");
        }
    }
    if !opts.agents.is_empty() {
        spec.agents = super::known_agents(dir, &opts.agents)?;
    }
    if let Some(calls) = opts.calls {
        if calls == 0 {
            return Err(HankError::usage("--calls must be at least 1"));
        }
        spec.max_calls = calls;
    }
    let outcome = generate::create_project_files(dir, &spec, generate::Existing::Repair)?;
    Ok((spec, outcome))
}

/// What `--force` / `--keep` means for the files that exist.
#[must_use]
pub(crate) fn existing_mode(opts: &super::ProjectOptions) -> generate::Existing {
    if opts.force {
        generate::Existing::Replace
    } else {
        generate::Existing::Keep
    }
}

/// `hank enable` in `dir`.
///
/// # Errors
/// No terminal without `--yes`, already enabled (exit 2), interrupted (130), invalid
/// answers, I/O errors.
/// `--repo NAME=PATH[@BASE]…`: `.hank/workspace.toml` written (an existing one is kept
/// unless `--force`); its path when it was written.
pub(crate) fn workspace_file(
    dir: &Path,
    opts: &super::ProjectOptions,
) -> Result<Option<std::path::PathBuf>> {
    if opts.repos.is_empty() {
        return Ok(None);
    }
    if crate::workspace::path(dir).exists() && !opts.force {
        errln!(
            "note: {} exists and was kept (--force replaces it)",
            crate::workspace::FILE
        );
        return Ok(None);
    }
    crate::workspace::write(dir, &opts.repos, true)?;
    Ok(Some(std::path::PathBuf::from(crate::workspace::FILE)))
}

pub(crate) fn run(dir: &Path, args: &EnableArgs) -> Result<u8> {
    use std::io::IsTerminal;
    let interactive = !args.yes && !args.opts.repair;
    if interactive && !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(HankError::usage_hint(
            "hank enable is interactive and needs a terminal (stdin and stderr)",
            "use `hank enable-ci` in scripts and CI, or pass --yes to accept the detected defaults",
        ));
    }
    preflight(dir, &args.opts)?;
    if args.opts.repair {
        let (_, mut outcome) = repair(dir, &args.opts)?;
        outcome.written.extend(workspace_file(dir, &args.opts)?);
        if outcome.written.is_empty() {
            errln!("Nothing was missing; no file was touched.");
        } else {
            errln!("Recreated the missing files (nothing else was touched):");
            for w in &outcome.written {
                errln!("  {}", w.display());
            }
        }
        return Ok(exit::OK);
    }
    if interactive {
        install_ctrlc_handler();
    }
    let bar = spinner("Detecting the project…");
    let facts = scan::detect_dir(dir);
    bar.finish_and_clear();
    errln!("Detected:\n{}", describe(&facts));

    let answers = if interactive {
        ask(&facts, args, &mut DialoguerPrompter::default())?
    } else {
        ask(&facts, args, &mut DefaultsPrompter)?
    };

    let mut tasks = Vec::new();
    let mut requirements = None;
    for source in &answers.request.sources {
        let bar = spinner(&format!("Importing tasks from {}…", source.as_str()));
        let result = sources::fetch_one(dir, *source, &answers.request);
        bar.finish_and_clear();
        let result = result.and_then(|t| {
            if *source == TaskSourceKind::Prd {
                requirements = sources::prd_requirements(dir, &answers.request)?;
            }
            Ok(t)
        });
        match result {
            Ok(t) => {
                errln!("Imported {} task(s) from {}.", t.len(), source.as_str());
                tasks.extend(t);
            }
            Err(err) => {
                errln!("warning: {err}");
                if let Some(hint) = err.hint() {
                    errln!("hint: {hint}");
                }
                let go_on = if interactive {
                    DialoguerPrompter::default().confirm("Continue without these tasks?", true)?
                } else {
                    true
                };
                if !go_on {
                    return Err(HankError::Cancelled(
                        "stopped: no files were written".into(),
                    ));
                }
            }
        }
    }
    let tasks = super::tasks::dedupe(tasks);

    let mut spec = ProjectSpec::from_facts(&facts);
    spec.name = answers.name;
    if let Some(w) = spec.set_type(&answers.project_type, &facts) {
        errln!("warning: {w}");
    }
    spec.max_calls = answers.max_calls;
    spec.agents = super::known_agents(dir, &answers.agents)?;
    let imported = tasks.len();
    spec.tasks = tasks;
    spec.requirements = requirements;
    let mut outcome = generate::create_and_verify(dir, &spec, existing_mode(&args.opts))?;
    outcome.written.extend(workspace_file(dir, &args.opts)?);
    let written = &outcome.written;
    if written.is_empty() {
        errln!("All hank files were already there; nothing written.");
    } else {
        errln!("Wrote:");
        for w in written {
            errln!("  {}", w.display());
        }
    }
    if let Some(m) = outcome.backup_message() {
        errln!("{m}");
    }
    errln!(
        "hank is enabled for {} ({imported} task(s) imported). Review .hank/fix_plan.md and \
         .hankrc, then run `hank` (or `hank --monitor`).",
        spec.name
    );
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// Answers from a script; records the prompts it saw.
    #[derive(Default)]
    struct Scripted {
        answers: VecDeque<&'static str>,
        seen: Vec<String>,
    }

    impl Scripted {
        fn new(answers: &[&'static str]) -> Self {
            Self {
                answers: answers.iter().copied().collect(),
                seen: Vec::new(),
            }
        }
        fn next(&mut self, prompt: &str) -> Result<&'static str> {
            self.seen.push(prompt.to_string());
            self.answers
                .pop_front()
                .ok_or_else(|| HankError::Internal(format!("unexpected prompt {prompt}")))
        }
    }

    impl Prompter for Scripted {
        fn confirm(&mut self, prompt: &str, _default: bool) -> Result<bool> {
            Ok(self.next(prompt)? == "y")
        }
        fn multi_select(
            &mut self,
            prompt: &str,
            _items: &[String],
            defaults: &[bool],
        ) -> Result<Vec<usize>> {
            let a = self.next(prompt)?;
            if a == "default" {
                return DefaultsPrompter.multi_select(prompt, &[], defaults);
            }
            Ok(a.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        }
        fn input(
            &mut self,
            prompt: &str,
            default: &str,
            validate: Validator<'_>,
        ) -> Result<String> {
            let a = self.next(prompt)?;
            let a = if a.is_empty() { default } else { a };
            validate(a).map_err(HankError::usage)?;
            Ok(a.to_string())
        }
    }

    fn facts() -> ProjectFacts {
        ProjectFacts {
            name: "shop".into(),
            project_type: "typescript".into(),
            github_repo: Some("acme/shop".into()),
            gh_available: true,
            prd_files: vec!["docs/prd.md".into()],
            ..ProjectFacts::default()
        }
    }

    fn args() -> EnableArgs {
        EnableArgs {
            opts: crate::project::ProjectOptions {
                limit: 50,
                ..crate::project::ProjectOptions::default()
            },
            ..EnableArgs::default()
        }
    }

    #[test]
    fn all_questions_in_order() {
        let mut p = Scripted::new(&["1,2", "", "30", "sprint-1", ""]);
        let a = ask(&facts(), &args(), &mut p).unwrap();
        assert_eq!(p.seen.len(), 5, "{:?}", p.seen);
        assert_eq!(a.name, "shop");
        assert_eq!(a.project_type, "typescript");
        assert_eq!(a.max_calls, 30);
        assert_eq!(
            a.request.sources,
            vec![TaskSourceKind::Github, TaskSourceKind::Prd]
        );
        assert_eq!(a.request.label.as_deref(), Some("sprint-1"));
        assert_eq!(a.request.prd, Some(PathBuf::from("docs/prd.md")));
    }

    #[test]
    fn flags_skip_their_questions() {
        let mut args = args();
        args.opts.from = vec![FromSource::None];
        args.opts.project_name = Some("named".into());
        args.opts.calls = Some(7);
        let mut p = Scripted::new(&[]);
        let a = ask(&facts(), &args, &mut p).unwrap();
        assert!(p.seen.is_empty());
        assert_eq!((a.name.as_str(), a.max_calls), ("named", 7));
        assert!(a.request.sources.is_empty());
    }

    #[test]
    fn defaults_take_available_sources() {
        let a = ask(&facts(), &args(), &mut DefaultsPrompter).unwrap();
        assert_eq!(
            a.request.sources,
            vec![TaskSourceKind::Github, TaskSourceKind::Prd]
        );
        assert_eq!(a.max_calls, 100);
        assert_eq!(a.request.label, None);
    }

    #[test]
    fn invalid_answers_are_errors() {
        let cases: &[&[&'static str]] = &[&["", "bad\"name"], &["", "", "zero"], &["", "", "0"]];
        for script in cases {
            let mut p = Scripted::new(script);
            assert!(ask(&facts(), &args(), &mut p).is_err(), "{script:?}");
        }
        let mut bad = args();
        bad.opts.calls = Some(0);
        assert!(ask(&facts(), &bad, &mut DefaultsPrompter).is_err());
        bad.opts.calls = None;
        bad.opts.project_name = Some("a\nb".into());
        assert!(ask(&facts(), &bad, &mut DefaultsPrompter).is_err());
    }

    #[test]
    fn from_flags_table() {
        let prd = Path::new("x.md");
        type Case<'a> = (
            &'a [FromSource],
            Option<&'a Path>,
            Option<Vec<TaskSourceKind>>,
        );
        let cases: &[Case<'_>] = &[
            (&[], None, None),
            (&[], Some(prd), Some(vec![TaskSourceKind::Prd])),
            (&[FromSource::None], None, Some(vec![])),
            (
                &[FromSource::Github, FromSource::Beads, FromSource::Github],
                None,
                Some(vec![TaskSourceKind::Github, TaskSourceKind::Beads]),
            ),
        ];
        for (from, prd, want) in cases {
            assert_eq!(&sources_from_flags(from, *prd), want, "{from:?}");
        }
    }

    #[test]
    fn preflight_outcomes() {
        use crate::project::ProjectOptions;
        let plain = ProjectOptions::default();
        let force = ProjectOptions {
            force: true,
            ..ProjectOptions::default()
        };
        let repair = ProjectOptions {
            repair: true,
            ..ProjectOptions::default()
        };
        let both = ProjectOptions {
            force: true,
            repair: true,
            ..ProjectOptions::default()
        };
        let dir = tempfile::tempdir().unwrap();
        assert!(preflight(dir.path(), &plain).is_ok());
        std::fs::create_dir_all(dir.path().join(".hank")).unwrap();
        std::fs::write(dir.path().join(".hank/PROMPT.md"), "x").unwrap();
        let err = preflight(dir.path(), &plain).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let msg = err.to_string();
        assert!(
            msg.contains("hank enable --repair") && msg.contains("missing: .hank/fix_plan.md"),
            "{msg}"
        );
        assert!(preflight(dir.path(), &force).is_ok());
        assert!(preflight(dir.path(), &repair).is_ok());
        assert_eq!(preflight(dir.path(), &both).unwrap_err().exit_code(), 1);
        let flat = tempfile::tempdir().unwrap();
        std::fs::write(flat.path().join("PROMPT.md"), "x").unwrap();
        std::fs::write(flat.path().join("fix_plan.md"), "x").unwrap();
        let err = preflight(flat.path(), &plain).unwrap_err();
        assert_eq!(err.exit_code(), 1);
        assert!(err.hint().unwrap_or("").contains("hank migrate"));
    }
}
