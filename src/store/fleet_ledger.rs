//! The fleet-wide call ledger: one file every `hank run` of a fleet locks before each spawn, so
//! `MAX_CALLS_PER_HOUR`, `MAX_TOKENS_PER_HOUR` and `MAX_COST_USD` hold for all the fleet's
//! tasks together.
//!
//! `hank fleet` names the file in each task's environment ([`ENV`]); it lives in the main
//! project's per-user directory ([`crate::store::userdir::project_dir`]), outside every
//! worktree the agents can write. One line per call, `TIME call PID`, written before the
//! spawn, and one when its answer is folded, `TIME spent PID TOKENS USD` (what
//! `MAX_TOKENS_PER_HOUR` and `MAX_COST_USD` count over the whole fleet). The whole
//! read–decide–append runs under an exclusive `flock` on the file, so two tasks that reach
//! their spawn at the same moment cannot both take the last call of the hour or the last
//! dollar. The decision is [`crate::policy::fleet::fleet_budget`] (the rolling hour is
//! [`crate::policy::budget::Ledger::check`], the same rule as a single run's).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use jiff::Timestamp;

use crate::error::{HankError, Result};
use crate::policy::budget::{BudgetLimits, WaitReason};
use crate::policy::fleet::{self, FleetCall, FleetLimits, FleetVerdict};

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

/// One line of the file: a call reserved, or what a call spent.
enum Line {
    /// `TIME` (older writers) or `TIME call PID`.
    Call(Timestamp, Option<u32>),
    /// `TIME spent PID TOKENS USD`: settles PID's open call.
    Spent(u32, u64, f64),
    /// `TIME start`: a fleet started (its MAX_COST_USD counts the calls after it).
    Start,
}

fn parse_line(line: &str) -> Option<Line> {
    let mut f = line.split_whitespace();
    let at: Timestamp = f.next()?.parse().ok()?;
    match f.next() {
        None => Some(Line::Call(at, None)),
        Some("start") => Some(Line::Start),
        Some("call") => Some(Line::Call(at, f.next().and_then(|p| p.parse().ok()))),
        Some("spent") => {
            let pid = f.next()?.parse().ok()?;
            let tokens = f.next()?.parse().ok()?;
            let usd: f64 = f.next()?.parse().ok()?;
            (usd.is_finite() && usd >= 0.0).then_some(Line::Spent(pid, tokens, usd))
        }
        Some(_) => None,
    }
}

/// The process `pid` exists (an in-flight call of a worker that died is not in flight).
fn pid_alive(pid: u32) -> bool {
    i32::try_from(pid)
        .is_ok_and(|p| p > 0 && nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None).is_ok())
}

/// The calls of the file, each settled by its worker's next `spent` line (lines that do not
/// read are skipped).
fn parse_calls(text: &str, alive: &dyn Fn(u32) -> bool) -> Vec<FleetCall> {
    let mut calls: Vec<(FleetCall, Option<u32>)> = Vec::new();
    for line in text.lines() {
        match parse_line(line) {
            Some(Line::Call(at, pid)) => {
                // A worker makes one call at a time: its earlier unsettled call (one whose
                // answer was never folded, e.g. a spawn that failed) is not in flight.
                for (c, p) in &mut calls {
                    if pid.is_some() && *p == pid {
                        c.live = false;
                    }
                }
                calls.push((
                    FleetCall {
                        at,
                        spent: None,
                        live: pid.is_some_and(alive),
                        this_fleet: true,
                    },
                    pid,
                ));
            }
            Some(Line::Spent(pid, tokens, usd)) => {
                if let Some((c, _)) = calls
                    .iter_mut()
                    .find(|(c, p)| *p == Some(pid) && c.spent.is_none())
                {
                    c.spent = Some((tokens, usd));
                }
            }
            Some(Line::Start) => {
                for (c, _) in &mut calls {
                    c.this_fleet = false;
                }
            }
            None => {}
        }
    }
    calls.into_iter().map(|(c, _)| c).collect()
}

/// The calls of the file (for the tests and the status: their times).
fn parse(text: &str) -> Vec<Timestamp> {
    parse_calls(text, &|_| false).iter().map(|c| c.at).collect()
}

fn locked(path: &Path) -> Result<(File, String)> {
    let mut file = open(path)?;
    file.lock()
        .map_err(|e| HankError::io("lock the fleet call ledger", path, e))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| HankError::io("read the fleet call ledger", path, e))?;
    Ok((file, text))
}

/// Under the file's lock: when one more call of the worker `pid` fits `limits` at `now`
/// ([`fleet::fleet_budget`]), it is appended and [`FleetVerdict::Go`] returned; otherwise
/// nothing is written and the wait or the stop comes back.
pub fn reserve_call(
    path: &Path,
    now: Timestamp,
    limits: &FleetLimits,
    pid: u32,
) -> Result<FleetVerdict> {
    let (mut file, text) = locked(path)?;
    let verdict = fleet::fleet_budget(&parse_calls(&text, &pid_alive), now, limits);
    if verdict == FleetVerdict::Go {
        file.write_all(format!("{now} call {pid}\n").as_bytes())
            .map_err(|e| HankError::io("write the fleet call ledger", path, e))?;
    }
    Ok(verdict)
    // The lock is released when `file` is closed.
}

/// Under the file's lock: when one more call fits `limits` at `now`, it is appended and `None`
/// returned; otherwise nothing is written and the wait (until, why) comes back. (The hourly
/// caps alone, for this process.)
pub fn reserve(
    path: &Path,
    now: Timestamp,
    limits: &BudgetLimits,
) -> Result<Option<(Timestamp, WaitReason)>> {
    let limits = FleetLimits {
        budget: *limits,
        max_cost_usd: 0.0,
    };
    Ok(
        match reserve_call(path, now, &limits, std::process::id())? {
            FleetVerdict::Wait { until, reason } => Some((until, reason)),
            FleetVerdict::Go | FleetVerdict::Stop(_) => None,
        },
    )
}

/// Records what the last call of the worker `pid` spent (appended under the lock).
pub fn settle(path: &Path, now: Timestamp, pid: u32, tokens: u64, usd: f64) -> Result<()> {
    let (mut file, _) = locked(path)?;
    let usd = if usd.is_finite() && usd >= 0.0 {
        usd
    } else {
        0.0
    };
    file.write_all(format!("{now} spent {pid} {tokens} {usd}\n").as_bytes())
        .map_err(|e| HankError::io("write the fleet call ledger", path, e))
}

fn env_path() -> Option<std::path::PathBuf> {
    match std::env::var_os(ENV) {
        Some(p) if !p.is_empty() => Some(p.into()),
        _ => None,
    }
}

/// [`reserve_call`] for this process on the file named by [`ENV`], when a fleet set it
/// ([`FleetVerdict::Go`]: not in a fleet, or the call fits).
pub fn reserve_from_env(now: Timestamp, limits: &FleetLimits) -> Result<FleetVerdict> {
    match env_path() {
        Some(p) => reserve_call(&p, now, limits, std::process::id()),
        None => Ok(FleetVerdict::Go),
    }
}

/// [`settle`] for this process, when a fleet named the ledger in [`ENV`].
pub fn settle_from_env(now: Timestamp, tokens: u64, usd: f64) -> Result<()> {
    match env_path() {
        Some(p) => settle(&p, now, std::process::id(), tokens, usd),
        None => Ok(()),
    }
}

/// Every call the ledger holds (for `hank fleet status` and the tests).
pub fn calls(path: &Path) -> Vec<Timestamp> {
    fs::read_to_string(path)
        .map(|t| parse(&t))
        .unwrap_or_default()
}

/// Marks the start of a fleet: its MAX_COST_USD counts the calls after this line.
pub fn begin(path: &Path, now: Timestamp) -> Result<()> {
    let (mut file, _) = locked(path)?;
    file.write_all(format!("{now} start\n").as_bytes())
        .map_err(|e| HankError::io("write the fleet call ledger", path, e))
}

/// The fleet's budget as `fleet.json` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    /// Calls of every task (any fleet) in the rolling hour.
    pub calls_in_window: u32,
    /// Their tokens.
    pub tokens_in_window: u64,
    /// What this fleet's calls cost.
    pub cost_usd: f64,
}

/// [`Summary`] of the ledger at `now`.
pub fn summary(path: &Path, now: Timestamp) -> Summary {
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut out = Summary::default();
    for c in parse_calls(&text, &|_| false) {
        if c.this_fleet {
            out.cost_usd += c.spent.map_or(0.0, |s| s.1);
        }
        if c.at.duration_until(now).as_secs() < 3600 {
            out.calls_in_window = out.calls_in_window.saturating_add(1);
            out.tokens_in_window = out
                .tokens_in_window
                .saturating_add(c.spent.map_or(0, |s| s.0));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    /// A ledger file in a temp dir (kept while the dir is).
    fn ledger() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        (dir, path)
    }

    /// At most `calls` calls an hour, no token cap.
    fn calls_per_hour(calls: u32) -> BudgetLimits {
        BudgetLimits {
            max_calls_per_hour: calls,
            max_tokens_per_hour: 0,
        }
    }

    #[test]
    fn the_cap_holds_across_writers_and_frees_after_an_hour() {
        let (_dir, path) = ledger();
        let limits = calls_per_hour(3);
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
    fn spent_lines_settle_their_workers_call_and_the_cost_cap_stops() {
        let (_dir, path) = ledger();
        let limits = FleetLimits {
            budget: calls_per_hour(0),
            max_cost_usd: 2.0,
        };
        // Two workers (pids that never ran: their unsettled calls are not in flight).
        assert_eq!(
            reserve_call(&path, ts(0), &limits, 0).unwrap(),
            FleetVerdict::Go
        );
        assert_eq!(
            reserve_call(&path, ts(1), &limits, 1).unwrap(),
            FleetVerdict::Go
        );
        settle(&path, ts(2), 1, 70, 1.25).unwrap();
        settle(&path, ts(3), 0, 30, 0.75).unwrap();
        assert_eq!(
            reserve_call(&path, ts(4), &limits, 0).unwrap(),
            FleetVerdict::Stop(crate::exit::ExitReason::CostBudget)
        );
        let sum = summary(&path, ts(5));
        assert_eq!((sum.calls_in_window, sum.tokens_in_window), (2, 100));
        assert!((sum.cost_usd - 2.0).abs() < 1e-9);
        // A new fleet starts counting its cost afresh; the hour still counts every call.
        begin(&path, ts(6)).unwrap();
        assert_eq!(
            reserve_call(&path, ts(7), &limits, 0).unwrap(),
            FleetVerdict::Go
        );
        assert_eq!(summary(&path, ts(8)).calls_in_window, 3);
        assert!(summary(&path, ts(8)).cost_usd.abs() < 1e-9);
        // A worker's unsettled call is no longer in flight once it reserves its next one.
        let me = std::process::id();
        let text = format!("{} call {me}\n{} call {me}\n", ts(0), ts(1));
        let live: Vec<bool> = parse_calls(&text, &pid_alive)
            .iter()
            .map(|c| c.live)
            .collect();
        assert_eq!(live, [false, true]);
        // An older writer's bare time lines still count as calls.
        std::fs::write(&path, format!("{}\n", ts(0))).unwrap();
        assert_eq!(calls(&path), vec![ts(0)]);
    }

    #[test]
    fn parallel_writers_never_overshoot() {
        let (_dir, path) = ledger();
        let limits = calls_per_hour(5);
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
