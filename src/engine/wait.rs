//! The loop's waits, driven: a limit wait (rate and token caps, usage limits and windows,
//! backoff, an answer) saved and shown (status `waiting`, an event, a countdown), the silent
//! loop delay, a pause. The waiting is one effect ([`crate::effects::Effects::wait_until`]);
//! what it says, shows and keeps is [`WaitFor::plan`]'s, and what ends it the state machine's
//! ([`crate::policy::run::Run::wait_cut`], `woke`).

use jiff::Timestamp;

use super::Engine;
use crate::effects::{News, Say, WaitSpec, Woke};
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::policy::budget::WaitReason;
use crate::policy::run::{Fact, WaitFor, Waited};
use crate::store::RunState;

impl Engine {
    /// Waits as the state machine said (`until` `None`: a pause). A shown wait (a limit, an
    /// answer, a pause: [`WaitFor::plan`]) is status `waiting` with its reason, saved first
    /// (a kill -9 during it loses nothing, the last call's tokens included; a usage-limit,
    /// window or backoff wait is resumed by a restart) and counted down to its end; the loop
    /// delay is silent. MAX_RUNTIME, Ctrl-C and commands from outside end it earlier.
    pub(super) async fn wait_step(
        &mut self,
        until: Option<Timestamp>,
        why: WaitFor,
    ) -> Result<Option<ExitReason>> {
        let Some(plan) = why.plan(until, self.fx.now()) else {
            let what = format!("internal: the loop cannot wait for {why:?} until {until:?}");
            return Err(HankError::usage(what));
        };
        if let Some(line) = plan.line {
            self.fx.say(Say::Info(line));
        }
        if plan.window_note {
            self.window_note(until);
        }
        if let Some((reason, _)) = plan.shown {
            self.shown.wait = plan.shown;
            self.state.wait = plan.saved.or(self.state.wait);
            self.save()?;
            let shown = until.map(|until| News::Waiting { reason, until });
            self.tell(shown.unwrap_or(News::Status(RunState::Waiting)))?;
        }
        // Inside Actions, a wait that outlasts the job ends the job now (its wait is saved).
        let deadline = self.run.deadline();
        let waited = match plan.countdown {
            Some((_, u)) if self.fx.suspend_wait(u, deadline) => {
                Waited::Stop(ExitReason::MaxRuntime)
            }
            countdown => self.sleep_until(countdown, until).await,
        };
        if plan.countdown.is_some() {
            self.fx.say(Say::WaitDone);
        }
        self.shown.wait = None;
        if let Waited::Stop(r) = waited {
            return Ok(Some(r));
        }
        if plan.shown.is_some() {
            if plan.saved.is_some() {
                self.state.wait = None;
                self.save()?;
            }
            self.tell(News::Status(RunState::Running))?;
        }
        self.run.on(Fact::WokeUp, self.fx.now());
        Ok(None)
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
                Woke::Elapsed(now) => return self.run.woke(now, until, countdown.is_some()),
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
