//! What the monitor shows, read tolerantly from the files the loop writes.
//!
//! [`Snapshot::from_sources`] is pure: it takes the text of `.hank/status.json`, the tail of
//! `.hank/events.jsonl`, the tail of `.hank/live.log`, `.hank/state.json` and
//! `.hank/fix_plan.md` (each `None` when missing) and never fails: a missing, half-written or
//! unknown-schema file becomes a note, and every field of `status.json` is optional so an
//! older or newer writer still shows what can be shown. [`load`] and [`Fingerprint::read`]
//! are the only functions here that touch the file system.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Serialize;

use crate::policy::breaker::Transition;
use crate::store::schema::{self, EventLine, Lenient, PlanCounts, read_lenient};
/// How much of the end of `events.jsonl` is read.
pub(crate) const EVENTS_TAIL_BYTES: u64 = 64 * 1024;
/// How much of the end of `live.log` is read.
pub(crate) const LIVE_TAIL_BYTES: u64 = 16 * 1024;
/// Events kept in a snapshot (the newest).
pub(crate) const MAX_EVENTS: usize = 50;
/// Live output lines kept in a snapshot (the newest).
pub(crate) const MAX_LIVE_LINES: usize = 200;
/// Breaker transitions kept in a snapshot (the newest).
pub(crate) const MAX_TRANSITIONS: usize = 5;

/// The raw inputs of a snapshot: file contents (tails for the logs), `None` when missing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sources {
    /// The project folder name.
    pub project: String,
    /// `.hank/` exists.
    pub hank_dir: bool,
    pub status: Option<String>,
    pub events_tail: Option<String>,
    pub live_tail: Option<String>,
    pub state: Option<String>,
    pub fix_plan: Option<String>,
    /// `.hank/fleet.json` (`hank fleet`).
    pub fleet: Option<String>,
}

/// Everything the monitor shows. The view is a pure function of this plus `now`. The files
/// are read with their own definitions in [`crate::store::schema`] (leniently: what an older
/// or newer hank wrote differently is absent, or shown as written).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Snapshot {
    /// The project folder name.
    pub project: String,
    /// `.hank/` exists in the project.
    pub hank_dir: bool,
    /// `None`: no usable `status.json` (see `notes`).
    pub status: Option<Lenient<schema::Status>>,
    /// The status says a loop is active but no loop holds the project's lock: it was killed
    /// before it could write a final status. Shown as [`NOT_RUNNING`], never as RUNNING.
    pub stale: bool,
    /// Problems reading the files, one line each ("status.json is not valid JSON …").
    pub notes: Vec<String>,
    /// When the current (or last) run started: its first `loop_started` event.
    pub run_started_at: Option<Timestamp>,
    /// When the last run ended (its `exit` event), if it has.
    pub run_ended_at: Option<Timestamp>,
    /// The newest events, oldest first.
    pub events: Vec<EventLine>,
    /// The newest breaker transitions, oldest first.
    pub breaker_history: Vec<Transition>,
    /// Checkbox counts of `fix_plan.md` (from the file, else from `status.json`).
    pub fix_plan: Option<PlanCounts>,
    /// The newest lines of the live output, control characters removed.
    pub live_tail: Vec<String>,
    /// `hank fleet`'s tasks, when a fleet ran here (`.hank/fleet.json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<schema::FleetFile>,
}

/// The start and end of the newest run in `events`: a run is what lies between two `exit`
/// events. The start is its first `loop_started` (else its first event); the end is its
/// `exit` event when the newest event is one.
#[must_use]
pub(crate) fn run_bounds(events: &[EventLine]) -> (Option<Timestamp>, Option<Timestamp>) {
    let exits: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind() == "exit")
        .map(|(i, _)| i)
        .collect();
    let last = events.len().checked_sub(1);
    let (begin, end, ended) = match (exits.last(), last) {
        (Some(&x), Some(l)) if x == l => {
            let begin = exits.iter().rev().nth(1).map_or(0, |p| p + 1);
            (begin, x, events.get(x).and_then(EventLine::at))
        }
        (Some(&x), _) => (x + 1, events.len(), None),
        (None, _) => (0, events.len(), None),
    };
    let segment = events.get(begin..end).unwrap_or(&[]);
    let started = segment
        .iter()
        .find(|e| e.kind() == "loop_started")
        .or_else(|| segment.first())
        .and_then(EventLine::at);
    (started, ended)
}

/// `breaker.history` of `state.json` ([`schema::read_breaker_history`]), the newest
/// [`MAX_TRANSITIONS`].
#[must_use]
pub(crate) fn breaker_history(state: &str) -> Vec<Transition> {
    let all = schema::read_breaker_history(state);
    let skip = all.len().saturating_sub(MAX_TRANSITIONS);
    all.into_iter().skip(skip).collect()
}

/// Removes terminal control sequences and control characters ([`crate::sanitize`], the one
/// sanitizer) and expands tabs, so agent output cannot move the cursor or recolor the
/// dashboard.
#[must_use]
pub(crate) fn clean_line(line: &str) -> String {
    crate::sanitize::for_terminal(line, crate::sanitize::Lines::Keep)
        .replace('\t', "    ")
        .replace('\n', " ")
}

/// The newest [`MAX_LIVE_LINES`] lines of the live output, cleaned; a carriage return keeps
/// only what follows it (progress redraws).
#[must_use]
pub(crate) fn live_lines(tail: &str) -> Vec<String> {
    let lines: Vec<String> = tail
        .lines()
        .map(|l| clean_line(l.rsplit('\r').find(|p| !p.is_empty()).unwrap_or("")))
        .collect();
    let skip = lines.len().saturating_sub(MAX_LIVE_LINES);
    lines.into_iter().skip(skip).collect()
}

/// Counts `- [ ]` / `- [x]` checkboxes of `fix_plan.md`.
#[must_use]
pub(crate) fn plan_progress(content: &str) -> PlanCounts {
    let plan = crate::policy::fixplan::parse(
        content,
        &crate::policy::fixplan::default_optional_sections(),
    );
    PlanCounts {
        done: plan.done(),
        total: plan.total(),
    }
}

impl Snapshot {
    /// `loop_alive` false (no loop holds the project's lock) while the status says running,
    /// waiting or starting: the loop ended without writing its final status. It is shown as
    /// [`NOT_RUNNING`], with a note, never as RUNNING.
    pub(crate) fn mark_stale(&mut self, loop_alive: bool) {
        if loop_alive {
            return;
        }
        let Some(s) = self.status.as_ref() else {
            return;
        };
        if !is_active(s.text("state", |s| s.state).as_deref()) {
            return;
        }
        self.stale = true;
        self.notes
            .push(stale_note(s.get("updated_at", |s| s.updated_at)));
    }

    /// `supervisor_alive` false (no supervisor holds the fleet's lock) while `fleet.json`
    /// says the fleet runs: it was killed or crashed. The fleet is shown not running, with a
    /// note ([`schema::FleetFile::shown`]).
    pub(crate) fn mark_fleet(&mut self, supervisor_alive: bool) {
        let Some(f) = self.fleet.take() else {
            return;
        };
        if f.is_stale(supervisor_alive) {
            self.notes.push(f.stale_note(&jiff::tz::TimeZone::system()));
        }
        self.fleet = Some(f.shown(supervisor_alive));
    }

    /// The run's state as shown: the status's `state` as written, or [`NOT_RUNNING`] for a
    /// stale status.
    #[must_use]
    pub(crate) fn state(&self) -> Option<String> {
        if self.stale {
            return Some(NOT_RUNNING.to_string());
        }
        self.status
            .as_ref()
            .and_then(|s| s.text("state", |s| s.state))
    }

    /// The wait in progress (`wait_reason` as written, `waiting_until`); none when stale.
    #[must_use]
    /// The client retrying a failed API call inside the running call (`api_retry`).
    pub(crate) fn api_retry(&self) -> Option<crate::store::schema::ApiRetry> {
        let s = self.status.as_ref().filter(|_| !self.stale)?;
        s.get("api_retry", |s| s.api_retry.clone()).flatten()
    }

    pub(crate) fn wait(&self) -> (Option<String>, Option<Timestamp>) {
        match self.status.as_ref().filter(|_| !self.stale) {
            Some(s) => (
                s.text("wait_reason", |s| s.wait_reason),
                s.get("waiting_until", |s| s.waiting_until).flatten(),
            ),
            None => (None, None),
        }
    }

    /// Builds a snapshot from file contents. Never fails.
    #[must_use]
    pub(crate) fn from_sources(src: &Sources) -> Snapshot {
        let mut notes = Vec::new();
        if !src.hank_dir {
            notes.push(
                "no .hank/ directory here: run in the project root or pass --dir".to_string(),
            );
        }
        let status = match src.status.as_deref() {
            None => None,
            Some(text) => match schema::read_status(text) {
                Ok((status, note)) => {
                    notes.extend(note);
                    Some(status)
                }
                Err(note) => {
                    notes.push(note);
                    None
                }
            },
        };
        let all_events = src
            .events_tail
            .as_deref()
            .map(EventLine::parse_all)
            .unwrap_or_default();
        let (run_started_at, run_ended_at) = run_bounds(&all_events);
        let skip = all_events.len().saturating_sub(MAX_EVENTS);
        let events: Vec<EventLine> = all_events.into_iter().skip(skip).collect();
        let fix_plan = src.fix_plan.as_deref().map(plan_progress).or_else(|| {
            status
                .as_ref()
                .and_then(|s| s.get("fix_plan", |s| s.fix_plan))
        });
        Snapshot {
            project: src.project.clone(),
            hank_dir: src.hank_dir,
            status,
            stale: false,
            notes,
            run_started_at,
            run_ended_at,
            events,
            breaker_history: src
                .state
                .as_deref()
                .map(breaker_history)
                .unwrap_or_default(),
            fix_plan,
            live_tail: src.live_tail.as_deref().map(live_lines).unwrap_or_default(),
            fleet: src
                .fleet
                .as_deref()
                .and_then(|t| serde_json::from_str(t).ok()),
        }
    }

    /// The last loop: `status.json`'s `last_loop`, completed with the newest
    /// `agent_finished` event of the same loop (which also carries `error_kind`).
    #[must_use]
    pub(crate) fn last_loop(&self) -> Option<Lenient<schema::LastLoop>> {
        let from_event = self
            .events
            .iter()
            .rev()
            .find(|e| e.kind() == "agent_finished")
            .and_then(EventLine::as_last_loop);
        let from_status = self
            .status
            .as_ref()
            .and_then(|s| s.raw.get("last_loop"))
            .and_then(read_lenient::<schema::LastLoop>);
        match (from_status, from_event) {
            (Some(mut l), Some(e)) => {
                let number = last_loop_number(&l);
                if (number == last_loop_number(&e) || number.is_none())
                    && l.text("error_kind", |l| l.error_kind).is_none()
                    && let Some(kind) = e.raw.get("error_kind").filter(|k| !k.is_null())
                {
                    l.value.error_kind = e.value.error_kind;
                    if e.has("error_kind") {
                        l.present.insert("error_kind".into());
                    }
                    l.raw.insert("error_kind".into(), kind.clone());
                }
                Some(l)
            }
            (Some(l), None) => Some(l),
            (None, e) => e,
        }
    }

    /// When the status is unusable this time (a half-written file from an older writer),
    /// keeps the last good status from `previous`, with a note saying so.
    #[must_use]
    pub(crate) fn keep_last_good(mut self, previous: &Snapshot) -> Snapshot {
        if self.status.is_none()
            && self.hank_dir
            && !self.notes.is_empty()
            && let Some(old) = &previous.status
        {
            self.status = Some(old.clone());
            self.notes
                .push("showing the last readable status.json".to_string());
        }
        self
    }
}

/// The loop number of a `last_loop` (written `number`, or `loop` in an event).
#[must_use]
pub(crate) fn last_loop_number(l: &Lenient<schema::LastLoop>) -> Option<u64> {
    l.get("number", |l| l.number)
        .or_else(|| l.get("loop", |l| l.number))
}

/// The files of a project the monitor reads.
#[derive(Debug, Clone)]
pub(crate) struct Paths {
    pub root: PathBuf,
    pub hank: PathBuf,
    pub status: PathBuf,
    pub events: PathBuf,
    pub live: PathBuf,
    pub state: PathBuf,
    pub fix_plan: PathBuf,
    pub fleet: PathBuf,
}

impl Paths {
    /// The paths under `root`.
    #[must_use]
    pub(crate) fn new(root: &Path) -> Paths {
        let hank = root.join(".hank");
        Paths {
            root: root.to_path_buf(),
            status: hank.join("status.json"),
            events: hank.join("events.jsonl"),
            live: hank.join("live.log"),
            state: hank.join("state.json"),
            fix_plan: hank.join("fix_plan.md"),
            fleet: hank.join("fleet.json"),
            hank,
        }
    }

    fn watched(&self) -> [&Path; 6] {
        [
            &self.status,
            &self.events,
            &self.live,
            &self.state,
            &self.fix_plan,
            &self.fleet,
        ]
    }
}

/// Reads at most the last `max` bytes of a file as text (invalid UTF-8 replaced). When the
/// read starts inside the file, the first (partial) line is dropped. `None` when the file
/// does not exist or cannot be read.
#[must_use]
pub(crate) fn read_tail(path: &Path, max: u64) -> Option<String> {
    // Only a regular file: a FIFO or a device put there by the agent must not hang the view.
    let mut file = crate::fsread::open_regular(path, crate::fsread::Follow::Yes).ok()?;
    let len = file.metadata().ok()?.len();
    let start = len.saturating_sub(max);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        Some(
            text.split_once('\n')
                .map(|(_, rest)| rest.to_string())
                .unwrap_or_default(),
        )
    } else {
        Some(text)
    }
}

fn read_small(path: &Path) -> Option<String> {
    // status.json, state.json and fix_plan.md are small; cap them anyway.
    read_tail(path, 4 * 1024 * 1024)
}

/// The last `hank verify` recorded in state.json (`None`: none, or the state unreadable).
pub(crate) fn last_manual_check(
    store: &crate::store::Store,
) -> Option<crate::policy::verify::CheckResult> {
    store
        .read_state()
        .ok()?
        .last_verification
        .filter(|r| r.kind == crate::policy::verify::CheckKind::Manual)
}

/// status.json with `verification.last` set to the manual check `r` when the status has no
/// check or an older one (its `command` set when the status has none). (pure)
#[must_use]
pub(crate) fn with_last_check(
    mut v: serde_json::Value,
    r: &crate::policy::verify::CheckResult,
) -> serde_json::Value {
    use serde_json::Value;
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    let Ok(record) = serde_json::to_value(r) else {
        return v;
    };
    let ver = obj
        .entry("verification")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if ver.is_null() {
        *ver = Value::Object(serde_json::Map::new());
    }
    let Some(ver) = ver.as_object_mut() else {
        return v;
    };
    let newer = match ver
        .get("last")
        .and_then(|l| l.get("at"))
        .and_then(Value::as_str)
    {
        Some(at) => at.parse::<jiff::Timestamp>().map_or(true, |at| at < r.at),
        None => true,
    };
    if newer {
        ver.insert("last".into(), record);
        if ver
            .get("command")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            ver.insert("command".into(), Value::from(r.command.clone()));
        }
    }
    v
}

/// Reads the project's files and builds a snapshot. Never fails.
#[must_use]
pub(crate) fn load(paths: &Paths) -> Snapshot {
    let project = paths.root.file_name().map_or_else(
        || paths.root.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    // A `hank verify` newer than the status's last check is the last check, as `hank status`
    // shows it: never "not run yet".
    let store = crate::store::Store::new(&paths.root);
    let mut status = read_small(&paths.status);
    if let Some(r) = last_manual_check(&store)
        && let Some(v) = status
            .as_deref()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
        && let Ok(t) = serde_json::to_string(&with_last_check(v, &r))
    {
        status = Some(t);
    }
    let src = Sources {
        project,
        hank_dir: paths.hank.is_dir(),
        status,
        events_tail: read_tail(&paths.events, EVENTS_TAIL_BYTES),
        live_tail: read_tail(&paths.live, LIVE_TAIL_BYTES),
        state: read_small(&paths.state),
        fix_plan: read_small(&paths.fix_plan),
        fleet: read_small(&paths.fleet),
    };
    let mut snap = Snapshot::from_sources(&src);
    snap.mark_stale(store.loop_running());
    snap.mark_fleet(crate::fleet::control::fleet_running(&paths.root));
    snap
}

/// The state shown for a status that says "active" while no loop holds the lock.
pub(crate) const NOT_RUNNING: &str = "not running";

/// Whether a `state` says a loop is active.
#[must_use]
pub(crate) fn is_active(state: Option<&str>) -> bool {
    matches!(state, Some("starting" | "running" | "waiting"))
}

/// The note for a status whose loop is gone (killed, crashed, machine restarted).
#[must_use]
pub(crate) fn stale_note(updated_at: Option<Timestamp>) -> String {
    stale_note_in(updated_at, &jiff::tz::TimeZone::system())
}

/// [`stale_note`] with the last update shown in `tz` (pure).
#[must_use]
pub(crate) fn stale_note_in(updated_at: Option<Timestamp>, tz: &jiff::tz::TimeZone) -> String {
    let last = updated_at.map_or_else(
        || "unknown".to_string(),
        |t| {
            format!(
                "{} ({})",
                t.to_zoned(tz.clone()).strftime("%a %H:%M %Z"),
                t.to_zoned(jiff::tz::TimeZone::UTC).strftime("%H:%M UTC")
            )
        },
    );
    format!("not running — the loop ended without a final status (last update {last})")
}

/// Sizes and modification times of the watched files: when it changes, reload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Fingerprint(Vec<Option<(u64, Option<std::time::SystemTime>)>>);

impl Fingerprint {
    /// Stats the watched files (five `stat` calls, no reads).
    #[must_use]
    pub(crate) fn read(paths: &Paths) -> Fingerprint {
        Fingerprint(
            paths
                .watched()
                .iter()
                .map(|p| {
                    std::fs::metadata(p)
                        .ok()
                        .map(|m| (m.len(), m.modified().ok()))
                })
                .collect(),
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    pub(crate) const FULL_STATUS: &str = r#"{
      "schema_version": 1, "updated_at": "2026-11-22T10:00:00Z", "state": "running",
      "loop_count": 4, "calls_in_window": 4, "max_calls_per_hour": 100, "next_call_at": null,
      "tokens_in_window": 12000, "max_tokens_per_hour": 0, "wait_reason": null,
      "waiting_until": null, "circuit_state": "CLOSED", "circuit_reason": "progress",
      "session_id": "abc", "total_cost_usd": 0.42,
      "total_tokens": {"input": 10, "output": 20, "cache_read": 30, "cache_creation": 40},
      "fix_plan": {"done": 3, "total": 7},
      "last_loop": {"number": 4, "outcome": "success", "exit_signal": false,
                    "status": "IN_PROGRESS", "work_type": "IMPLEMENTATION", "files_changed": 2,
                    "recommendation": "next", "cost_usd": 0.11, "duration_ms": 61000},
      "exit_reason": null, "exit_code": null
    }"#;

    #[test]
    fn full_status_parses_every_field() {
        let (s, note) = schema::read_status(FULL_STATUS).unwrap();
        assert_eq!(note, None);
        assert_eq!(s.text("state", |s| s.state).as_deref(), Some("running"));
        assert_eq!(
            s.get("updated_at", |s| s.updated_at),
            Some(ts("2026-11-22T10:00:00Z"))
        );
        assert_eq!(s.get("loop_count", |s| s.loop_count), Some(4));
        assert_eq!(
            s.get("max_calls_per_hour", |s| s.max_calls_per_hour),
            Some(100)
        );
        assert_eq!(s.get("next_call_at", |s| s.next_call_at).flatten(), None);
        assert_eq!(s.get("total_cost_usd", |s| s.total_cost_usd), Some(0.42));
        assert_eq!(
            s.get("total_tokens", |s| s.total_tokens.cache_creation),
            Some(40)
        );
        assert_eq!(
            s.get("fix_plan", |s| s.fix_plan),
            Some(PlanCounts { done: 3, total: 7 })
        );
        let last = s.value.last_loop.unwrap();
        assert_eq!(last.number, 4);
        assert_eq!(last.duration_ms, 61000);
        assert!(!last.exit_signal);
    }

    #[test]
    fn status_reading_is_tolerant() {
        // (input, parses, note contains)
        let cases: &[(&str, bool, &str)] = &[
            ("", false, "empty"),
            ("   \n", false, "empty"),
            (
                r#"{"schema_version":1,"state":"runn"#,
                false,
                "not valid JSON",
            ),
            ("[1,2]", false, "not a JSON object"),
            ("null", false, "not a JSON object"),
            (r#"{"state":"running"}"#, true, "no schema_version"),
            (
                r#"{"schema_version":3,"state":"running","new":{}}"#,
                true,
                "schema_version 3",
            ),
            (
                r#"{"schema_version":1,"loop_count":"four","updated_at":"yesterday"}"#,
                true,
                "",
            ),
        ];
        for (input, ok, note) in cases {
            match schema::read_status(input) {
                Ok((_, n)) => {
                    assert!(ok, "{input:?} should not parse");
                    assert!(n.unwrap_or_default().contains(note), "{input:?}");
                }
                Err(n) => {
                    assert!(!ok, "{input:?} should parse: {n}");
                    assert!(n.contains(note), "{input:?}: {n}");
                }
            }
        }
        let (s, _) = schema::read_status(
            r#"{"schema_version":1,"loop_count":"four","updated_at":"yesterday"}"#,
        )
        .unwrap();
        assert_eq!(
            (
                s.get("loop_count", |s| s.loop_count),
                s.get("updated_at", |s| s.updated_at)
            ),
            (None, None)
        );
        let (s, _) = schema::read_status(r#"{"schema_version":1.0,"loop_count":3.0}"#).unwrap();
        assert_eq!(
            (
                s.get("schema_version", |s| s.schema_version),
                s.get("loop_count", |s| s.loop_count)
            ),
            (Some(1), Some(3))
        );
    }

    #[test]
    fn events_skip_broken_lines() {
        let tail = concat!(
            "rt\":\"2026-11-22T09:00:00Z\"}\n",
            r#"{"schema_version":1,"type":"loop_started","at":"2026-11-22T09:00:01Z","loop":1}"#,
            "\n\n",
            "[1]\n",
            r#"{"no_type":true}"#,
            "\n",
            r#"{"schema_version":1,"type":"warning","at":"bad","message":"hi"}"#,
            "\n",
            r#"{"schema_version":1,"type":"agent_finished","at":"2026-11-22T09:0"#,
        );
        let events = EventLine::parse_all(tail);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].kind(), "loop_started");
        assert_eq!(events[0].u64("loop"), Some(1));
        assert_eq!(events[0].at(), Some(ts("2026-11-22T09:00:01Z")));
        assert_eq!(events[1].kind(), "warning");
        assert_eq!(events[1].at(), None);
        assert_eq!(events[1].str("message"), Some("hi"));
    }

    fn ev(kind: &str, at: &str) -> EventLine {
        EventLine::parse(format!(r#"{{"type":"{kind}","at":"{at}"}}"#).as_bytes()).unwrap()
    }

    #[test]
    fn run_bounds_find_the_newest_run() {
        let t = |h: u8| format!("2026-11-22T{h:02}:00:00Z");
        let cases: Vec<(Vec<EventLine>, Option<String>, Option<String>)> = vec![
            (vec![], None, None),
            (
                vec![ev("loop_started", &t(1)), ev("agent_finished", &t(2))],
                Some(t(1)),
                None,
            ),
            (
                vec![
                    ev("waiting", &t(1)),
                    ev("loop_started", &t(2)),
                    ev("exit", &t(3)),
                ],
                Some(t(2)),
                Some(t(3)),
            ),
            (
                vec![
                    ev("loop_started", &t(1)),
                    ev("exit", &t(2)),
                    ev("loop_started", &t(3)),
                    ev("loop_started", &t(4)),
                ],
                Some(t(3)),
                None,
            ),
            (
                vec![
                    ev("loop_started", &t(1)),
                    ev("exit", &t(2)),
                    ev("loop_started", &t(3)),
                    ev("exit", &t(4)),
                ],
                Some(t(3)),
                Some(t(4)),
            ),
            (
                vec![ev("exit", &t(1)), ev("waiting", &t(2))],
                Some(t(2)),
                None,
            ),
        ];
        for (events, start, end) in cases {
            let (s, e) = run_bounds(&events);
            assert_eq!(s, start.as_deref().map(ts), "{events:?}");
            assert_eq!(e, end.as_deref().map(ts), "{events:?}");
        }
    }

    #[test]
    fn breaker_history_is_tolerant_and_bounded() {
        assert!(breaker_history("").is_empty());
        assert!(breaker_history("{\"breaker\":{}}").is_empty());
        assert!(breaker_history("{\"breaker\":{\"history\":3}}").is_empty());
        let items: Vec<String> = (0..8)
            .map(|i| format!(r#"{{"at":"2026-11-22T0{i}:00:00Z","from":"CLOSED","to":"OPEN","reason":"r{i}"}}"#))
            .collect();
        let state = format!(r#"{{"breaker":{{"history":[{},7]}}}}"#, items.join(","));
        let h = breaker_history(&state);
        assert_eq!(h.len(), MAX_TRANSITIONS);
        assert_eq!(h[0].reason, "r3");
        assert_eq!(h[4].reason, "r7");
    }

    #[test]
    fn control_sequences_are_removed() {
        let cases = [
            ("plain", "plain"),
            ("\u{1b}[31mred\u{1b}[0m", "red"),
            ("a\u{1b}]0;title\u{7}b", "ab"),
            ("a\u{1b}]8;;http://x\u{1b}\\link", "alink"),
            ("tab\there", "tab    here"),
            ("bell\u{7}\u{0}", "bell"),
            ("\u{1b}", ""),
            ("\u{1b}[", ""),
            ("ünïcode ✓", "ünïcode ✓"),
        ];
        for (input, want) in cases {
            assert_eq!(clean_line(input), want, "{input:?}");
        }
        assert_eq!(live_lines("50%\r100%\ndone\r\n"), vec!["100%", "done"]);
        let many: String = (0..300).map(|i| format!("line {i}\n")).collect();
        let lines = live_lines(&many);
        assert_eq!(lines.len(), MAX_LIVE_LINES);
        assert_eq!(lines[0], "line 100");
    }

    #[test]
    fn snapshot_from_sources_combines_files() {
        let src = Sources {
            project: "demo".into(),
            hank_dir: true,
            status: Some(FULL_STATUS.into()),
            events_tail: Some(
                concat!(
                    r#"{"type":"loop_started","at":"2026-11-22T09:00:00Z","loop":4}"#,
                    "\n",
                    r#"{"type":"agent_finished","at":"2026-11-22T09:01:00Z","loop":4,"outcome":"agent_error","error_kind":"overloaded"}"#,
                    "\n"
                )
                .into(),
            ),
            live_tail: Some("hello\n".into()),
            state: None,
            fix_plan: Some("- [x] a\n- [ ] b\n## Optional\n- [ ] c\n".into()),
            fleet: None,
        };
        let snap = Snapshot::from_sources(&src);
        assert!(snap.notes.is_empty(), "{:?}", snap.notes);
        assert_eq!(snap.fix_plan, Some(PlanCounts { done: 1, total: 3 }));
        assert_eq!(snap.run_started_at, Some(ts("2026-11-22T09:00:00Z")));
        assert_eq!(snap.live_tail, vec!["hello"]);
        let last = snap.last_loop().unwrap();
        assert_eq!(
            last.text("outcome", |l| l.outcome).as_deref(),
            Some("success"),
            "status wins"
        );
        assert_eq!(
            last.text("error_kind", |l| l.error_kind).as_deref(),
            Some("overloaded"),
            "event completes"
        );

        let empty = Snapshot::from_sources(&Sources {
            project: "x".into(),
            ..Sources::default()
        });
        assert!(empty.status.is_none());
        assert_eq!(empty.notes.len(), 1);
        assert_eq!(empty.last_loop(), None);
    }

    #[test]
    fn a_half_written_status_keeps_the_last_good_one() {
        let good = Snapshot::from_sources(&Sources {
            project: "x".into(),
            hank_dir: true,
            status: Some(FULL_STATUS.into()),
            ..Sources::default()
        });
        let broken = Snapshot::from_sources(&Sources {
            project: "x".into(),
            hank_dir: true,
            status: Some("{\"schema".into()),
            ..Sources::default()
        });
        let kept = broken.clone().keep_last_good(&good);
        assert_eq!(kept.status, good.status);
        assert_eq!(kept.notes.len(), 2);
        let missing = Snapshot::from_sources(&Sources {
            project: "x".into(),
            hank_dir: true,
            ..Sources::default()
        });
        assert_eq!(
            missing.keep_last_good(&good).status,
            None,
            "a deleted file is not kept"
        );
    }

    #[test]
    fn read_tail_drops_the_partial_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "first line\nsecond\nthird\n").unwrap();
        assert_eq!(
            read_tail(&path, 1000).unwrap(),
            "first line\nsecond\nthird\n"
        );
        assert_eq!(read_tail(&path, 10).unwrap(), "third\n");
        assert_eq!(read_tail(&dir.path().join("missing"), 10), None);
    }

    #[test]
    fn load_and_fingerprint_follow_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        std::fs::create_dir_all(root.join(".hank")).unwrap();
        let paths = Paths::new(&root);
        let before = Fingerprint::read(&paths);
        let snap = load(&paths);
        assert_eq!(snap.project, "proj");
        assert!(snap.hank_dir && snap.status.is_none() && snap.notes.is_empty());
        std::fs::write(&paths.status, FULL_STATUS).unwrap();
        assert_ne!(Fingerprint::read(&paths), before);
        assert_eq!(
            load(&paths)
                .status
                .and_then(|s| s.get("loop_count", |s| s.loop_count)),
            Some(4)
        );
    }

    /// The monitor's tolerant reader and the writer's schema (`crate::store::schema`) cannot
    /// drift apart: everything the loop writes is read back, field by field.
    #[test]
    fn reads_back_everything_the_schema_writes() {
        use crate::analysis::{ErrorKind, Outcome, Tokens};
        use crate::policy::breaker::CircuitState;
        use crate::policy::budget::WaitReason;
        use crate::store::schema::{self, AgentFinished, EventKind};

        let at = ts("2026-11-22T10:00:00Z");
        let written = schema::Status {
            schema_version: schema::STATUS_SCHEMA,
            updated_at: at,
            state: schema::RunState::Waiting,
            loop_count: 9,
            calls_in_window: 7,
            max_calls_per_hour: 100,
            next_call_at: Some(ts("2026-11-22T10:30:00Z")),
            tokens_in_window: 1234,
            max_tokens_per_hour: 5000,
            wait_reason: Some(WaitReason::UsageLimit),
            waiting_until: Some(ts("2026-11-22T11:00:00Z")),
            circuit_state: CircuitState::HalfOpen,
            circuit_reason: "no progress".into(),
            session_id: Some("s-1".into()),
            total_cost_usd: 1.25,
            estimated_cost_usd: 0.0,
            total_tokens: Tokens {
                input: 1,
                output: 2,
                cache_read: 3,
                cache_creation: 4,
            },
            fix_plan: schema::PlanCounts { done: 2, total: 5 },
            last_loop: Some(schema::LastLoop {
                number: 9,
                outcome: Outcome::AgentError,
                error_kind: Some(ErrorKind::UsageLimit),
                exit_signal: true,
                status: Some("IN_PROGRESS".into()),
                work_type: Some("TESTING".into()),
                files_changed: 3,
                recommendation: Some("go on".into()),
                cost_usd: 0.5,
                cost_estimated: false,
                duration_ms: 61000,
            }),
            exit_reason: Some(crate::exit::ExitReason::UsageLimit),
            exit_code: Some(3),
            pid: 42,
            agent: Some("codex".into()),
            agents_limited: std::collections::BTreeMap::new(),
            verification: None,
            usage_windows: [(
                "five_hour".to_string(),
                crate::policy::windows::WindowStatus {
                    utilization: Some(0.86),
                    resets_at: Some(ts("2026-11-22T12:00:00Z")),
                    status: Some("allowed_warning".into()),
                    limit_percent: Some(80),
                },
            )]
            .into(),
            delivery: None,
            questions: vec!["Which database?".into()],
            review: None,
            sandbox: Some("landlock: confined".into()),
            egress_denied: vec!["evil.example:443 at 2026-11-22T10:00:00Z".into()],
            sandbox_denied: Vec::new(),
            api_retry: None,
            exit_message: None,
        };
        let text = serde_json::to_string(&written).unwrap();
        let (r, note) = schema::read_status(&text).unwrap();
        assert_eq!(note, None);
        assert_eq!(
            r.get("schema_version", |s| s.schema_version),
            Some(schema::STATUS_SCHEMA)
        );
        assert_eq!(r.get("updated_at", |s| s.updated_at), Some(at));
        assert_eq!(r.text("state", |s| s.state).as_deref(), Some("waiting"));
        assert_eq!(r.get("loop_count", |s| s.loop_count), Some(9));
        assert_eq!(r.get("calls_in_window", |s| s.calls_in_window), Some(7));
        assert_eq!(
            r.get("max_calls_per_hour", |s| s.max_calls_per_hour),
            Some(100)
        );
        assert_eq!(
            r.get("next_call_at", |s| s.next_call_at).flatten(),
            written.next_call_at
        );
        assert_eq!(
            r.get("tokens_in_window", |s| s.tokens_in_window),
            Some(1234)
        );
        assert_eq!(
            r.get("max_tokens_per_hour", |s| s.max_tokens_per_hour),
            Some(5000)
        );
        assert_eq!(
            r.text("wait_reason", |s| s.wait_reason).as_deref(),
            Some("usage_limit")
        );
        assert_eq!(
            r.get("waiting_until", |s| s.waiting_until).flatten(),
            written.waiting_until
        );
        assert_eq!(
            r.text("circuit_state", |s| s.circuit_state).as_deref(),
            Some("HALF_OPEN")
        );
        assert_eq!(
            r.get("circuit_reason", |s| s.circuit_reason.clone())
                .as_deref(),
            Some("no progress")
        );
        assert_eq!(
            r.get("session_id", |s| s.session_id.clone())
                .flatten()
                .as_deref(),
            Some("s-1")
        );
        assert_eq!(r.get("total_cost_usd", |s| s.total_cost_usd), Some(1.25));
        let t = r.get("total_tokens", |s| s.total_tokens).unwrap();
        assert_eq!(
            (t.input, t.output, t.cache_read, t.cache_creation),
            (1, 2, 3, 4)
        );
        assert_eq!(
            r.get("fix_plan", |s| s.fix_plan),
            Some(PlanCounts { done: 2, total: 5 })
        );
        let snap = Snapshot::from_sources(&Sources {
            project: "p".into(),
            hank_dir: true,
            status: Some(text.clone()),
            ..Sources::default()
        });
        let l = snap.last_loop().unwrap();
        assert_eq!(last_loop_number(&l), Some(9));
        assert_eq!(
            l.text("outcome", |l| l.outcome).as_deref(),
            Some("agent_error")
        );
        assert_eq!(
            l.text("error_kind", |l| l.error_kind).as_deref(),
            Some("usage_limit")
        );
        assert_eq!(l.get("exit_signal", |l| l.exit_signal), Some(true));
        assert_eq!(
            l.get("status", |l| l.status.clone()).flatten().as_deref(),
            Some("IN_PROGRESS")
        );
        assert_eq!(
            l.get("work_type", |l| l.work_type.clone())
                .flatten()
                .as_deref(),
            Some("TESTING")
        );
        assert_eq!(l.get("files_changed", |l| l.files_changed), Some(3));
        assert_eq!(
            l.get("recommendation", |l| l.recommendation.clone())
                .flatten()
                .as_deref(),
            Some("go on")
        );
        assert_eq!(l.get("cost_usd", |l| l.cost_usd), Some(0.5));
        assert_eq!(l.get("duration_ms", |l| l.duration_ms), Some(61000));
        assert_eq!(
            r.text("exit_reason", |s| s.exit_reason).as_deref(),
            Some("usage_limit")
        );
        assert_eq!(r.get("exit_code", |s| s.exit_code).flatten(), Some(3));
        assert_eq!(
            r.get("usage_windows", |s| s.usage_windows.clone()),
            Some(written.usage_windows.clone())
        );
        assert_eq!(
            r.get("questions", |s| s.questions.clone()),
            Some(written.questions.clone())
        );

        // Every event kind the loop writes is read with its type, time and fields.
        let kinds = [
            EventKind::LoopStarted {
                number: 9,
                resume: true,
                context_bytes: 200,
                agent: None,
            },
            EventKind::AgentFinished(Box::new(AgentFinished {
                number: 9,
                outcome: Outcome::Success,
                files_changed: 2,
                ..AgentFinished::default()
            })),
            EventKind::CircuitChanged {
                from: CircuitState::Closed,
                to: CircuitState::Open,
                reason: "r".into(),
            },
            EventKind::Waiting {
                reason: WaitReason::Backoff,
                until: at,
            },
            EventKind::Warning {
                message: "w".into(),
            },
            EventKind::Exit {
                exit_reason: Some(crate::exit::ExitReason::MaxLoops),
                exit_code: 3,
                message: "m".into(),
                verified: None,
            },
        ];
        let tail: String = kinds
            .iter()
            .map(|k| schema::Event::new(at, k.clone()).to_line() + "\n")
            .collect();
        let read = EventLine::parse_all(&tail);
        let names: Vec<&str> = read.iter().map(EventLine::kind).collect();
        assert_eq!(
            names,
            [
                "loop_started",
                "agent_finished",
                "circuit_changed",
                "waiting",
                "warning",
                "exit"
            ]
        );
        assert!(read.iter().all(|e| e.at() == Some(at) && e.event.is_some()));
        assert_eq!(read[0].u64("loop"), Some(9));
        assert_eq!(read[1].u64("files_changed"), Some(2));
        assert_eq!(read[2].str("to"), Some("OPEN"));
        assert_eq!(read[3].time("until"), Some(at));
        assert_eq!(read[4].str("message"), Some("w"));
        assert_eq!(read[5].str("exit_reason"), Some("max_loops"));

        // state.json's breaker history, as the breaker writes it.
        let mut state = schema::State::default();
        state.breaker.reset(at, "manual");
        state
            .breaker
            .history
            .push(crate::policy::breaker::Transition {
                at,
                from: CircuitState::Open,
                to: CircuitState::Closed,
                reason: "manual".into(),
            });
        let h = breaker_history(&serde_json::to_string(&state).unwrap());
        let last = h.last().unwrap();
        assert_eq!(
            (last.at, last.from, last.to, last.reason.as_str()),
            (at, CircuitState::Open, CircuitState::Closed, "manual")
        );
    }
}
