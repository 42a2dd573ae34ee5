//! The engine's test effects: a clock that moves only when slept on (a 5-hour wait runs at
//! once), control facts fed in order, answers and check results scripted, and every write
//! (state.json, status.json, events, log lines, terminal lines) kept in memory. No process
//! is spawned, nothing sleeps.

use std::cell::{RefCell, RefMut};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::effects::{AgentAnswer, AgentCall, CheckCall, Checked, Effects, Fut, Say, Slept};
use crate::error::Result;
use crate::policy::run::Control;
use crate::policy::time::Clock;
use crate::policy::verify::CheckResult;
use crate::progress::{Baseline, Progress};
use crate::store::{Event, State, Status};

/// A scripted check: passes or not, or the user interrupts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Script {
    Pass,
    Fail,
    Interrupted,
}

/// The effects handed to the engine; the test keeps a clone to script and read them.
#[derive(Clone, Default)]
pub(super) struct TestEffects(pub Rc<RefCell<Fx>>);

pub(super) struct Fx {
    pub now: Timestamp,
    pub slept: u32,
    pub controls: VecDeque<Vec<Control>>,
    /// One per call, in order (a call past the end answers `Analysis::default()`).
    pub answers: VecDeque<AgentAnswer>,
    /// What each call does to the project's fix_plan.md (written as the agent would).
    pub plan_edits: VecDeque<Option<String>>,
    /// How long each call takes on the clock.
    pub call_takes: SignedDuration,
    pub checks: VecDeque<Script>,
    /// An interrupt comes once this many sleeps have passed (`None`: never).
    pub interrupt_after_sleeps: Option<u32>,
    pub interrupted: bool,
    pub project: PathBuf,
    // What the driver did.
    /// Each call: its number, the agent, the argv and when it started.
    pub calls: Vec<(u64, String, Vec<String>, Timestamp)>,
    pub checks_run: Vec<crate::policy::verify::CheckKind>,
    pub saved: Vec<State>,
    pub statuses: Vec<Status>,
    pub events: Vec<Event>,
    pub log: Vec<String>,
    pub said: Vec<String>,
    /// Files written ([`Effects::write_file`]) and delivery records saved, in order.
    pub written: Vec<(PathBuf, Vec<u8>)>,
    pub delivery_records: Vec<crate::store::schema::Delivery>,
}

impl Default for Fx {
    fn default() -> Self {
        Self {
            now: super::t0(),
            slept: 0,
            controls: VecDeque::new(),
            answers: VecDeque::new(),
            plan_edits: VecDeque::new(),
            call_takes: SignedDuration::from_mins(2),
            checks: VecDeque::new(),
            interrupt_after_sleeps: None,
            interrupted: false,
            project: PathBuf::new(),
            calls: Vec::new(),
            checks_run: Vec::new(),
            saved: Vec::new(),
            statuses: Vec::new(),
            events: Vec::new(),
            log: Vec::new(),
            said: Vec::new(),
            written: Vec::new(),
            delivery_records: Vec::new(),
        }
    }
}

impl Clock for TestEffects {
    fn now(&self) -> Timestamp {
        self.0.borrow().now
    }
}

impl TestEffects {
    pub(super) fn fx(&self) -> RefMut<'_, Fx> {
        self.0.borrow_mut()
    }
}

impl Fx {
    fn advance(&mut self, d: SignedDuration) {
        self.now += d;
    }
}

impl Effects for TestEffects {
    fn sleep(&mut self, d: Duration) -> Fut<'_, Slept> {
        let mut f = self.fx();
        f.advance(SignedDuration::try_from(d).unwrap());
        f.slept += 1;
        if f.interrupt_after_sleeps == Some(f.slept) {
            f.interrupted = true;
            return Box::pin(std::future::ready(Slept::Interrupted));
        }
        Box::pin(std::future::ready(Slept::Done))
    }

    fn interrupted(&self) -> bool {
        self.0.borrow().interrupted
    }

    fn poll_control(&mut self) -> Vec<Control> {
        self.fx().controls.pop_front().unwrap_or_default()
    }

    fn call_agent<'a>(&'a mut self, call: AgentCall<'a>) -> Fut<'a, Result<AgentAnswer>> {
        let mut f = self.fx();
        let name = call.agent.name().to_owned();
        let at = f.now;
        f.calls.push((call.number, name, call.args.to_vec(), at));
        let takes = f.call_takes;
        f.advance(takes);
        if let Some(Some(plan)) = f.plan_edits.pop_front() {
            std::fs::write(f.project.join(".hank/fix_plan.md"), plan).unwrap();
        }
        let answer = f.answers.pop_front().unwrap_or_default();
        Box::pin(std::future::ready(Ok(answer)))
    }

    fn baseline(&mut self, _project: PathBuf, plan: String) -> Fut<'_, Baseline> {
        Box::pin(std::future::ready(Baseline::plan_only(&plan)))
    }

    fn measure(&mut self, _project: PathBuf, base: Baseline, after: String) -> Fut<'_, Progress> {
        let project = self.0.borrow().project.clone();
        Box::pin(std::future::ready(crate::progress::measure(
            &project, &base, &after,
        )))
    }

    fn run_check<'a>(&'a mut self, check: CheckCall<'a>) -> Fut<'a, Result<Checked>> {
        let mut f = self.fx();
        f.checks_run.push(check.kind);
        let script = f.checks.pop_front().unwrap_or(Script::Pass);
        f.advance(SignedDuration::from_secs(3));
        if script == Script::Interrupted {
            f.interrupted = true;
        }
        let result = CheckResult {
            kind: check.kind,
            passed: script == Script::Pass,
            command: check.command.to_owned(),
            exit_code: match script {
                Script::Pass => Some(0),
                Script::Fail => Some(1),
                Script::Interrupted => None,
            },
            timed_out: false,
            interrupted: script == Script::Interrupted,
            duration_ms: 3000,
            at: f.now,
            log: format!(".hank/logs/verify-{:05}.log", check.number),
            number: check.after_loop,
            removed_tests: Vec::new(),
        };
        let tail = if result.passed {
            String::new()
        } else {
            "test_x FAILED\n".into()
        };
        Box::pin(std::future::ready(Ok(Checked { result, tail })))
    }

    fn persist(&mut self, state: &State, _durable: bool) -> Result<()> {
        self.fx().saved.push(state.clone());
        Ok(())
    }

    fn publish(&mut self, status: &Status) -> Result<()> {
        self.fx().statuses.push(status.clone());
        Ok(())
    }

    fn emit(&mut self, event: &Event, _cost_usd: f64, _items: (u32, u32)) -> Result<()> {
        self.fx().events.push(event.clone());
        Ok(())
    }

    fn log(&mut self, line: &str) {
        self.fx().log.push(line.to_owned());
    }

    fn say(&mut self, what: Say<'_>) {
        match what {
            Say::Info(m) | Say::Warn(m) => self.fx().said.push(m.to_owned()),
            _ => {}
        }
    }

    fn questions(&mut self, _questions: &[String]) {}

    fn prompt_file(&mut self, number: u64) -> PathBuf {
        (self.0.borrow().project).join(format!(".hank/logs/loop-{number}.prompt"))
    }

    fn write_file(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.fx().written.push((path.to_path_buf(), bytes.to_vec()));
        Ok(())
    }

    fn delivery_env(&self) -> Option<crate::deliver::in_run::RunRecords> {
        let project = self.0.borrow().project.clone();
        Some(crate::deliver::in_run::RunRecords {
            events: String::new(),
            delivery_file: project.join(".hank").join(crate::deliver::DELIVERY_FILE),
            secrets: Vec::new(),
        })
    }

    fn save_delivery_record(
        &mut self,
        _project: &Path,
        rec: &crate::store::schema::Delivery,
    ) -> Result<()> {
        self.fx().delivery_records.push(rec.clone());
        Ok(())
    }

    fn ensure_dirs(&mut self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    fn prune_logs(&mut self, _keep: u64, _newest: (u64, u64)) {}

    fn reserve_call(
        &mut self,
        _now: Timestamp,
        _limits: &crate::policy::fleet::FleetLimits,
    ) -> Result<crate::policy::fleet::FleetVerdict> {
        Ok(crate::policy::fleet::FleetVerdict::Go)
    }

    fn settle_call(&mut self, _now: Timestamp, _tokens: u64, _usd: f64) -> Result<()> {
        Ok(())
    }

    fn adopt_windows(&mut self, _own: &mut crate::policy::windows::Windows, _now: Timestamp) {}

    fn publish_windows(&mut self, _own: &crate::policy::windows::Windows, _now: Timestamp) {}

    fn suspend_job(&mut self, _line: &str) -> bool {
        false
    }

    fn desktop_notify(&mut self, _title: &str, _body: &str) {}
}
