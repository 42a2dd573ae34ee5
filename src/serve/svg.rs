//! The charts, drawn as SVG text by hank **[pure]**: the loops of a run as bars (height its
//! duration, colour its outcome), a usage window as a gauge, a fleet's tasks as a Gantt
//! chart. Colours come from classes in `app.css` (no inline style: the page's CSP forbids
//! it); every text from a record goes through [`esc`].

use std::fmt::Write as _;

use jiff::Timestamp;

use super::data::{LoopRow, SpanKind, TaskRow};
use super::html::esc;

/// Width of the charts' coordinate system (they scale to the page's width).
const W: f64 = 1000.0;

/// The class of an outcome's colour.
fn outcome_class(outcome: &str) -> &'static str {
    match outcome {
        "success" => "ok",
        "error" | "crashed" | "failed" => "bad",
        "" => "muted",
        _ => "warn",
    }
}

/// The loops as bars: one per loop, its height the call's duration (the longest fills the
/// chart), its colour the outcome; hovering one shows its number, outcome, duration, cost
/// and changed files.
#[must_use]
pub(crate) fn loop_timeline(loops: &[LoopRow]) -> String {
    let h = 160.0;
    let mut s = format!(
        r#"<svg class="chart" id="loop-timeline" viewBox="0 0 {W} {}" role="img" aria-label="loops by duration">"#,
        h + 20.0
    );
    if loops.is_empty() {
        s.push_str(r#"<text x="10" y="30" class="label">no loop yet</text></svg>"#);
        return s;
    }
    let longest = loops
        .iter()
        .map(|l| l.duration_ms)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    // A few loops stay thin bars from the left, as a long run's first loops were.
    let step = W / loops.len().max(40) as f64;
    let bar = (step * 0.8).max(0.5);
    for (i, l) in loops.iter().enumerate() {
        let bh = (l.duration_ms as f64 / longest * h).max(2.0);
        let _ = write!(
            s,
            r#"<rect class="{}" x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}"><title>loop {} · {}{} · {} · ${:.2} · {} file(s)</title></rect>"#,
            outcome_class(&l.outcome),
            i as f64 * step,
            h - bh,
            bar,
            bh,
            l.number,
            esc(&l.outcome),
            l.error_kind
                .as_deref()
                .map(|k| format!(" ({})", esc(k)))
                .unwrap_or_default(),
            duration(l.duration_ms),
            l.cost_usd,
            l.files_changed
        );
    }
    let _ = write!(
        s,
        r#"<text x="0" y="{}" class="label">loop {}</text><text x="{W}" y="{}" class="label end">… loop {} · longest {}</text></svg>"#,
        h + 16.0,
        loops[0].number,
        h + 16.0,
        loops[loops.len() - 1].number,
        duration(longest as u64)
    );
    s
}

/// A usage window as a gauge: the part used (`fraction`, 0–1, above 1 drawn full), the limit
/// set for it (`limit`, a fraction) as a mark; its name, figure and `note` (its reset time)
/// as text above the bar (HTML: readable at a phone's width).
#[must_use]
pub(crate) fn gauge(name: &str, fraction: Option<f64>, limit: Option<f64>, note: &str) -> String {
    let f = fraction.unwrap_or(0.0).clamp(0.0, 1.0);
    let class = match fraction {
        None => "muted",
        Some(x) if x >= 0.9 => "bad",
        Some(x) if x >= 0.7 => "warn",
        Some(_) => "ok",
    };
    let shown = fraction.map_or_else(|| "—".to_owned(), |x| format!("{:.0} %", x * 100.0));
    let mut s = format!(
        r#"<div class="gauge"><div class="gauge-text"><span>{} · {}</span><span class="muted">{}</span></div><svg viewBox="0 0 {W} 20" preserveAspectRatio="none" role="img" aria-label="{} {}"><rect class="track" x="0" y="0" width="{W}" height="20"/><rect class="{class}" x="0" y="0" width="{:.1}" height="20"/>"#,
        esc(name),
        esc(&shown),
        esc(note),
        esc(name),
        esc(&shown),
        f * W
    );
    if let Some(l) = limit {
        let _ = write!(
            s,
            r#"<line class="limit" x1="{x:.1}" y1="0" x2="{x:.1}" y2="20"/>"#,
            x = l.clamp(0.0, 1.0) * W
        );
    }
    s.push_str("</svg></div>");
    s
}

/// The fleet's tasks as a Gantt chart from `start` to `end`: per task a row with its states
/// (a thin band coloured by state) and its calls and waits (blocks over it).
#[must_use]
pub(crate) fn gantt(rows: &[TaskRow], start: Timestamp, end: Timestamp) -> String {
    let row_h = 40.0;
    let label_w = 180.0;
    let h = rows.len() as f64 * row_h + 24.0;
    let span = (end.as_millisecond() - start.as_millisecond()).max(1) as f64;
    let x = |t: Timestamp| {
        label_w + ((t.as_millisecond() - start.as_millisecond()) as f64 / span) * (W - label_w)
    };
    let mut s = format!(
        r#"<svg class="chart" id="fleet-gantt" viewBox="0 0 {W} {h}" role="img" aria-label="tasks over time">"#
    );
    for (i, r) in rows.iter().enumerate() {
        let y = i as f64 * row_h;
        let _ = write!(
            s,
            r#"<text x="0" y="{:.1}" class="label">{}</text>"#,
            y + 24.0,
            esc(&crate::sanitize::cut_chars(&r.task, 24))
        );
        for sp in &r.spans {
            let x0 = x(sp.start);
            let w = (x(sp.end) - x0).max(2.0);
            let (class, top, height, what) = match &sp.kind {
                SpanKind::State(st) => {
                    (format!("state-{}", css_word(st)), y + 30.0, 6.0, st.clone())
                }
                SpanKind::Call => ("call".to_owned(), y + 8.0, 18.0, "call".to_owned()),
                SpanKind::Wait(why) => ("wait".to_owned(), y + 8.0, 18.0, format!("wait: {why}")),
            };
            let _ = write!(
                s,
                r#"<rect class="{class}" x="{x0:.1}" y="{top:.1}" width="{w:.1}" height="{height:.1}"><title>{} · {} · {}</title></rect>"#,
                esc(&r.task),
                esc(&what),
                duration(
                    u64::try_from(sp.end.as_millisecond() - sp.start.as_millisecond()).unwrap_or(0)
                )
            );
        }
    }
    let _ = write!(
        s,
        r#"<text x="{label_w}" y="{:.1}" class="label">{}</text><text x="{W}" y="{:.1}" class="label end">{}</text></svg>"#,
        h - 4.0,
        esc(&start.strftime("%H:%M:%S UTC").to_string()),
        h - 4.0,
        esc(&end.strftime("%H:%M:%S UTC").to_string())
    );
    s
}

/// A state's name as a class name (letters and `_` only).
fn css_word(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// A duration in ms as people read it: `850 ms`, `42 s`, `3 min 05 s`, `2 h 10 min`.
#[must_use]
pub(crate) fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        _ if ms < 1000 => format!("{ms} ms"),
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        3600..86_400 => format!("{} h {:02} min", s / 3600, (s % 3600) / 60),
        _ => format!("{} d {:02} h", s / 86_400, (s % 86_400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::data::Span;

    #[test]
    fn durations_read_as_people_say_them() {
        let table = [
            (850, "850 ms"),
            (42_000, "42 s"),
            (185_000, "3 min 05 s"),
            (7_800_000, "2 h 10 min"),
            (3 * 86_400_000 + 7_200_000, "3 d 02 h"),
        ];
        for (ms, want) in table {
            assert_eq!(duration(ms), want);
        }
    }

    #[test]
    fn the_timeline_draws_a_bar_per_loop_and_escapes_its_text() {
        let loops = vec![
            LoopRow {
                number: 1,
                duration_ms: 1000,
                outcome: "success".into(),
                ..LoopRow::default()
            },
            LoopRow {
                number: 2,
                duration_ms: 4000,
                outcome: "<script>x</script>".into(),
                ..LoopRow::default()
            },
        ];
        let svg = loop_timeline(&loops);
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(
            svg.contains(r#"height="160.00""#),
            "the longest fills: {svg}"
        );
        assert!(svg.contains("&lt;script&gt;x&lt;/script&gt;"));
        assert!(!svg.contains("<script>"));
        assert!(loop_timeline(&[]).contains("no loop yet"));
    }

    #[test]
    fn a_gauge_is_full_at_its_fraction_and_marks_its_limit() {
        let g = gauge("five_hour", Some(0.5), Some(0.8), "resets 12:00");
        assert!(g.contains(r#"class="ok" x="0" y="0" width="500.0""#), "{g}");
        assert!(g.contains(r#"x1="800.0""#));
        assert!(g.contains("five_hour · 50 %") && g.contains("resets 12:00"));
        let over = gauge("seven_day", Some(1.7), None, "");
        assert!(over.contains(r#"class="bad" x="0" y="0" width="1000.0""#));
        assert!(gauge("x", None, None, "").contains("—"));
    }

    #[test]
    fn the_gantt_places_spans_on_the_time_axis() {
        let t = |s: &str| -> Timestamp { s.parse().unwrap() };
        let rows = vec![TaskRow {
            task: "a<b".into(),
            spans: vec![
                Span {
                    kind: SpanKind::State("running".into()),
                    start: t("2026-12-07T10:00:00Z"),
                    end: t("2026-12-07T10:10:00Z"),
                },
                Span {
                    kind: SpanKind::Call,
                    start: t("2026-12-07T10:05:00Z"),
                    end: t("2026-12-07T10:10:00Z"),
                },
            ],
        }];
        let g = gantt(&rows, t("2026-12-07T10:00:00Z"), t("2026-12-07T10:10:00Z"));
        assert!(g.contains(r#"class="state-running" x="180.0""#), "{g}");
        assert!(
            g.contains(r#"class="call" x="590.0" y="8.0" width="410.0""#),
            "{g}"
        );
        assert!(g.contains("a&lt;b"));
    }
}
