//! The fleet as a state machine: [`Fleet::on`] takes what happened (a task's run ended, a
//! merge's result, an admission tick with the machine's facts, a `hank ctl` steer, Ctrl-C,
//! adoption after a restart) and returns what the supervisor does next ([`Command`]: prepare
//! a worktree, start or adopt a worker, merge a task, discard a failed task's worktree,
//! signal workers, save, say, finish). It is the only writer of the tasks' states in
//! `fleet.json` ([`FleetFile`]); `fleet::supervise` gathers the facts and executes the
//! commands. **\[pure\]**: `now` and every fact are arguments.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::file::{FleetFile, FleetTask};
use super::{Admission, AdmissionFacts, TaskEvent, TaskSpec, TaskState, WindowFacts};

/// The fleet's settings as the machine applies them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Config {
    /// `--agents N`: tasks running (or having their worktree made) at once.
    pub agents: usize,
    /// `--into BRANCH`.
    pub into: String,
    /// The user's checkout (named when a worktree's configuration differs from its).
    pub checkout: String,
    /// FLEET_MIN_FREE_MEMORY in bytes.
    pub min_free_memory: u64,
    /// MAX_MERGE_ATTEMPTS.
    pub max_merge_attempts: u32,
    /// MAX_COST_USD over every task's calls (0 = unlimited).
    pub max_cost_usd: f64,
    /// MAX_RUNTIME in seconds (0 = unlimited) and when it ends the fleet.
    pub max_runtime_secs: u64,
    pub deadline: Option<Timestamp>,
    /// ON_USAGE_LIMIT=exit: a window holding every start with nothing running stops the
    /// fleet instead of waiting for its reset.
    pub exit_at_usage_limit: bool,
    /// After Ctrl-C, seconds the workers get before SIGKILL.
    pub stop_grace_secs: u64,
}

/// A limited usage window as an admission tick reads it (the shared readings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowReading {
    pub name: String,
    /// Used now, in percent.
    pub percent: f64,
    /// Its MAX_WINDOW_PERCENT.
    pub limit: u32,
    pub resets_at: Option<Timestamp>,
}

/// Why a merge did not land, as the machine needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeProblemKind {
    /// The task changed hank's configuration: kept on its branch for the user.
    Config,
    Conflict,
    Markers,
    Red,
    /// Refused for good (HEAD moved, links among hank's files).
    Refused,
}

/// A merge's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeOutcome {
    /// The integration branch moved.
    Merged,
    /// It did not land: the kind, the problem as told, the integration tip it was tried on,
    /// whether it counts against MAX_MERGE_ATTEMPTS ([`super::merge_failure_counts`]).
    Failed {
        kind: MergeProblemKind,
        what: String,
        tip: String,
        counts: bool,
    },
}

/// What happened (the inputs of [`Fleet::on`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum Event {
    /// At start: the tasks whose recorded worker (pid and start time) is still alive.
    Adopt { alive: Vec<String> },
    /// About every turn of the supervisor: admission (free memory when a slot is free, the
    /// limited windows' readings, the fleet's spending), merges started, the interrupt's
    /// grace, the end.
    Tick {
        free_memory: Option<u64>,
        windows: Vec<WindowReading>,
        cost_usd: f64,
    },
    /// A task's worktree is there; `differs`: how its configuration differs from the
    /// checkout's approved one (empty: the same).
    WorktreeReady {
        task: String,
        worktree: String,
        differs: Vec<String>,
    },
    /// Its worker started.
    WorkerStarted {
        task: String,
        pid: u32,
        pid_start: Option<u64>,
    },
    /// A running task's live figures (from its status.json).
    Figures {
        task: String,
        loops: u64,
        cost_usd: f64,
        agent: Option<String>,
    },
    /// Its worker ended: the exit code, its figures, its exit reason's name and message.
    RunEnded {
        task: String,
        code: u8,
        loops: Option<u64>,
        cost_usd: Option<f64>,
        agent: Option<String>,
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A failed task's work was committed and its worktree freed.
    Discarded { task: String },
    /// A finished task's work was committed on its branch and its worktree freed: the items
    /// its run ticked, or why the commit was refused (HEAD not on its branch).
    Committed {
        task: String,
        outcome: Result<Vec<String>, String>,
    },
    /// A merge ended.
    MergeEnded { task: String, outcome: MergeOutcome },
    /// `hank ctl` pause/resume/stop as the fleet's steer now stands.
    Steer { paused: bool, stopping: bool },
    /// `hank fleet --retry [TASK]` at start: these failed tasks are queued again on their
    /// kept branches ([`super::retry_targets`]), and the tasks blocked only by them too.
    Retry { tasks: Vec<String> },
    /// Ctrl-C / SIGTERM (the count of signals so far).
    Interrupted { signals: u32 },
}

/// What the supervisor does (the outputs of [`Fleet::on`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Write `fleet.json` (and tell the tasks whose state changed).
    Save,
    /// A line on stderr (`hank: fleet: …`).
    Say(String),
    /// Watch the recorded worker of this task (adopted after a restart).
    Adopt { task: String },
    /// Make (or reuse) the task's worktree, off the supervisor's thread; then
    /// [`Event::WorktreeReady`].
    Prepare { task: String },
    /// Start the task's worker in its worktree; then [`Event::WorkerStarted`].
    Start { task: String },
    /// SIGTERM to these tasks' workers (each applies `hank run`'s grace).
    Terminate { tasks: Vec<String> },
    /// SIGKILL to these tasks' workers' groups.
    Kill { tasks: Vec<String> },
    /// Commit a failed task's work on its branch and free its worktree, off the
    /// supervisor's thread; then [`Event::Discarded`].
    Discard { task: String },
    /// Commit a finished task's work on its branch, read the items it ticked and free its
    /// worktree for the next task, off the supervisor's thread; then [`Event::Committed`].
    Commit { task: String },
    /// Merge a finished task (one at a time); then [`Event::MergeEnded`]. `last`: a failure
    /// that counts would be its last; `handed_back_at`: the tip its agent resolved against;
    /// `done`: the items its run ticked.
    Merge {
        task: String,
        last: bool,
        handed_back_at: Option<String>,
        done: Vec<String>,
    },
    /// Nothing runs and nothing may start: the supervision ends ([`Fleet::end`]).
    Finish,
}

/// A task's state changed: told once per change (the `fleet_task` event, `--json`, NOTIFY).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTold {
    pub task: String,
    pub state: TaskState,
    pub branch: String,
    pub message: String,
    /// The workspace's repositories it changes (issue 51).
    pub repos: Vec<String>,
}

/// The fleet: its tasks' states (`fleet.json`) and what the supervisor has under way.
#[derive(Debug, Clone)]
pub struct Fleet {
    cfg: Config,
    /// Each task's state as last told ([`Fleet::task_events`]).
    told: BTreeMap<String, TaskState>,
    specs: Vec<TaskSpec>,
    file: FleetFile,
    /// Tasks whose worktree is being made, whose worker runs, whose worktree is discarded.
    preparing: BTreeSet<String>,
    workers: BTreeSet<String>,
    discarding: BTreeSet<String>,
    merging: Option<String>,
    /// Finished tasks waiting for their merge (a handed-back task first).
    queue: Vec<String>,
    paused: bool,
    stopping: bool,
    interrupted_at: Option<Timestamp>,
    signals: u32,
    stopped_at_limit: bool,
    /// Admission's forecast: each window's utilization when first seen, tasks started since.
    first: BTreeMap<String, f64>,
    started: usize,
    /// Worktrees freed by this fleet and not taken since (reused by the next starts).
    spares: usize,
}

impl Fleet {
    /// The fleet of `specs` over the recorded `file` (tasks new to the plan are pending;
    /// `worktrees`: the tasks whose worktree exists now).
    #[must_use]
    pub fn new(
        cfg: Config,
        specs: Vec<TaskSpec>,
        mut file: FleetFile,
        worktrees: &BTreeMap<String, String>,
    ) -> Self {
        // Tasks already recorded when the fleet starts are not told again.
        let told = (file.tasks.iter())
            .map(|t| (t.name.clone(), t.state))
            .collect();
        for spec in &specs {
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
            if let Some(spec) = specs.iter().find(|s| s.name == t.name) {
                t.worktree = worktrees.get(&t.name).cloned();
                t.repos.clone_from(&spec.repos);
            }
        }
        file.held = None;
        Self {
            cfg,
            told,
            specs,
            file,
            preparing: BTreeSet::new(),
            workers: BTreeSet::new(),
            discarding: BTreeSet::new(),
            merging: None,
            queue: Vec::new(),
            paused: false,
            stopping: false,
            interrupted_at: None,
            signals: 0,
            stopped_at_limit: false,
            first: BTreeMap::new(),
            started: 0,
            spares: 0,
        }
    }

    /// The tasks' state changes since the last call, in the file's order: the machine is the
    /// only writer of the states, and tells each change once (the supervisor before it saves).
    pub fn task_events(&mut self) -> Vec<TaskTold> {
        let mut out = Vec::new();
        for t in &self.file.tasks {
            if self.told.get(&t.name) == Some(&t.state) {
                continue;
            }
            self.told.insert(t.name.clone(), t.state);
            out.push(TaskTold {
                task: t.name.clone(),
                state: t.state,
                branch: t.branch.clone(),
                message: t.message.clone(),
                repos: t.repos.clone(),
            });
        }
        out
    }

    /// `fleet.json` as it stands.
    #[must_use]
    pub fn file(&self) -> &FleetFile {
        &self.file
    }

    /// The supervisor's own fields of `fleet.json` (pid, budget figures, times): never a
    /// task's.
    pub fn header(&mut self) -> &mut FleetFile {
        &mut self.file
    }

    /// The plan's tasks.
    #[must_use]
    pub fn specs(&self) -> &[TaskSpec] {
        &self.specs
    }

    /// The task named `name`.
    #[must_use]
    pub fn task(&self, name: &str) -> Option<&FleetTask> {
        self.file.tasks.iter().find(|t| t.name == name)
    }

    /// Tasks with a worker or a worktree being made (admission's "running").
    #[must_use]
    pub fn busy(&self) -> usize {
        self.workers.len() + self.preparing.len()
    }

    /// Whether a task could be admitted now (a slot free, one ready): when the admission
    /// facts are worth reading.
    #[must_use]
    pub fn may_admit(&self) -> bool {
        self.busy() < self.cfg.agents.max(1) && !self.ready().is_empty()
    }

    /// The tasks whose worker runs.
    #[must_use]
    pub fn workers(&self) -> &BTreeSet<String> {
        &self.workers
    }

    /// Whether Ctrl-C stopped the fleet.
    #[must_use]
    pub fn interrupted(&self) -> bool {
        self.interrupted_at.is_some()
    }

    /// The machine's own next wake-up after `now`, when a [`Event::Tick`] would do something
    /// at a time no other event brings: the end of the interrupt's grace (SIGKILL to the
    /// workers still running) or MAX_RUNTIME's deadline (nothing starts any more). `None`:
    /// nothing is due by the clock alone (admission held by memory or a window is read
    /// again at the supervisor's periodic turn).
    #[must_use]
    pub fn wake_at(&self, now: Timestamp) -> Option<Timestamp> {
        let grace_end = self
            .interrupted_at
            .filter(|_| !self.workers.is_empty() && self.signals <= 1)
            .and_then(|at| {
                let grace = i64::try_from(self.cfg.stop_grace_secs).ok()?;
                // `tick` kills once the whole seconds since the interrupt exceed the grace.
                Timestamp::from_second(at.as_second().checked_add(grace)?.checked_add(1)?).ok()
            });
        let deadline = self
            .cfg
            .deadline
            .filter(|_| self.interrupted_at.is_none() && !self.stopped_at_limit);
        [grace_end, deadline]
            .into_iter()
            .flatten()
            .filter(|t| *t > now)
            .min()
    }

    /// The reaction to one event at `now`.
    pub fn on(&mut self, event: Event, now: Timestamp) -> Vec<Command> {
        let mut out = Vec::new();
        match event {
            Event::Adopt { alive } => self.adopt(&alive, &mut out),
            Event::Tick {
                free_memory,
                windows,
                cost_usd,
            } => self.tick(free_memory, &windows, cost_usd, now, &mut out),
            Event::WorktreeReady {
                task,
                worktree,
                differs,
            } => self.worktree_ready(&task, worktree, &differs, &mut out),
            Event::WorkerStarted {
                task,
                pid,
                pid_start,
            } => {
                if let Some(t) = self.task_mut(&task) {
                    t.pid = Some(pid);
                    t.pid_start = pid_start;
                    t.message = "running".into();
                    let line = format!("task {:?} started on {}", t.name, t.branch);
                    self.workers.insert(task);
                    out.extend([Command::Say(line), Command::Save]);
                }
            }
            Event::Figures {
                task,
                loops,
                cost_usd,
                agent,
            } => {
                if let Some(t) = self.task_mut(&task) {
                    t.loops = loops;
                    t.cost_usd = cost_usd;
                    t.agent = agent;
                }
            }
            Event::RunEnded {
                task,
                code,
                loops,
                cost_usd,
                agent,
                reason,
                message,
            } => {
                let why = (reason, message);
                self.run_ended(&task, code, (loops, cost_usd, agent), why, &mut out);
            }
            Event::Discarded { task } => {
                self.discarding.remove(&task);
                self.spares += 1;
            }
            Event::Committed { task, outcome } => self.committed(&task, outcome, &mut out),
            Event::MergeEnded { task, outcome } => self.merge_ended(&task, outcome, &mut out),
            Event::Steer { paused, stopping } => {
                self.paused = paused;
                self.stopping = stopping;
                if self.file.paused != paused {
                    self.file.paused = paused;
                    out.push(Command::Save);
                }
            }
            Event::Retry { tasks } => self.retry(&tasks, &mut out),
            Event::Interrupted { signals } => {
                self.signals = self.signals.max(signals);
                if self.interrupted_at.is_none() && signals > 0 {
                    self.interrupted_at = Some(now);
                    let tasks: Vec<String> = self.workers.iter().cloned().collect();
                    out.push(Command::Say(format!(
                        "interrupted; stopping {} task(s)",
                        tasks.len()
                    )));
                    out.push(Command::Terminate { tasks });
                }
            }
        }
        out
    }

    fn task_mut(&mut self, name: &str) -> Option<&mut FleetTask> {
        self.file.tasks.iter_mut().find(|t| t.name == name)
    }

    fn states(&self) -> BTreeMap<String, TaskState> {
        self.file
            .tasks
            .iter()
            .map(|t| (t.name.clone(), t.state))
            .collect()
    }

    /// `hank fleet --retry`: each named task that failed (or is blocked) is pending again —
    /// its merge attempts counted from zero, its work on its kept branch, where its next
    /// worktree starts —; a blocked task whose every failed predecessor is retried is
    /// pending again too. A task in any other state is left as it is.
    fn retry(&mut self, tasks: &[String], out: &mut Vec<Command>) {
        let mut queued = Vec::new();
        for t in &mut self.file.tasks {
            if !tasks.contains(&t.name)
                || !matches!(t.state, TaskState::Failed | TaskState::Blocked)
            {
                continue;
            }
            t.state = TaskState::Pending;
            t.merge_attempts = 0;
            t.handed_back_at = None;
            t.exit_code = None;
            t.verified = None;
            t.done_items.clear();
            t.retries = t.retries.saturating_add(1);
            t.message = format!(
                "queued again by hank fleet --retry, on its kept branch {}",
                t.branch
            );
            queued.push(t.name.clone());
        }
        // The blocked tasks, unblocked where nothing they come after still fails.
        let mut states = self.states();
        for s in states.values_mut() {
            if *s == TaskState::Blocked {
                *s = TaskState::Pending;
            }
        }
        loop {
            let blocked = super::newly_blocked(&self.specs, &states);
            let more: Vec<String> = blocked
                .into_iter()
                .filter(|n| states.get(n) != Some(&TaskState::Blocked))
                .collect();
            if more.is_empty() {
                break;
            }
            for n in more {
                states.insert(n, TaskState::Blocked);
            }
        }
        for t in &mut self.file.tasks {
            if t.state == TaskState::Blocked && states.get(&t.name) == Some(&TaskState::Pending) {
                t.state = TaskState::Pending;
                t.message = "queued again: the task it comes after is retried".into();
                queued.push(t.name.clone());
            }
        }
        if queued.is_empty() {
            out.push(Command::Say(
                "--retry: no failed task to queue again".into(),
            ));
            return;
        }
        out.push(Command::Say(format!(
            "--retry: queued again: {}",
            queued.join(", ")
        )));
        out.push(Command::Save);
    }

    /// A restart: a task whose worker is alive and that was running is adopted; every other
    /// recorded worker is forgotten and an active task resumes (pending).
    fn adopt(&mut self, alive: &[String], out: &mut Vec<Command>) {
        for t in &mut self.file.tasks {
            if alive.contains(&t.name) && t.state == TaskState::Running && t.pid.is_some() {
                out.push(Command::Say(format!(
                    "task {:?}: adopted its running worker (pid {})",
                    t.name,
                    t.pid.unwrap_or_default()
                )));
                out.push(Command::Adopt {
                    task: t.name.clone(),
                });
                self.workers.insert(t.name.clone());
                continue;
            }
            t.pid = None;
            t.pid_start = None;
            if matches!(t.state, TaskState::Verifying | TaskState::Merging)
                && t.worktree.is_none()
                && !t.done_items.is_empty()
            {
                // Its work was committed (its worktree freed): its merge is tried again
                // (an unfinished one was undone when the integration worktree was made ready).
                t.state = TaskState::Verifying;
                t.message = "done; waiting for its merge".into();
                self.queue.push(t.name.clone());
                continue;
            }
            if matches!(
                t.state,
                TaskState::Running | TaskState::Waiting | TaskState::Verifying | TaskState::Merging
            ) {
                // Its worker is gone: it resumes in its worktree; an unfinished merge was
                // undone when the integration worktree was made ready.
                t.state = TaskState::Pending;
            }
        }
        out.push(Command::Save);
    }

    fn run_ended(
        &mut self,
        name: &str,
        code: u8,
        figures: (Option<u64>, Option<f64>, Option<String>),
        (reason, message): (Option<String>, Option<String>),
        out: &mut Vec<Command>,
    ) {
        self.workers.remove(name);
        let Some(t) = self.file.tasks.iter_mut().find(|t| t.name == name) else {
            return;
        };
        t.pid = None;
        t.pid_start = None;
        t.exit_code = Some(code);
        if let (Some(loops), Some(cost)) = (figures.0, figures.1) {
            t.loops = loops;
            t.cost_usd = cost;
            t.agent = figures.2;
        }
        if code == crate::exit::OK {
            t.verified = Some(true);
            t.state = super::next_state(t.state, TaskEvent::RunDone, 0, 0);
            t.message = "done; committing its work".into();
            // Its slot is free at once; its worktree once its work is committed.
            self.discarding.insert(name.to_string());
            out.push(Command::Commit {
                task: name.to_string(),
            });
        } else {
            t.state = super::next_state(t.state, TaskEvent::RunStopped(code), 0, 0);
            let mut why = reason.map_or_else(
                || format!("exit code {code}"),
                |r| format!("{r} (exit {code})"),
            );
            if let Some(m) = message.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
                why.push_str(": ");
                why.push_str(&cut_message(m));
            }
            if t.state == TaskState::Failed {
                t.message = format!(
                    "its run stopped: {why}; its work is kept on {}; once the cause is fixed, {}",
                    t.branch,
                    retry_command(&t.name)
                );
                t.worktree = None;
                out.push(Command::Say(format!(
                    "task {:?} failed: {}",
                    t.name, t.message
                )));
                self.discarding.insert(name.to_string());
                out.push(Command::Discard {
                    task: name.to_string(),
                });
            } else {
                if code == crate::exit::LIMIT {
                    self.stopped_at_limit = true;
                }
                t.message = format!("stopped: {why}; `hank fleet` resumes it");
            }
        }
        out.push(Command::Save);
    }

    fn committed(
        &mut self,
        name: &str,
        outcome: Result<Vec<String>, String>,
        out: &mut Vec<Command>,
    ) {
        self.discarding.remove(name);
        let max = self.cfg.max_merge_attempts;
        let Some(t) = self.file.tasks.iter_mut().find(|t| t.name == name) else {
            return;
        };
        match outcome {
            Ok(done) => {
                self.spares += 1;
                t.done_items = done;
                t.worktree = None;
                t.message = "done; waiting for its merge".into();
                // A task whose agent resolved a conflict merges first, before newer work
                // overtakes its resolution again.
                if t.handed_back_at.is_some() {
                    self.queue.insert(0, name.to_string());
                } else {
                    self.queue.push(name.to_string());
                }
            }
            Err(why) => {
                failed_merge(t, MergeProblemKind::Refused, &why, String::new(), true, max);
                out.push(Command::Say(format!("task {:?}: {}", t.name, t.message)));
            }
        }
        out.push(Command::Save);
    }

    fn worktree_ready(
        &mut self,
        name: &str,
        worktree: String,
        differs: &[String],
        out: &mut Vec<Command>,
    ) {
        self.preparing.remove(name);
        let (interrupted, paused, stopping) =
            (self.interrupted_at.is_some(), self.paused, self.stopping);
        let checkout = self.cfg.checkout.clone();
        let Some(t) = self.task_mut(name) else {
            return;
        };
        t.worktree = Some(worktree.clone());
        if interrupted || paused || stopping {
            t.state = TaskState::Pending;
            t.message = if interrupted {
                "interrupted before it started"
            } else if stopping {
                "stopped by hank ctl stop before it started"
            } else {
                "paused by hank ctl pause before it started"
            }
            .into();
            return;
        }
        if !differs.is_empty() {
            t.state = TaskState::Failed;
            t.message = format!(
                "its worktree's configuration differs from the approved one of {checkout} (not run): {}; once the cause is fixed, {}",
                differs.join("; "),
                retry_command(name)
            );
            out.push(Command::Say(format!("task {:?}: {}", t.name, t.message)));
            out.push(Command::Save);
            return;
        }
        out.push(Command::Start {
            task: name.to_string(),
        });
    }

    fn merge_ended(&mut self, name: &str, outcome: MergeOutcome, out: &mut Vec<Command>) {
        if self.merging.as_deref() == Some(name) {
            self.merging = None;
        }
        let (into, max) = (self.cfg.into.clone(), self.cfg.max_merge_attempts);
        let Some(t) = self.task_mut(name) else {
            return;
        };
        t.state = TaskState::Merging;
        match outcome {
            MergeOutcome::Merged => {
                t.handed_back_at = None;
                t.state = super::next_state(t.state, TaskEvent::Merged, t.merge_attempts, 0);
                t.message = format!("merged into {into}");
                t.worktree = None;
                out.push(Command::Say(format!(
                    "task {:?} merged into {into}",
                    t.name
                )));
            }
            MergeOutcome::Failed {
                kind,
                what,
                tip,
                counts,
            } => {
                failed_merge(t, kind, &what, tip, counts, max);
                out.push(Command::Say(format!("task {:?}: {}", t.name, t.message)));
            }
        }
        out.push(Command::Save);
    }

    fn tick(
        &mut self,
        free_memory: Option<u64>,
        windows: &[WindowReading],
        cost_usd: f64,
        now: Timestamp,
        out: &mut Vec<Command>,
    ) {
        if let Some(at) = self.interrupted_at {
            let grace = i64::try_from(self.cfg.stop_grace_secs).unwrap_or(i64::MAX);
            if self.signals > 1 || now.as_second().saturating_sub(at.as_second()) > grace {
                out.push(Command::Kill {
                    tasks: self.workers.iter().cloned().collect(),
                });
            }
        }
        self.block(out);
        self.limits(cost_usd, now, out);
        let interrupted = self.interrupted_at.is_some();
        if self.paused && !self.stopping && !interrupted {
            let why = "paused by hank ctl pause (hank ctl resume goes on)".to_string();
            for name in self.ready() {
                if let Some(t) = self.task_mut(&name) {
                    t.state = super::next_state(t.state, TaskEvent::Held, 0, 0);
                    t.message = format!("waiting: {why}");
                }
            }
            self.file.held = Some(why);
            out.push(Command::Save);
        }
        if !interrupted && !self.stopped_at_limit && !self.paused && !self.stopping {
            self.admit(free_memory, windows, now, out);
        }
        self.start_merge(out);
        if self.idle() && !self.startable() {
            out.push(Command::Finish);
        }
    }

    /// Tasks that can never start: one they come after failed or is blocked.
    fn block(&mut self, out: &mut Vec<Command>) {
        let blocked = super::newly_blocked(&self.specs, &self.states());
        for name in &blocked {
            if let Some(t) = self.task_mut(name) {
                t.state = super::next_state(t.state, TaskEvent::DependencyFailed, 0, 0);
                t.message =
                    "a task it comes after failed (`hank fleet --retry` queues them again)".into();
            }
        }
        if !blocked.is_empty() {
            out.push(Command::Save);
        }
    }

    /// The fleet's own limits: nothing more starts once its runtime or cost is spent.
    fn limits(&mut self, cost_usd: f64, now: Timestamp, out: &mut Vec<Command>) {
        if self.interrupted_at.is_some() || self.stopped_at_limit {
            return;
        }
        let why = if self.cfg.deadline.is_some_and(|d| now >= d) {
            Some(format!(
                "MAX_RUNTIME {}s reached",
                self.cfg.max_runtime_secs
            ))
        } else if self.cfg.max_cost_usd > 0.0 && cost_usd + 1e-9 >= self.cfg.max_cost_usd {
            Some(format!(
                "MAX_COST_USD reached: the tasks spent ${cost_usd:.2} of ${:.2}",
                self.cfg.max_cost_usd
            ))
        } else {
            None
        };
        if let Some(why) = why {
            self.stopped_at_limit = true;
            out.push(Command::Say(format!("{why}; no task starts any more")));
            self.file.held = Some(why);
            out.push(Command::Save);
        }
    }

    /// The ready tasks in plan order: started while slots, memory and windows allow.
    fn admit(
        &mut self,
        free_memory: Option<u64>,
        windows: &[WindowReading],
        now: Timestamp,
        out: &mut Vec<Command>,
    ) {
        let mut held: Option<String> = None;
        for name in self.ready() {
            if self.spares == 0 && !self.discarding.is_empty() {
                // A finished task's worktree is being freed: the next start reuses it rather
                // than check out a new one (far cheaper on a large tree).
                return;
            }
            let facts = AdmissionFacts {
                running: self.busy(),
                max_agents: self.cfg.agents,
                free_memory: (self.busy() < self.cfg.agents)
                    .then_some(free_memory)
                    .flatten(),
                min_free_memory: self.cfg.min_free_memory,
            };
            let admission = match super::admit(&facts) {
                Admission::Start => match self.window_hold(windows, now) {
                    Some(why) if self.busy() == 0 && self.cfg.exit_at_usage_limit => {
                        self.stopped_at_limit = true;
                        out.push(Command::Say(format!("{why}; ON_USAGE_LIMIT=exit")));
                        Admission::Hold(why)
                    }
                    Some(why) => Admission::Hold(why),
                    None => Admission::Start,
                },
                hold @ Admission::Hold(_) => hold,
            };
            let Some(t) = self.file.tasks.iter_mut().find(|t| t.name == name) else {
                continue;
            };
            match admission {
                Admission::Hold(why) => {
                    t.state = super::next_state(t.state, TaskEvent::Held, 0, 0);
                    t.message = format!("waiting: {why}");
                    held = Some(why);
                }
                Admission::Start => {
                    t.state = super::next_state(t.state, TaskEvent::Started, 0, 0);
                    t.message = "starting: making its worktree".into();
                    self.started += 1;
                    self.spares = self.spares.saturating_sub(1);
                    self.preparing.insert(name.clone());
                    out.push(Command::Prepare { task: name });
                }
            }
        }
        self.file.held = held;
        out.push(Command::Save);
    }

    /// Why one more task may not start under MAX_WINDOW_PERCENT (the forecast from each
    /// window's rise per task started).
    fn window_hold(&mut self, windows: &[WindowReading], _now: Timestamp) -> Option<String> {
        let mut facts = Vec::new();
        for w in windows {
            let first = self.first.entry(w.name.clone()).or_insert(w.percent);
            if w.percent < *first {
                // A reset in between: the movement is measured from here.
                *first = w.percent;
            }
            facts.push(WindowFacts {
                name: w.name.clone(),
                percent: w.percent,
                limit: w.limit,
                per_task: super::rise_per_task(*first, w.percent, self.started),
                resets_at: w.resets_at,
            });
        }
        super::window_admission(&facts, self.busy())
    }

    /// One merge at a time, none after an interrupt.
    fn start_merge(&mut self, out: &mut Vec<Command>) {
        if self.merging.is_some() || self.interrupted_at.is_some() || self.queue.is_empty() {
            return;
        }
        let name = self.queue.remove(0);
        let max = self.cfg.max_merge_attempts;
        let Some(t) = self.task_mut(&name) else {
            return;
        };
        t.state = TaskState::Merging;
        t.message = "merging".into();
        let last = super::next_state(
            TaskState::Merging,
            TaskEvent::MergeFailed,
            t.merge_attempts,
            max,
        ) == TaskState::Failed;
        let handed_back_at = t.handed_back_at.clone();
        let done = t.done_items.clone();
        self.merging = Some(name.clone());
        out.push(Command::Save);
        out.push(Command::Merge {
            task: name,
            last,
            handed_back_at,
            done,
        });
    }

    fn ready(&self) -> Vec<String> {
        super::ready(&self.specs, &self.states())
            .into_iter()
            .map(|s| s.name.clone())
            .collect()
    }

    /// Nothing under way (queued merges count unless interrupted).
    fn idle(&self) -> bool {
        self.workers.is_empty()
            && self.preparing.is_empty()
            && self.discarding.is_empty()
            && self.merging.is_none()
            && (self.queue.is_empty() || self.interrupted_at.is_some())
    }

    /// Whether a task could still start.
    fn startable(&self) -> bool {
        self.interrupted_at.is_none()
            && !self.stopped_at_limit
            && !self.stopping
            && !self.ready().is_empty()
    }

    /// The supervision ended: tasks held or stopped before their merge go back to pending
    /// (the next `hank fleet` starts them); the exit code (130 after Ctrl-C or `hank ctl
    /// stop`, else 0 all merged, 2 a task failed or is blocked, 3 tasks left).
    pub fn end(&mut self) -> u8 {
        let (stopping, interrupted) = (self.stopping, self.interrupted_at.is_some());
        for t in &mut self.file.tasks {
            if t.state == TaskState::Waiting {
                t.state = TaskState::Pending;
                t.message = if stopping {
                    "not started: hank ctl stop"
                } else if interrupted {
                    "not started: interrupted"
                } else {
                    "not started before the fleet stopped"
                }
                .into();
            }
            if matches!(t.state, TaskState::Verifying | TaskState::Merging)
                && t.done_items.is_empty()
            {
                // Its plan is done: the next fleet runs it again (no agent call) and merges.
                t.state = TaskState::Pending;
            }
        }
        if interrupted || stopping {
            crate::exit::INTERRUPTED
        } else if self
            .file
            .tasks
            .iter()
            .any(|t| matches!(t.state, TaskState::Failed | TaskState::Blocked))
        {
            crate::exit::HALTED
        } else if self.file.tasks.iter().all(|t| t.state == TaskState::Merged) {
            crate::exit::OK
        } else {
            crate::exit::LIMIT
        }
    }

    /// The fleet's final record for exit code `code` (after its delivery).
    pub fn close(&mut self, code: u8) {
        self.file.pid = None;
        if self.stopping {
            self.file.held =
                Some("stopped by hank ctl stop; hank fleet goes on with the rest".into());
        }
        self.file.state = match code {
            crate::exit::OK => "done",
            crate::exit::HALTED => "failed",
            crate::exit::INTERRUPTED => "interrupted",
            _ => "stopped",
        }
        .into();
    }

    /// Every task merged, failed or blocked.
    #[must_use]
    pub fn all_final(&self) -> bool {
        self.file.tasks.iter().all(|t| t.state.is_final())
    }
}

/// The first line of a recording of the machine's inputs (`HANK_FLEET_RECORD`): its settings,
/// the plan's task sections, `fleet.json` as the fleet started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordHead {
    pub config: Config,
    pub plan: String,
    pub file: FleetFile,
}

/// One later line: an event at its time, or the fleet's exit code at its end.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordLine {
    Event { at: Timestamp, event: Event },
    End { end: u8 },
}

/// `fleet.json` as a recording of the machine's inputs leaves it: every event fed to a fresh
/// machine at its time, then its end with the recorded exit code. An unreadable line is an
/// error naming it.
pub fn replay(record: &str, optional_sections: &[String]) -> Result<FleetFile, String> {
    let mut lines = record.lines().filter(|l| !l.trim().is_empty());
    let head: RecordHead = serde_json::from_str(lines.next().unwrap_or_default())
        .map_err(|e| format!("line 1 is not a recording's head: {e}"))?;
    let specs = super::tasks_from_plan(&head.plan, optional_sections)?;
    let worktrees: BTreeMap<String, String> = head
        .file
        .tasks
        .iter()
        .filter_map(|t| Some((t.name.clone(), t.worktree.clone()?)))
        .collect();
    let mut fleet = Fleet::new(head.config, specs, head.file, &worktrees);
    for (n, line) in lines.enumerate() {
        match serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 2))? {
            RecordLine::Event { at, event } => {
                fleet.on(event, at);
            }
            RecordLine::End { end } => {
                fleet.end();
                fleet.close(end);
            }
        }
    }
    Ok(fleet.file)
}

/// Longest exit message of a task's run kept in its failure message.
const MAX_RUN_MESSAGE: usize = 600;

/// A run's exit message as a failure message keeps it (cut at [`MAX_RUN_MESSAGE`] bytes).
fn cut_message(m: &str) -> String {
    if m.len() <= MAX_RUN_MESSAGE {
        return m.to_owned();
    }
    format!("{}…", crate::sanitize::cut_bytes(m, MAX_RUN_MESSAGE))
}

/// The command that queues failed task `name` again (named in every failure message).
#[must_use]
pub fn retry_command(name: &str) -> String {
    format!("`hank fleet --retry {}` runs it again", shell_word(name))
}

/// `name` as one shell word (quoted when it holds anything but letters, digits and `-_./`).
fn shell_word(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    if plain {
        name.to_owned()
    } else {
        format!("'{}'", name.replace('\'', "'\\''"))
    }
}

/// A merge that did not land, recorded in its task.
fn failed_merge(
    t: &mut FleetTask,
    kind: MergeProblemKind,
    what: &str,
    tip: String,
    counts: bool,
    max: u32,
) {
    let refused = matches!(kind, MergeProblemKind::Config | MergeProblemKind::Refused);
    let event = if refused {
        TaskEvent::MergeRefused
    } else if counts {
        TaskEvent::MergeFailed
    } else {
        TaskEvent::MergeOvertaken
    };
    t.state = super::next_state(t.state, event, t.merge_attempts, max);
    if counts {
        t.merge_attempts = t.merge_attempts.saturating_add(1);
    }
    t.handed_back_at = (kind == MergeProblemKind::Conflict).then_some(tip);
    if kind == MergeProblemKind::Config {
        t.message = format!(
            "{what}; its work is kept on {}; once the cause is fixed, {}",
            t.branch,
            retry_command(&t.name)
        );
        t.worktree = None;
    } else if t.state == TaskState::Failed {
        t.message = format!(
            "{what} (after {} merge attempt(s)); its work is kept on {}; once the cause is fixed, {}",
            t.merge_attempts,
            t.branch,
            retry_command(&t.name)
        );
        t.worktree = None;
    } else if counts {
        // Back to an agent in the task's worktree: pending, its worktree kept.
        t.message = format!(
            "merge attempt {} failed, back to the agent: {what}",
            t.merge_attempts
        );
    } else {
        t.message = format!(
            "its resolution was overtaken by newer merges, back to the agent (not counted as a \
             failed attempt): {what}"
        );
    }
}

#[cfg(test)]
mod tests;
