//! Everything hank keeps on disk under `.hank/`: the schemas of `state.json` (internal,
//! versioned) and `status.json` (public contract, HANK.md §2), the atomic store, the
//! single-loop lock, the event log and the rotated human log.
//!
//! Every file is written to a temporary file in the same directory and renamed over the
//! target, with mode 0600, so a reader (the monitor, CI) never sees half a file and a crash
//! never leaves one. A rename replaces a symlink rather than writing through it, so a
//! symlinked `.hank/` file is never followed out of the project.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use crate::error::{HankError, Result};

pub(crate) mod schema;

pub(crate) use schema::{
    Event, EventKind, LastLoop, PlanCounts, RunState, STATE_SCHEMA, State, Status,
};

/// `events.jsonl` is trimmed to its newest half past this size.
pub(crate) const EVENTS_CAP: u64 = 4 * 1024 * 1024;
/// `logs/hank.log` rotates past this size (3 old files kept).
pub(crate) const LOG_CAP: u64 = 1024 * 1024;

/// Writes `bytes` to `path` atomically (temp file in the same directory + rename), mode 0600.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    if durable {
        tmp.as_file().sync_data()?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Opens a file for appending without following a symlink, creating it 0600.
fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}

/// The `.hank/` directory of a project.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
}

/// What loading `state.json` found.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub state: State,
    /// Set when a corrupt file was moved aside: where it went.
    pub moved_aside: Option<PathBuf>,
}

impl Store {
    /// The store of the project at `project_dir`.
    #[must_use]
    pub(crate) fn new(project_dir: &Path) -> Self {
        Self {
            dir: project_dir.join(".hank"),
        }
    }

    /// The `.hank/` directory.
    #[must_use]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    #[must_use]
    pub(crate) fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    #[must_use]
    pub(crate) fn status_path(&self) -> PathBuf {
        self.dir.join("status.json")
    }

    #[must_use]
    pub(crate) fn events_path(&self) -> PathBuf {
        self.dir.join("events.jsonl")
    }

    #[must_use]
    pub(crate) fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    #[must_use]
    pub(crate) fn live_path(&self) -> PathBuf {
        self.dir.join("live.log")
    }

    /// `logs/loop-NNNNN.out` / `.err`.
    #[must_use]
    pub(crate) fn loop_log(&self, number: u64, ext: &str) -> PathBuf {
        self.logs_dir().join(format!("loop-{number:05}.{ext}"))
    }

    /// Creates `.hank/logs/` if needed.
    pub(crate) fn ensure_dirs(&self) -> Result<()> {
        let logs = self.logs_dir();
        fs::create_dir_all(&logs).map_err(|e| HankError::io("failed to create", &logs, e))
    }

    /// Loads `state.json`. Missing → a fresh state. Corrupt or of a newer schema → moved aside
    /// as `state.json.corrupt-<ts>` and a fresh state returned (the caller warns). Never
    /// silently reset.
    pub(crate) fn load_state(&self, now: Timestamp) -> Result<Loaded> {
        let path = self.state_path();
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Loaded {
                    state: State::default(),
                    moved_aside: None,
                });
            }
            Err(e) => return Err(HankError::io("failed to read", &path, e)),
        };
        match serde_json::from_slice::<State>(&bytes) {
            Ok(state) if state.schema_version <= STATE_SCHEMA => Ok(Loaded {
                state,
                moved_aside: None,
            }),
            _ => {
                let aside = self
                    .dir
                    .join(format!("state.json.corrupt-{}", now.as_second()));
                fs::rename(&path, &aside)
                    .map_err(|e| HankError::io("failed to move aside corrupt", &path, e))?;
                Ok(Loaded {
                    state: State::default(),
                    moved_aside: Some(aside),
                })
            }
        }
    }

    /// Saves `state.json` atomically and durably (fdatasync before the rename): used before
    /// every spawn, so the call ledger survives even a power loss.
    pub(crate) fn save_state(&self, state: &State) -> Result<()> {
        self.save_state_with(state, true)
    }

    /// Saves `state.json` atomically; `durable` adds an fdatasync (costly on some disks; a
    /// crash of hank alone never needs it, only a crash of the machine does).
    pub(crate) fn save_state_with(&self, state: &State, durable: bool) -> Result<()> {
        let path = self.state_path();
        let bytes = serde_json::to_vec_pretty(state)
            .map_err(|e| HankError::Internal(format!("failed to encode state: {e}")))?;
        write_atomic(&path, &bytes, durable).map_err(|e| HankError::io("failed to write", &path, e))
    }

    /// Writes `status.json` atomically.
    pub(crate) fn write_status(&self, status: &Status) -> Result<()> {
        let path = self.status_path();
        let mut bytes = serde_json::to_vec_pretty(status)
            .map_err(|e| HankError::Internal(format!("failed to encode status: {e}")))?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes, false).map_err(|e| HankError::io("failed to write", &path, e))
    }

    /// Reads `state.json` without changing anything (for commands that only look): a missing
    /// file is the default state; an unreadable one is an error that says the next run will
    /// move it aside.
    pub(crate) fn read_state(&self) -> Result<State> {
        let path = self.state_path();
        match fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| HankError::Unreadable {
                path: path.clone(),
                problem: format!(
                    "is not a hank state file ({e}); the next `hank run` will move it aside"
                ),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(HankError::io("failed to read", &path, e)),
        }
    }

    /// Reads `status.json`, if present and readable.
    #[must_use]
    pub(crate) fn read_status(&self) -> Option<Status> {
        let bytes = fs::read(self.status_path()).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Appends one event line to `events.jsonl`, trimming the file past [`EVENTS_CAP`].
    pub(crate) fn append_event(&self, line: &str) -> Result<()> {
        let path = self.events_path();
        let mut f = open_append(&path).map_err(|e| HankError::io("failed to open", &path, e))?;
        f.write_all(line.as_bytes())
            .and_then(|()| f.write_all(b"\n"))
            .map_err(|e| HankError::io("failed to append to", &path, e))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        drop(f);
        if len > EVENTS_CAP {
            trim_to_tail(&path, EVENTS_CAP / 2)
                .map_err(|e| HankError::io("failed to trim", &path, e))?;
        }
        Ok(())
    }

    /// Appends a line to `logs/hank.log` (rotated past [`LOG_CAP`]). Logging failures are
    /// not fatal: the loop's real state is in state.json.
    pub(crate) fn log(&self, now: Timestamp, line: &str) {
        let path = self.logs_dir().join("hank.log");
        if let Ok(meta) = fs::symlink_metadata(&path)
            && meta.len() > LOG_CAP
        {
            for i in (1..3).rev() {
                let _ = fs::rename(
                    self.logs_dir().join(format!("hank.log.{i}")),
                    self.logs_dir().join(format!("hank.log.{}", i + 1)),
                );
            }
            let _ = fs::rename(&path, self.logs_dir().join("hank.log.1"));
        }
        if let Ok(mut f) = open_append(&path) {
            let _ = writeln!(f, "{} {line}", now.round(jiff::Unit::Second).unwrap_or(now));
        }
    }

    /// Takes the project's loop lock (`.hank/hank.lock`), or says which PID holds it.
    pub(crate) fn lock(&self) -> Result<LockGuard> {
        let path = self.dir.join("hank.lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(&path)
            .map_err(|e| HankError::io("failed to open", &path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.lines().next().unwrap_or("").trim();
                return Err(HankError::Locked {
                    path,
                    holder: (!holder.is_empty()).then(|| holder.to_string()),
                });
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(HankError::io("failed to lock", &path, e));
            }
        }
        let mut previous = String::new();
        let _ = file.read_to_string(&mut previous);
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()))
            .and_then(|()| write!(file, "{}", std::process::id()))
            .map_err(|e| HankError::io("failed to write", &path, e))?;
        Ok(LockGuard { file, previous })
    }
}

/// Held while the loop runs; the OS releases the lock when the process dies (even kill -9).
/// The file holds the PID, and while an agent runs, `agent PGID START_TICKS` on a second line.
#[derive(Debug)]
pub(crate) struct LockGuard {
    file: File,
    previous: String,
}

impl LockGuard {
    /// The agent group a previous holder recorded and never cleared (it was killed), if any.
    #[must_use]
    pub(crate) fn orphaned_agent(&self) -> Option<(i32, u64)> {
        let line = self
            .previous
            .lines()
            .find_map(|l| l.strip_prefix("agent "))?;
        let mut parts = line.split_whitespace();
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    }

    /// Records (or with `None` clears) the running agent's process group. Best effort.
    pub(crate) fn record_agent(&mut self, agent: Option<(i32, u64)>) {
        let mut text = std::process::id().to_string();
        if let Some((pgid, ticks)) = agent {
            text.push_str(&format!("\nagent {pgid} {ticks}"));
        }
        let _ = self
            .file
            .set_len(0)
            .and_then(|()| self.file.seek(SeekFrom::Start(0)))
            .and_then(|_| self.file.write_all(text.as_bytes()));
    }
}

/// Keeps roughly the last `keep` bytes of a line file (cut at a line start), atomically.
fn trim_to_tail(path: &Path, keep: u64) -> io::Result<()> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(keep);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    let cut = if start == 0 {
        0
    } else {
        buf.iter()
            .position(|b| *b == b'\n')
            .map_or(buf.len(), |i| i + 1)
    };
    write_atomic(path, &buf[cut..], false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-11-22T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn state_round_trips_with_0600() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure_dirs().unwrap();
        let mut state = State {
            loop_count: 7,
            ..State::default()
        };
        state.ledger.record_call(now());
        store.save_state(&state).unwrap();
        let mode = fs::metadata(store.state_path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let loaded = store.load_state(now()).unwrap();
        assert_eq!(loaded.state, state);
        assert!(loaded.moved_aside.is_none());
    }

    #[test]
    fn corrupt_state_is_moved_aside_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure_dirs().unwrap();
        fs::write(store.state_path(), b"{\"loop_count\": 3, \"ledger\": [").unwrap();
        let loaded = store.load_state(now()).unwrap();
        let aside = loaded.moved_aside.unwrap();
        assert_eq!(
            fs::read(&aside).unwrap(),
            b"{\"loop_count\": 3, \"ledger\": ["
        );
        assert_eq!(loaded.state, State::default());
        assert!(!store.state_path().exists());
    }

    #[test]
    fn newer_schema_is_not_overwritten_silently() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure_dirs().unwrap();
        fs::write(store.state_path(), b"{\"schema_version\": 99}").unwrap();
        assert!(store.load_state(now()).unwrap().moved_aside.is_some());
    }

    #[test]
    fn second_lock_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure_dirs().unwrap();
        let _held = store.lock().unwrap();
        let err = store.lock().unwrap_err().to_string();
        assert!(
            err.contains(&format!("PID {}", std::process::id())),
            "{err}"
        );
    }

    #[test]
    fn atomic_write_replaces_a_symlink_instead_of_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        fs::write(&outside, b"keep").unwrap();
        let store = Store::new(&dir.path().join("p"));
        store.ensure_dirs().unwrap();
        std::os::unix::fs::symlink(&outside, store.status_path()).unwrap();
        write_atomic(&store.status_path(), b"{}", false).unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"keep");
        assert!(
            !fs::symlink_metadata(store.status_path())
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn events_do_not_follow_symlinks_and_are_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure_dirs().unwrap();
        let line = "x".repeat(1000);
        for _ in 0..(EVENTS_CAP / 1000 + 10) {
            store.append_event(&line).unwrap();
        }
        let len = fs::metadata(store.events_path()).unwrap().len();
        assert!(len <= EVENTS_CAP, "{len}");
        let text = fs::read_to_string(store.events_path()).unwrap();
        assert!(text.lines().all(|l| l.len() == 1000));

        let outside = dir.path().join("outside");
        fs::write(&outside, b"").unwrap();
        fs::remove_file(store.events_path()).unwrap();
        std::os::unix::fs::symlink(&outside, store.events_path()).unwrap();
        assert!(store.append_event("{}").is_err());
        assert_eq!(fs::read(&outside).unwrap(), b"");
    }
}
