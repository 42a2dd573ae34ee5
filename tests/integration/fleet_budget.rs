//! `hank fleet` under one budget and visible: MAX_COST_USD over every task's calls, usage-window
//! readings shared by every run of the user (a reading one task saw defers the next task),
//! `hank report --fleet`, `hank fleet --json`, the fleet's `.hankrc` keys.

use std::time::Duration;

use serde_json::Value;

use crate::fleet::{fleet_json, fleet_status, project_doing};
use crate::support::{
    Project, assert_contains, assert_contains_all, poll, stderr, stdout, wait_with_timeout,
};

/// The fake agent's work in a task worktree: tick the first open item, write `<slug>.txt`,
/// note the call (one appended line per call: safe with parallel agents).
const WORK: &str = r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
n=$(basename "$PWD"); echo "$n" >> "$n.txt"
echo "$n" >> "$FAKE_CLAUDE_DIR/log"
"#;

fn project(plan: &str) -> Project {
    project_doing(plan, WORK)
}

fn calls(p: &Project) -> usize {
    crate::fleet::calls(p).len()
}

/// Every task of `hank fleet status --json` is merged.
#[track_caller]
fn assert_all_merged(p: &Project) {
    let st = fleet_status(p);
    assert!(
        st["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "merged"),
        "{st}"
    );
}

/// A plain answer (json) that costs `usd`.
fn costing(usd: f64) -> String {
    let mut v: Value = serde_json::from_str(&crate::support::result_json(
        "IN_PROGRESS",
        "IMPLEMENTATION",
        false,
        "Worked.",
    ))
    .unwrap();
    v["total_cost_usd"] = usd.into();
    v.to_string()
}

/// Two agents, $1 a call, MAX_COST_USD 3: exactly three calls in the whole fleet (a task
/// reaching its spawn while another's call is in flight counts that call), exit 3; the fleet's
/// status shows the shared cost, and `hank report --fleet` gives each task's loops and items.
#[test]
fn the_cost_cap_holds_for_the_whole_fleet_at_the_cap_exactly() {
    let p =
        project("## Left\n- [ ] l1\n- [ ] l2\n- [ ] l3\n## Right\n- [ ] r1\n- [ ] r2\n- [ ] r3\n");
    p.fake("response", &costing(1.0)).fake("sleep", "0.3");
    let o = p.run(&["fleet", "--agents", "2", "--max-cost", "3"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(calls(&p), 3, "{}", stderr(&o));
    let st = fleet_status(&p);
    assert!(
        (st["cost_usd"].as_f64().unwrap() - 3.0).abs() < 1e-9,
        "{st}"
    );
    assert_eq!(st["max_cost_usd"], 3.0);
    let tasks = st["tasks"].as_array().unwrap();
    assert!(
        tasks.iter().all(|t| t["state"] == "pending"),
        "stopped at the cap, resumable: {st}"
    );
    let text = stdout(&p.run(&["fleet", "status"]));
    assert!(text.contains("cost $3.00 of $3.00"), "{text}");
    let text = stdout(&p.run(&["monitor", "--once"]));
    assert!(
        text.contains("$3.00 of $3.00 · 360 token(s) this hour"),
        "{text}"
    );

    // The report across the fleet: per task, per item, and the fleet's total.
    let o = p.run(&["report", "--fleet", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let per_task: Vec<u64> = r["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["totals"]["loops"].as_u64().unwrap())
        .collect();
    assert_eq!(per_task.iter().sum::<u64>(), 3, "{r}");
    assert_eq!(r["fleet"]["totals"]["loops"], 3, "{r}");
    assert!((r["fleet"]["totals"]["cost_usd"].as_f64().unwrap() - 3.0).abs() < 1e-9);
    let items: Vec<&str> = r["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["items"].as_array().unwrap())
        .map(|i| i["item"].as_str().unwrap())
        .collect();
    assert!(items.contains(&"l1") && items.contains(&"r1"), "{r}");
    let text = stdout(&p.run(&["report", "--fleet"]));
    assert_contains_all(&text, &["── task Left", "── the whole fleet"]);
}

/// A usage-window reading one run saw is known to every other run of the same user: a plain
/// `hank run` in another project whose agent reported five_hour at 90 % stops this project's
/// run at its MAX_WINDOW_PERCENT gate before any call.
#[test]
fn a_window_reading_from_another_run_of_the_user_stops_this_run() {
    let other = Project::new(&["x"]);
    let reset = jiff::Timestamp::now().as_second() + 3600;
    other.fake(
        "response",
        &crate::windows::stream(&[("five_hour", 0.9, reset)], 0.01, "go on"),
    );
    let o = other.run(&["--max-loops", "1"]);
    assert_eq!(other.calls(), 1, "{}", stderr(&o));

    let p = Project::new(&["a"]);
    let o = p
        .cmd()
        .env("HOME", &other.home)
        .args([
            "--max-window-percent",
            "five_hour=80",
            "--on-usage-limit",
            "exit",
        ])
        .output()
        .unwrap();
    assert_eq!(p.calls(), 0, "{}", stderr(&o));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "usage_window", "{}", stderr(&o));
}

/// A reading from one task defers the next: Alpha's agent reports five_hour at 85 % (limit
/// 80 %, reset in a few seconds); Beta (after Alpha) is held — `waiting`, the window and the
/// reason in its message and in `held` — until the window resets, then runs and merges. The
/// `--json` stream carries the fleet's events and each task's own, with its name.
#[test]
#[ignore = "slow: cargo test -- --ignored (.ci/run runs them), or cargo nextest run --run-ignored all"]
fn a_window_reading_from_one_task_defers_the_next_until_its_reset() {
    let p = project("## Alpha\n- [ ] a1\n## Beta (after: Alpha)\n- [ ] b1\n");
    let reset = jiff::Timestamp::now().as_second() + 6;
    p.fake(
        "response-1",
        &crate::windows::stream(&[("five_hour", 0.85, reset)], 0.01, "go on"),
    )
    .fake(
        "response-2",
        &crate::windows::stream(&[("five_hour", 0.05, reset + 18_000)], 0.01, "go on"),
    );
    let child = p.spawn(&[
        "fleet",
        "--json",
        "--agents",
        "2",
        "--max-window-percent",
        "five_hour=80",
    ]);
    let seen_held = poll(Duration::from_secs(30), || {
        let v = fleet_json(&p);
        let beta = v["tasks"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == "Beta"))?;
        (beta["state"] == "waiting").then(|| v.clone())
    });
    let o = wait_with_timeout(child, Duration::from_secs(60));
    let held = seen_held.unwrap_or_else(|| panic!("Beta never waited: {}", stderr(&o)));
    let beta = held["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Beta")
        .unwrap();
    let msg = beta["message"].as_str().unwrap();
    assert!(msg.contains("five_hour") && msg.contains("85%"), "{held}");
    assert!(
        held["held"].as_str().unwrap().contains("five_hour"),
        "{held}"
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(calls(&p), 2);
    assert_all_merged(&p);
    // `--json`: fleet events and the tasks' own events, each with its task.
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let kind = |v: &Value| v["type"].as_str().unwrap_or_default().to_string();
    assert!(
        lines
            .iter()
            .any(|v| kind(v) == "fleet_task" && v["task"] == "Beta" && v["state"] == "waiting"),
        "{lines:?}"
    );
    for task in ["Alpha", "Beta"] {
        assert!(
            lines
                .iter()
                .any(|v| kind(v) == "agent_finished" && v["task"] == task),
            "{task}: {lines:?}"
        );
    }
}

/// FLEET_MIN_FREE_MEMORY and MAX_MERGE_ATTEMPTS are `.hankrc` keys: a bad value is refused
/// naming the file and the key, before anything runs; a flag still wins over the file.
#[test]
fn the_fleets_hankrc_keys_are_read_and_checked() {
    let p = project("## T1\n- [ ] one\n");
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nMAX_MERGE_ATTEMPTS=0\n");
    let o = p.run(&["fleet", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(".hankrc") && err.contains("MAX_MERGE_ATTEMPTS"),
        "{err}"
    );
    assert_eq!(calls(&p), 0);

    p.hankrc("RETRY_BACKOFF_SECONDS=0\nFLEET_MIN_FREE_MEMORY=lots\n");
    let o = p.run(&["fleet", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_contains(&stderr(&o), "FLEET_MIN_FREE_MEMORY");

    // Valid keys are taken; a bad flag is refused naming the flag.
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nFLEET_MIN_FREE_MEMORY=2G\nMAX_MERGE_ATTEMPTS=3\n");
    let o = p.run(&["fleet", "--max-merge-attempts", "zero", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_contains(&stderr(&o), "--max-merge-attempts");
    let o = p.run(&["fleet", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Supervision goes on while a merge runs: A's merge check takes 3 s (only in the integration
/// worktree); B's run ends meanwhile and the fleet records it (`verifying`, waiting for its
/// merge) while A is still `merging` — the supervisor was not stuck in git or the check.
#[test]
#[ignore = "slow: cargo test -- --ignored (.ci/run runs them), or cargo nextest run --run-ignored all"]
fn a_slow_merge_does_not_stall_the_supervision_of_other_tasks() {
    let p = project("## A\n- [ ] a\n## B\n- [ ] b\n");
    // The call of the second task (whichever starts second) takes a second.
    p.fake("sleep-2", "1");
    let check = r#"case "$PWD" in *_integration*) sleep 3;; esac"#;
    let child = p.spawn(&["fleet", "--agents", "2", "--verify", check]);
    let overlap = poll(Duration::from_secs(40), || {
        let v = fleet_json(&p);
        let states: Vec<String> = v["tasks"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["state"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default();
        let both = states.iter().any(|s| s == "merging") && states.iter().any(|s| s == "verifying");
        both.then_some(v)
    });
    let o = wait_with_timeout(child, Duration::from_secs(60));
    assert!(
        overlap.is_some(),
        "a task's end was not seen during a merge: {}",
        stderr(&o)
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_all_merged(&p);
}
