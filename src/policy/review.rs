//! The independent reviewer before "done" (`REVIEW_AGENT`, issue 39): its rounds, its share
//! of the run's cost, what it is asked and what goes back to the worker. **\[pure\]**
//!
//! A round is one call of the reviewer, after a verified completion (`VERIFY_COMMAND`
//! passed) and before delivery. Its verdict ([`crate::analysis::review`]) fails closed: only
//! an explicit, consistent `APPROVE` lets the run stop as done. Otherwise the blockers go back
//! to the worker ([`worker_note`], "The reviewer's findings") while rounds are left
//! ([`after_verdict`]); past `REVIEW_MAX_ROUNDS` the run stops `review_rejected`. Before each
//! round [`before_round`] applies `MAX_COST_USD` and `REVIEW_MAX_SHARE` (`review_budget`).
//! Minor findings never go back to the worker: they are in the PR body ([`pr_section`]),
//! the `review` events and `hank report`.

use crate::analysis::review::{Finding, REVIEW_CLOSE, REVIEW_OPEN, Review, Severity, Verdict};
use crate::exit::ExitReason;
use crate::sanitize::cut_bytes;
use serde::{Deserialize, Serialize};

/// `REVIEW_MAX_ROUNDS`' default.
pub const DEFAULT_MAX_ROUNDS: u32 = 3;
/// `REVIEW_MAX_SHARE`'s default.
pub const DEFAULT_MAX_SHARE: f64 = 0.3;
/// The most bytes of the worker's note ("The reviewer's findings").
pub const MAX_NOTE_BYTES: usize = 8_000;
/// The most bytes of the diff the reviewer reads; past it, the diff's stat and the head of
/// the patch (with what was cut named).
pub const MAX_DIFF_BYTES: usize = 60_000;
/// The most bytes of the check's output tail the reviewer reads.
pub const MAX_CHECK_BYTES: usize = 4_000;

/// `REVIEW_*` as the rounds need them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReviewConfig {
    /// `REVIEW_MAX_ROUNDS` (at least 1).
    pub max_rounds: u32,
    /// `REVIEW_MAX_SHARE`: the largest share of the run's cost reviews may take (0–1).
    pub max_share: f64,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        Self {
            max_rounds: DEFAULT_MAX_ROUNDS,
            max_share: DEFAULT_MAX_SHARE,
        }
    }
}

/// What the run has spent so far (USD), reviews included.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spend {
    /// Every review call of this run.
    pub reviews: f64,
    /// Every call of this run (the worker's and the reviewer's).
    pub run: f64,
    /// `MAX_COST_USD` (0: none).
    pub max_cost: f64,
}

/// Rounds held before `REVIEW_MAX_SHARE` may stop the run: the first round's findings are
/// answered by the worker and that answer is reviewed (round 2) whatever the share, so a short
/// run — one cheap worker loop, a dearer review — never stops `review_budget` with its first
/// findings unanswered.
pub const ROUNDS_BEFORE_SHARE: u32 = 2;

/// Before a round (`held`: the rounds held so far in the run): `MAX_COST_USD` reached stops
/// the run (`cost_budget`), as before any call; from round [`ROUNDS_BEFORE_SHARE`] + 1 on,
/// reviews that already cost more than `REVIEW_MAX_SHARE` of the run stop it
/// (`review_budget`). `None`: the round may run.
#[must_use]
pub fn before_round(cfg: &ReviewConfig, spend: Spend, held: u32) -> Option<ExitReason> {
    if spend.max_cost.is_finite() && spend.max_cost > 0.0 && spend.run >= spend.max_cost {
        return Some(ExitReason::CostBudget);
    }
    if held < ROUNDS_BEFORE_SHARE {
        return None;
    }
    let share = cfg.max_share.clamp(0.0, 1.0);
    (spend.reviews > 0.0 && spend.reviews > share * spend.run).then_some(ExitReason::ReviewBudget)
}

/// How a round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundEnd {
    /// The reviewer approved: the completion goes on (delivery, or the stop).
    Approved,
    /// Changes asked with rounds left: the blockers go to the worker's next loop.
    BackToWorker,
    /// Changes asked in the last round: the run stops `review_rejected`.
    Rejected,
}

/// The end of round `round` (1-based) with this verdict.
#[must_use]
pub fn after_verdict(cfg: &ReviewConfig, round: u32, review: &Review) -> RoundEnd {
    if review.approved() {
        RoundEnd::Approved
    } else if round >= cfg.max_rounds.max(1) {
        RoundEnd::Rejected
    } else {
        RoundEnd::BackToWorker
    }
}

/// The reviewer's words for a round whose call did not answer (an error, a timeout, an
/// interrupt, a crash): unreadable, i.e. changes.
#[must_use]
pub fn of_answer(review: Option<&Review>, failed: Option<&str>) -> Review {
    match (failed, review) {
        (Some(why), _) => Review::unreadable(format!("the reviewer's call failed: {why}")),
        (None, Some(r)) => r.clone(),
        (None, None) => Review::unreadable("no ---HANK_REVIEW--- block in the answer"),
    }
}

/// One finding as a line (`[blocker] path: text`).
#[must_use]
pub fn finding_line(f: &Finding) -> String {
    if f.path.is_empty() {
        format!("[{}] {}", f.severity.as_str(), f.text)
    } else {
        format!("[{}] {}: {}", f.severity.as_str(), f.path, f.text)
    }
}

/// What the worker's next loop reads ("The reviewer's findings"): the blockers only, or why
/// the review could not be read. Bounded by [`MAX_NOTE_BYTES`].
#[must_use]
pub fn worker_note(review: &Review, round: u32, cfg: &ReviewConfig) -> String {
    let left = cfg.max_rounds.saturating_sub(round);
    let mut out = format!(
        "An independent reviewer looked at this run's work (round {round} of {}) and did not approve it. ",
        cfg.max_rounds
    );
    match &review.verdict {
        Verdict::Unreadable { why } => out.push_str(&format!(
            "The review could not be read ({why}): look over the work again, fix what is not right, and say \"done\" when it is.\n"
        )),
        _ => {
            let blockers: Vec<String> = review.of(Severity::Blocker).map(finding_line).collect();
            if blockers.is_empty() {
                out.push_str("It asked for changes without naming one: look over the work again.\n");
            } else {
                out.push_str("Fix each of these, then say \"done\" again:\n");
                for b in blockers {
                    out.push_str(&format!("- {b}\n"));
                }
            }
        }
    }
    out.push_str(&format!(
        "{left} review round(s) left before the run stops unapproved (review_rejected)."
    ));
    cut_bytes(&out, MAX_NOTE_BYTES).to_owned()
}

/// What the reviewer of a round is given.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    pub round: u32,
    pub max_rounds: u32,
    /// The fix_plan items done in this run.
    pub items: &'a [String],
    /// The diff the reviewer reads ([`cap_diff`]): the run's from its start in round 1, what
    /// changed since the last round after it.
    pub diff: &'a str,
    /// Whether `diff` is since the last round (else since the run's start).
    pub since_last_round: bool,
    /// `VERIFY_COMMAND` (`None`: none set).
    pub check: Option<&'a str>,
    /// How the last check ended and the tail of its output.
    pub check_result: &'a str,
    /// Earlier rounds' findings, oldest first (round, its findings).
    pub earlier: &'a [(u32, Vec<Finding>)],
}

/// The reviewer's prompt (on stdin): its role, the verdict's format, and the run's work.
#[must_use]
pub fn prompt(i: &PromptInput<'_>) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "You are an independent code reviewer (round {} of {}). Another agent worked on this \
project and says its work is done; the project's check passed. Review the work read-only: do \
not edit, create or delete any file, do not commit, and run nothing that changes the project. \
Read the files you need to judge the change.\n\n\
Look for what tests do not catch: missing error handling, tests that assert nothing, changes \
to the wrong file, work the items ask for that is missing, secrets, anything unsafe. Name only \
real problems. A [blocker] is something that must be fixed before this work can ship; a \
[minor] is a suggestion the worker will not be asked to address.\n\n\
End your answer with exactly this block (APPROVE only when no blocker remains; an answer \
without the block, or with an unreadable one, counts as CHANGES):\n\n\
{REVIEW_OPEN}\nVERDICT: APPROVE | CHANGES\nFINDINGS:\n- [blocker] path: what is wrong and what to do\n- [minor] path: …\n{REVIEW_CLOSE}\n",
        i.round, i.max_rounds
    ));
    out.push_str("\n## Items done in this run\n");
    if i.items.is_empty() {
        out.push_str("(no fix_plan item was ticked in this run)\n");
    }
    for item in i.items {
        out.push_str(&format!("- {item}\n"));
    }
    out.push_str("\n## The check\n");
    match i.check {
        Some(c) => out.push_str(&format!("VERIFY_COMMAND: {c}\n{}\n", i.check_result)),
        None => out.push_str("No VERIFY_COMMAND is set: nothing was run.\n"),
    }
    if !i.earlier.is_empty() {
        out.push_str("\n## What earlier rounds found\n");
        for (round, findings) in i.earlier {
            if findings.is_empty() {
                out.push_str(&format!("Round {round}: no finding named.\n"));
            }
            for f in findings {
                out.push_str(&format!("Round {round}: {}\n", finding_line(f)));
            }
        }
        out.push_str("Check that the blockers above are fixed.\n");
    }
    out.push_str(if i.since_last_round {
        "\n## What changed since your last round\n"
    } else {
        "\n## The diff of this run (from its start)\n"
    });
    if i.diff.trim().is_empty() {
        out.push_str("(no change in the files)\n");
    } else {
        out.push_str("```diff\n");
        out.push_str(i.diff);
        if !i.diff.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("```\n");
    }
    out
}

/// The diff as the reviewer reads it: whole up to [`MAX_DIFF_BYTES`]; past it the stat of
/// every file, then the head of the patch and what was cut.
#[must_use]
pub fn cap_diff(stat: &str, patch: &str) -> String {
    if patch.len() <= MAX_DIFF_BYTES {
        return patch.to_owned();
    }
    let room = MAX_DIFF_BYTES.saturating_sub(stat.len().min(MAX_DIFF_BYTES / 2));
    let head = cut_bytes(patch, room);
    format!(
        "(the diff is {} bytes: every file's stat first, then its first {} bytes; read the files for the rest)\n{}\n{}\n… ({} bytes cut)\n",
        patch.len(),
        head.len(),
        cut_bytes(stat, MAX_DIFF_BYTES / 2),
        head,
        patch.len() - head.len()
    )
}

/// One round of the independent reviewer (`REVIEW_AGENT`, issue 39): the `review` event and
/// status.json's `review`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRound {
    /// 1, 2, … (of `max_rounds`).
    pub round: u32,
    pub max_rounds: u32,
    /// The reviewer's profile.
    pub agent: String,
    /// The call's number (its logs are `logs/loop_N.*`).
    #[serde(rename = "loop")]
    pub number: u64,
    /// `approve`, `changes` or `unreadable` (a missing, unreadable or contradictory verdict,
    /// or a failed call: counted as changes).
    pub verdict: String,
    /// Why the verdict could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub blockers: u32,
    pub minors: u32,
    /// Every finding, blockers first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<crate::analysis::review::Finding>,
    pub cost_usd: f64,
    #[serde(default)]
    pub cost_estimated: bool,
    pub tokens: u64,
    pub duration_ms: u64,
}

impl ReviewRound {
    /// The round as one line: `review round 1/3 (codex): changes — 2 blocker(s), 1 minor,
    /// $0.12` (the terminal, the log, `hank status`, the monitor's events).
    #[must_use]
    pub fn line(&self) -> String {
        let why = (self.why.as_deref())
            .map(|w| format!(" ({w})"))
            .unwrap_or_default();
        format!(
            "review round {}/{} ({}): {}{why} — {} blocker(s), {} minor, ${:.2}",
            self.round,
            self.max_rounds,
            self.agent,
            self.verdict,
            self.blockers,
            self.minors,
            self.cost_usd
        )
    }

    /// The name of its row in `hank report` and the receipts: `review round 1 (codex):
    /// changes`.
    #[must_use]
    pub fn row(&self) -> String {
        format!(
            "review round {} ({}): {}",
            self.round, self.agent, self.verdict
        )
    }

    /// This review call as the receipts count it (a row of its own, finished at `at`).
    #[must_use]
    pub fn receipt(&self, at: jiff::Timestamp) -> crate::policy::receipts::LoopCost {
        crate::policy::receipts::LoopCost {
            number: self.number,
            at: Some(at),
            cost_usd: self.cost_usd,
            cost_estimated: self.cost_estimated,
            tokens: self.tokens,
            duration_ms: self.duration_ms,
            calls: None,
            items: vec![self.row()],
            recommendation: None,
            windows: std::collections::BTreeMap::new(),
        }
    }
}

/// What a `review_rejected` exit adds to its message: the last round's blockers (or why it
/// could not be read), bounded.
#[must_use]
pub fn rejected_note(last: &ReviewRound) -> String {
    let blockers: Vec<String> = (last.findings.iter())
        .filter(|f| f.severity == Severity::Blocker)
        .take(5)
        .map(finding_line)
        .collect();
    let text = match (&last.why, blockers.is_empty()) {
        (Some(why), _) => format!("the last review could not be read: {why}"),
        (None, true) => "the last review asked for changes without naming one".to_owned(),
        (None, false) => format!("last blockers: {}", blockers.join("; ")),
    };
    crate::sanitize::cut_chars(&text, 600)
}

/// One round as the engine keeps it (the next round's prompt names its findings).
#[derive(Debug, Clone, PartialEq)]
pub struct RoundSeen {
    pub round: u32,
    pub review: Review,
    pub cost_usd: f64,
}

impl ReviewRound {
    /// The record of a round — `(round, max_rounds, the reviewer's profile, the call's
    /// number)` — from its verdict and the call's analysis `a`, which took `took`.
    #[must_use]
    pub fn of(
        (round, max_rounds, agent, number): (u32, u32, &str, u64),
        verdict: &Review,
        a: &crate::analysis::Analysis,
        took: std::time::Duration,
    ) -> Self {
        let count = |s: Severity| u32::try_from(verdict.count(s)).unwrap_or(u32::MAX);
        Self {
            round,
            max_rounds,
            agent: agent.to_owned(),
            number,
            verdict: match &verdict.verdict {
                Verdict::Approve => "approve",
                Verdict::Changes => "changes",
                Verdict::Unreadable { .. } => "unreadable",
            }
            .to_owned(),
            why: match &verdict.verdict {
                Verdict::Unreadable { why } => Some(why.clone()),
                _ => None,
            },
            blockers: count(Severity::Blocker),
            minors: count(Severity::Minor),
            findings: verdict.findings.clone(),
            cost_usd: a.cost_usd,
            cost_estimated: a.cost_estimated,
            tokens: a.tokens.sum(),
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// The reviewer's rounds in a run, as its host keeps them between rounds: the work tree and
/// the done items the first round's diff and list start from (then the tree of the last
/// round), every round seen, the last round as status.json shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rounds {
    base_tree: Option<String>,
    items_at_start: Vec<String>,
    seen: Vec<RoundSeen>,
    /// The last round as status.json shows it.
    pub last: Option<ReviewRound>,
    reviewed_once: bool,
}

/// What a round's prompt is made of besides the rounds themselves.
#[derive(Debug, Clone)]
pub struct RoundInput<'a> {
    pub round: u32,
    pub max_rounds: u32,
    /// The fix_plan as it is now.
    pub plan: &'a crate::policy::fixplan::Plan,
    /// The work tree now (none: not a git repository, or git could not say).
    pub tree: Option<&'a str>,
    /// The diff (stat, patch) from [`Rounds::base_tree`] to `tree`, when git gave one.
    pub diff: Option<(&'a str, &'a str)>,
    /// `VERIFY_COMMAND`, and how its last run ended (none ran: `None`).
    pub check: Option<&'a str>,
    pub check_result: Option<String>,
}

impl Rounds {
    /// At the run's start: the work tree and the done items the first round starts from.
    pub fn start(&mut self, tree: Option<String>, plan: &crate::policy::fixplan::Plan) {
        self.base_tree = tree;
        self.items_at_start = done_items(plan);
    }

    /// The tree the next round's diff starts from.
    #[must_use]
    pub fn base_tree(&self) -> Option<&str> {
        self.base_tree.as_deref()
    }

    /// The prompt of a round ([`prompt`]): the items done in the run, the diff (since the
    /// run's start, or since the last round), the check, earlier findings; the base moves to
    /// the tree now.
    pub fn prompt(&mut self, i: &RoundInput<'_>) -> String {
        let since_last_round = self.reviewed_once;
        let diff = i.diff.map_or_else(
            || "(no diff: the project is not a git repository, or git could not say; read the files the items name)".to_owned(),
            |(stat, patch)| cap_diff(stat, patch),
        );
        if let Some(tree) = i.tree {
            self.base_tree = Some(tree.to_owned());
        }
        self.reviewed_once = true;
        let items: Vec<String> = done_items(i.plan)
            .into_iter()
            .filter(|item| !self.items_at_start.contains(item))
            .collect();
        let earlier: Vec<(u32, Vec<Finding>)> = (self.seen.iter())
            .map(|r| (r.round, r.review.findings.clone()))
            .collect();
        let check_result =
            (i.check_result.clone()).unwrap_or_else(|| "no check ran in this run".to_owned());
        prompt(&PromptInput {
            round: i.round,
            max_rounds: i.max_rounds,
            items: &items,
            diff: &diff,
            since_last_round,
            check: i.check,
            check_result: &check_result,
            earlier: &earlier,
        })
    }

    /// A round ended with `verdict`, shown as `shown`.
    pub fn record(&mut self, verdict: Review, shown: ReviewRound) {
        self.seen.push(RoundSeen {
            round: shown.round,
            review: verdict,
            cost_usd: shown.cost_usd,
        });
        self.last = Some(shown);
    }
}

/// The fix_plan items checked in `plan`.
fn done_items(plan: &crate::policy::fixplan::Plan) -> Vec<String> {
    (plan.items.iter())
        .filter(|i| i.done)
        .map(|i| i.text.clone())
        .collect()
}

/// The verdict of a review call that answered `a` (`interrupted`: hank stopped it): the
/// reviewer's words, or unreadable when the call failed ([`call_failure`], [`of_answer`]).
#[must_use]
pub fn verdict_of(interrupted: bool, a: &crate::analysis::Analysis) -> Review {
    of_answer(a.review.as_ref(), call_failure(interrupted, a).as_deref())
}

/// Why the reviewer's call gave no answer to read (an error, a timeout, an interrupt).
#[must_use]
pub fn call_failure(interrupted: bool, a: &crate::analysis::Analysis) -> Option<String> {
    if interrupted {
        return Some("interrupted".to_owned());
    }
    match (&a.outcome, &a.error) {
        (crate::analysis::Outcome::Success, _) => None,
        (_, Some(e)) => Some(format!(
            "{}: {}",
            e.kind.as_str(),
            crate::sanitize::cut_chars(&e.message, 200)
        )),
        (o, None) => Some(format!("{o:?}").to_lowercase()),
    }
}

/// The PR body's "Review" section over the run's `review` events: the reviewer, each round's
/// verdict, the blockers still open when the last round did not approve, the last round's
/// minor findings. `clean` makes the reviewer's text safe for the body (redaction, no
/// mentions or closing keywords: [`crate::policy::deliver`]).
#[must_use]
pub fn pr_section(rounds: &[ReviewRound], clean: &dyn Fn(&str) -> String) -> Option<String> {
    let last = rounds.last()?;
    let mut out = format!(
        "\n### Review\n\nIndependent reviewer: `{}` (read-only).\n\n",
        clean(&last.agent)
    );
    for r in rounds {
        let why = r
            .why
            .as_deref()
            .map(|w| format!(" ({})", clean(w)))
            .unwrap_or_default();
        out.push_str(&format!(
            "- round {}: {}{why} — {} blocker(s), {} minor, ${:.2}\n",
            r.round, r.verdict, r.blockers, r.minors, r.cost_usd
        ));
    }
    let line = |f: &Finding| clean(&finding_line(f));
    if last.verdict != "approve" {
        let open: Vec<String> = (last.findings.iter())
            .filter(|f| f.severity == Severity::Blocker)
            .map(line)
            .collect();
        if !open.is_empty() {
            out.push_str("\nBlockers still open:\n\n");
            for f in open {
                out.push_str(&format!("- {f}\n"));
            }
        }
    }
    let minors: Vec<String> = (last.findings.iter())
        .filter(|f| f.severity == Severity::Minor)
        .map(line)
        .collect();
    if !minors.is_empty() {
        out.push_str("\nMinor findings (not sent back to the agent):\n\n");
        for f in minors {
            out.push_str(&format!("- {f}\n"));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::review::parse_review;

    fn review(body: &str) -> Review {
        parse_review(&format!("{REVIEW_OPEN}\n{body}\n{REVIEW_CLOSE}"))
    }

    #[test]
    fn rounds_table() {
        let cfg = ReviewConfig::default();
        let ok = review("VERDICT: APPROVE");
        let no = review("VERDICT: CHANGES\n- [blocker] a: b");
        let unreadable = Review::unreadable("x");
        let cases = [
            (1, &ok, RoundEnd::Approved),
            (3, &ok, RoundEnd::Approved),
            (1, &no, RoundEnd::BackToWorker),
            (2, &no, RoundEnd::BackToWorker),
            (3, &no, RoundEnd::Rejected),
            (4, &no, RoundEnd::Rejected),
            (1, &unreadable, RoundEnd::BackToWorker),
            (3, &unreadable, RoundEnd::Rejected),
        ];
        for (round, r, want) in cases {
            assert_eq!(after_verdict(&cfg, round, r), want, "round {round}");
        }
        let one = ReviewConfig {
            max_rounds: 1,
            ..cfg
        };
        assert_eq!(after_verdict(&one, 1, &no), RoundEnd::Rejected);
    }

    #[test]
    fn budget_table() {
        let cfg = ReviewConfig::default();
        let s = |reviews, run, max_cost| Spend {
            reviews,
            run,
            max_cost,
        };
        let cases = [
            (s(0.0, 0.0, 0.0), None),
            (s(0.0, 10.0, 0.0), None),
            (s(3.0, 10.0, 0.0), None),
            (s(3.1, 10.0, 0.0), Some(ExitReason::ReviewBudget)),
            (s(1.0, 1.0, 0.0), Some(ExitReason::ReviewBudget)),
            (s(0.0, 5.0, 5.0), Some(ExitReason::CostBudget)),
            (s(1.0, 10.0, 20.0), None),
        ];
        for (spend, want) in cases {
            assert_eq!(before_round(&cfg, spend, 2), want, "{spend:?}");
        }
        let all = ReviewConfig {
            max_share: 1.0,
            ..cfg
        };
        assert_eq!(before_round(&all, s(1.0, 1.0, 0.0), 2), None);
        // Rounds 1 and 2 (the worker's answer to the first findings) run whatever the share;
        // MAX_COST_USD still binds.
        for held in [0, 1] {
            assert_eq!(before_round(&cfg, s(1.0, 1.1, 0.0), held), None, "{held}");
            assert_eq!(
                before_round(&cfg, s(1.0, 5.0, 5.0), held),
                Some(ExitReason::CostBudget),
                "{held}"
            );
        }
        assert_eq!(
            before_round(&cfg, s(1.0, 1.1, 0.0), 2),
            Some(ExitReason::ReviewBudget)
        );
    }

    #[test]
    fn only_blockers_go_back_to_the_worker() {
        let cfg = ReviewConfig::default();
        let r = review(
            "VERDICT: CHANGES\n- [minor] README.md: typo\n- [blocker] src/a.rs: unwrap on input",
        );
        let note = worker_note(&r, 1, &cfg);
        assert!(
            note.contains("[blocker] src/a.rs: unwrap on input"),
            "{note}"
        );
        assert!(!note.contains("typo"), "{note}");
        assert!(note.contains("2 review round(s) left"), "{note}");
        let unreadable = worker_note(&Review::unreadable("no block"), 3, &cfg);
        assert!(
            unreadable.contains("could not be read (no block)"),
            "{unreadable}"
        );
    }

    #[test]
    fn a_failed_call_is_unreadable() {
        let ok = review("VERDICT: APPROVE");
        assert!(!of_answer(Some(&ok), Some("timeout")).approved());
        assert!(of_answer(Some(&ok), None).approved());
        assert!(!of_answer(None, None).approved());
        let answered = crate::analysis::Analysis {
            review: Some(ok),
            ..Default::default()
        };
        assert!(verdict_of(false, &answered).approved());
        assert!(!verdict_of(true, &answered).approved(), "interrupted");
    }

    #[test]
    fn the_prompt_names_the_format_items_check_and_earlier_findings() {
        let earlier = vec![(1, review("VERDICT: CHANGES\n- [blocker] a.rs: b").findings)];
        let items = vec!["Add login".to_owned()];
        let p = prompt(&PromptInput {
            round: 2,
            max_rounds: 3,
            items: &items,
            diff: "+fn x() {}\n",
            since_last_round: true,
            check: Some("cargo test"),
            check_result: "passed (exit 0)",
            earlier: &earlier,
        });
        for want in [
            REVIEW_OPEN,
            REVIEW_CLOSE,
            "VERDICT: APPROVE | CHANGES",
            "round 2 of 3",
            "- Add login",
            "VERIFY_COMMAND: cargo test",
            "Round 1: [blocker] a.rs: b",
            "since your last round",
            "+fn x() {}",
        ] {
            assert!(p.contains(want), "{want} missing in {p}");
        }
    }

    #[test]
    fn a_large_diff_is_capped_with_its_stat() {
        let patch = "+x\n".repeat(MAX_DIFF_BYTES);
        let d = cap_diff(" a | 3 +++\n", &patch);
        assert!(d.len() <= MAX_DIFF_BYTES + 400, "{}", d.len());
        assert!(d.contains("a | 3 +++") && d.contains("bytes cut"));
        assert_eq!(cap_diff("s", "small"), "small");
    }

    fn seen(round: u32, body: &str) -> ReviewRound {
        let r = review(body);
        ReviewRound {
            round,
            max_rounds: 3,
            agent: "codex".into(),
            number: u64::from(round),
            verdict: match r.verdict {
                Verdict::Approve => "approve",
                Verdict::Changes => "changes",
                Verdict::Unreadable { .. } => "unreadable",
            }
            .into(),
            why: None,
            blockers: u32::try_from(r.count(Severity::Blocker)).unwrap_or(0),
            minors: u32::try_from(r.count(Severity::Minor)).unwrap_or(0),
            findings: r.findings,
            cost_usd: 0.1,
            cost_estimated: false,
            tokens: 10,
            duration_ms: 5,
        }
    }

    #[test]
    fn the_pr_section_lists_rounds_and_minors() {
        let same = |t: &str| t.to_owned();
        let rounds = [
            seen(1, "VERDICT: CHANGES\n- [blocker] a.rs: b"),
            seen(2, "VERDICT: APPROVE\n- [minor] README.md: typo"),
        ];
        let s = pr_section(&rounds, &same).unwrap_or_default();
        assert!(s.contains("### Review"), "{s}");
        assert!(
            s.contains("round 1: changes — 1 blocker(s), 0 minor"),
            "{s}"
        );
        assert!(s.contains("round 2: approve"), "{s}");
        assert!(s.contains("[minor] README.md: typo"), "{s}");
        assert!(!s.contains("Blockers still open"), "{s}");
        let rejected = [seen(
            1,
            "VERDICT: CHANGES\n- [blocker] a.rs: b\n- [minor] c: d",
        )];
        let s = pr_section(&rejected, &same).unwrap_or_default();
        assert!(
            s.contains("Blockers still open:\n\n- [blocker] a.rs: b"),
            "{s}"
        );
        assert!(s.contains("- [minor] c: d"), "{s}");
        assert_eq!(pr_section(&[], &same), None);
    }

    /// A run's rounds: the first reads the diff from the run's start and the items done in
    /// the run only; the second reads the diff since the first (its base moved to the tree
    /// the first saw) and the first round's findings; no diff from git is said so.
    #[test]
    fn rounds_move_their_base_and_name_earlier_findings() {
        let before = crate::policy::fixplan::parse("- [x] old\n- [ ] new\n", &[]);
        let after = crate::policy::fixplan::parse("- [x] old\n- [x] new\n", &[]);
        let mut r = Rounds::default();
        r.start(Some("t0".into()), &before);
        assert_eq!(r.base_tree(), Some("t0"));
        let input = |round, tree, diff| RoundInput {
            round,
            max_rounds: 3,
            plan: &after,
            tree,
            diff,
            check: Some("make test"),
            check_result: None,
        };
        let first = r.prompt(&input(1, Some("t1"), Some(("stat", "+fn a() {}\n"))));
        assert!(first.contains("round 1 of 3"), "{first}");
        assert!(
            first.contains("- new\n") && !first.contains("- old\n"),
            "{first}"
        );
        assert!(
            first.contains("The diff of this run (from its start)"),
            "{first}"
        );
        assert!(first.contains("+fn a() {}"), "{first}");
        assert!(first.contains("no check ran in this run"), "{first}");
        assert_eq!(r.base_tree(), Some("t1"));
        let verdict = review("VERDICT: CHANGES\nFINDINGS:\n- [blocker] src/a.rs: no test");
        let shown = ReviewRound {
            round: 1,
            max_rounds: 3,
            agent: "codex".into(),
            number: 4,
            verdict: "changes".into(),
            why: None,
            blockers: 1,
            minors: 0,
            findings: verdict.findings.clone(),
            cost_usd: 0.2,
            cost_estimated: false,
            tokens: 10,
            duration_ms: 5,
        };
        r.record(verdict, shown.clone());
        assert_eq!(r.last, Some(shown));
        let second = r.prompt(&input(2, None, None));
        assert!(
            second.contains("What changed since your last round"),
            "{second}"
        );
        assert!(
            second.contains("Round 1: [blocker] src/a.rs: no test"),
            "{second}"
        );
        assert!(
            second.contains("(no diff: the project is not a git repository"),
            "{second}"
        );
        assert_eq!(r.base_tree(), Some("t1"), "no tree now: the base stays");
    }
}
