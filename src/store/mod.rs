//! Everything hank keeps on disk under `.hank/`: the schemas of `state.json` (internal,
//! versioned) and `status.json` (public contract, HANK.md §2), the atomic store, the call
//! log, the single-loop lock, the event log and the rotated human log.
//!
//! Every file is written to a temporary file in the same directory and renamed over the
//! target, with mode 0600, so a reader (the monitor, CI) never sees half a file and a crash
//! never leaves one. A rename replaces a symlink rather than writing through it, so a
//! symlinked `.hank/` file is never followed out of the project. The append-only files
//! (`events.jsonl`, `hank.log`, the call log) are opened with `O_NOFOLLOW` instead.
//!
//! # The call log
//!
//! The call ledger (every call of the last hour, with its tokens) is not in `state.json`
//! (schema 2) but in `.hank/state.json.calls`, one [`CallRecord`] JSON line per call, so that
//! the per-loop save costs the same whether the window holds 10 calls or 10,000: before a
//! spawn, [`Store::save_state_with`] appends the new call's line (`O_APPEND`, `O_NOFOLLOW`,
//! 0600, one `write`) and then replaces the small `state.json` as before. Once the call's
//! tokens are known, the next save appends the same id again with its tokens (last line
//! wins). Past [`CALLS_COMPACT_FACTOR`] lines per call in memory (+ [`CALLS_COMPACT_SLACK`]),
//! the log is rewritten atomically (temp + rename) with only the ledger in memory — the calls
//! of the window —, which keeps it bounded at an amortized O(1) per loop.
//!
//! Why it never under-counts: the line is in the file (page cache) before `save_state_with`
//! returns, so before the agent exists, and a `kill -9` cannot undo a finished `write`; a
//! compaction only ever replaces the log with a file holding every call the ledger holds. A
//! write cut short (full disk, power loss) leaves at most a last line without its newline,
//! which readers ignore and the next save replaces by a compaction. The log comes first, then
//! `state.json`: a crash between them over-counts by the one call that was never spawned, as
//! a crash between the old single rename and the spawn did. The name matches the
//! `.hank/state.json*` line every project's `.gitignore` already has.
//!
//! Why not a compact encoding (per-second counts) in `state.json`: the file would still be
//! rewritten whole every loop (up to 3,600 buckets), and a bucket has to be dated by its
//! latest call to never let a call leave the window early, which then keeps the others too
//! long. The log keeps exact times and writes one line.
//!
//! Compatibility: a schema 1 `state.json` carries the ledger inline; [`Store::load_state`]
//! reads it (merged with any log, a call present in both counted once) and the next save
//! writes it into the log (compaction) before replacing `state.json` with a schema 2 file.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `schema.rs` (State, Status, Event, ConfigApproval, ControlEntry, FleetFile, PlannedTask (`fleet
//! plan --json`): the formats, defined once; `EventKind::from(&Transition)`: the one
//! `circuit_changed` of a breaker transition, for the run and `hank reset circuit`;
//! `Status::of(StatusParts)`: status.json of a run, with what a run state implies — questions only
//! in a wait for an answer, no end for a pause, exit code 1 when failed **\[pure,
//! table-tested\]**), `HankFile` (each file of `.hank/` and its name; `Store::path(file)` the one
//! accessor), atomic 0600 writes, lock (`agent`/`verify` group records with start times), events,
//! log (appends open first with `O_NOFOLLOW|O_NONBLOCK` and replace a link or special file only
//! when that open fails, `Store::open_own`; `Store::loop_logs` checks the log folders once for
//! `.out` and `.err`); the call log's copy in the per-user dir (`Store::with_ledger_copy`, union at
//! load); `userdir.rs` (per-user state outside the project; `project.json`
//! (`schema::ProjectRecord`) names the project of each folder, written once by `project_dir`,
//! listed by `known_projects` for `hank serve`); `portable.rs` the portable run state
//! (`StateBundle`: collect, the merge that never loosens the local state, apply under the lock,
//! `--to-dir` files, the step summary append); `fleet_ledger.rs` (the fleet-wide ledger, flock'd:
//! `TIME call PID` taken through `Effects::reserve_call` at the observation before each spawn when
//! `HANK_FLEET_LEDGER` is set, `TIME spent PID TOKENS USD` after the fold (`Effects::settle_call`),
//! `TIME start` per fleet; the verdict is `policy::fleet::fleet_budget` — calls/tokens per hour,
//! MAX_COST_USD with calls in flight; a cost stop enters the run as `Fact::FleetLimit`);
//! `shared_windows.rs` (the usage windows every run of the user shares: `windows/windows.json`
//! under `userdir::shared_dir`, published after a fold that brought readings
//! (`Effects::publish_windows`), adopted before each observation (`Effects::adopt_windows`), merge
//! `policy::windows::adopt_newer`)

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use jiff::Timestamp;

use crate::error::{HankError, Result};
use crate::fsread::Follow;
use crate::policy::budget::{Ledger, LedgerEntry};

pub mod fleet_ledger;
pub mod portable;
pub mod schema;
pub mod shared_windows;
pub mod userdir;

pub use schema::{
    CallRecord, Event, EventKind, LastLoop, PlanCounts, RunState, STATE_SCHEMA, State, Status,
};

/// A `.hank/.tmp-*` file older than this is a leftover of a killed hank ([`Store::remove_stale_temps`]).
pub const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(600);
/// `events.jsonl` is trimmed to its newest half past this size.
pub const EVENTS_CAP: u64 = 4 * 1024 * 1024;
/// `logs/hank.log` rotates past this size (3 old files kept).
pub const LOG_CAP: u64 = 1024 * 1024;
/// The call log is compacted when it holds more than this many lines per call of the ledger
/// (a call writes about 2: itself, then its tokens) …
pub const CALLS_COMPACT_FACTOR: usize = 4;
/// … plus this many (so that a small window is not compacted every few loops).
pub const CALLS_COMPACT_SLACK: usize = 256;

/// Writes `bytes` to `path` atomically (temp file in the same directory + rename), mode 0600.
pub fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    write_file_atomic(
        path,
        bytes,
        &AtomicWrite {
            mode: 0o600,
            durable,
            replace: true,
        },
    )
}

/// How [`write_file_atomic`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicWrite {
    /// The file's permission bits (0600 for hank's own files, 0644 for project files).
    pub mode: u32,
    /// fsync the data before the rename.
    pub durable: bool,
    /// Replace an existing file; `false` fails with `AlreadyExists` instead.
    pub replace: bool,
}

/// The one atomic writer: a temp file in the same directory with `how.mode`, then a rename
/// over `path` (which replaces a symlink rather than writing through it).
pub fn write_file_atomic(path: &Path, bytes: &[u8], how: &AtomicWrite) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .permissions(fs::Permissions::from_mode(how.mode))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    if how.durable {
        tmp.as_file().sync_data()?;
    }
    // The umask may have narrowed the mode at creation: set it exactly.
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(how.mode))?;
    if how.replace {
        tmp.persist(path).map_err(|e| e.error)?;
    } else {
        tmp.persist_noclobber(path).map_err(|e| e.error)?;
    }
    Ok(())
}

/// Opens a file for appending without following a symlink, creating it 0600. Never blocks on
/// a FIFO planted there (`O_NONBLOCK`), and anything but a regular file is an error naming
/// what it is.
fn open_append(path: &Path) -> io::Result<File> {
    open_append_len(path).map(|(file, _)| file)
}

/// [`open_append`], with the file's length (from the same `fstat`).
fn open_append_len(path: &Path) -> io::Result<(File, u64)> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    regular_only(file)
}

/// `file` if it is a regular file (with its length), else an error saying what it is.
fn regular_only(file: File) -> io::Result<(File, u64)> {
    let meta = file.metadata()?;
    if meta.file_type().is_file() {
        return Ok((file, meta.len()));
    }
    let what = if meta.file_type().is_fifo() {
        "a FIFO (named pipe)"
    } else if meta.is_dir() {
        "a directory"
    } else {
        "a special file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("is {what}; expected a regular file (remove it)"),
    ))
}

/// The `.hank/` directory of a project.
///
/// A store remembers what the call log holds since it last read or wrote it, so that a save
/// appends only what is new. Saves expect the state its own [`Store::load_state`] returned
/// (or one made from scratch, which makes the next save rewrite the log from it).
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    journal: Arc<Mutex<Option<Journal>>>,
    /// The copy of the call log outside the project ([`Store::with_ledger_copy`]).
    copy: Option<PathBuf>,
    /// Where the `hank ctl` journal lives ([`Store::with_control_journal`]).
    control: Option<PathBuf>,
    /// What the store repaired on its own (a link among its files replaced), for the loop to
    /// report as warnings.
    notes: Arc<Mutex<Vec<String>>>,
    /// Whether `.hank` itself was a symbolic link the first time the store made sure of its
    /// folders (the user's own layout, left alone); one that becomes a link later is the
    /// agent's and is replaced ([`Store::keep_hank_dir_real`]).
    hank_dir_was_link: Arc<std::sync::OnceLock<bool>>,
}

/// One of hank's files in a project's `.hank/` (each written 0600: atomically, or appended
/// without following a link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HankFile {
    /// `state.json`, the run's state (internal, versioned).
    State,
    /// `state.json.calls`, the call log (see the module doc).
    Calls,
    /// `status.json`, the public status.
    Status,
    /// `events.jsonl`.
    Events,
    /// `live.log`, the agent's output as it comes.
    Live,
    /// The `logs/` folder (per-loop logs, check outputs, `hank.log`).
    Logs,
    /// `hank.lock`, the single-loop lock and its record of the processes started.
    Lock,
    /// `control.jsonl`, the `hank ctl` journal: in the per-user folder
    /// ([`Store::with_user_control`]), in `.hank/` only in unit tests.
    Control,
}

impl HankFile {
    /// The file's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::State => "state.json",
            Self::Calls => "state.json.calls",
            Self::Status => "status.json",
            Self::Events => "events.jsonl",
            Self::Live => "live.log",
            Self::Logs => "logs",
            Self::Lock => "hank.lock",
            Self::Control => "control.jsonl",
        }
    }
}

/// What the call log holds, as far as this store knows.
#[derive(Debug, Clone, Copy, Default)]
struct Journal {
    /// Id of the newest call in the log (0: none).
    logged: u64,
    /// The tokens the log holds for that call.
    last_tokens: u64,
    /// Lines in the log.
    lines: usize,
    /// The next save rewrites the log (damaged, or the ledger came partly from `state.json`).
    rewrite: bool,
}

/// The call log as read.
#[derive(Debug, Default)]
struct CallLog {
    /// Calls by increasing id, the last line of each id.
    entries: Vec<LedgerEntry>,
    last_id: u64,
    lines: usize,
    /// A line was cut short or did not parse, or ids/times were out of order.
    damaged: bool,
}

/// Parses the call log's bytes (see [`CallRecord`] for the rules).
fn parse_call_log(bytes: &[u8]) -> CallLog {
    let mut by_id = std::collections::BTreeMap::new();
    let mut log = CallLog::default();
    let mut lines = bytes.split(|b| *b == b'\n').peekable();
    while let Some(line) = lines.next() {
        let last = lines.peek().is_none();
        if last {
            // After the final newline: empty, or a line whose write was cut short.
            if !line.is_empty() {
                log.lines += 1;
                log.damaged = true;
            }
            break;
        }
        log.lines += 1;
        match CallRecord::parse(line) {
            Some(r) => {
                if r.id < log.last_id && !by_id.contains_key(&r.id) {
                    log.damaged = true;
                }
                log.last_id = log.last_id.max(r.id);
                by_id.insert(r.id, r.entry());
            }
            None => log.damaged = true,
        }
    }
    log.entries = by_id.into_values().collect();
    if log.entries.windows(2).any(|w| w[1].at < w[0].at) {
        // The clock moved back between two runs: rewrite the log in ledger order.
        log.damaged = true;
    }
    log
}

/// The ledger of a `state.json` (schema 1 files carry one) merged with the call log's: a call
/// in both (same time) counts once, with the larger token count. Never fewer calls than
/// either holds.
fn merge_ledgers(inline: Vec<LedgerEntry>, log: Vec<LedgerEntry>) -> Vec<LedgerEntry> {
    if inline.is_empty() {
        return log;
    }
    let mut merged = log;
    let mut unmatched: std::collections::HashMap<Timestamp, Vec<usize>> =
        std::collections::HashMap::new();
    for (i, e) in merged.iter().enumerate() {
        unmatched.entry(e.at).or_default().push(i);
    }
    for e in inline {
        match unmatched.get_mut(&e.at).and_then(Vec::pop) {
            Some(i) => {
                if let Some(m) = merged.get_mut(i) {
                    m.tokens = m.tokens.max(e.tokens);
                }
            }
            None => merged.push(e),
        }
    }
    merged.sort_by_key(|e| e.at);
    merged
}

/// Whether two call logs hold different calls (times and tokens).
fn ledgers_differ(a: &[LedgerEntry], b: &[LedgerEntry]) -> bool {
    a.len() != b.len() || a.iter().zip(b).any(|(x, y)| x != y)
}

/// What loading `state.json` found.
#[derive(Debug)]
pub struct Loaded {
    pub state: State,
    /// Set when a corrupt file was moved aside: where it went.
    pub moved_aside: Option<PathBuf>,
    /// What was wrong with the file moved aside, and what of it was kept or lost, for the
    /// warning (empty when nothing was moved aside).
    pub problem: String,
    /// Timestamps in the future (the clock went back, or the file was edited) clamped to now.
    pub clamped: Vec<String>,
}

/// Why a `state.json` cannot be used, or the state it holds. A file hank wrote is an object
/// with a `schema_version` of at most [`STATE_SCHEMA`], every field of the right type; anything
/// else (`{}`, `[]`, a field of the wrong type) is refused, never read as a fresh state.
fn parse_state(bytes: &[u8]) -> std::result::Result<State, String> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("is not valid JSON ({e})"))?;
    let obj = v
        .as_object()
        .ok_or_else(|| "is not a JSON object".to_string())?;
    let version = obj
        .get("schema_version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| "has no schema_version (hank always writes one)".to_string())?;
    if version == 0 || version > u64::from(STATE_SCHEMA) {
        return Err(format!(
            "has schema_version {version}; this hank reads 1 to {STATE_SCHEMA}"
        ));
    }
    serde_json::from_value::<State>(v).map_err(|e| format!("does not match the state schema ({e})"))
}

/// The fields every `state.json` hank writes has (those a default state serializes) that
/// `bytes` lacks: they are taken as their defaults, which the run says.
fn missing_state_fields(bytes: &[u8]) -> Vec<String> {
    let Ok(serde_json::Value::Object(file)) = serde_json::from_slice::<serde_json::Value>(bytes)
    else {
        return Vec::new();
    };
    let Ok(serde_json::Value::Object(full)) = serde_json::to_value(State::default()) else {
        return Vec::new();
    };
    full.keys()
        .filter(|k| !file.contains_key(*k))
        .cloned()
        .collect()
}

/// What can be saved from a state file that is moved aside: an OPEN breaker is kept (a
/// damaged file must not close it silently). Returns the breaker to keep and the words for
/// the warning.
fn salvage(bytes: &[u8]) -> (Option<crate::policy::breaker::Breaker>, String) {
    let breaker = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| v.get("breaker").cloned())
        .and_then(|b| {
            // Only what is clearly an OPEN breaker; its other fields as far as they read.
            let open = b.get("state").and_then(serde_json::Value::as_str) == Some("OPEN");
            open.then(|| {
                let lenient =
                    schema::read_lenient::<crate::policy::breaker::Breaker>(&b).map(|l| l.value);
                let mut br = lenient.unwrap_or_default();
                br.state = crate::policy::breaker::CircuitState::Open;
                if br.reason.is_empty() {
                    br.reason = "kept from a damaged state.json".into();
                }
                br
            })
        });
    let words = match &breaker {
        Some(b) => format!(
            "the circuit breaker there was OPEN ({}) and stays OPEN (`hank reset circuit` to close it); the loop history, totals and session were lost",
            b.reason
        ),
        None => "the loop history, totals, breaker counters and session were lost".into(),
    };
    (breaker, words)
}

impl Store {
    /// The store of the project at `project_dir`.
    #[must_use]
    pub fn new(project_dir: &Path) -> Self {
        Self {
            dir: project_dir.join(".hank"),
            journal: Arc::new(Mutex::new(None)),
            copy: None,
            control: None,
            notes: Arc::new(Mutex::new(Vec::new())),
            hank_dir_was_link: Arc::new(std::sync::OnceLock::new()),
        }
    }

    /// The same store, keeping a copy of the call log at `copy` (the per-user state directory,
    /// out of the agent's reach): every line the log gets is written there too, and
    /// [`Store::load_state`] takes the union of both, so that emptying or deleting
    /// `.hank/state.json.calls` forgets no call of the hour.
    #[must_use]
    pub fn with_ledger_copy(mut self, copy: PathBuf) -> Self {
        self.copy = Some(copy);
        self
    }

    /// Reads the copy of the call log (`O_NOFOLLOW`); missing, unset or unreadable → empty
    /// (the copy only ever adds calls).
    fn read_copy(&self) -> CallLog {
        let Some(path) = &self.copy else {
            return CallLog::default();
        };
        match crate::fsread::read_if_exists(path, crate::fsread::STATE_LIMIT, Follow::No) {
            Ok(Some(bytes)) => parse_call_log(&bytes),
            _ => CallLog::default(),
        }
    }

    /// Writes `bytes` to the copy of the call log: appended, or the whole copy replaced
    /// (`whole`, a compaction). Best effort, with a note when it fails.
    fn write_copy(&self, bytes: &[u8], whole: bool, durable: bool) {
        let Some(path) = &self.copy else {
            return;
        };
        let res = if whole {
            write_atomic(path, bytes, durable)
        } else {
            open_append(path).and_then(|mut f| f.write_all(bytes))
        };
        if let Err(e) = res {
            self.note(format!(
                "failed to write the copy of the call log {}: {e}",
                path.display()
            ));
        }
    }

    /// The repairs made since the last call (see [`Store::ensure_dirs`]), for warnings.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn note(&self, msg: String) {
        self.notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(msg);
    }

    /// Makes sure `path`, one of hank's own append-only files, is a regular file or absent:
    /// a symbolic link (the agent may plant one to make hank write elsewhere, or to break
    /// every write) or any other special file there is removed (a directory is moved aside),
    /// with a note. Never follows the link.
    fn own_file(&self, path: &Path) {
        let Some(what) = crate::fsread::not_regular(path, Follow::No) else {
            return;
        };
        let done = if what == "a directory" {
            let aside = path.with_extension(format!("moved-aside-{}", std::process::id()));
            fs::rename(path, &aside).map(|()| format!("moved it aside to {}", aside.display()))
        } else {
            fs::remove_file(path).map(|()| "replaced it with a regular file".to_owned())
        };
        match done {
            Ok(how) => self.note(format!(
                "{} was {what}; hank never follows links or writes into special files among its own files: {how}",
                path.display()
            )),
            Err(e) => self.note(format!(
                "{} is {what} and could not be replaced: {e}",
                path.display()
            )),
        }
    }

    /// Opens `path`, one of hank's own append-only files, for appending ([`open_append`]),
    /// with its length. Nothing is looked at before the open (`O_NOFOLLOW` refuses a link
    /// and `O_NONBLOCK` a FIFO by itself): only when the open fails or finds something other
    /// than a regular file is it replaced ([`Store::own_file`]) and opened again — one
    /// `lstat` fewer per append than checking first, the same files refused.
    fn open_own(&self, path: &Path) -> io::Result<(File, u64)> {
        match open_append_len(path) {
            Ok(opened) => Ok(opened),
            Err(_) => {
                self.own_file(path);
                open_append_len(path)
            }
        }
    }

    /// The `.hank/` directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `file` is in `.hank/` (the `hank ctl` journal's place is
    /// [`Store::control_path`]).
    #[must_use]
    pub fn path(&self, file: HankFile) -> PathBuf {
        self.dir.join(file.name())
    }

    /// `logs/loop-NNNNN.out` / `.err`.
    #[must_use]
    pub fn loop_log(&self, number: u64, ext: &str) -> PathBuf {
        self.real_logs_dir().join(format!("loop-{number:05}.{ext}"))
    }

    /// `logs/loop-NNNNN.out` and `.err`, the folders made sure of once for both.
    #[must_use]
    pub fn loop_logs(&self, number: u64) -> (PathBuf, PathBuf) {
        let logs = self.real_logs_dir();
        (
            logs.join(format!("loop-{number:05}.out")),
            logs.join(format!("loop-{number:05}.err")),
        )
    }

    /// The `logs/` folder ([`HankFile::Logs`]) for a write, rotation or removal: a symbolic link planted there at
    /// any time (not only before the run) is replaced by a real directory first, with a note
    /// — the link is removed, never what it points to.
    fn real_logs_dir(&self) -> PathBuf {
        self.keep_hank_dir_real();
        let logs = self.path(HankFile::Logs);
        if let Ok(meta) = fs::symlink_metadata(&logs)
            && meta.file_type().is_symlink()
        {
            match fs::remove_file(&logs).and_then(|()| fs::create_dir(&logs)) {
                Ok(()) => self.note(format!(
                    "{} was a symbolic link; hank never writes outside the project: removed the link (not its target) and made a real directory",
                    logs.display()
                )),
                Err(e) => self.note(format!(
                    "{} is a symbolic link and could not be replaced: {e}",
                    logs.display()
                )),
            }
        }
        logs
    }

    /// LOG_RETENTION: removes the per-loop logs (`loop-N.out`, `.err`, `.prompt`) of loops
    /// numbered below `keep_from`, and the check outputs (`verify-N.log`) numbered below
    /// `keep_verify_from`. Only regular files whose names hank gives are touched. Returns how
    /// many were removed.
    pub fn prune_logs(&self, keep_from: u64, keep_verify_from: u64) -> usize {
        let Ok(entries) = fs::read_dir(self.real_logs_dir()) else {
            return 0;
        };
        let number = |name: &str, prefix: &str| -> Option<u64> {
            let rest = name.strip_prefix(prefix)?;
            let (digits, _ext) = rest.split_once('.')?;
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| digits.parse().ok())
                .flatten()
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let old = match (number(&name, "loop-"), number(&name, "verify-")) {
                (Some(n), _) => n < keep_from,
                (_, Some(n)) => n < keep_verify_from,
                _ => false,
            };
            if old
                && entry.file_type().is_ok_and(|t| t.is_file())
                && fs::remove_file(entry.path()).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }

    /// Removes the logs of the loops and checks numbered in these ranges, by name (the
    /// per-loop step of LOG_RETENTION; [`Store::prune_logs`] scans the folder once per run).
    pub fn remove_logs(&self, loops: std::ops::Range<u64>, checks: std::ops::Range<u64>) {
        if loops.is_empty() && checks.is_empty() {
            return;
        }
        // One check of the folders for the whole batch (an unlink never follows a link in
        // its last component, and this one is hank's own, just made sure of).
        let logs = self.real_logs_dir();
        for n in loops {
            for ext in ["out", "err", "prompt"] {
                let _ = fs::remove_file(logs.join(format!("loop-{n:05}.{ext}")));
            }
        }
        for n in checks {
            let _ = fs::remove_file(logs.join(format!("verify-{n:05}.log")));
        }
    }

    /// `.hank` replaced by a symbolic link after the store first looked (the agent moved the
    /// folder away and left a link to it): the link is replaced by a real, empty folder with a
    /// note, so nothing hank writes next goes through it; the loop's integrity check then
    /// stops the run (its files are gone). A `.hank` that was a link from the start is the
    /// user's layout and is left alone.
    fn keep_hank_dir_real(&self) {
        let is_link = fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_symlink());
        let was_link = *self.hank_dir_was_link.get_or_init(|| is_link);
        if is_link && !was_link {
            match fs::remove_file(&self.dir).and_then(|()| fs::create_dir(&self.dir)) {
                Ok(()) => self.note(format!(
                    "{} was replaced by a symbolic link during the run; hank never writes outside the project: removed the link (not its target) and made a real directory",
                    self.dir.display()
                )),
                Err(e) => self.note(format!(
                    "{} is a symbolic link and could not be replaced: {e}",
                    self.dir.display()
                )),
            }
        }
    }

    /// Creates `.hank/logs/` if needed. A `logs` that is a symbolic link (it would lead
    /// hank's writes out of the project) is replaced by a real directory, with a note (the
    /// link itself is removed, never what it points to); a regular file there is an error.
    pub fn ensure_dirs(&self) -> Result<()> {
        self.keep_hank_dir_real();
        let logs = self.path(HankFile::Logs);
        if let Ok(meta) = fs::symlink_metadata(&logs)
            && meta.file_type().is_symlink()
        {
            fs::remove_file(&logs).map_err(|e| HankError::io("failed to replace", &logs, e))?;
            self.note(format!(
                "{} was a symbolic link; hank never writes outside the project: removed the link (not its target) and made a real directory",
                logs.display()
            ));
        } else if let Ok(meta) = fs::symlink_metadata(&logs)
            && meta.is_dir()
        {
            // Already a real folder (the per-loop case): nothing to create.
            return Ok(());
        }
        fs::create_dir_all(&logs).map_err(|e| HankError::io("failed to create", &logs, e))
    }

    /// Removes `.hank/.tmp-*` files (the atomic writer's temp files, [`write_file_atomic`])
    /// last modified more than `age` ago: what a hank killed in the middle of a write left.
    /// A live write lasts milliseconds, so a younger one is left alone (another hank command
    /// may be writing it). Only regular files are removed; best effort.
    pub fn remove_stale_temps(&self, age: std::time::Duration) -> usize {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            if !entry.file_name().as_encoded_bytes().starts_with(b".tmp-") {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            let old = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|d| d > age);
            if meta.file_type().is_file() && old && fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// Loads `state.json` and the call log. Missing → a fresh state (with the log's calls, if
    /// any). Corrupt or of a newer schema → moved aside as `state.json.corrupt-<ts>` and a
    /// fresh state returned (the caller warns); the calls in the log are kept. Never silently
    /// reset. A call log that is a symlink is an error (it is never followed).
    pub fn load_state(&self, now: Timestamp) -> Result<Loaded> {
        let path = self.path(HankFile::State);
        let mut log = self.read_calls()?;
        // The copy outside the project: a call it holds and the log lost (emptied, deleted,
        // edited by the agent) is counted again, and the next save rewrites both.
        let copy = self.read_copy();
        if self.copy.is_some() && ledgers_differ(&log.entries, &copy.entries) {
            let before = log.entries.len();
            log.entries = merge_ledgers(copy.entries, std::mem::take(&mut log.entries));
            log.last_id = log.last_id.max(copy.last_id);
            log.damaged = true;
            let restored = log.entries.len().saturating_sub(before);
            if restored > 0 {
                self.note(format!(
                    "{} lacked {restored} call(s) that its copy outside the project holds; they count against the caps again",
                    self.path(HankFile::Calls).display()
                ));
            }
        }
        let mut problem = String::new();
        let read = match crate::fsread::read(&path, crate::fsread::STATE_LIMIT, Follow::No) {
            Ok(bytes) => {
                let parsed = parse_state(&bytes).map_err(|why| (why, bytes.clone()));
                let missing = missing_state_fields(&bytes);
                if parsed.is_ok() && !missing.is_empty() {
                    self.note(format!(
                        "{} lacked {}: taken as their defaults (hank writes every field; was it edited by hand or by an older hank?)",
                        path.display(),
                        missing.join(", ")
                    ));
                }
                parsed
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(State::default()),
            // A link is never followed: it is moved aside like a damaged file.
            Err(e) if crate::fsread::not_regular(&path, Follow::No) == Some("a symbolic link") => {
                Err((e.to_string(), Vec::new()))
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Err((e.to_string(), Vec::new())),
            Err(e) => return Err(HankError::io("failed to read", &path, e)),
        };
        let (mut state, moved_aside) = match read {
            Ok(state) => (state, None),
            Err((why, bytes)) => {
                let aside = self
                    .dir
                    .join(format!("state.json.corrupt-{}", now.as_second()));
                fs::rename(&path, &aside)
                    .map_err(|e| HankError::io("failed to move aside corrupt", &path, e))?;
                let (breaker, lost) = salvage(&bytes);
                problem = format!("{why}; {lost}");
                let mut fresh = State::default();
                if let Some(b) = breaker {
                    fresh.breaker = b;
                }
                (fresh, Some(aside))
            }
        };
        let clamped = state.clamp_future(now);
        let inline = !state.ledger.entries.is_empty();
        let mut state = with_calls(state, log.entries, log.last_id);
        let mut clamped = clamped;
        let future_calls = state.ledger.entries.iter().filter(|e| e.at > now).count();
        if future_calls > 0 {
            for e in &mut state.ledger.entries {
                e.at = e.at.min(now);
            }
            clamped.push(format!("{future_calls} call(s) of the call log"));
        }
        let rewrite_log = future_calls > 0;
        let last = state.ledger.entries.last();
        *self.journal_lock() = Some(Journal {
            logged: state.ledger.last_id(),
            last_tokens: last.map_or(0, |e| e.tokens),
            lines: log.lines,
            rewrite: log.damaged || inline || rewrite_log,
        });
        Ok(Loaded {
            state,
            moved_aside,
            problem,
            clamped,
        })
    }

    /// Saves `state.json` atomically and durably (fdatasync before the rename, and of the
    /// call log): used before every spawn, so the call ledger survives even a power loss.
    pub fn save_state(&self, state: &State) -> Result<()> {
        self.save_state_with(state, true)
    }

    /// Saves the state: first the calls of `state.ledger` the call log does not hold yet (one
    /// append, or a compaction), then `state.json` atomically. The cost does not depend on
    /// how many calls the window holds (see the module doc). `durable` adds an fdatasync of
    /// both (costly on some disks; a crash of hank alone never needs it, only a crash of the
    /// machine does).
    pub fn save_state_with(&self, state: &State, durable: bool) -> Result<()> {
        let path = self.path(HankFile::State);
        let bytes = serde_json::to_vec_pretty(state)
            .map_err(|e| HankError::Internal(format!("failed to encode state: {e}")))?;
        self.save_calls(&state.ledger, durable)?;
        write_atomic(&path, &bytes, durable).map_err(|e| HankError::io("failed to write", &path, e))
    }

    fn journal_lock(&self) -> std::sync::MutexGuard<'_, Option<Journal>> {
        self.journal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the call log (`O_NOFOLLOW`); missing → empty.
    fn read_calls(&self) -> Result<CallLog> {
        let path = self.path(HankFile::Calls);
        match crate::fsread::read_if_exists(&path, crate::fsread::STATE_LIMIT, Follow::No) {
            Ok(Some(bytes)) => Ok(parse_call_log(&bytes)),
            Ok(None) => Ok(CallLog::default()),
            Err(e) => Err(HankError::io("failed to read", &path, e)),
        }
    }

    /// Brings the call log up to `ledger`: appends what is new since the last read or write,
    /// or rewrites it whole when it is unknown, damaged, too long, or `ledger` is not the
    /// continuation of what it holds.
    fn save_calls(&self, ledger: &Ledger, durable: bool) -> Result<()> {
        let path = self.path(HankFile::Calls);
        let mut journal = self.journal_lock();
        let entries = &ledger.entries;
        let last_id = ledger.last_id();
        let bound = CALLS_COMPACT_FACTOR
            .saturating_mul(entries.len())
            .saturating_add(CALLS_COMPACT_SLACK);
        // A log deleted meanwhile (the agent removed `.hank/`, `git clean -fdX`) is written
        // again whole from the ledger in memory, not restarted with the newest call alone.
        let present = fs::symlink_metadata(&path).is_ok();
        let known = match *journal {
            Some(j)
                if !j.rewrite
                    && last_id >= j.logged
                    && j.lines <= bound
                    && (present || j.lines == 0) =>
            {
                j
            }
            _ => {
                // Compaction: the ledger in memory, numbered from the end (last = last_id).
                let first = last_id - entries.len() as u64;
                let mut bytes = Vec::with_capacity(entries.len() * 64);
                for (id, e) in (first + 1..).zip(entries) {
                    CallRecord::of(id, e).write_line(&mut bytes);
                }
                if let Err(e) = write_atomic(&path, &bytes, durable) {
                    *journal = None;
                    return Err(HankError::io("failed to write", &path, e));
                }
                self.write_copy(&bytes, true, durable);
                *journal = Some(Journal {
                    logged: last_id,
                    last_tokens: entries.last().map_or(0, |e| e.tokens),
                    lines: entries.len(),
                    rewrite: false,
                });
                return Ok(());
            }
        };
        // New calls are the last `fresh` entries; the one before them is the call logged last,
        // which may have got its tokens since.
        let fresh = usize::try_from(last_id - known.logged).unwrap_or(usize::MAX);
        let mut bytes = Vec::new();
        let mut lines = 0;
        if known.logged > 0
            && let Some(prev) = entries
                .len()
                .checked_sub(fresh.saturating_add(1))
                .and_then(|i| entries.get(i))
            && prev.tokens != known.last_tokens
        {
            CallRecord::of(known.logged, prev).write_line(&mut bytes);
            lines += 1;
        }
        let skip = entries.len().saturating_sub(fresh);
        for (id, e) in (last_id - (entries.len() - skip) as u64 + 1..).zip(&entries[skip..]) {
            CallRecord::of(id, e).write_line(&mut bytes);
            lines += 1;
        }
        if bytes.is_empty() {
            return Ok(());
        }
        let appended = open_append(&path).and_then(|mut f| {
            f.write_all(&bytes)?;
            if durable { f.sync_data() } else { Ok(()) }
        });
        if let Err(e) = appended {
            // Part of a line may be in the file: the next save rewrites it.
            *journal = None;
            return Err(HankError::io("failed to append to", &path, e));
        }
        self.write_copy(&bytes, false, durable);
        *journal = Some(Journal {
            logged: last_id,
            last_tokens: entries.last().map_or(known.last_tokens, |e| e.tokens),
            lines: known.lines + lines,
            rewrite: false,
        });
        Ok(())
    }

    /// Writes `status.json` atomically.
    pub fn write_status(&self, status: &Status) -> Result<()> {
        let path = self.path(HankFile::Status);
        let mut bytes = serde_json::to_vec_pretty(status)
            .map_err(|e| HankError::Internal(format!("failed to encode status: {e}")))?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes, false).map_err(|e| HankError::io("failed to write", &path, e))
    }

    /// Reads `state.json` and the call log without changing anything (for commands that
    /// only look): a missing file is the default state; an unreadable one is an error that
    /// says the next run will move it aside.
    pub fn read_state(&self) -> Result<State> {
        let path = self.path(HankFile::State);
        let state = match crate::fsread::read(&path, crate::fsread::STATE_LIMIT, Follow::No) {
            Ok(b) => parse_state(&b).map_err(|why| HankError::Unreadable {
                path: path.clone(),
                problem: format!(
                    "{why}: not a hank state file; the next `hank run` will move it aside"
                ),
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(HankError::io("failed to read", &path, e)),
        };
        let log = self.read_calls()?;
        Ok(with_calls(state, log.entries, log.last_id))
    }

    /// Reads `status.json`, if present and readable.
    #[must_use]
    pub fn read_status(&self) -> Option<Status> {
        let bytes = crate::fsread::read(
            &self.path(HankFile::Status),
            crate::fsread::DOCUMENT_LIMIT,
            Follow::No,
        )
        .ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Appends one event line to `events.jsonl`, trimming the file past [`EVENTS_CAP`].
    pub fn append_event(&self, line: &str) -> Result<()> {
        let path = self.path(HankFile::Events);
        let (mut f, before) = self
            .open_own(&path)
            .map_err(|e| HankError::io("failed to open", &path, e))?;
        // One write of the whole line (O_APPEND keeps it whole beside another writer).
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        f.write_all(&bytes)
            .map_err(|e| HankError::io("failed to append to", &path, e))?;
        let len = before + bytes.len() as u64;
        drop(f);
        if len > EVENTS_CAP {
            trim_to_tail(&path, EVENTS_CAP / 2)
                .map_err(|e| HankError::io("failed to trim", &path, e))?;
        }
        Ok(())
    }

    /// The `hank ctl` journal is kept at `path` — in `hank run` and `hank ctl`, the per-user
    /// state directory ([`Store::with_user_control`]), out of the agent's reach: a command
    /// the loop acts on (a raised limit, a stop) must come from the user, never from a file
    /// the agent can write.
    #[must_use]
    pub fn with_control_journal(mut self, path: PathBuf) -> Self {
        self.control = Some(path);
        self
    }

    /// [`Store::with_control_journal`] at `control.jsonl` in the project's per-user folder.
    ///
    /// # Errors
    /// The per-user folder cannot be found or created.
    pub fn with_user_control(self) -> Result<Self> {
        let project = self.dir.parent().unwrap_or(&self.dir).to_path_buf();
        let path = userdir::project_dir(&project)?.join(HankFile::Control.name());
        Ok(self.with_control_journal(path))
    }

    /// The `hank ctl` command journal: the path set by [`Store::with_control_journal`]
    /// (`hank run` and `hank ctl` put it in the per-user folder), else `.hank/control.jsonl`
    /// (unit tests).
    #[must_use]
    pub fn control_path(&self) -> PathBuf {
        self.control
            .clone()
            .unwrap_or_else(|| self.path(HankFile::Control))
    }

    /// Appends one line to the control journal (`O_APPEND`, `O_NOFOLLOW`, 0600). A journal
    /// owned by another user is refused: its commands would not be the user's.
    pub fn append_control(&self, line: &str) -> Result<()> {
        let path = self.control_path();
        self.own_file(&path);
        let f = open_append(&path).map_err(|e| HankError::io("failed to open", &path, e))?;
        let meta = f
            .metadata()
            .map_err(|e| HankError::io("failed to inspect", &path, e))?;
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            return Err(HankError::usage(format!(
                "{} is owned by another user (uid {}): refusing its commands; remove it",
                path.display(),
                meta.uid()
            )));
        }
        let mut f = f;
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        // One write of the whole line: O_APPEND keeps concurrent writers' lines whole.
        f.write_all(&bytes)
            .map_err(|e| HankError::io("failed to append to", &path, e))
    }

    /// The control journal's text (`O_NOFOLLOW`); missing → empty.
    pub fn read_control(&self) -> Result<String> {
        let path = self.control_path();
        match crate::fsread::read_if_exists(&path, crate::fsread::STATE_LIMIT, Follow::No) {
            Ok(Some(_))
                if fs::symlink_metadata(&path)
                    .is_ok_and(|m| m.uid() != nix::unistd::geteuid().as_raw()) =>
            {
                Err(HankError::usage(format!(
                    "{} is owned by another user: refusing its commands; remove it",
                    path.display()
                )))
            }
            Ok(Some(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Ok(None) => Ok(String::new()),
            Err(e) => Err(HankError::io("failed to read", &path, e)),
        }
    }

    /// Appends a line to `logs/hank.log` (rotated past [`LOG_CAP`]). Logging failures are
    /// not fatal: the loop's real state is in state.json.
    pub fn log(&self, now: Timestamp, line: &str) {
        let logs = self.real_logs_dir();
        let path = logs.join("hank.log");
        let mut opened = self.open_own(&path);
        if let Ok((_, len)) = &opened
            && *len > LOG_CAP
        {
            for i in (1..3).rev() {
                let _ = fs::rename(
                    logs.join(format!("hank.log.{i}")),
                    logs.join(format!("hank.log.{}", i + 1)),
                );
            }
            let _ = fs::rename(&path, logs.join("hank.log.1"));
            opened = self.open_own(&path);
        }
        if let Ok((mut f, _)) = opened {
            let text = format!("{} {line}\n", now.round(jiff::Unit::Second).unwrap_or(now));
            let _ = f.write_all(text.as_bytes());
        }
    }

    /// Whether a loop holds this project's lock now: a probe of the flock on the project
    /// directory (which the agent cannot remove), then of `.hank/hank.lock`; each is taken and
    /// released at once, nothing is written.
    #[must_use]
    pub fn loop_running(&self) -> bool {
        let held = |f: &File| matches!(f.try_lock(), Err(fs::TryLockError::WouldBlock));
        let project = self
            .dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new("."));
        if File::open(project).is_ok_and(|f| held(&f)) {
            return true;
        }
        OpenOptions::new()
            .read(true)
            .custom_flags(
                nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits(),
            )
            .open(self.path(HankFile::Lock))
            .is_ok_and(|f| held(&f))
    }

    /// The pid of the loop that holds the project's lock now (`None`: no loop runs, or the
    /// lock file does not name one).
    #[must_use]
    pub fn loop_pid(&self) -> Option<u32> {
        if !self.loop_running() {
            return None;
        }
        lock_holder(&self.path(HankFile::Lock)).and_then(|p| p.parse().ok())
    }

    /// Takes the project's loop lock, or says which PID holds it.
    ///
    /// Two locks, both released by the OS when hank dies (even by SIGKILL): an `flock` on the
    /// project directory itself, which nothing inside the project can remove (an agent that
    /// deletes `.hank/` or runs `git clean -fdX` does not let a second loop start), and one on
    /// `.hank/hank.lock`, which holds the PID and the record of a running agent. A record left
    /// by a hank that was killed is kept (also by `hank reset`) until a loop has stopped what
    /// it names ([`LockGuard::orphaned_agent`], [`LockGuard::record_agent`]).
    pub fn lock(&self) -> Result<LockGuard> {
        let path = self.path(HankFile::Lock);
        let project = self
            .dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new("."));
        let dir_lock =
            File::open(project).map_err(|e| HankError::io("failed to open", project, e))?;
        try_lock(&dir_lock, project, &path)?;
        let mut file =
            open_lock_file(&path).map_err(|e| HankError::io("failed to open", &path, e))?;
        try_lock(&file, &path, &path)?;
        let mut previous = String::new();
        let _ = file.read_to_string(&mut previous);
        // The records are trusted only under this user's seal (a key outside the project): a
        // record the agent wrote into `.hank/hank.lock` names no group hank will signal.
        let key = lock_key(project);
        let previous = key
            .as_deref()
            .and_then(|k| unsealed(&previous, k))
            .unwrap_or_default();
        let mut guard = LockGuard {
            _dir: dir_lock,
            file,
            path,
            key,
            previous,
            agent: None,
            verify: None,
            procs: Vec::new(),
            written: String::new(),
        };
        // Keep a killed hank's records until a loop stops what they name.
        guard.agent = guard.orphaned_agent();
        guard.verify = guard.orphaned_verify();
        guard.procs = guard.orphaned_procs();
        guard
            .write_record()
            .map_err(|e| HankError::io("failed to write", &guard.path, e))?;
        Ok(guard)
    }
}

/// Takes `file`'s exclusive lock (`file` opened at `at`) without waiting: held by another
/// hank → [`HankError::Locked`] naming the holder written in the lock file `lock_path`.
fn try_lock(file: &File, at: &Path, lock_path: &Path) -> Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(fs::TryLockError::WouldBlock) => Err(HankError::Locked {
            holder: lock_holder(lock_path),
            path: lock_path.to_path_buf(),
        }),
        Err(fs::TryLockError::Error(e)) => Err(HankError::io("failed to lock", at, e)),
    }
}

/// Opens (creates) `.hank/hank.lock`, 0600, never through a symlink; a FIFO or other special
/// file there is an error (reading it would block for ever).
fn open_lock_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    regular_only(file).map(|(file, _)| file)
}

/// The per-user key that seals the lock's records (`lock.key` in the project's per-user dir,
/// created 0600 with 32 random bytes on first use). `None` when there is no per-user dir or
/// no randomness: records are then written unsealed and never acted on.
fn lock_key(project: &Path) -> Option<Vec<u8>> {
    // Unit tests keep the key beside their temporary project, never in the user's own dir.
    #[cfg(test)]
    let path = project.join("lock.key");
    #[cfg(not(test))]
    let path = userdir::project_dir(project).ok()?.join("lock.key");
    if let Ok(Some(bytes)) = crate::fsread::read_if_exists(&path, 256, Follow::No) {
        let key = String::from_utf8_lossy(&bytes).trim().to_string();
        if key.len() >= 32 {
            return Some(key.into_bytes());
        }
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    let key = crate::policy::control::hex(&bytes);
    write_atomic(&path, format!("{key}\n").as_bytes(), true).ok()?;
    Some(key.into_bytes())
}

/// The record lines of a lock file's `text` when its last line is `seal HEX`, the HMAC of the
/// lines before it under `key`; `None` when it is unsealed or the seal does not match.
fn unsealed(text: &str, key: &[u8]) -> Option<String> {
    let body_end = text.trim_end_matches('\n').rfind('\n')? + 1;
    let (body, last) = text.split_at(body_end);
    let seal = last.trim().strip_prefix("seal ")?;
    (crate::policy::control::signature(key, body) == seal).then(|| body.to_string())
}

/// The PID written in the lock file, if it can be read.
fn lock_holder(path: &Path) -> Option<String> {
    let mut holder = String::new();
    let f = crate::fsread::open_regular(path, Follow::No).ok()?;
    let _ = f.take(4096).read_to_string(&mut holder);
    let holder = holder.lines().next().unwrap_or("").trim();
    (!holder.is_empty() && holder.bytes().all(|b| b.is_ascii_digit())).then(|| holder.to_string())
}

/// `state` with its ledger merged with the call log's calls (the log's ids up to `last_id`),
/// upgraded to the current schema (it is saved as such).
fn with_calls(mut state: State, calls: Vec<LedgerEntry>, last_id: u64) -> State {
    state.schema_version = STATE_SCHEMA;
    let inline = std::mem::take(&mut state.ledger.entries);
    state.ledger.entries = merge_ledgers(inline, calls);
    state.ledger.calls_recorded = last_id.max(state.ledger.entries.len() as u64);
    state
}

/// Held while the loop runs; the OS releases the locks when the process dies (even kill -9).
/// The file holds the PID, and while an agent runs (or after a hank was killed during one),
/// `agent PGID START_TICKS` on a second line; while VERIFY_COMMAND runs, `verify PGID
/// START_TICKS`. `START_TICKS` is the group leader's start time (field 22 of
/// `/proc/PID/stat`): a record is acted on only while that process is still the same one.
#[derive(Debug)]
pub struct LockGuard {
    /// The `flock` on the project directory.
    _dir: File,
    file: File,
    path: PathBuf,
    /// The per-user key sealing the records ([`lock_key`]).
    key: Option<Vec<u8>>,
    /// The records a previous holder left under a valid seal (empty otherwise).
    previous: String,
    /// The agent group recorded now.
    agent: Option<(i32, u64)>,
    /// The VERIFY_COMMAND group recorded now.
    verify: Option<(i32, u64)>,
    /// The running agent's descendants outside its group (PID, start time).
    procs: Vec<(i32, u64)>,
    /// The records as last written: a record that did not change is not written again.
    written: String,
}

impl LockGuard {
    /// The agent group a previous holder recorded and never cleared (it was killed), if any.
    #[must_use]
    pub fn orphaned_agent(&self) -> Option<(i32, u64)> {
        self.previous_record("agent ")
    }

    /// The VERIFY_COMMAND group a previous holder recorded and never cleared, if any.
    #[must_use]
    pub fn orphaned_verify(&self) -> Option<(i32, u64)> {
        self.previous_record("verify ")
    }

    fn previous_record(&self, prefix: &str) -> Option<(i32, u64)> {
        let line = self.previous.lines().find_map(|l| l.strip_prefix(prefix))?;
        let mut parts = line.split_whitespace();
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    }

    /// The agent's descendants outside its group that a previous holder recorded and never
    /// cleared (`proc PID START_TICKS` lines).
    #[must_use]
    pub fn orphaned_procs(&self) -> Vec<(i32, u64)> {
        self.previous
            .lines()
            .filter_map(|l| l.strip_prefix("proc "))
            .filter_map(|l| {
                let mut parts = l.split_whitespace();
                Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
            })
            .collect()
    }

    /// Records the running agent's descendants outside its group (cleared with the agent's
    /// record: [`LockGuard::record_agent`] with `None`).
    pub fn record_procs(&mut self, procs: &[(i32, u64)]) {
        self.procs = procs.to_vec();
        let _ = self.write_record();
    }

    /// Records (or with `None` clears) the running VERIFY_COMMAND's process group, like
    /// [`LockGuard::record_agent`].
    pub fn record_verify(&mut self, verify: Option<(i32, u64)>) {
        self.verify = verify;
        let _ = self.write_record();
    }

    /// Records (or with `None` clears) the running agent's process group. Best effort; a lock
    /// file that was deleted or replaced meanwhile is created again (and locked).
    pub fn record_agent(&mut self, agent: Option<(i32, u64)>) {
        self.agent = agent;
        if agent.is_none() {
            self.procs.clear();
        }
        let _ = self.write_record();
    }

    fn write_record(&mut self) -> io::Result<()> {
        if !self.still_at_path() {
            if let Some(dir) = self.path.parent() {
                let _ = fs::create_dir_all(dir);
            }
            let file = open_lock_file(&self.path)?;
            let _ = file.try_lock();
            self.file = file;
        }
        let mut text = std::process::id().to_string();
        if let Some((pgid, ticks)) = self.agent {
            text.push_str(&format!("\nagent {pgid} {ticks}"));
        }
        if let Some((pgid, ticks)) = self.verify {
            text.push_str(&format!("\nverify {pgid} {ticks}"));
        }
        for (pid, ticks) in &self.procs {
            text.push_str(&format!("\nproc {pid} {ticks}"));
        }
        text.push('\n');
        if let Some(key) = &self.key {
            let seal = crate::policy::control::signature(key, &text);
            text.push_str(&format!("seal {seal}\n"));
        }
        // Rewritten only when it changed: the walk of the agent's descendants after each call
        // records the same (often empty) set again.
        if text == self.written
            && self
                .file
                .metadata()
                .is_ok_and(|m| m.len() == text.len() as u64)
        {
            return Ok(());
        }
        self.written.clear();
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(text.as_bytes())?;
        self.written = text;
        Ok(())
    }

    /// The open file is still the one at the lock path.
    fn still_at_path(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.file.metadata(), fs::symlink_metadata(&self.path)) {
            (Ok(open), Ok(at_path)) => open.dev() == at_path.dev() && open.ino() == at_path.ino(),
            _ => false,
        }
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
        let (_dir, store) = store();
        let mut state = State {
            loop_count: 7,
            ..State::default()
        };
        state.ledger.record_call(now());
        store.save_state(&state).unwrap();
        let mode = fs::metadata(store.path(HankFile::State))
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
        let (_dir, store) = store();
        fs::write(
            store.path(HankFile::State),
            b"{\"loop_count\": 3, \"ledger\": [",
        )
        .unwrap();
        let loaded = store.load_state(now()).unwrap();
        let aside = loaded.moved_aside.unwrap();
        assert_eq!(
            fs::read(&aside).unwrap(),
            b"{\"loop_count\": 3, \"ledger\": ["
        );
        assert_eq!(loaded.state, State::default());
        assert!(!store.path(HankFile::State).exists());
    }

    #[test]
    fn newer_schema_is_not_overwritten_silently() {
        let (_dir, store) = store();
        fs::write(store.path(HankFile::State), b"{\"schema_version\": 99}").unwrap();
        assert!(store.load_state(now()).unwrap().moved_aside.is_some());
    }

    #[test]
    fn the_lock_holds_when_hank_files_are_deleted() {
        let (_dir, store) = store();
        let mut held = store.lock().unwrap();
        fs::remove_dir_all(store.dir()).unwrap();
        assert!(matches!(store.lock(), Err(HankError::Locked { .. })));
        // The record is written again where it belongs.
        held.record_agent(Some((4242, 7)));
        let text = fs::read_to_string(store.path(HankFile::Lock)).unwrap();
        let body = format!("{}\nagent 4242 7\n", std::process::id());
        assert!(text.starts_with(&body), "{text}");
        assert_eq!(unsealed(&text, &lock_key(_dir.path()).unwrap()), Some(body));
        drop(held);
        assert!(store.lock().is_ok());
    }

    #[test]
    fn stale_temp_files_are_removed_and_fresh_ones_kept() {
        let (_dir, store) = store();
        store.ensure_dirs().unwrap();
        let old = store.dir.join(".tmp-old");
        let fresh = store.dir.join(".tmp-fresh");
        let not_temp = store.dir.join("tmp-notes.md");
        let folder = store.dir.join(".tmp-folder");
        for p in [&old, &fresh, &not_temp] {
            fs::write(p, "x").unwrap();
        }
        fs::create_dir(&folder).unwrap();
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for p in [&old, &not_temp] {
            fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(long_ago)
                .unwrap();
        }
        assert_eq!(store.remove_stale_temps(STALE_TEMP_AGE), 1);
        assert!(!old.exists());
        assert!(fresh.exists() && not_temp.exists() && folder.is_dir());
    }

    #[test]
    fn a_record_not_under_the_seal_is_never_acted_on() {
        let (_dir, store) = store();
        let mut first = store.lock().unwrap();
        first.record_agent(Some((4242, 7)));
        drop(first);
        let path = store.path(HankFile::Lock);
        let sealed = fs::read_to_string(&path).unwrap();
        // The seal kept, the group changed; then no seal at all.
        fs::write(&path, sealed.replace("agent 4242 7", "agent 999 7")).unwrap();
        assert_eq!(store.lock().unwrap().orphaned_agent(), None);
        fs::write(&path, "1\nagent 4242 7\n").unwrap();
        assert_eq!(store.lock().unwrap().orphaned_agent(), None);
    }

    #[test]
    fn an_orphan_record_survives_a_new_lock_until_cleared() {
        let (_dir, store) = store();
        let mut first = store.lock().unwrap();
        first.record_agent(Some((4242, 7)));
        drop(first); // as if killed: the record stays
        // `hank reset` takes the lock and lets go: the record is kept.
        let reset = store.lock().unwrap();
        assert_eq!(reset.orphaned_agent(), Some((4242, 7)));
        drop(reset);
        let mut run = store.lock().unwrap();
        assert_eq!(run.orphaned_agent(), Some((4242, 7)));
        run.record_agent(None);
        drop(run);
        assert_eq!(store.lock().unwrap().orphaned_agent(), None);
    }

    #[test]
    fn a_deleted_call_log_is_written_again_whole() {
        let (dir, store) = store();
        let mut state = store.load_state(now()).unwrap().state;
        for _ in 0..3 {
            state.ledger.record_call(now());
            store.save_state_with(&state, false).unwrap();
        }
        fs::remove_dir_all(store.dir()).unwrap();
        store.ensure_dirs().unwrap();
        state.ledger.record_call(now());
        store.save_state_with(&state, false).unwrap();
        let again = Store::new(dir.path()).load_state(now()).unwrap().state;
        assert_eq!(again.ledger.entries.len(), 4);
    }

    #[test]
    fn verify_and_agent_records_are_kept_apart_until_cleared() {
        let (_dir, store) = store();
        let mut first = store.lock().unwrap();
        first.record_agent(Some((4242, 7)));
        first.record_verify(Some((5151, 9)));
        let text = fs::read_to_string(store.path(HankFile::Lock)).unwrap();
        assert!(
            text.starts_with(&format!(
                "{}\nagent 4242 7\nverify 5151 9\nseal ",
                std::process::id()
            )),
            "{text}"
        );
        drop(first);
        let mut next = store.lock().unwrap();
        assert_eq!(next.orphaned_agent(), Some((4242, 7)));
        assert_eq!(next.orphaned_verify(), Some((5151, 9)));
        next.record_verify(None);
        let text = fs::read_to_string(store.path(HankFile::Lock)).unwrap();
        assert!(!text.contains("verify"), "{text}");
        assert!(text.contains("agent 4242 7"), "{text}");
    }

    #[test]
    fn second_lock_names_the_holder() {
        let (_dir, store) = store();
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
        std::os::unix::fs::symlink(&outside, store.path(HankFile::Status)).unwrap();
        write_atomic(&store.path(HankFile::Status), b"{}", false).unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"keep");
        assert!(
            !fs::symlink_metadata(store.path(HankFile::Status))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(now().as_second() + secs).unwrap()
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure_dirs().unwrap();
        (dir, store)
    }

    #[test]
    fn an_emptied_or_deleted_call_log_is_restored_from_its_copy() {
        let (dir, store) = store();
        let copy = dir.path().join("user").join("calls");
        fs::create_dir_all(copy.parent().unwrap()).unwrap();
        let store = store.with_ledger_copy(copy.clone());
        let mut state = store.load_state(ts(0)).unwrap().state;
        for i in 0..3 {
            state.ledger.record_call(ts(i));
            store.save_state_with(&state, false).unwrap();
            state.ledger.add_tokens_to_last(10 + i.unsigned_abs());
            store.save_state_with(&state, false).unwrap();
        }
        assert_eq!(
            fs::read(&copy).unwrap(),
            fs::read(store.path(HankFile::Calls)).unwrap()
        );
        for wipe in [
            |p: &Path| fs::write(p, b"").unwrap(),
            |p: &Path| fs::remove_file(p).unwrap(),
        ] {
            wipe(&store.path(HankFile::Calls));
            let fresh = Store::new(dir.path()).with_ledger_copy(copy.clone());
            let loaded = fresh.load_state(ts(5)).unwrap().state;
            assert_eq!(
                entries(&loaded.ledger),
                vec![(ts(0), 10), (ts(1), 11), (ts(2), 12)]
            );
            let notes = fresh.take_notes();
            assert!(notes.iter().any(|n| n.contains("3 call(s)")), "{notes:?}");
            // The next save writes the union back into the project's log.
            fresh.save_state_with(&loaded, false).unwrap();
            assert_eq!(
                entries(&Store::new(dir.path()).read_state().unwrap().ledger),
                entries(&loaded.ledger)
            );
        }
        // Without a copy, the log alone is read (commands that only look).
        write_log(&store, b"");
        assert!(
            Store::new(dir.path())
                .read_state()
                .unwrap()
                .ledger
                .entries
                .is_empty()
        );
    }

    fn log_lines(store: &Store) -> Vec<String> {
        fs::read_to_string(store.path(HankFile::Calls))
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    fn line(id: u64, secs: i64, tokens: u64) -> String {
        format!(r#"{{"id":{id},"at":"{}","tokens":{tokens}}}"#, ts(secs))
    }

    fn entries(l: &Ledger) -> Vec<(Timestamp, u64)> {
        l.entries.iter().map(|e| (e.at, e.tokens)).collect()
    }

    /// Writes the store's call log as a previous run left it.
    fn write_log(store: &Store, text: impl AsRef<[u8]>) {
        fs::write(store.path(HankFile::Calls), text).unwrap();
    }

    /// Writes the store's `state.json` as the previous hank wrote it (schema 1: pretty,
    /// ledger inline).
    fn write_schema_1_state(store: &Store, calls: &[(i64, u64)]) {
        let mut state = serde_json::to_value(State {
            loop_count: 9,
            ..State::default()
        })
        .unwrap();
        state["schema_version"] = 1.into();
        state["ledger"] = serde_json::json!({
            "entries": calls
                .iter()
                .map(|&(s, t)| serde_json::json!({"at": ts(s), "tokens": t}))
                .collect::<Vec<_>>()
        });
        fs::write(
            store.path(HankFile::State),
            serde_json::to_string_pretty(&state).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn a_call_is_one_appended_line_and_its_tokens_one_more() {
        let (_d, store) = store();
        let mut state = store.load_state(now()).unwrap().state;
        state.ledger.record_call(ts(0));
        store.save_state_with(&state, false).unwrap();
        assert_eq!(log_lines(&store), vec![line(1, 0, 0)]);
        let json = fs::read_to_string(store.path(HankFile::State)).unwrap();
        assert!(!json.contains("ledger"), "{json}");
        assert!(json.contains("\"schema_version\": 2"), "{json}");

        state.ledger.add_tokens_to_last(500);
        store.save_state_with(&state, false).unwrap();
        store.save_state_with(&state, false).unwrap(); // nothing new: nothing appended
        state.ledger.record_call(ts(10));
        store.save_state_with(&state, false).unwrap();
        state.ledger.add_tokens_to_last(7);
        state.ledger.record_call(ts(20)); // tokens of 2 and call 3 in one save
        store.save_state(&state).unwrap();
        assert_eq!(
            log_lines(&store),
            vec![
                line(1, 0, 0),
                line(1, 0, 500),
                line(2, 10, 0),
                line(2, 10, 7),
                line(3, 20, 0)
            ]
        );
        for path in [store.path(HankFile::Calls), store.path(HankFile::State)] {
            let mode = fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let again = Store::new(store.dir().parent().unwrap());
        let loaded = again.load_state(ts(30)).unwrap().state;
        assert_eq!(loaded, state);
        assert_eq!(again.read_state().unwrap(), state);
        assert_eq!(
            entries(&loaded.ledger),
            vec![(ts(0), 500), (ts(10), 7), (ts(20), 0)]
        );
    }

    #[test]
    fn a_truncated_last_line_is_ignored_then_rewritten() {
        let (_d, store) = store();
        let full = format!("{}\n{}\n", line(1, 0, 100), line(2, 10, 0));
        let cut = &line(2, 10, 12345)[..30];
        write_log(&store, format!("{full}{cut}"));
        let mut state = store.load_state(ts(20)).unwrap().state;
        assert_eq!(entries(&state.ledger), vec![(ts(0), 100), (ts(10), 0)]);
        assert_eq!(store.read_state().unwrap().ledger, state.ledger);
        // The next save rewrites the log: the cut line is gone, nothing is glued to it.
        state.ledger.record_call(ts(20));
        store.save_state_with(&state, false).unwrap();
        assert_eq!(
            log_lines(&store),
            vec![line(1, 0, 100), line(2, 10, 0), line(3, 20, 0)]
        );
        // Garbage in the middle (a machine crash) is skipped, the rest is read.
        write_log(
            &store,
            format!("{}\n\0\0\0\n{}\n", line(1, 0, 1), line(3, 20, 3)),
        );
        let loaded = Store::new(store.dir().parent().unwrap())
            .load_state(ts(20))
            .unwrap()
            .state;
        assert_eq!(entries(&loaded.ledger), vec![(ts(0), 1), (ts(20), 3)]);
        assert_eq!(loaded.ledger.last_id(), 3);
    }

    #[test]
    fn calls_older_than_the_window_do_not_count_and_are_compacted_away() {
        let (_d, store) = store();
        let mut text = String::new();
        for i in 0..600 {
            text.push_str(&line(i + 1, -7200 + i64::try_from(i).unwrap(), 1));
            text.push('\n');
        }
        text.push_str(&line(601, -60, 40));
        text.push('\n');
        write_log(&store, text);
        let mut state = store.load_state(now()).unwrap().state;
        assert_eq!(state.ledger.calls_in_window(now()), 1);
        assert_eq!(state.ledger.tokens_in_window(now()), 40);
        state.ledger.prune(now()); // as the engine does after loading
        state.ledger.record_call(now());
        store.save_state_with(&state, false).unwrap();
        // 601 lines > 4 × 2 + 256: compacted to the window, ids kept.
        assert_eq!(log_lines(&store), vec![line(601, -60, 40), line(602, 0, 0)]);
        let loaded = Store::new(store.dir().parent().unwrap())
            .load_state(now())
            .unwrap()
            .state;
        assert_eq!(loaded.ledger, state.ledger);
    }

    #[test]
    fn the_log_stays_bounded_and_exact_over_many_loops() {
        let (_d, store) = store();
        let mut state = store.load_state(now()).unwrap().state;
        let mut max_lines = 0;
        // 20 calls per hour for 10 hours: the window holds 20.
        for k in 0..200 {
            let t = ts(k * 180);
            state.ledger.record_call(t);
            store.save_state_with(&state, false).unwrap();
            state
                .ledger
                .add_tokens_to_last(u64::try_from(k).unwrap() + 1);
            if k % 3 != 0 {
                store.save_state_with(&state, false).unwrap();
            }
            max_lines = max_lines.max(log_lines(&store).len());
            let loaded = Store::new(store.dir().parent().unwrap())
                .read_state()
                .unwrap();
            assert_eq!(
                loaded.ledger.calls_in_window(t),
                state.ledger.calls_in_window(t)
            );
            // Tokens not saved yet (every third loop) are on disk after the next save.
            let unsaved = if k % 3 == 0 {
                u64::try_from(k).unwrap() + 1
            } else {
                0
            };
            assert_eq!(
                loaded.ledger.tokens_in_window(t),
                state.ledger.tokens_in_window(t) - unsaved
            );
        }
        assert!(
            max_lines <= CALLS_COMPACT_FACTOR * 21 + CALLS_COMPACT_SLACK + 2,
            "{max_lines}"
        );
        assert!(
            max_lines > CALLS_COMPACT_SLACK,
            "compaction ran: {max_lines}"
        );
    }

    #[test]
    fn a_schema_1_state_json_without_a_log_keeps_its_ledger() {
        let (_d, store) = store();
        write_schema_1_state(&store, &[(-100, 5), (-50, 0)]);
        assert!(!store.path(HankFile::Calls).exists());
        let loaded = store.load_state(now()).unwrap();
        assert!(loaded.moved_aside.is_none());
        let mut state = loaded.state;
        assert_eq!(state.loop_count, 9);
        assert_eq!(entries(&state.ledger), vec![(ts(-100), 5), (ts(-50), 0)]);
        assert_eq!(store.read_state().unwrap().ledger, state.ledger);
        // The first save moves the ledger into the log, then writes a schema 2 state.json.
        state.ledger.add_tokens_to_last(9);
        store.save_state_with(&state, false).unwrap();
        assert_eq!(log_lines(&store), vec![line(1, -100, 5), line(2, -50, 9)]);
        let json: serde_json::Value =
            serde_json::from_slice(&fs::read(store.path(HankFile::State)).unwrap()).unwrap();
        assert_eq!(json["schema_version"], 2);
        assert!(json.get("ledger").is_none());
        let again = Store::new(store.dir().parent().unwrap());
        assert_eq!(again.load_state(now()).unwrap().state, state);
    }

    #[test]
    fn a_crash_mid_migration_counts_each_call_once() {
        // The log was written (with one more call since), state.json is still schema 1.
        let (_d, store) = store();
        write_schema_1_state(&store, &[(-100, 5), (-50, 0)]);
        write_log(
            &store,
            format!(
                "{}\n{}\n{}\n",
                line(1, -100, 5),
                line(2, -50, 8),
                line(3, -10, 0)
            ),
        );
        let state = store.load_state(now()).unwrap().state;
        assert_eq!(
            entries(&state.ledger),
            vec![(ts(-100), 5), (ts(-50), 8), (ts(-10), 0)]
        );
        assert_eq!(state.ledger.last_id(), 3);
        // A log left by an earlier run and a schema 1 file of other calls: all of them count.
        write_schema_1_state(&store, &[(-30, 1)]);
        let state = store.load_state(now()).unwrap().state;
        assert_eq!(state.ledger.calls_in_window(now()), 4);
        store.save_state_with(&state, false).unwrap();
        assert_eq!(log_lines(&store).len(), 4);
    }

    #[test]
    fn the_log_survives_a_missing_or_corrupt_state_json() {
        let (_d, store) = store();
        write_log(&store, format!("{}\n", line(7, -10, 3)));
        let state = store.load_state(now()).unwrap().state;
        assert_eq!(entries(&state.ledger), vec![(ts(-10), 3)]);
        assert_eq!(state.ledger.last_id(), 7);
        fs::write(store.path(HankFile::State), b"{\"loop_count\": 3, \"ledg").unwrap();
        let loaded = store.load_state(now()).unwrap();
        assert!(loaded.moved_aside.is_some());
        assert_eq!(entries(&loaded.state.ledger), vec![(ts(-10), 3)]);
    }

    #[test]
    fn a_symlinked_call_log_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        let store = Store::new(&dir.path().join("p"));
        store.ensure_dirs().unwrap();
        let keep = format!("{}\n", line(1, -10, 0));
        fs::write(&outside, &keep).unwrap();
        std::os::unix::fs::symlink(&outside, store.path(HankFile::Calls)).unwrap();
        // Reading refuses it (the loop would not start).
        assert!(store.load_state(now()).is_err());
        assert!(store.read_state().is_err());
        // A store that loaded before the link appeared: the append fails.
        fs::remove_file(store.path(HankFile::Calls)).unwrap();
        let mut state = store.load_state(now()).unwrap().state;
        std::os::unix::fs::symlink(&outside, store.path(HankFile::Calls)).unwrap();
        state.ledger.record_call(now());
        let err = store
            .save_state_with(&state, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("state.json.calls"), "{err}");
        assert_eq!(fs::read_to_string(&outside).unwrap(), keep);
        // A rewrite replaces the link; the file it pointed to is untouched.
        store.save_state_with(&state, false).unwrap();
        assert_eq!(fs::read_to_string(&outside).unwrap(), keep);
        let meta = fs::symlink_metadata(store.path(HankFile::Calls)).unwrap();
        assert!(!meta.file_type().is_symlink());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(log_lines(&store), vec![line(1, 0, 0)]);
    }

    #[test]
    fn a_state_made_from_scratch_replaces_the_log() {
        let (_d, store) = store();
        write_log(&store, format!("{}\n", line(4, -10, 3)));
        let mut state = State::default();
        state.ledger.record_call(now());
        store.save_state(&state).unwrap();
        assert_eq!(log_lines(&store), vec![line(1, 0, 0)]);
        assert_eq!(store.load_state(now()).unwrap().state, state);
    }

    proptest::proptest! {
        /// Whatever the loop does between saves, and wherever it stops (kill -9 is a stop
        /// after any save), a fresh store reads back exactly the calls and tokens of the
        /// window as of the last save.
        #[test]
        fn reload_sees_the_window_as_last_saved(
            ops in proptest::collection::vec((0u8..5, 0i64..900, 0u64..1000), 1..120),
        ) {
            let (_d, mut store) = store();
            let mut state = store.load_state(now()).unwrap().state;
            let mut t = 0i64;
            let mut saved = state.ledger.clone();
            for (op, gap, tokens) in ops {
                match op {
                    0 | 1 => {
                        t += gap;
                        state.ledger.record_call(ts(t));
                        store.save_state_with(&state, false).unwrap();
                        saved = state.ledger.clone();
                    }
                    2 => state.ledger.add_tokens_to_last(tokens),
                    3 => {
                        store.save_state_with(&state, false).unwrap();
                        saved = state.ledger.clone();
                    }
                    _ => {
                        let fresh = Store::new(store.dir().parent().unwrap());
                        state = fresh.load_state(ts(t)).unwrap().state;
                        state.ledger.prune(ts(t));
                        saved = state.ledger.clone();
                        // The old store is gone (the process ended); go on with the new one.
                        store = fresh;
                    }
                }
                let read = Store::new(store.dir().parent().unwrap()).read_state().unwrap();
                let at = ts(t);
                let window = |l: &Ledger| {
                    let mut l = l.clone();
                    l.prune(at);
                    entries(&l)
                };
                proptest::prop_assert_eq!(window(&read.ledger), window(&saved));
            }
        }
    }

    #[test]
    fn events_do_not_follow_symlinks_and_are_trimmed() {
        let (dir, store) = store();
        let line = "x".repeat(1000);
        for _ in 0..(EVENTS_CAP / 1000 + 10) {
            store.append_event(&line).unwrap();
        }
        let len = fs::metadata(store.path(HankFile::Events)).unwrap().len();
        assert!(len <= EVENTS_CAP, "{len}");
        let text = fs::read_to_string(store.path(HankFile::Events)).unwrap();
        assert!(text.lines().all(|l| l.len() == 1000));

        let outside = dir.path().join("outside");
        fs::write(&outside, b"").unwrap();
        fs::remove_file(store.path(HankFile::Events)).unwrap();
        std::os::unix::fs::symlink(&outside, store.path(HankFile::Events)).unwrap();
        // The link is replaced (not followed), the event written, and a note says so.
        store.append_event("{}").unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"");
        let meta = fs::symlink_metadata(store.path(HankFile::Events)).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(fs::read(store.path(HankFile::Events)).unwrap(), b"{}\n");
        let notes = store.take_notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("events.jsonl was a symbolic link"),
            "{notes:?}"
        );
    }

    #[test]
    fn links_planted_between_the_writes_of_one_loop_are_never_followed() {
        // Each write of a loop opens first and checks only when the open fails: a link or a
        // FIFO planted between two writes (after ensure_dirs) is still refused and replaced.
        let (_dir, store) = store();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("target");
        fs::write(&target, b"keep").unwrap();
        store.log(now(), "first");
        store.append_event("{}").unwrap();
        let log = store.path(HankFile::Logs).join("hank.log");
        // A link at hank.log between two log lines.
        fs::remove_file(&log).unwrap();
        std::os::unix::fs::symlink(&target, &log).unwrap();
        store.log(now(), "second");
        assert!(fs::symlink_metadata(&log).unwrap().is_file());
        assert!(fs::read_to_string(&log).unwrap().contains("second"));
        // A FIFO at events.jsonl between two events: an error never, a hang never.
        fs::remove_file(store.path(HankFile::Events)).unwrap();
        nix::unistd::mkfifo(&store.path(HankFile::Events), nix::sys::stat::Mode::S_IRWXU).unwrap();
        store.append_event("{\"n\":2}").unwrap();
        assert_eq!(
            fs::read(store.path(HankFile::Events)).unwrap(),
            b"{\"n\":2}\n"
        );
        // `logs` itself replaced by a link after ensure_dirs: the loop's logs and the next
        // log line land in a real folder of the project.
        fs::remove_dir_all(store.path(HankFile::Logs)).unwrap();
        std::os::unix::fs::symlink(outside.path(), store.path(HankFile::Logs)).unwrap();
        let (out, err) = store.loop_logs(7);
        assert!(
            out.starts_with(store.path(HankFile::Logs))
                && err.starts_with(store.path(HankFile::Logs))
        );
        assert!(
            fs::symlink_metadata(store.path(HankFile::Logs))
                .unwrap()
                .is_dir()
        );
        store.log(now(), "third");
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        let names: Vec<_> = fs::read_dir(outside.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let notes = store.take_notes();
        assert_eq!(notes.len(), 3, "{notes:?}");
    }

    #[test]
    fn a_symlinked_logs_dir_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".hank")).unwrap();
        let store = Store::new(dir.path());
        std::os::unix::fs::symlink(outside.path(), store.path(HankFile::Logs)).unwrap();
        store.ensure_dirs().unwrap();
        assert!(
            fs::symlink_metadata(store.path(HankFile::Logs))
                .unwrap()
                .is_dir()
        );
        store.log(now(), "hello");
        assert!(fs::read_dir(outside.path()).unwrap().next().is_none());
        assert!(
            store
                .take_notes()
                .iter()
                .any(|n| n.contains("logs was a symbolic link"))
        );
    }

    #[test]
    fn state_files_outside_the_schema_are_moved_aside_keeping_an_open_breaker() {
        // (content, breaker kept OPEN)
        let cases: &[(&str, bool)] = &[
            ("{}", false),
            ("[]", false),
            ("{\"entries\":[{}]}", false),
            ("{\"schema_version\":2,\"loop_count\":\"seven\"}", false),
            (
                "{\"schema_version\":2,\"breaker\":{\"state\":\"OPEN\",\"reason\":\"r\"},\"totals\":{\"cost_usd\":null}}",
                true,
            ),
            ("{\"schema_version\":9}", false),
            ("null", false),
        ];
        for (text, open) in cases {
            let (_dir, store) = store();
            fs::write(store.path(HankFile::State), text).unwrap();
            let loaded = store.load_state(now()).unwrap();
            let aside = loaded
                .moved_aside
                .clone()
                .unwrap_or_else(|| panic!("{text}"));
            assert_eq!(fs::read_to_string(&aside).unwrap(), *text);
            assert!(!loaded.problem.is_empty());
            assert_eq!(loaded.state.breaker.is_open(), *open, "{text}");
            if *open {
                assert!(loaded.problem.contains("stays OPEN"), "{}", loaded.problem);
            }
        }
    }

    #[test]
    fn special_state_files_are_errors_or_moved_aside_never_a_hang() {
        let (_dir, store) = store();
        fs::create_dir(store.path(HankFile::State)).unwrap();
        let err = store.load_state(now()).unwrap_err().to_string();
        assert!(
            err.contains("state.json") && err.contains("directory"),
            "{err}"
        );
        fs::remove_dir(store.path(HankFile::State)).unwrap();
        nix::unistd::mkfifo(
            &store.path(HankFile::State),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let err = store.load_state(now()).unwrap_err().to_string();
        assert!(err.contains("FIFO"), "{err}");
        fs::remove_file(store.path(HankFile::State)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", store.path(HankFile::State)).unwrap();
        let loaded = store.load_state(now()).unwrap();
        assert!(loaded.moved_aside.is_some());
        assert!(
            loaded.problem.contains("symbolic link"),
            "{}",
            loaded.problem
        );
    }

    #[test]
    fn future_times_are_clamped_at_load() {
        let (dir, store) = store();
        let future: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
        let mut state = State::default();
        state.breaker.state = crate::policy::breaker::CircuitState::Open;
        state.breaker.opened_at = Some(future);
        state.session = Some(schema::Session {
            id: "4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a".into(),
            started_at: future,
            last_used_at: future,
        });
        state.ledger.record_call(future);
        store.save_state(&state).unwrap();
        let again = Store::new(dir.path());
        let loaded = again.load_state(now()).unwrap();
        assert_eq!(loaded.state.breaker.opened_at, Some(now()));
        let s = loaded.state.session.as_ref().unwrap();
        assert_eq!((s.started_at, s.last_used_at), (now(), now()));
        assert!(loaded.state.ledger.entries.iter().all(|e| e.at <= now()));
        assert!(loaded.clamped.len() >= 3, "{:?}", loaded.clamped);
        // The breaker now cools down from now on.
        let cfg = crate::policy::breaker::BreakerConfig::default();
        assert_eq!(
            loaded.state.breaker.cooldown_ends_at(&cfg),
            Some(now() + jiff::SignedDuration::from_mins(30))
        );
    }
}
