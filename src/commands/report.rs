//! `hank report [--json] [--since RUN|DATE]`: what each fix_plan item cost, from
//! `.hank/events.jsonl` (the `agent_finished` events; attribution in
//! [`crate::policy::receipts`]).
//!
//! Runs are numbered from 1 in the order of the event file: a run ends with its `exit`
//! event, and the next event starts the next run. `--fleet`: the same per task of the last
//! `hank fleet`, then for the whole fleet.

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde::Serialize;

use crate::cli;
use crate::error::{HankError, Result};
use crate::exit;
use crate::policy::receipts::{self, LoopCost, Receipts};

use super::view::{Since, read_events, render};
use super::{out, project_dir, require_hank_dir};

/// Parses `--since`: a run number, a date (`2026-11-24`, midnight in `tz`) or an RFC 3339
/// time.
pub(crate) fn parse_since(text: &str, tz: &TimeZone) -> Result<Since> {
    let t = text.trim();
    if let Ok(n) = t.parse::<u64>() {
        if n == 0 {
            return Err(HankError::usage(
                "--since: runs are numbered from 1 (got 0)".to_string(),
            ));
        }
        return Ok(Since::Run(n));
    }
    if let Ok(at) = t.parse::<Timestamp>() {
        return Ok(Since::Time(at));
    }
    if let Ok(d) = t.parse::<Date>()
        && let Ok(z) = d.to_zoned(tz.clone())
    {
        return Ok(Since::Time(z.timestamp()));
    }
    Err(HankError::usage(format!(
        "--since: expected a run number (1, 2, …), a date (2026-11-24) or an RFC 3339 time (2026-11-24T09:00:00Z), got `{t}`"
    )))
}

/// The `--json` report.
#[derive(Debug, Serialize)]
struct JsonReport<'a> {
    /// Runs in the event file.
    runs: u64,
    /// The first run reported (absent with a date).
    #[serde(skip_serializing_if = "Option::is_none")]
    since_run: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since_time: Option<Timestamp>,
    first_loop_at: Option<Timestamp>,
    last_loop_at: Option<Timestamp>,
    /// The review rounds' minor findings (not sent back to the agent), oldest first.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    review_minors: &'a [String],
    #[serde(flatten)]
    receipts: &'a Receipts,
}

/// `hank report`.
pub(crate) fn run(args: &cli::ReportArgs) -> Result<u8> {
    let dir = project_dir()?;
    let store = require_hank_dir(&dir)?;
    let tz = TimeZone::system();
    let since = match &args.since {
        Some(s) => parse_since(s, &tz)?,
        None => Since::All,
    };
    if args.fleet {
        return fleet_report(&dir, args.json, since);
    }
    // Only a regular file is read: a FIFO or device planted there is an error naming it.
    let (chosen, runs, minors) = chosen_events(&store.path(crate::store::HankFile::Events), since)?;
    let r = receipts::attribute(&chosen);
    let first = chosen.iter().filter_map(|l| l.at).min();
    let last = chosen.iter().filter_map(|l| l.at).max();
    if args.json {
        let report = JsonReport {
            runs,
            since_run: match since {
                Since::Run(n) => Some(n),
                _ => None,
            },
            since_time: match since {
                Since::Time(t) => Some(t),
                _ => None,
            },
            first_loop_at: first,
            last_loop_at: last,
            review_minors: &minors,
            receipts: &r,
        };
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| HankError::Internal(format!("report JSON: {e}")))?;
        out(&format!("{text}\n"))?;
        return Ok(exit::OK);
    }
    let mut text = render(&r, runs, since, first, last);
    text.push_str(&render_minors(&minors));
    out(&text)?;
    Ok(exit::OK)
}

/// One task of `hank report --fleet --json`.
#[derive(Debug, Serialize)]
struct FleetTaskReport {
    name: String,
    state: &'static str,
    branch: String,
    /// Runs of the task (its `hank run`s: a resumed task has several).
    runs: u64,
    #[serde(flatten)]
    receipts: Receipts,
}

/// `hank report --fleet --json`.
#[derive(Debug, Serialize)]
struct FleetReport {
    into: String,
    tasks: Vec<FleetTaskReport>,
    /// Every task's loops together.
    fleet: Receipts,
}

/// The loops of one event file chosen by `since` (a missing file has none; anything but a
/// regular file is an error naming it).
fn chosen_loops(path: &std::path::Path, since: Since) -> Result<(Vec<LoopCost>, u64)> {
    chosen_events(path, since).map(|(loops, runs, _)| (loops, runs))
}

/// [`chosen_loops`], and the minor review findings of the same range (their lines).
fn chosen_events(
    path: &std::path::Path,
    since: Since,
) -> Result<(Vec<LoopCost>, u64, Vec<String>)> {
    let (loops, runs, minors) = match crate::fsread::open_regular(path, crate::fsread::Follow::No) {
        Ok(f) => read_events(std::io::BufReader::new(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), 0, Vec::new()),
        Err(e) => return Err(HankError::io("failed to read", path, e)),
    };
    let chosen = |run: u64, at: Option<Timestamp>| match since {
        Since::All => true,
        Since::Run(n) => run >= n,
        Since::Time(t) => at.is_some_and(|at| at >= t),
    };
    let loops = (loops.into_iter())
        .filter(|(run, l)| chosen(*run, l.at))
        .map(|(_, l)| l)
        .collect();
    let minors = (minors.into_iter())
        .filter(|(run, at, _)| chosen(*run, Some(*at)))
        .map(|(_, _, line)| line)
        .collect();
    Ok((loops, runs, minors))
}

/// `hank report --fleet`: each task of the fleet (`.hank/fleet.json`) from the events its
/// runs wrote, which the fleet keeps in the per-user folder
/// ([`crate::fleet::events::kept`]); then the fleet as a whole.
fn fleet_report(dir: &std::path::Path, json: bool, since: Since) -> Result<u8> {
    let Some(file) = crate::fleet::read(dir)? else {
        return Err(HankError::usage_hint(
            format!(
                "no fleet has run in {} (no .hank/fleet.json)",
                dir.display()
            ),
            "`hank report` without --fleet reports this checkout's own runs",
        ));
    };
    let paths = crate::fleet::Paths::of(dir)?;
    let mut all: Vec<LoopCost> = Vec::new();
    let mut tasks = Vec::new();
    for t in &file.tasks {
        let slug = t
            .branch
            .strip_prefix("hank/")
            .map_or_else(|| crate::policy::fleet::slug(&t.name), ToString::to_string);
        let (loops, runs) = chosen_loops(&crate::fleet::events::kept(&paths, &slug), since)?;
        all.extend(loops.iter().cloned());
        tasks.push(FleetTaskReport {
            name: t.name.clone(),
            state: t.state().as_str(),
            branch: t.branch.clone(),
            runs,
            receipts: receipts::attribute(&loops),
        });
    }
    all.sort_by_key(|l| l.at);
    let fleet = receipts::attribute(&all);
    if json {
        let report = FleetReport {
            into: file.into.clone(),
            tasks,
            fleet,
        };
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| HankError::Internal(format!("report JSON: {e}")))?;
        out(&format!("{text}\n"))?;
        return Ok(exit::OK);
    }
    let mut text = format!(
        "hank report · fleet into {} · {} task(s)\n",
        crate::sanitize::line(&file.into),
        tasks.len()
    );
    for t in &tasks {
        text.push_str(&format!(
            "\n── task {} · {} · {}\n",
            crate::sanitize::line(&t.name),
            t.state,
            crate::sanitize::line(&t.branch)
        ));
        let first = None;
        let last = None;
        text.push_str(&render(&t.receipts, t.runs, since, first, last));
    }
    text.push_str("\n── the whole fleet\n");
    let first = all.iter().filter_map(|l| l.at).min();
    let last = all.iter().filter_map(|l| l.at).max();
    let runs = tasks.iter().map(|t| t.runs).sum();
    text.push_str(&render(&fleet, runs, since, first, last));
    out(&text)?;
    Ok(exit::OK)
}

/// The review rounds' minor findings under the table (nothing when there are none).
fn render_minors(minors: &[String]) -> String {
    if minors.is_empty() {
        return String::new();
    }
    let mut s =
        String::from("\nminor review findings (REVIEW_AGENT; not sent back to the agent):\n");
    for line in minors {
        let shown = crate::sanitize::line(line);
        s.push_str(&format!("  {}\n", crate::sanitize::cut_chars(&shown, 300)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::view::read_loops;

    #[test]
    fn since_accepts_runs_dates_and_times() {
        let oslo = TimeZone::get("Europe/Oslo").unwrap();
        assert_eq!(parse_since("3", &oslo).unwrap(), Since::Run(3));
        assert_eq!(
            parse_since("2026-11-24", &oslo).unwrap(),
            Since::Time("2026-11-23T23:00:00Z".parse().unwrap())
        );
        assert_eq!(
            parse_since("2026-11-24T09:00:00Z", &oslo).unwrap(),
            Since::Time("2026-11-24T09:00:00Z".parse().unwrap())
        );
        for bad in ["0", "yesterday", "2026-13-01", "-1", ""] {
            let e = parse_since(bad, &oslo).unwrap_err().to_string();
            assert!(e.contains("--since"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn runs_are_split_at_exit_events() {
        let events = r#"{"schema_version":2,"type":"loop_started","at":"2026-11-24T10:00:00Z","loop":1}
{"schema_version":2,"type":"agent_finished","at":"2026-11-24T10:01:00Z","loop":1,"cost_usd":0.5,"plan_items":["a"],"num_turns":3,"duration_ms":1000,"tokens":{"input":10,"output":5,"cache_read":0,"cache_creation":0}}
{"schema_version":2,"type":"exit","at":"2026-11-24T10:02:00Z","exit_reason":"max_loops","exit_code":3,"message":"m"}
not json
{"schema_version":1,"type":"agent_finished","at":"2026-11-24T11:01:00Z","loop":2,"cost_usd":0.25,"recommendation":"look around"}
{"schema_version":2,"type":"agent_finished","at":"2026-11-24T11:02:00Z","loop":3,"cost_usd":"broken","plan_items":["b","a"]}
"#;
        let (loops, runs) = read_loops(events.as_bytes());
        assert_eq!(runs, 2);
        let summary: Vec<(u64, u64, usize)> = loops
            .iter()
            .map(|(r, l)| (*r, l.number, l.items.len()))
            .collect();
        assert_eq!(summary, [(1, 1, 1), (2, 2, 0), (2, 3, 2)]);
        assert_eq!(loops[0].1.tokens, 15);
        assert_eq!(loops[0].1.calls, Some(3));
        assert_eq!(loops[2].1.cost_usd, 0.0, "an unreadable cost counts as 0");
        let (_, none) = read_loops("".as_bytes());
        assert_eq!(none, 0);
        let (_, one) =
            read_loops("{\"type\":\"exit\",\"at\":\"2026-11-24T10:02:00Z\"}\n".as_bytes());
        assert_eq!(one, 1);
    }

    #[test]
    fn minor_review_findings_are_listed_under_the_table_and_blockers_are_not() {
        let events = concat!(
            r#"{"schema_version":2,"type":"review","at":"2026-11-24T10:02:00Z","round":1,"max_rounds":3,"agent":"codex","loop":2,"verdict":"changes","blockers":1,"minors":1,"findings":[{"severity":"blocker","path":"src/a.rs","text":"no error handling"},{"severity":"minor","path":"README.md","text":"typo\u001b[31m here"}],"cost_usd":0.1,"tokens":40,"duration_ms":900}"#,
            "\n"
        );
        let (loops, runs, minors) = read_events(events.as_bytes());
        assert_eq!((loops.len(), runs), (1, 1));
        let lines: Vec<String> = minors.into_iter().map(|(_, _, l)| l).collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("round 1: [minor] README.md: typo"),
            "{lines:?}"
        );
        let shown = render_minors(&lines);
        assert!(shown.contains("minor review findings"), "{shown}");
        assert!(!shown.contains('\u{1b}'), "{shown:?}");
        assert!(!shown.contains("no error handling"), "{shown}");
        assert_eq!(render_minors(&[]), "");
    }

    #[test]
    fn review_calls_are_rows_of_their_own() {
        let events = r#"{"schema_version":2,"type":"agent_finished","at":"2026-11-24T10:01:00Z","loop":1,"cost_usd":0.5,"plan_items":["a"]}
{"schema_version":2,"type":"review","at":"2026-11-24T10:02:00Z","round":1,"max_rounds":3,"agent":"codex","loop":2,"verdict":"changes","blockers":1,"minors":0,"cost_usd":0.125,"tokens":40,"duration_ms":900}
"#;
        let (loops, runs) = read_loops(events.as_bytes());
        assert_eq!(runs, 1);
        assert_eq!(loops.len(), 2);
        let review = &loops[1].1;
        assert_eq!(review.number, 2);
        assert_eq!(review.items, ["review round 1 (codex): changes"]);
        assert_eq!((review.cost_usd, review.tokens), (0.125, 40));
    }
}
