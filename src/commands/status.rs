//! `hank status [--json]` (also `hank --status`).

use crate::cli;
use crate::error::{HankError, Result};
use crate::exit;
use crate::monitor::snapshot::{Snapshot, Sources};

use super::view::json_view;
use super::{out, project_dir, require_hank_dir};

/// `hank status [--json]`.
pub(crate) fn run(args: &cli::StatusArgs) -> Result<u8> {
    let dir = project_dir()?;
    let store = require_hank_dir(&dir)?;
    let path = store.path(crate::store::HankFile::Status);
    let bytes = match crate::fsread::read(
        &path,
        crate::fsread::DOCUMENT_LIMIT,
        crate::fsread::Follow::No,
    ) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let manual = crate::monitor::snapshot::last_manual_check(&store);
            if args.json {
                out("null\n")?;
            } else {
                let mut text = String::from(
                    "no status yet: the loop has not run in this project (start it with `hank`)\n",
                );
                if let Some(r) = manual {
                    text.push_str(&format!(
                        "verify:       {}\n  last:       {} — {} ({}) at {} · {}\n",
                        r.command,
                        r.kind.as_str(),
                        if r.passed { "passed" } else { "FAILED" },
                        r.how_it_ended(),
                        r.at,
                        r.log
                    ));
                }
                out(&text)?;
            }
            return Ok(exit::OK);
        }
        Err(e) => return Err(HankError::io("failed to read", &path, e)),
    };
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    // A `hank verify` newer than the status's last check (a run that started without one, or
    // that never ran its check) is the last check: shown, not "not run yet".
    if let Some(r) = crate::monitor::snapshot::last_manual_check(&store)
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
    {
        let v = crate::monitor::snapshot::with_last_check(v, &r);
        if let Ok(t) = serde_json::to_string(&v) {
            text = t;
        }
    }
    let events = crate::monitor::snapshot::read_tail(
        &store.path(crate::store::HankFile::Events),
        crate::monitor::snapshot::EVENTS_TAIL_BYTES,
    )
    .unwrap_or_default();
    // The monitor's snapshot: the same reader of status.json and events.jsonl, the same rule
    // for a stale status (it says a loop is active but none holds the lock: killed), and the
    // same renderer (`monitor::status_text`, the `run` section of `hank monitor --once`).
    let running = store.loop_running();
    let mut snap = Snapshot::from_sources(&Sources {
        project: String::new(),
        hank_dir: true,
        status: Some(text.clone()),
        events_tail: Some(events),
        ..Sources::default()
    });
    snap.mark_stale(running);
    if args.json {
        // Only JSON goes to stdout: a status.json that is not (binary, cut short) is an error
        // naming it, never its bytes (escape sequences included) passed through.
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(text.as_bytes())
            && std::str::from_utf8(&bytes).is_ok()
        {
            return out(&format!("{}\n", json_view(v, running, snap.stale))).map(|()| exit::OK);
        }
        return Err(HankError::Unreadable {
            path: path.clone(),
            problem: "is not valid JSON; is a loop writing it?".into(),
        });
    }
    let Some(status) = snap.status.as_ref() else {
        let problem = if serde_json::from_str::<serde_json::Value>(&text).is_ok() {
            "is not a JSON object"
        } else {
            "is not valid JSON; is a loop writing it?"
        };
        return Err(HankError::Unreadable {
            path: path.clone(),
            problem: problem.into(),
        });
    };
    let view = crate::monitor::status_text::View {
        stale: snap.stale,
        events: &snap.events,
        now: jiff::Timestamp::now(),
        tz: &jiff::tz::TimeZone::system(),
    };
    out(&crate::monitor::status_text::render(status, &view))?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::view::NOT_RUNNING_JSON;
    use crate::monitor::snapshot::with_last_check;
    use serde_json::json;

    /// `--json` and the human output agree: a stale status is not running in both.
    #[test]
    fn a_manual_check_newer_than_the_status_is_shown() {
        use crate::policy::verify::{CheckKind, CheckResult};
        let manual = CheckResult {
            kind: CheckKind::Manual,
            passed: true,
            command: "cargo test".into(),
            exit_code: Some(0),
            at: "2026-11-26T10:00:00Z".parse().unwrap(),
            ..CheckResult::default()
        };
        // No check in the status: the manual one, with its command.
        let got = with_last_check(json!({"state": "running", "verification": null}), &manual);
        assert_eq!(got["verification"]["last"]["kind"], "manual");
        assert_eq!(got["verification"]["command"], "cargo test");
        let got = with_last_check(
            json!({"verification": {"command": "make", "last": null}}),
            &manual,
        );
        assert_eq!(got["verification"]["last"]["passed"], true);
        assert_eq!(got["verification"]["command"], "make");
        // The run's own check, newer: kept.
        let newer = json!({"verification": {"command": "make",
            "last": {"kind": "completion", "at": "2026-11-26T11:00:00Z"}}});
        assert_eq!(with_last_check(newer.clone(), &manual), newer);
        // An older one: replaced.
        let older = json!({"verification": {"command": "make",
            "last": {"kind": "completion", "at": "2026-11-26T09:00:00Z"}}});
        assert_eq!(
            with_last_check(older, &manual)["verification"]["last"]["kind"],
            "manual"
        );
    }

    #[test]
    fn json_view_table() {
        let live = json!({"schema_version": 2, "state": "waiting", "wait_reason": "backoff",
                          "waiting_until": "2026-11-26T10:00:00Z", "loop_count": 3});
        let got = json_view(live.clone(), true, false);
        assert_eq!(got["state"], "waiting");
        assert_eq!(got["wait_reason"], "backoff");
        assert_eq!(
            (got["running"].clone(), got["stale"].clone()),
            (json!(true), json!(false))
        );

        let got = json_view(live, false, true);
        assert_eq!(got["state"], NOT_RUNNING_JSON);
        assert_eq!(got["last_state"], "waiting");
        assert_eq!(got["wait_reason"], serde_json::Value::Null);
        assert_eq!(got["waiting_until"], serde_json::Value::Null);
        assert_eq!(got["loop_count"], 3);
        assert_eq!(
            (got["running"].clone(), got["stale"].clone()),
            (json!(false), json!(true))
        );

        let done = json!({"state": "completed", "exit_reason": "plan_complete"});
        let got = json_view(done, false, false);
        assert_eq!(got["state"], "completed");
        assert_eq!(got.get("last_state"), None);
        assert_eq!(
            (got["running"].clone(), got["stale"].clone()),
            (json!(false), json!(false))
        );

        assert_eq!(json_view(json!([1]), false, true), json!([1]));
    }
}
