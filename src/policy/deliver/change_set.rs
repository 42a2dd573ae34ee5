//! The delivery of a change set (issue 51): one pull request per repository a change touches,
//! opened in dependency order, linked to each other, delivered only when every one is green.
//! **\[pure\]**
//!
//! The record ([`ChangeSet`], re-exported by `store::schema`, saved as
//! `.hank/change-set.json`) is the machine's state: every step is a [`Command::Save`], so a
//! set that stopped anywhere is resumed from it (`hank deliver`). The machine
//! ([`Machine::on`]) takes what the host saw ([`Event`]) and says what to do next
//! ([`Command`]); the host (`deliver::change_set`) runs git and the forge.
//!
//! Its order, for the repositories in [`crate::policy::workspace::delivery_order`]:
//!
//! 0. `Begin`: the head of each repository's branch is read; a repository whose head is not
//!    the commit it pushed is pushed again (its pull request kept), its checks forgotten;
//! 1. per repository in order: the scan of what its push sends (a secret stops the set), the
//!    push of its branch as it is, its pull request (a known one is not opened again), whose
//!    body is its own records and the [`change_set_line`] with the references known so far;
//! 2. once all are open: each body that does not yet link every other pull request is edited
//!    to (`o/api#12, o/web#34`); one already linked is not edited again;
//! 3. the CI gate (`CI_WAIT`): the checks of exactly each pushed commit, fail closed
//!    ([`super::ci_verdict`]); a green one is not looked at again while its commit stays;
//!    every repository is waited for until its verdict is final;
//! 4. the set is `delivered` only when every pull request is green; a red one keeps its
//!    findings (the failed checks' names and log tails, [`super::ci_feedback`]) for the
//!    tasks that changed that repository ([`ChangeSetRepo::tasks`]).
//!
//! A forge failure, a refused push or a secret stops the set at that step, the step and the
//! repository named in [`ChangeSet::stopped_at`]; nothing done before it is done again.
//!
//! Why not the single delivery's machine per repository: its order is one repository's end
//! to end (push, pull request, CI wait), while a set interleaves its steps across the
//! repositories (every pull request open before any body is linked, every body linked before
//! the gate), and its record is the set's.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{Check, CheckState, CiLimits, CiVerdict};
use crate::exit::ExitReason;
use crate::policy::workspace::change_set_line;

/// The schema of `.hank/change-set.json`.
pub const CHANGE_SET_SCHEMA: u32 = 1;

/// Where a change set is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetState {
    /// Under way (or stopped by a crash: resumed as it is).
    #[default]
    Delivering,
    /// Every pull request is open and green.
    Delivered,
    /// A check failed in some repository: its findings are in its entry.
    Red,
    /// Stopped at a step ([`ChangeSet::stopped_at`]); `hank deliver` resumes it.
    Stopped,
}

/// A change set: the repositories one change touches, each with its branch and pull request.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ChangeSet {
    /// [`CHANGE_SET_SCHEMA`].
    pub schema_version: u32,
    /// When it was last written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// The branch delivered in every repository (the fleet's integration branch).
    pub into: String,
    /// Made by a fleet (whose fleet is finished when the set is delivered).
    pub fleet: bool,
    pub state: SetState,
    /// How it ended (`delivered`, `ci_failed`, `forge_failed`, …), once it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_reason: Option<ExitReason>,
    /// The step and repository it stopped at (`opening the pull request of web`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
    /// What went wrong there (the forge's error, the push's output, the scan's refusal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Fix rounds after a red check (the tasks ran again with the findings).
    #[serde(skip_serializing_if = "is_zero")]
    pub round: u32,
    /// In delivery order.
    pub repos: Vec<ChangeSetRepo>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One repository of a change set.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ChangeSetRepo {
    /// The workspace's name for it.
    pub name: String,
    /// Its checkout.
    pub dir: String,
    /// The forge repository the workspace names (`github.com/me/api`); else its `origin`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forge: Option<String>,
    pub remote: String,
    /// The branch delivered and the branch its pull request targets.
    pub branch: String,
    pub base: String,
    /// The tasks that changed it (where a red check's findings go).
    pub tasks: Vec<String>,
    /// Its pull request's title and its own records (the body without the set's line).
    pub title: String,
    pub body: String,
    /// The commit pushed (absent before its push).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr_number: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr_url: Option<String>,
    /// How the other bodies name it (`o/api#12`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr_ref: Option<String>,
    /// Its body links every other pull request of the set.
    pub linked: bool,
    /// `not_waited`, `pending`, `green`, `failed`, `missing`, `timed_out`.
    pub checks: String,
    /// The failing (or, at a timeout, still pending) checks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub check_names: Vec<String>,
    /// A red check's findings for [`Self::tasks`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<String>,
}

impl ChangeSetRepo {
    fn decided(&self) -> bool {
        matches!(
            self.checks.as_str(),
            "green" | "failed" | "missing" | "timed_out"
        )
    }
}

impl ChangeSet {
    /// Not delivered: `hank deliver` resumes it.
    #[must_use]
    pub fn resumable(&self) -> bool {
        self.state != SetState::Delivered
    }

    /// The repositories whose checks failed.
    #[must_use]
    pub fn red(&self) -> Vec<&ChangeSetRepo> {
        self.repos.iter().filter(|r| r.checks == "failed").collect()
    }

    /// What a fix round sends each task (`MAX_CI_ROUNDS` bounds the rounds): for every task
    /// that changed a repository whose checks failed, in the order the tasks are named, the
    /// findings of each such repository, headed by its name and pull request (a task that
    /// changed two red repositories gets both).
    #[must_use]
    pub fn findings_by_task(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for r in self.red() {
            let Some(findings) = &r.findings else {
                continue;
            };
            let text = format!(
                "The pull request {} of repository {} (part of a change set across the workspace) failed its checks.\n{findings}",
                r.pr_ref.as_deref().unwrap_or("(not opened)"),
                r.name
            );
            for task in &r.tasks {
                match out.iter_mut().find(|(t, _)| t == task) {
                    Some((_, all)) => {
                        all.push_str("\n\n");
                        all.push_str(&text);
                    }
                    None => out.push((task.clone(), text.clone())),
                }
            }
        }
        out
    }

    /// A fix round is due: the set is red and fewer than `max_rounds` rounds were run.
    #[must_use]
    pub fn fix_round_due(&self, max_rounds: u32) -> bool {
        self.state == SetState::Red && self.round < max_rounds
    }

    /// One line per repository: its pull request and its checks.
    #[must_use]
    pub fn lines(&self) -> Vec<String> {
        self.repos
            .iter()
            .map(|r| {
                let pr = match (&r.pr_ref, &r.pr_url) {
                    (Some(reference), Some(url)) => format!("{reference} {url}"),
                    _ => "no pull request yet".to_string(),
                };
                let names = if r.check_names.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", r.check_names.join(", "))
                };
                format!("{}: {pr}, checks {}{names}", r.name, r.checks)
            })
            .collect()
    }

    /// Each repository's name with its pull request's reference once opened.
    fn refs(&self) -> Vec<(String, Option<String>)> {
        self.repos
            .iter()
            .map(|r| (r.name.clone(), r.pr_ref.clone()))
            .collect()
    }

    /// The full body of repository `i`: its own records, then the set's line.
    #[must_use]
    pub fn body_of(&self, i: usize) -> String {
        let Some(r) = self.repos.get(i) else {
            return String::new();
        };
        // Its own pull request, while being opened, is this one.
        let mut refs = self.refs();
        if let Some((name, own)) = refs.get_mut(i) {
            own.get_or_insert_with(|| format!("{name} (this pull request)"));
        }
        let line = change_set_line(&r.name, &refs);
        super::clean(&format!("{line}\n\n{}", r.body), &[], super::MAX_BODY_CHARS)
    }

    fn all_refs_known(&self) -> bool {
        self.repos.iter().all(|r| r.pr_ref.is_some())
    }
}

/// What a change set is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `CI_WAIT`: the verdict's limits.
    pub ci: Option<CiLimits>,
    /// The secret values redacted from everything that leaves hank.
    pub secrets: Vec<String>,
}

/// What happened, as the host saw it; `repo` is the index in [`ChangeSet::repos`].
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The set (a new one, or a stored one to resume) begins.
    Begin,
    /// The head of repository `repo`'s branch.
    Head {
        repo: usize,
        sha: String,
    },
    /// What its push would send was scanned: the refusal when something looks secret.
    Scanned {
        repo: usize,
        refusal: Option<String>,
    },
    Pushed {
        repo: usize,
    },
    /// The remote or a hook refused the push: its output.
    PushRefused {
        repo: usize,
        output: String,
    },
    /// Its pull request is open; `reference` is how the others name it.
    PrOpen {
        repo: usize,
        number: u64,
        url: String,
        reference: String,
    },
    /// Its body was edited.
    Edited {
        repo: usize,
    },
    /// One look at the checks of its pushed commit.
    Checks {
        repo: usize,
        checks: Vec<Check>,
    },
    /// Its failing checks' log tails (raw).
    Logs {
        repo: usize,
        logs: Vec<(String, Option<String>)>,
    },
    /// A wait ended (`interrupted`: a signal).
    Woke {
        interrupted: bool,
    },
    /// The forge step under way in `repo` failed.
    ForgeFailed {
        repo: usize,
        error: String,
    },
}

/// What the host does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Write the record.
    Save,
    Say(Said),
    /// Read the head of its branch.
    ReadHead {
        repo: usize,
    },
    /// Scan what pushing `head` sends.
    Scan {
        repo: usize,
        head: String,
    },
    /// Push its branch as it is.
    Push {
        repo: usize,
    },
    /// Its pull request: the known one (`known`), else a new one.
    OpenPr {
        repo: usize,
        title: String,
        body: String,
        known: Option<(u64, String)>,
    },
    /// Replace the body of its pull request.
    EditBody {
        repo: usize,
        number: u64,
        body: String,
    },
    LookChecks {
        repo: usize,
        head: String,
    },
    FetchLogs {
        repo: usize,
        failed: Vec<Check>,
    },
    /// Wait until `until` (`due`: when the last verdict is due, for the countdown).
    Wait {
        until: Timestamp,
        due: Timestamp,
    },
    /// Over: the record says how.
    Done(SetState),
}

/// What a change set tells people; the record says the rest.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    Pushed {
        repo: usize,
    },
    Opened {
        repo: usize,
    },
    Linked {
        repo: usize,
    },
    /// The gate begins: the checks of every pushed commit are waited for.
    Waiting,
    /// Repository `repo`'s verdict (its `checks`).
    Verdict {
        repo: usize,
    },
    /// The end (the record's state).
    Ended,
}

/// Where the machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    #[default]
    Idle,
    Heads(usize),
    Scanning(usize),
    Pushing(usize),
    Opening(usize),
    Editing(usize),
    Looking(usize),
    Logs(usize),
    Waiting,
    Done,
}

/// The change set's machine; its state is [`Machine::record`].
#[derive(Debug, Clone)]
pub struct Machine {
    pub record: ChangeSet,
    cfg: Config,
    phase: Phase,
    /// The head of each repository's branch now.
    heads: Vec<Option<String>>,
    /// When each repository's wait began (its push, or the gate's start): the verdict's
    /// clock.
    since: Vec<Option<Timestamp>>,
    /// Looked at in this round of looks.
    looked: Vec<bool>,
    /// The failing checks of a repository whose logs are being fetched.
    failed: Vec<String>,
}

impl Machine {
    /// A machine from `record` (a new one, or a stored one to resume).
    #[must_use]
    pub fn new(cfg: Config, record: ChangeSet) -> Self {
        let n = record.repos.len();
        Self {
            record,
            cfg,
            phase: Phase::Idle,
            heads: vec![None; n],
            since: vec![None; n],
            looked: vec![false; n],
            failed: Vec::new(),
        }
    }

    /// Whether the set is over (for this run).
    #[must_use]
    pub fn done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The next commands after `event` at `now`.
    pub fn on(&mut self, event: Event, now: Timestamp) -> Vec<Command> {
        match (self.phase, event) {
            (Phase::Idle | Phase::Done, Event::Begin) => self.begin(now),
            (Phase::Heads(i), Event::Head { repo, sha }) if i == repo => {
                self.head_read(i, sha);
                if i + 1 < self.record.repos.len() {
                    self.phase = Phase::Heads(i + 1);
                    return vec![Command::ReadHead { repo: i + 1 }];
                }
                self.advance(now)
            }
            (Phase::Scanning(i), Event::Scanned { repo, refusal }) if i == repo => match refusal {
                Some(text) => self.stop(
                    i,
                    "scanning what the push sends",
                    ExitReason::SecretsInCommits,
                    &text,
                    now,
                ),
                None => {
                    self.phase = Phase::Pushing(i);
                    vec![Command::Push { repo: i }]
                }
            },
            (Phase::Pushing(i), Event::Pushed { repo }) if i == repo => {
                let r = &mut self.record.repos[i];
                r.pushed.clone_from(&self.heads[i]);
                r.checks = "not_waited".into();
                r.check_names.clear();
                r.findings = None;
                self.since[i] = Some(now);
                let mut out = vec![Command::Say(Said::Pushed { repo: i }), self.save(now)];
                out.extend(self.advance(now));
                out
            }
            (Phase::Pushing(i), Event::PushRefused { repo, output }) if i == repo => {
                let shown = super::clean(&output, &self.cfg.secrets, super::MAX_HOOK_OUTPUT_CHARS);
                self.stop(i, "pushing", ExitReason::PushRejected, &shown, now)
            }
            (
                Phase::Opening(i),
                Event::PrOpen {
                    repo,
                    number,
                    url,
                    reference,
                },
            ) if i == repo => {
                let r = &mut self.record.repos[i];
                r.pr_number = Some(number);
                r.pr_url = Some(url);
                r.pr_ref = Some(reference);
                // Opened with every other reference known: linked already.
                let complete = self.record.all_refs_known();
                let r = &mut self.record.repos[i];
                if complete && !r.linked {
                    r.linked = true;
                }
                let mut out = vec![Command::Say(Said::Opened { repo: i }), self.save(now)];
                out.extend(self.advance(now));
                out
            }
            (Phase::Editing(i), Event::Edited { repo }) if i == repo => {
                self.record.repos[i].linked = true;
                let mut out = vec![Command::Say(Said::Linked { repo: i }), self.save(now)];
                out.extend(self.advance(now));
                out
            }
            (Phase::Looking(i), Event::Checks { repo, checks }) if i == repo => {
                self.checks(i, &checks, now)
            }
            (Phase::Logs(i), Event::Logs { repo, logs }) if i == repo => {
                let head = self.record.repos[i].pushed.clone().unwrap_or_default();
                let findings = super::ci_feedback(&head, &logs, &self.cfg.secrets);
                let r = &mut self.record.repos[i];
                r.checks = "failed".into();
                r.check_names = std::mem::take(&mut self.failed);
                r.findings = Some(findings);
                let mut out = vec![Command::Say(Said::Verdict { repo: i }), self.save(now)];
                out.extend(self.next_look(now));
                out
            }
            (Phase::Waiting, Event::Woke { interrupted: false }) => {
                self.looked.iter_mut().for_each(|l| *l = false);
                self.next_look(now)
            }
            (Phase::Waiting, Event::Woke { interrupted: true }) => {
                self.record.exit_reason = Some(ExitReason::Interrupted);
                self.record.stopped_at = Some("waiting for the checks".into());
                self.record.error = Some("interrupted".into());
                self.finish(SetState::Stopped, now)
            }
            (
                Phase::Opening(i) | Phase::Editing(i) | Phase::Looking(i) | Phase::Logs(i),
                Event::ForgeFailed { repo, error },
            ) if i == repo => {
                let step = match self.phase {
                    Phase::Opening(_) => "opening the pull request",
                    Phase::Editing(_) => "linking the pull requests",
                    _ => "reading the checks",
                };
                let error = crate::sanitize::line(&error);
                self.stop(i, step, ExitReason::ForgeFailed, &error, now)
            }
            // An event the machine does not wait for changes nothing.
            _ => Vec::new(),
        }
    }

    fn begin(&mut self, now: Timestamp) -> Vec<Command> {
        let r = &mut self.record;
        r.state = SetState::Delivering;
        r.exit_reason = None;
        r.stopped_at = None;
        r.error = None;
        // A verdict other than green is asked again (a check run again may have passed).
        for repo in &mut r.repos {
            if repo.checks != "green" {
                repo.checks = "not_waited".into();
                repo.check_names.clear();
            }
        }
        let n = r.repos.len();
        self.heads = vec![None; n];
        self.since = vec![None; n];
        self.looked = vec![false; n];
        if n == 0 {
            return self.finish(SetState::Delivered, now);
        }
        self.phase = Phase::Heads(0);
        vec![self.save(now), Command::ReadHead { repo: 0 }]
    }

    /// The head now: a commit other than the one pushed is pushed again, and its checks
    /// (and findings) forgotten.
    fn head_read(&mut self, i: usize, sha: String) {
        let r = &mut self.record.repos[i];
        if r.pushed.as_deref() != Some(sha.as_str()) {
            r.checks = "not_waited".into();
            r.check_names.clear();
        }
        self.heads[i] = Some(sha);
    }

    /// The next step from the record: a push, a pull request, a body to link, the gate.
    fn advance(&mut self, now: Timestamp) -> Vec<Command> {
        let repos = &self.record.repos;
        // Per repository in order: its push, then its pull request.
        let unpushed = |i: usize| repos[i].pushed != self.heads[i];
        let next = (0..repos.len()).find(|&i| unpushed(i) || repos[i].pr_number.is_none());
        if let Some(i) = next.filter(|&i| unpushed(i)) {
            self.phase = Phase::Scanning(i);
            let head = self.heads[i].clone().unwrap_or_default();
            return vec![Command::Scan { repo: i, head }];
        }
        if let Some(i) = next {
            self.phase = Phase::Opening(i);
            let r = &repos[i];
            return vec![Command::OpenPr {
                repo: i,
                title: r.title.clone(),
                body: self.record.body_of(i),
                known: None,
            }];
        }
        if let Some(i) = repos.iter().position(|r| !r.linked) {
            self.phase = Phase::Editing(i);
            return vec![Command::EditBody {
                repo: i,
                number: repos[i].pr_number.unwrap_or_default(),
                body: self.record.body_of(i),
            }];
        }
        if self.cfg.ci.is_none() {
            self.record.exit_reason = Some(ExitReason::Delivered);
            return self.finish(SetState::Delivered, now);
        }
        for (i, r) in self.record.repos.iter_mut().enumerate() {
            if !r.decided() {
                r.checks = "pending".into();
                self.since[i].get_or_insert(now);
            }
        }
        let mut out = vec![self.save(now), Command::Say(Said::Waiting)];
        out.extend(self.next_look(now));
        out
    }

    /// The next repository to look at in this round of looks; a wait when every undecided
    /// one was looked at; the verdict when none is undecided.
    fn next_look(&mut self, now: Timestamp) -> Vec<Command> {
        let repos = &self.record.repos;
        let undecided: Vec<usize> = (0..repos.len()).filter(|&i| !repos[i].decided()).collect();
        if undecided.is_empty() {
            return self.verdict(now);
        }
        if let Some(&i) = undecided.iter().find(|&&i| !self.looked[i]) {
            self.phase = Phase::Looking(i);
            let head = repos[i].pushed.clone().unwrap_or_default();
            return vec![Command::LookChecks { repo: i, head }];
        }
        let Some(limits) = self.cfg.ci else {
            return self.verdict(now);
        };
        let due = undecided
            .iter()
            .filter_map(|&i| self.since[i])
            .max()
            .and_then(|s| s.checked_add(limits.total).ok())
            .unwrap_or(now);
        self.phase = Phase::Waiting;
        vec![Command::Wait {
            until: now.checked_add(limits.poll).unwrap_or(now),
            due,
        }]
    }

    fn checks(&mut self, i: usize, checks: &[Check], now: Timestamp) -> Vec<Command> {
        self.looked[i] = true;
        let (Some(limits), Some(since)) = (self.cfg.ci, self.since[i]) else {
            return self.next_look(now);
        };
        let r = &mut self.record.repos[i];
        match super::ci_verdict(checks, since, now, limits) {
            CiVerdict::Wait { .. } => return self.next_look(now),
            CiVerdict::Failed { names } => {
                let mut failed: Vec<Check> = Vec::new();
                for c in checks.iter().filter(|c| c.state == CheckState::Failed) {
                    if !failed.iter().any(|f| f.name == c.name) {
                        failed.push(c.clone());
                    }
                }
                self.failed = names;
                self.phase = Phase::Logs(i);
                return vec![Command::FetchLogs { repo: i, failed }];
            }
            CiVerdict::Green => {
                r.checks = "green".into();
                r.check_names.clear();
                r.findings = None;
            }
            CiVerdict::Missing => r.checks = "missing".into(),
            CiVerdict::TimedOut { pending } => {
                r.checks = "timed_out".into();
                r.check_names = pending;
            }
        }
        let mut out = vec![Command::Say(Said::Verdict { repo: i }), self.save(now)];
        out.extend(self.next_look(now));
        out
    }

    /// Every verdict is in: delivered only when all are green; else the worst one.
    fn verdict(&mut self, now: Timestamp) -> Vec<Command> {
        let has = |c: &str| self.record.repos.iter().any(|r| r.checks == c);
        let (state, reason) = if has("failed") {
            (SetState::Red, ExitReason::CiFailed)
        } else if has("missing") {
            (SetState::Stopped, ExitReason::CiMissing)
        } else if has("timed_out") {
            (SetState::Stopped, ExitReason::CiTimeout)
        } else {
            (SetState::Delivered, ExitReason::Delivered)
        };
        if state == SetState::Stopped {
            let which: Vec<&str> = self
                .record
                .repos
                .iter()
                .filter(|r| r.checks != "green")
                .map(|r| r.name.as_str())
                .collect();
            self.record.stopped_at = Some(format!("the checks of {}", which.join(", ")));
        }
        self.record.exit_reason = Some(reason);
        self.finish(state, now)
    }

    /// Stops the set at `step` in repository `i` for `reason`, `error` said.
    fn stop(
        &mut self,
        i: usize,
        step: &str,
        reason: ExitReason,
        error: &str,
        now: Timestamp,
    ) -> Vec<Command> {
        let name = self.record.repos[i].name.clone();
        self.record.stopped_at = Some(format!("{step} of {name}"));
        self.record.error = Some(super::clean(
            error,
            &self.cfg.secrets,
            super::MAX_HOOK_OUTPUT_CHARS,
        ));
        self.record.exit_reason = Some(reason);
        self.finish(SetState::Stopped, now)
    }

    fn save(&mut self, now: Timestamp) -> Command {
        self.record.schema_version = CHANGE_SET_SCHEMA;
        self.record.at = Some(now);
        Command::Save
    }

    fn finish(&mut self, state: SetState, now: Timestamp) -> Vec<Command> {
        self.phase = Phase::Done;
        self.record.state = state;
        vec![
            self.save(now),
            Command::Say(Said::Ended),
            Command::Done(state),
        ]
    }
}

#[cfg(test)]
mod tests;
