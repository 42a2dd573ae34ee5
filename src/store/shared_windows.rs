//! Usage-window readings shared by every hank run of the user on this machine: a run (a
//! fleet's task or a plain `hank run`) adds the windows an answer told it to
//! `$XDG_STATE_HOME/hank/windows/windows.json` (or `~/.local/state/hank/...`, the per-user
//! folder of [`crate::store::userdir::shared_dir`], outside every project the agents can
//! write) and takes the newer ones before each call's gates. The subscription's windows are
//! the account's, not the project's: a window one run saw at its limit stops the others too.
//!
//! The read–merge–write of a publication runs under an exclusive `flock` on `windows.lock`
//! beside it; the file itself is replaced atomically (0600), so a reader never locks. The
//! merge is [`crate::policy::windows::adopt_newer`] (the later reading of a window wins).
//! Windows are keyed by name (`five_hour`, `seven_day`, …): runs of the same user are taken to
//! share one account.

use std::fs;
use std::path::PathBuf;

use jiff::Timestamp;

use crate::error::{HankError, Result};
use crate::policy::windows::{self, Windows};
use crate::store::schema::SharedWindowsFile;
use crate::store::{userdir, write_atomic};

/// The folder under the per-user root.
pub const DIR: &str = "windows";
/// The schema of [`SharedWindowsFile`].
pub const SCHEMA: u32 = 1;

fn dir() -> Result<PathBuf> {
    userdir::shared_dir(DIR)
}

/// The shared file's path (the folder is created).
pub fn path() -> Result<PathBuf> {
    Ok(dir()?.join("windows.json"))
}

/// The windows the user's runs have shared (empty when there is no file or it does not
/// read: a damaged file shares nothing and is replaced at the next publication).
pub fn read() -> Windows {
    let Ok(p) = path() else {
        return Windows::new();
    };
    fs::read(&p)
        .ok()
        .and_then(|b| serde_json::from_slice::<SharedWindowsFile>(&b).ok())
        .map(|f| f.windows)
        .unwrap_or_default()
}

/// Takes into `own` the shared windows seen later than its own readings (by `now`); whether
/// any was.
pub fn adopt(own: &mut Windows, now: Timestamp) -> bool {
    let shared = read();
    !shared.is_empty() && windows::adopt_newer(own, &shared, now)
}

/// Adds `own`'s newer windows to the shared file (under its lock).
pub fn publish(own: &Windows, now: Timestamp) -> Result<()> {
    if own.is_empty() {
        return Ok(());
    }
    let dir = dir()?;
    // Held until the end (released when `_lock` is closed): read, merge and write are one step.
    let _lock = userdir::lock_file(&dir.join("windows.lock"))?;
    let path = dir.join("windows.json");
    let mut shared = read();
    if !windows::adopt_newer(&mut shared, own, now) {
        return Ok(());
    }
    let file = SharedWindowsFile {
        schema_version: SCHEMA,
        windows: shared,
    };
    let bytes = serde_json::to_vec_pretty(&file)
        .map_err(|e| HankError::Internal(format!("cannot encode the shared windows: {e}")))?;
    write_atomic(&path, &bytes, false).map_err(|e| HankError::io("write", path, e))
}
