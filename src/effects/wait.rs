//! Waiting, as one effect ([`super::Effects::wait_until`]): ticks of at most a second on the
//! effects' clock ([`super::Effects::sleep`], [`crate::policy::time::Clock::now`]) — a test
//! clock makes a 5-hour wait instant —, the control source polled each tick, a countdown and
//! status.json put back while a limit wait is shown. What ends a wait is the state machine's
//! ([`crate::policy::run::Run::wait_cut`], [`crate::policy::run::Run::woke`]).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::{Effects, Say, Slept};
use crate::policy::budget::WaitReason;
use crate::policy::ci::{self, JobWait};
use crate::policy::run::Control;

/// A wait as the driver asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitSpec {
    /// When it stops sleeping (MAX_RUNTIME counted); `None`: only a command or an interrupt
    /// ends it (a pause, which sleeps before each poll: it was just taken from one).
    pub end: Option<Timestamp>,
    /// The limit waited for and its end, shown as a countdown (`None`: silent).
    pub countdown: Option<(WaitReason, Timestamp)>,
}

/// Why [`super::Effects::wait_until`] returned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Woke {
    /// The end came; the time now.
    Elapsed(Timestamp),
    /// Ctrl-C, SIGTERM or SIGHUP.
    Interrupted,
    /// Commands came from outside (oldest first): the driver hands them to the state machine.
    Control(Vec<Control>),
}

/// The ticks of a wait (the default [`super::Effects::wait_until`]).
pub(super) async fn ticks<E: Effects + ?Sized>(fx: &mut E, spec: WaitSpec) -> Woke {
    let second = Duration::from_secs(1);
    loop {
        let Some(end) = spec.end else {
            if fx.sleep(second).await == Slept::Interrupted {
                return Woke::Interrupted;
            }
            match fx.poll_control() {
                c if c.is_empty() => continue,
                c => return Woke::Control(c),
            }
        };
        let now = fx.now();
        if now >= end {
            return Woke::Elapsed(now);
        }
        let commands = fx.poll_control();
        if !commands.is_empty() {
            return Woke::Control(commands);
        }
        if let Some((reason, until)) = spec.countdown {
            let reason = reason.as_str();
            fx.say(Say::WaitTick { reason, until, now });
            // Someone deleted status.json during a long wait: put it back.
            fx.restore_status();
        }
        let step = crate::policy::time::tick(now, end, SignedDuration::from_secs(1));
        if fx.sleep(step).await == Slept::Interrupted {
            return Woke::Interrupted;
        }
    }
}

/// Issue 28 (bounded for CI): inside Actions, a wait until `until` that outlasts the job
/// (MAX_RUNTIME's `deadline`) ends the job now instead of sleeping on a paid runner; the step
/// summary says when the next job continues. Whether the job stops.
pub(super) fn suspend<E: Effects + ?Sized>(
    fx: &mut E,
    until: Timestamp,
    deadline: Option<Timestamp>,
) -> bool {
    match ci::wait_in_job(until, deadline, fx.now()) {
        JobWait::StopAndContinue { after } => fx.suspend_job(&ci::continues_line(after)),
        _ => false,
    }
}
