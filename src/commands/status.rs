//! `hank status [--json]` (also `hank --status`).

use crate::cli;
use crate::error::{HankError, Result};
use crate::exit;

use super::{out, project_dir, require_hank_dir};

/// `hank status [--json]`.
pub fn run(args: &cli::StatusArgs) -> Result<u8> {
    let dir = project_dir()?;
    let store = require_hank_dir(&dir)?;
    let path = store.status_path();
    let bytes = match std::fs::read(&path) {
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
    if args.json {
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        return out(&text).map(|()| exit::OK);
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        HankError::Other(format!(
            "{} is not valid JSON ({e}); is a loop writing it?",
            path.display()
        ))
    })?;
    out(&render_status(&v))?;
    Ok(exit::OK)
}

/// Human rendering of a status.json value (tolerant of missing fields).
#[must_use]
pub fn render_status(v: &serde_json::Value) -> String {
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(ToString::to_string);
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
    let mut lines = Vec::new();
    lines.push(format!(
        "state:        {}{}",
        s("state").unwrap_or_else(|| "unknown".into()),
        s("exit_reason")
            .map(|r| format!(" ({r}, exit {})", n("exit_code").unwrap_or(0)))
            .unwrap_or_default()
    ));
    lines.push(format!("loop:         {}", n("loop_count").unwrap_or(0)));
    lines.push(format!(
        "calls:        {}/{} in the last hour{}",
        n("calls_in_window").unwrap_or(0),
        n("max_calls_per_hour").unwrap_or(0),
        s("next_call_at")
            .map(|t| format!(", next free slot {t}"))
            .unwrap_or_default()
    ));
    if let Some(reason) = s("wait_reason") {
        lines.push(format!(
            "waiting:      {reason} until {}",
            s("waiting_until").unwrap_or_default()
        ));
    }
    lines.push(format!(
        "circuit:      {}{}",
        s("circuit_state").unwrap_or_else(|| "?".into()),
        s("circuit_reason")
            .filter(|r| !r.is_empty())
            .map(|r| format!(" — {r}"))
            .unwrap_or_default()
    ));
    if let Some(plan) = v.get("fix_plan") {
        lines.push(format!(
            "fix_plan:     {}/{} done",
            plan.get("done")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
            plan.get("total")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        ));
    }
    lines.push(format!(
        "cost:         ${:.4}",
        v.get("total_cost_usd")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0)
    ));
    if let Some(id) = s("session_id") {
        lines.push(format!("session:      {id}"));
    }
    if let Some(last) = v.get("last_loop").filter(|l| !l.is_null()) {
        let g = |k: &str| {
            last.get(k)
                .map(|x| x.to_string().trim_matches('"').to_string())
                .unwrap_or_default()
        };
        lines.push(format!(
            "last loop:    #{} {} · status {} · {} · {} file(s) · EXIT_SIGNAL {}",
            g("number"),
            g("outcome"),
            g("status"),
            g("work_type"),
            g("files_changed"),
            g("exit_signal")
        ));
        let rec = g("recommendation");
        if !rec.is_empty() && rec != "null" {
            lines.push(format!("next:         {rec}"));
        }
    }
    lines.push(format!(
        "updated:      {}",
        s("updated_at").unwrap_or_default()
    ));
    lines.join("\n") + "\n"
}
