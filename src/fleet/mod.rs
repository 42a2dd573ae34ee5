//! `hank fleet`'s supervisor (the I/O half; the rules are [`crate::policy::fleet`]).
//!
//! A task is an ordinary `hank run` (this same binary) in its own git worktree, in its own
//! process group: a crash, a hang or an OOM kill of one task cannot take the others down, and
//! each keeps its own state, lock and session. The supervisor admits tasks, watches each
//! worker (its exit, its `.hank/status.json` through [`crate::store::schema`]), commits and
//! merges finished work in a separate integration worktree, and records everything in
//! `.hank/fleet.json` ([`FleetFile`], written atomically, 0600) after every change, so a
//! `hank fleet` started again after a kill -9 continues where it was.
//!
//! Where things live: the worktrees under the main project's per-user directory
//! ([`userdir::project_dir`]) in `worktrees/<slug>` (outside the user's checkout, so they never
//! appear in its `git status`), the integration worktree in `worktrees/_integration`, the
//! workers' output in `fleet-logs/<slug>.log`, and the fleet-wide call ledger
//! ([`fleet_ledger`]) beside them, named to each worker in [`fleet_ledger::ENV`].

pub mod ci;
pub mod control;
pub mod deliver;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use jiff::Timestamp;

use crate::error::{HankError, Result};
use crate::git::{GitError, Repo, run_git};
use crate::policy::budget::BudgetLimits;
use crate::policy::fixplan;
use crate::policy::fleet::{self, Admission, AdmissionFacts, TaskEvent, TaskSpec, TaskState};
use crate::store::schema::{FLEET_SCHEMA, FleetFile, FleetTask};
use crate::store::{self, Store, fleet_ledger, userdir};

pub mod events;

/// How often the supervisor looks at its workers.
const POLL: Duration = Duration::from_millis(100);
/// Turns of [`POLL`] between two reads of the running tasks' status and events.
const LIVE_EVERY: u64 = 10;
/// After Ctrl-C, how long the workers get to stop (their own grace included) before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// Bytes of a failed check's output kept in a task's message and an agent's context.
const TAIL_BYTES: usize = 2000;
/// The integration worktree's folder name under `worktrees/`.
const INTEGRATION: &str = "_integration";

/// What `hank fleet` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--agents N`: tasks running at once.
    pub agents: usize,
    /// `--into BRANCH`.
    pub into: String,
    /// FLEET_MIN_FREE_MEMORY in bytes.
    pub min_free_memory: u64,
    /// MAX_MERGE_ATTEMPTS.
    pub max_merge_attempts: u32,
    /// `hank run` flags given to every task.
    pub run_flags: Vec<String>,
    /// VERIFY_COMMAND, run on every merge result.
    pub verify: Option<String>,
    /// VERIFY_TIMEOUT: a merge check running longer is stopped (its group) and counts red.
    pub verify_timeout: Duration,
    /// The prompt file and the verify command's script, repository-relative
    /// ([`crate::approval::watched_files`]): a merge that changes them stops.
    pub watched: (String, Option<String>),
    /// The fleet-wide budget.
    pub limits: BudgetLimits,
    /// `--deliver`: per task, or one pull request of the integration branch
    /// ([`deliver::FleetDelivery`]).
    pub deliver: deliver::FleetDelivery,
    /// MAX_COST_USD over every task's calls (0 = unlimited).
    pub max_cost_usd: f64,
    /// MAX_RUNTIME from the fleet's start (zero = unlimited): each task's run gets what is
    /// left of it as its `--max-runtime`.
    pub max_runtime: Duration,
    /// MAX_WINDOW_PERCENT (admission's forecast).
    pub window_limits: crate::policy::windows::WindowLimits,
    /// `--json`: events on stdout.
    pub json: bool,
    /// ON_USAGE_LIMIT=exit: a window that holds every start with no task running stops the
    /// fleet (exit 3) instead of waiting for its reset.
    pub exit_at_usage_limit: bool,
}

/// The folders of a fleet.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The user's checkout (the main project).
    pub root: PathBuf,
    /// The main project's per-user folder.
    pub user: PathBuf,
}

impl Paths {
    /// The fleet folders of the project at `root` (the per-user folder is created).
    pub fn of(root: &Path) -> Result<Self> {
        Ok(Self {
            root: root.to_path_buf(),
            user: userdir::project_dir(root)?,
        })
    }
    #[must_use]
    pub fn worktree(&self, slug: &str) -> PathBuf {
        self.user.join("worktrees").join(slug)
    }
    #[must_use]
    pub fn integration(&self) -> PathBuf {
        self.worktree(INTEGRATION)
    }
    #[must_use]
    pub fn ledger(&self) -> PathBuf {
        self.user.join(fleet_ledger::FILE_NAME)
    }
    #[must_use]
    pub fn log(&self, slug: &str) -> PathBuf {
        self.user.join("fleet-logs").join(format!("{slug}.log"))
    }
    #[must_use]
    pub fn fleet_file(&self) -> PathBuf {
        fleet_file(&self.root)
    }
}

/// `.hank/fleet.json` of the project at `root`.
#[must_use]
pub fn fleet_file(root: &Path) -> PathBuf {
    root.join(".hank").join("fleet.json")
}

/// Marks the fleet of `root` `done` (its delivery, resumed and finished by `hank fleet` or
/// `hank deliver`, was its last step).
///
/// # Errors
/// `fleet.json` cannot be read or written.
pub fn mark_done(root: &Path) -> Result<()> {
    let Some(mut file) = read(root)? else {
        return Ok(());
    };
    file.state = "done".into();
    file.updated_at = Some(Timestamp::now());
    let bytes = serde_json::to_vec_pretty(&file)
        .map_err(|e| HankError::Internal(format!("cannot encode fleet.json: {e}")))?;
    let path = fleet_file(root);
    store::write_atomic(&path, &bytes, false).map_err(|e| HankError::io("write", path, e))
}

/// The largest `.hank/fleet.json` hank reads (a task's message is bounded, so thousands of
/// tasks fit).
const FLEET_FILE_LIMIT: u64 = 16 * 1024 * 1024;

/// Reads `.hank/fleet.json` (`None` when there is none) without following a link and at most
/// 16 MiB; an unreadable one is an error naming it. The supervisor, the
/// commands and `hank monitor --live` (four times a second) all read it here.
pub fn read(root: &Path) -> Result<Option<FleetFile>> {
    let path = fleet_file(root);
    let bytes = match crate::fsread::read(&path, FLEET_FILE_LIMIT, crate::fsread::Follow::No) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HankError::io("read", path, e)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| HankError::Unreadable {
            path,
            problem: format!("is not a fleet state hank can read ({e})"),
        })
}

/// `.hank/fleet.json` ([`read`]) and whether a supervisor runs it now (one holds the fleet's
/// lock): what the commands and monitors show ([`FleetFile::shown`]: a fleet killed or
/// crashed while running is shown not running).
pub fn read_live(root: &Path) -> Result<Option<(FleetFile, bool)>> {
    Ok(read(root)?.map(|f| (f, control::fleet_running(root))))
}

/// The state of each task last told in the checkout's `events.jsonl`.
static TOLD: std::sync::Mutex<BTreeMap<String, TaskState>> = std::sync::Mutex::new(BTreeMap::new());

/// A `fleet_task` event in the main checkout's `events.jsonl` for each task whose state
/// changed since it was last told (best effort: the fleet's state is `fleet.json`).
fn tell_changes(paths: &Paths, file: &FleetFile, now: Timestamp) {
    use crate::store::schema::{Event, EventKind};
    let Ok(mut told) = TOLD.lock() else { return };
    let store = Store::new(&paths.root);
    for t in &file.tasks {
        if told.get(&t.name) == Some(&t.state) {
            continue;
        }
        told.insert(t.name.clone(), t.state);
        let event = Event::new(
            now,
            EventKind::FleetTask {
                task: t.name.clone(),
                state: t.state,
                branch: t.branch.clone(),
                message: t.message.clone(),
            },
        );
        let line = event.to_line();
        let _ = store.append_event(&line);
        if JSON.load(std::sync::atomic::Ordering::Relaxed) {
            outln!("{line}");
        }
        crate::notify::offer(&event);
    }
}

/// `hank fleet --json`: the fleet's own events go to stdout too.
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Tasks already in `fleet.json` when a fleet starts are not told again.
fn told_already(file: &FleetFile) {
    if let Ok(mut told) = TOLD.lock() {
        for t in &file.tasks {
            told.insert(t.name.clone(), t.state);
        }
    }
}

fn save(paths: &Paths, file: &mut FleetFile, now: Timestamp) -> Result<()> {
    tell_changes(paths, file, now);
    file.schema_version = FLEET_SCHEMA;
    file.updated_at = Some(now);
    let sum = fleet_ledger::summary(&paths.ledger(), now);
    file.calls_in_window = sum.calls_in_window;
    file.tokens_in_window = sum.tokens_in_window;
    file.cost_usd = sum.cost_usd;
    // Written only when something but the time changed (the supervisor saves on every turn
    // of its loop; most turns change nothing).
    let stamp = file.updated_at.take();
    let unchanged = serde_json::to_vec(file).ok();
    file.updated_at = stamp;
    if let (Some(now_bytes), Ok(mut last)) = (unchanged, LAST_SAVED.lock()) {
        if *last == now_bytes && paths.fleet_file().exists() {
            return Ok(());
        }
        *last = now_bytes;
    }
    let bytes = serde_json::to_vec_pretty(file)
        .map_err(|e| HankError::Internal(format!("cannot encode fleet.json: {e}")))?;
    let path = paths.fleet_file();
    store::write_atomic(&path, &bytes, false).map_err(|e| HankError::io("write", path, e))
}

/// `fleet.json` as last written, without its time.
static LAST_SAVED: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

/// Wall time spent in git commands by this fleet, and how many (for `HANK_FLEET_TIMING`).
static GIT_NANOS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static GIT_COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Every git command of the fleet goes through here (timed).
fn run_git_timed(dir: &Path, args: &[&str]) -> std::result::Result<Vec<u8>, GitError> {
    timed(|| run_git(dir, args))
}

/// A git command counted in the fleet's git time.
fn timed<T>(f: impl FnOnce() -> T) -> T {
    use std::sync::atomic::Ordering;
    let start = Instant::now();
    let out = f();
    let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    GIT_NANOS.fetch_add(nanos, Ordering::Relaxed);
    GIT_COUNT.fetch_add(1, Ordering::Relaxed);
    out
}

/// The bound of a git command that touches every file of the tree (a worktree's removal).
const TREE_GIT_TIMEOUT: Duration = Duration::from_secs(600);

/// CPU time (user + system) of this process so far, from `/proc/self/stat` (clock ticks of
/// 10 ms on Linux).
fn own_cpu() -> Option<Duration> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// With `HANK_FLEET_TIMING` set: hank's own cost (its CPU, its peak memory) apart from the
/// git commands it ran, on stderr at the end of the fleet (for `scripts/bench-fleet.sh`).
fn report_timing(tasks: usize, wall: Duration) {
    use std::sync::atomic::Ordering;
    if std::env::var_os("HANK_FLEET_TIMING").is_none() {
        return;
    }
    let git = Duration::from_nanos(GIT_NANOS.load(Ordering::Relaxed));
    let count = GIT_COUNT.load(Ordering::Relaxed);
    let cpu = own_cpu().unwrap_or_default();
    let hwm = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let per = u32::try_from(tasks.max(1)).unwrap_or(u32::MAX);
    errln!(
        "hank: fleet timing: tasks {tasks} wall_ms {} git_commands {count} git_ms {} \
         git_ms_per_task {} own_cpu_ms {} own_cpu_ms_per_task {} supervisor_peak_rss_kb {hwm}",
        wall.as_millis(),
        git.as_millis(),
        (git / per).as_millis(),
        cpu.as_millis(),
        (cpu / per).as_millis(),
    );
}

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>> {
    run_git_timed(dir, args).map_err(|e| {
        HankError::Internal(format!("git {} in {}: {e}", args.join(" "), dir.display()))
    })
}

/// `git` that may fail as an answer (a merge that conflicts, a branch that does not exist).
fn git_ok(dir: &Path, args: &[&str]) -> Result<bool> {
    match run_git_timed(dir, args) {
        Ok(_) => Ok(true),
        Err(GitError::Failed(_)) => Ok(false),
        Err(e) => Err(HankError::Internal(format!(
            "git {} in {}: {e}",
            args.join(" "),
            dir.display()
        ))),
    }
}

/// Commits everything in `dir` except hank's own runtime files and the task's plan (the
/// integration branch's plan is ticked by the fleet). Returns whether a commit was made.
fn commit_all(dir: &Path, message: &str) -> Result<bool> {
    git(dir, &["add", "-A", "--", "."])?;
    // Unstaged again (an exclude pathspec of an ignored path makes `git add` fail): hank's
    // runtime files (the one list, `deliver::runtime_paths`), and the plan back to the
    // branch's version.
    let globs = crate::deliver::runtime_globs();
    let mut reset: Vec<&str> = vec!["reset", "-q", "--", ".hank/fix_plan.md"];
    reset.extend(globs.iter().map(String::as_str));
    git(dir, &reset)?;
    // Never a file that looks like a secret (it stays in the worktree, uncommitted).
    for f in crate::deliver::unstage_secrets(dir)? {
        errln!(
            "hank: fleet: warning: {} looks like a secret and is not ignored: left out of the commit in {}",
            crate::sanitize::line(&f),
            dir.display()
        );
    }
    let merging = git_ok(dir, &["rev-parse", "-q", "--verify", "MERGE_HEAD"])?;
    if !merging && git_ok(dir, &["diff", "--cached", "--quiet"])? {
        return Ok(false);
    }
    let mut args: Vec<&str> = Vec::new();
    let has_identity = git_ok(dir, &["config", "user.email"])?;
    if !has_identity {
        args.extend(["-c", "user.name=hank", "-c", "user.email=hank@localhost"]);
    }
    args.extend(["commit", "-q", "--no-verify", "-m", message]);
    git(dir, &args)?;
    Ok(true)
}

fn identity_args(dir: &Path) -> Result<Vec<&'static str>> {
    Ok(if git_ok(dir, &["config", "user.email"])? {
        Vec::new()
    } else {
        vec!["-c", "user.name=hank", "-c", "user.email=hank@localhost"]
    })
}

/// The integration branch exists (created from the checkout's HEAD on first use) and is
/// checked out in the integration worktree, clean.
fn ensure_integration(paths: &Paths, into: &str) -> Result<()> {
    let root = &paths.root;
    let refname = format!("refs/heads/{into}");
    if !git_ok(root, &["check-ref-format", &refname])? {
        return Err(HankError::usage(format!(
            "--into {into:?} is not a valid branch name"
        )));
    }
    git(root, &["worktree", "prune"])?;
    if !git_ok(root, &["rev-parse", "-q", "--verify", &refname])? {
        git(root, &["branch", into, "HEAD"])?;
    }
    let int = paths.integration();
    if int.join(".git").exists() {
        // A fleet killed mid-merge (or mid-check): the merge was made on a detached HEAD, so
        // the branch is where it was; its check, if still running, is stopped; the worktree
        // goes back to the branch.
        stop_recorded_check(paths);
        let _ = git_ok(&int, &["merge", "--abort"]);
        git(&int, &["checkout", "-q", "-f", into])?;
        git(&int, &["reset", "-q", "--hard", "HEAD"])?;
        return Ok(());
    }
    if let Some(parent) = int.parent() {
        fs::create_dir_all(parent).map_err(|e| HankError::io("create", parent, e))?;
    }
    let int_s = int.to_string_lossy().into_owned();
    if !git_ok(root, &["worktree", "add", "-q", &int_s, into])? {
        return Err(HankError::usage_hint(
            format!("cannot check out the integration branch {into} in {int_s}"),
            "is it checked out somewhere else (`git worktree list`)? pass --into OTHER",
        ));
    }
    Ok(())
}

/// Copies the hank files a worktree needs and the branch does not have (untracked in the
/// user's checkout: `.hankrc`, `.hank/PROMPT.md`, `.hank/AGENT.md`, `.hank/agents/`).
fn copy_missing_config(root: &Path, wt: &Path) -> Result<()> {
    no_links(wt, &[".hank", ".hank/agents"])?;
    for rel in [".hankrc", ".hank/PROMPT.md", ".hank/AGENT.md"] {
        let (from, to) = (root.join(rel), wt.join(rel));
        // Never through a link the branch holds (a dangling `.hank/AGENT.md` pointing
        // outside the project): refused, not followed.
        no_links(wt, &[rel])?;
        if from.is_file() && fs::symlink_metadata(&to).is_err() {
            if let Some(p) = to.parent() {
                fs::create_dir_all(p).map_err(|e| HankError::io("create", p, e))?;
            }
            fs::copy(&from, &to).map_err(|e| HankError::io("copy to", &to, e))?;
        }
    }
    let agents = root.join(".hank/agents");
    if let Ok(entries) = fs::read_dir(&agents) {
        for e in entries.flatten() {
            let to = wt.join(".hank/agents").join(e.file_name());
            if fs::symlink_metadata(&to).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(link_refused(wt, &to));
            }
            if e.path().is_file() && fs::symlink_metadata(&to).is_err() {
                fs::create_dir_all(wt.join(".hank/agents"))
                    .map_err(|err| HankError::io("create", wt.join(".hank/agents"), err))?;
                fs::copy(e.path(), &to).map_err(|err| HankError::io("copy to", &to, err))?;
            }
        }
    }
    Ok(())
}

/// Refuses when one of `rels` in `wt` is a symbolic link: hank's files are written and read
/// only as what they are, never through a link the agent (or a merged branch) planted.
fn no_links(wt: &Path, rels: &[&str]) -> Result<()> {
    for rel in rels {
        let path = wt.join(rel);
        if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(link_refused(wt, &path));
        }
    }
    Ok(())
}

fn link_refused(wt: &Path, path: &Path) -> HankError {
    HankError::usage_hint(
        format!(
            "{} is a symbolic link: hank's files in {} must be regular files (refused, not \
             followed)",
            path.display(),
            wt.display()
        ),
        "remove the link (and commit its removal on the task's branch)",
    )
}

/// The task's worktree on `hank/<slug>`: made from the integration branch as it stands now
/// (or from the task's branch when it exists: a resumed task), with the task's plan.
fn ensure_worktree(paths: &Paths, spec: &TaskSpec, into: &str) -> Result<PathBuf> {
    let _admin = admin_lock();
    let wt = paths.worktree(&spec.slug);
    if fs::symlink_metadata(wt.join(".git")).is_ok() {
        // Resumed: git runs there through the git directory hank finds, never its `.git`.
        pin(paths, &wt)?;
        return Ok(wt);
    }
    let branch = format!("hank/{}", spec.slug);
    let wt_s = wt.to_string_lossy().into_owned();
    if let Some(parent) = wt.parent() {
        fs::create_dir_all(parent).map_err(|e| HankError::io("create", parent, e))?;
    }
    let exists = git_ok(
        &paths.root,
        &[
            "rev-parse",
            "-q",
            "--verify",
            &format!("refs/heads/{branch}"),
        ],
    )?;
    let add: Vec<&str> = if exists {
        vec!["worktree", "add", "-q", &wt_s, &branch]
    } else {
        vec!["worktree", "add", "-q", "-b", &branch, &wt_s, into]
    };
    // A checkout of every file: bounded by [`TREE_GIT_TIMEOUT`].
    timed(|| crate::git::run_git_for(&paths.root, &add, TREE_GIT_TIMEOUT)).map_err(|e| {
        HankError::Internal(format!(
            "git {} in {}: {e}",
            add.join(" "),
            paths.root.display()
        ))
    })?;
    pin(paths, &wt)?;
    copy_missing_config(&paths.root, &wt)?;
    let plan = format!(
        "# Fix plan — task {:?} of a hank fleet\n\n{}",
        spec.name, spec.section
    );
    let path = wt.join(".hank").join("fix_plan.md");
    store::write_atomic(&path, plan.as_bytes(), false)
        .map_err(|e| HankError::io("write", path, e))?;
    Ok(wt)
}

/// Opens the task worktree `wt` from the checkout's own records ([`Repo::task_worktree`]):
/// every later git command of the fleet in `wt` uses that git directory.
fn pin(paths: &Paths, wt: &Path) -> Result<Repo> {
    Repo::task_worktree(&paths.root, wt)
        .map_err(|e| HankError::Internal(format!("the worktree {}: {e}", wt.display())))
}

fn remove_worktree(paths: &Paths, wt: &Path) {
    let _admin = admin_lock();
    let wt_s = wt.to_string_lossy().into_owned();
    // A deletion of every file: bounded by [`TREE_GIT_TIMEOUT`], not the usual minute (at
    // 100,000 files on a loaded machine it took longer, and the fallback below then deleted
    // the tree in hank's own process).
    if timed(|| {
        crate::git::run_git_for(
            &paths.root,
            &["worktree", "remove", "--force", &wt_s],
            TREE_GIT_TIMEOUT,
        )
    })
    .is_ok()
    {
        return;
    }
    let _ = fs::remove_dir_all(wt);
    let _ = git_ok(&paths.root, &["worktree", "prune"]);
}

/// Held while a worktree is added, removed or pruned: git reads every worktree's admin folder
/// in those commands, and one being written by a concurrent `git worktree add` makes them fail
/// ("failed to read .git/worktrees/X/commondir"). Only these are serialized; merges, commits
/// and checks in the worktrees run concurrently.
static WORKTREE_ADMIN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn admin_lock() -> std::sync::MutexGuard<'static, ()> {
    WORKTREE_ADMIN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts a task's worker: `hank run FLAGS` in its worktree, in a process group of its own,
/// output to its log, told where the fleet-wide ledger is. (The one spawn of the fleet.)
fn spawn_worker(
    paths: &Paths,
    wt: &Path,
    slug: &str,
    flags: &[String],
    left: Option<Duration>,
) -> Result<Child> {
    let exe = std::env::current_exe()
        .map_err(|e| HankError::Internal(format!("cannot find hank's own program: {e}")))?;
    let log_path = paths.log(slug);
    if let Some(p) = log_path.parent() {
        fs::create_dir_all(p).map_err(|e| HankError::io("create", p, e))?;
    }
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| HankError::io("open", &log_path, e))?;
    let mut args: Vec<std::ffi::OsString> = std::iter::once("run".into())
        .chain(with_runtime(flags, left).into_iter().map(Into::into))
        .collect();
    if JSON.load(std::sync::atomic::Ordering::Relaxed) {
        // The task's own `--json` would go to its log: its events reach stdout through the
        // supervisor (`events::Tail`).
        args.retain(|a| a != "--json");
    }
    let ledger = paths.ledger();
    crate::proc::spawn_to_log(
        exe.as_os_str(),
        &args,
        wt,
        &[
            (std::ffi::OsStr::new(fleet_ledger::ENV), ledger.as_os_str()),
            // The worker pins its worktree's git directory from the checkout's records.
            (
                std::ffi::OsStr::new(crate::git::TASK_CHECKOUT_ENV),
                paths.root.as_os_str(),
            ),
        ],
        log,
    )
    .map_err(|e| HankError::Internal(format!("cannot start hank run for a task: {e}")))
}

/// The task's `hank run` flags with MAX_RUNTIME set to what is left of the fleet's (the
/// user's own `--max-runtime` replaced): the runtime cap holds from the fleet's start.
fn with_runtime(flags: &[String], left: Option<Duration>) -> Vec<String> {
    let Some(left) = left else {
        return flags.to_vec();
    };
    let mut out = Vec::with_capacity(flags.len() + 2);
    let mut skip = false;
    for f in flags {
        if skip {
            skip = false;
            continue;
        }
        if f == "--max-runtime" {
            skip = true;
            continue;
        }
        if f.starts_with("--max-runtime=") {
            continue;
        }
        out.push(f.clone());
    }
    // Whole seconds, at least one (a zero would mean unlimited).
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    out.push("--max-runtime".into());
    out.push(format!("{}s", secs.max(1)));
    out
}

/// The user's interrupts (1 = stop gracefully, 2 = now), as the supervisor counts them.
type Cancel = tokio::sync::watch::Receiver<u32>;

/// Where the merge check's process group is recorded while it runs (`{pgid} {start ticks}`),
/// so that a fleet restarted after a kill -9 stops a check that outlived it.
fn check_record(paths: &Paths) -> PathBuf {
    paths.user.join("fleet-check.pid")
}

/// Stops the merge check a killed fleet left running (its group, when its leader is still the
/// process recorded), and forgets the record.
fn stop_recorded_check(paths: &Paths) {
    let path = check_record(paths);
    let Ok(text) = fs::read_to_string(&path) else {
        return;
    };
    let mut words = text.split_whitespace().map(str::parse::<u64>);
    if let (Some(Ok(pgid)), Some(Ok(ticks))) = (words.next(), words.next())
        && let Ok(pgid) = i32::try_from(pgid)
        && pgid > 1
        && crate::proc::agent::start_ticks(pgid) == Some(ticks)
    {
        errln!("hank: fleet: stopping the merge check a killed fleet left running (group {pgid})");
        if let Ok(pid) = u32::try_from(pgid) {
            kill_group(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
    let _ = fs::remove_file(&path);
}

/// Runs VERIFY_COMMAND on a merge result in `dir` through the one runner of checks
/// ([`crate::effects::check::run_command_with_hook`]: `sh -c`, its own process group, SIGTERM
/// then SIGKILL at `timeout` (VERIFY_TIMEOUT) or on Ctrl-C), its group recorded in
/// [`check_record`] while it runs; `Err(tail of its output)` when it failed or ran past the
/// timeout. Called on a blocking thread of the supervisor's runtime.
fn run_check(
    paths: &Paths,
    dir: &Path,
    command: &str,
    timeout: Duration,
    log: &Path,
    cancel: Cancel,
) -> Result<std::result::Result<(), String>> {
    let record = check_record(paths);
    let ran = tokio::runtime::Handle::try_current()
        .map_err(|e| HankError::Internal(format!("the merge check needs the runtime: {e}")))?
        .block_on(crate::effects::check::run_command_with_hook(
            command,
            dir,
            log,
            timeout,
            cancel,
            |pgid| {
                // Best effort: without the record a kill -9 of the fleet leaves the check to
                // finish on its own.
                if let Some(ticks) = crate::proc::agent::start_ticks(pgid) {
                    let _ = crate::store::write_atomic(
                        &record,
                        format!("{pgid} {ticks}\n").as_bytes(),
                        false,
                    );
                }
            },
        ))
        .map_err(|e| HankError::Internal(format!("cannot run VERIFY_COMMAND: {e}")))?;
    let _ = fs::remove_file(&record);
    if ran.exit_code == Some(0) && !ran.timed_out && !ran.interrupted {
        return Ok(Ok(()));
    }
    if ran.timed_out {
        return Ok(Err(format!(
            "VERIFY_COMMAND ran past VERIFY_TIMEOUT ({}s) and was stopped",
            timeout.as_secs()
        )));
    }
    let text = fs::read(log).unwrap_or_default();
    let tail = &text[text.len().saturating_sub(TAIL_BYTES)..];
    Ok(Err(crate::sanitize::for_terminal(
        &String::from_utf8_lossy(tail),
        crate::sanitize::Lines::Keep,
    )
    .into_owned()))
}

fn kill_group(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(p), sig);
    }
}

fn signal_pid(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), sig);
    }
}

/// MemAvailable of `/proc/meminfo` in bytes (`None` when unreadable).
fn free_memory() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// The items checked in a task worktree's plan.
fn done_items(wt: &Path) -> Vec<String> {
    let text = fs::read_to_string(wt.join(".hank/fix_plan.md")).unwrap_or_default();
    fixplan::parse(&text, &fixplan::default_optional_sections())
        .items
        .into_iter()
        .filter(|i| i.done)
        .map(|i| i.text)
        .collect()
}

/// Why a merge did not land.
enum MergeProblem {
    /// The task changed hank's configuration ([`crate::approval::config_paths`]): it stays on
    /// the task's branch, for the user to look at.
    Config(Vec<String>),
    Conflict(Vec<String>),
    Markers(String),
    Red(String),
    /// Refused for good (not handed back to the agent): HEAD is not on the task's branch, or
    /// the branch holds a symbolic link among hank's files.
    Refused(String),
}

impl MergeProblem {
    fn describe(&self, into: &str) -> String {
        match self {
            Self::Config(files) => format!(
                "the task changed hank's configuration ({}): not merged into {into} without \
                 your approval; look at it with `git diff {into}...hank/<task> -- FILES` and \
                 merge it yourself if you want it",
                files.join(", ")
            ),
            Self::Conflict(files) => {
                format!("merging into {into} conflicts in: {}", files.join(", "))
            }
            Self::Markers(list) => format!("the branch holds conflict markers: {list}"),
            Self::Red(tail) => format!("VERIFY_COMMAND failed on the merge result:\n{tail}"),
            Self::Refused(why) => why.clone(),
        }
    }
}

/// Commits the task's work, merges it into the integration branch (in the integration
/// worktree), runs the check on the result, ticks the task's items in the integration plan.
/// The branch moves only when all of it passed.
fn merge_task(
    paths: &Paths,
    spec: &TaskSpec,
    wt: &Path,
    opts: &Options,
    cancel: Cancel,
) -> Result<std::result::Result<(), MergeProblem>> {
    let branch = format!("hank/{}", spec.slug);
    // The commit lands on the task's branch or nowhere: through the git directory hank
    // recorded, with HEAD where hank put it.
    let repo = pin(paths, wt)?;
    if let Err(e) = repo.expect_branch(&branch) {
        return Ok(Err(MergeProblem::Refused(e.to_string())));
    }
    commit_all(wt, &format!("hank fleet: task {}", spec.name))?;
    let int = paths.integration();
    // hank's files on the branch are regular files: a link would have the supervisor read and
    // write through it after the merge.
    let tree = git(
        &paths.root,
        &["ls-tree", "-r", "-z", &branch, "--", ".hank", ".hankrc"],
    )?;
    let links: Vec<String> = tree
        .split(|&b| b == 0)
        .filter(|e| e.starts_with(b"120000 "))
        .filter_map(|e| e.splitn(2, |&b| b == b'\t').nth(1))
        .map(|p| crate::sanitize::line(&String::from_utf8_lossy(p)))
        .collect();
    if !links.is_empty() {
        return Ok(Err(MergeProblem::Refused(format!(
            "{branch} holds symbolic links among hank's files ({}): refused, never followed; \
             hank's files must be regular files",
            links.join(", ")
        ))));
    }
    // Configuration (what the next task would run) never travels through a merge.
    let range = format!("{}...{branch}", opts.into);
    let out = git(&paths.root, &["diff", "--name-only", "-z", &range])?;
    let changed: Vec<String> = out
        .split(|b| *b == 0)
        .filter(|l| !l.is_empty())
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    let config =
        crate::approval::config_paths(&changed, &opts.watched.0, opts.watched.1.as_deref());
    if !config.is_empty() {
        return Ok(Err(MergeProblem::Config(
            config
                .iter()
                .map(|f| crate::sanitize::line(f).to_string())
                .collect(),
        )));
    }
    // Conflict markers never reach the integration branch.
    if let Ok(out) = run_git_timed(
        &paths.root,
        &[
            "grep",
            "-l",
            "-E",
            "^(<<<<<<<|>>>>>>>) ",
            &branch,
            "--",
            ".",
            ":(exclude).hank",
        ],
    ) {
        let list = String::from_utf8_lossy(&out).trim().replace('\n', ", ");
        if !list.is_empty() {
            return Ok(Err(MergeProblem::Markers(list)));
        }
    }
    // The merge, its check and the plan's ticks are made on a detached HEAD at the branch's
    // tip; the branch moves (compare-and-swap) only once all of it passed, so a kill at any
    // point leaves it where it was.
    let into_ref = format!("refs/heads/{}", opts.into);
    let old = String::from_utf8_lossy(&git(&int, &["rev-parse", "--verify", &into_ref])?)
        .trim()
        .to_string();
    git(&int, &["checkout", "-q", "--detach", &old])?;
    let outcome = merge_detached(paths, spec, wt, opts, cancel);
    let back = |int: &Path| -> Result<()> {
        git(int, &["reset", "-q", "--hard", &old])?;
        git(int, &["checkout", "-q", &opts.into])?;
        Ok(())
    };
    match outcome {
        Ok(Ok(())) => {
            let new = String::from_utf8_lossy(&git(&int, &["rev-parse", "HEAD"])?)
                .trim()
                .to_string();
            let message = format!("hank fleet: merge task {}", spec.name);
            if let Err(e) = git(&int, &["update-ref", "-m", &message, &into_ref, &new, &old]) {
                back(&int)?;
                return Err(e);
            }
            git(&int, &["checkout", "-q", &opts.into])?;
            Ok(Ok(()))
        }
        other => {
            back(&int)?;
            other
        }
    }
}

/// [`merge_task`]'s work on the detached HEAD of the integration worktree: the merge,
/// the check, the plan's ticks. Leaves the worktree for its caller to reset.
fn merge_detached(
    paths: &Paths,
    spec: &TaskSpec,
    wt: &Path,
    opts: &Options,
    cancel: Cancel,
) -> Result<std::result::Result<(), MergeProblem>> {
    let int = paths.integration();
    let ident = identity_args(&int)?;
    let branch = format!("hank/{}", spec.slug);
    let message = format!("hank fleet: merge task {}", spec.name);
    let mut args = ident.clone();
    args.extend([
        "merge",
        "-q",
        "--no-ff",
        "--no-edit",
        "-m",
        &message,
        &branch,
    ]);
    if !git_ok(&int, &args)? {
        let out = git(&int, &["diff", "--name-only", "--diff-filter=U"]).unwrap_or_default();
        let files: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .map(ToString::to_string)
            .collect();
        let _ = git_ok(&int, &["merge", "--abort"]);
        return Ok(Err(MergeProblem::Conflict(files)));
    }
    if let Some(cmd) = opts.verify.as_deref() {
        let log = paths.log(&format!("{}.verify", spec.slug));
        if let Err(tail) = run_check(paths, &int, cmd, opts.verify_timeout, &log, cancel)? {
            return Ok(Err(MergeProblem::Red(tail)));
        }
    }
    let plan_path = int.join(".hank").join("fix_plan.md");
    no_links(&int, &[".hank", ".hank/fix_plan.md"])?;
    if let Ok(plan) = fs::read_to_string(&plan_path) {
        let ticked = fleet::tick_items(&plan, &spec.name, &done_items(wt));
        if ticked != plan {
            fs::write(&plan_path, ticked).map_err(|e| HankError::io("write", &plan_path, e))?;
            let mut args = ident;
            args.extend([
                "commit",
                "-q",
                "--no-verify",
                "-m",
                "hank fleet: tick the task's items",
                "--",
                ".hank/fix_plan.md",
            ]);
            git(&int, &args)?;
        }
    }
    Ok(Ok(()))
}

/// Gives a failed merge back to the task's worktree: the integration branch merged into it
/// (conflicts left for the agent), and one more item in its plan naming the problem.
fn return_to_agent(paths: &Paths, wt: &Path, problem: &MergeProblem, into: &str) -> Result<()> {
    let _ = paths;
    // The task's plan is the worktree's own (not committed): set aside while the integration
    // branch (whose plan has other tasks' items ticked) is merged in, then put back.
    let path = wt.join(".hank/fix_plan.md");
    let mut plan = fs::read_to_string(&path).unwrap_or_default();
    let _ = git_ok(wt, &["checkout", "-q", "--", ".hank/fix_plan.md"]);
    let ident = identity_args(wt)?;
    let mut args = ident;
    args.extend(["merge", "-q", "--no-edit", into]);
    let _ = git_ok(wt, &args)?;
    let mut what = problem.describe(into);
    if what.len() > TAIL_BYTES {
        let cut = what.len() - TAIL_BYTES;
        let cut = (cut..what.len())
            .find(|i| what.is_char_boundary(*i))
            .unwrap_or(what.len());
        what = what[cut..].to_string();
    }
    let quoted: String = what
        .lines()
        .map(|l| {
            let safe = crate::agent::argv::escape_delimiters(l.as_bytes());
            format!("  > {}\n", String::from_utf8_lossy(&safe))
        })
        .collect();
    if !plan.ends_with('\n') {
        plan.push('\n');
    }
    plan.push_str(&format!(
        "- [ ] Make this branch merge cleanly into {into} with the check green: resolve every \
         conflict (no conflict markers left), keeping the intent of both sides\n{quoted}"
    ));
    store::write_atomic(&path, plan.as_bytes(), false).map_err(|e| HankError::io("write", path, e))
}

/// A task's worker: started by this fleet (its `Child`) or adopted from a fleet that was
/// killed (its pid and start time).
enum Worker {
    Own(Child),
    Adopted { pid: u32, ticks: u64 },
}

impl Worker {
    fn pid(&self) -> u32 {
        match self {
            Self::Own(c) => c.id(),
            Self::Adopted { pid, .. } => *pid,
        }
    }

    /// `Some(exit code)` once it ended (`None` for an adopted worker: read its status).
    fn finished(&mut self) -> Option<Option<u8>> {
        match self {
            Self::Own(c) => match c.try_wait() {
                Ok(Some(s)) => Some(Some(exit_code_of(s))),
                Ok(None) => None,
                Err(_) => Some(None),
            },
            Self::Adopted { pid, ticks } => {
                let alive =
                    i32::try_from(*pid).is_ok_and(|p| crate::agent::process::is_running(p, *ticks));
                (!alive).then_some(None)
            }
        }
    }
}

fn exit_code_of(s: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => u8::try_from(c).unwrap_or(crate::exit::ERROR),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(crate::exit::ERROR),
        _ => crate::exit::ERROR,
    }
}

/// The fleet's state reconciled with the plan's tasks: known tasks keep their state, new
/// ones are pending, tasks no longer in the plan (all items done) are kept as they were.
fn reconcile(file: &mut FleetFile, tasks: &[TaskSpec], paths: &Paths) {
    for spec in tasks {
        if !file.tasks.iter().any(|t| t.name == spec.name) {
            file.tasks.push(FleetTask {
                name: spec.name.clone(),
                branch: format!("hank/{}", spec.slug),
                issue: spec.issue.clone(),
                ..FleetTask::default()
            });
        }
    }
    for t in &mut file.tasks {
        if let Some(spec) = tasks.iter().find(|s| s.name == t.name) {
            let wt = paths.worktree(&spec.slug);
            t.worktree = wt.join(".git").exists().then(|| wt.display().to_string());
        }
    }
}

/// The exit code of a finished fleet: 0 all merged, 2 a task failed or is blocked, 3 tasks
/// left (stopped at a limit).
fn exit_code(file: &FleetFile) -> u8 {
    if file
        .tasks
        .iter()
        .any(|t| matches!(t.state, TaskState::Failed | TaskState::Blocked))
    {
        crate::exit::HALTED
    } else if file.tasks.iter().all(|t| t.state == TaskState::Merged) {
        crate::exit::OK
    } else {
        crate::exit::LIMIT
    }
}

/// Runs the fleet until every task is merged, failed or stopped at a limit.
pub fn run(root: &Path, tasks: Vec<TaskSpec>, opts: &Options) -> Result<u8> {
    let paths = Paths::of(root)?;
    // One fleet per project at a time (released by the OS even on kill -9).
    let lock_path = paths.user.join("fleet.lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| HankError::io("open", &lock_path, e))?;
    if lock.try_lock().is_err() {
        return Err(HankError::usage(format!(
            "another hank fleet runs for {} (its lock {} is held)",
            root.display(),
            lock_path.display()
        )));
    }
    let runtime = crate::proc::runtime()
        .map_err(|e| HankError::Internal(format!("failed to start the async runtime: {e}")))?;
    let started = Instant::now();
    let count = tasks.len();
    JSON.store(opts.json, std::sync::atomic::Ordering::Relaxed);
    let code = runtime.block_on(async move {
        let cancel = crate::agent::signals::install()?;
        supervise(&paths, &tasks, opts, &cancel).await
    });
    report_timing(count, started.elapsed());
    drop(lock);
    code
}

async fn supervise(
    paths: &Paths,
    tasks: &[TaskSpec],
    opts: &Options,
    cancel: &tokio::sync::watch::Receiver<u32>,
) -> Result<u8> {
    let mut file = read(&paths.root)?.unwrap_or_default();
    if !file.into.is_empty() && file.into != opts.into {
        errln!(
            "hank: note: the fleet recorded so far merged into {}; now merging into {}",
            file.into,
            opts.into
        );
    }
    told_already(&file);
    file.into.clone_from(&opts.into);
    file.pid = Some(std::process::id());
    file.state = "running".into();
    file.max_calls_per_hour = opts.limits.max_calls_per_hour;
    reconcile(&mut file, tasks, paths);
    ensure_integration(paths, &opts.into)?;
    // The fleet's budget: its cost counts from here, its runtime from now.
    let started_at = Timestamp::now();
    let started = Instant::now();
    fleet_ledger::begin(&paths.ledger(), started_at)?;
    file.started_at = Some(started_at);
    file.deadline = crate::policy::run::RunConfig::deadline_of(started_at, opts.max_runtime);
    file.max_cost_usd = opts.max_cost_usd;
    file.max_tokens_per_hour = opts.limits.max_tokens_per_hour;
    file.held = None;
    let mut tail = events::Tail::new(opts.json);
    let mut forecast = Forecast::default();
    // The merge running off the supervisor's thread (git and the check), one at a time.
    let mut merging: Option<(String, tokio::task::JoinHandle<Result<Option<Merged>>>)> = None;
    // Task worktrees being made off this thread (their workers start when they are there).
    let mut preparing: BTreeMap<String, tokio::task::JoinHandle<Result<PathBuf>>> = BTreeMap::new();
    let mut workers: BTreeMap<String, Worker> = BTreeMap::new();
    // Workers of a fleet that was killed: adopted when still running, else resumed below.
    for t in &mut file.tasks {
        if let (Some(pid), Some(ticks)) = (t.pid, t.pid_start) {
            let alive =
                i32::try_from(pid).is_ok_and(|p| crate::agent::process::is_running(p, ticks));
            if alive && t.state == TaskState::Running {
                errln!(
                    "hank: fleet: task {:?}: adopted its running worker (pid {pid})",
                    t.name
                );
                workers.insert(t.name.clone(), Worker::Adopted { pid, ticks });
                continue;
            }
        }
        t.pid = None;
        t.pid_start = None;
        if matches!(
            t.state,
            TaskState::Running | TaskState::Waiting | TaskState::Verifying | TaskState::Merging
        ) {
            // Its worker is gone: it resumes in its worktree (its session and state kept);
            // an unfinished merge was undone by `ensure_integration`.
            t.state = TaskState::Pending;
        }
    }
    let mut stopped_at_limit = false;
    // Finished tasks waiting for their merge (one merge per turn of the loop).
    let mut merge_queue: Vec<String> = Vec::new();
    let mut interrupted_at: Option<Instant> = None;
    // `hank ctl` typed in the main checkout: taken here and applied to the fleet.
    let mut ctl = control::FleetControl::open(&paths.root)?;
    if ctl.steer.paused {
        errln!(
            "hank: fleet: paused by hank ctl pause before the restart (hank ctl resume goes on)"
        );
    }
    file.paused = ctl.steer.paused;
    save(paths, &mut file, Timestamp::now())?;
    let mut turn: u64 = 0;
    loop {
        turn = turn.wrapping_add(1);
        let now = Timestamp::now();
        // Ctrl-C / SIGTERM: every worker is asked to stop (each applies hank run's grace).
        let signals = *cancel.borrow();
        if signals > 0 && interrupted_at.is_none() {
            interrupted_at = Some(Instant::now());
            errln!(
                "hank: fleet: interrupted; stopping {} task(s)",
                workers.len()
            );
            for w in workers.values() {
                signal_pid(w.pid(), nix::sys::signal::Signal::SIGTERM);
            }
        }
        if let Some(at) = interrupted_at
            && (at.elapsed() > STOP_GRACE || signals > 1)
        {
            for w in workers.values() {
                kill_group(w.pid(), nix::sys::signal::Signal::SIGKILL);
            }
        }
        // `hank ctl` commands, about once a second.
        if turn.is_multiple_of(LIVE_EVERY) {
            let running: Vec<(String, String, PathBuf)> = workers
                .keys()
                .filter_map(|name| {
                    let spec = tasks.iter().find(|s| &s.name == name)?;
                    Some((name.clone(), spec.slug.clone(), paths.worktree(&spec.slug)))
                })
                .collect();
            let running: Vec<control::RunningTask<'_>> = running
                .iter()
                .map(|(name, slug, wt)| control::RunningTask {
                    name,
                    slug,
                    worktree: wt,
                })
                .collect();
            for line in ctl.poll(&running, now) {
                errln!("hank: fleet: {line}");
            }
            if file.paused != ctl.steer.paused {
                file.paused = ctl.steer.paused;
                save(paths, &mut file, now)?;
            }
        }
        // Workers that ended.
        let names: Vec<String> = workers.keys().cloned().collect();
        for name in names {
            let Some(w) = workers.get_mut(&name) else {
                continue;
            };
            let Some(code) = w.finished() else { continue };
            workers.remove(&name);
            let Some(spec) = tasks.iter().find(|s| s.name == name) else {
                continue;
            };
            let wt = paths.worktree(&spec.slug);
            tail.follow(paths, &name, &spec.slug, &wt);
            let status = Store::new(&wt).read_status();
            let code = code
                .or_else(|| status.as_ref().and_then(|s| s.exit_code))
                .unwrap_or(crate::exit::ERROR);
            let Some(t) = file.tasks.iter_mut().find(|t| t.name == name) else {
                continue;
            };
            t.pid = None;
            t.pid_start = None;
            t.exit_code = Some(code);
            if let Some(s) = &status {
                t.loops = s.loop_count;
                t.cost_usd = s.total_cost_usd;
                t.agent.clone_from(&s.agent);
            }
            if code == crate::exit::OK {
                t.verified = Some(true);
                t.state = fleet::next_state(t.state, TaskEvent::RunDone, 0, 0);
                t.message = "done; waiting for its merge".into();
                // Merged below, after admission: its slot is free as soon as its run ended. A
                // task whose agent resolved a conflict goes first, before newer work overtakes
                // its resolution again.
                if t.handed_back_at.is_some() {
                    merge_queue.insert(0, name.clone());
                } else {
                    merge_queue.push(name.clone());
                }
            } else {
                let next = fleet::next_state(t.state, TaskEvent::RunStopped(code), 0, 0);
                t.state = next;
                let why = status.as_ref().and_then(|s| s.exit_reason).map_or_else(
                    || format!("exit code {code}"),
                    |r| format!("{r:?} (exit {code})"),
                );
                if next == TaskState::Failed {
                    t.message = format!("its run stopped: {why}; its work is kept on {}", t.branch);
                    let _ = commit_all(&wt, &format!("hank fleet: task {} (failed)", spec.name));
                    remove_worktree(paths, &wt);
                    t.worktree = None;
                    errln!("hank: fleet: task {:?} failed: {}", t.name, t.message);
                } else {
                    if code == crate::exit::LIMIT {
                        stopped_at_limit = true;
                    }
                    t.message = format!("stopped: {why}; `hank fleet` resumes it");
                }
            }
            save(paths, &mut file, now)?;
        }
        // Tasks that can never start.
        let mut states: BTreeMap<String, TaskState> = file
            .tasks
            .iter()
            .map(|t| (t.name.clone(), t.state))
            .collect();
        for name in fleet::newly_blocked(tasks, &states) {
            if let Some(t) = file.tasks.iter_mut().find(|t| t.name == name) {
                t.state = fleet::next_state(t.state, TaskEvent::DependencyFailed, 0, 0);
                t.message = "a task it comes after failed".into();
                states.insert(name, t.state);
            }
        }
        // Worktrees made off this thread: their workers start (none after an interrupt).
        let made: Vec<String> = preparing
            .iter()
            .filter(|(_, h)| h.is_finished())
            .map(|(n, _)| n.clone())
            .collect();
        for name in made {
            let Some(handle) = preparing.remove(&name) else {
                continue;
            };
            let wt = handle
                .await
                .map_err(|e| HankError::Internal(format!("making a task's worktree: {e}")))??;
            let (Some(spec), Some(t)) = (
                tasks.iter().find(|s| s.name == name),
                file.tasks.iter_mut().find(|t| t.name == name),
            ) else {
                continue;
            };
            t.worktree = Some(wt.display().to_string());
            if interrupted_at.is_some() || ctl.steer.paused || ctl.steer.stopping {
                t.state = TaskState::Pending;
                t.message = if interrupted_at.is_some() {
                    "interrupted before it started"
                } else if ctl.steer.stopping {
                    "stopped by hank ctl stop before it started"
                } else {
                    "paused by hank ctl pause before it started"
                }
                .into();
                continue;
            }
            let task = control::RunningTask {
                name: &spec.name,
                slug: &spec.slug,
                worktree: &wt,
            };
            if let Err(e) = ctl.give_sets(&task, now) {
                errln!(
                    "hank: fleet: warning: task {:?}: the hank ctl set values could not be given to it: {e}",
                    spec.name
                );
            }
            let left = (!opts.max_runtime.is_zero())
                .then(|| opts.max_runtime.saturating_sub(started.elapsed()));
            // The worktree's configuration is the checkout's approved one: a new worktree is
            // not a first run that approves what it finds.
            let differs = crate::approval::worktree_changes(&paths.root, &wt)?;
            if !differs.is_empty() {
                t.state = TaskState::Failed;
                t.message = format!(
                    "its worktree's configuration differs from the approved one of {} (not run): {}",
                    paths.root.display(),
                    differs.join("; ")
                );
                errln!("hank: fleet: task {:?}: {}", t.name, t.message);
                save(paths, &mut file, now)?;
                continue;
            }
            let flags = opts.deliver.worker_flags(&opts.run_flags, spec, tasks);
            let child = spawn_worker(paths, &wt, &spec.slug, &flags, left)?;
            t.pid = Some(child.id());
            t.pid_start = i32::try_from(child.id())
                .ok()
                .and_then(crate::agent::process::start_ticks);
            t.message = "running".into();
            errln!("hank: fleet: task {:?} started on {}", t.name, t.branch);
            workers.insert(name, Worker::Own(child));
            save(paths, &mut file, now)?;
        }
        // The fleet's own limits: nothing more starts once its runtime or its cost is spent
        // (the running tasks stop at their own next gate).
        if interrupted_at.is_none()
            && !stopped_at_limit
            && let Some(why) = budget_spent(paths, opts, started, now)
        {
            stopped_at_limit = true;
            errln!("hank: fleet: {why}; no task starts any more");
            file.held = Some(why);
        }
        // Admission (none while paused or stopping by `hank ctl`).
        if ctl.steer.paused && !ctl.steer.stopping && interrupted_at.is_none() {
            let why = "paused by hank ctl pause (hank ctl resume goes on)".to_string();
            for spec in fleet::ready(tasks, &states) {
                if let Some(t) = file.tasks.iter_mut().find(|t| t.name == spec.name) {
                    t.state = fleet::next_state(t.state, TaskEvent::Held, 0, 0);
                    t.message = format!("waiting: {why}");
                }
            }
            file.held = Some(why);
            save(paths, &mut file, now)?;
        }
        if interrupted_at.is_none() && !stopped_at_limit && !ctl.steer.paused && !ctl.steer.stopping
        {
            let mut held: Option<String> = None;
            for spec in fleet::ready(tasks, &states) {
                let facts = AdmissionFacts {
                    running: workers.len() + preparing.len(),
                    max_agents: opts.agents,
                    // Read only when a slot is free (`/proc/meminfo` costs the kernel a walk).
                    free_memory: (workers.len() + preparing.len() < opts.agents)
                        .then(free_memory)
                        .flatten(),
                    min_free_memory: opts.min_free_memory,
                };
                let Some(t) = file.tasks.iter_mut().find(|t| t.name == spec.name) else {
                    continue;
                };
                let admission = match fleet::admit(&facts) {
                    Admission::Start => {
                        let busy = workers.len() + preparing.len();
                        match forecast.hold(&opts.window_limits, busy, now) {
                            Some(why) if busy == 0 && opts.exit_at_usage_limit => {
                                // Nothing runs and nothing may start: ON_USAGE_LIMIT=exit.
                                stopped_at_limit = true;
                                errln!("hank: fleet: {why}; ON_USAGE_LIMIT=exit");
                                Admission::Hold(why)
                            }
                            Some(why) => Admission::Hold(why),
                            None => Admission::Start,
                        }
                    }
                    hold @ Admission::Hold(_) => hold,
                };
                match admission {
                    Admission::Hold(why) => {
                        t.state = fleet::next_state(t.state, TaskEvent::Held, 0, 0);
                        t.message = format!("waiting: {why}");
                        held = Some(why);
                    }
                    Admission::Start => {
                        // Its worktree is made off this thread (a checkout of the whole
                        // tree); its worker starts once it is there.
                        forecast.started += 1;
                        t.state = fleet::next_state(t.state, TaskEvent::Started, 0, 0);
                        t.message = "starting: making its worktree".into();
                        let (p, sp, into) = (paths.clone(), spec.clone(), opts.into.clone());
                        preparing.insert(
                            spec.name.clone(),
                            tokio::task::spawn_blocking(move || ensure_worktree(&p, &sp, &into)),
                        );
                    }
                }
            }
            file.held = held;
            save(paths, &mut file, now)?;
        }
        // One merge at a time, off this thread: supervision goes on while git and the
        // check run.
        if let Some((name, handle)) = merging.take() {
            if handle.is_finished() {
                let problem = handle
                    .await
                    .map_err(|e| HankError::Internal(format!("the merge of a task: {e}")))??;
                merged(&name, problem, opts, &mut file);
                save(paths, &mut file, Timestamp::now())?;
            } else {
                merging = Some((name, handle));
            }
        }
        if merging.is_none() && interrupted_at.is_none() && !merge_queue.is_empty() {
            let name = merge_queue.remove(0);
            if let Some(spec) = tasks.iter().find(|s| s.name == name)
                && let Some(t) = file.tasks.iter_mut().find(|t| t.name == name)
            {
                t.state = TaskState::Merging;
                t.message = "merging".into();
                let last = fleet::next_state(
                    TaskState::Merging,
                    TaskEvent::MergeFailed,
                    t.merge_attempts,
                    opts.max_merge_attempts,
                ) == TaskState::Failed;
                let handed_back_at = t.handed_back_at.clone();
                save(paths, &mut file, now)?;
                let (p, sp, o, c) = (paths.clone(), spec.clone(), opts.clone(), cancel.clone());
                let handle = tokio::task::spawn_blocking(move || {
                    merge_off_thread(&p, &sp, &o, last, handed_back_at.as_deref(), c)
                });
                merging = Some((name, handle));
            }
        }
        // Live figures of the running tasks, once a second (a worker's end is seen every turn;
        // its final figures and events are read then).
        for t in file
            .tasks
            .iter_mut()
            .filter(|_| turn.is_multiple_of(LIVE_EVERY))
        {
            if workers.contains_key(&t.name)
                && let Some(wt) = &t.worktree
            {
                if let Some(spec) = tasks.iter().find(|s| s.name == t.name) {
                    tail.follow(paths, &t.name, &spec.slug, Path::new(wt));
                }
                if let Some(s) = Store::new(Path::new(wt)).read_status() {
                    t.loops = s.loop_count;
                    t.cost_usd = s.total_cost_usd;
                    t.agent = s.agent;
                }
            }
        }
        if workers.is_empty()
            && preparing.is_empty()
            && merging.is_none()
            && (merge_queue.is_empty() || interrupted_at.is_some())
        {
            // The states as they are now (a merge may have landed since they were read).
            let now_states: BTreeMap<String, TaskState> = file
                .tasks
                .iter()
                .map(|t| (t.name.clone(), t.state))
                .collect();
            let startable = interrupted_at.is_none()
                && !stopped_at_limit
                && !ctl.steer.stopping
                && !fleet::ready(tasks, &now_states).is_empty();
            if !startable {
                break;
            }
        }
        tokio::time::sleep(POLL).await;
    }
    for t in &mut file.tasks {
        if t.state == TaskState::Waiting {
            // Held by admission and never started (whatever ended the fleet: a stop, a limit,
            // an interruption): the next `hank fleet` starts it.
            t.state = TaskState::Pending;
            t.message = if ctl.steer.stopping {
                "not started: hank ctl stop"
            } else if interrupted_at.is_some() {
                "not started: interrupted"
            } else {
                "not started before the fleet stopped"
            }
            .into();
        }
        if matches!(t.state, TaskState::Verifying | TaskState::Merging) {
            // Interrupted before its merge: the next fleet runs it again (its plan is done,
            // so its run calls no agent) and merges it.
            t.state = TaskState::Pending;
        }
    }
    // `hank ctl stop` ends the fleet as it ends `hank run`: exit 130.
    let mut code = if interrupted_at.is_some() || ctl.steer.stopping {
        crate::exit::INTERRUPTED
    } else {
        exit_code(&file)
    };
    if code == crate::exit::OK {
        let mut cancel = cancel.clone();
        if let Some(c) =
            deliver::integration(&paths.root, &opts.into, &opts.deliver, &file, &mut cancel).await?
        {
            code = c;
        }
    }
    file.pid = None;
    if ctl.steer.stopping {
        file.held = Some("stopped by hank ctl stop; hank fleet goes on with the rest".into());
    }
    file.state = match code {
        crate::exit::OK => "done",
        crate::exit::HALTED => "failed",
        crate::exit::INTERRUPTED => "interrupted",
        _ => "stopped",
    }
    .into();
    if file.tasks.iter().all(|t| t.state.is_final()) {
        remove_worktree(paths, &paths.integration());
    }
    save(paths, &mut file, Timestamp::now())?;
    for t in file.tasks.iter().filter(|t| t.state == TaskState::Failed) {
        errln!(
            "hank: fleet: task {:?} failed — {} (branch {})",
            t.name,
            t.message,
            t.branch
        );
    }
    Ok(code)
}

/// The merge of a finished task and what follows it in git (the worktree removed once merged
/// or failed for good, else the problem handed back to its agent), on a blocking thread;
/// `Some(problem)` when it did not land. `last`: this failure would be the task's last.
fn merge_off_thread(
    paths: &Paths,
    spec: &TaskSpec,
    opts: &Options,
    last: bool,
    handed_back_at: Option<&str>,
    cancel: Cancel,
) -> Result<Option<Merged>> {
    let wt = paths.worktree(&spec.slug);
    // The integration tip this merge is tried on (only merges move it, one at a time).
    let tip = String::from_utf8_lossy(&git(
        &paths.root,
        &[
            "rev-parse",
            "--verify",
            &format!("refs/heads/{}", opts.into),
        ],
    )?)
    .trim()
    .to_string();
    match merge_task(paths, spec, &wt, opts, cancel)? {
        Ok(()) => {
            remove_worktree(paths, &wt);
            Ok(None)
        }
        Err(problem) => {
            let counts = fleet::merge_failure_counts(
                matches!(problem, MergeProblem::Conflict(_)),
                handed_back_at,
                &tip,
            );
            let last = last && counts;
            if matches!(problem, MergeProblem::Refused(_)) {
                // Kept as the agent left it, for the user to look at; never merged.
                return Ok(Some(Merged {
                    problem,
                    tip,
                    counts,
                }));
            }
            // A configuration change is the user's to look at (it stays on the branch), not
            // the agent's to redo.
            if last || matches!(problem, MergeProblem::Config(_)) {
                remove_worktree(paths, &wt);
            } else {
                return_to_agent(paths, &wt, &problem, &opts.into)?;
            }
            Ok(Some(Merged {
                problem,
                tip,
                counts,
            }))
        }
    }
}

/// A merge that did not land: its problem, the integration tip it was tried on, and whether it
/// counts against MAX_MERGE_ATTEMPTS ([`fleet::merge_failure_counts`]).
struct Merged {
    problem: MergeProblem,
    tip: String,
    counts: bool,
}

/// The outcome of a task's merge recorded in `file`.
fn merged(name: &str, failed: Option<Merged>, opts: &Options, file: &mut FleetFile) {
    let Some(t) = file.tasks.iter_mut().find(|t| t.name == name) else {
        return;
    };
    t.state = TaskState::Merging;
    match failed {
        None => {
            t.handed_back_at = None;
            t.state = fleet::next_state(t.state, TaskEvent::Merged, t.merge_attempts, 0);
            t.message = format!("merged into {}", opts.into);
            t.worktree = None;
            errln!("hank: fleet: task {:?} merged into {}", t.name, opts.into);
        }
        Some(Merged {
            problem,
            tip,
            counts,
        }) => {
            let refused = matches!(problem, MergeProblem::Config(_) | MergeProblem::Refused(_));
            let event = if refused {
                TaskEvent::MergeRefused
            } else if counts {
                TaskEvent::MergeFailed
            } else {
                TaskEvent::MergeOvertaken
            };
            t.state = fleet::next_state(t.state, event, t.merge_attempts, opts.max_merge_attempts);
            if counts {
                t.merge_attempts = t.merge_attempts.saturating_add(1);
            }
            t.handed_back_at = matches!(problem, MergeProblem::Conflict(_)).then_some(tip);
            let what = problem.describe(&opts.into);
            if matches!(problem, MergeProblem::Config(_)) {
                t.message = format!("{what}; its work is kept on {}", t.branch);
                t.worktree = None;
            } else if t.state == TaskState::Failed {
                t.message = format!(
                    "{what} (after {} merge attempt(s)); its work is kept on {}",
                    t.merge_attempts, t.branch
                );
                t.worktree = None;
            } else {
                // Back to an agent in the task's worktree: `Pending` with its worktree kept,
                // so the next admission resumes it there.
                t.message = if counts {
                    format!(
                        "merge attempt {} failed, back to the agent: {what}",
                        t.merge_attempts
                    )
                } else {
                    format!(
                        "its resolution was overtaken by newer merges, back to the agent (not \
                         counted as a failed attempt): {what}"
                    )
                };
            }
            errln!("hank: fleet: task {:?}: {}", t.name, t.message);
        }
    }
}

/// The fleet's runtime or cost used up: why (`None`: neither).
fn budget_spent(paths: &Paths, opts: &Options, started: Instant, now: Timestamp) -> Option<String> {
    if !opts.max_runtime.is_zero() && started.elapsed() >= opts.max_runtime {
        return Some(format!(
            "MAX_RUNTIME {}s reached",
            opts.max_runtime.as_secs()
        ));
    }
    if opts.max_cost_usd > 0.0 {
        let spent = fleet_ledger::summary(&paths.ledger(), now).cost_usd;
        if spent + 1e-9 >= opts.max_cost_usd {
            return Some(format!(
                "MAX_COST_USD reached: the tasks spent ${spent:.2} of ${:.2}",
                opts.max_cost_usd
            ));
        }
    }
    None
}

/// What admission knows of the usage windows: each limited window's utilization when the
/// fleet first saw it, and the tasks started since (how far a window moves per task).
#[derive(Debug, Default)]
struct Forecast {
    first: BTreeMap<String, f64>,
    started: usize,
}

impl Forecast {
    /// Why one more task may not start under MAX_WINDOW_PERCENT, from the readings every run
    /// of the user shares ([`crate::store::shared_windows`]).
    fn hold(
        &mut self,
        limits: &crate::policy::windows::WindowLimits,
        running: usize,
        now: Timestamp,
    ) -> Option<String> {
        if limits.is_empty() {
            return None;
        }
        let shared = crate::store::shared_windows::read();
        let mut facts = Vec::new();
        for (name, &limit) in &limits.0 {
            let Some(window) = shared.get(name) else {
                continue;
            };
            let Some(percent) = window.utilization_at(now).map(|u| u * 100.0) else {
                continue;
            };
            let first = self.first.entry(name.clone()).or_insert(percent);
            if percent < *first {
                // A reset in between: the movement is measured from here.
                *first = percent;
            }
            facts.push(fleet::WindowFacts {
                name: name.clone(),
                percent,
                limit,
                per_task: fleet::rise_per_task(*first, percent, self.started),
                resets_at: window.fields.resets_at,
            });
        }
        fleet::window_admission(&facts, running)
    }
}

#[cfg(test)]
mod tests {
    use super::with_runtime;
    use std::time::Duration;

    #[test]
    fn each_task_gets_what_is_left_of_the_fleets_runtime() {
        let flags = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            with_runtime(&flags(&["--calls", "3"]), None),
            flags(&["--calls", "3"])
        );
        assert_eq!(
            with_runtime(
                &flags(&["--max-runtime", "8h", "--calls", "3", "--max-runtime=2h"]),
                Some(Duration::from_millis(90_500))
            ),
            flags(&["--calls", "3", "--max-runtime", "91s"])
        );
        assert_eq!(
            with_runtime(&[], Some(Duration::ZERO)),
            flags(&["--max-runtime", "1s"]),
            "never zero (unlimited)"
        );
    }
}
