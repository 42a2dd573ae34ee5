//! The fleet-wide call ledger: one file every `hank run` of a fleet locks before each spawn, so
//! `MAX_CALLS_PER_HOUR` and `MAX_TOKENS_PER_HOUR` hold for all the fleet's tasks together.
//!
//! `hank fleet` names the file in each task's environment ([`ENV`]); it lives in the main
//! project's per-user directory ([`crate::store::userdir::project_dir`]), outside every
//! worktree the agents can write. One line per call: its time (RFC 3339). The whole
//! read–decide–append runs under an exclusive `flock` on the file, so two tasks that reach
//! their spawn at the same moment cannot both take the last call of the hour. The decision
//! itself is [`crate::policy::budget::Ledger::check`], the same rule as a single run's.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use jiff::Timestamp;

use crate::error::{HankError, Result};
use crate::policy::budget::{BudgetCheck, BudgetLimits, Ledger, WaitReason};

/// The environment variable naming the fleet-wide ledger file for a task's `hank run`.
pub const ENV: &str = "HANK_FLEET_LEDGER";

/// The file name of the ledger in the main project's per-user directory.
pub const FILE_NAME: &str = "fleet-calls";

fn open(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| HankError::io("open the fleet call ledger", path, e))?;
    Ok(file)
}

/// The calls of the file (lines that do not read as a time are skipped).
fn parse(text: &str) -> Vec<Timestamp> {
    text.lines()
        .filter_map(|l| l.trim().parse::<Timestamp>().ok())
        .collect()
}

/// Under the file's lock: when one more call fits `limits` at `now`, it is appended and `None`
/// returned; otherwise nothing is written and the wait (until, why) comes back.
pub fn reserve(
    path: &Path,
    now: Timestamp,
    limits: &BudgetLimits,
) -> Result<Option<(Timestamp, WaitReason)>> {
    let mut file = open(path)?;
    file.lock()
        .map_err(|e| HankError::io("lock the fleet call ledger", path, e))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| HankError::io("read the fleet call ledger", path, e))?;
    let mut ledger = Ledger::default();
    for at in parse(&text) {
        ledger.record_call(at.min(now));
    }
    if let BudgetCheck::Wait { until, reason } = ledger.check(now, limits) {
        return Ok(Some((until, reason)));
    }
    file.write_all(format!("{now}\n").as_bytes())
        .map_err(|e| HankError::io("write the fleet call ledger", path, e))?;
    Ok(None)
    // The lock is released when `file` is closed.
}

/// [`reserve`] on the file named by [`ENV`], when a fleet set it (`None`: not in a fleet, or
/// the call fits).
pub fn reserve_from_env(
    now: Timestamp,
    limits: &BudgetLimits,
) -> Result<Option<(Timestamp, WaitReason)>> {
    match std::env::var_os(ENV) {
        Some(p) if !p.is_empty() => reserve(Path::new(&p), now, limits),
        _ => Ok(None),
    }
}

/// Every call the ledger holds (for `hank fleet status` and the tests).
pub fn calls(path: &Path) -> Vec<Timestamp> {
    fs::read_to_string(path)
        .map(|t| parse(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    #[test]
    fn the_cap_holds_across_writers_and_frees_after_an_hour() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let limits = BudgetLimits {
            max_calls_per_hour: 3,
            max_tokens_per_hour: 0,
        };
        for i in 0..3 {
            assert_eq!(reserve(&path, ts(i), &limits).unwrap(), None);
        }
        let (until, why) = reserve(&path, ts(10), &limits).unwrap().unwrap();
        assert_eq!(why, WaitReason::RateLimit);
        assert_eq!(until, ts(3600));
        assert_eq!(calls(&path).len(), 3);
        assert_eq!(reserve(&path, ts(3600), &limits).unwrap(), None);
        assert_eq!(calls(&path).len(), 4);
    }

    #[test]
    fn parallel_writers_never_overshoot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let limits = BudgetLimits {
            max_calls_per_hour: 5,
            max_tokens_per_hour: 0,
        };
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || {
                    (0..4)
                        .filter(|_| reserve(&p, ts(1), &limits).unwrap().is_none())
                        .count()
                })
            })
            .collect();
        let granted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(granted, 5);
        assert_eq!(calls(&path).len(), 5);
    }
}
