//! Everything the fleet's driver ([`super::supervise`]) does to the world, behind one trait:
//! the clock and the wait for the next thing to happen, the user's interrupts, `hank ctl`,
//! the workers (started, adopted, reaped, signalled, their figures), the git jobs and their
//! completions, admission's readings (free memory, the shared usage windows, the fleet's
//! spending), `fleet.json` and its events, the machine's recording, the integration delivery
//! and the clean-up at the end.
//!
//! [`Real`] is the fleet as it runs (processes, git jobs on blocking threads and the
//! workers' exits reporting on one channel its wait listens to, the control journal); the
//! driver's unit tests (`fleet/tests/`) give it an in-memory implementation whose clock moves
//! only when the driver waits, to the first scheduled thing or the driver's deadline.

use super::save::Saved;
use super::{
    ADOPTED_POLL, Cancel, MergeJob, MergeProblem, Merged, Options, Paths, WAKES, Worker,
    commit_all, commit_task, control, deliver, ensure_worktree, events, free_memory,
    keep_worktrees, kill_group, merge_off_thread, pin, retire_worktree, signal_pid, spawn_worker,
};
use crate::error::Result;
use crate::policy::fleet::TaskSpec;
use crate::store::schema::FleetFile;
use crate::store::{Store, fleet_ledger};
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::io::Write as _;

use tokio::sync::mpsc;

use crate::effects::Fut;
use crate::policy::fleet::machine::{
    Event, MergeOutcome, MergeProblemKind, TaskTold, WindowReading,
};

/// A task's figures from its run's `status.json`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct RunFigures {
    pub exit_code: Option<u8>,
    pub loops: u64,
    pub cost_usd: f64,
    pub agent: Option<String>,
    /// The name of its exit reason.
    pub reason: Option<String>,
    /// Its exit message.
    pub message: Option<String>,
}

/// How a worker is signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// SIGTERM to the worker (its `hank run` applies its grace).
    Term,
    /// SIGKILL to the worker's whole process group.
    Kill,
}

/// Why [`FleetEffects::wait`] ended (the driver looks at everything after any wake; the
/// reason is for the tests and the count of wake-ups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wake {
    /// A git job ended.
    Job,
    /// A worker ended.
    Worker,
    /// Ctrl-C / SIGTERM.
    Interrupt,
    /// The driver's deadline (its next periodic reading or the machine's next wake-up).
    Deadline,
}

/// What the fleet's driver does to the world. Every method but [`FleetEffects::wait`] and
/// [`FleetEffects::deliver`] returns at once: a git job is started by one call and its end
/// comes back later as a machine event from [`FleetEffects::finished_jobs`].
pub(super) trait FleetEffects {
    /// The time on the effects' clock.
    fn now(&self) -> Timestamp;
    /// Waits until the first of: a git job's end, a worker's end, a user interrupt, or
    /// `until` (at once when one of them is already there and not yet taken). A test's clock
    /// moves to that moment.
    fn wait(&mut self, until: Timestamp) -> Fut<'_, Wake>;
    /// The user's interrupts so far (Ctrl-C / SIGTERM); the ones read no longer end a wait.
    fn signals(&mut self) -> u32;
    /// `hank ctl` as the fleet's steer stands: (paused, stopping).
    fn steer(&self) -> (bool, bool);
    /// Takes the `hank ctl` commands that came, forwarding them to the `running` tasks; one
    /// line per command for the terminal.
    fn poll_control(&mut self, running: &[TaskSpec], now: Timestamp) -> Vec<String>;
    /// Starts the task's worker (given the `hank ctl set` values; `left`: what is left of
    /// the fleet's MAX_RUNTIME); its pid and start time.
    fn start_worker(
        &mut self,
        spec: &TaskSpec,
        specs: &[TaskSpec],
        left: Option<Duration>,
        now: Timestamp,
    ) -> Result<(u32, Option<u64>)>;
    /// Watches the recorded worker of a task (a killed fleet's).
    fn adopt_worker(&mut self, task: &str, pid: u32, ticks: u64);
    /// The workers that ended since the last call: the task and its exit code (`None`: an
    /// adopted worker, or one whose status could not be read).
    fn ended_workers(&mut self) -> Vec<(String, Option<u8>)>;
    /// Signals a task's worker (nothing when it has none).
    fn stop_worker(&mut self, task: &str, how: Stop);
    /// A task's figures from its run's status (its events followed first).
    fn run_figures(&mut self, spec: &TaskSpec) -> Option<RunFigures>;
    /// Makes (or reuses) the task's worktree; then [`Event::WorktreeReady`].
    fn prepare(&mut self, spec: &TaskSpec);
    /// Commits a finished task's work and frees its worktree; then [`Event::Committed`].
    fn commit(&mut self, spec: &TaskSpec);
    /// Commits a failed task's work and frees its worktree; then [`Event::Discarded`].
    fn discard(&mut self, spec: &TaskSpec);
    /// Merges a finished task (and checks the result); then [`Event::MergeEnded`].
    fn merge(&mut self, spec: &TaskSpec, job: MergeJob);
    /// The git jobs that ended since the last call, as the machine's events.
    fn finished_jobs(&mut self) -> Result<Vec<Event>>;
    /// Free memory (admission), `None` when unknown.
    fn free_memory(&mut self) -> Option<u64>;
    /// The limited usage windows' shared readings.
    fn windows(&mut self, now: Timestamp) -> Vec<WindowReading>;
    /// What the fleet's tasks spent (0 when MAX_COST_USD is unlimited: not read).
    fn fleet_cost(&mut self, now: Timestamp) -> f64;
    /// Writes `fleet.json`.
    fn save(&mut self, file: &mut FleetFile, now: Timestamp) -> Result<()>;
    /// Tells the task events the machine emitted (`fleet_task` events, `--json`, NOTIFY).
    fn tell_tasks(&mut self, told: &[TaskTold], now: Timestamp);
    /// A line on the terminal (`hank: fleet: LINE`).
    fn say(&mut self, line: &str);
    /// Whether the machine's inputs are recorded (`HANK_FLEET_RECORD`).
    fn recording(&self) -> bool;
    /// One line of the recording.
    fn record(&mut self, line: &str);
    /// The integration branch's delivery (`--deliver pr` of the fleet): its exit code when it
    /// decides one.
    fn deliver<'a>(&'a mut self, file: &'a FleetFile) -> Fut<'a, Result<Option<u8>>>;
    /// Every task is final: the worktrees are kept as spares for the next fleet (at most
    /// one per agent and one for the integration worktree).
    fn clean_up(&mut self);
}

/// What a git job reports when it ends.
enum Done {
    Ready(String, Result<crate::git::TaskWorktree>),
    Merged(String, Result<Option<Merged>>),
    Committed(String, Result<std::result::Result<Vec<String>, String>>),
    Discarded(String),
}

/// What comes on the channel [`Real`]'s wait listens to.
enum Note {
    /// A git job ended.
    Job(Done),
    /// A worker started by this fleet ended (not reaped: [`Worker::finished`] does).
    Exited,
}

/// The fleet's effects as it runs.
pub(super) struct Real<'a> {
    paths: &'a Paths,
    opts: &'a Options,
    cancel: &'a Cancel,
    workers: BTreeMap<String, Worker>,
    notes: (mpsc::UnboundedSender<Note>, mpsc::UnboundedReceiver<Note>),
    /// Jobs that ended, taken off the channel by a wait, not yet handed to the driver.
    arrived: Vec<Done>,
    /// The interrupts as the wait watches them (the ones read by `signals` marked seen);
    /// false once the signal handler's channel closed.
    interrupts: (Cancel, bool),
    ctl: control::FleetControl,
    tail: events::Tail,
    record: Option<fs::File>,
    /// What the saves remember between turns.
    saved: Saved,
}

impl<'a> Real<'a> {
    /// The effects of the fleet of `paths` (its control journal opened; the recording when
    /// `HANK_FLEET_RECORD` names a file).
    pub(super) fn open(paths: &'a Paths, opts: &'a Options, cancel: &'a Cancel) -> Result<Self> {
        let record = std::env::var_os("HANK_FLEET_RECORD").and_then(|path| {
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()
        });
        Ok(Self {
            paths,
            opts,
            cancel,
            workers: BTreeMap::new(),
            notes: mpsc::unbounded_channel(),
            arrived: Vec::new(),
            interrupts: (cancel.clone(), true),
            ctl: control::FleetControl::open(&paths.root)?,
            tail: events::Tail::new(opts.json),
            record,
            saved: Saved::new(opts.json),
        })
    }

    /// A git job on a blocking thread of the runtime, its result sent on the channel.
    fn job(&self, f: impl FnOnce() -> Done + Send + 'static) {
        let tx = self.notes.0.clone();
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(Note::Job(f()));
        });
    }

    /// The first of: a note on the channel, an interrupt, `left` elapsed.
    async fn first(&mut self, left: Duration) -> Wake {
        let (cancel, open) = &mut self.interrupts;
        tokio::select! {
            note = self.notes.1.recv() => match note {
                Some(Note::Job(done)) => {
                    self.arrived.push(done);
                    Wake::Job
                }
                Some(Note::Exited) => Wake::Worker,
                // Never: the effects hold a sender.
                None => Wake::Deadline,
            },
            changed = cancel.changed(), if *open => {
                if changed.is_err() {
                    *open = false;
                }
                Wake::Interrupt
            }
            () = tokio::time::sleep(left) => Wake::Deadline,
        }
    }

    fn event_of(&self, done: Done) -> Result<Event> {
        Ok(match done {
            Done::Ready(task, made) => {
                let wt = made?;
                // The worktree's configuration is the checkout's approved one: a new
                // worktree is not a first run that approves what it finds.
                let differs = crate::approval::worktree_changes(&self.paths.root, &wt)?;
                Event::WorktreeReady {
                    task,
                    worktree: wt.work_tree().display().to_string(),
                    differs,
                }
            }
            Done::Merged(task, result) => Event::MergeEnded {
                outcome: outcome(result?, &self.opts.into),
                task,
            },
            Done::Committed(task, outcome) => Event::Committed {
                outcome: outcome?,
                task,
            },
            Done::Discarded(task) => Event::Discarded { task },
        })
    }
}

impl FleetEffects for Real<'_> {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn wait(&mut self, until: Timestamp) -> Fut<'_, Wake> {
        let left = Duration::try_from(until.duration_since(Timestamp::now())).unwrap_or_default();
        // An adopted worker (a killed fleet's, not this process's child) is looked at by
        // pid and start time: at least once a second.
        let left = if self
            .workers
            .values()
            .any(|w| matches!(w, Worker::Adopted { .. }))
        {
            left.min(ADOPTED_POLL)
        } else {
            left
        };
        WAKES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::pin(self.first(left))
    }

    fn signals(&mut self) -> u32 {
        *self.interrupts.0.borrow_and_update()
    }

    fn steer(&self) -> (bool, bool) {
        (self.ctl.steer.paused, self.ctl.steer.stopping)
    }

    fn poll_control(&mut self, running: &[TaskSpec], now: Timestamp) -> Vec<String> {
        let wts: Vec<PathBuf> = running
            .iter()
            .map(|s| self.paths.worktree(&s.slug))
            .collect();
        let running: Vec<control::RunningTask<'_>> = running
            .iter()
            .zip(&wts)
            .map(|(s, wt)| control::RunningTask {
                name: &s.name,
                slug: &s.slug,
                worktree: wt,
            })
            .collect();
        self.ctl.poll(&running, now)
    }

    fn start_worker(
        &mut self,
        spec: &TaskSpec,
        specs: &[TaskSpec],
        left: Option<Duration>,
        now: Timestamp,
    ) -> Result<(u32, Option<u64>)> {
        let wt = self.paths.worktree(&spec.slug);
        let running = control::RunningTask {
            name: &spec.name,
            slug: &spec.slug,
            worktree: &wt,
        };
        if let Err(e) = self.ctl.give_sets(&running, now) {
            self.say(&format!(
                "warning: task {:?}: the hank ctl set values could not be given to it: {e}",
                spec.name
            ));
        }
        let flags = self
            .opts
            .deliver
            .worker_flags(&self.opts.run_flags, spec, specs);
        let repos = super::repos::env_text(self.paths, spec)?;
        let child = spawn_worker(
            self.paths,
            (&wt, &spec.slug),
            &flags,
            left,
            self.opts.json,
            repos.as_deref(),
        )?;
        let pid = child.id();
        self.workers.insert(spec.name.clone(), Worker::Own(child));
        let tx = self.notes.0.clone();
        if let Err(e) = crate::proc::on_exit(pid, move || {
            let _ = tx.send(Note::Exited);
        }) {
            // Its end is still seen at the driver's next periodic turn (a second at most).
            self.say(&format!(
                "warning: task {:?}: its end is looked for once a second ({e})",
                spec.name
            ));
        }
        let ticks = i32::try_from(pid)
            .ok()
            .and_then(crate::agent::process::start_ticks);
        Ok((pid, ticks))
    }

    fn adopt_worker(&mut self, task: &str, pid: u32, ticks: u64) {
        self.workers
            .insert(task.to_string(), Worker::Adopted { pid, ticks });
    }

    fn ended_workers(&mut self) -> Vec<(String, Option<u8>)> {
        let mut ended = Vec::new();
        for (name, worker) in &mut self.workers {
            if let Some(code) = worker.finished() {
                ended.push((name.clone(), code));
            }
        }
        for (name, _) in &ended {
            self.workers.remove(name);
        }
        ended
    }

    fn stop_worker(&mut self, task: &str, how: Stop) {
        use nix::sys::signal::Signal;
        let Some(w) = self.workers.get(task) else {
            return;
        };
        match how {
            Stop::Term => signal_pid(w.pid(), Signal::SIGTERM),
            Stop::Kill => kill_group(w.pid(), Signal::SIGKILL),
        }
    }

    fn run_figures(&mut self, spec: &TaskSpec) -> Option<RunFigures> {
        let wt = self.paths.worktree(&spec.slug);
        self.tail.follow(self.paths, &spec.name, &spec.slug, &wt);
        let s = Store::new(&wt).read_status()?;
        Some(RunFigures {
            exit_code: s.exit_code,
            loops: s.loop_count,
            cost_usd: s.total_cost_usd,
            agent: s.agent,
            reason: s
                .exit_reason
                .map(|r| r.as_str().to_owned())
                .or_else(|| security_stop(&wt)),
            message: s.exit_message,
        })
    }

    fn prepare(&mut self, spec: &TaskSpec) {
        let (p, into, spec) = (self.paths.clone(), self.opts.into.clone(), spec.clone());
        self.job(move || Done::Ready(spec.name.clone(), ensure_worktree(&p, &spec, &into)));
    }

    fn commit(&mut self, spec: &TaskSpec) {
        let (p, spec) = (self.paths.clone(), spec.clone());
        self.job(move || Done::Committed(spec.name.clone(), commit_task(&p, &spec)));
    }

    fn discard(&mut self, spec: &TaskSpec) {
        let (p, spec) = (self.paths.clone(), spec.clone());
        self.job(move || {
            let wt = p.worktree(&spec.slug);
            let message = format!("hank fleet: task {} (failed)", spec.name);
            // Its other repositories' work committed on its branches there, their worktrees
            // removed (never carried into a spare).
            let _ = super::repos::commit_each(&p, &spec, &message);
            let _ = super::repos::remove(&p, &spec);
            if let Ok(task) = pin(&p, &wt) {
                let _ = commit_all(&task.checkout(), &message);
            }
            retire_worktree(&p, &wt);
            Done::Discarded(spec.name)
        });
    }

    fn merge(&mut self, spec: &TaskSpec, job: MergeJob) {
        let (p, o, c, spec) = (
            self.paths.clone(),
            self.opts.clone(),
            self.cancel.clone(),
            spec.clone(),
        );
        self.job(move || {
            let result = merge_off_thread(&p, &spec, &o, &job, c);
            Done::Merged(spec.name, result)
        });
    }

    fn finished_jobs(&mut self) -> Result<Vec<Event>> {
        while let Ok(note) = self.notes.1.try_recv() {
            if let Note::Job(done) = note {
                self.arrived.push(done);
            }
        }
        std::mem::take(&mut self.arrived)
            .into_iter()
            .map(|done| self.event_of(done))
            .collect()
    }

    fn free_memory(&mut self) -> Option<u64> {
        free_memory()
    }

    fn windows(&mut self, now: Timestamp) -> Vec<WindowReading> {
        windows(&self.opts.window_limits, now)
    }

    fn fleet_cost(&mut self, now: Timestamp) -> f64 {
        if self.opts.max_cost_usd > 0.0 {
            fleet_ledger::summary(&self.paths.ledger(), now).cost_usd
        } else {
            0.0
        }
    }

    fn save(&mut self, file: &mut FleetFile, now: Timestamp) -> Result<()> {
        self.saved.save(self.paths, file, now)
    }

    fn tell_tasks(&mut self, told: &[TaskTold], now: Timestamp) {
        self.saved.tell(self.paths, told, now);
    }

    fn say(&mut self, line: &str) {
        errln!("hank: fleet: {line}");
    }

    fn recording(&self) -> bool {
        self.record.is_some()
    }

    fn record(&mut self, line: &str) {
        if let Some(f) = &mut self.record {
            let _ = writeln!(f, "{line}");
        }
    }

    fn deliver<'b>(&'b mut self, file: &'b FleetFile) -> Fut<'b, Result<Option<u8>>> {
        Box::pin(async move {
            // The fleet's clock for its delivery: the wall clock (or HANK_NOW's), a signal
            // ending its waits.
            let mut clock = crate::deliver::Wall::new(Some(self.cancel.clone()), None)?;
            deliver::integration(
                &self.paths.root,
                &self.opts.into,
                &self.opts.deliver,
                file,
                &mut clock,
            )
            .await
        })
    }

    fn clean_up(&mut self) {
        // One per agent and the integration worktree's: what the next fleet of as many
        // agents starts from; none with FLEET_KEEP_WORKTREES=false.
        let keep = if self.opts.keep_worktrees {
            self.opts.agents.saturating_add(1)
        } else {
            0
        };
        super::repos::remove_integrations(self.paths);
        let (kept, dir) = keep_worktrees(self.paths, keep);
        if !self.opts.keep_worktrees {
            self.say("removed the fleet's worktrees (FLEET_KEEP_WORKTREES=false)");
        } else if kept > 0 {
            self.say(&format!(
                "kept {kept} worktree{} in {} for the next fleet (`hank fleet clean` removes them)",
                if kept == 1 { "" } else { "s" },
                dir.display()
            ));
        }
    }
}

/// A merge job's result as the machine reads it.
fn outcome(failed: Option<Merged>, into: &str) -> MergeOutcome {
    let Some(Merged {
        problem,
        tip,
        counts,
    }) = failed
    else {
        return MergeOutcome::Merged;
    };
    let kind = match problem {
        MergeProblem::Config(_) => MergeProblemKind::Config,
        MergeProblem::Conflict(_) => MergeProblemKind::Conflict,
        MergeProblem::Markers(_) => MergeProblemKind::Markers,
        MergeProblem::Red(_) => MergeProblemKind::Red,
        MergeProblem::Refused(_) => MergeProblemKind::Refused,
    };
    MergeOutcome::Failed {
        kind,
        what: problem.describe(into),
        tip,
        counts,
    }
}

/// The limited windows' shared readings (MAX_WINDOW_PERCENT's forecast).
fn windows(limits: &crate::policy::windows::WindowLimits, now: Timestamp) -> Vec<WindowReading> {
    if limits.is_empty() {
        return Vec::new();
    }
    let shared = crate::store::shared_windows::read();
    limits
        .0
        .iter()
        .filter_map(|(name, &limit)| {
            let window = shared.get(name)?;
            Some(WindowReading {
                name: name.clone(),
                percent: window.utilization_at(now)? * 100.0,
                limit,
                resets_at: window.fields.resets_at,
            })
        })
        .collect()
}

/// The `security` event a task's run stopped with (issue 47: a file of its record changed),
/// as the task's failure reason: its message, naming the file.
fn security_stop(wt: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    // Its last 64 KiB: the event is the run's last but for its end.
    const TAIL: u64 = 64 * 1024;
    let path = wt.join(".hank").join("events.jsonl");
    let mut file = crate::fsread::open_regular(&path, crate::fsread::Follow::No).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut bytes = Vec::new();
    file.take(TAIL).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    crate::store::schema::EventLine::parse_all(&text)
        .into_iter()
        .rev()
        .find_map(|l| match l.event?.kind {
            // Only a stop: `undone` events tell of files hank put back, and the run went on.
            crate::store::EventKind::Security {
                message, action, ..
            } if action != "undone" => Some(crate::sanitize::line(&message).to_string()),
            _ => None,
        })
}
