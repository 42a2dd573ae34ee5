//! Exit reasons of the loop and exit codes of every command.  **\[pure\]**

use serde::{Deserialize, Serialize};

/// Exit code: success.
pub const OK: u8 = 0;
/// Exit code: error (bad arguments, bad config, I/O).
pub const ERROR: u8 = 1;
/// Exit code: halted by a safety rule (or "already enabled" for `enable`/`enable-ci`).
pub const HALTED: u8 = 2;
/// Exit code: stopped at a limit.
pub const LIMIT: u8 = 3;
/// Exit code: interrupted (Ctrl-C / SIGTERM).
pub const INTERRUPTED: u8 = 130;

/// Why a `hank run` ended. The snake_case strings are stable: they appear in `status.json`,
/// the `exit` event and the final message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// EXIT_SIGNAL true and completion indicators in at least 2 of the last 5 loops.
    ProjectComplete,
    /// fix_plan.md has checkboxes and none open outside optional sections.
    PlanComplete,
    /// MAX_CONSECUTIVE_TEST_LOOPS consecutive test-only loops.
    TestSaturation,
    /// The circuit breaker is OPEN.
    CircuitOpen,
    /// Permission denials in CB_PERMISSION_DENIAL_THRESHOLD consecutive loops.
    PermissionDenied,
    /// Auth, billing or CLI usage error: retrying cannot help.
    AgentFatal,
    /// The agent crashed the same way twice in a row: it exited non-zero without a model
    /// answer (a traceback, a missing module, a refused file); retrying cannot help.
    AgentCrashed,
    /// The agent only asked questions, without progress, in
    /// [`crate::policy::decide::MAX_QUESTION_LOOPS`] consecutive loops: the user must answer
    /// (in PROMPT.md or fix_plan.md).
    NeedsAnswers,
    /// A required hank file disappeared.
    IntegrityFailure,
    /// MAX_REJECTED_COMPLETIONS "done" claims in a row were rejected by VERIFY_COMMAND.
    VerificationFailed,
    /// MAX_LOOPS reached.
    MaxLoops,
    /// The run has lasted MAX_RUNTIME.
    MaxRuntime,
    /// Total cost reached MAX_COST_USD.
    CostBudget,
    /// Usage limit hit and ON_USAGE_LIMIT=exit.
    UsageLimit,
    /// A usage window reached its MAX_WINDOW_PERCENT limit and ON_USAGE_LIMIT=exit.
    UsageWindow,
    /// A spend cap (monthly spend limit, out of usage credits): waiting for a usage window
    /// does not lift it.
    SpendLimit,
    /// Ctrl-C / SIGTERM.
    Interrupted,
    /// The work was delivered: pushed (DELIVER=branch), or its pull request's checks of the
    /// head commit all passed (DELIVER=pr with CI_WAIT).
    Delivered,
    /// Checks of the delivered head commit failed (after MAX_CI_ROUNDS rounds in a run).
    CiFailed,
    /// No check appeared for the delivered head commit within CI_APPEAR_TIMEOUT: no CI is
    /// never green.
    CiMissing,
    /// Checks of the delivered head commit were still pending at CI_TIMEOUT.
    CiTimeout,
    /// The push of the delivery branch was refused (a pre-push hook or the remote); its
    /// output is kept for the agent.
    PushRejected,
    /// A delivery step at the forge failed (the pull request, its checks, a review read):
    /// the branch is pushed; `hank deliver` finishes the delivery from its record.
    ForgeFailed,
    /// A commit about to be pushed adds a file that looks like a secret (by its name or its
    /// content) that `DELIVER_ALLOW_FILES` does not allow: nothing was pushed.
    SecretsInCommits,
    /// The run's own check (VERIFY_COMMAND, run before a "done" claim is accepted) could not
    /// run at all: its program was not found (126/127 from the shell). Nothing was tested, so
    /// the claim is neither accepted nor rejected; the agent is not told to fix it.
    CheckCouldNotRun,
    /// The independent reviewer (`REVIEW_AGENT`) did not approve the work within
    /// `REVIEW_MAX_ROUNDS` rounds (a missing or unreadable verdict counts as changes asked).
    ReviewRejected,
    /// Reviews cost more than `REVIEW_MAX_SHARE` of the run: reviewing stopped, the work kept
    /// unapproved.
    ReviewBudget,
}

impl ExitReason {
    /// Every reason, in table order.
    pub const ALL: [ExitReason; 27] = [
        Self::ProjectComplete,
        Self::PlanComplete,
        Self::TestSaturation,
        Self::CircuitOpen,
        Self::PermissionDenied,
        Self::AgentFatal,
        Self::NeedsAnswers,
        Self::IntegrityFailure,
        Self::VerificationFailed,
        Self::MaxLoops,
        Self::MaxRuntime,
        Self::CostBudget,
        Self::UsageLimit,
        Self::UsageWindow,
        Self::SpendLimit,
        Self::Interrupted,
        Self::Delivered,
        Self::CiFailed,
        Self::CiMissing,
        Self::CiTimeout,
        Self::PushRejected,
        Self::ForgeFailed,
        Self::SecretsInCommits,
        Self::CheckCouldNotRun,
        Self::ReviewRejected,
        Self::ReviewBudget,
        Self::AgentCrashed,
    ];

    /// A "done" claim: the run ends because the agent's work looks finished. With
    /// VERIFY_COMMAND set, hank runs the check before it accepts one.
    #[must_use]
    pub fn is_completion(self) -> bool {
        matches!(
            self,
            Self::ProjectComplete | Self::PlanComplete | Self::TestSaturation
        )
    }

    /// The process exit code for this reason.
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            Self::ProjectComplete | Self::PlanComplete | Self::TestSaturation | Self::Delivered => {
                OK
            }
            Self::CircuitOpen
            | Self::PermissionDenied
            | Self::AgentFatal
            | Self::AgentCrashed
            | Self::NeedsAnswers
            | Self::IntegrityFailure
            | Self::VerificationFailed
            | Self::CiFailed
            | Self::CiMissing
            | Self::PushRejected
            | Self::ReviewRejected => HALTED,
            Self::MaxLoops
            | Self::MaxRuntime
            | Self::CostBudget
            | Self::UsageLimit
            | Self::UsageWindow
            | Self::SpendLimit
            | Self::CiTimeout
            | Self::ReviewBudget => LIMIT,
            Self::Interrupted => INTERRUPTED,
            Self::ForgeFailed => ERROR,
            Self::SecretsInCommits | Self::CheckCouldNotRun => ERROR,
        }
    }

    /// The stable string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProjectComplete => "project_complete",
            Self::PlanComplete => "plan_complete",
            Self::TestSaturation => "test_saturation",
            Self::CircuitOpen => "circuit_open",
            Self::PermissionDenied => "permission_denied",
            Self::AgentFatal => "agent_fatal",
            Self::AgentCrashed => "agent_crashed",
            Self::NeedsAnswers => "needs_answers",
            Self::IntegrityFailure => "integrity_failure",
            Self::VerificationFailed => "verification_failed",
            Self::MaxLoops => "max_loops",
            Self::MaxRuntime => "max_runtime",
            Self::CostBudget => "cost_budget",
            Self::UsageLimit => "usage_limit",
            Self::UsageWindow => "usage_window",
            Self::SpendLimit => "spend_limit",
            Self::Interrupted => "interrupted",
            Self::Delivered => "delivered",
            Self::CiFailed => "ci_failed",
            Self::CiMissing => "ci_missing",
            Self::CiTimeout => "ci_timeout",
            Self::PushRejected => "push_rejected",
            Self::ForgeFailed => "forge_failed",
            Self::SecretsInCommits => "secrets_in_commits",
            Self::CheckCouldNotRun => "check_could_not_run",
            Self::ReviewRejected => "review_rejected",
            Self::ReviewBudget => "review_budget",
        }
    }
}

/// What the user can do after a `spend_limit` stop (the final message).
pub const SPEND_LIMIT_MESSAGE: &str = "a spend cap was reached (monthly spend limit or out of usage credits); waiting for a usage window will not lift it: raise the spend limit or buy usage credits (claude.ai settings or /upgrade), wait for the monthly reset, or switch to an API key (ANTHROPIC_API_KEY), then run hank again";

impl std::fmt::Display for ExitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_table() {
        let expected = [
            0, 0, 0, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 130, 0, 2, 2, 3, 2, 1, 1, 1, 2, 3, 2,
        ];
        for (reason, code) in ExitReason::ALL.iter().zip(expected) {
            assert_eq!(reason.code(), code, "{reason}");
        }
    }

    #[test]
    fn spend_limit_is_a_limit_stop_with_advice() {
        assert_eq!(ExitReason::SpendLimit.code(), LIMIT);
        assert_eq!(ExitReason::SpendLimit.as_str(), "spend_limit");
        for what in ["spend limit", "credits", "monthly reset", "API key"] {
            assert!(SPEND_LIMIT_MESSAGE.contains(what), "{what}");
        }
    }

    #[test]
    fn strings_match_serde() {
        for reason in ExitReason::ALL {
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
        }
    }
}
