//! The delivery machine: `Machine::on(event, now) -> Vec<Command>`. **\[pure\]**
//!
//! Delivery's order is defined here once, for all three of its hosts — a run's delivery
//! round (`Step::Deliver`), `hank deliver` (resuming a stored record), a fleet's
//! integration pull request — which execute its commands through
//! `deliver::drive::DeliveryEffects` and hand back what happened as an [`Event`]:
//!
//! 0. `Open` (a run's delivery, once, before its first call): the machine's first command
//!    is `Start` — the host checks the repository, the remote, the base and the forge and
//!    puts the work on the delivery branch — and `Started` names where it goes;
//! 1. `Begin`: the record of the round (the run's evidence), saved before anything moves;
//! 2. the commit of what the agent left (the fleet's branch as it is), then the scan of what
//!    the push sends (a secret stops it), then the push — a transient failure tried again
//!    after the host's retry waits (a run's), a refusal handed back to the agent;
//! 3. `pr`: the pull request (the one recorded, or a new one; a draft when the reviewer
//!    rejected the work), a comment on each issue it closes when it was opened now;
//! 4. `CI_WAIT`: the checks of exactly the pushed commit, looked at every poll interval
//!    until [`super::ci_verdict`] is final — `CI_APPEAR_TIMEOUT` / `CI_TIMEOUT` on the
//!    clock the events come with;
//! 5. green: the reviews (`REVIEW_LOOP`) and auto-merge (`AUTO_MERGE`); red: the failing
//!    checks' logs for the agent.
//!
//! Its state is the persisted record ([`Delivery`]): every step is a `Save`, what people
//! and the run see a `Tell`; [`replay`] feeds recorded events to a new machine and gives the
//! same record.

use jiff::{SignedDuration, Timestamp};

use super::record::{DELIVERY_RECORD_SCHEMA, Delivery, DeliveryEvidence, DeliveryStep, step_after};
use super::{Check, CheckState, CiLimits, CiVerdict, Review, ReviewComment};
use crate::exit::ExitReason;
use crate::policy::run::{Delivered, Round};

/// Who delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A round of `hank run --deliver`: what is refused goes back to the agent.
    Run,
    /// `hank deliver`: the last run's work, now (a refused commit is an error).
    Deliver,
    /// A fleet's integration branch: pushed as it is, no commit.
    Fleet,
}

/// What a delivery is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub source: Source,
    /// `DELIVER=pr` (with a forge).
    pub pr: bool,
    /// `CI_WAIT` with a forge: the verdict's limits.
    pub ci: Option<CiLimits>,
    /// `AUTO_MERGE`.
    pub auto_merge: bool,
    /// `REVIEW_LOOP`.
    pub review_loop: bool,
    /// The waits before each new attempt of a push that failed for a transient reason.
    pub push_retry_waits: Vec<SignedDuration>,
    /// The secret values redacted from everything that leaves hank.
    pub secrets: Vec<String>,
}

/// What starting a run's delivery asks the host for (`DELIVER`, `DELIVER_BRANCH`,
/// `DELIVER_REMOTE`, `DELIVER_BASE`, `CI_WAIT`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Want {
    /// `DELIVER_BRANCH`: the branch to deliver on (else `hank/<the branch the checkout is on>`).
    pub branch: Option<String>,
    /// `DELIVER_REMOTE`.
    pub remote: String,
    /// `DELIVER_BASE`: the pull request's base (else found from the remote).
    pub base: Option<String>,
    /// `DELIVER=pr`: a base must be known (`branch` goes on without one).
    pub base_required: bool,
    /// A forge is needed (`DELIVER=pr`, or `CI_WAIT` applies): it must be found.
    pub forge: bool,
}

/// What happened, as the host saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A run's delivery opens (before the run's first call): the machine asks the host to
    /// start it.
    Open(Want),
    /// The host started it: the work is on `branch`, delivered to `remote`, against `base`.
    Started {
        branch: String,
        base: String,
        remote: String,
    },
    /// A delivery of `reason` begins; `evidence` is the run's (a new round), none when the
    /// record already holds it (a resumed delivery, the fleet's).
    Begin {
        reason: ExitReason,
        evidence: Option<DeliveryEvidence>,
    },
    /// The commit ended (or, for the fleet, the branch's head was read).
    Committed {
        made: bool,
        secrets_skipped: Vec<String>,
        /// A hook refused the commit: its output.
        refused: Option<String>,
        /// The commit HEAD (the branch) points at now.
        head: String,
    },
    /// What the push would send was scanned: the refusal when something looks secret.
    Scanned {
        refusal: Option<String>,
    },
    Pushed,
    /// The remote or a pre-push hook refused the push: the output.
    PushRefused {
        output: String,
    },
    /// A wait ended (`interrupted`: a signal or `hank ctl stop`).
    Woke {
        interrupted: bool,
    },
    /// The pull request is open (`created`: now, not found).
    PrOpen {
        number: u64,
        url: String,
        created: bool,
    },
    /// One look at the checks of the pushed commit.
    Checks(Vec<Check>),
    /// The failing checks' log tails (raw).
    Logs(Vec<(String, Option<String>)>),
    Reviews {
        reviews: Vec<Review>,
        comments: Vec<ReviewComment>,
    },
    /// Auto-merge was armed, or the forge's error.
    AutoMerge {
        error: Option<String>,
    },
    /// The forge step under way failed: its error.
    ForgeFailed {
        error: String,
    },
}

/// The countdown of the CI wait: when the verdict is due (CI_APPEAR_TIMEOUT after the push
/// while no check is seen, else CI_TIMEOUT) and how many checks are pending (0: none yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Countdown {
    pub due: Timestamp,
    pub pending: u32,
}

impl Countdown {
    /// Shown in the delivery of status.json while the wait lasts.
    pub fn show_in(self, d: &mut Delivery) {
        d.checks_due = Some(self.due);
        d.checks_pending = Some(self.pending);
    }
}

/// What a delivery tells people (each host words it its own way).
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// A file that looks like a secret was left out of the commit.
    SecretLeftOut(String),
    /// The work was committed on the branch.
    Committed,
    /// The scan found secrets: the refusal.
    SecretsRefused(String),
    /// A transient push failure, tried again after `wait`; its last line.
    PushRetry {
        line: String,
        wait: SignedDuration,
    },
    /// Pushed.
    Pushed,
    /// The push was refused: its output (cleaned).
    PushRejected(String),
    PrOpened,
    /// A comment on an issue the pull request closes failed.
    CommentFailed {
        issue: u64,
        error: String,
    },
    /// The checks are waited for.
    WaitingForChecks,
    /// The verdict (the record says which).
    Verdict,
    AutoMergeArmed,
    AutoMergeFailed(String),
    /// A reviewer asked for changes (kept for the next loop).
    ReviewAsked,
    /// A forge step failed (the record's `error`).
    ForgeFailed,
}

/// What the host does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Start a run's delivery as `Want` says: check the repository, the remote, the base and
    /// the forge (a refusal is the run's error, before any call), then put the working tree
    /// on the delivery branch.
    Start(Want),
    /// The delivery is started: the run's loop may call its agent (on the delivery branch).
    Ready,
    /// Write the record (the per-user record: what a later `hank deliver` resumes).
    Save,
    /// Show the record (`.hank/delivery.json`, the `delivery` event, status.json).
    Tell,
    Say(Said),
    /// Commit what the agent left with `message` (`None`: the fleet's branch as it is).
    Commit {
        message: Option<String>,
    },
    /// Scan what pushing `head` sends.
    Scan {
        head: String,
    },
    Push,
    /// Wait until `until` (the CI wait shows its countdown).
    Wait {
        until: Timestamp,
        countdown: Option<Countdown>,
    },
    /// The pull request: the recorded one (`known`), else a new one.
    OpenPr {
        title: String,
        body: String,
        draft: bool,
        known: Option<(u64, String)>,
    },
    /// A comment on an issue (the forge's; the tracker may route it).
    Comment {
        issue: u64,
        text: String,
    },
    LookChecks {
        head: String,
    },
    FetchLogs {
        failed: Vec<Check>,
    },
    ReadReviews,
    ArmAutoMerge,
    /// The delivery cannot go on: an error with this message.
    Fail(String),
    /// Over: how it ended.
    Done(Delivered),
}

/// Where the machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    #[default]
    Idle,
    /// A run's delivery is being started (`Command::Start`).
    Starting,
    Committing,
    Scanning,
    Pushing,
    PushWait,
    Opening,
    Checking,
    CiWait,
    Logs,
    Reviewing,
    Merging,
    Done,
}

/// The delivery machine; its state is [`Machine::record`].
#[derive(Debug, Clone)]
pub struct Machine {
    /// The persisted record.
    pub record: Delivery,
    cfg: Config,
    phase: Phase,
    reason: Option<ExitReason>,
    reached: DeliveryStep,
    pushed_at: Option<Timestamp>,
    attempt: usize,
    head: String,
    verdict: Option<CiVerdict>,
}

impl Machine {
    /// A machine from `record` (a new one, or a stored one to resume).
    #[must_use]
    pub fn new(cfg: Config, record: Delivery) -> Self {
        Self {
            record,
            cfg,
            phase: Phase::Idle,
            reason: None,
            reached: DeliveryStep::Started,
            pushed_at: None,
            attempt: 0,
            head: String::new(),
            verdict: None,
        }
    }

    /// The secret values redacted from what leaves hank (a run's, read at each round).
    pub fn set_secrets(&mut self, secrets: Vec<String>) {
        self.cfg.secrets = secrets;
    }

    /// What the machine was asked to do.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Whether the delivery is over.
    #[must_use]
    pub fn done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The next commands after `event` at `now`.
    pub fn on(&mut self, event: Event, now: Timestamp) -> Vec<Command> {
        match (self.phase, event) {
            (Phase::Idle, Event::Open(want)) => {
                self.phase = Phase::Starting;
                vec![Command::Start(want)]
            }
            (
                Phase::Starting,
                Event::Started {
                    branch,
                    base,
                    remote,
                },
            ) => {
                self.phase = Phase::Idle;
                let r = &mut self.record;
                (r.branch, r.base, r.remote) = (branch, base, remote);
                vec![Command::Ready]
            }
            (Phase::Idle | Phase::Done, Event::Begin { reason, evidence }) => {
                self.begin(reason, evidence, now)
            }
            (
                Phase::Committing,
                Event::Committed {
                    made,
                    secrets_skipped,
                    refused,
                    head,
                },
            ) => self.committed(made, secrets_skipped, refused, head, now),
            (Phase::Scanning, Event::Scanned { refusal: Some(r) }) => {
                self.record.exit_reason = Some(ExitReason::SecretsInCommits);
                let mut out = vec![Command::Say(Said::SecretsRefused(r))];
                out.extend(self.finish(Delivered::Final(ExitReason::SecretsInCommits), now));
                out
            }
            (Phase::Scanning, Event::Scanned { refusal: None }) => self.push(),
            (Phase::Pushing, Event::Pushed) => self.pushed(now),
            (Phase::Pushing, Event::PushRefused { output }) => self.refused(&output, now),
            (Phase::PushWait, Event::Woke { interrupted: false }) => self.push(),
            (Phase::PushWait | Phase::CiWait, Event::Woke { interrupted: true }) => {
                self.record.exit_reason = Some(ExitReason::Interrupted);
                self.finish(Delivered::Final(ExitReason::Interrupted), now)
            }
            (
                Phase::Opening,
                Event::PrOpen {
                    number,
                    url,
                    created,
                },
            ) => self.pr_open(number, url, created, now),
            (Phase::CiWait, Event::Woke { interrupted: false }) => self.look(),
            (Phase::Checking, Event::Checks(checks)) => self.checks(&checks, now),
            (Phase::Logs, Event::Logs(logs)) => match self.verdict.take() {
                Some(v) => self.judge(v, &logs, now),
                None => self.finish(Delivered::Final(ExitReason::CiFailed), now),
            },
            (Phase::Reviewing, Event::Reviews { reviews, comments }) => {
                self.reviewed(&reviews, &comments, now)
            }
            (Phase::Merging, Event::AutoMerge { error }) => {
                let said = match error {
                    None => {
                        self.record.auto_merge_armed = true;
                        Said::AutoMergeArmed
                    }
                    Some(e) => Said::AutoMergeFailed(e),
                };
                let mut out = vec![Command::Say(said)];
                out.extend(self.reviews_or_finish(now));
                out
            }
            (phase, Event::ForgeFailed { error }) => self.forge_failed(phase, &error, now),
            // An event the machine does not wait for changes nothing.
            _ => Vec::new(),
        }
    }

    fn begin(
        &mut self,
        reason: ExitReason,
        evidence: Option<DeliveryEvidence>,
        now: Timestamp,
    ) -> Vec<Command> {
        let r = &mut self.record;
        if self.cfg.source == Source::Run {
            r.round += 1;
        }
        if let Some(ev) = evidence {
            r.evidence = ev;
        }
        r.fleet = self.cfg.source == Source::Fleet;
        r.head = None;
        r.checks = "not_waited".into();
        r.check_names.clear();
        r.checks_due = None;
        r.checks_pending = None;
        r.exit_reason = None;
        r.feedback = None;
        r.auto_merge_armed = false;
        r.secrets_skipped.clear();
        r.error = None;
        if self.cfg.source == Source::Run {
            r.step = if r.pr_number.is_some() {
                DeliveryStep::PrOpened
            } else {
                DeliveryStep::Started
            };
        } else if r.step == DeliveryStep::Finished {
            r.step = DeliveryStep::Started;
        }
        self.reached = r.step;
        self.reason = Some(reason);
        self.attempt = 0;
        self.phase = Phase::Committing;
        let title = r.evidence.title.clone();
        let message = match self.cfg.source {
            Source::Fleet => None,
            Source::Run if r.round > 1 => Some(format!(
                "{title} (delivery round {})\n\nDelivered by hank.",
                r.round
            )),
            _ => Some(format!("{title}\n\nDelivered by hank.")),
        };
        vec![self.save(now), Command::Commit { message }]
    }

    fn committed(
        &mut self,
        made: bool,
        secrets_skipped: Vec<String>,
        refused: Option<String>,
        head: String,
        now: Timestamp,
    ) -> Vec<Command> {
        let mut out: Vec<Command> = secrets_skipped
            .iter()
            .map(|f| Command::Say(Said::SecretLeftOut(f.clone())))
            .collect();
        self.record.secrets_skipped = secrets_skipped;
        if let Some(output) = refused {
            if self.cfg.source != Source::Run {
                self.phase = Phase::Done;
                out.push(Command::Fail(format!(
                    "`git commit` failed: {}",
                    super::clean(&output, &self.cfg.secrets, super::MAX_HOOK_OUTPUT_CHARS)
                        .replace('\n', " ")
                )));
                return out;
            }
            // A hook on the way out (pre-commit, commit-msg): back to the agent like a
            // refused push, in the same rounds.
            let text = super::commit_feedback(&self.record.branch, &output, &self.cfg.secrets);
            self.record.exit_reason = Some(ExitReason::PushRejected);
            self.record.feedback = Some(text.clone());
            out.extend(self.finish(
                Delivered::Feedback {
                    round: Round::Push,
                    text,
                    otherwise: ExitReason::PushRejected,
                },
                now,
            ));
            return out;
        }
        if made {
            out.push(Command::Say(Said::Committed));
        }
        self.head.clone_from(&head);
        self.phase = Phase::Scanning;
        out.push(Command::Scan { head });
        out
    }

    fn push(&mut self) -> Vec<Command> {
        self.phase = Phase::Pushing;
        vec![Command::Push]
    }

    fn pushed(&mut self, now: Timestamp) -> Vec<Command> {
        self.record.head = Some(self.head.clone());
        self.pushed_at = Some(now);
        self.reached = self.reached.max(DeliveryStep::Pushed);
        let mut out = vec![Command::Say(Said::Pushed), self.save(now)];
        if self.cfg.pr {
            self.phase = Phase::Opening;
            let ev = &self.record.evidence;
            out.push(Command::OpenPr {
                title: ev.title.clone(),
                body: ev.body.clone(),
                // Work the reviewer did not approve goes up as a draft.
                draft: self.reason == Some(ExitReason::ReviewRejected),
                known: self.record.pr_number.zip(self.record.pr_url.clone()),
            });
        } else {
            out.extend(self.after_pr(now));
        }
        out
    }

    fn refused(&mut self, output: &str, now: Timestamp) -> Vec<Command> {
        let secrets = &self.cfg.secrets;
        let transient = super::push_failure_is_transient(output);
        if transient && let Some(wait) = self.cfg.push_retry_waits.get(self.attempt).copied() {
            self.attempt += 1;
            self.phase = Phase::PushWait;
            let line = super::clean(output.lines().last().unwrap_or_default(), secrets, 200);
            return vec![
                Command::Say(Said::PushRetry { line, wait }),
                Command::Wait {
                    until: now.checked_add(wait).unwrap_or(now),
                    countdown: None,
                },
            ];
        }
        let (remote, branch) = (&self.record.remote, &self.record.branch);
        let text = super::push_feedback(remote, branch, output, secrets);
        self.record.exit_reason = Some(ExitReason::PushRejected);
        self.record.feedback = Some(text.clone());
        let shown = super::clean(output, secrets, super::MAX_HOOK_OUTPUT_CHARS);
        let mut out = vec![Command::Say(Said::PushRejected(shown))];
        // The network, not the work: nothing for the agent to fix.
        let outcome = if self.cfg.source == Source::Run && !transient {
            Delivered::Feedback {
                round: Round::Push,
                text,
                otherwise: ExitReason::PushRejected,
            }
        } else {
            Delivered::Final(ExitReason::PushRejected)
        };
        out.extend(self.finish(outcome, now));
        out
    }

    fn pr_open(&mut self, number: u64, url: String, created: bool, now: Timestamp) -> Vec<Command> {
        self.record.pr_number = Some(number);
        self.record.pr_url = Some(url.clone());
        self.reached = DeliveryStep::PrOpened;
        let mut out = vec![Command::Say(Said::PrOpened)];
        if created {
            for issue in &self.record.evidence.closes {
                out.push(Command::Comment {
                    issue: *issue,
                    text: super::issue_comment(&url, number),
                });
            }
        }
        out.push(self.save(now));
        out.extend(self.after_pr(now));
        out
    }

    /// After the push (and the pull request): a rejected review stops here; else the
    /// checks are waited for (CI_WAIT) or the delivery is over.
    fn after_pr(&mut self, now: Timestamp) -> Vec<Command> {
        // Not approved by the reviewer: pushed (and a draft opened) for the user to look at,
        // never waited for nor merged.
        if self.reason == Some(ExitReason::ReviewRejected) {
            self.record.exit_reason = Some(ExitReason::ReviewRejected);
            return self.finish(Delivered::Final(ExitReason::ReviewRejected), now);
        }
        if self.cfg.ci.is_none() {
            self.record.exit_reason = Some(ExitReason::Delivered);
            return self.finish(Delivered::Final(ExitReason::Delivered), now);
        }
        self.record.checks = "pending".into();
        let mut out = vec![self.save(now)];
        // A run shows each step; `hank deliver` and the fleet show the verdict.
        if self.cfg.source == Source::Run {
            out.push(Command::Tell);
        }
        out.push(Command::Say(Said::WaitingForChecks));
        out.extend(self.look());
        out
    }

    fn look(&mut self) -> Vec<Command> {
        self.phase = Phase::Checking;
        vec![Command::LookChecks {
            head: self.head.clone(),
        }]
    }

    fn checks(&mut self, checks: &[Check], now: Timestamp) -> Vec<Command> {
        let (Some(limits), Some(pushed_at)) = (self.cfg.ci, self.pushed_at) else {
            return self.finish(Delivered::Final(ExitReason::CiTimeout), now);
        };
        match super::ci_verdict(checks, pushed_at, now, limits) {
            CiVerdict::Wait { next } => {
                self.phase = Phase::CiWait;
                let limit = if checks.is_empty() {
                    limits.appear
                } else {
                    limits.total
                };
                vec![Command::Wait {
                    until: next,
                    countdown: Some(Countdown {
                        due: pushed_at.checked_add(limit).unwrap_or(now),
                        pending: pending_names(checks),
                    }),
                }]
            }
            v @ CiVerdict::Failed { .. } => {
                let mut failed: Vec<Check> = Vec::new();
                for c in checks.iter().filter(|c| c.state == CheckState::Failed) {
                    if !failed.iter().any(|f| f.name == c.name) {
                        failed.push(c.clone());
                    }
                }
                self.verdict = Some(v);
                self.phase = Phase::Logs;
                vec![Command::FetchLogs { failed }]
            }
            v => self.judge(v, &[], now),
        }
    }

    /// The verdict in the record, and what it means: green (then reviews, auto-merge), red
    /// (feedback), no CI, a timeout.
    fn judge(
        &mut self,
        verdict: CiVerdict,
        logs: &[(String, Option<String>)],
        now: Timestamp,
    ) -> Vec<Command> {
        let r = &mut self.record;
        r.exit_reason = super::exit_of(&verdict);
        let mut out = vec![];
        let outcome = match verdict {
            CiVerdict::Green => {
                r.checks = "green".into();
                out.push(Command::Say(Said::Verdict));
                // `hank deliver` arms auto-merge first and keeps review requests for the
                // next run; a run hands them to its agent before anything merges.
                if self.cfg.source == Source::Deliver {
                    out.extend(self.merge_or_finish(now));
                    return out;
                }
                if self.cfg.review_loop && r.pr_number.is_some() {
                    self.phase = Phase::Reviewing;
                    out.push(Command::ReadReviews);
                    return out;
                }
                out.extend(self.merge_or_finish(now));
                return out;
            }
            CiVerdict::Failed { names } => {
                r.checks = "failed".into();
                r.check_names = names;
                let text = super::ci_feedback(&self.head, logs, &self.cfg.secrets);
                r.feedback = Some(text.clone());
                Delivered::Feedback {
                    round: Round::Ci,
                    text,
                    otherwise: ExitReason::CiFailed,
                }
            }
            CiVerdict::Missing => {
                r.checks = "missing".into();
                Delivered::Final(ExitReason::CiMissing)
            }
            CiVerdict::TimedOut { pending } => {
                r.checks = "timed_out".into();
                r.check_names = pending;
                Delivered::Final(ExitReason::CiTimeout)
            }
            CiVerdict::Wait { .. } => Delivered::Final(ExitReason::CiTimeout),
        };
        out.push(Command::Say(Said::Verdict));
        out.extend(self.finish(outcome, now));
        out
    }

    fn reviewed(
        &mut self,
        reviews: &[Review],
        comments: &[ReviewComment],
        now: Timestamp,
    ) -> Vec<Command> {
        let seen = self.record.reviews_seen;
        let asks = super::review_feedback(reviews, comments, seen, &self.cfg.secrets);
        self.record.reviews_seen = seen.max(super::last_review_id(reviews, comments));
        if let Some(text) = asks {
            self.record.feedback = Some(text.clone());
            let mut out = vec![Command::Say(Said::ReviewAsked)];
            if self.cfg.source == Source::Deliver {
                out.extend(self.finish(Delivered::Final(ExitReason::Delivered), now));
                return out;
            }
            out.extend(self.finish(
                Delivered::Feedback {
                    round: Round::Review,
                    text,
                    otherwise: ExitReason::Delivered,
                },
                now,
            ));
            return out;
        }
        if self.cfg.source == Source::Deliver {
            return self.finish(Delivered::Final(ExitReason::Delivered), now);
        }
        self.merge_or_finish(now)
    }

    fn merge_or_finish(&mut self, now: Timestamp) -> Vec<Command> {
        if self.cfg.auto_merge && self.record.pr_number.is_some() {
            self.phase = Phase::Merging;
            return vec![Command::ArmAutoMerge];
        }
        self.reviews_or_finish(now)
    }

    /// After auto-merge: `hank deliver` reads the reviews now (`REVIEW_LOOP`); a run read
    /// them before.
    fn reviews_or_finish(&mut self, now: Timestamp) -> Vec<Command> {
        if self.cfg.source == Source::Deliver
            && self.cfg.review_loop
            && self.record.pr_number.is_some()
            && self.phase != Phase::Reviewing
        {
            self.phase = Phase::Reviewing;
            return vec![Command::ReadReviews];
        }
        self.finish(Delivered::Final(ExitReason::Delivered), now)
    }

    /// A forge step failed: `forge_failed` with the forge's own error; the record keeps the
    /// step reached, for `hank deliver`.
    fn forge_failed(&mut self, phase: Phase, error: &str, now: Timestamp) -> Vec<Command> {
        let what = match phase {
            Phase::Opening => "the pull request could not be opened",
            Phase::Checking | Phase::Logs | Phase::CiWait => "the checks could not be read",
            Phase::Reviewing => "the reviews could not be read",
            _ => return Vec::new(),
        };
        self.record.exit_reason = Some(ExitReason::ForgeFailed);
        self.record.error = Some(format!("{what}: {}", crate::sanitize::line(error)));
        let mut out = vec![Command::Say(Said::ForgeFailed)];
        out.extend(self.finish(Delivered::Final(ExitReason::ForgeFailed), now));
        out
    }

    /// The record stamped `now`, to be saved.
    fn save(&mut self, now: Timestamp) -> Command {
        self.record.schema_version = DELIVERY_RECORD_SCHEMA;
        self.record.at = Some(now);
        if self.phase != Phase::Done {
            self.record.step = self.reached;
        }
        Command::Save
    }

    /// The end: the step the record is left at (a round handed back to the agent or a final
    /// verdict finishes it; a stop that leaves the work unjudged keeps it open for `hank
    /// deliver`), saved and told.
    fn finish(&mut self, outcome: Delivered, now: Timestamp) -> Vec<Command> {
        self.phase = Phase::Done;
        self.record.step = match &outcome {
            Delivered::Final(r) => step_after(Some(*r), self.reached),
            Delivered::Feedback { .. } => DeliveryStep::Finished,
        };
        vec![self.save(now), Command::Tell, Command::Done(outcome)]
    }
}

/// How many distinct checks are pending.
fn pending_names(checks: &[Check]) -> u32 {
    let mut names: Vec<&str> = checks
        .iter()
        .filter(|c| c.state == CheckState::Pending)
        .map(|c| c.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    u32::try_from(names.len()).unwrap_or(u32::MAX)
}

/// Events fed to a machine, each with its time.
pub type Recording = [(Timestamp, Event)];

/// The record a machine from `record` reaches through `events` (each at its time): what a
/// recorded delivery replays to.
#[must_use]
pub fn replay(cfg: Config, record: Delivery, events: &Recording) -> Delivery {
    let mut m = Machine::new(cfg, record);
    for (at, e) in events {
        m.on(e.clone(), *at);
    }
    m.record
}

#[cfg(test)]
mod tests;
