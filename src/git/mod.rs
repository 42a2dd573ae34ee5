//! The one door for every git command hank runs: progress's reading of the tree
//! (`crate::worktree`), the fleet's worktrees, commits and merges, delivery, the state refs,
//! `hank fleet plan`/`run-task`, `hank import`'s and `setup`'s commits, `doctor`'s version;
//! the one commit of the agent's work, [`commit::commit_all`] (delivery's and a fleet task's).
//! What progress needs of the repository is read in process instead: the status
//! ([`snapshot`]) and the files of the commits a loop made ([`odb`]: objects, packs, the tree
//! diff); git runs for it only where they say `Unreadable`. Nothing else starts git
//! (`tests/integration/architecture.rs` fails on `Cmd::new("git")` or
//! `which("git")` anywhere else, and on a free entry function outside the handles).
//!
//! # The handles: which to use when
//!
//! Git runs only through a handle, which carries where it runs (the paths as hank recorded
//! them) and gives a [`Git`] command builder with its policy: the environment (the reading
//! git's minimal one, or the acting git's with the user's credentials), hooks
//! ([`Hooks::Off`] unless [`Git::hooks`] says [`Hooks::Run`]) and the timeout
//! ([`GIT_TIMEOUT`] unless [`Git::timeout`] says otherwise).
//!
//! - [`Checkout`] — a repository directory: the user's checkout, `hank run`'s project, any
//!   folder in a repository. [`Checkout::at`] gives the task this process is the worker of
//!   when the folder is its worktree ([`TaskWorktree::pin_from_env`], set once at the worker's
//!   start), else the folder as given. Its methods read facts hank needs once
//!   ([`Checkout::head_branch`], [`Checkout::expect_branch`], [`Checkout::identity_args`],
//!   [`Checkout::reader_dirs`], [`Checkout::worktree_tree`], [`Checkout::diff_trees`]).
//! - [`TaskWorktree`] — a fleet task's worktree as hank pinned it ([`TaskWorktree::pin`]):
//!   carried by value by whoever works in it (the supervisor's task jobs, the worker), never
//!   looked up in a registry; [`TaskWorktree::checkout`] runs git through its recorded git
//!   dirs; [`TaskWorktree::tampered`] says whether a recorded file changed;
//!   [`TaskWorktree::agent_git_rules`] gives the sandbox the agent's git folders.
//! - [`Integration`] — the fleet's integration worktree, pinned the same way.
//! - [`Git`] — one command: [`Git::read`] (the reading git: nothing the repository configures
//!   runs, no credentials), [`Git::answer`] (a failing exit that is an answer),
//!   [`Git::read_unfiltered`] (commands that read no work tree), [`Git::act`] /
//!   [`Git::act_input`] / [`Git::out`] (the acting git: delivery, the state refs, setup's and
//!   an import's commit).
//!
//! One mapping of git's outcome to errors: [`GitError`] (a reading git's failing exit is
//! [`GitError::Failed`]; an acting git's is an answer, [`GitRun`], until
//! [`GitRun::checked`] makes it [`GitError::Refused`]; [`GitError::context`] names the
//! command and the folder; `From<GitError>` for `crate::error::HankError`). One identity
//! fallback ([`IDENTITY_ARGS`], through [`Checkout::identity_args`]); one branch check
//! ([`Checkout::expect_branch`], [`GitError::OffBranch`]).
//!
//! # The rule: git run by hank runs no program the repository configures
//!
//! The repository (`.git/config`, `.git/hooks/`, `.gitattributes`, `info/attributes`) is
//! writable by the agent, so every git hank starts has, on its command line: hooks off
//! (`core.hooksPath=/dev/null`), every filter driver's `clean`/`smudge`/`process` emptied
//! (named from a `git config` listing, `filters`), no fsmonitor, no external diff, no pager;
//! textconv is never asked for (the one patch read, the reviewer's
//! [`Checkout::diff_trees`], passes `--no-textconv --no-ext-diff`) and aliases never used
//! (hank names built-in commands only). The one exception is delivery's commit and push
//! ([`Hooks::Run`]): the user's pre-commit/pre-push hooks and filters (LFS) run only when the
//! project's configuration is approved (`crate::approval::unapproved` is empty); anything else
//! passes [`Hooks::Off`].
//!
//! # Which repository
//!
//! A task worktree of `hank fleet` is opened from paths hank knows ([`TaskWorktree::pin`]):
//! its git directory is found in the checkout's common directory (`worktrees/*/gitdir` naming
//! the worktree), and every git command through its handle then runs as `git
//! --git-dir=<that> --work-tree=<wt>` with `GIT_COMMON_DIR` set, never through the worktree's
//! `.git` file, which the agent can rewrite, nor a `commondir`. The agent itself commits in a
//! repository of its own ([`agent_repo`]), which hank's git never runs in; hank imports its
//! commits. Commits check that HEAD is the branch hank expects ([`Checkout::expect_branch`]).
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `commit.rs`: the one commit of the agent's work, `commit_all(&Checkout, CommitAll)` — stage
//! all, list what is staged once (`diff --cached --name-status --relative`: named as the project
//! names its files, also in a folder of its repository), unstage by literal name only what is
//! staged of hank's runtime files (`runtime_paths`, the one list, from `templates/gitignore`,
//! matched in process by `is_runtime_path` — tested against git's own `:(glob)` matching of
//! `runtime_globs`; a fleet task's plan too with `leave_plan`) and of secret-looking files
//! (`unstage_secrets`), commit (a merge in progress too) with hank's identity when the repository
//! has none (the one fallback, [`IDENTITY_ARGS`]), the user's hooks only with `Hooks::Run`,
//! `Committed` says whether — for delivery (HEAD checked) and a fleet task (hooks off).
//! `agent_repo.rs` (issue 47): the task agent's own repository `<common>/worktrees/<id>/agent`
//! (`make`: HEAD, the user's refs as facts, hank's index, a merge in progress, objects with the
//! checkout's as alternate; the worktree's `.git` names it; `release` before a worktree is moved
//! or removed; `import`: the agent's branch brought in — objects checked,
//! `pack-objects`/`index-pack --fix-thin`/`rev-list --objects`, `update-ref` CAS — before every
//! commit of the task). `snapshot.rs` (+ `index.rs`, `ignore.rs`): git's status read in process
//! for progress (a file found clean by content under a stale index is kept as `verified` and not
//! hashed again at the same stat data) — the index (v2–4), HEAD and refs,
//! `.gitignore`/`info/exclude`/`core.excludesFile` with git's wildmatch, `.gitattributes`
//! conversions (stat rule), submodules and nested repositories, blob ids by SHA-1; `Snapshot`
//! keys per index entry and per dirty/untracked path, `Table::changed` the delta; a task's
//! worktree read through its recorded git dirs ([`Checkout::reader_dirs`]); its differential
//! test against `git status` over a generated corpus is `snapshot/tests.rs`
//! (`HANK_CORPUS_SEEDS=N` for a longer search). `filters.rs`: the filter driver names to switch
//! off, listed with `git config` (every config file and include target) and kept while the
//! files' stamps are unchanged — no `git config` spawn per git call. `odb.rs` (+ `odb/diff.rs`):
//! git's object database read in process — loose objects and packs (`.idx` v2 with 64-bit
//! offsets, `.pack` v2/3, `OFS_DELTA`/`REF_DELTA` chains), alternates, inflated by
//! `miniz_oxide`, `read_at` (no mmap), every size capped (`MAX_OBJECT`, `MAX_DELTA_CHAIN`,
//! `MAX_TREE_DEPTH`) → `Unreadable`; the tree diff within `LIMITS` (paths, trees, bytes: a tree
//! bomb is cut, `changed_files_within` → `Changed::cut`, and git is not asked);
//! `changed_files` = `git diff --name-only --no-renames --relative` between two commits (hank's
//! files excluded; git's tree order, `a.b` before `a/`) or `ls-tree -r` of one; its
//! differential test against real git (loose, gc, `repack --depth=50`, `REF_DELTA`, a thin
//! fetch, a linked worktree, alternates, a project subdirectory) is `odb/tests.rs`

use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod agent_repo;
pub mod commit;
mod filters;
mod handle;
pub mod ignore;
pub mod index;
pub mod odb;
pub mod snapshot;

pub use handle::{
    Checkout, Git, Integration, TASK_CHECKOUT_ENV, TASK_REPOS_ENV, TaskWorktree, parse_task_repos,
    task_repos_text,
};

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

/// Most bytes of a `.git` file or a git dir's small files hank reads.
const SMALL_FILE: u64 = 4096;

/// A small file hank compares (a regular file, never through a link; `None`: absent or not
/// a regular file).
fn small_file(path: &Path) -> Option<Vec<u8>> {
    crate::fsread::read(path, SMALL_FILE, crate::fsread::Follow::No).ok()
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
    /// An acting git ([`Git::act`]) exited unsuccessfully: its exit code and its stderr on one
    /// line ([`GitRun::checked`]).
    Refused { code: Option<i32>, stderr: String },
    /// HEAD is not on the branch hank made for the work ([`Checkout::expect_branch`]): the
    /// agent switched it; `head` is `None` when detached.
    OffBranch {
        dir: PathBuf,
        head: Option<String>,
        want: String,
    },
}

impl From<GitError> for crate::error::HankError {
    fn from(e: GitError) -> Self {
        crate::error::HankError::Tool(e.to_string())
    }
}

impl GitError {
    /// The error with the command and where it ran: "`git ARGS` in DIR: …" (the one wording
    /// of hank's git errors).
    #[must_use]
    pub fn context(&self, args: &[&str], dir: &Path) -> String {
        format!("`git {}` in {}: {self}", args.join(" "), dir.display())
    }
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
            GitError::Refused { code, stderr } => match code {
                Some(c) => write!(f, "git failed (exit {c}): {stderr}"),
                None => write!(f, "git failed (killed by a signal): {stderr}"),
            },
            GitError::OffBranch { dir, head, want } => write!(
                f,
                "HEAD of {} is {} instead of the branch hank made for it, {want}: refused",
                dir.display(),
                head.as_ref()
                    .map_or("detached".to_string(), |b| format!("on {b}")),
            ),
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

/// Most submodule configuration files looked at (a bound on a planted tree).
const MAX_SUBMODULE_CONFIGS: usize = 256;

/// The configuration files of the submodules of the repository `dir` is in: every `config`
/// and `config.worktree` under its (common) git directory's `modules/`, and the `.git/config`
/// of each `path` of its `.gitmodules` that has a `.git` directory of its own. Found by
/// looking at files only (no git spawn); none when the repository has no submodules.
pub(crate) fn submodule_configs(at: &Checkout) -> Vec<PathBuf> {
    let dir = at.dir();
    // The repository: a task worktree's as hank recorded it, else the nearest `.git` (a
    // directory, or a file `gitdir: …`) above `dir`.
    let pinned = at.task().map(|t| (t.work_tree.clone(), t.common.clone()));
    let found = pinned.or_else(|| {
        dir.ancestors().find_map(|d| {
            Checkout::at(d)
                .git_dirs()
                .map(|(_, common)| (d.to_path_buf(), common))
        })
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

/// Runs `git [SAFE CONFIG] [EXTRA] ARGS` in `at` (no shell, stdin closed, stderr discarded,
/// its own process group, a minimal environment: [`GIT_ENV_KEPT`] minus secret names, C
/// locale, no optional index write so hank never takes `index.lock` from under the user, no
/// terminal prompt) and returns its stdout. It ends — the whole process group killed — past
/// `timeout` ([`GitError::Timeout`]) or once hank has received SIGINT, SIGTERM or SIGHUP
/// ([`GitError::Interrupted`], see [`crate::agent::signals::received`]); and once git has
/// exited, hank stops reading its stdout even when another process (one git started in its
/// own session) still holds the pipe open. No filter driver is switched off here (the
/// listing of them, [`filters`], and progress's reads that run none use it; [`Git::read`]
/// adds the overrides).
fn git_plain(
    at: &Checkout,
    extra: &[String],
    args: &[&str],
    timeout: Duration,
    ceiling: Option<&Path>,
) -> Result<Vec<u8>, GitError> {
    plain(at, extra, args, (timeout, ceiling), None).and_then(succeeded)
}

/// The one place a reading git's exit becomes an error ([`GitError::Failed`]).
fn succeeded((status, stdout): (std::process::ExitStatus, Vec<u8>)) -> Result<Vec<u8>, GitError> {
    if status.success() {
        Ok(stdout)
    } else {
        Err(GitError::Failed(status))
    }
}

/// [`git_plain`]'s run: its exit status and stdout, whatever the status; `index` as
/// `GIT_INDEX_FILE` (a temporary index: the user's is never touched).
fn plain(
    at: &Checkout,
    extra: &[String],
    args: &[&str],
    (timeout, ceiling): (Duration, Option<&Path>),
    index: Option<&Path>,
) -> Result<(std::process::ExitStatus, Vec<u8>), GitError> {
    let mut cmd = hardened(at, extra, args);
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

/// `git ARGS` in `at` as [`Git::read`] runs it, with `env` added and `input` on its stdin
/// ([`Git::io`]).
fn io(
    at: &Checkout,
    args: &[&str],
    env: &[(&str, &Path)],
    input: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, GitError> {
    let overrides = filter_overrides(&filters::names(at, timeout, None)?);
    let mut cmd = hardened(at, &overrides, args);
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
    succeeded((done.status, done.stdout))
}

/// The reading git of [`git_plain`] and [`Git::io`]: `git --no-pager` with the pinned git
/// dir, [`GIT_SAFE_CONFIG`], [`NO_PROGRAMS`], `extra` and `args`, in `at`, with a minimal
/// environment ([`GIT_ENV_KEPT`] minus secret names, C locale, no optional locks, no terminal
/// prompt, the pinned common dir).
fn hardened(at: &Checkout, extra: &[String], args: &[&str]) -> crate::proc::Cmd {
    let mut cmd = crate::proc::Cmd::new("git")
        .arg("--no-pager")
        .args(at.pin_args())
        .args(GIT_SAFE_CONFIG)
        .args(NO_PROGRAMS)
        .args(extra)
        .args(args)
        .cwd(at.dir())
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
    if let Some((k, v)) = at.pin_env() {
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

impl GitRun {
    /// The run when git succeeded, else [`GitError::Refused`] with its exit code and its stderr
    /// on one line (sanitized): the one place an acting git's failure becomes an error.
    ///
    /// # Errors
    /// git exited unsuccessfully.
    pub fn checked(self) -> Result<GitRun, GitError> {
        if self.success {
            return Ok(self);
        }
        Err(GitError::Refused {
            code: self.code,
            stderr: crate::sanitize::line(self.stderr.trim()),
        })
    }
}

/// Most bytes kept of a delivery git command's stdout and stderr each.
pub const GIT_OUTPUT_LIMIT: u64 = 1024 * 1024;

/// The acting git of [`Git::act`]: `git ARGS` in `at` for delivery and hank's state refs
/// (switch, add, commit, push) with the user's environment (credentials, SSH agent,
/// identity) but none of the repository's hooks or filters unless `hooks` is [`Hooks::Run`].
/// No shell, stdin closed unless `input`, no pager, no fsmonitor, C locale, no terminal
/// prompt, none of the `GIT_*` variables that would point git at another repository; its own
/// process group killed at `timeout` or at hank's first SIGINT/SIGTERM/SIGHUP; stdout and
/// stderr captured (bounded), so a pre-push hook's output can go back to the agent.
fn act(
    at: &Checkout,
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
            let mut off = filter_overrides(&filters::names(at, timeout, None)?);
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
        .args(at.pin_args())
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
        .cwd(at.dir())
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
    if let Some((k, v)) = at.pin_env() {
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
        let at = Checkout::at(dir);
        let add = at.git().act(&["add", "-A"]).unwrap();
        assert!(add.success, "{}", add.stderr);
        let mut commit = IDENT.to_vec();
        commit.extend(["commit", "-q", "-m", "x"]);
        let r = at.git().act(&commit).unwrap();
        assert!(r.success, "{}", r.stderr);
        assert!(!hook_ran.exists(), "the pre-commit hook ran");
        assert!(!filter_ran.exists(), "the clean filter ran");
        // Approved (Hooks::Run): the user's own hook and filter run, as their git would.
        std::fs::write(dir.join("b.txt"), "b\n").unwrap();
        let add = at.git().hooks(Hooks::Run).act(&["add", "-A"]).unwrap();
        assert!(add.success, "{}", add.stderr);
        let r = at.git().hooks(Hooks::Run).act(&commit).unwrap();
        assert!(r.success, "{}", r.stderr);
        assert!(
            hook_ran.exists() && filter_ran.exists(),
            "the check proves nothing"
        );
    }

    /// One mapping of git's outcome: a reading git's failing exit is `Failed`, an acting git's
    /// is an answer until `checked` makes it `Refused` with its stderr, and `out` names the
    /// command and the folder.
    #[test]
    fn a_failing_git_is_one_error_naming_the_command() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git_in(dir, &["init", "-q"]);
        let at = Checkout::at(dir);
        let args = ["rev-parse", "--verify", "-q", "refs/heads/none"];
        assert!(matches!(at.git().read(&args), Err(GitError::Failed(_))));
        let run = at
            .git()
            .act(&["rev-parse", "--verify", "refs/heads/none"])
            .unwrap();
        assert!(!run.success);
        let e = run.checked().unwrap_err();
        assert!(
            matches!(&e, GitError::Refused { code: Some(128), stderr } if stderr.contains("fatal:")),
            "{e:?}"
        );
        let e = at
            .git()
            .out(&["rev-parse", "--verify", "refs/heads/none"])
            .unwrap_err();
        let said = e.to_string();
        assert!(
            said.contains("`git rev-parse --verify refs/heads/none` in")
                && said.contains(&dir.display().to_string())
                && said.contains("exit 128"),
            "{said}"
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
        let repo = TaskWorktree::pin(&root, &wt).unwrap();
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
        let at = repo.checkout();
        assert_eq!(at.head_branch().unwrap().as_deref(), Some("hank/t"));
        assert!(at.expect_branch("hank/t").is_ok());
        let e = at.expect_branch("hank/u").unwrap_err().to_string();
        assert!(e.contains("on hank/t") && e.contains("hank/u"), "{e}");
        // Without the handle, the same path is read through its `.git` file: the other
        // repository (the handle, not a registry, carries the record).
        assert!(Checkout::at(&wt).task().is_none());
        // The in-process reader of progress uses the pinned git directory too.
        let layout = snapshot::layout_of(&at).unwrap();
        assert_eq!(
            std::fs::canonicalize(&layout.git_dir).unwrap(),
            std::fs::canonicalize(repo.git_dir()).unwrap()
        );
        // A path that is no worktree of the checkout is refused.
        assert!(TaskWorktree::pin(&root, &other).is_err());
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
        let at = TaskWorktree::pin(&root, &wt).unwrap().checkout();
        let layout = snapshot::layout_of(&at).unwrap();
        assert_eq!(layout.git_dir, p);
        let before = snapshot::take(&layout, None).unwrap();
        assert!(before.dirty.is_empty(), "a clean start");
        std::fs::write(wt.join("a.txt"), "a\n").unwrap();
        git_in(&wt, &["add", "a.txt"]);
        git_in(&wt, &["commit", "-q", "-m", "agent"]);
        // The agent's file and a planted commondir steer nothing.
        std::fs::write(p.join("commondir"), root.join(".git").display().to_string()).unwrap();
        let layout = snapshot::layout_of(&at).unwrap();
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
        let repo = TaskWorktree::pin(root, &wt).unwrap();
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
        let repo = TaskWorktree::pin(&root, &wt).unwrap();
        repo.record_for_sandbox();
        let common = repo.common.clone();
        let want = (vec![common.join("objects")], vec![p.clone()]);
        assert_eq!(worktree_git(&wt), want);
        assert!(repo.tampered().is_none());
        // The agent's own commit lands in P only; hank brings it in.
        std::fs::write(wt.join("a.txt"), "a\n").unwrap();
        git_in(&wt, &["add", "a.txt"]);
        git_in(&wt, &["commit", "-q", "-m", "agent"]);
        assert!(std::fs::read_dir(p.join("objects")).unwrap().count() > 2);
        agent_repo::import(&repo).unwrap().unwrap();
        let out = Checkout::at(&root)
            .git()
            .read(&["log", "--format=%s", "hank/t"])
            .unwrap();
        assert!(String::from_utf8_lossy(&out).contains("agent"));
        // The `.git` file pointed at HOME: the same rules, and a changed record.
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", home.display())).unwrap();
        assert_eq!(worktree_git(&wt), want);
        let (file, _) = repo.tampered().unwrap();
        assert_eq!(file, wt.join(".git"));
        assert!(agent_repo::import(&repo).unwrap().is_err());
        std::fs::write(wt.join(".git"), agent_repo::dot_git_text(&p)).unwrap();
        assert!(repo.tampered().is_none());
        std::fs::write(p.join("commondir"), home.display().to_string()).unwrap();
        let (file, _) = repo.tampered().unwrap();
        assert_eq!(file, p.join("commondir"));
        assert_eq!(worktree_git(&wt), want);
    }
}
