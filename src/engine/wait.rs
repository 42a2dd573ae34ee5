//! The loop's waits: rate and token caps, usage limits, backoff, the loop delay — each with
//! `state: waiting` in status.json, an event, a countdown, and Ctrl-C ending it at once.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::Engine;
use crate::error::Result;
use crate::policy::budget::WaitReason;
use crate::store::{EventKind, RunState};

/// How a wait ended.
pub(super) enum Waited {
    Done,
    Interrupted,
}

impl Engine {
    /// Waits (rate limit, token limit, usage limit, backoff) with a countdown; Ctrl-C ends it.
    pub(super) async fn wait_until(
        &mut self,
        reason: WaitReason,
        until: Timestamp,
    ) -> Result<Waited> {
        self.wait = Some((reason, until));
        self.write_status(RunState::Waiting)?;
        self.emit(EventKind::Waiting { reason, until })?;
        self.store.log(
            self.clock.now(),
            &format!("waiting ({}) until {until}", reason.as_str()),
        );
        let waited = self.sleep_until_with_ticks(reason, until).await;
        self.reporter.wait_done();
        self.wait = None;
        if let Waited::Done = waited {
            self.write_status(RunState::Running)?;
        }
        Ok(waited)
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
            self.reporter.wait_tick(reason.as_str(), until, now);
            // Someone deleted status.json during a long wait: put it back.
            if !self.store.status_path().exists() {
                let _ = self.write_status(RunState::Waiting);
            }
            let left = until.duration_since(now);
            let step = left.min(SignedDuration::from_secs(1));
            let step = Duration::try_from(step).unwrap_or(Duration::from_millis(100));
            tokio::select! {
                () = tokio::time::sleep(step) => {}
                changed = self.cancel.changed() => {
                    if changed.is_err() || self.interrupted() {
                        return Waited::Interrupted;
                    }
                }
            }
        }
    }

    pub(super) async fn sleep_until(&mut self, until: Timestamp) -> Waited {
        let left = until.duration_since(self.clock.now());
        let step = Duration::try_from(left).unwrap_or(Duration::ZERO);
        tokio::select! {
            () = tokio::time::sleep(step) => Waited::Done,
            _ = self.cancel.changed() => Waited::Interrupted,
        }
    }
}
