//! What the pages show, read from the records `hank status`, `hank report` and `hank fleet
//! status` read — through the same readers ([`crate::monitor::snapshot`], the typed
//! [`crate::store::schema`] events) — and nothing else: a project's `.hank/` and the per-user
//! state (the project records, a fleet task's worktree under it). The view data are plain
//! values; [`super::pages`] renders them.

use std::path::{Path, PathBuf};

use jiff::Timestamp;

use crate::monitor::snapshot::{self, Paths, Snapshot};
use crate::store::schema::{self, EventLine};

/// How much of the end of `events.jsonl` the run and fleet pages read (the timeline of every
/// loop, the review rounds, the deliveries, the fleet's task states).
pub(crate) const ALL_EVENTS_BYTES: u64 = 16 * 1024 * 1024;

/// Each fleet task's events as last read from its worktree: (project key, task) → events.
pub(crate) type TaskEvents = std::collections::HashMap<(String, String), Vec<EventLine>>;

/// A project the server may show: its key in the URLs and its root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProjectRef {
    pub key: String,
    pub root: PathBuf,
}

/// One project as the list shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Overview {
    pub key: String,
    pub name: String,
    pub path: String,
    pub hank_dir: bool,
    /// The run's state as shown (`not running` for a stale status).
    pub state: Option<String>,
    pub wait_reason: Option<String>,
    pub waiting_until: Option<Timestamp>,
    pub exit_reason: Option<String>,
    pub exit_message: Option<String>,
    pub updated_at: Option<Timestamp>,
    pub loops: u64,
    pub cost_usd: f64,
    /// `fleet.json`'s state, when a fleet ran here.
    pub fleet_state: Option<String>,
    pub notes: Vec<String>,
}

/// One loop (call) of the run's timeline.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LoopRow {
    pub number: u64,
    pub started_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
    pub duration_ms: u64,
    pub outcome: String,
    pub error_kind: Option<String>,
    pub cost_usd: f64,
    pub files_changed: u32,
    pub agent: Option<String>,
    pub items: Vec<String>,
}

/// What a span of a fleet task's row stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SpanKind {
    /// The task was in this state (`running`, `merging`, …).
    State(String),
    /// One call of the agent.
    Call,
    /// A wait (its reason).
    Wait(String),
}

/// A span of time on a task's row of the Gantt chart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Span {
    pub kind: SpanKind,
    pub start: Timestamp,
    pub end: Timestamp,
}

/// A task's row of the Gantt chart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TaskRow {
    pub task: String,
    pub spans: Vec<Span>,
}

/// Everything one run's page shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunData {
    pub overview: Overview,
    pub snap: Snapshot,
    pub loops: Vec<LoopRow>,
    pub reviews: Vec<schema::ReviewRound>,
    pub deliveries: Vec<schema::Delivery>,
}

/// Everything one fleet's page shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct FleetData {
    pub overview: Overview,
    pub fleet: Option<schema::FleetFile>,
    pub rows: Vec<TaskRow>,
}

/// The projects served: the per-user records under `state_root`, and `home` (the project
/// `hank serve` was started in) when it has no record yet. A fleet task's worktree (it lies
/// under the per-user state, and its run keeps a record too) is shown on its fleet's page,
/// not as a project.
#[must_use]
pub(crate) fn projects(state_root: &Path, home: Option<&ProjectRef>) -> Vec<ProjectRef> {
    let mut out: Vec<ProjectRef> = crate::store::userdir::known_projects(state_root)
        .into_iter()
        .filter(|k| !k.path.starts_with(state_root))
        .map(|k| ProjectRef {
            key: k.key,
            root: k.path,
        })
        .collect();
    if let Some(h) = home
        && !out.iter().any(|p| p.key == h.key)
    {
        out.push(h.clone());
    }
    out
}

/// The project's snapshot, as `hank status` and the monitor read it.
#[must_use]
pub(crate) fn snapshot(p: &ProjectRef) -> Snapshot {
    snapshot::load(&Paths::new(&p.root))
}

/// What changes when a page of `p` should be drawn again (sizes and times of its records).
#[must_use]
pub(crate) fn fingerprint(p: &ProjectRef) -> snapshot::Fingerprint {
    snapshot::Fingerprint::read(&Paths::new(&p.root))
}

/// The list's line of a project, from its snapshot (pure).
#[must_use]
pub(crate) fn overview(p: &ProjectRef, snap: &Snapshot) -> Overview {
    let status = snap.status.as_ref();
    let (wait_reason, waiting_until) = snap.wait();
    Overview {
        key: p.key.clone(),
        name: p.root.file_name().map_or_else(
            || p.root.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        path: p.root.display().to_string(),
        hank_dir: snap.hank_dir,
        state: snap.state(),
        wait_reason,
        waiting_until,
        exit_reason: status.and_then(|s| s.text("exit_reason", |s| s.exit_reason)),
        exit_message: status
            .and_then(|s| s.get("exit_message", |s| s.exit_message.clone()))
            .flatten(),
        updated_at: status.and_then(|s| s.get("updated_at", |s| s.updated_at)),
        loops: status
            .and_then(|s| s.get("loop_count", |s| s.loop_count))
            .unwrap_or(0),
        cost_usd: status
            .and_then(|s| s.get("total_cost_usd", |s| s.total_cost_usd))
            .unwrap_or(0.0),
        fleet_state: snap.fleet.as_ref().map(|f| f.state.clone()),
        notes: snap.notes.clone(),
    }
}

/// Every event in the last [`ALL_EVENTS_BYTES`] of `events.jsonl` of the folder `hank`
/// (a project's or a task worktree's `.hank/`).
fn all_events(hank: &Path) -> Vec<EventLine> {
    snapshot::read_tail(&hank.join("events.jsonl"), ALL_EVENTS_BYTES)
        .map(|t| EventLine::parse_all(&t))
        .unwrap_or_default()
}

/// An `agent_finished` event, typed when the whole line read as one, else field by field
/// (an older or newer writer's line).
enum Finished<'a> {
    Typed(&'a schema::AgentFinished),
    Lenient(Box<schema::Lenient<schema::AgentFinished>>),
}

impl Finished<'_> {
    fn get<U>(&self, field: &str, get: impl FnOnce(&schema::AgentFinished) -> U) -> Option<U> {
        match self {
            Finished::Typed(a) => Some(get(a)),
            Finished::Lenient(l) => l.get(field, get),
        }
    }

    fn text<U: serde::Serialize>(
        &self,
        field: &str,
        get: impl FnOnce(&schema::AgentFinished) -> U,
    ) -> Option<String> {
        match self {
            Finished::Typed(a) => match serde_json::to_value(get(a)) {
                Ok(serde_json::Value::String(s)) => Some(s),
                _ => None,
            },
            Finished::Lenient(l) => l.text(field, get),
        }
    }
}

/// The loops of the newest run in `events` (from its first event after the last `exit`
/// that ended an earlier run; every loop when none), oldest first (pure).
#[must_use]
pub(crate) fn loops_of(events: &[EventLine]) -> Vec<LoopRow> {
    let mut started: std::collections::BTreeMap<u64, Timestamp> = Default::default();
    let mut rows: Vec<LoopRow> = Vec::new();
    for e in events {
        match e.kind() {
            "loop_started" => {
                if let (Some(n), Some(at)) = (e.u64("loop"), e.at()) {
                    started.insert(n, at);
                }
            }
            "agent_finished" => {
                // The typed event as read (the common case), else field by field.
                let f = match &e.event {
                    Some(schema::Event {
                        kind: schema::EventKind::AgentFinished(a),
                        ..
                    }) => Finished::Typed(a),
                    _ => match e.finished() {
                        Some(l) => Finished::Lenient(Box::new(l)),
                        None => continue,
                    },
                };
                let number = f.get("loop", |f| f.number).unwrap_or(0);
                let duration_ms = f.get("duration_ms", |f| f.duration_ms).unwrap_or(0);
                let ended_at = e.at();
                let started_at = started.remove(&number).or_else(|| {
                    let d = jiff::SignedDuration::from_millis(
                        i64::try_from(duration_ms).unwrap_or(i64::MAX),
                    );
                    ended_at.and_then(|t| t.checked_sub(d).ok())
                });
                rows.push(LoopRow {
                    number,
                    started_at,
                    ended_at,
                    duration_ms,
                    outcome: f.text("outcome", |f| f.outcome).unwrap_or_default(),
                    error_kind: f.text("error_kind", |f| f.error_kind),
                    cost_usd: f.get("cost_usd", |f| f.cost_usd).unwrap_or(0.0),
                    files_changed: f.get("files_changed", |f| f.files_changed).unwrap_or(0),
                    agent: f.get("agent", |f| f.agent.clone()).flatten(),
                    items: f
                        .get("plan_items", |f| f.plan_items.clone())
                        .unwrap_or_default(),
                });
            }
            "exit" => {
                // A new run starts after an exit: its loops are the ones shown (a later
                // run numbers its loops on, so nothing of the earlier run is lost from
                // the numbers; the timeline is the run's).
                started.clear();
            }
            _ => {}
        }
    }
    // A call under way: started, not answered yet.
    rows.extend(started.into_iter().map(|(number, at)| LoopRow {
        number,
        started_at: Some(at),
        outcome: CALLING.to_owned(),
        ..LoopRow::default()
    }));
    rows
}

/// The outcome shown for a call under way.
pub(crate) const CALLING: &str = "calling";

/// Every event of `kind` in `events` read as `T` (the event's own typed fields).
fn typed<T: serde::de::DeserializeOwned>(events: &[EventLine], kind: &str) -> Vec<T> {
    events
        .iter()
        .filter(|e| e.kind() == kind)
        .filter_map(|e| serde_json::from_value(serde_json::Value::Object(e.raw.clone())).ok())
        .collect()
}

/// The run page's data.
#[must_use]
pub(crate) fn run_data(p: &ProjectRef) -> RunData {
    let snap = snapshot(p);
    let events = all_events(&p.root.join(".hank"));
    let mut deliveries: Vec<schema::Delivery> = typed(&events, "delivery");
    if deliveries.is_empty()
        && let Some(d) = snap
            .status
            .as_ref()
            .and_then(|s| s.get("delivery", |s| s.delivery.clone()))
            .flatten()
    {
        deliveries.push(d);
    }
    RunData {
        overview: overview(p, &snap),
        loops: loops_of(&events),
        reviews: typed(&events, "review"),
        deliveries,
        snap,
    }
}

/// The rows of the fleet's Gantt chart (pure): each task's states from the project's
/// `fleet_task` events (a state lasts until the task's next event, the last one until
/// `now` unless it is final), and the calls and waits of its run from its worktree's events
/// (`task_events`: the task's name → its events, for the tasks whose worktree is there).
#[must_use]
pub(crate) fn gantt_rows(
    fleet: &schema::FleetFile,
    events: &[EventLine],
    task_events: &[(String, Vec<EventLine>)],
    now: Timestamp,
) -> Vec<TaskRow> {
    let since = fleet.started_at;
    fleet
        .tasks
        .iter()
        .map(|t| {
            let mut spans = Vec::new();
            let changes: Vec<(Timestamp, String)> = events
                .iter()
                .filter(|e| e.kind() == "fleet_task" && e.str("task") == Some(t.name.as_str()))
                .filter_map(|e| Some((e.at()?, e.str("state")?.to_owned())))
                .filter(|(at, _)| since.is_none_or(|s| *at >= s))
                .collect();
            for (i, (at, state)) in changes.iter().enumerate() {
                let end = match changes.get(i + 1) {
                    Some((next, _)) => *next,
                    None if matches!(state.as_str(), "merged" | "failed" | "blocked") => *at,
                    None => now.max(*at),
                };
                spans.push(Span {
                    kind: SpanKind::State(state.clone()),
                    start: *at,
                    end,
                });
            }
            // A call under way lasts until the task left `running` after it started (its
            // events were last read before its answer), else until now.
            let open_end = |start: Timestamp| {
                changes
                    .iter()
                    .find(|(at, st)| *at >= start && st != "running")
                    .map_or(now, |(at, _)| *at)
            };
            if let Some((_, evs)) = task_events.iter().find(|(n, _)| *n == t.name) {
                for l in loops_of(evs) {
                    if let Some(start) = l.started_at {
                        let end = l.ended_at.unwrap_or_else(|| open_end(start)).max(start);
                        spans.push(Span {
                            kind: SpanKind::Call,
                            start,
                            end,
                        });
                    }
                }
                for e in evs.iter().filter(|e| e.kind() == "waiting") {
                    if let (Some(start), Some(end)) = (e.at(), e.time("until")) {
                        spans.push(Span {
                            kind: SpanKind::Wait(e.str("reason").unwrap_or("wait").to_owned()),
                            start,
                            end: end.min(now.max(start)),
                        });
                    }
                }
            }
            TaskRow {
                task: t.name.clone(),
                spans,
            }
        })
        .collect()
}

/// The fleet page's data: `fleet.json`, the project's `fleet_task` events, and each running
/// task's events from its worktree — only a worktree under the per-user state (`state_root`),
/// where hank makes them.
/// `seen` keeps each task's events as last read from its worktree: a merged task's worktree
/// is gone, and its calls stay on the chart for as long as the server runs.
#[must_use]
pub(crate) fn fleet_data(
    p: &ProjectRef,
    state_root: &Path,
    now: Timestamp,
    seen: &mut TaskEvents,
) -> FleetData {
    let snap = snapshot(p);
    let overview = overview(p, &snap);
    let Some(fleet) = snap.fleet else {
        return FleetData {
            overview,
            fleet: None,
            rows: Vec::new(),
        };
    };
    let events = all_events(&p.root.join(".hank"));
    for t in &fleet.tasks {
        let Some(wt) = t.worktree.as_deref() else {
            continue;
        };
        let (Ok(canonical), Ok(root)) = (
            std::fs::canonicalize(PathBuf::from(wt)),
            std::fs::canonicalize(state_root),
        ) else {
            continue;
        };
        if canonical.starts_with(&root) {
            let evs = all_events(&canonical.join(".hank"));
            // A worktree taken over by the next task starts with no events of this one.
            if !evs.is_empty() {
                seen.insert((p.key.clone(), t.name.clone()), evs);
            }
        }
    }
    let task_events: Vec<(String, Vec<EventLine>)> = fleet
        .tasks
        .iter()
        .filter_map(|t| {
            let evs = seen.get(&(p.key.clone(), t.name.clone()))?;
            Some((t.name.clone(), evs.clone()))
        })
        .collect();
    let rows = gantt_rows(&fleet, &events, &task_events, now);
    FleetData {
        overview,
        fleet: Some(fleet),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(lines: &[&str]) -> Vec<EventLine> {
        EventLine::parse_all(&lines.join("\n"))
    }

    const T0: &str = "2026-12-07T10:00:00Z";

    #[test]
    fn the_loops_of_the_newest_run_pair_starts_with_answers() {
        let ev = events(&[
            r#"{"type":"loop_started","at":"2026-12-07T10:00:00Z","loop":1,"resume":false,"context_bytes":10}"#,
            r#"{"schema_version":2,"type":"agent_finished","at":"2026-12-07T10:01:00Z","loop":1,"outcome":"success","cost_usd":0.5,"files_changed":3,"duration_ms":60000,"plan_items":["a"]}"#,
            r#"{"type":"loop_started","at":"2026-12-07T10:02:00Z","loop":2,"resume":true,"context_bytes":10}"#,
            r#"{"type":"agent_finished","at":"2026-12-07T10:02:30Z","loop":2,"outcome":"error","error_kind":"usage_limit","cost_usd":0.1,"duration_ms":30000}"#,
            // An answer without its start: started at its end minus its duration; a field
            // this hank cannot read (`tokens`): the line read field by field.
            r#"{"type":"agent_finished","at":"2026-12-07T10:05:00Z","loop":3,"outcome":"success","duration_ms":10000,"tokens":{},"error_kind":"newer_kind"}"#,
            "not json",
        ]);
        let rows = loops_of(&ev);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].number, 1);
        assert_eq!(rows[0].started_at, Some(T0.parse().unwrap()));
        assert_eq!(rows[0].files_changed, 3);
        assert_eq!(rows[0].items, ["a"]);
        assert_eq!(rows[1].outcome, "error");
        assert_eq!(rows[1].error_kind.as_deref(), Some("usage_limit"));
        assert_eq!(
            rows[2].started_at,
            Some("2026-12-07T10:04:50Z".parse().unwrap())
        );
        assert!(ev[4].event.is_none(), "read field by field");
        assert_eq!(rows[2].error_kind.as_deref(), Some("newer_kind"));
        assert!(ev[1].event.is_some(), "typed");
    }

    #[test]
    fn a_task_row_holds_its_states_calls_and_waits() {
        let fleet: schema::FleetFile = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "into": "hank/fleet", "state": "running",
            "calls_in_window": 0, "max_calls_per_hour": 0, "cost_usd": 0.0, "max_cost_usd": 0.0,
            "tokens_in_window": 0, "max_tokens_per_hour": 0, "paused": false,
            "started_at": "2026-12-07T09:59:00Z", "updated_at": null, "pid": null,
            "deadline": null, "held": null,
            "tasks": [
                {"name": "api", "state": "merged", "branch": "hank/api", "worktree": null,
                 "loops": 1, "cost_usd": 0.0, "verified": true, "agent": null, "message": "",
                 "pid": null, "pid_start": null, "merge_attempts": 0, "exit_code": 0},
                {"name": "ui", "state": "running", "branch": "hank/ui", "worktree": null,
                 "loops": 1, "cost_usd": 0.0, "verified": null, "agent": null, "message": "",
                 "pid": null, "pid_start": null, "merge_attempts": 0, "exit_code": null}
            ]
        }))
        .unwrap();
        let main = events(&[
            r#"{"type":"fleet_task","at":"2026-12-07T10:00:00Z","task":"api","state":"running","branch":"hank/api","message":""}"#,
            r#"{"type":"fleet_task","at":"2026-12-07T10:00:00Z","task":"ui","state":"running","branch":"hank/ui","message":""}"#,
            r#"{"type":"fleet_task","at":"2026-12-07T10:03:00Z","task":"api","state":"merging","branch":"hank/api","message":""}"#,
            r#"{"type":"fleet_task","at":"2026-12-07T10:04:00Z","task":"api","state":"merged","branch":"hank/api","message":""}"#,
        ]);
        let ui = events(&[
            r#"{"type":"loop_started","at":"2026-12-07T10:00:10Z","loop":1,"resume":false,"context_bytes":1}"#,
            r#"{"type":"agent_finished","at":"2026-12-07T10:01:10Z","loop":1,"outcome":"success","duration_ms":60000}"#,
            r#"{"type":"waiting","at":"2026-12-07T10:01:20Z","reason":"usage_limit","until":"2026-12-07T12:00:00Z"}"#,
            r#"{"type":"loop_started","at":"2026-12-07T10:04:00Z","loop":2,"resume":true,"context_bytes":1}"#,
        ]);
        let now: Timestamp = "2026-12-07T10:05:00Z".parse().unwrap();
        let rows = gantt_rows(&fleet, &main, &[("ui".into(), ui)], now);
        let api: Vec<&SpanKind> = rows[0].spans.iter().map(|s| &s.kind).collect();
        assert_eq!(
            api,
            [
                &SpanKind::State("running".into()),
                &SpanKind::State("merging".into()),
                &SpanKind::State("merged".into())
            ]
        );
        assert_eq!(
            rows[0].spans[0].end,
            "2026-12-07T10:03:00Z".parse().unwrap()
        );
        assert_eq!(rows[0].spans[2].start, rows[0].spans[2].end);
        let ui = &rows[1].spans;
        assert_eq!(ui[0].end, now, "a running state lasts until now");
        assert_eq!(ui[1].kind, SpanKind::Call);
        assert_eq!(ui[2].kind, SpanKind::Call, "a call under way");
        assert_eq!(ui[2].end, now);
        assert_eq!(ui[3].kind, SpanKind::Wait("usage_limit".into()));
        assert_eq!(ui[3].end, now, "a wait is drawn until now, not its end");
    }
}
