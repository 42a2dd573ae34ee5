//! The loop's waits: rate and token caps, usage limits, backoff, the loop delay — each with
//! `state: waiting` in status.json, an event, a countdown, and Ctrl-C ending it at once.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::Engine;
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::budget::{Resume, SavedWait, WaitReason, resume_wait};
use crate::policy::decide::UsageLimitPolicy;
use crate::policy::run::Step;
use crate::store::{EventKind, RunState};

/// How a wait ended.
pub(super) enum Waited {
    Done,
    /// The run must stop: Ctrl-C/SIGTERM/SIGHUP (`interrupted`) or MAX_RUNTIME reached during
    /// the wait (`max_runtime`).
    Stop(ExitReason),
}

impl Engine {
    /// Waits (rate limit, token limit, usage limit, backoff) with a countdown; Ctrl-C ends it.
    pub(super) async fn wait_until(
        &mut self,
        reason: WaitReason,
        until: Timestamp,
    ) -> Result<Waited> {
        self.wait = Some((reason, until));
        // A usage-limit or backoff wait is saved: a restart resumes it instead of calling.
        // Every wait saves the state first (the last loop may not be on disk yet when the
        // next loop was to start at once): a kill -9 during a wait loses nothing, the last
        // call's tokens included (the token cap on restart).
        let saved = reason.is_saved();
        if saved {
            self.state.wait = Some(SavedWait { reason, until });
        }
        self.save()?;
        self.write_status(RunState::Waiting)?;
        self.emit(EventKind::Waiting { reason, until })?;
        self.store.log(
            self.clock.now(),
            &format!("waiting ({}) until {until}", reason.as_str()),
        );
        // Issue 28 hook (bounded for CI): inside Actions, a wait that outlasts the job ends
        // the job now — the state with its wait is saved above — instead of sleeping on a
        // paid runner; the step summary says when the next job continues.
        let waited =
            match crate::policy::ci::wait_in_job(until, self.run_deadline, self.clock.now()) {
                crate::policy::ci::JobWait::StopAndContinue { after } if in_actions() => {
                    crate::store::portable::append_step_summary(
                        &crate::policy::ci::continues_line(after),
                    );
                    Waited::Stop(ExitReason::MaxRuntime)
                }
                _ => self.sleep_until_with_ticks(reason, until).await,
            };
        self.reporter.wait_done();
        self.wait = None;
        if let Waited::Done = waited {
            if saved {
                self.state.wait = None;
                self.save()?;
            }
            self.write_status(RunState::Running)?;
        }
        Ok(waited)
    }

    /// At start: the usage-limit or backoff wait the last run was in, resumed with its
    /// countdown (no call before it ends), or `usage_limit` with ON_USAGE_LIMIT=exit.
    pub(super) async fn resume_saved_wait(&mut self) -> Result<Option<ExitReason>> {
        let exit = self.s.on_usage_limit.value == UsageLimitPolicy::Exit;
        // A usage-window wait stands only while a window is still at this run's limit
        // (MAX_WINDOW_PERCENT may have been raised or turned off since).
        let now = self.clock.now();
        let saved = self.state.wait.filter(|w| {
            w.reason != WaitReason::UsageWindow
                || matches!(
                    crate::policy::windows::check(
                        &self.state.windows,
                        &self.s.max_window_percent.value,
                        now,
                    ),
                    crate::policy::windows::WindowCheck::Wait { .. }
                )
        });
        match resume_wait(saved, self.clock.now(), exit) {
            Resume::Call => {
                if self.state.wait.take().is_some() {
                    self.save()?;
                }
                Ok(None)
            }
            Resume::ExitUsageLimit => Ok(Some(ExitReason::UsageLimit)),
            Resume::ExitUsageWindow => Ok(Some(ExitReason::UsageWindow)),
            Resume::Wait(w) => {
                self.reporter.info(&format!(
                    "resuming the {} wait of the last run: no call before {} (`hank reset wait` to call at once)",
                    w.reason.as_str(),
                    crate::report::local_time(w.until)
                ));
                match self.wait_until(w.reason, w.until).await? {
                    Waited::Done => Ok(None),
                    Waited::Stop(r) => Ok(Some(r)),
                }
            }
        }
    }

    pub(super) async fn sleep_until_with_ticks(
        &mut self,
        reason: WaitReason,
        until: Timestamp,
    ) -> Waited {
        loop {
            let now = self.clock.now();
            if now >= until {
                return Waited::Done;
            }
            if self.run_deadline.is_some_and(|d| now >= d) {
                return Waited::Stop(ExitReason::MaxRuntime);
            }
            if self.poll_control() {
                match self.run.next(now) {
                    Step::Wait { .. } => {}
                    Step::Stop(r) => return Waited::Stop(r),
                    // Cut short (retry now): the gates are checked again.
                    _ => return Waited::Done,
                }
            }
            self.reporter.wait_tick(reason.as_str(), until, now);
            // Someone deleted status.json during a long wait: put it back.
            if !self.store.status_path().exists() {
                let _ = self.write_status(RunState::Waiting);
            }
            let end = self.run_deadline.map_or(until, |d| d.min(until));
            let left = end.duration_since(now);
            let step = left
                .min(SignedDuration::from_secs(1))
                .max(SignedDuration::ZERO);
            let step = Duration::try_from(step).unwrap_or(Duration::from_millis(100));
            tokio::select! {
                () = self.clock.sleep(step) => {}
                changed = self.cancel.changed() => {
                    if changed.is_err() || self.interrupted() {
                        return Waited::Stop(ExitReason::Interrupted);
                    }
                }
            }
        }
    }

    /// Paused by a control command: `state: waiting` until a resume or a stop comes (polled
    /// each second); Ctrl-C ends it.
    pub(super) async fn paused(&mut self) -> Result<Waited> {
        self.wait = Some((WaitReason::Paused, self.clock.now()));
        self.write_status(RunState::Waiting)?;
        self.reporter
            .info("paused: no call before a resume (hank ctl resume)");
        let waited = self.paused_loop().await;
        self.wait = None;
        waited
    }

    async fn paused_loop(&mut self) -> Result<Waited> {
        loop {
            tokio::select! {
                () = self.clock.sleep(Duration::from_secs(1)) => {}
                changed = self.cancel.changed() => {
                    if changed.is_err() || self.interrupted() {
                        return Ok(Waited::Stop(ExitReason::Interrupted));
                    }
                }
            }
            if self.poll_control() {
                match self.run.next(self.clock.now()) {
                    Step::Wait { .. } => {}
                    Step::Stop(r) => return Ok(Waited::Stop(r)),
                    _ => return Ok(Waited::Done),
                }
            }
        }
    }

    /// The silent loop delay; control commands are taken about once a second meanwhile (a
    /// `retry-now` ends it, a `stop` or a pause is taken at once).
    pub(super) async fn sleep_until(&mut self, until: Timestamp) -> Waited {
        let end = self.run_deadline.map_or(until, |d| d.min(until));
        loop {
            let now = self.clock.now();
            if now >= end {
                return if end < until {
                    Waited::Stop(ExitReason::MaxRuntime)
                } else {
                    Waited::Done
                };
            }
            if let Some(waited) = self.control_during_wait(now) {
                return waited;
            }
            let left = end.duration_since(now).min(SignedDuration::from_secs(1));
            let step = Duration::try_from(left).unwrap_or(Duration::ZERO);
            tokio::select! {
                () = self.clock.sleep(step) => {}
                _ = self.cancel.changed() => return Waited::Stop(ExitReason::Interrupted),
            }
        }
    }

    /// Control commands during a wait: `None` while the state machine still waits, else how
    /// the wait ends (a stop, or cut short: the gates again).
    fn control_during_wait(&mut self, now: Timestamp) -> Option<Waited> {
        if !self.poll_control() {
            return None;
        }
        match self.run.next(now) {
            Step::Wait { .. } => None,
            Step::Stop(r) => Some(Waited::Stop(r)),
            _ => Some(Waited::Done),
        }
    }
}

/// Whether hank runs inside GitHub Actions (`GITHUB_ACTIONS=true`).
fn in_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v.trim() == "true")
}
