//! The handles git runs through: [`Checkout`] (a repository directory, with what hank recorded
//! of it when it is a task's), [`TaskWorktree`] (a fleet task's worktree as pinned),
//! [`Integration`] (the fleet's integration worktree), and the command builder [`Git`] each
//! gives. See the module doc of [`crate::git`] for which to use when.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use super::{GIT_TIMEOUT, GitError, GitRun, Hooks, agent_repo, small_file};

/// The fleet task this process is the worker of ([`TaskWorktree::pin_from_env`]): set once at
/// the worker's start, never changed. Every [`Checkout::at`] of its work tree carries it.
static PROCESS_TASK: OnceLock<TaskWorktree> = OnceLock::new();

/// The other repositories' worktrees inside this worker's task folder (a workspace of several
/// repositories, [`TASK_REPOS_ENV`]), each by its folder name, pinned from those
/// repositories' own records at the worker's start and never changed.
static PROCESS_NESTED: OnceLock<Vec<(String, TaskWorktree)>> = OnceLock::new();

/// A repository directory git runs in: the user's checkout (or any directory inside a
/// repository), or a task's worktree with the git dirs hank recorded at its pin. Git in a
/// checkout with a task runs as `git --git-dir=<admin> --work-tree=<wt>` with `GIT_COMMON_DIR`
/// set, never through the worktree's `.git` file.
#[derive(Debug, Clone)]
pub struct Checkout {
    dir: PathBuf,
    task: Option<TaskWorktree>,
}

impl Checkout {
    /// The repository at `dir` as this process knows it: the task this worker runs when `dir`
    /// is its work tree (pinned at the worker's start), else `dir` as given (git finds its
    /// repository from there).
    #[must_use]
    pub fn at(dir: &Path) -> Checkout {
        let task = PROCESS_TASK
            .get()
            .filter(|t| t.names(dir))
            .cloned()
            .or_else(|| {
                PROCESS_NESTED
                    .get()
                    .and_then(|n| n.iter().find(|(_, t)| t.names(dir)))
                    .map(|(_, t)| t.clone())
            });
        Checkout {
            dir: dir.to_path_buf(),
            task,
        }
    }

    /// The directory git runs in.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What hank recorded of this worktree, when it is a fleet task's.
    #[must_use]
    pub fn task(&self) -> Option<&TaskWorktree> {
        self.task.as_ref()
    }

    /// A git command here: hardened, bounded by [`GIT_TIMEOUT`], hooks off (see [`Git`]).
    #[must_use]
    pub fn git(&self) -> Git {
        Git {
            at: self.clone(),
            timeout: GIT_TIMEOUT,
            hooks: Hooks::Off,
            ceiling: None,
        }
    }

    /// `--git-dir=… --work-tree=…` of a task's worktree, nothing otherwise.
    pub(super) fn pin_args(&self) -> Vec<String> {
        self.task
            .as_ref()
            .map(|t| {
                vec![
                    format!("--git-dir={}", t.admin.display()),
                    format!("--work-tree={}", t.work_tree.display()),
                ]
            })
            .unwrap_or_default()
    }

    /// `GIT_COMMON_DIR` of a task's worktree (the common dir hank recorded: the admin dir's
    /// `commondir` is not what git's configuration is read from), nothing otherwise.
    pub(super) fn pin_env(&self) -> Option<(&'static str, PathBuf)> {
        self.task
            .as_ref()
            .map(|t| ("GIT_COMMON_DIR", t.common.clone()))
    }

    /// The git directory and common directory of this folder's repository as hank's own view
    /// has them, found by reading files only (no git spawn): a task's as hank recorded them
    /// (its admin dir: never the agent's own repository, whose configuration is the agent's),
    /// else this folder's `.git` (a directory, or a `gitdir:` file) and that directory's
    /// `commondir`. `None` when the folder has no `.git` of a repository. For the approval's
    /// fingerprint of what git would run.
    #[must_use]
    pub fn git_dirs(&self) -> Option<(PathBuf, PathBuf)> {
        if let Some(t) = &self.task {
            return Some((t.admin.clone(), t.common.clone()));
        }
        let git_dir = super::snapshot::dot_git(&self.dir)?;
        let common = super::snapshot::common_of(&git_dir);
        Some((git_dir, common))
    }

    /// The git directory and common directory the in-process reader ([`super::snapshot`])
    /// uses for a task's worktree instead of its `.git` file and any `commondir`: for a task
    /// with its own repository ([`agent_repo`]) the agent's view (its HEAD, index and commits;
    /// the checkout's objects through the recorded alternates), else the admin dir and the
    /// recorded common dir. `None` for a checkout that is no task's.
    #[must_use]
    pub fn reader_dirs(&self) -> Option<(PathBuf, PathBuf)> {
        self.task.as_ref().map(|t| match &t.agent {
            Some(p) => (p.clone(), p.clone()),
            None => (t.admin.clone(), t.common.clone()),
        })
    }

    /// The branch HEAD is on (`None` when detached), read through this handle's git dir.
    ///
    /// # Errors
    /// git cannot run.
    pub fn head_branch(&self) -> Result<Option<String>, GitError> {
        match self.git().read(&["symbolic-ref", "--quiet", "HEAD"]) {
            Ok(out) => {
                let r = String::from_utf8_lossy(&out).trim().to_string();
                Ok(Some(
                    r.strip_prefix("refs/heads/").unwrap_or(&r).to_string(),
                ))
            }
            Err(GitError::Failed(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `Ok` when HEAD is on `branch`; else [`GitError::OffBranch`] naming both (the agent
    /// switched it). The one check of the branch before hank commits or pushes (a fleet
    /// task's commit, delivery's commit and push).
    ///
    /// # Errors
    /// HEAD is on another branch or detached, or git cannot run.
    pub fn expect_branch(&self, branch: &str) -> Result<(), GitError> {
        match self.head_branch()? {
            Some(b) if b == branch => Ok(()),
            head => Err(GitError::OffBranch {
                dir: self.dir.clone(),
                head,
                want: branch.to_string(),
            }),
        }
    }

    /// What a commit hank makes here needs on git's command line: nothing when git has an
    /// identity here (`user.name` and `user.email` both set), else hank's own
    /// ([`super::IDENTITY_ARGS`]): the one fallback (the agent's commit, a fleet task's and
    /// its merges, setup's, an import's).
    #[must_use]
    pub fn identity_args(&self) -> Vec<&'static str> {
        let has = |key: &str| {
            self.git()
                .read(&["config", "--get", key])
                .is_ok_and(|v| !String::from_utf8_lossy(&v).trim().is_empty())
        };
        if has("user.name") && has("user.email") {
            Vec::new()
        } else {
            super::IDENTITY_ARGS.to_vec()
        }
    }

    /// Everything here staged (`git add -A`) and committed with `message` by the acting git
    /// (hooks off), as the identity [`Checkout::identity_args`] gives: setup's first commit
    /// and an import's. `Ok(true)`: made as hank.
    ///
    /// # Errors
    /// git did not run or refused ([`GitError::Refused`]).
    pub fn commit_everything(&self, message: &str) -> Result<bool, GitError> {
        self.git().act(&["add", "-A"]).and_then(GitRun::checked)?;
        let mut args = self.identity_args();
        let as_hank = !args.is_empty();
        args.extend(["commit", "-q", "-m", message]);
        self.git().act(&args).and_then(GitRun::checked)?;
        Ok(as_hank)
    }

    /// The whole work tree as a git tree object: what `git add -A` would stage (tracked and
    /// untracked files, ignored ones left out), written through a temporary index at
    /// `tmp_index` (removed after) so that the user's index and HEAD are untouched. The
    /// objects it writes are loose objects `git gc` removes. For the reviewer's diff of a run
    /// (`REVIEW_AGENT`): what changed since the run's start, commits or not.
    ///
    /// # Errors
    /// Not a repository, or git failed.
    pub fn worktree_tree(&self, tmp_index: &Path) -> Result<String, GitError> {
        let names = super::filters::names(self, GIT_TIMEOUT, None)?;
        let overrides = super::filter_overrides(&names);
        let run = |args: &[&str]| {
            super::plain(self, &overrides, args, (GIT_TIMEOUT, None), Some(tmp_index))
                .and_then(super::succeeded)
        };
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

    /// The stat and the patch between two trees (`git diff --stat`, `git diff`), as text
    /// (invalid UTF-8 replaced); no textconv, no external diff.
    ///
    /// # Errors
    /// git failed.
    pub fn diff_trees(&self, from: &str, to: &str) -> Result<(String, String), GitError> {
        let base = ["diff", "--no-color", "--no-ext-diff", "--no-textconv"];
        let stat: Vec<&str> = base
            .iter()
            .copied()
            .chain(["--stat=200", from, to])
            .collect();
        let patch: Vec<&str> = base.iter().copied().chain([from, to]).collect();
        let stat = self.git().read(&stat)?;
        let patch = self.git().read(&patch)?;
        Ok((
            String::from_utf8_lossy(&stat).into_owned(),
            String::from_utf8_lossy(&patch).into_owned(),
        ))
    }
}

/// One git command to run through a handle: where (its [`Checkout`]), how long (`timeout`,
/// [`GIT_TIMEOUT`] unless said) and whether the repository's hooks and filters may run
/// (`hooks`, [`Hooks::Off`] unless said; only [`Git::act`] honours [`Hooks::Run`]).
#[derive(Debug, Clone)]
pub struct Git {
    at: Checkout,
    timeout: Duration,
    hooks: Hooks,
    ceiling: Option<PathBuf>,
}

impl Git {
    /// Bounded by `timeout` instead of [`GIT_TIMEOUT`] (the commands whose work grows with the
    /// tree: `git worktree add`/`remove`; delivery's push with a slow pre-push hook).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// git looks for the repository no higher than `dir` (`GIT_CEILING_DIRECTORIES`; the
    /// reading git only).
    #[must_use]
    pub fn ceiling(mut self, dir: &Path) -> Self {
        self.ceiling = Some(dir.to_path_buf());
        self
    }

    /// The user's hooks and filters run when `hooks` is [`Hooks::Run`] (delivery's commit and
    /// push, once the project's configuration is approved); [`Git::act`] only.
    #[must_use]
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// The reading git: nothing the repository configures runs, a minimal environment (no
    /// credentials), ends on a signal; its stdout. For reading the repository and for the
    /// fleet's worktrees, commits and merges.
    ///
    /// # Errors
    /// git cannot run, ran past its timeout, or failed ([`GitError::Failed`]).
    pub fn read(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let ceiling = self.ceiling.as_deref();
        let names = super::filters::names(&self.at, self.timeout, ceiling)?;
        let overrides = super::filter_overrides(&names);
        super::plain(&self.at, &overrides, args, (self.timeout, ceiling), None)
            .and_then(super::succeeded)
    }

    /// [`Git::read`] without the listing of the filter drivers to switch off: for the commands
    /// that read no work tree (`rev-parse`, `ls-tree`, `diff-tree` of commits), where no filter
    /// can run, and the listing's own `git config` calls.
    ///
    /// # Errors
    /// As [`Git::read`].
    pub fn read_unfiltered(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let ceiling = self.ceiling.as_deref();
        super::plain(&self.at, &[], args, (self.timeout, ceiling), None).and_then(super::succeeded)
    }

    /// [`Git::read`] for a command whose failing exit is an answer with output (`git
    /// merge-tree --write-tree` exits 1 on conflicts and names them on stdout): its exit code
    /// (`None` when a signal ended it) and stdout, whatever the code.
    ///
    /// # Errors
    /// git cannot run or ran past its timeout.
    pub fn answer(&self, args: &[&str]) -> Result<(Option<i32>, Vec<u8>), GitError> {
        let ceiling = self.ceiling.as_deref();
        let names = super::filters::names(&self.at, self.timeout, ceiling)?;
        let overrides = super::filter_overrides(&names);
        let (status, stdout) =
            super::plain(&self.at, &overrides, args, (self.timeout, ceiling), None)?;
        Ok((status.code(), stdout))
    }

    /// [`Git::read`] with `env` added and `input` on its stdin: its stdout, bytes as they are.
    /// For the import of a task's commits ([`agent_repo::import`]: `git pack-objects` with the
    /// agent's objects as an alternate).
    pub(crate) fn io(
        &self,
        args: &[&str],
        env: &[(&str, &Path)],
        input: &[u8],
    ) -> Result<Vec<u8>, GitError> {
        super::io(&self.at, args, env, input, self.timeout)
    }

    /// The acting git (delivery's switch, commit and push, hank's state refs, setup's and an
    /// import's commit): the user's environment (credentials, SSH agent, identity), none of the
    /// repository's hooks or filters unless [`Git::hooks`] said [`Hooks::Run`]. A failing exit
    /// is an answer ([`GitRun::success`]; [`GitRun::checked`] makes it an error).
    ///
    /// # Errors
    /// git cannot be started or ran past its timeout.
    pub fn act(&self, args: &[&str]) -> Result<GitRun, GitError> {
        super::act(&self.at, args, None, self.timeout, self.hooks)
    }

    /// [`Git::act`]'s stdout when git succeeded; any failure (git did not run, or exited
    /// unsuccessfully: [`GitRun::checked`]) an error naming the command and the directory
    /// ([`GitError::context`]).
    ///
    /// # Errors
    /// git did not run or failed.
    pub fn out(&self, args: &[&str]) -> crate::error::Result<String> {
        self.act(args)
            .and_then(GitRun::checked)
            .map(|r| r.stdout)
            .map_err(|e| crate::error::HankError::Tool(e.context(args, self.at.dir())))
    }

    /// [`Git::act`] with `input` written to git's stdin (then closed): the plumbing that reads
    /// its input there (`git mktree`) when hank writes objects of its own.
    ///
    /// # Errors
    /// git cannot be started or ran past its timeout.
    pub fn act_input(&self, args: &[&str], input: &[u8]) -> Result<GitRun, GitError> {
        super::act(&self.at, args, Some(input), self.timeout, self.hooks)
    }
}

/// A fleet task's worktree as hank recorded it when it pinned it (never read again from what
/// the agent can write): the sandbox's git rules of the task's agent, the git dir hank's own
/// git uses, and the files whose change stops the task ([`TaskWorktree::tampered`]). Carried
/// by value by whoever works in the worktree ([`TaskWorktree::checkout`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskWorktree {
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

/// Set by `hank fleet` on a task's worker: the checkout the task's worktree belongs to
/// ([`TaskWorktree::pin_from_env`]). Removed from the agent's environment.
pub const TASK_CHECKOUT_ENV: &str = "HANK_TASK_CHECKOUT";

/// Set by `hank fleet` on a task's worker when the task changes other repositories of a
/// workspace (issue 51): one `NAME=CHECKOUT` a line ([`task_repos_text`]), each repository's
/// worktree being the folder `NAME` of the task's worktree. Removed from the agent's
/// environment.
pub const TASK_REPOS_ENV: &str = "HANK_TASK_REPOS";

/// [`TASK_REPOS_ENV`]'s value for `repos` (folder name, the repository's checkout); `None`
/// when a name or path cannot be carried on one line (the fleet refuses the task then).
#[must_use]
pub fn task_repos_text(repos: &[(String, PathBuf)]) -> Option<String> {
    let mut out = String::new();
    for (name, path) in repos {
        let path = path.to_str()?;
        if !usable_folder(name) || path.contains(['\n', '\r']) {
            return None;
        }
        out.push_str(&format!("{name}={path}\n"));
    }
    Some(out)
}

/// [`TASK_REPOS_ENV`]'s value read back: (folder name, checkout) per line; a line whose name
/// is not a plain folder name (`..`, a `/`) is an error, never a path followed.
///
/// # Errors
/// A line is not `NAME=ABSOLUTE PATH` with a usable name.
pub fn parse_task_repos(text: &str) -> Result<Vec<(String, PathBuf)>, GitError> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once('=') {
            Some((name, path)) if usable_folder(name) && Path::new(path).is_absolute() => {
                Ok((name.to_string(), PathBuf::from(path)))
            }
            _ => Err(GitError::Output(format!(
                "{TASK_REPOS_ENV}: {l:?} is not NAME=ABSOLUTE PATH"
            ))),
        })
        .collect()
}

/// A repository's folder name in a task's folder: one plain path component.
fn usable_folder(name: &str) -> bool {
    crate::policy::workspace::bad_name(name).is_none()
}

impl TaskWorktree {
    /// The linked worktree `wt` of the checkout `root`: its git directory is the one of
    /// `<common>/worktrees/*` whose `gitdir` file names `<wt>/.git` (written by `git worktree
    /// add`, outside the worktree); every git command through this handle uses it
    /// (`--git-dir`, `--work-tree`, `GIT_COMMON_DIR`), whatever the worktree's `.git` file
    /// says. What it finds is recorded and frozen: the agent's own repository (`<admin>/agent`,
    /// made by hank, [`agent_repo`]) when there is one, and what the worktree's `.git` file
    /// must hold (`gitdir: <agent repository>`, else what it holds now). The agent's git rules
    /// for the sandbox come from it ([`TaskWorktree::agent_git_rules`],
    /// [`TaskWorktree::record_for_sandbox`]).
    ///
    /// # Errors
    /// The checkout's common directory cannot be read, or no worktree of it is `wt`.
    pub fn pin(root: &Path, wt: &Path) -> Result<TaskWorktree, GitError> {
        let out = Checkout::at(root).git().read(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-common-dir",
        ])?;
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
        Ok(TaskWorktree {
            work_tree: wt.to_path_buf(),
            resolved: want,
            admin: git_dir,
            common,
            agent,
            dot_git,
            admin_files,
        })
    }

    /// In a fleet task's worker (`hank run` started by the supervisor in the task's worktree,
    /// told the checkout in [`TASK_CHECKOUT_ENV`]): pins `dir` from the checkout's records
    /// ([`TaskWorktree::pin`]) as this process's task, so that every [`Checkout::at`] of it
    /// (progress, approval, the sandbox's guard, delivery) reads the task's own repository,
    /// never through the worktree's `.git` file. `Ok(None)` outside a fleet.
    ///
    /// # Errors
    /// `dir` is not a worktree the checkout records, or a recorded file changed already.
    pub fn pin_from_env(dir: &Path) -> Result<Option<TaskWorktree>, GitError> {
        let Some(checkout) = std::env::var_os(TASK_CHECKOUT_ENV) else {
            return Ok(None);
        };
        let task = TaskWorktree::pin(Path::new(&checkout), dir)?;
        if let Some((file, what)) = task.tampered() {
            return Err(GitError::Output(format!("{}: {what}", file.display())));
        }
        // The task's other repositories (a workspace of several), each pinned from its own
        // repository's records: the folder names and checkouts come from the supervisor.
        let mut nested = Vec::new();
        if let Some(text) = std::env::var_os(TASK_REPOS_ENV) {
            for (name, checkout) in parse_task_repos(&text.to_string_lossy())? {
                let n = TaskWorktree::pin(&checkout, &dir.join(&name))?;
                if let Some((file, what)) = n.tampered() {
                    return Err(GitError::Output(format!("{}: {what}", file.display())));
                }
                nested.push((name, n));
            }
        }
        // Set once: a worker is one task's; its agent's git rules come from this record.
        let repos: Vec<TaskWorktree> = nested.iter().map(|(_, t)| t.clone()).collect();
        task.record_for_sandbox_with(&repos);
        let _ = PROCESS_TASK.set(task.clone());
        let _ = PROCESS_NESTED.set(nested);
        Ok(Some(task))
    }

    /// The task this process is the worker of, if it is one ([`TaskWorktree::pin_from_env`]).
    #[must_use]
    pub fn of_process() -> Option<&'static TaskWorktree> {
        PROCESS_TASK.get()
    }

    /// The worktrees of the other repositories inside this worker's task folder, by folder
    /// name ([`TASK_REPOS_ENV`], pinned at the worker's start); empty outside a task of
    /// several repositories.
    #[must_use]
    pub fn nested_of_process() -> &'static [(String, TaskWorktree)] {
        PROCESS_NESTED.get().map_or(&[], Vec::as_slice)
    }

    /// This worktree as a [`Checkout`] carrying the record (hank's own git in it).
    #[must_use]
    pub fn checkout(&self) -> Checkout {
        Checkout {
            dir: self.work_tree.clone(),
            task: Some(self.clone()),
        }
    }

    /// The work tree.
    #[must_use]
    pub fn work_tree(&self) -> &Path {
        &self.work_tree
    }

    /// The git directory hank uses for this work tree (its admin dir).
    #[must_use]
    pub fn git_dir(&self) -> &Path {
        &self.admin
    }

    /// Whether `dir` names this work tree.
    pub(crate) fn names(&self, dir: &Path) -> bool {
        self.work_tree == dir
            || self.resolved == dir
            || std::fs::canonicalize(dir).is_ok_and(|c| c == self.resolved)
    }

    /// The task agent's git folders (read, write) from this record: with its own repository,
    /// write that repository and read the checkout's objects; without one, read the common
    /// dir and write nothing of git.
    #[must_use]
    pub fn agent_git_rules(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        match &self.agent {
            Some(p) => (vec![self.common.join("objects")], vec![p.clone()]),
            None => (vec![self.common.clone()], Vec::new()),
        }
    }

    /// Gives the sandbox this record's git rules for the agent working in the worktree (by
    /// its path as named and resolved), for every later call of this process.
    pub fn record_for_sandbox(&self) {
        self.record_for_sandbox_with(&[]);
    }

    /// [`TaskWorktree::record_for_sandbox`] with the git rules of the task's other
    /// repositories' worktrees inside it (`nested`, each pinned from its own repository's
    /// records) added: their agents' repositories writable, their objects readable — the
    /// same grants as the task's own worktree, and nothing of those repositories' checkouts.
    pub fn record_for_sandbox_with(&self, nested: &[TaskWorktree]) {
        let (mut read, mut write) = self.agent_git_rules();
        for n in nested {
            let (r, w) = n.agent_git_rules();
            read.extend(r);
            write.extend(w);
        }
        crate::sandbox::record_git_rules(
            &[self.work_tree.clone(), self.resolved.clone()],
            read,
            write,
        );
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

/// The fleet's integration worktree (where tasks are merged and checked), pinned from the
/// checkout's records like a task's ([`TaskWorktree::pin`]): its `.git` file is never what
/// hank's git goes through.
#[derive(Debug, Clone)]
pub struct Integration {
    checkout: Checkout,
}

impl Integration {
    /// The integration worktree `wt` of the checkout `root`.
    ///
    /// # Errors
    /// As [`TaskWorktree::pin`].
    pub fn pin(root: &Path, wt: &Path) -> Result<Integration, GitError> {
        Ok(Integration {
            checkout: TaskWorktree::pin(root, wt)?.checkout(),
        })
    }

    /// Its checkout (hank's own git in it).
    #[must_use]
    pub fn checkout(&self) -> &Checkout {
        &self.checkout
    }

    /// A git command in it ([`Checkout::git`]).
    #[must_use]
    pub fn git(&self) -> Git {
        self.checkout.git()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_s_repositories_travel_to_its_worker_and_read_back_or_are_refused() {
        let repos = vec![
            ("api".to_string(), PathBuf::from("/w/api")),
            ("web".to_string(), PathBuf::from("/w/my web")),
        ];
        let text = task_repos_text(&repos).unwrap();
        assert_eq!(text, "api=/w/api\nweb=/w/my web\n");
        assert_eq!(parse_task_repos(&text).unwrap(), repos);
        assert_eq!(parse_task_repos("").unwrap(), Vec::new());
        // Never a name that leaves the task's folder, nor a relative checkout.
        for bad in [
            "../x=/w/x",
            "a/b=/w/x",
            "api=w/api",
            "api",
            "=/w/api",
            ".git=/w/x",
        ] {
            assert!(parse_task_repos(bad).is_err(), "{bad:?}");
        }
        for bad in [
            vec![("..".to_string(), PathBuf::from("/w/x"))],
            vec![("api".to_string(), PathBuf::from("/w/a\nweb=/etc"))],
        ] {
            assert_eq!(task_repos_text(&bad), None, "{bad:?}");
        }
    }
}
