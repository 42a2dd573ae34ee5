//! Unattended runs: waits that survive a restart, run limits, logs that do not grow for ever.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::support::{Project, TICK_ONE, error_json, signal, stderr, wait_with_timeout};

#[test]
fn a_restart_during_a_usage_limit_wait_resumes_it_without_calling() {
    let p = Project::new(&["a"]);
    let reset = jiff::Timestamp::now().as_second() + 3600;
    p.fake(
        "response-1",
        &error_json(&format!("Claude AI usage limit reached|{reset}"), Some(429)),
    );
    p.fake("exit-1", "1");
    let child = p.spawn(&[]);
    let first = p.wait_status(Duration::from_secs(20), |s| s["state"] == "waiting");
    assert_eq!(first["wait_reason"], "usage_limit");
    signal(&child, Signal::SIGINT);
    assert_eq!(
        wait_with_timeout(child, Duration::from_secs(10))
            .status
            .code(),
        Some(130)
    );
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
    signal(&child, Signal::SIGINT);
    let o = wait_with_timeout(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130));
    assert!(
        stderr(&o).contains("resuming the usage_limit wait"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("hank reset wait"), "{}", stderr(&o));

    // With ON_USAGE_LIMIT=exit the restart stops at once, still without a call.
    let o = p.run(&["--on-usage-limit", "exit"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "usage_limit");
    assert_eq!(p.calls(), 1);

    // `hank reset wait` lets the next start call at once.
    let o = p.run(&["reset", "wait"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    p.fake("effect.sh", TICK_ONE);
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
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
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
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
    p.fake(
        "response",
        &error_json("API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", Some(529)),
    );
    p.fake("exit", "1");
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(p.calls(), 5);
    assert_eq!(p.status()["exit_reason"], "circuit_open");
    let msg = stderr(&o);
    assert!(msg.contains("the cooldown ends"), "{msg}");
    assert!(msg.contains("UTC"), "{msg}");
    assert!(msg.contains("hank reset circuit"), "{msg}");
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(p.calls(), 5);
    assert!(stderr(&o).contains("the cooldown ends"), "{}", stderr(&o));
}
