//! `hank watch`: the issue tracker as a work queue. The tracker is any of
//! [`crate::tracker::Tracker`]'s implementations (GitHub, GitLab, Linear, Jira, Trello, Plane,
//! Shortcut; `--tracker`). Each open issue carrying the label
//! (TRACKER_LABEL) becomes a fleet task ([`crate::policy::tracker::task_of`]); an issue is
//! claimed on the `origin` remote before anything starts ([`crate::tracker::claims`]: one
//! claim per issue across machines, a lease renewed by a heartbeat while its task runs), then
//! the fleet runs the claimed issues' tasks ([`crate::fleet::run`], one pull request per
//! issue carrying `Closes #N`), and hank — never the agent — writes on each issue: a comment
//! when the work starts, when it is delivered and when it fails (one comment, edited in
//! place), the labels `hank:working`, then `hank:done` or `hank:failed`. `--once` takes what
//! is open now and exits with the fleet's exit code; without it the watch polls every
//! WATCH_INTERVAL (conditional requests: an unchanged listing costs nothing against the
//! tracker's rate budget, [`crate::tracker::budget`]). `--dry-run` lists the labelled issues,
//! which would be taken and why the others are not. In a workspace of several repositories
//! (`.hank/workspace.toml`) an issue names its repositories on a line `repos: api, web`
//! ([`crate::policy::tracker::repos_named`]; one naming none, or one the workspace lacks, is
//! answered failed with the line to add) and runs as its own fleet into `hank/<issue>-set`,
//! one issue after another, delivered as a change set: one linked pull request per
//! repository, its comment naming each.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cli::WatchArgs;
use crate::error::{HankError, Result};
use crate::fleet::{self, Options};
use crate::policy::fleet::TaskState;
use crate::policy::time::Clock;
use crate::policy::tracker::{self as rules, Choice, Claim, ItemKey, Outcome, PrLink, TrackerKind};
use crate::settings;
use crate::stateref::Pushed;
use crate::tracker::{self, Mark, Tracker, claims};

use super::context::{Project, parse_agents, run_flags};

/// The integration branch of a watch's fleet.
const INTO: &str = "hank/watch";

/// One issue this watcher holds: its claim and the claim ref's commit.
#[derive(Debug, Clone)]
struct Held {
    issue: rules::Issue,
    claim: Claim,
    oid: String,
}

/// Each labelled issue with what this watch does with it, and the claim refs' commits.
type Choices = (Vec<(rules::Issue, Choice)>, Vec<(ItemKey, String)>);

struct Watch {
    root: PathBuf,
    remote: String,
    label: String,
    owner: String,
    tracker: Box<dyn Tracker>,
    /// `pr` or `branch`.
    deliver: String,
    /// The code's forge, with `--deliver pr` (where the pull requests are).
    forge: Option<Box<dyn crate::forge::Forge>>,
    settings: settings::Settings,
    agents: usize,
    run_flags: Vec<String>,
    allow_dirty: bool,
    /// A workspace of several repositories: each issue names its repositories and runs as
    /// its own fleet, delivered as a change set (one pull request per repository).
    workspace: Option<crate::policy::workspace::Workspace>,
    /// The tracker's forge repository (`owner/name`; empty when not known).
    repo: String,
}

/// The issues a workspace of several repositories cannot run, each with why.
type Unfit = Vec<(rules::Issue, String)>;

/// An issue's fleet over a workspace, as it ended: its task's record and its change set.
struct SetRun {
    task: Option<crate::policy::fleet::file::FleetTask>,
    set: Option<crate::policy::deliver::change_set::ChangeSet>,
}

pub(crate) fn run(a: &WatchArgs) -> Result<u8> {
    let project = Project::locate()?;
    let root = project.root().to_path_buf();
    let agents = parse_agents(&a.agents)?;
    let deliver = a.deliver.trim().to_ascii_lowercase();
    if !matches!(deliver.as_str(), "pr" | "branch") {
        return Err(HankError::usage(format!(
            "--deliver expects pr or branch, got {:?}",
            a.deliver
        )));
    }
    let flags = run_flags(&a.run_flags, "hank watch")?;
    let mut run = flags.run;
    run.flags.deliver = Some(deliver.clone());
    let s = project.approved_settings(&run.flags, run.accept_config, "hank watch")?;
    project.known_agents(&s)?;
    // In a workspace of several repositories each issue names its repositories (`repos:`)
    // and is delivered as a change set; a workspace of one other repository is refused (an
    // issue's task would run in the project, not there).
    let workspace = match crate::workspace::load(&root)? {
        Some(ws) if ws.is_multi() => {
            // `--deliver branch` is refused here before anything is claimed.
            fleet::deliver::FleetDelivery::of_workspace(&s, &ws, &[])?;
            // Every repository an issue may name takes a push, before any is claimed.
            if !(a.dry_run || run.flags.dry_run) {
                crate::workspace::refuse_unpushable(&root, &ws)?;
            }
            Some(ws)
        }
        Some(ws) => {
            crate::workspace::require_no_other_repository(&root, &ws)?;
            None
        }
        None => None,
    };
    let remote = s.deliver_remote.value.clone();
    let url = crate::deliver::remote_url(&root, &remote)?;
    let env = crate::forge::Env::from_process();
    // The code's forge repository: the tracker itself for GitHub/GitLab, where the pull
    // requests go for the others (not needed with `--deliver branch`).
    let found = crate::forge::repo_of(&env, &url);
    let host = found.as_ref().ok().and_then(|(h, _)| h.clone());
    let kind_text = a.tracker.clone().or_else(|| s.tracker.value.clone());
    let kind = match kind_text {
        Some(t) => TrackerKind::parse(&t).ok_or_else(|| {
            HankError::usage(format!(
                "--tracker (TRACKER) expects one of {}, got {t:?}",
                TrackerKind::ALL.map(TrackerKind::as_str).join(", ")
            ))
        })?,
        None if host.as_deref().is_some_and(|h| h.contains("gitlab"))
            || env.gitlab_host.is_some() =>
        {
            TrackerKind::GitLab
        }
        None => TrackerKind::GitHub,
    };
    let repo = match found {
        Ok((_, repo)) => repo,
        Err(e) if kind.is_forge() || (deliver == "pr" && !(a.dry_run || run.flags.dry_run)) => {
            return Err(e);
        }
        Err(_) => String::new(),
    };
    let label = a
        .label
        .clone()
        .map(|l| l.trim().to_string())
        .unwrap_or_else(|| s.tracker_label.value.clone());
    if label.is_empty() || label.contains(',') {
        return Err(HankError::usage(format!(
            "--label (TRACKER_LABEL) expects one label name, got {label:?}"
        )));
    }
    let interval = match a.interval.as_deref() {
        None => s.watch_interval.value,
        Some(v) => settings::resolve::parse_interval(v).ok_or_else(|| {
            HankError::usage(format!(
                "--interval (WATCH_INTERVAL) expects a duration such as 60s or 5m, got {v:?}"
            ))
        })?,
    };
    let tracker = tracker::open(kind, &root, host.as_deref(), &repo, &env)?;
    let mut w = Watch {
        root,
        remote,
        label,
        owner: claims::owner(),
        tracker,
        deliver: deliver.clone(),
        forge: None,
        settings: s,
        agents,
        run_flags: a.run_flags.clone(),
        allow_dirty: a.allow_dirty,
        workspace,
        repo: repo.clone(),
    };
    if a.dry_run || run.flags.dry_run {
        return w.dry_run();
    }
    // Each task's run opens its own pull request: a forge it could not reach would fail every
    // task after its work was done, so it is asked once here, before any issue is claimed
    // (the code's forge, whichever tracker holds the issues).
    if deliver == "pr" {
        w.forge = Some(crate::forge::detect(&w.root, &url, &env)?);
    }
    let _recorded = crate::approval::record(&w.root, "hank watch")?;
    let _notify = crate::notify::install(&w.settings, crate::clock::SystemClock::from_env()?.now());
    loop {
        let code = w.round()?;
        if a.once {
            return Ok(code);
        }
        let next = crate::clock::SystemClock::from_env()?
            .now()
            .checked_add(jiff::SignedDuration::from_secs(
                i64::try_from(interval.as_secs()).unwrap_or(i64::MAX),
            ))
            .ok();
        errln!(
            "hank: watch: next poll of {} at {}",
            w.tracker.describe(),
            next.map_or_else(|| "later".into(), |t| t.strftime("%H:%M:%SZ").to_string())
        );
        tracker::budget::sleep(interval, "waiting for the next poll")?;
    }
}

impl Watch {
    fn now(&self) -> Result<jiff::Timestamp> {
        Ok(crate::clock::SystemClock::from_env()?.now())
    }

    /// The labelled issues and what this watch does with each.
    fn choices(&mut self) -> Result<Choices> {
        let issues = self.tracker.items(&self.label)?;
        let prs = self.tracker.open_prs()?;
        // Only the claims that can change the choice are read (a git fetch each): an issue
        // labelled done or failed, or closed by an open PR of hank's, is skipped anyway.
        let numbers: Vec<ItemKey> = issues
            .iter()
            .filter(|i| {
                !i.labels
                    .iter()
                    .any(|l| l == rules::DONE || l == rules::FAILED)
                    && !prs.iter().any(|p| rules::closes(p, &i.key))
            })
            .map(|i| i.key.clone())
            .collect();
        let held = claims::read_all(&self.root, &self.remote, self.tracker.kind(), &numbers)?;
        let oids: Vec<(ItemKey, String)> = held
            .iter()
            .map(|(n, (o, _))| (n.clone(), o.clone()))
            .collect();
        let claims = held.into_iter().map(|(n, (_, c))| (n, c)).collect();
        let now = self.now()?;
        Ok((
            rules::choose(&issues, &self.label, &claims, &prs, now),
            oids,
        ))
    }

    /// The workspace's repository names (none without a workspace of several).
    fn names(&self) -> Vec<String> {
        self.workspace
            .as_ref()
            .map(|w| w.repos.iter().map(|r| r.name.clone()).collect())
            .unwrap_or_default()
    }

    /// `choices` with each issue that would be taken but cannot run in the workspace (it
    /// names no repository of it, or one it lacks) skipped, and those issues with why.
    fn fit(&self, choices: Vec<(rules::Issue, Choice)>) -> (Vec<(rules::Issue, Choice)>, Unfit) {
        let names = self.names();
        let mut unfit = Vec::new();
        let out = choices
            .into_iter()
            .map(|(i, c)| {
                if c.taken()
                    && let Some(why) = rules::unfit_for_workspace(&rules::task_of(&i), &names)
                {
                    unfit.push((i.clone(), why.clone()));
                    return (i, Choice::Skip(why));
                }
                (i, c)
            })
            .collect();
        (out, unfit)
    }

    /// The integration branch of an issue's own fleet over the workspace.
    fn set_branch(task: &crate::policy::fleet::TaskSpec) -> String {
        format!("hank/{}-set", task.slug)
    }

    fn dry_run(&mut self) -> Result<u8> {
        let (choices, _) = self.choices()?;
        let (choices, _) = self.fit(choices);
        errln!(
            "hank: watch: {} — open issues labelled {:?}: {}",
            self.tracker.describe(),
            self.label,
            choices.len()
        );
        for (i, c) in &choices {
            let what = match c {
                Choice::Take => "would take".to_string(),
                Choice::TakeOver { from } => {
                    format!("would take over (the lease of {from} expired)")
                }
                Choice::Skip(why) => format!("not taken: {why}"),
            };
            let task = rules::task_of(i);
            let into = if self.workspace.is_some() {
                format!("{} in {}", Self::set_branch(&task), task.repos.join(", "))
            } else {
                format!("hank/{}", task.slug)
            };
            println!(
                "{} {}\t{}\t{} item(s) → {into}",
                i.key,
                crate::sanitize::line(&i.title),
                what,
                task.open_items.len(),
            );
        }
        Ok(crate::exit::OK)
    }

    /// One poll: claim what can be taken, run it as a fleet, answer on each issue.
    fn round(&mut self) -> Result<u8> {
        let (choices, oids) = self.choices()?;
        let (choices, unfit) = self.fit(choices);
        // An issue that cannot run in the workspace is answered failed with why (and so not
        // listed again): its author adds the `repos:` line and relabels it.
        for (issue, why) in &unfit {
            let text = rules::comment(
                &self.owner,
                &Outcome::Failed {
                    why: why.clone(),
                    kept: "nothing: no work started".into(),
                    cost_usd: 0.0,
                },
            );
            self.answer(&issue.key, &text, Mark::Failed);
            self.tell(issue, "failed", why);
        }
        if !choices.iter().any(|(_, c)| c.taken()) {
            for (issue, c) in &choices {
                if let Choice::Skip(why) = c {
                    errln!("hank: watch: {} not taken: {why}", issue.key);
                }
            }
            errln!("hank: watch: nothing to take");
            return Ok(crate::exit::OK);
        }
        if let Some(why) = self.windows_hold()? {
            errln!("hank: watch: no issue taken now: {why}");
            return Ok(crate::exit::OK);
        }
        // What would stop the fleet from starting is refused before any issue is claimed.
        if fleet::control::fleet_running(&self.root) {
            return Err(HankError::usage_hint(
                format!("another hank fleet runs for {}", self.root.display()),
                "let it finish (hank fleet status), then watch again",
            ));
        }
        Project::at(&self.root).refuse_dirty_tree(self.allow_dirty)?;
        let deliver = if self.workspace.is_some() {
            fleet::deliver::FleetDelivery::None
        } else {
            fleet::deliver::FleetDelivery::of(&self.settings, &self.root, false)?
        };
        let mut held: Vec<Held> = Vec::new();
        for (issue, c) in choices {
            let expected = match &c {
                Choice::Skip(why) => {
                    errln!("hank: watch: {} not taken: {why}", issue.key);
                    continue;
                }
                Choice::Take => None,
                Choice::TakeOver { from } => {
                    errln!(
                        "hank: watch: {}: the lease of {from} expired; taking it over",
                        issue.key
                    );
                    oids.iter()
                        .find(|(n, _)| *n == issue.key)
                        .map(|(_, o)| o.clone())
                }
            };
            let claim = Claim::new(
                self.tracker.kind(),
                issue.key.clone(),
                &self.owner,
                self.now()?,
            );
            match claims::write(&self.root, &self.remote, &claim, expected.as_deref())? {
                Pushed::Done(oid) => {
                    // The item as it is now: its text may have changed since the listing, and
                    // one closed or unlabelled meanwhile is given back at once.
                    let issue = match self.fresh(&issue) {
                        Ok(fresh) => fresh,
                        Err(why) => {
                            errln!("hank: watch: {} not taken: {why}", issue.key);
                            if let Err(e) = claims::release(
                                &self.root,
                                &self.remote,
                                self.tracker.kind(),
                                &issue.key,
                                &oid,
                            ) {
                                errln!(
                                    "hank: watch: warning: {}: the claim could not be released: {e}",
                                    issue.key
                                );
                            }
                            self.tell(&issue, "released", &why);
                            continue;
                        }
                    };
                    errln!("hank: watch: {} claimed ({})", issue.key, self.owner);
                    let action = if expected.is_some() {
                        "taken_over"
                    } else {
                        "claimed"
                    };
                    self.tell(&issue, action, &self.owner);
                    held.push(Held { issue, claim, oid });
                }
                Pushed::Lost(_) => {
                    errln!(
                        "hank: watch: {} was claimed by another watcher first",
                        issue.key
                    );
                    self.tell(&issue, "lost", "claimed by another watcher first");
                }
            }
        }
        if held.is_empty() {
            errln!("hank: watch: nothing to take");
            return Ok(crate::exit::OK);
        }
        let budget = self.budget_text();
        for h in &held {
            let task = rules::task_of(&h.issue);
            let text = rules::comment(
                &self.owner,
                &Outcome::Started {
                    items: task.open_items.clone(),
                    budget: budget.clone(),
                },
            );
            // (`hank:failed` is not there: such an issue is never taken.)
            self.answer(&h.issue.key, &text, Mark::Working);
        }
        let specs: Vec<_> = held.iter().map(|h| rules::task_of(&h.issue)).collect();
        // The claims' heartbeat while the fleet runs.
        let shared = Arc::new(Mutex::new(held));
        let stop = Arc::new(AtomicBool::new(false));
        let beat = {
            let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
            let (root, remote) = (self.root.clone(), self.remote.clone());
            std::thread::spawn(move || heartbeat(&root, &remote, &shared, &stop))
        };
        let (code, sets) = if self.workspace.is_some() {
            self.run_sets(&specs)
        } else {
            (self.run_fleet(specs, deliver, INTO), Vec::new())
        };
        stop.store(true, Ordering::SeqCst);
        let _ = beat.join();
        let held = shared.lock().map(|h| h.clone()).unwrap_or_default();
        let code = match code {
            Ok(code) => code,
            Err(e) if !sets.is_empty() => {
                // The issues whose fleets ran are answered; the others given back.
                let (ran, rest) = held.split_at(sets.len().min(held.len()));
                self.settle_sets(ran, sets)?;
                self.release_all(rest);
                return Err(e);
            }
            Err(e) => {
                // Nothing ran (another fleet in this checkout, a dirty tree…): the issues are
                // given back at once rather than held until their leases expire.
                for h in &held {
                    let n = &h.issue.key;
                    if let Err(e) =
                        claims::release(&self.root, &self.remote, self.tracker.kind(), n, &h.oid)
                    {
                        errln!("hank: watch: warning: {n}: the claim could not be released: {e}");
                    }
                    if let Err(e) = self.tracker.mark(n, Mark::Released) {
                        errln!("hank: watch: warning: {n}: {e}");
                    }
                }
                return Err(e);
            }
        };
        if self.workspace.is_some() {
            self.settle_sets(&held, sets)?;
        } else {
            self.settle(&held)?;
        }
        Ok(code)
    }

    /// Each issue's claim given back at once and its item marked released (its fleet never
    /// ran).
    fn release_all(&mut self, held: &[Held]) {
        for h in held {
            let n = &h.issue.key;
            if let Err(e) =
                claims::release(&self.root, &self.remote, self.tracker.kind(), n, &h.oid)
            {
                errln!("hank: watch: warning: {n}: the claim could not be released: {e}");
            }
            if let Err(e) = self.tracker.mark(n, Mark::Released) {
                errln!("hank: watch: warning: {n}: {e}");
            }
        }
    }

    /// In a workspace of several repositories: each issue's task run as its own fleet, one
    /// after another (a project has one fleet at a time), into its own integration branch,
    /// delivered as a change set. The first non-zero exit code (else 0), and each fleet's end
    /// in `specs`' order; an error stops the sequence (the fleets before it are returned).
    fn run_sets(&self, specs: &[crate::policy::fleet::TaskSpec]) -> (Result<u8>, Vec<SetRun>) {
        let mut code = crate::exit::OK;
        let mut out = Vec::new();
        for spec in specs {
            let into = Self::set_branch(spec);
            let ended = self
                .set_delivery(spec)
                .and_then(|d| self.run_fleet(vec![spec.clone()], d, &into));
            let c = match ended {
                Ok(c) => c,
                Err(e) => return (Err(e), out),
            };
            if code == crate::exit::OK {
                code = c;
            }
            let task = fleet::read(&self.root)
                .ok()
                .flatten()
                .and_then(|f| f.tasks.into_iter().find(|t| t.name == spec.name));
            let set = crate::deliver::change_set::load(&self.root).filter(|s| s.into == into);
            out.push(SetRun { task, set });
        }
        (Ok(code), out)
    }

    /// The change set of one issue's task: one pull request per repository it names, each
    /// body ending with the issue (`Closes #N` in the tracker's own repository, where the
    /// forge closes it; `Part of URL` in the others).
    fn set_delivery(
        &self,
        spec: &crate::policy::fleet::TaskSpec,
    ) -> Result<fleet::deliver::FleetDelivery> {
        let Some(ws) = &self.workspace else {
            return Err(HankError::Internal("no workspace for a change set".into()));
        };
        let mut d = fleet::deliver::FleetDelivery::of_workspace(
            &self.settings,
            ws,
            std::slice::from_ref(spec),
        )?;
        if let (fleet::deliver::FleetDelivery::ChangeSet { repos, .. }, Some(issue)) =
            (&mut d, &spec.issue)
        {
            let project = self.root.canonicalize().ok();
            for r in repos.iter_mut() {
                let own = match &r.forge {
                    Some(f) => rules::same_forge_repo(f, &self.repo),
                    None => project.is_some() && r.dir.canonicalize().ok() == project,
                };
                let line = match issue.number.as_number() {
                    Some(n) if own && self.tracker.kind().is_forge() => format!("Closes #{n}"),
                    _ => format!("Part of {} ({})", issue.url, issue.number),
                };
                r.trailer.push(line);
            }
        }
        Ok(d)
    }

    /// After each issue's fleet over the workspace: the issue answered with every pull
    /// request of its change set and labelled done when the set is delivered, else failed
    /// with the set's reason (a red check naming its repository, the step it stopped at) or
    /// the task's.
    fn settle_sets(&mut self, held: &[Held], runs: Vec<SetRun>) -> Result<()> {
        use crate::policy::deliver::change_set::SetState;
        for (h, run) in held.iter().zip(runs) {
            let n = &h.issue.key;
            let spec = rules::task_of(&h.issue);
            let task = run.task.as_ref();
            let state = task.map_or(TaskState::Pending, |t| t.state());
            let cost = task.map_or(0.0, |t| t.cost_usd);
            let set = run.set.as_ref();
            if state == TaskState::Merged
                && let Some(set) = set.filter(|s| s.state == SetState::Delivered)
            {
                let all: Vec<(String, String)> = set
                    .repos
                    .iter()
                    .filter_map(|r| Some((r.name.clone(), r.pr_url.clone()?)))
                    .collect();
                if !self.tracker.kind().is_forge() {
                    for (_, url) in &all {
                        if let Err(e) = self.tracker.link_pr(n, url) {
                            errln!("hank: watch: warning: {n}: {e}");
                        }
                    }
                }
                self.delivered(h, task, PrLink::Set(all), "delivered as a change set")?;
                continue;
            }
            let into = Self::set_branch(&spec);
            let (why, failed) = match (state, set) {
                (TaskState::Merged, Some(set)) => (
                    crate::deliver::change_set::end_lines(set)
                        .into_iter()
                        .take(8)
                        .collect::<Vec<_>>()
                        .join("; "),
                    true,
                ),
                (TaskState::Merged, None) => (
                    format!("the change set of {into} was not delivered (no record of it)"),
                    true,
                ),
                (s, _) => {
                    let failed = matches!(s, TaskState::Failed | TaskState::Blocked);
                    let why = task
                        .map(|t| t.message.clone())
                        .filter(|m| !m.trim().is_empty())
                        .unwrap_or_else(|| {
                            if failed {
                                "the task failed".into()
                            } else {
                                "the fleet stopped (a limit or an interruption) before the task finished".into()
                            }
                        });
                    (why, failed)
                }
            };
            let text = rules::comment(
                &self.owner,
                &Outcome::Failed {
                    why: why.clone(),
                    kept: format!(
                        "the branch {into} in {} and the change set's record (.hank/change-set.json) on {} (`hank fleet status`, `hank deliver` there)",
                        spec.repos.join(", "),
                        self.owner
                    ),
                    cost_usd: cost,
                },
            );
            let mark = if failed { Mark::Failed } else { Mark::Released };
            self.answer(n, &text, mark);
            claims::release(&self.root, &self.remote, self.tracker.kind(), n, &h.oid)?;
            errln!(
                "hank: watch: {n} {}: {}",
                if failed { "failed" } else { "not finished" },
                crate::sanitize::line(&why)
            );
            self.tell(&h.issue, if failed { "failed" } else { "released" }, &why);
        }
        Ok(())
    }

    /// An `issue` event in the checkout's `events.jsonl` (and to NOTIFY's hook).
    fn tell(&self, issue: &rules::Issue, action: &str, message: &str) {
        use crate::store::schema::{Event, EventKind};
        let Ok(now) = self.now() else { return };
        let event = Event::new(
            now,
            EventKind::Issue {
                tracker: self.tracker.kind().as_str().to_string(),
                issue: issue.key.clone(),
                url: issue.url.clone(),
                action: action.to_string(),
                message: crate::sanitize::line(message),
            },
        );
        if let Err(e) = crate::store::Store::new(&self.root).append_event(&event.to_line()) {
            errln!("hank: watch: warning: events.jsonl: {e}");
        }
        crate::notify::offer(&event);
    }

    /// Why the usage windows (MAX_WINDOW_PERCENT, the readings every run of the user shares)
    /// afford no new issue now, if they do not: claimed now, it would only wait.
    fn windows_hold(&self) -> Result<Option<String>> {
        let limits = &self.settings.max_window_percent.value;
        if limits.is_empty() {
            return Ok(None);
        }
        let now = self.now()?;
        let shared = crate::store::shared_windows::read();
        let facts: Vec<crate::policy::fleet::WindowFacts> = limits
            .0
            .iter()
            .filter_map(|(name, &limit)| {
                let w = shared.get(name)?;
                Some(crate::policy::fleet::WindowFacts {
                    name: name.clone(),
                    percent: w.utilization_at(now)? * 100.0,
                    limit,
                    per_task: 0.0,
                    resets_at: w.fields.resets_at,
                })
            })
            .collect();
        Ok(crate::policy::fleet::window_admission(&facts, 0))
    }

    fn budget_text(&self) -> String {
        let s = &self.settings;
        let mut parts = Vec::new();
        if s.max_cost_usd.value > 0.0 {
            parts.push(format!(
                "MAX_COST_USD ${:.2} (the fleet's)",
                s.max_cost_usd.value
            ));
        }
        if !s.max_runtime.value.is_zero() {
            parts.push(format!("MAX_RUNTIME {}s", s.max_runtime.value.as_secs()));
        }
        if s.max_calls_per_hour.value > 0 {
            parts.push(format!("{} calls per hour", s.max_calls_per_hour.value));
        }
        if parts.is_empty() {
            "no limit set (MAX_COST_USD, MAX_RUNTIME)".into()
        } else {
            parts.join(", ")
        }
    }

    /// hank's comment and mark on an issue; a tracker that refuses is a warning (the work
    /// goes on, the claim is the lock).
    fn answer(&mut self, issue: &ItemKey, text: &str, mark: Mark) {
        if let Err(e) = self.tracker.comment(issue, text) {
            errln!("hank: watch: warning: {issue}: {e}");
        }
        if let Err(e) = self.tracker.mark(issue, mark) {
            errln!("hank: watch: warning: {issue}: {e}");
        }
    }

    /// The claimed item read again, or why it is not worked: gone, closed, no longer
    /// labelled, labelled done or failed, without text, or unreadable.
    fn fresh(&mut self, listed: &rules::Issue) -> std::result::Result<rules::Issue, String> {
        let fresh = match self.tracker.item(&listed.key) {
            Ok(Some(i)) => i,
            Ok(None) => return Err("it was closed or removed since it was listed".into()),
            Err(e) => return Err(format!("it could not be read again: {e}")),
        };
        let now = self.now().map_err(|e| e.to_string())?;
        match rules::choose(
            std::slice::from_ref(&fresh),
            &self.label,
            &std::collections::BTreeMap::new(),
            &[],
            now,
        )
        .pop()
        {
            None => Err(format!("it no longer carries the label {:?}", self.label)),
            Some((_, Choice::Skip(why))) => Err(why),
            Some((i, _)) => match rules::unfit_for_workspace(&rules::task_of(&i), &self.names()) {
                Some(why) => Err(why),
                None => Ok(i),
            },
        }
    }

    fn run_fleet(
        &self,
        specs: Vec<crate::policy::fleet::TaskSpec>,
        deliver: fleet::deliver::FleetDelivery,
        into: &str,
    ) -> Result<u8> {
        let s = &self.settings;
        // This round's tasks only: a task of an earlier round (merged or failed) is not this
        // round's exit.
        if let Some(mut file) = fleet::read(&self.root)? {
            file.tasks
                .retain(|t| specs.iter().any(|s| s.name == t.name));
            let path = fleet::fleet_file(&self.root);
            let bytes = serde_json::to_vec_pretty(&file)
                .map_err(|e| HankError::Internal(format!("cannot encode the fleet: {e}")))?;
            crate::store::write_atomic(&path, &bytes, true)
                .map_err(|e| HankError::io("write", &path, e))?;
        }
        let verify = s.verify_command.value.clone();
        let opts = Options {
            deliver,
            agents: self.agents,
            into: into.to_string(),
            min_free_memory: s.fleet_min_free_memory.value,
            max_merge_attempts: s.max_merge_attempts.value,
            run_flags: self.run_flags.clone(),
            verify,
            verify_timeout: s.verify_timeout.value,
            watched: crate::approval::watched_files(&self.root, s),
            limits: s.budget_limits(),
            max_cost_usd: s.max_cost_usd.value,
            max_runtime: s.max_runtime.value,
            window_limits: s.max_window_percent.value.clone(),
            json: false,
            exit_at_usage_limit: s.on_usage_limit.value
                == crate::policy::decide::UsageLimitPolicy::Exit,
            retry: None,
            keep_worktrees: s.fleet_keep_worktrees.value,
        };
        errln!(
            "hank: watch: running {} issue(s) as a fleet into {into}",
            specs.len()
        );
        fleet::run(&self.root, specs, &opts)
    }

    /// What became of a delivered task's pull request: the open one of its branch (the
    /// tracker's listing when it is the forge, else the code's forge asked), none found, or
    /// none asked (`--deliver branch`).
    fn pr_of(&self, branch: &str, prs: &[rules::OpenPr]) -> PrLink {
        if self.deliver != "pr" {
            return PrLink::NotAsked {
                branch: branch.to_string(),
            };
        }
        if let Some(p) = prs.iter().find(|p| p.head == branch) {
            return PrLink::Opened(p.url.clone());
        }
        let found = self
            .forge
            .as_deref()
            .and_then(|f| f.find_pr(branch).ok().flatten());
        match found {
            Some(p) => PrLink::Opened(p.url),
            None => PrLink::NotFound {
                branch: branch.to_string(),
            },
        }
    }

    /// A delivered issue answered: the comment with its pull request(s), the label done, its
    /// claim marked done, the event told. `said` ends the line printed (`delivered`, `delivered
    /// as a change set`).
    fn delivered(
        &mut self,
        h: &Held,
        task: Option<&crate::store::schema::FleetTask>,
        pr: PrLink,
        said: &str,
    ) -> Result<()> {
        let n = &h.issue.key;
        let text = rules::comment(
            &self.owner,
            &Outcome::Delivered {
                pr: pr.clone(),
                verified: task.and_then(|t| t.verified),
                cost_usd: task.map_or(0.0, |t| t.cost_usd),
                loops: task.map_or(0, |t| t.loops),
            },
        );
        self.answer(n, &text, Mark::Done);
        let mut done = h.claim.beat(self.now()?);
        done.state = "done".into();
        done.pr_url = pr.url().map(str::to_string);
        if let Pushed::Lost(why) = claims::write(&self.root, &self.remote, &done, Some(&h.oid))? {
            errln!("hank: watch: warning: {n}: the claim moved meanwhile: {why}");
        }
        errln!("hank: watch: {n} {said}");
        let fallback = match pr {
            PrLink::Set(_) => "change set delivered",
            _ => "branch pushed",
        };
        self.tell(
            &h.issue,
            "delivered",
            done.pr_url.as_deref().unwrap_or(fallback),
        );
        Ok(())
    }

    /// After the fleet: each held issue answered by how its task ended, its claim marked
    /// delivered or released.
    fn settle(&mut self, held: &[Held]) -> Result<()> {
        let file = fleet::read(&self.root)?.unwrap_or_default();
        let prs = self.tracker.open_prs().unwrap_or_default();
        for h in held {
            let n = &h.issue.key;
            let spec = rules::task_of(&h.issue);
            let task = file.tasks.iter().find(|t| t.name == spec.name);
            let state = task.map_or(TaskState::Pending, |t| t.state());
            let cost = task.map_or(0.0, |t| t.cost_usd);
            if state == TaskState::Merged {
                let branch = format!("hank/{}", spec.slug);
                let pr = self.pr_of(&branch, &prs);
                if let PrLink::Opened(url) = &pr
                    && !self.tracker.kind().is_forge()
                    && let Err(e) = self.tracker.link_pr(n, url)
                {
                    errln!("hank: watch: warning: {n}: {e}");
                }
                self.delivered(h, task, pr, "delivered")?;
                continue;
            }
            let failed = matches!(state, TaskState::Failed | TaskState::Blocked);
            let why = task
                .map(|t| t.message.clone())
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| {
                    if failed {
                        "the task failed".into()
                    } else {
                        "the fleet stopped (a limit or an interruption) before the task finished"
                            .into()
                    }
                });
            let text = rules::comment(
                &self.owner,
                &Outcome::Failed {
                    why: why.clone(),
                    kept: format!(
                        "the branch hank/{} and its worktree on {} (`hank fleet status` there)",
                        spec.slug, self.owner
                    ),
                    cost_usd: cost,
                },
            );
            let mark = if failed { Mark::Failed } else { Mark::Released };
            self.answer(n, &text, mark);
            claims::release(&self.root, &self.remote, self.tracker.kind(), n, &h.oid)?;
            errln!(
                "hank: watch: {n} {}: {}",
                if failed { "failed" } else { "not finished" },
                crate::sanitize::line(&why)
            );
            self.tell(&h.issue, if failed { "failed" } else { "released" }, &why);
        }
        Ok(())
    }
}

/// Renews each held claim's lease every [`rules::HEARTBEAT`] until `stop`.
fn heartbeat(root: &Path, remote: &str, held: &Mutex<Vec<Held>>, stop: &AtomicBool) {
    let mut waited = Duration::ZERO;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
        waited += Duration::from_millis(200);
        if waited < rules::HEARTBEAT {
            continue;
        }
        waited = Duration::ZERO;
        let Ok(now) = crate::clock::SystemClock::from_env().map(|c| c.now()) else {
            continue;
        };
        let Ok(mut all) = held.lock() else { return };
        for h in all.iter_mut() {
            let beat = h.claim.beat(now);
            match claims::write(root, remote, &beat, Some(&h.oid)) {
                Ok(Pushed::Done(oid)) => {
                    h.oid = oid;
                    h.claim = beat;
                }
                Ok(Pushed::Lost(why)) => errln!(
                    "hank: watch: warning: {}: the claim was taken meanwhile: {}",
                    h.issue.key,
                    crate::sanitize::line(&why)
                ),
                Err(e) => errln!(
                    "hank: watch: warning: {}: the heartbeat failed: {e}",
                    h.issue.key
                ),
            }
        }
    }
}
