//! The loop's waits, driven: a limit wait (rate and token caps, usage limits and windows,
//! backoff, an answer) saved and shown (status `waiting`, an event, a countdown), the silent
//! loop delay, a pause. The waiting is one effect ([`crate::effects::Effects::wait_until`]);
//! what ends a wait is the state machine's ([`crate::policy::run::Run::wait_cut`], `woke`).

use jiff::Timestamp;

use super::Engine;
use crate::effects::{News, Say, WaitSpec, Woke};
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::policy::budget::{Resume, SavedWait, WaitReason, resume_wait};
use crate::policy::decide::UsageLimitPolicy;
use crate::policy::run::{Fact, WaitFor, Waited};
use crate::policy::windows;
use crate::store::RunState;

impl Engine {
    /// Waits as the state machine said (`until` `None`: a pause). A shown wait (a limit, an
    /// answer, a pause: [`WaitFor::shown`]) is status `waiting` with its reason, saved first
    /// (a kill -9 during it loses nothing, the last call's tokens included; a usage-limit,
    /// window or backoff wait is resumed by a restart) and counted down to its end; the loop
    /// delay is silent. MAX_RUNTIME, Ctrl-C and commands from outside end it earlier.
    pub(super) async fn wait_step(
        &mut self,
        until: Option<Timestamp>,
        why: WaitFor,
    ) -> Result<Option<ExitReason>> {
        if why == WaitFor::Answer || (until.is_none() && why != WaitFor::Paused) {
            let what = format!("internal: the loop cannot wait for {why:?} until {until:?}");
            return Err(HankError::usage(what));
        }
        if let Some(line) = why.line() {
            self.fx.say(Say::Info(line));
        }
        if why == WaitFor::Limit(WaitReason::UsageWindow) {
            self.window_note(until);
        }
        let shown = why.shown();
        let saved = shown.filter(|r| r.is_saved()).zip(until);
        if let Some(reason) = shown {
            self.wait = Some((reason, until.unwrap_or_else(|| self.fx.now())));
            if let Some((reason, until)) = saved {
                self.state.wait = Some(SavedWait { reason, until });
            }
            self.save()?;
            self.tell(
                until.map_or(News::Status(RunState::Waiting), |until| News::Waiting {
                    reason,
                    until,
                }),
            )?;
        }
        let countdown = shown.zip(until);
        // Inside Actions, a wait that outlasts the job ends the job now (its wait is saved).
        let deadline = self.run.deadline();
        let waited = if countdown.is_some_and(|(_, u)| self.fx.suspend_wait(u, deadline)) {
            Waited::Stop(ExitReason::MaxRuntime)
        } else {
            self.sleep_until(countdown, until).await
        };
        if countdown.is_some() {
            self.fx.say(Say::WaitDone);
        }
        self.wait = None;
        if let Waited::Stop(r) = waited {
            return Ok(Some(r));
        }
        if shown.is_some() {
            if saved.is_some() {
                self.state.wait = None;
                self.save()?;
            }
            self.tell(News::Status(RunState::Running))?;
        }
        self.run.on(Fact::WokeUp, self.fx.now());
        Ok(None)
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
    async fn sleep_until(
        &mut self,
        countdown: Option<(WaitReason, Timestamp)>,
        until: Option<Timestamp>,
    ) -> Waited {
        let spec = WaitSpec {
            end: until.map(|u| self.run.wait_end(u)),
            countdown,
        };
        loop {
            match self.fx.wait_until(spec).await {
                Woke::Interrupted => return Waited::Stop(ExitReason::Interrupted),
                Woke::Elapsed(now) => {
                    let shown = countdown.is_some();
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
}
