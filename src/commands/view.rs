//! What several commands show the same way: the receipts table (`hank report`, the CI
//! summary of `hank state save --summary`), the `--json` view of a status (`hank status`,
//! `hank fleet status`) and sizes in bytes (`hank analyze`, `hank fleet status`). Pure.

use std::io::BufRead;

use jiff::Timestamp;

use crate::policy::receipts::{ItemCost, LoopCost, Receipts};
use crate::store::schema::{EventLine, loop_cost};

/// Where the report starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Since {
    /// Every loop.
    All,
    /// Runs from this number on (1 = the first).
    Run(u64),
    /// Loops that finished at or after this time.
    Time(Timestamp),
}

/// The loops of the event file with the run each belongs to, and the number of runs. Each
/// line is read with the event stream's one reader ([`EventLine`]).
pub(crate) fn read_loops<R: BufRead>(events: R) -> (Vec<(u64, LoopCost)>, u64) {
    let (loops, runs, _) = read_events(events);
    (loops, runs)
}

/// A minor finding of a review round (REVIEW_AGENT): not sent back to the agent, shown by the
/// report: the run it belongs to, when, and its line (`round N: [minor] path: text`).
pub(crate) type Minor = (u64, Timestamp, String);

/// [`read_loops`], and the review rounds' minor findings.
pub(crate) fn read_events<R: BufRead>(events: R) -> (Vec<(u64, LoopCost)>, u64, Vec<Minor>) {
    let mut run = 1u64;
    let mut run_has_events = false;
    let mut loops = Vec::new();
    let mut minors = Vec::new();
    for line in events.split(b'\n') {
        let Ok(line) = line else { break };
        let Some(e) = EventLine::parse(&line) else {
            continue;
        };
        run_has_events = true;
        match e.kind() {
            "agent_finished" => {
                if let Some(f) = e.finished() {
                    loops.push((run, loop_cost(&e, &f)));
                }
            }
            // A review call (REVIEW_AGENT) is a row of its own.
            "review" => {
                if let Some(crate::store::schema::Event {
                    at,
                    kind: crate::store::schema::EventKind::Review(r),
                    ..
                }) = &e.event
                {
                    loops.push((run, r.receipt(*at)));
                    for f in &r.findings {
                        if f.severity == crate::analysis::review::Severity::Minor {
                            let line = crate::policy::review::finding_line(f);
                            minors.push((run, *at, format!("round {}: {line}", r.round)));
                        }
                    }
                }
            }
            "exit" => {
                run += 1;
                run_has_events = false;
            }
            _ => {}
        }
    }
    let runs = if run_has_events { run } else { run - 1 };
    (loops, runs, minors)
}

/// Longest item text shown in the table.
pub(crate) const ITEM_WIDTH: usize = 44;

/// `text` on one line without escape sequences or control characters
/// ([`crate::sanitize::line`]), cut to `width` characters.
pub(crate) fn cut(text: &str, width: usize) -> String {
    let text = crate::sanitize::line(text);
    if text.chars().count() <= width {
        return text;
    }
    let mut s: String = text.chars().take(width - 1).collect();
    s.push('…');
    s
}

pub(crate) fn wall(ms: u64) -> String {
    crate::report::format_secs(ms / 1000)
}

pub(crate) fn tokens(n: u64) -> String {
    crate::monitor::view::fmt_count(n)
}

pub(crate) fn pct(u: Option<f64>) -> String {
    u.map_or_else(|| "?".to_string(), |u| format!("{:.0}%", u * 100.0))
}

/// The table.
pub(crate) fn render(
    r: &Receipts,
    runs: u64,
    since: Since,
    first: Option<Timestamp>,
    last: Option<Timestamp>,
) -> String {
    let mut s = String::new();
    let scope = match since {
        Since::All if runs == 0 => "no runs yet".to_string(),
        Since::All | Since::Run(1) if runs == 1 => "run 1".to_string(),
        Since::All => format!("runs 1–{runs}"),
        Since::Run(n) if n >= runs => format!("run {n} of {runs}"),
        Since::Run(n) => format!("runs {n}–{runs}"),
        Since::Time(t) => format!("since {}", crate::report::short_time(t)),
    };
    s.push_str(&format!(
        "hank report · {scope} · {} loop{}",
        r.totals.loops,
        if r.totals.loops == 1 { "" } else { "s" }
    ));
    if let (Some(a), Some(b)) = (first, last) {
        s.push_str(&format!(
            " · {} → {}",
            crate::report::short_time(a),
            crate::report::short_time(b)
        ));
    }
    s.push('\n');
    if r.totals.loops == 0 {
        s.push_str("no loop finished in this range\n");
        return s;
    }
    let line = |name: &str, c: &ItemCost| {
        format!(
            "{:<ITEM_WIDTH$} {:>5} {:>8} {:>9} {:>8} {:>9}\n",
            cut(name, ITEM_WIDTH),
            c.loops,
            c.calls,
            format!("${:.2}", c.cost_usd),
            tokens(c.tokens),
            wall(c.duration_ms)
        )
    };
    // "requests": the API requests the client made (its turns), not hank's calls of the agent
    // (`hank status`'s "calls", one a loop).
    s.push_str(&format!(
        "{:<ITEM_WIDTH$} {:>5} {:>8} {:>9} {:>8} {:>9}\n",
        "item", "loops", "requests", "cost", "tokens", "wall time"
    ));
    for item in &r.items {
        s.push_str(&line(&item.item, item));
    }
    if let Some(u) = &r.unattributed {
        s.push_str(&line("(unattributed)", u));
        for rec in &u.recommendations {
            s.push_str(&format!("    · {}\n", cut(rec, 100)));
        }
    }
    let t = &r.totals;
    s.push_str(&line(
        "total",
        &ItemCost {
            item: String::new(),
            loops: t.loops,
            calls: t.calls,
            cost_usd: t.cost_usd,
            tokens: t.tokens,
            duration_ms: t.duration_ms,
            recommendations: Vec::new(),
        },
    ));
    if t.estimated_cost_usd > 0.0 {
        s.push_str(&format!(
            "of which ${:.2} estimated (answers without a readable cost)\n",
            t.estimated_cost_usd
        ));
    }
    if !r.windows.is_empty() {
        s.push_str("usage windows:\n");
        for w in &r.windows {
            let mut text = format!(
                "  {:<14} {} → {} (peak {})",
                crate::sanitize::line(&w.window),
                pct(w.first),
                pct(w.last),
                pct(w.peak)
            );
            if w.reset_between {
                text.push_str(", reset in between");
            }
            if let Some(at) = w.resets_at {
                text.push_str(&format!(", resets {}", crate::report::short_time(at)));
            }
            s.push_str(&text);
            s.push('\n');
        }
    }
    s
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

/// `n` bytes for a reader (`512 B`, `3.0 MiB`).
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
