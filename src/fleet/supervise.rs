//! The supervisor as a driver of [`Fleet`]: each turn it gathers what happened (signals,
//! `hank ctl`, workers that ended, git jobs that finished, the admission facts) and feeds it
//! to [`Fleet::on`], then executes the commands it returns. Git work (a worktree made, a
//! failed task's commit and removal, a merge and its check) runs as jobs on blocking threads
//! that report on a channel, so a slow git command never delays reaping a worker or taking a
//! control command. With `HANK_FLEET_RECORD=FILE` every event fed to the machine is appended
//! to FILE as a JSON line (the replay test's fixture is one such recording).

use std::collections::VecDeque;
use std::io::Write as _;
use std::sync::mpsc;

use crate::policy::fleet::machine::{
    Command, Config, Event, Fleet, MergeOutcome, MergeProblemKind, RecordHead, WindowReading,
};

use super::*;

/// What a git job reports when it ends.
enum Done {
    Ready(String, Result<PathBuf>),
    Merged(String, Result<Option<Merged>>),
    Committed(String, Result<std::result::Result<Vec<String>, String>>),
    Discarded(String),
}

/// The supervisor's I/O state: the machine, the workers' processes, the jobs' channel.
struct Driver<'a> {
    paths: &'a Paths,
    opts: &'a Options,
    cancel: &'a Cancel,
    fleet: Fleet,
    workers: BTreeMap<String, Worker>,
    jobs: (mpsc::Sender<Done>, mpsc::Receiver<Done>),
    ctl: control::FleetControl,
    tail: events::Tail,
    started: Instant,
    record: Option<fs::File>,
    finish: bool,
}

/// Runs the fleet's supervision until [`Command::Finish`]; the exit code.
pub(super) async fn supervise(
    paths: &Paths,
    tasks: &[TaskSpec],
    opts: &Options,
    cancel: &Cancel,
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
    ensure_integration(paths, &opts.into)?;
    // The fleet's budget: its cost counts from here, its runtime from now.
    let started_at = Timestamp::now();
    fleet_ledger::begin(&paths.ledger(), started_at)?;
    file.into.clone_from(&opts.into);
    file.pid = Some(std::process::id());
    file.state = "running".into();
    file.max_calls_per_hour = opts.limits.max_calls_per_hour;
    file.started_at = Some(started_at);
    file.deadline = crate::policy::run::RunConfig::deadline_of(started_at, opts.max_runtime);
    file.max_cost_usd = opts.max_cost_usd;
    file.max_tokens_per_hour = opts.limits.max_tokens_per_hour;
    let worktrees: BTreeMap<String, String> = tasks
        .iter()
        .map(|s| (s.name.clone(), paths.worktree(&s.slug)))
        .filter(|(_, wt)| wt.join(".git").exists())
        .map(|(n, wt)| (n, wt.display().to_string()))
        .collect();
    let cfg = config(paths, opts, file.deadline);
    let alive = alive_workers(&file);
    let fleet = Fleet::new(cfg, tasks.to_vec(), file, &worktrees);
    let mut d = Driver {
        paths,
        opts,
        cancel,
        fleet,
        workers: BTreeMap::new(),
        jobs: mpsc::channel(),
        ctl: control::FleetControl::open(&paths.root)?,
        tail: events::Tail::new(opts.json),
        started: Instant::now(),
        record: None,
        finish: false,
    };
    d.open_record();
    d.feed(Event::Adopt { alive })?;
    if d.ctl.steer.paused {
        errln!(
            "hank: fleet: paused by hank ctl pause before the restart (hank ctl resume goes on)"
        );
    }
    let steer = Event::Steer {
        paused: d.ctl.steer.paused,
        stopping: d.ctl.steer.stopping,
    };
    d.feed(steer)?;
    d.save()?;
    d.turns().await?;
    d.end().await
}

/// The machine's settings from the fleet's options.
fn config(paths: &Paths, opts: &Options, deadline: Option<Timestamp>) -> Config {
    Config {
        agents: opts.agents,
        into: opts.into.clone(),
        checkout: paths.root.display().to_string(),
        min_free_memory: opts.min_free_memory,
        max_merge_attempts: opts.max_merge_attempts,
        max_cost_usd: opts.max_cost_usd,
        max_runtime_secs: opts.max_runtime.as_secs(),
        deadline,
        exit_at_usage_limit: opts.exit_at_usage_limit,
        stop_grace_secs: STOP_GRACE.as_secs(),
    }
}

/// The tasks whose recorded worker (pid and start time) still runs: a killed fleet's.
fn alive_workers(file: &FleetFile) -> Vec<String> {
    file.tasks
        .iter()
        .filter(|t| match (t.pid, t.pid_start) {
            (Some(pid), Some(ticks)) => {
                i32::try_from(pid).is_ok_and(|p| crate::agent::process::is_running(p, ticks))
            }
            _ => false,
        })
        .map(|t| t.name.clone())
        .collect()
}

impl Driver<'_> {
    /// The supervision's turns, every [`POLL`], until the machine says finish.
    async fn turns(&mut self) -> Result<()> {
        let (mut turn, mut seen): (u64, u32) = (0, 0);
        loop {
            turn = turn.wrapping_add(1);
            let signals = *self.cancel.borrow();
            if signals > seen {
                seen = signals;
                self.feed(Event::Interrupted { signals })?;
            }
            if turn.is_multiple_of(LIVE_EVERY) {
                self.poll_control()?;
            }
            self.reap()?;
            self.take_jobs()?;
            let tick = self.tick_facts(Timestamp::now());
            self.feed(tick)?;
            if turn.is_multiple_of(LIVE_EVERY) {
                self.figures()?;
            }
            if self.finish {
                return Ok(());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Feeds one event to the machine and executes what it says (and what that brings
    /// about, in order); saves once at the end when asked to.
    fn feed(&mut self, event: Event) -> Result<()> {
        let mut queue = VecDeque::from([event]);
        let mut dirty = false;
        while let Some(event) = queue.pop_front() {
            let now = Timestamp::now();
            self.write_record(&event, now);
            for command in self.fleet.on(event, now) {
                match command {
                    Command::Save => dirty = true,
                    other => queue.extend(self.execute(other, now)?),
                }
            }
        }
        if dirty {
            self.save()?;
        }
        Ok(())
    }

    fn save(&mut self) -> Result<()> {
        save(self.paths, self.fleet.header(), Timestamp::now())
    }

    /// One command; the events it brings about at once (a worker started).
    fn execute(&mut self, command: Command, now: Timestamp) -> Result<Option<Event>> {
        use nix::sys::signal::Signal;
        match command {
            Command::Save => {}
            Command::Say(line) => errln!("hank: fleet: {line}"),
            Command::Adopt { task } => {
                if let Some(t) = self.fleet.task(&task)
                    && let (Some(pid), Some(ticks)) = (t.pid, t.pid_start)
                {
                    self.workers.insert(task, Worker::Adopted { pid, ticks });
                }
            }
            Command::Prepare { task } => self.prepare(task),
            Command::Start { task } => return self.start(&task, now).map(Some),
            Command::Terminate { tasks } | Command::Kill { tasks } if tasks.is_empty() => {}
            Command::Terminate { tasks } => {
                for w in tasks.iter().filter_map(|t| self.workers.get(t)) {
                    signal_pid(w.pid(), Signal::SIGTERM);
                }
            }
            Command::Kill { tasks } => {
                for w in tasks.iter().filter_map(|t| self.workers.get(t)) {
                    kill_group(w.pid(), Signal::SIGKILL);
                }
            }
            Command::Discard { task } => self.discard(task),
            Command::Commit { task } => self.commit(task),
            Command::Merge {
                task,
                last,
                handed_back_at,
                done,
            } => self.merge(
                task,
                MergeJob {
                    last,
                    handed_back_at,
                    done,
                },
            ),
            Command::Finish => self.finish = true,
        }
        Ok(None)
    }

    fn spec(&self, name: &str) -> Option<TaskSpec> {
        self.fleet.specs().iter().find(|s| s.name == name).cloned()
    }

    /// The task's worktree made off this thread (a checkout of the whole tree).
    fn prepare(&self, task: String) {
        let Some(spec) = self.spec(&task) else { return };
        let (p, into, tx) = (
            self.paths.clone(),
            self.opts.into.clone(),
            self.jobs.0.clone(),
        );
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(Done::Ready(task, ensure_worktree(&p, &spec, &into)));
        });
    }

    /// A failed task's work committed on its branch and its worktree removed, off this
    /// thread.
    fn discard(&self, task: String) {
        let Some(spec) = self.spec(&task) else { return };
        let (p, tx) = (self.paths.clone(), self.jobs.0.clone());
        tokio::task::spawn_blocking(move || {
            let wt = p.worktree(&spec.slug);
            let _ = commit_all(&wt, &format!("hank fleet: task {} (failed)", spec.name));
            retire_worktree(&p, &wt);
            let _ = tx.send(Done::Discarded(task));
        });
    }

    /// A finished task's commit off this thread (its worktree freed for the next task).
    fn commit(&self, task: String) {
        let Some(spec) = self.spec(&task) else { return };
        let (p, tx) = (self.paths.clone(), self.jobs.0.clone());
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(Done::Committed(task, commit_task(&p, &spec)));
        });
    }

    /// The merge of a finished task off this thread (git and the check).
    fn merge(&self, task: String, job: MergeJob) {
        let Some(spec) = self.spec(&task) else { return };
        let (p, o, c, tx) = (
            self.paths.clone(),
            self.opts.clone(),
            self.cancel.clone(),
            self.jobs.0.clone(),
        );
        tokio::task::spawn_blocking(move || {
            let result = merge_off_thread(&p, &spec, &o, &job, c);
            let _ = tx.send(Done::Merged(task, result));
        });
    }

    /// The task's worker started in its worktree, given the `hank ctl set` values.
    fn start(&mut self, task: &str, now: Timestamp) -> Result<Event> {
        let spec = self
            .spec(task)
            .ok_or_else(|| HankError::Internal(format!("no task {task:?} in the plan")))?;
        let wt = self.paths.worktree(&spec.slug);
        let running = control::RunningTask {
            name: &spec.name,
            slug: &spec.slug,
            worktree: &wt,
        };
        if let Err(e) = self.ctl.give_sets(&running, now) {
            errln!(
                "hank: fleet: warning: task {:?}: the hank ctl set values could not be given to it: {e}",
                spec.name
            );
        }
        let left = (!self.opts.max_runtime.is_zero())
            .then(|| self.opts.max_runtime.saturating_sub(self.started.elapsed()));
        let flags = self
            .opts
            .deliver
            .worker_flags(&self.opts.run_flags, &spec, self.fleet.specs());
        let child = spawn_worker(self.paths, &wt, &spec.slug, &flags, left)?;
        let pid = child.id();
        self.workers.insert(task.to_string(), Worker::Own(child));
        Ok(Event::WorkerStarted {
            task: task.to_string(),
            pid,
            pid_start: i32::try_from(pid)
                .ok()
                .and_then(crate::agent::process::start_ticks),
        })
    }

    /// `hank ctl` commands typed in the checkout, applied and forwarded to running tasks.
    fn poll_control(&mut self) -> Result<()> {
        let running: Vec<(String, String, PathBuf)> = self
            .workers
            .keys()
            .filter_map(|name| {
                let spec = self.spec(name)?;
                let wt = self.paths.worktree(&spec.slug);
                Some((name.clone(), spec.slug, wt))
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
        for line in self.ctl.poll(&running, Timestamp::now()) {
            errln!("hank: fleet: {line}");
        }
        let steer = Event::Steer {
            paused: self.ctl.steer.paused,
            stopping: self.ctl.steer.stopping,
        };
        self.feed(steer)
    }

    /// Workers that ended: their exit code and figures from their status.json.
    fn reap(&mut self) -> Result<()> {
        let names: Vec<String> = self.workers.keys().cloned().collect();
        for name in names {
            let Some(code) = self.workers.get_mut(&name).and_then(Worker::finished) else {
                continue;
            };
            self.workers.remove(&name);
            let Some(spec) = self.spec(&name) else {
                continue;
            };
            let wt = self.paths.worktree(&spec.slug);
            self.tail.follow(self.paths, &name, &spec.slug, &wt);
            let status = Store::new(&wt).read_status();
            let code = code
                .or_else(|| status.as_ref().and_then(|s| s.exit_code))
                .unwrap_or(crate::exit::ERROR);
            self.feed(Event::RunEnded {
                task: name,
                code,
                loops: status.as_ref().map(|s| s.loop_count),
                cost_usd: status.as_ref().map(|s| s.total_cost_usd),
                agent: status.as_ref().and_then(|s| s.agent.clone()),
                reason: status
                    .as_ref()
                    .and_then(|s| s.exit_reason)
                    .map(|r| format!("{r:?}")),
            })?;
        }
        Ok(())
    }

    /// The git jobs that ended since the last turn.
    fn take_jobs(&mut self) -> Result<()> {
        while let Ok(done) = self.jobs.1.try_recv() {
            let event = match done {
                Done::Ready(task, made) => {
                    let wt = made?;
                    // The worktree's configuration is the checkout's approved one: a new
                    // worktree is not a first run that approves what it finds.
                    let differs = crate::approval::worktree_changes(&self.paths.root, &wt)?;
                    Event::WorktreeReady {
                        task,
                        worktree: wt.display().to_string(),
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
            };
            self.feed(event)?;
        }
        Ok(())
    }

    /// Admission's facts, read only when a task could start (`/proc/meminfo` costs the
    /// kernel a walk; the shared windows a file read).
    fn tick_facts(&self, now: Timestamp) -> Event {
        let may = self.fleet.may_admit();
        let cost_usd = if self.opts.max_cost_usd > 0.0 {
            fleet_ledger::summary(&self.paths.ledger(), now).cost_usd
        } else {
            0.0
        };
        Event::Tick {
            free_memory: may.then(free_memory).flatten(),
            windows: if may {
                windows(&self.opts.window_limits, now)
            } else {
                Vec::new()
            },
            cost_usd,
        }
    }

    /// The running tasks' live figures and events, about once a second.
    fn figures(&mut self) -> Result<()> {
        let running: Vec<(String, String)> = self
            .fleet
            .file()
            .tasks
            .iter()
            .filter(|t| self.workers.contains_key(&t.name))
            .filter_map(|t| Some((t.name.clone(), t.worktree.clone()?)))
            .collect();
        for (name, wt) in running {
            if let Some(spec) = self.spec(&name) {
                self.tail
                    .follow(self.paths, &name, &spec.slug, Path::new(&wt));
            }
            if let Some(s) = Store::new(Path::new(&wt)).read_status() {
                self.feed(Event::Figures {
                    task: name,
                    loops: s.loop_count,
                    cost_usd: s.total_cost_usd,
                    agent: s.agent,
                })?;
            }
        }
        Ok(())
    }

    /// The end: the machine's exit code, the integration branch's delivery, the final
    /// record.
    async fn end(mut self) -> Result<u8> {
        let mut code = self.fleet.end();
        if code == crate::exit::OK {
            let mut cancel = self.cancel.clone();
            if let Some(c) = deliver::integration(
                &self.paths.root,
                &self.opts.into,
                &self.opts.deliver,
                self.fleet.file(),
                &mut cancel,
            )
            .await?
            {
                code = c;
            }
        }
        self.record_end(code);
        self.fleet.close(code);
        if self.fleet.all_final() {
            remove_worktree(self.paths, &self.paths.integration());
            remove_spares(self.paths);
        }
        self.save()?;
        for t in self
            .fleet
            .file()
            .tasks
            .iter()
            .filter(|t| t.state == TaskState::Failed)
        {
            errln!(
                "hank: fleet: task {:?} failed — {} (branch {})",
                t.name,
                t.message,
                t.branch
            );
        }
        Ok(code)
    }

    /// `HANK_FLEET_RECORD`: the machine's inputs recorded, after a first line with its
    /// settings, plan and starting file.
    fn open_record(&mut self) {
        let Some(path) = std::env::var_os("HANK_FLEET_RECORD") else {
            return;
        };
        let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(path) else {
            return;
        };
        let head = RecordHead {
            config: config(self.paths, self.opts, self.fleet.file().deadline),
            plan: self
                .fleet
                .specs()
                .iter()
                .map(|s| s.section.as_str())
                .collect(),
            file: self.fleet.file().clone(),
        };
        if let Ok(line) = serde_json::to_string(&head) {
            let _ = writeln!(f, "{line}");
        }
        self.record = Some(f);
    }

    fn write_record(&mut self, event: &Event, now: Timestamp) {
        if let Some(f) = &mut self.record {
            let line = serde_json::json!({ "at": now, "event": event });
            let _ = writeln!(f, "{line}");
        }
    }

    fn record_end(&mut self, code: u8) {
        if let Some(f) = &mut self.record {
            let _ = writeln!(f, "{}", serde_json::json!({ "end": code }));
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
