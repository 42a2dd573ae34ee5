//! `hank watch`'s rules: which labelled issues are taken and why the others are not, the
//! claim's lease, the rate budget's arithmetic, the task an issue becomes and the text hank
//! writes on the issue. **\[pure\]** (time is an argument).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::policy::fleet::{IssueRef, TaskSpec, slug};

/// The label that shows a claimed issue is being worked on (never the lock: the claim is).
pub const WORKING: &str = "hank:working";
/// The label of an issue whose pull request hank opened.
pub const DONE: &str = "hank:done";
/// The label of an issue whose task failed (removing it lets a watch take the issue again).
pub const FAILED: &str = "hank:failed";
/// How long a claim holds without a heartbeat.
pub const LEASE: Duration = Duration::from_secs(30 * 60);
/// How often a running claim's heartbeat renews its lease.
pub const HEARTBEAT: Duration = Duration::from_secs(5 * 60);
/// The marker of hank's one comment on an issue (edited in place).
pub const COMMENT_MARKER: &str = "<!-- hank:watch -->";
/// Requests kept back from the forge's remaining budget (for the user's own `gh`).
pub const RATE_RESERVE: u64 = 50;

/// Which tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrackerKind {
    GitHub,
    GitLab,
    Linear,
    Jira,
    Trello,
    Plane,
    Shortcut,
}

impl TrackerKind {
    /// Every tracker, in `--tracker`'s order.
    pub const ALL: [Self; 7] = [
        Self::GitHub,
        Self::GitLab,
        Self::Linear,
        Self::Jira,
        Self::Trello,
        Self::Plane,
        Self::Shortcut,
    ];

    /// `github`, `gitlab`, `linear`… (the claim ref's prefix, `--tracker`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GitHub => "github",
            Self::GitLab => "gitlab",
            Self::Linear => "linear",
            Self::Jira => "jira",
            Self::Trello => "trello",
            Self::Plane => "plane",
            Self::Shortcut => "shortcut",
        }
    }

    /// Its name for people (`GitHub`, `Linear`…).
    #[must_use]
    pub fn title(self) -> &'static str {
        match self {
            Self::GitHub => "GitHub",
            Self::GitLab => "GitLab",
            Self::Linear => "Linear",
            Self::Jira => "Jira",
            Self::Trello => "Trello",
            Self::Plane => "Plane",
            Self::Shortcut => "Shortcut",
        }
    }

    /// The tracker is the code's forge (its items are closed by a pull request's `Closes #N`,
    /// its open pull requests are listed).
    #[must_use]
    pub fn is_forge(self) -> bool {
        matches!(self, Self::GitHub | Self::GitLab)
    }

    /// `--tracker` / TRACKER.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// An item's key in its tracker: the issue number of a forge (`12`, shown `#12`), else the
/// tracker's own key (`ENG-123`, `PROJ-42`, `sc-7`). It names the claim ref, the task, its
/// branch and its pull request. Written as a JSON number when it is one (the files an older
/// hank wrote read the same), else as a string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ItemKey(String);

impl ItemKey {
    /// The key of a forge's issue `n`.
    #[must_use]
    pub fn number(n: u64) -> Self {
        Self(n.to_string())
    }

    /// A tracker's key as it gives it: 1–64 ASCII letters, digits, `-`, `_` or `.`, not
    /// starting with `-` or `.` (it goes into a ref and a branch name).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && !s.starts_with(['-', '.'])
            && !s.contains("..")
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        ok.then(|| Self(s.to_string()))
    }

    /// The forge issue number, when it is one.
    #[must_use]
    pub fn as_number(&self) -> Option<u64> {
        if self.0.starts_with('0') && self.0.len() > 1 {
            return None;
        }
        self.0.parse().ok()
    }

    /// The key as the tracker writes it (`12`, `ENG-123`).
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The tag of the task's items (`[#12]`, `[ENG-123]`).
    #[must_use]
    pub fn tag(&self) -> String {
        format!("[{self}]")
    }
}

impl From<u64> for ItemKey {
    fn from(n: u64) -> Self {
        Self::number(n)
    }
}

impl std::fmt::Display for ItemKey {
    /// `#12` for a forge's issue, the key as it is otherwise.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.as_number().is_some() {
            write!(f, "#{}", self.0)
        } else {
            f.write_str(&self.0)
        }
    }
}

impl Ord for ItemKey {
    /// Numbers by value; keys by their prefix, then their number (`ENG-9` before `ENG-10`).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        fn parts(k: &ItemKey) -> (String, Option<u64>, String) {
            let s = k.as_str();
            let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
            let (head, tail) = s.split_at(s.len() - digits);
            (head.to_string(), tail.parse().ok(), s.to_string())
        }
        parts(self).cmp(&parts(other))
    }
}

impl PartialOrd for ItemKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for ItemKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.as_number() {
            Some(n) => s.serialize_u64(n),
            None => s.serialize_str(&self.0),
        }
    }
}

impl<'de> Deserialize<'de> for ItemKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Self::number(n)),
            Raw::S(s) => Self::parse(&s)
                .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not an item key"))),
        }
    }
}

impl Default for ItemKey {
    fn default() -> Self {
        Self::number(0)
    }
}

/// An open issue as the tracker lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Issue {
    /// Its key (`12` for a forge's `#12`, `ENG-123`).
    pub key: ItemKey,
    pub title: String,
    pub body: String,
    pub url: String,
    pub labels: Vec<String>,
}

/// An open pull (merge) request, as far as the choice needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpenPr {
    /// Its head branch.
    pub head: String,
    pub body: String,
    pub url: String,
}

/// What a claim ref holds (`claim.json` in its commit's tree).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub tracker: TrackerKind,
    pub issue: ItemKey,
    /// `user@host pid N`: who holds it.
    pub owner: String,
    /// `working`, `done`.
    pub state: String,
    pub claimed_at: Timestamp,
    pub heartbeat_at: Timestamp,
    /// After this, with no newer heartbeat, another watcher may take it over.
    pub lease_until: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_url: Option<String>,
}

impl Claim {
    /// A new claim of `issue` by `owner` at `now`.
    #[must_use]
    pub fn new(
        tracker: TrackerKind,
        issue: impl Into<ItemKey>,
        owner: &str,
        now: Timestamp,
    ) -> Self {
        Self {
            tracker,
            issue: issue.into(),
            owner: owner.to_string(),
            state: "working".into(),
            claimed_at: now,
            heartbeat_at: now,
            lease_until: lease_end(now),
            pr_url: None,
        }
    }

    /// The claim with its heartbeat at `now` (the lease renewed).
    #[must_use]
    pub fn beat(&self, now: Timestamp) -> Self {
        Self {
            heartbeat_at: now,
            lease_until: lease_end(now),
            ..self.clone()
        }
    }

    /// Its lease ran out (a `done` claim never does: the issue is delivered).
    #[must_use]
    pub fn expired(&self, now: Timestamp) -> bool {
        self.state != "done" && self.lease_until <= now
    }
}

fn lease_end(now: Timestamp) -> Timestamp {
    now.checked_add(SignedDuration::from_secs(
        i64::try_from(LEASE.as_secs()).unwrap_or(i64::MAX),
    ))
    .unwrap_or(now)
}

/// The claim ref of an issue: `refs/hank/claims/<tracker>-<key>` (`github-12`,
/// `linear-ENG-123`).
#[must_use]
pub fn claim_ref(tracker: TrackerKind, issue: &ItemKey) -> String {
    format!("refs/hank/claims/{}-{}", tracker.as_str(), issue.as_str())
}

/// What a watch does with one labelled issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Claimed by nobody: it is claimed and run.
    Take,
    /// Its claim's lease expired (its owner stopped without a heartbeat): taken over.
    TakeOver { from: String },
    /// Not taken, and why.
    Skip(String),
}

impl Choice {
    /// It is taken (new or over an expired claim).
    #[must_use]
    pub fn taken(&self) -> bool {
        !matches!(self, Self::Skip(_))
    }
}

/// Each open issue carrying `label`, with what a watch does with it and why, in issue
/// order. An issue without the label is not listed (the tracker lists labelled ones only);
/// one labelled `hank:done` or `hank:failed`, one an open pull request of hank's closes, one
/// claimed under a running lease (or delivered) is skipped, saying so.
#[must_use]
pub fn choose(
    issues: &[Issue],
    label: &str,
    claims: &BTreeMap<ItemKey, Claim>,
    prs: &[OpenPr],
    now: Timestamp,
) -> Vec<(Issue, Choice)> {
    let mut out: Vec<(Issue, Choice)> = issues
        .iter()
        .filter(|i| i.labels.iter().any(|l| l == label))
        .map(|i| (i.clone(), choice_of(i, claims.get(&i.key), prs, now)))
        .collect();
    out.sort_by(|(a, _), (b, _)| a.key.cmp(&b.key));
    out.dedup_by(|(a, _), (b, _)| a.key == b.key);
    out
}

fn choice_of(issue: &Issue, claim: Option<&Claim>, prs: &[OpenPr], now: Timestamp) -> Choice {
    let has = |l: &str| issue.labels.iter().any(|x| x == l);
    if has(DONE) {
        return Choice::Skip(format!("labelled {DONE}: delivered already"));
    }
    if has(FAILED) {
        return Choice::Skip(format!(
            "labelled {FAILED}: remove the label to let hank try again"
        ));
    }
    if let Some(pr) = prs.iter().find(|p| closes(p, &issue.key)) {
        return Choice::Skip(format!("hank's pull request {} is open", pr.url));
    }
    if issue.title.trim().is_empty() && issue.body.trim().is_empty() {
        return Choice::Skip("it has no title and no text: write what should be done in it".into());
    }
    match claim {
        None => Choice::Take,
        Some(c) if c.state == "done" => Choice::Skip(format!(
            "delivered by {}{}",
            c.owner,
            c.pr_url
                .as_deref()
                .map_or_else(String::new, |u| format!(" ({u})"))
        )),
        Some(c) if c.expired(now) => Choice::TakeOver {
            from: c.owner.clone(),
        },
        Some(c) => Choice::Skip(format!(
            "claimed by {} (lease until {})",
            c.owner,
            c.lease_until.strftime("%Y-%m-%d %H:%M:%SZ")
        )),
    }
}

/// The pull request is hank's (`hank/…` head) and its body closes issue `key` (a forge's
/// `Closes #N`), or its branch is named by the key (`hank/ENG-123-…`).
#[must_use]
pub fn closes(pr: &OpenPr, key: &ItemKey) -> bool {
    let Some(branch) = pr.head.strip_prefix("hank/") else {
        return false;
    };
    match key.as_number() {
        Some(n) => pr
            .body
            .lines()
            .any(|l| l.trim().eq_ignore_ascii_case(&format!("closes #{n}"))),
        None => branch
            .strip_prefix(key.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-')),
    }
}

/// The task an issue becomes: its title names it (`#N title`), its checkbox lines are its
/// items (the issue itself is one item when it has none), each item carrying `[#N]` so the
/// pull request says `Closes #N`; the rest of the issue's text is quoted under the heading.
#[must_use]
pub fn task_of(issue: &Issue) -> TaskSpec {
    let n = &issue.key;
    let tag = n.tag();
    let title = crate::sanitize::cut_chars(&crate::sanitize::line(&issue.title), 120);
    let name = format!("{n} {title}");
    let mut items: Vec<String> = Vec::new();
    let mut quoted = String::new();
    for line in issue.body.lines() {
        let t = line.trim_start();
        let item = ["- [ ] ", "* [ ] ", "- [x] ", "- [X] "]
            .iter()
            .find_map(|p| {
                t.strip_prefix(p)
                    .map(|rest| (p.contains('x') || p.contains('X'), rest))
            });
        match item {
            Some((false, text)) if !text.trim().is_empty() => {
                items.push(format!("{tag} {}", crate::sanitize::line(text.trim())));
            }
            Some(_) => {}
            None => {
                let safe = crate::sanitize::line(line);
                let _ = writeln!(quoted, "> {safe}");
            }
        }
    }
    if items.is_empty() {
        items.push(format!("{tag} {title}"));
    }
    let mut section = format!("## {name}\n\nFrom issue {n} ({}):\n\n", issue.url);
    if !quoted.trim_matches(['>', ' ', '\n']).is_empty() {
        section.push_str(&quoted);
        section.push('\n');
    }
    for i in &items {
        let _ = writeln!(section, "- [ ] {i}");
    }
    // A forge's issue: `issue-12-title`; a tracker's key names the branch as it is written
    // (`ENG-123-title`), so the trackers that link a branch by its name do.
    let head = match n.as_number() {
        Some(num) => format!("issue-{num}"),
        None => n.as_str().to_string(),
    };
    TaskSpec {
        slug: format!("{head}-{}", slug(&title))
            .chars()
            .take(60)
            .collect::<String>()
            .trim_end_matches('-')
            .to_string(),
        name,
        after: Vec::new(),
        repos: repos_named(&issue.body).unwrap_or_default(),
        section,
        open_items: items,
        issue: Some(IssueRef {
            number: n.clone(),
            url: issue.url.clone(),
        }),
    }
}

/// The repositories an issue's body names on a line `repos: api, web` (case-insensitive
/// `repos:` at the line's start, names separated by commas or spaces): `None` without such a
/// line (the first one counts).
#[must_use]
pub fn repos_named(body: &str) -> Option<Vec<String>> {
    body.lines().find_map(|line| {
        let t = line.trim_start();
        let head = t.get(..6)?;
        if !head.eq_ignore_ascii_case("repos:") {
            return None;
        }
        let mut names: Vec<String> = Vec::new();
        for n in t
            .get(6..)?
            .split([',', ' ', '\t'])
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            if !names.iter().any(|k| k == n) {
                names.push(n.to_string());
            }
        }
        Some(names)
    })
}

/// Why an issue's task cannot run in a workspace of several repositories (`names`, the
/// workspace's), if it cannot: it names none, or one the workspace lacks. `None` where it
/// can, or where the workspace is not one of several.
#[must_use]
pub fn unfit_for_workspace(task: &TaskSpec, names: &[String]) -> Option<String> {
    if names.len() < 2 {
        return None;
    }
    let hint = format!(
        "add a line 'repos: {}' to the issue, naming the repositories it changes",
        names.join(", ")
    );
    if task.repos.is_empty() {
        return Some(format!(
            "the workspace has several repositories ({}) and the issue names none of them; {hint}",
            names.join(", ")
        ));
    }
    let unknown: Vec<&str> = task
        .repos
        .iter()
        .filter(|r| !names.contains(r))
        .map(String::as_str)
        .collect();
    (!unknown.is_empty()).then(|| {
        format!(
            "the issue names {} that the workspace ({}) does not have; {hint}",
            unknown
                .iter()
                .map(|u| format!(
                    "{:?}",
                    crate::sanitize::cut_chars(&crate::sanitize::line(u), 60)
                ))
                .collect::<Vec<_>>()
                .join(", "),
            names.join(", ")
        )
    })
}

/// Whether the workspace's `forge` (`github.com/me/api`, `me/api`) is the tracker's forge
/// repository `repo` (`me/api`): their last two path segments, case-insensitive.
#[must_use]
pub fn same_forge_repo(forge: &str, repo: &str) -> bool {
    let tail = |s: &str| {
        let parts: Vec<String> = s
            .trim()
            .trim_end_matches('/')
            .trim_end_matches(".git")
            .rsplit('/')
            .take(2)
            .map(str::to_ascii_lowercase)
            .collect();
        (parts.len() == 2).then_some(parts)
    };
    !repo.is_empty() && tail(forge).is_some() && tail(forge) == tail(repo)
}

/// What became of a delivered task's pull request, as its comment says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrLink {
    /// The pull request hank opened.
    Opened(String),
    /// The linked pull requests of a change set (a workspace of several repositories): each
    /// repository's name and its pull request's URL, in delivery order.
    Set(Vec<(String, String)>),
    /// A pull request was asked but hank found none open for the branch (merged or closed
    /// meanwhile, or the forge did not list it).
    NotFound { branch: String },
    /// `--deliver branch`: the branch was pushed, no pull request was asked.
    NotAsked { branch: String },
}

impl PrLink {
    /// The pull request's address, when there is one.
    #[must_use]
    pub fn url(&self) -> Option<&str> {
        match self {
            Self::Opened(u) => Some(u),
            Self::Set(all) => all.first().map(|(_, u)| u.as_str()),
            _ => None,
        }
    }
}

/// How a task ended, for its comment.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Work started: what will run, under what budget.
    Started { items: Vec<String>, budget: String },
    /// Delivered: the pull request, the check, the cost.
    Delivered {
        pr: PrLink,
        verified: Option<bool>,
        cost_usd: f64,
        loops: u64,
    },
    /// Failed: why, what is kept where, the next step.
    Failed {
        why: String,
        kept: String,
        cost_usd: f64,
    },
}

/// hank's comment on the issue (one, edited in place: it starts with [`COMMENT_MARKER`]).
#[must_use]
pub fn comment(owner: &str, outcome: &Outcome) -> String {
    let mut b = format!("{COMMENT_MARKER}\n");
    match outcome {
        Outcome::Started { items, budget } => {
            let _ = writeln!(b, "**hank is working on this issue** ({owner}).\n");
            b.push_str("What will run:\n");
            // The issue's own words: nothing in them pings, closes or renders.
            for i in items {
                let _ = writeln!(b, "- [ ] {}", neutral(&crate::sanitize::cut_chars(i, 200)));
            }
            let _ = writeln!(b, "\nBudget: {budget}.");
        }
        Outcome::Delivered {
            pr,
            verified,
            cost_usd,
            loops,
        } => {
            let _ = writeln!(b, "**hank delivered this issue** ({owner}).\n");
            match pr {
                PrLink::Opened(u) => {
                    let _ = writeln!(b, "Pull request: {u}");
                }
                PrLink::Set(all) => {
                    b.push_str("Pull requests (one per repository, linked as one change set):\n");
                    for (repo, u) in all {
                        let _ = writeln!(b, "- {}: {u}", neutral(repo));
                    }
                }
                PrLink::NotFound { branch } => {
                    let _ = writeln!(
                        b,
                        "Branch pushed: {branch}; a pull request was asked, and none is open for it now (merged or closed meanwhile?)."
                    );
                }
                PrLink::NotAsked { branch } => {
                    let _ = writeln!(b, "Branch pushed: {branch} (no pull request was asked).");
                }
            }
            let check = match verified {
                Some(true) => "green",
                Some(false) => "not green",
                None => "not recorded",
            };
            let _ = writeln!(b, "Verification: {check}.");
            let _ = writeln!(b, "Cost: ${cost_usd:.2} over {loops} loop(s).");
        }
        Outcome::Failed {
            why,
            kept,
            cost_usd,
        } => {
            let _ = writeln!(b, "**hank could not finish this issue** ({owner}).\n");
            let _ = writeln!(
                b,
                "Why: {}",
                neutral(&crate::sanitize::cut_chars(why, 1000))
            );
            let _ = writeln!(b, "Kept: {kept}");
            let _ = writeln!(b, "Cost: ${cost_usd:.2}.");
            let _ = writeln!(
                b,
                "Next: look at the kept work, then remove the `{FAILED}` label to let hank try again."
            );
        }
    }
    b
}

fn neutral(s: &str) -> String {
    crate::policy::deliver::neutral_markdown(s)
}

/// hank's comment, found among an item's comments: it starts with [`COMMENT_MARKER`] (a
/// Markdown tracker keeps it hidden), or — where a tracker shows the marker as text and hank
/// leaves it out (Jira's document format, Trello) — its first line is one of hank's headings.
#[must_use]
pub fn is_hank_comment(text: &str) -> bool {
    let t = text.trim_start();
    if t.starts_with(COMMENT_MARKER) {
        return true;
    }
    let first = t.lines().next().unwrap_or("").trim_matches(['*', ' ']);
    [
        "hank is working on this issue",
        "hank delivered this issue",
        "hank could not finish this issue",
    ]
    .iter()
    .any(|h| first.starts_with(h))
}

/// The rate budget of one token, shared by every hank process of the user.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RateBudget {
    /// What the forge last said (`X-RateLimit-Limit`).
    pub limit: Option<u64>,
    /// What the forge last said is left (`X-RateLimit-Remaining`), counted down locally
    /// between answers that say.
    pub remaining: Option<u64>,
    /// When the window resets (`X-RateLimit-Reset`).
    pub reset_at: Option<Timestamp>,
    /// No request before this (`Retry-After`, a secondary limit).
    pub retry_at: Option<Timestamp>,
    /// Requests counted against the budget by hank.
    pub counted: u64,
    /// Conditional requests answered 304 (not counted).
    pub not_modified: u64,
}

impl RateBudget {
    /// When the next request may go, if not now: a `Retry-After` still running, or a spent
    /// budget (the reserve kept back) before its reset.
    #[must_use]
    pub fn wait_until(&self, now: Timestamp) -> Option<Timestamp> {
        if let Some(r) = self.retry_at.filter(|r| *r > now) {
            return Some(r);
        }
        match (self.remaining, self.reset_at) {
            (Some(left), Some(reset)) if reset > now && left <= self.reserve() => Some(reset),
            _ => None,
        }
    }

    /// The requests kept back: [`RATE_RESERVE`], or a tenth of a smaller limit.
    #[must_use]
    pub fn reserve(&self) -> u64 {
        self.limit
            .map_or(RATE_RESERVE, |l| RATE_RESERVE.min(l / 10))
    }

    /// An answer: its status and headers (name, value) at `now`. A 304 costs nothing; the
    /// rate-limit headers replace the local count; `Retry-After` (seconds) or a 403/429 with
    /// nothing left sets the next allowed time.
    pub fn note(&mut self, status: u16, headers: &[(String, String)], now: Timestamp) {
        let h = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim())
        };
        if status == 304 {
            self.not_modified += 1;
        } else {
            self.counted += 1;
            if let Some(r) = self.remaining.as_mut() {
                *r = r.saturating_sub(1);
            }
        }
        if let Some(l) = h("x-ratelimit-limit").and_then(|v| v.parse().ok()) {
            self.limit = Some(l);
        }
        if status != 304
            && let Some(r) = h("x-ratelimit-remaining").and_then(|v| v.parse().ok())
        {
            self.remaining = Some(r);
        }
        if let Some(t) = h("x-ratelimit-reset")
            .and_then(|v| v.parse::<i64>().ok())
            .and_then(|s| Timestamp::from_second(s).ok())
        {
            self.reset_at = Some(t);
        }
        if let Some(secs) = h("retry-after").and_then(|v| v.parse::<i64>().ok()) {
            self.retry_at = now.checked_add(SignedDuration::from_secs(secs.max(0))).ok();
        } else if matches!(status, 403 | 429) && self.remaining == Some(0) {
            self.retry_at = self.reset_at;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issue_names_its_repositories_on_a_repos_line() {
        let table: [(&str, Option<&[&str]>); 8] = [
            ("repos: api, web\n", Some(&["api", "web"])),
            ("Text first.\nRepos: web\n- [ ] x\n", Some(&["web"])),
            ("  REPOS:api,web,api", Some(&["api", "web"])),
            ("repos: api web", Some(&["api", "web"])),
            ("repos:", Some(&[])),
            ("the repos: api", None),
            ("no line here", None),
            ("repo: api", None),
        ];
        for (body, want) in table {
            let got = repos_named(body);
            let want = want.map(|w| w.iter().map(|s| (*s).to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{body:?}");
        }
    }

    #[test]
    fn a_workspace_forge_is_the_tracker_s_repository_by_its_last_two_segments() {
        for (forge, repo, same) in [
            ("o/r", "o/r", true),
            ("github.com/O/R", "o/r", true),
            ("https://gitlab.example/g/r.git", "g/r", true),
            ("o/web", "o/r", false),
            ("r", "o/r", false),
            ("o/r", "", false),
        ] {
            assert_eq!(same_forge_repo(forge, repo), same, "{forge} {repo}");
        }
    }

    #[test]
    fn in_a_workspace_of_several_an_issue_must_name_known_repositories() {
        let names = vec!["api".to_string(), "web".to_string()];
        let task = |body: &str| {
            task_of(&Issue {
                key: ItemKey::number(7),
                title: "T".into(),
                body: body.into(),
                url: "https://x/7".into(),
                labels: vec![],
            })
        };
        assert_eq!(task("repos: api, web").repos, ["api", "web"]);
        assert_eq!(unfit_for_workspace(&task("repos: api, web"), &names), None);
        assert_eq!(unfit_for_workspace(&task("repos: web"), &names), None);
        let none = unfit_for_workspace(&task("do it"), &names).unwrap();
        assert!(none.contains("names none of them"), "{none}");
        assert!(none.contains("add a line 'repos: api, web'"), "{none}");
        let odd = unfit_for_workspace(&task("repos: api, db"), &names).unwrap();
        assert!(odd.contains("names \"db\" that the workspace"), "{odd}");
        // A project without a workspace of several: nothing to name.
        assert_eq!(unfit_for_workspace(&task("do it"), &names[..1]), None);
        assert_eq!(unfit_for_workspace(&task("do it"), &[]), None);
    }

    #[test]
    fn a_change_set_s_comment_names_each_repository_s_pull_request() {
        let text = comment(
            "me@host",
            &Outcome::Delivered {
                pr: PrLink::Set(vec![
                    ("api".into(), "https://g/o/api/pull/1".into()),
                    ("web".into(), "https://g/o/web/pull/2".into()),
                ]),
                verified: Some(true),
                cost_usd: 0.0,
                loops: 1,
            },
        );
        assert!(text.contains("- api: https://g/o/api/pull/1"), "{text}");
        assert!(text.contains("- web: https://g/o/web/pull/2"), "{text}");
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn issue(n: u64, labels: &[&str]) -> Issue {
        Issue {
            key: n.into(),
            title: format!("Issue {n}"),
            body: String::new(),
            url: format!("https://github.com/o/r/issues/{n}"),
            labels: labels.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn what_is_taken_and_why_not() {
        let now = at("2026-01-01T12:00:00Z");
        let earlier = at("2026-01-01T11:00:00Z");
        let mut live = Claim::new(TrackerKind::GitHub, 3, "a@h pid 1", now);
        live.lease_until = at("2026-01-01T12:10:00Z");
        let mut stale = Claim::new(TrackerKind::GitHub, 4, "b@h pid 2", earlier);
        stale.lease_until = at("2026-01-01T11:30:00Z");
        let mut done = Claim::new(TrackerKind::GitHub, 5, "c@h pid 3", earlier);
        done.state = "done".into();
        done.lease_until = earlier;
        let claims: BTreeMap<ItemKey, Claim> =
            [(3.into(), live), (4.into(), stale), (5.into(), done)].into();
        let prs = [
            OpenPr {
                head: "hank/issue-6-x".into(),
                body: "text\nCloses #6\n".into(),
                url: "https://github.com/o/r/pull/9".into(),
            },
            // Not hank's: does not hold the issue.
            OpenPr {
                head: "feature".into(),
                body: "Closes #1".into(),
                url: "u".into(),
            },
        ];
        let issues = [
            issue(1, &["hank"]),
            issue(2, &["bug"]),
            issue(3, &["hank"]),
            issue(4, &["hank"]),
            issue(5, &["hank"]),
            issue(6, &["hank"]),
            issue(7, &["hank", DONE]),
            issue(8, &["hank", FAILED]),
            Issue {
                title: " ".into(),
                ..issue(9, &["hank"])
            },
        ];
        let got: Vec<(u64, Choice)> = choose(&issues, "hank", &claims, &prs, now)
            .into_iter()
            .map(|(i, c)| (i.key.as_number().unwrap(), c))
            .collect();
        let table: [(u64, &str); 8] = [
            (1, "take"),
            (3, "claimed by a@h pid 1 (lease until 2026-01-01 12:10:00Z)"),
            (4, "over b@h pid 2"),
            (5, "delivered by c@h pid 3"),
            (
                6,
                "hank's pull request https://github.com/o/r/pull/9 is open",
            ),
            (7, "labelled hank:done: delivered already"),
            (
                8,
                "labelled hank:failed: remove the label to let hank try again",
            ),
            (
                9,
                "it has no title and no text: write what should be done in it",
            ),
        ];
        assert_eq!(got.len(), table.len(), "{got:?}");
        for ((n, c), (want_n, want)) in got.iter().zip(table) {
            assert_eq!(*n, want_n);
            let said = match c {
                Choice::Take => "take".to_string(),
                Choice::TakeOver { from } => format!("over {from}"),
                Choice::Skip(why) => why.clone(),
            };
            assert_eq!(said, want, "issue {n}");
        }
    }

    #[test]
    fn a_lease_expires_without_heartbeats_and_a_beat_renews_it() {
        let t0 = at("2026-01-01T12:00:00Z");
        let c = Claim::new(TrackerKind::GitLab, 1, "me", t0);
        assert!(!c.expired(at("2026-01-01T12:29:59Z")));
        assert!(c.expired(at("2026-01-01T12:30:00Z")));
        let c = c.beat(at("2026-01-01T12:20:00Z"));
        assert!(!c.expired(at("2026-01-01T12:45:00Z")));
        assert_eq!(c.claimed_at, t0);
        assert_eq!(
            claim_ref(TrackerKind::GitLab, &7.into()),
            "refs/hank/claims/gitlab-7"
        );
        let key = ItemKey::parse("ENG-123").unwrap();
        assert_eq!(
            claim_ref(TrackerKind::Linear, &key),
            "refs/hank/claims/linear-ENG-123"
        );
    }

    #[test]
    fn an_issue_becomes_a_task_whose_items_close_it() {
        let mut i = issue(12, &["hank"]);
        i.title = "Fix the login".into();
        i.body = "The login fails.\n\n- [ ] reproduce\n- [x] already done\n- [ ] fix it\n".into();
        let t = task_of(&i);
        assert_eq!(t.name, "#12 Fix the login");
        assert_eq!(t.slug, "issue-12-fix-the-login");
        assert_eq!(t.open_items, ["[#12] reproduce", "[#12] fix it"]);
        assert!(
            t.section.starts_with("## #12 Fix the login\n"),
            "{}",
            t.section
        );
        assert!(t.section.contains("> The login fails."), "{}", t.section);
        assert!(!t.section.contains("already done"), "{}", t.section);
        assert_eq!(t.issue.as_ref().map(|r| r.number.clone()), Some(12.into()));
        let parsed =
            crate::policy::fleet::tasks_from_plan(&format!("# Plan\n\n{}", t.section), &[])
                .unwrap();
        assert_eq!(parsed[0].open_items, t.open_items);
        assert_eq!(crate::policy::deliver::closed_issues(&t.open_items), [12]);
        // No checkbox: the issue is its one item.
        let t = task_of(&issue(3, &["hank"]));
        assert_eq!(t.open_items, ["[#3] Issue 3"]);
    }

    #[test]
    fn comments_say_what_runs_what_was_delivered_and_why_it_failed() {
        let c = comment(
            "me",
            &Outcome::Started {
                items: vec!["[#1] a".into()],
                budget: "MAX_COST_USD 5".into(),
            },
        );
        assert!(c.starts_with(COMMENT_MARKER), "{c}");
        assert!(
            c.contains("- [ ] [#1] a") && c.contains("Budget: MAX_COST_USD 5."),
            "{c}"
        );
        let c = comment(
            "me",
            &Outcome::Delivered {
                pr: PrLink::Opened("https://x/pull/2".into()),
                verified: Some(true),
                cost_usd: 1.5,
                loops: 2,
            },
        );
        assert!(c.contains("Pull request: https://x/pull/2"), "{c}");
        assert!(
            c.contains("Verification: green.") && c.contains("$1.50 over 2"),
            "{c}"
        );
        let c = comment(
            "me",
            &Outcome::Failed {
                why: "the check stayed red".into(),
                kept: "branch hank/x".into(),
                cost_usd: 0.0,
            },
        );
        assert!(
            c.contains("Why: the check stayed red") && c.contains(FAILED),
            "{c}"
        );
    }

    #[test]
    fn the_rate_budget_counts_no_304_and_honours_the_headers() {
        let now = at("2026-01-01T12:00:00Z");
        let hs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
        };
        let reset = now.as_second() + 600;
        let mut b = RateBudget::default();
        b.note(
            200,
            &hs(&[
                ("X-RateLimit-Limit", "1000"),
                ("X-RateLimit-Remaining", "500"),
                ("X-RateLimit-Reset", &reset.to_string()),
            ]),
            now,
        );
        assert_eq!((b.counted, b.remaining, b.not_modified), (1, Some(500), 0));
        b.note(304, &hs(&[("X-RateLimit-Remaining", "499")]), now);
        assert_eq!((b.counted, b.remaining, b.not_modified), (1, Some(500), 1));
        assert_eq!(b.wait_until(now), None);
        // Down to the reserve (a tenth of a small limit, at most RATE_RESERVE): wait for the reset.
        b.note(200, &hs(&[("X-RateLimit-Remaining", "50")]), now);
        assert_eq!(
            b.wait_until(now),
            Some(Timestamp::from_second(reset).unwrap())
        );
        // Retry-After wins while it runs.
        let mut b = RateBudget::default();
        b.note(429, &hs(&[("Retry-After", "30")]), now);
        assert_eq!(b.wait_until(now), Some(at("2026-01-01T12:00:30Z")));
        assert_eq!(b.wait_until(at("2026-01-01T12:00:31Z")), None);
        // No headers at all: counted, nothing to wait for.
        let mut b = RateBudget::default();
        b.note(200, &[], now);
        assert_eq!((b.counted, b.wait_until(now)), (1, None));
        assert_eq!(TrackerKind::parse("GitLab"), Some(TrackerKind::GitLab));
        assert_eq!(TrackerKind::parse("jira"), Some(TrackerKind::Jira));
        assert_eq!(TrackerKind::parse("youtrack"), None);
    }

    #[test]
    fn item_keys_read_written_and_ordered() {
        let k = |s: &str| ItemKey::parse(s).unwrap();
        for bad in [
            "",
            "-x",
            ".x",
            "a..b",
            "a b",
            "a/b",
            "ENG-1\n",
            &"x".repeat(65),
        ] {
            assert_eq!(ItemKey::parse(bad), None, "{bad:?}");
        }
        assert_eq!(k("12").as_number(), Some(12));
        assert_eq!(k("012").as_number(), None);
        assert_eq!(
            (k("12").to_string(), k("ENG-7").to_string()),
            ("#12".into(), "ENG-7".into())
        );
        // A forge's number stays a JSON number (older files read the same); a key is a string.
        assert_eq!(serde_json::to_string(&ItemKey::number(5)).unwrap(), "5");
        assert_eq!(serde_json::to_string(&k("ENG-7")).unwrap(), "\"ENG-7\"");
        assert_eq!(
            serde_json::from_str::<ItemKey>("5").unwrap(),
            ItemKey::number(5)
        );
        assert_eq!(
            serde_json::from_str::<ItemKey>("\"ENG-7\"").unwrap(),
            k("ENG-7")
        );
        assert!(serde_json::from_str::<ItemKey>("\"a/b\"").is_err());
        let mut keys = [k("ENG-10"), k("ENG-9"), k("10"), k("9"), k("API-1")];
        keys.sort();
        let shown: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["#9", "#10", "API-1", "ENG-9", "ENG-10"]);
    }

    #[test]
    fn a_keyed_item_names_its_task_branch_and_items_by_its_key() {
        let i = Issue {
            key: ItemKey::parse("ENG-123").unwrap(),
            title: "Fix the login".into(),
            body: "- [ ] reproduce\n".into(),
            url: "https://linear.app/t/issue/ENG-123".into(),
            labels: vec!["hank".into()],
        };
        let t = task_of(&i);
        assert_eq!(t.name, "ENG-123 Fix the login");
        assert_eq!(t.slug, "ENG-123-fix-the-login");
        assert_eq!(t.open_items, ["[ENG-123] reproduce"]);
        assert!(t.section.contains("From issue ENG-123 ("), "{}", t.section);
        // No `Closes #N` for a key: the branch's name links it.
        assert!(crate::policy::deliver::closed_issues(&t.open_items).is_empty());
        let pr = |head: &str| OpenPr {
            head: head.into(),
            body: String::new(),
            url: "u".into(),
        };
        assert!(closes(&pr("hank/ENG-123-fix-the-login"), &i.key));
        assert!(!closes(&pr("hank/ENG-1234-other"), &i.key));
        assert!(!closes(&pr("ENG-123-fix"), &i.key));
    }

    #[test]
    fn the_issue_text_in_hank_s_comment_is_defused() {
        let c = comment(
            "me",
            &Outcome::Started {
                items: vec!["[#1] ask @alice; closes #9 ![x](https://e/p.png) <b>hi</b>".into()],
                budget: "none".into(),
            },
        );
        assert!(!c.contains("@alice"), "{c}");
        assert!(!c.to_lowercase().contains("closes #9"), "{c}");
        assert!(!c.contains("![x]") && !c.contains("<b>"), "{c}");
        assert!(is_hank_comment(&c));
        assert!(is_hank_comment("**hank delivered this issue** (me)."));
        assert!(!is_hank_comment("I think hank delivered this issue"));
        let c = comment(
            "me",
            &Outcome::Delivered {
                pr: PrLink::NotFound {
                    branch: "hank/x".into(),
                },
                verified: None,
                cost_usd: 0.0,
                loops: 1,
            },
        );
        assert!(!c.contains("no pull request was asked"), "{c}");
        assert!(c.contains("a pull request was asked"), "{c}");
    }
}
