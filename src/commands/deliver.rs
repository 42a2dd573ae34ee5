//! `hank deliver`: delivers the last finished run's verified work now — the branch, a commit
//! of what the agent left, the push (a pre-push hook's refusal is kept for the agent), with
//! `pr` a pull request whose body is hank's evidence, then (CI_WAIT) the checks of the pushed
//! commit, fail closed: the verdict is the exit code. `.hank/delivery.json` and a `delivery`
//! event record each delivery.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cli::DeliverArgs;
use crate::clock::SystemClock;
use crate::deliver::{self, CiWaitSettings, Push};
use crate::error::{HankError, Result};
use crate::exit::{self, ExitReason};
use crate::forge::{self, Forge, NewPullRequest};
use crate::policy::deliver::{self as rules, CiVerdict};
use crate::policy::time::Clock;
use crate::settings::{self, DeliverMode, Flags};
use crate::store::Store;
use crate::store::schema::{Delivery, DeliveryRecord, DeliveryStep};

use super::out;

pub(crate) use crate::deliver::DELIVERY_FILE;

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
pub(super) fn warn_skipped_secrets(committed: &deliver::Committed) {
    for f in &committed.secrets_skipped {
        errln!(
            "hank: warning: {} looks like a secret and is not ignored: left out of the commit (still in the working tree; add it to .gitignore)",
            crate::sanitize::line(f)
        );
    }
}

fn record(store: &Store, clock: &SystemClock, d: &Delivery) -> Result<()> {
    // status.json of the run carries its delivery (a status hank cannot read is left alone).
    if let Some(mut status) = store.read_status() {
        status.delivery = Some(d.clone());
        status.updated_at = clock.now();
        store.write_status(&status)?;
    }
    deliver::tell_outside_run(store, clock.now(), d)
}

fn finish(store: &Store, clock: &SystemClock, opts: Opts, d: &Delivery) -> Result<u8> {
    record(store, clock, d)?;
    if opts.json {
        let line = serde_json::to_string(d).map_err(|e| HankError::Internal(e.to_string()))?;
        out(&format!("{line}\n"))?;
    }
    Ok(d.exit_reason.map_or(exit::HALTED, ExitReason::code))
}

/// What a delivery is asked for beyond the settings: the record on stdout, no CI wait.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Opts {
    pub json: bool,
    pub no_wait: bool,
}

/// `hank deliver`.
pub(crate) fn run(a: &DeliverArgs) -> Result<u8> {
    let flags = Flags {
        deliver: a.deliver.clone(),
        branch: a.branch.clone(),
        base: a.base.clone(),
        ..Flags::default()
    };
    // A configuration the agent changed during the run is not used unapproved.
    let (dir, store, s) = super::approved_project("hank deliver", &flags)?;
    // Its git and forge calls are a run: what a hook changes meanwhile is not approved silently.
    let _recorded = crate::approval::record(&dir, "hank deliver")?;
    let _notify = crate::notify::install(&s, crate::clock::SystemClock::from_env()?.now());
    let mode = match s.deliver.value {
        DeliverMode::None => DeliverMode::Pr,
        m => m,
    };
    let _lock = super::lock_or_hint(
        &store,
        "deliver after the run ends (the loop itself delivers with DELIVER=branch or pr)",
    )?;
    let opts = Opts {
        json: a.json,
        no_wait: a.no_wait,
    };
    let secrets = crate::agent::redact::secret_values();

    // The run's records, and whether its work is verified.
    let events = deliver::events_text(&store);
    // A delivery of the last run that stopped part-way is finished, with its evidence.
    if !a.force
        && let Some(rec) = open_record(&dir, &events)
    {
        let fleet = rec.fleet;
        let code = resume(&dir, &store, &s, opts, rec)?;
        if fleet && code == exit::OK {
            crate::fleet::mark_done(&dir)?;
        }
        return Ok(code);
    }
    let (mut ev, verified, completed) = deliver::evidence(&events);
    if !a.force {
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
    let start = deliver::current_branch(&dir)?;
    let branch = rules::branch_for(s.deliver_branch.value.as_deref(), start.as_deref());
    let remote = s.deliver_remote.value.clone();
    deliver::remote_url(&dir, &remote)?;
    let base = deliver::base_branch(
        &dir,
        s.deliver_base.value.as_deref(),
        start.as_deref(),
        &branch,
        &remote,
    )?;
    ev.base = base.clone();
    ev.head = branch.clone();
    let rec = DeliveryRecord {
        mode: mode.as_str().to_string(),
        branch,
        base,
        remote,
        evidence: deliver::record::evidence(&ev, verified, &secrets),
        ..DeliveryRecord::default()
    };
    deliver_record(&dir, &store, &s, opts, rec)
}

/// The last run's delivery record when it is left to finish (see [`deliver::record`]).
pub(crate) fn open_record(dir: &std::path::Path, events: &str) -> Option<DeliveryRecord> {
    // A fleet's delivery is the last thing the fleet did (a fleet writes no `exit` event).
    deliver::record::load(dir)
        .filter(|r| r.resumable() && (r.fleet || deliver::record::of_last_run(r, events)))
}

/// Finishes the open delivery `rec` (`hank deliver`, or `hank run --deliver` after a run that
/// stopped part-way through its delivery): the same branch, base and evidence.
pub(crate) fn resume(
    dir: &std::path::Path,
    store: &Store,
    s: &settings::Settings,
    opts: Opts,
    rec: DeliveryRecord,
) -> Result<u8> {
    errln!(
        "hank: finishing the last run's delivery ({}{}): {}",
        rec.stopped.map_or("stopped", ExitReason::as_str),
        rec.error
            .as_deref()
            .map(|e| format!(": {}", crate::sanitize::line(e)))
            .unwrap_or_default(),
        rec.reached()
    );
    deliver_record(dir, store, s, opts, rec)
}

/// A forge step that failed: the delivery stops `forge_failed` with the forge's own error;
/// the record keeps the step reached, for `hank deliver`.
fn forge_failed(what: &str, e: &HankError, d: &mut Delivery, rec: &mut DeliveryRecord) -> String {
    let error = format!("{what}: {}", crate::sanitize::line(&e.to_string()));
    errln!("hank: {error}");
    errln!(
        "hank: the delivery stopped at: {}; run `hank deliver` again to finish it",
        rec.reached()
    );
    d.exit_reason = Some(ExitReason::ForgeFailed);
    d.error = Some(error.clone());
    error
}

/// Runs the delivery `rec` from the step it reached: the branch, the commit, the push, the
/// pull request (`pr`, once), the checks (CI_WAIT); the record is kept at each step.
fn deliver_record(
    dir: &std::path::Path,
    store: &Store,
    s: &settings::Settings,
    opts: Opts,
    mut rec: DeliveryRecord,
) -> Result<u8> {
    let clock = SystemClock::from_env()?;
    // From here Ctrl-C stops the git or forge command under way (its process group) and
    // ends with 130; nothing is half-written (each record is written atomically).
    let stop = interrupt_flag();
    let secrets = crate::agent::redact::secret_values();
    let mode = if rec.mode == DeliverMode::Branch.as_str() {
        DeliverMode::Branch
    } else {
        DeliverMode::Pr
    };
    let (branch, base, remote) = (rec.branch.clone(), rec.base.clone(), rec.remote.clone());
    let url = deliver::remote_url(dir, &remote)?;
    let wait = s.ci_wait.value.applies(mode) && !opts.no_wait;
    let forge: Option<Box<dyn Forge>> = if mode == DeliverMode::Pr || wait {
        Some(forge::detect(dir, &url, &forge::Env::from_process())?)
    } else {
        None
    };
    let mut d = Delivery {
        mode: mode.as_str().to_string(),
        branch: branch.clone(),
        base: base.clone(),
        remote: remote.clone(),
        checks: "not_waited".into(),
        pr_url: rec.pr_url.clone(),
        pr_number: rec.pr_number,
        ..Delivery::default()
    };
    let keep = |rec: &mut DeliveryRecord, d: &Delivery, reached: DeliveryStep| -> Result<()> {
        deliver::record::keep(dir, rec, d, reached, clock.now())
    };
    deliver::record::save(dir, &mut rec, clock.now())?;

    // A fleet's integration branch is pushed as it is: it is checked out nowhere hank
    // keeps, and the fleet committed every merge.
    let sha = if rec.fleet {
        deliver::branch_head(dir, &branch)?
    } else {
        deliver::prepare_branch(dir, &branch)?;
        let title = rec.evidence.title.clone();
        let committed =
            deliver::commit_all(dir, &branch, &format!("{title}\n\nDelivered by hank."))?;
        warn_skipped_secrets(&committed);
        if let Some(out) = &committed.refused {
            return Err(HankError::Tool(format!(
                "`git commit` failed: {}",
                rules::clean(out, &secrets, rules::MAX_HOOK_OUTPUT_CHARS).replace('\n', " ")
            )));
        }
        if committed.made {
            errln!("hank: committed the work on {branch}");
        }
        d.secrets_skipped = committed.secrets_skipped;
        deliver::head(dir)?
    };
    // What is pushed is scanned, not only what hank staged: every commit the remote's base
    // does not have yet, as the remote itself says (the whole history when it has neither).
    let known = deliver::scan::known_on_remote(dir, &remote, &base, &branch)?;
    let allow = s.deliver_allow_files.value.clone().unwrap_or_default();
    let found = deliver::scan::scan(dir, &sha, &known, &allow)?;
    if !found.hits.is_empty() {
        errln!(
            "hank: {}",
            crate::policy::secrets::refusal(&remote, &branch, &found.hits, &found.skipped)
        );
        d.exit_reason = Some(ExitReason::SecretsInCommits);
        let reached = rec.step;
        keep(&mut rec, &d, reached)?;
        return finish(store, &clock, opts, &d);
    }
    let pushed = if rec.fleet {
        deliver::push_branch(dir, &remote, &branch)?
    } else {
        deliver::push(dir, &remote, &branch)?
    };
    match pushed {
        Push::Pushed => errln!(
            "hank: pushed {branch} ({}) to {remote}",
            sha.get(..12).unwrap_or(&sha)
        ),
        Push::Rejected { output } => {
            let fb = rules::push_feedback(&remote, &branch, &output, &secrets);
            errln!(
                "hank: the push to {remote} was rejected; its output:\n{}",
                rules::clean(&output, &secrets, rules::MAX_HOOK_OUTPUT_CHARS)
            );
            d.exit_reason = Some(ExitReason::PushRejected);
            d.feedback = Some(fb);
            let reached = rec.step;
            keep(&mut rec, &d, reached)?;
            return finish(store, &clock, opts, &d);
        }
    }
    let pushed_at = clock.now();
    d.head = Some(sha.clone());
    let mut reached = DeliveryStep::Pushed.max(rec.step);
    keep(&mut rec, &d, reached)?;

    let mut pr = None;
    if let (DeliverMode::Pr, Some(f)) = (mode, forge.as_deref()) {
        match open_pr(f, &rec, &branch) {
            Ok(opened) => {
                errln!("hank: pull request #{} {}", opened.number, opened.url);
                d.pr_url = Some(opened.url.clone());
                d.pr_number = Some(opened.number);
                pr = Some(opened);
            }
            Err(e) => {
                forge_failed("the pull request could not be opened", &e, &mut d, &mut rec);
                keep(&mut rec, &d, reached)?;
                return finish(store, &clock, opts, &d);
            }
        }
        if rec.step < DeliveryStep::PrOpened
            && let Some(opened) = &pr
        {
            for issue in &rec.evidence.closes {
                if let Err(e) = f.comment_issue(*issue, &deliver::issue_comment(opened)) {
                    errln!("hank: warning: could not comment on issue #{issue}: {e}");
                }
            }
        }
        reached = DeliveryStep::PrOpened;
        keep(&mut rec, &d, reached)?;
    }

    let (Some(f), true) = (forge.as_deref(), wait) else {
        d.exit_reason = Some(ExitReason::Delivered);
        keep(&mut rec, &d, reached)?;
        return finish(store, &clock, opts, &d);
    };
    errln!(
        "hank: waiting for the checks of {} (CI_APPEAR_TIMEOUT {}, CI_TIMEOUT {})",
        sha.get(..12).unwrap_or(&sha),
        settings::resolve::format_duration(s.ci_appear_timeout.value),
        settings::resolve::format_duration(s.ci_timeout.value)
    );
    let w = CiWaitSettings {
        appear: s.ci_appear_timeout.value,
        total: s.ci_timeout.value,
    };
    let mut last_told: Option<jiff::Timestamp> = None;
    let mut shown = d.clone();
    let mut countdown = |c: deliver::CiCountdown, now: jiff::Timestamp| {
        // status.json's delivery shows the countdown while it lasts (when it changed).
        let before = (shown.checks_due, shown.checks_pending);
        c.show_in(&mut shown);
        if before != (shown.checks_due, shown.checks_pending)
            && let Some(mut status) = store.read_status()
        {
            status.delivery = Some(shown.clone());
            status.updated_at = now;
            let _ = store.write_status(&status);
        }
        let until = c.due;
        // A line a minute: when the verdict is due and how long is left.
        if last_told.is_none_or(|t| now.duration_since(t).as_secs() >= 60) {
            last_told = Some(now);
            let left = u64::try_from(until.duration_since(now).as_secs().max(0)).unwrap_or(0);
            errln!(
                "hank: waiting for the checks until {} — {} left",
                crate::report::short_time(until),
                crate::policy::time::format_secs(left)
            );
        }
    };
    let stopped = || stop.load(Ordering::SeqCst);
    let waited = deliver::Wall::new(None, &stopped, &mut countdown).and_then(|mut waiter| {
        crate::proc::runtime()
            .map_err(|e| HankError::Internal(format!("the CI wait: {e}")))?
            .block_on(deliver::wait_for_ci(f, &sha, pushed_at, w, &mut waiter))
    });
    let (verdict, logs) = match waited {
        Ok(Some(v)) => v,
        Ok(None) => {
            d.checks = "pending".into();
            d.exit_reason = Some(ExitReason::Interrupted);
            keep(&mut rec, &d, reached)?;
            return finish(store, &clock, opts, &d);
        }
        Err(e) => {
            d.checks = "pending".into();
            forge_failed("the checks could not be read", &e, &mut d, &mut rec);
            keep(&mut rec, &d, reached)?;
            return finish(store, &clock, opts, &d);
        }
    };
    d.exit_reason = rules::exit_of(&verdict);
    match &verdict {
        CiVerdict::Green => {
            d.checks = "green".into();
            errln!(
                "hank: every check of {} passed",
                sha.get(..12).unwrap_or(&sha)
            );
            if let Some(p) = &pr {
                if s.auto_merge.value && rules::may_arm_auto_merge(&verdict) {
                    match f.arm_auto_merge(p) {
                        Ok(()) => {
                            d.auto_merge_armed = true;
                            errln!("hank: auto-merge armed on #{}", p.number);
                        }
                        Err(e) => errln!("hank: warning: {e}"),
                    }
                }
                if s.review_loop.value {
                    let reviews = f.reviews(p)?;
                    let comments = f.review_comments(p)?;
                    d.feedback = rules::review_feedback(&reviews, &comments, 0, &secrets);
                    d.reviews_seen = rules::last_review_id(&reviews, &comments);
                    if d.feedback.is_some() {
                        errln!(
                            "hank: a reviewer asked for changes; kept for the next loop in .hank/{DELIVERY_FILE}"
                        );
                    }
                }
            }
        }
        CiVerdict::Failed { names } => {
            d.checks = "failed".into();
            d.check_names.clone_from(names);
            d.feedback = Some(rules::ci_feedback(&sha, &logs, &secrets));
            errln!("hank: checks failed: {}", names.join(", "));
        }
        CiVerdict::Missing => {
            d.checks = "missing".into();
            errln!(
                "hank: no check appeared for {} within CI_APPEAR_TIMEOUT: no CI is not green",
                sha.get(..12).unwrap_or(&sha)
            );
            errln!("hank: {}", rules::CI_MISSING_NEXT);
        }
        CiVerdict::TimedOut { pending } => {
            d.checks = "timed_out".into();
            d.check_names.clone_from(pending);
            errln!(
                "hank: checks still running at CI_TIMEOUT: {}",
                pending.join(", ")
            );
        }
        CiVerdict::Wait { .. } => {}
    }
    keep(&mut rec, &d, reached)?;
    finish(store, &clock, opts, &d)
}

/// The pull request of the record: the one it opened, or an open one of its branch, or a new
/// one with the record's evidence.
fn open_pr(f: &dyn Forge, rec: &DeliveryRecord, branch: &str) -> Result<forge::PullRequest> {
    if let (Some(number), Some(url)) = (rec.pr_number, rec.pr_url.as_ref()) {
        let found = f.find_pr(branch).ok().flatten();
        return Ok(found
            .filter(|p| p.number == number)
            .unwrap_or_else(|| forge::PullRequest {
                number,
                url: url.clone(),
                head_sha: None,
                node_id: None,
            }));
    }
    f.create_pr(&NewPullRequest {
        title: rec.evidence.title.clone(),
        body: rec.evidence.body.clone(),
        base: rec.base.clone(),
        head: branch.to_string(),
        draft: false,
    })
}
