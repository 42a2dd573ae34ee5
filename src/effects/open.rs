//! [`Real`]: `hank run`'s effects. Opening them loads the stored state (moved aside when
//! unreadable) and stops what a hank killed with SIGKILL left running.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;

use super::{AgentAnswer, AgentCall, CheckCall, Checked, Effects, Fut, Say, Slept};
use crate::agent::process;
use crate::error::Result;
use crate::policy::run::Control;
use crate::policy::time::Clock;
use crate::progress::{Baseline, Progress};
use crate::report::{DisplayMode, Reporter};
use crate::settings::Settings;
use crate::store::{Event, LockGuard, State, Status, Store};

/// SIGTERM to SIGKILL for what a killed hank left running (its agent's call is over: only
/// its cleanup is waited for).
const ORPHAN_GRACE: Duration = Duration::from_secs(2);

/// The real effects: the clock (`SystemClock`, or `HANK_NOW`'s), tokio's timer, the
/// project's store and lock, the terminal, NOTIFY, the `hank ctl` journal
/// ([`crate::control::LiveControl`]) and the signal counter.
pub(crate) struct Real {
    pub(super) clock: Box<dyn Clock>,
    pub(super) control: Option<crate::control::LiveControl>,
    pub(super) store: Store,
    pub(super) lock: LockGuard,
    pub(super) reporter: Reporter,
    pub(super) cancel: watch::Receiver<u32>,
    /// The tag in every agent's environment (descendants and orphans are found by it).
    pub(super) marker: process::Marker,
    pub(super) secrets: Vec<String>,
    pub(super) notify: crate::notify::Hook,
    /// `--json`: events on stdout too.
    pub(super) json: bool,
    /// LOG_RETENTION: the first loop and check whose logs are kept (`None` before the first
    /// pruning of the run).
    pub(super) logs_kept_from: Option<(u64, u64)>,
    /// The last status.json published (put back if someone deletes it during a wait).
    pub(super) last_status: Option<Status>,
    /// SANDBOX: the agent's confinement, its egress proxy and private TMPDIR
    /// (`effects/agent.rs`).
    pub(super) sandbox: super::agent::Sandboxing,
    /// Control commands read during the last agent call (a `stop` among them ended the
    /// call), handed to the loop at its next poll.
    pub(super) taken_in_call: Vec<Control>,
}

/// What a run holds before its async runtime starts: the project's store (its call ledger
/// copied in the per-user state directory, outside the agent's reach), the project's lock,
/// and CONTROL_TOPIC's poller with its note.
pub(crate) struct Claimed {
    store: Store,
    lock: LockGuard,
    remote: Option<crate::control::remote::RemotePoller>,
    pub(crate) note: Option<String>,
}

/// Claims the project of a run: the store and its lock; hank made the subreaper of the
/// agent's descendants that leave its group (stopped with it), out of the agent's reach
/// through /proc; CONTROL_TOPIC's signed remote commands read on a thread of their own.
pub(crate) fn claim(s: &Settings) -> Result<Claimed> {
    let copy = crate::store::userdir::project_dir(&s.project_dir)?.join("calls");
    let store = Store::new(&s.project_dir)
        .with_ledger_copy(copy)
        .with_user_control()?;
    store.ensure_dirs()?;
    let lock = store.lock()?;
    // A hank killed mid-write left its temp file: gone now that this run holds the project.
    store.remove_stale_temps(crate::store::STALE_TEMP_AGE);
    process::become_subreaper();
    process::protect_self();
    let (remote, note) = crate::control::remote::topic(s)?.map_or(Ok((None, None)), |topic| {
        crate::control::remote::RemotePoller::start(
            s.project_dir.clone(),
            store.clone(),
            topic,
            crate::control::remote::POLL_EVERY,
        )
    })?;
    Ok(Claimed {
        store,
        lock,
        remote,
        note,
    })
}

impl Real {
    /// Opens the effects of a run in the `claimed` project and loads its state. The
    /// warnings found on the way (a state moved aside, leftovers stopped) come back with it.
    pub(crate) fn open(
        s: &Settings,
        claimed: Claimed,
        cancel: watch::Receiver<u32>,
        clock: Box<dyn Clock>,
    ) -> Result<(Self, State, Vec<String>)> {
        let Claimed {
            store,
            lock,
            remote,
            ..
        } = claimed;
        let now = clock.now();
        let mut loaded = store.load_state(now)?;
        loaded.state.ledger.prune(now);
        let control =
            crate::control::LiveControl::open_at(store.clone(), Some((std::process::id(), now)))
                .with_remote(remote);
        let (sandbox, sandbox_warnings) = super::agent::Sandboxing::open(s)?;
        let mut real = Self {
            sandbox,
            clock,
            control: Some(control),
            reporter: Reporter::new(DisplayMode::detect(), s.verbose.value),
            marker: process::Marker::new(&s.project_dir),
            notify: crate::notify::Hook::new(s, now),
            secrets: crate::agent::redact::secret_values(),
            json: s.json,
            logs_kept_from: None,
            last_status: None,
            store,
            lock,
            cancel,
            taken_in_call: Vec::new(),
        };
        let mut warnings = real.stop_leftovers();
        warnings.extend(sandbox_warnings);
        if let Some(aside) = loaded.moved_aside {
            warnings.push(format!(
                "state.json {}; moved it aside to {} and started a fresh state",
                loaded.problem,
                aside.display()
            ));
        }
        if !loaded.clamped.is_empty() {
            warnings.push(format!(
                "state.json held times in the future (the clock went back?): {} set to now",
                loaded.clamped.join(", ")
            ));
        }
        warnings.extend(real.store.take_notes());
        Ok((real, loaded.state, warnings))
    }

    /// A hank of this project killed with SIGKILL may have left its agent running (its
    /// group, and anything carrying the project's marker) or its VERIFY_COMMAND: we hold the
    /// lock, so no loop of the project runs and all of it is left over.
    fn stop_leftovers(&mut self) -> Vec<String> {
        let mut warnings = Vec::new();
        let recorded = self.lock.orphaned_agent();
        // Descendants that left the agent's group (and maybe dropped the marker) were
        // recorded while it ran.
        let procs = self.lock.orphaned_procs();
        let stopped = process::stop_recorded(&procs, ORPHAN_GRACE)
            + process::stop_orphans(&self.marker.project, recorded, ORPHAN_GRACE);
        if stopped > 0 {
            warnings.push(format!(
                "stopped {stopped} agent process(es) left running by a hank that was killed{}",
                recorded.map_or_else(String::new, |(pgid, _)| format!(" (process group {pgid})"))
            ));
        }
        if recorded.is_some() || !procs.is_empty() {
            self.lock.record_agent(None);
        }
        if let Some((pgid, ticks)) = self.lock.orphaned_verify() {
            if process::stop_orphan_group(pgid, ticks) {
                warnings.push(format!(
                    "stopped the VERIFY_COMMAND left running by a hank that was killed (process group {pgid})"
                ));
            }
            self.lock.record_verify(None);
        }
        warnings
    }
}

impl Clock for Real {
    fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

impl Effects for Real {
    fn delivery_env(&self) -> Option<crate::deliver::in_run::RunRecords> {
        Some(crate::deliver::in_run::RunRecords {
            events: crate::deliver::events_text(&self.store),
            delivery_file: self
                .store
                .path(crate::store::HankFile::Events)
                .with_file_name(crate::deliver::DELIVERY_FILE),
            secrets: self.secrets.clone(),
        })
    }

    fn save_delivery_record(
        &mut self,
        project: &Path,
        rec: &crate::store::schema::Delivery,
    ) -> Result<()> {
        crate::deliver::record::save(project, &mut rec.clone(), self.now())
    }

    fn sleep(&mut self, d: Duration) -> Fut<'_, Slept> {
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(d) => Slept::Done,
                changed = self.cancel.changed() => {
                    if changed.is_err() || *self.cancel.borrow() > 0 {
                        Slept::Interrupted
                    } else {
                        Slept::Done
                    }
                }
            }
        })
    }

    fn interrupted(&self) -> bool {
        *self.cancel.borrow() > 0
    }

    fn poll_control(&mut self) -> Vec<Control> {
        let now = self.clock.now();
        let mut taken = std::mem::take(&mut self.taken_in_call);
        taken.extend(self.sandbox.take_notes());
        taken.extend(
            self.control
                .as_mut()
                .map(|c| c.poll(now))
                .unwrap_or_default(),
        );
        taken
    }

    fn control_log(&mut self) -> (Vec<crate::control::Taken>, Vec<String>) {
        self.control
            .as_mut()
            .map(crate::control::LiveControl::take_log)
            .unwrap_or_default()
    }

    fn call_agent<'a>(&'a mut self, call: AgentCall<'a>) -> Fut<'a, Result<AgentAnswer>> {
        Box::pin(self.call(call))
    }

    fn snapshot_tree(&mut self, project: &std::path::Path) -> Option<String> {
        let index = std::env::temp_dir().join(format!(
            "hank-review-index-{}-{}",
            std::process::id(),
            self.clock.now().as_nanosecond()
        ));
        crate::git::Checkout::at(project).worktree_tree(&index).ok()
    }

    fn diff_trees(
        &mut self,
        project: &std::path::Path,
        from: &str,
        to: &str,
    ) -> Option<(String, String)> {
        crate::git::Checkout::at(project).diff_trees(from, to).ok()
    }

    fn baseline(&mut self, project: PathBuf, plan: String) -> Fut<'_, Baseline> {
        Box::pin(crate::progress::baseline_off_thread(project, plan))
    }

    fn measure(
        &mut self,
        project: PathBuf,
        base: Baseline,
        plan_after: String,
    ) -> Fut<'_, Progress> {
        Box::pin(crate::progress::measure_off_thread(
            project, base, plan_after,
        ))
    }

    fn run_check<'a>(&'a mut self, check: CheckCall<'a>) -> Fut<'a, Result<Checked>> {
        Box::pin(self.check(check))
    }

    fn persist(&mut self, state: &State, durable: bool) -> Result<()> {
        self.store.save_state_with(state, durable)
    }

    fn publish(&mut self, status: &Status) -> Result<()> {
        let mut status = status.clone();
        self.sandbox.describe_in(&mut status);
        self.store.write_status(&status)?;
        self.last_status = Some(status);
        Ok(())
    }

    fn restore_status(&mut self) {
        if let Some(status) = &self.last_status
            && !self.store.path(crate::store::HankFile::Status).exists()
        {
            let _ = self.store.write_status(status);
        }
    }

    fn emit(&mut self, event: &Event, cost_usd: f64, items: (u32, u32)) -> Result<()> {
        self.write_event(event, cost_usd, items)
    }

    fn log(&mut self, line: &str) {
        self.store.log(self.clock.now(), line);
    }

    fn say(&mut self, what: Say<'_>) {
        self.show(what);
    }

    fn questions(&mut self, questions: &[String]) {
        self.notify.questions(questions);
    }

    fn prompt_file(&mut self, number: u64) -> PathBuf {
        self.store.loop_log(number, "prompt")
    }

    fn write_file(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        crate::store::write_atomic(path, bytes, false)
            .map_err(|e| crate::error::HankError::io("failed to write", path, e))
    }

    fn ensure_dirs(&mut self) -> Result<Vec<String>> {
        self.store.ensure_dirs()?;
        Ok(self.store.take_notes())
    }

    fn prune_logs(&mut self, keep: u64, newest: (u64, u64)) {
        if keep == 0 {
            return;
        }
        let from = |n: u64| n.saturating_sub(keep).saturating_add(1);
        let from = (from(newest.0), from(newest.1));
        // The folder is scanned once, then only the logs that fell out of the window go.
        match self.logs_kept_from.replace(from) {
            None => {
                self.store.prune_logs(from.0, from.1);
            }
            Some(before) => self.store.remove_logs(before.0..from.0, before.1..from.1),
        }
    }

    fn reserve_call(
        &mut self,
        now: Timestamp,
        limits: &crate::policy::fleet::FleetLimits,
    ) -> Result<crate::policy::fleet::FleetVerdict> {
        crate::store::fleet_ledger::reserve_from_env(now, limits)
    }

    fn settle_call(&mut self, now: Timestamp, tokens: u64, usd: f64) -> Result<()> {
        crate::store::fleet_ledger::settle_from_env(now, tokens, usd)
    }

    fn adopt_windows(&mut self, own: &mut crate::policy::windows::Windows, now: Timestamp) {
        crate::store::shared_windows::adopt(own, now);
    }

    fn publish_windows(&mut self, own: &crate::policy::windows::Windows, now: Timestamp) {
        // A run that cannot share its readings still applies them itself.
        let _ = crate::store::shared_windows::publish(own, now);
    }

    fn suspend_job(&mut self, line: &str) -> bool {
        let in_actions = std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v.trim() == "true");
        if in_actions {
            crate::store::portable::append_step_summary(line);
        }
        in_actions
    }

    fn desktop_notify(&mut self, title: &str, body: &str) {
        crate::report::notify(title, body);
    }

    fn close(&mut self) -> Fut<'_, ()> {
        let cancel = self.cancel.clone();
        Box::pin(self.notify.finish(cancel))
    }
}
