//! `hank fleet`'s rules: the tasks of a plan, their order, when one may start, how a task's
//! state moves. **\[pure\]**
//!
//! A task is a `##` section of `fix_plan.md` with open required items; its name is the heading
//! text, and `## Name (after: A, B)` makes it wait until the tasks `A` and `B` are merged.
//! Optional sections (OPTIONAL_SECTIONS) are not tasks. An unknown name in `after`, a
//! duplicate name, or a cycle is refused before anything runs.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use jiff::Timestamp;

use super::budget::{BudgetCheck, BudgetLimits, Ledger, LedgerEntry, WaitReason};
use super::fixplan;
use crate::exit::ExitReason;

pub mod file;
pub mod machine;

/// One task of the fleet, as the plan defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    /// The heading text without its `(after: …; repos: …)` clauses.
    pub name: String,
    /// The branch and folder name: `hank/<slug>`.
    pub slug: String,
    /// Tasks that must be merged before this one starts.
    pub after: Vec<String>,
    /// The workspace's repositories it changes (`(repos: api, web)`, issue 51); empty in a
    /// project without `.hank/workspace.toml`.
    pub repos: Vec<String>,
    /// The section as written (heading included): the task worktree's `fix_plan.md` body.
    pub section: String,
    /// The open required items' texts.
    pub open_items: Vec<String>,
    /// The tracker's issue this task was made from (`hank watch`).
    pub issue: Option<IssueRef>,
}

/// An issue a task was made from (`hank watch`): its number and link, shown with the task.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IssueRef {
    /// Its key (a forge's issue number, written as a number; a tracker's key).
    pub number: crate::policy::tracker::ItemKey,
    pub url: String,
}

/// A task's state (as `hank fleet status` prints it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    #[default]
    Pending,
    /// A task it comes after failed: it cannot start.
    Blocked,
    Running,
    /// Admission holds it (agents busy, memory, budget).
    Waiting,
    Verifying,
    Merging,
    Merged,
    Failed,
}

impl TaskState {
    /// The stable name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Blocked => "blocked",
            Self::Running => "running",
            Self::Waiting => "waiting",
            Self::Verifying => "verifying",
            Self::Merging => "merging",
            Self::Merged => "merged",
            Self::Failed => "failed",
        }
    }

    /// Merged or failed: nothing more happens to the task.
    #[must_use]
    pub fn is_final(self) -> bool {
        matches!(self, Self::Merged | Self::Failed | Self::Blocked)
    }

    /// A worker may be running for it.
    #[must_use]
    pub fn is_active(self) -> bool {
        matches!(self, Self::Running | Self::Verifying | Self::Merging)
    }
}

/// What happened to a task (the inputs of [`next_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    /// Admitted: its worker started.
    Started,
    /// Admission refused it for now.
    Held,
    /// Its `hank run` exited 0 (the plan done and verified): commit and merge next.
    RunDone,
    /// Its `hank run` stopped otherwise (the exit code).
    RunStopped(u8),
    /// The merge result passed VERIFY_COMMAND; the integration branch moved.
    Merged,
    /// The merge conflicted or turned the check red (counted against MAX_MERGE_ATTEMPTS).
    MergeFailed,
    /// The agent's resolution of a conflict was overtaken by newer merges
    /// ([`merge_failure_counts`]): back to the agent, not counted.
    MergeOvertaken,
    /// The merge was refused outright (configuration changed, links among hank's files, HEAD
    /// moved): the work stays on its branch for the user.
    MergeRefused,
    /// A task it comes after failed.
    DependencyFailed,
}

/// The task state machine: pending → running → verifying → merging → merged, or failed.
/// `merge_attempts` is how many merges failed so far, `max_merge_attempts` the bound
/// (MAX_MERGE_ATTEMPTS). A stop at a limit (exit 3) or an interruption (130) leaves the task
/// pending so the next `hank fleet` resumes it; a safety halt (2) or an error fails it.
#[must_use]
pub fn next_state(
    state: TaskState,
    event: TaskEvent,
    merge_attempts: u32,
    max_merge_attempts: u32,
) -> TaskState {
    use TaskEvent as E;
    use TaskState as S;
    match (state, event) {
        (S::Merged | S::Failed, _) => state,
        (_, E::DependencyFailed) => S::Blocked,
        (S::Pending | S::Waiting, E::Started) => S::Running,
        (S::Pending | S::Waiting, E::Held) => S::Waiting,
        (S::Running, E::RunDone) => S::Verifying,
        (S::Running, E::RunStopped(3 | 130)) => S::Pending,
        (S::Running, E::RunStopped(_)) => S::Failed,
        (S::Verifying | S::Merging, E::Merged) => S::Merged,
        (S::Verifying | S::Merging, E::MergeFailed) => {
            if merge_attempts.saturating_add(1) >= max_merge_attempts {
                S::Failed
            } else {
                // Back to an agent in the task's worktree with the merge's problem: pending
                // (its worktree kept) until admission starts it again.
                S::Pending
            }
        }
        (S::Verifying | S::Merging, E::MergeOvertaken) => S::Pending,
        (S::Verifying | S::Merging, E::MergeRefused) => S::Failed,
        _ => state,
    }
}

/// Whether a failed merge counts against MAX_MERGE_ATTEMPTS. A conflict after the agent
/// resolved the previous one (`handed_back_at`: the integration tip it resolved against) on a
/// tip that has moved since (`tip`) was overtaken by newer merges: the resolution was not
/// wrong, so it does not count. Everything else counts: a first conflict, a conflict on the
/// same tip (the agent did not resolve it), markers left, a red check.
#[must_use]
pub fn merge_failure_counts(conflict: bool, handed_back_at: Option<&str>, tip: &str) -> bool {
    !(conflict && handed_back_at.is_some_and(|at| at != tip))
}

/// A `##` heading read: its name and the clauses of its trailing parenthesis.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Heading {
    /// The heading text without the parenthesis of clauses.
    pub name: String,
    /// `after: A, B`: the tasks it comes after.
    pub after: Vec<String>,
    /// `repos: api, web`: the workspace's repositories it changes (issue 51).
    pub repos: Vec<String>,
}

/// `Name (repos: a, b; after: A, B)` → name "Name", after \[A, B\], repos \[a, b\]. The
/// clauses are `;`-separated, in any order; a trailing parenthesis that is not made of
/// clauses (`## Fix (the bug)`) is part of the name. A clause given twice, an empty or
/// repeated `repos:` list is an error naming the section.
pub fn read_heading(text: &str) -> Result<Heading, String> {
    let t = text.trim();
    let whole = Heading {
        name: t.to_string(),
        ..Heading::default()
    };
    let Some(open) = t.rfind('(') else {
        return Ok(whole);
    };
    if !t.ends_with(')') {
        return Ok(whole);
    }
    let clauses: Vec<&str> = t[open + 1..t.len() - 1].split(';').map(str::trim).collect();
    let is_clause = |c: &str| c.starts_with("after:") || c.starts_with("repos:");
    if !clauses.iter().all(|c| is_clause(c)) {
        return Ok(whole);
    }
    let name = t[..open].trim().to_string();
    let list = |l: &str| -> Vec<String> {
        l.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let mut heading = Heading {
        name,
        ..Heading::default()
    };
    let (mut after_seen, mut repos_seen) = (false, false);
    for c in clauses {
        if let Some(l) = c.strip_prefix("after:") {
            if std::mem::replace(&mut after_seen, true) {
                return Err(format!("section {t:?} gives `after:` twice"));
            }
            heading.after = list(l);
        } else if let Some(l) = c.strip_prefix("repos:") {
            if std::mem::replace(&mut repos_seen, true) {
                return Err(format!("section {t:?} gives `repos:` twice"));
            }
            heading.repos = list(l);
            if heading.repos.is_empty() {
                return Err(format!(
                    "section {t:?} has an empty `repos:`: name the repositories it changes"
                ));
            }
            let mut seen = BTreeSet::new();
            if let Some(twice) = heading.repos.iter().find(|r| !seen.insert(r.as_str())) {
                return Err(format!(
                    "section {t:?} names the repository {twice:?} twice"
                ));
            }
        }
    }
    Ok(heading)
}

/// The task name a heading gives (a heading [`read_heading`] refuses is its own name: such a
/// plan was refused before any task ran).
fn heading_name(text: &str) -> String {
    read_heading(text).map_or_else(|_| text.trim().to_string(), |h| h.name)
}

/// The branch-safe form of a task name: lowercase ASCII letters, digits and `-`.
#[must_use]
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out
        .trim_end_matches('-')
        .chars()
        .take(60)
        .collect::<String>();
    if out.is_empty() {
        "task".to_string()
    } else {
        out
    }
}

/// The `##` sections of a plan: (heading text, the section as written with its heading);
/// a top-level `#` heading ends a section (an empty heading marks it); fenced code is text.
fn split_sections(plan: &str) -> Vec<(String, String)> {
    let mut sections: Vec<(String, String)> = Vec::new();
    let mut fence = false;
    for line in plan.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = !fence;
        }
        let heading = (!fence)
            .then(|| line.strip_prefix("## "))
            .flatten()
            .filter(|_| !line.starts_with("###"));
        if let Some(h) = heading {
            sections.push((h.trim().to_string(), format!("{line}\n")));
        } else if !fence && line.starts_with("# ") {
            // A top-level heading ends the section above.
            sections.push((String::new(), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    sections
}

/// The tasks of a plan, checked: names unique (also as slugs), every `after` names a task,
/// no cycle. The error names the problem.
pub fn tasks_from_plan(plan: &str, optional_sections: &[String]) -> Result<Vec<TaskSpec>, String> {
    let sections = split_sections(plan);
    let mut tasks: Vec<TaskSpec> = Vec::new();
    for (heading, body) in sections {
        if heading.is_empty() {
            continue;
        }
        let parsed = fixplan::parse(&body, optional_sections);
        let open_items: Vec<String> = parsed
            .items
            .iter()
            .filter(|i| !i.done && !i.optional)
            .map(|i| i.text.clone())
            .collect();
        if open_items.is_empty() {
            continue;
        }
        let Heading { name, after, repos } = read_heading(&heading)?;
        let slug = slug(&name);
        if let Some(t) = tasks.iter().find(|t| t.name == name || t.slug == slug) {
            return Err(format!(
                "two sections make the same task {:?} (branch hank/{}): rename one",
                t.name, slug
            ));
        }
        tasks.push(TaskSpec {
            name,
            slug,
            after,
            repos,
            section: body,
            open_items,
            issue: None,
        });
    }
    let names: BTreeSet<&str> = tasks.iter().map(|t| t.name.as_str()).collect();
    for t in &tasks {
        for a in &t.after {
            if !names.contains(a.as_str()) {
                return Err(format!(
                    "task {:?} comes after {a:?}, which is not a task of the plan (a `##` section with open required items)",
                    t.name
                ));
            }
            if a == &t.name {
                return Err(format!("task {:?} comes after itself", t.name));
            }
        }
    }
    waves(&tasks)?;
    Ok(tasks)
}

/// The tasks in waves: each wave's tasks come only after tasks of earlier waves. A cycle is
/// an error naming its tasks.
pub fn waves(tasks: &[TaskSpec]) -> Result<Vec<Vec<String>>, String> {
    let mut placed: BTreeMap<&str, usize> = BTreeMap::new();
    let mut out: Vec<Vec<String>> = Vec::new();
    while placed.len() < tasks.len() {
        let wave: Vec<&TaskSpec> = tasks
            .iter()
            .filter(|t| !placed.contains_key(t.name.as_str()))
            .filter(|t| t.after.iter().all(|a| placed.contains_key(a.as_str())))
            .collect();
        if wave.is_empty() {
            let left: Vec<&str> = tasks
                .iter()
                .filter(|t| !placed.contains_key(t.name.as_str()))
                .map(|t| t.name.as_str())
                .collect();
            return Err(format!(
                "the tasks' `(after: …)` form a cycle among: {}",
                left.join(", ")
            ));
        }
        let n = out.len();
        out.push(wave.iter().map(|t| t.name.clone()).collect());
        for t in wave {
            placed.insert(t.name.as_str(), n);
        }
    }
    Ok(out)
}

/// Facts for an admission decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionFacts {
    /// Tasks with a worker now.
    pub running: usize,
    /// `--agents N`.
    pub max_agents: usize,
    /// Available memory in bytes (`None`: unknown, not a reason to hold).
    pub free_memory: Option<u64>,
    /// FLEET_MIN_FREE_MEMORY in bytes.
    pub min_free_memory: u64,
}

/// Why a ready task does not start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Start,
    Hold(String),
}

/// May one more task start?
#[must_use]
pub fn admit(f: &AdmissionFacts) -> Admission {
    if f.running >= f.max_agents.max(1) {
        return Admission::Hold(format!("{} of {} agents running", f.running, f.max_agents));
    }
    if let Some(free) = f.free_memory
        && f.running > 0
        && free < f.min_free_memory
    {
        return Admission::Hold(format!(
            "{} MiB of memory available, FLEET_MIN_FREE_MEMORY is {} MiB",
            free / (1 << 20),
            f.min_free_memory / (1 << 20)
        ));
    }
    Admission::Start
}

/// One call on the fleet-wide ledger (`store::fleet_ledger`), as its lines tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetCall {
    /// When it was reserved (before its spawn).
    pub at: Timestamp,
    /// Tokens and USD once its answer was folded (`None`: in flight, or its worker died).
    pub spent: Option<(u64, f64)>,
    /// Its worker is still running (an unsettled call of a live worker is in flight).
    pub live: bool,
    /// Made since this fleet started (MAX_COST_USD counts this fleet's calls, as a run's
    /// counts the run's; the rolling hour counts every call).
    pub this_fleet: bool,
}

/// The fleet-wide limits checked before every spawn of every task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetLimits {
    /// MAX_CALLS_PER_HOUR and MAX_TOKENS_PER_HOUR over every task's calls.
    pub budget: BudgetLimits,
    /// MAX_COST_USD over every task's calls (0 = unlimited).
    pub max_cost_usd: f64,
}

/// What the fleet-wide ledger says about one more call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FleetVerdict {
    /// The call fits: it is recorded.
    Go,
    /// The rolling-hour caps: wait until then.
    Wait {
        until: Timestamp,
        reason: WaitReason,
    },
    /// A cap the fleet cannot wait out (MAX_COST_USD): the task's run stops.
    Stop(ExitReason),
}

/// Slack when comparing USD sums (0.1 + 0.2 is 0.30000000000000004).
const USD_EPSILON: f64 = 1e-9;

/// May one more call start, given every call of the fleet so far? **The budget of the whole
/// fleet**: the rolling-hour caps over all tasks' calls (tokens counted once their answers are
/// in), and `MAX_COST_USD` over what the calls cost, counting each call still in flight at the
/// largest cost one call of this fleet has had so far — so two tasks reaching their spawn
/// while a third call runs cannot carry the fleet past its cap: a call starts only while the
/// settled cost plus the calls in flight stay under the cap, the rule a single run applies
/// between its calls. (With no settled call yet, calls in flight count nothing: the first
/// calls of a fleet start together.)
#[must_use]
pub fn fleet_budget(calls: &[FleetCall], now: Timestamp, limits: &FleetLimits) -> FleetVerdict {
    if limits.max_cost_usd > 0.0 {
        let ours = || calls.iter().filter(|c| c.this_fleet);
        let settled: f64 = ours().filter_map(|c| c.spent.map(|s| s.1)).sum();
        let largest = ours()
            .filter_map(|c| c.spent.map(|s| s.1))
            .fold(0.0_f64, f64::max);
        let in_flight = ours().filter(|c| c.spent.is_none() && c.live).count();
        let committed = settled + largest * in_flight as f64;
        if committed + USD_EPSILON >= limits.max_cost_usd {
            return FleetVerdict::Stop(ExitReason::CostBudget);
        }
    }
    let mut ledger = Ledger::default();
    let mut sorted: Vec<&FleetCall> = calls.iter().collect();
    sorted.sort_by_key(|c| c.at);
    for c in sorted {
        ledger.entries.push(LedgerEntry {
            at: c.at.min(now),
            tokens: c.spent.map_or(0, |s| s.0),
        });
    }
    match ledger.check(now, &limits.budget) {
        BudgetCheck::Allow => FleetVerdict::Go,
        BudgetCheck::Wait { until, reason } => FleetVerdict::Wait { until, reason },
    }
}

/// A usage window as the fleet's admission sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowFacts {
    /// `five_hour`, `seven_day`, …
    pub name: String,
    /// Used now, in percent (the shared reading; 0 after its reset).
    pub percent: f64,
    /// Its MAX_WINDOW_PERCENT.
    pub limit: u32,
    /// How far it rose per task started so far, in percent points (the forecast of one more
    /// task; see [`rise_per_task`]).
    pub per_task: f64,
    /// When it resets, if known (how long a drain lasts).
    pub resets_at: Option<Timestamp>,
}

/// How far a window moved per task: its rise since the fleet first saw it, divided by the
/// tasks started since (0 when it did not rise or no task started).
#[must_use]
pub fn rise_per_task(first_percent: f64, now_percent: f64, tasks_started: usize) -> f64 {
    if tasks_started == 0 || now_percent <= first_percent {
        return 0.0;
    }
    (now_percent - first_percent) / tasks_started as f64
}

/// May one more task start under MAX_WINDOW_PERCENT? `None` when yes, else why not.
///
/// A window at or over its limit holds every start (the fleet drains: running tasks go on,
/// their own gate stops each at the limit). Below it, the forecast is the window now plus one
/// more share for each running task and the new one (`percent + per_task × (running + 1)`);
/// a start that the forecast puts at or past the limit is held while tasks run. With nothing
/// running a task starts anyway: its own run stops at the limit exactly, and holding it would
/// leave the fleet idle under its limit until the window resets.
#[must_use]
pub fn window_admission(windows: &[WindowFacts], running: usize) -> Option<String> {
    for w in windows {
        let limit = f64::from(w.limit);
        if w.percent + USD_EPSILON >= limit {
            let until = w
                .resets_at
                .map_or_else(|| "its reset".to_string(), |r| r.to_string());
            return Some(format!(
                "usage window {} at {:.0}% (MAX_WINDOW_PERCENT {}%): draining until {until}",
                w.name, w.percent, w.limit
            ));
        }
        let forecast = w.percent + w.per_task * (running as f64 + 1.0);
        if running > 0 && forecast + USD_EPSILON >= limit {
            return Some(format!(
                "usage window {} at {:.0}%, {:.1} points per task: one more task would take it \
                 to {:.0}% (MAX_WINDOW_PERCENT {}%)",
                w.name, w.percent, w.per_task, forecast, w.limit
            ));
        }
    }
    None
}

/// The task whose `after` are all merged, in plan order, that has not started: the next to
/// admit. `states` maps each task to its state.
#[must_use]
pub fn ready<'a>(tasks: &'a [TaskSpec], states: &BTreeMap<String, TaskState>) -> Vec<&'a TaskSpec> {
    tasks
        .iter()
        .filter(|t| {
            matches!(
                states.get(&t.name).copied().unwrap_or_default(),
                TaskState::Pending | TaskState::Waiting
            )
        })
        .filter(|t| {
            t.after
                .iter()
                .all(|a| states.get(a).copied() == Some(TaskState::Merged))
        })
        .collect()
}

/// `hank fleet --retry [TASK]`: the tasks to queue again — the one `named` (by its name or
/// its slug), or every failed one of the plan (none is fine: nothing to queue). Err: the
/// named task is not one of the plan's, or has not failed (nor is it blocked).
pub fn retry_targets(
    file: &file::FleetFile,
    specs: &[TaskSpec],
    named: Option<&str>,
) -> Result<Vec<String>, String> {
    let state_of = |name: &str| {
        file.tasks
            .iter()
            .find(|t| t.name == name)
            .map_or(TaskState::Pending, |t| t.state)
    };
    let Some(named) = named.map(str::trim) else {
        return Ok(specs
            .iter()
            .filter(|s| state_of(&s.name) == TaskState::Failed)
            .map(|s| s.name.clone())
            .collect());
    };
    let Some(spec) = specs.iter().find(|s| s.name == named || s.slug == named) else {
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        return Err(format!(
            "--retry {named:?}: no task of the plan is named so (its tasks: {})",
            names.join(", ")
        ));
    };
    match state_of(&spec.name) {
        TaskState::Failed | TaskState::Blocked => Ok(vec![spec.name.clone()]),
        other => Err(format!(
            "--retry {named:?}: task {:?} has not failed (it is {}): nothing to queue again",
            spec.name,
            other.as_str()
        )),
    }
}

/// Tasks that can never start: one they come after failed or is blocked.
#[must_use]
pub fn newly_blocked(tasks: &[TaskSpec], states: &BTreeMap<String, TaskState>) -> Vec<String> {
    tasks
        .iter()
        .filter(|t| !states.get(&t.name).copied().unwrap_or_default().is_final())
        .filter(|t| {
            t.after.iter().any(|a| {
                matches!(
                    states.get(a).copied(),
                    Some(TaskState::Failed | TaskState::Blocked)
                )
            })
        })
        .map(|t| t.name.clone())
        .collect()
}

/// The integration plan with the given items of the task's section ticked (`- [ ]` → `- [x]`).
#[must_use]
pub fn tick_items(plan: &str, task: &str, done: &[String]) -> String {
    let mut out = String::with_capacity(plan.len());
    let mut inside = false;
    for line in plan.split_inclusive('\n') {
        if let Some(h) = line.strip_prefix("## ") {
            inside = heading_name(h.trim_end()) == task;
        } else if line.starts_with("# ") {
            inside = false;
        }
        if inside {
            let t = line.trim_start();
            let indent = &line[..line.len() - t.len()];
            let marker = ["- [ ] ", "* [ ] ", "+ [ ] "]
                .iter()
                .find(|m| t.starts_with(**m));
            if let Some(m) = marker {
                let text = t[m.len()..].trim_end();
                if done.iter().any(|d| d == text) {
                    out.push_str(indent);
                    out.push_str(&m.replace("[ ]", "[x]"));
                    out.push_str(&t[m.len()..]);
                    continue;
                }
            }
        }
        out.push_str(line);
    }
    out
}

/// A plan as a CI job sees it (`hank fleet plan`, `hank fleet run-task`): the tasks with open
/// required items, and the sections whose required items are all ticked — tasks merged into
/// the checked-out branch, which satisfy an `(after: …)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlanView {
    /// Tasks with open required items, in plan order.
    pub open: Vec<TaskSpec>,
    /// Names of the sections whose required items are all ticked.
    pub done: Vec<String>,
}

impl PlanView {
    /// The open task named `name` (its heading text, or its slug).
    #[must_use]
    pub fn find(&self, name: &str) -> Option<&TaskSpec> {
        let name = name.trim();
        self.open
            .iter()
            .find(|t| t.name == name)
            .or_else(|| self.open.iter().find(|t| t.slug == name))
    }

    /// Whether `name` (heading text or slug) is a section whose items are all ticked.
    #[must_use]
    pub fn is_done(&self, name: &str) -> bool {
        let name = name.trim();
        self.done.iter().any(|d| d == name || slug(d) == name)
    }

    /// Every task name of the plan, open ones first (for an error naming the known tasks).
    #[must_use]
    pub fn known(&self) -> Vec<String> {
        self.open
            .iter()
            .map(|t| t.name.clone())
            .chain(self.done.iter().cloned())
            .collect()
    }
}

/// The plan's tasks for a CI job: like [`tasks_from_plan`], but a section whose required
/// items are all ticked is a merged task, and an `(after: …)` may name it (it is satisfied).
/// An `after` naming no section, a duplicate name or slug, or a cycle among the open tasks is
/// an error naming the problem.
pub fn plan_view(plan: &str, optional_sections: &[String]) -> Result<PlanView, String> {
    let mut view = PlanView::default();
    for (heading, body) in split_sections(plan) {
        if heading.is_empty() {
            continue;
        }
        let parsed = fixplan::parse(&body, optional_sections);
        let required: Vec<_> = parsed.items.iter().filter(|i| !i.optional).collect();
        if required.is_empty() {
            continue;
        }
        let Heading { name, after, repos } = read_heading(&heading)?;
        let slug = slug(&name);
        let clash = view
            .open
            .iter()
            .map(|t| t.name.as_str())
            .chain(view.done.iter().map(String::as_str))
            .find(|n| *n == name || self::slug(n) == slug);
        if let Some(other) = clash {
            return Err(format!(
                "two sections make the same task {other:?} (branch hank/{slug}): rename one"
            ));
        }
        let open_items: Vec<String> = required
            .iter()
            .filter(|i| !i.done)
            .map(|i| i.text.clone())
            .collect();
        if open_items.is_empty() {
            view.done.push(name);
            continue;
        }
        view.open.push(TaskSpec {
            name,
            slug,
            after,
            repos,
            section: body,
            open_items,
            issue: None,
        });
    }
    for t in &view.open {
        for a in &t.after {
            if a == &t.name {
                return Err(format!("task {:?} comes after itself", t.name));
            }
            if !view.done.contains(a) && !view.open.iter().any(|o| &o.name == a) {
                return Err(format!(
                    "task {:?} comes after {a:?}, which is not a section of the plan with required items",
                    t.name
                ));
            }
        }
    }
    let pending: Vec<TaskSpec> = view
        .open
        .iter()
        .map(|t| TaskSpec {
            after: t
                .after
                .iter()
                .filter(|a| !view.done.contains(a))
                .cloned()
                .collect(),
            ..t.clone()
        })
        .collect();
    waves(&pending)?;
    Ok(view)
}

/// Where an open task stands for `hank fleet plan`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// It can start now.
    Ready,
    /// It waits until these tasks are merged (their items ticked on the checked-out branch).
    After(Vec<String>),
    /// Its branch on the remote holds its finished work (every item ticked): it waits for
    /// its pull request to be merged, not for another run.
    Delivered,
    /// A job holds its claim (the owner), until the lease ends.
    Running(String),
}

/// Each open task of `view` with its standing. `delivered`: tasks whose remote branch has
/// all their items ticked; `running`: tasks claimed by a job now, with its owner. A live
/// claim comes first, then a delivery, then the `after` not yet merged.
#[must_use]
pub fn standings<'a>(
    view: &'a PlanView,
    delivered: &BTreeSet<String>,
    running: &BTreeMap<String, String>,
) -> Vec<(&'a TaskSpec, Standing)> {
    view.open
        .iter()
        .map(|t| {
            let standing = if let Some(owner) = running.get(&t.name) {
                Standing::Running(owner.clone())
            } else if delivered.contains(&t.name) {
                Standing::Delivered
            } else {
                let missing: Vec<String> = t
                    .after
                    .iter()
                    .filter(|a| !view.done.contains(a))
                    .cloned()
                    .collect();
                if missing.is_empty() {
                    Standing::Ready
                } else {
                    Standing::After(missing)
                }
            };
            (t, standing)
        })
        .collect()
}

/// Whether the task `task` of `plan` has required items and all of them are ticked (the
/// plan of a task's branch: its work is finished there).
#[must_use]
pub fn task_finished_in(plan: &str, task: &str, optional_sections: &[String]) -> bool {
    split_sections(plan).iter().any(|(heading, body)| {
        !heading.is_empty() && heading_name(heading) == task && {
            let parsed = fixplan::parse(body, optional_sections);
            let mut required = parsed.items.iter().filter(|i| !i.optional).peekable();
            required.peek().is_some() && required.all(|i| i.done)
        }
    })
}

/// The plan of a task run on its own: the task's section under a top-level heading (the
/// loop's `.hank/fix_plan.md` while `hank fleet run-task` runs it).
#[must_use]
pub fn task_plan(spec: &TaskSpec) -> String {
    format!(
        "# Fix plan — task {:?} (hank fleet run-task)\n\n{}",
        spec.name, spec.section
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_wrong_resolution_counts_as_a_failed_merge() {
        for (conflict, at, tip, counts) in [
            // A first conflict: the agent has not had a go at it yet.
            (true, None, "t1", true),
            // Resolved against t1, overtaken by a merge that moved the branch to t2.
            (true, Some("t1"), "t2", false),
            // Conflicting again on the very tip it was handed: not resolved.
            (true, Some("t1"), "t1", true),
            // Markers left or the check red: the resolution itself was wrong.
            (false, Some("t1"), "t2", true),
            (false, None, "t1", true),
        ] {
            assert_eq!(
                merge_failure_counts(conflict, at, tip),
                counts,
                "{conflict} {at:?} {tip}"
            );
        }
    }

    fn opt() -> Vec<String> {
        fixplan::default_optional_sections()
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn call(secs: i64, spent: Option<(u64, f64)>, live: bool) -> FleetCall {
        FleetCall {
            at: at(secs),
            spent,
            live,
            this_fleet: true,
        }
    }

    #[test]
    fn the_fleet_budget_table() {
        let cost = |max_cost_usd: f64| FleetLimits {
            budget: BudgetLimits {
                max_calls_per_hour: 0,
                max_tokens_per_hour: 0,
            },
            max_cost_usd,
        };
        let tokens = FleetLimits {
            budget: BudgetLimits {
                max_calls_per_hour: 0,
                max_tokens_per_hour: 1000,
            },
            max_cost_usd: 0.0,
        };
        let calls3 = FleetLimits {
            budget: BudgetLimits {
                max_calls_per_hour: 3,
                max_tokens_per_hour: 0,
            },
            max_cost_usd: 0.0,
        };
        let stop = FleetVerdict::Stop(ExitReason::CostBudget);
        let rows: Vec<(&str, Vec<FleetCall>, FleetLimits, FleetVerdict)> = vec![
            ("empty ledger", vec![], cost(3.0), FleetVerdict::Go),
            (
                "first calls start together (nothing settled)",
                vec![call(0, None, true), call(1, None, true)],
                cost(3.0),
                FleetVerdict::Go,
            ),
            (
                "two settled $1 calls, nothing in flight: one more",
                vec![
                    call(0, Some((10, 1.0)), false),
                    call(1, Some((10, 1.0)), false),
                ],
                cost(3.0),
                FleetVerdict::Go,
            ),
            (
                "two settled, one in flight at the largest cost: the cap is committed",
                vec![
                    call(0, Some((10, 1.0)), true),
                    call(1, Some((10, 1.0)), true),
                    call(2, None, true),
                ],
                cost(3.0),
                stop,
            ),
            (
                "a dead worker's unsettled call is not in flight",
                vec![
                    call(0, Some((10, 1.0)), false),
                    call(1, Some((10, 1.0)), false),
                    call(2, None, false),
                ],
                cost(3.0),
                FleetVerdict::Go,
            ),
            (
                "at the cap exactly (float sums)",
                vec![
                    call(0, Some((0, 0.1)), false),
                    call(1, Some((0, 0.2)), false),
                ],
                cost(0.3),
                stop,
            ),
            (
                "no cost cap",
                vec![call(0, Some((0, 99.0)), false)],
                cost(0.0),
                FleetVerdict::Go,
            ),
            (
                "an earlier fleet's spending is not this fleet's",
                vec![FleetCall {
                    this_fleet: false,
                    ..call(0, Some((0, 99.0)), false)
                }],
                cost(3.0),
                FleetVerdict::Go,
            ),
            (
                "tokens of every task in the hour",
                vec![
                    call(0, Some((600, 0.0)), false),
                    call(10, Some((400, 0.0)), false),
                ],
                tokens,
                FleetVerdict::Wait {
                    until: at(3600),
                    reason: WaitReason::TokenLimit,
                },
            ),
            (
                "calls of every task in the hour",
                vec![
                    call(5, None, true),
                    call(0, None, true),
                    call(9, None, false),
                ],
                calls3,
                FleetVerdict::Wait {
                    until: at(3600),
                    reason: WaitReason::RateLimit,
                },
            ),
        ];
        for (name, calls, limits, want) in rows {
            assert_eq!(fleet_budget(&calls, at(20), &limits), want, "{name}");
        }
    }

    #[test]
    fn window_admission_table() {
        let w = |percent: f64, per_task: f64| WindowFacts {
            name: "five_hour".into(),
            percent,
            limit: 80,
            per_task,
            resets_at: None,
        };
        for (name, windows, running, held) in [
            ("no window", vec![], 3, false),
            ("far below", vec![w(10.0, 5.0)], 1, false),
            ("at the limit: drains", vec![w(80.0, 0.0)], 0, true),
            ("over the limit", vec![w(93.0, 1.0)], 2, true),
            (
                "forecast crosses with one running",
                vec![w(60.0, 10.0)],
                1,
                true,
            ),
            ("forecast just under", vec![w(60.0, 9.0)], 1, false),
            (
                "forecast crosses, nothing running: one starts",
                vec![w(75.0, 10.0)],
                0,
                false,
            ),
            (
                "the worst window decides",
                vec![w(10.0, 0.0), w(79.5, 0.0)],
                0,
                false,
            ),
        ] {
            assert_eq!(
                window_admission(&windows, running).is_some(),
                held,
                "{name}"
            );
        }
        let why = window_admission(&[w(60.0, 10.0)], 1).unwrap();
        assert!(why.contains("five_hour") && why.contains("80%"), "{why}");
        let drain = WindowFacts {
            resets_at: Some(at(18_000)),
            ..w(85.0, 0.0)
        };
        let why = window_admission(&[drain], 0).unwrap();
        assert!(
            why.ends_with(&format!("draining until {}", at(18_000))),
            "{why}"
        );
        assert_eq!(rise_per_task(20.0, 50.0, 3), 10.0);
        assert_eq!(rise_per_task(20.0, 10.0, 3), 0.0);
        assert_eq!(rise_per_task(20.0, 50.0, 0), 0.0);
    }

    const PLAN: &str = "# Fix plan\n\n## Parser\n- [ ] lex\n- [x] done already\n\n\
                        ## API (after: Parser)\n- [ ] routes\n\n## Docs (after: API, Parser)\n- [ ] readme\n\n\
                        ## Finished\n- [x] all\n\n## Optional\n- [ ] polish\n";

    #[test]
    fn tasks_and_waves_from_a_plan() {
        let tasks = tasks_from_plan(PLAN, &opt()).unwrap();
        let names: Vec<&str> = tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Parser", "API", "Docs"]);
        assert_eq!(tasks[0].open_items, ["lex"]);
        assert_eq!(tasks[2].after, ["API", "Parser"]);
        assert_eq!(tasks[1].slug, "api");
        assert!(
            tasks[1]
                .section
                .starts_with("## API (after: Parser)\n- [ ] routes")
        );
        assert_eq!(
            waves(&tasks).unwrap(),
            vec![vec!["Parser"], vec!["API"], vec!["Docs"]]
        );
    }

    #[test]
    fn bad_plans_are_refused_naming_the_problem() {
        let table = [
            ("## A (after: Z)\n- [ ] x\n", "\"Z\""),
            (
                "## A (after: B)\n- [ ] x\n## B (after: A)\n- [ ] y\n",
                "cycle among: A, B",
            ),
            ("## A (after: A)\n- [ ] x\n", "after itself"),
            ("## A b\n- [ ] x\n## a-B\n- [ ] y\n", "same task"),
            // A finished task is not a task: coming after it is an unknown name.
            ("## A\n- [x] x\n## B (after: A)\n- [ ] y\n", "\"A\""),
        ];
        for (plan, want) in table {
            let err = tasks_from_plan(plan, &opt()).unwrap_err();
            assert!(err.contains(want), "{plan:?}: {err}");
        }
    }

    #[test]
    fn code_fences_and_sub_headings_stay_in_their_section() {
        let plan =
            "## A\n### detail\n- [ ] x\n```\n## not a heading\n- [ ] nope\n```\n## B\n- [ ] y\n";
        let tasks = tasks_from_plan(plan, &opt()).unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].open_items, ["x"]);
    }

    #[test]
    fn slugs_are_branch_safe() {
        for (name, want) in [
            ("Parser", "parser"),
            ("Add the API!", "add-the-api"),
            ("  ", "task"),
            ("ünï code", "n-code"),
        ] {
            assert_eq!(slug(name), want, "{name:?}");
        }
    }

    #[test]
    fn the_task_state_machine() {
        use TaskEvent as E;
        use TaskState as S;
        let table = [
            (S::Pending, E::Started, 0, S::Running),
            (S::Pending, E::Held, 0, S::Waiting),
            (S::Waiting, E::Started, 0, S::Running),
            (S::Running, E::RunDone, 0, S::Verifying),
            (S::Running, E::RunStopped(3), 0, S::Pending),
            (S::Running, E::RunStopped(130), 0, S::Pending),
            (S::Running, E::RunStopped(2), 0, S::Failed),
            (S::Running, E::RunStopped(1), 0, S::Failed),
            (S::Merging, E::Merged, 0, S::Merged),
            (S::Merging, E::MergeFailed, 0, S::Pending),
            (S::Merging, E::MergeFailed, 1, S::Failed),
            (S::Merging, E::MergeOvertaken, 1, S::Pending),
            (S::Merging, E::MergeOvertaken, 5, S::Pending),
            (S::Merging, E::MergeRefused, 0, S::Failed),
            (S::Pending, E::DependencyFailed, 0, S::Blocked),
            (S::Merged, E::DependencyFailed, 0, S::Merged),
            (S::Failed, E::Started, 0, S::Failed),
        ];
        for (from, ev, attempts, want) in table {
            assert_eq!(next_state(from, ev, attempts, 2), want, "{from:?} {ev:?}");
        }
    }

    #[test]
    fn admission() {
        let f = |running, free| AdmissionFacts {
            running,
            max_agents: 2,
            free_memory: free,
            min_free_memory: 2 << 30,
        };
        assert_eq!(admit(&f(0, Some(1 << 30))), Admission::Start); // one always may run
        assert_eq!(admit(&f(1, None)), Admission::Start);
        assert!(
            matches!(admit(&f(1, Some(1 << 30))), Admission::Hold(w) if w.contains("FLEET_MIN_FREE_MEMORY"))
        );
        assert!(matches!(admit(&f(2, Some(8 << 30))), Admission::Hold(w) if w.contains("2 of 2")));
    }

    #[test]
    fn ready_and_blocked() {
        let tasks = tasks_from_plan(PLAN, &opt()).unwrap();
        let mut st = BTreeMap::new();
        let names = |v: Vec<&TaskSpec>| v.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(ready(&tasks, &st)), ["Parser"]);
        st.insert("Parser".to_string(), TaskState::Merged);
        assert_eq!(names(ready(&tasks, &st)), ["API"]);
        st.insert("API".to_string(), TaskState::Failed);
        assert_eq!(newly_blocked(&tasks, &st), ["Docs"]);
    }

    #[test]
    fn ticking_touches_only_the_task_section() {
        let plan = "## A\n- [ ] x\n- [ ] y\n## B\n- [ ] x\n";
        assert_eq!(
            tick_items(plan, "A", &["x".to_string()]),
            "## A\n- [x] x\n- [ ] y\n## B\n- [ ] x\n"
        );
    }

    #[test]
    fn a_ci_plan_counts_ticked_sections_as_merged() {
        let plan = "# Plan\n\n## Parser\n- [x] lex\n### Optional\n- [ ] polish\n\n\
                    ## API (after: Parser)\n- [ ] routes\n\n## Docs (after: API)\n- [ ] readme\n\n\
                    ## Notes\nno items\n";
        let view = plan_view(plan, &opt()).unwrap();
        let open: Vec<&str> = view.open.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(open, ["API", "Docs"]);
        assert_eq!(view.done, ["Parser"]);
        assert_eq!(view.find("api").map(|t| t.name.as_str()), Some("API"));
        assert_eq!(view.find("Docs").map(|t| t.slug.as_str()), Some("docs"));
        assert!(view.find("Parser").is_none() && view.is_done("parser"));
        assert_eq!(view.known(), ["API", "Docs", "Parser"]);
        // tasks_from_plan refuses the same plan (its `after` names no open task).
        assert!(tasks_from_plan(plan, &opt()).is_err());
    }

    #[test]
    fn a_ci_plan_refuses_what_cannot_run() {
        for (plan, want) in [
            ("## A (after: Z)\n- [ ] x\n", "not a section"),
            ("## A (after: A)\n- [ ] x\n", "after itself"),
            (
                "## A (after: B)\n- [ ] x\n## B (after: A)\n- [ ] y\n",
                "cycle",
            ),
            ("## A b\n- [ ] x\n## a-B\n- [x] y\n", "same task"),
            ("## A\n- [x] x\n## A\n- [ ] y\n", "same task"),
        ] {
            let e = plan_view(plan, &opt()).unwrap_err();
            assert!(e.contains(want), "{plan:?}: {e}");
        }
        assert_eq!(plan_view("# empty\n", &opt()).unwrap(), PlanView::default());
    }

    #[test]
    fn standings_of_a_ci_plan() {
        let plan = "## A\n- [ ] x\n## B (after: A)\n- [ ] y\n## C (after: Done)\n- [ ] z\n\
                    ## D (after: A, Done)\n- [ ] w\n## Done\n- [x] v\n";
        let view = plan_view(plan, &opt()).unwrap();
        let names = |l: &[&str]| l.iter().map(ToString::to_string).collect::<Vec<_>>();
        let delivered: BTreeSet<String> = BTreeSet::new();
        let mut running = BTreeMap::new();
        let got = |d: &BTreeSet<String>, r: &BTreeMap<String, String>| {
            standings(&view, d, r)
                .into_iter()
                .map(|(t, s)| (t.name.clone(), s))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            got(&delivered, &running),
            vec![
                ("A".to_string(), Standing::Ready),
                ("B".to_string(), Standing::After(names(&["A"]))),
                ("C".to_string(), Standing::Ready),
                ("D".to_string(), Standing::After(names(&["A"]))),
            ]
        );
        running.insert("A".to_string(), "job-1".to_string());
        let delivered: BTreeSet<String> = ["C".to_string(), "A".to_string()].into();
        let s = got(&delivered, &running);
        assert_eq!(s[0].1, Standing::Running("job-1".into()));
        assert_eq!(s[2].1, Standing::Delivered);
        assert_eq!(s[1].1, Standing::After(names(&["A"])));
    }

    #[test]
    fn a_task_is_finished_when_its_required_items_are_ticked() {
        let plan = "## A\n- [x] x\n### Optional\n- [ ] maybe\n## B\n- [x] y\n- [ ] z\n## C\ntext\n";
        assert!(task_finished_in(plan, "A", &opt()));
        assert!(!task_finished_in(plan, "B", &opt()));
        assert!(!task_finished_in(plan, "C", &opt()));
        assert!(!task_finished_in(plan, "Z", &opt()));
        let view = plan_view("## B\n- [x] y\n- [ ] z\n", &opt()).unwrap();
        let own = task_plan(&view.open[0]);
        assert!(own.starts_with("# Fix plan — task \"B\""), "{own}");
        assert!(own.ends_with("## B\n- [x] y\n- [ ] z\n"), "{own}");
    }
}
