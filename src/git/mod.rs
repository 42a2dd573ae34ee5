//! The one door for every git command hank runs: progress's reading of the tree
//! (`crate::worktree`), the fleet's worktrees, commits and merges, delivery, the state refs,
//! `hank fleet plan`/`run-task`, `hank import`'s and `setup`'s commits, `doctor`'s version;
//! the one commit of the agent's work, [`commit::commit_all`] (delivery's and a fleet task's).
//! What progress needs of the repository is read in process instead: the status
//! ([`snapshot`]) and the files of the commits a loop made ([`odb`]: objects, packs, the tree
//! diff); git runs for it only where they say `Unreadable`. Nothing else starts git
//! (`tests/integration/architecture.rs` fails on `Cmd::new("git")` or
//! `which("git")` anywhere else).
//!
//! # The rule: git run by hank runs no program the repository configures
//!
//! The repository (`.git/config`, `.git/hooks/`, `.gitattributes`, `info/attributes`) is
//! writable by the agent, so every git hank starts has, on its command line: hooks off
//! (`core.hooksPath=/dev/null`), every filter driver's `clean`/`smudge`/`process` emptied
//! (named from a `git config` listing, `filters`), no fsmonitor, no external diff, no pager;
//! textconv is never asked for (the one patch read, the reviewer's [`diff_trees`], passes
//! `--no-textconv --no-ext-diff`) and aliases never used (hank names
//! built-in commands only). The one exception is delivery's commit and push ([`Hooks::Run`]):
//! the user's pre-commit/pre-push hooks and filters (LFS) run only when the project's
//! configuration is approved (`crate::approval::unapproved` is empty); anything else passes
//! [`Hooks::Off`].
//!
//! # Which repository
//!
//! A task worktree of `hank fleet` is opened from paths hank knows ([`Repo::task_worktree`]):
//! its git directory is found in the checkout's common directory (`worktrees/*/gitdir` naming
//! the worktree), and every git command in it then runs as `git --git-dir=<that>
//! --work-tree=<wt>` with `GIT_COMMON_DIR` set, never through the worktree's `.git` file,
//! which the agent can rewrite, nor a `commondir`. The agent itself commits in a repository of
//! its own ([`agent_repo`]), which hank's git never runs in; hank imports its commits.
//! Commits check that HEAD is the branch hank expects ([`Repo::expect_branch`]).
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! the one door for git: every git command hank runs starts here (`architecture.rs` fails on
//! `Cmd::new("git")`/`which("git")` elsewhere). `commit.rs`: the one commit of the agent's work,
//! `commit_all(dir, CommitAll)` — stage all, list what is staged once (`diff --cached --name-status
//! --relative`: named as the project names its files, also in a folder of its repository), unstage
//! by literal name only what is staged of hank's runtime files (`runtime_paths`, the one list, from
//! `templates/gitignore`, matched in process by `is_runtime_path` — tested against git's own
//! `:(glob)` matching of `runtime_globs`; a fleet task's plan too with `leave_plan`) and of
//! secret-looking files (`unstage_secrets`), commit (a merge in progress too) with hank's identity
//! when the repository has none (`git::IDENTITY_ARGS` / `git::IDENTITY`: the one fallback,
//! `hank@localhost` written once, used by every commit hank makes — setup, import, a fleet task, a
//! state ref), the user's hooks only with `Hooks::Run`, `Committed` says whether — for delivery
//! (`deliver::commit_all`, HEAD checked) and a fleet task (`fleet/worktrees.rs`' `commit_all`,
//! hooks off). `git`/`run_git`/`run_git_for` read and act with nothing the repository configures
//! (filters/hooks/fsmonitor/external diff/pager off on the command line, minimal env, timeout, ends
//! on a signal); `git_run`/`git_run_input` (delivery, state refs, setup/import commits: the user's
//! env and credentials, hooks and filters off) and `git_run_hooks(.., Hooks)` (delivery's
//! commit/push: `Hooks::approved_in(project)` = `Run` only when `approval::unapproved` is empty);
//! `Repo::task_worktree` pins a fleet worktree's git dir (found in `<common>/worktrees/*/gitdir`)
//! so every later call there is `--git-dir/--work-tree` with `GIT_COMMON_DIR`, and records the task
//! (`TaskGit`: admin dir, common dir, the agent's repository, what the `.git` file, `gitdir` and
//! `commondir` must hold — `TaskGit::tampered`; the agent's git rules recorded from it in the
//! sandbox at the pin, `sandbox::record_git_rules`, which `sandbox::worktree_git` reads — any other
//! linked worktree's resolved once and frozen —; a task's run checks it before every call,
//! `effects::agent`'s `task_record_holds`: a `security` event and the run stops),
//! `Repo::expect_branch`; `agent_repo.rs` (issue 47): the task agent's own repository
//! `<common>/worktrees/<id>/agent` (`make`: HEAD, the user's refs as facts, hank's index, a merge
//! in progress, objects with the checkout's as alternate; the worktree's `.git` names it; `release`
//! before a worktree is moved or removed; `import`: the agent's branch brought in — objects
//! checked, `pack-objects`/`index-pack --fix-thin`/`rev-list --objects`, `update-ref` CAS — before
//! every commit of the task, `commit::commit_all` and `fleet/merge.rs`' `commit_task`); `version()`
//! for doctor; `snapshot.rs` (+ `index.rs`, `ignore.rs`): git's status read in process for progress
//! (a file found clean by content under a stale index is kept as `verified` and not hashed again at
//! the same stat data) — the index (v2–4), HEAD and refs,
//! `.gitignore`/`info/exclude`/`core.excludesFile` with git's wildmatch, `.gitattributes`
//! conversions (stat rule), submodules and nested repositories, blob ids by SHA-1; `Snapshot` keys
//! per index entry and per dirty/untracked path, `Table::changed` the delta; a pinned worktree read
//! through `pinned_git_dir` (in a fleet task's worker: pinned at its start from the checkout the
//! supervisor names in `HANK_TASK_CHECKOUT`, `Repo::pin_task_worktree_from_env`); its differential
//! test against `git status` over a generated corpus is `snapshot/tests.rs` (`HANK_CORPUS_SEEDS=N`
//! for a longer search); `filters.rs`: the filter driver names to switch off, listed with `git
//! config` (every config file and include target) and kept while the files' stamps are unchanged —
//! no `git config` spawn per git call; `odb.rs` (+ `odb/diff.rs`): git's object database read in
//! process — loose objects and packs (`.idx` v2 with 64-bit offsets, `.pack` v2/3,
//! `OFS_DELTA`/`REF_DELTA` chains), alternates, inflated by `miniz_oxide`, `read_at` (no mmap),
//! every size capped (`MAX_OBJECT`, `MAX_DELTA_CHAIN`, `MAX_TREE_DEPTH`) → `Unreadable`; the tree
//! diff within `LIMITS` (paths, trees, bytes: a tree bomb is cut, `changed_files_within` →
//! `Changed::cut`, and git is not asked); `changed_files` = `git diff --name-only --no-renames
//! --relative` between two commits (hank's files excluded; git's tree order, `a.b` before `a/`) or
//! `ls-tree -r` of one; its differential test against real git (loose, gc, `repack --depth=50`,
//! `REF_DELTA`, a thin fetch, a linked worktree, alternates, a project subdirectory) is
//! `odb/tests.rs`

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

pub mod agent_repo;
pub mod commit;
mod filters;
pub mod ignore;
pub mod index;
pub mod odb;
pub mod snapshot;

/// Longest a git command may run before it is killed (with its process group) and the
/// answer falls back to the walk.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(60);

/// hank's own git identity's address — written here only: what a commit hank makes in a
/// repository without one is made as ([`IDENTITY`], [`IDENTITY_ARGS`]).
macro_rules! hank_email {
    () => {
        "hank@localhost"
    };
}

/// hank's own git identity, for people: `hank <hank@localhost>`.
pub const IDENTITY: &str = concat!("hank <", hank_email!(), ">");

/// The `-c` arguments that make a commit as hank's own identity, where the repository has
/// none (the one fallback: the agent's commit, a fleet task's, setup's, an import's, a state
/// ref's).
pub const IDENTITY_ARGS: [&str; 4] = [
    "-c",
    "user.name=hank",
    "-c",
    concat!("user.email=", hank_email!()),
];

/// Whether the repository's own hooks and filters may run (delivery's commit and push only,
/// and only when the user approved the project's configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hooks {
    /// The user's hooks and filters run (the configuration is approved).
    Run,
    /// None of them runs.
    Off,
}

/// Work trees hank pinned ([`Repo::task_worktree`]): what it recorded of each at the pin,
/// frozen; git runs in them with `--git-dir`/`--work-tree` and `GIT_COMMON_DIR`, never through
/// their `.git` file or their git dir's `commondir`.
static PINNED: Mutex<Vec<TaskGit>> = Mutex::new(Vec::new());

/// A fleet task's worktree as hank recorded it when it pinned it (never read again from what
/// the agent can write): the sandbox's git rules of the task's agent, the git dir hank's own
/// git uses, and the files whose change stops the task ([`TaskGit::tampered`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskGit {
    /// The work tree as named, and resolved.
    pub work_tree: PathBuf,
    pub resolved: PathBuf,
    /// The worktree's git dir in the checkout's records (`<common>/worktrees/<id>`): hank's
    /// own view of the task (its HEAD, index, merge state); never writable by the agent.
    pub admin: PathBuf,
    /// The checkout's common git dir (objects, refs, config), resolved.
    pub common: PathBuf,
    /// The agent's own repository ([`agent_repo`]: `<admin>/agent`), when hank made one.
    pub agent: Option<PathBuf>,
    /// What the worktree's `.git` file must hold.
    pub dot_git: Vec<u8>,
    /// The admin dir's `gitdir` and `commondir` as recorded.
    pub admin_files: Vec<(PathBuf, Option<Vec<u8>>)>,
}

/// Most bytes of a `.git` file or a git dir's small files hank reads.
const SMALL_FILE: u64 = 4096;

/// A small file hank compares (a regular file, never through a link; `None`: absent or not
/// a regular file).
fn small_file(path: &Path) -> Option<Vec<u8>> {
    crate::fsread::read(path, SMALL_FILE, crate::fsread::Follow::No).ok()
}

impl TaskGit {
    /// Whether `dir` names this work tree.
    fn names(&self, dir: &Path) -> bool {
        self.work_tree == dir
            || self.resolved == dir
            || std::fs::canonicalize(dir).is_ok_and(|c| c == self.resolved)
    }

    /// The first recorded file that changed since the pin, and how: the worktree's `.git`
    /// file, the admin dir's `gitdir` or `commondir`, a `commondir` or another alternates
    /// file planted in the agent's repository. `None`: all as recorded.
    #[must_use]
    pub fn tampered(&self) -> Option<(PathBuf, String)> {
        let dot = self.work_tree.join(".git");
        if small_file(&dot).as_deref() != Some(self.dot_git.as_slice()) {
            return Some((
                dot,
                format!(
                    "the worktree's .git file no longer holds what hank wrote ({})",
                    String::from_utf8_lossy(&self.dot_git).trim()
                ),
            ));
        }
        for (path, bytes) in &self.admin_files {
            if small_file(path) != *bytes {
                return Some((path.clone(), "changed in the checkout's records".into()));
            }
        }
        if let Some(p) = &self.agent {
            let commondir = p.join("commondir");
            if std::fs::symlink_metadata(&commondir).is_ok() {
                return Some((
                    commondir,
                    "a commondir was planted in the task's own repository".into(),
                ));
            }
            let alternates = p.join("objects/info/alternates");
            if small_file(&alternates).as_deref()
                != Some(agent_repo::alternates_text(&self.common).as_bytes())
            {
                return Some((
                    alternates,
                    "the alternates of the task's own repository changed".into(),
                ));
            }
        }
        None
    }
}

/// What hank recorded of the pinned work tree `dir`, if it pinned it.
#[must_use]
pub fn task_git(dir: &Path) -> Option<TaskGit> {
    let pinned = PINNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    pinned.iter().find(|t| t.names(dir)).cloned()
}

/// `--git-dir=… --work-tree=…` for a pinned work tree, nothing otherwise.
fn pinned_args(dir: &Path) -> Vec<String> {
    let pinned = PINNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    pinned
        .iter()
        .find(|t| t.work_tree == dir || t.resolved == dir)
        .map(|t| {
            vec![
                format!("--git-dir={}", t.admin.display()),
                format!("--work-tree={}", t.work_tree.display()),
            ]
        })
        .unwrap_or_default()
}

/// `GIT_COMMON_DIR` for a pinned work tree (the common dir hank recorded: the admin dir's
/// `commondir` is not what git's configuration is read from), nothing otherwise.
fn pinned_env(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let pinned = PINNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    pinned
        .iter()
        .find(|t| t.work_tree == dir || t.resolved == dir)
        .map(|t| vec![("GIT_COMMON_DIR", t.common.clone())])
        .unwrap_or_default()
}

/// Set by `hank fleet` on a task's worker: the checkout the task's worktree belongs to
/// ([`Repo::pin_task_worktree_from_env`]). Removed from the agent's environment.
pub const TASK_CHECKOUT_ENV: &str = "HANK_TASK_CHECKOUT";

/// The git directory hank pinned for the work tree `dir` in this process
/// ([`Repo::task_worktree`]; in a fleet task's worker, at its start from the checkout in
/// [`TASK_CHECKOUT_ENV`]), if any, and its common directory as recorded: the in-process reader
/// ([`snapshot`]) uses them instead of the worktree's `.git` file and any `commondir`. For a
/// task with its own repository ([`agent_repo`]) that is the agent's view (its HEAD, index and
/// commits; the checkout's objects through the recorded alternates).
#[must_use]
pub fn pinned_git_dir(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    task_git(dir).map(|t| match t.agent {
        Some(p) => (p.clone(), p),
        None => (t.admin, t.common),
    })
}

/// A repository opened from paths hank recorded itself.
#[derive(Debug, Clone)]
pub struct Repo {
    work_tree: PathBuf,
    git_dir: PathBuf,
    task: TaskGit,
}

impl Repo {
    /// The linked worktree `wt` of the checkout `root`: its git directory is the one of
    /// `<common>/worktrees/*` whose `gitdir` file names `<wt>/.git` (written by `git worktree
    /// add`, outside the worktree); from now on every git command hank runs in `wt` uses it
    /// (`--git-dir`, `--work-tree`, `GIT_COMMON_DIR`), whatever the worktree's `.git` file
    /// says. What it finds is recorded ([`TaskGit`]) and frozen for this process: the agent's
    /// own repository (`<admin>/agent`, made by hank, [`agent_repo`]) when there is one, and
    /// what the worktree's `.git` file must hold (`gitdir: <agent repository>`, else what it
    /// holds now).
    ///
    /// # Errors
    /// The checkout's common directory cannot be read, or no worktree of it is `wt`.
    pub fn task_worktree(root: &Path, wt: &Path) -> Result<Repo, GitError> {
        let out = run_git(
            root,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )?;
        let common = PathBuf::from(String::from_utf8_lossy(&out).trim());
        let common = std::fs::canonicalize(&common).unwrap_or(common);
        let want = std::fs::canonicalize(wt)
            .map_err(|e| GitError::Output(format!("cannot resolve {}: {e}", wt.display())))?;
        let admin = common.join("worktrees");
        let entries = std::fs::read_dir(&admin)
            .map_err(|e| GitError::Output(format!("cannot read {}: {e}", admin.display())))?;
        let mut found = None;
        for e in entries.flatten() {
            let gitdir = e.path().join("gitdir");
            if std::fs::symlink_metadata(&gitdir).is_ok_and(|m| m.is_file())
                && let Ok(text) = std::fs::read_to_string(&gitdir)
                && let named = Path::new(text.trim())
                && named.file_name() == Some(std::ffi::OsStr::new(".git"))
                && named
                    .parent()
                    .and_then(|p| std::fs::canonicalize(p).ok())
                    .is_some_and(|p| p == want)
            {
                found = Some(e.path());
                break;
            }
        }
        let git_dir = found.ok_or_else(|| {
            GitError::Output(format!(
                "{} is not a worktree of {} (no {}/*/gitdir names it)",
                wt.display(),
                root.display(),
                admin.display()
            ))
        })?;
        let agent = git_dir.join(agent_repo::AGENT_DIR);
        let agent = std::fs::symlink_metadata(&agent)
            .is_ok_and(|m| m.is_dir())
            .then_some(agent);
        let dot_git = match &agent {
            Some(p) => agent_repo::dot_git_text(p).into_bytes(),
            None => small_file(&wt.join(".git")).unwrap_or_default(),
        };
        let admin_files = ["gitdir", "commondir"]
            .iter()
            .map(|f| git_dir.join(f))
            .map(|f| {
                let bytes = small_file(&f);
                (f, bytes)
            })
            .collect();
        let task = TaskGit {
            work_tree: wt.to_path_buf(),
            resolved: want.clone(),
            admin: git_dir.clone(),
            common,
            agent,
            dot_git,
            admin_files,
        };
        // The agent's git rules, from this record only (issue 47).
        let (read, write) = match &task.agent {
            Some(p) => (vec![task.common.join("objects")], vec![p.clone()]),
            None => (vec![task.common.clone()], Vec::new()),
        };
        crate::sandbox::record_git_rules(&[wt.to_path_buf(), want.clone()], read, write);
        let mut pinned = PINNED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pinned.retain(|t| t.work_tree != wt && t.resolved != want);
        pinned.push(task.clone());
        Ok(Repo {
            work_tree: wt.to_path_buf(),
            git_dir,
            task,
        })
    }

    /// The work tree `dir` as pinned in this process, if it is.
    #[must_use]
    pub fn pinned(dir: &Path) -> Option<Repo> {
        task_git(dir).map(|task| Repo {
            work_tree: task.work_tree.clone(),
            git_dir: task.admin.clone(),
            task,
        })
    }

    /// What hank recorded of this work tree.
    #[must_use]
    pub fn task(&self) -> &TaskGit {
        &self.task
    }

    /// The work tree.
    #[must_use]
    pub fn work_tree(&self) -> &Path {
        &self.work_tree
    }

    /// In a fleet task's worker (`hank run` started by the supervisor in the task's worktree,
    /// told the checkout in [`TASK_CHECKOUT_ENV`]): pins `dir`'s git directory from the
    /// checkout's records ([`Repo::task_worktree`]) so that progress and every other git call
    /// of this process read the task's own repository, never through the worktree's `.git`
    /// file. `Ok(None)` outside a fleet.
    ///
    /// # Errors
    /// `dir` is not a worktree the checkout records (the worktree's `.git` file, or the
    /// checkout, is not what the fleet made).
    pub fn pin_task_worktree_from_env(dir: &Path) -> Result<Option<Repo>, GitError> {
        let Some(checkout) = std::env::var_os(TASK_CHECKOUT_ENV) else {
            return Ok(None);
        };
        let repo = Repo::task_worktree(Path::new(&checkout), dir)?;
        if let Some((file, what)) = repo.task.tampered() {
            return Err(GitError::Output(format!("{}: {what}", file.display())));
        }
        Ok(Some(repo))
    }

    /// The git directory hank uses for this work tree.
    #[must_use]
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The branch HEAD is on (`None` when detached), read from the pinned git directory.
    ///
    /// # Errors
    /// git cannot run.
    pub fn head_branch(&self) -> Result<Option<String>, GitError> {
        match run_git(&self.work_tree, &["symbolic-ref", "--quiet", "HEAD"]) {
            Ok(out) => Ok(Some(String::from_utf8_lossy(&out).trim().to_string())
                .map(|r| r.strip_prefix("refs/heads/").unwrap_or(&r).to_string())),
            Err(GitError::Failed(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `Ok` when HEAD is on `branch`; else an error naming both (the agent switched it).
    ///
    /// # Errors
    /// HEAD is on another branch or detached, or git cannot run.
    pub fn expect_branch(&self, branch: &str) -> Result<(), GitError> {
        match self.head_branch()? {
            Some(b) if b == branch => Ok(()),
            other => Err(GitError::Output(format!(
                "HEAD of {} is {} instead of the branch hank made for it, {branch}: refused",
                self.work_tree.display(),
                other.map_or("detached".to_string(), |b| format!("on {b}")),
            ))),
        }
    }
}

/// `git --version`'s answer (for `hank doctor`), `None` when git cannot run.
#[must_use]
pub fn version() -> Option<String> {
    let done = crate::proc::Cmd::new("git")
        .arg("--version")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .timeout(Duration::from_secs(10))
        .run()
        .ok()?;
    let out = String::from_utf8_lossy(&done.stdout);
    done.status
        .success()
        .then(|| out.lines().next().unwrap_or("").trim().to_string())
}

/// Why a git command gave no answer.
#[derive(Debug)]
pub enum GitError {
    /// `git` could not be started (not installed, not on PATH…).
    Spawn(std::io::Error),
    /// It ran longer than its timeout and was killed.
    Timeout,
    /// Hank received SIGINT, SIGTERM or SIGHUP while it ran; it was killed.
    Interrupted,
    /// It exited unsuccessfully (not a repository, a corrupt one…).
    Failed(std::process::ExitStatus),
    /// Its output could not be read or is not what was asked for.
    Output(String),
}

impl From<crate::proc::RunError> for GitError {
    fn from(e: crate::proc::RunError) -> Self {
        match e {
            crate::proc::RunError::Spawn(e) => GitError::Spawn(e),
            crate::proc::RunError::Timeout => GitError::Timeout,
            crate::proc::RunError::Interrupted => GitError::Interrupted,
            crate::proc::RunError::Io(e) => GitError::Output(e.to_string()),
        }
    }
}

impl std::fmt::Display for GitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitError::Spawn(e) => write!(f, "cannot run git: {e}"),
            GitError::Timeout => write!(f, "git ran longer than {GIT_TIMEOUT:?}"),
            GitError::Interrupted => write!(f, "git was stopped: hank was interrupted"),
            GitError::Failed(s) => write!(f, "git failed ({s})"),
            GitError::Output(e) => write!(f, "unexpected git output: {e}"),
        }
    }
}

/// Variables of the user's environment git may see (every other one is dropped, and of
/// these only those whose name is not secret, see [`crate::agent::redact::is_secret_name`]):
/// where git and the user's own configuration are, nothing else.
const GIT_ENV_KEPT: [&str; 9] = [
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
];

/// Settings on git's command line that beat every configuration file: nothing the repository
/// (which the agent can write, `.git/config` included) configures is run. No fsmonitor hook
/// or daemon, no hook, no external diff, no textconv, no pager; quoted paths off. The filter
/// drivers are switched off by name ([`filter_overrides`]). [`NO_PROGRAMS`] too.
const GIT_SAFE_CONFIG: [&str; 14] = [
    "-c",
    "core.quotepath=off",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "diff.external=",
    "-c",
    "core.pager=cat",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.attributesFile=/dev/null",
];

/// What every git hank starts without the user's approval has on its command line besides
/// hooks, filters and fsmonitor off: no signing (a rewritten configuration's `commit.gpgSign`
/// with its `gpg.program` ran the agent's script in hank's task commit), no editor (`:` is
/// git's no-op editor), no command for an alternate's refs. The keys git reads only in
/// commands hank never runs (`pager.*`, `difftool.*`, `sendemail.*`, `browser.*`,
/// `interactive.diffFilter`, `trailer.*.command`) need nothing.
pub(crate) const NO_PROGRAMS: [&str; 12] = [
    "-c",
    "commit.gpgSign=false",
    "-c",
    "tag.gpgSign=false",
    "-c",
    "core.editor=:",
    "-c",
    "sequence.editor=:",
    "-c",
    "core.alternateRefsCommand=",
    "-c",
    "merge.verifySignatures=false",
];

/// Runs `git ARGS` in `dir` with nothing of the repository's configuration that runs a
/// program: each filter driver the configuration defines (listed by `git config`, which runs
/// no filter, and kept while no configuration file changes: [`filters`]) runs with its
/// `clean`, `smudge` and `process` emptied and `required=false` on the command line (so a
/// file under a filter is compared as it is on disk), plus [`GIT_SAFE_CONFIG`]. See
/// [`git_plain`] for the rest.
pub(crate) fn git(
    dir: &Path,
    args: &[&str],
    timeout: Duration,
    ceiling: Option<&Path>,
) -> Result<Vec<u8>, GitError> {
    let names = filters::names(dir, timeout, ceiling)?;
    let overrides = filter_overrides(&names);
    git_plain(dir, &overrides, args, timeout, ceiling)
}

/// Runs `git ARGS` in `dir` the hardened way of the module's private `git` (nothing the repository configures
/// runs; bounded by [`GIT_TIMEOUT`]; ends on a signal) and returns its stdout: for `hank
/// fleet`'s worktrees, commits and merges.
pub fn run_git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    git(dir, args, GIT_TIMEOUT, None)
}

/// [`run_git`] bounded by `timeout` instead of [`GIT_TIMEOUT`]: for the commands whose work
/// grows with the tree (`hank fleet`'s `git worktree add` / `remove`: a checkout or a deletion
/// of every file).
pub fn run_git_for(dir: &Path, args: &[&str], timeout: Duration) -> Result<Vec<u8>, GitError> {
    git(dir, args, timeout, None)
}

/// The whole work tree of `dir` as a git tree object: what `git add -A` would stage (tracked
/// and untracked files, ignored ones left out), written through a temporary index at
/// `tmp_index` (removed after) so that the user's index and HEAD are untouched. The objects
/// it writes are loose objects `git gc` removes. For the reviewer's diff of a run
/// (`REVIEW_AGENT`): what changed since the run's start, commits or not. `None`-like errors:
/// not a repository.
pub fn worktree_tree(dir: &Path, tmp_index: &Path) -> Result<String, GitError> {
    let names = filters::names(dir, GIT_TIMEOUT, None)?;
    let overrides = filter_overrides(&names);
    let run =
        |args: &[&str]| git_plain_env(dir, &overrides, args, (GIT_TIMEOUT, None), Some(tmp_index));
    let _ = std::fs::remove_file(tmp_index);
    // Start from HEAD's tree (none in a repository without a commit), then the work tree.
    let out = run(&["read-tree", "HEAD"])
        .or_else(|_| run(&["read-tree", "--empty"]))
        .and_then(|_| run(&["add", "-A", "--", "."]))
        .and_then(|_| run(&["write-tree"]));
    let _ = std::fs::remove_file(tmp_index);
    let id = String::from_utf8_lossy(&out?).trim().to_owned();
    if id.len() >= 40 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id)
    } else {
        Err(GitError::Output(format!("write-tree printed `{id}`")))
    }
}

/// The stat and the patch between two trees of `dir` (`git diff --stat`, `git diff`), as
/// text (invalid UTF-8 replaced).
pub fn diff_trees(dir: &Path, from: &str, to: &str) -> Result<(String, String), GitError> {
    let stat = run_git(
        dir,
        &[
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--stat=200",
            from,
            to,
        ],
    )?;
    let patch = run_git(
        dir,
        &[
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            from,
            to,
        ],
    )?;
    Ok((
        String::from_utf8_lossy(&stat).into_owned(),
        String::from_utf8_lossy(&patch).into_owned(),
    ))
}

/// Most submodule configuration files looked at (a bound on a planted tree).
const MAX_SUBMODULE_CONFIGS: usize = 256;

/// The configuration files of the submodules of the repository `dir` is in: every `config`
/// and `config.worktree` under its (common) git directory's `modules/`, and the `.git/config`
/// of each `path` of its `.gitmodules` that has a `.git` directory of its own. Found by
/// looking at files only (no git spawn); none when the repository has no submodules.
pub(crate) fn submodule_configs(dir: &Path) -> Vec<PathBuf> {
    // The repository: a task worktree's as hank recorded it, else the nearest `.git` (a
    // directory, or a file `gitdir: …`) above `dir`.
    let pinned = task_git(dir).map(|t| (t.work_tree, t.common));
    let found = pinned.or_else(|| {
        let (top, git_dir) = dir.ancestors().find_map(|d| {
            let dot = d.join(".git");
            let meta = std::fs::symlink_metadata(&dot).ok()?;
            if meta.is_dir() {
                return Some((d.to_path_buf(), dot));
            }
            let text = std::fs::read_to_string(&dot).ok()?;
            let target = text.trim().strip_prefix("gitdir:")?.trim();
            Some((d.to_path_buf(), d.join(target)))
        })?;
        let common = std::fs::read_to_string(git_dir.join("commondir"))
            .ok()
            .map_or_else(|| git_dir.clone(), |c| git_dir.join(c.trim()));
        Some((top, common))
    });
    let Some((top, common)) = found else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut stack = vec![(common.join("modules"), 0u8)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if found.len() >= MAX_SUBMODULE_CONFIGS {
                return found;
            }
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name();
            if ft.is_dir() && depth < 8 && name != "objects" && name != "refs" && name != "logs" {
                stack.push((e.path(), depth + 1));
            } else if ft.is_file() && (name == "config" || name == "config.worktree") {
                found.push(e.path());
            }
        }
    }
    // Submodules whose repository is inside their folder (older git, `git submodule absorbgitdirs` not run).
    if let Ok(text) = std::fs::read_to_string(top.join(".gitmodules")) {
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            if !key.trim().eq_ignore_ascii_case("path") {
                continue;
            }
            let config = top
                .join(value.trim().trim_matches('"'))
                .join(".git")
                .join("config");
            if found.len() < MAX_SUBMODULE_CONFIGS && config.is_file() {
                found.push(config);
            }
        }
    }
    found
}

/// The driver name of a `filter.<name>.<key>` configuration name, `None` for another key; an
/// error for a name that cannot be switched off on git's command line (`-c` splits at the
/// first `=`, and a name that is not UTF-8 would not survive) (pure).
pub(crate) fn filter_driver(key: &[u8]) -> Result<Option<String>, GitError> {
    let Some(rest) = key.strip_prefix(b"filter.") else {
        return Ok(None);
    };
    let Some(dot) = rest.iter().rposition(|&b| b == b'.') else {
        return Ok(None);
    };
    let name = &rest[..dot];
    match std::str::from_utf8(name) {
        Ok(n) if !n.contains('=') => Ok(Some(n.to_string())),
        _ => Err(GitError::Output(format!(
            "the filter driver {:?} cannot be switched off on git's command line",
            String::from_utf8_lossy(name)
        ))),
    }
}

/// `-c` arguments switching each named filter driver off (pure).
pub(crate) fn filter_overrides(names: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(names.len() * 8);
    for name in names {
        for setting in ["clean=", "smudge=", "process=", "required=false"] {
            out.push("-c".to_string());
            out.push(format!("filter.{name}.{setting}"));
        }
    }
    out
}

/// Runs `git [SAFE CONFIG] [EXTRA] ARGS` in `dir` (no shell, stdin closed, stderr discarded,
/// its own process group, a minimal environment: [`GIT_ENV_KEPT`] minus secret names, C
/// locale, no optional index write so hank never takes `index.lock` from under the user, no
/// terminal prompt) and returns its stdout. It ends — the whole process group killed — past
/// `timeout` ([`GitError::Timeout`]) or once hank has received SIGINT, SIGTERM or SIGHUP
/// ([`GitError::Interrupted`], see [`crate::agent::signals::received`]); and once git has exited, hank stops reading its stdout even
/// when another process (one git started in its own session) still holds the pipe open.
pub(crate) fn git_plain(
    dir: &Path,
    extra: &[String],
    args: &[&str],
    timeout: Duration,
    ceiling: Option<&Path>,
) -> Result<Vec<u8>, GitError> {
    git_plain_env(dir, extra, args, (timeout, ceiling), None)
}

/// [`git_plain`] with `GIT_INDEX_FILE` set to `index` (a temporary index: the user's is never
/// touched).
fn git_plain_env(
    dir: &Path,
    extra: &[String],
    args: &[&str],
    limits: (Duration, Option<&Path>),
    index: Option<&Path>,
) -> Result<Vec<u8>, GitError> {
    let (status, stdout) = git_plain_answer(dir, extra, args, limits, index)?;
    if !status.success() {
        return Err(GitError::Failed(status));
    }
    Ok(stdout)
}

/// [`run_git`] for a command whose failing exit is an answer with output (`git merge-tree
/// --write-tree` exits 1 on conflicts and names them on stdout): its exit code (`None` when
/// a signal ended it) and stdout, whatever the code.
pub fn run_git_answer(dir: &Path, args: &[&str]) -> Result<(Option<i32>, Vec<u8>), GitError> {
    let names = filters::names(dir, GIT_TIMEOUT, None)?;
    let overrides = filter_overrides(&names);
    let (status, stdout) = git_plain_answer(dir, &overrides, args, (GIT_TIMEOUT, None), None)?;
    Ok((status.code(), stdout))
}

fn git_plain_answer(
    dir: &Path,
    extra: &[String],
    args: &[&str],
    (timeout, ceiling): (Duration, Option<&Path>),
    index: Option<&Path>,
) -> Result<(std::process::ExitStatus, Vec<u8>), GitError> {
    let mut cmd = hardened(dir, extra, args);
    if let Some(c) = ceiling {
        cmd = cmd.env("GIT_CEILING_DIRECTORIES", c);
    }
    if let Some(i) = index {
        cmd = cmd.env("GIT_INDEX_FILE", i);
    }
    // Hank stops on the first signal: no git call starts or goes on after it.
    let done = cmd
        .timeout(timeout)
        .stdout_max(usize::MAX)
        .held_pipe(HELD_PIPE_GRACE)
        .interruptible()
        .run()
        .map_err(GitError::from)?;
    if done.held_open {
        return Err(GitError::Output(
            "stdout held open after git exited".to_string(),
        ));
    }
    Ok((done.status, done.stdout))
}

/// `git ARGS` in `dir` as [`run_git`] runs it (nothing the repository configures runs, a
/// minimal environment, bounded by `timeout`, ends on a signal), with `env` added and `input`
/// on its stdin: its stdout, bytes as they are. For the import of a task's commits
/// ([`agent_repo::import`]: `git pack-objects` with the agent's objects as an alternate).
pub(crate) fn run_git_io(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
    input: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, GitError> {
    let overrides = filter_overrides(&filters::names(dir, timeout, None)?);
    let mut cmd = hardened(dir, &overrides, args);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let done = cmd
        .stdin(input.to_vec())
        .timeout(timeout)
        .stdout_max(usize::MAX)
        .held_pipe(HELD_PIPE_GRACE)
        .interruptible()
        .run()
        .map_err(GitError::from)?;
    if done.held_open {
        return Err(GitError::Output(
            "stdout held open after git exited".to_string(),
        ));
    }
    if !done.status.success() {
        return Err(GitError::Failed(done.status));
    }
    Ok(done.stdout)
}

/// The reading git of [`git_plain`] and [`run_git_io`]: `git --no-pager` with the pinned git
/// dir, [`GIT_SAFE_CONFIG`], [`NO_PROGRAMS`], `extra` and `args`, in `dir`, with a minimal
/// environment ([`GIT_ENV_KEPT`] minus secret names, C locale, no optional locks, no terminal
/// prompt, the pinned common dir).
fn hardened(dir: &Path, extra: &[String], args: &[&str]) -> crate::proc::Cmd {
    let mut cmd = crate::proc::Cmd::new("git")
        .arg("--no-pager")
        .args(pinned_args(dir))
        .args(GIT_SAFE_CONFIG)
        .args(NO_PROGRAMS)
        .args(extra)
        .args(args)
        .cwd(dir)
        .env_clear();
    for var in GIT_ENV_KEPT {
        if crate::agent::redact::is_secret_name(var) {
            continue;
        }
        if let Some(v) = std::env::var_os(var) {
            cmd = cmd.env(var, v);
        }
    }
    cmd = cmd
        .env("LC_ALL", "C")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0");
    for (k, v) in pinned_env(dir) {
        cmd = cmd.env(k, v);
    }
    cmd
}

/// How long the reading of git's stdout waits past git's exit for the pipe to close.
const HELD_PIPE_GRACE: Duration = Duration::from_millis(500);

/// What a git command that may change the repository printed (delivery: switch, commit,
/// push).
#[derive(Debug, Clone)]
pub struct GitRun {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    /// Its stderr (and a pre-push hook's output), at most [`GIT_OUTPUT_LIMIT`] bytes.
    pub stderr: String,
}

/// Most bytes kept of a delivery git command's stdout and stderr each.
pub const GIT_OUTPUT_LIMIT: u64 = 1024 * 1024;

/// Runs `git ARGS` in `dir` for delivery and hank's state refs (switch, add, commit, push)
/// with the user's environment (credentials, SSH agent, identity) but none of the
/// repository's hooks or filters ([`Hooks::Off`]; [`git_run_hooks`] runs them once approved).
/// Unlike `git_plain`, which reads the tree, this one exists to act. No shell, stdin closed, no pager, no fsmonitor, C locale, no terminal prompt, none
/// of the `GIT_*` variables that would point git at another repository; its own process
/// group killed at `timeout` or at hank's first SIGINT/SIGTERM/SIGHUP; stdout and stderr
/// captured (bounded), so a pre-push hook's output can go back to the agent. A failing exit
/// is an answer ([`GitRun::success`]), not an error.
///
/// # Errors
/// git cannot be started or ran past `timeout`.
pub fn git_run(dir: &Path, args: &[&str], timeout: Duration) -> Result<GitRun, GitError> {
    git_run_with(dir, args, None, timeout, Hooks::Off)
}

/// [`git_run`] with the user's hooks and filters run when `hooks` is [`Hooks::Run`]: only
/// delivery's commit and push, and only when the project's configuration is approved (see
/// the module's rule).
///
/// # Errors
/// git cannot be started or ran past `timeout`.
pub fn git_run_hooks(
    dir: &Path,
    args: &[&str],
    timeout: Duration,
    hooks: Hooks,
) -> Result<GitRun, GitError> {
    git_run_with(dir, args, None, timeout, hooks)
}

/// [`git_run`] with `input` written to git's stdin (then closed): the plumbing that reads
/// its input there (`git mktree`) when hank writes objects of its own (`hank state save`).
///
/// # Errors
/// git cannot be started or ran past `timeout`.
pub fn git_run_input(
    dir: &Path,
    args: &[&str],
    input: &[u8],
    timeout: Duration,
) -> Result<GitRun, GitError> {
    git_run_with(dir, args, Some(input), timeout, Hooks::Off)
}

fn git_run_with(
    dir: &Path,
    args: &[&str],
    input: Option<&[u8]>,
    timeout: Duration,
    hooks: Hooks,
) -> Result<GitRun, GitError> {
    let limit = usize::try_from(GIT_OUTPUT_LIMIT).unwrap_or(usize::MAX);
    // Without the user's approval nothing the repository configures runs: no hook, no filter
    // driver, no external diff (the same switches as the reading git's).
    let off: Vec<String> = match hooks {
        Hooks::Run => Vec::new(),
        Hooks::Off => {
            let mut off = filter_overrides(&filters::names(dir, timeout, None)?);
            off.extend(
                ["core.hooksPath=/dev/null", "diff.external="]
                    .into_iter()
                    .flat_map(|s| ["-c".to_string(), s.to_string()]),
            );
            off.extend(NO_PROGRAMS.iter().map(|s| (*s).to_string()));
            off
        }
    };
    let mut cmd = crate::proc::Cmd::new("git")
        .arg("--no-pager")
        .args(pinned_args(dir))
        .args(off)
        .args([
            "-c",
            "core.quotepath=off",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.pager=cat",
        ])
        .args(args)
        .cwd(dir)
        .env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0");
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
        "GIT_LITERAL_PATHSPECS",
        "GIT_GLOB_PATHSPECS",
        "GIT_NOGLOB_PATHSPECS",
        "GIT_ICASE_PATHSPECS",
    ] {
        cmd = cmd.env_remove(var);
    }
    for (k, v) in pinned_env(dir) {
        cmd = cmd.env(k, v);
    }
    if let Some(bytes) = input {
        cmd = cmd.stdin(bytes.to_vec());
    }
    let done = cmd
        .stdout_max(limit)
        .stderr_max(limit)
        .timeout(timeout)
        .interruptible()
        .run()
        .map_err(GitError::from)?;
    Ok(GitRun {
        success: done.status.success(),
        code: done.status.code(),
        stdout: String::from_utf8_lossy(&done.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
    })
}

/// Runs the user's own git (an identity, local submodules allowed, no system or global
/// configuration) in `dir`, for tests that build repositories.
#[cfg(test)]
pub(crate) fn git_in(dir: &Path, args: &[&str]) {
    let ok = crate::proc::Cmd::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "protocol.file.allow=always",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .cwd(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .run()
        .is_ok_and(|r| r.status.success());
    assert!(ok, "git {args:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository in `dir` with a pre-commit hook and a clean filter on `*.txt` that each
    /// leave a marker file (the attack of a hook or filter planted by the agent).
    fn planted(dir: &Path) -> (PathBuf, PathBuf) {
        git_in(dir, &["init", "-q"]);
        let hook_ran = dir.join("hook-ran");
        let filter_ran = dir.join("filter-ran");
        let hook = dir.join(".git/hooks/pre-commit");
        std::fs::write(
            &hook,
            format!("#!/bin/sh\ntouch '{}'\n", hook_ran.display()),
        )
        .unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        git_in(
            dir,
            &[
                "config",
                "filter.x.clean",
                &format!("sh -c 'touch {}; cat'", filter_ran.display()),
            ],
        );
        std::fs::write(dir.join(".gitattributes"), "*.txt filter=x\n").unwrap();
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        (hook_ran, filter_ran)
    }

    const IDENT: [&str; 4] = ["-c", "user.name=t", "-c", "user.email=t@t"];

    #[test]
    fn acting_git_runs_no_hook_or_filter_unless_asked() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (hook_ran, filter_ran) = planted(dir);
        let add = git_run(dir, &["add", "-A"], GIT_TIMEOUT).unwrap();
        assert!(add.success, "{}", add.stderr);
        let mut commit = IDENT.to_vec();
        commit.extend(["commit", "-q", "-m", "x"]);
        let r = git_run(dir, &commit, GIT_TIMEOUT).unwrap();
        assert!(r.success, "{}", r.stderr);
        assert!(!hook_ran.exists(), "the pre-commit hook ran");
        assert!(!filter_ran.exists(), "the clean filter ran");
        // Approved (Hooks::Run): the user's own hook and filter run, as their git would.
        std::fs::write(dir.join("b.txt"), "b\n").unwrap();
        let add = git_run_hooks(dir, &["add", "-A"], GIT_TIMEOUT, Hooks::Run).unwrap();
        assert!(add.success, "{}", add.stderr);
        let r = git_run_hooks(dir, &commit, GIT_TIMEOUT, Hooks::Run).unwrap();
        assert!(r.success, "{}", r.stderr);
        assert!(
            hook_ran.exists() && filter_ran.exists(),
            "the check proves nothing"
        );
    }

    #[test]
    fn a_pinned_worktree_ignores_its_rewritten_git_file() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let other = tmp.path().join("other");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        git_in(&root, &["init", "-q"]);
        git_in(&root, &["commit", "-q", "--allow-empty", "-m", "root"]);
        git_in(&other, &["init", "-q"]);
        let wt = tmp.path().join("wt");
        let wt_s = wt.to_string_lossy().into_owned();
        git_in(&root, &["worktree", "add", "-q", "-b", "hank/t", &wt_s]);
        let repo = Repo::task_worktree(&root, &wt).unwrap();
        assert!(
            repo.git_dir().ends_with("worktrees/wt"),
            "{:?}",
            repo.git_dir()
        );
        // The agent points the `.git` file elsewhere: hank's git still sees the task's branch.
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", other.join(".git").display()),
        )
        .unwrap();
        assert_eq!(repo.head_branch().unwrap().as_deref(), Some("hank/t"));
        assert!(repo.expect_branch("hank/t").is_ok());
        let e = repo.expect_branch("hank/u").unwrap_err().to_string();
        assert!(e.contains("on hank/t") && e.contains("hank/u"), "{e}");
        // The in-process reader of progress uses the pinned git directory too.
        let layout = snapshot::layout(&wt).unwrap();
        assert_eq!(
            std::fs::canonicalize(&layout.git_dir).unwrap(),
            std::fs::canonicalize(repo.git_dir()).unwrap()
        );
        // A path that is no worktree of the checkout is refused.
        assert!(Repo::task_worktree(&root, &other).is_err());
    }

    /// Issue 47: progress reads a fleet task through the agent's own repository, as the agent
    /// sees it: a clean status at the start (hank's index copied), the agent's commit (its
    /// objects in P, its parent's through the recorded alternate) diffed in process, and
    /// neither the `.git` file nor a planted `commondir` steering the reader.
    #[test]
    fn progress_reads_a_task_through_the_agents_own_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        git_in(&root, &["init", "-q"]);
        std::fs::write(root.join("base.txt"), "base\n").unwrap();
        git_in(&root, &["add", "base.txt"]);
        git_in(&root, &["commit", "-q", "-m", "root"]);
        let (wt, p) = task_with_agent_repo(tmp.path(), &root);
        Repo::task_worktree(&root, &wt).unwrap();
        let layout = snapshot::layout(&wt).unwrap();
        assert_eq!(layout.git_dir, p);
        let before = snapshot::take(&layout, None).unwrap();
        assert!(before.dirty.is_empty(), "a clean start");
        std::fs::write(wt.join("a.txt"), "a\n").unwrap();
        git_in(&wt, &["add", "a.txt"]);
        git_in(&wt, &["commit", "-q", "-m", "agent"]);
        // The agent's file and a planted commondir steer nothing.
        std::fs::write(p.join("commondir"), root.join(".git").display().to_string()).unwrap();
        let layout = snapshot::layout(&wt).unwrap();
        assert_eq!(layout.common, p);
        let after = snapshot::take(&layout, Some(&before)).unwrap();
        assert_ne!(after.head, before.head);
        let changed = odb::changed_files(&layout, before.head, after.head).unwrap();
        assert_eq!(changed, ["a.txt"]);
    }

    /// A linked worktree `wt` of `root` on `hank/t` (beside it in `dir`) with the agent's own
    /// repository made: the worktree and that repository's git dir.
    fn task_with_agent_repo(dir: &Path, root: &Path) -> (PathBuf, PathBuf) {
        let wt = dir.join("wt");
        git_in(
            root,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "hank/t",
                &wt.to_string_lossy(),
            ],
        );
        let repo = Repo::task_worktree(root, &wt).unwrap();
        let p = agent_repo::make(&repo).unwrap();
        (wt, p)
    }

    /// Issue 47: a fleet task's git rules come from hank's record only. The agent's own
    /// repository is written, the checkout's objects read; the user's refs, logs, config and the
    /// worktree's admin dir are not named; a `.git` file rewritten to HOME (or a `commondir`
    /// planted) changes nothing of the rules and is reported as a changed record.
    #[test]
    fn a_fleet_tasks_git_rules_come_from_hanks_record_and_never_move() {
        use crate::sandbox::worktree_git;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        git_in(&root, &["init", "-q"]);
        git_in(&root, &["commit", "-q", "--allow-empty", "-m", "root"]);
        let (wt, p) = task_with_agent_repo(tmp.path(), &root);
        let repo = Repo::task_worktree(&root, &wt).unwrap();
        let common = repo.task().common.clone();
        let want = (vec![common.join("objects")], vec![p.clone()]);
        assert_eq!(worktree_git(&wt), want);
        assert!(repo.task().tampered().is_none());
        // The agent's own commit lands in P only; hank brings it in.
        std::fs::write(wt.join("a.txt"), "a\n").unwrap();
        git_in(&wt, &["add", "a.txt"]);
        git_in(&wt, &["commit", "-q", "-m", "agent"]);
        assert!(std::fs::read_dir(p.join("objects")).unwrap().count() > 2);
        agent_repo::import(&repo).unwrap().unwrap();
        let out = crate::git::run_git(&root, &["log", "--format=%s", "hank/t"]).unwrap();
        assert!(String::from_utf8_lossy(&out).contains("agent"));
        // The `.git` file pointed at HOME: the same rules, and a changed record.
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", home.display())).unwrap();
        assert_eq!(worktree_git(&wt), want);
        let (file, _) = repo.task().tampered().unwrap();
        assert_eq!(file, wt.join(".git"));
        assert!(agent_repo::import(&repo).unwrap().is_err());
        std::fs::write(wt.join(".git"), agent_repo::dot_git_text(&p)).unwrap();
        assert!(repo.task().tampered().is_none());
        std::fs::write(p.join("commondir"), home.display().to_string()).unwrap();
        let (file, _) = repo.task().tampered().unwrap();
        assert_eq!(file, p.join("commondir"));
        assert_eq!(worktree_git(&wt), want);
    }
}
