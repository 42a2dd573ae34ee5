//! The delivery record ([`Delivery`], the delivery machine's state): the last delivery's branch, base, evidence and the
//! step it reached, kept in the project's per-user folder (`delivery-record.json`) so a
//! delivery that stopped part-way — a forge that refused the pull request, checks that never
//! appeared, a Ctrl-C during the CI wait — is finished later by `hank deliver` (or `hank run
//! --deliver` again) with the evidence of the run that did the work.
//!
//! Why the per-user folder and not `.hank/`: the record says which branch is pushed and which
//! base a pull request targets; the agent of a later run can write anything under the project,
//! and must not be able to redirect a resumed push (to `main`, say) or forge the evidence a
//! pull request shows.

use std::path::{Path, PathBuf};

use jiff::Timestamp;

use crate::error::{HankError, Result};
pub use crate::policy::deliver::record::{step_after, stops_resumably};
use crate::policy::deliver::{self as rules, Evidence};
use crate::store::schema::{DELIVERY_RECORD_SCHEMA, Delivery, DeliveryEvidence, EventLine};
use crate::store::write_atomic;

/// The record's file name in the project's per-user folder.
pub const RECORD_FILE: &str = "delivery-record.json";

/// Where the record of the project at `project` is.
///
/// # Errors
/// The per-user folder cannot be found or created.
pub fn path(project: &Path) -> Result<PathBuf> {
    Ok(crate::store::userdir::project_dir(project)?.join(RECORD_FILE))
}

/// The project's record; `None` when there is none or it cannot be read as one (a record
/// that cannot be read is never resumed). A record of schema 1 reads as the one type.
#[must_use]
pub fn load(project: &Path) -> Option<Delivery> {
    let p = path(project).ok()?;
    let bytes =
        crate::fsread::read(&p, crate::fsread::STATE_LIMIT, crate::fsread::Follow::No).ok()?;
    serde_json::from_slice::<Delivery>(&bytes)
        .ok()
        .filter(|r| (1..=DELIVERY_RECORD_SCHEMA).contains(&r.schema_version))
}

/// Writes the record (atomically, 0600), stamped `now`.
///
/// # Errors
/// The per-user folder or the file cannot be written.
pub fn save(project: &Path, rec: &mut Delivery, now: Timestamp) -> Result<()> {
    save_at(&path(project)?, rec, now)
}

/// Writes the record to `p` (the project's: [`path`]) atomically, 0600, stamped `now`.
///
/// # Errors
/// The file cannot be written.
pub fn save_at(p: &Path, rec: &mut Delivery, now: Timestamp) -> Result<()> {
    rec.schema_version = DELIVERY_RECORD_SCHEMA;
    rec.at = Some(now);
    let json = serde_json::to_vec_pretty(rec).map_err(|e| HankError::Internal(e.to_string()))?;
    write_atomic(p, &json, true).map_err(|e| HankError::io("failed to write", p, e))
}

/// The evidence a delivery keeps of the run `ev` (rendered now, redacted with `secrets`).
#[must_use]
pub fn evidence(ev: &Evidence, verified: Option<bool>, secrets: &[String]) -> DeliveryEvidence {
    DeliveryEvidence {
        title: rules::pr_title(ev, secrets),
        body: rules::pr_body(ev, secrets),
        items_done: ev.items_done.clone(),
        closes: rules::closed_issues(&ev.items_done),
        cost_usd: ev.receipts.totals.cost_usd,
        verified,
        completion: ev.exit_reason.filter(|r| r.is_completion()),
    }
}

/// Whether `rec` was written during or after the last finished run in `events` (after the
/// exit before that run's exit): a record of an older run is not the last run's delivery.
/// **\[pure\]**
#[must_use]
pub fn of_last_run(rec: &Delivery, events: &str) -> bool {
    let Some(at) = rec.at else {
        return false;
    };
    let exits: Vec<Timestamp> = EventLine::parse_all(events)
        .iter()
        .filter(|l| l.kind() == "exit")
        .filter_map(EventLine::at)
        .collect();
    match exits.len() {
        0 => false,
        n => exits
            .get(n.wrapping_sub(2))
            .is_none_or(|before| at > *before),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(at: &str) -> Delivery {
        Delivery {
            at: Some(at.parse().unwrap()),
            branch: "hank/main".into(),
            ..Delivery::default()
        }
    }

    const EXIT1: &str = r#"{"schema_version":2,"type":"exit","at":"2026-11-24T09:00:00Z","exit_reason":"max_loops","exit_code":3,"message":"m"}"#;
    const EXIT2: &str = r#"{"schema_version":2,"type":"exit","at":"2026-11-24T10:00:00Z","exit_reason":"forge_failed","exit_code":1,"message":"m"}"#;

    #[test]
    fn a_record_belongs_to_the_last_run_when_written_after_the_exit_before_it() {
        let events = format!("{EXIT1}\n{EXIT2}\n");
        let cases = [
            ("2026-11-24T09:30:00Z", &events, true), // during the last run
            ("2026-11-24T10:30:00Z", &events, true), // `hank deliver` after it
            ("2026-11-24T08:30:00Z", &events, false), // an older run's
            ("2026-11-24T08:30:00Z", &EXIT1.to_string(), true), // the only run
        ];
        for (at, ev, want) in cases {
            assert_eq!(of_last_run(&rec(at), ev), want, "{at}");
        }
        assert!(!of_last_run(&rec("2026-11-24T09:30:00Z"), ""));
        assert!(!of_last_run(&Delivery::default(), &events));
    }
}
