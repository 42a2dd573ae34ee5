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
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `hank fleet`'s supervisor (I/O), a driver of the pure machine `policy::fleet::machine`
//! (`Fleet::on(event, now) -> Vec<Command>`, the only writer of task states): `mod.rs` (`Options`,
//! `Paths`, `fleet.json` read (`read`, `read_live`, `mark_done`), `run`: the fleet's lock, the
//! runtime, signals), `supervise.rs` (the driver, `Driver<E: FleetEffects>`: it wakes on events,
//! not on a fixed turn — `FleetEffects::wait(until)` ends at a git job's end, a worker's end,
//! Ctrl-C/SIGTERM or `until`: the next periodic reading (`LIVE`, 1 s: `hank ctl`'s journal, the
//! running tasks' figures) or the machine's own next wake-up (`Fleet::wake_at`: the interrupt
//! grace's end, MAX_RUNTIME's deadline), whichever is first; each turn feeds signals, `hank ctl`
//! (`Event::Steer`, when a reading is due), ended workers (`RunEnded`, their figures), finished git
//! jobs (`WorktreeReady`, `Committed`, `Discarded`, `MergeEnded`) and the admission facts (`Tick`:
//! free memory and the shared windows read only when a task may start) to `Fleet::on` and executes
//! its commands through the effects; then `Fleet::end`, the integration delivery, `Fleet::close`;
//! `HANK_FLEET_RECORD=FILE` appends every event fed (what `machine::replay` reads); nothing in it
//! spawns, runs git, sleeps on tokio or writes a file), `effects.rs` (`FleetEffects`: everything
//! the driver does to the world — the clock and `wait` (→ `Wake`), the interrupts, `hank ctl`
//! (`steer`, `poll_control`), the workers (`start_worker` with the `set`s given, `adopt_worker`,
//! `ended_workers`, `stop_worker` SIGTERM/SIGKILL, `run_figures` with their events followed), the
//! git jobs (`prepare`/`commit`/`discard`/`merge`, each started at once, their ends as machine
//! events from `finished_jobs`), admission's readings, `save`, `say`, the recording, `deliver`,
//! `clean_up`; `Real`: the fleet as it runs — git jobs on blocking threads and its own workers'
//! exits (`proc::on_exit`: a thread in `waitid(WNOWAIT)`, the child reaped by `Worker::finished`
//! only) reporting on one tokio channel, its wait a `select!` of that channel, the signal watch's
//! `changed()` and the deadline; an adopted worker (not its child) looked at once a second by pid
//! and start time; the wake-ups counted in `HANK_FLEET_TIMING`'s `supervisor_wakes`), `tests/` (the
//! driver's unit tests over `TestFx`: a clock moved only by the driver's waits — to the first
//! scheduled job end, worker end or Ctrl-C, else the driver's deadline —, workers and git jobs
//! ending at scripted times, `hank ctl` and Ctrl-C scripted — a 5 s git job delays neither a reap
//! nor `hank ctl`, independent jobs overlap, Ctrl-C during a merge, a second Ctrl-C kills, a small
//! fleet saves what its recorded events replay to; a job ending at 3.2 s taken at 3.2 s, an idle
//! fleet waking once a second, Ctrl-C during a wait taken at once and the grace's kill at its end),
//! `worktrees.rs` (git of the worktrees: the integration worktree (its `git worktree add` bounded
//! by the tree timeout), `ensure_worktree` — a spare reused (`take_spare`: `git worktree move`,
//! `checkout -f`, `clean -ffdx`) or a new one added, the `<slug>.making` marker written first and
//! removed last —, `retire_worktree` (HEAD detached by writing it, the task's own repository
//! released — `git::agent_repo::release` —, moved to `worktrees/_spare/`); every task's worktree
//! gets a new repository of its own (`agent_repo`, `git::agent_repo::make`; made again after
//! `return_to_agent`), `keep_worktrees` at the end (the integration worktree retired too; at most
//! agents + 1 spares kept for the next fleet, whose integration worktree and first tasks start on
//! them), `remove_spares` (`hank fleet clean`, under the fleet's lock), `commit_all` (a thin
//! wrapper of `git::commit::commit_all`: hooks off, the plan left out, counted in the git time),
//! the admin lock around worktree add/move/remove/prune only), `objects.rs` (the merge made in
//! git's objects when git ≥ 2.38 — `objects::available`, `HANK_FLEET_MERGE_IN_WORKTREE=1` forces
//! the older path for its tests and benches: `merge-tree --write-tree` (conflicts → their names),
//! `commit-tree`, the integration worktree checked out at the merge only for VERIFY_COMMAND, the
//! ticks as `hash-object` + two `mktree`s, the branch moved by compare-and-swap), `merge.rs`
//! (`commit_task`: the agent's commits imported (`git::agent_repo::import`; a refusal — HEAD
//! elsewhere, a changed record — fails the task with its reason), a finished task's commit, its
//! ticked items, its worktree retired; `merge_off_thread`/`merge_task`: `refused_before_merge`
//! (links, configuration, markers), the merge on a detached HEAD (`detach_at`: HEAD written, not
//! checked out, when it is the tip already; markers looked for in the task's changed files only),
//! the check (`run_check`: VERIFY_COMMAND through `effects::check::run_command_with_hook`,
//! VERIFY_TIMEOUT, its pgid in `fleet-check.pid`, `stop_recorded_check` at restart), the ticks
//! committed from the index (`commit_ticks`: `update-index`, `write-tree`, `commit-tree`; `git
//! commit -- PATH` when the check staged something), the compare-and-swap `update-ref` and HEAD
//! attached again by `symbolic-ref`, `return_to_agent`), `worker.rs` (`spawn_worker`: one `hank
//! run` per task in its own group, `HANK_FLEET_LEDGER`, the rest of MAX_RUNTIME; `Worker` own or
//! adopted; signals; `free_memory`), `save.rs` (`Saved`, held by the real effects — no statics:
//! `save`: `fleet.json` atomic, written only when changed; `tell_changes`: a `fleet_task` event per
//! state change since the last told, `--json`, NOTIFY), `timing.rs` (`HANK_FLEET_TIMING`: git time
//! apart from hank's own CPU, the driver's wake-ups); `control.rs` (`FleetControl`: the
//! supervisor's reader of the checkout's `hank ctl` journal, about once a second — each command
//! applied by `policy::control::steer_fleet`, forwarded into each running task's own journal as
//! `ID.<slug>` through `control::submit_once` (never twice across a restart), acked in the
//! checkout's journal, a `control` event in its `events.jsonl`; the pause and the `set`s restored
//! from the journal at start; `give_sets` before a task's worker starts; `fleet_running`: the fleet
//! lock is held); `events.rs` follows each task's `events.jsonl` into
//! `fleet-logs/<slug>.events.jsonl` (what `hank report --fleet` reads) and prints it with `"task"`
//! under `hank fleet --json`; `repos.rs` a task across several repositories of a workspace
//! (issue 51: `Paths::repos` frozen at the start, each named repository's worktree inside the
//! task's, committed and removed at its end, merged and checked per repository and landed all
//! or nothing, handed back per repository; `integration_branches` for delivery); `ci.rs` the remote as a CI fleet reads it (task branches
//! `hank/<slug>`, claims in `refs/hank/state/<slug>`, the branch a task continues on, the
//! clean-tree and git-identity checks); the rules are `policy/fleet.rs` and
//! `policy/fleet/machine.rs`

pub mod ci;
pub mod control;
pub mod deliver;
mod effects;
pub mod events;
mod merge;
mod objects;
pub mod repos;
mod save;
mod supervise;
mod timing;
mod worker;
mod worktrees;

#[cfg(test)]
mod tests;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jiff::Timestamp;

use crate::error::{HankError, Result};
use crate::policy::budget::BudgetLimits;
use crate::policy::fleet::TaskSpec;
use crate::store::schema::FleetFile;
use crate::store::{self, fleet_ledger, userdir};

use merge::*;

use supervise::supervise;
use timing::*;
use worker::*;
use worktrees::*;

/// How often the supervisor reads the `hank ctl` journal and the running tasks' status and
/// events (and so its longest wait: it otherwise wakes on a git job's end, a worker's end, a
/// user interrupt or the machine's own next wake-up).
const LIVE: jiff::SignedDuration = jiff::SignedDuration::from_secs(1);
/// How often an adopted worker (a killed fleet's: not this process's child, its end cannot
/// be awaited) is looked at by pid and start time.
const ADOPTED_POLL: Duration = Duration::from_secs(1);
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
    /// `--retry [TASK]`: the failed tasks queued again first (`Some(None)`: every one).
    pub retry: Option<Option<String>>,
    /// FLEET_KEEP_WORKTREES: keep a worktree per agent at the end for the next fleet.
    pub keep_worktrees: bool,
}

/// The folders of a fleet.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The user's checkout (the main project).
    pub root: PathBuf,
    /// The main project's per-user folder.
    pub user: PathBuf,
    /// The other repositories of a workspace the fleet's tasks change (issue 51), frozen at
    /// its start ([`repos::FleetRepo`]); empty for a project of one repository.
    pub repos: Vec<repos::FleetRepo>,
}

impl Paths {
    /// The fleet folders of the project at `root` (the per-user folder is created).
    pub fn of(root: &Path) -> Result<Self> {
        Ok(Self {
            root: root.to_path_buf(),
            user: userdir::project_dir(root)?,
            repos: Vec::new(),
        })
    }
    /// The user's checkout as a git handle.
    #[must_use]
    pub fn checkout(&self) -> crate::git::Checkout {
        crate::git::Checkout::at(&self.root)
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

/// The fleet's lock of the project: one fleet per project at a time (released by the OS even
/// on kill -9); refused when another holds it.
fn fleet_lock(paths: &Paths) -> Result<fs::File> {
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
            paths.root.display(),
            lock_path.display()
        )));
    }
    Ok(lock)
}

/// A task's worktree is a checkout of the whole repository and its run starts at its top: a
/// project in a folder of the repository (its `.hank/` not at the top) would have every task
/// fail at its first call. Refused before anything starts.
fn refuse_a_subfolder(root: &Path) -> Result<()> {
    let args = ["rev-parse", "--show-prefix"];
    let prefix = crate::git::Checkout::at(root)
        .git()
        .read(&args)
        .map_err(|e| HankError::Internal(e.context(&args, root)))?;
    let prefix = String::from_utf8_lossy(&prefix).trim().to_string();
    if prefix.is_empty() {
        return Ok(());
    }
    Err(HankError::usage_hint(
        format!(
            "{} is the folder {prefix} of a git repository: a fleet's tasks run in checkouts of \
             the whole repository, from its top folder",
            root.display()
        ),
        "keep the project (.hank/, .hankrc) at the repository's top folder for hank fleet, \
         or use hank run in this folder",
    ))
}

/// `hank fleet clean`: the worktrees kept for the next fleet removed (never a task's own
/// worktree: an unfinished fleet's work stays); how many, and their folder. Refused while a
/// fleet runs.
pub fn clean(root: &Path) -> Result<(usize, PathBuf)> {
    let paths = Paths::of(root)?;
    let _lock = fleet_lock(&paths)?;
    let removed = worktrees::remove_spares(&paths);
    Ok((removed, paths.user.join("worktrees")))
}

/// The worktrees kept for the next fleet: how many, their folder, and the bytes their files
/// take (counted up to `KEPT_WALK` entries: `None` past it). `None` when there are none.
#[must_use]
pub fn kept_worktrees(root: &Path) -> Option<(usize, PathBuf, Option<u64>)> {
    let paths = Paths::of(root).ok()?;
    let dir = paths.user.join("worktrees").join(worktrees::SPARE);
    let spares: Vec<PathBuf> = fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    if spares.is_empty() {
        return None;
    }
    let mut bytes = 0u64;
    let mut seen = 0usize;
    let mut stack = spares.clone();
    while let Some(p) = stack.pop() {
        seen += 1;
        if seen > KEPT_WALK {
            return Some((spares.len(), dir, None));
        }
        let Ok(m) = fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_dir() {
            if let Ok(entries) = fs::read_dir(&p) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        } else {
            bytes += m.len();
        }
    }
    Some((spares.len(), dir, Some(bytes)))
}

/// Most entries `hank fleet status` walks to size the kept worktrees.
const KEPT_WALK: usize = 2_000_000;

/// Runs the fleet until every task is merged, failed or stopped at a limit.
pub fn run(root: &Path, tasks: Vec<TaskSpec>, opts: &Options) -> Result<u8> {
    refuse_a_subfolder(root)?;
    let mut paths = Paths::of(root)?;
    paths.repos = repos::of_workspace(root, &tasks)?;
    let lock = fleet_lock(&paths)?;
    let runtime = crate::proc::runtime()
        .map_err(|e| HankError::Internal(format!("failed to start the async runtime: {e}")))?;
    let started = Instant::now();
    let count = tasks.len();
    let code = runtime.block_on(async move {
        let cancel = crate::agent::signals::install()?;
        supervise(&paths, &tasks, opts, &cancel).await
    });
    report_timing(count, started.elapsed());
    drop(lock);
    code
}
