//! `hank circuit [--json]` (also `hank --circuit-status`).

use serde_json::json;

use crate::cli;
use crate::error::Result;
use crate::exit;

use super::{out, project_dir, require_hank_dir};

/// `hank circuit [--json]`.
pub(crate) fn run(args: &cli::CircuitArgs) -> Result<u8> {
    let dir = project_dir()?;
    let store = require_hank_dir(&dir)?;
    let loaded = store.read_state()?;
    let b = &loaded.breaker;
    if args.json {
        let v = json!({
            "state": b.state.as_str(),
            "reason": b.reason,
            "opened_at": b.opened_at.map(|t| t.to_string()),
            "no_progress_streak": b.no_progress_streak,
            "same_error_streak": b.same_error_streak,
            "failure_streak": b.failure_streak,
            "history": b.history,
        });
        out(&format!("{v}\n"))?;
        return Ok(exit::OK);
    }
    let mut text = format!(
        "circuit: {}{}\ncounters: no progress {} · same error {} · failed calls {}\n",
        b.state.as_str(),
        if b.reason.is_empty() {
            String::new()
        } else {
            format!(" — {}", b.reason)
        },
        b.no_progress_streak,
        b.same_error_streak,
        b.failure_streak
    );
    if let Some(at) = b.opened_at {
        text.push_str(&format!("opened at: {at}\n"));
    }
    if b.history.is_empty() {
        text.push_str("no transitions yet\n");
    } else {
        text.push_str("recent transitions:\n");
        for t in b.history.iter().rev().take(10) {
            text.push_str(&format!(
                "  {} {} → {}: {}\n",
                t.at,
                t.from.as_str(),
                t.to.as_str(),
                t.reason
            ));
        }
    }
    out(&text)?;
    Ok(exit::OK)
}
