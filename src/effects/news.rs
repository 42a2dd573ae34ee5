//! What the run tells, as one value ([`News`]) handed to [`super::Effects::tell`] with how the
//! run looks ([`RunView`]: status.json when it changed, the run's cost and the plan's items).
//! Which terminal line, log line and event each piece of news implies is pure ([`News::told`],
//! table-tested); which status fields a run state implies is [`crate::store::Status::of`]'s.

use jiff::Timestamp;

use crate::control::Taken;
use crate::exit::{self, ExitReason};
use crate::policy::breaker::Transition;
use crate::policy::budget::WaitReason;
use crate::policy::failover::Switch;
use crate::policy::verify::CheckResult;
use crate::report::LoopSummary;
use crate::store::schema::{AgentFinished, Delivery, ReviewRound};

use crate::store::{EventKind, RunState, Status};

/// What just happened in the run.
#[derive(Debug)]
pub(crate) enum News<'a> {
    /// status.json only (the run state it shows).
    Status(RunState),
    Warning(&'a str),
    /// The circuit breaker changed state.
    Transition(&'a Transition),
    /// Call `number` starts (status `running`).
    LoopStarted {
        number: u64,
        resume: bool,
        context_bytes: u64,
        agent: &'a str,
        /// The output format asked of the agent.
        format: &'a str,
    },
    /// Loop `finished.number` ended (`status`: status.json written too).
    Finished {
        finished: &'a AgentFinished,
        summary: &'a LoopSummary,
        questions: &'a [String],
        status: bool,
    },
    /// Call `number`'s agent crashed (exited non-zero without a model answer).
    Crashed {
        number: u64,
        crash: &'a crate::analysis::Crash,
    },
    /// A limit wait starts (status `waiting`).
    Waiting {
        reason: WaitReason,
        until: Timestamp,
    },
    /// A `hank ctl` command was taken.
    Control(Taken),
    /// The next calls go to another agent (`shown`: said and recorded as an event too).
    Switched(&'a Switch),
    /// VERIFY_COMMAND ran (the effect said and logged it).
    Checked(&'a CheckResult),
    /// A step of the delivery (status `running`, with it).
    Delivery(&'a Delivery),
    /// The reviewer is called (`REVIEW_AGENT`; status `running`).
    ReviewStarted {
        round: u32,
        agent: &'a str,
    },
    /// A review round ended (status `running`, with its verdict).
    Review(&'a ReviewRound),
    /// The run ends with `reason`: `message` is the exit summary; the terminal's last line
    /// and the status it leaves are [`crate::report::exit_line`]'s.
    Exit {
        reason: ExitReason,
        message: &'a str,
        verified: Option<bool>,
    },
    /// The run failed with this error (status `failed`).
    Failed(&'a str),
}

/// How the run looks when the news is told.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunView<'a> {
    /// status.json as it now is (`None`: unchanged).
    pub status: Option<&'a Status>,
    /// The run's cost and the plan's items done/total (NOTIFY's messages).
    pub cost_usd: f64,
    pub items: (u32, u32),
}

/// What a piece of news implies for each output.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Told {
    /// A terminal line (`true`: a warning).
    pub say: Option<(bool, String)>,
    /// A line of `hank.log`.
    pub log: Option<String>,
    pub event: Option<EventKind>,
}

impl<'a> News<'a> {
    /// The run state status.json shows with this news (`None`: not written).
    #[must_use]
    pub(crate) fn run_state(&self) -> Option<RunState> {
        match self {
            Self::Status(s) => Some(*s),
            Self::LoopStarted { .. }
            | Self::Delivery(_)
            | Self::ReviewStarted { .. }
            | Self::Review(_) => Some(RunState::Running),
            Self::Finished { status, .. } => status.then_some(RunState::Running),
            Self::Waiting { .. } => Some(RunState::Waiting),
            Self::Exit {
                reason, message, ..
            } => Some(crate::report::exit_line(*reason, message).2),
            Self::Failed(_) => Some(RunState::Failed),
            _ => None,
        }
    }

    /// The exit reason status.json names.
    #[must_use]
    pub(crate) fn exit(&self) -> Option<ExitReason> {
        match self {
            Self::Exit { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    /// A delivery record `d` shown: the `delivery` event and status.json when a step happened
    /// (`step`), else status.json only (its CI countdown moved).
    #[must_use]
    pub(crate) fn delivery_shown(d: &'a Delivery, step: bool) -> Self {
        if step {
            Self::Delivery(d)
        } else {
            Self::Status(RunState::Running)
        }
    }

    /// The terminal line, log line and event of this news.
    #[must_use]
    pub(crate) fn told(&self) -> Told {
        let info = |s: String| Some((false, s));
        match self {
            Self::Status(_) => Told::default(),
            Self::Warning(m) => Told {
                say: Some((true, (*m).to_owned())),
                log: Some(format!("warning: {m}")),
                event: Some(EventKind::Warning {
                    message: (*m).to_owned(),
                }),
            },
            Self::Transition(t) => {
                let line = format!("circuit {} → {}: {}", t.from, t.to, t.reason);
                Told {
                    say: info(line.clone()),
                    log: Some(line),
                    event: Some(EventKind::from(*t)),
                }
            }
            Self::LoopStarted {
                number,
                resume,
                context_bytes,
                agent,
                format,
            } => Told {
                say: None,
                log: Some(format!(
                    "loop {number} started (agent: {agent}, resume: {resume}, format: {format})"
                )),
                event: Some(EventKind::LoopStarted {
                    number: *number,
                    resume: *resume,
                    context_bytes: *context_bytes,
                    agent: Some((*agent).to_owned()),
                }),
            },
            Self::Finished { finished, .. } => Told {
                say: None,
                log: Some(crate::report::loop_log_line(finished)),
                event: Some(EventKind::AgentFinished(Box::new((*finished).clone()))),
            },
            Self::Crashed { number, crash } => {
                let record = crate::policy::crash::record(crash);
                let fix = crate::policy::crash::remedy(&crash.line);
                let line = format!("loop {number}: the agent crashed: it {record}");
                Told {
                    say: Some((true, format!("{line} — {fix}"))),
                    log: Some(line),
                    event: Some(EventKind::AgentCrashed {
                        number: *number,
                        exit_code: crash.exit_code,
                        message: crash.line.clone(),
                        tail: crash.tail.clone(),
                        fix: fix.to_owned(),
                    }),
                }
            }
            Self::Waiting { reason, until } => Told {
                say: None,
                log: Some(format!("waiting ({}) until {until}", reason.as_str())),
                event: Some(EventKind::Waiting {
                    reason: *reason,
                    until: *until,
                }),
            },
            Self::Control(t) => Told {
                say: info(format!("hank ctl {}: {}", t.command, t.outcome)),
                log: None,
                event: Some(EventKind::Control {
                    id: t.id.clone(),
                    command: t.command.clone(),
                    outcome: t.outcome.clone(),
                }),
            },
            Self::Switched(s) => {
                let line = format!("agent {} → {}: {}", s.from, s.to, s.reason);
                Told {
                    say: s.shown.then(|| (false, line.clone())),
                    log: Some(line),
                    event: s.shown.then(|| EventKind::AgentSwitched {
                        from: s.from.clone(),
                        to: s.to.clone(),
                        reason: s.reason.clone(),
                        until: s.until,
                    }),
                }
            }
            Self::Checked(r) => Told {
                event: Some(EventKind::Verification(Box::new((*r).clone()))),
                ..Told::default()
            },
            Self::Delivery(d) => Told {
                say: info(d.line()),
                log: None,
                event: Some(EventKind::Delivery(Box::new((*d).clone()))),
            },
            Self::ReviewStarted { round, agent } => {
                let line = format!("review round {round}: asking {agent} (read-only)");
                Told {
                    say: info(line.clone()),
                    log: Some(line),
                    event: None,
                }
            }
            Self::Review(r) => {
                let line = r.line();
                Told {
                    say: Some((r.verdict != "approve", line.clone())),
                    log: Some(line),
                    event: Some(EventKind::Review(Box::new((*r).clone()))),
                }
            }
            Self::Exit {
                reason,
                message,
                verified,
            } => Told {
                say: Some({
                    let (warn, line, _) = crate::report::exit_line(*reason, message);
                    (warn, line)
                }),
                log: Some(format!(
                    "exit {} ({}): {message}",
                    reason.as_str(),
                    reason.code()
                )),
                event: Some(EventKind::Exit {
                    exit_reason: Some(*reason),
                    exit_code: reason.code(),
                    message: (*message).to_owned(),
                    verified: *verified,
                }),
            },
            Self::Failed(err) => Told {
                say: None,
                log: Some(format!("failed: {err}")),
                event: Some(EventKind::Exit {
                    exit_reason: None,
                    exit_code: exit::ERROR,
                    message: (*err).to_owned(),
                    verified: None,
                }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::breaker::CircuitState;

    /// News, status's run state, terminal line, log line, event type.
    type Row<'a> = (
        News<'a>,
        Option<RunState>,
        Option<(bool, &'a str)>,
        Option<&'a str>,
        Option<&'a str>,
    );

    fn at() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn switch(shown: bool) -> Switch {
        Switch {
            from: "a".into(),
            to: "b".into(),
            reason: "r".into(),
            until: None,
            handover: false,
            shown,
        }
    }

    #[test]
    fn each_piece_of_news_implies_its_status_lines_and_event() {
        let (quiet, shown) = (switch(false), switch(true));
        let t = Transition {
            from: CircuitState::Closed,
            to: CircuitState::Open,
            reason: "no progress".into(),
            at: at(),
        };
        let taken = Taken {
            id: "c1".into(),
            command: "pause".into(),
            outcome: "applied".into(),
        };
        let crash = crate::analysis::Crash {
            exit_code: 1,
            line: "PermissionError: denied".into(),
            tail: vec![
                "Traceback (most recent call last):".into(),
                "PermissionError: denied".into(),
            ],
        };
        let table: Vec<Row<'_>> = vec![
            (
                News::Status(RunState::Starting),
                Some(RunState::Starting),
                None,
                None,
                None,
            ),
            (
                News::Warning("w"),
                None,
                Some((true, "w")),
                Some("warning: w"),
                Some("warning"),
            ),
            (
                News::Transition(&t),
                None,
                Some((false, "circuit CLOSED → OPEN: no progress")),
                Some("circuit CLOSED → OPEN: no progress"),
                Some("circuit_changed"),
            ),
            (
                News::LoopStarted {
                    number: 3,
                    resume: true,
                    context_bytes: 9,
                    agent: "claude",
                    format: "json",
                },
                Some(RunState::Running),
                None,
                Some("loop 3 started (agent: claude, resume: true, format: json)"),
                Some("loop_started"),
            ),
            (
                News::Crashed {
                    number: 2,
                    crash: &crash,
                },
                None,
                Some((
                    true,
                    "loop 2: the agent crashed: it exited with code 1: PermissionError: denied — a file access was refused: under hank's sandbox (SANDBOX), allow the path with SANDBOX_WRITE (or SANDBOX_READ for reading) in .hankrc; otherwise fix the file's owner or permissions",
                )),
                Some("loop 2: the agent crashed: it exited with code 1: PermissionError: denied"),
                Some("agent_crashed"),
            ),
            (
                News::Waiting {
                    reason: WaitReason::UsageLimit,
                    until: at(),
                },
                Some(RunState::Waiting),
                None,
                Some("waiting (usage_limit) until 2027-01-15T08:00:00Z"),
                Some("waiting"),
            ),
            (
                News::Control(taken),
                None,
                Some((false, "hank ctl pause: applied")),
                None,
                Some("control"),
            ),
            (
                News::Switched(&quiet),
                None,
                None,
                Some("agent a → b: r"),
                None,
            ),
            (
                News::Switched(&shown),
                None,
                Some((false, "agent a → b: r")),
                Some("agent a → b: r"),
                Some("agent_switched"),
            ),
            (
                News::Exit {
                    reason: ExitReason::PlanComplete,
                    message: "all done",
                    verified: Some(true),
                },
                Some(RunState::Completed),
                Some((false, "done: all done [plan_complete]")),
                Some("exit plan_complete (0): all done"),
                Some("exit"),
            ),
            (
                News::Failed("boom"),
                Some(RunState::Failed),
                None,
                Some("failed: boom"),
                Some("exit"),
            ),
        ];
        for (news, state, say, log, kind) in table {
            let told = news.told();
            let what = format!("{news:?}");
            assert_eq!(news.run_state(), state, "{what}");
            assert_eq!(
                told.say.as_ref().map(|(w, s)| (*w, s.as_str())),
                say,
                "{what}"
            );
            assert_eq!(told.log.as_deref(), log, "{what}");
            let event = told.event.map(|k| {
                let e = crate::store::Event::new(at(), k);
                let v: serde_json::Value = serde_json::from_str(&e.to_line()).unwrap();
                v["type"].as_str().unwrap().to_owned()
            });
            assert_eq!(event.as_deref(), kind, "{what}");
        }
    }

    /// A transition's event carries its states and reason (the same conversion as `hank reset
    /// circuit`'s).
    #[test]
    fn a_transition_is_told_with_its_states_and_reason() {
        let t = Transition {
            from: CircuitState::HalfOpen,
            to: CircuitState::Closed,
            reason: "progress again".into(),
            at: at(),
        };
        assert_eq!(
            News::Transition(&t).told().event,
            Some(EventKind::CircuitChanged {
                from: CircuitState::HalfOpen,
                to: CircuitState::Closed,
                reason: "progress again".into(),
            })
        );
    }
}
