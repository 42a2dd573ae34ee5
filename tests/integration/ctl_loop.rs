//! `hank ctl` commands taken by a running loop (the journal in the per-user folder): pause
//! across a restart, resume, `set MAX_LOOPS`, `note` in the next call's stdin, `stop`,
//! `retry-now` ending a usage-limit wait. Each taken command is acknowledged in the journal
//! and is an event.

use std::path::PathBuf;
use std::process::{Child, Output};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::support::{
    Project, TICK_ONE, assert_contains, poll, signal, stderr, stdout, wait_with_timeout,
};

const LONG: Duration = Duration::from_secs(30);

/// A running `hank`, stopped if the test fails before it is waited for (a paused loop would
/// otherwise wait forever).
pub(crate) struct Running {
    child: Option<Child>,
    /// How long [`Running::wait`] waits for its end.
    limit: Duration,
    /// A `hank fleet`: stopped with SIGINT and given time to stop its workers (their groups
    /// are left to their own timeouts) before it is killed.
    fleet: bool,
}

impl Running {
    /// `hank ARGS` started in `p`, to end within `limit`.
    pub(crate) fn start(p: &Project, args: &[&str], limit: Duration) -> Self {
        Self {
            child: Some(p.spawn(args)),
            limit,
            fleet: args.first() == Some(&"fleet"),
        }
    }

    pub(crate) fn child(&self) -> &Child {
        self.child.as_ref().unwrap()
    }

    pub(crate) fn wait(mut self) -> Output {
        wait_with_timeout(self.child.take().unwrap(), self.limit)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        if self.fleet {
            signal(&c, Signal::SIGINT);
            if poll(Duration::from_secs(25), || c.try_wait().ok().flatten()).is_some() {
                return;
            }
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// `hank ctl ARGS` in `p`.
pub(crate) fn ctl_output(p: &Project, args: &[&str]) -> Output {
    let mut all = vec!["ctl"];
    all.extend_from_slice(args);
    p.run(&all)
}

/// `hank ctl ARGS` in `p`, which must succeed: its stdout, trimmed (a command's id).
pub(crate) fn ctl(p: &Project, args: &[&str]) -> String {
    let o = ctl_output(p, args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout(&o).trim().to_string()
}

/// The journal's commands as `hank ctl status --json` shows them.
pub(crate) fn journal(p: &Project) -> Vec<Value> {
    let v: Value = serde_json::from_str(&ctl(p, &["status", "--json"])).unwrap();
    v["commands"].as_array().unwrap().clone()
}

/// The per-user folder of the project `p` (the only project under `$HOME`).
pub(crate) fn user_dir(p: &Project) -> PathBuf {
    std::fs::read_dir(p.home.join(".local/state/hank/projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

/// Polls until command `id` is acknowledged; its acknowledgement.
pub(crate) fn wait_ack(p: &Project, id: &str, within: Duration) -> Value {
    poll(within, || {
        journal(p)
            .into_iter()
            .find(|c| c["id"] == id && !c["acknowledged"].is_null())
    })
    .unwrap_or_else(|| panic!("{id} not acknowledged in {within:?}"))
}

/// The `control` events of `p`: (command, outcome).
pub(crate) fn control_events(p: &Project) -> Vec<(String, String)> {
    p.events_of("control")
        .into_iter()
        .map(|e| {
            (
                e["command"].as_str().unwrap().to_string(),
                e["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn paused(v: &Value) -> bool {
    v["state"] == "waiting" && v["wait_reason"] == "paused"
}

/// `hank ctl ARGS` given during loop 1 (a call of 2 s) of a run over `items`, each call
/// ticking one: the project, the command's id and the run's output.
fn ctl_during_loop_1(items: &[&str], args: &[&str]) -> (Project, String, Output) {
    let p = Project::new(items);
    p.fake("effect.sh", TICK_ONE).fake("sleep-1", "2");
    let child = Running::start(&p, &[], LONG);
    p.wait_calls(1, LONG);
    let id = ctl(&p, args);
    let o = child.wait();
    (p, id, o)
}

/// pause → the loop waits, visibly, without calling; killed and started again it is still
/// paused; resume → it goes on and finishes.
#[test]
fn a_pause_survives_a_restart_until_resume() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", TICK_ONE).fake("sleep-1", "2");
    let child = Running::start(&p, &[], LONG);
    p.wait_calls(1, LONG);
    let pause = ctl(&p, &["pause"]);
    let st = p.wait_status(LONG, paused);
    assert!(st["waiting_until"].is_null(), "{st}");
    let ack = wait_ack(&p, &pause, LONG);
    assert_eq!(ack["acknowledged"]["outcome"], "applied", "{ack}");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(p.calls(), 1, "no call while paused");
    signal(child.child(), Signal::SIGTERM);
    let o = child.wait();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));

    // Started again: the pause holds (it was acknowledged, not taken a second time).
    let child = Running::start(&p, &[], LONG);
    p.wait_status(LONG, |v| {
        paused(v) && v["pid"].as_u64() == Some(u64::from(child.child().id()))
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(p.calls(), 1, "still paused after the restart");
    let resume = ctl(&p, &["resume"]);
    wait_ack(&p, &resume, Duration::from_secs(5));
    let o = child.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete");
    assert_eq!(p.calls(), 2);
    let events = control_events(&p);
    assert_eq!(
        events,
        [
            ("pause".to_string(), "applied".to_string()),
            (
                "pause".to_string(),
                "applied again: paused before the restart".to_string()
            ),
            ("resume".to_string(), "applied".to_string()),
        ]
    );
    // Each command acknowledged once.
    let acked: Vec<Value> = journal(&p);
    assert_eq!(acked.len(), 2);
    assert!(acked.iter().all(|c| !c["acknowledged"].is_null()));
}

/// `set MAX_LOOPS=2` during loop 1 of a 5-item plan: the run stops after loop 2.
#[test]
fn set_max_loops_takes_effect_at_the_next_loop() {
    let (p, id, o) = ctl_during_loop_1(&["a", "b", "c", "d", "e"], &["set", "MAX_LOOPS=2"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "max_loops");
    assert_eq!(p.calls(), 2);
    let c = wait_ack(&p, &id, Duration::from_secs(1));
    assert_eq!(c["acknowledged"]["outcome"], "applied");
    assert_contains(&stderr(&o), "MAX_LOOPS is now 2");
    assert_eq!(
        control_events(&p),
        [("set MAX_LOOPS=2".to_string(), "applied".to_string())]
    );
}

/// A note given during loop 1 is in loop 2's stdin, and only there.
#[test]
fn a_note_reaches_the_next_call() {
    let (p, _, o) = ctl_during_loop_1(&["a", "b", "c"], &["note", "use", "the", "v2", "API"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let has = |n: u32| String::from_utf8_lossy(&p.stdin(n)).contains("use the v2 API");
    assert!(!has(1));
    assert!(has(2), "{}", String::from_utf8_lossy(&p.stdin(2)));
    assert!(!has(3));
}

/// `stop` ends the run as Ctrl-C does: exit 130, `interrupted`, no further call.
#[test]
fn stop_ends_the_run_as_interrupted() {
    let (p, id, o) = ctl_during_loop_1(&["a", "b", "c"], &["stop"]);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "interrupted");
    assert_eq!(p.calls(), 1);
    assert_eq!(
        wait_ack(&p, &id, Duration::from_secs(1))["acknowledged"]["outcome"],
        "applied"
    );
}

/// `stop` given during a long agent call stops the call at once (its process group too, a
/// grandchild included) instead of waiting for the call's end: exit 130, `interrupted`, the
/// command acknowledged and recorded as a `control` event.
#[test]
fn stop_during_a_call_stops_the_call_now() {
    let p = Project::new(&["a", "b"]);
    p.fake("sleep", "600").fake("grandchild", "");
    let child = Running::start(&p, &[], Duration::from_secs(40));
    p.wait_calls(1, LONG);
    let grandchild = p.grandchild_pid();
    let id = ctl(&p, &["stop"]);
    let o = child.wait();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "interrupted");
    assert_eq!(p.calls(), 1);
    assert!(
        crate::support::gone(grandchild),
        "the call's grandchild outlived the stop"
    );
    assert_eq!(
        wait_ack(&p, &id, Duration::from_secs(1))["acknowledged"]["outcome"],
        "applied"
    );
    assert!(
        control_events(&p).contains(&("stop".to_string(), "applied".to_string())),
        "{:?}",
        control_events(&p)
    );
}

/// A usage limit an hour away: the loop waits; `retry-now` ends the wait at once and the
/// next call is made.
#[test]
fn retry_now_ends_a_usage_limit_wait() {
    let p = Project::new(&["a"]);
    p.fake_usage_limit(Some(1), 3600);
    p.fake("effect-2.sh", TICK_ONE);
    let child = Running::start(&p, &[], LONG);
    p.wait_status(LONG, |v| {
        v["state"] == "waiting" && v["wait_reason"] == "usage_limit"
    });
    let id = ctl(&p, &["retry-now"]);
    // Taken within 2 s while the loop waits.
    wait_ack(&p, &id, Duration::from_secs(2));
    p.wait_calls(2, Duration::from_secs(10));
    let o = child.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete");
}

/// The agent can write `.hank/`: a well-formed `stop` and `set MAX_LOOPS=1` planted in
/// `.hank/control.jsonl` (lines `hank ctl` itself wrote) steer nothing — the loop reads the
/// journal in the per-user folder only.
#[test]
fn commands_planted_in_the_project_are_not_taken() {
    let p = Project::new(&["a", "b", "c"]);
    // Well-formed journal lines (as `hank ctl` writes them), planted where the agent could
    // write them.
    let at = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(1))
        .unwrap();
    let lines = format!(
        "{{\"type\":\"command\",\"id\":\"c1-aa\",\"at\":\"{at}\",\"source\":\"local\",\"command\":{{\"name\":\"set\",\"key\":\"MAX_LOOPS\",\"value\":\"1\"}}}}\n\
         {{\"type\":\"command\",\"id\":\"c2-bb\",\"at\":\"{at}\",\"source\":\"local\",\"command\":{{\"name\":\"stop\"}}}}\n"
    );
    std::fs::write(p.dir.join(".hank/control.jsonl"), &lines).unwrap();
    p.fake("effect.sh", TICK_ONE);
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete");
    assert_eq!(p.calls(), 3);
    assert!(control_events(&p).is_empty());
    // The planted file is left as it was: nothing acknowledged there.
    assert_eq!(
        std::fs::read_to_string(p.dir.join(".hank/control.jsonl")).unwrap(),
        lines
    );
}

/// A command needs a running loop: with none, `hank ctl stop` is refused and nothing is
/// recorded (it would otherwise stop whichever run starts next).
#[test]
fn a_command_with_no_loop_running_is_refused() {
    let p = Project::new(&["a"]);
    let o = ctl_output(&p, &["stop"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_contains(&stderr(&o), "no loop is running");
    assert!(journal(&p).is_empty());
    p.fake("effect.sh", TICK_ONE);
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A `stop` given to a loop that ended before it took it (frozen, then killed: a loop takes
/// a command within a second, even during a call) expires: the next run is not stopped by
/// it, says so (a `control` event), and `hank ctl status` lists it as expired.
#[test]
fn an_untaken_stop_of_an_ended_run_expires_at_the_next_start() {
    let p = Project::new(&["a"]);
    p.fake("effect.sh", TICK_ONE).fake("sleep-1", "30");
    let child = Running::start(&p, &[], LONG);
    p.wait_calls(1, LONG);
    signal(child.child(), Signal::SIGSTOP);
    let stop = ctl(&p, &["stop"]);
    signal(child.child(), Signal::SIGKILL);
    let o = child.wait();
    assert_eq!(o.status.code(), None, "{}", stderr(&o));
    let pending = journal(&p);
    assert!(
        pending
            .iter()
            .any(|c| c["id"] == stop.as_str() && c["acknowledged"].is_null()),
        "{pending:?}"
    );

    p.fake("sleep-1", "0").fake("sleep-2", "0");
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete");
    let c = wait_ack(&p, &stop, Duration::from_secs(1));
    assert_eq!(c["expired"], true, "{c}");
    assert!(
        control_events(&p)
            .iter()
            .any(|(cmd, outcome)| cmd == "stop" && outcome.starts_with("expired"))
    );
    let status = ctl(&p, &["status"]);
    assert_contains(&status, "1 expired");
}
