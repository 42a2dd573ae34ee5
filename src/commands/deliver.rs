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
use crate::store::schema::{Delivery, Event, EventKind};
use crate::store::{Store, write_atomic};

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
    let path = store.dir().join(DELIVERY_FILE);
    let json = serde_json::to_vec_pretty(d).map_err(|e| HankError::Internal(e.to_string()))?;
    write_atomic(&path, &json, true).map_err(|e| HankError::io("failed to write", &path, e))?;
    // status.json of the run carries its delivery (a status hank cannot read is left alone).
    if let Some(mut status) = store.read_status() {
        status.delivery = Some(d.clone());
        status.updated_at = clock.now();
        store.write_status(&status)?;
    }
    let event = Event::new(clock.now(), EventKind::Delivery(Box::new(d.clone())));
    crate::notify::offer(&event);
    store.append_event(&event.to_line())
}

fn finish(store: &Store, clock: &SystemClock, a: &DeliverArgs, d: &Delivery) -> Result<u8> {
    record(store, clock, d)?;
    if a.json {
        let line = serde_json::to_string(d).map_err(|e| HankError::Internal(e.to_string()))?;
        out(&format!("{line}\n"))?;
    }
    Ok(d.exit_reason.map_or(exit::HALTED, ExitReason::code))
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
    let _notify = crate::notify::install(&s, crate::clock::SystemClock::from_env()?.now());
    let mode = match s.deliver.value {
        DeliverMode::None => DeliverMode::Pr,
        m => m,
    };
    let _lock = super::lock_or_hint(
        &store,
        "deliver after the run ends (the loop itself delivers with DELIVER=branch or pr)",
    )?;
    let clock = SystemClock::from_env()?;
    // From here Ctrl-C stops the git or forge command under way (its process group) and
    // ends with 130; nothing is half-written (each record is written atomically).
    let stop = interrupt_flag();
    let secrets = crate::agent::redact::secret_values();

    // The run's records, and whether its work is verified.
    let events = deliver::events_text(&store);
    let (mut ev, verified, completed) = deliver::evidence(&events);
    if !a.force {
        if ev.exit_reason.is_none() {
            return Err(HankError::usage_hint(
                "no finished run to deliver (.hank/events.jsonl has no `exit` event)",
                "run `hank run` until it completes, or pass --force to deliver the working tree as it is",
            ));
        }
        if !completed || verified == Some(false) {
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
    let url = deliver::remote_url(&dir, &remote)?;
    let base = deliver::base_branch(
        &dir,
        s.deliver_base.value.as_deref(),
        start.as_deref(),
        &branch,
        &remote,
    )?;
    let wait = s.ci_wait.value.applies(mode) && !a.no_wait;
    let forge: Option<Box<dyn Forge>> = if mode == DeliverMode::Pr || wait {
        Some(forge::detect(&dir, &url, &forge::Env::from_process())?)
    } else {
        None
    };
    ev.base = base.clone();
    ev.head = branch.clone();
    let mut d = Delivery {
        mode: mode.as_str().to_string(),
        branch: branch.clone(),
        base: base.clone(),
        remote: remote.clone(),
        checks: "not_waited".into(),
        ..Delivery::default()
    };

    deliver::prepare_branch(&dir, &branch)?;
    let title = rules::pr_title(&ev, &secrets);
    let committed = deliver::commit_all(&dir, &format!("{title}\n\nDelivered by hank."))?;
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
    let sha = deliver::head(&dir)?;
    // What is pushed is scanned, not only what hank staged: every commit the remote's base
    // does not have yet (the whole history when hank knows nothing of the remote).
    let known = deliver::scan::known_refs(&remote, &base, &branch);
    let allow = s.deliver_allow_files.value.clone().unwrap_or_default();
    let found = deliver::scan::scan(&dir, &sha, &known, &allow)?;
    if !found.hits.is_empty() {
        errln!(
            "hank: {}",
            crate::policy::secrets::refusal(&remote, &branch, &found.hits, &found.skipped)
        );
        d.exit_reason = Some(ExitReason::SecretsInCommits);
        return finish(&store, &clock, a, &d);
    }
    match deliver::push(&dir, &remote, &branch)? {
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
            return finish(&store, &clock, a, &d);
        }
    }
    let pushed_at = clock.now();
    d.head = Some(sha.clone());

    let mut pr = None;
    if let (DeliverMode::Pr, Some(f)) = (mode, forge.as_deref()) {
        let body = rules::pr_body(&ev, &secrets);
        let opened = f.create_pr(&NewPullRequest {
            title: title.clone(),
            body,
            base: base.clone(),
            head: branch.clone(),
        })?;
        errln!("hank: pull request #{} {}", opened.number, opened.url);
        for issue in rules::closed_issues(&ev.items_done) {
            if let Err(e) = f.comment_issue(issue, &deliver::issue_comment(&opened)) {
                errln!("hank: warning: could not comment on issue #{issue}: {e}");
            }
        }
        d.pr_url = Some(opened.url.clone());
        d.pr_number = Some(opened.number);
        pr = Some(opened);
    }

    let (Some(f), true) = (forge.as_deref(), wait) else {
        d.exit_reason = Some(ExitReason::Delivered);
        return finish(&store, &clock, a, &d);
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
    let Some((verdict, logs)) =
        deliver::wait_for_ci(f, &sha, pushed_at, w, &|| clock.now(), &|| {
            stop.load(Ordering::SeqCst)
        })?
    else {
        d.checks = "pending".into();
        d.exit_reason = Some(ExitReason::Interrupted);
        return finish(&store, &clock, a, &d);
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
    finish(&store, &clock, a, &d)
}
