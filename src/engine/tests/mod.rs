//! The driver with test effects ([`effects::TestEffects`]): waits on a clock that moves when
//! slept on (a 5-hour wait runs at once), control facts fed in order, the agent's answers and
//! the check's results scripted. No process is spawned, nothing sleeps.
//!
//! ## At a glance (moved here from `engine/mod.rs`)
//!
//! `effects.rs` the `TestEffects`: a clock moved by sleeps, scripted answers and checks, every
//! write kept in memory; `loops.rs` whole runs: call → check → verified stop, a usage-limit
//! wait, an interrupt during a check, failover — `scripted` effects (plan edits, answers, check
//! results) run by `run_project`; `deliver.rs` a delivery round inside the run with a scripted
//! forge (`forge::scripted::ScriptedForge`, test-only: the checks of each look from a script,
//! looks and pull requests counted; also `deliver`'s own `wait_for_ci` tests on a moved clock)
//! and `DeliverGit`: a 30-minute CI wait (100 pending looks, then green) on the effects' clock,
//! and an interrupt during it; this file's settings come from `settings::resolve::resolve_args`.

use std::future::Future;
use std::path::Path;

use jiff::{SignedDuration, Timestamp};

use super::Engine;
use crate::policy::budget::{SavedWait, WaitReason};
use crate::policy::decide::Decision;
use crate::policy::run::{Answer, Control, Fact, Step, WaitFor};

mod deliver;
mod effects;
mod loops;

use effects::TestEffects;

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

/// Settings of a project in `dir` with `rc` as its `.hankrc`.
fn settings(dir: &Path, rc: &str) -> crate::settings::Settings {
    std::fs::create_dir_all(dir.join(".hank")).unwrap();
    crate::settings::resolve::resolve_args(&[], dir, &[], rc).unwrap()
}

/// An engine over `fx` for a project in `dir` without hank's files and without agents.
fn engine_with(dir: &Path, fx: &TestEffects) -> Engine {
    engine_rc_with(dir, fx, "")
}

/// [`engine_with`] with these `.hankrc` lines.
fn engine_rc_with(dir: &Path, fx: &TestEffects, rc: &str) -> Engine {
    fx.fx().project = dir.to_path_buf();
    let s = settings(dir, rc);
    Engine::new(
        s,
        Vec::new(),
        crate::store::State::default(),
        Box::new(fx.clone()),
    )
}

fn engine(dir: &Path, controls: Vec<Vec<Control>>) -> (Engine, TestEffects) {
    let fx = TestEffects::default();
    fx.fx().controls = controls.into();
    (engine_with(dir, &fx), fx)
}

/// [`engine`] with these `.hankrc` lines.
fn engine_rc(dir: &Path, controls: Vec<Vec<Control>>, rc: &str) -> (Engine, TestEffects) {
    let fx = TestEffects::default();
    fx.fx().controls = controls.into();
    (engine_rc_with(dir, &fx, rc), fx)
}

fn block_on<F: Future>(f: F) -> F::Output {
    crate::proc::runtime().unwrap().block_on(f)
}

/// The run in the wait a decision of `d` leads to.
fn waiting_after(e: &mut Engine, d: Decision) -> Step {
    let now = e.fx.now();
    e.run = crate::policy::run::Run::new(e.run_config(now));
    e.run.on(Fact::Calling, now);
    e.run.on(
        Fact::Answered(Answer {
            decision: d,
            without_claims: d,
            free_retry: false,
            productive_error: false,
            interrupted: false,
            error: false,
            resumed: false,
        }),
        now,
    );
    e.run.next(now)
}

/// The run in the wait of a decision to wait until `until` for `reason`.
fn limit_wait(e: &mut Engine, until: Timestamp, reason: WaitReason) -> Step {
    waiting_after(e, Decision::Wait { until, reason })
}

#[test]
fn a_saved_five_hour_usage_limit_wait_resumes_on_the_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let (mut e, fx) = engine(dir.path(), Vec::new());
    let until = t0() + SignedDuration::from_hours(5);
    e.state.wait = Some(SavedWait {
        reason: WaitReason::UsageLimit,
        until,
    });
    let limits = &e.s.max_window_percent.value;
    let resume =
        crate::policy::windows::resume_saved(e.state.wait, &e.state.windows, limits, t0(), false);
    e.run = crate::policy::run::Run::new(e.run_config(t0())).resuming(resume);
    let step = e.run.next(t0());
    let wait = WaitFor::Limit(WaitReason::UsageLimit);
    assert_eq!(
        step,
        Step::Wait {
            until: Some(until),
            reason: wait
        }
    );
    let stopped = block_on(e.execute(step)).unwrap();
    assert_eq!(stopped, None);
    assert!(e.fx.now() >= until);
    // The wait is over and no longer saved (a restart calls at once).
    assert_eq!(e.state.wait, None);
    let saved = fx.fx().saved.last().cloned().unwrap();
    assert_eq!(saved.wait, None, "{saved:?}");
}

#[test]
fn a_limit_wait_then_the_gates_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _fx) = engine(dir.path(), Vec::new());
    let until = t0() + SignedDuration::from_hours(2);
    let step = limit_wait(&mut e, until, WaitReason::Backoff);
    assert_eq!(
        step,
        Step::Wait {
            until: Some(until),
            reason: WaitFor::Limit(WaitReason::Backoff)
        }
    );
    assert_eq!(block_on(e.execute(step)).unwrap(), None);
    assert!(e.fx.now() >= until);
    assert_eq!(e.run.next(e.fx.now()), Step::Observe);
}

#[test]
fn retry_now_cuts_a_wait_short_and_stop_ends_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _fx) = engine(dir.path(), vec![vec![], vec![Control::RetryNow]]);
    let until = t0() + SignedDuration::from_hours(5);
    let step = limit_wait(&mut e, until, WaitReason::UsageLimit);
    assert_eq!(block_on(e.execute(step)).unwrap(), None);
    // Polled before each tick of a second: one tick, not five hours.
    assert_eq!(e.fx.now(), t0() + SignedDuration::from_secs(1));
    assert_eq!(e.run.next(e.fx.now()), Step::Observe);

    drop(e);
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _fx) = engine(dir.path(), vec![vec![Control::Stop]]);
    let step = limit_wait(&mut e, until, WaitReason::UsageLimit);
    assert_eq!(
        block_on(e.execute(step)).unwrap(),
        Some(crate::exit::ExitReason::Interrupted)
    );
}

#[test]
fn a_pause_holds_until_resume() {
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _fx) = engine(dir.path(), vec![vec![], vec![], vec![Control::Resume]]);
    let now = e.fx.now();
    e.run.on(Fact::Control(Control::Pause), now);
    e.run.on(Fact::Observed(observation()), now);
    let step = e.run.next(now);
    assert_eq!(
        step,
        Step::Wait {
            until: None,
            reason: WaitFor::Paused
        }
    );
    assert_eq!(block_on(e.execute(step)).unwrap(), None);
    assert_eq!(e.fx.now(), t0() + SignedDuration::from_secs(3));
    assert_eq!(e.run.next(e.fx.now()), Step::Observe);
}

#[test]
fn the_loop_delay_sleeps_on_the_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _fx) = engine(dir.path(), Vec::new());
    let until = t0() + SignedDuration::from_secs(90);
    let step = Step::Wait {
        until: Some(until),
        reason: WaitFor::LoopDelay,
    };
    assert_eq!(block_on(e.execute(step)).unwrap(), None);
    assert_eq!(e.fx.now(), until);
}

fn observation() -> crate::policy::run::Observation {
    crate::policy::run::Observation {
        missing_files: false,
        plan_complete: false,
        breaker_open: false,
        budget: crate::policy::budget::BudgetCheck::Allow,
        window: crate::policy::windows::WindowCheck::Allow,
        pick: crate::policy::failover::Pick::Use(0),
    }
}

#[test]
fn a_siblings_window_reading_is_folded_before_the_gates() {
    let dir = tempfile::tempdir().unwrap();
    let reading = crate::analysis::WindowReading {
        name: "five_hour".into(),
        fields: crate::analysis::WindowFields {
            utilization: Some(0.97),
            resets_at: Some(t0() + SignedDuration::from_hours(2)),
            status: None,
        },
    };
    let (mut e, _fx) = engine(dir.path(), vec![vec![Control::Window(reading)]]);
    assert_eq!(block_on(e.execute(Step::Observe)).unwrap(), None);
    let w = e.state.windows.get("five_hour").unwrap();
    assert_eq!(w.utilization_at(e.fx.now()), Some(0.97));
    // The project has none of hank's files: the gates stop the run.
    assert_eq!(
        e.run.next(e.fx.now()),
        Step::Stop(crate::exit::ExitReason::IntegrityFailure)
    );
}

#[test]
fn the_agent_never_sees_the_fleet_ledger_or_the_removed_client_settings() {
    for key in crate::agent::client::ENV_REMOVED {
        assert!(
            crate::effects::agent::AGENT_ENV_REMOVED.contains(key),
            "{key}"
        );
    }
    assert!(crate::effects::agent::AGENT_ENV_REMOVED.contains(&crate::store::fleet_ledger::ENV));
}

#[test]
fn forge_and_notification_credentials_stay_with_hank_unless_a_profile_passes_one() {
    let removed = crate::effects::agent::removed_for(&[], false);
    for key in [
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "GITLAB_TOKEN",
        "CI_JOB_TOKEN",
        "NOTIFY",
        "CONTROL_TOPIC",
    ] {
        assert!(removed.iter().any(|r| r == key), "{key}");
    }
    let passed = crate::effects::agent::removed_for(&["GH_TOKEN".to_string()], false);
    assert!(!passed.iter().any(|r| r == "GH_TOKEN"));
    assert!(passed.iter().any(|r| r == "GITHUB_TOKEN"));
    assert!(passed.iter().any(|r| r == crate::store::fleet_ledger::ENV));
}

/// `NEEDS_ANSWERS=wait`: the 8-hour wait for an answer runs on the injected clock and ends
/// the run with `needs_answers`; an answer ends it at once, and goes to the next context.
#[test]
fn a_wait_for_an_answer_times_out_or_is_answered() {
    use crate::exit::ExitReason;
    use crate::policy::run::{ContextNote, NoteKind};
    let needs = Decision::Stop(ExitReason::NeedsAnswers);
    let rc = "NEEDS_ANSWERS=wait\nANSWER_TIMEOUT=8h\n";
    let until = t0() + SignedDuration::from_hours(8);
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _fx) = engine_rc(dir.path(), Vec::new(), rc);
    let step = waiting_after(&mut e, needs);
    assert_eq!(
        step,
        Step::Wait {
            until: Some(until),
            reason: WaitFor::UserAnswer
        }
    );
    assert_eq!(block_on(e.execute(step)).unwrap(), None);
    assert!(e.fx.now() >= until);
    assert_eq!(e.run.next(e.fx.now()), Step::Stop(ExitReason::NeedsAnswers));
    drop(e);

    let answer = ContextNote {
        kind: NoteKind::Answer,
        text: "SQLite".into(),
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _fx) = engine_rc(
        dir.path(),
        vec![vec![], vec![Control::Note(answer.clone())]],
        rc,
    );
    let step = waiting_after(&mut e, needs);
    assert_eq!(block_on(e.execute(step)).unwrap(), None);
    assert!(e.fx.now() < t0() + SignedDuration::from_secs(3));
    assert_eq!(e.run.next(e.fx.now()), Step::Observe);
    assert_eq!(e.run.take_notes(), [answer]);
    drop(e);

    // NEEDS_ANSWERS=exit (the default): no wait.
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _fx) = engine(dir.path(), Vec::new());
    assert_eq!(
        waiting_after(&mut e, needs),
        Step::Stop(ExitReason::NeedsAnswers)
    );
}

/// A `stop` during a 10-minute loop delay ends the run at the next tick, not at its end.
#[test]
fn the_loop_delay_takes_commands() {
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _fx) = engine_rc(
        dir.path(),
        vec![vec![], vec![Control::Stop]],
        "LOOP_DELAY_SECONDS=600\n",
    );
    let step = waiting_after(&mut e, Decision::Continue);
    assert_eq!(
        step,
        Step::Wait {
            until: Some(t0() + SignedDuration::from_secs(600)),
            reason: WaitFor::LoopDelay
        }
    );
    assert_eq!(
        block_on(e.execute(step)).unwrap(),
        Some(crate::exit::ExitReason::Interrupted)
    );
    assert_eq!(e.fx.now(), t0() + SignedDuration::from_secs(1));
}
