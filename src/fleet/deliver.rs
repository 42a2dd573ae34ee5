//! `hank fleet --deliver branch|pr`: how a fleet's work leaves the machine.
//!
//! - **One pull request per task** (`--deliver pr`, no `--into`; or `--deliver branch`): each
//!   task's worker is a `hank run --deliver MODE --base BASE` in its worktree, so it delivers
//!   its own verified completion on `hank/<slug>` exactly as a single run does (commit,
//!   push, pull request with its evidence, its checks, the rounds back to its agent). The
//!   base of a task that comes after another is that task's branch
//!   ([`rules::fleet_task_base`]): its worktree starts from the integration branch after that
//!   task's merge, so against `main` its PR would repeat the other task's changes; against
//!   the other task's branch it shows its own, and GitHub retargets it when that branch is
//!   merged and deleted. Every other task targets the branch the fleet started from. The
//!   fleet still merges each delivered task into the integration branch (conflicts and the
//!   check on the merge result go back to the task's agent, as without delivery).
//! - **One pull request for the integration branch** (`--deliver pr --into X`): the tasks do
//!   not deliver (`--deliver none`); once every task is merged into `X`, the fleet pushes `X`
//!   and opens one pull request against the branch it started from, whose body is the
//!   fleet's records ([`rules::fleet_pr_body`]), then waits for the checks of exactly the
//!   pushed commit (`CI_WAIT`, fail closed): the fleet's exit is the verdict.

use std::path::Path;

use crate::clock::SystemClock;
use crate::deliver::{self, CiWaitSettings, Push};
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::forge::{self, NewPullRequest};
use crate::policy::deliver::{self as rules, CiVerdict, FleetTaskLine};
use crate::policy::fleet::TaskSpec;
use crate::policy::time::Clock;
use crate::settings::{DeliverMode, Settings};
use crate::store::schema::{Delivery, DeliveryEvidence, DeliveryRecord, DeliveryStep, FleetFile};

/// How a fleet delivers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FleetDelivery {
    /// The work stays on the integration branch (the default).
    #[default]
    None,
    /// Each task delivers its own branch (`mode`); tasks that come after no other target
    /// `base`.
    PerTask { mode: DeliverMode, base: String },
    /// One pull request of the integration branch against `base`.
    Integration {
        base: String,
        remote: String,
        wait: Option<CiWaitSettings>,
        /// DELIVER_ALLOW_FILES: paths the scan of the pushed commits lets through.
        allow_files: Vec<String>,
    },
}

impl FleetDelivery {
    /// From the settings (`DELIVER`, `DELIVER_BASE`, `DELIVER_REMOTE`, `CI_*`) and whether
    /// `--into` was given: checked before any task starts (a git repository on a branch, the
    /// remote).
    ///
    /// # Errors
    /// No remote, or no branch to target.
    pub fn of(s: &Settings, root: &Path, explicit_into: bool) -> Result<Self> {
        let mode = s.deliver.value;
        if mode == DeliverMode::None {
            return Ok(Self::None);
        }
        let remote = s.deliver_remote.value.clone();
        deliver::remote_url(root, &remote)?;
        let base = match s.deliver_base.value.clone() {
            Some(b) => b,
            None => deliver::current_branch(root)?.ok_or_else(|| {
                HankError::usage_hint(
                    "hank fleet --deliver: the checkout is on a detached HEAD, so the pull requests have no branch to target",
                    "check out the branch they should target, or set DELIVER_BASE / --base NAME",
                )
            })?,
        };
        Ok(if mode == DeliverMode::Pr && explicit_into {
            Self::Integration {
                base,
                remote,
                wait: s.ci_wait.value.applies(mode).then_some(CiWaitSettings {
                    appear: s.ci_appear_timeout.value,
                    total: s.ci_timeout.value,
                }),
                allow_files: s.deliver_allow_files.value.clone().unwrap_or_default(),
            }
        } else {
            Self::PerTask { mode, base }
        })
    }

    /// The `hank run` flags of `spec`'s worker.
    #[must_use]
    pub fn worker_flags(
        &self,
        user: &[String],
        spec: &TaskSpec,
        tasks: &[TaskSpec],
    ) -> Vec<String> {
        match self {
            Self::None => user.to_vec(),
            Self::Integration { .. } => rules::fleet_worker_flags(user, "none", None),
            Self::PerTask { mode, base } => {
                let after: Vec<&str> = spec
                    .after
                    .iter()
                    .filter_map(|a| tasks.iter().find(|t| t.name == *a))
                    .map(|t| t.slug.as_str())
                    .collect();
                let base = if *mode == DeliverMode::Pr {
                    rules::fleet_task_base(&after, base)
                } else {
                    base.clone()
                };
                rules::fleet_worker_flags(user, mode.as_str(), Some(&base))
            }
        }
    }
}

/// `--deliver pr --into X` after every task merged: pushes `into`, opens its pull request with
/// the fleet's records, waits for its checks. Returns the fleet's exit code (0 `delivered`, 2
/// `push_rejected` / `ci_failed` / `ci_missing`, 3 `ci_timeout`, 130 interrupted) and
/// records the delivery in `.hank/delivery.json`.
///
/// # Errors
/// git cannot run, the forge cannot be asked.
pub async fn integration(
    root: &Path,
    into: &str,
    delivery: &FleetDelivery,
    file: &FleetFile,
    cancel: &mut tokio::sync::watch::Receiver<u32>,
) -> Result<Option<u8>> {
    let FleetDelivery::Integration {
        base,
        remote,
        wait,
        allow_files,
    } = delivery
    else {
        return Ok(None);
    };
    let secrets = crate::agent::redact::secret_values();
    let clock = SystemClock::from_env()?;
    let mut d = Delivery {
        mode: "pr".into(),
        branch: into.to_string(),
        base: base.clone(),
        remote: remote.clone(),
        checks: "not_waited".into(),
        ..Delivery::default()
    };
    let url = deliver::remote_url(root, remote)?;
    let forge = forge::detect(root, &url, &forge::Env::from_process())?;
    let mut rec = record_of(into, base, remote, file, &secrets);
    let keep = |rec: &mut DeliveryRecord, d: &Delivery, reached: DeliveryStep| -> Result<()> {
        deliver::record::keep(root, rec, d, reached, clock.now())
    };
    keep(&mut rec, &d, DeliveryStep::Started)?;
    if let Some(stopped) = scan_and_push(root, (remote, base, into), allow_files, &secrets)? {
        d.exit_reason = Some(stopped);
        keep(&mut rec, &d, DeliveryStep::Started)?;
        return finish(root, &d);
    }
    let sha = deliver::branch_head(root, into)?;
    let pushed_at = clock.now();
    d.head = Some(sha.clone());
    keep(&mut rec, &d, DeliveryStep::Pushed)?;
    let pr = match forge.create_pr(&NewPullRequest {
        title: rec.evidence.title.clone(),
        body: rec.evidence.body.clone(),
        base: base.clone(),
        head: into.to_string(),
        draft: false,
    }) {
        Ok(pr) => pr,
        Err(e) => {
            forge_failed("the pull request could not be opened", &e, &mut d);
            keep(&mut rec, &d, DeliveryStep::Pushed)?;
            return finish(root, &d);
        }
    };
    d.pr_url = Some(pr.url.clone());
    d.pr_number = Some(pr.number);
    errln!("hank: fleet: pull request #{} {}", pr.number, pr.url);
    let Some(w) = wait else {
        d.exit_reason = Some(ExitReason::Delivered);
        keep(&mut rec, &d, DeliveryStep::PrOpened)?;
        return finish(root, &d);
    };
    d.checks = "pending".into();
    keep(&mut rec, &d, DeliveryStep::PrOpened)?;
    errln!("hank: fleet: {}", d.line());
    let mut told = |_, _| {};
    let mut waiter = deliver::Wall::new(Some(cancel.clone()), &|| false, &mut told)?;
    let waited = deliver::wait_for_ci(forge.as_ref(), &sha, pushed_at, *w, &mut waiter).await;
    let verdict = match waited {
        Ok(Some((verdict, _logs))) => verdict,
        Ok(None) => {
            d.exit_reason = Some(ExitReason::Interrupted);
            keep(&mut rec, &d, DeliveryStep::PrOpened)?;
            return finish(root, &d);
        }
        Err(e) => {
            forge_failed("the checks could not be read", &e, &mut d);
            keep(&mut rec, &d, DeliveryStep::PrOpened)?;
            return finish(root, &d);
        }
    };
    d.exit_reason = rules::exit_of(&verdict);
    checks_of(&verdict, &mut d);
    keep(&mut rec, &d, DeliveryStep::PrOpened)?;
    finish(root, &d)
}

/// What is pushed is scanned (every commit of `into` the remote's `base` does not have), then
/// pushed: `Some(reason)` when the scan or the push stopped the delivery (said on stderr).
fn scan_and_push(
    root: &Path,
    (remote, base, into): (&str, &str, &str),
    allow_files: &[String],
    secrets: &[String],
) -> Result<Option<ExitReason>> {
    let tip = format!("refs/heads/{into}");
    let known = deliver::scan::known_on_remote(root, remote, base, into)?;
    let found = deliver::scan::scan(root, &tip, &known, allow_files)?;
    if !found.hits.is_empty() {
        errln!(
            "hank: fleet: {}",
            crate::policy::secrets::refusal(remote, into, &found.hits, &found.skipped)
        );
        return Ok(Some(ExitReason::SecretsInCommits));
    }
    if let Push::Rejected { output } = deliver::push_branch(root, remote, into)? {
        errln!(
            "hank: fleet: the push of {into} to {remote} was rejected:\n{}",
            rules::clean(&output, secrets, rules::MAX_HOOK_OUTPUT_CHARS)
        );
        return Ok(Some(ExitReason::PushRejected));
    }
    Ok(None)
}

/// The delivery record of the integration branch's pull request, its evidence the fleet's
/// tasks. A delivery that stops part-way — the forge refusing the pull request, its checks
/// unreadable, a Ctrl-C — is finished by `hank deliver` from the step it reached.
fn record_of(
    into: &str,
    base: &str,
    remote: &str,
    file: &FleetFile,
    secrets: &[String],
) -> DeliveryRecord {
    let tasks: Vec<FleetTaskLine> = file
        .tasks
        .iter()
        .map(|t| FleetTaskLine {
            name: t.name.clone(),
            state: format!("{:?}", t.state).to_ascii_lowercase(),
            loops: t.loops,
            cost_usd: t.cost_usd,
            message: t.message.clone(),
        })
        .collect();
    // The delivery record (as a single run's, `deliver::record`): a delivery that stops
    // part-way — the forge refusing the pull request, its checks unreadable, a Ctrl-C — is
    // finished by `hank deliver` from the step it reached.
    DeliveryRecord {
        mode: "pr".into(),
        branch: into.to_string(),
        base: base.to_string(),
        remote: remote.to_string(),
        fleet: true,
        evidence: DeliveryEvidence {
            title: rules::clean(
                &format!("hank fleet: {} task(s) into {into}", tasks.len()),
                secrets,
                200,
            ),
            body: rules::fleet_pr_body(into, base, &tasks, secrets),
            cost_usd: file.tasks.iter().map(|t| t.cost_usd).sum(),
            ..DeliveryEvidence::default()
        },
        ..DeliveryRecord::default()
    }
}

/// The checks' verdict in the delivery's `checks` and `check_names`.
fn checks_of(verdict: &CiVerdict, d: &mut Delivery) {
    match verdict {
        CiVerdict::Green => d.checks = "green".into(),
        CiVerdict::Failed { names } => {
            d.checks = "failed".into();
            d.check_names.clone_from(names);
        }
        CiVerdict::Missing => d.checks = "missing".into(),
        CiVerdict::TimedOut { pending } => {
            d.checks = "timed_out".into();
            d.check_names.clone_from(pending);
        }
        CiVerdict::Wait { .. } => {}
    }
}

/// A forge step of the fleet's delivery failed: `forge_failed` with the forge's own error;
/// the record keeps the step reached, for `hank deliver`.
fn forge_failed(what: &str, e: &HankError, d: &mut Delivery) {
    let error = format!("{what}: {}", crate::sanitize::line(&e.to_string()));
    errln!("hank: fleet: {error}");
    errln!("hank: fleet: the branch is pushed; `hank deliver` finishes the delivery from there");
    d.exit_reason = Some(ExitReason::ForgeFailed);
    d.error = Some(error);
}

fn finish(root: &Path, d: &Delivery) -> Result<Option<u8>> {
    errln!("hank: fleet: {}", d.line());
    // As `hank deliver` tells it: delivery.json, the `delivery` event, NOTIFY.
    let now = crate::policy::time::Clock::now(&SystemClock::from_env()?);
    deliver::tell_outside_run(&crate::store::Store::new(root), now, d)?;
    Ok(Some(
        d.exit_reason.map_or(crate::exit::HALTED, ExitReason::code),
    ))
}
