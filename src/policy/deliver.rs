//! Delivery rules: branch names, the pull request's evidence body, the CI verdict (fail
//! closed) and what goes back to the agent after a red CI or a review. **\[pure\]**
//!
//! Everything here takes hank's own records (receipts, checks, breaker history, exit) and the
//! forge's answers as arguments and returns text or a verdict. The PR body is built from
//! hank's records only; the agent's own words appear once, quoted and marked as its summary.
//! Every text that leaves hank through here is sanitized (control characters removed, bounded)
//! and has secrets redacted (the caller's secret values and anything shaped like a GitHub or
//! Anthropic token).

use std::fmt::Write as _;
use std::sync::LazyLock;

use jiff::{SignedDuration, Timestamp};
use regex::Regex;

use crate::exit::ExitReason;
use crate::policy::breaker::Transition;
use crate::policy::receipts::Receipts;
use crate::policy::verify::CheckResult;
use crate::sanitize::cut_chars;

pub mod change_set;
pub mod machine;
pub mod record;

/// The PR body's size bound (GitHub refuses bodies over 65 536 characters).
pub const MAX_BODY_CHARS: usize = 60_000;
/// Bound of the agent's summary quoted in the body.
pub const MAX_SUMMARY_CHARS: usize = 2_000;
/// Bound of one failing check's log tail sent back to the agent.
pub const MAX_LOG_TAIL_CHARS: usize = 3_000;
/// Bound of the whole CI or review feedback sent back to the agent.
pub const MAX_FEEDBACK_CHARS: usize = 12_000;
/// Bound of a pre-push hook's output kept for the agent.
pub const MAX_HOOK_OUTPUT_CHARS: usize = 4_000;
/// Pushes rejected by a pre-push hook that go back to the agent before hank gives up.
pub const MAX_PUSH_RETRIES: u32 = 2;
/// The next step after a `ci_missing` stop (no check ever appeared for the pushed commit).
pub const CI_MISSING_NEXT: &str = "no CI runs on this repository's pull requests: set CI_WAIT=false (deliver without waiting for checks) or use --deliver branch (push only); with CI set up, `hank deliver` waits for the checks again";

/// What replaces a secret.
const REDACTED: &str = "[REDACTED]";
/// Shorter secret values are not replaced (they would mangle ordinary text); the same bound
/// as the agent's redaction (`agent::redact::MIN_SECRET_LEN`).
const MIN_SECRET_LEN: usize = 8;

// ---------------------------------------------------------------------------------------------
// Names

/// A branch name git accepts (`git check-ref-format --branch` rules, conservatively).
#[must_use]
pub fn valid_branch_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with(['-', '/', '.'])
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && !name.contains("/.")
        && name != "@"
        && !name.chars().any(|c| {
            c.is_control()
                || c.is_whitespace()
                || matches!(c, '~' | '^' | ':' | '?' | '*' | '[' | '\\')
        })
}

/// A git remote name (letters, digits, `-`, `_`, `.`; not starting with `-` or `.`).
#[must_use]
pub fn valid_remote_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.starts_with(['-', '.'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The delivery branch: DELIVER_BRANCH when set, else `hank/<the branch the run started
/// from>` (`hank/work` from a detached HEAD).
#[must_use]
pub fn branch_for(configured: Option<&str>, start_branch: Option<&str>) -> String {
    if let Some(b) = configured {
        return b.to_string();
    }
    match start_branch {
        Some(s) if s.starts_with("hank/") => s.to_string(),
        Some(s) if valid_branch_name(&format!("hank/{s}")) => format!("hank/{s}"),
        _ => "hank/work".to_string(),
    }
}

/// `owner/repo` of a GitHub remote URL (`https://github.com/o/r(.git)`,
/// `git@github.com:o/r.git`, `ssh://git@github.com/o/r`), with the host.
#[must_use]
pub fn repo_of_url(url: &str) -> Option<(String, String)> {
    let url = url.trim();
    let rest = if let Some(r) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .or_else(|| url.strip_prefix("ssh://"))
        .or_else(|| url.strip_prefix("git://"))
    {
        let r = r.split_once('@').map_or(r, |(_, h)| h);
        let (host, path) = r.split_once('/')?;
        (host.split(':').next().unwrap_or(host).to_string(), path)
    } else {
        let (user_host, path) = url.split_once(':')?;
        if user_host.contains('/') {
            return None;
        }
        let host = user_host.split_once('@').map_or(user_host, |(_, h)| h);
        (host.to_string(), path)
    };
    let (host, path) = rest;
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let mut parts = path.split('/');
    let (Some(owner), Some(repo), None) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    (ok(owner) && ok(repo) && !host.is_empty()).then(|| (host, format!("{owner}/{repo}")))
}

/// The issue numbers of items imported from issues (`[#12] Fix login`): `Closes #12`.
#[must_use]
pub fn closed_issues(items: &[String]) -> Vec<u64> {
    static ISSUE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\[#([0-9]{1,9})\]").ok());
    let Some(re) = ISSUE.as_ref() else {
        return Vec::new();
    };
    let mut out: Vec<u64> = Vec::new();
    for item in items {
        for c in re.captures_iter(item) {
            if let Some(n) = c.get(1).and_then(|m| m.as_str().parse().ok())
                && !out.contains(&n)
            {
                out.push(n);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Sanitizing

/// `text` made safe to leave hank: secrets and token-shaped words redacted, control and
/// escape characters removed (newlines and tabs kept), at most `max` characters (cut on a
/// character boundary, marked).
#[must_use]
pub fn clean(text: &str, secrets: &[String], max: usize) -> String {
    static TOKENS: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(
            r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_\-]{20,}|sk-ant-[A-Za-z0-9_\-]{10,})",
        )
        .ok()
    });
    let mut s = crate::sanitize::for_terminal(text, crate::sanitize::Lines::Keep).into_owned();
    for secret in secrets.iter().map(|v| v.trim()) {
        if secret.len() >= MIN_SECRET_LEN {
            s = s.replace(secret, REDACTED);
        }
    }
    if let Some(re) = TOKENS.as_ref() {
        s = re.replace_all(&s, REDACTED).into_owned();
    }
    cut_chars(&s, max)
}

/// The last `max` characters of `s` (a cut is marked at the start).
fn tail(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let mut out = String::from("…");
    out.extend(s.chars().skip(n - max.saturating_sub(1)));
    out
}

/// Text from the agent or the forge, safe inside Markdown: one line, no `@mention` pings, no
/// HTML, backticks neutralized.
fn inline(text: &str, secrets: &[String], max: usize) -> String {
    let one = clean(text, secrets, max).replace(['\n', '\r', '\t'], " ");
    neutral_markdown(&one)
}

/// Removes what would act in Markdown on GitHub and GitLab: mentions ping people, closing
/// keywords close issues, `#N` links them, HTML and images render.
/// `s` with mentions, closing keywords, HTML and images made inert (for text from an issue or
/// the agent in a comment or PR body of hank's).
#[must_use]
pub fn neutral_markdown(s: &str) -> String {
    defused(s)
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('`', "'")
        .replace("![", "!\u{200b}[")
}

/// The agent's words made inert wherever they appear (code blocks included): a zero-width
/// space after `@` (no mention) and a zero-width joiner inside every closing keyword before
/// a reference ([`defuse_references`]): nothing pings and nothing closes on merge. Hank's own `Closes #N` is written after this, never through it.
fn defused(s: &str) -> String {
    defuse_references(&s.replace('@', "@\u{200b}"))
}

/// `text` as a fenced code block whose fence is longer than any run of backticks in it, its
/// words [`defused`]: shown as written, nothing in them rendered, linked or closed.
fn fenced(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for ch in text.chars() {
        run = if ch == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!(
        "{fence}text\n{}\n{fence}\n",
        defused(text).trim_end_matches('\n')
    )
}

/// A closing keyword (`close`, `closes`, `closed`, `fix`, `fixes`, `fixed`, `resolve`,
/// `resolves`, `resolved`, any case, an optional colon) before an issue reference (`#N`,
/// `owner/repo#N`, `GH-N`, an issue or pull request URL) made inert: a zero-width joiner
/// inside the keyword, so neither GitHub nor GitLab reads it as one and nothing is closed
/// on merge. The text reads the same.
#[must_use]
pub fn defuse_references(text: &str) -> String {
    static KEYWORD: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)").ok());
    static REFERENCE: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"(?i)^[\s*_~]*:?[\s*_~]*(?:#[0-9]|[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#[0-9]|gh-[0-9]|https?://|www\.)").ok()
    });
    let (Some(kw), Some(re)) = (KEYWORD.as_ref(), REFERENCE.as_ref()) else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for m in kw.find_iter(text) {
        let after = &text[m.end()..];
        // A keyword glued to more letters (`fixture`) is not one.
        if after.chars().next().is_some_and(char::is_alphanumeric) || !re.is_match(after) {
            continue;
        }
        let word = m.as_str();
        let mut chars = word.chars();
        let first = chars.next().map(String::from).unwrap_or_default();
        out.push_str(&text[at..m.start()]);
        out.push_str(&first);
        out.push('\u{200d}');
        out.push_str(chars.as_str());
        at = m.end();
    }
    out.push_str(&text[at..]);
    out
}

/// The comment an issue closed by the pull request `number` at `url` gets: hank's one comment
/// on the issue (marked, so that `hank watch`'s is edited, not joined by a second).
#[must_use]
pub fn issue_comment(url: &str, number: u64) -> String {
    format!(
        "{}\n**hank delivered this issue** in {url} (pull request #{number}); it closes this issue when merged.",
        crate::policy::tracker::COMMENT_MARKER
    )
}

// ---------------------------------------------------------------------------------------------
// The PR body

/// Hank's records of the run, as the PR body shows them.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// The fix_plan items done in this run (their texts).
    pub items_done: Vec<String>,
    /// VERIFY_COMMAND before loop 1.
    pub baseline: Option<CheckResult>,
    /// VERIFY_COMMAND's latest run (at the end).
    pub last_check: Option<CheckResult>,
    /// Test files removed during the run (from the checks).
    pub tests_removed: Vec<String>,
    /// Per-item receipts (`hank report`).
    pub receipts: Receipts,
    /// Why the run ended, with its message.
    pub exit_reason: Option<ExitReason>,
    pub exit_message: Option<String>,
    /// The circuit breaker's transitions during the run.
    pub breaker: Vec<Transition>,
    /// The agent's own last summary (quoted as such, never as evidence).
    pub agent_summary: Option<String>,
    /// The branch the work was done from and on.
    pub base: String,
    pub head: String,
    /// The independent reviewer's rounds in this run (`review` events, `REVIEW_AGENT`).
    pub reviews: Vec<crate::policy::review::ReviewRound>,
}

/// The PR title: the first item done (or the branch), bounded.
#[must_use]
pub fn pr_title(ev: &Evidence, secrets: &[String]) -> String {
    let first = ev.items_done.first().map_or_else(
        || format!("hank: work from {}", ev.head),
        |i| {
            let more = ev.items_done.len() - 1;
            if more > 0 {
                format!("{i} (+{more} more)")
            } else {
                i.clone()
            }
        },
    );
    inline(&first, secrets, 120)
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

fn duration(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}.{}s", s, (ms % 1000) / 100)
    }
}

fn check_line(label: &str, c: &CheckResult, secrets: &[String]) -> String {
    format!(
        "| {label} | `{}` | {} ({}) | {} |",
        inline(&c.command, secrets, 200).replace('|', "\\|"),
        if c.passed { "passed" } else { "failed" },
        c.how_it_ended(),
        duration(c.duration_ms)
    )
}

/// The PR body: hank's evidence, from hank's own records. Sanitized, redacted, bounded by
/// [`MAX_BODY_CHARS`].
#[must_use]
pub fn pr_body(ev: &Evidence, secrets: &[String]) -> String {
    let mut b = String::new();
    let _ = writeln!(
        b,
        "Delivered by hank from `{}` onto `{}`. Everything below comes from hank's own records (`.hank/`), not from the agent's text.\n",
        inline(&ev.base, secrets, 200),
        inline(&ev.head, secrets, 200)
    );
    b.push_str("### Items done\n\n");
    if ev.items_done.is_empty() {
        b.push_str("No fix_plan item was checked off in this run.\n");
    }
    for i in &ev.items_done {
        let _ = writeln!(b, "- [x] {}", inline(i, secrets, 300));
    }
    b.push_str("\n### Verification (VERIFY_COMMAND)\n\n");
    if ev.baseline.is_none() && ev.last_check.is_none() {
        b.push_str("No check ran: VERIFY_COMMAND is not set, or it never ran in this run.\n");
    } else {
        b.push_str("| when | command | result | duration |\n|---|---|---|---|\n");
        if let Some(c) = &ev.baseline {
            let _ = writeln!(b, "{}", check_line("baseline", c, secrets));
        }
        if let Some(c) = &ev.last_check {
            let _ = writeln!(b, "{}", check_line("end", c, secrets));
        }
    }
    let clean_finding = |t: &str| inline(t, secrets, 400);
    if let Some(section) = crate::policy::review::pr_section(&ev.reviews, &clean_finding) {
        b.push_str(&section);
    }
    b.push_str("\n### Tests removed during the run\n\n");
    if ev.tests_removed.is_empty() {
        b.push_str("None.\n");
    } else {
        for t in &ev.tests_removed {
            let _ = writeln!(b, "- `{}`", inline(t, secrets, 300));
        }
    }
    b.push_str("\n### Cost per item (`hank report`)\n\n");
    let r = &ev.receipts;
    b.push_str("| item | loops | calls | cost | tokens | wall time |\n|---|---|---|---|---|---|\n");
    let rows = r.items.iter().chain(r.unattributed.iter());
    for i in rows {
        let _ = writeln!(
            b,
            "| {} | {} | {} | ${:.2} | {} | {} |",
            inline(&i.item, secrets, 200).replace('|', "\\|"),
            i.loops,
            i.calls,
            i.cost_usd,
            i.tokens,
            duration(i.duration_ms)
        );
    }
    let t = &r.totals;
    let _ = writeln!(
        b,
        "| **total** | {} | {} | ${:.2} | {} | {} |",
        t.loops,
        t.calls,
        t.cost_usd,
        t.tokens,
        duration(t.duration_ms)
    );
    if t.estimated_cost_usd > 0.0 {
        let _ = writeln!(
            b,
            "\n${:.2} of the cost is hank's estimate (calls whose cost the agent did not report).",
            t.estimated_cost_usd
        );
    }
    if !r.windows.is_empty() {
        b.push_str("\n### Usage windows\n\n");
        for w in &r.windows {
            let pct = |v: Option<f64>| {
                v.map_or_else(|| "?".to_string(), |p| format!("{:.0}%", p * 100.0))
            };
            let _ = writeln!(
                b,
                "- {}: {} → {} (peak {}){}",
                inline(&w.window, secrets, 60),
                pct(w.first),
                pct(w.last),
                pct(w.peak),
                if w.reset_between {
                    ", reset during the run"
                } else {
                    ""
                }
            );
        }
    }
    b.push_str("\n### How the run ended\n\n");
    match ev.exit_reason {
        Some(reason) => {
            let _ = write!(b, "Stop reason: `{reason}`");
            if let Some(m) = &ev.exit_message {
                let _ = write!(b, " — {}", inline(m, secrets, 400));
            }
            b.push('\n');
        }
        None => b.push_str("Stop reason: none recorded (the run did not end normally).\n"),
    }
    if ev.breaker.is_empty() {
        b.push_str("Circuit breaker: no transitions.\n");
    } else {
        b.push_str("Circuit breaker transitions:\n");
        for tr in &ev.breaker {
            let _ = writeln!(
                b,
                "- {} {:?} → {:?}: {}",
                tr.at,
                tr.from,
                tr.to,
                inline(&tr.reason, secrets, 200)
            );
        }
    }
    if let Some(s) = ev.agent_summary.as_deref().filter(|s| !s.trim().is_empty()) {
        b.push_str("\n### The agent's own summary (its words, not evidence)\n\n");
        b.push_str(&fenced(&clean(s, secrets, MAX_SUMMARY_CHARS)));
    }
    let closes = closed_issues(&ev.items_done);
    if !closes.is_empty() {
        b.push('\n');
        for n in closes {
            let _ = writeln!(b, "Closes #{n}");
        }
    }
    cut_chars(&b, MAX_BODY_CHARS)
}

// ---------------------------------------------------------------------------------------------
// The CI verdict

/// One check of the head commit: a check run or a commit status, as the forge reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub state: CheckState,
    /// The check's own link (logs), when the forge gave one.
    pub url: Option<String>,
    /// The forge's id of a check run (for its log), when it has one.
    pub id: Option<u64>,
}

/// Where one check is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    /// Queued or running.
    Pending,
    /// success, neutral or skipped.
    Passed,
    /// failure, cancelled, timed out, action required, error, stale, or anything unknown.
    Failed,
}

impl CheckState {
    /// A check run: its `status` and `conclusion` (GitHub's words). Anything not known to
    /// pass fails (fail closed).
    #[must_use]
    pub fn of_check_run(status: &str, conclusion: Option<&str>) -> Self {
        match (status, conclusion) {
            ("completed", Some("success" | "neutral" | "skipped")) => Self::Passed,
            ("completed", _) => Self::Failed,
            ("queued" | "in_progress" | "waiting" | "requested" | "pending", _) => Self::Pending,
            _ => Self::Failed,
        }
    }

    /// A commit status: its `state`.
    #[must_use]
    pub fn of_status(state: &str) -> Self {
        match state {
            "success" => Self::Passed,
            "pending" => Self::Pending,
            _ => Self::Failed,
        }
    }
}

/// What the checks of the head commit say now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CiVerdict {
    /// Every check exists and passed.
    Green,
    /// Not decided yet: ask again at `next`.
    Wait { next: Timestamp },
    /// No check appeared within CI_APPEAR_TIMEOUT: there is no CI, never "green".
    Missing,
    /// These checks failed.
    Failed { names: Vec<String> },
    /// Checks still pending at CI_TIMEOUT.
    TimedOut { pending: Vec<String> },
}

/// The CI timing settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CiLimits {
    /// CI_APPEAR_TIMEOUT.
    pub appear: SignedDuration,
    /// CI_TIMEOUT.
    pub total: SignedDuration,
    /// Between two looks.
    pub poll: SignedDuration,
}

/// The verdict on `checks` of the commit pushed at `pushed_at`, at `now`. Fail closed: a
/// failing check decides at once (even while others run); no check at all is `Missing` once
/// CI_APPEAR_TIMEOUT passed; only every check passed is `Green`.
#[must_use]
pub fn ci_verdict(
    checks: &[Check],
    pushed_at: Timestamp,
    now: Timestamp,
    l: CiLimits,
) -> CiVerdict {
    let elapsed = now.duration_since(pushed_at);
    let next = now.checked_add(l.poll).unwrap_or(now);
    let failed: Vec<String> = names_in(checks, CheckState::Failed);
    if !failed.is_empty() {
        return CiVerdict::Failed { names: failed };
    }
    if checks.is_empty() {
        return if elapsed >= l.appear {
            CiVerdict::Missing
        } else {
            CiVerdict::Wait { next }
        };
    }
    let pending = names_in(checks, CheckState::Pending);
    if pending.is_empty() {
        CiVerdict::Green
    } else if elapsed >= l.total {
        CiVerdict::TimedOut { pending }
    } else {
        CiVerdict::Wait { next }
    }
}

fn names_in(checks: &[Check], state: CheckState) -> Vec<String> {
    let mut names: Vec<String> = checks
        .iter()
        .filter(|c| c.state == state)
        .map(|c| c.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The exit reason of a final verdict (`None` while waiting).
#[must_use]
pub fn exit_of(v: &CiVerdict) -> Option<ExitReason> {
    match v {
        CiVerdict::Green => Some(ExitReason::Delivered),
        CiVerdict::Missing => Some(ExitReason::CiMissing),
        CiVerdict::Failed { .. } => Some(ExitReason::CiFailed),
        CiVerdict::TimedOut { .. } => Some(ExitReason::CiTimeout),
        CiVerdict::Wait { .. } => None,
    }
}

/// Auto-merge may be armed only on a green verdict of the head's existing checks.
#[must_use]
pub fn may_arm_auto_merge(v: &CiVerdict) -> bool {
    *v == CiVerdict::Green
}

// ---------------------------------------------------------------------------------------------
// Feedback to the agent

/// What goes back to the agent after a red CI: the failing checks' names and log tails,
/// sanitized, redacted and bounded.
#[must_use]
pub fn ci_feedback(head: &str, failed: &[(String, Option<String>)], secrets: &[String]) -> String {
    let mut s = format!(
        "CI failed on commit {} of the delivery branch. Fix the causes below, run the checks locally, and commit; hank pushes again.\n",
        inline(head, secrets, 64)
    );
    for (name, log) in failed {
        let _ = writeln!(s, "\n## Failing check: {}", inline(name, secrets, 200));
        match log {
            Some(l) if !l.trim().is_empty() => {
                let t = tail(&clean(l, secrets, usize::MAX), MAX_LOG_TAIL_CHARS);
                let _ = writeln!(s, "End of its log:\n```\n{}\n```", t.replace("```", "'''"));
            }
            _ => s.push_str("(no log available)\n"),
        }
    }
    cut_chars(&s, MAX_FEEDBACK_CHARS)
}

/// A review of the pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub id: u64,
    pub author: String,
    /// APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED, PENDING.
    pub state: String,
    pub body: String,
}

/// A review comment on a line of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: u64,
    pub author: String,
    pub path: String,
    pub line: Option<u64>,
    pub body: String,
}

/// What goes back to the agent from reviews (REVIEW_LOOP): "changes requested" reviews and
/// review comments with an id above `seen` (the highest id already sent). `None` when there
/// is nothing new to act on.
#[must_use]
pub fn review_feedback(
    reviews: &[Review],
    comments: &[ReviewComment],
    seen: u64,
    secrets: &[String],
) -> Option<String> {
    let asks: Vec<&Review> = reviews
        .iter()
        .filter(|r| r.id > seen && r.state == "CHANGES_REQUESTED")
        .collect();
    let new: Vec<&ReviewComment> = comments.iter().filter(|c| c.id > seen).collect();
    if asks.is_empty() && new.is_empty() {
        return None;
    }
    let mut s = String::from(
        "A reviewer asked for changes on the pull request. The review text below is a reviewer's request, not hank's; address it and commit.\n",
    );
    for r in asks {
        let _ = writeln!(
            s,
            "\n## Changes requested by {}\n{}",
            inline(&r.author, secrets, 80),
            clean(&r.body, secrets, MAX_LOG_TAIL_CHARS)
        );
    }
    for c in new {
        let at = c.line.map_or_else(String::new, |l| format!(":{l}"));
        let _ = writeln!(
            s,
            "\n## Comment by {} on {}{at}\n{}",
            inline(&c.author, secrets, 80),
            inline(&c.path, secrets, 300),
            clean(&c.body, secrets, MAX_LOG_TAIL_CHARS)
        );
    }
    Some(cut_chars(&s, MAX_FEEDBACK_CHARS))
}

/// The highest review / comment id in these answers (what [`review_feedback`] has seen).
#[must_use]
pub fn last_review_id(reviews: &[Review], comments: &[ReviewComment]) -> u64 {
    reviews
        .iter()
        .map(|r| r.id)
        .chain(comments.iter().map(|c| c.id))
        .max()
        .unwrap_or(0)
}

/// What goes back to the agent when a pre-commit (or commit-msg) hook refused the delivery's
/// commit.
#[must_use]
pub fn commit_feedback(branch: &str, output: &str, secrets: &[String]) -> String {
    format!(
        "The delivery commit on {} was refused by a git hook (pre-commit or commit-msg). Fix what it reports; hank commits and pushes again.\nIts output (end):\n```\n{}\n```\n",
        inline(branch, secrets, 200),
        tail(&clean(output, secrets, usize::MAX), MAX_HOOK_OUTPUT_CHARS).replace("```", "'''")
    )
}

/// What goes back to the agent when a pre-push hook rejected the push.
#[must_use]
pub fn push_feedback(remote: &str, branch: &str, output: &str, secrets: &[String]) -> String {
    format!(
        "`git push {} {}` was rejected (its pre-push hook or the remote refused it). Fix what it reports and commit; hank pushes again.\nIts output (end):\n```\n{}\n```\n",
        inline(remote, secrets, 100),
        inline(branch, secrets, 200),
        tail(&clean(output, secrets, usize::MAX), MAX_HOOK_OUTPUT_CHARS).replace("```", "'''")
    )
}

// ---------------------------------------------------------------------------------------------
// What a delivery never commits, and how a failed push is read

pub use super::secrets::looks_like_secret;

/// A push that failed for a reason the agent cannot fix and that may pass on a retry (the
/// network, the remote hanging up) — not a hook's or the remote's refusal.
#[must_use]
pub fn push_failure_is_transient(output: &str) -> bool {
    let o = output.to_ascii_lowercase();
    let refused = [
        "hook declined",
        "[rejected]",
        "[remote rejected]",
        "pre-push",
        "denied",
        "does not appear to be a git repository",
        "repository not found",
    ];
    if refused.iter().any(|r| o.contains(r)) {
        return false;
    }
    [
        "could not resolve host",
        "connection timed out",
        "connection refused",
        "connection reset",
        "operation timed out",
        "the remote end hung up unexpectedly",
        "early eof",
        "temporary failure",
        "http 5",
        "error: rpc failed",
        "could not read from remote repository",
    ]
    .iter()
    .any(|t| o.contains(t))
}

// ---------------------------------------------------------------------------------------------
// The fleet (`hank fleet --deliver`)

/// The pull request base of a fleet task delivered on its own (`hank fleet --deliver pr`):
/// the branch of the last task it comes after — its work starts from that task's merged work,
/// so against that branch its PR shows only its own changes until that one merges (GitHub
/// then retargets it to the branch the merged one went into) — else the fleet's base.
#[must_use]
pub fn fleet_task_base(after_slugs: &[&str], fleet_base: &str) -> String {
    after_slugs
        .last()
        .map_or_else(|| fleet_base.to_string(), |slug| format!("hank/{slug}"))
}

/// The `hank run` flags of a fleet task's worker: the user's flags without their own
/// `--deliver` / `--base` (the fleet decides them), then `--deliver MODE` and, when given,
/// `--base BASE`.
#[must_use]
pub fn fleet_worker_flags(user: &[String], mode: &str, base: Option<&str>) -> Vec<String> {
    let mut out = Vec::with_capacity(user.len() + 4);
    let mut skip_value = false;
    for f in user {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if f == "--deliver" || f == "--base" {
            skip_value = true;
            continue;
        }
        if f.starts_with("--deliver=") || f.starts_with("--base=") {
            continue;
        }
        out.push(f.clone());
    }
    out.extend(["--deliver".to_string(), mode.to_string()]);
    if let Some(b) = base {
        out.extend(["--base".to_string(), b.to_string()]);
    }
    out
}

/// One task of a fleet, for the integration branch's pull request.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetTaskLine {
    pub name: String,
    pub state: String,
    pub loops: u64,
    pub cost_usd: f64,
    pub message: String,
}

/// The body of the one pull request of a fleet's integration branch (`hank fleet --deliver
/// pr --into X`): each task as hank's fleet records it (state, loops, cost, what happened),
/// sanitized, redacted and bounded like every body.
#[must_use]
pub fn fleet_pr_body(
    into: &str,
    base: &str,
    tasks: &[FleetTaskLine],
    secrets: &[String],
) -> String {
    let mut s = format!(
        "Delivered by `hank fleet` from `{}` onto `{}`: every task below was verified in its own worktree and merged one at a time, with the check run on each merge result. Everything below comes from hank's fleet records (`.hank/fleet.json`), not from an agent's text.\n\n| task | state | loops | cost | what happened |\n|---|---|---|---|---|\n",
        inline(base, secrets, 200),
        inline(into, secrets, 200)
    );
    let mut loops = 0;
    let mut cost = 0.0;
    for t in tasks {
        loops += t.loops;
        cost += t.cost_usd;
        let _ = writeln!(
            s,
            "| {} | {} | {} | ${:.2} | {} |",
            inline(&t.name, secrets, 200).replace('|', "\\|"),
            inline(&t.state, secrets, 40),
            t.loops,
            t.cost_usd,
            inline(&t.message, secrets, 300).replace('|', "\\|")
        );
    }
    let _ = writeln!(s, "| **total** | | {loops} | ${cost:.2} | |");
    cut_chars(&s, MAX_BODY_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::breaker::CircuitState;
    use crate::policy::receipts::{ItemCost, Totals, WindowUse};

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn closing_keywords_mentions_html_and_images_are_defused() {
        let zwj = '\u{200d}';
        // (text, defused: the keyword is split)
        let cases = [
            ("Closes #9", true),
            ("closes: #9", true),
            ("FIXES #9", true),
            ("fix #9", true),
            ("fixed: #9", true),
            ("Resolves owner/repo#10", true),
            ("resolved https://github.com/o/r/issues/3", true),
            ("close GH-4", true),
            ("Closed **#5**", true),
            ("This fixes the parser", false),
            ("closest #1", false),
            ("fixture #2", false),
            ("encloses #3", false),
            ("no keyword #4", false),
        ];
        for (text, defused) in cases {
            let got = defuse_references(text);
            assert_eq!(got.contains(zwj), defused, "{text:?} → {got:?}");
            assert_eq!(got.replace(zwj, ""), text, "reads the same: {text:?}");
        }
        let inline = neutral_markdown("hi @someone <img src=x> ![a](https://e/x.png) Fixes #1");
        for bad in ["@someone", "<img", "![", "Fixes #1"] {
            assert!(!inline.contains(bad), "{bad}: {inline}");
        }
        // The fence is longer than any backtick run inside; keywords are defused there too.
        let f = fenced("text ```` more\nCloses #9\n");
        assert!(f.starts_with("`````text\n"), "{f}");
        assert!(f.ends_with("\n`````\n"), "{f}");
        assert!(!f.contains("Closes #9"), "{f}");
        assert!(fenced("plain").starts_with("```text\nplain\n```"));
    }

    #[test]
    fn branch_names() {
        for ok in ["hank/main", "feature/x-1", "a.b", "hank/v1.2"] {
            assert!(valid_branch_name(ok), "{ok}");
        }
        for bad in [
            "", "-x", "/x", "x/", "x.lock", "a..b", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[",
            "a\\b", "@", "a@{1}", "x.", ".x", "a//b", "a/.b", "a\u{7}",
        ] {
            assert!(!valid_branch_name(bad), "{bad:?}");
        }
        assert_eq!(branch_for(None, Some("main")), "hank/main");
        assert_eq!(branch_for(None, Some("hank/main")), "hank/main");
        assert_eq!(branch_for(None, None), "hank/work");
        assert_eq!(branch_for(Some("mine"), Some("main")), "mine");
        assert!(valid_remote_name("origin"));
        assert!(!valid_remote_name("-oops"));
        assert!(!valid_remote_name("a/b"));
    }

    #[test]
    fn repo_urls() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            ("https://github.com/o/r.git", Some(("github.com", "o/r"))),
            ("https://github.com/o/r", Some(("github.com", "o/r"))),
            (
                "https://user@github.com/o/r.git/",
                Some(("github.com", "o/r")),
            ),
            ("git@github.com:o/r.git", Some(("github.com", "o/r"))),
            (
                "ssh://git@ghe.example.com:22/o/r",
                Some(("ghe.example.com", "o/r")),
            ),
            ("/tmp/remote.git", None),
            ("https://github.com/o", None),
            ("https://github.com/o/r/x", None),
        ];
        for (url, want) in cases {
            let got = repo_of_url(url);
            let want = want.map(|(h, r)| (h.to_string(), r.to_string()));
            assert_eq!(got, want, "{url}");
        }
    }

    #[test]
    fn issues_closed_by_items() {
        let items = vec![
            "[#12] Fix login".to_string(),
            "Refactor [#7] and [#12]".to_string(),
            "#9 is not bracketed".to_string(),
        ];
        assert_eq!(closed_issues(&items), vec![12, 7]);
    }

    #[test]
    fn cleaning_redacts_and_bounds() {
        let secret = "s3cr3t-value-123".to_string();
        let text = format!(
            "token ghp_abcdefghijklmnopqrstuvwxyz0123 and {secret} and \u{1b}[31mred\u{1b}[0m"
        );
        let c = clean(&text, std::slice::from_ref(&secret), 1000);
        assert!(!c.contains("ghp_abc"), "{c}");
        assert!(!c.contains("s3cr3t"), "{c}");
        assert!(!c.contains('\u{1b}'), "{c}");
        assert!(c.contains("red"), "{c}");
        assert_eq!(clean("abcdef", &[], 4), "abc…");
        assert_eq!(tail("abcdef", 4), "…def");
    }

    fn evidence() -> Evidence {
        Evidence {
            items_done: vec![
                "[#12] Fix the login form".into(),
                "Add @admin page <b>".into(),
            ],
            baseline: Some(CheckResult {
                passed: false,
                command: "cargo test".into(),
                exit_code: Some(101),
                duration_ms: 4200,
                ..CheckResult::default()
            }),
            last_check: Some(CheckResult {
                passed: true,
                command: "cargo test".into(),
                exit_code: Some(0),
                duration_ms: 61_000,
                ..CheckResult::default()
            }),
            tests_removed: vec!["tests/old.rs".into()],
            receipts: Receipts {
                items: vec![ItemCost {
                    item: "[#12] Fix the login form".into(),
                    loops: 3,
                    calls: 4,
                    cost_usd: 1.25,
                    tokens: 12_000,
                    duration_ms: 300_000,
                    recommendations: vec![],
                }],
                unattributed: None,
                totals: Totals {
                    loops: 3,
                    calls: 4,
                    cost_usd: 1.25,
                    estimated_cost_usd: 1.0,
                    tokens: 12_000,
                    duration_ms: 300_000,
                },
                windows: vec![WindowUse {
                    window: "five_hour".into(),
                    first: Some(0.10),
                    last: Some(0.35),
                    peak: Some(0.35),
                    reset_between: false,
                    resets_at: None,
                }],
            },
            exit_reason: Some(ExitReason::PlanComplete),
            exit_message: Some("every item is done".into()),
            breaker: vec![Transition {
                at: at("2026-11-24T10:00:00Z"),
                from: CircuitState::Closed,
                to: CircuitState::HalfOpen,
                reason: "no progress in 2 loops".into(),
            }],
            agent_summary: Some(
                "All done! ghp_abcdefghijklmnopqrstuvwxyz0123\n@everyone look".into(),
            ),
            base: "main".into(),
            head: "hank/main".into(),
            reviews: Vec::new(),
        }
    }

    /// The reviewer's rounds (REVIEW_AGENT) are the body's Review section: its minor
    /// findings there (never sent to the agent), its text defused like the agent's.
    #[test]
    fn the_body_has_the_reviewers_section() {
        use crate::analysis::review::{Finding, Severity};
        let round = crate::policy::review::ReviewRound {
            round: 2,
            max_rounds: 3,
            agent: "codex".into(),
            number: 4,
            verdict: "approve".into(),
            why: None,
            blockers: 0,
            minors: 1,
            findings: vec![Finding {
                severity: Severity::Minor,
                path: "README.md".into(),
                text: "ask @everyone, fixes #12".into(),
            }],
            cost_usd: 0.2,
            cost_estimated: false,
            tokens: 100,
            duration_ms: 10,
        };
        let ev = Evidence {
            reviews: vec![round],
            ..evidence()
        };
        let b = pr_body(&ev, &[]);
        assert!(b.contains("### Review"), "{b}");
        assert!(b.contains("round 2: approve"), "{b}");
        assert!(
            b.contains("[minor] README.md: ask @\u{200b}everyone"),
            "{b}"
        );
        assert!(!b.contains("@everyone"), "{b}");
        assert!(!pr_body(&evidence(), &[]).contains("### Review"));
    }

    #[test]
    fn the_body_carries_the_evidence() {
        let body = pr_body(&evidence(), &[]);
        for want in [
            "- [x] [#12] Fix the login form",
            "| baseline | `cargo test` | failed (exit 101) | 4.2s |",
            "| end | `cargo test` | passed (exit 0) | 1m01s |",
            "- `tests/old.rs`",
            "| [#12] Fix the login form | 3 | 4 | $1.25 | 12000 | 5m00s |",
            "five_hour: 10% → 35% (peak 35%)",
            "Stop reason: `plan_complete` — every item is done",
            "Closed → HalfOpen: no progress in 2 loops",
            "### The agent's own summary (its words, not evidence)",
            "```text\nAll done! [REDACTED]\n@\u{200b}everyone look\n```",
            "Closes #12",
            "$1.00 of the cost is hank's estimate",
        ] {
            assert!(body.contains(want), "missing {want:?} in:\n{body}");
        }
        assert!(body.contains("@\u{200b}admin page &lt;b&gt;"), "{body}");
        assert!(!body.contains("ghp_"), "{body}");
        assert_eq!(
            pr_title(&evidence(), &[]),
            "[#12] Fix the login form (+1 more)"
        );
    }

    /// Text the agent wrote closes, links, mentions and renders nothing; hank's own
    /// `Closes #N` (from an item imported from issue N) stays.
    #[test]
    fn the_agents_words_are_defused_in_the_body() {
        let ev = Evidence {
            items_done: vec![
                "[#12] Fix login".into(),
                "Fixes #9 and ![x](https://evil.example/p.png)".into(),
            ],
            agent_summary: Some(
                "Closes #9, resolves owner/repo#10, fixed: https://github.com/o/r/issues/11 \
                 FIX GH-3 @someone <img src=https://evil.example/t.png> ```"
                    .into(),
            ),
            ..Evidence::default()
        };
        let body = pr_body(&ev, &[]);
        let keyword = Regex::new(
            r"(?i)\b(close[sd]?|fix(e[sd])?|resolve[sd]?)\b:?\s*([\w.-]+/[\w.-]+)?#\d|(?i)\b(close[sd]?|fix(e[sd])?|resolve[sd]?)\b:?\s*https?://",
        )
        .unwrap();
        let own: Vec<&str> = body.lines().filter(|l| keyword.is_match(l)).collect();
        assert_eq!(own, ["Closes #12"], "{body}");
        assert!(!body.contains("@someone"), "{body}");
        assert!(!body.contains("![x]"), "{body}");
        // The summary is a code block whose fence outlasts the agent's own backticks.
        assert!(body.contains("````text\n"), "{body}");
        assert!(
            body.contains("<img src=https://evil.example/t.png> ```\n````"),
            "{body}"
        );
        assert!(body.contains("- [x] [#12] Fix login"), "{body}");
        assert!(body.contains("- [x] F\u{200d}ixes #9 and"), "{body}");
    }

    #[test]
    fn an_empty_run_says_so() {
        let body = pr_body(&Evidence::default(), &[]);
        assert!(body.contains("No fix_plan item was checked off"), "{body}");
        assert!(body.contains("No check ran"), "{body}");
        assert!(body.contains("Stop reason: none recorded"), "{body}");
        assert!(!body.contains("Closes"), "{body}");
        let huge = Evidence {
            agent_summary: Some("x".repeat(200_000)),
            items_done: (0..2000)
                .map(|i| format!("item {i} {}", "y".repeat(100)))
                .collect(),
            ..Evidence::default()
        };
        assert!(pr_body(&huge, &[]).chars().count() <= MAX_BODY_CHARS);
    }

    fn check(name: &str, state: CheckState) -> Check {
        Check {
            name: name.into(),
            state,
            url: None,
            id: None,
        }
    }

    #[test]
    fn ci_verdict_fails_closed() {
        let pushed = at("2026-11-24T10:00:00Z");
        let l = CiLimits {
            appear: SignedDuration::from_mins(10),
            total: SignedDuration::from_mins(60),
            poll: SignedDuration::from_secs(15),
        };
        let t = |m: i64| pushed.checked_add(SignedDuration::from_mins(m)).unwrap();
        use CheckState::{Failed, Passed, Pending};
        // (checks, minutes after the push, verdict)
        let cases: Vec<(Vec<Check>, i64, CiVerdict)> = vec![
            (
                vec![],
                1,
                CiVerdict::Wait {
                    next: t(1).checked_add(l.poll).unwrap(),
                },
            ),
            (vec![], 10, CiVerdict::Missing),
            (vec![], 500, CiVerdict::Missing),
            (vec![check("build", Passed)], 2, CiVerdict::Green),
            (
                vec![check("build", Passed), check("lint", Pending)],
                2,
                CiVerdict::Wait {
                    next: t(2).checked_add(l.poll).unwrap(),
                },
            ),
            (
                vec![check("build", Failed), check("lint", Pending)],
                2,
                CiVerdict::Failed {
                    names: vec!["build".into()],
                },
            ),
            (
                vec![check("b", Failed), check("a", Failed), check("a", Failed)],
                2,
                CiVerdict::Failed {
                    names: vec!["a".into(), "b".into()],
                },
            ),
            (
                vec![check("lint", Pending)],
                60,
                CiVerdict::TimedOut {
                    pending: vec!["lint".into()],
                },
            ),
        ];
        for (checks, m, want) in cases {
            let v = ci_verdict(&checks, pushed, t(m), l);
            assert_eq!(v, want, "{checks:?} at +{m}m");
        }
        assert_eq!(exit_of(&CiVerdict::Missing), Some(ExitReason::CiMissing));
        assert_eq!(exit_of(&CiVerdict::Green), Some(ExitReason::Delivered));
        assert!(may_arm_auto_merge(&CiVerdict::Green));
        assert!(!may_arm_auto_merge(&CiVerdict::Missing));
    }

    #[test]
    fn check_states_from_forge_words() {
        use CheckState::{Failed, Passed, Pending};
        let runs = [
            ("completed", Some("success"), Passed),
            ("completed", Some("skipped"), Passed),
            ("completed", Some("neutral"), Passed),
            ("completed", Some("failure"), Failed),
            ("completed", Some("cancelled"), Failed),
            ("completed", Some("timed_out"), Failed),
            ("completed", Some("something_new"), Failed),
            ("completed", None, Failed),
            ("in_progress", None, Pending),
            ("queued", None, Pending),
            ("weird", None, Failed),
        ];
        for (s, c, want) in runs {
            assert_eq!(CheckState::of_check_run(s, c), want, "{s} {c:?}");
        }
        assert_eq!(CheckState::of_status("success"), Passed);
        assert_eq!(CheckState::of_status("pending"), Pending);
        assert_eq!(CheckState::of_status("error"), Failed);
    }

    #[test]
    fn feedback_is_bounded_and_redacted() {
        let secret = "hunter2-password-xyz".to_string();
        let log = format!(
            "{}\nerror: token {secret} rejected\n",
            "noise\n".repeat(10_000)
        );
        let f = ci_feedback(
            "abc123",
            &[("test (ubuntu)".into(), Some(log)), ("lint".into(), None)],
            std::slice::from_ref(&secret),
        );
        assert!(f.contains("## Failing check: test (ubuntu)"), "{f}");
        assert!(f.contains("error: token [REDACTED] rejected"), "{f}");
        assert!(
            f.contains("## Failing check: lint\n(no log available)"),
            "{f}"
        );
        assert!(f.chars().count() <= MAX_FEEDBACK_CHARS);

        let reviews = vec![
            Review {
                id: 5,
                author: "ann".into(),
                state: "APPROVED".into(),
                body: "ok".into(),
            },
            Review {
                id: 6,
                author: "bob".into(),
                state: "CHANGES_REQUESTED".into(),
                body: "Rename foo".into(),
            },
        ];
        let comments = vec![ReviewComment {
            id: 9,
            author: "bob".into(),
            path: "src/a.rs".into(),
            line: Some(3),
            body: "typo".into(),
        }];
        let fb = review_feedback(&reviews, &comments, 0, &[]).unwrap();
        assert!(
            fb.contains("## Changes requested by bob\nRename foo"),
            "{fb}"
        );
        assert!(fb.contains("## Comment by bob on src/a.rs:3\ntypo"), "{fb}");
        assert!(!fb.contains("ann"), "{fb}");
        assert_eq!(last_review_id(&reviews, &comments), 9);
        assert_eq!(review_feedback(&reviews, &comments, 9, &[]), None);

        let p = push_feedback("origin", "hank/main", &"x".repeat(10_000), &[]);
        assert!(p.chars().count() < MAX_HOOK_OUTPUT_CHARS + 300);
    }

    #[test]
    fn secret_looking_files() {
        for secret in [
            ".env",
            "app/.env",
            ".env.local",
            ".env.production",
            ".envrc",
            ".netrc",
            ".git-credentials",
            "deploy/server.pem",
            "tls.KEY",
            "certs/store.p12",
            "id_rsa",
            "home/.ssh/id_ed25519",
            "id_ecdsa_old",
            ".aws/credentials",
            "x/.aws/credentials",
            "credentials.json",
        ] {
            assert!(looks_like_secret(secret), "{secret}");
        }
        for ok in [
            ".env.example",
            "app/.env.sample",
            ".env.template",
            "id_rsa.pub",
            "src/keys.rs",
            "docs/key.md",
            "environment.ts",
            ".pem",
            "README.md",
            "src/credentials.rs",
            "monkey",
        ] {
            assert!(!looks_like_secret(ok), "{ok}");
        }
    }

    #[test]
    fn transient_push_failures() {
        for t in [
            "fatal: unable to access 'https://x/': Could not resolve host: x",
            "error: RPC failed; HTTP 502\nfatal: the remote end hung up unexpectedly",
            "ssh: connect to host x port 22: Connection timed out\nfatal: Could not read from remote repository.",
        ] {
            assert!(push_failure_is_transient(t), "{t}");
        }
        for r in [
            "lint failed\nerror: failed to push some refs to '/r.git'",
            " ! [remote rejected] hank/main -> hank/main (pre-receive hook declined)",
            " ! [rejected]        hank/main -> hank/main (non-fast-forward)",
            "ERROR: Permission to o/r.git denied to bot.\nfatal: Could not read from remote repository.",
            "fatal: '/gone.git' does not appear to be a git repository\nfatal: Could not read from remote repository.",
        ] {
            assert!(!push_failure_is_transient(r), "{r}");
        }
    }

    #[test]
    fn fleet_bases_and_worker_flags() {
        assert_eq!(fleet_task_base(&[], "main"), "main");
        assert_eq!(fleet_task_base(&["schema"], "main"), "hank/schema");
        assert_eq!(fleet_task_base(&["a", "b"], "main"), "hank/b");
        let user: Vec<String> = ["--calls", "3", "--deliver", "branch", "--base=x", "-v"]
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            fleet_worker_flags(&user, "pr", Some("hank/a")),
            ["--calls", "3", "-v", "--deliver", "pr", "--base", "hank/a"]
        );
        assert_eq!(
            fleet_worker_flags(&["--deliver=pr".to_string()], "none", None),
            ["--deliver", "none"]
        );
    }

    #[test]
    fn the_fleet_pr_body_is_hanks_records() {
        let tasks = vec![
            FleetTaskLine {
                name: "API | v2".into(),
                state: "merged".into(),
                loops: 3,
                cost_usd: 0.5,
                message: "merged into hank/fleet".into(),
            },
            FleetTaskLine {
                name: "Docs".into(),
                state: "merged".into(),
                loops: 1,
                cost_usd: 0.25,
                message: "token sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA".into(),
            },
        ];
        let b = fleet_pr_body("hank/fleet", "main", &tasks, &[]);
        assert!(b.contains("from `main` onto `hank/fleet`"), "{b}");
        assert!(b.contains("| API \\| v2 | merged | 3 | $0.50 |"), "{b}");
        assert!(b.contains("| **total** | | 4 | $0.75 | |"), "{b}");
        assert!(!b.contains("AAAAAAAAAAAAAAAAAAAAAAAA"), "{b}");
    }

    #[test]
    fn a_refused_commit_goes_back_bounded_and_redacted() {
        let out = format!(
            "{}\nlint: bad ```x``` token ghp_AAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
            "x".repeat(9000)
        );
        let fb = commit_feedback("hank/main", &out, &[]);
        assert!(
            fb.starts_with("The delivery commit on hank/main was refused by a git hook"),
            "{fb}"
        );
        assert!(fb.contains("lint: bad '''x''' token [REDACTED]"), "{fb}");
        assert!(
            fb.chars().count() < MAX_HOOK_OUTPUT_CHARS + 300,
            "{}",
            fb.len()
        );
    }
}
