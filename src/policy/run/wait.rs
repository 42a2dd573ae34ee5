//! What ends a wait (pure): its time, MAX_RUNTIME, or a command from outside. The waiting
//! itself is one effect (`Effects::wait_until`: ticks of a second, commands polled, the
//! countdown); the driver hands each batch of commands to [`Run::on`] and asks
//! [`Run::wait_cut`] whether the wait is over, and [`Run::woke`] how it ended when its time
//! came.

use jiff::Timestamp;

use super::{Run, Step, WaitFor};
use crate::exit::ExitReason;
use crate::policy::budget::{SavedWait, WaitReason};

/// How a wait step goes before it sleeps ([`WaitFor::plan`]): what it says, shows, keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPlan {
    /// The line the terminal shows as it starts ([`WaitFor::line`]).
    pub line: Option<&'static str>,
    /// A usage window at its limit: the window is named (exit message, terminal).
    pub window_note: bool,
    /// What status.json shows while it lasts ([`WaitFor::shown`]) and its end (a pause:
    /// since when); `None`: the silent loop delay.
    pub shown: Option<(WaitReason, Timestamp)>,
    /// What state.json keeps while it lasts, so that a restart resumes it (a usage limit or
    /// window, a backoff: [`WaitReason::is_saved`]).
    pub saved: Option<SavedWait>,
    /// The countdown the terminal shows (a shown wait with an end).
    pub countdown: Option<(WaitReason, Timestamp)>,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// Its time came, or a command ended it (`retry-now`, `resume`, an answer): the gates
    /// are checked again.
    Done,
    /// The run stops: Ctrl-C/SIGTERM/SIGHUP or `hank ctl stop` (`interrupted`), MAX_RUNTIME
    /// reached during the wait (`max_runtime`).
    Stop(ExitReason),
}

impl WaitFor {
    /// What status.json shows for this wait (`None`: the silent loop delay).
    #[must_use]
    pub fn shown(self) -> Option<WaitReason> {
        match self {
            Self::Limit(r) => Some(r),
            Self::UserAnswer => Some(WaitReason::NeedsAnswers),
            Self::Paused => Some(WaitReason::Paused),
            Self::LoopDelay | Self::Answer => None,
        }
    }

    /// The line the terminal shows as the wait starts (a limit's is its countdown).
    #[must_use]
    pub fn line(self) -> Option<&'static str> {
        match self {
            Self::UserAnswer => Some(
                "the agent needs answers (NEEDS_ANSWERS=wait): hank ctl answer TEXT (hank status shows the questions)",
            ),
            Self::Paused => Some("paused: no call before a resume (hank ctl resume)"),
            _ => None,
        }
    }
}

impl WaitFor {
    /// How a wait for this until `until` (`None`: until a command ends it), starting at
    /// `now`, goes; `None`: not a wait the loop makes (the answer is a call's, and only a
    /// pause has no end).
    #[must_use]
    pub fn plan(self, until: Option<Timestamp>, now: Timestamp) -> Option<WaitPlan> {
        if self == Self::Answer || (until.is_none() && self != Self::Paused) {
            return None;
        }
        let shown = self.shown();
        let saved = shown.filter(|r| r.is_saved()).zip(until);
        Some(WaitPlan {
            line: self.line(),
            window_note: self == Self::Limit(WaitReason::UsageWindow),
            shown: shown.map(|r| (r, until.unwrap_or(now))),
            saved: saved.map(|(reason, until)| SavedWait { reason, until }),
            countdown: shown.zip(until),
        })
    }
}

impl Run {
    /// When MAX_RUNTIME ends the run (`None`: unlimited).
    #[must_use]
    pub fn deadline(&self) -> Option<Timestamp> {
        self.cfg.deadline
    }

    /// How a wait until `until` (`None`: a pause, ended by a command) that slept to its end
    /// ([`Run::wait_end`]) is over at `now`:
    /// MAX_RUNTIME cut it short, or it is done. A shown wait (a limit, `shown`) that MAX_RUNTIME
    /// would cut is done when its own end came too; the silent loop delay is cut either way.
    #[must_use]
    pub fn woke(&self, now: Timestamp, until: Option<Timestamp>, shown: bool) -> Waited {
        let Some(until) = until else {
            return Waited::Done;
        };
        let end = self.wait_end(until);
        if end < until && (!shown || now < until) {
            Waited::Stop(ExitReason::MaxRuntime)
        } else {
            Waited::Done
        }
    }

    /// After the commands that came during a wait ([`Run::on`]): `Some` when they end it (a
    /// stop, or a retry-now, a resume, an answer: the gates are checked again), `None` when
    /// the loop still waits.
    #[must_use]
    pub fn wait_cut(&mut self, now: Timestamp) -> Option<Waited> {
        match self.next(now) {
            Step::Wait { .. } => None,
            Step::Stop(r) => Some(Waited::Stop(r)),
            _ => Some(Waited::Done),
        }
    }
}

#[cfg(test)]
mod tests {
    use jiff::{SignedDuration, Timestamp};

    use super::Waited;
    use crate::exit::ExitReason;
    use crate::policy::budget::WaitReason;
    use crate::policy::decide::Decision;
    use crate::policy::run::{Answer, Control, Fact, Run, RunConfig};

    fn t0() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn mins(n: i64) -> Timestamp {
        t0() + SignedDuration::from_mins(n)
    }

    fn run(deadline: Option<Timestamp>) -> Run {
        Run::new(RunConfig {
            deadline,
            ..RunConfig::default()
        })
    }

    #[test]
    fn the_clock_ends_a_wait_or_max_runtime_cuts_it() {
        let max = Waited::Stop(ExitReason::MaxRuntime);
        // (deadline, until, now, shown) → how the wait ended.
        let table = [
            (None, mins(60), mins(60), true, Waited::Done),
            (None, mins(10), mins(10), false, Waited::Done),
            (Some(mins(90)), mins(60), mins(60), true, Waited::Done),
            (Some(mins(30)), mins(60), mins(30), true, max),
            (Some(mins(30)), mins(60), mins(30), false, max),
            // A shown wait whose own end came with the deadline's is done.
            (Some(mins(30)), mins(60), mins(60), true, Waited::Done),
            // The loop delay cut by MAX_RUNTIME stops the run.
            (Some(mins(30)), mins(60), mins(60), false, max),
            (Some(mins(60)), mins(60), mins(60), false, Waited::Done),
        ];
        for (deadline, until, now, shown, want) in table {
            let r = run(deadline);
            assert_eq!(r.deadline(), deadline);
            assert_eq!(r.woke(now, None, shown), Waited::Done);
            assert_eq!(
                r.woke(now, Some(until), shown),
                want,
                "{deadline:?} {until} {now} {shown}"
            );
        }
    }

    fn waiting(cfg: RunConfig) -> Run {
        let mut r = Run::new(cfg);
        r.on(Fact::Calling, t0());
        let wait = Decision::Wait {
            until: mins(300),
            reason: WaitReason::UsageLimit,
        };
        r.on(
            Fact::Answered(Answer {
                decision: wait,
                without_claims: wait,
                free_retry: false,
                productive_error: false,
                interrupted: false,
                error: false,
                resumed: false,
            }),
            t0(),
        );
        // The loop is in the wait.
        assert!(matches!(
            r.next(t0()),
            crate::policy::run::Step::Wait { .. }
        ));
        r
    }

    #[test]
    fn commands_end_a_wait_or_leave_it() {
        // (command, how the usage-limit wait goes on).
        let table = [
            (None, None),
            (Some(Control::Pause), None),
            (Some(Control::RetryNow), Some(Waited::Done)),
            (
                Some(Control::Stop),
                Some(Waited::Stop(ExitReason::Interrupted)),
            ),
        ];
        for (command, want) in table {
            let mut r = waiting(RunConfig::default());
            if let Some(c) = command.clone() {
                r.on(Fact::Control(c), mins(1));
            }
            assert_eq!(r.wait_cut(mins(1)), want, "{command:?}");
        }
    }

    #[test]
    fn what_each_wait_shows() {
        use crate::policy::run::WaitFor;
        let usage = WaitFor::Limit(WaitReason::UsageLimit);
        let cases = [
            (usage, Some(WaitReason::UsageLimit), false),
            (WaitFor::UserAnswer, Some(WaitReason::NeedsAnswers), true),
            (WaitFor::Paused, Some(WaitReason::Paused), true),
            (WaitFor::LoopDelay, None, false),
            (WaitFor::Answer, None, false),
        ];
        for (wait, shown, line) in cases {
            assert_eq!(wait.shown(), shown, "{wait:?}");
            assert_eq!(wait.line().is_some(), line, "{wait:?}");
        }
    }

    #[test]
    fn what_a_wait_says_shows_and_keeps() {
        use crate::policy::budget::SavedWait;
        use crate::policy::run::WaitFor;
        let (usage, window) = (WaitReason::UsageLimit, WaitReason::UsageWindow);
        let end = Some(mins(60));
        // (wait, until) → (line, window named, shown, saved, countdown); `None`: refused.
        type Want = (bool, bool, Option<WaitReason>, bool, bool);
        let table: [(WaitFor, Option<Timestamp>, Option<Want>); 9] = [
            (
                WaitFor::Limit(usage),
                end,
                Some((false, false, Some(usage), true, true)),
            ),
            (
                WaitFor::Limit(window),
                end,
                Some((false, true, Some(window), true, true)),
            ),
            (
                WaitFor::Limit(WaitReason::RateLimit),
                end,
                Some((false, false, Some(WaitReason::RateLimit), false, true)),
            ),
            (
                WaitFor::LoopDelay,
                end,
                Some((false, false, None, false, false)),
            ),
            (
                WaitFor::Paused,
                None,
                Some((true, false, Some(WaitReason::Paused), false, false)),
            ),
            (
                WaitFor::UserAnswer,
                end,
                Some((true, false, Some(WaitReason::NeedsAnswers), false, true)),
            ),
            (WaitFor::Answer, end, None),
            (WaitFor::LoopDelay, None, None),
            (WaitFor::Limit(usage), None, None),
        ];
        for (why, until, want) in table {
            let got = why.plan(until, t0());
            let got = got.map(|p| {
                // A shown wait ends at its end; a pause is shown since now.
                if let Some((_, at)) = p.shown {
                    assert_eq!(at, until.unwrap_or(t0()), "{why:?}");
                }
                if let Some(w) = p.saved {
                    assert_eq!(
                        Some(w),
                        p.shown.map(|(reason, until)| SavedWait { reason, until })
                    );
                }
                let shown = p.shown.map(|(r, _)| r);
                let flags = (p.line.is_some(), p.window_note);
                (
                    flags.0,
                    flags.1,
                    shown,
                    p.saved.is_some(),
                    p.countdown.is_some(),
                )
            });
            assert_eq!(got, want, "{why:?} {until:?}");
        }
    }
}
