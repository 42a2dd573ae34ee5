//! The dashboard: a pure function of a [`Snapshot`], `now` and the display time zone.
//!
//! [`rows`] turns a snapshot into labelled values once; [`render`] draws them into any
//! ratatui [`Frame`] (the TUI, or a `TestBackend` in tests) and [`render_text`] prints them
//! as plain text for `hank monitor --once`. No clock, no I/O.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Gauge, Paragraph, Wrap};

use super::snapshot::{Snapshot, last_loop_number};
use crate::store::schema::EventLine;

/// How a value is colored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    Normal,
    Good,
    Warn,
    Bad,
    Dim,
}

impl Tone {
    fn style(self) -> Style {
        match self {
            Tone::Normal => Style::default(),
            Tone::Good => Style::default().fg(Color::Green),
            Tone::Warn => Style::default().fg(Color::Yellow),
            Tone::Bad => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            Tone::Dim => Style::default().fg(Color::DarkGray),
        }
    }
}

/// One labelled value of the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub label: &'static str,
    pub value: String,
    pub tone: Tone,
}

fn row(label: &'static str, value: impl Into<String>, tone: Tone) -> Row {
    // Values carry the agent's words (recommendation, reasons, errors): one clean line.
    let value: String = value.into();
    Row {
        label,
        value: crate::sanitize::line(&value),
        tone,
    }
}

/// `1h 02m 03s`, `2m 03s`, `45s`, `2d 03h`; negative durations read as zero.
#[must_use]
pub(crate) fn fmt_duration(d: SignedDuration) -> String {
    let secs = d.as_secs().max(0);
    let (days, hours, mins, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if days > 0 {
        format!("{days}d {hours:02}h")
    } else if hours > 0 {
        format!("{hours}h {mins:02}m")
    } else if mins > 0 {
        format!("{mins}m {s:02}s")
    } else {
        format!("{s}s")
    }
}

/// A wall-clock time in `tz`: `14:05:09 UTC` today, `Nov 23 14:05 UTC` on another day.
#[must_use]
pub(crate) fn fmt_clock(at: Timestamp, now: Timestamp, tz: &TimeZone) -> String {
    let zoned = at.to_zoned(tz.clone());
    let today = now.to_zoned(tz.clone());
    if zoned.date() == today.date() {
        zoned.strftime("%H:%M:%S %Z").to_string()
    } else {
        zoned.strftime("%b %d %H:%M %Z").to_string()
    }
}

/// `950`, `1.2k`, `56.8k`, `3.4M`.
#[must_use]
pub(crate) fn fmt_count(n: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let f = n as f64;
    if n < 1000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{:.1}k", f / 1e3)
    } else {
        format!("{:.1}M", f / 1e6)
    }
}

fn fmt_cost(usd: f64) -> String {
    format!("${usd:.2}")
}

fn is_finished(state: Option<&str>) -> bool {
    matches!(
        state,
        Some("completed" | "halted" | "stopped" | "failed" | super::snapshot::NOT_RUNNING)
    )
}

fn state_tone(state: &str) -> Tone {
    match state {
        "running" | "completed" => Tone::Good,
        "waiting" | "stopped" | "starting" => Tone::Warn,
        "halted" | "failed" | super::snapshot::NOT_RUNNING => Tone::Bad,
        _ => Tone::Normal,
    }
}

fn circuit_tone(state: &str) -> Tone {
    match state {
        "CLOSED" => Tone::Good,
        "HALF_OPEN" => Tone::Warn,
        "OPEN" => Tone::Bad,
        _ => Tone::Normal,
    }
}

fn wait_row(snap: &Snapshot, now: Timestamp, tz: &TimeZone) -> Row {
    let (reason, until) = snap.wait();
    let waiting = snap.state().as_deref() == Some("waiting") || reason.is_some();
    // Inside a call: the client retrying an overloaded API is a wait too.
    if !waiting && let Some(r) = snap.api_retry() {
        return row("wait", r.words(|t| fmt_clock(t, now, tz)), Tone::Warn);
    }
    if !waiting {
        return row("wait", "—", Tone::Dim);
    }
    let reason = reason.unwrap_or_else(|| "unknown".to_string());
    let label = super::status_text::wait_label(&reason);
    let value = match until {
        None => label.to_string(),
        Some(until) => {
            let clock = fmt_clock(until, now, tz);
            let left = until.duration_since(now);
            let when = if left.is_positive() {
                format!("{} left", fmt_duration(left))
            } else {
                "due now".to_string()
            };
            if reason == "usage_limit" || reason == "usage_window" {
                format!("{label} · resets {clock} · {when}")
            } else {
                format!("{label} · {when} (until {clock})")
            }
        }
    };
    row("wait", value, Tone::Warn)
}

/// The run's facts: state, elapsed time, breaker, budget, wait, cost, exit.
#[must_use]
pub(crate) fn rows(snap: &Snapshot, now: Timestamp, tz: &TimeZone) -> Vec<Row> {
    let fleet = fleet_rows(snap);
    let Some(s) = &snap.status else {
        if !fleet.is_empty() {
            return fleet;
        }
        let why = if snap.hank_dir {
            "no status yet (waiting for the loop to write .hank/status.json)"
        } else {
            "not a hank project"
        };
        return vec![row("state", why, Tone::Dim)];
    };
    let mut out = fleet;
    let state = snap.state().unwrap_or_else(|| "unknown".to_string());
    let mut state_value = state.to_uppercase();
    if let Some(n) = s.get("loop_count", |s| s.loop_count) {
        state_value.push_str(&format!(" · loop {n}"));
    }
    out.push(row("state", state_value, state_tone(&state)));

    let finished = is_finished(Some(&state));
    let updated_at = s.get("updated_at", |s| s.updated_at);
    let mut parts = Vec::new();
    if let Some(start) = snap.run_started_at {
        if finished {
            let end = snap.run_ended_at.or(updated_at).unwrap_or(now);
            parts.push(format!("ran {}", fmt_duration(end.duration_since(start))));
        } else {
            parts.push(format!(
                "{} elapsed",
                fmt_duration(now.duration_since(start))
            ));
        }
    }
    if let Some(updated) = updated_at {
        let verb = if finished { "ended" } else { "updated" };
        parts.push(format!(
            "{verb} {} ago",
            fmt_duration(now.duration_since(updated))
        ));
    }
    let time_value = parts.join(" · ");
    if !time_value.is_empty() {
        out.push(row("time", time_value, Tone::Normal));
    }

    let circuit = s
        .text("circuit_state", |s| s.circuit_state)
        .unwrap_or_else(|| "unknown".to_string());
    let circuit_value = match s
        .get("circuit_reason", |s| s.circuit_reason.clone())
        .filter(|r| !r.is_empty())
    {
        Some(reason) => format!("{circuit} — {reason}"),
        None => circuit.clone(),
    };
    out.push(row("circuit", circuit_value, circuit_tone(&circuit)));

    if let Some(agent) = s.get("agent", |s| s.agent.clone()).flatten() {
        let mut value = agent;
        let mut tone = Tone::Normal;
        for (name, l) in s
            .get("agents_limited", |s| s.agents_limited.clone())
            .unwrap_or_default()
        {
            tone = Tone::Warn;
            value.push_str(&format!(" · {name}: {}", l.kind));
            if let Some(t) = l.until {
                value.push_str(&format!(" until {}", fmt_clock(t, now, tz)));
            }
        }
        out.push(row("agent", value, tone));
    }

    if let Some(v) = s.get("verification", |s| s.verification.clone()).flatten()
        && let Some(last) = &v.last
    {
        let mut value = format!(
            "{} {} ({}, {}) · {}",
            if last.passed { "passed" } else { "FAILED" },
            fmt_clock(last.at, now, tz),
            last.kind.as_str(),
            fmt_duration(jiff::SignedDuration::from_millis(
                i64::try_from(last.duration_ms).unwrap_or(i64::MAX)
            )),
            v.command
        );
        if v.rejected_in_a_row > 0 {
            value.push_str(&format!(
                " · {}/{} done claims rejected",
                v.rejected_in_a_row, v.max_rejected
            ));
        }
        let tone = if last.passed { Tone::Good } else { Tone::Bad };
        out.push(row("verify", value, tone));
    }

    // DELIVER=branch|pr: the PR and its checks ("PR #3 hank/main → main: checks pending").
    if let Some(d) = s.get("delivery", |s| s.delivery.clone()).flatten() {
        let tone = match d.checks.as_str() {
            "green" => Tone::Good,
            "pending" => Tone::Warn,
            "failed" | "missing" | "timed_out" => Tone::Bad,
            _ if d.head.is_none() => Tone::Bad,
            _ => Tone::Normal,
        };
        out.push(row("deliver", d.line(), tone));
    }

    // REVIEW_AGENT: the reviewer's last round ("round 1/3 codex: changes — 2 blocker(s)").
    if let Some(r) = s.get("review", |s| s.review.clone()).flatten() {
        let tone = match r.verdict.as_str() {
            "approve" => Tone::Good,
            _ => Tone::Warn,
        };
        let value = format!(
            "round {}/{} {}: {} — {} blocker(s), {} minor",
            r.round,
            r.max_rounds,
            crate::sanitize::line(&r.agent),
            r.verdict,
            r.blockers,
            r.minors
        );
        out.push(row("review", value, tone));
    }

    let mut calls = match (
        s.get("calls_in_window", |s| s.calls_in_window),
        s.get("max_calls_per_hour", |s| s.max_calls_per_hour),
    ) {
        (Some(used), Some(cap)) => format!("{used} / {cap} this hour"),
        (Some(used), None) => format!("{used} this hour"),
        _ => "—".to_string(),
    };
    let mut calls_tone = Tone::Normal;
    if let Some(next) = s
        .get("next_call_at", |s| s.next_call_at)
        .flatten()
        .filter(|t| *t > now)
    {
        calls.push_str(&format!(
            " · next call in {}",
            fmt_duration(next.duration_since(now))
        ));
        calls_tone = Tone::Warn;
    }
    out.push(row("calls", calls, calls_tone));

    let tokens = match (
        s.get("tokens_in_window", |s| s.tokens_in_window),
        s.get("max_tokens_per_hour", |s| s.max_tokens_per_hour),
    ) {
        (Some(used), Some(cap)) if cap > 0 => format!("{used} / {cap} this hour"),
        (Some(used), _) => format!("{used} this hour (no cap)"),
        _ => "—".to_string(),
    };
    out.push(row("tokens", tokens, Tone::Normal));
    out.push(wait_row(snap, now, tz));

    let mut cost = s
        .get("total_cost_usd", |s| s.total_cost_usd)
        .map_or_else(|| "—".to_string(), fmt_cost);
    if let Some(t) = s.get("total_tokens", |s| s.total_tokens) {
        let cached = t.cache_read.saturating_add(t.cache_creation);
        cost.push_str(&format!(
            " · in {} · out {} · cache {}",
            fmt_count(t.input),
            fmt_count(t.output),
            fmt_count(cached)
        ));
    }
    out.push(row("cost", cost, Tone::Normal));

    if let Some(reason) = s.text("exit_reason", |s| s.exit_reason) {
        let exit_code = s.get("exit_code", |s| s.exit_code).flatten();
        let code = exit_code.map_or_else(String::new, |c| format!(" (exit code {c})"));
        let tone = match exit_code {
            Some(0) => Tone::Good,
            Some(3 | 130) => Tone::Warn,
            _ => Tone::Bad,
        };
        out.push(row("exit", format!("{reason}{code}"), tone));
    }
    out
}

/// `hank fleet`: the shared budget, then a row per task (state, branch, loops, cost, what is
/// happening).
#[must_use]
pub(crate) fn fleet_rows(snap: &Snapshot) -> Vec<Row> {
    use crate::policy::fleet::TaskState;
    let Some(f) = &snap.fleet else {
        return Vec::new();
    };
    let merged = f
        .tasks
        .iter()
        .filter(|t| t.state() == TaskState::Merged)
        .count();
    let cap = if f.max_calls_per_hour > 0 {
        format!(" of {}", f.max_calls_per_hour)
    } else {
        String::new()
    };
    let mut out = vec![row(
        "fleet",
        format!(
            "{} · {merged}/{} merged into {} · {} call(s) this hour{cap}",
            crate::sanitize::line(&f.state).to_uppercase(),
            f.tasks.len(),
            crate::sanitize::line(&f.into),
            f.calls_in_window
        ),
        Tone::Normal,
    )];
    out.push(fleet_budget_row(f));
    for t in &f.tasks {
        let tone = match t.state() {
            TaskState::Merged => Tone::Good,
            TaskState::Failed | TaskState::Blocked => Tone::Bad,
            TaskState::Waiting => Tone::Warn,
            _ => Tone::Normal,
        };
        out.push(row(
            "task",
            format!(
                "{} · {} · {}{}{} · loops {} · ${:.2} · {}",
                t.name,
                t.state().as_str(),
                t.branch,
                if t.repos.is_empty() {
                    String::new()
                } else {
                    format!(" in {}", crate::sanitize::line(&t.repos.join(", ")))
                },
                t.issue.as_ref().map_or_else(String::new, |i| format!(
                    " · issue {} {}",
                    i.number,
                    crate::sanitize::line(&i.url)
                )),
                t.loops,
                t.cost_usd,
                crate::sanitize::line(&t.message)
            ),
            tone,
        ));
    }
    out
}

/// The fleet's shared budget beyond calls: its cost, its tokens this hour, why nothing starts.
fn fleet_budget_row(f: &crate::store::schema::FleetFile) -> Row {
    let mut text = format!("${:.2}", f.cost_usd);
    if f.max_cost_usd > 0.0 {
        text.push_str(&format!(" of ${:.2}", f.max_cost_usd));
    }
    text.push_str(&format!(" · {} token(s) this hour", f.tokens_in_window));
    if f.max_tokens_per_hour > 0 {
        text.push_str(&format!(" of {}", f.max_tokens_per_hour));
    }
    let tone = match &f.held {
        Some(why) => {
            text.push_str(&format!(" · held: {}", crate::sanitize::line(why)));
            Tone::Warn
        }
        None => Tone::Normal,
    };
    row("budget", text, tone)
}

/// The last loop's outcome and HANK_STATUS fields.
#[must_use]
pub(crate) fn last_loop_rows(snap: &Snapshot) -> Vec<Row> {
    let Some(l) = snap.last_loop() else {
        return vec![row("loop", "no loop finished yet", Tone::Dim)];
    };
    let mut out = Vec::new();
    let outcome = l
        .text("outcome", |l| l.outcome)
        .unwrap_or_else(|| "?".to_string());
    let mut head = match last_loop_number(&l) {
        Some(n) => format!("#{n} · {outcome}"),
        None => outcome.clone(),
    };
    if let Some(kind) = l
        .text("error_kind", |l| l.error_kind)
        .filter(|_| outcome != "success")
    {
        head.push_str(&format!(" ({kind})"));
    }
    let tone = if outcome == "success" {
        Tone::Good
    } else {
        Tone::Bad
    };
    out.push(row("loop", head, tone));
    let dash = |v: Option<String>| v.unwrap_or_else(|| "—".to_string());
    out.push(row(
        "status",
        dash(l.get("status", |l| l.status.clone()).flatten()),
        Tone::Normal,
    ));
    out.push(row(
        "work type",
        dash(l.get("work_type", |l| l.work_type.clone()).flatten()),
        Tone::Normal,
    ));
    out.push(row(
        "files",
        l.get("files_changed", |l| l.files_changed)
            .map_or_else(|| "—".to_string(), |n| format!("{n} changed")),
        Tone::Normal,
    ));
    let exit_signal = l.get("exit_signal", |l| l.exit_signal);
    let signal = exit_signal.map_or_else(|| "—".to_string(), |b| b.to_string());
    out.push(row(
        "exit signal",
        signal,
        if exit_signal == Some(true) {
            Tone::Good
        } else {
            Tone::Normal
        },
    ));
    let mut cost = l
        .get("cost_usd", |l| l.cost_usd)
        .map_or_else(|| "—".to_string(), fmt_cost);
    if let Some(ms) = l.get("duration_ms", |l| l.duration_ms) {
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        cost.push_str(&format!(
            " · {}",
            fmt_duration(SignedDuration::from_millis(ms))
        ));
    }
    out.push(row("cost", cost, Tone::Normal));
    out.push(row(
        "recommend",
        dash(
            l.get("recommendation", |l| l.recommendation.clone())
                .flatten(),
        ),
        Tone::Normal,
    ));
    out
}

/// One event as a line of text (without its time).
#[must_use]
pub(crate) fn event_text(e: &EventLine, now: Timestamp, tz: &TimeZone) -> String {
    // Events quote the agent (warnings, reasons, messages): one clean line.
    crate::sanitize::line(&event_text_raw(e, now, tz))
}

fn event_text_raw(e: &EventLine, now: Timestamp, tz: &TimeZone) -> String {
    let loop_no = e.u64("loop").map_or_else(String::new, |n| format!(" {n}"));
    match e.kind() {
        "loop_started" => format!("loop{loop_no} started"),
        "agent_finished" => {
            let mut parts = vec![e.str("outcome").unwrap_or("?").to_string()];
            if let Some(kind) = e.str("error_kind") {
                parts.push(kind.to_string());
            }
            parts.extend(e.str("status").map(str::to_string));
            parts.extend(e.str("work_type").map(str::to_string));
            if let Some(n) = e.u64("files_changed") {
                parts.push(format!("{n} files"));
            }
            if let Some(c) = e.f64("cost_usd") {
                parts.push(fmt_cost(c));
            }
            format!("loop{loop_no} finished: {}", parts.join(" · "))
        }
        "circuit_changed" => {
            let reason = e
                .str("reason")
                .map_or_else(String::new, |r| format!(": {r}"));
            format!(
                "circuit {} → {}{reason}",
                e.str("from").unwrap_or("?"),
                e.str("to").unwrap_or("?")
            )
        }
        "waiting" => {
            let reason = super::status_text::wait_label(e.str("reason").unwrap_or("?")).to_string();
            match e.time("until") {
                Some(until) => format!("waiting: {reason} until {}", fmt_clock(until, now, tz)),
                None => format!("waiting: {reason}"),
            }
        }
        "agent_switched" => format!(
            "agent {} → {}: {}",
            e.str("from").unwrap_or("?"),
            e.str("to").unwrap_or("?"),
            e.str("reason").unwrap_or("")
        ),
        "verification" => format!(
            "verification ({}) {}: {}",
            e.str("kind").unwrap_or("?"),
            if e.bool("passed") == Some(true) {
                "passed"
            } else {
                "FAILED"
            },
            e.str("command").unwrap_or("")
        ),
        "warning" => format!("warning: {}", e.str("message").unwrap_or("")),
        "review" => match e.event.as_ref().map(|ev| &ev.kind) {
            Some(crate::store::schema::EventKind::Review(r)) => r.line(),
            _ => "review".to_string(),
        },
        "delivery" => match e.event.as_ref().map(|ev| &ev.kind) {
            Some(crate::store::schema::EventKind::Delivery(d)) => format!("delivery: {}", d.line()),
            _ => "delivery".to_string(),
        },
        "exit" => {
            let code = e.u64("exit_code");
            let code = code.map_or_else(String::new, |c| format!(" (code {c})"));
            let msg = e
                .str("message")
                .map_or_else(String::new, |m| format!(": {m}"));
            format!("exit {}{code}{msg}", e.str("exit_reason").unwrap_or("?"))
        }
        other => other.to_string(),
    }
}

fn event_tone(e: &EventLine) -> Tone {
    match e.kind() {
        "warning" | "waiting" => Tone::Warn,
        "circuit_changed" if e.str("to") == Some("OPEN") => Tone::Bad,
        "agent_finished" if e.str("outcome") != Some("success") => Tone::Bad,
        "verification" if e.bool("passed") != Some(true) => Tone::Bad,
        "exit" if e.u64("exit_code") != Some(0) => Tone::Bad,
        _ => Tone::Normal,
    }
}

fn event_time(e: &EventLine, tz: &TimeZone) -> String {
    e.at().map_or_else(
        || "--:--:--".to_string(),
        |at| at.to_zoned(tz.clone()).strftime("%H:%M:%S").to_string(),
    )
}

fn plan_label(snap: &Snapshot) -> (f64, String) {
    match snap.fix_plan {
        Some(p) if p.total > 0 => {
            let done = p.done.min(p.total);
            #[allow(clippy::cast_precision_loss)]
            let ratio = done as f64 / p.total as f64;
            (
                ratio,
                format!("{done}/{} done ({:.0}%)", p.total, ratio * 100.0),
            )
        }
        Some(_) => (0.0, "no checkboxes in fix_plan.md".to_string()),
        None => (0.0, "no fix_plan.md".to_string()),
    }
}

/// Cells of a window gauge bar.
pub(crate) const GAUGE_CELLS: usize = 20;

/// One usage window as a gauge: `[███████████████▌··|·]  86% of 80% limit · resets in 2h 00m
/// (12:00:00 UTC) · allowed_warning`. The limit (MAX_WINDOW_PERCENT) is the `|` in the bar.
#[must_use]
pub(crate) fn window_gauge(
    w: &crate::policy::windows::WindowStatus,
    now: Timestamp,
    tz: &TimeZone,
) -> (String, Tone) {
    let used = w.utilization.unwrap_or(0.0).max(0.0);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let filled = ((used.min(1.0) * GAUGE_CELLS as f64).round() as usize).min(GAUGE_CELLS);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let mark = w.limit_percent.map(|l| {
        ((f64::from(l) / 100.0 * GAUGE_CELLS as f64).round() as usize).clamp(1, GAUGE_CELLS) - 1
    });
    let bar: String = (0..GAUGE_CELLS)
        .map(|i| match (Some(i) == mark, i < filled) {
            (true, _) => '|',
            (false, true) => '█',
            (false, false) => '·',
        })
        .collect();
    let pct = w
        .utilization
        .map_or_else(|| "  ?%".to_string(), |u| format!("{:>3.0}%", u * 100.0));
    let mut text = format!("[{bar}] {pct}");
    if let Some(l) = w.limit_percent {
        text.push_str(&format!(" of {l}% limit"));
    }
    match w.resets_at {
        Some(t) if t > now => text.push_str(&format!(
            " · resets in {} ({})",
            fmt_duration(t.duration_since(now)),
            fmt_clock(t, now, tz)
        )),
        Some(_) => text.push_str(" · reset"),
        None if w.utilization == Some(0.0) => text.push_str(" · reset"),
        None => {}
    }
    if w.status.as_deref() == Some("rejected") {
        text.push_str(" · rejected");
    }
    let over = w
        .limit_percent
        .is_some_and(|l| used * 100.0 + 1e-9 >= f64::from(l));
    let tone = if over || w.status.as_deref() == Some("rejected") {
        Tone::Bad
    } else if w.status.as_deref() == Some("allowed_warning") || used >= 0.8 {
        Tone::Warn
    } else {
        Tone::Good
    };
    (text, tone)
}

/// The usage-window gauges, one line each (empty when none was reported).
fn window_lines(snap: &Snapshot, now: Timestamp, tz: &TimeZone) -> Vec<(String, String, Tone)> {
    snap.status
        .as_ref()
        .map(|s| {
            crate::store::schema::read_windows(s.raw.get("usage_windows"))
                .into_iter()
                .map(|(name, w)| {
                    let (text, tone) = window_gauge(&w, now, tz);
                    (name, text, tone)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn row_lines(rows: &[Row], width: usize) -> Vec<Line<'static>> {
    rows.iter()
        .map(|r| {
            Line::from(vec![
                Span::styled(format!("{:<width$} ", r.label), Tone::Dim.style()),
                Span::styled(r.value.clone(), r.tone.style()),
            ])
        })
        .collect()
}

/// Draws the dashboard into `frame`.
pub(crate) fn render(frame: &mut Frame, snap: &Snapshot, now: Timestamp, tz: &TimeZone) {
    let area = frame.area();
    let notes_height = u16::try_from(snap.notes.len().clamp(1, 3)).unwrap_or(1);
    let windows = window_lines(snap, now, tz);
    let windows_height = if windows.is_empty() {
        0
    } else {
        u16::try_from(windows.len().min(4) + 2).unwrap_or(0)
    };
    let [header, top, plan, windows_area, bottom, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(11),
        Constraint::Length(3),
        Constraint::Length(windows_height),
        Constraint::Min(4),
        Constraint::Length(notes_height),
    ])
    .areas(area);

    let state = snap.state();
    let state = state.as_deref();
    let title = Line::from(vec![
        Span::styled(
            " hank ",
            Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ),
        Span::raw(" "),
        Span::styled(
            snap.project.clone(),
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw("  "),
        Span::styled(
            state.map_or_else(|| "no status yet".to_string(), str::to_uppercase),
            state.map_or(Tone::Dim, state_tone).style(),
        ),
        Span::styled(format!("  {}", fmt_clock(now, now, tz)), Tone::Dim.style()),
    ]);
    frame.render_widget(Paragraph::new(title), header);

    let [left, right] =
        Layout::horizontal([Constraint::Percentage(58), Constraint::Percentage(42)]).areas(top);
    frame.render_widget(
        Paragraph::new(row_lines(&rows(snap, now, tz), 7))
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" run ")),
        left,
    );
    frame.render_widget(
        Paragraph::new(row_lines(&last_loop_rows(snap), 11))
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" last loop ")),
        right,
    );

    let (ratio, label) = plan_label(snap);
    frame.render_widget(
        Gauge::default()
            .block(Block::bordered().title(" fix plan "))
            .gauge_style(Style::default().fg(Color::Green))
            .ratio(ratio.clamp(0.0, 1.0))
            .label(label),
        plan,
    );
    if !windows.is_empty() {
        let width = windows.iter().map(|w| w.0.len()).max().unwrap_or(0);
        let lines: Vec<Line> = windows
            .iter()
            .map(|(name, text, tone)| {
                Line::from(vec![
                    Span::styled(format!("{name:<width$} "), Tone::Dim.style()),
                    Span::styled(text.clone(), tone.style()),
                ])
            })
            .collect();
        frame.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(" usage windows ")),
            windows_area,
        );
    }

    let [events_area, live_area] =
        Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(bottom);
    let event_lines = snap.events.iter().map(|e| {
        Line::from(vec![
            Span::styled(format!("{} ", event_time(e, tz)), Tone::Dim.style()),
            Span::styled(event_text(e, now, tz), event_tone(e).style()),
        ])
    });
    render_tail(frame, events_area, " events ", event_lines, "no events yet");
    render_live(frame, snap, live_area);

    let footer_lines: Vec<Line> = if snap.notes.is_empty() {
        vec![Line::styled(
            "q / Esc quit · refreshes when .hank/ changes",
            Tone::Dim.style(),
        )]
    } else {
        snap.notes
            .iter()
            .map(|n| Line::styled(n.clone(), Tone::Warn.style()))
            .collect()
    };
    frame.render_widget(Paragraph::new(footer_lines), footer);
}

fn render_live(frame: &mut Frame, snap: &Snapshot, area: Rect) {
    // A fleet's checkout runs no agent: its tasks' output is in their worktrees.
    let hint = if snap.fleet.is_some() {
        "the fleet's tasks: `hank monitor --live` follows each running task's live output"
    } else {
        "no live output (run with --live)"
    };
    let lines = snap.live_tail.iter().map(|l| Line::raw(l.clone()));
    render_tail(frame, area, " live output ", lines, hint);
}

/// A bordered panel titled `title` with the last of `lines` that fit in it, or `empty`
/// (dimmed) when there are none.
fn render_tail<'a>(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    lines: impl ExactSizeIterator<Item = Line<'a>>,
    empty: &'a str,
) {
    let visible = usize::from(area.height.saturating_sub(2));
    let skip = lines.len().saturating_sub(visible);
    let lines: Vec<Line> = lines.skip(skip).collect();
    let widget = if lines.is_empty() {
        Paragraph::new(Line::styled(empty, Tone::Dim.style()))
    } else {
        Paragraph::new(lines)
    };
    frame.render_widget(widget.block(Block::bordered().title(title)), area);
}

/// Live output lines included in the plain-text snapshot.
pub(crate) const TEXT_LIVE_LINES: usize = 10;
/// Events included in the plain-text snapshot.
pub(crate) const TEXT_EVENTS: usize = 10;

/// The plain-text snapshot of `hank monitor --once`: a title with the state, the fleet, the
/// run's status as `hank status` prints it ([`super::status_text`], indented), the fix plan
/// and the usage-window gauges, the newest events and live output, the notes.
#[must_use]
pub(crate) fn render_text(snap: &Snapshot, now: Timestamp, tz: &TimeZone) -> String {
    let state = snap.state().map_or_else(
        || "no status yet".to_string(),
        |s| {
            let mut head = s.to_uppercase();
            if let Some(n) = snap
                .status
                .as_ref()
                .and_then(|st| st.get("loop_count", |s| s.loop_count))
            {
                head.push_str(&format!(" · loop {n}"));
            }
            head
        },
    );
    let mut out = format!(
        "hank monitor · {} · {} · {}\n",
        crate::sanitize::line(&snap.project),
        crate::sanitize::line(&state),
        fmt_clock(now, now, tz)
    );
    let fleet = fleet_rows(snap);
    if !fleet.is_empty() {
        out.push_str("fleet\n");
        for r in &fleet {
            out.push_str(&format!("  {:<12} {}\n", r.label, r.value));
        }
    }
    out.push_str("run\n");
    match &snap.status {
        Some(st) => {
            let view = super::status_text::View {
                stale: snap.stale,
                events: &snap.events,
                now,
                tz,
            };
            for line in super::status_text::lines(st, &view) {
                out.push_str(&format!("  {line}\n"));
            }
        }
        None if fleet.is_empty() => {
            for r in rows(snap, now, tz) {
                out.push_str(&format!("  {:<14}{}\n", format!("{}:", r.label), r.value));
            }
        }
        None => {}
    }
    // The plan file as it is now (status.json's `fix_plan:` is as of the last loop).
    out.push_str(&format!("  {:<14}{}\n", "plan file:", plan_label(snap).1));
    let windows = window_lines(snap, now, tz);
    if !windows.is_empty() {
        out.push_str("usage windows\n");
        for (name, text, _) in &windows {
            out.push_str(&format!("  {name:<12} {text}\n"));
        }
    }
    out.push_str("events\n");
    if snap.events.is_empty() {
        out.push_str("  no events yet\n");
    }
    let skip = snap.events.len().saturating_sub(TEXT_EVENTS);
    for e in snap.events.iter().skip(skip) {
        out.push_str(&format!(
            "  {} {}\n",
            event_time(e, tz),
            event_text(e, now, tz)
        ));
    }
    if !snap.live_tail.is_empty() {
        out.push_str("live output\n");
        let skip = snap.live_tail.len().saturating_sub(TEXT_LIVE_LINES);
        for l in snap.live_tail.iter().skip(skip) {
            out.push_str(&format!("  {l}\n"));
        }
    }
    for n in &snap.notes {
        out.push_str(&format!("note: {}\n", crate::sanitize::line(n)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::snapshot::Sources;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    const NOW: &str = "2026-11-22T10:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    /// The snapshot tests' full status as the events below left it (loop 3 finished five
    /// seconds ago), with `overrides` (a JSON object) put over it.
    fn status(overrides: &str) -> String {
        let mut status: serde_json::Value =
            serde_json::from_str(crate::monitor::snapshot::tests::FULL_STATUS).unwrap();
        let after_loop_3 = r#"{
          "updated_at": "2026-11-22T09:59:55Z", "circuit_reason": "progress in loop 3",
          "total_tokens": {"input": 1200, "output": 340, "cache_read": 56000, "cache_creation": 780},
          "last_loop": {"number": 3, "outcome": "success", "exit_signal": false,
                        "status": "IN_PROGRESS", "work_type": "IMPLEMENTATION", "files_changed": 2,
                        "recommendation": "implement the parser next", "cost_usd": 0.11,
                        "duration_ms": 61000}
        }"#;
        for patch in [after_loop_3, overrides] {
            let patch: serde_json::Value = serde_json::from_str(patch).unwrap();
            for (k, v) in patch.as_object().unwrap() {
                status[k] = v.clone();
            }
        }
        status.to_string()
    }

    const EVENTS: &str = r#"{"schema_version":1,"type":"loop_started","at":"2026-11-22T09:40:00Z","loop":1}
{"schema_version":1,"type":"exit","at":"2026-11-22T09:41:00Z","exit_reason":"interrupted","exit_code":130,"message":"old run"}
{"schema_version":1,"type":"loop_started","at":"2026-11-22T09:45:00Z","loop":1}
{"schema_version":1,"type":"agent_finished","at":"2026-11-22T09:48:00Z","loop":1,"outcome":"success","error_kind":null,"exit_signal":false,"status":"IN_PROGRESS","work_type":"IMPLEMENTATION","files_changed":3,"cost_usd":0.15,"duration_ms":180000,"recommendation":"write tests"}
{"schema_version":1,"type":"loop_started","at":"2026-11-22T09:48:01Z","loop":2}
{"schema_version":1,"type":"agent_finished","at":"2026-11-22T09:50:00Z","loop":2,"outcome":"agent_error","error_kind":"overloaded","exit_signal":false,"status":null,"work_type":null,"files_changed":0,"cost_usd":0.0,"duration_ms":2000,"recommendation":null}
{"schema_version":1,"type":"waiting","at":"2026-11-22T09:50:01Z","reason":"backoff","until":"2026-11-22T09:50:31Z"}
{"schema_version":1,"type":"circuit_changed","at":"2026-11-22T09:50:01Z","from":"CLOSED","to":"HALF_OPEN","reason":"2 loops without progress"}
{"schema_version":1,"type":"loop_started","at":"2026-11-22T09:51:00Z","loop":3}
{"schema_version":1,"type":"agent_finished","at":"2026-11-22T09:52:01Z","loop":3,"outcome":"success","error_kind":null,"exit_signal":false,"status":"IN_PROGRESS","work_type":"IMPLEMENTATION","files_changed":2,"cost_usd":0.11,"duration_ms":61000,"recommendation":"implement the parser next"}
{"schema_version":1,"type":"circuit_changed","at":"2026-11-22T09:52:01Z","from":"HALF_OPEN","to":"CLOSED","reason":"progress in loop 3"}
{"schema_version":1,"type":"warning","at":"2026-11-22T09:52:02Z","message":"Bash(npm install) was denied"}
{"schema_version":1,"type":"loop_started","at":"2026-11-22T09:52:03Z","loop":4}
"#;

    const LIVE: &str = "\u{1b}[1mReading src/parser.rs\u{1b}[0m\nEditing src/parser.rs\n\tRunning cargo test\ntest result: ok. 12 passed\n";
    const PLAN: &str = "## Tasks\n- [x] one\n- [x] two\n- [x] three\n- [ ] four\n- [ ] five\n## Optional\n- [ ] six\n- [ ] seven\n";

    fn snap(status: Option<String>, events: &str, live: &str, plan: Option<&str>) -> Snapshot {
        Snapshot::from_sources(&Sources {
            project: "my-project".into(),
            hank_dir: true,
            status,
            events_tail: Some(events.into()),
            live_tail: Some(live.into()),
            state: None,
            fix_plan: plan.map(str::to_string),
            fleet: None,
        })
    }

    fn draw(s: &Snapshot) -> String {
        let mut terminal = Terminal::new(TestBackend::new(100, 34)).unwrap();
        terminal
            .draw(|f| render(f, s, now(), &TimeZone::UTC))
            .unwrap();
        terminal.backend().to_string()
    }

    fn scenarios() -> Vec<(&'static str, Snapshot)> {
        let finished_events = format!(
            "{EVENTS}{}\n",
            r#"{"schema_version":1,"type":"exit","at":"2026-11-22T09:58:00Z","exit_reason":"plan_complete","exit_code":0,"message":"all fix_plan items are done"}"#
        );
        let open_events = format!(
            "{EVENTS}{}\n{}\n",
            r#"{"schema_version":1,"type":"circuit_changed","at":"2026-11-22T09:57:00Z","from":"HALF_OPEN","to":"OPEN","reason":"no progress in 3 loops"}"#,
            r#"{"schema_version":1,"type":"exit","at":"2026-11-22T09:57:01Z","exit_reason":"circuit_open","exit_code":2,"message":"circuit breaker opened: no progress in 3 loops"}"#
        );
        vec![
            (
                "running",
                snap(Some(status("{}")), EVENTS, LIVE, Some(PLAN)),
            ),
            (
                "waiting_rate_limit",
                snap(
                    Some(status(
                        r#"{"state":"waiting","calls_in_window":100,"wait_reason":"rate_limit",
                            "waiting_until":"2026-11-22T10:12:03Z","next_call_at":"2026-11-22T10:12:03Z"}"#,
                    )),
                    EVENTS,
                    "",
                    Some(PLAN),
                ),
            ),
            (
                "waiting_usage_limit",
                snap(
                    Some(status(
                        r#"{"state":"waiting","wait_reason":"usage_limit",
                            "waiting_until":"2026-11-22T14:01:00Z",
                            "last_loop":{"number":4,"outcome":"agent_error","error_kind":"usage_limit",
                                         "exit_signal":false,"files_changed":0,"cost_usd":0.0,"duration_ms":3000}}"#,
                    )),
                    EVENTS,
                    "You've hit your limit · resets 2pm (UTC)\n",
                    Some(PLAN),
                ),
            ),
            (
                "waiting_usage_window",
                snap(
                    Some(status(
                        r#"{"schema_version":2,"state":"waiting","wait_reason":"usage_window",
                            "waiting_until":"2026-11-22T12:01:00Z",
                            "usage_windows":{
                              "five_hour":{"utilization":0.86,"resets_at":"2026-11-22T12:00:00Z","status":"allowed_warning","limit_percent":80},
                              "seven_day":{"utilization":0.41,"resets_at":"2026-11-26T09:00:00Z","status":"allowed","limit_percent":90},
                              "seven_day_opus":{"utilization":1.07,"resets_at":"2026-11-24T09:00:00Z","status":"rejected"}}}"#,
                    )),
                    EVENTS,
                    "",
                    Some(PLAN),
                ),
            ),
            (
                "circuit_open",
                snap(
                    Some(status(
                        r#"{"state":"halted","updated_at":"2026-11-22T09:57:01Z","circuit_state":"OPEN",
                            "circuit_reason":"no progress in 3 loops","exit_reason":"circuit_open","exit_code":2}"#,
                    )),
                    &open_events,
                    LIVE,
                    Some(PLAN),
                ),
            ),
            (
                "completed",
                snap(
                    Some(status(
                        r#"{"state":"completed","updated_at":"2026-11-22T09:58:00Z","fix_plan":{"done":7,"total":7},
                            "exit_reason":"plan_complete","exit_code":0}"#,
                    )),
                    &finished_events,
                    LIVE,
                    None,
                ),
            ),
            (
                "missing_files",
                Snapshot::from_sources(&Sources {
                    project: "my-project".into(),
                    hank_dir: true,
                    ..Sources::default()
                }),
            ),
            (
                "corrupt_files",
                Snapshot::from_sources(&Sources {
                    project: "my-project".into(),
                    hank_dir: true,
                    status: Some(r#"{"schema_version":1,"state":"runn"#.into()),
                    events_tail: Some("garbage\n{\"type\":\n".into()),
                    live_tail: Some("\u{1b}[2J\u{1b}[Hcleared?\n".into()),
                    state: Some("not json".into()),
                    fix_plan: Some("no checkboxes here\n".into()),
                    fleet: None,
                }),
            ),
            (
                "newer_schema",
                snap(
                    Some(
                        r#"{"schema_version":3,"state":"running","loop_count":9,"brand_new":true}"#
                            .into(),
                    ),
                    "",
                    "",
                    None,
                ),
            ),
            (
                "not_a_project",
                Snapshot::from_sources(&Sources {
                    project: "elsewhere".into(),
                    ..Sources::default()
                }),
            ),
        ]
    }

    #[test]
    fn dashboard_snapshots() {
        for (name, s) in scenarios() {
            insta::assert_snapshot!(format!("tui_{name}"), draw(&s));
        }
    }

    #[test]
    fn text_snapshots() {
        for (name, s) in scenarios() {
            insta::assert_snapshot!(
                format!("text_{name}"),
                render_text(&s, now(), &TimeZone::UTC)
            );
        }
    }

    #[test]
    fn tiny_and_huge_terminals_do_not_panic() {
        for (_, s) in scenarios() {
            for (w, h) in [(1, 1), (10, 3), (40, 12), (300, 90)] {
                let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
                terminal
                    .draw(|f| render(f, &s, now(), &TimeZone::UTC))
                    .unwrap();
            }
        }
    }

    #[test]
    fn a_fleet_task_made_from_an_issue_shows_its_link() {
        use crate::store::schema::{FleetFile, FleetTask};
        let mut s = snap(None, "", "", None);
        s.fleet = Some(FleetFile {
            tasks: vec![{
                let mut t = FleetTask::in_state("#3 Fix", crate::policy::fleet::TaskState::Pending);
                t.branch = "hank/issue-3-fix".into();
                t.issue = Some(crate::policy::fleet::IssueRef {
                    number: 3.into(),
                    url: "https://x/o/r/issues/3".into(),
                });
                t
            }],
            ..FleetFile::default()
        });
        let rows = fleet_rows(&s);
        assert!(
            rows.iter().any(|r| r
                .value
                .contains("hank/issue-3-fix · issue #3 https://x/o/r/issues/3")),
            "{:?}",
            rows.iter().map(|r| &r.value).collect::<Vec<_>>()
        );
    }

    #[test]
    fn durations_format_compactly() {
        let cases = [
            (0, "0s"),
            (-5, "0s"),
            (45, "45s"),
            (123, "2m 03s"),
            (3723, "1h 02m"),
            (2 * 86_400 + 3 * 3600 + 5, "2d 03h"),
        ];
        for (secs, want) in cases {
            assert_eq!(fmt_duration(SignedDuration::from_secs(secs)), want);
        }
        let counts = [
            (0, "0"),
            (999, "999"),
            (1000, "1.0k"),
            (56_780, "56.8k"),
            (3_400_000, "3.4M"),
        ];
        for (n, want) in counts {
            assert_eq!(fmt_count(n), want);
        }
    }

    #[test]
    fn clock_shows_the_date_only_on_another_day() {
        let tz = TimeZone::get("Europe/Oslo").unwrap();
        let same = "2026-11-22T13:05:09Z".parse().unwrap();
        assert_eq!(fmt_clock(same, now(), &tz), "14:05:09 CET");
        let next = "2026-11-23T13:05:09Z".parse().unwrap();
        assert_eq!(fmt_clock(next, now(), &tz), "Nov 23 14:05 CET");
    }

    #[test]
    fn wait_rows_count_down() {
        let cases = [
            (
                r#"{"state":"waiting","wait_reason":"backoff","waiting_until":"2026-11-22T10:00:45Z"}"#,
                "backoff after a failed call · 45s left (until 10:00:45 UTC)",
            ),
            (
                r#"{"state":"waiting","wait_reason":"token_limit","waiting_until":"2026-11-22T09:59:00Z"}"#,
                "token budget reached · due now (until 09:59:00 UTC)",
            ),
            (
                r#"{"state":"waiting","wait_reason":"usage_limit","waiting_until":"2026-11-22T11:00:00Z"}"#,
                "usage limit · resets 11:00:00 UTC · 1h 00m left",
            ),
            (r#"{"state":"waiting","wait_reason":null}"#, "unknown"),
            (r#"{"state":"running"}"#, "—"),
        ];
        for (patch, want) in cases {
            let s = snap(Some(status(patch)), "", "", None);
            let rows = rows(&s, now(), &TimeZone::UTC);
            let wait = rows.iter().find(|r| r.label == "wait").unwrap();
            assert_eq!(wait.value, want, "{patch}");
        }
    }
}
