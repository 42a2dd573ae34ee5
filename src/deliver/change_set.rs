//! The delivery of a change set (issue 51): the driver of the pure machine
//! [`crate::policy::deliver::change_set`] over each repository's git ([`DeliverGit`]) and forge
//! ([`Forge`]) — one [`Door`] per repository —, its record `.hank/change-set.json`
//! ([`ChangeSet`]) saved atomically (0600) after every step.
//!
//! Two hosts run it: a fleet over a workspace of several repositories at its end
//! (`fleet::deliver::change_set`: each repository's integration branch), and `hank deliver`,
//! which resumes a set that is not delivered from its record ([`load`]) — from any step: a
//! repository already pushed and opened is not pushed or opened again, a body already
//! linked is not edited again, a green pull request is not waited for again unless its
//! branch moved.
//!
//! Why its own file rather than `fleet.json`: the set outlives the fleet's run (`hank
//! deliver` resumes it without the fleet), and its writer is the set's machine, not the
//! fleet's (whose file only the fleet machine writes).
//!
//! Each repository's forge is the workspace's `forge = "[HOST/]OWNER/NAME"` when it names
//! one, else its `origin`'s URL; `GH_REPO` names one repository and does not apply across a
//! set. The token rules are [`crate::forge::detect`]'s.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::drive::{DeliverGit, Place, RealGit};
use super::{CiWaitSettings, Countdown, Push, Waiter};
use crate::error::{HankError, Result};
use crate::exit::{ERROR, ExitReason};
use crate::forge::{self, Forge, NewPullRequest};
use crate::policy::deliver::change_set::{Command, Config, Event, Machine, Said};
use crate::policy::deliver::{self as rules, FleetTaskLine};
use crate::store::schema::{CHANGE_SET_SCHEMA, ChangeSet, ChangeSetRepo, SetState};

/// The record's file name under `.hank/`.
pub const FILE: &str = "change-set.json";

/// `.hank/change-set.json` of `root`.
#[must_use]
pub fn path(root: &Path) -> PathBuf {
    root.join(".hank").join(FILE)
}

/// The project's change set, when there is one that reads (one that does not is never
/// resumed).
#[must_use]
pub fn load(root: &Path) -> Option<ChangeSet> {
    let bytes = crate::fsread::read(
        &path(root),
        crate::fsread::STATE_LIMIT,
        crate::fsread::Follow::No,
    )
    .ok()?;
    serde_json::from_slice::<ChangeSet>(&bytes)
        .ok()
        .filter(|s| s.schema_version == CHANGE_SET_SCHEMA)
}

/// Writes the record atomically (0600).
///
/// # Errors
/// It cannot be written.
pub fn save(root: &Path, set: &ChangeSet) -> Result<()> {
    let p = path(root);
    let json = serde_json::to_vec_pretty(set).map_err(|e| HankError::Internal(e.to_string()))?;
    crate::store::write_atomic(&p, &json, true).map_err(|e| HankError::io("failed to write", &p, e))
}

/// One repository of a new set, as the workspace and the plan give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoPlan {
    pub name: String,
    /// Its checkout.
    pub dir: PathBuf,
    /// The workspace's `forge`.
    pub forge: Option<String>,
    /// The workspace's `base` (else the branch its checkout is on).
    pub base: Option<String>,
    /// The tasks that change it ([`crate::policy::workspace::changed_by`]).
    pub tasks: Vec<String>,
    /// Lines added at the end of its pull request's body (`hank watch`: the issue it
    /// delivers, `Closes #N` in the tracker's own repository, `Part of URL` elsewhere).
    pub trailer: Vec<String>,
}

/// The repositories of a workspace that `tasks` change, in delivery order, each with the
/// tasks that change it.
///
/// # Errors
/// The tasks' order has a cycle.
pub fn plan_of(
    ws: &crate::policy::workspace::Workspace,
    tasks: &[crate::policy::fleet::TaskSpec],
) -> Result<Vec<RepoPlan>> {
    let order = crate::policy::workspace::delivery_order(tasks, ws).map_err(HankError::usage)?;
    Ok(order
        .iter()
        .filter_map(|name| ws.repo(name))
        .map(|r| RepoPlan {
            name: r.name.clone(),
            dir: r.path.clone(),
            forge: r.forge.clone(),
            base: r.base.clone(),
            tasks: crate::policy::workspace::changed_by(tasks, ws, &r.name),
            trailer: Vec::new(),
        })
        .collect())
}

/// A new change set delivering branch `into` of each of `repos`, its bodies the records of
/// each repository's tasks among `lines` (the fleet's).
///
/// # Errors
/// A repository's checkout is on a detached HEAD and the workspace names no base.
pub fn fresh(
    into: &str,
    repos: &[RepoPlan],
    lines: &[FleetTaskLine],
    fleet: bool,
    secrets: &[String],
) -> Result<ChangeSet> {
    let mut out = Vec::new();
    for r in repos {
        let base = match &r.base {
            Some(b) => b.clone(),
            None => super::current_branch(&r.dir)
                .map_err(|e| in_repo(&r.name, e))?
                .ok_or_else(|| {
                    HankError::usage_hint(
                        format!(
                            "repository {:?}: its checkout is on a detached HEAD, so its pull request has no base",
                            r.name
                        ),
                        "set `base = \"main\"` in its [repos.NAME] table of .hank/workspace.toml",
                    )
                })?,
        };
        let own: Vec<FleetTaskLine> = lines
            .iter()
            .filter(|l| r.tasks.contains(&l.name))
            .cloned()
            .collect();
        out.push(ChangeSetRepo {
            name: r.name.clone(),
            dir: r.dir.display().to_string(),
            forge: r.forge.clone(),
            remote: "origin".into(),
            branch: into.to_string(),
            base: base.clone(),
            tasks: r.tasks.clone(),
            title: rules::clean(
                &format!("hank: {} ({})", r.tasks.join(", "), r.name),
                secrets,
                200,
            ),
            body: with_trailer(
                rules::fleet_pr_body(into, &base, &own, secrets),
                &r.trailer,
                secrets,
            ),
            checks: "not_waited".into(),
            ..ChangeSetRepo::default()
        });
    }
    Ok(ChangeSet {
        schema_version: CHANGE_SET_SCHEMA,
        into: into.to_string(),
        fleet,
        repos: out,
        ..ChangeSet::default()
    })
}

/// `body` with `trailer`'s lines after a blank line (none: `body` as it is).
fn with_trailer(mut body: String, trailer: &[String], secrets: &[String]) -> String {
    if trailer.is_empty() {
        return body;
    }
    body.push('\n');
    for line in trailer {
        body.push_str(&rules::clean(line, secrets, 500));
        body.push('\n');
    }
    body
}

/// The fleet's tasks as its pull request bodies show them.
#[must_use]
pub fn task_lines(file: &crate::store::schema::FleetFile) -> Vec<FleetTaskLine> {
    file.tasks
        .iter()
        .map(|t| FleetTaskLine {
            name: t.name.clone(),
            state: format!("{:?}", t.state()).to_ascii_lowercase(),
            loops: t.loops,
            cost_usd: t.cost_usd,
            message: t.message.clone(),
        })
        .collect()
}

/// The set to deliver for branch `into` of `repos`: the stored one when it delivers the same
/// branch of the same repositories and is not delivered (its pull requests, pushes and links
/// kept: a fix round, a resumed stop), else a new one ([`fresh`]).
///
/// # Errors
/// As [`fresh`].
pub fn start_or_resume(
    root: &Path,
    into: &str,
    repos: &[RepoPlan],
    lines: &[FleetTaskLine],
    fleet: bool,
) -> Result<ChangeSet> {
    let names: Vec<&str> = repos.iter().map(|r| r.name.as_str()).collect();
    let stored = load(root).filter(|s| {
        s.resumable()
            && s.into == into
            && s.repos
                .iter()
                .map(|r| r.name.as_str())
                .eq(names.iter().copied())
    });
    if let Some(set) = stored {
        return Ok(set);
    }
    fresh(
        into,
        repos,
        lines,
        fleet,
        &crate::agent::redact::secret_values(),
    )
}

/// `hank deliver --change-set INTO`: the set of the project's workspace (`.hank/workspace.toml`)
/// for the plan's tasks, each repository's branch `into`, its bodies the fleet's records
/// (`.hank/fleet.json`, when there is one) — what a fleet over the workspace delivers at its
/// end.
///
/// # Errors
/// No workspace file, a plan that does not read, a repository not usable.
pub fn of_workspace(root: &Path, s: &crate::settings::Settings, into: &str) -> Result<ChangeSet> {
    let ws = crate::workspace::load(root)?.ok_or_else(|| {
        HankError::usage_hint(
            format!(
                "--change-set: {} has no {}",
                root.display(),
                crate::workspace::FILE
            ),
            "a change set spans the repositories a workspace names",
        )
    })?;
    let plan = s
        .read_fix_plan()
        .ok_or_else(|| HankError::usage("--change-set: cannot read .hank/fix_plan.md"))?;
    let tasks = crate::policy::fleet::tasks_from_plan(&plan, &s.optional_sections.value)
        .map_err(|e| HankError::usage(format!(".hank/fix_plan.md: {e}")))?;
    let repos = plan_of(&ws, &tasks)?;
    // The fleet's records when they read (the fleet reads its own file; delivery names no
    // fleet module).
    let file: crate::store::schema::FleetFile = crate::fsread::read(
        &root.join(".hank/fleet.json"),
        crate::fsread::STATE_LIMIT,
        crate::fsread::Follow::No,
    )
    .ok()
    .and_then(|b| serde_json::from_slice(&b).ok())
    .unwrap_or_default();
    start_or_resume(root, into, &repos, &task_lines(&file), true)
}

/// `e` with the repository named.
fn in_repo(name: &str, e: HankError) -> HankError {
    match e {
        HankError::Usage { message, hint } => HankError::Usage {
            message: format!("repository {name:?}: {message}"),
            hint,
        },
        other => HankError::Tool(format!("repository {name:?}: {other}")),
    }
}

/// One repository's git and forge.
pub struct Door {
    pub dir: PathBuf,
    pub place: Place,
    /// DELIVER_ALLOW_FILES.
    pub allow_files: Vec<String>,
    pub git: Arc<dyn DeliverGit>,
    pub forge: Box<dyn Forge>,
}

/// The doors of `set`'s repositories through `src/git/` and the forge each names (checked
/// before anything moves: a missing login is refused naming the repository).
///
/// # Errors
/// No `origin`, no forge repository, no login.
pub fn doors(set: &ChangeSet, allow_files: &[String]) -> Result<Vec<Door>> {
    let env = forge::Env::from_process();
    set.repos
        .iter()
        .map(|r| {
            let dir = PathBuf::from(&r.dir);
            let url = super::remote_url(&dir, &r.remote).map_err(|e| in_repo(&r.name, e))?;
            let env = forge::Env {
                gh_repo: r.forge.clone(),
                ..env.clone()
            };
            let forge = forge::detect(&dir, &url, &env).map_err(|e| in_repo(&r.name, e))?;
            Ok(Door {
                dir,
                place: Place {
                    branch: r.branch.clone(),
                    base: r.base.clone(),
                    remote: r.remote.clone(),
                },
                allow_files: allow_files.to_vec(),
                git: Arc::new(RealGit),
                forge,
            })
        })
        .collect()
}

/// What a host of the set provides: its clock and waits, where the record goes, how it
/// words what happened.
pub trait SetEffects: Waiter {
    /// Saves the record.
    ///
    /// # Errors
    /// It cannot be written.
    fn save(&mut self, set: &ChangeSet) -> Result<()>;
    /// Tells people what happened; `set` is the record as it is now.
    fn say(&mut self, said: &Said, set: &ChangeSet);
}

/// Runs `m` from `Begin` until it is done, each repository's step through its door; the end
/// state.
///
/// # Errors
/// git cannot run, the record cannot be written.
pub async fn drive(m: &mut Machine, fx: &mut dyn SetEffects, doors: &[Door]) -> Result<SetState> {
    let now = fx.now();
    let mut queue: VecDeque<Command> = m.on(Event::Begin, now).into();
    while let Some(c) = queue.pop_front() {
        let event = match c {
            Command::Save => {
                fx.save(&m.record)?;
                continue;
            }
            Command::Say(said) => {
                fx.say(&said, &m.record);
                continue;
            }
            Command::Done(state) => return Ok(state),
            Command::ReadHead { repo } => {
                let d = door(doors, repo)?;
                let (git, dir, branch) =
                    (Arc::clone(&d.git), d.dir.clone(), d.place.branch.clone());
                let sha = blocking(move || git.branch_head(&dir, &branch))
                    .await
                    .map_err(|e| in_repo(&m.record.repos[repo].name, e))?;
                Event::Head { repo, sha }
            }
            Command::Scan { repo, head } => {
                let d = door(doors, repo)?;
                let (git, dir, to) = (Arc::clone(&d.git), d.dir.clone(), d.place.clone());
                let allow = d.allow_files.clone();
                let found = blocking(move || git.scan(&dir, &head, &to, &allow)).await?;
                let p = &d.place;
                Event::Scanned {
                    repo,
                    refusal: (!found.hits.is_empty()).then(|| {
                        crate::policy::secrets::refusal(
                            &p.remote,
                            &p.branch,
                            &found.hits,
                            &found.skipped,
                        )
                    }),
                }
            }
            Command::Push { repo } => {
                let d = door(doors, repo)?;
                let (git, dir) = (Arc::clone(&d.git), d.dir.clone());
                let (remote, branch) = (d.place.remote.clone(), d.place.branch.clone());
                match blocking(move || git.push_branch(&dir, &remote, &branch)).await? {
                    Push::Pushed => Event::Pushed { repo },
                    Push::Rejected { output } => Event::PushRefused { repo, output },
                }
            }
            Command::OpenPr {
                repo, title, body, ..
            } => {
                let d = door(doors, repo)?;
                let opened = d.forge.create_pr(&NewPullRequest {
                    title,
                    body,
                    base: d.place.base.clone(),
                    head: d.place.branch.clone(),
                    draft: false,
                });
                match opened {
                    Ok(p) => Event::PrOpen {
                        repo,
                        number: p.number,
                        reference: d.forge.reference(p.number),
                        url: p.url,
                    },
                    Err(e) => Event::ForgeFailed {
                        repo,
                        error: e.to_string(),
                    },
                }
            }
            Command::EditBody { repo, number, body } => {
                match door(doors, repo)?.forge.edit_pr_body(number, &body) {
                    Ok(()) => Event::Edited { repo },
                    Err(e) => Event::ForgeFailed {
                        repo,
                        error: e.to_string(),
                    },
                }
            }
            Command::LookChecks { repo, head } => match door(doors, repo)?.forge.checks(&head) {
                Ok(checks) => Event::Checks { repo, checks },
                Err(e) => Event::ForgeFailed {
                    repo,
                    error: e.to_string(),
                },
            },
            Command::FetchLogs { repo, failed } => {
                let f = &door(doors, repo)?.forge;
                let logs = failed
                    .iter()
                    .map(|c| (c.name.clone(), f.check_log(c).unwrap_or(None)))
                    .collect();
                Event::Logs { repo, logs }
            }
            Command::Wait { until, due } => Event::Woke {
                interrupted: wait_until(fx, until, due).await,
            },
        };
        let now = fx.now();
        queue.extend(m.on(event, now));
    }
    Err(HankError::Internal(
        "the change set ended without a verdict".into(),
    ))
}

fn door(doors: &[Door], i: usize) -> Result<&Door> {
    doors
        .get(i)
        .ok_or_else(|| HankError::Internal(format!("the change set has no repository {i}")))
}

/// Waits until `until` in steps of at most a second; `true` when the wait is to end.
async fn wait_until(fx: &mut dyn SetEffects, until: Timestamp, due: Timestamp) -> bool {
    loop {
        let now = fx.now();
        let left = until.duration_since(now);
        if left.is_zero() || left.is_negative() {
            return false;
        }
        let step = Duration::try_from(left)
            .unwrap_or_default()
            .min(Duration::from_secs(1));
        if fx.tick(Countdown { due, pending: 0 }, now) || fx.sleep(step).await {
            return true;
        }
    }
}

/// Runs blocking git off the runtime's thread.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| HankError::Internal(format!("a change set step failed: {e}")))?
}

/// The exit code of a set's end: 0 delivered, else its exit reason's (1 for a stop with
/// none).
#[must_use]
pub fn code_of(set: &ChangeSet) -> u8 {
    set.exit_reason.map_or(ERROR, ExitReason::code)
}

/// What the set's end says, one line each: delivered; red, naming each repository, its pull
/// request and the tasks its findings go to; stopped, naming the step and that `hank
/// deliver` resumes.
#[must_use]
pub fn end_lines(set: &ChangeSet) -> Vec<String> {
    let n = set.repos.len();
    match set.state {
        SetState::Delivered => vec![format!(
            "the change set is delivered: {n} pull request{} open and green ({})",
            if n == 1 { "" } else { "s" },
            set.repos
                .iter()
                .filter_map(|r| r.pr_ref.as_deref())
                .collect::<Vec<_>>()
                .join(", ")
        )],
        SetState::Red => {
            let mut out = vec!["the change set is not delivered: checks failed".to_string()];
            for r in set.red() {
                out.push(format!(
                    "{}: {} {} failed: {}; findings for {}",
                    r.name,
                    r.pr_ref.as_deref().unwrap_or("its pull request"),
                    r.pr_url.as_deref().unwrap_or_default(),
                    r.check_names.join(", "),
                    r.tasks.join(", ")
                ));
                if let Some(f) = &r.findings {
                    out.extend(f.lines().take(12).map(|l| format!("  {l}")));
                }
            }
            out.push(format!(
                "the findings are in .hank/{FILE}; once the branches are fixed, `hank deliver` pushes them and waits again"
            ));
            out
        }
        SetState::Stopped | SetState::Delivering => vec![
            format!(
                "the change set stopped at {}: {}",
                set.stopped_at.as_deref().unwrap_or("a step"),
                set.error.as_deref().unwrap_or("stopped")
            ),
            "`hank deliver` resumes it from there (nothing done is done again)".to_string(),
        ],
    }
}

/// The host both callers use: a clock, the record in the project, lines on stderr with a
/// prefix (`hank: ` or `hank: fleet: `).
pub struct Host<'a> {
    pub clock: &'a mut dyn Waiter,
    pub root: PathBuf,
    pub prefix: &'static str,
    /// When the last countdown line was said.
    pub last_told: Option<Timestamp>,
}

impl Waiter for Host<'_> {
    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn sleep(&mut self, d: Duration) -> super::WaitFut<'_> {
        self.clock.sleep(d)
    }

    fn tick(&mut self, c: Countdown, now: Timestamp) -> bool {
        if self
            .last_told
            .is_none_or(|t| now.duration_since(t).as_secs() >= 60)
        {
            self.last_told = Some(now);
            let left = u64::try_from(c.due.duration_since(now).as_secs().max(0)).unwrap_or(0);
            errln!(
                "{}waiting for the checks of the change set until {} — {} left",
                self.prefix,
                crate::report::short_time(c.due),
                crate::policy::time::format_secs(left)
            );
        }
        self.clock.tick(c, now)
    }
}

impl SetEffects for Host<'_> {
    fn save(&mut self, set: &ChangeSet) -> Result<()> {
        save(&self.root, set)
    }

    fn say(&mut self, said: &Said, set: &ChangeSet) {
        let p = self.prefix;
        let repo = |i: &usize| set.repos.get(*i);
        match said {
            Said::Pushed { repo: i } => {
                if let Some(r) = repo(i) {
                    let sha = r.pushed.as_deref().unwrap_or_default();
                    errln!(
                        "{p}{}: pushed {} ({}) to {}",
                        r.name,
                        r.branch,
                        sha.get(..12).unwrap_or(sha),
                        r.remote
                    );
                }
            }
            Said::Opened { repo: i } => {
                if let Some(r) = repo(i) {
                    errln!(
                        "{p}{}: pull request {} {}",
                        r.name,
                        r.pr_ref.as_deref().unwrap_or_default(),
                        r.pr_url.as_deref().unwrap_or_default()
                    );
                }
            }
            Said::Linked { repo: i } => {
                if let Some(r) = repo(i) {
                    errln!(
                        "{p}{}: {} now links the other pull requests of the set",
                        r.name,
                        r.pr_ref.as_deref().unwrap_or_default()
                    );
                }
            }
            Said::Waiting => errln!("{p}waiting for the checks of every pull request of the set"),
            Said::Verdict { repo: i } => {
                if let Some(r) = repo(i) {
                    errln!("{p}{}: checks {}", r.name, r.checks);
                }
            }
            Said::Ended => {
                for line in end_lines(set) {
                    errln!("{p}{line}");
                }
            }
        }
    }
}

/// What a set is asked to do beyond its record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetOpts {
    /// `CI_WAIT` (with its limits), unless `--no-wait`.
    pub wait: Option<CiWaitSettings>,
    /// DELIVER_ALLOW_FILES.
    pub allow_files: Vec<String>,
}

/// Delivers `set` (new or resumed) from the project `root` on `clock`, each step said with
/// `prefix`: the record as it ended and the exit code (0 delivered, 2 `ci_failed` /
/// `ci_missing` / a refused push, 3 `ci_timeout`, 1 `forge_failed` / a secret, 130
/// interrupted).
///
/// # Errors
/// A repository's origin or forge login is missing (before anything moves), git cannot
/// run, the record cannot be written.
pub async fn deliver(
    root: &Path,
    set: ChangeSet,
    opts: &SetOpts,
    clock: &mut dyn Waiter,
    prefix: &'static str,
) -> Result<(ChangeSet, u8)> {
    let doors = doors(&set, &opts.allow_files)?;
    let cfg = Config {
        ci: opts.wait.map(|w| w.limits()),
        secrets: crate::agent::redact::secret_values(),
    };
    let mut host = Host {
        clock,
        root: root.to_path_buf(),
        prefix,
        last_told: None,
    };
    let mut m = Machine::new(cfg, set);
    drive(&mut m, &mut host, &doors).await?;
    let code = code_of(&m.record);
    Ok((m.record, code))
}

#[cfg(test)]
mod tests;
