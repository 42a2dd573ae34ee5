//! Issue 48: an agent that exits non-zero without a model answer is `agent_crashed`: the last
//! line of its error output said, retried once at once (no backoff), stopped the second time
//! with the fix to try; a call that cannot have reached the API is charged nothing.

use std::time::Duration;

use crate::support::{Project, assert_contains_all, exits, stderr, wait_with_timeout};

/// What a stand-in agent prints when it dies at start: a Python traceback, whose first line
/// says nothing and whose last line says what went wrong.
pub(crate) const TRACEBACK: &str = "Traceback (most recent call last):\n  File \"/opt/agent/main.py\", line 3, in <module>\n    open('/etc/agent.lock', 'w')\nPermissionError: [Errno 13] Permission denied: '/etc/agent.lock'\n";

/// The traceback's last line.
pub(crate) const LAST_LINE: &str =
    "PermissionError: [Errno 13] Permission denied: '/etc/agent.lock'";

/// The fake agent of `p` crashes at once on every call: nothing on stdout, [`TRACEBACK`] on
/// stderr, exit code 1.
pub(crate) fn crash_every_call(p: &Project) {
    p.fake("response", "")
        .fake("stderr", TRACEBACK)
        .fake("exit", "1");
}

/// The same crash twice stops the run at once (`agent_crashed`, exit 2) with the traceback's
/// last line and the fix to try; the crash is retried once without a backoff wait (at the
/// default RETRY_BACKOFF_SECONDS of 30 s) and neither call is charged.
#[test]
fn the_same_instant_crash_twice_stops_the_run_at_once_naming_its_last_line_charged_nothing() {
    let p = Project::new(&["a", "b"]);
    crash_every_call(&p);
    let o = p.run_env(&[("RETRY_BACKOFF_SECONDS", "30")], &["--max-loops", "10"]);
    let err = exits(&o, 2);
    let status = p.status();
    assert_eq!(status["exit_reason"], "agent_crashed", "{status}");
    assert_eq!(p.calls(), 2, "{err}");
    assert!(p.events_of("waiting").is_empty(), "no backoff wait: {err}");
    let crashes = p.events_of("agent_crashed");
    assert_eq!(crashes.len(), 2, "{crashes:?}");
    for c in &crashes {
        assert_eq!(c["message"], LAST_LINE, "{c}");
        assert_eq!(c["exit_code"], 1, "{c}");
        let tail: Vec<&str> = c["tail"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l.as_str())
            .collect();
        assert_eq!(
            tail.first(),
            Some(&"Traceback (most recent call last):"),
            "{c}"
        );
        assert_eq!(tail.last(), Some(&LAST_LINE), "{c}");
        assert!(c["fix"].as_str().unwrap().contains("SANDBOX_WRITE"), "{c}");
    }
    // The message is the traceback's last line, never its first.
    let finished = p.events_of("agent_finished");
    let message = finished[0]["error_message"].as_str().unwrap_or_default();
    assert!(message.ends_with(LAST_LINE), "{message}");
    // Neither call can have reached the API: charged nothing, and said so.
    assert_eq!(status["total_cost_usd"].as_f64(), Some(0.0), "{status}");
    assert!(status.get("estimated_cost_usd").is_none(), "{status}");
    assert!(!err.contains("charged an estimate"), "{err}");
    assert_contains_all(
        &err,
        &[
            "cannot have reached the API; charged nothing",
            "crashed the same way twice in a row",
            LAST_LINE,
            "SANDBOX_WRITE",
            "[agent_crashed, exit 2]",
        ],
    );
    let exit_message = status["exit_message"].as_str().unwrap_or_default();
    assert!(exit_message.contains(LAST_LINE), "{status}");
}

/// Two different crashes in a row are retried at once, not stopped: only the same crash
/// twice is a dead end.
#[test]
fn a_different_crash_is_retried_at_once_and_an_answer_goes_on() {
    let p = Project::new(&["a", "b"]);
    p.fake("response-1", "")
        .fake("stderr-1", "KeyError: 'model'\n")
        .fake("exit-1", "1")
        .fake("response-2", "")
        .fake("stderr-2", TRACEBACK)
        .fake("exit-2", "1")
        .fake("effect-3.sh", crate::support::TICK_ONE);
    let o = p.run_env(&[("RETRY_BACKOFF_SECONDS", "30")], &["--max-loops", "3"]);
    let err = exits(&o, 3);
    assert_eq!(p.status()["exit_reason"], "max_loops", "{err}");
    assert_eq!(p.calls(), 3, "{err}");
    assert_eq!(p.events_of("agent_crashed").len(), 2, "{err}");
    assert!(p.events_of("waiting").is_empty(), "no backoff wait: {err}");
}

/// In a fleet, an instantly crashing agent fails each task well under the old 7.5 minutes of
/// backoff: its failure names the documented `agent_crashed` (never a Debug name), the
/// traceback's last line and `hank fleet --retry`; each task is charged $0.
#[test]
fn an_instantly_crashing_agent_fails_its_fleet_tasks_at_once_naming_the_crash_charged_nothing() {
    let p = crate::fleet::project_doing(
        "# Fix plan\n\n## Alpha\n- [ ] a1\n\n## Beta\n- [ ] b1\n",
        "true\n",
    );
    crash_every_call(&p);
    let child = p.spawn_env(
        &[("RETRY_BACKOFF_SECONDS", "30")],
        &["fleet", "--agents", "2"],
    );
    let o = wait_with_timeout(child, Duration::from_secs(120));
    let err = exits(&o, 2);
    let st = crate::fleet::fleet_status(&p);
    let tasks = st["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{st}");
    for t in tasks {
        assert_eq!(t["state"], "failed", "{st}");
        let m = t["message"].as_str().unwrap();
        let retry = format!("hank fleet --retry {}", t["name"].as_str().unwrap());
        assert_contains_all(
            m,
            &["agent_crashed (exit 2)", LAST_LINE, "SANDBOX_WRITE", &retry],
        );
        assert!(
            !m.contains("AgentCrashed") && !m.contains("CircuitOpen"),
            "{m}"
        );
        assert_eq!(t["cost_usd"].as_f64(), Some(0.0), "{st}");
    }
    assert!(!err.contains("AgentCrashed"), "{err}");
    assert!(
        !stderr(&o).contains("charged an estimate"),
        "{}",
        stderr(&o)
    );
}
