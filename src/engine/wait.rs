//! The loop's waits: rate and token caps, usage limits, backoff, the loop delay — each with
//! `state: waiting` in status.json, an event, a countdown, and Ctrl-C ending it at once.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::Engine;
use crate::effects::{Say, Slept};
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
        self.fx
            .log(&format!("waiting ({}) until {until}", reason.as_str()));
        // Issue 28 hook (bounded for CI): inside Actions, a wait that outlasts the job ends
        // the job now — the state with its wait is saved above — instead of sleeping on a
        // paid runner; the step summary says when the next job continues.
        let in_job = crate::policy::ci::wait_in_job(until, self.run_deadline, self.fx.now());
        let waited = match in_job {
            crate::policy::ci::JobWait::StopAndContinue { after }
                if self
                    .fx
                    .suspend_job(&crate::policy::ci::continues_line(after)) =>
            {
                Waited::Stop(ExitReason::MaxRuntime)
            }
            _ => self.sleep_until(Some(reason), until).await,
        };
        self.fx.say(Say::WaitDone);
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
        let (now, limits) = (self.fx.now(), &self.s.max_window_percent.value);
        let saved = (self.state.wait).filter(|w| {
            crate::policy::windows::saved_wait_stands(w, &self.state.windows, limits, now)
        });
        match resume_wait(saved, now, exit) {
            Resume::Call => {
                if self.state.wait.take().is_some() {
                    self.save()?;
                }
                Ok(None)
            }
            Resume::ExitUsageLimit => Ok(Some(ExitReason::UsageLimit)),
            Resume::ExitUsageWindow => Ok(Some(ExitReason::UsageWindow)),
            Resume::Wait(w) => {
                self.fx.say(Say::Info(&format!(
                    "resuming the {} wait of the last run: no call before {} (`hank reset wait` to call at once)",
                    w.reason.as_str(),
                    crate::report::local_time(w.until)
                )));
                match self.wait_until(w.reason, w.until).await? {
                    Waited::Done => Ok(None),
                    Waited::Stop(r) => Ok(Some(r)),
                }
            }
        }
    }

    /// A command that came during a wait: `Some` when it ends the wait (a stop, or a retry
    /// now: the gates are checked again).
    fn control_cut(&mut self) -> Option<Waited> {
        if !self.poll_control() {
            return None;
        }
        match self.run.next(self.fx.now()) {
            Step::Wait { .. } => None,
            Step::Stop(r) => Some(Waited::Stop(r)),
            _ => Some(Waited::Done),
        }
    }

    /// Sleeps until `until` in steps of at most a second (commands polled), MAX_RUNTIME and
    /// Ctrl-C ending it; a wait for `reason` shows its countdown (`None`: the silent loop
    /// delay, which a `retry-now` ends too).
    pub(super) async fn sleep_until(
        &mut self,
        reason: Option<WaitReason>,
        until: Timestamp,
    ) -> Waited {
        let end = self.run_deadline.map_or(until, |d| d.min(until));
        loop {
            let now = self.fx.now();
            if now >= end {
                let cut = end < until && (reason.is_none() || now < until);
                return if cut {
                    Waited::Stop(ExitReason::MaxRuntime)
                } else {
                    Waited::Done
                };
            }
            if let Some(cut) = self.control_cut() {
                return cut;
            }
            if let Some(reason) = reason.map(WaitReason::as_str) {
                self.fx.say(Say::WaitTick { reason, until, now });
                // Someone deleted status.json during a long wait: put it back.
                if self.fx.status_missing() {
                    let _ = self.write_status(RunState::Waiting);
                }
            }
            let step = crate::policy::time::tick(now, end, SignedDuration::from_secs(1));
            if self.fx.sleep(step).await == Slept::Interrupted {
                return Waited::Stop(ExitReason::Interrupted);
            }
        }
    }

    /// Paused by a control command: `state: waiting` until a resume or a stop comes (polled
    /// each second); Ctrl-C ends it.
    pub(super) async fn paused(&mut self) -> Result<Waited> {
        self.wait = Some((WaitReason::Paused, self.fx.now()));
        self.write_status(RunState::Waiting)?;
        let line = "paused: no call before a resume (hank ctl resume)";
        self.fx.say(Say::Info(line));
        let waited = loop {
            if self.fx.sleep(Duration::from_secs(1)).await == Slept::Interrupted {
                break Waited::Stop(ExitReason::Interrupted);
            }
            if let Some(cut) = self.control_cut() {
                break cut;
            }
        };
        self.wait = None;
        Ok(waited)
    }
}
