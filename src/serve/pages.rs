//! The pages as HTML text **[pure]**: each is a function of the data read in
//! [`super::data`] and `now`. Every text a record holds (the agent's log lines, findings,
//! messages, task and branch names, paths) goes through [`esc`]; the only markup is hank's.

use std::fmt::Write as _;

use jiff::Timestamp;

use super::data::{FleetData, LoopRow, Overview, RunData};
use super::html::{esc, page};
use super::svg;

/// Rows of the loop table (the newest; the chart shows every loop).
pub(crate) const TABLE_LOOPS: usize = 200;

/// A time as `HH:MM:SS UTC` with how long ago (or how far ahead) it is from `now`.
fn when(t: Timestamp, now: Timestamp) -> String {
    let ms = now.as_millisecond() - t.as_millisecond();
    let rel = svg::duration(ms.unsigned_abs());
    let day = if ms.unsigned_abs() >= 86_400_000 {
        t.strftime("%Y-%m-%d %H:%M UTC").to_string()
    } else {
        t.strftime("%H:%M:%S UTC").to_string()
    };
    if ms >= 0 {
        format!("{day} ({rel} ago)")
    } else {
        format!("{day} (in {rel})")
    }
}

fn state_span(state: Option<&str>) -> String {
    let s = state.unwrap_or("no run yet");
    let class: String = s.chars().filter(char::is_ascii_alphanumeric).collect();
    format!(r#"<span class="state {}">{}</span>"#, class, esc(s))
}

fn nav(key: Option<&str>) -> String {
    let mut s = String::from(r#"<nav><a href="/projects">all projects</a>"#);
    if let Some(k) = key {
        let k = esc(k);
        let _ = write!(
            s,
            r#"<a href="/p/{k}">run</a><a href="/p/{k}/fleet">fleet</a><a href="/p/{k}/log">log</a>"#
        );
    }
    s.push_str("</nav>");
    s
}

/// What the list says of a project's run: running, waiting (why, until when), or how it
/// ended.
fn run_line(o: &Overview, now: Timestamp) -> String {
    let mut s = state_span(o.state.as_deref());
    if let Some(r) = &o.wait_reason {
        let _ = write!(s, " · {}", esc(r));
        if let Some(u) = o.waiting_until {
            let _ = write!(s, " until {}", esc(&when(u, now)));
        }
    }
    if let Some(r) = &o.exit_reason {
        let _ = write!(s, " · exit: {}", esc(r));
    }
    s
}

/// All projects.
#[must_use]
pub(crate) fn projects(list: &[Overview], now: Timestamp) -> String {
    let mut m = String::from(r#"<main><h1>Projects</h1>"#);
    if list.is_empty() {
        m.push_str(
            r#"<p class="muted">No project yet: run <code>hank</code> in a project and it shows here.</p>"#,
        );
    }
    m.push_str(r#"<div class="cards">"#);
    for o in list {
        let k = esc(&o.key);
        let _ = write!(
            m,
            r#"<section class="project" id="project-{k}"><h2><a href="/p/{k}">{}</a></h2><div class="muted">{}</div><div>{}</div><dl><dt>loops</dt><dd>{}</dd><dt>cost</dt><dd>${:.2}</dd>"#,
            esc(&o.name),
            esc(&o.path),
            run_line(o, now),
            o.loops,
            o.cost_usd
        );
        if let Some(u) = o.updated_at {
            let _ = write!(m, "<dt>updated</dt><dd>{}</dd>", esc(&when(u, now)));
        }
        if let Some(f) = &o.fleet_state {
            let _ = write!(
                m,
                r#"<dt>fleet</dt><dd><a href="/p/{k}/fleet">{}</a></dd>"#,
                state_span(Some(f))
            );
        }
        m.push_str("</dl>");
        if let Some(msg) = &o.exit_message {
            let _ = write!(m, r#"<div class="muted">{}</div>"#, esc(msg));
        }
        m.push_str("</section>");
    }
    m.push_str("</div></main>");
    page("projects", &nav(None), "*", &m)
}

fn loop_table(loops: &[LoopRow], now: Timestamp) -> String {
    let mut s = String::from(
        r#"<div class="scroll"><table id="loops"><thead><tr><th>loop</th><th>started</th><th>took</th><th>outcome</th><th>cost</th><th>files</th><th>items ticked</th></tr></thead><tbody>"#,
    );
    let skip = loops.len().saturating_sub(TABLE_LOOPS);
    for l in loops.iter().skip(skip).rev() {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td>${:.2}</td><td>{}</td><td>{}</td></tr>",
            l.number,
            l.started_at.map(|t| esc(&when(t, now))).unwrap_or_default(),
            svg::duration(l.duration_ms),
            esc(&l.outcome),
            l.error_kind
                .as_deref()
                .map(|k| format!(" ({})", esc(k)))
                .unwrap_or_default(),
            l.cost_usd,
            l.files_changed,
            esc(&l.items.join("; "))
        );
    }
    s.push_str("</tbody></table></div>");
    if skip > 0 {
        let _ = write!(
            s,
            r#"<p class="muted">the newest {TABLE_LOOPS} of {} loops (the chart shows all)</p>"#,
            loops.len()
        );
    }
    s
}

/// The page of a pull request's checks: GitHub's `…/pull/N/checks`, GitLab's
/// `…/merge_requests/N/pipelines`; none for another address (only `https://` is linked).
fn checks_url(pr: &str) -> Option<String> {
    if !pr.starts_with("https://") {
        return None;
    }
    let pr = pr.trim_end_matches('/');
    if pr.contains("/pull/") {
        Some(format!("{pr}/checks"))
    } else if pr.contains("/merge_requests/") {
        Some(format!("{pr}/pipelines"))
    } else {
        None
    }
}

/// One run: state, timeline of its loops, the breaker, the usage windows, the reviewer's
/// rounds, the delivery's steps.
#[must_use]
pub(crate) fn run(d: &RunData, now: Timestamp) -> String {
    let o = &d.overview;
    let status = d.snap.status.as_ref();
    let mut m = format!(
        r#"<main><h1>{}</h1><div class="muted">{}</div><section id="run-state"><div>{}</div>"#,
        esc(&o.name),
        esc(&o.path),
        run_line(o, now)
    );
    for n in &o.notes {
        let _ = write!(m, r#"<div class="muted">{}</div>"#, esc(n));
    }
    let _ = write!(
        m,
        "<dl><dt>loops</dt><dd>{}</dd><dt>cost</dt><dd>${:.2}</dd>",
        o.loops, o.cost_usd
    );
    if let Some(p) = d.snap.fix_plan {
        let _ = write!(
            m,
            "<dt>plan</dt><dd>{} of {} items done</dd>",
            p.done, p.total
        );
    }
    if let Some(a) = status
        .and_then(|s| s.get("agent", |s| s.agent.clone()))
        .flatten()
    {
        let _ = write!(m, "<dt>agent</dt><dd>{}</dd>", esc(&a));
    }
    if let Some(u) = o.updated_at {
        let _ = write!(m, "<dt>updated</dt><dd>{}</dd>", esc(&when(u, now)));
    }
    m.push_str("</dl>");
    if let Some(msg) = &o.exit_message {
        let _ = write!(m, "<div>{}</div>", esc(msg));
    }
    m.push_str("</section>");

    let _ = write!(
        m,
        r#"<h2>Loops</h2><section id="timeline">{}{}</section>"#,
        svg::loop_timeline(&d.loops),
        loop_table(&d.loops, now)
    );

    m.push_str(r#"<h2>Circuit breaker</h2><section id="breaker">"#);
    let circuit = status.and_then(|s| s.text("circuit_state", |s| s.circuit_state));
    let reason = status
        .and_then(|s| s.get("circuit_reason", |s| s.circuit_reason.clone()))
        .unwrap_or_default();
    let _ = write!(
        m,
        "<div>{} <span class=\"muted\">{}</span></div>",
        state_span(circuit.as_deref()),
        esc(&reason)
    );
    if !d.snap.breaker_history.is_empty() {
        m.push_str("<ul>");
        for t in &d.snap.breaker_history {
            let _ = write!(
                m,
                "<li>{}: {} → {} · {}</li>",
                esc(&when(t.at, now)),
                t.from.as_str(),
                t.to.as_str(),
                esc(&t.reason)
            );
        }
        m.push_str("</ul>");
    }
    m.push_str("</section>");

    m.push_str(r#"<h2>Usage windows</h2><section id="windows">"#);
    let windows = status
        .and_then(|s| s.get("usage_windows", |s| s.usage_windows.clone()))
        .unwrap_or_default();
    if windows.is_empty() {
        m.push_str(r#"<p class="muted">the client has reported no usage window</p>"#);
    }
    for (name, w) in &windows {
        let note = w
            .resets_at
            .map(|t| format!("resets {}", when(t, now)))
            .unwrap_or_default();
        m.push_str(&svg::gauge(
            name,
            w.utilization,
            w.limit_percent.map(|p| f64::from(p) / 100.0),
            &note,
        ));
    }
    if let Some(s) = status {
        let calls = s.get("calls_in_window", |s| s.calls_in_window).unwrap_or(0);
        let max = s
            .get("max_calls_per_hour", |s| s.max_calls_per_hour)
            .unwrap_or(0);
        if max > 0 {
            m.push_str(&svg::gauge(
                "calls this hour",
                Some(f64::from(calls) / f64::from(max)),
                None,
                &format!("{calls} of {max}"),
            ));
        }
    }
    m.push_str("</section>");

    m.push_str(r#"<h2>Review</h2><section id="review">"#);
    if d.reviews.is_empty() {
        m.push_str(r#"<p class="muted">no review round</p>"#);
    }
    for r in &d.reviews {
        let _ = write!(
            m,
            "<div><b>round {}/{}</b> ({}): {} — {} blocker(s), {} minor · ${:.2} · {}</div>",
            r.round,
            r.max_rounds,
            esc(&r.agent),
            esc(&r.verdict),
            r.blockers,
            r.minors,
            r.cost_usd,
            svg::duration(r.duration_ms)
        );
        if let Some(why) = &r.why {
            let _ = write!(m, r#"<div class="muted">{}</div>"#, esc(why));
        }
        if !r.findings.is_empty() {
            m.push_str(r#"<ul class="findings">"#);
            for f in &r.findings {
                let sev = match f.severity {
                    crate::analysis::review::Severity::Blocker => "blocker",
                    crate::analysis::review::Severity::Minor => "minor",
                };
                let _ = write!(
                    m,
                    "<li><b>{sev}</b> {}{}</li>",
                    if f.path.is_empty() {
                        String::new()
                    } else {
                        format!("<code>{}</code>: ", esc(&f.path))
                    },
                    esc(&f.text)
                );
            }
            m.push_str("</ul>");
        }
    }
    m.push_str("</section>");

    m.push_str(r#"<h2>Delivery</h2><section id="delivery">"#);
    if d.deliveries.is_empty() {
        m.push_str(r#"<p class="muted">nothing delivered</p>"#);
    } else {
        m.push_str(r#"<div class="scroll"><table><thead><tr><th>round</th><th>branch</th><th>pull request</th><th>checks</th><th>how it ended</th></tr></thead><tbody>"#);
        for dl in &d.deliveries {
            let pr = match (&dl.pr_url, dl.pr_number) {
                (Some(u), n) if u.starts_with("https://") || u.starts_with("http://") => format!(
                    r#"<a href="{}" rel="noreferrer noopener">{}</a>"#,
                    esc(u),
                    n.map_or_else(|| esc(u), |n| format!("#{n}"))
                ),
                (Some(u), _) => esc(u),
                (None, _) => String::from("—"),
            };
            let mut checks = match dl.pr_url.as_deref().and_then(checks_url) {
                Some(u) => format!(
                    r#"<a href="{}" rel="noreferrer noopener">{}</a>"#,
                    esc(&u),
                    esc(&dl.checks)
                ),
                None => esc(&dl.checks),
            };
            if !dl.check_names.is_empty() {
                let _ = write!(checks, ": {}", esc(&dl.check_names.join(", ")));
            }
            if let Some(p) = dl.checks_pending {
                let _ = write!(checks, " ({p} pending)");
            }
            let ended = dl
                .exit_reason
                .map(|r| r.as_str().to_owned())
                .or_else(|| dl.error.clone())
                .unwrap_or_default();
            let _ = write!(
                m,
                "<tr><td>{}</td><td>{} → {}</td><td>{pr}</td><td>{checks}</td><td>{}</td></tr>",
                dl.round,
                esc(&dl.branch),
                esc(&dl.base),
                esc(&ended)
            );
        }
        m.push_str("</tbody></table></div>");
    }
    m.push_str("</section></main>");
    page(&o.name, &nav(Some(&o.key)), &o.key, &m)
}

/// One fleet: its tasks as a Gantt chart, the merge queue, the budget, each task's branch
/// and state.
#[must_use]
pub(crate) fn fleet(d: &FleetData, now: Timestamp) -> String {
    let o = &d.overview;
    let mut m = format!(
        r#"<main><h1>{} · fleet</h1><div class="muted">{}</div>"#,
        esc(&o.name),
        esc(&o.path)
    );
    let Some(f) = &d.fleet else {
        m.push_str(
            r#"<section><p class="muted">no fleet has run in this project</p></section></main>"#,
        );
        return page(&format!("{} fleet", o.name), &nav(Some(&o.key)), &o.key, &m);
    };
    let _ = write!(
        m,
        r#"<section id="fleet-state"><div>{} · into <code>{}</code>{}</div>"#,
        state_span(Some(&f.state)),
        esc(&f.into),
        if f.paused { " · paused" } else { "" }
    );
    if let Some(h) = &f.held {
        let _ = write!(m, r#"<div class="muted">held: {}</div>"#, esc(h));
    }
    m.push_str("</section>");

    let start = f
        .started_at
        .or_else(|| {
            d.rows
                .iter()
                .flat_map(|r| r.spans.iter().map(|s| s.start))
                .min()
        })
        .unwrap_or(now);
    let end = d
        .rows
        .iter()
        .flat_map(|r| r.spans.iter().map(|s| s.end))
        .max()
        .unwrap_or(now)
        .max(if f.state == "running" { now } else { start });
    let _ = write!(
        m,
        r#"<h2>Tasks over time</h2><section id="gantt">{}<div class="muted">band: the task's state · blue: a call · grey: a wait</div></section>"#,
        svg::gantt(&d.rows, start, end)
    );

    m.push_str(r#"<h2>Tasks</h2><section id="tasks"><div class="scroll"><table><thead><tr><th>task</th><th>state</th><th>branch</th><th>loops</th><th>cost</th><th>note</th></tr></thead><tbody>"#);
    for t in &f.tasks {
        let _ = write!(
            m,
            r#"<tr id="task-{}" data-state="{}"><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>${:.2}</td><td>{}</td></tr>"#,
            esc(&t.name),
            t.state().as_str(),
            esc(&t.name),
            state_span(Some(t.state().as_str())),
            esc(&t.branch),
            t.loops,
            t.cost_usd,
            esc(&t.message)
        );
    }
    m.push_str("</tbody></table></div></section>");

    m.push_str(r#"<h2>Merge queue</h2><section id="merge-queue">"#);
    let queue: Vec<&crate::store::schema::FleetTask> = f
        .tasks
        .iter()
        .filter(|t| {
            matches!(
                t.state(),
                crate::policy::fleet::TaskState::Merging
                    | crate::policy::fleet::TaskState::Verifying
            )
        })
        .collect();
    if queue.is_empty() {
        m.push_str(r#"<p class="muted">nothing waiting to merge</p>"#);
    } else {
        m.push_str("<ol>");
        for t in queue {
            let _ = write!(
                m,
                "<li>{} — {}{}</li>",
                esc(&t.name),
                t.state().as_str(),
                if t.merge_attempts > 0 {
                    format!(" (attempt {})", t.merge_attempts + 1)
                } else {
                    String::new()
                }
            );
        }
        m.push_str("</ol>");
    }
    m.push_str("</section>");

    m.push_str(r#"<h2>Budget</h2><section id="budget">"#);
    let cap = |used: f64, max: f64| (max > 0.0).then(|| used / max);
    m.push_str(&svg::gauge(
        "cost",
        cap(f.cost_usd, f.max_cost_usd),
        None,
        &if f.max_cost_usd > 0.0 {
            format!("${:.2} of ${:.2}", f.cost_usd, f.max_cost_usd)
        } else {
            format!("${:.2}, no cap", f.cost_usd)
        },
    ));
    m.push_str(&svg::gauge(
        "calls this hour",
        cap(
            f64::from(f.calls_in_window),
            f64::from(f.max_calls_per_hour),
        ),
        None,
        &format!("{} of {}", f.calls_in_window, f.max_calls_per_hour),
    ));
    #[allow(clippy::cast_precision_loss)]
    m.push_str(&svg::gauge(
        "tokens this hour",
        cap(f.tokens_in_window as f64, f.max_tokens_per_hour as f64),
        None,
        &format!("{} of {}", f.tokens_in_window, f.max_tokens_per_hour),
    ));
    if let Some(dl) = f.deadline {
        let _ = write!(
            m,
            r#"<div class="muted">runtime ends {}</div>"#,
            esc(&when(dl, now))
        );
    }
    m.push_str("</section></main>");
    page(&format!("{} fleet", o.name), &nav(Some(&o.key)), &o.key, &m)
}

/// The live log tail (`.hank/live.log`'s newest lines, control characters removed).
#[must_use]
pub(crate) fn log(o: &Overview, lines: &[String]) -> String {
    let mut m = format!(
        r#"<main><h1>{} · log</h1><section>{}</section><pre class="log" id="log">"#,
        esc(&o.name),
        run_line(o, Timestamp::UNIX_EPOCH)
    );
    for l in lines {
        m.push_str(&esc(l));
        m.push('\n');
    }
    if lines.is_empty() {
        m.push_str("(no live output yet)");
    }
    m.push_str("</pre></main>");
    page(&format!("{} log", o.name), &nav(Some(&o.key)), &o.key, &m)
}

/// A page for a project the server does not serve.
#[must_use]
pub(crate) fn not_found() -> String {
    page(
        "not found",
        &nav(None),
        "*",
        r#"<main><h1>Not found</h1><p>No such project or page.</p></main>"#,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::snapshot::{Snapshot, Sources};

    fn now() -> Timestamp {
        "2026-12-07T12:00:00Z".parse().unwrap()
    }

    fn overview(name: &str) -> Overview {
        Overview {
            key: "p-0000000000000001".into(),
            name: name.into(),
            path: format!("/work/{name}"),
            state: Some("waiting".into()),
            wait_reason: Some("usage_limit".into()),
            waiting_until: Some("2026-12-07T13:00:00Z".parse().unwrap()),
            ..Overview::default()
        }
    }

    #[test]
    fn the_list_says_why_and_until_when_a_run_waits() {
        let html = projects(&[overview("alpha")], now());
        assert!(
            html.contains("usage_limit until 13:00:00 UTC (in 1 h 00 min)"),
            "{html}"
        );
        assert!(html.contains(r#"href="/p/p-0000000000000001""#));
        assert!(projects(&[], now()).contains("No project yet"));
    }

    #[test]
    fn a_log_line_holding_a_script_is_text() {
        let lines = vec![
            "<script>document.title='pwned'</script>".to_owned(),
            "<img src=x onerror=alert(1)>".to_owned(),
        ];
        let html = log(&overview("<b>name</b>"), &lines);
        assert!(html.contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"));
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains("&lt;b&gt;name&lt;/b&gt;"));
        // The only script is hank's own file.
        assert_eq!(html.matches("<script").count(), 1, "{html}");
        assert_eq!(html.matches("<img").count(), 0);
    }

    #[test]
    fn the_run_page_escapes_findings_and_links_only_web_pull_requests() {
        let snap = Snapshot::from_sources(&Sources {
            project: "alpha".into(),
            hank_dir: true,
            status: Some(
                r#"{"schema_version":2,"state":"completed","loop_count":2,"total_cost_usd":1.5,
                    "circuit_state":"CLOSED","circuit_reason":"",
                    "usage_windows":{"five_hour":{"utilization":0.42,"resets_at":"2026-12-07T14:00:00Z"}}}"#
                    .into(),
            ),
            ..Sources::default()
        });
        let review: crate::store::schema::ReviewRound = serde_json::from_value(serde_json::json!({
            "round": 1, "max_rounds": 2, "agent": "codex", "loop": 3, "verdict": "changes",
            "blockers": 1, "minors": 0, "cost_usd": 0.1, "tokens": 10, "duration_ms": 1000,
            "findings": [{"severity": "blocker", "path": "src/a.rs", "text": "<iframe src=evil>"}]
        }))
        .unwrap();
        let deliveries = vec![
            crate::store::schema::Delivery {
                branch: "hank/main".into(),
                base: "main".into(),
                pr_url: Some("https://github.com/o/r/pull/7".into()),
                pr_number: Some(7),
                checks: "green".into(),
                round: 1,
                ..Default::default()
            },
            crate::store::schema::Delivery {
                pr_url: Some("javascript:alert(1)".into()),
                ..Default::default()
            },
        ];
        let d = RunData {
            overview: overview("alpha"),
            loops: vec![LoopRow {
                number: 1,
                duration_ms: 5000,
                outcome: "success".into(),
                ..LoopRow::default()
            }],
            reviews: vec![review],
            deliveries,
            snap,
        };
        let html = run(&d, now());
        assert!(html.contains(r#"id="loop-timeline""#));
        assert!(html.contains("&lt;iframe src=evil&gt;"));
        assert!(!html.contains("<iframe"));
        assert!(html.contains(
            r#"<a href="https://github.com/o/r/pull/7" rel="noreferrer noopener">#7</a>"#
        ));
        assert!(!html.contains(r#"href="javascript"#));
        assert!(html.contains(
            r#"<a href="https://github.com/o/r/pull/7/checks" rel="noreferrer noopener">green</a>"#
        ));
        assert!(html.contains("five_hour · 42 %"), "{html}");
        assert!(html.contains("resets 14:00:00 UTC (in 2 h 00 min)"));
    }

    #[test]
    fn checks_link_to_the_forge_page_of_the_pull_request() {
        let table = [
            (
                "https://github.com/o/r/pull/7",
                Some("https://github.com/o/r/pull/7/checks"),
            ),
            (
                "https://gitlab.com/g/p/-/merge_requests/3/",
                Some("https://gitlab.com/g/p/-/merge_requests/3/pipelines"),
            ),
            ("http://127.0.0.1:9/o/r/pull/7", None),
            ("https://example.com/review/7", None),
        ];
        for (pr, want) in table {
            assert_eq!(checks_url(pr).as_deref(), want, "{pr}");
        }
    }

    #[test]
    fn the_fleet_page_shows_the_tasks_queue_budget_and_chart() {
        let file: crate::store::schema::FleetFile = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "into": "hank/fleet", "state": "running",
            "calls_in_window": 30, "max_calls_per_hour": 40, "cost_usd": 4.0, "max_cost_usd": 5.0,
            "tokens_in_window": 10, "max_tokens_per_hour": 0, "paused": false,
            "started_at": "2026-12-07T11:00:00Z", "updated_at": null, "pid": 1,
            "deadline": null, "held": "agents: 2 of 2 busy",
            "tasks": [
                {"name": "api", "state": "merging", "branch": "hank/api", "worktree": null,
                 "loops": 3, "cost_usd": 1.25, "verified": true, "agent": null,
                 "message": "<b>merging</b>", "pid": null, "pid_start": null,
                 "merge_attempts": 1, "exit_code": 0},
                {"name": "ui", "state": "running", "branch": "hank/ui", "worktree": null,
                 "loops": 1, "cost_usd": 0.5, "verified": null, "agent": null, "message": "",
                 "pid": null, "pid_start": null, "merge_attempts": 0, "exit_code": null}
            ]
        }))
        .unwrap();
        let rows = vec![crate::serve::data::TaskRow {
            task: "api".into(),
            spans: vec![crate::serve::data::Span {
                kind: crate::serve::data::SpanKind::Call,
                start: "2026-12-07T11:10:00Z".parse().unwrap(),
                end: "2026-12-07T11:20:00Z".parse().unwrap(),
            }],
        }];
        let d = FleetData {
            overview: overview("squad"),
            fleet: Some(file),
            rows,
        };
        let html = fleet(&d, now());
        assert!(html.contains(r#"id="fleet-gantt""#) && html.contains(r#"<rect class="call""#));
        assert!(
            html.contains(r#"<tr id="task-api" data-state="merging">"#),
            "{html}"
        );
        assert!(html.contains(r#"<tr id="task-ui" data-state="running">"#));
        assert!(
            html.contains("<li>api — merging (attempt 2)</li>"),
            "{html}"
        );
        assert!(html.contains("&lt;b&gt;merging&lt;/b&gt;"));
        assert!(html.contains("held: agents: 2 of 2 busy"));
        assert!(
            html.contains("cost · 80 %") && html.contains("$4.00 of $5.00"),
            "{html}"
        );
        assert!(html.contains("calls this hour · 75 %"));
        assert!(html.contains("tokens this hour · —"), "no cap, no figure");
        let none = FleetData {
            overview: overview("solo"),
            ..FleetData::default()
        };
        assert!(fleet(&none, now()).contains("no fleet has run"));
    }
}
