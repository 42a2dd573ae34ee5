//! The loop's waits, driven: a limit wait (rate and token caps, usage limits and windows,
//! backoff, an answer) saved and shown (status `waiting`, an event, a countdown), the silent
//! loop delay, a pause. The waiting is one effect ([`crate::effects::Effects::wait_until`]);
//! what ends a wait is the state machine's ([`crate::policy::run::Run::wait_cut`], `woke`).

use jiff::Timestamp;

use super::Engine;
use crate::effects::{News, Say, WaitSpec, Woke};
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::budget::{Resume, SavedWait, WaitReason, resume_wait};
use crate::policy::decide::UsageLimitPolicy;
use crate::policy::run::Waited;
use crate::policy::windows;
use crate::store::RunState;

impl Engine {
    /// Waits for a limit (rate limit, token limit, usage limit, backoff, an answer) with a
    /// countdown; Ctrl-C ends it.
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
        self.tell(News::Waiting { reason, until })?;
        // Inside Actions, a wait that outlasts the job ends the job now (its wait is saved).
        let waited = if self.fx.suspend_wait(until, self.run.deadline()) {
            Waited::Stop(ExitReason::MaxRuntime)
        } else {
            self.sleep_until(Some(reason), Some(until)).await
        };
        self.fx.say(Say::WaitDone);
        self.wait = None;
        if let Waited::Done = waited {
            if saved {
                self.state.wait = None;
                self.save()?;
            }
            self.tell(News::Status(RunState::Running))?;
        }
        Ok(waited)
    }

    /// At start: what to do with the usage-limit or backoff wait the last run was in
    /// ([`resume_wait`]; said when it is resumed).
    pub(super) fn saved_wait(&mut self, now: Timestamp) -> Resume {
        let (exit, limits) = (
            self.s.on_usage_limit.value,
            &self.s.max_window_percent.value,
        );
        let saved = (self.state.wait)
            .filter(|w| windows::saved_wait_stands(w, &self.state.windows, limits, now));
        let resume = resume_wait(saved, now, exit == UsageLimitPolicy::Exit);
        if let Resume::Wait(w) = resume {
            self.fx.say(Say::Info(&format!(
                "resuming the {} wait of the last run: no call before {} (`hank reset wait` to call at once)",
                w.reason.as_str(),
                crate::report::local_time(w.until)
            )));
        }
        resume
    }

    /// Sleeps until `until` (`None`: until a command ends it), MAX_RUNTIME, Ctrl-C and the
    /// commands that end a wait ending it earlier; a wait for `reason` shows its countdown
    /// (`None`: the silent loop delay or a pause).
    pub(super) async fn sleep_until(
        &mut self,
        reason: Option<WaitReason>,
        until: Option<Timestamp>,
    ) -> Waited {
        let spec = WaitSpec {
            end: until.map(|u| self.run.wait_end(u)),
            countdown: reason.zip(until),
        };
        loop {
            match self.fx.wait_until(spec).await {
                Woke::Interrupted => return Waited::Stop(ExitReason::Interrupted),
                Woke::Elapsed(now) => {
                    let shown = reason.is_some();
                    return until.map_or(Waited::Done, |u| self.run.woke(now, u, shown));
                }
                Woke::Control(commands) => {
                    self.take_control(commands);
                    if let Some(waited) = self.run.wait_cut(self.fx.now()) {
                        return waited;
                    }
                }
            }
        }
    }

    /// Paused by a control command: `state: waiting` until a resume or a stop comes (polled
    /// each second); Ctrl-C ends it.
    pub(super) async fn paused(&mut self) -> Result<Waited> {
        self.wait = Some((WaitReason::Paused, self.fx.now()));
        self.tell(News::Status(RunState::Waiting))?;
        let line = "paused: no call before a resume (hank ctl resume)";
        self.fx.say(Say::Info(line));
        let waited = self.sleep_until(None, None).await;
        self.wait = None;
        Ok(waited)
    }
}
