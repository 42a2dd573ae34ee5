//! Bounded for CI (GitHub Actions): how long a job's run may last, and what a wait longer
//! than the job's remaining time does (stop, save the state, continue in a later job instead
//! of sleeping on a paid runner). Pure: the environment's values and `now` come in as
//! arguments.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// The least margin kept between hank's `--max-runtime` and the job's limit (the state save,
/// the delivery and the summary run in it).
pub const MIN_MARGIN: Duration = Duration::from_secs(10 * 60);

/// The variable the generated workflow sets to the job's `timeout-minutes` (Actions does not
/// tell a job its own limit).
pub const JOB_TIMEOUT_VAR: &str = "HANK_JOB_TIMEOUT_MINUTES";

/// The `--max-runtime` default inside Actions: the job's limit minus a margin (a tenth of it,
/// at least [`MIN_MARGIN`]). `None` outside Actions, without a readable limit, or when the
/// limit leaves no time after the margin.
#[must_use]
pub fn job_max_runtime(
    github_actions: Option<&str>,
    job_minutes: Option<&str>,
) -> Option<Duration> {
    if github_actions.map(str::trim) != Some("true") {
        return None;
    }
    let minutes: u64 = job_minutes?.trim().parse().ok()?;
    let limit = Duration::from_secs(minutes.checked_mul(60)?);
    let margin = (limit / 10).max(MIN_MARGIN);
    limit.checked_sub(margin).filter(|d| !d.is_zero())
}

/// What to do with a wait (usage limit, usage window, hourly cap) that would last until
/// `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobWait {
    /// Wait: it ends before the job must.
    Sleep,
    /// The job ends first: save the state and stop; a later job continues after `after`.
    StopAndContinue { after: Timestamp },
}

/// Stable exit reason words of [`JobWait::StopAndContinue`].
pub const CONTINUES_LATER: &str = "continues_in_a_later_job";

/// The rule: a wait that ends after the job's deadline (`started + max_runtime`) stops the
/// job. No deadline (outside CI, no MAX_RUNTIME): always sleep.
#[must_use]
pub fn wait_in_job(until: Timestamp, deadline: Option<Timestamp>, now: Timestamp) -> JobWait {
    match deadline {
        Some(d) if until > d || d <= now => JobWait::StopAndContinue { after: until },
        _ => JobWait::Sleep,
    }
}

/// The job's deadline: `started` plus `max_runtime` (zero: none).
#[must_use]
pub fn deadline(started: Timestamp, max_runtime: Duration) -> Option<Timestamp> {
    if max_runtime.is_zero() {
        return None;
    }
    let d = SignedDuration::try_from(max_runtime).ok()?;
    started.checked_add(d).ok()
}

/// The line the job summary carries when the job stopped before a wait.
#[must_use]
pub fn continues_line(after: Timestamp) -> String {
    format!(
        "**hank continues after {}**: the wait is longer than this job may run; the state is saved (refs/hank/state/) and the next scheduled job continues from it.",
        after.strftime("%Y-%m-%d %H:%M UTC")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(mins: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + mins * 60).unwrap()
    }

    #[test]
    fn the_default_runtime_is_the_job_limit_minus_a_margin() {
        let m = |min: u64| Some(Duration::from_secs(min * 60));
        let table: &[(Option<&str>, Option<&str>, Option<Duration>)] = &[
            (Some("true"), Some("330"), m(297)),
            (Some("true"), Some("60"), m(50)),
            (Some("true"), Some("360"), m(324)),
            (Some("true"), Some("10"), None),
            (Some("true"), Some("five"), None),
            (Some("true"), None, None),
            (Some("false"), Some("330"), None),
            (None, Some("330"), None),
        ];
        for (gha, minutes, want) in table {
            assert_eq!(
                job_max_runtime(*gha, *minutes),
                *want,
                "{gha:?} {minutes:?}"
            );
        }
    }

    #[test]
    fn a_wait_past_the_deadline_stops_the_job() {
        let now = at(0);
        let table = [
            (at(30), Some(at(60)), JobWait::Sleep),
            (at(60), Some(at(60)), JobWait::Sleep),
            (
                at(61),
                Some(at(60)),
                JobWait::StopAndContinue { after: at(61) },
            ),
            (at(300), None, JobWait::Sleep),
            (
                at(5),
                Some(at(0)),
                JobWait::StopAndContinue { after: at(5) },
            ),
        ];
        for (until, dl, want) in table {
            assert_eq!(wait_in_job(until, dl, now), want, "{until} {dl:?}");
        }
    }

    #[test]
    fn deadlines_and_the_summary_line() {
        assert_eq!(deadline(at(0), Duration::ZERO), None);
        assert_eq!(deadline(at(0), Duration::from_secs(600)), Some(at(10)));
        let line = continues_line(Timestamp::from_second(1_800_000_000).unwrap());
        assert!(
            line.contains("continues after 2027-01-15 08:00 UTC"),
            "{line}"
        );
    }
}
