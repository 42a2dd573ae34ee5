//! Steering and hearing a run from anywhere (issue 29): the loop reads `CONTROL_TOPIC`
//! itself (signed commands only, acknowledged back on the topic), `NEEDS_ANSWERS=wait` with
//! `ANSWER_TIMEOUT`, commands taken during `LOOP_DELAY_SECONDS`, and the notifications of a
//! fleet task merged and of a delivery (branch pushed, CI red). The ntfy server and the
//! webhook receiver are `notify_ctl`'s loopback fake.

use std::process::Output;
use std::time::Duration;

use crate::ctl_loop::{Running, control_events, ctl, journal};
use crate::notify_ctl::{
    QUESTION, Server, asking, ntfy_line, served_project, webhook_classes, webhook_of,
};
use crate::support::{Project, TICK_ONE, assert_contains, stderr};

/// A run must end well within this (a loop delay or a wait of 600 s that a command did not
/// end would go past it).
const LONG: Duration = Duration::from_secs(30);

/// `hank run` with `CONTROL_TOPIC` polls the topic on its own: the signed note reaches a
/// call's stdin once, the tampered command is a warning saying so, hank's own
/// acknowledgements on the topic are skipped, and the note taken is acknowledged back on
/// the topic (ntfy JSON publish, tagged `hank-ack`) and in the journal.
#[test]
fn the_loop_reads_the_control_topic_and_acknowledges_there() {
    let (server, p) = served_project(
        &["a", "b"],
        "RETRY_BACKOFF_SECONDS=0\nCONTROL_TOPIC=\"$SERVER/ctl\"\n",
    );
    p.fake("effect.sh", TICK_ONE).fake("sleep-1", "2");
    ctl(&p, &["init"]);
    let note = ctl(&p, &["sign", "note", "use", "the", "v2", "API"]);
    let stop = ctl(&p, &["sign", "stop"]);
    let tampered = stop.replace(" stop", " retry-now");
    let ack_of_ours = serde_json::json!({
        "id": "m3", "time": 1, "event": "message", "topic": "ctl",
        "message": "c1-x pause: applied", "tags": ["hank-ack"],
    });
    server.serve_lines(&[
        ntfy_line("m1", &tampered),
        ntfy_line("m2", &note),
        ack_of_ours.to_string(),
    ]);
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.lines()
            .any(|l| l.contains("refused, tampered") && l.contains("m1")),
        "{err}"
    );
    assert!(
        !err.contains("m3"),
        "an acknowledgement is no command: {err}"
    );
    assert_eq!(p.calls(), 2);
    let with_note: Vec<u32> = (1..=2)
        .filter(|n| String::from_utf8_lossy(&p.stdin(*n)).contains("use the v2 API"))
        .collect();
    assert_eq!(with_note.len(), 1, "the note goes to one call");
    assert_eq!(
        control_events(&p),
        [("note use the v2 API".to_string(), "applied".to_string())]
    );
    let cmds = journal(&p);
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    assert_eq!(cmds[0]["source"], "remote");
    assert_eq!(cmds[0]["acknowledged"]["outcome"], "applied");
    // The acknowledgement, on the control topic.
    let acks = server.posted_json("/");
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert_eq!(acks[0]["topic"], "ctl");
    assert_eq!(acks[0]["tags"], serde_json::json!(["hank-ack"]));
    let text = acks[0]["message"].as_str().unwrap();
    assert!(text.ends_with(" note use the v2 API: applied"), "{text}");
    assert!(text.starts_with(cmds[0]["id"].as_str().unwrap()), "{text}");
    // The topic was read from the first poll on without a stored position, then from m3.
    let gets = server.gets();
    assert_eq!(gets[0], "/ctl/json?poll=1&since=300s", "{gets:?}");
    assert!(
        gets[1..].iter().all(|g| g.ends_with("since=m3")),
        "{gets:?}"
    );
}

/// CONTROL_TOPIC set without a key: the run goes on, saying remote commands are not read;
/// the same topic as a NOTIFY target is refused before anything runs.
#[test]
fn a_control_topic_without_a_key_warns_and_one_shared_with_notify_is_refused() {
    let server = Server::start();
    let p = Project::new(&["a"]);
    p.fake("effect.sh", TICK_ONE);
    p.hankrc(&format!("CONTROL_TOPIC=\"{}\"\n", server.url("/ctl")));
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_contains(
        &stderr(&o),
        "CONTROL_TOPIC is set but remote commands are not read",
    );
    assert!(server.reqs.lock().unwrap().is_empty());

    let p = Project::new(&["a"]);
    p.hankrc(&format!(
        "CONTROL_TOPIC=\"{0}\"\nNOTIFY=\"ntfy:{0}\"\n",
        server.url("/ctl")
    ));
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_contains(&stderr(&o), "CONTROL_TOPIC is also a NOTIFY target");
    assert_eq!(p.calls(), 0);
}

/// `NEEDS_ANSWERS=wait`: at `needs_answers` the loop waits (status `waiting`,
/// `needs_answers`, the questions), the notification carries the questions and `hank ctl
/// answer`; the answer ends the wait and is in the next call's stdin, labelled.
#[test]
fn needs_answers_waits_for_an_answer_then_goes_on_with_it() {
    let (server, p) = served_project(
        &["task"],
        "RETRY_BACKOFF_SECONDS=0\nNEEDS_ANSWERS=wait\nNOTIFY=\"webhook:$SERVER/hook\"\n",
    );
    asking(&p);
    p.fake("effect-6.sh", TICK_ONE);
    let child = Running::start(&p, &[], LONG);
    let st = p.wait_status(LONG, |v| {
        v["state"] == "waiting" && v["wait_reason"] == "needs_answers"
    });
    assert!(!st["waiting_until"].is_null(), "{st}");
    assert_eq!(st["questions"], serde_json::json!([QUESTION]), "{st}");
    assert_eq!(p.calls(), 5);
    let id = ctl(&p, &["answer", "SQLite, in data/app.db"]);
    let o = child.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete");
    assert_eq!(p.calls(), 6);
    let stdin6 = String::from_utf8_lossy(&p.stdin(6)).into_owned();
    assert!(
        stdin6.contains("The operator's answer:\nSQLite, in data/app.db"),
        "{stdin6}"
    );
    assert!(!String::from_utf8_lossy(&p.stdin(5)).contains("data/app.db"));
    assert!(
        control_events(&p).contains(&(
            "answer SQLite, in data/app.db".to_string(),
            "applied".to_string()
        )),
        "{:?}",
        control_events(&p)
    );
    assert!(!id.is_empty());
    assert_contains(&stderr(&o), "hank ctl answer TEXT");
    assert!(p.events().iter().any(|e| e["type"] == "waiting"
        && e["reason"] == "needs_answers"
        && !e["until"].is_null()));
    let asked = webhook_of(&server, "needs_answers");
    let msg = asked["message"].as_str().unwrap();
    assert_contains(msg, &format!("? {QUESTION}"));
    assert!(
        asked["command"]
            .as_str()
            .unwrap()
            .starts_with("hank ctl answer TEXT"),
        "{asked}"
    );
}

/// No answer within `ANSWER_TIMEOUT`: the run stops as `NEEDS_ANSWERS=exit` does (exit 2).
#[test]
fn no_answer_within_the_timeout_stops_with_needs_answers() {
    let p = Project::new(&["task"]);
    asking(&p);
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nNEEDS_ANSWERS=wait\nANSWER_TIMEOUT=1s\n");
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "needs_answers");
    assert_eq!(p.calls(), 5);
    assert!(
        p.events()
            .iter()
            .any(|e| e["type"] == "waiting" && e["reason"] == "needs_answers")
    );
    // A bad value names the key.
    p.hankrc("NEEDS_ANSWERS=maybe\n");
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(1));
    assert_contains(
        &stderr(&o),
        "invalid value `maybe` for NEEDS_ANSWERS: expected exit or wait",
    );
}

/// `hank ctl COMMAND` given to a run of a two-item plan during its 600 s loop delay after
/// loop 1: the project and the run's output (it ends within LONG).
fn ctl_during_the_loop_delay(command: &str) -> (Project, Output) {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", TICK_ONE);
    p.hankrc("LOOP_DELAY_SECONDS=600\n");
    let child = Running::start(&p, &[], LONG);
    p.wait_status(LONG, |v| v["loop_count"] == 1 && v["state"] == "running");
    ctl(&p, &[command]);
    let o = child.wait();
    (p, o)
}

/// Commands are taken during `LOOP_DELAY_SECONDS`: `retry-now` ends a 600 s delay and the
/// next call is made; `stop` ends the run during one (the run ends within LONG, not 600 s).
#[test]
fn commands_are_taken_during_the_loop_delay() {
    let (p, o) = ctl_during_the_loop_delay("retry-now");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.calls(), 2);
    assert_eq!(
        control_events(&p),
        [("retry-now".to_string(), "applied".to_string())]
    );

    let (p, o) = ctl_during_the_loop_delay("stop");
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "interrupted");
    assert_eq!(p.calls(), 1);
}

/// A fleet task merged is a `fleet_task` message naming the task and the next step.
#[test]
fn a_merged_fleet_task_is_notified() {
    let server = Server::start();
    let p = crate::fleet::project("## Alpha\n- [ ] a1\n");
    p.hankrc(&format!(
        "NOTIFY=\"webhook:{}\"\nNOTIFY_EVENTS=fleet_task\n",
        server.url("/hook")
    ));
    // Committed: every task's worktree has the configuration the checkout approved.
    crate::support::git(&p.dir, &["add", ".hankrc"]);
    crate::support::git(&p.dir, &["commit", "-q", "-m", "notify"]);
    let o = p.run(&["fleet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let hooks = webhook_classes(&server);
    assert!(
        hooks.iter().all(|h| h["class"] == "fleet_task"),
        "only what NOTIFY_EVENTS asks for: {hooks:?}"
    );
    let merged = hooks
        .iter()
        .find(|h| {
            h["title"]
                .as_str()
                .unwrap()
                .contains("fleet task Alpha merged")
        })
        .unwrap_or_else(|| panic!("{hooks:?}"));
    assert_eq!(merged["command"], "hank fleet status");
    assert_eq!(merged["event"]["type"], "fleet_task");
    assert_eq!(merged["event"]["state"], "merged");
}

/// A delivery is a `delivery` message: the branch pushed; a pull request whose CI is red.
#[test]
fn deliveries_are_notified() {
    let server = Server::start();
    let hook = format!("NOTIFY=\"webhook:{}\"\n", server.url("/hook"));
    let s = crate::deliver::setup();
    let gh = crate::fake_github::FakeGitHub::start();
    let out = s.deliver_rest(
        &gh,
        &format!("DELIVER=branch\n{hook}"),
        &["--branch", "feature/login"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hooks = webhook_classes(&server);
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    assert_eq!(hooks[0]["class"], "delivery");
    assert!(
        hooks[0]["title"]
            .as_str()
            .unwrap()
            .contains("branch feature/login pushed to origin"),
        "{hooks:?}"
    );

    let s = crate::deliver::setup();
    gh.set(|w| {
        w.check_runs.push(serde_json::json!({
            "id": 12, "name": "test (ubuntu)", "status": "completed", "conclusion": "failure",
            "output": {"title": "1 test failed", "summary": "login_test failed", "text": "boom"}
        }));
    });
    let out = s.deliver_rest(&gh, &hook, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let hooks = webhook_classes(&server);
    let red = hooks
        .iter()
        .find(|h| h["title"].as_str().unwrap().contains("CI failed on PR #"))
        .unwrap_or_else(|| panic!("{hooks:?}"));
    assert_eq!(red["class"], "delivery");
    assert!(
        red["message"]
            .as_str()
            .unwrap()
            .contains("checks: test (ubuntu)"),
        "{red}"
    );
    assert!(
        red["command"]
            .as_str()
            .unwrap()
            .contains("the failure goes to the next loop"),
        "{red}"
    );
    // The pull request is the link to tap.
    let url = red["url"].as_str().unwrap_or_else(|| panic!("{red}"));
    assert!(url.contains("/pull/"), "{red}");
    assert_eq!(red["event"]["pr_url"], url, "{red}");
}
