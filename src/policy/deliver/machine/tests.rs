//! The delivery machine on a fake clock: each table row is an event at a time and what the
//! machine answers.

use jiff::{SignedDuration, Timestamp};

use super::*;

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn at(secs: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(secs)
}

const SHA: &str = "0123456789abcdef";

fn cfg(source: Source) -> Config {
    Config {
        source,
        pr: true,
        ci: Some(CiLimits {
            appear: SignedDuration::from_mins(10),
            total: SignedDuration::from_mins(30),
            poll: SignedDuration::from_secs(15),
        }),
        auto_merge: false,
        review_loop: false,
        push_retry_waits: vec![SignedDuration::from_secs(5), SignedDuration::from_secs(15)],
        secrets: Vec::new(),
    }
}

fn record() -> Delivery {
    Delivery {
        mode: "pr".into(),
        branch: "hank/main".into(),
        base: "main".into(),
        remote: "origin".into(),
        ..Delivery::default()
    }
}

fn evidence() -> DeliveryEvidence {
    DeliveryEvidence {
        title: "Fix the parser".into(),
        body: "the body".into(),
        closes: vec![4],
        ..DeliveryEvidence::default()
    }
}

fn begin(reason: ExitReason) -> Event {
    Event::Begin {
        reason,
        evidence: Some(evidence()),
    }
}

fn committed() -> Event {
    Event::Committed {
        made: true,
        secrets_skipped: Vec::new(),
        refused: None,
        head: SHA.into(),
    }
}

fn check(name: &str, state: CheckState) -> Check {
    Check {
        name: name.into(),
        state,
        url: None,
        id: None,
    }
}

fn done(cmds: &[Command]) -> Option<Delivered> {
    cmds.iter().find_map(|c| match c {
        Command::Done(d) => Some(d.clone()),
        _ => None,
    })
}

/// A machine of `source` brought to the first look at the checks (pushed at `at(0)`, the
/// pull request #7 open).
fn at_the_checks(source: Source) -> Machine {
    let mut m = Machine::new(cfg(source), record());
    m.on(begin(ExitReason::PlanComplete), t0());
    m.on(committed(), t0());
    m.on(Event::Scanned { refusal: None }, t0());
    m.on(Event::Pushed, t0());
    let out = m.on(
        Event::PrOpen {
            number: 7,
            url: "https://x/pull/7".into(),
            created: true,
        },
        t0(),
    );
    assert!(matches!(out.last(), Some(Command::LookChecks { head }) if head == SHA));
    m
}

#[test]
fn a_round_goes_commit_scan_push_pr_checks_in_that_order() {
    let mut m = Machine::new(cfg(Source::Run), record());
    let out = m.on(begin(ExitReason::PlanComplete), t0());
    assert_eq!(
        out,
        vec![
            Command::Save,
            Command::Commit {
                message: Some("Fix the parser\n\nDelivered by hank.".into())
            }
        ]
    );
    assert_eq!(m.record.round, 1);
    assert_eq!(m.record.step, DeliveryStep::Started);
    assert_eq!(
        m.on(committed(), t0()),
        vec![
            Command::Say(Said::Committed),
            Command::Scan { head: SHA.into() }
        ]
    );
    assert_eq!(
        m.on(Event::Scanned { refusal: None }, t0()),
        vec![Command::Push]
    );
    let out = m.on(Event::Pushed, t0());
    assert_eq!(m.record.step, DeliveryStep::Pushed);
    assert!(matches!(
        &out[2],
        Command::OpenPr { draft: false, known: None, title, .. } if title == "Fix the parser"
    ));
    let out = m.on(
        Event::PrOpen {
            number: 7,
            url: "https://x/pull/7".into(),
            created: true,
        },
        at(1),
    );
    // The issue it closes is commented on once, when the pull request is opened now.
    assert!(
        out.iter()
            .any(|c| matches!(c, Command::Comment { issue: 4, .. }))
    );
    assert!(
        out.contains(&Command::Tell),
        "a run shows the pending checks"
    );
    assert_eq!(m.record.checks, "pending");
    assert_eq!(m.record.step, DeliveryStep::PrOpened);
    // Pending: look again after the poll interval, the countdown due CI_TIMEOUT after the
    // push.
    let out = m.on(Event::Checks(vec![check("ci", CheckState::Pending)]), at(1));
    assert_eq!(
        out,
        vec![Command::Wait {
            until: at(16),
            countdown: Some(Countdown {
                due: at(30 * 60),
                pending: 1
            })
        }]
    );
    assert_eq!(
        m.on(Event::Woke { interrupted: false }, at(16)),
        vec![Command::LookChecks { head: SHA.into() }]
    );
    let out = m.on(Event::Checks(vec![check("ci", CheckState::Passed)]), at(16));
    assert_eq!(done(&out), Some(Delivered::Final(ExitReason::Delivered)));
    assert_eq!(m.record.checks, "green");
    assert_eq!(m.record.step, DeliveryStep::Finished);
    assert_eq!(m.record.at, Some(at(16)));
    assert!(m.done());
}

#[test]
fn the_ci_verdict_follows_the_clock_of_the_events() {
    let pending = || vec![check("ci", CheckState::Pending)];
    let failed = || vec![check("ci", CheckState::Failed)];
    // (checks, seconds after the push, the round's outcome or None while it waits, the step
    // the record is left at)
    let table: Vec<(Vec<Check>, i64, Option<Delivered>, DeliveryStep)> = vec![
        (Vec::new(), 60, None, DeliveryStep::PrOpened),
        (
            Vec::new(),
            600,
            Some(Delivered::Final(ExitReason::CiMissing)),
            DeliveryStep::PrOpened,
        ),
        (pending(), 600, None, DeliveryStep::PrOpened),
        (
            pending(),
            1800,
            Some(Delivered::Final(ExitReason::CiTimeout)),
            DeliveryStep::PrOpened,
        ),
    ];
    for (checks, secs, want, step) in table {
        let mut m = at_the_checks(Source::Run);
        let out = m.on(Event::Checks(checks.clone()), at(secs));
        assert_eq!(done(&out), want, "{checks:?} at {secs}s");
        assert_eq!(m.record.step, step, "{checks:?} at {secs}s");
        if want.is_none() {
            let due = if checks.is_empty() { 600 } else { 1800 };
            assert!(matches!(
                out.as_slice(),
                [Command::Wait { countdown: Some(c), .. }] if c.due == at(due)
            ));
        }
    }
    // A failing check decides at once: its log, then the feedback for the agent.
    let mut m = at_the_checks(Source::Run);
    let out = m.on(Event::Checks(failed()), at(30));
    assert!(matches!(out.as_slice(), [Command::FetchLogs { failed }] if failed.len() == 1));
    let out = m.on(
        Event::Logs(vec![("ci".into(), Some("test_x FAILED".into()))]),
        at(31),
    );
    let Some(Delivered::Feedback { round, text, .. }) = done(&out) else {
        panic!("{out:?}");
    };
    assert_eq!(round, Round::Ci);
    assert!(text.contains("test_x FAILED"), "{text}");
    assert_eq!(m.record.step, DeliveryStep::Finished);
    assert_eq!(m.record.check_names, vec!["ci".to_string()]);
}

#[test]
fn a_transient_push_failure_is_tried_again_then_stops_and_a_refusal_goes_to_the_agent() {
    let pushing = |source: Source| {
        let mut m = Machine::new(cfg(source), record());
        m.on(begin(ExitReason::PlanComplete), t0());
        m.on(committed(), t0());
        m.on(Event::Scanned { refusal: None }, t0());
        m
    };
    let network = "fatal: unable to access: Could not resolve host: github.com";
    let mut m = pushing(Source::Run);
    for (wait, now) in [(5, 0), (15, 5)] {
        let out = m.on(
            Event::PushRefused {
                output: network.into(),
            },
            at(now),
        );
        assert!(
            matches!(out.last(), Some(Command::Wait { until, countdown: None }) if *until == at(now + wait)),
            "{out:?}"
        );
        assert_eq!(
            m.on(Event::Woke { interrupted: false }, at(now + wait)),
            vec![Command::Push]
        );
    }
    let out = m.on(
        Event::PushRefused {
            output: network.into(),
        },
        at(20),
    );
    assert_eq!(done(&out), Some(Delivered::Final(ExitReason::PushRejected)));
    // A hook's refusal: back to the agent in a run, the verdict for `hank deliver`.
    let hook = "error: failed to push some refs\n! [remote rejected] hook declined";
    for (source, feedback) in [(Source::Run, true), (Source::Deliver, false)] {
        let mut m = pushing(source);
        let out = m.on(
            Event::PushRefused {
                output: hook.into(),
            },
            t0(),
        );
        let got = done(&out).unwrap();
        assert_eq!(
            matches!(
                got,
                Delivered::Feedback {
                    round: Round::Push,
                    ..
                }
            ),
            feedback,
            "{source:?}"
        );
        assert_eq!(m.record.exit_reason, Some(ExitReason::PushRejected));
        assert!(
            m.record
                .feedback
                .as_deref()
                .unwrap()
                .contains("hook declined")
        );
    }
    // A Ctrl-C during a retry wait ends the round interrupted, left open.
    let mut m = pushing(Source::Run);
    m.on(
        Event::PushRefused {
            output: network.into(),
        },
        t0(),
    );
    let out = m.on(Event::Woke { interrupted: true }, at(2));
    assert_eq!(done(&out), Some(Delivered::Final(ExitReason::Interrupted)));
    assert!(m.record.resumable());
}

#[test]
fn a_rejected_review_goes_up_as_a_draft_never_waited_for() {
    let mut m = Machine::new(cfg(Source::Run), record());
    m.on(begin(ExitReason::ReviewRejected), t0());
    m.on(committed(), t0());
    m.on(Event::Scanned { refusal: None }, t0());
    let out = m.on(Event::Pushed, t0());
    assert!(
        out.iter()
            .any(|c| matches!(c, Command::OpenPr { draft: true, .. }))
    );
    let out = m.on(
        Event::PrOpen {
            number: 7,
            url: "u".into(),
            created: true,
        },
        t0(),
    );
    assert_eq!(
        done(&out),
        Some(Delivered::Final(ExitReason::ReviewRejected))
    );
    assert!(!out.iter().any(|c| matches!(c, Command::LookChecks { .. })));
}

#[test]
fn a_refused_commit_is_feedback_in_a_run_and_an_error_for_hank_deliver() {
    let refused = Event::Committed {
        made: false,
        secrets_skipped: vec![".env".into()],
        refused: Some("pre-commit: lint failed".into()),
        head: String::new(),
    };
    let mut m = Machine::new(cfg(Source::Run), record());
    m.on(begin(ExitReason::PlanComplete), t0());
    let out = m.on(refused.clone(), t0());
    assert_eq!(out[0], Command::Say(Said::SecretLeftOut(".env".into())));
    assert!(matches!(
        done(&out),
        Some(Delivered::Feedback {
            round: Round::Push,
            ..
        })
    ));
    let mut m = Machine::new(cfg(Source::Deliver), record());
    m.on(begin(ExitReason::PlanComplete), t0());
    let out = m.on(refused, t0());
    assert!(matches!(out.last(), Some(Command::Fail(e)) if e.contains("lint failed")));
}

#[test]
fn a_forge_failure_keeps_the_step_and_a_resume_reuses_the_recorded_pr() {
    let mut m = Machine::new(cfg(Source::Deliver), record());
    m.on(begin(ExitReason::PlanComplete), t0());
    m.on(committed(), t0());
    m.on(Event::Scanned { refusal: None }, t0());
    m.on(Event::Pushed, t0());
    let out = m.on(
        Event::ForgeFailed {
            error: "403 Resource not accessible".into(),
        },
        t0(),
    );
    assert_eq!(done(&out), Some(Delivered::Final(ExitReason::ForgeFailed)));
    assert_eq!(m.record.step, DeliveryStep::Pushed);
    assert_eq!(
        m.record.error.as_deref(),
        Some("the pull request could not be opened: 403 Resource not accessible")
    );
    // `hank deliver` from that record: no evidence given, the record's kept; a new PR.
    let mut stored = m.record.clone();
    let mut m = Machine::new(cfg(Source::Deliver), stored.clone());
    let out = m.on(
        Event::Begin {
            reason: ExitReason::Delivered,
            evidence: None,
        },
        at(60),
    );
    assert_eq!(m.record.evidence, evidence());
    assert_eq!(m.record.exit_reason, None);
    assert!(matches!(&out[1], Command::Commit { message: Some(_) }));
    // A record whose pull request is open: the same one, no second one.
    stored.pr_number = Some(7);
    stored.pr_url = Some("u".into());
    stored.step = DeliveryStep::PrOpened;
    let mut m = Machine::new(cfg(Source::Deliver), stored);
    m.on(
        Event::Begin {
            reason: ExitReason::Delivered,
            evidence: None,
        },
        at(60),
    );
    m.on(committed(), at(60));
    m.on(Event::Scanned { refusal: None }, at(60));
    let out = m.on(Event::Pushed, at(60));
    assert!(out.iter().any(|c| matches!(
        c,
        Command::OpenPr {
            known: Some((7, _)),
            ..
        }
    )));
    let out = m.on(
        Event::PrOpen {
            number: 7,
            url: "u".into(),
            created: false,
        },
        at(61),
    );
    assert!(!out.iter().any(|c| matches!(c, Command::Comment { .. })));
}

#[test]
fn green_checks_then_reviews_then_auto_merge() {
    let mut c = cfg(Source::Run);
    c.review_loop = true;
    c.auto_merge = true;
    let green = || Event::Checks(vec![check("ci", CheckState::Passed)]);
    let asks = Review {
        id: 9,
        author: "ann".into(),
        state: "CHANGES_REQUESTED".into(),
        body: "rename login()".into(),
    };
    let mut m = at_the_checks(Source::Run);
    m.cfg = c.clone();
    assert_eq!(m.on(green(), at(20)).last(), Some(&Command::ReadReviews));
    let out = m.on(
        Event::Reviews {
            reviews: vec![asks.clone()],
            comments: Vec::new(),
        },
        at(21),
    );
    assert!(matches!(
        done(&out),
        Some(Delivered::Feedback {
            round: Round::Review,
            ..
        })
    ));
    assert_eq!(m.record.reviews_seen, 9);
    // The next round: the review already seen asks nothing; auto-merge is armed.
    m.on(begin(ExitReason::PlanComplete), at(100));
    assert_eq!(m.record.round, 2);
    assert_eq!(m.record.step, DeliveryStep::PrOpened, "the PR stays known");
    m.on(committed(), at(100));
    m.on(Event::Scanned { refusal: None }, at(100));
    m.on(Event::Pushed, at(100));
    m.on(
        Event::PrOpen {
            number: 7,
            url: "u".into(),
            created: false,
        },
        at(100),
    );
    m.on(green(), at(101));
    let out = m.on(
        Event::Reviews {
            reviews: vec![asks],
            comments: Vec::new(),
        },
        at(102),
    );
    assert_eq!(out, vec![Command::ArmAutoMerge]);
    let out = m.on(Event::AutoMerge { error: None }, at(103));
    assert_eq!(done(&out), Some(Delivered::Final(ExitReason::Delivered)));
    assert!(m.record.auto_merge_armed);
}

#[test]
fn recorded_events_replay_to_the_same_record() {
    let mut m = Machine::new(cfg(Source::Run), record());
    let events = vec![
        (t0(), begin(ExitReason::PlanComplete)),
        (t0(), committed()),
        (at(1), Event::Scanned { refusal: None }),
        (at(2), Event::Pushed),
        (
            at(3),
            Event::PrOpen {
                number: 7,
                url: "u".into(),
                created: true,
            },
        ),
        (at(4), Event::Checks(Vec::new())),
        (at(19), Event::Woke { interrupted: false }),
        (at(19), Event::Checks(vec![check("ci", CheckState::Failed)])),
        (at(20), Event::Logs(vec![("ci".into(), None)])),
    ];
    for (now, e) in &events {
        m.on(e.clone(), *now);
    }
    let replayed = replay(cfg(Source::Run), record(), &events);
    assert_eq!(replayed, m.record);
    assert_eq!(replayed.checks, "failed");
    assert_eq!(replayed.at, Some(at(20)));
}

#[test]
fn hank_deliver_arms_auto_merge_and_keeps_review_requests_for_the_next_run() {
    let mut m = at_the_checks(Source::Deliver);
    m.cfg.review_loop = true;
    m.cfg.auto_merge = true;
    let out = m.on(Event::Checks(vec![check("ci", CheckState::Passed)]), at(20));
    assert_eq!(out.last(), Some(&Command::ArmAutoMerge));
    assert_eq!(
        m.on(Event::AutoMerge { error: None }, at(21)).last(),
        Some(&Command::ReadReviews)
    );
    let out = m.on(
        Event::Reviews {
            reviews: Vec::new(),
            comments: vec![ReviewComment {
                id: 3,
                author: "ann".into(),
                path: "a.rs".into(),
                line: Some(1),
                body: "typo".into(),
            }],
        },
        at(22),
    );
    assert_eq!(done(&out), Some(Delivered::Final(ExitReason::Delivered)));
    assert!(m.record.auto_merge_armed);
    assert!(m.record.feedback.as_deref().unwrap().contains("typo"));
    assert_eq!(m.record.step, DeliveryStep::Finished);
}

/// A run's delivery starts with the machine's first command: `Start` as the settings want
/// it; `Started` names where the work goes, and the rounds deliver there.
#[test]
fn a_runs_delivery_is_started_by_its_first_command() {
    let want = Want {
        branch: None,
        remote: "upstream".into(),
        base: Some("develop".into()),
        base_required: true,
        forge: true,
    };
    let mut m = Machine::new(
        cfg(Source::Run),
        Delivery {
            mode: "pr".into(),
            ..Delivery::default()
        },
    );
    assert_eq!(
        m.on(Event::Open(want.clone()), at(0)),
        vec![Command::Start(want)]
    );
    // Nothing else moves it while it starts.
    assert_eq!(m.on(begin(ExitReason::PlanComplete), at(1)), Vec::new());
    let started = Event::Started {
        branch: "hank/main".into(),
        base: "develop".into(),
        remote: "upstream".into(),
    };
    assert_eq!(m.on(started, at(2)), vec![Command::Ready]);
    assert_eq!(
        (
            m.record.branch.as_str(),
            m.record.base.as_str(),
            m.record.remote.as_str()
        ),
        ("hank/main", "develop", "upstream")
    );
    assert_eq!(m.record.round, 0, "starting is no round");
    let cmds = m.on(begin(ExitReason::PlanComplete), at(3));
    assert_eq!(m.record.round, 1);
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::Commit { message: Some(_) })),
        "{cmds:?}"
    );
}
