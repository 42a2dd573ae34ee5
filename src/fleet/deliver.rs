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
//! - **A change set** (`--deliver pr` in a workspace of several repositories, issue 51): the
//!   tasks do not deliver; once every task is merged, the integration branch of each
//!   repository the tasks changed is delivered as one change set ([`change_set()`],
//!   `deliver::change_set`): one pull request per repository, opened in dependency order,
//!   linked to each other, delivered only when all are green. Per-task delivery is refused
//!   there ([`FleetDelivery::of_workspace`]).

use std::path::{Path, PathBuf};

use crate::deliver::drive::{Branch, DeliveryEffects, Place, RealGit, World};
use crate::deliver::{self, CiWaitSettings, Waiter, change_set};
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::forge;
use crate::policy::deliver::machine::{Config, Event, Machine, Said, Source};
use crate::policy::deliver::{self as rules};
use crate::policy::fleet::TaskSpec;
use crate::settings::{DeliverMode, Settings};
use crate::store::schema::{Delivery, DeliveryEvidence, FleetFile};

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
    /// In a workspace of several repositories: one change set of the integration branches,
    /// one pull request per repository the tasks changed ([`change_set()`]).
    ChangeSet {
        /// The repositories in delivery order, each with the tasks that change it.
        repos: Vec<change_set::RepoPlan>,
        /// `CI_WAIT` and DELIVER_ALLOW_FILES.
        opts: change_set::SetOpts,
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

    /// From the settings in a workspace of several repositories (`ws`, the plan's `tasks`):
    /// `--deliver pr` (with or without `--into`) delivers the change set of the integration
    /// branches at the fleet's end; per-task delivery (`--deliver branch`, a pull request
    /// per task) is refused there — a task's branch spans repositories, and the set links
    /// one pull request per repository instead.
    ///
    /// # Errors
    /// `--deliver branch`; the tasks' order has a cycle.
    pub fn of_workspace(
        s: &Settings,
        ws: &crate::policy::workspace::Workspace,
        tasks: &[TaskSpec],
    ) -> Result<Self> {
        match s.deliver.value {
            DeliverMode::None => Ok(Self::None),
            DeliverMode::Branch => Err(HankError::usage_hint(
                format!(
                    "hank fleet --deliver branch: in a workspace of several repositories ({}), the fleet delivers one change set of its integration branches, not each task's branch",
                    ws.names()
                ),
                "use --deliver pr (one linked pull request per repository, opened at the fleet's end), or --deliver none and push the integration branches yourself",
            )),
            DeliverMode::Pr => Ok(Self::ChangeSet {
                repos: change_set::plan_of(ws, tasks)?,
                opts: change_set::SetOpts {
                    wait: s
                        .ci_wait
                        .value
                        .applies(DeliverMode::Pr)
                        .then_some(CiWaitSettings {
                            appear: s.ci_appear_timeout.value,
                            total: s.ci_timeout.value,
                        }),
                    allow_files: s.deliver_allow_files.value.clone().unwrap_or_default(),
                },
            }),
        }
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
            Self::Integration { .. } | Self::ChangeSet { .. } => {
                rules::fleet_worker_flags(user, "none", None)
            }
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
/// the fleet's records, waits for its checks — the delivery machine with the fleet's host on
/// `clock` (the fleet's effects' clock: [`deliver::Wall`] with the fleet's signal counter in
/// `hank fleet`). Returns the fleet's exit code (0 `delivered`, 2 `push_rejected` /
/// `ci_failed` / `ci_missing`, 3 `ci_timeout`, 130 interrupted) and records the delivery in
/// `.hank/delivery.json`.
///
/// # Errors
/// git cannot run, the forge cannot be asked.
pub async fn integration(
    root: &Path,
    into: &str,
    delivery: &FleetDelivery,
    file: &FleetFile,
    clock: &mut dyn Waiter,
) -> Result<Option<u8>> {
    if let FleetDelivery::ChangeSet { repos, opts } = delivery {
        return change_set(root, into, repos, opts, file, clock)
            .await
            .map(Some);
    }
    let FleetDelivery::Integration {
        base,
        remote,
        wait,
        allow_files,
    } = delivery
    else {
        return Ok(None);
    };
    let url = deliver::remote_url(root, remote)?;
    let forge = forge::detect(root, &url, &forge::Env::from_process())?;
    let world = World {
        dir: root.to_path_buf(),
        place: Place {
            branch: into.to_string(),
            base: base.clone(),
            remote: remote.clone(),
        },
        branch: Branch::AsItIs,
        allow_files: allow_files.clone(),
        git: std::sync::Arc::new(RealGit),
        forge: Some(forge),
        pr: None,
    };
    let record_file = deliver::record::path(root)?;
    let code = pull_request(world, *wait, file, clock, record_file).await?;
    Ok(Some(code))
}

/// A fleet over a workspace of several repositories, every task merged: the change set of
/// its integration branch `into` in each of `repos` (delivery order, each with the tasks
/// that changed it) — pushed, one pull request per repository opened in order, each body
/// its tasks' records and the links to the others, the checks of every pushed commit
/// waited for (`opts.wait`, fail closed) — on `clock`, recorded in `.hank/change-set.json`.
/// A set of the same branch and repositories that is not delivered (a stop, a red check
/// whose branches were fixed since) is resumed rather than opened again. Returns the
/// fleet's exit code: 0 delivered, 2 a red check (the repository, its pull request and
/// findings said), 1 stopped at a step (named; `hank deliver` resumes), 3 `ci_timeout`, 130
/// interrupted.
///
/// # Errors
/// A repository's `origin` or forge login is missing (before anything moves), git cannot
/// run, the record cannot be written.
pub async fn change_set(
    root: &Path,
    into: &str,
    repos: &[change_set::RepoPlan],
    opts: &change_set::SetOpts,
    file: &FleetFile,
    clock: &mut dyn Waiter,
) -> Result<u8> {
    let lines = change_set::task_lines(file);
    let set = change_set::start_or_resume(root, into, repos, &lines, true)?;
    let (_, code) = change_set::deliver(root, set, opts, clock, "hank: fleet: ").await?;
    Ok(code)
}

/// The integration branch's pull request (`world`): the delivery machine driven on `clock`,
/// its record saved at `record_file` (the per-user record); the fleet's exit code.
async fn pull_request(
    world: World,
    wait: Option<CiWaitSettings>,
    file: &FleetFile,
    clock: &mut dyn Waiter,
    record_file: PathBuf,
) -> Result<u8> {
    let secrets = crate::agent::redact::secret_values();
    let p = &world.place;
    let rec = record_of(&p.branch, &p.base, &p.remote, file, &secrets);
    let cfg = Config {
        source: Source::Fleet,
        pr: true,
        ci: wait.map(|w| w.limits()),
        auto_merge: false,
        review_loop: false,
        push_retry_waits: Vec::new(),
        secrets,
    };
    let mut host = Integration {
        clock,
        world,
        record_file,
    };
    let mut m = Machine::new(cfg, rec);
    let first = Event::Begin {
        reason: ExitReason::Delivered,
        evidence: None,
    };
    deliver::drive::drive(&mut m, &mut host, first).await?;
    Ok(m.record
        .exit_reason
        .map_or(crate::exit::HALTED, ExitReason::code))
}

/// The fleet's host of the delivery machine: the fleet's clock, the per-user record, the
/// verdict shown at the end, its steps said as `hank: fleet: …`.
struct Integration<'a> {
    clock: &'a mut dyn Waiter,
    world: World,
    record_file: PathBuf,
}

impl Waiter for Integration<'_> {
    fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    fn sleep(&mut self, d: std::time::Duration) -> deliver::WaitFut<'_> {
        self.clock.sleep(d)
    }

    fn tick(&mut self, countdown: deliver::Countdown, now: jiff::Timestamp) -> bool {
        self.clock.tick(countdown, now)
    }
}

impl DeliveryEffects for Integration<'_> {
    fn save(&mut self, d: &Delivery) -> Result<()> {
        let now = self.clock.now();
        deliver::record::save_at(&self.record_file, &mut d.clone(), now)
    }

    /// As `hank deliver` tells it: delivery.json, the `delivery` event, NOTIFY.
    fn tell(&mut self, d: &Delivery) -> Result<()> {
        errln!("hank: fleet: {}", d.line());
        let store = crate::store::Store::new(&self.world.dir);
        deliver::tell_outside_run(&store, self.clock.now(), d)
    }

    fn say(&mut self, said: &Said, d: &Delivery) {
        match said {
            Said::SecretsRefused(text) => errln!("hank: fleet: {text}"),
            Said::PushRejected(output) => errln!(
                "hank: fleet: the push of {} to {} was rejected:\n{output}",
                d.branch,
                d.remote
            ),
            Said::PrOpened => errln!(
                "hank: fleet: pull request #{} {}",
                d.pr_number.unwrap_or_default(),
                d.pr_url.as_deref().unwrap_or_default()
            ),
            Said::WaitingForChecks => errln!("hank: fleet: {}", d.line()),
            Said::ForgeFailed => {
                errln!("hank: fleet: {}", d.error.as_deref().unwrap_or_default());
                errln!(
                    "hank: fleet: the branch is pushed; `hank deliver` finishes the delivery from there"
                );
            }
            _ => {}
        }
    }

    fn world(&mut self) -> &mut World {
        &mut self.world
    }
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
) -> Delivery {
    let tasks = change_set::task_lines(file);
    // The delivery record (as a single run's, `deliver::record`): a delivery that stops
    // part-way — the forge refusing the pull request, its checks unreadable, a Ctrl-C — is
    // finished by `hank deliver` from the step it reached.
    Delivery {
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
        ..Delivery::default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use jiff::{SignedDuration, Timestamp};

    use super::*;
    use crate::deliver::scripted::{SHA, ScriptedGit};
    use crate::forge::scripted::{ScriptedForge, pending_then};
    use crate::policy::deliver::CheckState;

    /// A fixed clock: it stands at its time, and moves only by what is slept.
    struct Fixed {
        now: Timestamp,
        slept: Duration,
    }

    impl Waiter for Fixed {
        fn now(&self) -> Timestamp {
            self.now
        }
        fn sleep(&mut self, d: Duration) -> deliver::WaitFut<'_> {
            self.slept += d;
            self.now += SignedDuration::try_from(d).unwrap();
            Box::pin(async { false })
        }
        fn tick(&mut self, _countdown: deliver::Countdown, _now: Timestamp) -> bool {
            false
        }
    }

    /// In a workspace of several repositories: `--deliver pr` is the change set of the
    /// integration branches (api first, as the plan's order says; workers deliver nothing),
    /// `--deliver branch` is refused naming the repositories.
    #[test]
    fn a_workspace_of_several_delivers_a_change_set_and_refuses_per_task_delivery() {
        use crate::policy::workspace::{Entry, of_entries};
        let dir = tempfile::tempdir().unwrap();
        let entry = |name: &str| Entry {
            name: name.into(),
            path: format!("../{name}"),
            ..Entry::default()
        };
        let ws = of_entries(vec![entry("web"), entry("api")], dir.path(), "f").unwrap();
        let plan =
            "## UI (repos: web; after: Endpoint)\n- [ ] a\n## Endpoint (repos: api)\n- [ ] b\n";
        let tasks = crate::policy::fleet::tasks_from_plan(plan, &[]).unwrap();
        let settings = |mode: &str| {
            let flags = crate::settings::Flags {
                deliver: Some(mode.into()),
                ..crate::settings::Flags::default()
            };
            crate::settings::load(&flags, dir.path()).unwrap()
        };
        let d = FleetDelivery::of_workspace(&settings("pr"), &ws, &tasks).unwrap();
        let FleetDelivery::ChangeSet { repos, opts } = &d else {
            panic!("{d:?}");
        };
        let names: Vec<(&str, &[String])> = repos
            .iter()
            .map(|r| (r.name.as_str(), r.tasks.as_slice()))
            .collect();
        assert_eq!(
            names,
            [
                ("api", &["Endpoint".to_string()][..]),
                ("web", &["UI".to_string()][..])
            ]
        );
        assert!(opts.wait.is_some(), "CI_WAIT=auto waits with pr");
        let flags = d.worker_flags(&[], &tasks[0], &tasks);
        assert_eq!(flags, ["--deliver", "none"]);
        let err = FleetDelivery::of_workspace(&settings("branch"), &ws, &tasks).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("--deliver branch") && text.contains("api, web"),
            "{text}"
        );
        assert_eq!(
            FleetDelivery::of_workspace(&settings("none"), &ws, &tasks).unwrap(),
            FleetDelivery::None
        );
    }

    /// The fleet's integration pull request waits out a 25-minute CI on the clock it is
    /// given, not the wall clock: the verdict is stamped on the fixed clock, 100 pending looks
    /// 15 s apart after the push, and nothing really slept.
    #[test]
    fn the_integration_pull_request_waits_for_ci_on_the_fleets_clock() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".hank")).unwrap();
        let git = Arc::new(ScriptedGit::default());
        let forge = ScriptedForge::new(SHA, pending_then(100, CheckState::Passed));
        let (looks, opened) = (Arc::clone(&forge.looks), Arc::clone(&forge.opened));
        let world = World {
            dir: dir.path().to_path_buf(),
            place: Place {
                branch: "hank-int".into(),
                base: "main".into(),
                remote: "origin".into(),
            },
            branch: Branch::AsItIs,
            allow_files: Vec::new(),
            git: Arc::clone(&git) as Arc<dyn deliver::drive::DeliverGit>,
            forge: Some(Box::new(forge)),
            pr: None,
        };
        let wait = CiWaitSettings {
            appear: Duration::from_secs(600),
            total: Duration::from_secs(1800),
        };
        let start = Timestamp::from_second(1_900_000_000).unwrap();
        let mut clock = Fixed {
            now: start,
            slept: Duration::ZERO,
        };
        let record_file = dir.path().join("delivery-record.json");
        let file = FleetFile {
            into: "hank-int".into(),
            ..FleetFile::default()
        };
        let runtime = crate::proc::runtime().unwrap();
        let real_start = std::time::Instant::now();

        let code = runtime
            .block_on(pull_request(
                world,
                Some(wait),
                &file,
                &mut clock,
                record_file.clone(),
            ))
            .unwrap();

        assert_eq!(code, 0, "delivered");
        assert_eq!(
            *git.calls.lock().unwrap(),
            vec![
                "head of hank-int".to_string(),
                format!("scan {SHA}"),
                "push branch origin hank-int".into()
            ]
        );
        assert_eq!(opened.lock().unwrap().len(), 1, "one pull request");
        assert_eq!(*looks.lock().unwrap(), 101, "100 pending looks, then green");
        assert_eq!(clock.slept, Duration::from_secs(25 * 60));
        assert!(
            real_start.elapsed() < Duration::from_secs(60),
            "nothing really slept"
        );
        let saved: Delivery =
            serde_json::from_slice(&std::fs::read(&record_file).unwrap()).unwrap();
        assert_eq!(saved.checks, "green");
        assert_eq!(saved.exit_reason, Some(ExitReason::Delivered));
        assert!(saved.fleet);
        assert_eq!(saved.at, Some(start + SignedDuration::from_mins(25)));
        let shown: Delivery =
            serde_json::from_slice(&std::fs::read(dir.path().join(".hank/delivery.json")).unwrap())
                .unwrap();
        assert_eq!(shown.head.as_deref(), Some(SHA));
    }
}
