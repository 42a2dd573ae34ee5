//! Delivery's I/O: the branch, the commit of what the agent left, the push (a pre-push hook's
//! output captured for the agent), hank's records of the last finished run for the PR body,
//! and the CI wait. The rules (names, the body, the verdict, the feedback) are in
//! [`crate::policy::deliver`], its order the delivery machine
//! ([`crate::policy::deliver::machine`]); the forge calls in [`crate::forge`]. [`drive`]
//! runs the machine through a host's effects ([`drive::DeliveryEffects`], on a [`Waiter`]'s
//! clock: the engine's effects inside `hank run` ([`in_run`]), [`Wall`] for `hank deliver`
//! and the fleet's integration pull request).
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! delivery I/O around the pure delivery machine `policy::deliver::machine` (`Machine::on(event,
//! now) -> Vec<Command>`: commit → scan → push (transient retries) → PR (once; a draft on
//! `review_rejected`; a comment per closed issue as `Command::Comment`) → CI polls on the events'
//! clock → reviews / auto-merge; its state the one record type `Delivery`, defined in
//! `policy/deliver/record.rs` and re-exported by `store::schema`, a schema-1 `DeliveryRecord` read
//! as it; `replay`): `drive.rs` (`drive`: the machine's commands executed through a
//! `DeliveryEffects` — a `Waiter` (clock, sleeps, the CI countdown `tick`), `save` (the per-user
//! record), `tell` (`Delivery::shown`: `.hank/delivery.json`, the event, status.json), `say` (each
//! host words `Said` its way) and the `World`: git through a `DeliverGit` (`RealGit`;
//! `Branch::Current`/`Prepare`/`AsItIs`) and the `Forge`, the PR kept across rounds); the three
//! hosts are `in_run.rs` (`InRun`: `new` runs no git; the checks and the delivery branch are
//! the machine's first command, `Event::Open` → `Command::Start`, run through `DeliverGit` by
//! `drive::start`; `deliver` one round over the engine's `RunSide`, `recording`/`recorded` for a
//! replay), `outside.rs` (`hank deliver`, a resumed delivery: the stored record is the
//! starting state, `Wall` clock) and `fleet/deliver.rs` (`integration`:
//! the fleet's PR); the rest of `mod.rs`: branch setup, the PR base (`base_branch`), `commit_all`
//! (HEAD checked, then `git::commit::commit_all` with the user's hooks when approved), push with a
//! pre-push hook's output captured, the evidence of the last finished run (`evidence`) or of the
//! run under way (`evidence_of_current`), `Wall` (the wall clock, the runtime's timer, the signal
//! counter and a stop flag), `tell_outside_run`; `scan.rs` the scan of what is pushed
//! (`known_on_remote`, `scan`; a hit is `secrets_in_commits`, before every push); `record.rs` the
//! per-user record (`delivery-record.json`: the agent must not redirect a resumed push; `load`,
//! `save`, `evidence`, `of_last_run`); `hank deliver`, `hank run --deliver` and `hank fleet` finish an
//! open record (`outside.rs`: `open_record`, `resume`; `last_run` is `hank deliver`'s delivery,
//! a CI fleet task's too); `change_set.rs` a workspace's change set (issue 51: one linked pull
//! request per repository, its pure machine `policy::deliver::change_set`, its record
//! `.hank/change-set.json`; started by the fleet's hook `fleet::deliver::change_set`, resumed
//! by `hank deliver` and `hank fleet`)

use std::path::Path;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::error::{HankError, Result};
use crate::exit::ExitReason;
pub use crate::policy::deliver::machine::Countdown;
use crate::policy::deliver::{self as rules, CiLimits, Evidence};

pub mod change_set;
pub mod drive;
pub mod in_run;
pub mod outside;
pub mod record;
pub mod scan;
#[cfg(test)]
pub(crate) mod scripted;
use crate::git::{Checkout, GitError, Hooks};
use crate::policy::receipts;
use crate::policy::verify::CheckKind;
use crate::store::schema::EventLine;

/// How long a git command of delivery may run (a push with a slow pre-push hook).
pub const GIT_DELIVER_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// [`Hooks::Run`] when nothing in `project`'s configuration is unapproved
/// ([`crate::approval::unapproved`] empty: hooks, filters and git's program keys are part of
/// the fingerprint), else [`Hooks::Off`] (also when that cannot be read).
#[must_use]
pub fn hooks_approved_in(project: &Path) -> Hooks {
    match crate::approval::unapproved(project) {
        Ok(list) if list.is_empty() => Hooks::Run,
        _ => Hooks::Off,
    }
}

/// Refuses a push while git configuration that decides where a push goes or what it runs
/// (credential helpers, remote URLs, `url.*.insteadOf`, proxies, signing programs: the keys of
/// [`crate::approval::is_program_key`]) changed since the user approved it — during this run,
/// by its agent, say. Unapproved hooks and filters do not refuse: they simply do not run.
///
/// # Errors
/// Such a change is pending (the refusal lists it), or the approval cannot be read.
pub fn refuse_unapproved_git_config(dir: &Path, remote: &str) -> Result<()> {
    let changed: Vec<String> = crate::approval::unapproved(dir)?
        .into_iter()
        .filter(|c| crate::approval::is_git_config_change(c))
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    Err(HankError::usage_hint(
        format!(
            "push to {remote} refused: the repository's git configuration changed since you \
             approved it (it decides where a push goes and what it runs):\n  - {}",
            changed
                .iter()
                .map(|c| crate::sanitize::line(c))
                .collect::<Vec<_>>()
                .join("\n  - ")
        ),
        "review it (`git config --local --list`), then `hank config accept` and deliver again \
         (`hank deliver`)",
    ))
}

/// Refuses, naming both branches, when HEAD is not on `branch` (the agent switched it — to
/// `main`, say): delivery never commits or pushes anywhere else. The check is the git door's
/// one ([`Checkout::expect_branch`]); this says it as delivery's refusal.
///
/// # Errors
/// HEAD is elsewhere or detached, or git cannot run.
pub fn expect_branch(dir: &Path, branch: &str) -> Result<()> {
    match Checkout::at(dir).expect_branch(branch) {
        Ok(()) => Ok(()),
        Err(GitError::OffBranch { head, .. }) => Err(HankError::usage_hint(
            format!(
                "delivery refused: HEAD is {} in {}, not the delivery branch `{branch}` (the \
                 agent switched it); nothing was committed or pushed",
                head.map_or("detached".to_string(), |b| format!("on `{b}`")),
                dir.display()
            ),
            format!("check the work, then `git switch {branch}` and run `hank deliver`"),
        )),
        Err(e) => Err(HankError::Tool(e.context(&["symbolic-ref", "HEAD"], dir))),
    }
}

/// The current branch (`None` on a detached HEAD).
///
/// # Errors
/// Not a git repository, or git cannot run.
pub fn current_branch(dir: &Path) -> Result<Option<String>> {
    let git = Checkout::at(dir).git();
    git.out(&["rev-parse", "--git-dir"]).map_err(|_| {
        HankError::usage_hint(
            format!(
                "{} is not a git repository: delivery needs one",
                dir.display()
            ),
            "run `git init` and commit, and add a remote (`git remote add origin URL`)",
        )
    })?;
    // A failing exit is the answer "detached".
    let args = ["symbolic-ref", "--quiet", "--short", "HEAD"];
    let r = git
        .act(&args)
        .map_err(|e| HankError::Tool(e.context(&args, dir)))?;
    Ok(r.success
        .then(|| r.stdout.trim().to_string())
        .filter(|b| !b.is_empty()))
}

/// The URL of `remote`.
///
/// # Errors
/// There is no such remote (the message says how to add one).
pub fn remote_url(dir: &Path, remote: &str) -> Result<String> {
    Checkout::at(dir)
        .git()
        .out(&["remote", "get-url", "--", remote])
        .map(|url| url.trim().to_string())
        .map_err(|_| {
            HankError::usage_hint(
                format!("git remote `{remote}` (DELIVER_REMOTE) does not exist in {}", dir.display()),
                format!("add it (`git remote add {remote} URL`) or set DELIVER_REMOTE to one of `git remote`"),
            )
        })
}

/// The commit HEAD points at.
///
/// # Errors
/// No commit yet, or git cannot run.
pub fn head(dir: &Path) -> Result<String> {
    let sha = Checkout::at(dir)
        .git()
        .out(&["rev-parse", "--verify", "HEAD"])?;
    Ok(sha.trim().to_string())
}

/// Puts the working tree on `branch`: nothing when it is already there; else the branch is
/// created from the current HEAD (or switched to, when it exists). Uncommitted work moves
/// along (git refuses, and so does hank, when it would be overwritten); no other branch, the
/// stash or the index of another branch is touched.
///
/// # Errors
/// git refused the switch (its message says why).
pub fn prepare_branch(dir: &Path, branch: &str) -> Result<()> {
    if current_branch(dir)?.as_deref() == Some(branch) {
        return Ok(());
    }
    let git = Checkout::at(dir).git();
    let local = format!("refs/heads/{branch}");
    let show = ["show-ref", "--verify", "--quiet", &local];
    let exists = git
        .act(&show)
        .map_err(|e| HankError::Tool(e.context(&show, dir)))?
        .success;
    let args: Vec<&str> = if exists {
        vec!["switch", "--no-guess", branch]
    } else {
        vec!["switch", "--no-track", "-c", branch]
    };
    let r = git
        .act(&args)
        .map_err(|e| HankError::Tool(e.context(&args, dir)))?;
    if r.success {
        Ok(())
    } else {
        Err(HankError::usage_hint(
            format!(
                "cannot put the work on branch `{branch}`: {}",
                crate::sanitize::line(r.stderr.trim())
            ),
            "commit or stash the changes git names, or choose another branch with --branch",
        ))
    }
}

pub use crate::git::commit::{Committed, runtime_globs, runtime_paths, unstage_secrets};

/// Tells a delivery step outside `hank run` (`hank deliver`, the fleet's delivery of its
/// integration branch) as a run's delivery tells it through its effects: `.hank/delivery.json`,
/// the `delivery` event in `events.jsonl`, and NOTIFY's message of it (the one notifier,
/// [`crate::notify::offer`]: the run's event classes and filtering).
///
/// # Errors
/// `.hank/delivery.json` or the event cannot be written.
pub fn tell_outside_run(
    store: &crate::store::Store,
    now: Timestamp,
    d: &crate::store::schema::Delivery,
) -> Result<()> {
    let path = store.dir().join(DELIVERY_FILE);
    let json = serde_json::to_vec_pretty(d).map_err(|e| HankError::Internal(e.to_string()))?;
    crate::store::write_atomic(&path, &json, true)
        .map_err(|e| HankError::io("failed to write", &path, e))?;
    let event =
        crate::store::Event::new(now, crate::store::EventKind::Delivery(Box::new(d.clone())));
    crate::notify::offer(&event);
    store.append_event(&event.to_line())
}

/// The project's `events.jsonl` as text, for the evidence; empty when it cannot be read (no
/// evidence then).
#[must_use]
pub fn events_text(store: &crate::store::Store) -> String {
    crate::fsread::read(
        &store.path(crate::store::HankFile::Events),
        crate::fsread::STATE_LIMIT,
        crate::fsread::Follow::No,
    )
    .map(|b| String::from_utf8_lossy(&b).into_owned())
    .unwrap_or_default()
}

/// Commits everything the agent left on `branch` with `message`: the one commit
/// ([`crate::git::commit::commit_all`]) — hank's runtime files never (a fleet task's plan
/// neither: the fleet ticks the integration branch's plan itself, so tasks delivered side by
/// side never conflict there), files that look like secrets never (they stay in the working
/// tree), the user's hooks when the configuration is approved ([`hooks_approved_in`]).
///
/// A commit a hook refused is [`Committed::refused`] with the hook's output, for the agent.
///
/// # Errors
/// HEAD is not on `branch`, git cannot run, or staging failed.
pub fn commit_all(dir: &Path, branch: &str, message: &str) -> Result<Committed> {
    expect_branch(dir, branch)?;
    crate::git::commit::commit_all(
        &Checkout::at(dir),
        &crate::git::commit::CommitAll {
            message,
            hooks: hooks_approved_in(dir),
            leave_plan: std::env::var_os(crate::git::TASK_CHECKOUT_ENV).is_some(),
            timeout: GIT_DELIVER_TIMEOUT,
        },
    )
}

/// How a push ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Push {
    Pushed,
    /// The remote or a pre-push hook refused it: git's and the hook's output (bounded).
    Rejected {
        output: String,
    },
}

/// Pushes the local branch `branch` — hank's own ref, never HEAD — to the same name on
/// `remote` (upstream set), once HEAD is checked to be on it ([`expect_branch`]). A refusal
/// is [`Push::Rejected`] with the output a pre-push hook printed, for the agent.
///
/// # Errors
/// HEAD is not on `branch`, git cannot run, or ran past [`GIT_DELIVER_TIMEOUT`].
pub fn push(dir: &Path, remote: &str, branch: &str) -> Result<Push> {
    expect_branch(dir, branch)?;
    push_refspec(
        dir,
        remote,
        &format!("refs/heads/{branch}:refs/heads/{branch}"),
    )
}

fn push_refspec(dir: &Path, remote: &str, refspec: &str) -> Result<Push> {
    refuse_unapproved_git_config(dir, remote)?;
    // The user's pre-push hook runs only when the configuration is approved.
    let args = ["push", "--set-upstream", "--", remote, refspec];
    let r = Checkout::at(dir)
        .git()
        .timeout(GIT_DELIVER_TIMEOUT)
        .hooks(hooks_approved_in(dir))
        .act(&args)
        .map_err(|e| HankError::Tool(e.context(&args, dir)))?;
    if r.success {
        return Ok(Push::Pushed);
    }
    let mut output = r.stderr;
    if !r.stdout.trim().is_empty() {
        output.push('\n');
        output.push_str(&r.stdout);
    }
    Ok(Push::Rejected {
        output: crate::git::commit::tail_chars(&output),
    })
}

/// The branch a pull request targets: `explicit` (`hank deliver --base`), else the branch the
/// work started from when it is not the delivery branch, else the base of the last delivery
/// of this branch (`.hank/delivery.json`), else the remote's default branch.
///
/// # Errors
/// None of them is known (the message says how to name it), or git cannot run.
pub fn base_branch(
    dir: &Path,
    explicit: Option<&str>,
    start: Option<&str>,
    branch: &str,
    remote: &str,
) -> Result<String> {
    if let Some(b) = explicit {
        if !rules::valid_branch_name(b) {
            return Err(HankError::usage(format!(
                "invalid value `{b}` for --base / DELIVER_BASE: expected a git branch name"
            )));
        }
        return Ok(b.to_string());
    }
    if let Some(s) = start.filter(|s| *s != branch) {
        return Ok(s.to_string());
    }
    // Delivering again from the delivery branch: the base of the last delivery of it (the
    // per-user record first, which the agent cannot write).
    if let Some(rec) = record::load(dir)
        && rec.branch == branch
        && rules::valid_branch_name(&rec.base)
    {
        return Ok(rec.base);
    }
    if let Ok(bytes) = crate::fsread::read(
        &dir.join(".hank").join(DELIVERY_FILE),
        crate::fsread::CONFIG_LIMIT,
        crate::fsread::Follow::No,
    ) && let Ok(last) = serde_json::from_slice::<crate::store::schema::Delivery>(&bytes)
        && last.branch == branch
        && rules::valid_branch_name(&last.base)
    {
        return Ok(last.base);
    }
    let remote_head = format!("refs/remotes/{remote}/HEAD");
    let args = ["symbolic-ref", "--quiet", "--short", &remote_head];
    let r = Checkout::at(dir)
        .git()
        .act(&args)
        .map_err(|e| HankError::Tool(e.context(&args, dir)))?;
    let prefix = format!("{remote}/");
    r.stdout
        .trim()
        .strip_prefix(&prefix)
        .filter(|b| r.success && !b.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            HankError::usage_hint(
                format!(
                    "the work is already on `{branch}` and the branch it came from is not known"
                ),
                "start from the branch the pull request should target, or name it (`--base NAME` on `hank run` or `hank deliver`, or DELIVER_BASE in .hankrc)",
            )
        })
}

/// `.hank/delivery.json`: the last delivery.
pub const DELIVERY_FILE: &str = "delivery.json";

/// hank's records of the last finished run (`events.jsonl` up to its last `exit` event):
/// the evidence for the PR body, and whether the run ended verified (a completion whose check
/// passed: `Some(true)`; no check: `None`).
#[must_use]
pub fn evidence(events: &str) -> (Evidence, Option<bool>, bool) {
    let lines = EventLine::parse_all(events);
    // The last run that ended: from after the previous exit to the last exit.
    let Some(end) = lines.iter().rposition(|l| l.kind() == "exit") else {
        return (Evidence::default(), None, false);
    };
    let start = lines[..end]
        .iter()
        .rposition(|l| l.kind() == "exit")
        .map_or(0, |i| i + 1);
    let (ev, verified) = evidence_of(&lines[start..=end]);
    let completed = ev.exit_reason.is_some_and(ExitReason::is_completion);
    (ev, verified, completed)
}

/// hank's records of the run under way (`events.jsonl` after its last `exit` event), for a
/// delivery inside the loop: the run has not ended, so its stop reason is the completion
/// being delivered.
#[must_use]
pub fn evidence_of_current(events: &str, reason: ExitReason, message: &str) -> Evidence {
    let lines = EventLine::parse_all(events);
    let start = lines
        .iter()
        .rposition(|l| l.kind() == "exit")
        .map_or(0, |i| i + 1);
    let (mut ev, _) = evidence_of(&lines[start..]);
    ev.exit_reason = Some(reason);
    ev.exit_message = Some(message.to_string());
    ev
}

/// The evidence in these event lines (one run's), and the verdict of its `exit` event.
fn evidence_of(run: &[EventLine]) -> (Evidence, Option<bool>) {
    let mut ev = Evidence::default();
    let mut loops = Vec::new();
    let mut verified = None;
    for l in run {
        if l.kind() == "agent_finished"
            && let Some(f) = l.finished()
        {
            let c = crate::store::schema::loop_cost(l, &f);
            if let Some(r) = c.recommendation.clone().filter(|r| !r.trim().is_empty()) {
                ev.agent_summary = Some(r);
            }
            for i in &c.items {
                if !ev.items_done.contains(i) {
                    ev.items_done.push(i.clone());
                }
            }
            loops.push(c);
        }
        let Some(e) = &l.event else { continue };
        match &e.kind {
            crate::store::schema::EventKind::Verification(c) => {
                for t in &c.removed_tests {
                    if !ev.tests_removed.contains(t) {
                        ev.tests_removed.push(t.clone());
                    }
                }
                if c.kind == CheckKind::Baseline {
                    ev.baseline = Some((**c).clone());
                } else {
                    ev.last_check = Some((**c).clone());
                }
            }
            crate::store::schema::EventKind::Review(r) => ev.reviews.push((**r).clone()),
            crate::store::schema::EventKind::CircuitChanged { from, to, reason } => {
                ev.breaker.push(crate::policy::breaker::Transition {
                    at: e.at,
                    from: *from,
                    to: *to,
                    reason: reason.clone(),
                });
            }
            crate::store::schema::EventKind::Exit {
                exit_reason,
                message,
                verified: v,
                ..
            } => {
                ev.exit_reason = *exit_reason;
                ev.exit_message = Some(message.clone());
                verified = *v;
            }
            _ => {}
        }
    }
    ev.receipts = receipts::attribute(&loops);
    (ev, verified)
}

/// Timing of the CI wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CiWaitSettings {
    pub appear: Duration,
    pub total: Duration,
}

impl CiWaitSettings {
    /// The verdict rule's limits; polls every appear/10, between 200 ms and 15 s.
    #[must_use]
    pub fn limits(&self) -> CiLimits {
        let poll = (self.appear / 10).clamp(Duration::from_millis(200), Duration::from_secs(15));
        let sd = |d: Duration| SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        CiLimits {
            appear: sd(self.appear),
            total: sd(self.total),
            poll: sd(poll),
        }
    }
}

/// A future a [`Waiter`] returns.
pub type WaitFut<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = bool> + 'a>>;

/// The clock and the sleeps of delivery's waits (the CI wait, a push's retry waits): one
/// waiting code on any clock. Inside `hank run` it is the engine's effects (`Effects::now` and
/// `Effects::sleep`: the engine's tests run a 30-minute CI wait at once); `hank deliver` and
/// the fleet's delivery use [`Wall`] (the wall clock, the runtime's timer, the signal counter).
pub trait Waiter {
    /// The time now.
    fn now(&self) -> Timestamp;
    /// Sleeps `d` (at most a second at a time in the CI wait); `true` when the wait is to end
    /// (Ctrl-C, SIGTERM, SIGHUP).
    fn sleep(&mut self, d: Duration) -> WaitFut<'_>;
    /// Told after each look at the checks and about once a second while they are waited for:
    /// the countdown (when the verdict is due, how many checks are pending); `true` ends the
    /// wait (a `hank ctl stop`).
    fn tick(&mut self, countdown: Countdown, now: Timestamp) -> bool;
}

/// The wall clock (or `HANK_NOW`'s) and the runtime's timer, for the hosts of a delivery
/// outside `hank run` (`hank deliver`, the fleet's integration pull request): a signal
/// (`cancel`, the signal counter) or `stop` (a flag a signal sets) ends a sleep.
pub struct Wall {
    clock: crate::clock::SystemClock,
    cancel: Option<tokio::sync::watch::Receiver<u32>>,
    stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Wall {
    /// The wall clock; `cancel` the signal counter when the caller has one, `stop` asked
    /// every 100 ms of a sleep.
    ///
    /// # Errors
    /// `HANK_NOW` is set and is not a time.
    pub(crate) fn new(
        cancel: Option<tokio::sync::watch::Receiver<u32>>,
        stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> Result<Self> {
        Ok(Self {
            clock: crate::clock::SystemClock::from_env()?,
            cancel,
            stop,
        })
    }

    /// The time now.
    #[must_use]
    pub fn now(&self) -> Timestamp {
        crate::policy::time::Clock::now(&self.clock)
    }

    /// Whether the stop flag is up.
    #[must_use]
    pub fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Sleeps `d`; `true` when a signal or the stop flag ended it.
    pub fn sleep(&mut self, d: Duration) -> WaitFut<'_> {
        Box::pin(async move {
            let mut left = d;
            while !left.is_zero() {
                if self.stopped() {
                    return true;
                }
                let step = left.min(Duration::from_millis(100));
                let cut = match self.cancel.as_mut() {
                    Some(c) => sleep_or_cancel(step, c).await,
                    None => {
                        tokio::time::sleep(step).await;
                        false
                    }
                };
                if cut {
                    return true;
                }
                left -= step;
            }
            self.stopped()
        })
    }
}

/// The wall clock as a delivery's clock (the fleet's integration pull request): no
/// countdown is shown, nothing but a signal ends the CI wait.
impl Waiter for Wall {
    fn now(&self) -> Timestamp {
        Wall::now(self)
    }

    fn sleep(&mut self, d: Duration) -> WaitFut<'_> {
        Wall::sleep(self, d)
    }

    fn tick(&mut self, _countdown: Countdown, _now: Timestamp) -> bool {
        false
    }
}

/// Sleeps `d` on the runtime's timer; `true` when a signal came first (or had come).
pub async fn sleep_or_cancel(d: Duration, cancel: &mut tokio::sync::watch::Receiver<u32>) -> bool {
    if *cancel.borrow() > 0 {
        return true;
    }
    tokio::select! {
        () = tokio::time::sleep(d) => false,
        changed = cancel.changed() => changed.is_err() || *cancel.borrow() > 0,
    }
}

/// The commit the local branch `branch` points at (a fleet's integration branch).
///
/// # Errors
/// git cannot run, or there is no such branch.
pub fn branch_head(dir: &Path, branch: &str) -> Result<String> {
    Checkout::at(dir)
        .git()
        .read(&["rev-parse", "--verify", &format!("refs/heads/{branch}")])
        .map(|out| String::from_utf8_lossy(&out).trim().to_string())
        .map_err(HankError::from)
}

/// Pushes the local branch `branch` (not HEAD) to the same name on `remote` (upstream set):
/// the fleet's integration branch, which is checked out in no worktree hank keeps.
///
/// # Errors
/// git cannot run, or ran past [`GIT_DELIVER_TIMEOUT`].
pub fn push_branch(dir: &Path, remote: &str, branch: &str) -> Result<Push> {
    push_refspec(
        dir,
        remote,
        &format!("refs/heads/{branch}:refs/heads/{branch}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_finished_run_is_the_evidence() {
        let events = [
            r#"{"schema_version":2,"type":"agent_finished","at":"2026-11-24T09:00:00Z","loop":1,"outcome":"success","plan_items":["old item"],"cost_usd":9.0}"#,
            r#"{"schema_version":2,"type":"exit","at":"2026-11-24T09:01:00Z","exit_reason":"max_loops","exit_code":3,"message":"MAX_LOOPS reached"}"#,
            r#"{"schema_version":2,"type":"verification","at":"2026-11-24T10:00:00Z","kind":"baseline","passed":false,"command":"make test","exit_code":2,"duration_ms":1500,"log":"x","loop":0}"#,
            r#"{"schema_version":2,"type":"agent_finished","at":"2026-11-24T10:05:00Z","loop":2,"outcome":"success","plan_items":["[#4] Fix the parser"],"cost_usd":0.5,"duration_ms":60000,"recommendation":"Parser fixed"}"#,
            r#"{"schema_version":2,"type":"circuit_changed","at":"2026-11-24T10:06:00Z","from":"CLOSED","to":"HALF_OPEN","reason":"no progress"}"#,
            r#"{"schema_version":2,"type":"verification","at":"2026-11-24T10:07:00Z","kind":"completion","passed":true,"command":"make test","exit_code":0,"duration_ms":1700,"log":"y","loop":2,"removed_tests":["t/old_test.c"]}"#,
            r#"{"schema_version":2,"type":"exit","at":"2026-11-24T10:08:00Z","exit_reason":"plan_complete","exit_code":0,"message":"every required fix_plan item is done (1/1)","verified":true}"#,
        ]
        .join("\n");
        let (ev, verified, completed) = evidence(&events);
        assert_eq!(ev.items_done, vec!["[#4] Fix the parser".to_string()]);
        assert_eq!(ev.baseline.as_ref().map(|c| c.passed), Some(false));
        assert_eq!(ev.last_check.as_ref().map(|c| c.passed), Some(true));
        assert_eq!(ev.tests_removed, vec!["t/old_test.c".to_string()]);
        assert_eq!(ev.breaker.len(), 1);
        assert_eq!(ev.exit_reason, Some(ExitReason::PlanComplete));
        assert_eq!(ev.agent_summary.as_deref(), Some("Parser fixed"));
        assert_eq!(ev.receipts.totals.loops, 1);
        assert_eq!(verified, Some(true));
        assert!(completed);
        let (ev, verified, completed) = evidence("");
        assert!(ev.items_done.is_empty() && verified.is_none() && !completed);
    }
}
