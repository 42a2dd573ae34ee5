//! `fleet.json` written, and the task events the fleet machine emits told (`fleet_task`
//! events, `--json`, NOTIFY).

use super::Paths;
use crate::error::HankError;
use crate::error::Result;
use crate::policy::fleet::machine::TaskTold;
use crate::store;
use crate::store::schema::{FLEET_SCHEMA, FleetFile};
use crate::store::{Store, fleet_ledger};
use jiff::Timestamp;

/// What the fleet's saves remember between turns: `fleet.json` as last written (without its
/// time), and whether `--json` puts the fleet's own events on stdout too.
#[derive(Debug, Default)]
pub(super) struct Saved {
    last: Vec<u8>,
    json: bool,
}

impl Saved {
    pub(super) fn new(json: bool) -> Self {
        Self {
            last: Vec::new(),
            json,
        }
    }

    /// A `fleet_task` event in the main checkout's `events.jsonl` for each task event the
    /// machine emitted (best effort: the fleet's state is `fleet.json`).
    pub(super) fn tell(&mut self, paths: &Paths, told: &[TaskTold], now: Timestamp) {
        use crate::store::schema::{Event, EventKind};
        let store = Store::new(&paths.root);
        for t in told {
            let event = Event::new(
                now,
                EventKind::FleetTask {
                    task: t.task.clone(),
                    state: t.state,
                    branch: t.branch.clone(),
                    message: t.message.clone(),
                    repos: t.repos.clone(),
                },
            );
            let line = event.to_line();
            let _ = store.append_event(&line);
            if self.json {
                outln!("{line}");
            }
            crate::notify::offer(&event);
        }
    }

    /// `fleet.json` written atomically — only when something but the time changed (the
    /// supervisor saves on every turn of its loop; most turns change nothing).
    pub(super) fn save(
        &mut self,
        paths: &Paths,
        file: &mut FleetFile,
        now: Timestamp,
    ) -> Result<()> {
        file.schema_version = FLEET_SCHEMA;
        file.updated_at = Some(now);
        let sum = fleet_ledger::summary(&paths.ledger(), now);
        file.calls_in_window = sum.calls_in_window;
        file.tokens_in_window = sum.tokens_in_window;
        file.cost_usd = sum.cost_usd;
        let stamp = file.updated_at.take();
        let unchanged = serde_json::to_vec(file).ok();
        file.updated_at = stamp;
        if let Some(now_bytes) = unchanged {
            if self.last == now_bytes && paths.fleet_file().exists() {
                return Ok(());
            }
            self.last = now_bytes;
        }
        let bytes = serde_json::to_vec_pretty(file)
            .map_err(|e| HankError::Internal(format!("cannot encode fleet.json: {e}")))?;
        let path = paths.fleet_file();
        store::write_atomic(&path, &bytes, false).map_err(|e| HankError::io("write", path, e))
    }
}
