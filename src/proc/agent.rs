//! Spawning the agent: no shell, its own process group, stdout/stderr drained concurrently,
//! timeout and Ctrl-C that terminate the whole group (SIGTERM, grace, SIGKILL), and no wait on
//! a pipe that a leftover grandchild keeps open.
//!
//! What the agent printed on stdout is held by hank ([`Capture`]: in memory up to
//! [`CAPTURE_MEM`], then in an unlinked temp file only hank has open): the analysis reads that,
//! never the `loop-N.out` log, which is a copy for people that the agent can rewrite.
//!
//! The agent's leftovers (a `setsid` daemon, a double fork, a private tmux server, an `env -i`
//! process) are found from hank's own process tree: hank is the child subreaper
//! ([`become_subreaper`]), so every orphan of the agent becomes hank's child, and the tree is
//! walked through `/proc/PID/task/TID/children` — never a scan of every process of the machine
//! on the loop's path. While the agent runs, its descendants outside its group are reported
//! every second ([`Tracked::Outside`]) for the lock record.
//!
//! Every agent also carries a [`Marker`] in its environment (`HANK_RUN_ID`,
//! `HANK_RUN_PROJECT`): the next start of a hank that was killed with SIGKILL stops whatever
//! is left of its agents by it ([`stop_orphans`], one scan of `/proc` at start) and by the
//! lock's records ([`stop_recorded`], [`stop_orphan_group`]). Without the subreaper (or
//! without `children` files), the stop falls back to that scan.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};

use super::signal_group;
use crate::analysis::RunFacts;
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

/// Bytes of stderr kept in memory for the analyzer (the whole stream goes to the `.err` log).
pub const STDERR_KEEP: usize = 64 * 1024;
/// Longest stdout line passed to the live view (longer lines are logged, not displayed).
pub const LIVE_LINE_MAX: usize = 1024 * 1024;
/// Lines waiting for the live view (the agent's pipe waits beyond that: memory stays bounded).
const LIVE_QUEUE: usize = 8;
/// Stdout bytes held in memory; the rest of the answer goes to an unlinked temp file.
pub const CAPTURE_MEM: usize = 8 * 1024 * 1024;
/// Most stdout bytes held for the analysis (and written to the log); past it the answer is
/// `output_too_large` and the rest is read and dropped.
pub const CAPTURE_MAX: u64 = 4 * 1024 * 1024 * 1024;
/// Once a complete result has been read, the agent's time to exit before its group is stopped.
pub const RESULT_GRACE: Duration = Duration::from_secs(3);
/// The environment variable with the run's random id.
pub const RUN_ID_VAR: &str = "HANK_RUN_ID";
/// The environment variable with the project directory of the run.
pub const PROJECT_VAR: &str = "HANK_RUN_PROJECT";
/// Longest `/proc/PID/environ` read when looking for a marker.
const ENVIRON_MAX: u64 = 4 * 1024 * 1024;

/// The tag every agent process of a run carries in its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub run_id: String,
    /// The project directory (canonical), so that the next start finds what a killed hank
    /// of the same project left.
    pub project: String,
}

impl Marker {
    /// A new marker for a run in `project` (a random id from the kernel, else time and pid).
    #[must_use]
    pub fn new(project: &Path) -> Self {
        let mut bytes = [0u8; 12];
        let random = File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        let run_id = if random.is_ok() {
            bytes.iter().map(|b| format!("{b:02x}")).collect()
        } else {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!("{:x}-{nanos:x}", std::process::id())
        };
        let project = std::fs::canonicalize(project)
            .unwrap_or_else(|_| project.to_path_buf())
            .display()
            .to_string();
        Self { run_id, project }
    }

    fn env(&self) -> [(&'static str, &str); 2] {
        [(RUN_ID_VAR, &self.run_id), (PROJECT_VAR, &self.project)]
    }
}

/// One agent run to perform.
#[derive(Debug)]
pub struct Spawn<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub cwd: &'a Path,
    /// Sent on stdin, then stdin is closed.
    pub stdin: Vec<u8>,
    /// A copy of stdout for people (never read back).
    pub stdout_log: PathBuf,
    /// Created only when the agent writes to stderr.
    pub stderr_log: PathBuf,
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Pass stdout lines to the live callback.
    pub live: bool,
    /// Variables removed from the agent's environment (it inherits hank's otherwise).
    pub env_remove: &'a [&'a str],
    /// Variables set in the agent's environment (the profile's `[env]`).
    pub env_set: &'a [(String, String)],
    /// Stop the agent [`RESULT_GRACE`] after it printed a complete Claude result line
    /// (`{"type":"result",…}`), keeping the answer (the other clients' outputs have no such
    /// end mark that hank can see while they run).
    pub stop_after_result: bool,
    /// The run's tag (set in the agent's environment; its descendants are found by it).
    pub marker: Option<&'a Marker>,
    /// IDLE_TIMEOUT, with streaming output only: an agent that prints nothing on stdout for
    /// this long is hung and stopped like at the timeout.
    pub idle_timeout: Option<Duration>,
    /// FIRST_OUTPUT_TIMEOUT, with streaming output only: an agent that has printed not one
    /// stdout byte this long after its start is a startup hang, stopped like at the timeout.
    pub first_output_timeout: Option<Duration>,
    /// SANDBOX: the agent starts through `hank __sandbox RULES -- PROGRAM ARGS…`, which
    /// confines itself with Landlock and then becomes the agent (`crate::sandbox`).
    pub sandbox: Option<&'a crate::sandbox::Rules>,
}

/// What happened to the process.
#[derive(Debug, Default)]
pub struct RunOutcome {
    /// How it ended, as the analyzer reads it: exit code or signal, hank's timeout (and
    /// whether it was FIRST_OUTPUT_TIMEOUT), an interrupt by SIGINT/SIGTERM, stdout cut.
    pub facts: RunFacts,
    /// Stopped by hank [`RESULT_GRACE`] after its complete result (the answer is kept).
    pub stopped_after_result: bool,
    /// The timeout was IDLE_TIMEOUT: the agent printed nothing for that long.
    pub idle: bool,
    pub stdout_bytes: u64,
    /// What the agent printed on stdout, as hank read it from the pipe.
    pub stdout: Capture,
    /// The first [`STDERR_KEEP`] bytes of stderr.
    pub stderr_head: Vec<u8>,
    pub stderr_bytes: u64,
    pub duration: Duration,
    /// A process of the agent's group (or a marked descendant) outlived it and had to be
    /// terminated.
    pub leftovers_killed: bool,
}

/// The agent's stdout as hank read it: the first [`CAPTURE_MEM`] bytes in memory, the rest in
/// an unlinked temp file (no name: nothing in the project can reach it), at most
/// [`CAPTURE_MAX`] bytes in all.
#[derive(Debug, Default)]
pub struct Capture {
    mem: Vec<u8>,
    spill: Option<File>,
    kept: u64,
    /// Bytes read but not kept (past [`CAPTURE_MAX`], or the temp file could not be written).
    dropped: u64,
}

impl Capture {
    /// A capture of `bytes` (for tests and callers that have the answer in memory).
    #[must_use]
    pub fn of(bytes: Vec<u8>) -> Self {
        Self {
            kept: bytes.len() as u64,
            mem: bytes,
            spill: None,
            dropped: 0,
        }
    }

    /// Appends what the agent printed (never fails: what cannot be kept is counted).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.dropped > 0 {
            self.dropped = self.dropped.saturating_add(bytes.len() as u64);
            return;
        }
        let room = usize::try_from(CAPTURE_MAX - self.kept).unwrap_or(usize::MAX);
        let (keep, drop) = bytes.split_at(bytes.len().min(room));
        if self.spill.is_none() && self.mem.len() + keep.len() <= CAPTURE_MEM {
            self.mem.extend_from_slice(keep);
        } else {
            if self.spill.is_none() {
                self.spill = tempfile::tempfile().ok();
            }
            let written = self
                .spill
                .as_mut()
                .is_some_and(|f| f.write_all(keep).is_ok());
            if !written {
                self.dropped = self.dropped.saturating_add(keep.len() as u64);
            }
        }
        if self.dropped == 0 {
            self.kept += keep.len() as u64;
        }
        self.dropped = self.dropped.saturating_add(drop.len() as u64);
    }

    /// Bytes kept.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.kept
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.kept == 0
    }

    /// Everything the agent printed was kept (nothing past [`CAPTURE_MAX`] or lost).
    #[must_use]
    pub fn complete(&self) -> bool {
        self.dropped == 0
    }

    /// The kept bytes as a stream, from the start.
    ///
    /// # Errors
    /// The temp file could not be rewound.
    pub fn into_reader(self) -> std::io::Result<Box<dyn BufRead + Send>> {
        let head = std::io::Cursor::new(self.mem);
        match self.spill {
            Some(mut f) => {
                f.rewind()?;
                Ok(Box::new(Read::chain(
                    head,
                    BufReader::with_capacity(1 << 18, f),
                )))
            }
            None => Ok(Box::new(head)),
        }
    }
}

/// Creates (truncates) a log file with mode 0600, never following a symlink at `path`.
pub fn create_log(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}

/// The kernel start time of `pid` (field 22 of `/proc/PID/stat`), to recognise a process
/// group leader again without risking a reused PID. `None` where /proc is unavailable.
#[must_use]
pub fn start_ticks(pid: i32) -> Option<u64> {
    stat_of(pid).map(|s| s.ticks)
}

/// What hank reads from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy)]
struct Stat {
    zombie: bool,
    ppid: i32,
    pgrp: i32,
    ticks: u64,
}

/// `pid` is the process that started at `ticks` ([`start_ticks`]) and has not exited.
#[must_use]
pub fn is_running(pid: i32, ticks: u64) -> bool {
    stat_of(pid).is_some_and(|s| !s.zombie && s.ticks == ticks)
}

/// `pid` exists and has not exited (a zombie or a dead entry does not count).
#[must_use]
pub fn exists(pid: i32) -> bool {
    stat_of(pid).is_some_and(|s| !s.zombie)
}

fn stat_of(pid: i32) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let mut f = after.split_whitespace();
    let state = f.next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    // Fields 6 to 21 come next; `starttime` is field 22.
    let ticks = f.nth(16)?.parse().ok()?;
    Some(Stat {
        zombie: state == "Z" || state == "X",
        ppid,
        pgrp,
        ticks,
    })
}

/// Whether the environment of `pid` holds every `KEY=VALUE` of `wanted`.
fn environ_has(pid: i32, wanted: &[(&str, &str)]) -> bool {
    let Ok(f) = File::open(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let mut env = vec![0u8];
    if f.take(ENVIRON_MAX).read_to_end(&mut env).is_err() {
        return false;
    }
    wanted.iter().all(|(k, v)| {
        let needle = format!("\0{k}={v}\0");
        memchr::memmem::find(&env, needle.as_bytes()).is_some()
            || env.ends_with(&needle.as_bytes()[..needle.len() - 1])
    })
}

fn all_pids() -> Vec<i32> {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|p| *p != me && *p > 1)
                .collect()
        })
        .unwrap_or_default()
}

/// Live processes (not zombies) whose environment holds every `KEY=VALUE` of `wanted`, with
/// their start times.
#[must_use]
pub fn marked_processes(wanted: &[(&str, &str)]) -> Vec<(i32, u64)> {
    all_pids()
        .into_iter()
        .filter_map(|pid| {
            let st = stat_of(pid)?;
            (!st.zombie && environ_has(pid, wanted)).then_some((pid, st.ticks))
        })
        .collect()
}

/// The live processes of the agent's tree: found from hank's own children when hank is the
/// child subreaper ([`become_subreaper`]: every orphan of the agent is re-parented to hank,
/// whatever its environment or session), else by a scan of the machine for group `pgid` or
/// `marker`.
fn survivors(pgid: i32, marker: Option<&Marker>) -> Walk {
    if SUBREAPER.load(Ordering::Relaxed) {
        tree_walk(pgid)
    } else {
        Walk {
            live: scan_survivors(pgid, marker),
            childless: false,
        }
    }
}

/// One walk of the agent's tree ([`survivors`]).
#[derive(Debug, Default)]
struct Walk {
    /// The live processes found, with their start times.
    live: Vec<(i32, u64)>,
    /// Hank had no child at all in the walked set (not even a zombie): with hank the child
    /// subreaper, no descendant exists then, and none can appear later (only a descendant, or
    /// hank itself, creates one; hank's own spawns are other calls), so a later walk of the
    /// same call would find nothing either.
    childless: bool,
}

/// Whether hank is the child subreaper of its descendants.
static SUBREAPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The PIDs of the children hank spawned itself and has not reaped yet (agents of calls in
/// progress): never reaped by [`reap`] (their owner waits for them), and with their trees
/// left to their own call when several run in one process (tests).
static OWN_SPAWNS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

fn own_spawns() -> std::sync::MutexGuard<'static, Vec<i32>> {
    OWN_SPAWNS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Registers a spawned child for as long as it lives (until dropped).
#[derive(Debug)]
struct OwnSpawn(i32);

impl OwnSpawn {
    fn new(pid: i32) -> Self {
        if pid > 0 {
            own_spawns().push(pid);
        }
        Self(pid)
    }
}

impl Drop for OwnSpawn {
    fn drop(&mut self) {
        own_spawns().retain(|p| *p != self.0);
    }
}

/// The children of `pid` (every thread's: a multi-threaded process forks from any thread),
/// from `/proc/PID/task/TID/children`.
fn children_of(pid: i32) -> Vec<i32> {
    children_and_tasks(pid).0
}

/// [`children_of`], and the thread ids whose `children` were read.
fn children_and_tasks(pid: i32) -> (Vec<i32>, Vec<std::ffi::OsString>) {
    let mut out = Vec::new();
    let mut ids = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (out, ids);
    };
    for task in tasks.flatten() {
        ids.push(task.file_name());
        let mut path = task.path();
        path.push("children");
        if let Ok(text) = std::fs::read_to_string(&path) {
            out.extend(
                text.split_ascii_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    (out, ids)
}

/// Thread ids of `pid` (as [`children_and_tasks`] lists them).
fn task_ids(pid: i32) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.flatten().map(|t| t.file_name()).collect())
        .unwrap_or_default()
}

/// What [`run_with_hook`] tells its caller while the agent runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracked<'a> {
    /// The agent started, as the leader of this process group.
    Spawned(i32),
    /// The agent's descendants outside its process group now (PID, start time): a killed
    /// hank's next start stops them even when they dropped the environment marker.
    Outside(&'a [(i32, u64)]),
}

/// Most descendants outside the agent's group recorded for the next start.
pub const TRACKED_MAX: usize = 64;

/// How often the agent's tree is walked while it runs (to record what left its group).
const TRACK_EVERY: Duration = Duration::from_secs(1);

/// The agent's live descendants that left its group `pgid` (see [`Tracked::Outside`]).
fn outside_group(pgid: i32) -> Vec<(i32, u64)> {
    let mut out: Vec<(i32, u64)> = tree_survivors(pgid)
        .into_iter()
        .filter(|(pid, _)| stat_of(*pid).is_some_and(|st| st.pgrp != pgid))
        .collect();
    out.sort_unstable();
    out.truncate(TRACKED_MAX);
    out
}

/// Stops processes recorded by a killed hank ([`Tracked::Outside`]) that are still the same
/// ones (same start time): SIGTERM, up to `grace`, SIGKILL. Returns how many were alive.
pub fn stop_recorded(procs: &[(i32, u64)], grace: Duration) -> usize {
    let live = |procs: &[(i32, u64)]| -> Vec<(i32, u64)> {
        procs
            .iter()
            .copied()
            .filter(|(pid, ticks)| *pid > 1 && start_ticks(*pid) == Some(*ticks))
            .collect()
    };
    let first = live(procs);
    term_then_kill(&first, grace, live);
    first.len()
}

/// SIGTERM to `first`; then, every 50 ms up to `grace`, `alive` says which are left (of the
/// last ones it said, or found afresh); SIGKILL to those left at the end.
fn term_then_kill(
    first: &[(i32, u64)],
    grace: Duration,
    mut alive: impl FnMut(&[(i32, u64)]) -> Vec<(i32, u64)>,
) {
    if first.is_empty() {
        return;
    }
    signal_each(first, Signal::SIGTERM);
    let start = Instant::now();
    let mut left = first.to_vec();
    while !left.is_empty() && start.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(50));
        left = alive(&left);
    }
    signal_each(&left, Signal::SIGKILL);
}

/// The live descendants of hank, except the trees of other calls running beside the one of
/// group `pgid` (several calls in one process: tests), with their start times. Zombies among
/// them that are orphans re-parented to hank are reaped on the way (never a child a caller
/// waits for).
fn tree_survivors(pgid: i32) -> Vec<(i32, u64)> {
    tree_walk(pgid).live
}

/// [`tree_survivors`], saying also whether hank had no child to walk ([`Walk::childless`]).
fn tree_walk(pgid: i32) -> Walk {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let spawned = own_spawns().clone();
    let mut out = Vec::new();
    let (children, tasks) = children_and_tasks(me);
    let mut queue: Vec<i32> = children
        .into_iter()
        .filter(|c| *c == pgid || !spawned.contains(c))
        .collect();
    // A thread of hank that exits hands its children to another thread, whose list may have
    // been read already: "no child" is only trusted when the threads did not change meanwhile.
    let childless = queue.is_empty() && task_ids(me) == tasks;
    let mut seen = HashSet::new();
    while let Some(pid) = queue.pop() {
        if seen.len() >= MAX_TREE || !seen.insert(pid) {
            continue;
        }
        let Some(st) = stat_of(pid) else { continue };
        if st.zombie {
            if st.ppid == me && !spawned.contains(&pid) {
                let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
            }
            continue;
        }
        out.push((pid, st.ticks));
        queue.extend(children_of(pid));
    }
    Walk {
        live: out,
        childless,
    }
}

/// The live descendants of `root` (not `root` itself), with their start times.
#[must_use]
pub fn descendants(root: i32) -> Vec<(i32, u64)> {
    let mut out = Vec::new();
    let mut queue = children_of(root);
    let mut seen = HashSet::new();
    while let Some(pid) = queue.pop() {
        if seen.len() >= MAX_TREE || !seen.insert(pid) {
            continue;
        }
        if let Some(st) = stat_of(pid)
            && !st.zombie
        {
            out.push((pid, st.ticks));
            queue.extend(children_of(pid));
        }
    }
    out
}

/// Most processes looked at in one walk of hank's tree (a fork bomb cannot make it endless).
const MAX_TREE: usize = 100_000;

/// [`survivors`] by a scan of every process of the machine (when hank is not a subreaper).
fn scan_survivors(pgid: i32, marker: Option<&Marker>) -> Vec<(i32, u64)> {
    let env = marker.map(Marker::env);
    all_pids()
        .into_iter()
        .filter_map(|pid| {
            let st = stat_of(pid)?;
            if st.zombie {
                return None;
            }
            let ours =
                (pgid > 0 && st.pgrp == pgid) || env.as_ref().is_some_and(|e| environ_has(pid, e));
            ours.then_some((pid, st.ticks))
        })
        .collect()
}

/// Sends `sig` to each process still the same one (same start time).
fn signal_each(procs: &[(i32, u64)], sig: Signal) {
    for (pid, ticks) in procs {
        if start_ticks(*pid) == Some(*ticks) {
            let _ = kill(Pid::from_raw(*pid), sig);
        }
    }
}

/// Reaps the zombies among `seen` that are hank's children (descendants of the agent
/// re-parented to hank, the child subreaper). Only processes hank itself stopped are reaped,
/// never another child's exit status.
fn reap(seen: &HashSet<i32>) {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let spawned = own_spawns().clone();
    for pid in seen {
        if !spawned.contains(pid) && stat_of(*pid).is_some_and(|s| s.zombie && s.ppid == me) {
            let _ = waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// Makes hank the child subreaper of its descendants (Linux): an agent's daemon whose parent
/// exits is re-parented to hank instead of init, so that it can be found and stopped.
pub fn become_subreaper() {
    // The agent's tree is then walked from hank's own children (`/proc/PID/task/TID/children`,
    // Linux ≥ 3.5 with CONFIG_PROC_CHILDREN); without that file, the scan of the machine.
    let ok = nix::sys::prctl::set_child_subreaper(true).is_ok();
    let me = std::process::id();
    let children_readable =
        std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists();
    SUBREAPER.store(ok && children_readable, Ordering::Relaxed);
}

/// Keeps hank's memory and open files out of reach of the agent (same user): a process that
/// is not dumpable has `/proc/PID/fd`, `/proc/PID/mem` and ptrace closed to others, so the
/// agent cannot open the temp file holding its answer through `/proc`.
pub fn protect_self() {
    let _ = nix::sys::prctl::set_dumpable(false);
}

/// Stops every process a killed hank left running for the project `project` (found by the
/// [`PROJECT_VAR`] marker in their environment, any run id): SIGTERM, up to `grace`, SIGKILL.
/// Call it only while holding the project's lock (no other loop of the project runs). Also
/// stops the recorded group `agent` (PGID, leader start time) if its leader is still alive.
/// Returns how many processes had to be stopped.
pub fn stop_orphans(project: &str, agent: Option<(i32, u64)>, grace: Duration) -> usize {
    let wanted = [(PROJECT_VAR, project)];
    let group = agent.filter(|(pgid, ticks)| *pgid > 1 && start_ticks(*pgid) == Some(*ticks));
    let find = || {
        let mut procs = marked_processes(&wanted);
        if let Some((pgid, _)) = group {
            for pid in all_pids() {
                if let Some(st) = stat_of(pid)
                    && st.pgrp == pgid
                    && !st.zombie
                    && !procs.iter().any(|(p, _)| *p == pid)
                {
                    procs.push((pid, st.ticks));
                }
            }
        }
        procs
    };
    let first = find();
    if first.is_empty() {
        return 0;
    }
    term_then_kill(&first, grace, |_| find());
    // Whatever the killed ones started meanwhile.
    let mut rounds = 0;
    loop {
        let more = find();
        if more.is_empty() || rounds >= 20 {
            break;
        }
        signal_each(&more, Signal::SIGKILL);
        std::thread::sleep(Duration::from_millis(50));
        rounds += 1;
    }
    first.len()
}

/// Stops a process group left over by a previous hank that was killed with SIGKILL, if its
/// leader is still the same process (same start time). Returns true when it had to.
pub fn stop_orphan_group(pgid: i32, ticks: u64) -> bool {
    if pgid <= 1 || start_ticks(pgid) != Some(ticks) {
        return false;
    }
    signal_group(pgid, Signal::SIGTERM);
    let start = Instant::now();
    while start_ticks(pgid) == Some(ticks) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    signal_group(pgid, Signal::SIGKILL);
    true
}

/// `hank __sandbox RULES -- PROGRAM ARGS…`: confines this process with the rules (with
/// `--netns`, first its own network namespace, whose proxy port's listening socket is handed
/// to hank's proxy: [`crate::sandbox::netns::unshare_net`], [`crate::sandbox::netns::hand_over`];
/// then [`crate::sandbox::Rules::restrict_self`]), then becomes the program (never
/// unconfined). `hank __sandbox --probe-netns` is the namespace's probe
/// ([`crate::sandbox::netns`]).
///
/// # Errors
/// Bad arguments, no namespace, Landlock refused, or the exec failed.
pub fn enter_sandbox(args: &[std::ffi::OsString]) -> crate::error::Result<u8> {
    use crate::error::HankError;
    use crate::sandbox::netns;
    match args.first().and_then(|a| a.to_str()) {
        Some(netns::PROBE) => return netns::probe_here(),
        Some(netns::HOLD) => return netns::hold_here(args),
        _ => {}
    }
    let (rules, command) = crate::sandbox::Rules::from_args(args)?;
    own_session()?;
    if let Some(socket) = &rules.netns {
        let cwd = std::env::current_dir().map_err(|e| {
            HankError::usage(format!(
                "{}: the agent's folder: {e}",
                crate::sandbox::ENTER
            ))
        })?;
        let in_view = match &rules.held {
            Some(held) => {
                let view = netns::enter_held(held)?;
                // The run's listener is the proxy's already when the holder handed it over.
                if !held.listens {
                    netns::hand_over(rules.port, socket)?;
                }
                netns::enter_view(view)?
            }
            None => {
                netns::unshare_net()?;
                netns::hand_over(rules.port, socket)?;
                false
            }
        };
        if !in_view {
            crate::sandbox::mounts::hide_ungranted(&rules.read, &rules.write)?;
        }
        // Into the folder again, through the mounts just made (or the held view's).
        std::env::set_current_dir(&cwd).map_err(|e| {
            HankError::usage(format!(
                "{}: the agent's folder {}: {e}",
                crate::sandbox::ENTER,
                cwd.display()
            ))
        })?;
    }
    rules.restrict_self()?;
    let (program, rest) = command.split_first().ok_or_else(|| {
        HankError::usage(format!(
            "{}: expected `-- PROGRAM ARGS…`",
            crate::sandbox::ENTER
        ))
    })?;
    let err = super::Cmd::new(program).args(rest).exec();
    Err(HankError::usage(format!(
        "{}: cannot start {}: {err}",
        crate::sandbox::ENTER,
        Path::new(program).display()
    )))
}

/// Makes this process (`hank __sandbox`, about to become the agent) a session of its own, with
/// no controlling terminal: the agent cannot open `/dev/tty` (the user's terminal, where an
/// `ioctl(TIOCSTI)` would type into the user's shell), is sent no job-control signal by it,
/// and stays the leader of the group hank made for it — a new session's group has the
/// session's id, this process's pid, which is the group [`super::spawn_grouped`] made and hank
/// signals. A group leader cannot start a session, so the process first joins its parent's
/// group for the instant between the two calls (a signal hank sends to the group then finds
/// none: its stop's SIGKILL after the grace, sent again, does).
///
/// # Errors
/// The kernel refuses the new session: the agent does not start.
fn own_session() -> crate::error::Result<()> {
    use nix::unistd::{getpgid, getpgrp, getpid, getppid, getsid, setpgid, setsid};
    let me = getpid();
    let fail = |what: &str, e: nix::errno::Errno| {
        crate::error::HankError::usage(format!(
            "{}: cannot give the agent a session of its own ({what}): {e}",
            crate::sandbox::ENTER
        ))
    };
    if getsid(None).is_ok_and(|s| s == me) {
        // Already a session's leader (started by hand): only one without a terminal will do.
        return if controlling_tty() == Some(0) {
            Ok(())
        } else {
            Err(fail("setsid", nix::errno::Errno::EPERM))
        };
    }
    if getpgrp() == me {
        let parent = getpgid(Some(getppid())).map_err(|e| fail("the parent's group", e))?;
        setpgid(me, parent).map_err(|e| fail("setpgid", e))?;
    }
    setsid().map_err(|e| fail("setsid", e))?;
    Ok(())
}

/// This process's controlling terminal (`tty_nr` of `/proc/self/stat`, 0: none).
fn controlling_tty() -> Option<i64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(4)?.parse().ok()
}

/// Whether a network namespace can be made here for the agent: `hank __sandbox
/// --probe-netns` run to its end (`Err`: why not, as it said).
pub fn netns_probe() -> std::result::Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    match super::Cmd::new(exe)
        .arg(crate::sandbox::ENTER)
        .arg(crate::sandbox::netns::PROBE)
        .timeout(Duration::from_secs(10))
        .stderr_max(4096)
        .run()
    {
        Ok(f) if f.status.success() => Ok(()),
        Ok(f) => {
            let said = String::from_utf8_lossy(&f.stderr);
            let said = said
                .trim()
                .trim_start_matches("hank: ")
                .trim_start_matches("error: ")
                .trim_start_matches("network namespace: ")
                .trim();
            Err(if said.is_empty() {
                format!("the probe failed ({})", f.status)
            } else {
                said.to_string()
            })
        }
        Err(e) => Err(format!("the probe failed: {e:?}")),
    }
}

/// The run's network namespace, held by `hank-sandbox --hold-netns` until this is dropped
/// (its standard input closed, then the process stopped and reaped), with the agent's view of
/// the file system made from the first call's rules.
#[derive(Debug)]
pub struct NamespaceHolder {
    child: std::process::Child,
    held: crate::sandbox::netns::Held,
    /// The grants the held view was made from ([`crate::sandbox::Rules::granted`]), and what
    /// it holds, to tell whether it is still true.
    view: Option<(Vec<PathBuf>, crate::sandbox::mounts::View)>,
    /// The holder's start time (`/proc/PID/stat`), to tell it from a later process.
    ticks: Option<u64>,
    /// Kept out of the walks that stop what an agent left behind (hank's own child).
    _own: OwnSpawn,
}

impl NamespaceHolder {
    /// Starts the holder, with the view of the file system of `rules` (the run's first call's)
    /// when given, and waits (10 s at most) for its `ready`.
    ///
    /// # Errors
    /// It cannot start, or did not say it was ready.
    pub fn start(rules: Option<&crate::sandbox::Rules>) -> std::io::Result<Self> {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt as _;
        let (program, enter) = sandbox_program()?;
        let mut child = std::process::Command::new(program)
            .args(enter)
            .arg(crate::sandbox::netns::HOLD)
            .args(rules.map(crate::sandbox::Rules::to_arg))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()?;
        let pid = child.id();
        let own = OwnSpawn::new(i32::try_from(pid).unwrap_or(0));
        let stdout = child.stdout.take();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("hank-ns-ready".into())
            .spawn(move || {
                let mut line = String::new();
                if let Some(out) = stdout {
                    let _ = std::io::BufReader::new(out).read_line(&mut line);
                }
                let _ = tx.send(line);
            })?;
        let line = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
        let ready = line
            .trim_end()
            .strip_prefix(crate::sandbox::netns::READY)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|json| serde_json::from_str::<crate::sandbox::netns::Ready>(json).ok())
            .filter(|r| r.mnt.is_some() == rules.is_some() && r.view.is_some() == r.mnt.is_some());
        let Some(ready) = ready else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "the namespace holder did not say it was ready ({:?})",
                line.trim()
            )));
        };
        let held = crate::sandbox::netns::Held {
            pid,
            net: ready.net,
            user: ready.user,
            mnt: ready.mnt,
            listens: ready.listens,
        };
        Ok(Self {
            child,
            held,
            view: rules.map(crate::sandbox::Rules::granted).zip(ready.view),
            ticks: i32::try_from(pid).ok().and_then(start_ticks),
            _own: own,
        })
    }

    /// What a call with `rules` enters, while the holder still runs (`None` once it is gone —
    /// killed by someone, out of memory —: each call then makes a namespace of its own again):
    /// the network namespace, and the held view of the file system if the call's grants are
    /// the ones it was made from and it is still true (a granted path replaced since, a new
    /// folder in `/`: the call makes its own view).
    #[must_use]
    pub fn held_for(&self, rules: &crate::sandbox::Rules) -> Option<crate::sandbox::netns::Held> {
        let pid = i32::try_from(self.held.pid).ok()?;
        let ticks = self.ticks?;
        if !is_running(pid, ticks) {
            return None;
        }
        let view_fits = self
            .view
            .as_ref()
            .is_some_and(|(granted, view)| *granted == rules.granted() && view.still_true());
        Some(crate::sandbox::netns::Held {
            mnt: self.held.mnt.filter(|_| view_fits),
            ..self.held
        })
    }
}

impl Drop for NamespaceHolder {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The program the agent starts through, and its first argument: `hank-sandbox` beside this
/// hank (a small binary: it loads in a fraction of hank's time, at every call), else this
/// hank itself with `__sandbox` (an install that has only `hank`).
fn sandbox_program() -> std::io::Result<(PathBuf, Option<&'static str>)> {
    static WRAPPER: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let exe = std::env::current_exe()?;
    let wrapper = WRAPPER.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let beside = exe.with_file_name(crate::sandbox::WRAPPER);
        std::fs::metadata(&beside)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .then_some(beside)
    });
    Ok(match wrapper {
        Some(w) => (w.clone(), None),
        None => (exe, Some(crate::sandbox::ENTER)),
    })
}

/// Runs the agent. `cancel` counts the user's interrupts (1 = stop gracefully, 2 = now);
/// `on_line` sees each stdout line when `spawn.live` is set.
pub async fn run(
    spawn: Spawn<'_>,
    cancel: watch::Receiver<u32>,
    on_line: impl FnMut(&[u8]),
) -> std::io::Result<RunOutcome> {
    run_with_hook(spawn, cancel, |_| {}, on_line).await
}

/// [`run`], plus `on_track`: [`Tracked::Spawned`] right after the agent started, and, when hank
/// is the child subreaper, [`Tracked::Outside`] whenever the set of the agent's descendants
/// outside its group changes (walked every second): the loop records both so that a later
/// start can stop them if hank itself is killed with SIGKILL.
#[allow(clippy::too_many_lines)]
pub async fn run_with_hook(
    spawn: Spawn<'_>,
    mut cancel: watch::Receiver<u32>,
    mut on_track: impl FnMut(Tracked<'_>),
    mut on_line: impl FnMut(&[u8]),
) -> std::io::Result<RunOutcome> {
    let started = Instant::now();
    // The log is a copy for people: if it cannot be created, the answer is still read.
    let stdout_file = create_log(&spawn.stdout_log).ok();
    let mut command = match spawn.sandbox {
        None => {
            let mut c = tokio::process::Command::new(spawn.program);
            c.args(spawn.args);
            c
        }
        Some(rules) => {
            let (wrapper, enter) = sandbox_program()?;
            let mut c = tokio::process::Command::new(wrapper);
            c.args(enter)
                .arg(rules.to_arg())
                .arg("--")
                .arg(spawn.program)
                .args(spawn.args);
            c
        }
    };
    // PWD names the folder the agent runs in (some CLIs, e.g. opencode, trust PWD over the
    // process's real working directory).
    command.env("PWD", spawn.cwd);
    for (key, value) in spawn.env_set {
        command.env(key, value);
    }
    for key in spawn.env_remove {
        command.env_remove(key);
    }
    if let Some(marker) = spawn.marker {
        for (key, value) in marker.env() {
            command.env(key, value);
        }
    }
    let (mut child, pgid) = super::spawn_grouped(
        command
            .current_dir(spawn.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )?;
    let _own = OwnSpawn::new(pgid);
    if pgid > 0 {
        on_track(Tracked::Spawned(pgid));
    }
    let tracking = pgid > 0 && SUBREAPER.load(Ordering::Relaxed);
    let mut track_tick =
        tokio::time::interval_at(tokio::time::Instant::now() + TRACK_EVERY, TRACK_EVERY);
    let mut tracked: Vec<(i32, u64)> = Vec::new();

    if let Some(mut stdin) = child.stdin.take() {
        let prompt = spawn.stdin;
        tokio::spawn(async move {
            // The agent may exit without reading stdin: a broken pipe is not an error.
            let _ = stdin.write_all(&prompt).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (line_tx, mut line_rx) = mpsc::channel::<Vec<u8>>(LIVE_QUEUE);
    let (result_tx, mut result_rx) = watch::channel(false);
    // Bytes read from stdout so far (IDLE_TIMEOUT watches it move).
    let activity = Arc::new(AtomicU64::new(0));
    // Tells the readers to stop waiting for the end of a pipe that a process hank cannot stop
    // keeps open, and to hand over what they read.
    let (quit_tx, quit_rx) = watch::channel(false);
    let stdout_task = child.stdout.take().map(|out| {
        let sink = StdoutSink {
            log: stdout_file,
            live: spawn.live.then_some(line_tx.clone()),
            result: spawn.stop_after_result.then_some(result_tx),
            ..StdoutSink::default()
        };
        tokio::spawn(drain_stdout(
            out,
            sink,
            Arc::clone(&activity),
            quit_rx.clone(),
        ))
    });
    drop(line_tx);
    let stderr_task = child
        .stderr
        .take()
        .map(|err| tokio::spawn(drain_stderr(err, spawn.stderr_log.clone(), quit_rx)));

    let mut outcome = RunOutcome::default();
    let deadline = tokio::time::sleep(spawn.timeout);
    tokio::pin!(deadline);
    let far = Duration::from_secs(100 * 365 * 24 * 3600);
    let result_deadline = tokio::time::sleep(far);
    tokio::pin!(result_deadline);
    let mut result_seen = false;
    let mut lines_open = true;
    let mut stop = Stopping::new(pgid, spawn.marker, spawn.grace);
    let idle_limit = spawn.idle_timeout.filter(|d| !d.is_zero());
    let idle = tokio::time::sleep(idle_limit.unwrap_or(far));
    tokio::pin!(idle);
    let mut idle_tick = tokio::time::interval(Duration::from_secs(1));
    let mut seen_bytes = 0u64;
    // FIRST_OUTPUT_TIMEOUT: armed until the first stdout byte.
    let first_limit = spawn.first_output_timeout.filter(|d| !d.is_zero());
    let first_deadline = tokio::time::sleep(first_limit.unwrap_or(far));
    tokio::pin!(first_deadline);
    let mut first_armed = first_limit.is_some();
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            () = &mut first_deadline, if first_armed => {
                first_armed = false;
                if activity.load(Ordering::Relaxed) == 0 {
                    outcome.facts.timed_out = true;
                    outcome.facts.startup_hang = true;
                    break stop.terminate(&mut child, &mut cancel).await?;
                }
            }
            _ = track_tick.tick(), if tracking => {
                let now = outside_group(pgid);
                if now != tracked {
                    tracked = now;
                    on_track(Tracked::Outside(&tracked));
                }
            }
            _ = idle_tick.tick(), if idle_limit.is_some() => {
                let now_bytes = activity.load(Ordering::Relaxed);
                if now_bytes != seen_bytes {
                    seen_bytes = now_bytes;
                    if let Some(limit) = idle_limit {
                        idle.as_mut().reset(tokio::time::Instant::now() + limit);
                    }
                }
            }
            () = &mut idle, if idle_limit.is_some() => {
                outcome.facts.timed_out = true;
                outcome.idle = true;
                break stop.terminate(&mut child, &mut cancel).await?;
            }
            () = &mut deadline => {
                outcome.facts.timed_out = true;
                break stop.terminate(&mut child, &mut cancel).await?;
            }
            changed = cancel.changed() => {
                if changed.is_ok() && *cancel.borrow() > 0 {
                    outcome.facts.interrupted = true;
                    break stop.terminate(&mut child, &mut cancel).await?;
                }
            }
            changed = result_rx.changed(), if !result_seen => {
                if changed.is_ok() && *result_rx.borrow() {
                    result_seen = true;
                    result_deadline
                        .as_mut()
                        .reset(tokio::time::Instant::now() + RESULT_GRACE);
                } else if changed.is_err() {
                    // The reader ended without a result line.
                    result_seen = true;
                }
            }
            () = &mut result_deadline, if result_seen => {
                outcome.stopped_after_result = true;
                break stop.terminate(&mut child, &mut cancel).await?;
            }
            line = line_rx.recv(), if lines_open => match line {
                Some(line) => on_line(&line),
                None => lines_open = false,
            },
        }
    };
    outcome.facts.exit_code = status.code();
    outcome.facts.signal = status.signal();

    // Anything left of the agent (a background server, an MCP helper, a daemon that left the
    // group, a grandchild holding stdout) is stopped the same way; never wait forever on its
    // pipes.
    stop.begin();
    let readers = async {
        let out = match stdout_task {
            Some(t) => t.await.unwrap_or_default(),
            None => Drained::default(),
        };
        let err = match stderr_task {
            Some(t) => t
                .await
                .unwrap_or(Ok((Vec::new(), 0)))
                .unwrap_or((Vec::new(), 0)),
            None => (Vec::new(), 0),
        };
        (out, err)
    };
    tokio::pin!(readers);
    // What is left usually ends within a millisecond of the agent: look again after 1 ms,
    // then twice as long each time, up to every 100 ms (a fixed 100 ms tick cost each call
    // with a short-lived leftover 50 ms on average).
    let mut step = Duration::from_millis(1);
    let tick = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(tick);
    let mut read: Option<(Drained, (Vec<u8>, u64))> = None;
    let mut cancel_open = true;
    loop {
        tokio::select! {
            res = &mut readers, if read.is_none() => read = Some(res),
            line = line_rx.recv(), if lines_open => match line {
                Some(line) => on_line(&line),
                None => lines_open = false,
            },
            () = &mut tick => {
                tick.as_mut().reset(tokio::time::Instant::now() + step);
                step = (step * 2).min(LEFTOVER_POLL_MAX);
            }
            changed = cancel.changed(), if cancel_open => {
                if changed.is_err() {
                    cancel_open = false;
                } else if *cancel.borrow() >= 2 {
                    stop.kill_now();
                }
            }
        }
        let alive = stop.poll();
        if read.is_some() && !alive {
            break;
        }
        // Past the grace and 2 s of SIGKILL: a pipe still open belongs to a process hank
        // cannot see (it is not hank's descendant); stop waiting for its end, but keep what
        // was read (the answer is analyzed and charged, never dropped as no output).
        if stop.given_up() {
            if read.is_some() || stop.quit_waited() {
                break;
            }
            let _ = quit_tx.send(true);
        }
    }
    stop.finish();
    outcome.leftovers_killed = stop.any_signalled;
    while let Ok(line) = line_rx.try_recv() {
        on_line(&line);
    }
    let (out, (err_head, err_bytes)) = read.unwrap_or_default();
    outcome.stdout_bytes = out.bytes;
    outcome.stdout = out.capture;
    outcome.facts.stdout_cut = !outcome.stdout.complete();
    outcome.stderr_head = err_head;
    outcome.stderr_bytes = err_bytes;
    outcome.duration = started.elapsed();
    Ok(outcome)
}

/// The longest pause between two looks at what the agent left, once it exited.
const LEFTOVER_POLL_MAX: Duration = Duration::from_millis(100);

/// Stopping the agent and everything it left: its group, and every process with the run's
/// marker (found again at each step, so that a daemon started meanwhile is stopped too).
struct Stopping<'a> {
    pgid: i32,
    marker: Option<&'a Marker>,
    grace: Duration,
    /// When SIGTERM went out (the grace runs from there).
    term_at: Option<Instant>,
    kill_at: Option<Instant>,
    /// Every process hank signalled (reaped if it was re-parented to hank).
    seen: HashSet<i32>,
    any_signalled: bool,
    /// A walk found hank without a child ([`Walk::childless`]): nothing of the agent is left
    /// and nothing can appear, so the later steps do not walk hank's tree again (one walk per
    /// call on the happy path instead of three).
    gone: bool,
}

impl<'a> Stopping<'a> {
    fn new(pgid: i32, marker: Option<&'a Marker>, grace: Duration) -> Self {
        Self {
            pgid,
            marker,
            grace,
            term_at: None,
            kill_at: None,
            seen: HashSet::new(),
            any_signalled: false,
            gone: false,
        }
    }

    /// The agent's live processes now ([`survivors`]); none without a walk once a walk found
    /// hank childless.
    fn survivors(&mut self) -> Vec<(i32, u64)> {
        if self.gone {
            return Vec::new();
        }
        let walk = survivors(self.pgid, self.marker);
        self.gone = walk.childless;
        walk.live
    }

    fn signal(&mut self, sig: Signal) -> bool {
        let procs = self.survivors();
        if self.pgid > 0 {
            signal_group(self.pgid, sig);
        }
        signal_each(&procs, sig);
        self.seen.extend(procs.iter().map(|(p, _)| *p));
        self.any_signalled |= !procs.is_empty();
        !procs.is_empty()
    }

    /// SIGTERM to all (once).
    fn begin(&mut self) {
        if self.term_at.is_none() {
            self.term_at = Some(Instant::now());
            self.signal(Signal::SIGTERM);
        }
    }

    fn kill_now(&mut self) {
        self.kill_at.get_or_insert_with(Instant::now);
        self.signal(Signal::SIGKILL);
    }

    /// Reaps, sends SIGKILL once the grace is over; whether anything is still alive.
    fn poll(&mut self) -> bool {
        reap(&self.seen);
        let procs = self.survivors();
        if procs.is_empty() {
            return false;
        }
        let over = self.term_at.is_some_and(|t| t.elapsed() >= self.grace);
        if over || self.kill_at.is_some() {
            self.kill_now();
        } else {
            self.signal(Signal::SIGTERM);
        }
        true
    }

    fn given_up(&self) -> bool {
        self.term_at
            .is_some_and(|t| t.elapsed() >= self.grace + Duration::from_secs(2))
    }

    /// The readers were told to stop a second ago and have not ended: stop waiting for them.
    fn quit_waited(&self) -> bool {
        self.term_at
            .is_some_and(|t| t.elapsed() >= self.grace + Duration::from_secs(3))
    }

    fn finish(&mut self) {
        if !self.survivors().is_empty() {
            self.kill_now();
        }
        reap(&self.seen);
    }

    /// The agent itself: SIGTERM to all, wait up to the grace (or a second interrupt) for it
    /// to exit, then SIGKILL to all.
    async fn terminate(
        &mut self,
        child: &mut tokio::process::Child,
        cancel: &mut watch::Receiver<u32>,
    ) -> std::io::Result<std::process::ExitStatus> {
        self.begin();
        let left = self
            .grace
            .saturating_sub(self.term_at.map_or(Duration::ZERO, |t| t.elapsed()));
        super::await_or_kill(child, left, cancel, || self.kill_now()).await
    }
}

/// What the stdout reader produced.
#[derive(Debug, Default)]
struct Drained {
    bytes: u64,
    capture: Capture,
}

/// Where the stdout bytes go: the capture (the truth), the log (a copy), the live view, and
/// the end-of-answer watch.
#[derive(Default)]
struct StdoutSink {
    log: Option<File>,
    logged: u64,
    capture: Capture,
    live: Option<mpsc::Sender<Vec<u8>>>,
    line: Vec<u8>,
    overlong: bool,
    /// Set to true once a complete result line was read.
    result: Option<watch::Sender<bool>>,
    /// The current line, up to [`RESULT_LINE_MAX`] (to recognise a result line).
    current: Vec<u8>,
    current_overlong: bool,
}

/// Longest line looked at to recognise a complete result (a longer answer line is still read
/// and analyzed; the agent is then only stopped by its exit or the timeout).
const RESULT_LINE_MAX: usize = 4 * 1024 * 1024;

/// The top-level `type` of a JSON event (everything else skipped).
#[derive(serde::Deserialize)]
struct TypeOnly {
    #[serde(rename = "type")]
    kind: Option<serde_json::Value>,
}

impl TypeOnly {
    fn is_result(&self) -> bool {
        self.kind.as_ref().and_then(serde_json::Value::as_str) == Some("result")
    }
}

/// A whole line that is Claude's final event: a JSON object whose `type` is `result`
/// (`--output-format json` / `stream-json`), or a JSON array whose last element is one
/// (`--output-format json --verbose`).
fn is_result_line(line: &[u8]) -> bool {
    let line = line.trim_ascii();
    if memchr::memmem::find(line, b"\"result\"").is_none() {
        return false;
    }
    match line.first() {
        Some(b'{') => serde_json::from_slice::<TypeOnly>(line).is_ok_and(|t| t.is_result()),
        Some(b'[') => serde_json::from_slice::<Vec<TypeOnly>>(line)
            .is_ok_and(|v| v.last().is_some_and(TypeOnly::is_result)),
        _ => false,
    }
}

impl StdoutSink {
    async fn push(&mut self, bytes: &[u8]) {
        if self.logged < CAPTURE_MAX
            && let Some(f) = self.log.as_mut()
        {
            let room = usize::try_from(CAPTURE_MAX - self.logged).unwrap_or(usize::MAX);
            let part = &bytes[..bytes.len().min(room)];
            if f.write_all(part).is_err() {
                self.log = None;
            }
            self.logged += part.len() as u64;
        }
        self.capture.push(bytes);
        if self.live.is_none() && self.result.is_none() {
            return;
        }
        for chunk in bytes.split_inclusive(|b| *b == b'\n') {
            let ends = chunk.last() == Some(&b'\n');
            if self.result.is_some() && !self.current_overlong {
                if self.current.len() + chunk.len() > RESULT_LINE_MAX {
                    self.current_overlong = true;
                    self.current = Vec::new();
                } else {
                    self.current.extend_from_slice(chunk);
                }
            }
            if self.live.is_some() && !self.overlong {
                self.line.extend_from_slice(chunk);
                if self.line.len() > LIVE_LINE_MAX {
                    self.overlong = true;
                    self.line = Vec::new();
                }
            }
            if ends {
                if let Some(tx) = &self.result
                    && !self.current_overlong
                    && is_result_line(&self.current)
                {
                    let _ = tx.send(true);
                }
                self.current.clear();
                self.current_overlong = false;
                if let Some(tx) = &self.live {
                    if !self.overlong {
                        let _ = tx.send(std::mem::take(&mut self.line)).await;
                    }
                    self.overlong = false;
                    self.line.clear();
                }
            }
        }
    }

    async fn end(mut self, bytes: u64) -> Drained {
        if let Some(tx) = &self.live
            && !self.line.is_empty()
            && !self.overlong
        {
            let _ = tx.send(std::mem::take(&mut self.line)).await;
        }
        if let Some(f) = self.log.as_mut() {
            let _ = f.flush();
        }
        Drained {
            bytes,
            capture: self.capture,
        }
    }
}

/// Reads `out` to its end, or until `quit` turns true (a process hank cannot stop holds the
/// pipe open): what was read is kept either way.
async fn read_or_quit(
    out: &mut (impl AsyncRead + Unpin),
    buf: &mut [u8],
    quit: &mut watch::Receiver<bool>,
) -> usize {
    if *quit.borrow() {
        return 0;
    }
    tokio::select! {
        r = out.read(buf) => r.unwrap_or(0),
        _ = quit.wait_for(|q| *q) => 0,
    }
}

async fn drain_stdout(
    mut out: impl AsyncRead + Unpin,
    mut sink: StdoutSink,
    activity: Arc<AtomicU64>,
    mut quit: watch::Receiver<bool>,
) -> Drained {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = read_or_quit(&mut out, &mut buf, &mut quit).await;
        if n == 0 {
            break;
        }
        total += n as u64;
        activity.store(total, Ordering::Relaxed);
        sink.push(&buf[..n]).await;
    }
    sink.end(total).await
}

async fn drain_stderr(
    mut err: impl AsyncRead + Unpin,
    path: PathBuf,
    mut quit: watch::Receiver<bool>,
) -> std::io::Result<(Vec<u8>, u64)> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut head = Vec::new();
    let mut total = 0u64;
    let mut file: Option<File> = None;
    let mut file_failed = false;
    loop {
        let n = read_or_quit(&mut err, &mut buf, &mut quit).await;
        if n == 0 {
            break;
        }
        total += n as u64;
        if head.len() < STDERR_KEEP {
            let take = n.min(STDERR_KEEP - head.len());
            head.extend_from_slice(&buf[..take]);
        }
        if file.is_none() && !file_failed && total <= CAPTURE_MAX {
            file = create_log(&path).ok();
            file_failed = file.is_none();
        }
        if total > CAPTURE_MAX {
            file = None;
        }
        if let Some(f) = file.as_mut()
            && f.write_all(&buf[..n]).is_err()
        {
            file = None;
            file_failed = true;
        }
    }
    Ok((head, total))
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Waits up to 2 s for `pid` to be gone (exit is not instantaneous after the pipe closes).
    fn gone(pid: i32) -> bool {
        let start = Instant::now();
        while exists(pid) {
            if start.elapsed() > Duration::from_secs(2) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    fn read_pid(path: &Path) -> i32 {
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn rt() -> tokio::runtime::Runtime {
        crate::proc::runtime().unwrap()
    }

    /// A run of `program` in `dir` with the tests' defaults: nothing on stdin, the logs `out`
    /// and `err` in `dir`, a 500 ms grace, no marker, no idle or first-output timeout.
    fn spawn_in<'a>(
        dir: &'a Path,
        program: &'a Path,
        args: &'a [String],
        timeout: Duration,
    ) -> Spawn<'a> {
        Spawn {
            program,
            args,
            cwd: dir,
            stdin: Vec::new(),
            stdout_log: dir.join("out"),
            stderr_log: dir.join("err"),
            timeout,
            grace: Duration::from_millis(500),
            live: false,
            env_remove: &[],
            env_set: &[],
            stop_after_result: false,
            marker: None,
            idle_timeout: None,
            first_output_timeout: None,
            sandbox: None,
        }
    }

    fn sh(dir: &Path, script: &str, timeout: Duration, live: bool) -> (RunOutcome, Vec<Vec<u8>>) {
        sh_with(dir, script, timeout, live, None, false)
    }

    fn sh_with(
        dir: &Path,
        script: &str,
        timeout: Duration,
        live: bool,
        marker: Option<&Marker>,
        stop_after_result: bool,
    ) -> (RunOutcome, Vec<Vec<u8>>) {
        let args = vec!["-c".to_string(), script.to_string()];
        let spawn = Spawn {
            stdin: b"hello prompt".to_vec(),
            live,
            stop_after_result,
            marker,
            ..spawn_in(dir, Path::new("/bin/sh"), &args, timeout)
        };
        let (_tx, rx) = watch::channel(0u32);
        let mut lines = Vec::new();
        let outcome = rt()
            .block_on(run(spawn, rx, |l| lines.push(l.to_vec())))
            .unwrap();
        (outcome, lines)
    }

    #[test]
    fn stdin_reaches_the_child_and_outputs_are_logged() {
        let dir = tempfile::tempdir().unwrap();
        let (o, lines) = sh(
            dir.path(),
            "cat; echo; echo oops >&2; exit 3",
            Duration::from_secs(10),
            true,
        );
        assert_eq!(o.facts.exit_code, Some(3));
        assert_eq!(
            std::fs::read(dir.path().join("out")).unwrap(),
            b"hello prompt\n"
        );
        assert_eq!(std::fs::read(dir.path().join("err")).unwrap(), b"oops\n");
        assert_eq!(o.stderr_head, b"oops\n");
        assert_eq!(lines, vec![b"hello prompt\n".to_vec()]);
    }

    #[test]
    fn no_stderr_file_when_stderr_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let (o, _) = sh(dir.path(), "exit 0", Duration::from_secs(10), false);
        assert_eq!(o.facts.exit_code, Some(0));
        assert!(!dir.path().join("err").exists());
    }

    /// Runs a script that starts a grandchild (`sleep 300`, holding stdout) and then runs
    /// `then`; the outcome and the grandchild's pid.
    fn with_grandchild(then: &str, timeout: Duration) -> (RunOutcome, i32) {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("gc.pid");
        let script = format!("sleep 300 & echo $! > {}; {then}", pidfile.display());
        let (o, _) = sh(dir.path(), &script, timeout, false);
        (o, read_pid(&pidfile))
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let (o, grandchild) = with_grandchild("sleep 300", Duration::from_millis(500));
        assert!(o.facts.timed_out);
        assert!(gone(grandchild), "grandchild survived");
    }

    #[test]
    fn a_grandchild_holding_stdout_does_not_hang_the_loop() {
        let (o, grandchild) = with_grandchild("echo done", Duration::from_secs(60));
        assert_eq!(o.facts.exit_code, Some(0));
        assert!(o.leftovers_killed);
        assert!(o.duration < Duration::from_secs(30));
        assert!(gone(grandchild), "grandchild survived");
    }

    #[test]
    fn interrupt_terminates_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let args = vec!["-c".to_string(), "sleep 300".to_string()];
        let spawn = Spawn {
            grace: Duration::from_secs(5),
            ..spawn_in(
                dir.path(),
                Path::new("/bin/sh"),
                &args,
                Duration::from_secs(300),
            )
        };
        let (tx, rx) = watch::channel(0u32);
        let o = rt()
            .block_on(async {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let _ = tx.send(1);
                    tokio::time::sleep(Duration::from_secs(60)).await;
                });
                run(spawn, rx, |_| {}).await
            })
            .unwrap();
        assert!(o.facts.interrupted);
        assert!(o.duration < Duration::from_secs(5));
    }

    fn read_capture(c: Capture) -> Vec<u8> {
        let mut out = Vec::new();
        c.into_reader().unwrap().read_to_end(&mut out).unwrap();
        out
    }

    /// A Claude result line costing `usd`.
    fn result_line(usd: u32) -> String {
        format!(r#"{{"type":"result","total_cost_usd":{usd}}}"#)
    }

    /// The run exited 0 and its answer is exactly `result_line(usd)`.
    fn assert_answer(o: RunOutcome, usd: u32) {
        assert_eq!(o.facts.exit_code, Some(0));
        let answer = read_capture(o.stdout);
        assert_eq!(answer, format!("{}\n", result_line(usd)).as_bytes());
    }

    #[test]
    fn the_answer_is_what_came_through_the_pipe_not_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out");
        let script = format!(
            "echo '{}'; sleep 0.2; echo forged > {}",
            result_line(5),
            log.display()
        );
        let (o, _) = sh(dir.path(), &script, Duration::from_secs(30), false);
        assert_eq!(std::fs::read(&log).unwrap(), b"forged\n");
        assert_answer(o, 5);
    }

    #[test]
    fn a_large_answer_spills_out_of_memory_and_reads_back_whole() {
        let mut c = Capture::default();
        let chunk: Vec<u8> = (0..=255u8).cycle().take(1024 * 1024 + 7).collect();
        let mut expected = Vec::new();
        for _ in 0..10 {
            c.push(&chunk);
            expected.extend_from_slice(&chunk);
        }
        assert!(c.spill.is_some());
        assert!(c.mem.len() <= CAPTURE_MEM);
        assert!(c.complete());
        assert_eq!(c.len(), expected.len() as u64);
        assert_eq!(read_capture(c), expected);
    }

    #[test]
    fn complete_result_lines_are_recognised() {
        let cases: &[(&[u8], bool)] = &[
            (br#"{"type":"result","subtype":"success"}"#, true),
            (br#"  { "type" : "result" , "x":1}  "#, true),
            (br#"{"type":"result"}"#, true),
            (br#"{"type":"resultx"}"#, false),
            (br#"{"type":"assistant","result":"x"}"#, false),
            (br#"{"subtype":"success","type":"result"}"#, true),
            (br#"[{"type":"system"},{"type":"result","x":[1]}]"#, true),
            (br#"[{"type":"result"},{"type":"assistant"}]"#, false),
            (br#"{"type":"result","subtype":"succ"#, false),
            (br#"{"type":"user","content":[{"type":"result"}]}"#, false),
            (b"type result", false),
            (b"", false),
        ];
        for (head, want) in cases {
            assert_eq!(
                is_result_line(head),
                *want,
                "{}",
                String::from_utf8_lossy(head)
            );
        }
    }

    #[test]
    fn an_agent_that_lingers_after_its_result_is_stopped_and_its_answer_kept() {
        let dir = tempfile::tempdir().unwrap();
        let script =
            "echo '{\"type\":\"result\",\"subtype\":\"success\"}'; trap '' TERM; sleep 600";
        let (o, _) = sh_with(
            dir.path(),
            script,
            Duration::from_secs(600),
            false,
            None,
            true,
        );
        assert!(o.stopped_after_result);
        assert!(!o.facts.timed_out);
        assert!(o.duration < Duration::from_secs(300), "{:?}", o.duration);
        assert_eq!(
            read_capture(o.stdout),
            b"{\"type\":\"result\",\"subtype\":\"success\"}\n"
        );
    }

    #[test]
    fn a_daemon_that_left_the_group_and_ignores_sigterm_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let marker = Marker::new(dir.path());
        let pidfile = dir.path().join("daemon.pid");
        // The daemon leaves the group (setsid), ignores SIGTERM and closes stdout.
        let script = format!(
            "setsid sh -c 'trap \"\" TERM; echo $$ > {}; exec sleep 300' > /dev/null 2>&1 < /dev/null & \
             while [ ! -s {} ]; do sleep 0.05; done; echo done",
            pidfile.display(),
            pidfile.display()
        );
        let (o, _) = sh_with(
            dir.path(),
            &script,
            Duration::from_secs(60),
            false,
            Some(&marker),
            false,
        );
        assert_eq!(o.facts.exit_code, Some(0));
        let pid = read_pid(&pidfile);
        assert!(gone(pid), "the setsid daemon survived");
        assert!(o.leftovers_killed);
    }

    #[test]
    fn orphans_of_a_killed_run_are_found_by_the_project_marker() {
        let dir = tempfile::tempdir().unwrap();
        let marker = Marker::new(dir.path());
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; sleep 300"])
            .env(RUN_ID_VAR, "old-run")
            .env(PROJECT_VAR, &marker.project)
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let wanted = [(PROJECT_VAR, marker.project.as_str())];
        let start = Instant::now();
        while marked_processes(&wanted).is_empty() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let other = Marker::new(&dir.path().join("elsewhere"));
        assert_eq!(
            stop_orphans(&other.project, None, Duration::from_millis(200)),
            0
        );
        assert!(exists(pid));
        assert!(stop_orphans(&marker.project, None, Duration::from_millis(200)) >= 1);
        let _ = child.wait();
        assert!(marked_processes(&wanted).is_empty());
    }

    /// The start time is field 22 of `/proc/PID/stat` (the kernel's `starttime`), never the
    /// always-zero field 21: a recorded group is recognised, a forged `0` never matches.
    #[test]
    fn start_ticks_is_the_starttime_field() {
        let me = i32::try_from(std::process::id()).unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        // fields[0] is field 3 (state): field 22 is fields[19].
        let want: u64 = fields[19].parse().unwrap();
        assert_eq!(start_ticks(me), Some(want));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let ticks = start_ticks(pid).unwrap();
        assert!(ticks > 0 && ticks >= want, "{ticks} vs {want}");
        assert!(
            !stop_orphan_group(pid, 0),
            "a forged start time was acted on"
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The tree is walked from a process's own children: a `setsid` grandchild with a clean
    /// environment is found (no marker, another session).
    #[test]
    fn descendants_include_a_setsid_grandchild_without_the_marker() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("gc.pid");
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "env -i setsid sh -c 'echo $$ > {}; exec sleep 30' & wait",
                pidfile.display()
            ))
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::fs::read_to_string(&pidfile).map_or(true, |s| s.trim().is_empty()) {
            assert!(start.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(10));
        }
        let gc = read_pid(&pidfile);
        let root = i32::try_from(child.id()).unwrap();
        let found = descendants(root);
        let _ = kill(Pid::from_raw(gc), Signal::SIGKILL);
        let _ = child.wait();
        assert!(found.iter().any(|(p, _)| *p == gc), "{found:?} lacks {gc}");
    }

    /// A process hank cannot see (outside its group, no marker, not its descendant: hank is
    /// not a subreaper here) keeps stdout open after the answer: hank stops waiting for the
    /// pipe's end and keeps the answer it read.
    #[test]
    fn an_answer_read_before_an_invisible_holder_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("holder.pid");
        let script = format!(
            "env -i setsid sleep 60 & echo $! > {}; echo '{}'",
            pidfile.display(),
            result_line(1)
        );
        let (o, _) = sh(dir.path(), &script, Duration::from_secs(60), false);
        let holder = read_pid(&pidfile);
        let _ = kill(Pid::from_raw(holder), Signal::SIGKILL);
        assert!(o.duration < Duration::from_secs(30), "{:?}", o.duration);
        assert_answer(o, 1);
    }

    #[test]
    fn missing_program_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let spawn = Spawn {
            grace: Duration::from_secs(1),
            ..spawn_in(
                dir.path(),
                Path::new("/nonexistent/claude"),
                &[],
                Duration::from_secs(1),
            )
        };
        let (_tx, rx) = watch::channel(0u32);
        assert!(rt().block_on(run(spawn, rx, |_| {})).is_err());
    }
}
