//! `hank status [--json]` (also `hank --status`).

use crate::cli;
use crate::error::{HankError, Result};
use crate::exit;
use crate::monitor::snapshot::{Snapshot, Sources};
use crate::store::Status;
use crate::store::schema::Lenient;

use super::{out, project_dir, require_hank_dir};

/// `hank status [--json]`.
pub(crate) fn run(args: &cli::StatusArgs) -> Result<u8> {
    let dir = project_dir()?;
    let store = require_hank_dir(&dir)?;
    let path = store.status_path();
    let bytes = match crate::fsread::read(
        &path,
        crate::fsread::DOCUMENT_LIMIT,
        crate::fsread::Follow::No,
    ) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if args.json {
                out("null\n")?;
            } else {
                out(
                    "no status yet: the loop has not run in this project (start it with `hank`)\n",
                )?;
            }
            return Ok(exit::OK);
        }
        Err(e) => return Err(HankError::io("failed to read", &path, e)),
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let events =
        crate::monitor::snapshot::read_tail(&store.events_path(), 256 * 1024).unwrap_or_default();
    // The monitor's snapshot: the same reader of status.json and events.jsonl, the same rule
    // for a stale status (it says a loop is active but none holds the lock: killed).
    let running = store.loop_running();
    let mut snap = Snapshot::from_sources(&Sources {
        project: String::new(),
        hank_dir: true,
        status: Some(text.clone()),
        events_tail: Some(events.clone()),
        ..Sources::default()
    });
    snap.mark_stale(running);
    if args.json {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            return out(&format!("{}\n", json_view(v, running, snap.stale))).map(|()| exit::OK);
        }
        let mut text = text;
        if !text.ends_with('\n') {
            text.push('\n');
        }
        return out(&text).map(|()| exit::OK);
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
    let words = last_words(&events);
    out(&render_status_full(status, snap.stale, &words))?;
    Ok(exit::OK)
}

/// `hank status --json`: `status.json` with `running` (a loop holds the project's lock) and
/// `stale` (the file says a loop is active but none is) added. A stale status tells the same
/// story as the human output: `state` becomes `not_running` (what the file said is kept in
/// `last_state`) and the wait it names is over (`wait_reason`, `waiting_until` null). (pure)
#[must_use]
pub(crate) fn json_view(mut v: serde_json::Value, running: bool, stale: bool) -> serde_json::Value {
    use serde_json::Value;
    if let Some(obj) = v.as_object_mut() {
        if stale {
            let last = obj.remove("state").unwrap_or(Value::Null);
            obj.insert("state".into(), Value::from(NOT_RUNNING_JSON));
            obj.insert("last_state".into(), last);
            for key in ["wait_reason", "waiting_until"] {
                if obj.contains_key(key) {
                    obj.insert(key.into(), Value::Null);
                }
            }
        }
        obj.insert("running".into(), Value::Bool(running));
        obj.insert("stale".into(), Value::Bool(stale));
    }
    v
}

/// `state` of a stale status in `hank status --json`.
pub(crate) const NOT_RUNNING_JSON: &str = "not_running";

/// What the event log says in words about the end of the run and the last error.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LastWords {
    /// The `exit` event's message.
    pub exit_message: Option<String>,
    /// The last failed loop's error kind and message.
    pub last_error: Option<String>,
}

/// Reads [`LastWords`] from the tail of `events.jsonl` (pure).
#[must_use]
pub(crate) fn last_words(events_tail: &str) -> LastWords {
    let mut words = LastWords::default();
    for e in crate::store::schema::EventLine::parse_all(events_tail)
        .iter()
        .rev()
    {
        match e.kind() {
            "exit" if words.exit_message.is_none() => {
                words.exit_message = e.str("message").map(crate::sanitize::line);
            }
            "agent_finished" if words.last_error.is_none() => {
                if let Some(kind) = e.str("error_kind") {
                    let msg = e.str("error_message").unwrap_or("");
                    words.last_error = Some(crate::sanitize::line(
                        &format!("{kind} — {msg}")
                            .chars()
                            .take(300)
                            .collect::<String>(),
                    ));
                }
            }
            "loop_started" if words.last_error.is_none() => {
                // A newer loop without an error: the last error is history.
                words.last_error = Some(String::new());
            }
            _ => {}
        }
        if words.exit_message.is_some() && words.last_error.is_some() {
            break;
        }
    }
    if words.last_error.as_deref() == Some("") {
        words.last_error = None;
    }
    words
}

/// [`render_status`], with the stale-status line and the last words.
pub(crate) fn render_status_full(st: &Lenient<Status>, stale: bool, words: &LastWords) -> String {
    let mut lines: Vec<String> = render_status(st).lines().map(str::to_string).collect();
    if stale && let Some(first) = lines.first_mut() {
        *first = format!(
            "state:        {}",
            crate::monitor::snapshot::stale_note(
                Some(st.value.updated_at).filter(|_| st.has("updated_at"))
            )
        );
        lines.retain(|l| !l.starts_with("waiting:"));
    }
    let mut extra = Vec::new();
    if st.text("exit_reason", |s| s.exit_reason).is_some()
        && let Some(msg) = &words.exit_message
    {
        extra.push(format!("why:          {msg}"));
    }
    if let Some(err) = &words.last_error {
        extra.push(format!("last error:   {err}"));
    }
    let at = 1.min(lines.len());
    lines.splice(at..at, extra);
    lines.join("\n") + "\n"
}

/// Human rendering of `status.json`, read with the schema's own type (fields an older or
/// newer hank did not write, or wrote differently, are left out).
#[must_use]
pub(crate) fn render_status(st: &Lenient<Status>) -> String {
    let v = &st.value;
    let mut lines = Vec::new();
    lines.push(format!(
        "state:        {}{}",
        // A state a newer hank writes is shown as written, as the monitor shows it.
        st.text("state", |s| s.state)
            .unwrap_or_else(|| "unknown".into()),
        st.text("exit_reason", |s| s.exit_reason)
            .map(|r| format!(" ({r}, exit {})", v.exit_code.unwrap_or(0)))
            .unwrap_or_default()
    ));
    lines.push(format!("loop:         {}", v.loop_count));
    lines.push(format!(
        "calls:        {}/{} in the last hour{}",
        v.calls_in_window,
        v.max_calls_per_hour,
        v.next_call_at
            .map(|t| format!(", next free slot {t}"))
            .unwrap_or_default()
    ));
    if let Some(reason) = v.wait_reason {
        lines.push(format!(
            "waiting:      {} until {}",
            reason.as_str(),
            v.waiting_until.map(|t| t.to_string()).unwrap_or_default()
        ));
    }
    lines.push(format!(
        "circuit:      {}{}",
        if st.has("circuit_state") {
            v.circuit_state.as_str().to_string()
        } else {
            "?".into()
        },
        Some(&v.circuit_reason)
            .filter(|r| !r.is_empty())
            .map(|r| format!(" — {r}"))
            .unwrap_or_default()
    ));
    if st.has("fix_plan") {
        lines.push(format!(
            "fix_plan:     {}/{} done",
            v.fix_plan.done, v.fix_plan.total
        ));
    }
    let estimated = if v.estimated_cost_usd > 0.0 {
        format!(" (of which ${:.4} estimated)", v.estimated_cost_usd)
    } else {
        String::new()
    };
    lines.push(format!("cost:         ${:.4}{estimated}", v.total_cost_usd));
    for (i, (name, w)) in v.usage_windows.iter().enumerate() {
        let label = if i == 0 { "windows:" } else { "" };
        lines.push(format!("{label:<14}{}", window_line(name, w)));
    }
    if let Some(agent) = &v.agent {
        lines.push(format!("agent:        {agent}"));
    }
    for (name, l) in &v.agents_limited {
        lines.push(format!(
            "  limited:    {name}: {}{} — {}",
            l.kind,
            l.until
                .map(|t| format!(" until {}", crate::report::local_time(t)))
                .unwrap_or_else(|| " for the rest of the run".into()),
            l.message
        ));
    }
    if let Some(id) = &v.session_id {
        lines.push(format!("session:      {id}"));
    }
    if let Some(last) = &v.last_loop {
        lines.push(format!(
            "last loop:    #{} {} · status {} · {} · {} file(s) · EXIT_SIGNAL {}",
            last.number,
            json_str(&last.outcome),
            last.status.as_deref().unwrap_or("null"),
            last.work_type.as_deref().unwrap_or("null"),
            last.files_changed,
            last.exit_signal
        ));
        if let Some(rec) = last.recommendation.as_deref().filter(|r| !r.is_empty()) {
            lines.push(format!("next:         {rec}"));
        }
    }
    if let Some(ver) = &v.verification {
        lines.extend(verification_lines(ver));
    }
    if let Some(d) = &v.delivery {
        lines.push(format!(
            "delivery:     {} on {} ({}) → {}{}",
            d.mode,
            d.branch,
            d.head
                .as_deref()
                .map_or("not pushed", |h| h.get(..12).unwrap_or(h)),
            d.pr_url.as_deref().unwrap_or("no pull request"),
            format_args!(
                ", checks {}{}",
                d.checks,
                d.exit_reason
                    .map_or_else(String::new, |r| format!(" ({r})"))
            )
        ));
    }
    if st.has("updated_at") {
        lines.push(format!("updated:      {}", v.updated_at));
    } else {
        lines.push("updated:      ".to_string());
    }
    // Every value may quote the agent (recommendation, reasons, session): one clean line each.
    lines
        .iter()
        .map(|l| crate::sanitize::line(l))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// One usage window: `five_hour 86% (limit 80%) · resets Mon 14:00 CET (13:00 UTC) · allowed_warning`.
fn window_line(name: &str, w: &crate::policy::windows::WindowStatus) -> String {
    let mut line = format!(
        "{name} {}",
        w.utilization
            .map_or_else(|| "?%".to_string(), |u| format!("{:.0}%", u * 100.0))
    );
    if let Some(l) = w.limit_percent {
        line.push_str(&format!(" (limit {l}%)"));
    }
    match w.resets_at {
        Some(t) => line.push_str(&format!(" · resets {}", crate::report::local_time(t))),
        None if w.utilization == Some(0.0) => line.push_str(" · reset"),
        None => {}
    }
    if let Some(st) = &w.status {
        line.push_str(&format!(" · {st}"));
    }
    line
}

/// The `verification` lines: the command, the last result (when, how long), a red
/// baseline and the claims rejected so far.
fn verification_lines(v: &crate::policy::verify::VerificationStatus) -> Vec<String> {
    let mut lines = vec![format!("verify:       {}", v.command)];
    let describe = |r: &crate::policy::verify::CheckResult| {
        format!(
            "{} ({}) at {} · {} · {}",
            if r.passed { "passed" } else { "FAILED" },
            r.how_it_ended(),
            crate::report::local_time(r.at),
            crate::report::format_secs(r.duration_ms / 1000),
            r.log
        )
    };
    if let Some(r) = &v.last {
        lines.push(format!(
            "  last:       {} — {}",
            r.kind.as_str(),
            describe(r)
        ));
        if !r.removed_tests.is_empty() {
            lines.push(format!(
                "  removed:    test files deleted or emptied: {}",
                r.removed_tests.join(", ")
            ));
        }
    } else {
        lines.push("  last:       not run yet".into());
    }
    if let Some(b) = &v.baseline {
        lines.push(format!("  baseline:   {}", describe(b)));
    }
    if v.rejected_in_a_row > 0 {
        lines.push(format!(
            "  rejected:   {} of {} \"done\" claims in a row",
            v.rejected_in_a_row, v.max_rejected
        ));
    }
    lines
}

/// The JSON string of a unit enum value (`RunState::Running` → `running`).
fn json_str<T: serde::Serialize>(x: &T) -> String {
    serde_json::to_value(x)
        .ok()
        .and_then(|v| v.as_str().map(ToString::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `--json` and the human output agree: a stale status is not running in both.
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

    /// Values a newer hank writes are shown as written, as the monitor shows them.
    #[test]
    fn newer_values_are_shown_as_written() {
        let v = json!({"schema_version": 3, "state": "paused", "exit_reason": "tea_time",
                       "exit_code": 3, "loop_count": 2});
        let st = crate::store::schema::read_lenient::<Status>(&v).unwrap();
        let text = render_status(&st);
        assert!(
            text.starts_with("state:        paused (tea_time, exit 3)"),
            "{text}"
        );
        let none = crate::store::schema::read_lenient::<Status>(&json!({})).unwrap();
        assert!(render_status(&none).starts_with("state:        unknown\n"));
    }

    /// The human output of the same stale status starts with "not running", as the JSON says.
    #[test]
    fn the_human_output_of_a_stale_status_says_not_running() {
        let v =
            json!({"schema_version": 2, "state": "running", "updated_at": "2026-11-26T09:00:00Z"});
        let st = crate::store::schema::read_lenient::<Status>(&v).unwrap();
        let text = render_status_full(&st, true, &LastWords::default());
        assert!(text.starts_with("state:        not running"), "{text}");
        assert!(!text.contains("state:        running"), "{text}");
    }
}
