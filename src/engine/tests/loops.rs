//! Whole runs through the test effects: calls, checks, waits and failover driven by
//! scripted answers, on a clock that only moves when the driver sleeps or an effect takes
//! time. No process is spawned.

use jiff::SignedDuration;

use super::effects::{Script, TestEffects};
use super::{block_on, settings, t0};
use crate::agent::profile::Agent;
use crate::analysis::{AgentError, Analysis, ErrorKind};
use crate::effects::AgentAnswer;
use crate::exit::ExitReason;
use crate::policy::verify::CheckKind;
use crate::settings::AgentCommand;
use crate::store::{EventKind, RunState};

const RC: &str = "VERIFY_COMMAND=make test\nVERIFY_AT_START=false\n";
pub(super) const OPEN: &str = "# Plan\n\n- [ ] make it work\n";
pub(super) const DONE: &str = "# Plan\n\n- [x] make it work\n";

/// A project with hank's files (`rc` as `.hankrc`) and an engine over `fx` with `agents`.
pub(super) fn project(
    dir: &std::path::Path,
    rc: &str,
    agents: &[&str],
    fx: &TestEffects,
) -> super::Engine {
    for (path, text) in [
        (".hankrc", rc),
        (".hank/PROMPT.md", "Work on the plan.\n"),
        (".hank/AGENT.md", "make test\n"),
        (".hank/fix_plan.md", OPEN),
    ] {
        std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
        std::fs::write(dir.join(path), text).unwrap();
    }
    fx.fx().project = dir.to_path_buf();
    let agents = agents
        .iter()
        .map(|name| Agent {
            profile: crate::agent::profile::load(name, dir).unwrap(),
            command: AgentCommand {
                program: (*name).into(),
                leading_args: Vec::new(),
            },
        })
        .collect();
    let s = settings(dir, rc);
    super::Engine::new(
        s,
        agents,
        crate::store::State::default(),
        Box::new(fx.clone()),
    )
}

fn answer(a: Analysis) -> AgentAnswer {
    AgentAnswer {
        analysis: a,
        duration: std::time::Duration::from_secs(120),
        startup_hang: false,
        interrupted: false,
    }
}

fn usage_limit(reset_at: jiff::Timestamp) -> Analysis {
    Analysis {
        error: Some(AgentError {
            kind: ErrorKind::UsageLimit,
            message: "usage limit reached".into(),
            api_status: Some(429),
            reset_at: Some(reset_at),
            window: Some("five_hour".into()),
        }),
        ..Analysis::default()
    }
}

pub(super) fn exit_event(fx: &TestEffects) -> (Option<ExitReason>, Option<bool>) {
    let f = fx.fx();
    let last = f.events.last().map(|e| e.kind.clone());
    match last {
        Some(EventKind::Exit {
            exit_reason,
            verified,
            ..
        }) => (exit_reason, verified),
        other => panic!("the last event is not the exit: {other:?}"),
    }
}

/// Test effects where the plan reads `plans[i]` after call `i` (`None`: as it was), the agent
/// answers `answers` in turn and the checks end as `checks` say.
pub(super) fn scripted(
    plans: &[Option<&str>],
    answers: Vec<Analysis>,
    checks: &[Script],
) -> TestEffects {
    let fx = TestEffects::default();
    {
        let mut f = fx.fx();
        f.plan_edits = plans.iter().map(|p| p.map(str::to_owned)).collect();
        f.answers = answers.into_iter().map(answer).collect();
        f.checks = checks.iter().copied().collect();
    }
    fx
}

/// Test effects where the first call hits a usage limit that resets at `reset` and the second
/// ticks the plan.
fn limited_then_done(reset: jiff::Timestamp) -> TestEffects {
    scripted(
        &[None, Some(DONE)],
        vec![usage_limit(reset), Analysis::default()],
        &[],
    )
}

/// Runs a project (`rc` as its `.hankrc`, `agents`) over `fx` in a temp folder: the exit code.
fn run_project(rc: &str, agents: &[&str], fx: &TestEffects) -> u8 {
    let dir = tempfile::tempdir().unwrap();
    let mut e = project(dir.path(), rc, agents, fx);
    block_on(e.run()).unwrap()
}

#[test]
fn a_call_then_a_passing_check_is_a_verified_stop() {
    let fx = scripted(&[Some(DONE)], vec![Analysis::default()], &[Script::Pass]);
    assert_eq!(run_project(RC, &["claude"], &fx), 0);
    assert_eq!(
        exit_event(&fx),
        (Some(ExitReason::PlanComplete), Some(true))
    );
    let f = fx.fx();
    assert_eq!(f.calls.len(), 1);
    assert_eq!(f.calls[0].1, "claude");
    assert_eq!(f.checks_run, vec![CheckKind::Completion]);
    // The call was on the ledger and saved before the agent ran.
    assert_eq!(f.saved[1].ledger.calls_in_window(t0()), 1);
    let last = f.statuses.last().unwrap();
    assert_eq!(last.state, RunState::Completed);
    let verification = last.verification.as_ref().unwrap();
    assert!(verification.last.as_ref().unwrap().passed);
    assert_eq!(f.slept, 0, "nothing waited");
}

#[test]
fn a_rejected_claim_is_told_to_the_next_loop_and_the_next_check_passes() {
    let fx = scripted(
        &[Some(DONE), None],
        vec![Analysis::default(), Analysis::default()],
        &[Script::Fail, Script::Pass],
    );
    assert_eq!(run_project(RC, &["claude"], &fx), 0);
    let f = fx.fx();
    assert_eq!(f.calls.len(), 2);
    assert_eq!(
        f.checks_run,
        vec![CheckKind::Completion, CheckKind::Completion]
    );
    assert!(
        f.said
            .iter()
            .any(|l| l.contains("rejected: the check failed")),
        "{:?}",
        f.said
    );
    drop(f);
    assert_eq!(
        exit_event(&fx),
        (Some(ExitReason::PlanComplete), Some(true))
    );
}

#[test]
fn a_usage_limit_wait_ends_at_the_fake_clocks_time() {
    let reset = t0() + SignedDuration::from_hours(5);
    let fx = limited_then_done(reset);
    assert_eq!(run_project(RC, &["claude"], &fx), 0);
    let f = fx.fx();
    assert_eq!(f.calls.len(), 2);
    // The second call came after the reset, on the fake clock, and the wait was saved.
    assert!(f.calls[1].3 >= reset, "{:?} < {reset}", f.calls[1].3);
    assert!(f.slept >= 5 * 3600 - 200, "ticks of a second: {}", f.slept);
    assert!(
        f.saved
            .iter()
            .any(|s| s.wait.is_some_and(|w| w.until >= reset))
    );
    assert!(f.saved.last().unwrap().wait.is_none());
    assert!(
        f.events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Waiting { .. }))
    );
}

#[test]
fn an_interrupt_during_a_check_stops_the_run() {
    let fx = scripted(
        &[Some(DONE)],
        vec![Analysis::default()],
        &[Script::Interrupted],
    );
    assert_eq!(run_project(RC, &["claude"], &fx), crate::exit::INTERRUPTED);
    assert_eq!(exit_event(&fx), (Some(ExitReason::Interrupted), None));
    let f = fx.fx();
    assert_eq!(f.checks_run, vec![CheckKind::Completion]);
    assert_eq!(f.calls.len(), 1, "no call after the interrupt");
}

#[test]
fn an_agent_at_its_usage_limit_fails_over_to_the_next() {
    let reset = t0() + SignedDuration::from_hours(5);
    let fx = limited_then_done(reset);
    let rc = format!("{RC}AGENTS=claude,codex\n");
    assert_eq!(run_project(&rc, &["claude", "codex"], &fx), 0);
    let f = fx.fx();
    let who: Vec<&str> = f.calls.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(who, ["claude", "codex"]);
    assert_eq!(f.slept, 0, "failover does not wait for the reset");
    assert!(f.calls[1].3 < reset);
    assert!(f.events.iter().any(|e| matches!(
        &e.kind,
        EventKind::AgentSwitched { from, to, .. } if from == "claude" && to == "codex"
    )));
}

#[test]
fn the_baseline_runs_after_a_resumed_wait_and_never_before_a_stop_at_once() {
    use crate::policy::budget::{SavedWait, WaitReason};
    let until = t0() + SignedDuration::from_hours(5);
    let rc = "VERIFY_COMMAND=make test\nVERIFY_AT_START=true\n";
    let run_saved = |rc: &str, fx: &TestEffects| {
        let dir = tempfile::tempdir().unwrap();
        let mut e = project(dir.path(), rc, &["claude"], fx);
        e.state.wait = Some(SavedWait {
            reason: WaitReason::UsageLimit,
            until,
        });
        block_on(e.run()).unwrap()
    };
    // The last run's wait first, then the baseline, then the call.
    let fx = scripted(&[Some(DONE)], vec![Analysis::default()], &[]);
    assert_eq!(run_saved(rc, &fx), 0);
    let f = fx.fx();
    assert_eq!(f.checks_run, [CheckKind::Baseline, CheckKind::Completion]);
    let baseline = (f.saved.iter())
        .find_map(|s| s.last_verification.clone())
        .unwrap();
    assert_eq!(baseline.kind, CheckKind::Baseline);
    assert!(baseline.at >= until, "{} < {until}", baseline.at);
    drop(f);
    // ON_USAGE_LIMIT=exit: the run stops at once, no check runs.
    let fx = scripted(&[], vec![], &[]);
    let code = run_saved(&format!("{rc}ON_USAGE_LIMIT=exit\n"), &fx);
    assert_eq!(code, ExitReason::UsageLimit.code());
    assert!(fx.fx().checks_run.is_empty());
}
