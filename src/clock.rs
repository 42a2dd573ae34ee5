//! The wall clock of a `hank` process, with a test hook.
//!
//! `HANK_NOW=<RFC 3339 time>` in the environment makes the process start at that time and
//! run on from it (real elapsed time is added), so end-to-end tests can exercise
//! time-dependent rules — a cooldown that has passed, a session that expired, a usage window
//! that reset — without sleeping. An unreadable `HANK_NOW` is an error naming the variable.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `SystemClock` (`HANK_NOW=<RFC 3339>` starts the process clock there: end-to-end tests of time
//! rules without sleeping)

use std::time::Instant;

use jiff::{SignedDuration, Timestamp};

use crate::error::{HankError, Result};
use crate::policy::time::Clock;

/// Real time, shifted to `HANK_NOW` when that is set.
#[derive(Debug, Clone)]
pub(crate) struct SystemClock {
    /// `(HANK_NOW, when the process read it)`.
    shifted: Option<(Timestamp, Instant)>,
}

impl SystemClock {
    /// The clock of this process (reads `HANK_NOW`).
    ///
    /// # Errors
    /// `HANK_NOW` is set but is not an RFC 3339 time.
    pub(crate) fn from_env() -> Result<Self> {
        match std::env::var("HANK_NOW") {
            Ok(v) if !v.trim().is_empty() => {
                let at: Timestamp = v.trim().parse().map_err(|e| {
                    HankError::usage(format!(
                        "invalid HANK_NOW {v:?} (from the environment): expected an RFC 3339 time \
                         such as 2026-11-24T09:00:00Z ({e})"
                    ))
                })?;
                Ok(Self {
                    shifted: Some((at, Instant::now())),
                })
            }
            _ => Ok(Self { shifted: None }),
        }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        match self.shifted {
            None => Timestamp::now(),
            Some((at, since)) => {
                let elapsed =
                    SignedDuration::try_from(since.elapsed()).unwrap_or(SignedDuration::MAX);
                at.checked_add(elapsed).unwrap_or(Timestamp::MAX)
            }
        }
    }
}
