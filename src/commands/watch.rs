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
//! which would be taken and why the others are not.

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
    // An issue's task names no repository: in a workspace of other repositories it would
    // run in the wrong one (issue 51).
    if let Some(ws) = crate::workspace::load(&root)? {
        crate::workspace::require_no_other_repository(&root, &ws)?;
    }
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

    fn dry_run(&mut self) -> Result<u8> {
        let (choices, _) = self.choices()?;
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
            println!(
                "{} {}\t{}\t{} item(s) → hank/{}",
                i.key,
                crate::sanitize::line(&i.title),
                what,
                task.open_items.len(),
                task.slug
            );
        }
        Ok(crate::exit::OK)
    }

    /// One poll: claim what can be taken, run it as a fleet, answer on each issue.
    fn round(&mut self) -> Result<u8> {
        let (choices, oids) = self.choices()?;
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
        let deliver = fleet::deliver::FleetDelivery::of(&self.settings, &self.root, false)?;
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
        let code = self.run_fleet(specs, deliver);
        stop.store(true, Ordering::SeqCst);
        let _ = beat.join();
        let held = shared.lock().map(|h| h.clone()).unwrap_or_default();
        let code = match code {
            Ok(code) => code,
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
        self.settle(&held)?;
        Ok(code)
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
            Some((i, _)) => Ok(i),
        }
    }

    fn run_fleet(
        &self,
        specs: Vec<crate::policy::fleet::TaskSpec>,
        deliver: fleet::deliver::FleetDelivery,
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
            into: INTO.to_string(),
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
            "hank: watch: running {} issue(s) as a fleet into {INTO}",
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
                let text = rules::comment(
                    &self.owner,
                    &Outcome::Delivered {
                        pr: pr.clone(),
                        verified: task.and_then(|t| t.verified),
                        cost_usd: cost,
                        loops: task.map_or(0, |t| t.loops),
                    },
                );
                self.answer(n, &text, Mark::Done);
                let mut done = h.claim.beat(self.now()?);
                done.state = "done".into();
                done.pr_url = pr.url().map(str::to_string);
                if let Pushed::Lost(why) =
                    claims::write(&self.root, &self.remote, &done, Some(&h.oid))?
                {
                    errln!("hank: watch: warning: {n}: the claim moved meanwhile: {why}");
                }
                errln!("hank: watch: {n} delivered");
                self.tell(
                    &h.issue,
                    "delivered",
                    done.pr_url.as_deref().unwrap_or("branch pushed"),
                );
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
