//! The independent reviewer's verdict (`REVIEW_AGENT`, issue 39): the `HANK_REVIEW` block of
//! its answer text. **\[pure\]**
//!
//! The answer text is the one the worker's answer is read from (the result of `json` /
//! `stream-json`, the plain text, a profile's mapped `text`): the native analyzer and
//! the mapped reader fill [`crate::analysis::Analysis::review`] with [`parse_review`] wherever
//! they read a `HANK_STATUS` block. The block:
//!
//! ```text
//! ---HANK_REVIEW---
//! VERDICT: APPROVE | CHANGES
//! FINDINGS:
//! - [blocker] path: what is wrong and what to do
//! - [minor] path: …
//! ---END_HANK_REVIEW---
//! ```
//!
//! It fails closed: no block, a block without its end, no verdict or one that is neither word,
//! two verdicts that differ, an approval that names a blocker — each is
//! [`Verdict::Unreadable`], which the rounds treat as changes asked ("the review could not be
//! read"), never an approval.

use serde::{Deserialize, Serialize};

/// The line that opens the block.
pub const REVIEW_OPEN: &str = "---HANK_REVIEW---";
/// The line that closes it.
pub const REVIEW_CLOSE: &str = "---END_HANK_REVIEW---";

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Goes back to the worker; the work is not approved while one stands.
    Blocker,
    /// Goes into the PR body and `hank report`, not back to the worker.
    Minor,
}

impl Severity {
    /// Its name in the block and in events.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blocker => "blocker",
            Self::Minor => "minor",
        }
    }
}

/// One finding of the reviewer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub severity: Severity,
    /// The file it is about (empty when the line named none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    pub text: String,
}

/// What the reviewer said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Verdict {
    Approve,
    Changes,
    /// No readable verdict: why (counts as changes asked).
    Unreadable {
        why: String,
    },
}

/// The reviewer's block as read: the verdict and its findings, blockers first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    #[serde(flatten)]
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
}

impl Review {
    /// A review that could not be read, and why.
    #[must_use]
    pub fn unreadable(why: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Unreadable { why: why.into() },
            findings: Vec::new(),
        }
    }

    /// Only an explicit, consistent `APPROVE` approves.
    #[must_use]
    pub fn approved(&self) -> bool {
        self.verdict == Verdict::Approve
    }

    /// The findings of this severity.
    pub fn of(&self, severity: Severity) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.severity == severity)
    }

    /// How many findings of this severity.
    #[must_use]
    pub fn count(&self, severity: Severity) -> usize {
        self.of(severity).count()
    }
}

/// The longest line of the block looked at (a finding is a sentence or two).
const MAX_LINE: usize = 2_000;
/// The most findings kept (the rest are dropped, blockers kept first).
pub const MAX_FINDINGS: usize = 50;

/// The verdict of the last complete `HANK_REVIEW` block in `text` ([`Review::unreadable`]
/// when there is none, or it is cut short, unreadable or contradicts itself).
#[must_use]
pub fn parse_review(text: &str) -> Review {
    let mut last: Option<Review> = None;
    let mut open: Option<Vec<&str>> = None;
    let mut cut_short = false;
    for raw in text.lines() {
        let line = clean(raw);
        if line == REVIEW_OPEN {
            cut_short = open.is_some();
            open = Some(Vec::new());
        } else if line == REVIEW_CLOSE {
            if let Some(body) = open.take() {
                last = Some(read_block(&body));
                cut_short = false;
            }
        } else if let Some(body) = open.as_mut() {
            body.push(raw);
        }
    }
    if open.is_some() || cut_short {
        // A block opened after the last complete one and never closed: the answer was cut
        // (or the reviewer wrote two verdicts); the earlier block does not speak for it.
        return Review::unreadable(
            "the review block is not closed (---END_HANK_REVIEW--- missing)",
        );
    }
    last.unwrap_or_else(|| Review::unreadable("no ---HANK_REVIEW--- block in the answer"))
}

/// [`parse_review`] when `text` has the block's opening line (an answer without one, a
/// worker's, is left alone: `None`).
#[must_use]
pub fn read_if_present(text: &str) -> Option<Review> {
    text.contains(REVIEW_OPEN).then(|| parse_review(text))
}

/// A line without markdown decoration: surrounding space, a quote's `>`, bold/code marks.
fn clean(raw: &str) -> &str {
    let cut = crate::sanitize::cut_bytes(raw, MAX_LINE);
    cut.trim()
        .trim_start_matches('>')
        .trim()
        .trim_matches(|c| c == '*' || c == '`')
        .trim()
}

fn read_block(body: &[&str]) -> Review {
    let mut verdicts: Vec<Option<Verdict>> = Vec::new();
    let mut findings = Vec::new();
    for raw in body {
        let line = clean(raw);
        if line.is_empty() || line.starts_with("```") || line.starts_with("~~~") {
            continue;
        }
        if let Some(value) = field(line, "VERDICT") {
            let word = value
                .trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_ascii_uppercase();
            verdicts.push(match word.as_str() {
                "APPROVE" | "APPROVED" => Some(Verdict::Approve),
                "CHANGES" | "CHANGES_REQUESTED" | "REQUEST_CHANGES" => Some(Verdict::Changes),
                _ => None,
            });
            continue;
        }
        if field(line, "FINDINGS").is_some() {
            continue;
        }
        if let Some(f) = finding(line) {
            findings.push(f);
        }
    }
    findings.sort_by_key(|f| f.severity);
    findings.truncate(MAX_FINDINGS);
    let verdict = match verdicts.as_slice() {
        [] => Verdict::Unreadable {
            why: "the review block has no VERDICT line".into(),
        },
        [None, ..] | [_, None, ..] => Verdict::Unreadable {
            why: "the VERDICT is neither APPROVE nor CHANGES".into(),
        },
        [Some(first), rest @ ..] => {
            if rest.iter().any(|v| v.as_ref() != Some(first)) {
                Verdict::Unreadable {
                    why: "the review block gives two different verdicts".into(),
                }
            } else {
                first.clone()
            }
        }
    };
    let verdict = match verdict {
        Verdict::Approve if findings.iter().any(|f| f.severity == Severity::Blocker) => {
            Verdict::Unreadable {
                why: "the review approves and names a blocker".into(),
            }
        }
        v => v,
    };
    Review { verdict, findings }
}

/// `KEY: value` (any case, `KEY = value` too).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let head = line.get(..key.len())?;
    if !head.eq_ignore_ascii_case(key) {
        return None;
    }
    let rest = line[key.len()..].trim_start();
    rest.strip_prefix(':')
        .or_else(|| rest.strip_prefix('='))
        .map(str::trim)
}

/// `- [severity] path: text` (`*`, a number or no bullet; the path optional). A severity
/// other than `minor` (`major`, `critical`, a typo) is a blocker: only what the reviewer
/// called minor stays out of the worker's way.
fn finding(line: &str) -> Option<Finding> {
    let rest = line
        .strip_prefix('-')
        .or_else(|| line.strip_prefix('*'))
        .or_else(|| {
            let digits = line.find(|c: char| !c.is_ascii_digit())?;
            (digits > 0)
                .then(|| line[digits..].strip_prefix('.'))
                .flatten()
        })
        // `clean` took a `*` bullet off already.
        .unwrap_or(line)
        .trim_start();
    let rest = rest.strip_prefix('[')?;
    let (sev, rest) = rest.split_once(']')?;
    let severity = match sev.trim().to_ascii_lowercase().as_str() {
        "minor" | "nit" | "nitpick" | "suggestion" | "info" => Severity::Minor,
        _ => Severity::Blocker,
    };
    let rest = rest.trim();
    let (path, text) = match rest.split_once(": ") {
        Some((p, t)) if !p.is_empty() && !p.contains(char::is_whitespace) => {
            (p.trim_matches('`').to_owned(), t.trim().to_owned())
        }
        _ => (String::new(), rest.to_owned()),
    };
    (!text.is_empty() || !path.is_empty()).then_some(Finding {
        severity,
        path,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(body: &str) -> String {
        format!("I looked at the diff.\n{REVIEW_OPEN}\n{body}\n{REVIEW_CLOSE}\n")
    }

    fn changes(why: &str) -> bool {
        matches!(&parse_review(why).verdict, Verdict::Unreadable { .. })
    }

    #[test]
    fn verdicts_table() {
        let approve = Verdict::Approve;
        let cases: &[(&str, Verdict, usize, usize)] = &[
            ("VERDICT: APPROVE\nFINDINGS:\n", approve.clone(), 0, 0),
            ("verdict: approve", approve.clone(), 0, 0),
            ("**VERDICT:** APPROVE", approve.clone(), 0, 0),
            (
                "VERDICT: APPROVE\nFINDINGS:\n- [minor] src/a.rs: rename x",
                approve.clone(),
                0,
                1,
            ),
            (
                "VERDICT: CHANGES\nFINDINGS:\n- [minor] a: m\n- [blocker] src/b.rs: no error handling",
                Verdict::Changes,
                1,
                1,
            ),
            (
                "VERDICT: CHANGES\nFINDINGS:\n* [critical] x.rs: y",
                Verdict::Changes,
                1,
                0,
            ),
            (
                "VERDICT: CHANGES\nFINDINGS:\n1. [major] x.rs: y",
                Verdict::Changes,
                1,
                0,
            ),
            ("VERDICT: CHANGES", Verdict::Changes, 0, 0),
        ];
        for (body, want, blockers, minors) in cases {
            let r = parse_review(&block(body));
            assert_eq!(&r.verdict, want, "{body}");
            assert_eq!(r.count(Severity::Blocker), *blockers, "{body}");
            assert_eq!(r.count(Severity::Minor), *minors, "{body}");
        }
    }

    #[test]
    fn everything_unclear_is_unreadable_never_an_approval() {
        let cases = [
            String::new(),
            "Looks good to me! APPROVE".to_owned(),
            block("FINDINGS:\n- [minor] a: b"),
            block("VERDICT: LGTM"),
            block("VERDICT: APPROVE\nVERDICT: CHANGES"),
            block("VERDICT: APPROVE\nFINDINGS:\n- [blocker] src/x.rs: broken"),
            format!("{REVIEW_OPEN}\nVERDICT: APPROVE\n"),
            // A complete approval followed by a second block cut short.
            block("VERDICT: APPROVE") + &format!("{REVIEW_OPEN}\nVERDICT: CHANGES\n"),
        ];
        for text in &cases {
            assert!(changes(text), "{text:?}");
            assert!(!parse_review(text).approved(), "{text:?}");
        }
    }

    #[test]
    fn the_last_complete_block_counts() {
        let text = block("VERDICT: CHANGES\n- [blocker] a: b") + &block("VERDICT: APPROVE");
        assert!(parse_review(&text).approved());
    }

    #[test]
    fn findings_keep_path_and_text_and_blockers_come_first() {
        let r = parse_review(&block(
            "VERDICT: CHANGES\nFINDINGS:\n- [minor] README.md: typo\n- [blocker] `src/lib.rs`: unwrap on input: use ?\n- [blocker] the tests assert nothing",
        ));
        assert_eq!(r.findings.len(), 3);
        assert_eq!(r.findings[0].path, "src/lib.rs");
        assert_eq!(r.findings[0].text, "unwrap on input: use ?");
        assert_eq!(r.findings[1].path, "");
        assert_eq!(r.findings[1].text, "the tests assert nothing");
        assert_eq!(r.findings[2].severity, Severity::Minor);
    }

    #[test]
    fn huge_and_hostile_text_is_bounded() {
        let many: String = (0..500).map(|i| format!("- [minor] f{i}: x\n")).collect();
        let r = parse_review(&block(&format!("VERDICT: APPROVE\n{many}")));
        assert_eq!(r.findings.len(), MAX_FINDINGS);
        let long = "x".repeat(100_000);
        let _ = parse_review(&block(&format!("VERDICT: {long}")));
        let _ = parse_review(&"\u{0}é\n".repeat(1000));
    }
}
