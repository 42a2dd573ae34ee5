//! Usage windows (MAX_WINDOW_PERCENT) and cost receipts (`hank report`), driven by the fake
//! agent answering in stream-json with `rate_limit_event` lines as Claude Code 2.1.330 writes
//! them (see docs/claude-contract.md).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Project, TICK_ONE, stderr, stdout, wait_with_timeout};

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A stream-json answer: init, a `rate_limit_event` with `windows` (name, utilization,
/// resetsAt), the result (with a HANK_STATUS block).
pub(crate) fn stream(windows: &[(&str, f64, i64)], cost: f64, recommendation: &str) -> String {
    let mut unified = serde_json::Map::new();
    for (name, u, reset) in windows {
        let status = if *u >= 0.8 {
            "allowed_warning"
        } else {
            "allowed"
        };
        unified.insert(
            (*name).to_string(),
            json!({"utilization": u, "resetsAt": reset, "status": status}),
        );
    }
    let (rep, u, reset) = windows[0];
    let session = "5b1c0e0a-1111-2222-3333-444444444444";
    let body = format!(
        "Worked.\n\n---HANK_STATUS---\nSTATUS: IN_PROGRESS\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 1\nTESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: false\nRECOMMENDATION: {recommendation}\n---END_HANK_STATUS---"
    );
    let lines = [
        json!({"type": "system", "subtype": "init", "session_id": session, "model": "claude-fake", "tools": []}),
        json!({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resetsAt": reset,
               "rateLimitType": rep, "utilization": u, "isUsingOverage": false,
               "unifiedWindows": Value::Object(unified)}, "uuid": "u-1", "session_id": session}),
        json!({"type": "assistant", "message": {"model": "claude-fake", "content": [{"type": "text", "text": body}]}, "session_id": session}),
        json!({"type": "result", "subtype": "success", "is_error": false, "duration_ms": 1000,
               "num_turns": 3, "result": body, "session_id": session, "total_cost_usd": cost,
               "usage": {"input_tokens": 1000, "output_tokens": 200, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
               "permission_denials": []}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// A window at its limit: hank waits (state waiting, wait_reason usage_window, the window's
/// reset + margin), then calls again once the window has reset, and finishes the plan.
#[test]
fn a_window_at_its_limit_pauses_until_its_reset_then_resumes() {
    let p = Project::new(&["a", "b"]);
    let reset = now() + 2;
    p.fake(
        "response-1",
        &stream(
            &[
                ("five_hour", 0.85, reset),
                ("seven_day", 0.30, reset + 86_400),
            ],
            0.02,
            "go on",
        ),
    )
    .fake(
        "response-2",
        &stream(
            &[
                ("five_hour", 0.02, reset + 18_000),
                ("seven_day", 0.31, reset + 86_400),
            ],
            0.02,
            "go on",
        ),
    )
    .fake("effect.sh", TICK_ONE);
    let child = p.spawn(&["--max-window-percent", "five_hour=80,seven_day=90"]);
    let s = p.wait_status(Duration::from_secs(30), |s| s["state"] == "waiting");
    assert_eq!(s["wait_reason"], "usage_window", "{s}");
    let until: jiff::Timestamp = s["waiting_until"].as_str().unwrap().parse().unwrap();
    assert_eq!(until.as_second(), reset + 15, "{s}");
    assert_eq!(s["schema_version"], 2);
    let w = &s["usage_windows"]["five_hour"];
    assert_eq!(w["utilization"], 0.85, "{s}");
    assert_eq!(w["limit_percent"], 80);
    assert_eq!(w["status"], "allowed_warning");
    assert_eq!(s["usage_windows"]["seven_day"]["limit_percent"], 90);
    assert_eq!(p.calls(), 1);
    // The client was asked for stream-json although --live was not given.
    let argv = p.argv(1);
    assert!(
        argv.windows(2)
            .any(|a| a == ["--output-format", "stream-json"]),
        "{argv:?}"
    );
    assert!(argv.iter().any(|a| a == "--verbose"), "{argv:?}");
    let o = wait_with_timeout(child, Duration::from_secs(90));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.calls(), 2);
    let err = stderr(&o);
    assert!(
        err.contains("five_hour at 85% of its 80% limit") && err.contains("5-hour window, resets"),
        "{err}"
    );
    let waits = p.events_of("waiting");
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert_eq!(waits[0]["reason"], "usage_window");
    let done = p.status();
    assert_eq!(done["exit_reason"], "plan_complete");
    assert_eq!(done["usage_windows"]["five_hour"]["utilization"], 0.02);
    assert!(p.state().get("wait").is_none());
}

/// With ON_USAGE_LIMIT=exit a window at its limit stops the run with 3 (`usage_window`),
/// naming the window, before the next call.
#[test]
fn a_window_at_its_limit_exits_3_with_the_exit_policy() {
    let p = Project::new(&["a", "b"]);
    p.fake(
        "response",
        &stream(&[("seven_day", 0.93, now() + 3 * 86_400)], 0.02, "go on"),
    )
    .fake("effect.sh", TICK_ONE);
    p.run_code(
        &[
            "--max-window-percent",
            "seven_day=90",
            "--on-usage-limit",
            "exit",
        ],
        3,
    );
    assert_eq!(p.calls(), 1);
    let s = p.status();
    assert_eq!(s["exit_reason"], "usage_window");
    assert_eq!(s["exit_code"], 3);
    let exit = p.events_of("exit").remove(0);
    let msg = exit["message"].as_str().unwrap();
    assert!(msg.contains("seven_day at 93% of its 90% limit"), "{msg}");
    assert!(msg.contains("weekly window, resets"), "{msg}");
}

/// Below the limits nothing changes: no wait, every call made; without MAX_WINDOW_PERCENT
/// the client is still asked for stream-json (hank always reads the stream: issue 23), and
/// with CLAUDE_OUTPUT_FORMAT=text it is not.
#[test]
fn runs_below_the_limits_are_untouched() {
    let p = Project::new(&["a", "b", "c"]);
    p.fake(
        "response",
        &stream(
            &[
                ("five_hour", 0.42, now() + 3600),
                ("seven_day", 0.5, now() + 86_400),
            ],
            0.01,
            "go on",
        ),
    )
    .fake("effect.sh", TICK_ONE);
    p.run_code(&["--max-window-percent", "five_hour=80,seven_day=90"], 0);
    assert_eq!(p.calls(), 3);
    assert!(!p.events().iter().any(|e| e["type"] == "waiting"));
    assert_eq!(
        p.status()["usage_windows"]["five_hour"]["utilization"],
        0.42
    );

    let q = Project::new(&["a"]);
    q.fake("effect.sh", TICK_ONE);
    q.run_code(&[], 0);
    let argv = q.argv(1);
    assert!(
        argv.windows(2)
            .any(|a| a == ["--output-format", "stream-json"]),
        "{argv:?}"
    );
    let t = Project::new(&["a"]);
    t.fake("response", "All done.\n")
        .fake("effect.sh", TICK_ONE);
    t.run(&["--output-format", "text", "--max-loops", "1"]);
    let argv = t.argv(1);
    assert!(
        argv.windows(2).any(|a| a == ["--output-format", "text"]),
        "{argv:?}"
    );
    assert!(q.status().get("usage_windows").is_none());
}

/// A restart during a window wait: the windows are in state.json, the wait is resumed
/// without a call (or exits with the exit policy), and a raised limit lets the call through.
#[test]
fn a_restart_during_a_window_wait_resumes_it() {
    let p = Project::new(&["a", "b", "c", "d"]);
    let reset = now() + 3600;
    p.fake(
        "response",
        &stream(&[("five_hour", 0.85, reset)], 0.02, "go on"),
    )
    .fake("effect.sh", TICK_ONE);
    let args = ["--max-window-percent", "five_hour=80"];
    let child = p.spawn(&args);
    let first = p.wait_status(Duration::from_secs(30), |s| s["state"] == "waiting");
    assert_eq!(first["wait_reason"], "usage_window");
    crate::support::interrupt(child);
    let st = p.state();
    assert_eq!(st["wait"]["reason"], "usage_window", "{st}");
    assert_eq!(st["windows"]["five_hour"]["utilization"], 0.85, "{st}");

    // `hank status` and the monitor show the window with its limit.
    let o = p.run(&["status"]);
    let text = stdout(&o);
    crate::support::assert_contains(&text, "windows:      five_hour 85% (limit 80%) · resets");
    let o = p.run(&["monitor", "--once"]);
    let text = stdout(&o);
    assert!(text.contains("usage windows"), "{text}");
    assert!(text.contains("85% of 80% limit"), "{text}");

    let child = p.spawn(&args);
    let again = p.wait_status(Duration::from_secs(20), |s| {
        s["state"] == "waiting" && s["pid"] != first["pid"]
    });
    assert_eq!(again["wait_reason"], "usage_window");
    assert_eq!(again["waiting_until"], first["waiting_until"]);
    assert_eq!(p.calls(), 1);
    let o = crate::support::interrupt(child);
    crate::support::assert_contains(&stderr(&o), "resuming the usage_window wait");

    p.run_to(
        &[
            "--max-window-percent",
            "five_hour=80",
            "--on-usage-limit",
            "exit",
        ],
        3,
        "usage_window",
    );
    assert_eq!(p.calls(), 1);

    // A higher limit: the saved wait is judged again with it, and the loop calls.
    p.run_to(
        &["--max-window-percent", "five_hour=90", "--max-loops", "1"],
        3,
        "max_loops",
    );
    assert_eq!(p.calls(), 2);
    // Without the setting, a saved window wait is dropped.
    let child = p.spawn(&args);
    p.wait_status(Duration::from_secs(20), |s| {
        s["state"] == "waiting" && s["wait_reason"] == "usage_window"
    });
    crate::support::interrupt(child);
    p.run_code(&["--max-loops", "1"], 3);
    assert_eq!(p.calls(), 3);
}

/// A usage limit with the typed `api_error_params.rate_limit_info` names its window and the
/// local reset time in the exit message.
#[test]
fn a_typed_usage_limit_names_its_window() {
    let p = Project::new(&["a"]);
    let reset = now() + 2 * 86_400;
    let result = json!({
        "type": "result", "subtype": "success", "is_error": true, "api_error_status": 429,
        "api_error": "usage_limit_reached",
        "api_error_params": {"rate_limit_info": {"status": "rejected", "resetsAt": reset, "rateLimitType": "seven_day"}},
        "result": "You've hit your limit", "session_id": "9d7e0b8c-1111-2222-3333-444444444444",
        "total_cost_usd": 0, "num_turns": 1
    });
    p.fake("response", &format!("{result}\n")).fake("exit", "1");
    let o = p.run_env(&[("TZ", "UTC")], &["--on-usage-limit", "exit"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let want = jiff::Timestamp::from_second(reset)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .strftime("weekly window, resets %a %H:%M local")
        .to_string();
    let exit = p.events_of("exit").remove(0);
    assert!(
        exit["message"].as_str().unwrap().contains(&want),
        "{exit} / {want}"
    );
    let s = p.status();
    assert_eq!(s["usage_windows"]["seven_day"]["status"], "rejected", "{s}");

    // Waiting instead: the wait line names the window, and the wait ends at its reset + 60 s.
    let q = Project::new(&["a"]);
    q.fake("response", &format!("{result}\n")).fake("exit", "1");
    let child = q
        .cmd()
        .env("TZ", "UTC")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let w = q.wait_status(Duration::from_secs(30), |s| s["state"] == "waiting");
    assert_eq!(w["wait_reason"], "usage_limit");
    let until: jiff::Timestamp = w["waiting_until"].as_str().unwrap().parse().unwrap();
    assert_eq!(until.as_second(), reset + 60);
    let o = crate::support::interrupt(child);
    crate::support::assert_contains(&stderr(&o), &format!("usage limit: {want}"));
}

/// Replaces the wall-time column (measured, so it varies) and the dates of the header.
fn stable(report: &str) -> String {
    let times = regex::Regex::new(r"\d{4}-\d\d-\d\dT[0-9:]+Z").unwrap();
    let wall = regex::Regex::new(r"(?m)^(.{44} +\d+ +\d+ +\S+ +\S+) +\S+(?: \S+)?$").unwrap();
    let text = times.replace_all(report, "<time>");
    wall.replace_all(&text, "$1 <wall>").into_owned()
}

/// `hank report` over a multi-item run: each loop's cost goes to what it ticked (split
/// evenly), loops that ticked nothing are unattributed with their recommendation, totals and
/// windows; the exit summary names the most expensive items.
#[test]
fn report_attributes_each_loop_to_the_items_it_ticked() {
    let p = Project::new(&[
        "parse the input",
        "write the tests",
        "document the flags",
        "ship it",
    ]);
    let reset = now() + 3600;
    let untick = "true\n";
    let tick_two = "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\nsed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\n";
    // Per call: the five-hour window's utilization after it, its cost, the recommendation,
    // and what it does to the plan.
    let calls = [
        (0.10, 0.05, "read the code first", untick),
        (0.20, 0.40, "go on", TICK_ONE),
        (0.35, 0.30, "go on", tick_two),
        (0.38, 0.10, "go on", TICK_ONE),
    ];
    for (n, (used, cost, recommendation, effect)) in calls.into_iter().enumerate() {
        let answer = stream(&[("five_hour", used, reset)], cost, recommendation);
        p.fake(&format!("response-{}", n + 1), &answer)
            .fake(&format!("effect-{}.sh", n + 1), effect);
    }
    let o = p.run_code(&["--max-window-percent", "five_hour=80"], 0);
    assert_eq!(p.calls(), 4);
    let err = stderr(&o);
    let top = err
        .find("most expensive items of this run")
        .unwrap_or_else(|| panic!("{err}"));
    let lines: Vec<&str> = err[top..].lines().skip(1).take(3).collect();
    assert!(
        lines[0].contains("$0.40") && lines[0].ends_with("parse the input"),
        "{lines:?}"
    );
    assert!(lines[1].contains("$0.15"), "{lines:?}");
    assert!(
        lines[2].contains("$0.15") || lines[2].contains("$0.10"),
        "{lines:?}"
    );

    let o = p.run_code(&["report"], 0);
    insta::assert_snapshot!("report_multi_item_run", stable(&stdout(&o)));

    let o = p.run(&["report", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["runs"], 1);
    assert_eq!(v["totals"]["loops"], 4);
    assert_eq!(v["totals"]["calls"], 12);
    assert_eq!(v["totals"]["tokens"], 4800);
    let items: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item"].as_str().unwrap())
        .collect();
    assert_eq!(
        items,
        [
            "parse the input",
            "write the tests",
            "document the flags",
            "ship it"
        ]
    );
    assert_eq!(v["items"][1]["cost_usd"], 0.15);
    assert_eq!(v["items"][1]["tokens"], 600);
    assert_eq!(
        v["unattributed"]["recommendations"][0],
        "read the code first"
    );
    assert_eq!(v["windows"][0]["window"], "five_hour");
    assert_eq!(v["windows"][0]["first"], 0.1);
    assert_eq!(v["windows"][0]["last"], 0.38);

    // A second run; --since 2 reports it alone, --since with a date in the future nothing.
    p.run_code(&["--max-loops", "1"], 0);
    let o = p.run(&["report", "--json", "--since", "2"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["runs"].as_u64(), v["since_run"].as_u64()),
        (Some(2), Some(2)),
        "{v}"
    );
    let o = p.run(&["report", "--since", "2999-01-01"]);
    crate::support::assert_contains(&stdout(&o), "no loop finished in this range");
    let o = p.run_code(&["report", "--since", "last tuesday"], 1);
    crate::support::assert_contains(&stderr(&o), "--since: expected a run number");
}
