//! The fleet driver's test effects: a clock that moves only when the driver waits (to the
//! first scheduled worker end, job end or Ctrl-C, else the driver's deadline), workers that
//! end at a scripted time (or when signalled), git jobs that end a scripted time after they
//! started, `hank ctl` (read at the driver's control polls) and Ctrl-C at scripted times, and
//! every save, line, wait and recorded event kept in memory. No process, no git, no sleep.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::effects::Fut;
use crate::error::Result;
use crate::policy::fleet::TaskSpec;
use crate::policy::fleet::machine::{Event, MergeOutcome, TaskTold, WindowReading};
use crate::store::schema::FleetFile;

use super::super::effects::{FleetEffects, RunFigures, Stop, Wake};
use super::super::merge::MergeJob;

/// A kind of git job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Job {
    Prepare,
    Commit,
    Discard,
    Merge,
}

/// A worker as scripted: how long its run takes, its exit code, whether it ignores SIGTERM.
#[derive(Debug, Clone, Copy)]
pub(super) struct Run {
    pub takes: SignedDuration,
    pub code: u8,
    pub ignores_term: bool,
}

impl Default for Run {
    fn default() -> Self {
        Self {
            takes: SignedDuration::from_secs(3),
            code: 0,
            ignores_term: false,
        }
    }
}

struct Running {
    ends: Option<Timestamp>,
    code: u8,
    ignores_term: bool,
}

struct InFlight {
    due: Timestamp,
    job: Job,
    task: String,
    event: Event,
}

/// The effects handed to the driver; the test keeps a clone to script and read them.
#[derive(Clone, Default)]
pub(super) struct TestFx(pub Rc<RefCell<Fx>>);

#[derive(Default)]
pub(super) struct Fx {
    pub now: Timestamp,
    // The script.
    /// Each task's run (default [`Run::default`]).
    pub runs: BTreeMap<String, Run>,
    /// How long a job takes (default: done by the next turn).
    pub takes: BTreeMap<(Job, String), SignedDuration>,
    /// Each merge's outcome, in order (default: merged).
    pub merges: BTreeMap<String, VecDeque<MergeOutcome>>,
    /// When Ctrl-C comes (each time one more signal).
    pub interrupts: Vec<Timestamp>,
    /// The signals the driver has read.
    signals_read: u32,
    /// When `hank ctl` changes the steer: (at, paused, stopping).
    pub steers: Vec<(Timestamp, bool, bool)>,
    // The state.
    steer: (bool, bool),
    running: BTreeMap<String, Running>,
    ended: BTreeMap<String, u8>,
    jobs: Vec<InFlight>,
    pid: u32,
    // What the driver did.
    /// Everything, in order, with its time: `start A`, `job commit A`, `done commit A`,
    /// `reaped A`, `term A`, `kill A`, `ctl paused`, `clean up`.
    pub log: Vec<(Timestamp, String)>,
    pub said: Vec<String>,
    pub saved: Vec<FleetFile>,
    /// The task events the machine emitted, as told.
    pub told: Vec<TaskTold>,
    pub record: Vec<String>,
    /// The most git jobs in flight at once.
    pub most_jobs: usize,
    /// Each of the driver's waits: when it ended and why.
    pub wakes: Vec<(Timestamp, Wake)>,
}

impl TestFx {
    pub(super) fn at(now: Timestamp) -> Self {
        let fx = Self::default();
        fx.0.borrow_mut().now = now;
        fx
    }

    /// The time of the first log entry starting with `what`.
    pub(super) fn when(&self, what: &str) -> Option<Timestamp> {
        let fx = self.0.borrow();
        fx.log
            .iter()
            .find(|(_, l)| l.starts_with(what))
            .map(|(t, _)| *t)
    }

    fn job(&self, job: Job, spec: &TaskSpec, event: Event) {
        let mut fx = self.0.borrow_mut();
        let takes = fx
            .takes
            .get(&(job, spec.name.clone()))
            .copied()
            .unwrap_or_default();
        let due = fx.now + takes;
        let line = format!("job {job:?} {}", spec.name).to_lowercase();
        let now = fx.now;
        fx.log.push((now, line));
        fx.jobs.push(InFlight {
            due,
            job,
            task: spec.name.clone(),
            event,
        });
        fx.most_jobs = fx.most_jobs.max(fx.jobs.len());
    }
}

impl FleetEffects for TestFx {
    fn now(&self) -> Timestamp {
        self.0.borrow().now
    }

    fn wait(&mut self, until: Timestamp) -> Fut<'_, Wake> {
        let mut fx = self.0.borrow_mut();
        let now = fx.now;
        let unread = fx.interrupts.iter().filter(|t| **t <= now).count()
            > usize::try_from(fx.signals_read).unwrap_or(usize::MAX);
        let interrupt = if unread {
            Some(now)
        } else {
            fx.interrupts.iter().copied().filter(|t| *t > now).min()
        };
        let (at, why) = [
            (fx.jobs.iter().map(|j| j.due).min(), Wake::Job),
            (
                fx.running.values().filter_map(|r| r.ends).min(),
                Wake::Worker,
            ),
            (interrupt, Wake::Interrupt),
        ]
        .into_iter()
        .filter_map(|(at, why)| Some((at?, why)))
        .filter(|(at, _)| *at <= until)
        .min_by_key(|(at, _)| *at)
        .unwrap_or((until, Wake::Deadline));
        fx.now = now.max(at);
        let woke = fx.now;
        fx.wakes.push((woke, why));
        assert!(fx.wakes.len() < 100_000, "the fleet never finished");
        Box::pin(async move { why })
    }

    fn signals(&mut self) -> u32 {
        let mut fx = self.0.borrow_mut();
        let n = fx.interrupts.iter().filter(|t| **t <= fx.now).count();
        fx.signals_read = u32::try_from(n).unwrap_or(u32::MAX);
        fx.signals_read
    }

    fn steer(&self) -> (bool, bool) {
        self.0.borrow().steer
    }

    fn poll_control(&mut self, running: &[TaskSpec], now: Timestamp) -> Vec<String> {
        let mut fx = self.0.borrow_mut();
        let due: Vec<(Timestamp, bool, bool)> =
            fx.steers.iter().filter(|s| s.0 <= now).copied().collect();
        fx.steers.retain(|s| s.0 > now);
        let mut lines = Vec::new();
        for (_, paused, stopping) in due {
            fx.steer = (paused, stopping);
            let line = format!("ctl paused={paused} stopping={stopping}");
            fx.log.push((now, line.clone()));
            lines.push(line);
            if !stopping {
                continue;
            }
            // `hank ctl stop` forwarded to each running task: its run stops a second later.
            for spec in running {
                if let Some(r) = fx.running.get_mut(&spec.name) {
                    r.ends = Some(now + SignedDuration::from_secs(1));
                    r.code = crate::exit::INTERRUPTED;
                }
                fx.log
                    .push((now, format!("forwarded stop {}", spec.name.to_lowercase())));
            }
        }
        lines
    }

    fn start_worker(
        &mut self,
        spec: &TaskSpec,
        _specs: &[TaskSpec],
        _left: Option<Duration>,
        now: Timestamp,
    ) -> Result<(u32, Option<u64>)> {
        let mut fx = self.0.borrow_mut();
        let run = fx.runs.get(&spec.name).copied().unwrap_or_default();
        fx.running.insert(
            spec.name.clone(),
            Running {
                ends: Some(now + run.takes),
                code: run.code,
                ignores_term: run.ignores_term,
            },
        );
        fx.pid += 1;
        fx.log
            .push((now, format!("start {}", spec.name.to_lowercase())));
        Ok((1000 + fx.pid, Some(7)))
    }

    fn adopt_worker(&mut self, task: &str, _pid: u32, _ticks: u64) {
        let mut fx = self.0.borrow_mut();
        let run = fx.runs.get(task).copied().unwrap_or_default();
        let ends = Some(fx.now + run.takes);
        fx.running.insert(
            task.to_string(),
            Running {
                ends,
                code: run.code,
                ignores_term: run.ignores_term,
            },
        );
    }

    fn ended_workers(&mut self) -> Vec<(String, Option<u8>)> {
        let mut fx = self.0.borrow_mut();
        let now = fx.now;
        let ended: Vec<(String, u8)> = fx
            .running
            .iter()
            .filter(|(_, r)| r.ends.is_some_and(|e| e <= now))
            .map(|(n, r)| (n.clone(), r.code))
            .collect();
        for (name, code) in &ended {
            fx.running.remove(name);
            fx.ended.insert(name.clone(), *code);
            fx.log
                .push((now, format!("reaped {}", name.to_lowercase())));
        }
        ended.into_iter().map(|(n, c)| (n, Some(c))).collect()
    }

    fn stop_worker(&mut self, task: &str, how: Stop) {
        let mut fx = self.0.borrow_mut();
        let now = fx.now;
        let Some(r) = fx.running.get_mut(task) else {
            return;
        };
        match how {
            Stop::Term if !r.ignores_term => {
                // `hank run` stops its call and saves: a second later, exit 130.
                let at = now + SignedDuration::from_secs(1);
                r.ends = Some(r.ends.map_or(at, |e| e.min(at)));
                r.code = crate::exit::INTERRUPTED;
            }
            Stop::Term => {}
            Stop::Kill => {
                r.ends = Some(now);
                r.code = 137;
            }
        }
        let what = if how == Stop::Term { "term" } else { "kill" };
        fx.log
            .push((now, format!("{what} {}", task.to_lowercase())));
    }

    fn run_figures(&mut self, spec: &TaskSpec) -> Option<RunFigures> {
        let fx = self.0.borrow();
        Some(RunFigures {
            exit_code: fx.ended.get(&spec.name).copied(),
            loops: 1,
            cost_usd: 0.25,
            agent: Some("claude".into()),
            reason: None,
            message: None,
        })
    }

    fn prepare(&mut self, spec: &TaskSpec) {
        let event = Event::WorktreeReady {
            task: spec.name.clone(),
            worktree: format!("/wt/{}", spec.slug),
            differs: vec![],
        };
        self.job(Job::Prepare, spec, event);
    }

    fn commit(&mut self, spec: &TaskSpec) {
        let event = Event::Committed {
            task: spec.name.clone(),
            outcome: Ok(vec![format!("{} item", spec.name)]),
        };
        self.job(Job::Commit, spec, event);
    }

    fn discard(&mut self, spec: &TaskSpec) {
        let event = Event::Discarded {
            task: spec.name.clone(),
        };
        self.job(Job::Discard, spec, event);
    }

    fn merge(&mut self, spec: &TaskSpec, _job: MergeJob) {
        let outcome = self
            .0
            .borrow_mut()
            .merges
            .get_mut(&spec.name)
            .and_then(VecDeque::pop_front)
            .unwrap_or(MergeOutcome::Merged);
        let event = Event::MergeEnded {
            task: spec.name.clone(),
            outcome,
        };
        self.job(Job::Merge, spec, event);
    }

    fn finished_jobs(&mut self) -> Result<Vec<Event>> {
        let mut fx = self.0.borrow_mut();
        let now = fx.now;
        let mut done: Vec<InFlight> = Vec::new();
        let mut left = Vec::new();
        for j in std::mem::take(&mut fx.jobs) {
            if j.due <= now {
                done.push(j)
            } else {
                left.push(j)
            }
        }
        fx.jobs = left;
        done.sort_by_key(|j| j.due);
        for j in &done {
            let line = format!("done {:?} {}", j.job, j.task).to_lowercase();
            fx.log.push((now, line));
        }
        Ok(done.into_iter().map(|j| j.event).collect())
    }

    fn free_memory(&mut self) -> Option<u64> {
        Some(16 << 30)
    }

    fn windows(&mut self, _now: Timestamp) -> Vec<WindowReading> {
        Vec::new()
    }

    fn fleet_cost(&mut self, _now: Timestamp) -> f64 {
        0.0
    }

    fn save(&mut self, file: &mut FleetFile, now: Timestamp) -> Result<()> {
        file.updated_at = Some(now);
        self.0.borrow_mut().saved.push(file.clone());
        Ok(())
    }

    fn tell_tasks(&mut self, told: &[TaskTold], _now: Timestamp) {
        self.0.borrow_mut().told.extend_from_slice(told);
    }

    fn say(&mut self, line: &str) {
        self.0.borrow_mut().said.push(line.to_string());
    }

    fn recording(&self) -> bool {
        true
    }

    fn record(&mut self, line: &str) {
        self.0.borrow_mut().record.push(line.to_string());
    }

    fn deliver<'a>(&'a mut self, _file: &'a FleetFile) -> Fut<'a, Result<Option<u8>>> {
        Box::pin(async { Ok(None) })
    }

    fn clean_up(&mut self) {
        let mut fx = self.0.borrow_mut();
        let now = fx.now;
        fx.log.push((now, "clean up".into()));
    }
}
