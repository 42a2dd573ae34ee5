//! A delivery outside a loop, on the wall clock ([`super::Wall`]): `hank deliver`'s of the
//! last finished run ([`last_run`]), and the finishing of a delivery that stopped part-way
//! ([`open_record`], [`resume`]: `hank deliver`, `hank run` with DELIVER, `hank fleet` after
//! its merges). Each runs the delivery machine from the step its record reached
//! ([`crate::store::schema::Delivery`]), says each step on stderr and keeps the record at each
//! step (the per-user record, `.hank/delivery.json`, the event, status.json).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::drive::{Branch, DeliveryEffects, Place, RealGit, World};
use super::{self as deliver, CiWaitSettings, DELIVERY_FILE};
use crate::error::{HankError, Result};
use crate::exit::{self, ExitReason};
use crate::forge::{self, Forge};
use crate::policy::deliver::machine::{Config, Event, Machine, Said, Source};
use crate::policy::deliver::{self as rules};
use crate::settings::{self, DeliverMode};
use crate::store::Store;
use crate::store::schema::Delivery;

/// A flag that turns true at the first SIGINT/SIGTERM/SIGHUP (a thread with its own
/// runtime watches the shared handler).
fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flag);
    std::thread::spawn(move || {
        let Ok(rt) = crate::proc::runtime() else {
            return;
        };
        rt.block_on(async move {
            if let Ok(mut rx) = crate::agent::signals::install()
                && rx.changed().await.is_ok()
            {
                f.store(true, Ordering::SeqCst);
            }
        });
    });
    flag
}

/// A warning for each file left out of the commit because it looks like a secret.
pub fn warn_skipped_secrets(committed: &deliver::Committed) {
    for f in &committed.secrets_skipped {
        errln!(
            "hank: warning: {} looks like a secret and is not ignored: left out of the commit (still in the working tree; add it to .gitignore)",
            crate::sanitize::line(f)
        );
    }
}

/// What a delivery is asked for beyond the settings: no CI wait; a new change set of the
/// workspace's branches named (`hank deliver --change-set INTO`, hidden: what a fleet over a
/// workspace does at its end).
#[derive(Debug, Clone, Default)]
pub struct Opts {
    pub no_wait: bool,
    pub change_set: Option<String>,
}

/// How a delivery outside a loop ended: its record as shown (`hank deliver --json`), the
/// exit code its verdict maps to, and whether it was a fleet's (whose caller marks the fleet
/// done when it succeeded); a change set's record when it was one (`shown` is then empty).
#[derive(Debug, Clone)]
pub struct Ended {
    pub shown: Delivery,
    pub code: u8,
    pub fleet: bool,
    pub change_set: Option<crate::store::schema::ChangeSet>,
}

/// `hank deliver`'s delivery of the last finished run in `dir` (its project's lock held by the
/// caller): an open delivery of that run finished ([`resume`]: a fleet's too), else, unless
/// `force`, the run's work checked to be verified, the branch, remote and base checked before
/// the working tree changes, then the delivery made (`s.deliver`, `pr` when it says none).
///
/// # Errors
/// No finished run, its work not verified, the branch, remote or base refused, or a step of
/// the delivery failed.
pub fn last_run(
    dir: &Path,
    store: &Store,
    s: &settings::Settings,
    opts: Opts,
    force: bool,
) -> Result<Ended> {
    let mode = match s.deliver.value {
        DeliverMode::None => DeliverMode::Pr,
        m => m,
    };
    // A change set (issue 51): a new one named, or the one not delivered yet, resumed.
    if let Some(into) = opts.change_set.clone() {
        let set = super::change_set::of_workspace(dir, s, &into)?;
        return change_set(dir, s, &opts, set);
    }
    if !force && let Some(set) = super::change_set::load(dir).filter(|c| c.resumable()) {
        errln!(
            "hank: resuming the change set of {} ({}{})",
            set.into,
            set.exit_reason.map_or("stopped", ExitReason::as_str),
            set.stopped_at
                .as_deref()
                .map(|a| format!(" at {a}"))
                .unwrap_or_default()
        );
        return change_set(dir, s, &opts, set);
    }
    let secrets = crate::agent::redact::secret_values();

    // The run's records, and whether its work is verified.
    let events = deliver::events_text(store);
    // A delivery of the last run that stopped part-way is finished, with its evidence.
    if !force && let Some(rec) = open_record(dir, &events) {
        return resume(dir, store, s, opts, rec);
    }
    let (mut ev, verified, completed) = deliver::evidence(&events);
    if !force {
        if ev.exit_reason.is_none() {
            return Err(HankError::usage_hint(
                "no finished run to deliver (.hank/events.jsonl has no `exit` event)",
                "run `hank run` until it completes, or pass --force to deliver the working tree as it is",
            ));
        }
        // A delivery stop after a passed check (no CI, CI too slow, the forge) leaves
        // verified work.
        let delivery_stop = ev
            .exit_reason
            .is_some_and(|r| deliver::record::stops_resumably(r) && r != ExitReason::Interrupted);
        let verified_work =
            (completed && verified != Some(false)) || (delivery_stop && verified == Some(true));
        if !verified_work {
            return Err(HankError::usage_hint(
                format!(
                    "the last run ended with `{}`{}: its work is not verified",
                    ev.exit_reason.map_or("?", ExitReason::as_str),
                    if verified == Some(false) {
                        " and its check failed"
                    } else {
                        ""
                    }
                ),
                "run hank until it completes (its check passing), or pass --force to deliver anyway (the PR body shows how the run ended)",
            ));
        }
    }

    // Everything that can be refused is checked before the working tree changes.
    let start = deliver::current_branch(dir)?;
    let branch = rules::branch_for(s.deliver_branch.value.as_deref(), start.as_deref());
    let remote = s.deliver_remote.value.clone();
    deliver::remote_url(dir, &remote)?;
    let base = deliver::base_branch(
        dir,
        s.deliver_base.value.as_deref(),
        start.as_deref(),
        &branch,
        &remote,
    )?;
    ev.base = base.clone();
    ev.head = branch.clone();
    let rec = Delivery {
        mode: mode.as_str().to_string(),
        branch,
        base,
        remote,
        evidence: deliver::record::evidence(&ev, verified, &secrets),
        ..Delivery::default()
    };
    deliver_record(dir, store, s, opts, rec)
}

/// Delivers the change set `set` on the wall clock (Ctrl-C stops it resumably).
fn change_set(
    dir: &Path,
    s: &settings::Settings,
    opts: &Opts,
    set: crate::store::schema::ChangeSet,
) -> Result<Ended> {
    let stop = interrupt_flag();
    let set_opts = super::change_set::SetOpts {
        wait: (s.ci_wait.value.applies(DeliverMode::Pr) && !opts.no_wait).then_some(
            CiWaitSettings {
                appear: s.ci_appear_timeout.value,
                total: s.ci_timeout.value,
            },
        ),
        allow_files: s.deliver_allow_files.value.clone().unwrap_or_default(),
    };
    let mut wall = deliver::Wall::new(None, Some(stop))?;
    let (set, code) = crate::proc::runtime()
        .map_err(|e| HankError::Internal(format!("the delivery: {e}")))?
        .block_on(super::change_set::deliver(
            dir, set, &set_opts, &mut wall, "hank: ",
        ))?;
    Ok(Ended {
        shown: Delivery::default(),
        code,
        fleet: set.fleet,
        change_set: Some(set),
    })
}

/// The last run's delivery record when it is left to finish (see [`super::record`]): a
/// fleet's, or the one of the run `events` (the event log's text) ends with.
#[must_use]
pub fn open_record(dir: &Path, events: &str) -> Option<Delivery> {
    // A fleet's delivery is the last thing the fleet did (a fleet writes no `exit` event).
    deliver::record::load(dir)
        .filter(|r| r.resumable() && (r.fleet || deliver::record::of_last_run(r, events)))
}

/// Finishes the open delivery `rec` (`hank deliver`, or `hank run --deliver` after a run that
/// stopped part-way through its delivery, `hank fleet` after its merges): the same branch,
/// base and evidence.
///
/// # Errors
/// A step of the delivery failed.
pub fn resume(
    dir: &Path,
    store: &Store,
    s: &settings::Settings,
    opts: Opts,
    rec: Delivery,
) -> Result<Ended> {
    errln!(
        "hank: finishing the last run's delivery ({}{}): {}",
        rec.exit_reason.map_or("stopped", ExitReason::as_str),
        rec.error
            .as_deref()
            .map(|e| format!(": {}", crate::sanitize::line(e)))
            .unwrap_or_default(),
        rec.reached()
    );
    deliver_record(dir, store, s, opts, rec)
}

/// Runs the delivery `rec` from the step it reached through the delivery machine: the
/// branch, the commit, the push, the pull request (`pr`, once), the checks (CI_WAIT); the
/// record is kept at each step, shown at the end.
fn deliver_record(
    dir: &Path,
    store: &Store,
    s: &settings::Settings,
    opts: Opts,
    rec: Delivery,
) -> Result<Ended> {
    // From here Ctrl-C stops the git or forge command under way (its process group) and
    // ends with 130; nothing is half-written (each record is written atomically).
    let stop = interrupt_flag();
    let fleet = rec.fleet;
    let mode = if rec.mode == DeliverMode::Branch.as_str() {
        DeliverMode::Branch
    } else {
        DeliverMode::Pr
    };
    let url = deliver::remote_url(dir, &rec.remote)?;
    let wait = s.ci_wait.value.applies(mode) && !opts.no_wait;
    let forge: Option<Box<dyn Forge>> = if mode == DeliverMode::Pr || wait {
        Some(forge::detect(dir, &url, &forge::Env::from_process())?)
    } else {
        None
    };
    let cfg = Config {
        source: Source::Deliver,
        pr: mode == DeliverMode::Pr,
        ci: wait.then(|| {
            CiWaitSettings {
                appear: s.ci_appear_timeout.value,
                total: s.ci_timeout.value,
            }
            .limits()
        }),
        auto_merge: s.auto_merge.value,
        review_loop: s.review_loop.value,
        push_retry_waits: Vec::new(),
        secrets: crate::agent::redact::secret_values(),
    };
    let world = World {
        dir: dir.to_path_buf(),
        place: Place {
            branch: rec.branch.clone(),
            base: rec.base.clone(),
            remote: rec.remote.clone(),
        },
        branch: if rec.fleet {
            Branch::AsItIs
        } else {
            Branch::Prepare
        },
        allow_files: s.deliver_allow_files.value.clone().unwrap_or_default(),
        git: std::sync::Arc::new(RealGit),
        forge,
        pr: None,
    };
    let mut host = Host {
        wall: deliver::Wall::new(None, Some(stop))?,
        store,
        world,
        limits: (
            settings::resolve::format_duration(s.ci_appear_timeout.value),
            settings::resolve::format_duration(s.ci_timeout.value),
        ),
        last_told: None,
        shown: None,
    };
    let mut m = Machine::new(cfg, rec);
    let first = Event::Begin {
        reason: ExitReason::Delivered,
        evidence: None,
    };
    crate::proc::runtime()
        .map_err(|e| HankError::Internal(format!("the delivery: {e}")))?
        .block_on(deliver::drive::drive(&mut m, &mut host, first))?;
    let shown = m.record.shown();
    let code = shown.exit_reason.map_or(exit::HALTED, ExitReason::code);
    Ok(Ended {
        shown,
        code,
        fleet,
        change_set: None,
    })
}

/// The host of a delivery outside a loop: the wall clock, the per-user record, the
/// verdict shown at the end (status.json, `.hank/delivery.json`, the event), each step said
/// on stderr.
struct Host<'a> {
    wall: deliver::Wall,
    store: &'a Store,
    world: World,
    /// CI_APPEAR_TIMEOUT and CI_TIMEOUT as the user wrote them.
    limits: (String, String),
    last_told: Option<jiff::Timestamp>,
    /// The delivery of status.json during the CI wait (with its countdown).
    shown: Option<Delivery>,
}

impl deliver::Waiter for Host<'_> {
    fn now(&self) -> jiff::Timestamp {
        self.wall.now()
    }

    fn sleep(&mut self, d: std::time::Duration) -> deliver::WaitFut<'_> {
        self.wall.sleep(d)
    }

    /// status.json's delivery shows the countdown while it lasts (when it changed); a line a
    /// minute says when the verdict is due and how long is left.
    fn tick(&mut self, c: deliver::Countdown, now: jiff::Timestamp) -> bool {
        if let Some(shown) = self.shown.as_mut() {
            let before = (shown.checks_due, shown.checks_pending);
            c.show_in(shown);
            if before != (shown.checks_due, shown.checks_pending)
                && let Some(mut status) = self.store.read_status()
            {
                status.delivery = Some(shown.clone());
                status.updated_at = now;
                let _ = self.store.write_status(&status);
            }
        }
        if self
            .last_told
            .is_none_or(|t| now.duration_since(t).as_secs() >= 60)
        {
            self.last_told = Some(now);
            let left = u64::try_from(c.due.duration_since(now).as_secs().max(0)).unwrap_or(0);
            errln!(
                "hank: waiting for the checks until {} — {} left",
                crate::report::short_time(c.due),
                crate::policy::time::format_secs(left)
            );
        }
        self.wall.stopped()
    }
}

impl DeliveryEffects for Host<'_> {
    fn save(&mut self, d: &Delivery) -> Result<()> {
        deliver::record::save(&self.world.dir, &mut d.clone(), self.wall.now())
    }

    fn tell(&mut self, d: &Delivery) -> Result<()> {
        // status.json of the run carries its delivery (a status hank cannot read is left alone).
        if let Some(mut status) = self.store.read_status() {
            status.delivery = Some(d.clone());
            status.updated_at = self.wall.now();
            self.store.write_status(&status)?;
        }
        deliver::tell_outside_run(self.store, self.wall.now(), d)
    }

    fn say(&mut self, said: &Said, d: &Delivery) {
        let sha = d.head.as_deref().unwrap_or_default();
        let short = sha.get(..12).unwrap_or(sha);
        match said {
            Said::SecretLeftOut(f) => errln!(
                "hank: warning: {} looks like a secret and is not ignored: left out of the commit (still in the working tree; add it to .gitignore)",
                crate::sanitize::line(f)
            ),
            Said::Committed => errln!("hank: committed the work on {}", d.branch),
            Said::SecretsRefused(text) => errln!("hank: {text}"),
            Said::Pushed => errln!("hank: pushed {} ({short}) to {}", d.branch, d.remote),
            Said::PushRejected(output) => errln!(
                "hank: the push to {} was rejected; its output:\n{output}",
                d.remote
            ),
            Said::PrOpened => errln!(
                "hank: pull request #{} {}",
                d.pr_number.unwrap_or_default(),
                d.pr_url.as_deref().unwrap_or_default()
            ),
            Said::CommentFailed { issue, error } => {
                errln!("hank: warning: could not comment on issue #{issue}: {error}");
            }
            Said::WaitingForChecks => {
                self.shown = Some(d.shown());
                errln!(
                    "hank: waiting for the checks of {short} (CI_APPEAR_TIMEOUT {}, CI_TIMEOUT {})",
                    self.limits.0,
                    self.limits.1
                );
            }
            Said::Verdict => match d.checks.as_str() {
                "green" => errln!("hank: every check of {short} passed"),
                "failed" => errln!("hank: checks failed: {}", d.check_names.join(", ")),
                "missing" => {
                    errln!(
                        "hank: no check appeared for {short} within CI_APPEAR_TIMEOUT: no CI is not green"
                    );
                    errln!("hank: {}", rules::CI_MISSING_NEXT);
                }
                "timed_out" => errln!(
                    "hank: checks still running at CI_TIMEOUT: {}",
                    d.check_names.join(", ")
                ),
                _ => {}
            },
            Said::AutoMergeArmed => {
                errln!(
                    "hank: auto-merge armed on #{}",
                    d.pr_number.unwrap_or_default()
                );
            }
            Said::AutoMergeFailed(e) => errln!("hank: warning: {e}"),
            Said::ReviewAsked => errln!(
                "hank: a reviewer asked for changes; kept for the next loop in .hank/{DELIVERY_FILE}"
            ),
            Said::ForgeFailed => {
                errln!("hank: {}", d.error.as_deref().unwrap_or_default());
                errln!(
                    "hank: the delivery stopped at: {}; run `hank deliver` again to finish it",
                    d.reached()
                );
            }
            Said::PushRetry { .. } => {}
        }
    }

    fn world(&mut self) -> &mut World {
        &mut self.world
    }
}
