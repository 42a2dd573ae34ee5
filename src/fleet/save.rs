//! `fleet.json` written and its changes told (`fleet_task` events, `--json`, NOTIFY).

use super::Paths;
use crate::error::HankError;
use crate::error::Result;
use crate::policy::fleet::TaskState;
use crate::store;
use crate::store::schema::{FLEET_SCHEMA, FleetFile};
use crate::store::{Store, fleet_ledger};
use jiff::Timestamp;
use std::collections::BTreeMap;

/// The state of each task last told in the checkout's `events.jsonl`.
pub(super) static TOLD: std::sync::Mutex<BTreeMap<String, TaskState>> =
    std::sync::Mutex::new(BTreeMap::new());

/// A `fleet_task` event in the main checkout's `events.jsonl` for each task whose state
/// changed since it was last told (best effort: the fleet's state is `fleet.json`).
pub(super) fn tell_changes(paths: &Paths, file: &FleetFile, now: Timestamp) {
    use crate::store::schema::{Event, EventKind};
    let Ok(mut told) = TOLD.lock() else { return };
    let store = Store::new(&paths.root);
    for t in &file.tasks {
        if told.get(&t.name) == Some(&t.state) {
            continue;
        }
        told.insert(t.name.clone(), t.state);
        let event = Event::new(
            now,
            EventKind::FleetTask {
                task: t.name.clone(),
                state: t.state,
                branch: t.branch.clone(),
                message: t.message.clone(),
            },
        );
        let line = event.to_line();
        let _ = store.append_event(&line);
        if JSON.load(std::sync::atomic::Ordering::Relaxed) {
            outln!("{line}");
        }
        crate::notify::offer(&event);
    }
}

/// `hank fleet --json`: the fleet's own events go to stdout too.
pub(super) static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Tasks already in `fleet.json` when a fleet starts are not told again.
pub(super) fn told_already(file: &FleetFile) {
    if let Ok(mut told) = TOLD.lock() {
        for t in &file.tasks {
            told.insert(t.name.clone(), t.state);
        }
    }
}

pub(super) fn save(paths: &Paths, file: &mut FleetFile, now: Timestamp) -> Result<()> {
    tell_changes(paths, file, now);
    file.schema_version = FLEET_SCHEMA;
    file.updated_at = Some(now);
    let sum = fleet_ledger::summary(&paths.ledger(), now);
    file.calls_in_window = sum.calls_in_window;
    file.tokens_in_window = sum.tokens_in_window;
    file.cost_usd = sum.cost_usd;
    // Written only when something but the time changed (the supervisor saves on every turn
    // of its loop; most turns change nothing).
    let stamp = file.updated_at.take();
    let unchanged = serde_json::to_vec(file).ok();
    file.updated_at = stamp;
    if let (Some(now_bytes), Ok(mut last)) = (unchanged, LAST_SAVED.lock()) {
        if *last == now_bytes && paths.fleet_file().exists() {
            return Ok(());
        }
        *last = now_bytes;
    }
    let bytes = serde_json::to_vec_pretty(file)
        .map_err(|e| HankError::Internal(format!("cannot encode fleet.json: {e}")))?;
    let path = paths.fleet_file();
    store::write_atomic(&path, &bytes, false).map_err(|e| HankError::io("write", path, e))
}

/// `fleet.json` as last written, without its time.
pub(super) static LAST_SAVED: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
