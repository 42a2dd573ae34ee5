//! Delivery inside `hank run` (`DELIVER=branch|pr`): the loop works on the delivery branch
//! from its start ([`InRun::start`]); at each verified completion the state machine asks for
//! a delivery ([`crate::policy::run::Step::Deliver`]) and [`InRun::deliver`] commits what the
//! agent left (files that look like secrets never), pushes (transient network failures
//! retried), opens the pull request once (`pr`), waits for the checks of exactly the pushed
//! commit (`CI_WAIT`), and says how it ended as a [`Delivered`]: final, or feedback for the
//! next loop (a pre-push hook's output, the failing checks, review requests). The state
//! machine counts the rounds; every step is recorded (`.hank/delivery.json`, through the
//! caller's `record`: the `delivery` event and status.json).
//!
//! Its clock, its waits (the CI wait, a push's retry waits) and its records are the
//! [`Host`]'s — inside `hank run` the engine's effects, so the engine's tests run a delivery
//! round with a 30-minute CI wait at once —; its git is a [`DeliverGit`] ([`RealGit`]:
//! through `src/git/`), its forge a [`Forge`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{CiWaitSettings, Push};
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::forge::{self, Forge, NewPullRequest, PullRequest};
use crate::policy::deliver::{self as rules, CiVerdict};
use crate::policy::run::{DeliverRounds, Delivered, Round};
use crate::settings::{DeliverMode, Settings};
use crate::store::schema::{DELIVERY_RECORD_SCHEMA, Delivery, DeliveryRecord, DeliveryStep};

/// Waits between attempts of a push that failed for a transient reason (the network).
const PUSH_RETRY_WAITS: [Duration; 2] = [Duration::from_secs(5), Duration::from_secs(15)];

/// A run's delivery: where it goes and what it has done so far.
pub struct InRun {
    mode: DeliverMode,
    branch: String,
    base: String,
    remote: String,
    forge: Option<Box<dyn Forge>>,
    wait: Option<CiWaitSettings>,
    auto_merge: bool,
    review_loop: bool,
    /// DELIVER_ALLOW_FILES: paths the scan of the pushed commits lets through.
    allow_files: Vec<String>,
    pr: Option<PullRequest>,
    reviews_seen: u64,
    round: u64,
    /// Delivery's git (commit, head, the scan, the push).
    git: Arc<dyn DeliverGit>,
    last: Option<Delivery>,
    warnings: Vec<String>,
    /// The delivery record of the round under way (per-user folder, [`super::record`]).
    rec: DeliveryRecord,
}

/// What the driver of a delivery provides: its clock and waits ([`super::Waiter`]: the
/// countdown told about once a second during the CI wait, a `hank ctl stop` or a signal
/// ending it `interrupted`), where each step is told (the `delivery` event, status.json) and
/// where the records are written.
pub trait Host: super::Waiter {
    /// A step of the delivery happened (pushed, checks pending, the verdict).
    ///
    /// # Errors
    /// The record cannot be written.
    fn record(&mut self, d: &Delivery) -> Result<()>;
    /// Writes `bytes` to `path` atomically, 0600 (`.hank/delivery.json`).
    ///
    /// # Errors
    /// The file cannot be written.
    fn write_file(&mut self, path: &Path, bytes: &[u8]) -> Result<()>;
    /// Saves the delivery record of the project at `project` ([`super::record::save`]).
    ///
    /// # Errors
    /// The record cannot be written.
    fn save_record(&mut self, project: &Path, rec: &DeliveryRecord) -> Result<()>;
}

/// What a round reads and writes besides the host's records: the run's `events.jsonl` (the
/// evidence of the PR body), where `.hank/delivery.json` is, the secret values to redact.
#[derive(Debug, Clone, Default)]
pub struct RunRecords {
    pub events: String,
    pub delivery_file: PathBuf,
    pub secrets: Vec<String>,
}

/// Delivery's git: the commit of what the agent left, the commit pushed, the scan of what a
/// push sends, the push. [`RealGit`] runs them through `src/git/`; the engine's tests give a
/// scripted one.
pub trait DeliverGit: Send + Sync {
    /// [`super::commit_all`].
    ///
    /// # Errors
    /// As [`super::commit_all`].
    fn commit_all(&self, dir: &Path, branch: &str, message: &str) -> Result<super::Committed>;
    /// [`super::head`].
    ///
    /// # Errors
    /// As [`super::head`].
    fn head(&self, dir: &Path) -> Result<String>;
    /// The commits of `sha` the remote does not know, scanned for secrets
    /// ([`super::scan::known_on_remote`], [`super::scan::scan`]).
    ///
    /// # Errors
    /// git cannot run or cannot read the history.
    fn scan(
        &self,
        dir: &Path,
        sha: &str,
        to: &Place,
        allow: &[String],
    ) -> Result<super::scan::Scan>;
    /// [`super::push`].
    ///
    /// # Errors
    /// As [`super::push`].
    fn push(&self, dir: &Path, remote: &str, branch: &str) -> Result<Push>;
}

/// Where a delivery goes: the branch, the pull request's base, the remote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    pub branch: String,
    pub base: String,
    pub remote: String,
}

/// [`DeliverGit`] through `src/git/` (the delivery runner: the user's credentials, hooks
/// only when approved).
pub struct RealGit;

impl DeliverGit for RealGit {
    fn commit_all(&self, dir: &Path, branch: &str, message: &str) -> Result<super::Committed> {
        super::commit_all(dir, branch, message)
    }

    fn head(&self, dir: &Path) -> Result<String> {
        super::head(dir)
    }

    fn scan(
        &self,
        dir: &Path,
        sha: &str,
        to: &Place,
        allow: &[String],
    ) -> Result<super::scan::Scan> {
        let known = super::scan::known_on_remote(dir, &to.remote, &to.base, &to.branch)?;
        super::scan::scan(dir, sha, &known, allow)
    }

    fn push(&self, dir: &Path, remote: &str, branch: &str) -> Result<Push> {
        super::push(dir, remote, branch)
    }
}

/// How a step of a delivery ended, inside [`InRun::deliver`].
enum Pushed {
    Yes(String),
    No(Delivered),
}

impl InRun {
    /// `DELIVER=branch|pr` at the start of `hank run` (`None` with `none`): everything that
    /// can be refused is checked before the loop starts — a git repository, the remote
    /// (`DELIVER_REMOTE`), the base of the pull request, the forge — then the working tree is
    /// put on the delivery branch (`hank/<branch you are on>` or `DELIVER_BRANCH`), where the
    /// agent works.
    ///
    /// # Errors
    /// Not a repository, no such remote, no known base, no forge login, or git refused the
    /// switch (each message says how to fix it).
    pub fn start(s: &Settings) -> Result<Option<Self>> {
        let mode = s.deliver.value;
        if mode == DeliverMode::None {
            return Ok(None);
        }
        let dir = &s.project_dir;
        let start = super::current_branch(dir)?;
        let branch = rules::branch_for(s.deliver_branch.value.as_deref(), start.as_deref());
        let remote = s.deliver_remote.value.clone();
        let url = super::remote_url(dir, &remote)?;
        let explicit = s.deliver_base.value.as_deref();
        let base = match mode {
            DeliverMode::Pr => {
                super::base_branch(dir, explicit, start.as_deref(), &branch, &remote)?
            }
            _ => super::base_branch(dir, explicit, start.as_deref(), &branch, &remote)
                .unwrap_or_default(),
        };
        let wait = s.ci_wait.value.applies(mode).then_some(CiWaitSettings {
            appear: s.ci_appear_timeout.value,
            total: s.ci_timeout.value,
        });
        let forge = if mode == DeliverMode::Pr || wait.is_some() {
            Some(forge::detect(dir, &url, &forge::Env::from_process())?)
        } else {
            None
        };
        super::prepare_branch(dir, &branch)?;
        let place = Place {
            branch,
            base,
            remote,
        };
        Ok(Some(Self::of(s, place, forge, Arc::new(RealGit))))
    }

    /// The delivery of `s`'s `DELIVER` mode to `place` through `forge` and `git`, nothing
    /// checked nor switched ([`InRun::start`] does that); CI_WAIT decides whether the checks
    /// are waited for (only with a forge).
    #[must_use]
    pub fn of(
        s: &Settings,
        place: Place,
        forge: Option<Box<dyn Forge>>,
        git: Arc<dyn DeliverGit>,
    ) -> Self {
        let mode = s.deliver.value;
        let wait = s.ci_wait.value.applies(mode).then_some(CiWaitSettings {
            appear: s.ci_appear_timeout.value,
            total: s.ci_timeout.value,
        });
        Self {
            mode,
            branch: place.branch,
            base: place.base,
            remote: place.remote,
            forge,
            wait,
            auto_merge: s.auto_merge.value,
            review_loop: s.review_loop.value,
            allow_files: s.deliver_allow_files.value.clone().unwrap_or_default(),
            pr: None,
            reviews_seen: 0,
            round: 0,
            git,
            last: None,
            warnings: Vec::new(),
            rec: DeliveryRecord::default(),
        }
    }

    /// The rounds that go back to the agent: 2 rejected pushes
    /// ([`rules::MAX_PUSH_RETRIES`]), `MAX_CI_ROUNDS` red CI rounds, and as many review rounds
    /// with `REVIEW_LOOP` (none without).
    #[must_use]
    pub fn rounds(s: &Settings) -> DeliverRounds {
        DeliverRounds {
            push: rules::MAX_PUSH_RETRIES,
            ci: s.max_ci_rounds.value,
            review: if s.review_loop.value {
                s.max_ci_rounds.value
            } else {
                0
            },
        }
    }

    /// The delivery branch (where the loop works).
    #[must_use]
    pub fn branch(&self) -> &str {
        &self.branch
    }

    /// The last delivery's record (status.json `delivery`).
    #[must_use]
    pub fn last(&self) -> Option<&Delivery> {
        self.last.as_ref()
    }

    /// Warnings of the last delivery (a secret-looking file left out, a forge call that
    /// failed without stopping it), taken.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Delivers the verified completion `reason` of the run in `dir` (its records: `run`).
    /// `host` is the clock and the waits (a signal or a `hank ctl stop` ends a push retry wait
    /// or the CI wait with `interrupted`), records each step (pushed, checks pending, the
    /// verdict) and writes the records.
    ///
    /// # Errors
    /// git cannot run or refused the commit (a pre-commit hook), the forge cannot be asked.
    pub async fn deliver(
        &mut self,
        dir: &Path,
        run: &RunRecords,
        reason: ExitReason,
        host: &mut dyn Host,
    ) -> Result<Delivered> {
        let secrets = run.secrets.as_slice();
        self.round += 1;
        let mut d = Delivery {
            mode: self.mode.as_str().to_string(),
            branch: self.branch.clone(),
            base: self.base.clone(),
            remote: self.remote.clone(),
            checks: "not_waited".into(),
            round: self.round,
            pr_url: self.pr.as_ref().map(|p| p.url.clone()),
            pr_number: self.pr.as_ref().map(|p| p.number),
            ..Delivery::default()
        };
        self.begin_record(dir, run, reason, host)?;
        let sha = match self.commit_and_push(dir, secrets, host, &mut d).await? {
            Pushed::Yes(sha) => sha,
            Pushed::No(outcome) => {
                self.keep(run, &d, host)?;
                self.save_record(dir, &d, &outcome, self.rec.step, host)?;
                return Ok(outcome);
            }
        };
        let pushed_at = host.now();
        let mut reached = self.rec.step.max(DeliveryStep::Pushed);
        d.head = Some(sha.clone());
        // Kept open at the step reached until the round's verdict.
        let open = Delivered::Final(ExitReason::Interrupted);
        self.save_record(dir, &d, &open, reached, host)?;
        if self.mode == DeliverMode::Pr {
            // Work the reviewer did not approve goes up as a draft.
            let draft = reason == ExitReason::ReviewRejected;
            if let Err(e) = self.open_pr(&mut d, draft) {
                return self.forge_failed(
                    dir,
                    run,
                    host,
                    d,
                    reached,
                    "the pull request could not be opened",
                    &e,
                );
            }
            reached = DeliveryStep::PrOpened;
        }
        // Not approved by the reviewer: pushed (and a draft opened) for the user to look at,
        // never waited for nor merged; the run stops `review_rejected`.
        if reason == ExitReason::ReviewRejected {
            d.exit_reason = Some(reason);
            self.keep(run, &d, host)?;
            let outcome = Delivered::Final(reason);
            self.save_record(dir, &d, &outcome, reached, host)?;
            return Ok(outcome);
        }
        let (Some(w), Some(_)) = (self.wait, self.forge.as_ref()) else {
            d.exit_reason = Some(ExitReason::Delivered);
            self.keep(run, &d, host)?;
            let outcome = Delivered::Final(ExitReason::Delivered);
            self.save_record(dir, &d, &outcome, reached, host)?;
            return Ok(outcome);
        };
        d.checks = "pending".into();
        self.save_record(dir, &d, &open, reached, host)?;
        self.keep(run, &d, host)?;
        let waited = self.wait_ci(&sha, pushed_at, w, host).await;
        let (verdict, logs) = match waited {
            Ok(Some(v)) => v,
            Ok(None) => {
                d.exit_reason = Some(ExitReason::Interrupted);
                self.keep(run, &d, host)?;
                let outcome = Delivered::Final(ExitReason::Interrupted);
                self.save_record(dir, &d, &outcome, reached, host)?;
                return Ok(outcome);
            }
            Err(e) => {
                return self.forge_failed(
                    dir,
                    run,
                    host,
                    d,
                    reached,
                    "the checks could not be read",
                    &e,
                );
            }
        };
        let outcome = match self.judge(&verdict, &logs, &sha, secrets, &mut d) {
            Ok(o) => o,
            Err(e) => {
                return self.forge_failed(
                    dir,
                    run,
                    host,
                    d,
                    reached,
                    "the reviews could not be read",
                    &e,
                );
            }
        };
        self.keep(run, &d, host)?;
        self.save_record(dir, &d, &outcome, reached, host)?;
        Ok(outcome)
    }

    /// The record of this round: where it goes and the evidence of the run, kept before
    /// anything is pushed.
    fn begin_record(
        &mut self,
        dir: &Path,
        run: &RunRecords,
        reason: ExitReason,
        host: &mut dyn Host,
    ) -> Result<()> {
        let secrets = run.secrets.as_slice();
        let mut ev = super::evidence_of_current(
            &run.events,
            reason,
            "a verified completion, delivered by the loop",
        );
        ev.base = self.base.clone();
        ev.head = self.branch.clone();
        let verified = ev.last_check.as_ref().map(|c| c.passed);
        self.rec = DeliveryRecord {
            mode: self.mode.as_str().to_string(),
            branch: self.branch.clone(),
            base: self.base.clone(),
            remote: self.remote.clone(),
            round: self.round,
            evidence: super::record::evidence(&ev, verified, secrets),
            step: if self.pr.is_some() {
                DeliveryStep::PrOpened
            } else {
                DeliveryStep::Started
            },
            pr_url: self.pr.as_ref().map(|p| p.url.clone()),
            pr_number: self.pr.as_ref().map(|p| p.number),
            ..DeliveryRecord::default()
        };
        self.save(dir, host)
    }

    /// The round's record stamped now, through the host.
    fn save(&mut self, dir: &Path, host: &mut dyn Host) -> Result<()> {
        self.rec.schema_version = DELIVERY_RECORD_SCHEMA;
        self.rec.at = Some(host.now());
        host.save_record(dir, &self.rec)
    }

    /// The record after a step: `reached`, and how the round went (`outcome`: a round handed
    /// back to the agent or a final verdict finishes it; a stop that leaves the work unjudged
    /// keeps it open for `hank deliver`).
    fn save_record(
        &mut self,
        dir: &Path,
        d: &Delivery,
        outcome: &Delivered,
        reached: DeliveryStep,
        host: &mut dyn Host,
    ) -> Result<()> {
        self.rec.step = match outcome {
            Delivered::Final(r) => super::record::step_after(Some(*r), reached),
            Delivered::Feedback { .. } => DeliveryStep::Finished,
        };
        self.rec.stopped = d.exit_reason;
        self.rec.error.clone_from(&d.error);
        self.rec.head.clone_from(&d.head);
        self.rec.pr_url.clone_from(&d.pr_url);
        self.rec.pr_number = d.pr_number;
        self.save(dir, host)
    }

    /// A forge step failed: the run stops `forge_failed` with the forge's own error, and the
    /// record keeps the step reached for `hank deliver`.
    #[allow(clippy::too_many_arguments)]
    fn forge_failed(
        &mut self,
        dir: &Path,
        run: &RunRecords,
        host: &mut dyn Host,
        mut d: Delivery,
        reached: DeliveryStep,
        what: &str,
        e: &HankError,
    ) -> Result<Delivered> {
        let error = format!("{what}: {}", crate::sanitize::line(&e.to_string()));
        d.exit_reason = Some(ExitReason::ForgeFailed);
        d.error = Some(error);
        self.keep(run, &d, host)?;
        let outcome = Delivered::Final(ExitReason::ForgeFailed);
        self.save_record(dir, &d, &outcome, reached, host)?;
        Ok(outcome)
    }

    /// The commit of what the agent left and the push; `No` when the push did not happen
    /// (a refusal for the agent, or a transient failure that outlasted the retries).
    async fn commit_and_push(
        &mut self,
        dir: &Path,
        secrets: &[String],
        host: &mut dyn Host,
        d: &mut Delivery,
    ) -> Result<Pushed> {
        let dir = dir.to_path_buf();
        let title = self.rec.evidence.title.clone();
        let message = if self.round == 1 {
            format!("{title}\n\nDelivered by hank.")
        } else {
            format!(
                "{title} (delivery round {})\n\nDelivered by hank.",
                self.round
            )
        };
        let committed = blocking({
            let (git, dir, branch) = (Arc::clone(&self.git), dir.clone(), self.branch.clone());
            move || git.commit_all(&dir, &branch, &message)
        })
        .await?;
        for f in &committed.secrets_skipped {
            self.warnings.push(format!(
                "{} looks like a secret and is not ignored: left out of the delivery commit (still in the working tree; add it to .gitignore)",
                crate::sanitize::line(f)
            ));
        }
        d.secrets_skipped = committed.secrets_skipped;
        if let Some(output) = committed.refused {
            // A hook on the way out (pre-commit, commit-msg): back to the agent like a
            // refused push, in the same rounds.
            let text = rules::commit_feedback(&self.branch, &output, secrets);
            d.exit_reason = Some(ExitReason::PushRejected);
            d.feedback = Some(text.clone());
            return Ok(Pushed::No(Delivered::Feedback {
                round: Round::Push,
                text,
                otherwise: ExitReason::PushRejected,
            }));
        }
        let sha = self.git.head(&dir)?;
        // What is pushed is scanned, not only what hank staged (the agent may have committed
        // a secret itself): a hit ends the run, nothing pushed.
        let found = blocking({
            let (git, dir, sha) = (Arc::clone(&self.git), dir.clone(), sha.clone());
            let to = Place {
                branch: self.branch.clone(),
                base: self.base.clone(),
                remote: self.remote.clone(),
            };
            let allow = self.allow_files.clone();
            move || git.scan(&dir, &sha, &to, &allow)
        })
        .await?;
        if !found.hits.is_empty() {
            self.warnings.push(crate::policy::secrets::refusal(
                &self.remote,
                &self.branch,
                &found.hits,
                &found.skipped,
            ));
            d.exit_reason = Some(ExitReason::SecretsInCommits);
            return Ok(Pushed::No(Delivered::Final(ExitReason::SecretsInCommits)));
        }
        let mut attempt = 0;
        loop {
            let pushed = blocking({
                let (git, dir) = (Arc::clone(&self.git), dir.clone());
                let (remote, branch) = (self.remote.clone(), self.branch.clone());
                move || git.push(&dir, &remote, &branch)
            })
            .await?;
            let Push::Rejected { output } = pushed else {
                d.head = Some(sha.clone());
                return Ok(Pushed::Yes(sha));
            };
            if rules::push_failure_is_transient(&output)
                && let Some(wait) = PUSH_RETRY_WAITS.get(attempt)
            {
                attempt += 1;
                self.warnings.push(format!(
                    "the push to {} failed ({}); trying again in {}s",
                    self.remote,
                    rules::clean(output.lines().last().unwrap_or_default(), secrets, 200),
                    wait.as_secs()
                ));
                if host.sleep(*wait).await {
                    d.exit_reason = Some(ExitReason::Interrupted);
                    return Ok(Pushed::No(Delivered::Final(ExitReason::Interrupted)));
                }
                continue;
            }
            let text = rules::push_feedback(&self.remote, &self.branch, &output, secrets);
            d.exit_reason = Some(ExitReason::PushRejected);
            d.feedback = Some(text.clone());
            if rules::push_failure_is_transient(&output) {
                // The network, not the work: nothing for the agent to fix.
                return Ok(Pushed::No(Delivered::Final(ExitReason::PushRejected)));
            }
            return Ok(Pushed::No(Delivered::Feedback {
                round: Round::Push,
                text,
                otherwise: ExitReason::PushRejected,
            }));
        }
    }

    /// Opens the pull request (once per run; an open one of the branch is reused) with hank's
    /// evidence (the round's record) as its body, and comments on the issues it closes.
    fn open_pr(&mut self, d: &mut Delivery, draft: bool) -> Result<()> {
        let Some(f) = self.forge.as_deref() else {
            return Ok(());
        };
        if self.pr.is_none() {
            let ev = &self.rec.evidence;
            let opened = f.create_pr(&NewPullRequest {
                title: ev.title.clone(),
                body: ev.body.clone(),
                base: self.base.clone(),
                head: self.branch.clone(),
                draft,
            })?;
            for issue in &ev.closes {
                if let Err(e) = f.comment_issue(*issue, &super::issue_comment(&opened)) {
                    self.warnings
                        .push(format!("could not comment on issue #{issue}: {e}"));
                }
            }
            self.pr = Some(opened);
        }
        if let Some(p) = &self.pr {
            d.pr_url = Some(p.url.clone());
            d.pr_number = Some(p.number);
        }
        Ok(())
    }

    /// Polls the checks of `sha` until the verdict is final; `None` when interrupted.
    async fn wait_ci(
        &self,
        sha: &str,
        pushed_at: jiff::Timestamp,
        w: CiWaitSettings,
        host: &mut dyn Host,
    ) -> Result<Option<(CiVerdict, Vec<super::CheckLog>)>> {
        let Some(f) = self.forge.as_deref() else {
            return Ok(None);
        };
        super::wait_for_ci(f, sha, pushed_at, w, host).await
    }

    /// The verdict in the record, and what it means for the run: green (then auto-merge,
    /// reviews), red (feedback), no CI, a timeout.
    fn judge(
        &mut self,
        verdict: &CiVerdict,
        logs: &[super::CheckLog],
        sha: &str,
        secrets: &[String],
        d: &mut Delivery,
    ) -> Result<Delivered> {
        d.exit_reason = rules::exit_of(verdict);
        Ok(match verdict {
            CiVerdict::Green => {
                d.checks = "green".into();
                self.after_green(secrets, d)?
            }
            CiVerdict::Failed { names } => {
                d.checks = "failed".into();
                d.check_names.clone_from(names);
                let text = rules::ci_feedback(sha, logs, secrets);
                d.feedback = Some(text.clone());
                Delivered::Feedback {
                    round: Round::Ci,
                    text,
                    otherwise: ExitReason::CiFailed,
                }
            }
            CiVerdict::Missing => {
                d.checks = "missing".into();
                Delivered::Final(ExitReason::CiMissing)
            }
            CiVerdict::TimedOut { pending } => {
                d.checks = "timed_out".into();
                d.check_names.clone_from(pending);
                Delivered::Final(ExitReason::CiTimeout)
            }
            CiVerdict::Wait { .. } => Delivered::Final(ExitReason::CiTimeout),
        })
    }

    /// Green: new review requests go back to the agent (REVIEW_LOOP); else auto-merge is
    /// armed (AUTO_MERGE) and the delivery is over.
    fn after_green(&mut self, secrets: &[String], d: &mut Delivery) -> Result<Delivered> {
        let (Some(f), Some(p)) = (self.forge.as_deref(), self.pr.as_ref()) else {
            return Ok(Delivered::Final(ExitReason::Delivered));
        };
        if self.review_loop {
            let reviews = f.reviews(p)?;
            let comments = f.review_comments(p)?;
            let asks = rules::review_feedback(&reviews, &comments, self.reviews_seen, secrets);
            self.reviews_seen = self
                .reviews_seen
                .max(rules::last_review_id(&reviews, &comments));
            d.reviews_seen = self.reviews_seen;
            if let Some(text) = asks {
                d.feedback = Some(text.clone());
                return Ok(Delivered::Feedback {
                    round: Round::Review,
                    text,
                    otherwise: ExitReason::Delivered,
                });
            }
        }
        if self.auto_merge {
            match f.arm_auto_merge(p) {
                Ok(()) => d.auto_merge_armed = true,
                Err(e) => self.warnings.push(e.to_string()),
            }
        }
        Ok(Delivered::Final(ExitReason::Delivered))
    }

    /// `.hank/delivery.json`, then the host's record (the event, status.json).
    fn keep(&mut self, run: &RunRecords, d: &Delivery, host: &mut dyn Host) -> Result<()> {
        let json = serde_json::to_vec_pretty(d).map_err(|e| HankError::Internal(e.to_string()))?;
        host.write_file(&run.delivery_file, &json)?;
        self.last = Some(d.clone());
        host.record(d)
    }
}

/// What `hank run --dry-run` says about `DELIVER=branch|pr` (nothing is switched or pushed).
#[must_use]
pub fn dry_run_note(s: &Settings) -> String {
    let start = super::current_branch(&s.project_dir).ok().flatten();
    let branch = rules::branch_for(s.deliver_branch.value.as_deref(), start.as_deref());
    let what = match s.deliver.value {
        DeliverMode::Pr => "push, a pull request, its checks",
        _ => "push",
    };
    format!(
        "DELIVER={} ({}): the loop would work on branch `{branch}` and deliver a verified completion to `{}` ({what})",
        s.deliver.value.as_str(),
        s.deliver.source,
        s.deliver_remote.value
    )
}

/// Runs blocking git off the runtime's thread (the signal handler keeps running, so a
/// Ctrl-C stops git's process group through `proc::Cmd`).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| HankError::Internal(format!("a delivery step failed: {e}")))?
}
