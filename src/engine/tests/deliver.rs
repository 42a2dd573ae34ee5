//! A delivery round inside the run, on the test effects' clock: the forge answers "pending"
//! for most of a 30-minute CI wait, then green; the wait sleeps through `Effects::sleep` (the
//! clock moves, nothing sleeps) and the round ends the run `delivered`. No process, no git:
//! delivery's git ([`DeliverGit`]: [`ScriptedGit`]) and forge are scripted.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::block_on;
use super::effects::{Script, TestEffects};
use super::loops::{DONE, project, scripted};
use crate::analysis::Analysis;
use crate::deliver::in_run::{DeliverGit, InRun};
use crate::deliver::scripted::{SHA, ScriptedGit, place};
use crate::exit::ExitReason;
use crate::forge::scripted::{ScriptedForge, pending_then};
use crate::policy::deliver::CheckState;
use crate::policy::deliver::machine::replay;
use crate::store::EventKind;
use crate::store::schema::{Delivery, DeliveryStep};

fn deliveries(fx: &TestEffects) -> Vec<(Timestamp, Delivery)> {
    fx.fx()
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Delivery(d) => Some((e.at, (**d).clone())),
            _ => None,
        })
        .collect()
}

/// The round's recorded events replay to the same record (`last`), and to the delivery.json
/// shown (the last of `written`).
fn assert_the_round_replays(d: &InRun, last: &Delivery, written: &[(std::path::PathBuf, Vec<u8>)]) {
    let (cfg, start, events) = d.recorded().unwrap();
    assert!(events.len() > 200, "{} events", events.len());
    let replayed = replay(cfg, start.clone(), events);
    assert_eq!(&replayed, last);
    let (_, json) = written
        .iter()
        .rev()
        .find(|(p, _)| p.ends_with(".hank/delivery.json"))
        .unwrap();
    let shown: Delivery = serde_json::from_slice(json).unwrap();
    assert_eq!(shown, replayed.shown());
}

#[test]
fn a_delivery_round_waits_out_a_long_ci_on_the_effects_clock() {
    let rc = "VERIFY_COMMAND=make test\nVERIFY_AT_START=false\nDELIVER=pr\n\
              CI_APPEAR_TIMEOUT=10m\nCI_TIMEOUT=30m\n";
    let fx = scripted(&[Some(DONE)], vec![Analysis::default()], &[Script::Pass]);
    let dir = tempfile::tempdir().unwrap();
    let mut e = project(dir.path(), rc, &["claude"], &fx);
    // The forge says "pending" for 100 looks (25 minutes at one look every 15 s), then green.
    let forge = ScriptedForge::new(SHA, pending_then(100, CheckState::Passed));
    let (looks, opened) = (Arc::clone(&forge.looks), Arc::clone(&forge.opened));
    let git = Arc::new(ScriptedGit::default());
    e.delivery = Some(
        InRun::of(
            &e.s,
            place(),
            Some(Box::new(forge)),
            Arc::clone(&git) as Arc<dyn DeliverGit>,
        )
        .recording(),
    );

    let code = block_on(e.run()).unwrap();

    assert_eq!(code, 0);
    assert_eq!(
        *git.calls.lock().unwrap(),
        vec![
            "commit hank/main".to_string(),
            format!("scan {SHA}"),
            "push origin hank/main".into()
        ]
    );
    assert_eq!(opened.lock().unwrap().len(), 1, "one pull request");
    assert_eq!(*looks.lock().unwrap(), 101, "100 pending looks, then green");
    let told = deliveries(&fx);
    let pending: Vec<_> = told.iter().filter(|(_, d)| d.checks == "pending").collect();
    let green: Vec<_> = told.iter().filter(|(_, d)| d.checks == "green").collect();
    assert_eq!(pending.len(), 1, "{told:?}");
    assert_eq!(green.len(), 1, "{told:?}");
    let (pushed_at, _) = pending[0];
    let (judged_at, d) = green[0];
    // The wait took 25 minutes on the effects' clock: 100 polls 15 s apart, slept a second
    // at a time through `Effects::sleep`.
    assert_eq!(
        judged_at.duration_since(*pushed_at),
        SignedDuration::from_mins(25)
    );
    assert_eq!(d.exit_reason, Some(ExitReason::Delivered));
    assert_eq!(d.head.as_deref(), Some(SHA));
    assert_eq!(d.pr_number, Some(7));
    let f = fx.fx();
    assert_eq!(f.slept, 25 * 60, "one sleep per second of the wait");
    // The countdown was shown in status.json: the verdict due 30 minutes after the push, one
    // check pending.
    let due = *pushed_at + SignedDuration::from_mins(30);
    assert!(
        f.statuses.iter().any(|s| s
            .delivery
            .as_ref()
            .is_some_and(|d| d.checks_due == Some(due) && d.checks_pending == Some(1))),
        "the countdown in status.json"
    );
    // The records went through the effects: `.hank/delivery.json` and the per-user record,
    // finished.
    assert!(
        f.written
            .iter()
            .any(|(p, _)| p.ends_with(".hank/delivery.json"))
    );
    let last = f.delivery_records.last().unwrap();
    assert_eq!(last.step, DeliveryStep::Finished);
    assert_eq!(last.at, Some(*judged_at));
    assert_the_round_replays(e.delivery.as_ref().unwrap(), last, &f.written);
    drop(f);
    assert_eq!(
        super::loops::exit_event(&fx),
        (Some(ExitReason::Delivered), Some(true))
    );
}

#[test]
fn an_interrupt_during_the_ci_wait_stops_the_round_interrupted() {
    let rc = "VERIFY_COMMAND=make test\nVERIFY_AT_START=false\nDELIVER=pr\nCI_TIMEOUT=30m\n";
    let fx = scripted(&[Some(DONE)], vec![Analysis::default()], &[Script::Pass]);
    fx.fx().interrupt_after_sleeps = Some(90);
    let dir = tempfile::tempdir().unwrap();
    let mut e = project(dir.path(), rc, &["claude"], &fx);
    let forge = ScriptedForge::new(SHA, pending_then(usize::MAX, CheckState::Passed));
    let looks = Arc::clone(&forge.looks);
    e.delivery = Some(InRun::of(
        &e.s,
        place(),
        Some(Box::new(forge)),
        Arc::new(ScriptedGit::default()),
    ));
    let code = block_on(e.run()).unwrap();
    assert_eq!(code, ExitReason::Interrupted.code());
    // 90 one-second sleeps: 6 looks 15 s apart, the interrupt in the sixth interval.
    assert_eq!(*looks.lock().unwrap(), 6);
    let told = deliveries(&fx);
    let (_, last) = told.last().unwrap();
    assert_eq!(last.exit_reason, Some(ExitReason::Interrupted));
    // Left open for `hank deliver` at the step reached.
    let f = fx.fx();
    assert_eq!(
        f.delivery_records.last().unwrap().step,
        DeliveryStep::PrOpened
    );
}

/// The engine's entry runs no git: the run's delivery is started by the delivery machine's
/// first command (where it goes, then the switch to its branch), before the first call.
#[test]
fn the_delivery_is_started_by_the_machines_first_command_before_any_call() {
    let rc = "VERIFY_COMMAND=make test\nVERIFY_AT_START=false\nDELIVER=branch\n";
    let fx = scripted(&[Some(DONE)], vec![Analysis::default()], &[Script::Pass]);
    let dir = tempfile::tempdir().unwrap();
    let mut e = project(dir.path(), rc, &["claude"], &fx);
    let git = Arc::new(ScriptedGit::default());
    e.delivery = InRun::new(&e.s, Arc::clone(&git) as Arc<dyn DeliverGit>);

    let code = block_on(e.run()).unwrap();

    assert_eq!(code, 0);
    assert_eq!(
        *git.calls.lock().unwrap(),
        vec![
            "locate origin".to_string(),
            "switch hank/main".into(),
            "commit hank/main".into(),
            format!("scan {SHA}"),
            "push origin hank/main".into()
        ]
    );
    let d = e.delivery.as_ref().unwrap().record();
    assert_eq!(
        (d.branch.as_str(), d.remote.as_str()),
        ("hank/main", "origin")
    );
    assert_eq!(d.exit_reason, Some(ExitReason::Delivered));
}

/// A delivery that cannot start (no such remote) is the run's error, before any call.
#[test]
fn a_delivery_that_cannot_start_fails_the_run_before_any_call() {
    let rc = "VERIFY_COMMAND=make test\nVERIFY_AT_START=false\nDELIVER=branch\n";
    let fx = scripted(&[Some(DONE)], vec![Analysis::default()], &[Script::Pass]);
    let dir = tempfile::tempdir().unwrap();
    let mut e = project(dir.path(), rc, &["claude"], &fx);
    let git = Arc::new(ScriptedGit {
        no_remote: true,
        ..ScriptedGit::default()
    });
    e.delivery = InRun::new(&e.s, Arc::clone(&git) as Arc<dyn DeliverGit>);

    let err = block_on(e.run()).unwrap_err();

    assert!(err.to_string().contains("does not exist"), "{err}");
    assert_eq!(
        *git.calls.lock().unwrap(),
        vec!["locate origin".to_string()]
    );
    assert_eq!(e.state.loop_count, 0, "no call");
}
