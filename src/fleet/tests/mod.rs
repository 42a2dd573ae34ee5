//! The fleet's driver over its test effects ([`effects::TestFx`]): the rules of *when* the
//! driver does things — a slow git job never delays reaping a worker or taking `hank ctl`,
//! independent git jobs overlap, Ctrl-C during a merge ends cleanly, and a whole small fleet
//! leaves the `fleet.json` its recorded events replay to — and *when it wakes*: at a job's or
//! a worker's end, at Ctrl-C, at its periodic readings, never on a fixed turn. No process, no
//! git, no sleep: the clock moves only when the driver waits.

mod effects;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use self::effects::{Job, Run, TestFx};
use super::effects::Wake;
use super::supervise::Driver;
use crate::policy::fixplan;
use crate::policy::fleet::machine::{Config, Fleet, MergeOutcome, MergeProblemKind, replay};
use crate::policy::fleet::{TaskState, tasks_from_plan};
use crate::store::schema::FleetFile;

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

/// `t0` + `ms` milliseconds.
fn at(ms: i64) -> Timestamp {
    t0() + SignedDuration::from_millis(ms)
}

fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

const TWO: &str = "## A\n- [ ] a\n## B\n- [ ] b\n";

/// Runs the fleet of `plan` with `agents` over `fx` to its end; the exit code.
fn run(plan: &str, agents: usize, fx: &TestFx) -> u8 {
    let specs = tasks_from_plan(plan, &fixplan::default_optional_sections()).unwrap();
    let cfg = Config {
        agents,
        into: "hank/fleet".into(),
        checkout: "/work/p".into(),
        min_free_memory: 1 << 30,
        max_merge_attempts: 2,
        stop_grace_secs: 20,
        ..Config::default()
    };
    let file = FleetFile {
        into: cfg.into.clone(),
        state: "running".into(),
        ..FleetFile::default()
    };
    let fleet = Fleet::new(cfg.clone(), specs, file, &BTreeMap::new());
    let driver = Driver::new(fleet, fx.clone(), Duration::ZERO);
    crate::proc::runtime()
        .unwrap()
        .block_on(driver.run(&cfg, vec![], None))
        .unwrap()
}

fn last_saved(fx: &TestFx) -> FleetFile {
    fx.0.borrow().saved.last().cloned().unwrap()
}

fn state(file: &FleetFile, name: &str) -> TaskState {
    file.tasks.iter().find(|t| t.name == name).unwrap().state()
}

fn when(fx: &TestFx, what: &str) -> Timestamp {
    fx.when(what)
        .unwrap_or_else(|| panic!("never {what:?}: {:?}", fx.0.borrow().log))
}

#[test]
fn a_slow_git_job_delays_neither_reaping_a_worker_nor_hank_ctl() {
    let fx = TestFx::at(t0());
    {
        let mut s = fx.0.borrow_mut();
        s.runs.insert(
            "A".into(),
            Run {
                takes: secs(2),
                ..Run::default()
            },
        );
        s.runs.insert(
            "B".into(),
            Run {
                takes: secs(4),
                ..Run::default()
            },
        );
        // A's commit holds its git for 5 s.
        s.takes.insert((Job::Commit, "A".into()), secs(5));
        s.steers.push((at(3000), true, false));
    }
    assert_eq!(run(TWO, 2, &fx), crate::exit::OK);
    let held = when(&fx, "done commit a");
    assert!(held >= when(&fx, "job commit a") + secs(5));
    // B started at once and ended at 4 s: reaped then, its work committed and merged, all
    // while A's commit is still under way.
    assert_eq!(when(&fx, "start b"), at(0));
    assert_eq!(when(&fx, "reaped b"), at(4000));
    assert!(when(&fx, "done merge b") < held, "{:?}", fx.0.borrow().log);
    // The pause typed at 3 s is taken within a second and saved.
    let paused = when(&fx, "ctl paused=true");
    assert!(paused <= at(4000), "{paused}");
    let saved_paused =
        fx.0.borrow()
            .saved
            .iter()
            .find(|f| f.paused)
            .and_then(|f| f.updated_at)
            .unwrap();
    assert!(saved_paused < held);
    let end = last_saved(&fx);
    assert_eq!(
        (state(&end, "A"), state(&end, "B")),
        (TaskState::Merged, TaskState::Merged)
    );
}

#[test]
fn hank_ctl_stop_is_taken_while_a_slow_merge_runs() {
    let fx = TestFx::at(t0());
    {
        let mut s = fx.0.borrow_mut();
        s.runs.insert(
            "B".into(),
            Run {
                takes: secs(60),
                ..Run::default()
            },
        );
        s.takes.insert((Job::Merge, "A".into()), secs(5));
        s.steers.push((at(3500), false, true));
    }
    // One agent: A runs 3 s, its merge holds git from 3.2 s to 8.2 s; B starts on A's
    // freed worktree meanwhile.
    assert_eq!(run(TWO, 1, &fx), crate::exit::INTERRUPTED);
    let merge_done = when(&fx, "done merge a");
    assert!(when(&fx, "start b") < merge_done);
    // Taken at the next control poll (about once a second) and forwarded to B's run, which
    // stops a second later — before A's merge is done.
    assert!(when(&fx, "ctl paused=false stopping=true") <= at(4000));
    assert!(when(&fx, "forwarded stop b") < merge_done);
    assert!(when(&fx, "reaped b") < merge_done);
    let end = last_saved(&fx);
    assert_eq!(
        state(&end, "A"),
        TaskState::Merged,
        "the merge under way landed"
    );
    assert_eq!(state(&end, "B"), TaskState::Pending, "{end:?}");
    assert_eq!(end.state, "interrupted");
}

#[test]
fn independent_git_jobs_are_in_flight_at_once() {
    let fx = TestFx::at(t0());
    {
        let mut s = fx.0.borrow_mut();
        s.runs.insert(
            "A".into(),
            Run {
                takes: secs(2),
                ..Run::default()
            },
        );
        s.runs.insert(
            "B".into(),
            Run {
                takes: secs(3),
                ..Run::default()
            },
        );
        s.takes.insert((Job::Commit, "A".into()), secs(5));
        s.takes.insert((Job::Commit, "B".into()), secs(5));
        s.takes.insert((Job::Merge, "A".into()), secs(5));
    }
    assert_eq!(run(TWO, 2, &fx), crate::exit::OK);
    // B's commit starts while A's runs; A's merge starts while B's commit runs.
    assert!(when(&fx, "job commit b") < when(&fx, "done commit a"));
    assert!(when(&fx, "job merge a") < when(&fx, "done commit b"));
    assert!(fx.0.borrow().most_jobs >= 2);
    // Overlapped: the fleet took about 2 + 5 + 5 s, not 2 + 5 + 5 + 5.
    assert!(
        when(&fx, "done merge b") < at(14_000),
        "{:?}",
        fx.0.borrow().log
    );
}

#[test]
fn ctrl_c_during_a_merge_stops_the_workers_and_saves() {
    let fx = TestFx::at(t0());
    {
        let mut s = fx.0.borrow_mut();
        s.runs.insert(
            "A".into(),
            Run {
                takes: secs(1),
                ..Run::default()
            },
        );
        s.runs.insert(
            "B".into(),
            Run {
                takes: secs(60),
                ..Run::default()
            },
        );
        s.takes.insert((Job::Merge, "A".into()), secs(5));
        s.interrupts.push(at(3000));
    }
    assert_eq!(run(TWO, 2, &fx), crate::exit::INTERRUPTED);
    let merging = (when(&fx, "job merge a"), when(&fx, "done merge a"));
    let term = when(&fx, "term b");
    assert!(
        merging.0 < term && term < merging.1,
        "signalled during the merge"
    );
    assert_eq!(term, at(3000));
    assert!(fx.when("kill b").is_none(), "it stopped within the grace");
    let f = fx.0.borrow();
    assert!(
        f.said
            .iter()
            .any(|l| l == "interrupted; stopping 1 task(s)")
    );
    let end = f.saved.last().unwrap();
    assert!(
        end.updated_at.unwrap() >= merging.1,
        "saved after the merge ended"
    );
    assert_eq!(end.state, "interrupted");
    assert_eq!(end.pid, None);
    assert_eq!(state(end, "A"), TaskState::Merged);
    let b = end.tasks.iter().find(|t| t.name == "B").unwrap();
    assert_eq!(
        (b.state(), b.pid, b.exit_code),
        (TaskState::Pending, None, Some(130))
    );
    assert!(
        !f.log.iter().any(|(_, l)| l == "clean up"),
        "B is left to resume"
    );
}

#[test]
fn a_second_ctrl_c_kills_a_worker_that_does_not_stop() {
    let fx = TestFx::at(t0());
    {
        let mut s = fx.0.borrow_mut();
        let stubborn = Run {
            takes: secs(600),
            ignores_term: true,
            ..Run::default()
        };
        s.runs.insert("A".into(), stubborn);
        s.interrupts.extend([at(2000), at(5000)]);
    }
    assert_eq!(run("## A\n- [ ] a\n", 1, &fx), crate::exit::INTERRUPTED);
    assert_eq!(when(&fx, "term a"), at(2000));
    assert_eq!(when(&fx, "kill a"), at(5000));
    assert_eq!(when(&fx, "reaped a"), at(5000), "killed: taken at once");
}

#[test]
fn a_small_fleet_saves_what_its_recorded_events_replay_to() {
    let fx = TestFx::at(t0());
    {
        let mut s = fx.0.borrow_mut();
        s.runs.insert(
            "B".into(),
            Run {
                takes: secs(5),
                ..Run::default()
            },
        );
        s.takes.insert((Job::Merge, "A".into()), secs(2));
        // A's first merge conflicts: back to its agent, then merged.
        let conflict = MergeOutcome::Failed {
            kind: MergeProblemKind::Conflict,
            what: "merging into hank/fleet conflicts in: x".into(),
            tip: "abc".into(),
            counts: true,
        };
        s.merges
            .insert("A".into(), VecDeque::from([conflict, MergeOutcome::Merged]));
    }
    let plan = "## A\n- [ ] a\n## B\n- [ ] b\n## C (after: A)\n- [ ] c\n";
    assert_eq!(run(plan, 2, &fx), crate::exit::OK);
    let f = fx.0.borrow();
    let end = f.saved.last().unwrap();
    for t in &end.tasks {
        assert_eq!(t.state(), TaskState::Merged, "{t:?}");
    }
    let a = end.tasks.iter().find(|t| t.name == "A").unwrap();
    assert_eq!(a.merge_attempts, 1);
    assert_eq!(end.state, "done");
    assert!(f.log.iter().filter(|(_, l)| l == "start a").count() == 2);
    assert!(f.log.iter().any(|(_, l)| l == "clean up"));
    // C comes after A: started only once A was merged.
    assert!(when(&fx, "start c") > when(&fx, "done merge a"));
    let replayed = replay(&f.record.join("\n"), &fixplan::default_optional_sections()).unwrap();
    assert_eq!(replayed.tasks, end.tasks);
    assert_eq!(replayed.state, end.state);
}

#[test]
fn a_job_that_ends_between_turns_is_taken_when_it_ends() {
    let fx = TestFx::at(t0());
    {
        let mut s = fx.0.borrow_mut();
        s.runs.insert(
            "A".into(),
            Run {
                takes: SignedDuration::from_millis(2950),
                ..Run::default()
            },
        );
        // Its worktree takes 50 ms, its commit 200 ms: ready at 0.05 s, the run ends at
        // 3 s, the commit at 3.2 s.
        s.takes
            .insert((Job::Prepare, "A".into()), SignedDuration::from_millis(50));
        s.takes
            .insert((Job::Commit, "A".into()), SignedDuration::from_millis(200));
        s.takes
            .insert((Job::Merge, "A".into()), SignedDuration::from_millis(1234));
    }
    assert_eq!(run("## A\n- [ ] a\n", 1, &fx), crate::exit::OK);
    assert_eq!(when(&fx, "start a"), at(50));
    assert_eq!(when(&fx, "reaped a"), at(3000));
    assert_eq!(
        when(&fx, "done commit a"),
        at(3200),
        "not at the next 100 ms turn"
    );
    assert_eq!(
        when(&fx, "job merge a"),
        at(3200),
        "its merge starts at once"
    );
    assert_eq!(when(&fx, "done merge a"), at(4434));
    assert_eq!(
        last_saved(&fx).updated_at,
        Some(at(4434)),
        "the end saved then"
    );
    let f = fx.0.borrow();
    let woke: Vec<(Timestamp, Wake)> = f.wakes.clone();
    assert!(woke.contains(&(at(3000), Wake::Worker)), "{woke:?}");
    assert!(woke.contains(&(at(3200), Wake::Job)), "{woke:?}");
}

#[test]
fn an_idle_fleet_wakes_only_for_its_periodic_readings() {
    let fx = TestFx::at(t0());
    {
        let mut s = fx.0.borrow_mut();
        for name in ["A", "B"] {
            s.runs.insert(
                name.into(),
                Run {
                    takes: secs(600),
                    ..Run::default()
                },
            );
        }
    }
    assert_eq!(run(TWO, 2, &fx), crate::exit::OK);
    let f = fx.0.borrow();
    // Between 10 s and 70 s both workers run and no job is under way: the driver wakes
    // once a second (hank ctl's journal, the tasks' figures), 600 times with a 100 ms turn.
    let idle: Vec<&(Timestamp, Wake)> = f
        .wakes
        .iter()
        .filter(|(t, _)| *t > at(10_000) && *t <= at(70_000))
        .collect();
    assert_eq!(idle.len(), 60, "{idle:?}");
    assert!(idle.iter().all(|(_, why)| *why == Wake::Deadline));
    // The whole 600 s fleet: about one wake-up a second plus a few for its events.
    assert!(f.wakes.len() <= 610, "{}", f.wakes.len());
}

#[test]
fn ctrl_c_during_a_wait_is_taken_at_once() {
    let fx = TestFx::at(t0());
    {
        let mut s = fx.0.borrow_mut();
        s.runs.insert(
            "A".into(),
            Run {
                takes: secs(600),
                ignores_term: true,
                ..Run::default()
            },
        );
        s.interrupts.push(at(2345));
    }
    assert_eq!(run("## A\n- [ ] a\n", 1, &fx), crate::exit::INTERRUPTED);
    assert_eq!(when(&fx, "term a"), at(2345), "not at the next turn");
    assert!(
        fx.0.borrow().wakes.contains(&(at(2345), Wake::Interrupt)),
        "{:?}",
        fx.0.borrow().wakes
    );
    // It ignores SIGTERM: killed when the 20 s grace is over (whole seconds: 2 + 20 + 1),
    // the machine's own wake-up, not a periodic turn's.
    assert_eq!(when(&fx, "kill a"), at(23_000));
    assert_eq!(when(&fx, "reaped a"), at(23_000));
}

/// The supervisor tells the task events the machine emits, each once and before the save
/// that holds it: every task of a fleet that merges goes pending, running, verifying,
/// merging, merged — no state told twice in a row.
#[test]
fn the_supervisor_tells_each_task_event_the_machine_emits_once() {
    let fx = TestFx::at(t0());
    assert_eq!(run(TWO, 2, &fx), crate::exit::OK);
    let told = fx.0.borrow().told.clone();
    for task in ["A", "B"] {
        let states: Vec<TaskState> = (told.iter())
            .filter(|t| t.task == task)
            .map(|t| t.state)
            .collect();
        assert_eq!(
            states.first(),
            Some(&TaskState::Pending),
            "{task}: {states:?}"
        );
        assert_eq!(
            states.last(),
            Some(&TaskState::Merged),
            "{task}: {states:?}"
        );
        assert!(states.contains(&TaskState::Running), "{task}: {states:?}");
        assert!(
            states.windows(2).all(|w| w[0] != w[1]),
            "{task}: told once per change: {states:?}"
        );
    }
    assert_eq!(state(&last_saved(&fx), "A"), TaskState::Merged);
}
