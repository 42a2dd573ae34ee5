//! `hank ctl` typed in the main checkout steers a running `hank fleet`: the supervisor takes
//! the main journal and forwards each command to the running tasks' own journals. pause holds
//! new starts and pauses the running task, resume goes on; stop ends the fleet (exit 130);
//! `note --task NAME` reaches that task's next call only; a bad `--task` is refused.

use std::time::Duration;

use serde_json::Value;

use crate::ctl_loop::{Running, control_events, ctl, ctl_output, journal};
use crate::fleet::{fleet_json, project};
use crate::support::{Project, assert_contains, poll, stderr, stdout};

const LONG: Duration = Duration::from_secs(40);

/// Polls until command `id` of the main journal is acknowledged; its outcome.
fn wait_ack(p: &Project, id: &str) -> String {
    let c = crate::ctl_loop::wait_ack(p, id, LONG);
    c["acknowledged"]["outcome"].as_str().unwrap().to_string()
}

fn task<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == name))
        .unwrap_or(&Value::Null)
}

/// Waits until `cond` holds for fleet.json.
fn wait_fleet(p: &Project, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    poll(LONG, || Some(fleet_json(p)).filter(&cond))
        .unwrap_or_else(|| panic!("{what}: {}", fleet_json(p)))
}

/// The status.json of a task's worktree.
fn task_status(v: &Value, name: &str) -> Value {
    task(v, name)["worktree"]
        .as_str()
        .and_then(|wt| std::fs::read(std::path::Path::new(wt).join(".hank/status.json")).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// `hank fleet --agents 1` over `plan` started, its first call (of 3 s) under way.
fn fleet_in_its_first_call(plan: &str) -> (Project, Running) {
    let p = project(plan);
    p.fake("sleep-1", "3");
    let child = Running::start(&p, &["fleet", "--agents", "1"], LONG);
    p.wait_calls(1, LONG);
    (p, child)
}

#[test]
fn pause_holds_new_starts_and_pauses_the_running_task_and_resume_goes_on() {
    let (p, child) = fleet_in_its_first_call("## Alpha\n- [ ] a1\n- [ ] a2\n## Beta\n- [ ] b\n");
    let pause = ctl(&p, &["pause"]);
    assert_eq!(
        wait_ack(&p, &pause),
        "forwarded to 1 task: Alpha; no task starts until resume"
    );
    let v = wait_fleet(&p, "the fleet paused", |v| v["paused"] == true);
    // The running task takes the pause at its next gate: it waits, visibly.
    poll(LONG, || {
        (task_status(&v, "Alpha")["wait_reason"] == "paused").then_some(())
    })
    .unwrap_or_else(|| panic!("{}", task_status(&v, "Alpha")));
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(p.calls(), 1, "no call while paused");
    let v = fleet_json(&p);
    assert_eq!(task(&v, "Beta")["state"], "waiting", "{v}");
    assert_contains(
        task(&v, "Beta")["message"].as_str().unwrap(),
        "paused by hank ctl pause",
    );
    assert!(task(&v, "Beta")["pid"].is_null(), "{v}");
    assert_eq!(task(&v, "Alpha")["state"], "running", "{v}");
    let o = p.run(&["fleet", "status"]);
    assert_contains(&stdout(&o), "paused: by hank ctl pause");

    let resume = ctl(&p, &["resume"]);
    assert!(
        wait_ack(&p, &resume).starts_with("forwarded to 1 task: Alpha"),
        "{:?}",
        journal(&p)
    );
    let o = child.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.calls(), 3);
    let v = fleet_json(&p);
    assert_eq!(v["paused"], false);
    assert_eq!(task(&v, "Beta")["state"], "merged", "{v}");
    let events = control_events(&p);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].0, "pause");
    assert_eq!(events[1].0, "resume");
    assert!(stderr(&o).contains("hank ctl pause: forwarded to 1 task: Alpha"));
}

#[test]
fn stop_ends_the_fleet_as_a_run_stops() {
    let (p, child) =
        fleet_in_its_first_call("## Alpha\n- [ ] a1\n- [ ] a2\n- [ ] a3\n## Beta\n- [ ] b\n");
    let stop = ctl(&p, &["stop"]);
    let o = child.wait();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(wait_ack(&p, &stop).starts_with("forwarded to 1 task: Alpha; no task starts"));
    assert_eq!(p.calls(), 1, "the task stopped at its next gate");
    let v = fleet_json(&p);
    assert_eq!(v["state"], "interrupted", "{v}");
    assert_eq!(task(&v, "Beta")["state"], "pending", "{v}");
    assert_eq!(
        task_status(&v, "Alpha")["exit_reason"],
        "interrupted",
        "{v}"
    );
}

#[test]
fn note_with_task_reaches_only_that_tasks_next_call_and_a_bad_task_is_refused() {
    // Beta has five items: the note reaches one of its later calls (its next one, or a later
    // one when the forwarding came just after that call's gate, or the test's own `hank ctl`
    // calls ran slowly on a loaded machine — three items left too narrow a window in CI).
    let p = project(
        "## Alpha\n- [ ] a1\n- [ ] a2\n## Beta\n- [ ] b1\n- [ ] b2\n- [ ] b3\n- [ ] b4\n- [ ] b5\n",
    );
    // No fleet: --task is refused.
    let o = ctl_output(&p, &["--task", "Beta", "note", "hi"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_contains(&stderr(&o), "no hank fleet is running");

    p.fake("stdin-by-dir", "").fake("sleep", "3");
    let child = Running::start(&p, &["fleet", "--agents", "2"], LONG);
    wait_fleet(&p, "both tasks running", |v| {
        ["Alpha", "Beta"]
            .iter()
            .all(|n| task(v, n)["state"] == "running" && !task(v, n)["pid"].is_null())
    });
    p.wait_calls(2, LONG);
    for (args, says) in [
        (
            &["--task", "Gamma", "note", "hi"][..],
            "the fleet has no task \"Gamma\"",
        ),
        (
            &["--task", "Alpha", "pause"][..],
            "pause steers the whole fleet",
        ),
    ] {
        let o = ctl_output(&p, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    let id = ctl(&p, &["--task", "Beta", "note", "NOTE-FOR-BETA"]);
    assert_eq!(wait_ack(&p, &id), "forwarded to task Beta");
    let o = child.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let seen = |dir: &str| std::fs::read_to_string(p.fake.join(format!("stdin-of-{dir}"))).unwrap();
    let beta = seen("beta");
    assert_eq!(
        beta.matches("NOTE-FOR-BETA").count(),
        1,
        "in one later call of Beta"
    );
    assert!(!seen("alpha").contains("NOTE-FOR-BETA"));
    assert_eq!(
        control_events(&p),
        [(
            "note NOTE-FOR-BETA (--task Beta)".to_string(),
            "forwarded to task Beta".to_string()
        )]
    );
}

/// The journal lines of the worktree `slug`'s own `hank ctl` journal (in the per-user folder).
fn task_journal(p: &Project, slug: &str) -> Vec<Value> {
    let projects = p.home.join(".local/state/hank/projects");
    let mut lines = Vec::new();
    for e in std::fs::read_dir(&projects).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{slug}-")) {
            let text = std::fs::read_to_string(e.path().join("control.jsonl")).unwrap_or_default();
            lines.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap()),
            );
        }
    }
    lines
}

fn commands_named(journal: &[Value], needle: &str) -> usize {
    journal
        .iter()
        .filter(|l| l["type"] == "command" && l["command"].to_string().contains(needle))
        .count()
}

/// `set` reaches the running task and the tasks started later; a kill -9 of the fleet and a
/// restart: the acknowledged `set` is not forwarded again, the command written while no
/// fleet ran is forwarded once (to the adopted task, into its next call).
#[test]
fn set_reaches_later_tasks_and_a_restart_forwards_only_what_is_pending() {
    let p = project("## Alpha\n- [ ] a1\n- [ ] a2\n- [ ] a3\n## Beta\n- [ ] b\n");
    p.fake("stdin-by-dir", "")
        .fake("sleep-1", "3")
        .fake("sleep-2", "2");
    let mut child = p.spawn(&["fleet", "--agents", "1"]);
    p.wait_calls(1, LONG);
    let set = ctl(&p, &["set", "MAX_LOOPS=9"]);
    assert_eq!(
        wait_ack(&p, &set),
        "forwarded to 1 task: Alpha; tasks started later get it too"
    );
    crate::support::signal(&child, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    let note = ctl(&p, &["note", "NOTE-AFTER-KILL"]);
    let o = p.run(&["fleet", "--agents", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_contains(&stderr(&o), "adopted");
    assert_eq!(wait_ack(&p, &note), "forwarded to 1 task: Alpha");
    // Each main command acknowledged and told once.
    let events = control_events(&p);
    assert_eq!(
        events.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
        ["set MAX_LOOPS=9", "note NOTE-AFTER-KILL"]
    );
    let alpha = task_journal(&p, "alpha");
    assert_eq!(commands_named(&alpha, "MAX_LOOPS"), 1, "{alpha:?}");
    assert_eq!(commands_named(&alpha, "NOTE-AFTER-KILL"), 1, "{alpha:?}");
    // Beta started after the set: its worker got it (and took it); the note was for the
    // tasks running then.
    let beta = task_journal(&p, "beta");
    assert_eq!(commands_named(&beta, "MAX_LOOPS"), 1, "{beta:?}");
    assert_eq!(commands_named(&beta, "NOTE-AFTER-KILL"), 0, "{beta:?}");
    assert!(
        beta.iter()
            .any(|l| l["type"] == "ack" && l["outcome"] == "applied"),
        "{beta:?}"
    );
    let alpha_in = std::fs::read_to_string(p.fake.join("stdin-of-alpha")).unwrap();
    assert_eq!(alpha_in.matches("NOTE-AFTER-KILL").count(), 1);
}
