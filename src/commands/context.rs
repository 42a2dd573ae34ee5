//! The project a command works on, found once ([`Project`], as jj's `CommandHelper`): its
//! root, its store (`.hank/`), its settings, its lock, its plan and the checks every
//! command that starts tasks makes (the agents named, the tree committed). Commands take what
//! they share from here and from the library's rooms, never from one another.

use std::path::{Path, PathBuf};

use clap::Parser;

use crate::cli::RunFlagsOnly;
use crate::error::{HankError, Result};
use crate::project;
use crate::settings::{Flags, Settings};
use crate::store::Store;

/// The project of a command: the folder holding `.hank/` (or to hold it), found once.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    root: PathBuf,
}

impl Project {
    /// The project around the current directory ([`project::locate::discover`]).
    ///
    /// # Errors
    /// The current directory cannot be read.
    pub(crate) fn locate() -> Result<Self> {
        Ok(Self::at(project::locate::discover()?))
    }

    /// The project at `root`.
    pub(crate) fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Its root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Its store; refused when the project has no `.hank/`.
    ///
    /// # Errors
    /// No `.hank/` folder.
    pub(crate) fn store(&self) -> Result<Store> {
        require_hank_dir(&self.root)
    }

    /// Its settings with `flags`, refused while a change of the configuration the agent could
    /// have made (`.hankrc`, hooks…) is not approved, unless `accept` (`--accept-config`).
    ///
    /// # Errors
    /// The approval is missing; a setting is invalid.
    pub(crate) fn approved_settings(
        &self,
        flags: &Flags,
        accept: bool,
        command: &str,
    ) -> Result<Settings> {
        crate::approval::require(&self.root, accept, command)?;
        crate::settings::load(flags, &self.root)
    }

    /// The plan, `.hank/fix_plan.md`.
    pub(crate) fn plan_path(&self) -> PathBuf {
        self.root.join(".hank").join("fix_plan.md")
    }

    /// The plan read and parsed by `parse` (with OPTIONAL_SECTIONS), for `hank fleet` and its CI
    /// jobs: an unreadable plan is an error naming the file and `why` the command needs it, an
    /// invalid one an error naming the file.
    pub(crate) fn parsed_plan<T>(
        &self,
        s: &Settings,
        why: &str,
        parse: fn(&str, &[String]) -> std::result::Result<T, String>,
    ) -> Result<T> {
        let path = self.plan_path();
        let text = s
            .read_fix_plan()
            .ok_or_else(|| HankError::usage(format!("cannot read {}: {why}", path.display())))?;
        parse(&text, &s.optional_sections.value)
            .map_err(|e| HankError::usage(format!("{}: {e}", path.display())))
    }

    /// Each agent of the chain (`--agent`, `AGENTS`) has a profile; `--agent 2` is the usual
    /// slip for `--agents 2`.
    pub(crate) fn known_agents(&self, s: &Settings) -> Result<()> {
        for name in s.agent_chain() {
            if let Err(e) = crate::agent::profile::load(&name, &self.root) {
                let hint = if name.trim().parse::<u64>().is_ok() {
                    format!(
                        "`--agent {name}` names the agent every task uses; the number of tasks at once is `--agents {name}`"
                    )
                } else {
                    "`hank agents` lists the agents this project knows".to_string()
                };
                return Err(HankError::usage_hint(format!("hank fleet: {e}"), hint));
            }
        }
        Ok(())
    }

    /// The tasks start from the last commit: uncommitted changes (an edited plan section, a
    /// changed file) would silently be left out. Refused naming the files, unless `allow`
    /// (then said what is left out). hank's runtime files and the untracked configuration the
    /// fleet copies into each worktree do not count.
    pub(crate) fn refuse_dirty_tree(&self, allow: bool) -> Result<()> {
        let root = self.root.as_path();
        let args = ["status", "--porcelain=v1", "-z", "--untracked-files=all"];
        let out = crate::git::Checkout::at(root)
            .git()
            .read(&args)
            .map_err(|e| HankError::Tool(e.context(&args, root)))?;
        let runtime = crate::deliver::runtime_paths();
        // Untracked configuration the fleet copies into each worktree is not left out.
        let copied = |e: &str| {
            e.starts_with("?? ")
                && matches!(&e[3..], ".hankrc" | ".hank/PROMPT.md" | ".hank/AGENT.md")
                || e.starts_with("?? .hank/agents/")
        };
        let files: Vec<String> = String::from_utf8_lossy(&out)
            .split('\0')
            .filter(|e| e.len() > 3 && !copied(e))
            .map(|e| e[3..].to_string())
            .filter(|f| {
                !runtime.iter().any(|r| {
                    f == r
                        || f.starts_with(&format!("{r}/"))
                        || r.ends_with('*') && f.starts_with(r.trim_end_matches('*'))
                })
            })
            .collect();
        if files.is_empty() {
            return Ok(());
        }
        let shown: Vec<String> = files
            .iter()
            .take(10)
            .map(|f| crate::sanitize::line(f))
            .collect();
        let more = files
            .len()
            .checked_sub(10)
            .filter(|n| *n > 0)
            .map(|n| format!(" (and {n} more)"))
            .unwrap_or_default();
        let list = format!("{}{more}", shown.join(", "));
        if allow {
            errln!(
                "hank: fleet: --allow-dirty: the tasks start from the last commit; left out (not committed): {list}"
            );
            return Ok(());
        }
        Err(HankError::usage_hint(
            format!(
                "the working tree has uncommitted changes, which the fleet's tasks would not see (they start from the last commit): {list}"
            ),
            "commit them first (the plan too), or pass --allow-dirty to run without them",
        ))
    }
}

/// `--agents N` of `hank fleet` and `hank watch`: a whole number ≥ 1.
pub(crate) fn parse_agents(given: &str) -> Result<usize> {
    match given.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(HankError::usage(format!(
            "--agents expects the number of tasks to run at once (a whole number ≥ 1), got {given:?}"
        ))),
    }
}

/// The `hank run` flags given to `command` (`hank fleet`, `hank watch`) after its own.
pub(crate) fn run_flags(given: &[String], command: &str) -> Result<RunFlagsOnly> {
    RunFlagsOnly::try_parse_from(given).map_err(|e| {
        HankError::usage(format!(
            "a `hank run` flag given to {command} is not valid: {}",
            e.to_string().trim()
        ))
    })
}

/// The project the command works on ([`project::locate::discover`]).
pub(crate) fn project_dir() -> Result<PathBuf> {
    Ok(Project::locate()?.root)
}

pub(crate) fn require_hank_dir(dir: &Path) -> Result<Store> {
    let store = Store::new(dir);
    if !store.dir().is_dir() {
        return Err(HankError::usage_hint(
            format!("{} is not a hank project (no .hank/ folder)", dir.display()),
            "run `hank enable` here, or `hank setup NAME` for a new project",
        ));
    }
    Ok(store)
}

/// The project's lock for a command that must not run beside a running loop; while one runs,
/// the error says so with `hint` (what to do instead).
pub(crate) fn lock_or_hint(store: &Store, hint: &str) -> Result<crate::store::LockGuard> {
    store.lock().map_err(|e| match e {
        locked @ HankError::Locked { .. } => HankError::usage_hint(locked.to_string(), hint),
        other => other,
    })
}

/// The project, its store and its settings (with `flags`) for `command`, which uses the
/// configuration the agent could have changed during a run (DELIVER_REMOTE, VERIFY_COMMAND,
/// GH_REPO in `.hankrc`…): refused while a change is not approved.
pub(crate) fn approved_project(command: &str, flags: &Flags) -> Result<(PathBuf, Store, Settings)> {
    let project = Project::locate()?;
    crate::approval::require(project.root(), false, command)?;
    let store = project.store()?;
    let settings = crate::settings::load(flags, project.root())?;
    Ok((project.root, store, settings))
}

/// A delivery of the last finished run outside a loop (`hank deliver`, a CI fleet task's
/// verified completion): the project with its approved configuration and `flags`, the
/// configuration's approval recorded while its git and forge calls run (what a hook changes
/// meanwhile is not approved silently), the notifier, the project's lock, then
/// [`crate::deliver::outside::last_run`]; `show` gets the record as shown at the end, then a
/// fleet whose open delivery it finished is marked done.
pub(crate) fn deliver_last_run(
    flags: &Flags,
    force: bool,
    opts: crate::deliver::outside::Opts,
    show: impl FnOnce(&crate::deliver::outside::Ended) -> Result<()>,
) -> Result<u8> {
    // A configuration the agent changed during the run is not used unapproved.
    let (dir, store, s) = approved_project("hank deliver", flags)?;
    // Its git and forge calls are a run: what a hook changes meanwhile is not approved silently.
    let _recorded = crate::approval::record(&dir, "hank deliver")?;
    let _notify = crate::notify::install(
        &s,
        crate::policy::time::Clock::now(&crate::clock::SystemClock::from_env()?),
    );
    let _lock = lock_or_hint(
        &store,
        "deliver after the run ends (the loop itself delivers with DELIVER=branch or pr)",
    )?;
    let ended = crate::deliver::outside::last_run(&dir, &store, &s, opts, force)?;
    show(&ended)?;
    if ended.fleet && ended.code == crate::exit::OK {
        crate::fleet::mark_done(&dir)?;
    }
    Ok(ended.code)
}
