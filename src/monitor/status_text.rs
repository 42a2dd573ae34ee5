//! The one text rendering of a run's status: `hank status` prints it, `hank monitor --once`
//! prints it as its `run` section (with the fleet, fix plan, usage-window gauges, events and
//! live output around it). A pure function of `status.json` (read with the schema's
//! [`Lenient`] reader), the tail of `events.jsonl`, whether the status is stale, `now` and the
//! display time zone. No clock, no I/O.
//!
//! The layout is one `label:` column of 14 characters and one line per fact; the labels are
//! stable (scripts grep them: `state:`, `calls:`, `waiting:`, `circuit:`, `cost:`, `windows:`,
//! `verify:`, `last loop:`, `delivery:`, `updated:` …).

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::view::{fmt_clock, fmt_count, fmt_duration};
use crate::store::Status;
use crate::store::schema::{EventLine, Lenient};

/// What the event log says in words about the end of the run and the last error.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LastWords {
    /// The `exit` event's message.
    pub exit_message: Option<String>,
    /// The last failed loop's error kind and message.
    pub last_error: Option<String>,
}

/// Reads [`LastWords`] from the newest events (oldest first, as read).
#[must_use]
pub(crate) fn last_words(events: &[EventLine]) -> LastWords {
    let mut words = LastWords::default();
    for e in events.iter().rev() {
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

/// A time as `Mon 14:00 CET (13:00 UTC)` in `tz`.
fn at(t: Timestamp, tz: &TimeZone) -> String {
    let local = t.to_zoned(tz.clone()).strftime("%a %H:%M %Z").to_string();
    let utc = t.to_zoned(TimeZone::UTC).strftime("%H:%M UTC").to_string();
    format!("{local} ({utc})")
}

/// What the renderer needs besides `status.json`.
pub(crate) struct View<'a> {
    /// The status says a loop is active but none holds the project's lock.
    pub stale: bool,
    /// The newest lines of `events.jsonl`, oldest first.
    pub events: &'a [EventLine],
    pub now: Timestamp,
    pub tz: &'a TimeZone,
}

/// The status as lines (without line ends), each one clean line: every value may quote the
/// agent (recommendation, reasons, session, messages).
#[must_use]
pub(crate) fn lines(st: &Lenient<Status>, view: &View<'_>) -> Vec<String> {
    let (now, tz) = (view.now, view.tz);
    let v = &st.value;
    let mut lines = Vec::new();
    let state = if view.stale {
        super::snapshot::stale_note_in(Some(v.updated_at).filter(|_| st.has("updated_at")), tz)
    } else {
        // A state a newer hank writes is shown as written.
        let state = st
            .text("state", |s| s.state)
            .unwrap_or_else(|| "unknown".into());
        let exit = st
            .text("exit_reason", |s| s.exit_reason)
            .map(|r| format!(" ({r}, exit {})", v.exit_code.unwrap_or(0)))
            .unwrap_or_default();
        format!("{state}{exit}")
    };
    lines.push(format!("state:        {state}"));
    let words = last_words(view.events);
    if st.text("exit_reason", |s| s.exit_reason).is_some()
        && let Some(msg) = &words.exit_message
    {
        lines.push(format!("why:          {msg}"));
    }
    if let Some(err) = &words.last_error {
        lines.push(format!("last error:   {err}"));
    }
    lines.push(format!("loop:         {}", v.loop_count));
    if let Some(time) = run_time(st, view) {
        lines.push(format!("time:         {time}"));
    }
    let calls = if st.has("calls_in_window") {
        calls(v, now, tz)
    } else {
        "—".to_string()
    };
    lines.push(format!("calls:        {calls}"));
    if st.has("tokens_in_window") {
        let cap = if v.max_tokens_per_hour > 0 {
            format!(" / {} this hour", v.max_tokens_per_hour)
        } else {
            " this hour (no cap)".to_string()
        };
        lines.push(format!("tokens:       {}{cap}", v.tokens_in_window));
    }
    if !view.stale
        && let Some(reason) = v.wait_reason
    {
        lines.push(format!(
            "waiting:      {}",
            wait_text(reason.as_str(), v.waiting_until, now, tz)
        ));
    }
    // Inside a call: the client retrying a failed API call (an overloaded API) is a wait.
    if !view.stale
        && let Some(r) = &v.api_retry
    {
        lines.push(format!(
            "waiting:      {} (since {})",
            r.words(|t| fmt_clock(t, now, tz)),
            fmt_clock(r.since, now, tz)
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
    let cost = if st.has("total_cost_usd") {
        cost(st)
    } else {
        "—".to_string()
    };
    lines.push(format!("cost:         {cost}"));
    for (i, (name, w)) in v.usage_windows.iter().enumerate() {
        let label = if i == 0 { "windows:" } else { "" };
        lines.push(format!("{label:<14}{}", window_line(name, w, tz)));
    }
    if let Some(agent) = &v.agent {
        lines.push(format!("agent:        {agent}"));
    }
    if let Some(sandbox) = &v.sandbox {
        lines.push(format!("sandbox:      {}", crate::sanitize::line(sandbox)));
    }
    let host = |d: &str| d.split(" at ").next().unwrap_or(d).to_owned();
    for (i, denied) in v.egress_denied.iter().enumerate() {
        // Each host once, at its latest refusal (an older writer listed every one).
        let later = v.egress_denied.get(i + 1..).unwrap_or_default();
        if later.iter().any(|d| host(d) == host(denied)) {
            continue;
        }
        lines.push(format!("  refused:    {}", crate::sanitize::line(denied)));
    }
    for path in &v.sandbox_denied {
        lines.push(format!(
            "  refused:    file {} (allow it with SANDBOX_WRITE, or SANDBOX_READ to read)",
            crate::sanitize::line(path)
        ));
    }
    for (name, l) in &v.agents_limited {
        lines.push(format!(
            "  limited:    {name}: {}{} — {}",
            l.kind,
            l.until
                .map(|t| format!(" until {}", at(t, tz)))
                .unwrap_or_else(|| " for the rest of the run".into()),
            l.message
        ));
    }
    if let Some(id) = &v.session_id {
        lines.push(format!("session:      {id}"));
    }
    if let Some(last) = &v.last_loop {
        lines.push(format!(
            "last loop:    #{} {} · status {} · {} · {} file(s) · EXIT_SIGNAL {} · ${:.4} · {}",
            last.number,
            json_str(&last.outcome),
            last.status.as_deref().unwrap_or("null"),
            last.work_type.as_deref().unwrap_or("null"),
            last.files_changed,
            last.exit_signal,
            last.cost_usd,
            fmt_duration(jiff::SignedDuration::from_millis(
                i64::try_from(last.duration_ms).unwrap_or(i64::MAX)
            ))
        ));
        if let Some(rec) = last.recommendation.as_deref().filter(|r| !r.is_empty()) {
            lines.push(format!("next:         {rec}"));
        }
    }
    if let Some(ver) = &v.verification {
        lines.extend(verification_lines(ver, tz));
    }
    if let Some(r) = &v.review {
        lines.push(format!(
            "review:       {}",
            crate::sanitize::line(&r.line())
        ));
        for f in r.findings.iter().take(5) {
            let line = crate::policy::review::finding_line(f);
            lines.push(format!("  finding:    {}", crate::sanitize::line(&line)));
        }
    }
    if let Some(d) = &v.delivery {
        lines.push(format!(
            "delivery:     {} on {} ({}) → {}, checks {}{}",
            d.mode,
            d.branch,
            d.head
                .as_deref()
                .map_or("not pushed", |h| h.get(..12).unwrap_or(h)),
            d.pr_url.as_deref().unwrap_or("no pull request"),
            d.checks,
            d.exit_reason
                .map_or_else(String::new, |r| format!(" ({r})"))
        ));
        if let (true, Some(due), Some(pending)) =
            (d.checks == "pending", d.checks_due, d.checks_pending)
        {
            let left = u64::try_from(due.duration_since(now).as_secs().max(0)).unwrap_or(0);
            let what = match pending {
                0 => "no check has appeared yet".to_string(),
                1 => "1 check pending".to_string(),
                n => format!("{n} checks pending"),
            };
            lines.push(format!(
                "waiting:      for CI until {} ({} left): {what}",
                fmt_clock(due, now, tz),
                crate::policy::time::format_secs(left)
            ));
        }
    }
    if st.has("updated_at") {
        lines.push(format!(
            "updated:      {} ({} ago)",
            v.updated_at,
            fmt_duration(now.duration_since(v.updated_at))
        ));
    } else {
        lines.push("updated:      ".to_string());
    }
    lines.iter().map(|l| crate::sanitize::line(l)).collect()
}

/// The lines joined, each ended by a newline (what `hank status` prints).
#[must_use]
pub(crate) fn render(st: &Lenient<Status>, view: &View<'_>) -> String {
    lines(st, view).join("\n") + "\n"
}

/// How long the newest run took (`ran 12m 01s`) or has been going (`12m 01s elapsed`), from
/// its events; the end of a finished run without an `exit` event is the status's last update.
fn run_time(st: &Lenient<Status>, view: &View<'_>) -> Option<String> {
    let (started, ended) = super::snapshot::run_bounds(view.events);
    let start = started?;
    let finished =
        view.stale || !super::snapshot::is_active(st.text("state", |s| s.state).as_deref());
    if finished {
        let end = ended
            .or_else(|| st.get("updated_at", |s| s.updated_at))
            .unwrap_or(view.now);
        Some(format!("ran {}", fmt_duration(end.duration_since(start))))
    } else {
        Some(format!(
            "{} elapsed",
            fmt_duration(view.now.duration_since(start))
        ))
    }
}

/// `4 / 100 this hour · next call in 12m 03s (10:12:03 UTC)`.
fn calls(v: &Status, now: Timestamp, tz: &TimeZone) -> String {
    let mut text = format!("{} / {} this hour", v.calls_in_window, v.max_calls_per_hour);
    if let Some(next) = v.next_call_at.filter(|t| *t > now) {
        text.push_str(&format!(
            " · next call in {} ({})",
            fmt_duration(next.duration_since(now)),
            fmt_clock(next, now, tz)
        ));
    }
    text
}

/// What a wait is for, in words, and how long it has left.
pub(crate) fn wait_label(reason: &str) -> &str {
    match reason {
        "rate_limit" => "call cap reached",
        "token_limit" => "token budget reached",
        "usage_limit" => "usage limit",
        "usage_window" => "usage window at its limit",
        "backoff" => "backoff after a failed call",
        "paused" => "paused (hank ctl resume goes on)",
        other => other,
    }
}

/// `call cap reached (rate_limit) · 12m 03s left (until 10:12:03 UTC)`.
fn wait_text(reason: &str, until: Option<Timestamp>, now: Timestamp, tz: &TimeZone) -> String {
    let label = wait_label(reason);
    let head = if label == reason {
        reason.to_string()
    } else {
        format!("{label} ({reason})")
    };
    match until {
        None => head,
        Some(until) => {
            let left = until.duration_since(now);
            let when = if left.is_positive() {
                format!("{} left", fmt_duration(left))
            } else {
                "due now".to_string()
            };
            format!("{head} · {when} (until {})", fmt_clock(until, now, tz))
        }
    }
}

/// `$0.4200 (of which $0.1000 estimated) · in 1.2k · out 340 · cache 56.8k`.
fn cost(st: &Lenient<Status>) -> String {
    let v = &st.value;
    let mut text = format!("${:.4}", v.total_cost_usd);
    if v.estimated_cost_usd > 0.0 {
        text.push_str(&format!(
            " (of which ${:.4} estimated)",
            v.estimated_cost_usd
        ));
    }
    if st.has("total_tokens") {
        let t = &v.total_tokens;
        text.push_str(&format!(
            " · in {} · out {} · cache {}",
            fmt_count(t.input),
            fmt_count(t.output),
            fmt_count(t.cache_read.saturating_add(t.cache_creation))
        ));
    }
    text
}

/// One usage window: `five_hour 86% (limit 80%) · resets Mon 14:00 CET (13:00 UTC) · allowed_warning`.
fn window_line(name: &str, w: &crate::policy::windows::WindowStatus, tz: &TimeZone) -> String {
    let mut line = format!(
        "{name} {}",
        w.utilization
            .map_or_else(|| "?%".to_string(), |u| format!("{:.0}%", u * 100.0))
    );
    if let Some(l) = w.limit_percent {
        line.push_str(&format!(" (limit {l}%)"));
    }
    match w.resets_at {
        Some(t) => line.push_str(&format!(" · resets {}", at(t, tz))),
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
fn verification_lines(v: &crate::policy::verify::VerificationStatus, tz: &TimeZone) -> Vec<String> {
    let mut lines = vec![format!("verify:       {}", v.command)];
    let describe = |r: &crate::policy::verify::CheckResult| {
        format!(
            "{} ({}) at {} · {} · {}",
            if r.passed { "passed" } else { "FAILED" },
            r.how_it_ended(),
            at(r.at, tz),
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

/// The JSON string of a unit enum value (`Outcome::Success` → `success`).
fn json_str<T: serde::Serialize>(x: &T) -> String {
    serde_json::to_value(x)
        .ok()
        .and_then(|v| v.as_str().map(ToString::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::read_lenient;
    use serde_json::json;

    const NOW: &str = "2026-11-22T10:00:00Z";

    fn render_at(v: &serde_json::Value, stale: bool, events: &str) -> String {
        let st = read_lenient::<Status>(v).unwrap();
        let events = EventLine::parse_all(events);
        render(
            &st,
            &View {
                stale,
                events: &events,
                now: NOW.parse().unwrap(),
                tz: &TimeZone::UTC,
            },
        )
    }

    /// Values a newer hank writes are shown as written.
    #[test]
    fn newer_values_are_shown_as_written() {
        let v = json!({"schema_version": 3, "state": "paused", "exit_reason": "tea_time",
                       "exit_code": 3, "loop_count": 2});
        let text = render_at(&v, false, "");
        assert!(
            text.starts_with("state:        paused (tea_time, exit 3)"),
            "{text}"
        );
        assert!(render_at(&json!({}), false, "").starts_with("state:        unknown\n"));
    }

    /// A stale status says "not running" and no wait, whatever the file said.
    #[test]
    fn a_stale_status_says_not_running() {
        let v = json!({"schema_version": 2, "state": "waiting", "wait_reason": "backoff",
                       "waiting_until": "2026-11-22T10:05:00Z",
                       "updated_at": "2026-11-22T09:00:00Z"});
        let text = render_at(&v, true, "");
        assert!(
            text.starts_with(
                "state:        not running — the loop ended without a final status (last update Sun 09:00 UTC (09:00 UTC))\n"
            ),
            "{text}"
        );
        assert!(!text.contains("waiting:"), "{text}");
        let live = render_at(&v, false, "");
        assert!(
            live.contains(
                "waiting:      backoff after a failed call (backoff) · 5m 00s left (until 10:05:00 UTC)\n"
            ),
            "{live}"
        );
    }

    /// A refused host is listed once, at its latest refusal (an older writer listed each);
    /// a refused file names the settings that allow it.
    #[test]
    fn refusals_are_listed_once_with_their_remedy() {
        let v = json!({"state": "running", "sandbox": "landlock-fs+landlock-net: confined",
                       "egress_denied": ["evil.example:80 at 09:00", "other.example:443 at 09:01",
                                         "evil.example:80 at 09:02"],
                       "sandbox_denied": ["/home/u/x"]});
        let text = render_at(&v, false, "");
        let refused: Vec<&str> = text.lines().filter(|l| l.contains("refused:")).collect();
        assert_eq!(
            refused,
            [
                "  refused:    other.example:443 at 09:01",
                "  refused:    evil.example:80 at 09:02",
                "  refused:    file /home/u/x (allow it with SANDBOX_WRITE, or SANDBOX_READ to read)",
            ],
            "{text}"
        );
    }

    /// Why the run ended and the last error come from the events, after the state line.
    #[test]
    fn last_words_follow_the_state() {
        let v = json!({"state": "halted", "exit_reason": "agent_fatal", "exit_code": 2});
        let events = concat!(
            r#"{"schema_version":1,"type":"loop_started","at":"2026-11-22T09:00:00Z","loop":1}"#,
            "\n",
            r#"{"schema_version":1,"type":"agent_finished","at":"2026-11-22T09:01:00Z","loop":1,"outcome":"agent_error","error_kind":"auth","error_message":"Invalid API key"}"#,
            "\n",
            r#"{"schema_version":1,"type":"exit","at":"2026-11-22T09:01:01Z","exit_reason":"agent_fatal","exit_code":2,"message":"the agent cannot work (auth)"}"#,
            "\n"
        );
        let text = render_at(&v, false, events);
        let head: Vec<&str> = text.lines().take(3).collect();
        assert_eq!(
            head,
            [
                "state:        halted (agent_fatal, exit 2)",
                "why:          the agent cannot work (auth)",
                "last error:   auth — Invalid API key",
            ]
        );
        // A later loop without an error: the error is history.
        let later = format!(
            "{events}{}\n",
            r#"{"schema_version":1,"type":"loop_started","at":"2026-11-22T09:02:00Z","loop":2}"#
        );
        assert_eq!(
            last_words(&EventLine::parse_all(&later)).last_error,
            None,
            "{later}"
        );
    }

    /// Calls, tokens, cost and the last loop, with the countdown to the next free slot.
    #[test]
    fn budget_lines() {
        let v = json!({"state": "waiting", "calls_in_window": 100, "max_calls_per_hour": 100,
            "next_call_at": "2026-11-22T10:12:03Z", "wait_reason": "rate_limit",
            "waiting_until": "2026-11-22T10:12:03Z", "tokens_in_window": 12000,
            "max_tokens_per_hour": 0, "total_cost_usd": 0.42, "estimated_cost_usd": 0.1,
            "total_tokens": {"input": 1200, "output": 340, "cache_read": 56000, "cache_creation": 780},
            "updated_at": "2026-11-22T09:59:55Z",
            "last_loop": {"number": 3, "outcome": "success", "exit_signal": false,
                "status": "IN_PROGRESS", "work_type": "TESTING", "files_changed": 2,
                "recommendation": "fix the flaky test", "cost_usd": 0.11, "duration_ms": 61000}});
        let text = render_at(&v, false, "");
        for want in [
            "calls:        100 / 100 this hour · next call in 12m 03s (10:12:03 UTC)\n",
            "tokens:       12000 this hour (no cap)\n",
            "waiting:      call cap reached (rate_limit) · 12m 03s left (until 10:12:03 UTC)\n",
            "cost:         $0.4200 (of which $0.1000 estimated) · in 1.2k · out 340 · cache 56.8k\n",
            "last loop:    #3 success · status IN_PROGRESS · TESTING · 2 file(s) · EXIT_SIGNAL false · $0.1100 · 1m 01s\n",
            "next:         fix the flaky test\n",
            "updated:      2026-11-22T09:59:55Z (5s ago)\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
    }

    /// The agent's words cannot move the cursor or add lines.
    #[test]
    fn values_are_one_clean_line() {
        let v = json!({"state": "running", "circuit_reason": "a\nstate:        completed\u{1b}[2J",
                       "session_id": "s\r\u{7}"});
        let text = render_at(&v, false, "");
        assert!(!text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{7}'));
        assert_eq!(
            text.lines().filter(|l| l.starts_with("state:")).count(),
            1,
            "{text}"
        );
    }
}
