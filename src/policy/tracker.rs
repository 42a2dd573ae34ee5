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
}

impl TrackerKind {
    /// `github` / `gitlab` (the claim ref's prefix, `--tracker`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GitHub => "github",
            Self::GitLab => "gitlab",
        }
    }

    /// `--tracker` / TRACKER.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "github" => Some(Self::GitHub),
            "gitlab" => Some(Self::GitLab),
            _ => None,
        }
    }
}

/// An open issue as the tracker lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Issue {
    pub number: u64,
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
    pub issue: u64,
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
    pub fn new(tracker: TrackerKind, issue: u64, owner: &str, now: Timestamp) -> Self {
        Self {
            tracker,
            issue,
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

/// The claim ref of an issue: `refs/hank/claims/<tracker>-<N>`.
#[must_use]
pub fn claim_ref(tracker: TrackerKind, issue: u64) -> String {
    format!("refs/hank/claims/{}-{issue}", tracker.as_str())
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
    claims: &BTreeMap<u64, Claim>,
    prs: &[OpenPr],
    now: Timestamp,
) -> Vec<(Issue, Choice)> {
    let mut out: Vec<(Issue, Choice)> = issues
        .iter()
        .filter(|i| i.labels.iter().any(|l| l == label))
        .map(|i| (i.clone(), choice_of(i, claims.get(&i.number), prs, now)))
        .collect();
    out.sort_by_key(|(i, _)| i.number);
    out.dedup_by_key(|(i, _)| i.number);
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
    if let Some(pr) = prs.iter().find(|p| closes(p, issue.number)) {
        return Choice::Skip(format!("hank's pull request {} is open", pr.url));
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

/// The pull request is hank's (`hank/…` head) and its body closes issue `n`.
#[must_use]
pub fn closes(pr: &OpenPr, n: u64) -> bool {
    pr.head.starts_with("hank/")
        && pr
            .body
            .lines()
            .any(|l| l.trim().eq_ignore_ascii_case(&format!("closes #{n}")))
}

/// The task an issue becomes: its title names it (`#N title`), its checkbox lines are its
/// items (the issue itself is one item when it has none), each item carrying `[#N]` so the
/// pull request says `Closes #N`; the rest of the issue's text is quoted under the heading.
#[must_use]
pub fn task_of(issue: &Issue) -> TaskSpec {
    let n = issue.number;
    let title = crate::sanitize::cut_chars(&crate::sanitize::line(&issue.title), 120);
    let name = format!("#{n} {title}");
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
                items.push(format!("[#{n}] {}", crate::sanitize::line(text.trim())));
            }
            Some(_) => {}
            None => {
                let safe = crate::sanitize::line(line);
                let _ = writeln!(quoted, "> {safe}");
            }
        }
    }
    if items.is_empty() {
        items.push(format!("[#{n}] {title}"));
    }
    let mut section = format!("## {name}\n\nFrom issue #{n} ({}):\n\n", issue.url);
    if !quoted.trim_matches(['>', ' ', '\n']).is_empty() {
        section.push_str(&quoted);
        section.push('\n');
    }
    for i in &items {
        let _ = writeln!(section, "- [ ] {i}");
    }
    TaskSpec {
        slug: format!("issue-{n}-{}", slug(&title))
            .chars()
            .take(60)
            .collect::<String>()
            .trim_end_matches('-')
            .to_string(),
        name,
        after: Vec::new(),
        section,
        open_items: items,
        issue: Some(IssueRef {
            number: n,
            url: issue.url.clone(),
        }),
    }
}

/// How a task ended, for its comment.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Work started: what will run, under what budget.
    Started { items: Vec<String>, budget: String },
    /// Delivered: the pull request, the check, the cost.
    Delivered {
        pr_url: Option<String>,
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
            for i in items {
                let _ = writeln!(b, "- [ ] {}", crate::sanitize::cut_chars(i, 200));
            }
            let _ = writeln!(b, "\nBudget: {budget}.");
        }
        Outcome::Delivered {
            pr_url,
            verified,
            cost_usd,
            loops,
        } => {
            let _ = writeln!(b, "**hank delivered this issue** ({owner}).\n");
            match pr_url {
                Some(u) => {
                    let _ = writeln!(b, "Pull request: {u}");
                }
                None => b.push_str("Branch pushed (no pull request was asked).\n"),
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
            let _ = writeln!(b, "Why: {}", crate::sanitize::cut_chars(why, 1000));
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

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn issue(n: u64, labels: &[&str]) -> Issue {
        Issue {
            number: n,
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
        let claims: BTreeMap<u64, Claim> = [(3, live), (4, stale), (5, done)].into();
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
        ];
        let got: Vec<(u64, Choice)> = choose(&issues, "hank", &claims, &prs, now)
            .into_iter()
            .map(|(i, c)| (i.number, c))
            .collect();
        let table: [(u64, &str); 7] = [
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
            claim_ref(TrackerKind::GitLab, 7),
            "refs/hank/claims/gitlab-7"
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
        assert_eq!(t.issue.as_ref().map(|r| r.number), Some(12));
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
                pr_url: Some("https://x/pull/2".into()),
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
        assert_eq!(TrackerKind::parse("jira"), None);
    }
}
