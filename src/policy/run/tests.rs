//! Table tests of the loop's ordering rules, on a fixed clock: hours of waiting run in
//! microseconds (no sleeping, no spawning).

use jiff::{SignedDuration, Timestamp};

use super::*;
use crate::policy::time::{Clock, FixedClock};
use crate::policy::windows::OverLimit;

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn cfg() -> RunConfig {
    RunConfig {
        deadline: None,
        loop_delay: SignedDuration::ZERO,
        on_usage_limit: UsageLimitPolicy::Wait,
        failover: false,
        decide: DecideConfig::default(),
        answer_wait: None,
        review: None,
    }
}

fn clear() -> Observation {
    Observation {
        missing_files: false,
        plan_complete: false,
        breaker_open: false,
        budget: BudgetCheck::Allow,
        window: WindowCheck::Allow,
        pick: Pick::Use(0),
    }
}

fn answer(decision: Decision) -> Answer {
    Answer {
        decision,
        without_claims: Decision::Continue,
        free_retry: false,
        productive_error: false,
        interrupted: false,
        error: false,
        resumed: false,
    }
}

fn hours(h: i64) -> SignedDuration {
    SignedDuration::from_hours(h)
}

/// An answer whose decision is to wait until `until` for `reason`.
fn told_to_wait(until: Timestamp, reason: WaitReason) -> Answer {
    answer(Decision::Wait { until, reason })
}

/// The step of a limit wait until `until`.
fn limit_wait(until: Timestamp, reason: WaitReason) -> Step {
    Step::Wait {
        until: Some(until),
        reason: WaitFor::Limit(reason),
    }
}

/// One call answered "continue": the run goes on to the next observation.
fn continues(run: &mut Run, now: Timestamp) {
    let step = call(run, answer(Decision::Continue), now);
    assert_eq!(step, Step::Observe);
}

/// `window` at `percent` of its `limit`.
fn over(window: &str, percent: f64, limit: u32, resets_at: Option<Timestamp>) -> OverLimit {
    OverLimit {
        window: window.into(),
        percent,
        limit,
        resets_at,
    }
}

/// A clear observation but for a window over its limit until `until`.
fn window_wait(until: Timestamp, over: OverLimit) -> Observation {
    Observation {
        window: WindowCheck::Wait { until, over },
        ..clear()
    }
}

/// The wait ends after `waited`: woken up then, the run calls the agent.
fn wakes_and_calls(run: &mut Run, clock: &FixedClock, waited: SignedDuration) {
    clock.advance(waited);
    run.on(Fact::WokeUp, clock.now());
    assert_eq!(gate(run, clear(), clock.now()), Step::Call { agent: 0 });
}

/// One failed call told to back off until `until`: the run waits until then, the clock is
/// moved there and the run woken up.
fn back_off(run: &mut Run, clock: &FixedClock, until: Timestamp) {
    let a = told_to_wait(until, WaitReason::Backoff);
    let step = call(run, a, clock.now());
    assert_eq!(step, limit_wait(until, WaitReason::Backoff));
    clock.advance(until.duration_since(clock.now()));
    run.on(Fact::WokeUp, clock.now());
}

/// Observes `o` and returns the gate's step.
fn gate(run: &mut Run, o: Observation, now: Timestamp) -> Step {
    assert_eq!(run.next(now), Step::Observe);
    run.on(Fact::Observed(o), now);
    run.next(now)
}

/// One call answered with `a`: the step after the answer.
fn call(run: &mut Run, a: Answer, now: Timestamp) -> Step {
    assert_eq!(gate(run, clear(), now), Step::Call { agent: 0 });
    run.on(Fact::Calling, now);
    run.on(Fact::Answered(a), now);
    run.next(now)
}

#[test]
fn gates_in_order() {
    let over = over("five_hour", 95.0, 90, None);
    let later = t0() + hours(1);
    let cases: Vec<(&str, Observation, Step)> = vec![
        ("clear", clear(), Step::Call { agent: 0 }),
        (
            "missing files first",
            Observation {
                missing_files: true,
                plan_complete: true,
                breaker_open: true,
                ..clear()
            },
            Step::Stop(ExitReason::IntegrityFailure),
        ),
        (
            "a complete plan is a claim to check",
            Observation {
                plan_complete: true,
                breaker_open: true,
                ..clear()
            },
            Step::Check(ExitReason::PlanComplete),
        ),
        (
            "breaker",
            Observation {
                breaker_open: true,
                budget: BudgetCheck::Wait {
                    until: later,
                    reason: WaitReason::RateLimit,
                },
                ..clear()
            },
            Step::Stop(ExitReason::CircuitOpen),
        ),
        (
            "budget before windows",
            Observation {
                budget: BudgetCheck::Wait {
                    until: later,
                    reason: WaitReason::TokenLimit,
                },
                ..window_wait(later, over.clone())
            },
            limit_wait(later, WaitReason::TokenLimit),
        ),
        (
            "window before the agent chain",
            Observation {
                pick: Pick::NoneLeft,
                ..window_wait(later, over.clone())
            },
            limit_wait(later, WaitReason::UsageWindow),
        ),
        (
            "every agent limited",
            Observation {
                pick: Pick::WaitUntil(later),
                ..clear()
            },
            limit_wait(later, WaitReason::UsageLimit),
        ),
        (
            "no agent left",
            Observation {
                pick: Pick::NoneLeft,
                ..clear()
            },
            Step::Stop(ExitReason::AgentFatal),
        ),
        (
            "the second agent",
            Observation {
                pick: Pick::Use(1),
                ..clear()
            },
            Step::Call { agent: 1 },
        ),
    ];
    for (name, o, want) in cases {
        let mut run = Run::new(cfg());
        assert_eq!(gate(&mut run, o, t0()), want, "{name}");
    }
}

#[test]
fn window_gate_exits_with_on_usage_limit_exit() {
    let mut run = Run::new(RunConfig {
        on_usage_limit: UsageLimitPolicy::Exit,
        ..cfg()
    });
    let o = window_wait(t0() + hours(2), over("seven_day", 100.0, 80, None));
    assert_eq!(gate(&mut run, o, t0()), Step::Stop(ExitReason::UsageWindow));
}

#[test]
fn max_runtime_before_a_call_and_cuts_waits_short() {
    let deadline = t0() + hours(1);
    let mut run = Run::new(RunConfig {
        deadline: Some(deadline),
        ..cfg()
    });
    assert_eq!(gate(&mut run, clear(), t0()), Step::Call { agent: 0 });
    assert_eq!(run.wait_end(t0() + hours(5)), deadline);
    assert_eq!(run.wait_end(t0()), t0());
    let mut run = Run::new(RunConfig {
        deadline: Some(deadline),
        ..cfg()
    });
    // Even a complete plan is not checked once the time is up.
    let o = Observation {
        plan_complete: true,
        ..clear()
    };
    assert_eq!(
        gate(&mut run, o, deadline),
        Step::Stop(ExitReason::MaxRuntime)
    );
}

#[test]
fn max_loops_counts_this_runs_calls() {
    let mut run = Run::new(RunConfig {
        decide: DecideConfig {
            max_loops: 2,
            ..DecideConfig::default()
        },
        ..cfg()
    });
    continues(&mut run, t0());
    continues(&mut run, t0());
    assert_eq!(run.loops(), 2);
    assert_eq!(
        gate(&mut run, clear(), t0()),
        Step::Stop(ExitReason::MaxLoops)
    );
}

#[test]
fn plan_claim_rejected_goes_on_to_the_other_gates() {
    let mut run = Run::new(cfg());
    let o = Observation {
        plan_complete: true,
        ..clear()
    };
    assert_eq!(
        gate(&mut run, o.clone(), t0()),
        Step::Check(ExitReason::PlanComplete)
    );
    run.on(Fact::Checked(None), t0());
    assert_eq!(run.next(t0()), Step::Call { agent: 0 });
    // Passed: the run stops with what the check said.
    let mut run = Run::new(cfg());
    assert_eq!(
        gate(&mut run, o, t0()),
        Step::Check(ExitReason::PlanComplete)
    );
    run.on(Fact::Checked(Some(ExitReason::PlanComplete)), t0());
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::PlanComplete));
}

#[test]
fn an_interrupt_overrides_the_decision() {
    for d in [
        Decision::Continue,
        Decision::Stop(ExitReason::PlanComplete),
        Decision::Wait {
            until: t0() + hours(5),
            reason: WaitReason::UsageLimit,
        },
        Decision::RetryWithoutSession,
    ] {
        let mut run = Run::new(RunConfig {
            failover: true,
            ..cfg()
        });
        let a = Answer {
            interrupted: true,
            error: true,
            ..answer(d)
        };
        assert_eq!(
            call(&mut run, a, t0()),
            Step::Stop(ExitReason::Interrupted),
            "{d:?}"
        );
        assert_eq!(
            run.decision(),
            Some(Decision::Stop(ExitReason::Interrupted))
        );
    }
    // An interrupt fact stops from any phase.
    let mut run = Run::new(cfg());
    run.on(Fact::Interrupted, t0());
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::Interrupted));
}

#[test]
fn a_rejected_done_re_decides_without_claims() {
    let backoff = Decision::Wait {
        until: t0() + SignedDuration::from_secs(60),
        reason: WaitReason::Backoff,
    };
    let cases = [
        (
            Some(ExitReason::ProjectComplete),
            Decision::Stop(ExitReason::ProjectComplete),
        ),
        (None, Decision::Continue),
        (None, backoff),
        (None, Decision::Stop(ExitReason::CircuitOpen)),
    ];
    for (verdict, want) in cases {
        let mut run = Run::new(cfg());
        let a = Answer {
            without_claims: if verdict.is_none() {
                want
            } else {
                Decision::Continue
            },
            ..answer(Decision::Stop(ExitReason::ProjectComplete))
        };
        assert_eq!(
            call(&mut run, a, t0()),
            Step::Check(ExitReason::ProjectComplete)
        );
        run.on(Fact::Checked(verdict), t0());
        assert_eq!(run.decision(), Some(want), "{verdict:?}");
    }
}

#[test]
fn failover_comes_after_the_decision_and_the_check() {
    let back = t0() + hours(3);
    let cases = [
        // (decision, pick, on_usage_limit, final)
        (
            Decision::Stop(ExitReason::UsageLimit),
            FailoverPick::Other,
            UsageLimitPolicy::Exit,
            Decision::Continue,
        ),
        (
            Decision::Continue,
            FailoverPick::Unchanged,
            UsageLimitPolicy::Wait,
            Decision::Continue,
        ),
        (
            Decision::Continue,
            FailoverPick::AllLimitedUntil(back),
            UsageLimitPolicy::Wait,
            Decision::Wait {
                until: back,
                reason: WaitReason::UsageLimit,
            },
        ),
        (
            Decision::Continue,
            FailoverPick::AllLimitedUntil(back),
            UsageLimitPolicy::Exit,
            Decision::Stop(ExitReason::UsageLimit),
        ),
    ];
    for (d, pick, policy, want) in cases {
        let mut run = Run::new(RunConfig {
            failover: true,
            on_usage_limit: policy,
            ..cfg()
        });
        let a = Answer {
            error: true,
            ..answer(d)
        };
        assert_eq!(call(&mut run, a, t0()), Step::Failover);
        run.on(Fact::FailedOver(pick), t0());
        assert_eq!(run.decision(), Some(want), "{d:?} {pick:?}");
    }
    // A claim is checked before failover looks at it.
    let mut run = Run::new(RunConfig {
        failover: true,
        ..cfg()
    });
    let a = Answer {
        error: true,
        ..answer(Decision::Stop(ExitReason::ProjectComplete))
    };
    assert_eq!(
        call(&mut run, a, t0()),
        Step::Check(ExitReason::ProjectComplete)
    );
    run.on(Fact::Checked(None), t0());
    assert_eq!(run.next(t0()), Step::Failover);
    // One agent, or no error: no failover step.
    let mut run = Run::new(cfg());
    let a = Answer {
        error: true,
        ..answer(Decision::Continue)
    };
    assert_eq!(call(&mut run, a, t0()), Step::Observe);
}

#[test]
fn an_unknown_session_retries_fresh_or_is_fatal() {
    let mut run = Run::new(cfg());
    let a = Answer {
        resumed: true,
        ..answer(Decision::RetryWithoutSession)
    };
    assert_eq!(call(&mut run, a, t0()), Step::FreshSession);
    run.on(Fact::SessionDropped, t0());
    assert_eq!(run.next(t0()), Step::Observe);
    // With a failover chain and an error in the answer: failover first, then the rule.
    for (resumed, want) in [
        (true, Step::FreshSession),
        (false, Step::Stop(ExitReason::AgentFatal)),
    ] {
        let mut run = Run::new(RunConfig {
            failover: true,
            ..cfg()
        });
        let a = Answer {
            resumed,
            error: true,
            ..answer(Decision::RetryWithoutSession)
        };
        assert_eq!(call(&mut run, a, t0()), Step::Failover);
        run.on(Fact::FailedOver(FailoverPick::Unchanged), t0());
        assert_eq!(run.next(t0()), want, "resumed: {resumed}");
    }
    // A fresh session the CLI does not know: nothing to retry.
    let mut run = Run::new(cfg());
    assert_eq!(
        call(&mut run, answer(Decision::RetryWithoutSession), t0()),
        Step::Stop(ExitReason::AgentFatal)
    );
}

#[test]
fn the_loop_delay_and_free_retries() {
    let delay = SignedDuration::from_secs(30);
    let mut run = Run::new(RunConfig {
        loop_delay: delay,
        ..cfg()
    });
    assert_eq!(
        call(&mut run, answer(Decision::Continue), t0()),
        Step::Wait {
            until: Some(t0() + delay),
            reason: WaitFor::LoopDelay
        }
    );
    run.on(Fact::WokeUp, t0() + delay);
    // A startup hang retried at once: no delay, even after a backoff decision.
    let a = Answer {
        free_retry: true,
        ..told_to_wait(t0() + hours(1), WaitReason::Backoff)
    };
    assert_eq!(call(&mut run, a, t0() + delay), Step::Observe);
    // The next ordinary loop has the delay again.
    let now = t0() + delay;
    assert_eq!(
        call(&mut run, answer(Decision::Continue), now),
        Step::Wait {
            until: Some(now + delay),
            reason: WaitFor::LoopDelay
        }
    );
}

#[test]
fn the_backoff_streak_and_productive_errors() {
    let clock = FixedClock::new(t0());
    let mut run = Run::new(cfg());
    // Each failed call backs off longer (decide::backoff over the streak); a productive error
    // continues at once.
    for streak in 1..=4u32 {
        let until = clock.now() + decide::backoff(10, streak);
        back_off(&mut run, &clock, until);
    }
    assert_eq!(
        clock.now(),
        t0() + SignedDuration::from_secs(10 + 20 + 40 + 80)
    );
    let a = Answer {
        productive_error: true,
        ..told_to_wait(clock.now() + hours(1), WaitReason::Backoff)
    };
    assert_eq!(call(&mut run, a, clock.now()), Step::Observe);
}

#[test]
fn a_five_hour_usage_limit_wait_runs_at_once() {
    let clock = FixedClock::new(t0());
    let mut run = Run::new(cfg());
    let reset = t0() + hours(5);
    let a = told_to_wait(reset, WaitReason::UsageLimit);
    assert_eq!(
        call(&mut run, a, clock.now()),
        limit_wait(reset, WaitReason::UsageLimit)
    );
    wakes_and_calls(&mut run, &clock, hours(5));
}

#[test]
fn an_outage_of_two_hours() {
    // The API is down: transient errors back off (capped at 10 minutes) for two hours,
    // then a call answers.
    let clock = FixedClock::new(t0());
    let mut run = Run::new(cfg());
    let mut waits = 0;
    while clock.now() < t0() + hours(2) {
        let until = clock.now() + decide::backoff_capped(30, waits + 1, 600);
        back_off(&mut run, &clock, until);
        waits += 1;
    }
    assert!(waits > 10 && waits < 20, "{waits}");
    continues(&mut run, clock.now());
    assert_eq!(run.loops(), u64::from(waits) + 1);
}

#[test]
fn a_window_reset_lets_the_run_call_again() {
    let clock = FixedClock::new(t0());
    let mut run = Run::new(cfg());
    let reset = t0() + hours(3);
    let o = window_wait(reset, over("five_hour", 97.0, 90, Some(reset)));
    assert_eq!(
        gate(&mut run, o, clock.now()),
        limit_wait(reset, WaitReason::UsageWindow)
    );
    wakes_and_calls(&mut run, &clock, hours(3));
}

#[test]
fn live_control() {
    // Pause: no call until resume.
    let mut run = Run::new(cfg());
    run.on(Fact::Control(Control::Pause), t0());
    let paused = Step::Wait {
        until: None,
        reason: WaitFor::Paused,
    };
    assert_eq!(gate(&mut run, clear(), t0()), paused);
    assert_eq!(run.next(t0() + hours(1)), paused);
    // Retry-now does not end a pause.
    run.on(Fact::Control(Control::RetryNow), t0());
    assert_eq!(run.next(t0() + hours(1)), paused);
    run.on(Fact::Control(Control::Resume), t0() + hours(1));
    assert_eq!(
        gate(&mut run, clear(), t0() + hours(1)),
        Step::Call { agent: 0 }
    );

    // Retry now ends a wait; stop ends the run.
    let mut run = Run::new(cfg());
    let a = told_to_wait(t0() + hours(5), WaitReason::UsageLimit);
    assert!(matches!(call(&mut run, a, t0()), Step::Wait { .. }));
    run.on(Fact::Control(Control::RetryNow), t0());
    assert_eq!(gate(&mut run, clear(), t0()), Step::Call { agent: 0 });
    run.on(Fact::Control(Control::Stop), t0());
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::Interrupted));

    // Notes, settings and readings wait for the driver, each taken once.
    let mut run = Run::new(cfg());
    let note = ContextNote {
        kind: NoteKind::CiFailure,
        text: "test x failed".into(),
    };
    run.on(Fact::Control(Control::Note(note.clone())), t0());
    run.on(
        Fact::Control(Control::Set {
            key: "MAX_LOOPS".into(),
            value: "50".into(),
        }),
        t0(),
    );
    let reading = WindowReading {
        name: "five_hour".into(),
        fields: crate::analysis::WindowFields {
            utilization: Some(0.5),
            ..Default::default()
        },
    };
    run.on(Fact::Control(Control::Window(reading.clone())), t0());
    assert_eq!(run.take_notes(), vec![note]);
    assert!(run.take_notes().is_empty());
    assert_eq!(run.take_settings(), vec![("MAX_LOOPS".into(), "50".into())]);
    assert_eq!(run.take_readings(), vec![reading]);
    // None of them changes what the loop does next.
    assert_eq!(gate(&mut run, clear(), t0()), Step::Call { agent: 0 });
}

/// `hank ctl set`: new limits hold from the next gate; the loops, cost and time so far stay.
#[test]
fn retuned_limits_hold_from_the_next_gate() {
    let with = |max_loops: u64, max_cost_usd: f64, deadline: Option<Timestamp>| RunConfig {
        deadline,
        decide: DecideConfig {
            max_loops,
            max_cost_usd,
            ..DecideConfig::default()
        },
        ..cfg()
    };
    // (new limits after 2 loops costing $0.20 each at t0+1h, what the next gate does)
    let cases = [
        (with(0, 0.0, None), Step::Call { agent: 0 }),
        (with(2, 0.0, None), Step::Stop(ExitReason::MaxLoops)),
        (with(3, 0.0, None), Step::Call { agent: 0 }),
        (with(0, 0.4, None), Step::Stop(ExitReason::CostBudget)),
        (with(0, 1.0, None), Step::Call { agent: 0 }),
        (
            with(0, 0.0, Some(t0() + hours(1))),
            Step::Stop(ExitReason::MaxRuntime),
        ),
        (with(0, 0.0, Some(t0() + hours(2))), Step::Call { agent: 0 }),
    ];
    for (new, want) in cases {
        let mut run = Run::new(with(0, 0.0, None));
        for _ in 0..2 {
            assert_eq!(gate(&mut run, clear(), t0()), Step::Call { agent: 0 });
            run.on(Fact::Calling, t0());
            run.on(Fact::Spent(0.2), t0());
            run.on(Fact::Answered(answer(Decision::Continue)), t0());
            assert_eq!(run.next(t0()), Step::Observe);
        }
        run.retune(new.clone());
        assert_eq!(run.loops(), 2);
        assert_eq!(gate(&mut run, clear(), t0() + hours(1)), want, "{new:?}");
    }
}

#[test]
fn cost_budget_counts_answers() {
    let mut run = Run::new(RunConfig {
        decide: DecideConfig {
            max_cost_usd: 1.0,
            ..DecideConfig::default()
        },
        ..cfg()
    });
    assert_eq!(gate(&mut run, clear(), t0()), Step::Call { agent: 0 });
    run.on(Fact::Calling, t0());
    run.on(Fact::Spent(1.5), t0());
    run.on(Fact::Answered(answer(Decision::Continue)), t0());
    assert_eq!(run.next(t0()), Step::Observe);
    assert!((run.cost() - 1.5).abs() < 1e-9);
    assert_eq!(
        gate(&mut run, clear(), t0()),
        Step::Stop(ExitReason::CostBudget)
    );
}

#[test]
fn the_fleets_spent_budget_stops_at_the_next_gates_but_a_done_plan_is_checked_first() {
    // In a fleet the shared ledger reports MAX_COST_USD used up by every task together.
    let mut run = Run::new(cfg());
    assert_eq!(run.next(t0()), Step::Observe);
    run.on(Fact::FleetLimit(ExitReason::CostBudget), t0());
    run.on(Fact::Observed(clear()), t0());
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::CostBudget));

    let mut done = Run::new(cfg());
    assert_eq!(done.next(t0()), Step::Observe);
    done.on(Fact::FleetLimit(ExitReason::CostBudget), t0());
    done.on(
        Fact::Observed(Observation {
            plan_complete: true,
            ..clear()
        }),
        t0(),
    );
    assert_eq!(done.next(t0()), Step::Check(ExitReason::PlanComplete));
    // A rejected claim: the stop holds (no call).
    done.on(Fact::Checked(None), t0());
    assert_eq!(done.next(t0()), Step::Stop(ExitReason::CostBudget));
}

#[test]
fn steps_are_stable_until_a_fact_and_pending_effects_show() {
    let mut run = Run::new(RunConfig {
        loop_delay: SignedDuration::from_secs(5),
        failover: true,
        ..cfg()
    });
    let w = call(&mut run, answer(Decision::Continue), t0());
    // Asking again (later) is the same wait: its end was fixed when it began.
    assert_eq!(run.next(t0() + SignedDuration::from_secs(3)), w);
    assert!(!run.at_gates());
    run.on(Fact::WokeUp, t0() + SignedDuration::from_secs(5));
    assert!(run.at_gates());
    assert_eq!(run.pending(), None);
    let a = Answer {
        error: true,
        ..answer(Decision::Stop(ExitReason::ProjectComplete))
    };
    assert_eq!(gate(&mut run, clear(), t0()), Step::Call { agent: 0 });
    run.on(Fact::Calling, t0());
    run.on(Fact::Answered(a), t0());
    assert_eq!(
        run.pending(),
        Some(Step::Check(ExitReason::ProjectComplete))
    );
    run.on(Fact::Checked(Some(ExitReason::ProjectComplete)), t0());
    assert_eq!(run.pending(), Some(Step::Failover));
    run.on(Fact::FailedOver(FailoverPick::Unchanged), t0());
    assert_eq!(run.pending(), None);
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::ProjectComplete));
}

fn rounds() -> DeliverRounds {
    DeliverRounds {
        push: 2,
        ci: 2,
        review: 1,
    }
}

fn complete() -> Observation {
    Observation {
        plan_complete: true,
        ..clear()
    }
}

/// A "done" answer whose check passes: the step after it. After the first call the plan is
/// complete at the gates (the feedback of a delivery round did not reopen it).
fn verified_done(run: &mut Run, now: Timestamp) -> Step {
    let o = if run.loops() == 0 {
        clear()
    } else {
        complete()
    };
    assert_eq!(gate(run, o, now), Step::Call { agent: 0 });
    run.on(Fact::Calling, now);
    run.on(
        Fact::Answered(answer(Decision::Stop(ExitReason::PlanComplete))),
        now,
    );
    assert_eq!(run.next(now), Step::Check(ExitReason::PlanComplete));
    run.on(Fact::Checked(Some(ExitReason::PlanComplete)), now);
    run.next(now)
}

fn feedback(round: Round, text: &str, otherwise: ExitReason) -> Fact {
    Fact::Delivered(Delivered::Feedback {
        round,
        text: text.into(),
        otherwise,
    })
}

#[test]
fn a_verified_completion_is_delivered_before_the_run_stops() {
    // Without DELIVER a verified completion stops the run.
    let mut run = Run::new(cfg());
    let s = call(
        &mut run,
        answer(Decision::Stop(ExitReason::PlanComplete)),
        t0(),
    );
    assert_eq!(s, Step::Check(ExitReason::PlanComplete));
    run.on(Fact::Checked(Some(ExitReason::PlanComplete)), t0());
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::PlanComplete));

    // With it: the answer's claim, checked, is delivered; the step is stable until the fact.
    let mut run = Run::new(cfg()).delivering(rounds());
    let s = call(
        &mut run,
        answer(Decision::Stop(ExitReason::PlanComplete)),
        t0(),
    );
    assert_eq!(s, Step::Check(ExitReason::PlanComplete));
    run.on(Fact::Checked(Some(ExitReason::PlanComplete)), t0());
    assert_eq!(run.next(t0()), Step::Deliver(ExitReason::PlanComplete));
    assert_eq!(run.next(t0()), Step::Deliver(ExitReason::PlanComplete));
    assert_eq!(
        run.pending(),
        None,
        "delivery comes after the loop's report"
    );
    run.on(
        Fact::Delivered(Delivered::Final(ExitReason::Delivered)),
        t0(),
    );
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::Delivered));

    // A complete plan at the gates, checked, is delivered too.
    let mut run = Run::new(cfg()).delivering(rounds());
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Check(ExitReason::PlanComplete)
    );
    run.on(Fact::Checked(Some(ExitReason::PlanComplete)), t0());
    assert_eq!(run.next(t0()), Step::Deliver(ExitReason::PlanComplete));

    // A rejected claim is not delivered; neither is a stop that is not a completion.
    let mut run = Run::new(cfg()).delivering(rounds());
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Check(ExitReason::PlanComplete)
    );
    run.on(Fact::Checked(None), t0());
    assert_eq!(run.next(t0()), Step::Call { agent: 0 });
    let mut run = Run::new(cfg()).delivering(rounds());
    assert_eq!(
        call(
            &mut run,
            answer(Decision::Stop(ExitReason::CircuitOpen)),
            t0()
        ),
        Step::Stop(ExitReason::CircuitOpen)
    );

    // Ctrl-C during a delivery stops the run.
    let mut run = Run::new(cfg()).delivering(rounds());
    assert_eq!(
        verified_done(&mut run, t0()),
        Step::Deliver(ExitReason::PlanComplete)
    );
    run.on(Fact::Interrupted, t0());
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::Interrupted));
    // A delivery fact outside a delivery changes nothing.
    let mut run = Run::new(cfg()).delivering(rounds());
    run.on(
        Fact::Delivered(Delivered::Final(ExitReason::Delivered)),
        t0(),
    );
    assert_eq!(run.next(t0()), Step::Observe);
}

#[test]
fn delivery_rounds_go_back_to_the_agent_then_stop() {
    // (round, limit, the stop once no round is left)
    let cases = [
        (Round::Push, 2, ExitReason::PushRejected),
        (Round::Ci, 2, ExitReason::CiFailed),
        (Round::Review, 1, ExitReason::Delivered),
    ];
    for (round, limit, otherwise) in cases {
        let mut run = Run::new(cfg()).delivering(rounds());
        for n in 0..limit {
            assert_eq!(
                verified_done(&mut run, t0()),
                Step::Deliver(ExitReason::PlanComplete),
                "{round:?} round {n}"
            );
            run.on(feedback(round, &format!("fix {n}"), otherwise), t0());
            // The plan is still complete: the agent is called before the next claim, with
            // the feedback in its context once.
            assert_eq!(run.next(t0()), Step::Observe, "{round:?} round {n}");
            assert_eq!(
                run.take_notes(),
                vec![ContextNote {
                    kind: round.note_kind(),
                    text: format!("fix {n}"),
                }]
            );
        }
        assert_eq!(
            verified_done(&mut run, t0()),
            Step::Deliver(ExitReason::PlanComplete)
        );
        run.on(feedback(round, "again", otherwise), t0());
        assert_eq!(run.next(t0()), Step::Stop(otherwise), "{round:?}");
        assert!(run.take_notes().is_empty());
    }

    // Each kind counts on its own: two rejected pushes, then two red CI rounds, then green.
    let mut run = Run::new(cfg()).delivering(rounds());
    for (round, otherwise) in [
        (Round::Push, ExitReason::PushRejected),
        (Round::Push, ExitReason::PushRejected),
        (Round::Ci, ExitReason::CiFailed),
        (Round::Ci, ExitReason::CiFailed),
    ] {
        assert_eq!(
            verified_done(&mut run, t0()),
            Step::Deliver(ExitReason::PlanComplete)
        );
        run.on(feedback(round, "x", otherwise), t0());
    }
    assert_eq!(run.rounds(), (2, 2, 0));
    assert_eq!(
        verified_done(&mut run, t0()),
        Step::Deliver(ExitReason::PlanComplete)
    );
    run.on(
        Fact::Delivered(Delivered::Final(ExitReason::Delivered)),
        t0(),
    );
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::Delivered));
    assert_eq!(run.loops(), 5);

    // The other gates still hold after feedback: MAX_LOOPS stops the run.
    let mut run = Run::new(RunConfig {
        decide: DecideConfig {
            max_loops: 1,
            ..DecideConfig::default()
        },
        ..cfg()
    })
    .delivering(rounds());
    assert_eq!(
        verified_done(&mut run, t0()),
        Step::Deliver(ExitReason::PlanComplete)
    );
    run.on(feedback(Round::Ci, "red", ExitReason::CiFailed), t0());
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Stop(ExitReason::MaxLoops)
    );
}

/// `NEEDS_ANSWERS=wait`: at `needs_answers` the loop waits for `hank ctl answer` (at most
/// `ANSWER_TIMEOUT`), then goes on with the answer in the next context, or stops as
/// `NEEDS_ANSWERS=exit` does when none came.
#[test]
fn needs_answers_waits_for_an_answer() {
    let waiting = RunConfig {
        answer_wait: Some(hours(8)),
        loop_delay: SignedDuration::from_secs(10),
        ..cfg()
    };
    let asked = answer(Decision::Stop(ExitReason::NeedsAnswers));
    let wait = Step::Wait {
        until: Some(t0() + hours(8)),
        reason: WaitFor::UserAnswer,
    };
    let answer_note = || {
        Control::Note(ContextNote {
            kind: NoteKind::Answer,
            text: "use the v2 API".into(),
        })
    };
    let note = || {
        Control::Note(ContextNote {
            kind: NoteKind::Note,
            text: "fyi".into(),
        })
    };
    // (name, NEEDS_ANSWERS=wait, facts during the wait, the step after them)
    type Case = (&'static str, bool, Vec<Fact>, Step);
    let cases: Vec<Case> = vec![
        (
            "exit: stops at once",
            false,
            vec![],
            Step::Stop(ExitReason::NeedsAnswers),
        ),
        ("wait: waits for the answer", true, vec![], wait),
        (
            "an answer ends the wait: the gates again",
            true,
            vec![Fact::Control(answer_note())],
            Step::Observe,
        ),
        (
            "a plain note does not end it",
            true,
            vec![Fact::Control(note())],
            wait,
        ),
        (
            "retry-now does not end it",
            true,
            vec![Fact::Control(Control::RetryNow)],
            wait,
        ),
        (
            "a resume does not end it",
            true,
            vec![Fact::Control(Control::Resume)],
            wait,
        ),
        (
            "no answer within ANSWER_TIMEOUT: needs_answers",
            true,
            vec![Fact::WokeUp],
            Step::Stop(ExitReason::NeedsAnswers),
        ),
        (
            "stop ends it",
            true,
            vec![Fact::Control(Control::Stop)],
            Step::Stop(ExitReason::Interrupted),
        ),
        (
            "Ctrl-C ends it",
            true,
            vec![Fact::Interrupted],
            Step::Stop(ExitReason::Interrupted),
        ),
    ];
    for (name, wait_on, facts, want) in cases {
        let mut run = Run::new(RunConfig {
            answer_wait: wait_on.then(|| hours(8)),
            ..waiting.clone()
        });
        let first = call(&mut run, asked, t0());
        assert_eq!(
            first,
            if wait_on {
                wait
            } else {
                Step::Stop(ExitReason::NeedsAnswers)
            },
            "{name}"
        );
        for f in facts {
            run.on(f, t0() + hours(1));
        }
        assert_eq!(run.next(t0() + hours(1)), want, "{name}");
    }

    // The answer goes to the next call's context, once, and the call is made.
    let mut run = Run::new(waiting.clone());
    assert_eq!(call(&mut run, asked, t0()), wait);
    run.on(Fact::Control(answer_note()), t0() + hours(1));
    assert_eq!(
        gate(&mut run, clear(), t0() + hours(1)),
        Step::Call { agent: 0 }
    );
    let notes = run.take_notes();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].kind, NoteKind::Answer);
    assert!(run.take_notes().is_empty());

    // An answer taken during the call: no wait, the loop delay and the next call.
    let mut run = Run::new(waiting.clone());
    assert_eq!(gate(&mut run, clear(), t0()), Step::Call { agent: 0 });
    run.on(Fact::Calling, t0());
    run.on(Fact::Control(answer_note()), t0());
    run.on(Fact::Answered(asked), t0());
    assert_eq!(
        run.next(t0()),
        Step::Wait {
            until: Some(t0() + SignedDuration::from_secs(10)),
            reason: WaitFor::LoopDelay,
        }
    );

    // A pause taken during the wait holds after the answer.
    let mut run = Run::new(waiting);
    assert_eq!(call(&mut run, asked, t0()), wait);
    run.on(Fact::Control(Control::Pause), t0());
    assert_eq!(run.next(t0()), wait);
    run.on(Fact::Control(answer_note()), t0());
    assert_eq!(
        gate(&mut run, clear(), t0()),
        Step::Wait {
            until: None,
            reason: WaitFor::Paused,
        }
    );
}

#[test]
fn a_start_resumes_the_last_runs_wait_or_stops() {
    let now = t0();
    let until = now + hours(3);
    let saved = |reason| Resume::Wait(crate::policy::budget::SavedWait { reason, until });
    let cases = [
        (Resume::Call, Step::Observe),
        (
            saved(WaitReason::UsageLimit),
            limit_wait(until, WaitReason::UsageLimit),
        ),
        (
            saved(WaitReason::Backoff),
            limit_wait(until, WaitReason::Backoff),
        ),
        (Resume::ExitUsageLimit, Step::Stop(ExitReason::UsageLimit)),
        (Resume::ExitUsageWindow, Step::Stop(ExitReason::UsageWindow)),
    ];
    for (resume, first) in cases {
        let mut run = Run::new(cfg()).resuming(resume);
        assert_eq!(run.next(now), first, "{resume:?}");
    }
    // The resumed wait ends like any other: woken up, the gates, then the call.
    let mut run = Run::new(cfg()).resuming(saved(WaitReason::UsageLimit));
    let clock = FixedClock::new(now);
    assert_eq!(run.next(now), limit_wait(until, WaitReason::UsageLimit));
    wakes_and_calls(&mut run, &clock, hours(3));
}

#[test]
fn a_fleets_verdict_on_the_call_is_a_budget_wait_or_a_stop() {
    use crate::policy::fleet::FleetVerdict;
    let until = t0() + hours(1);
    let mut o = clear();
    assert_eq!(o.reserved(FleetVerdict::Go), None);
    assert_eq!(o, clear());
    let wait = FleetVerdict::Wait {
        until,
        reason: WaitReason::RateLimit,
    };
    assert_eq!(o.reserved(wait), None);
    let mut run = Run::new(cfg());
    assert_eq!(
        gate(&mut run, o, t0()),
        limit_wait(until, WaitReason::RateLimit)
    );
    let mut o = clear();
    let spent = o.reserved(FleetVerdict::Stop(ExitReason::CostBudget));
    assert_eq!((spent, o), (Some(ExitReason::CostBudget), clear()));
}

fn reviewed_cfg() -> RunConfig {
    RunConfig {
        review: Some(crate::policy::review::ReviewConfig::default()),
        ..cfg()
    }
}

#[test]
fn a_look_reserves_the_fleets_call_when_a_call_or_a_review_round_may_follow() {
    let run = Run::new(cfg());
    assert!(run.reserves(&clear()));
    assert!(!run.reserves(&complete()), "a complete plan calls no one");
    let mut run = Run::new(reviewed_cfg());
    assert_eq!(verified_done(&mut run, t0()), Step::Observe);
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Review(ExitReason::PlanComplete)
    );
    assert!(run.reserves(&complete()), "the review round's look");
    let capped = Observation {
        budget: BudgetCheck::Wait {
            until: t0(),
            reason: WaitReason::RateLimit,
        },
        ..complete()
    };
    assert!(!run.reserves(&capped), "a cap stops the round first");
}

#[test]
fn what_the_driver_reads_of_a_loop_and_a_round() {
    // (decision, LOOP_DELAY in seconds) → whether the next call follows at once.
    let table = [
        (Decision::Continue, 0, true),
        (Decision::Continue, 10, false),
        (Decision::Stop(ExitReason::AgentFatal), 0, false),
        (
            Decision::Wait {
                until: t0(),
                reason: WaitReason::Backoff,
            },
            0,
            false,
        ),
    ];
    for (decision, delay, want) in table {
        let mut run = Run::new(RunConfig {
            loop_delay: SignedDuration::from_secs(delay),
            ..cfg()
        });
        run.on(Fact::Calling, t0());
        run.on(Fact::Answered(answer(decision)), t0());
        assert_eq!(run.calls_at_once(), want, "{decision:?} {delay}");
    }
    let run = Run::new(reviewed_cfg());
    let max = crate::policy::review::ReviewConfig::default().max_rounds;
    assert_eq!(run.review_round(), (1, max));
    let unreadable = crate::analysis::review::Review::unreadable("no answer");
    let stop = Reviewed::Stop(ExitReason::Interrupted);
    assert_eq!(Reviewed::of(unreadable.clone(), true), stop);
    let verdict = Reviewed::Verdict(unreadable.clone());
    assert_eq!(Reviewed::of(unreadable, false), verdict);
}

fn verdict(body: &str) -> Fact {
    use crate::analysis::review::{REVIEW_CLOSE, REVIEW_OPEN, parse_review};
    Fact::Reviewed(Reviewed::Verdict(parse_review(&format!(
        "{REVIEW_OPEN}\n{body}\n{REVIEW_CLOSE}"
    ))))
}

#[test]
fn a_verified_completion_is_reviewed_before_it_stops_or_is_delivered() {
    // Approved at once: the stop, or the delivery, comes after the review.
    let mut run = Run::new(reviewed_cfg());
    assert_eq!(verified_done(&mut run, t0()), Step::Observe);
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Review(ExitReason::PlanComplete)
    );
    assert_eq!(
        run.next(t0()),
        Step::Review(ExitReason::PlanComplete),
        "stable"
    );
    run.on(verdict("VERDICT: APPROVE"), t0());
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::PlanComplete));
    let mut run = Run::new(reviewed_cfg()).delivering(rounds());
    assert_eq!(verified_done(&mut run, t0()), Step::Observe);
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Review(ExitReason::PlanComplete)
    );
    run.on(verdict("VERDICT: APPROVE"), t0());
    assert_eq!(run.next(t0()), Step::Deliver(ExitReason::PlanComplete));

    // A complete plan at the gates, checked, is reviewed too; a rejected claim is not.
    let mut run = Run::new(reviewed_cfg());
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Check(ExitReason::PlanComplete)
    );
    run.on(Fact::Checked(Some(ExitReason::PlanComplete)), t0());
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Review(ExitReason::PlanComplete)
    );
    let mut run = Run::new(reviewed_cfg());
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Check(ExitReason::PlanComplete)
    );
    run.on(Fact::Checked(None), t0());
    assert_eq!(run.next(t0()), Step::Call { agent: 0 });

    // A review fact outside a review changes nothing.
    let mut run = Run::new(reviewed_cfg());
    run.on(verdict("VERDICT: APPROVE"), t0());
    assert_eq!(run.next(t0()), Step::Observe);
}

/// The worker's next "done" after a round sent it back: called (the plan's claim skipped
/// until then), checked, reviewed.
fn done_again(run: &mut Run, now: Timestamp) {
    assert_eq!(gate(run, complete(), now), Step::Call { agent: 0 });
    run.on(Fact::Calling, now);
    run.on(
        Fact::Answered(answer(Decision::Stop(ExitReason::PlanComplete))),
        now,
    );
    assert_eq!(run.next(now), Step::Check(ExitReason::PlanComplete));
    run.on(Fact::Checked(Some(ExitReason::PlanComplete)), now);
    assert_eq!(
        gate(run, complete(), now),
        Step::Review(ExitReason::PlanComplete)
    );
}

#[test]
fn changes_go_back_to_the_worker_then_the_run_stops_review_rejected() {
    // (verdicts of the rounds, the step after the last)
    let approve = "VERDICT: APPROVE";
    let changes = "VERDICT: CHANGES\n- [blocker] src/a.rs: no error handling\n- [minor] a: typo";
    let cases: [(&[&str], Step); 4] = [
        (&[changes, approve], Step::Stop(ExitReason::PlanComplete)),
        (
            &[changes, changes, approve],
            Step::Stop(ExitReason::PlanComplete),
        ),
        (
            &[
                "no block",
                "VERDICT: ?",
                "VERDICT: APPROVE\n- [blocker] x: y",
            ],
            Step::Stop(ExitReason::ReviewRejected),
        ),
        (
            &[changes, changes, changes],
            Step::Stop(ExitReason::ReviewRejected),
        ),
    ];
    for (verdicts, last) in cases {
        let mut run = Run::new(reviewed_cfg());
        assert_eq!(verified_done(&mut run, t0()), Step::Observe);
        assert_eq!(
            gate(&mut run, complete(), t0()),
            Step::Review(ExitReason::PlanComplete)
        );
        for (i, v) in verdicts.iter().enumerate() {
            if i > 0 {
                done_again(&mut run, t0());
            }
            run.on(verdict(v), t0());
            if i + 1 < verdicts.len() {
                // Back to the worker: the blockers in its next context, never the minors.
                let notes = run.take_notes();
                assert_eq!(notes.len(), 1, "{verdicts:?}");
                assert_eq!(notes[0].kind, NoteKind::Reviewer);
                assert!(!notes[0].text.contains("typo"), "{}", notes[0].text);
                if *v == changes {
                    assert!(
                        notes[0].text.contains("no error handling"),
                        "{}",
                        notes[0].text
                    );
                }
            }
        }
        assert_eq!(run.next(t0()), last, "{verdicts:?}");
        assert_eq!(run.review_rounds() as usize, verdicts.len(), "{verdicts:?}");
    }
}

#[test]
fn a_review_waits_for_limits_and_stops_at_budgets() {
    let clock = FixedClock::new(t0());
    let mut run = Run::new(reviewed_cfg());
    assert_eq!(verified_done(&mut run, t0()), Step::Observe);
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Review(ExitReason::PlanComplete)
    );
    let until = t0() + hours(1);
    run.on(
        Fact::Reviewed(Reviewed::Wait {
            until,
            reason: WaitReason::RateLimit,
        }),
        t0(),
    );
    assert_eq!(run.next(t0()), limit_wait(until, WaitReason::RateLimit));
    clock.advance(hours(1));
    run.on(Fact::WokeUp, clock.now());
    assert_eq!(
        gate(&mut run, complete(), clock.now()),
        Step::Review(ExitReason::PlanComplete)
    );
    run.on(
        Fact::Reviewed(Reviewed::Stop(ExitReason::ReviewBudget)),
        clock.now(),
    );
    assert_eq!(run.next(clock.now()), Step::Stop(ExitReason::ReviewBudget));

    // Ctrl-C during a review stops the run.
    let mut run = Run::new(reviewed_cfg());
    assert_eq!(verified_done(&mut run, t0()), Step::Observe);
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Review(ExitReason::PlanComplete)
    );
    run.on(Fact::Interrupted, t0());
    assert_eq!(run.next(t0()), Step::Stop(ExitReason::Interrupted));
}

#[test]
fn a_reviewer_at_its_usage_limit_waits_for_the_reset_or_stops_as_asked() {
    use crate::analysis::{AgentError, ErrorKind};
    let error = |kind, reset| AgentError {
        kind,
        message: "limit".into(),
        api_status: None,
        reset_at: reset,
        window: None,
    };
    let reset = t0() + hours(2);
    let cases = [
        // (error, policy, expected)
        (None, UsageLimitPolicy::Wait, None),
        (
            Some(error(ErrorKind::Auth, Some(reset))),
            UsageLimitPolicy::Wait,
            None,
        ),
        (
            Some(error(ErrorKind::UsageLimit, Some(reset))),
            UsageLimitPolicy::Wait,
            Some(Reviewed::Wait {
                until: reset + decide::USAGE_RESET_MARGIN,
                reason: WaitReason::UsageLimit,
            }),
        ),
        (
            Some(error(ErrorKind::UsageLimit, None)),
            UsageLimitPolicy::Wait,
            Some(Reviewed::Wait {
                until: t0() + decide::USAGE_UNKNOWN_WAIT,
                reason: WaitReason::UsageLimit,
            }),
        ),
        (
            Some(error(ErrorKind::UsageLimit, Some(reset))),
            UsageLimitPolicy::Exit,
            Some(Reviewed::Stop(ExitReason::UsageLimit)),
        ),
    ];
    for (i, (e, policy, want)) in cases.into_iter().enumerate() {
        assert_eq!(
            Reviewed::at_usage_limit(e.as_ref(), policy, t0()),
            want,
            "case {i}"
        );
    }
}

/// The review's call passes the worker's gates, from the same look (an [`Observation`]):
/// `MAX_COST_USD` and `REVIEW_MAX_SHARE` first, the fleet's budget, the rolling-hour caps
/// and the usage windows (a wait, after which the round looks again and runs).
#[test]
fn a_review_round_passes_the_same_gates_as_a_call() {
    let later = t0() + hours(1);
    let over = over("five_hour", 95.0, 90, Some(later));
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, Observation, Option<ExitReason>, Step)> = vec![
        (
            "clear",
            complete(),
            None,
            Step::Review(ExitReason::PlanComplete),
        ),
        (
            "the hour's caps",
            Observation {
                budget: BudgetCheck::Wait {
                    until: later,
                    reason: WaitReason::RateLimit,
                },
                ..complete()
            },
            None,
            limit_wait(later, WaitReason::RateLimit),
        ),
        (
            "a window",
            Observation {
                plan_complete: true,
                ..window_wait(later, over)
            },
            None,
            limit_wait(later, WaitReason::UsageWindow),
        ),
        (
            "the fleet's budget",
            complete(),
            Some(ExitReason::CostBudget),
            Step::Stop(ExitReason::CostBudget),
        ),
    ];
    for (name, o, fleet, want) in cases {
        let mut run = Run::new(reviewed_cfg());
        assert_eq!(verified_done(&mut run, t0()), Step::Observe, "{name}");
        if let Some(r) = fleet {
            run.on(Fact::FleetLimit(r), t0());
        }
        assert_eq!(gate(&mut run, o, t0()), want, "{name}");
        if let Step::Wait { .. } = want {
            // After the wait: a new look, then the round.
            run.on(Fact::WokeUp, later);
            assert_eq!(
                gate(&mut run, complete(), later),
                Step::Review(ExitReason::PlanComplete),
                "{name}"
            );
        }
    }
    // MAX_COST_USD spent by the worker: no review call.
    let mut run = Run::new(RunConfig {
        decide: DecideConfig {
            max_cost_usd: 1.0,
            ..cfg().decide
        },
        ..reviewed_cfg()
    });
    assert_eq!(gate(&mut run, clear(), t0()), Step::Call { agent: 0 });
    run.on(Fact::Calling, t0());
    run.on(Fact::Spent(0.5), t0());
    run.on(
        Fact::Answered(answer(Decision::Stop(ExitReason::PlanComplete))),
        t0(),
    );
    run.on(Fact::Spent(0.6), t0());
    assert_eq!(run.next(t0()), Step::Check(ExitReason::PlanComplete));
    run.on(Fact::Checked(Some(ExitReason::PlanComplete)), t0());
    assert_eq!(
        gate(&mut run, complete(), t0()),
        Step::Stop(ExitReason::CostBudget)
    );
}
