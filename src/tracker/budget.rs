//! The tracker's rate budget per token, shared by every hank process of the user on this
//! machine: `tracker/rate-<key>.json` under the per-user root (the key names the token without
//! holding it), read and written under the exclusive lock `rate-<key>.lock`. Before a request
//! hank waits (saying until when) while the budget is spent or a `Retry-After` runs; after it,
//! the answer's rate-limit headers are noted ([`RateBudget::note`]: a 304 costs nothing).

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{HankError, Result};
use crate::policy::time::Clock;
use crate::policy::tracker::RateBudget;
use crate::store::{userdir, write_atomic};

/// The folder under the per-user root.
pub const DIR: &str = "tracker";
/// The longest single wait before a request (a reset further away is waited for in turns).
const MAX_WAIT: Duration = Duration::from_secs(3600);

fn paths(key: &str) -> Result<(PathBuf, PathBuf)> {
    let dir = userdir::shared_dir(DIR)?;
    let safe: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok((
        dir.join(format!("rate-{safe}.json")),
        dir.join(format!("rate-{safe}.lock")),
    ))
}

/// The budget as last written (empty when there is none or it does not read).
///
/// # Errors
/// The per-user folder cannot be made.
pub fn read(key: &str) -> Result<RateBudget> {
    let (file, _) = paths(key)?;
    Ok(std::fs::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default())
}

fn now() -> Result<jiff::Timestamp> {
    Ok(crate::clock::SystemClock::from_env()?.now())
}

/// Waits while the budget says no request may go (a visible wait on stderr).
///
/// # Errors
/// The budget file cannot be read or locked; interrupted (exit 130).
pub fn before(key: &str) -> Result<()> {
    loop {
        let until = {
            let (_, lock) = paths(key)?;
            let _held = userdir::lock_file(&lock)?;
            read(key)?.wait_until(now()?)
        };
        let Some(until) = until else { return Ok(()) };
        let secs = until.as_second().saturating_sub(now()?.as_second()).max(1);
        let wait = Duration::from_secs(u64::try_from(secs).unwrap_or(1)).min(MAX_WAIT);
        errln!(
            "hank: watch: the tracker's rate budget is spent; waiting until {} ({}s)",
            until.strftime("%H:%M:%SZ"),
            wait.as_secs()
        );
        sleep(wait, "waiting for the tracker's rate budget")?;
    }
}

/// Notes an answer in the shared budget.
///
/// # Errors
/// The budget file cannot be locked or written.
pub fn after(key: &str, status: u16, headers: &[(String, String)]) -> Result<()> {
    let (file, lock) = paths(key)?;
    let _held = userdir::lock_file(&lock)?;
    let mut b = read(key)?;
    b.note(status, headers, now()?);
    let bytes = serde_json::to_vec_pretty(&b)
        .map_err(|e| HankError::Internal(format!("cannot encode the rate budget: {e}")))?;
    write_atomic(&file, &bytes, false).map_err(|e| HankError::io("write", &file, e))
}

/// Sleeps `d` in turns of a second; a SIGINT/SIGTERM/SIGHUP counted meanwhile (once hank's
/// handler is installed) ends it as an interruption (exit 130).
///
/// # Errors
/// Interrupted.
pub fn sleep(d: Duration, what: &str) -> Result<()> {
    let start = crate::proc::signals::received();
    let mut left = d;
    while !left.is_zero() {
        let turn = left.min(Duration::from_secs(1));
        std::thread::sleep(turn);
        left = left.saturating_sub(turn);
        if crate::proc::signals::received() > start {
            return Err(HankError::WithCode {
                code: crate::exit::INTERRUPTED,
                message: format!("interrupted while {what}"),
            });
        }
    }
    Ok(())
}
