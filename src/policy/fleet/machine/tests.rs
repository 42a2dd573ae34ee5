//! Every rule of the fleet's supervision, on a fixed clock: no process, git or sleep.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::*;
use crate::policy::fixplan;
use crate::policy::fleet::tasks_from_plan;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn cfg(agents: usize) -> Config {
    Config {
        agents,
        into: "hank/fleet".into(),
        checkout: "/work/p".into(),
        min_free_memory: 1 << 30,
        max_merge_attempts: 2,
        stop_grace_secs: 20,
        ..Config::default()
    }
}

const PLAN: &str = "## A\n- [ ] a\n## B\n- [ ] b\n## C (after: A)\n- [ ] c\n";

fn fleet_of(plan: &str, cfg: Config) -> Fleet {
    let specs = tasks_from_plan(plan, &fixplan::default_optional_sections()).unwrap();
    Fleet::new(cfg, specs, FleetFile::default(), &BTreeMap::new())
}

fn tick() -> Event {
    Event::Tick {
        free_memory: Some(8 << 30),
        windows: vec![],
        cost_usd: 0.0,
    }
}

fn state(f: &Fleet, name: &str) -> TaskState {
    f.task(name).unwrap().state
}

fn prepared(cmds: &[Command]) -> Vec<String> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Prepare { task } => Some(task.clone()),
            _ => None,
        })
        .collect()
}

fn merges(cmds: &[Command]) -> Vec<(String, bool, Option<String>)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Merge {
                task,
                last,
                handed_back_at,
                done,
            } => {
                assert_eq!(done, &["a"], "the items its run ticked");
                Some((task.clone(), *last, handed_back_at.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Admitted, its worktree made, its worker started.
fn start(f: &mut Fleet, name: &str) {
    let cmds = f.on(
        Event::WorktreeReady {
            task: name.into(),
            worktree: format!("/wt/{name}"),
            differs: vec![],
        },
        at(1),
    );
    assert!(
        cmds.contains(&Command::Start { task: name.into() }),
        "{cmds:?}"
    );
    f.on(
        Event::WorkerStarted {
            task: name.into(),
            pid: 100,
            pid_start: Some(7),
        },
        at(1),
    );
}

/// Its run ended 0 and its work was committed (`a` ticked).
fn finish(f: &mut Fleet, name: &str, now: Timestamp) {
    let cmds = f.on(ended(name, 0), now);
    assert!(
        cmds.contains(&Command::Commit { task: name.into() }),
        "{cmds:?}"
    );
    assert_eq!(state(f, name), TaskState::Verifying);
    f.on(
        Event::Committed {
            task: name.into(),
            outcome: Ok(vec!["a".into()]),
        },
        now,
    );
}

fn ended(name: &str, code: u8) -> Event {
    Event::RunEnded {
        task: name.into(),
        code,
        loops: Some(2),
        cost_usd: Some(0.5),
        agent: Some("claude".into()),
        reason: None,
        message: None,
    }
}

fn failed(kind: MergeProblemKind, tip: &str, counts: bool) -> MergeOutcome {
    MergeOutcome::Failed {
        kind,
        what: "the problem".into(),
        tip: tip.into(),
        counts,
    }
}

#[test]
fn admission_by_agents_memory_and_after() {
    // (agents, free memory, started, held)
    type Row<'a> = (&'a str, usize, Option<u64>, &'a [&'a str], TaskState);
    let rows: [Row<'_>; 4] = [
        (
            "two agents: A and B start, C waits for A",
            2,
            Some(8 << 30),
            &["A", "B"],
            TaskState::Pending,
        ),
        (
            "one agent: A starts, B waits",
            1,
            Some(8 << 30),
            &["A"],
            TaskState::Waiting,
        ),
        (
            "memory low: the first starts anyway, the next waits",
            3,
            Some(1 << 20),
            &["A"],
            TaskState::Waiting,
        ),
        (
            "memory unknown is no reason to hold",
            3,
            None,
            &["A", "B"],
            TaskState::Pending,
        ),
    ];
    for (name, agents, free, want, b_or_c) in rows {
        let mut f = fleet_of(PLAN, cfg(agents));
        let cmds = f.on(
            Event::Tick {
                free_memory: free,
                windows: vec![],
                cost_usd: 0.0,
            },
            at(0),
        );
        assert_eq!(prepared(&cmds), want, "{name}");
        assert_eq!(state(&f, "A"), TaskState::Running, "{name}");
        let other = if want.len() == 2 { "C" } else { "B" };
        assert_eq!(state(&f, other), b_or_c, "{name}");
        assert_eq!(
            state(&f, "C"),
            TaskState::Pending,
            "{name}: C comes after A"
        );
    }
    let mut f = fleet_of(PLAN, cfg(1));
    f.on(tick(), at(0));
    assert!(
        f.file().held.as_deref().unwrap().contains("1 of 1 agents"),
        "{:?}",
        f.file().held
    );
}

#[test]
fn waves_a_task_starts_once_what_it_comes_after_is_merged() {
    let mut f = fleet_of(PLAN, cfg(4));
    assert_eq!(prepared(&f.on(tick(), at(0))), ["A", "B"]);
    start(&mut f, "A");
    finish(&mut f, "A", at(2));
    assert_eq!(state(&f, "A"), TaskState::Verifying);
    let cmds = f.on(tick(), at(2));
    assert_eq!(merges(&cmds), [("A".to_string(), false, None)]);
    assert_eq!(state(&f, "A"), TaskState::Merging);
    assert!(prepared(&cmds).is_empty(), "C waits for A's merge");
    f.on(
        Event::MergeEnded {
            task: "A".into(),
            outcome: MergeOutcome::Merged,
        },
        at(3),
    );
    assert_eq!(state(&f, "A"), TaskState::Merged);
    assert_eq!(f.task("A").unwrap().worktree, None);
    assert_eq!(prepared(&f.on(tick(), at(3))), ["C"]);
}

#[test]
fn a_run_that_ends_otherwise() {
    // (exit code, state after, discarded, stops admission at the limit)
    for (code, want, discard, limit) in [
        (3, TaskState::Pending, false, true),
        (130, TaskState::Pending, false, false),
        (2, TaskState::Failed, true, false),
        (1, TaskState::Failed, true, false),
    ] {
        let mut f = fleet_of("## A\n- [ ] a\n## B\n- [ ] b\n", cfg(1));
        f.on(tick(), at(0));
        start(&mut f, "A");
        let cmds = f.on(ended("A", code), at(5));
        assert_eq!(state(&f, "A"), want, "exit {code}");
        assert_eq!(
            cmds.contains(&Command::Discard { task: "A".into() }),
            discard,
            "exit {code}"
        );
        let t = f.task("A").unwrap();
        assert_eq!((t.exit_code, t.loops, t.pid), (Some(code), 2, None));
        if discard {
            let next = f.on(tick(), at(6));
            assert!(prepared(&next).is_empty(), "B waits for A's worktree");
            assert!(!next.contains(&Command::Finish), "waits for the discard");
            f.on(Event::Discarded { task: "A".into() }, at(6));
        }
        let next = f.on(tick(), at(6));
        assert_eq!(prepared(&next).is_empty(), limit, "exit {code}: {next:?}");
    }
}

#[test]
fn a_failed_task_blocks_what_comes_after_it() {
    let mut f = fleet_of(PLAN, cfg(1));
    f.on(tick(), at(0));
    start(&mut f, "A");
    f.on(ended("A", 1), at(1));
    f.on(Event::Discarded { task: "A".into() }, at(1));
    f.on(tick(), at(2));
    assert_eq!(state(&f, "C"), TaskState::Blocked);
    assert_eq!(
        f.task("C").unwrap().message,
        "a task it comes after failed (`hank fleet --retry` queues them again)"
    );
    start(&mut f, "B");
    finish(&mut f, "B", at(3));
    f.on(tick(), at(3));
    f.on(
        Event::MergeEnded {
            task: "B".into(),
            outcome: MergeOutcome::Merged,
        },
        at(4),
    );
    assert!(f.on(tick(), at(4)).contains(&Command::Finish));
    assert_eq!(f.end(), crate::exit::HALTED);
}

#[test]
fn merge_attempts_table() {
    use MergeProblemKind as K;
    // (attempts so far, handed back at, outcome, state, attempts after, handed back after)
    let rows = [
        (
            0,
            None,
            failed(K::Conflict, "t1", true),
            TaskState::Pending,
            1,
            Some("t1"),
        ),
        (
            1,
            Some("t1"),
            failed(K::Conflict, "t2", false),
            TaskState::Pending,
            1,
            Some("t2"),
        ),
        (
            1,
            Some("t1"),
            failed(K::Conflict, "t1", true),
            TaskState::Failed,
            2,
            Some("t1"),
        ),
        (
            1,
            None,
            failed(K::Red, "t1", true),
            TaskState::Failed,
            2,
            None,
        ),
        (
            0,
            None,
            failed(K::Markers, "t1", true),
            TaskState::Pending,
            1,
            None,
        ),
        (
            0,
            None,
            failed(K::Config, "t1", true),
            TaskState::Failed,
            1,
            None,
        ),
        (
            0,
            None,
            failed(K::Refused, "t1", true),
            TaskState::Failed,
            1,
            None,
        ),
        (
            1,
            Some("t1"),
            MergeOutcome::Merged,
            TaskState::Merged,
            1,
            None,
        ),
    ];
    for (attempts, handed, outcome, want, after, handed_after) in rows {
        let mut f = fleet_of("## A\n- [ ] a\n", cfg(1));
        f.header().tasks[0].merge_attempts = attempts;
        f.header().tasks[0].handed_back_at = handed.map(ToString::to_string);
        f.on(tick(), at(0));
        start(&mut f, "A");
        finish(&mut f, "A", at(1));
        let m = merges(&f.on(tick(), at(1)));
        assert_eq!(
            m,
            [(
                "A".to_string(),
                attempts >= 1,
                handed.map(ToString::to_string)
            )],
            "last when one more counted failure reaches MAX_MERGE_ATTEMPTS"
        );
        f.on(
            Event::MergeEnded {
                task: "A".into(),
                outcome: outcome.clone(),
            },
            at(2),
        );
        let t = f.task("A").unwrap();
        assert_eq!(
            (t.state, t.merge_attempts, t.handed_back_at.as_deref()),
            (want, after, handed_after),
            "{attempts} {handed:?} {outcome:?}"
        );
    }
}

#[test]
fn a_handed_back_task_merges_before_newer_work() {
    let mut f = fleet_of("## A\n- [ ] a\n## B\n- [ ] b\n", cfg(2));
    f.header().tasks[1].handed_back_at = Some("t0".into());
    f.on(tick(), at(0));
    start(&mut f, "A");
    start(&mut f, "B");
    finish(&mut f, "A", at(1));
    finish(&mut f, "B", at(1));
    let m = merges(&f.on(tick(), at(1)));
    assert_eq!(m[0].0, "B");
    assert!(
        merges(&f.on(tick(), at(2))).is_empty(),
        "one merge at a time"
    );
}

#[test]
fn windows_hold_by_forecast_and_exit_at_the_usage_limit() {
    let w = |percent: f64| WindowReading {
        name: "five_hour".into(),
        percent,
        limit: 80,
        resets_at: None,
    };
    let tick_w = |percent: f64| Event::Tick {
        free_memory: None,
        windows: vec![w(percent)],
        cost_usd: 0.0,
    };
    let mut f = fleet_of("## A\n- [ ] a\n## B\n- [ ] b\n## C\n- [ ] c\n", cfg(3));
    // First reading 40%: nothing has moved yet, all three start.
    assert_eq!(prepared(&f.on(tick_w(40.0), at(0))).len(), 3);

    let mut f = fleet_of("## A\n- [ ] a\n## B\n- [ ] b\n", cfg(1));
    f.on(tick_w(40.0), at(0));
    start(&mut f, "A");
    finish(&mut f, "A", at(1));
    // 40 → 70 for one task: one more would take it to 100%, but nothing runs: B starts.
    assert_eq!(prepared(&f.on(tick_w(70.0), at(1))), ["B"]);

    // At the limit with nothing running: held, or the fleet stops with ON_USAGE_LIMIT=exit.
    let mut f = fleet_of("## A\n- [ ] a\n", cfg(1));
    let cmds = f.on(tick_w(85.0), at(0));
    assert!(prepared(&cmds).is_empty());
    assert_eq!(state(&f, "A"), TaskState::Waiting);
    assert!(!cmds.contains(&Command::Finish), "waits for the reset");
    let mut f = fleet_of(
        "## A\n- [ ] a\n",
        Config {
            exit_at_usage_limit: true,
            ..cfg(1)
        },
    );
    let cmds = f.on(tick_w(85.0), at(0));
    assert!(cmds.contains(&Command::Finish), "{cmds:?}");
    assert_eq!(f.end(), crate::exit::LIMIT);
    assert_eq!(state(&f, "A"), TaskState::Pending);
}

#[test]
fn the_fleets_runtime_and_cost_stop_new_starts() {
    for (name, c, cost, now, held) in [
        (
            "runtime",
            Config {
                deadline: Some(at(60)),
                max_runtime_secs: 60,
                ..cfg(2)
            },
            0.0,
            at(60),
            Some("MAX_RUNTIME 60s reached"),
        ),
        (
            "before the deadline",
            Config {
                deadline: Some(at(60)),
                ..cfg(2)
            },
            0.0,
            at(59),
            None,
        ),
        (
            "cost at the cap",
            Config {
                max_cost_usd: 0.3,
                ..cfg(2)
            },
            0.3,
            at(0),
            Some("MAX_COST_USD reached: the tasks spent $0.30 of $0.30"),
        ),
    ] {
        let mut f = fleet_of("## A\n- [ ] a\n", c);
        let cmds = f.on(
            Event::Tick {
                free_memory: None,
                windows: vec![],
                cost_usd: cost,
            },
            now,
        );
        assert_eq!(f.file().held.as_deref(), held, "{name}");
        assert_eq!(prepared(&cmds).is_empty(), held.is_some(), "{name}");
        if held.is_some() {
            assert!(cmds.contains(&Command::Finish), "{name}");
            assert_eq!(f.end(), crate::exit::LIMIT, "{name}");
        }
    }
}

#[test]
fn ctrl_c_terminates_then_kills_after_the_grace() {
    let mut f = fleet_of("## A\n- [ ] a\n## B\n- [ ] b\n## C\n- [ ] c\n", cfg(2));
    f.on(tick(), at(0));
    start(&mut f, "A");
    let cmds = f.on(Event::Interrupted { signals: 1 }, at(10));
    assert!(cmds.contains(&Command::Terminate {
        tasks: vec!["A".into()]
    }));
    // B's worktree was being made: it does not start.
    let cmds = f.on(
        Event::WorktreeReady {
            task: "B".into(),
            worktree: "/wt/B".into(),
            differs: vec![],
        },
        at(11),
    );
    assert!(cmds.is_empty(), "{cmds:?}");
    assert_eq!(state(&f, "B"), TaskState::Pending);
    let kill = Command::Kill {
        tasks: vec!["A".into()],
    };
    let cmds = f.on(tick(), at(30));
    assert!(!cmds.contains(&kill) && prepared(&cmds).is_empty());
    assert!(f.on(tick(), at(31)).contains(&kill), "past the grace");
    f.on(Event::Interrupted { signals: 2 }, at(12));
    assert!(f.on(tick(), at(12)).contains(&kill), "a second Ctrl-C");
    f.on(ended("A", 130), at(32));
    assert!(f.on(tick(), at(32)).contains(&Command::Finish));
    assert_eq!(f.end(), crate::exit::INTERRUPTED);
    assert_eq!(state(&f, "C"), TaskState::Pending);
}

#[test]
fn the_machines_own_wake_ups_are_the_graces_end_and_the_deadline() {
    let with_deadline = Config {
        deadline: Some(at(60)),
        max_runtime_secs: 60,
        ..cfg(2)
    };
    // (case, config, interrupts at 10 s, now, its next wake-up)
    for (name, c, signals, now, wake) in [
        ("nothing by the clock", cfg(2), 0, at(5), None),
        (
            "the deadline",
            with_deadline.clone(),
            0,
            at(5),
            Some(at(60)),
        ),
        (
            "the deadline passed",
            with_deadline.clone(),
            0,
            at(60),
            None,
        ),
        ("the grace's end", cfg(2), 1, at(10), Some(at(31))),
        (
            "the grace's end, no deadline after Ctrl-C",
            with_deadline,
            1,
            at(12),
            Some(at(31)),
        ),
        ("the grace over: no busy wake-up", cfg(2), 1, at(31), None),
        ("a second Ctrl-C kills at once", cfg(2), 2, at(12), None),
    ] {
        let mut f = fleet_of("## A\n- [ ] a\n", c);
        f.on(tick(), at(0));
        start(&mut f, "A");
        if signals > 0 {
            f.on(Event::Interrupted { signals }, at(10));
        }
        assert_eq!(f.wake_at(now), wake, "{name}");
        if let Some(w) = wake {
            // Due then: a tick at that moment does what the wake-up is for.
            let cmds = f.on(tick(), w);
            let did = if signals > 0 {
                cmds.contains(&Command::Kill {
                    tasks: vec!["A".into()],
                })
            } else {
                f.file().held.as_deref() == Some("MAX_RUNTIME 60s reached")
            };
            assert!(did, "{name}: {cmds:?}");
        }
    }
    // No worker left to kill: nothing to wake for.
    let mut f = fleet_of("## A\n- [ ] a\n", cfg(2));
    f.on(Event::Interrupted { signals: 1 }, at(10));
    assert_eq!(f.wake_at(at(10)), None);
}

#[test]
fn hank_ctl_pause_holds_and_stop_ends() {
    let mut f = fleet_of("## A\n- [ ] a\n## B\n- [ ] b\n", cfg(1));
    assert_eq!(
        f.on(
            Event::Steer {
                paused: true,
                stopping: false
            },
            at(0)
        ),
        [Command::Save]
    );
    let cmds = f.on(tick(), at(0));
    assert!(prepared(&cmds).is_empty());
    assert_eq!(state(&f, "A"), TaskState::Waiting);
    assert!(
        f.task("A")
            .unwrap()
            .message
            .contains("paused by hank ctl pause")
    );
    assert!(!cmds.contains(&Command::Finish), "a pause waits");
    f.on(
        Event::Steer {
            paused: false,
            stopping: false,
        },
        at(1),
    );
    assert_eq!(prepared(&f.on(tick(), at(1))), ["A"]);
    start(&mut f, "A");
    f.on(
        Event::Steer {
            paused: false,
            stopping: true,
        },
        at(2),
    );
    assert!(!f.on(tick(), at(2)).contains(&Command::Finish), "A runs");
    f.on(ended("A", 130), at(3));
    assert!(f.on(tick(), at(3)).contains(&Command::Finish));
    assert_eq!(f.end(), crate::exit::INTERRUPTED);
    f.close(crate::exit::INTERRUPTED);
    assert_eq!(f.file().state, "interrupted");
    assert!(f.file().held.as_deref().unwrap().contains("hank ctl stop"));
}

#[test]
fn adoption_after_a_restart() {
    let specs = tasks_from_plan(
        "## A\n- [ ] a\n## B\n- [ ] b\n## C\n- [ ] c\n## D\n- [ ] d\n",
        &fixplan::default_optional_sections(),
    )
    .unwrap();
    let task = |name: &str, state: TaskState| FleetTask {
        name: name.into(),
        state,
        branch: format!("hank/{}", name.to_lowercase()),
        pid: Some(10),
        pid_start: Some(1),
        ..FleetTask::default()
    };
    let file = FleetFile {
        tasks: vec![
            task("A", TaskState::Running),
            task("B", TaskState::Running),
            task("C", TaskState::Merging),
            task("D", TaskState::Merged),
        ],
        ..FleetFile::default()
    };
    let worktrees = BTreeMap::from([("B".to_string(), "/wt/b".to_string())]);
    let mut f = Fleet::new(cfg(4), specs, file, &worktrees);
    let cmds = f.on(
        Event::Adopt {
            alive: vec!["A".into(), "C".into()],
        },
        at(0),
    );
    assert!(cmds.contains(&Command::Adopt { task: "A".into() }));
    assert!(
        !cmds.contains(&Command::Adopt { task: "C".into() }),
        "only a running task"
    );
    assert_eq!(
        [
            state(&f, "A"),
            state(&f, "B"),
            state(&f, "C"),
            state(&f, "D")
        ],
        [
            TaskState::Running,
            TaskState::Pending,
            TaskState::Pending,
            TaskState::Merged
        ]
    );
    assert_eq!(f.task("B").unwrap().pid, None);
    assert_eq!(f.task("B").unwrap().worktree.as_deref(), Some("/wt/b"));
    // A counts as a running agent: with 2 agents, one more starts.
    f.cfg.agents = 2;
    assert_eq!(prepared(&f.on(tick(), at(1))), ["B"]);
    finish(&mut f, "A", at(2));
    assert_eq!(merges(&f.on(tick(), at(2)))[0].0, "A");
}

#[test]
fn a_worktree_whose_configuration_differs_fails_its_task() {
    let mut f = fleet_of("## A\n- [ ] a\n", cfg(1));
    f.on(tick(), at(0));
    let cmds = f.on(
        Event::WorktreeReady {
            task: "A".into(),
            worktree: "/wt/a".into(),
            differs: vec![".hankrc changed".into()],
        },
        at(1),
    );
    assert!(!cmds.iter().any(|c| matches!(c, Command::Start { .. })));
    assert_eq!(state(&f, "A"), TaskState::Failed);
    assert!(
        f.task("A")
            .unwrap()
            .message
            .contains("/work/p (not run): .hankrc changed")
    );
    assert!(f.on(tick(), at(1)).contains(&Command::Finish));
    assert_eq!(f.end(), crate::exit::HALTED);
    f.close(crate::exit::HALTED);
    assert_eq!(f.file().state, "failed");
}

#[test]
fn a_fleet_with_everything_merged_ends_0() {
    let mut f = fleet_of("## A\n- [ ] a\n", cfg(1));
    f.on(tick(), at(0));
    start(&mut f, "A");
    finish(&mut f, "A", at(1));
    f.on(tick(), at(1));
    assert!(
        !f.on(tick(), at(1)).contains(&Command::Finish),
        "the merge runs"
    );
    f.on(
        Event::MergeEnded {
            task: "A".into(),
            outcome: MergeOutcome::Merged,
        },
        at(2),
    );
    assert!(f.on(tick(), at(2)).contains(&Command::Finish));
    assert_eq!(f.end(), crate::exit::OK);
    assert!(f.all_final());
}

#[test]
fn a_recorded_real_run_replays_to_its_fleet_json() {
    // Recorded by `HANK_KEEP_FLEET_RECORD=FILE cargo test --test integration --
    // fleet::two_tasks_editing_the_same_file`: two tasks, one conflict handed back to its agent
    // and merged on the second attempt.
    let record = include_str!("replay.jsonl");
    let real: FleetFile = serde_json::from_str(include_str!("replay.fleet.json")).unwrap();
    let replayed = replay(record, &fixplan::default_optional_sections()).unwrap();
    assert_eq!(replayed.tasks, real.tasks);
    assert_eq!(replayed.state, real.state);
    let attempts: u32 = real.tasks.iter().map(|t| t.merge_attempts).sum();
    assert_eq!(attempts, 1, "the fixture holds a conflict");
    let broken = format!("{record}not json\n");
    assert!(replay(&broken, &[]).unwrap_err().starts_with("line 42:"));
}

#[test]
fn a_finished_tasks_commit_frees_its_worktree_or_refuses_it() {
    let mut f = fleet_of("## A\n- [ ] a\n## B\n- [ ] b\n", cfg(1));
    f.on(tick(), at(0));
    start(&mut f, "A");
    f.on(ended("A", 0), at(1));
    // Its slot is free at once, but B waits for A's worktree being freed (to reuse it).
    let cmds = f.on(tick(), at(1));
    assert!(prepared(&cmds).is_empty() && !cmds.contains(&Command::Finish));
    assert_eq!(state(&f, "B"), TaskState::Waiting);
    let cmds = f.on(
        Event::Committed {
            task: "A".into(),
            outcome: Err("HEAD is not on hank/a".into()),
        },
        at(2),
    );
    assert!(cmds.contains(&Command::Save));
    let t = f.task("A").unwrap();
    assert_eq!(t.state, TaskState::Failed);
    assert!(t.message.contains("HEAD is not on hank/a"), "{}", t.message);
    let cmds = f.on(tick(), at(2));
    assert!(merges(&cmds).is_empty());
    assert_eq!(
        prepared(&cmds),
        ["B"],
        "no worktree freed: B checks out its own"
    );
}

#[test]
fn finished_tasks_worktrees_are_reused_one_start_each() {
    let mut f = fleet_of(
        "## A
- [ ] a
## B
- [ ] b
## C
- [ ] c
## D
- [ ] d
",
        cfg(2),
    );
    f.on(tick(), at(0));
    start(&mut f, "A");
    start(&mut f, "B");
    f.on(ended("A", 0), at(1));
    f.on(ended("B", 1), at(1));
    assert!(
        prepared(&f.on(tick(), at(1))).is_empty(),
        "both worktrees being freed"
    );
    f.on(Event::Discarded { task: "B".into() }, at(2));
    // One spare (B's), A's commit still under way: one start, then wait again.
    assert_eq!(prepared(&f.on(tick(), at(2))), ["C"]);
    f.on(
        Event::Committed {
            task: "A".into(),
            outcome: Ok(vec!["a".into()]),
        },
        at(3),
    );
    assert_eq!(prepared(&f.on(tick(), at(3))), ["D"]);
}

#[test]
fn a_committed_task_is_merged_after_a_restart_without_running_again() {
    let specs = tasks_from_plan("## A\n- [ ] a\n", &fixplan::default_optional_sections()).unwrap();
    let file = FleetFile {
        tasks: vec![FleetTask {
            name: "A".into(),
            state: TaskState::Merging,
            branch: "hank/a".into(),
            done_items: vec!["a".into()],
            ..FleetTask::default()
        }],
        ..FleetFile::default()
    };
    let mut f = Fleet::new(cfg(1), specs, file, &BTreeMap::new());
    f.on(Event::Adopt { alive: vec![] }, at(0));
    assert_eq!(state(&f, "A"), TaskState::Verifying);
    let cmds = f.on(tick(), at(0));
    assert!(prepared(&cmds).is_empty(), "not run again");
    assert_eq!(merges(&cmds), [("A".to_string(), false, None)]);
}

/// A task that failed names its run's documented exit reason, its message and `hank fleet
/// --retry`; `--retry` (an event of the machine, recorded and replayed like the others)
/// queues it again on its kept branch with the task it blocked, and both merge.
#[test]
fn a_retried_task_and_the_task_it_blocked_run_again_and_merge() {
    let mut f = fleet_of(PLAN, cfg(1));
    f.on(tick(), at(0));
    start(&mut f, "A");
    f.on(
        Event::RunEnded {
            task: "A".into(),
            code: 2,
            loops: Some(2),
            cost_usd: Some(0.0),
            agent: Some("claude".into()),
            reason: Some("agent_crashed".into()),
            message: Some("the agent crashed the same way twice: PermissionError: denied".into()),
        },
        at(1),
    );
    f.on(Event::Discarded { task: "A".into() }, at(1));
    f.on(tick(), at(2));
    let m = &f.task("A").unwrap().message;
    for want in [
        "its run stopped: agent_crashed (exit 2): the agent crashed the same way twice: PermissionError: denied",
        "its work is kept on hank/a",
        "`hank fleet --retry A` runs it again",
    ] {
        assert!(m.contains(want), "{want}: {m}");
    }
    assert_eq!(state(&f, "C"), TaskState::Blocked);
    start(&mut f, "B");
    finish(&mut f, "B", at(3));
    f.on(tick(), at(3));
    f.on(
        Event::MergeEnded {
            task: "B".into(),
            outcome: MergeOutcome::Merged,
        },
        at(4),
    );
    assert!(f.on(tick(), at(4)).contains(&Command::Finish));
    assert_eq!(f.end(), crate::exit::HALTED);
    f.close(crate::exit::HALTED);

    // The next `hank fleet --retry A`: a new machine over the recorded file.
    let specs = tasks_from_plan(PLAN, &fixplan::default_optional_sections()).unwrap();
    let targets = crate::policy::fleet::retry_targets(f.file(), &specs, Some("A")).unwrap();
    assert_eq!(targets, ["A"]);
    let mut g = Fleet::new(cfg(1), specs, f.file().clone(), &BTreeMap::new());
    g.on(Event::Adopt { alive: vec![] }, at(10));
    let retry = Event::Retry { tasks: targets };
    let line = serde_json::to_string(&retry).unwrap();
    assert_eq!(
        serde_json::from_str::<Event>(&line).unwrap(),
        retry,
        "{line}"
    );
    let cmds = g.on(retry, at(10));
    assert!(cmds.contains(&Command::Save), "{cmds:?}");
    let a = g.task("A").unwrap();
    assert_eq!(
        (a.state, a.retries, a.exit_code),
        (TaskState::Pending, 1, None)
    );
    assert!(
        a.message.contains("on its kept branch hank/a"),
        "{}",
        a.message
    );
    assert_eq!(state(&g, "C"), TaskState::Pending, "unblocked with A");
    assert_eq!(state(&g, "B"), TaskState::Merged, "B is left as it is");
    assert_eq!(
        prepared(&g.on(tick(), at(11))),
        ["A"],
        "C waits for A's merge"
    );
    start(&mut g, "A");
    finish(&mut g, "A", at(12));
    g.on(tick(), at(12));
    g.on(
        Event::MergeEnded {
            task: "A".into(),
            outcome: MergeOutcome::Merged,
        },
        at(13),
    );
    assert_eq!(prepared(&g.on(tick(), at(13))), ["C"]);
    start(&mut g, "C");
    let cmds = g.on(ended("C", 0), at(14));
    assert!(cmds.contains(&Command::Commit { task: "C".into() }));
    g.on(
        Event::Committed {
            task: "C".into(),
            outcome: Ok(vec!["c".into()]),
        },
        at(14),
    );
    g.on(tick(), at(14));
    g.on(
        Event::MergeEnded {
            task: "C".into(),
            outcome: MergeOutcome::Merged,
        },
        at(15),
    );
    assert!(g.on(tick(), at(15)).contains(&Command::Finish));
    assert_eq!(g.end(), crate::exit::OK);
}

/// `--retry` with no task named queues every failed task; a task blocked by a failure that
/// is not retried stays blocked; naming a task that did not fail, or no task, is refused.
#[test]
fn retry_queues_the_failed_tasks_and_refuses_what_did_not_fail() {
    use crate::policy::fleet::retry_targets;
    let plan = "## A\n- [ ] a\n## B\n- [ ] b\n## C (after: A)\n- [ ] c\n## D (after: B)\n- [ ] d\n";
    let specs = tasks_from_plan(plan, &fixplan::default_optional_sections()).unwrap();
    let task = |name: &str, state: TaskState| FleetTask {
        name: name.into(),
        state,
        branch: format!("hank/{}", name.to_lowercase()),
        ..FleetTask::default()
    };
    let file = FleetFile {
        tasks: vec![
            task("A", TaskState::Failed),
            task("B", TaskState::Failed),
            task("C", TaskState::Blocked),
            task("D", TaskState::Blocked),
        ],
        ..FleetFile::default()
    };
    assert_eq!(retry_targets(&file, &specs, None).unwrap(), ["A", "B"]);
    assert_eq!(
        retry_targets(&file, &specs, Some("b")).unwrap(),
        ["B"],
        "by slug"
    );
    assert_eq!(retry_targets(&file, &specs, Some("C")).unwrap(), ["C"]);
    let merged = FleetFile {
        tasks: vec![task("A", TaskState::Merged)],
        ..FleetFile::default()
    };
    let e = retry_targets(&merged, &specs, Some("A")).unwrap_err();
    assert!(e.contains("has not failed (it is merged)"), "{e}");
    let e = retry_targets(&file, &specs, Some("Nope")).unwrap_err();
    assert!(e.contains("\"Nope\"") && e.contains("A, B, C, D"), "{e}");
    assert!(retry_targets(&merged, &specs, None).unwrap().is_empty());

    // Only A is retried: C comes back with it, D stays blocked behind B.
    let mut f = Fleet::new(cfg(2), specs, file, &BTreeMap::new());
    f.on(
        Event::Retry {
            tasks: vec!["A".into()],
        },
        at(0),
    );
    let states: Vec<TaskState> = ["A", "B", "C", "D"].iter().map(|n| state(&f, n)).collect();
    use TaskState::{Blocked, Failed, Pending};
    assert_eq!(states, [Pending, Failed, Pending, Blocked]);
    // Nothing to queue: said, nothing changed.
    let cmds = f.on(Event::Retry { tasks: vec![] }, at(1));
    assert_eq!(
        cmds,
        [Command::Say(
            "--retry: no failed task to queue again".into()
        )]
    );
}

/// The machine is the only writer of the tasks' states, and it emits each change once as a
/// task event: new tasks are told pending, a started one running, a failed one failed with
/// its message; a task recorded before the fleet started is not told again.
#[test]
fn the_machine_emits_each_task_state_change_once() {
    let recorded = FleetFile {
        tasks: vec![FleetTask::in_state("B", TaskState::Pending)],
        ..FleetFile::default()
    };
    let specs = tasks_from_plan(
        "## A\n- [ ] a\n## B\n- [ ] b\n",
        &fixplan::default_optional_sections(),
    )
    .unwrap();
    let mut f = Fleet::new(cfg(1), specs, recorded, &BTreeMap::new());
    let told = |f: &mut Fleet| -> Vec<(String, TaskState)> {
        (f.task_events().into_iter())
            .map(|t| (t.task, t.state))
            .collect()
    };
    assert_eq!(told(&mut f), vec![("A".into(), TaskState::Pending)]);
    assert_eq!(told(&mut f), vec![], "told once");
    f.on(tick(), at(0));
    start(&mut f, "A");
    assert_eq!(
        told(&mut f),
        vec![
            ("B".into(), TaskState::Waiting),
            ("A".into(), TaskState::Running)
        ],
        "B (recorded) is told once it changes"
    );
    f.on(ended("A", 2), at(5));
    let events = f.task_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].state, TaskState::Failed);
    assert_eq!(events[0].branch, "hank/a");
    assert!(!events[0].message.is_empty(), "{events:?}");
    assert_eq!(f.task("A").unwrap().state(), TaskState::Failed);
}
