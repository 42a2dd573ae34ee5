//! The delivery record, one type for every place a delivery is written: the state of the
//! delivery machine ([`super::machine::Machine`]), the per-user record a stopped delivery is
//! finished from (`delivery-record.json`, with the run's evidence), and — without the
//! evidence ([`Delivery::shown`]) — `.hank/delivery.json`, the `delivery` event and
//! status.json's `delivery`. `store::schema` re-exports it (every format is named there).
//! **\[pure\]**
//!
//! Older files read as it: a record of schema 1 (`DeliveryRecord`, whose stop was
//! `stopped`) and a `delivery.json` without a step.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::exit::ExitReason;

/// The schema of the per-user record (1: the record before the one type, read as well).
pub const DELIVERY_RECORD_SCHEMA: u32 = 2;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// A delivery: where the work goes, how far it got, what its checks say, and (in the
/// per-user record) the evidence of the run it delivers.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Delivery {
    /// The per-user record's schema ([`DELIVERY_RECORD_SCHEMA`]; absent in the shown view).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub schema_version: u32,
    /// When the record was last written (the per-user record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// `branch` or `pr`.
    pub mode: String,
    /// The delivery branch and the branch the pull request targets.
    pub branch: String,
    pub base: String,
    pub remote: String,
    /// How far the delivery got.
    pub step: DeliveryStep,
    /// The pushed commit (absent when the push did not happen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr_number: Option<u64>,
    /// `not_waited`, `pending`, `green`, `failed`, `missing`, `timed_out`.
    pub checks: String,
    /// The failing (or, at a timeout, still pending) checks' names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub check_names: Vec<String>,
    /// While the checks are waited for (status.json only): when the verdict is due —
    /// CI_APPEAR_TIMEOUT after the push while no check has appeared, else CI_TIMEOUT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks_due: Option<Timestamp>,
    /// While the checks are waited for: how many are still pending (0: none has appeared
    /// yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks_pending: Option<u32>,
    /// How the delivery ended or stopped (absent: under way, or an error). A record of
    /// schema 1 called it `stopped`.
    #[serde(skip_serializing_if = "Option::is_none", alias = "stopped")]
    pub exit_reason: Option<ExitReason>,
    /// What goes back to the agent in the next loop: a rejected push's hook output, failing
    /// checks' log tails, review requests (bounded, sanitized, redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// Auto-merge was armed (AUTO_MERGE, on green checks only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub auto_merge_armed: bool,
    /// The highest review / review comment id already fed back (REVIEW_LOOP).
    #[serde(skip_serializing_if = "is_zero")]
    pub reviews_seen: u64,
    /// Files left out of the commit because they look like secrets (still in the working
    /// tree, uncommitted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secrets_skipped: Vec<String>,
    /// Inside `hank run`: which delivery of the run this is (1, 2, …; 0 for `hank deliver`).
    #[serde(skip_serializing_if = "is_zero")]
    pub round: u64,
    /// A failed forge step (`forge_failed`): the step and the forge's own error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The evidence of the run delivered (the per-user record only).
    #[serde(skip_serializing_if = "DeliveryEvidence::is_empty")]
    pub evidence: DeliveryEvidence,
    /// A fleet's integration branch (`hank fleet --deliver pr --into X`): pushed as the
    /// local branch it is (no checkout, no commit), its pull request's body the fleet's
    /// records.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fleet: bool,
}

/// How far a delivery got ([`Delivery::step`]), in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStep {
    /// The evidence is kept; nothing pushed yet.
    #[default]
    Started,
    /// The branch is on the remote (`head`).
    Pushed,
    /// The pull request is open (`pr_number`); its checks are what is left.
    PrOpened,
    /// Over: delivered, or a verdict on the work itself (red checks, a round
    /// handed back to the agent). Nothing to resume.
    Finished,
}

/// What a delivery shows of the run that did the work, kept from that run's records so a
/// delivery resumed later (`hank deliver`) loses none of it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DeliveryEvidence {
    /// The pull request's title and body (hank's evidence, redacted as rendered).
    pub title: String,
    pub body: String,
    /// The fix_plan items the run checked off.
    pub items_done: Vec<String>,
    /// The issues the pull request closes (`Closes #N`), commented on when it opens.
    pub closes: Vec<u64>,
    /// The run's cost (USD).
    pub cost_usd: f64,
    /// The run's completion check passed (`true`), failed (`false`), or never ran (absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// The completion the run delivered (`plan_complete`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion: Option<ExitReason>,
}

impl DeliveryEvidence {
    /// No evidence (the shown view, an old `delivery.json`).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// The stop reasons after which a delivery is left to finish (the work is not in question).
#[must_use]
pub fn stops_resumably(reason: ExitReason) -> bool {
    matches!(
        reason,
        ExitReason::ForgeFailed
            | ExitReason::CiMissing
            | ExitReason::CiTimeout
            | ExitReason::Interrupted
            | ExitReason::PushRejected
    )
}

/// The step a delivery leaves its record at after a step that ended with `reason`: still under
/// way (`None`) or a resumable stop keeps the step reached, anything else finishes it.
#[must_use]
pub fn step_after(reason: Option<ExitReason>, reached: DeliveryStep) -> DeliveryStep {
    match reason {
        None => reached,
        Some(r) if stops_resumably(r) => reached,
        Some(_) => DeliveryStep::Finished,
    }
}

impl Delivery {
    /// What `.hank/delivery.json`, the `delivery` event and status.json show: the record
    /// without the evidence and the per-user stamp.
    #[must_use]
    pub fn shown(&self) -> Self {
        Self {
            schema_version: 0,
            at: None,
            evidence: DeliveryEvidence::default(),
            ..self.clone()
        }
    }

    /// Whether a delivery is left to finish.
    #[must_use]
    pub fn resumable(&self) -> bool {
        self.step != DeliveryStep::Finished && !self.branch.is_empty()
    }

    /// Where it stopped, for people: `the branch is pushed; the pull request is not open yet`.
    #[must_use]
    pub fn reached(&self) -> String {
        let what = match self.step {
            DeliveryStep::Started => "nothing is pushed yet".to_string(),
            DeliveryStep::Pushed => format!(
                "{} is pushed to {}; the pull request is not open yet",
                self.branch, self.remote
            ),
            DeliveryStep::PrOpened => format!(
                "pull request #{} is open; its checks have no verdict yet",
                self.pr_number.unwrap_or_default()
            ),
            DeliveryStep::Finished => "the delivery is finished".to_string(),
        };
        crate::sanitize::line(&what)
    }

    /// One line for people (the loop's output, `hank status`, the monitor):
    /// `PR #3 hank/main → main: checks pending` or `hank/main pushed to origin (abc123def456)`.
    #[must_use]
    pub fn line(&self) -> String {
        let checks = match self.checks.as_str() {
            "pending" => match (self.checks_due, self.checks_pending) {
                (Some(due), Some(0)) => format!(
                    "waiting for CI until {}: no check has appeared yet",
                    due.round(jiff::Unit::Second).unwrap_or(due)
                ),
                (Some(due), Some(n)) => format!(
                    "waiting for CI until {}: {n} check{} pending",
                    due.round(jiff::Unit::Second).unwrap_or(due),
                    if n == 1 { "" } else { "s" }
                ),
                _ => "checks pending".to_string(),
            },
            "green" => "checks green".to_string(),
            "failed" if self.check_names.is_empty() => "checks red".to_string(),
            "failed" => format!("checks red ({})", self.check_names.join(", ")),
            "missing" => "no checks (no CI is not green)".to_string(),
            "timed_out" => "checks still running at CI_TIMEOUT".to_string(),
            _ if self.head.is_none() => "not pushed".to_string(),
            _ => "pushed".to_string(),
        };
        let head = self
            .head
            .as_deref()
            .map(|h| format!(" ({})", h.get(..12).unwrap_or(h)))
            .unwrap_or_default();
        let line = match self.pr_number {
            Some(n) => format!("PR #{n} {} → {}{head}: {checks}", self.branch, self.base),
            None => format!("{} on {}{head}: {checks}", self.branch, self.remote),
        };
        crate::sanitize::line(&line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_of_schema_1_reads_as_the_one_type() {
        let old = r#"{"schema_version":1,"at":"2026-11-24T10:00:00Z","mode":"pr","branch":"hank/main","base":"main","remote":"origin","step":"pushed","round":0,"head":"abc","evidence":{"title":"T","body":"B","items_done":["a"],"closes":[4],"cost_usd":0.5},"stopped":"forge_failed","error":"the pull request could not be opened: 403"}"#;
        let d: Delivery = serde_json::from_str(old).unwrap();
        assert_eq!(d.exit_reason, Some(ExitReason::ForgeFailed));
        assert_eq!(d.step, DeliveryStep::Pushed);
        assert_eq!(d.evidence.closes, vec![4]);
        assert!(d.resumable());
        // An old delivery.json (no step, no evidence) reads too.
        let shown = r#"{"mode":"pr","branch":"hank/main","base":"main","remote":"origin","checks":"green","exit_reason":"delivered"}"#;
        let d: Delivery = serde_json::from_str(shown).unwrap();
        assert_eq!(d.exit_reason, Some(ExitReason::Delivered));
        assert!(d.evidence.is_empty());
    }

    #[test]
    fn the_shown_view_has_no_evidence_nor_stamp() {
        let d = Delivery {
            schema_version: DELIVERY_RECORD_SCHEMA,
            at: Some("2026-11-24T10:00:00Z".parse().unwrap()),
            branch: "hank/main".into(),
            evidence: DeliveryEvidence {
                body: "the body".into(),
                ..DeliveryEvidence::default()
            },
            ..Delivery::default()
        };
        let json = serde_json::to_string(&d.shown()).unwrap();
        assert!(!json.contains("the body") && !json.contains("schema_version"));
        assert!(!json.contains("\"at\""), "{json}");
        let full = serde_json::to_string(&d).unwrap();
        assert!(full.contains("the body"), "{full}");
    }

    #[test]
    fn only_a_stop_that_leaves_the_work_unjudged_keeps_the_record_open() {
        let cases = [
            (Some(ExitReason::ForgeFailed), true),
            (Some(ExitReason::CiMissing), true),
            (Some(ExitReason::CiTimeout), true),
            (Some(ExitReason::Interrupted), true),
            (Some(ExitReason::Delivered), false),
            (Some(ExitReason::CiFailed), false),
            (None, true),
        ];
        for (reason, open) in cases {
            let step = step_after(reason, DeliveryStep::Pushed);
            assert_eq!(step == DeliveryStep::Pushed, open, "{reason:?}");
            let r = Delivery {
                step,
                branch: "b".into(),
                ..Delivery::default()
            };
            assert_eq!(r.resumable(), open);
        }
    }
}
