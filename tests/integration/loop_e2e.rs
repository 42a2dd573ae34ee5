//! `hank run` end to end with the fake agent: every exit reason, the call budget, sessions,
//! timeouts, signals, the lock and state recovery.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::support::{
    Project, TICK_ONE, alive, exits, gone, result_json, signal, stderr, stdout, terminate,
    wait_with_timeout,
};

#[test]
fn n_open_tasks_take_n_calls_then_plan_complete() {
    let p = Project::new(&["one", "two", "three"]);
    p.git_init();
    p.fake("effect.sh", TICK_ONE);
    p.run_code(&[], 0);
    assert_eq!(p.calls(), 3);
    let s = p.status();
    assert_eq!(s["state"], "completed");
    assert_eq!(s["exit_reason"], "plan_complete");
    assert_eq!(s["exit_code"], 0);
    assert_eq!(s["fix_plan"]["done"], 3);
    assert_eq!(s["loop_count"], 3);
    assert_eq!(s["last_loop"]["files_changed"], 1);
    assert!(p.dir.join(".hank/logs/loop-00003.out").is_file());
    let events = p.events();
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "loop_started")
            .count(),
        3
    );
    assert_eq!(events.last().unwrap()["type"], "exit");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(p.dir.join(".hank/state.json"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn argv_prompt_on_stdin_resume_and_allowed_tools() {
    let p = Project::new(&["one", "two"]);
    p.fake("effect.sh", TICK_ONE);
    std::fs::write(
        p.dir.join(".hank/PROMPT.md"),
        "Prompt with $(rm -rf /) `x` 'q' \"d\" ; | & *\n",
    )
    .unwrap();
    p.run_code(&["--model", "sonnet"], 0);
    let (ctx1, prompt1) = p.context_and_prompt(1);
    assert_eq!(prompt1, b"Prompt with $(rm -rf /) `x` 'q' \"d\" ; | & *\n");
    assert!(ctx1.starts_with("Hank loop 1."), "{ctx1}");
    let a1 = p.argv(1);
    assert_eq!(
        &a1[..4],
        ["-p", "--output-format", "stream-json", "--verbose"]
    );
    assert!(!a1.iter().any(|a| a == "--resume"), "{a1:?}");
    assert!(
        a1.iter()
            .any(|a| a.starts_with("--allowedTools=") && a.contains("Bash(git commit *)")),
        "{a1:?}"
    );
    assert!(
        !a1.iter().any(|a| a.contains("system-prompt")),
        "the context rides on stdin, never in the (snapshotted) system prompt: {a1:?}"
    );
    assert!(
        !a1.iter().any(|a| a.contains("Do the next task")),
        "prompt must not be in argv"
    );
    let a2 = p.argv(2);
    let i = a2
        .iter()
        .position(|a| a == "--resume")
        .expect("--resume on call 2");
    assert_eq!(a2[i + 1], "11111111-2222-3333-4444-555555555551");
    assert!(a2.windows(2).any(|w| w[0] == "--model" && w[1] == "sonnet"));
}

#[test]
fn no_continue_never_resumes() {
    let p = Project::new(&["one", "two"]);
    p.fake("effect.sh", TICK_ONE);
    assert_eq!(p.run(&["--no-continue"]).status.code(), Some(0));
    assert!(!p.argv(2).iter().any(|a| a == "--resume"));
}

#[test]
fn flag_beats_env_beats_hankrc_beats_default() {
    let p = Project::new(&["a", "b", "c", "d", "e"]);
    p.fake("effect.sh", "date +%s%N >> progress.txt\n");
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nMAX_LOOPS=\"1\"\n");
    assert_eq!(p.run(&[]).status.code(), Some(3));
    assert_eq!(p.calls(), 1, ".hankrc");
    let o = p.run_env(&[("MAX_LOOPS", "2")], &[]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(p.calls(), 3, "env beats .hankrc");
    let o = p.run_env(&[("MAX_LOOPS", "2")], &["--max-loops", "3"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(p.calls(), 6, "flag beats env");
    assert_eq!(p.status()["exit_reason"], "max_loops");
}

#[test]
fn call_cap_waits_and_a_restart_still_waits() {
    let p = Project::new(&["a", "b", "c"]);
    let child = p.spawn(&["--calls", "2"]);
    let s = p.wait_status(Duration::from_secs(20), |s| s["state"] == "waiting");
    assert_eq!(s["wait_reason"], "rate_limit");
    assert_eq!(s["calls_in_window"], 2);
    assert!(s["waiting_until"].is_string());
    assert_eq!(p.calls(), 2);
    let _o = crate::support::interrupt(child);
    assert_eq!(p.status()["state"], "stopped");

    let child = p.spawn(&["--calls", "2"]);
    let s = p.wait_status(Duration::from_secs(20), |s| {
        s["state"] == "waiting" && s["pid"] == child.id()
    });
    assert_eq!(s["wait_reason"], "rate_limit");
    assert_eq!(p.calls(), 2, "the ledger survived the restart");
    terminate(child);
}

#[test]
fn hung_agent_and_grandchild_are_killed_on_timeout() {
    let p = Project::new(&["a"]);
    p.fake("sleep", "300").fake("grandchild", "");
    let start = Instant::now();
    let o = p.run(&["-t", "2s", "--max-loops", "1"]);
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["last_loop"]["outcome"], "timeout");
    let pid = p.grandchild_pid();
    std::thread::sleep(Duration::from_millis(100));
    assert!(gone(pid), "grandchild {pid} survived");
}

/// Starts `hank` over a one-item plan with an agent that starts a grandchild and sleeps 300 s
/// (in every call, or with `calls` = `-1` in the first only); the project, hank and the
/// grandchild's PID.
fn start_hung_call(calls: &str) -> (Project, std::process::Child, i32) {
    let p = Project::new(&["a"]);
    p.fake(&format!("sleep{calls}"), "300")
        .fake(&format!("grandchild{calls}"), "");
    let child = p.start_call(&[]);
    let pid = p.grandchild_pid();
    (p, child, pid)
}

#[test]
fn sigint_during_a_call_exits_130_quickly_with_no_survivor() {
    let (p, child, pid) = start_hung_call("");
    let start = Instant::now();
    signal(&child, Signal::SIGINT);
    let o = wait_with_timeout(child, Duration::from_secs(10));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let s = p.status();
    assert_eq!(s["state"], "stopped");
    assert_eq!(s["exit_reason"], "interrupted");
    assert!(gone(pid), "grandchild survived");
    let state = hank::store::Store::new(&p.dir).read_state().unwrap();
    assert_eq!(state.ledger.entries.len(), 1);
}

#[test]
fn a_second_instance_is_refused() {
    let p = Project::new(&["a"]);
    p.fake("sleep", "300");
    let child = p.start_call(&[]);
    let o = p.run_code(&[], 1);
    assert!(
        stderr(&o).contains(&format!("PID {}", child.id())),
        "{}",
        stderr(&o)
    );
    terminate(child);
}

#[test]
fn corrupt_state_is_moved_aside_with_a_warning() {
    let p = Project::new(&["a"]);
    std::fs::write(
        p.dir.join(".hank/state.json"),
        "{\"ledger\": {\"entries\": [",
    )
    .unwrap();
    let o = p.run_code(&["--max-loops", "1"], 3);
    assert!(stderr(&o).contains("moved it aside"), "{}", stderr(&o));
    let aside = p.corrupt_state_files();
    assert_eq!(aside.len(), 1);
    assert_eq!(
        std::fs::read_to_string(&aside[0]).unwrap(),
        "{\"ledger\": {\"entries\": ["
    );
}

#[test]
fn usage_limit_waits_until_the_parsed_reset() {
    let p = Project::new(&["a"]);
    let reset = p.fake_usage_limit(None, 5);
    let child = p.spawn(&[]);
    let s = p.wait_status(Duration::from_secs(20), |s| s["state"] == "waiting");
    assert_eq!(s["wait_reason"], "usage_limit");
    let until: jiff::Timestamp = s["waiting_until"].as_str().unwrap().parse().unwrap();
    assert!(
        (until.as_second() - reset).abs() <= 61,
        "until {until} reset {reset}"
    );
    assert!(until.as_second() >= reset);
    crate::support::interrupt(child);
}

#[test]
fn usage_limit_with_exit_policy_stops_with_3() {
    let p = Project::new(&["a"]);
    p.fail_calls(
        "You've hit your session limit · resets 5:09am (UTC)",
        Some(429),
    );
    p.run_to(&["--on-usage-limit", "exit"], 3, "usage_limit");
}

#[test]
fn auth_error_is_agent_fatal() {
    let p = Project::new(&["a"]);
    p.fail_calls("Invalid API key · Fix external API key", Some(401));
    p.run_code(&[], 2);
    assert_eq!(p.calls(), 1);
    assert_eq!(p.status()["exit_reason"], "agent_fatal");
    assert_eq!(p.status()["state"], "halted");
}

#[test]
fn an_always_failing_agent_opens_the_circuit_after_the_failure_threshold() {
    let p = Project::new(&["a"]);
    p.fail_calls(
        "API Error: 500 Internal server error. This is a server-side issue",
        Some(500),
    );
    p.fake("effect.sh", "date +%s%N >> changing.txt\n");
    p.run_to(&[], 2, "circuit_open");
    assert_eq!(p.calls(), 5);
}

/// With `HANK_NOW` (the process clock's test hook) a restart "31 minutes later" finds the
/// cooldown over: the OPEN circuit becomes HALF_OPEN and gets one trial loop — no sleeping.
#[test]
fn cooldown_passes_on_a_later_start_without_sleeping() {
    let p = Project::new(&["a"]);
    p.git_init();
    let t0 = jiff::Timestamp::now();
    let o = p.cmd().env("HANK_NOW", t0.to_string()).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(p.status()["circuit_state"], "OPEN");
    // 10 minutes later: still cooling down, nothing is called.
    let later = |mins: i64| (t0 + jiff::SignedDuration::from_mins(mins)).to_string();
    let o = p.cmd().env("HANK_NOW", later(10)).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(p.calls(), 3);
    // 31 minutes later: one trial loop in HALF_OPEN (it makes no progress either: OPEN again).
    p.fake("effect.sh", "date +%s%N >> progress.txt\n");
    let o = p
        .cmd()
        .env("HANK_NOW", later(31))
        .args(["--max-loops", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.calls(), 4);
    let err = stderr(&o);
    assert!(err.contains("OPEN → HALF_OPEN"), "{err}");
    let transitions = p.events_of("circuit_changed");
    let at: jiff::Timestamp = transitions.last().unwrap()["at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        at.duration_since(t0) >= jiff::SignedDuration::from_mins(31),
        "{at}"
    );
    // A bad HANK_NOW is named.
    let o = p.run_env(&[("HANK_NOW", "yesterday")], &[]);
    crate::support::assert_contains(&exits(&o, 1), "invalid HANK_NOW");
}

#[test]
fn no_progress_opens_the_circuit_after_three_loops() {
    let p = Project::new(&["a"]);
    p.git_init();
    p.run_code(&[], 2);
    assert_eq!(p.calls(), 3);
    let s = p.status();
    assert_eq!(s["exit_reason"], "circuit_open");
    assert_eq!(s["circuit_state"], "OPEN");
    // A later start does not call the agent while the circuit is OPEN and cooling down.
    assert_eq!(p.run(&[]).status.code(), Some(2));
    assert_eq!(p.calls(), 3);
    // --auto-reset-circuit resets it.
    assert_eq!(
        p.run(&["--auto-reset-circuit", "--max-loops", "1"])
            .status
            .code(),
        Some(3)
    );
    assert_eq!(p.calls(), 4);
}

#[test]
fn two_loops_with_denials_stop_with_permission_denied() {
    let p = Project::new(&["a"]);
    p.git_init();
    p.fake("effect.sh", "date +%s%N >> progress.txt\n");
    let denied = serde_json::json!({
        "type": "result", "subtype": "success", "is_error": false, "num_turns": 3,
        "result": "I could not install the dependency.\n---HANK_STATUS---\nSTATUS: BLOCKED\nEXIT_SIGNAL: false\nRECOMMENDATION: allow npm install\n---END_HANK_STATUS---",
        "session_id": "5b1c0e0a-1111-2222-3333-444444444444", "total_cost_usd": 0.02,
        "permission_denials": [{"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {"command": "npm install left-pad"}}]
    });
    p.fake("response", &denied.to_string());
    let o = p.run_code(&[], 2);
    assert_eq!(p.calls(), 2, "the first denial only warns");
    assert_eq!(p.status()["exit_reason"], "permission_denied");
    assert!(stderr(&o).contains("npm install left-pad"));
    let (ctx2, _) = p.context_and_prompt(2);
    assert!(
        ctx2.contains("`npm install left-pad`"),
        "the next loop is told: {ctx2}"
    );
}

#[test]
fn exit_signal_with_confirming_indicators_is_project_complete() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", "date +%s%N >> progress.txt\n");
    p.fake(
        "response-1",
        &result_json(
            "COMPLETE",
            "IMPLEMENTATION",
            false,
            "Phase one is complete.",
        ),
    );
    p.fake(
        "response-2",
        &result_json("COMPLETE", "IMPLEMENTATION", true, "All tasks complete."),
    );
    p.run_code(&[], 0);
    assert_eq!(p.calls(), 2);
    assert_eq!(p.status()["exit_reason"], "project_complete");
}

#[test]
fn status_complete_with_exit_signal_false_keeps_going() {
    let p = Project::new(&["a"]);
    p.fake("effect.sh", "date +%s%N >> progress.txt\n");
    p.fake(
        "response",
        &result_json("COMPLETE", "IMPLEMENTATION", false, "All tasks complete."),
    );
    p.run_to(&["--max-loops", "3"], 3, "max_loops");
}

#[test]
fn test_only_loops_saturate() {
    let p = Project::new(&["a"]);
    p.fake(
        "response",
        &result_json("IN_PROGRESS", "TESTING", false, "Ran the tests again."),
    );
    p.fake(
        "effect.sh",
        "mkdir -p tests && date +%s%N >> tests/test_a.py\n",
    );
    p.run_to(&[], 0, "test_saturation");
    assert_eq!(p.calls(), 3);
}

/// A plan of test work: each loop reports TESTING, writes a test file and ticks one item.
/// That is the plan's work, not saturation: the run goes on until the plan is done.
#[test]
fn a_plan_of_test_work_is_not_test_saturation() {
    let p = Project::new(&[
        "cover the cart",
        "cover the payment",
        "cover the shipping",
        "cover the taxes",
        "cover the users",
    ]);
    p.fake(
        "response",
        &result_json("IN_PROGRESS", "TESTING", false, "Wrote the next test."),
    );
    p.fake(
        "effect.sh",
        "mkdir -p tests && date +%s%N >> tests/test_$(grep -c '\\[x\\]' .hank/fix_plan.md).py\n\
         sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\n",
    );
    p.run_to(&[], 0, "plan_complete");
    assert_eq!(p.calls(), 5);
}

#[test]
fn deleting_fix_plan_is_an_integrity_failure() {
    let p = Project::new(&["a"]);
    p.fake("effect.sh", "rm .hank/fix_plan.md\n");
    p.run_to(&[], 2, "integrity_failure");
    assert_eq!(p.calls(), 1);
}

#[test]
fn cost_budget_stops_with_3() {
    let p = Project::new(&["a"]);
    p.fake("effect.sh", "date +%s%N >> progress.txt\n");
    p.run_to(&["--max-cost", "0.015"], 3, "cost_budget");
    assert_eq!(p.calls(), 2);
}

#[test]
fn unknown_session_is_dropped_and_retried_at_once() {
    let p = Project::new(&["a", "b", "c"]);
    p.fake("effect.sh", TICK_ONE);
    p.fake("response-2", "");
    p.fake(
        "stderr-2",
        "No conversation found with session ID: 11111111-2222-3333-4444-555555555551\n",
    );
    p.fake("exit-2", "1");
    p.fake("effect-2.sh", "true\n");
    p.run_code(&[], 0);
    assert!(p.argv(2).iter().any(|a| a == "--resume"));
    assert!(
        !p.argv(3).iter().any(|a| a == "--resume"),
        "{:?}",
        p.argv(3)
    );
    assert_eq!(p.calls(), 4);
}

#[test]
fn json_events_on_stdout() {
    let p = Project::new(&["a"]);
    p.fake("effect.sh", TICK_ONE);
    let o = p.run_code(&["--json"], 0);
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"loop_started"));
    assert!(types.contains(&"agent_finished"));
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "exit");
    assert_eq!(last["exit_reason"], "plan_complete");
    assert_eq!(last["exit_code"], 0);
    assert!(
        lines
            .iter()
            .all(|l| l["schema_version"] == 2 && l["at"].is_string())
    );
}

#[test]
fn live_mode_uses_stream_json_and_writes_the_live_log() {
    let p = Project::new(&["a"]);
    p.fake("effect.sh", TICK_ONE);
    let stream = [
        serde_json::json!({"type":"system","subtype":"init","session_id":"5b1c0e0a-1111-2222-3333-444444444444","model":"claude-test"}),
        serde_json::json!({"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Looking at the plan."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo build"}}]},"session_id":"5b1c0e0a-1111-2222-3333-444444444444"}),
        serde_json::json!({"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"Done.\n---HANK_STATUS---\nSTATUS: IN_PROGRESS\nEXIT_SIGNAL: false\nRECOMMENDATION: next\n---END_HANK_STATUS---","session_id":"5b1c0e0a-1111-2222-3333-444444444444","total_cost_usd":0.01}),
    ];
    let text: String = stream.iter().map(|l| format!("{l}\n")).collect();
    p.fake("response", &text);
    let o = p.run_code(&["--live"], 0);
    let argv = p.argv(1);
    assert!(
        argv.windows(2)
            .any(|w| w[0] == "--output-format" && w[1] == "stream-json")
    );
    assert!(argv.iter().any(|a| a == "--verbose"));
    let err = stderr(&o);
    assert!(err.contains("Looking at the plan."), "{err}");
    assert!(err.contains("cargo build"), "{err}");
    let live = std::fs::read_to_string(p.dir.join(".hank/live.log")).unwrap();
    assert!(live.contains("cargo build"), "{live}");
}

#[test]
fn billing_and_cli_usage_errors_are_agent_fatal() {
    let p = Project::new(&["a"]);
    p.fail_calls("Credit balance is too low", Some(400));
    p.run_to(&[], 2, "agent_fatal");
    assert_eq!(p.status()["last_loop"]["error_kind"], "billing");

    let p = Project::new(&["a"]);
    p.fake("response", "")
        .fake("stderr", "error: option '--permission-mode <mode>' argument 'yolo' is invalid. Allowed choices are acceptEdits, auto, bypassPermissions, default, dontAsk, plan.\n")
        .fake("exit", "1");
    p.run_to(&[], 2, "agent_fatal");
    assert_eq!(p.status()["last_loop"]["error_kind"], "cli_usage");
    assert_eq!(p.calls(), 1);
}

#[test]
fn sigint_shaped_result_with_exit_0_is_not_success() {
    let p = Project::new(&["a"]);
    let r = serde_json::json!({
        "type": "result", "subtype": "error_during_execution", "is_error": false, "num_turns": 1,
        "errors": ["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"],
        "terminal_reason": "aborted_streaming", "session_id": "5b1c0e0a-1111-2222-3333-444444444444",
        "total_cost_usd": 0.001
    });
    p.fake("response", &r.to_string());
    p.run_code(&["--max-loops", "1"], 3);
    assert_eq!(p.status()["last_loop"]["outcome"], "agent_error");
    assert_eq!(p.status()["last_loop"]["error_kind"], "interrupted");
}

#[test]
fn removing_the_whole_hank_dir_is_an_integrity_failure() {
    let p = Project::new(&["a"]);
    p.fake("effect.sh", "rm -rf .hank\n");
    p.run_to(&[], 2, "integrity_failure");
}

#[test]
fn an_agent_orphaned_by_kill_9_is_stopped_at_the_next_start() {
    let (p, child, pid) = start_hung_call("-1");
    std::thread::sleep(Duration::from_millis(100));
    signal(&child, Signal::SIGKILL);
    let _ = wait_with_timeout(child, Duration::from_secs(10));
    assert!(
        alive(pid),
        "kill -9 of hank cannot stop the agent's own process group"
    );
    let o = p.run_code(&["--max-loops", "1"], 3);
    assert!(
        gone(pid),
        "the orphaned agent group survived the next start"
    );
    crate::support::assert_contains(&stderr(&o), "left running by a hank that was killed");
}
