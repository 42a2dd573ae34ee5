//! Unattended runs: waits that survive a restart, run limits, logs that do not grow for ever.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::support::{Project, TICK_ONE, error_json, exits, signal, stderr, wait_with_timeout};

#[test]
fn a_restart_during_a_usage_limit_wait_resumes_it_without_calling() {
    let p = Project::new(&["a"]);
    p.fake_usage_limit(Some(1), 3600);
    let child = p.spawn(&[]);
    let first = p.wait_status(Duration::from_secs(20), |s| s["state"] == "waiting");
    assert_eq!(first["wait_reason"], "usage_limit");
    crate::support::interrupt(child);
    assert_eq!(p.state()["wait"]["reason"], "usage_limit");

    // The restart waits for the same reset and calls nobody.
    let child = p.spawn(&[]);
    let again = p.wait_status(Duration::from_secs(20), |s| {
        s["state"] == "waiting" && s["pid"] != first["pid"]
    });
    assert_eq!(again["wait_reason"], "usage_limit");
    assert_eq!(again["waiting_until"], first["waiting_until"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(p.calls(), 1);
    let o = crate::support::interrupt(child);
    crate::support::assert_contains(&stderr(&o), "resuming the usage_limit wait");
    assert!(stderr(&o).contains("hank reset wait"), "{}", stderr(&o));

    // With ON_USAGE_LIMIT=exit the restart stops at once, still without a call.
    p.run_to(&["--on-usage-limit", "exit"], 3, "usage_limit");
    assert_eq!(p.calls(), 1);

    // `hank reset wait` lets the next start call at once.
    p.run_code(&["reset", "wait"], 0);
    p.fake("effect.sh", TICK_ONE);
    p.run_code(&[], 0);
    assert_eq!(p.calls(), 2);
    assert!(p.state().get("wait").is_none());
}

/// Eight overloaded answers (about 7.5 minutes with the default backoff) no longer end the run:
/// outages are judged by time (MAX_OUTAGE_MINUTES); the plan is finished afterwards.
#[test]
fn an_outage_of_eight_overloaded_answers_is_ridden_out() {
    let p = Project::new(&["a"]);
    for n in 1..=8 {
        p.fake(
            &format!("response-{n}"),
            &error_json("API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", Some(529)),
        );
        p.fake(&format!("exit-{n}"), "1");
    }
    p.fake("effect-9.sh", TICK_ONE);
    p.run_code(&[], 0);
    assert_eq!(p.calls(), 9);
    assert_eq!(p.status()["exit_reason"], "plan_complete");
    assert_eq!(p.status()["circuit_state"], "CLOSED");
    let waits = p
        .events()
        .iter()
        .filter(|e| e["type"] == "waiting" && e["reason"] == "backoff")
        .count();
    assert_eq!(waits, 8);
}

/// With MAX_OUTAGE_MINUTES=0 the count rule applies; every OPEN message says when the
/// cooldown ends and how to run sooner, also at a restart within the cooldown.
#[test]
fn an_open_circuit_says_when_it_cools_down() {
    let p = Project::new(&["a"]);
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nMAX_OUTAGE_MINUTES=0\n");
    p.fail_calls("API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", Some(529));
    let o = p.run_code(&[], 2);
    assert_eq!(p.calls(), 5);
    assert_eq!(p.status()["exit_reason"], "circuit_open");
    let msg = stderr(&o);
    assert!(msg.contains("the cooldown ends"), "{msg}");
    assert!(msg.contains("UTC"), "{msg}");
    assert!(msg.contains("hank reset circuit"), "{msg}");
    let o = p.run_code(&[], 2);
    assert_eq!(p.calls(), 5);
    assert!(stderr(&o).contains("the cooldown ends"), "{}", stderr(&o));
}

/// A closed stderr (SSH drop, closed window, `2>&1 | head`) is not an error: the run goes on,
/// finishes the plan and writes its final status.
#[test]
fn a_closed_stderr_does_not_stop_the_run() {
    let p = Project::new(&["one", "two", "three"]);
    p.fake("effect.sh", TICK_ONE);
    let mut child = p
        .cmd()
        .args(["--verbose"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let o = wait_with_timeout(child, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(p.calls(), 3);
    let s = p.status();
    assert_eq!(s["state"], "completed");
    assert_eq!(s["exit_reason"], "plan_complete");
    let log = std::fs::read_to_string(p.dir.join(".hank/logs/hank.log")).unwrap();
    assert!(log.contains("exit plan_complete"), "{log}");
}

/// SIGHUP (the terminal went away) stops the loop cleanly: the agent is stopped, the state
/// saved, and the final status says so.
#[test]
fn sighup_stops_cleanly_with_a_final_status() {
    let p = Project::new(&["a"]);
    p.fake("sleep", "30");
    let child = p.start_call(&[]);
    signal(&child, Signal::SIGHUP);
    let o = wait_with_timeout(child, Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let s = p.status();
    assert_eq!(s["state"], "stopped");
    assert_eq!(s["exit_reason"], "interrupted");
}

/// A loop killed with SIGKILL leaves `running` in status.json: `hank status` and the monitor
/// say it is not running, with the last update, instead of RUNNING for ever.
#[test]
fn a_stale_running_status_is_shown_as_not_running() {
    let p = Project::new(&["a"]);
    p.fake("sleep", "30");
    let child = p.start_call(&[]);
    let o = p.run(&["status"]);
    assert!(
        crate::support::stdout(&o).starts_with("state:        running"),
        "{}",
        crate::support::stdout(&o)
    );
    signal(&child, Signal::SIGKILL);
    let _ = wait_with_timeout(child, Duration::from_secs(20));
    assert_eq!(p.status()["state"], "running");
    let o = p.run(&["status"]);
    let text = crate::support::stdout(&o);
    assert!(
        text.starts_with(
            "state:        not running — the loop ended without a final status (last update "
        ),
        "{text}"
    );
    let o = p.run(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&crate::support::stdout(&o)).unwrap();
    assert_eq!(v["stale"], true);
    assert_eq!(v["running"], false);
    // The JSON tells the same story as the text: not running (the file said running).
    assert_eq!(v["state"], "not_running");
    assert_eq!(v["last_state"], "running");
    let o = p.run(&["monitor", "--once"]);
    let text = crate::support::stdout(&o);
    assert!(text.contains("NOT RUNNING"), "{text}");
    assert!(text.contains("ended without a final status"), "{text}");
    assert!(!text.contains("state        RUNNING"), "{text}");
}

/// `hank status` says why the run ended and the last error, in words.
#[test]
fn status_says_why_the_run_ended() {
    let p = Project::new(&["a"]);
    p.fail_calls("Invalid API key · Fix external API key", Some(401));
    p.run_code(&[], 2);
    let text = crate::support::stdout(&p.run(&["status"]));
    crate::support::assert_contains(&text, "why:          the agent cannot work (auth)");
    crate::support::assert_contains(&text, "last error:   auth — Invalid API key");
}

/// MAX_RUNTIME bounds a run in time, during a wait too.
#[test]
fn max_runtime_ends_the_run_during_a_wait() {
    let p = Project::new(&["a"]);
    p.fake_usage_limit(None, 3600);
    let child = p.spawn(&["--max-runtime", "2s"]);
    let o = wait_with_timeout(child, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "max_runtime");
    assert_eq!(p.calls(), 1);
    // Checked before a call too: a bare number is minutes, 0 is unlimited.
    let o = p.run_code(&["--max-runtime", "soon"], 1);
    assert!(
        stderr(&o).contains("MAX_RUNTIME") || stderr(&o).contains("--max-runtime"),
        "{}",
        stderr(&o)
    );
}

/// Every command finds the project upward from a subfolder (like git), says which one it uses,
/// and runs the agent in the project root; `enable` in a subfolder refuses.
#[test]
fn commands_find_the_project_from_a_subfolder() {
    let p = Project::new(&["one"]);
    p.git_init();
    let deep = p.dir.join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();
    p.fake("effect.sh", TICK_ONE);
    let o = p.cmd().current_dir(&deep).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("using the project at {}", p.dir.display())),
        "{}",
        stderr(&o)
    );
    assert_eq!(p.status()["exit_reason"], "plan_complete");
    assert!(
        p.dir.join("src/work.txt").is_file(),
        "the agent ran in the project root"
    );
    let o = p
        .cmd()
        .current_dir(&deep)
        .args(["status"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(crate::support::stdout(&o).contains("plan_complete"));
    let o = p
        .cmd()
        .current_dir(&deep)
        .args(["enable-ci"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("inside the hank project at {}", p.dir.display())),
        "{}",
        stderr(&o)
    );
    assert!(!deep.join(".hank").exists());
}

/// Started from inside a Claude Code session without a terminal: refused unless --force.
#[test]
fn a_nested_start_asks_for_force() {
    let p = Project::new(&["one"]);
    p.fake("effect.sh", TICK_ONE);
    let o = p.run_env(&[("CLAUDECODE", "1")], &[]);
    crate::support::assert_contains(&exits(&o, 1), "inside a Claude Code session");
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(p.calls(), 0);
    let o = p
        .cmd()
        .env("CLAUDECODE", "1")
        .arg("--force")
        .output()
        .unwrap();
    crate::support::assert_contains(&exits(&o, 0), "share that session's usage limits");
}

/// LOG_RETENTION keeps the logs of the newest loops only.
#[test]
fn old_loop_logs_are_deleted() {
    let p = Project::new(&["a", "b", "c", "d", "e"]);
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nLOG_RETENTION=2\n");
    crate::support::write_new(&p.dir.join(".hank/logs/notes.txt"), "mine");
    p.fake("effect.sh", TICK_ONE);
    p.fake("stderr", "a warning\n");
    p.run_code(&[], 0);
    assert_eq!(p.calls(), 5);
    let mut names: Vec<String> = std::fs::read_dir(p.dir.join(".hank/logs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("loop-"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "loop-00004.err",
            "loop-00004.out",
            "loop-00005.err",
            "loop-00005.out"
        ]
    );
    assert!(p.dir.join(".hank/logs/notes.txt").is_file());
}

/// IDLE_TIMEOUT: with streaming output, an agent silent for that long is hung (a timeout),
/// well before the call timeout.
#[test]
fn an_agent_silent_past_the_idle_timeout_is_stopped() {
    let p = Project::new(&["a"]);
    p.fake(
        "effect.sh",
        "echo '{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"5b1c0e0a-1111-2222-3333-444444444444\"}'\nsleep 120\n",
    );
    let child = p.spawn(&["--live", "--idle-timeout", "2s", "--max-loops", "1"]);
    let o = wait_with_timeout(child, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let finished = p.events_of("agent_finished");
    assert_eq!(finished[0]["outcome"], "timeout", "{finished:?}");
}
