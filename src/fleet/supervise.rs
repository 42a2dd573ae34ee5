//! The supervisor as a driver of [`Fleet`]: each turn it gathers what happened (signals,
//! `hank ctl`, workers that ended, git jobs that finished, the admission facts) and feeds it
//! to [`Fleet::on`], then executes the commands it returns. Everything it does to the world
//! goes through [`FleetEffects`] ([`Real`] as the fleet runs; an in-memory one in the unit
//! tests, `fleet/tests/`): git work (a worktree made, a task's commit, a failed task's
//! commit and removal, a merge and its check) runs as jobs that report later, so a slow git
//! command never delays reaping a worker or taking a control command. With
//! `HANK_FLEET_RECORD=FILE` every event fed to the machine is appended to FILE as a JSON line
//! (the replay test's fixture is one such recording).

use super::{Cancel, LIVE, MergeJob, Options, Paths, STOP_GRACE, ensure_integration, read};
use crate::error::HankError;
use crate::error::Result;
use crate::policy::fleet;
use crate::policy::fleet::{TaskSpec, TaskState};
use crate::store::fleet_ledger;
use crate::store::schema::FleetFile;
use jiff::Timestamp;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::policy::fleet::machine::{Command, Config, Event, Fleet, RecordHead};

use super::effects::{FleetEffects, Real, Stop};

/// The driver: the machine and the effects it acts through.
pub(super) struct Driver<E> {
    fleet: Fleet,
    fx: E,
    /// MAX_RUNTIME (zero: unlimited) from `started`, on the effects' clock.
    max_runtime: Duration,
    started: Timestamp,
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
    // `--retry [TASK]`: what it queues again, refused before anything starts when it names
    // no failed task.
    let retry = match &opts.retry {
        None => None,
        Some(named) => {
            Some(fleet::retry_targets(&file, tasks, named.as_deref()).map_err(HankError::usage)?)
        }
    };
    if !file.into.is_empty() && file.into != opts.into {
        errln!(
            "hank: note: the fleet recorded so far merged into {}; now merging into {}",
            file.into,
            opts.into
        );
    }
    ensure_integration(paths, &opts.into)?;
    super::repos::ensure_integrations(paths, &opts.into)?;
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
    let fx = Real::open(paths, opts, cancel)?;
    let fleet = Fleet::new(cfg.clone(), tasks.to_vec(), file, &worktrees);
    Driver::new(fleet, fx, opts.max_runtime)
        .run(&cfg, alive, retry)
        .await
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

impl<E: FleetEffects> Driver<E> {
    pub(super) fn new(fleet: Fleet, fx: E, max_runtime: Duration) -> Self {
        let started = fx.now();
        Self {
            fleet,
            fx,
            max_runtime,
            started,
            finish: false,
        }
    }

    /// The supervision from its start (`alive`: the tasks whose recorded worker still runs;
    /// `retry`: the failed tasks `--retry` queues again) to its exit code; `cfg` heads the
    /// recording.
    pub(super) async fn run(
        mut self,
        cfg: &Config,
        alive: Vec<String>,
        retry: Option<Vec<String>>,
    ) -> Result<u8> {
        self.open_record(cfg);
        self.feed(Event::Adopt { alive })?;
        if let Some(tasks) = retry {
            self.feed(Event::Retry { tasks })?;
        }
        let (paused, stopping) = self.fx.steer();
        if paused {
            self.fx
                .say("paused by hank ctl pause before the restart (hank ctl resume goes on)");
        }
        self.feed(Event::Steer { paused, stopping })?;
        self.save()?;
        self.turns().await?;
        self.end().await
    }

    /// The supervision's turns until the machine says finish. Each turn takes what happened
    /// (interrupts, ended workers, finished git jobs), ticks the machine, and every [`LIVE`]
    /// also reads `hank ctl` and the running tasks' figures; then it waits for the next thing
    /// to happen: a job's or a worker's end, an interrupt, the next periodic reading or the
    /// machine's own next wake-up ([`Fleet::wake_at`]), whichever comes first.
    async fn turns(&mut self) -> Result<()> {
        let mut seen: u32 = 0;
        let mut live_at = self.fx.now();
        loop {
            let signals = self.fx.signals();
            if signals > seen {
                seen = signals;
                self.feed(Event::Interrupted { signals })?;
            }
            let live = self.fx.now() >= live_at;
            if live {
                self.poll_control()?;
            }
            self.reap()?;
            for event in self.fx.finished_jobs()? {
                self.feed(event)?;
            }
            let tick = self.tick_facts();
            self.feed(tick)?;
            let now = self.fx.now();
            if live {
                self.figures()?;
                live_at = now.checked_add(LIVE).unwrap_or(Timestamp::MAX);
            }
            if self.finish {
                return Ok(());
            }
            let until = self.fleet.wake_at(now).map_or(live_at, |w| w.min(live_at));
            self.fx.wait(until).await;
        }
    }

    /// Feeds one event to the machine and executes what it says (and what that brings
    /// about, in order); saves once at the end when asked to.
    fn feed(&mut self, event: Event) -> Result<()> {
        let mut queue = VecDeque::from([event]);
        let mut dirty = false;
        while let Some(event) = queue.pop_front() {
            let now = self.fx.now();
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

    /// The task events the machine emitted told, then `fleet.json` written.
    fn save(&mut self) -> Result<()> {
        let now = self.fx.now();
        let told = self.fleet.task_events();
        self.fx.tell_tasks(&told, now);
        self.fx.save(self.fleet.header(), now)
    }

    /// One command; the event it brings about at once (a worker started).
    fn execute(&mut self, command: Command, now: Timestamp) -> Result<Option<Event>> {
        match command {
            Command::Save => {}
            Command::Say(line) => self.fx.say(&line),
            Command::Adopt { task } => {
                if let Some(t) = self.fleet.task(&task)
                    && let (Some(pid), Some(ticks)) = (t.pid, t.pid_start)
                {
                    self.fx.adopt_worker(&task, pid, ticks);
                }
            }
            Command::Start { task } => return self.start(&task, now).map(Some),
            Command::Terminate { tasks } => self.stop(&tasks, Stop::Term),
            Command::Kill { tasks } => self.stop(&tasks, Stop::Kill),
            Command::Prepare { task } => {
                if let Some(spec) = self.spec(&task) {
                    self.fx.prepare(&spec);
                }
            }
            Command::Commit { task } => {
                if let Some(spec) = self.spec(&task) {
                    self.fx.commit(&spec);
                }
            }
            Command::Discard { task } => {
                if let Some(spec) = self.spec(&task) {
                    self.fx.discard(&spec);
                }
            }
            Command::Merge {
                task,
                last,
                handed_back_at,
                done,
            } => {
                if let Some(spec) = self.spec(&task) {
                    let job = MergeJob {
                        last,
                        handed_back_at,
                        done,
                    };
                    self.fx.merge(&spec, job);
                }
            }
            Command::Finish => self.finish = true,
        }
        Ok(None)
    }

    fn stop(&mut self, tasks: &[String], how: Stop) {
        for task in tasks {
            self.fx.stop_worker(task, how);
        }
    }

    fn spec(&self, name: &str) -> Option<TaskSpec> {
        self.fleet.specs().iter().find(|s| s.name == name).cloned()
    }

    /// The task's worker started in its worktree with what is left of MAX_RUNTIME.
    fn start(&mut self, task: &str, now: Timestamp) -> Result<Event> {
        let spec = self
            .spec(task)
            .ok_or_else(|| HankError::Internal(format!("no task {task:?} in the plan")))?;
        let left = (!self.max_runtime.is_zero()).then(|| {
            let spent = now.duration_since(self.started).unsigned_abs();
            self.max_runtime.saturating_sub(spent)
        });
        let (pid, pid_start) = self.fx.start_worker(&spec, self.fleet.specs(), left, now)?;
        Ok(Event::WorkerStarted {
            task: task.to_string(),
            pid,
            pid_start,
        })
    }

    /// `hank ctl` commands typed in the checkout, applied and forwarded to running tasks.
    fn poll_control(&mut self) -> Result<()> {
        let running: Vec<TaskSpec> = self
            .fleet
            .workers()
            .iter()
            .filter_map(|name| self.spec(name))
            .collect();
        let now = self.fx.now();
        for line in self.fx.poll_control(&running, now) {
            self.fx.say(&line);
        }
        let (paused, stopping) = self.fx.steer();
        self.feed(Event::Steer { paused, stopping })
    }

    /// Workers that ended: their exit code and figures from their status.
    fn reap(&mut self) -> Result<()> {
        for (name, code) in self.fx.ended_workers() {
            let Some(spec) = self.spec(&name) else {
                continue;
            };
            let figures = self.fx.run_figures(&spec);
            let code = code
                .or_else(|| figures.as_ref().and_then(|f| f.exit_code))
                .unwrap_or(crate::exit::ERROR);
            self.feed(Event::RunEnded {
                task: name,
                code,
                loops: figures.as_ref().map(|f| f.loops),
                cost_usd: figures.as_ref().map(|f| f.cost_usd),
                agent: figures.as_ref().and_then(|f| f.agent.clone()),
                reason: figures.as_ref().and_then(|f| f.reason.clone()),
                message: figures.and_then(|f| f.message),
            })?;
        }
        Ok(())
    }

    /// Admission's facts, read only when a task could start (`/proc/meminfo` costs the
    /// kernel a walk; the shared windows a file read).
    fn tick_facts(&mut self) -> Event {
        let now = self.fx.now();
        let may = self.fleet.may_admit();
        Event::Tick {
            free_memory: if may { self.fx.free_memory() } else { None },
            windows: if may {
                self.fx.windows(now)
            } else {
                Vec::new()
            },
            cost_usd: self.fx.fleet_cost(now),
        }
    }

    /// The running tasks' live figures and events, about once a second.
    fn figures(&mut self) -> Result<()> {
        let running: Vec<TaskSpec> = self
            .fleet
            .file()
            .tasks
            .iter()
            .filter(|t| self.fleet.workers().contains(&t.name) && t.worktree.is_some())
            .filter_map(|t| self.spec(&t.name))
            .collect();
        for spec in running {
            if let Some(f) = self.fx.run_figures(&spec) {
                self.feed(Event::Figures {
                    task: spec.name,
                    loops: f.loops,
                    cost_usd: f.cost_usd,
                    agent: f.agent,
                })?;
            }
        }
        Ok(())
    }

    /// The end: the machine's exit code, the integration branch's delivery, the final
    /// record.
    async fn end(mut self) -> Result<u8> {
        let mut code = self.fleet.end();
        if code == crate::exit::OK
            && let Some(c) = self.fx.deliver(self.fleet.file()).await?
        {
            code = c;
        }
        self.record_end(code);
        self.fleet.close(code);
        if self.fleet.all_final() {
            self.fx.clean_up();
        }
        self.save()?;
        let failed: Vec<String> = self
            .fleet
            .file()
            .tasks
            .iter()
            .filter(|t| t.state() == TaskState::Failed)
            .map(|t| {
                format!(
                    "task {:?} failed — {} (branch {})",
                    t.name, t.message, t.branch
                )
            })
            .collect();
        for line in failed {
            self.fx.say(&line);
        }
        Ok(code)
    }

    /// `HANK_FLEET_RECORD`: the machine's inputs recorded, after a first line with its
    /// settings, plan and starting file.
    fn open_record(&mut self, cfg: &Config) {
        if !self.fx.recording() {
            return;
        }
        let head = RecordHead {
            config: cfg.clone(),
            plan: self
                .fleet
                .specs()
                .iter()
                .map(|s| s.section.as_str())
                .collect(),
            file: self.fleet.file().clone(),
        };
        if let Ok(line) = serde_json::to_string(&head) {
            self.fx.record(&line);
        }
    }

    fn write_record(&mut self, event: &Event, now: Timestamp) {
        if self.fx.recording() {
            let line = serde_json::json!({ "at": now, "event": event });
            self.fx.record(&line.to_string());
        }
    }

    fn record_end(&mut self, code: u8) {
        if self.fx.recording() {
            self.fx
                .record(&serde_json::json!({ "end": code }).to_string());
        }
    }
}
