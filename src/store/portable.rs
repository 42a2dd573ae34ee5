//! The portable run state (`hank state save` / `restore` / `claim`): the run state of one task
//! (or of the whole project's run) as one [`StateBundle`], carried from machine to machine in
//! the repository itself — the file [`BUNDLE_FILE`] in the tree of a commit at
//! `refs/hank/state/<name>`, pushed with a compare-and-swap (`--force-with-lease`; the git
//! side is [`crate::stateref`]) — or as a file in a folder (an Actions artifact) when pushing
//! is not allowed. This module: the bundle, the merge, the local files.
//!
//! What a restore trusts: the bundle comes from a ref that anyone who can push — the agent of
//! another job too — may have written. So a restore only ever makes hank *stricter* than the
//! local state: calls are the union of both ledgers (more calls count against the caps), an
//! OPEN breaker stays or becomes OPEN, the later saved wait wins, each usage window keeps its
//! newest reading, counters take the larger value. The session hint and the loop history are
//! taken from the bundle only when the local state has none (a fresh CI clone).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde_json::{Map, Value};

use super::schema::{BUNDLE_SCHEMA, Lease, State, StateBundle};
use super::{Store, merge_ledgers, write_atomic};
use crate::error::{HankError, Result};
use crate::policy::budget::Ledger;

/// The file holding the bundle, in the ref's tree and in a `--to-dir` folder.
pub const BUNDLE_FILE: &str = "hank-state.json";
/// Where the state refs live.
pub const REF_PREFIX: &str = "refs/hank/state/";
/// The name of the whole project's run (no `--task`).
pub const RUN_NAME: &str = "run";
/// Most receipts (event lines) a bundle carries; the oldest go first (the bundle stays well
/// under the 1 MiB a ref's bundle may have, `stateref::MAX_BUNDLE_BYTES`).
pub const MAX_RECEIPTS: usize = 2000;

/// Checks a task name for a ref and a file name: 1–100 of `A-Z a-z 0-9 . _ -`, not starting
/// with `.` or `-`, no `..`, not ending in `.lock`.
///
/// # Errors
/// The name cannot be used (the message names `--task`).
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.starts_with(['.', '-'])
        && !name.contains("..")
        && !name.ends_with(".lock");
    if ok {
        Ok(())
    } else {
        Err(HankError::Usage {
            message: format!(
                "--task {name:?}: expected 1 to 100 of A-Z a-z 0-9 . _ - (not starting with . or -, no .., not ending in .lock)"
            ),
            hint: None,
        })
    }
}

/// The ref of `name`.
#[must_use]
pub fn ref_name(name: &str) -> String {
    format!("{REF_PREFIX}{name}")
}

/// Who this job is: `HANK_STATE_OWNER`, else the Actions run, attempt and job, else host and
/// PID.
#[must_use]
pub fn owner_id() -> String {
    if let Ok(o) = std::env::var("HANK_STATE_OWNER")
        && !o.trim().is_empty()
    {
        return o.trim().to_string();
    }
    if let Ok(run) = std::env::var("GITHUB_RUN_ID") {
        let attempt = std::env::var("GITHUB_RUN_ATTEMPT").unwrap_or_else(|_| "1".into());
        let job = std::env::var("GITHUB_JOB").unwrap_or_default();
        return format!("actions:{run}/{attempt}/{job}");
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

// ---------------------------------------------------------------------------------------------
// The merge (pure)

/// The local state after a restore of `remote` (see the module doc: stricter, never looser).
#[must_use]
pub fn merge_state(local: &State, remote: &State) -> State {
    let mut s = local.clone();
    let before = local.ledger.entries.len();
    let entries = merge_ledgers(remote.ledger.entries.clone(), local.ledger.entries.clone());
    let added = entries.len().saturating_sub(before) as u64;
    s.ledger = Ledger {
        calls_recorded: local.ledger.last_id().saturating_add(added),
        entries,
    };
    // The breaker: an OPEN one wins; between two of the same kind, the later transition.
    let remote_open = remote.breaker.is_open();
    if (remote_open && !local.breaker.is_open())
        || (remote_open == local.breaker.is_open()
            && remote.breaker.opened_at > local.breaker.opened_at)
    {
        s.breaker = remote.breaker.clone();
    }
    // The wait that ends later.
    s.wait = match (local.wait, remote.wait) {
        (Some(l), Some(r)) => Some(if r.until > l.until { r } else { l }),
        (l, r) => l.or(r),
    };
    for (name, w) in &remote.windows {
        match s.windows.get(name) {
            Some(mine) if mine.seen_at >= w.seen_at => {}
            _ => {
                s.windows.insert(name.clone(), w.clone());
            }
        }
    }
    if s.session.is_none() {
        s.session = remote.session.clone();
    }
    if s.history.is_empty() {
        s.history = remote.history.clone();
        s.last_recommendation = remote.last_recommendation.clone();
    }
    s.loop_count = s.loop_count.max(remote.loop_count);
    s.verify_count = s.verify_count.max(remote.verify_count);
    s.consecutive_failures = s.consecutive_failures.max(remote.consecutive_failures);
    s.startup_hangs = s.startup_hangs.max(remote.startup_hangs);
    if remote.totals.cost_usd > s.totals.cost_usd {
        s.totals = remote.totals.clone();
    }
    s
}

/// Whether `lease` keeps `owner` from running the task at `now`.
#[must_use]
pub fn held_by_other(lease: Option<&Lease>, owner: &str, now: Timestamp) -> bool {
    lease.is_some_and(|l| l.owner != owner && l.expires_at > now)
}

/// The receipts of a new bundle: the previous bundle's, then the local events newer than its
/// save (not already carried), the last [`MAX_RECEIPTS`].
#[must_use]
pub fn receipts(
    previous: Option<&StateBundle>,
    local: Vec<Map<String, Value>>,
) -> Vec<Map<String, Value>> {
    let mut out = previous.map(|b| b.receipts.clone()).unwrap_or_default();
    let since = previous.map(|b| b.saved_at);
    let seen: BTreeSet<String> = out
        .iter()
        .map(|m| Value::Object(m.clone()).to_string())
        .collect();
    for e in local {
        let at = e
            .get("at")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok());
        let newer = match (since, at) {
            (Some(s), Some(a)) => a > s,
            _ => true,
        };
        if newer && !seen.contains(&Value::Object(e.clone()).to_string()) {
            out.push(e);
        }
    }
    let cut = out.len().saturating_sub(MAX_RECEIPTS);
    out.drain(..cut);
    out
}

// ---------------------------------------------------------------------------------------------
// The local side

/// Appends `text` (Markdown, a line) to the job summary, `$GITHUB_STEP_SUMMARY`, when it is
/// set; best effort (the summary is a report, never a reason to fail the run).
pub fn append_step_summary(text: &str) {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return;
    };
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{text}\n").as_bytes()));
    let _ = appended;
}

/// The store of `project` with its ledger copy in the per-user directory.
///
/// # Errors
/// The per-user directory cannot be made.
pub fn store_of(project: &Path) -> Result<Store> {
    Ok(Store::new(project).with_ledger_copy(super::userdir::project_dir(project)?.join("calls")))
}

/// The lines of `events.jsonl` that are JSON objects.
fn local_events(store: &Store) -> Result<Vec<Map<String, Value>>> {
    let path = store.path(crate::store::HankFile::Events);
    let bytes =
        crate::fsread::read_if_exists(&path, super::EVENTS_CAP * 2, crate::fsread::Follow::No)
            .map_err(|e| HankError::io("failed to read", &path, e))?
            .unwrap_or_default();
    Ok(bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Map<String, Value>>(l).ok())
        .collect())
}

/// The bundle of the local run state now.
///
/// # Errors
/// The state cannot be read.
pub fn collect(
    store: &Store,
    name: &str,
    owner: &str,
    now: Timestamp,
    previous: Option<&StateBundle>,
) -> Result<StateBundle> {
    let loaded = store.load_state(now)?;
    Ok(StateBundle {
        schema_version: BUNDLE_SCHEMA,
        name: name.to_string(),
        saved_at: now,
        saved_by: owner.to_string(),
        calls: loaded.state.ledger.entries.clone(),
        state: loaded.state,
        receipts: receipts(previous, local_events(store)?),
        lease: previous.and_then(|p| p.lease.clone()),
    })
}

/// Merges `bundle` into the local state of `project` (under the project's lock): state and
/// both copies of the call log, and the receipts the local events lack. Returns how many calls
/// and receipts were added.
///
/// # Errors
/// Another loop runs in the project, or the state cannot be read or written.
pub fn apply(project: &Path, bundle: &StateBundle, now: Timestamp) -> Result<(usize, usize)> {
    let store = store_of(project)?;
    store.ensure_dirs()?;
    let _lock = store.lock()?;
    let local = store.load_state(now)?.state;
    let mut remote = bundle.state.clone();
    remote.ledger.entries.clone_from(&bundle.calls);
    let merged = merge_state(&local, &remote);
    let calls = merged
        .ledger
        .entries
        .len()
        .saturating_sub(local.ledger.entries.len());
    // A store of its own: it knows nothing of the call log, so its save rewrites it whole.
    store_of(project)?.save_state(&merged)?;
    let have: BTreeSet<String> = local_events(&store)?
        .into_iter()
        .map(|m| Value::Object(m).to_string())
        .collect();
    let mut added = 0;
    for r in &bundle.receipts {
        let line = Value::Object(r.clone()).to_string();
        if !have.contains(&line) {
            store.append_event(&line)?;
            added += 1;
        }
    }
    Ok((calls, added))
}

/// Parses a bundle read from `whence`.
///
/// # Errors
/// Not a bundle this hank reads (the message names `whence`).
pub fn parse_bundle(bytes: &[u8], whence: &Path) -> Result<StateBundle> {
    let b: StateBundle = serde_json::from_slice(bytes).map_err(|e| HankError::Unreadable {
        path: whence.to_path_buf(),
        problem: format!("is not a hank state bundle ({e})"),
    })?;
    if b.schema_version == 0 || b.schema_version > BUNDLE_SCHEMA {
        return Err(HankError::Unreadable {
            path: whence.to_path_buf(),
            problem: format!(
                "has schema_version {}; this hank reads 1 to {BUNDLE_SCHEMA}",
                b.schema_version
            ),
        });
    }
    Ok(b)
}

pub(crate) fn encode(bundle: &StateBundle) -> Result<Vec<u8>> {
    serde_json::to_vec(bundle).map_err(|e| HankError::Internal(e.to_string()))
}

/// The bundle's file in `dir` (`--to-dir` / `--from-dir`).
#[must_use]
pub fn file_in(dir: &Path, name: &str) -> PathBuf {
    if name == RUN_NAME {
        dir.join(BUNDLE_FILE)
    } else {
        dir.join(format!("hank-state-{name}.json"))
    }
}

/// Writes `bundle` into `dir` (created), atomically, 0600.
///
/// # Errors
/// The folder or file cannot be written.
pub fn write_to_dir(dir: &Path, bundle: &StateBundle) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| HankError::io("failed to create", dir, e))?;
    let path = file_in(dir, &bundle.name);
    write_atomic(&path, &encode(bundle)?, true)
        .map_err(|e| HankError::io("failed to write", &path, e))?;
    Ok(path)
}

/// Reads the bundle of `name` from `dir`; `None` when there is none.
///
/// # Errors
/// The file cannot be read or is not a bundle.
pub fn read_from_dir(dir: &Path, name: &str) -> Result<Option<StateBundle>> {
    let path = file_in(dir, name);
    match crate::fsread::read_if_exists(
        &path,
        crate::fsread::STATE_LIMIT,
        crate::fsread::Follow::No,
    ) {
        Ok(Some(bytes)) => parse_bundle(&bytes, &path).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(HankError::io("failed to read", &path, e)),
    }
}

#[cfg(test)]
#[allow(clippy::field_reassign_with_default)]
mod tests {
    use super::*;
    use crate::policy::budget::LedgerEntry;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn with_calls(times: &[i64]) -> State {
        let mut s = State::default();
        s.ledger.entries = times
            .iter()
            .map(|t| LedgerEntry {
                at: at(*t),
                tokens: 1,
            })
            .collect();
        s
    }

    #[test]
    fn names_are_checked() {
        for ok in ["run", "task-1", "a.b_c"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".x",
            "-x",
            "a..b",
            "a/b",
            "x.lock",
            "a b",
            &"x".repeat(101),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_merge_is_the_union_of_the_ledgers() {
        let local = with_calls(&[1, 2, 3]);
        let remote = with_calls(&[2, 4]);
        let m = merge_state(&local, &remote);
        let times: Vec<_> = m.ledger.entries.iter().map(|e| e.at).collect();
        assert_eq!(times, vec![at(1), at(2), at(3), at(4)]);
        assert_eq!(m.ledger.last_id(), 4);
    }

    #[test]
    fn the_merge_never_loosens_the_local_state() {
        use crate::policy::breaker::CircuitState;
        use crate::policy::budget::{SavedWait, WaitReason};
        let mut local = State::default();
        local.breaker.state = CircuitState::Open;
        local.breaker.opened_at = Some(at(10));
        local.wait = Some(SavedWait {
            reason: WaitReason::UsageLimit,
            until: at(500),
        });
        let mut remote = State::default();
        remote.wait = Some(SavedWait {
            reason: WaitReason::UsageLimit,
            until: at(100),
        });
        let m = merge_state(&local, &remote);
        assert!(
            m.breaker.is_open(),
            "a closed remote breaker does not close the local one"
        );
        assert_eq!(m.wait.as_ref().map(|w| w.until), Some(at(500)));
        // The other way round: the remote's OPEN breaker and later wait are taken.
        let m = merge_state(&remote, &local);
        assert!(m.breaker.is_open());
        assert_eq!(m.wait.map(|w| w.until), Some(at(500)));
    }

    #[test]
    fn a_session_hint_is_taken_only_when_there_is_none() {
        let mut remote = State::default();
        remote.session = Some(crate::policy::session::Session {
            id: "remote".into(),
            started_at: at(0),
            last_used_at: at(1),
        });
        let m = merge_state(&State::default(), &remote);
        assert_eq!(m.session.as_ref().map(|s| s.id.as_str()), Some("remote"));
        let mut local = State::default();
        local.session = Some(crate::policy::session::Session {
            id: "local".into(),
            started_at: at(0),
            last_used_at: at(1),
        });
        let m = merge_state(&local, &remote);
        assert_eq!(m.session.map(|s| s.id), Some("local".to_string()));
    }

    #[test]
    fn leases_hold_others_until_they_expire() {
        let l = Lease {
            owner: "a".into(),
            expires_at: at(100),
        };
        assert!(held_by_other(Some(&l), "b", at(50)));
        assert!(!held_by_other(Some(&l), "a", at(50)));
        assert!(!held_by_other(Some(&l), "b", at(100)));
        assert!(!held_by_other(None, "b", at(50)));
    }

    #[test]
    fn receipts_carry_the_events_since_the_last_save_once() {
        let ev = |t: i64| {
            let mut m = Map::new();
            m.insert("type".into(), Value::from("loop_started"));
            m.insert("at".into(), Value::from(at(t).to_string()));
            m
        };
        let first = receipts(None, vec![ev(1), ev(2)]);
        assert_eq!(first.len(), 2);
        let prev = StateBundle {
            schema_version: BUNDLE_SCHEMA,
            name: "run".into(),
            saved_at: at(2),
            saved_by: "x".into(),
            state: State::default(),
            calls: vec![],
            receipts: first,
            lease: None,
        };
        let next = receipts(Some(&prev), vec![ev(1), ev(2), ev(3)]);
        assert_eq!(next.len(), 3);
    }
}
