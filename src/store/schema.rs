//! The formats hank writes under `.hank/`, each defined once: `state.json` ([`State`],
//! internal, versioned) with its call log `state.json.calls` ([`CallRecord`] lines),
//! `status.json` ([`Status`], the public contract of HANK.md §2) and the event stream
//! ([`Event`]: `events.jsonl` and `--json` on stdout). The loop writes them; the
//! monitor, `hank status`, `hank circuit` and `hank reset` read them with these same types,
//! through [`read_lenient`] where a file may come from an older or newer hank.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::analysis::Denial;
use crate::analysis::{Analysis, ErrorKind, Outcome, Tokens};
use crate::exit::ExitReason;
use crate::policy::breaker::{Breaker, BreakerConfig, CircuitState, Transition};
use crate::policy::budget::{BudgetLimits, Ledger, LedgerEntry, SavedWait, WaitReason};
use crate::policy::decide::{self, DecideConfig, LoopRecord};
pub use crate::policy::failover::Agents;
use crate::policy::progress::Progress;
use crate::policy::session;
pub use crate::policy::session::Session;
pub use crate::policy::verify::{CheckResult, VerificationStatus};
use crate::policy::windows::{self, WindowLimits, WindowStatus, Windows};

/// Current `state.json` schema. 2: the call ledger lives in the call log
/// (`state.json.calls`, [`CallRecord`] lines), no longer in `state.json`; a schema 1 file's
/// `ledger` is still read (and moved to the log by the next save).
pub const STATE_SCHEMA: u32 = 2;
/// Current `status.json` and event schema. 2: `status.json` gains `usage_windows`, the
/// `waiting` reason `usage_window`, the exit reason `usage_window`; `agent_finished` gains
/// `plan_items`, `num_turns` and `usage_windows`. Every schema 1 field is unchanged.
pub const STATUS_SCHEMA: u32 = 2;
/// Loop records kept in `state.json`.
pub const HISTORY_LEN: usize = 20;

/// Running totals over every run of this project.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    pub loops: u64,
    pub cost_usd: f64,
    /// The part of `cost_usd` that hank estimated (calls whose cost could not be read, or
    /// priced from tokens).
    #[serde(default, skip_serializing_if = "no_cost")]
    pub estimated_cost_usd: f64,
    pub tokens: Tokens,
}

fn no_cost(v: &f64) -> bool {
    *v <= 0.0
}

/// `state.json`: what hank must remember across restarts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    pub schema_version: u32,
    /// Number of the last loop started (cumulative; names the loop log files).
    pub loop_count: u64,
    /// The call ledger: on disk before every spawn. In memory here; on disk it is the call
    /// log `state.json.calls` (schema 2), never serialized into `state.json` again. Read from
    /// `state.json` only when a schema 1 file carries it.
    #[serde(skip_serializing)]
    pub ledger: Ledger,
    pub breaker: Breaker,
    pub session: Option<Session>,
    /// The last loops, oldest first (bounded).
    pub history: Vec<LoopRecord>,
    pub totals: Totals,
    /// Failed calls in a row (drives the backoff).
    pub consecutive_failures: u32,
    /// The agent's last RECOMMENDATION line (relayed in the next loop's context).
    pub last_recommendation: Option<String>,
    /// Which agent is current, which are limited and until when, their parked sessions and
    /// what each cost ([`crate::policy::failover`]).
    #[serde(skip_serializing_if = "is_default_agents")]
    pub agents: Agents,
    /// Checks run so far (names the `verify-NNNNN.log` files).
    #[serde(skip_serializing_if = "is_zero")]
    pub verify_count: u64,
    /// The last run of VERIFY_COMMAND (a loop's or `hank verify`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_verification: Option<CheckResult>,
    /// The usage-limit, usage-window or backoff wait in progress: a restart resumes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<SavedWait>,
    /// The subscription usage windows seen (latest reading of each).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub windows: Windows,
    /// Startup hangs in a row (FIRST_OUTPUT_TIMEOUT; [`crate::policy::startup`]).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub startup_hangs: u32,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_default_agents(a: &Agents) -> bool {
    *a == Agents::default()
}

impl Default for State {
    fn default() -> Self {
        Self {
            schema_version: STATE_SCHEMA,
            loop_count: 0,
            ledger: Ledger::default(),
            breaker: Breaker::default(),
            session: None,
            history: Vec::new(),
            totals: Totals::default(),
            consecutive_failures: 0,
            last_recommendation: None,
            agents: Agents::default(),
            verify_count: 0,
            last_verification: None,
            wait: None,
            windows: Windows::new(),
            startup_hangs: 0,
        }
    }
}

/// One line of the call log `.hank/state.json.calls`: a call and the tokens it used, as of
/// when the line was written. `{"id":12,"at":"2026-11-22T10:00:00.25Z","tokens":0}`
///
/// The log is append-only: a call is appended before its agent is spawned, and appended again
/// (same `id`, new `tokens`) once its tokens are known. Readers keep the last line of each
/// `id`, ignore a last line without its newline (a write cut short) and any line that does not
/// parse; ids are positive and grow in recording order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    pub id: u64,
    pub at: Timestamp,
    pub tokens: u64,
}

impl CallRecord {
    /// The record of ledger entry `e` under `id`.
    #[must_use]
    pub fn of(id: u64, e: &LedgerEntry) -> Self {
        Self {
            id,
            at: e.at,
            tokens: e.tokens,
        }
    }

    /// The ledger entry it records.
    #[must_use]
    pub fn entry(&self) -> LedgerEntry {
        LedgerEntry {
            at: self.at,
            tokens: self.tokens,
        }
    }

    /// Appends the line, newline included, to `out`.
    pub fn write_line(&self, out: &mut Vec<u8>) {
        // Serializing integers and a timestamp cannot fail; never leave half a line.
        if let Ok(line) = serde_json::to_vec(self) {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
    }

    /// Parses one line (without its newline); `None` when it is not a record.
    #[must_use]
    pub fn parse(line: &[u8]) -> Option<Self> {
        serde_json::from_slice::<Self>(line)
            .ok()
            .filter(|r| r.id > 0)
    }
}

/// `status.json` `state` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    #[default]
    Starting,
    Running,
    Waiting,
    Completed,
    Halted,
    Stopped,
    Failed,
}

/// `status.json` `fix_plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PlanCounts {
    pub done: u32,
    pub total: u32,
}

/// `status.json` `last_loop`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LastLoop {
    #[serde(alias = "loop")]
    pub number: u64,
    pub outcome: Outcome,
    pub error_kind: Option<ErrorKind>,
    pub exit_signal: bool,
    pub status: Option<String>,
    pub work_type: Option<String>,
    pub files_changed: u32,
    pub recommendation: Option<String>,
    pub cost_usd: f64,
    /// `cost_usd` is hank's estimate (the answer did not hold a readable cost).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    pub duration_ms: u64,
}

/// `status.json` (schema_version 1): the public, live status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    pub schema_version: u32,
    pub updated_at: Timestamp,
    pub state: RunState,
    pub loop_count: u64,
    pub calls_in_window: u32,
    pub max_calls_per_hour: u32,
    pub next_call_at: Option<Timestamp>,
    pub tokens_in_window: u64,
    pub max_tokens_per_hour: u64,
    pub wait_reason: Option<WaitReason>,
    pub waiting_until: Option<Timestamp>,
    pub circuit_state: CircuitState,
    pub circuit_reason: String,
    pub session_id: Option<String>,
    pub total_cost_usd: f64,
    /// The part of `total_cost_usd` that hank estimated (absent when none).
    #[serde(default, skip_serializing_if = "no_cost")]
    pub estimated_cost_usd: f64,
    pub total_tokens: Tokens,
    pub fix_plan: PlanCounts,
    pub last_loop: Option<LastLoop>,
    /// Why the run ended (its stable string); `None` while it runs, or when it failed with
    /// an error.
    pub exit_reason: Option<ExitReason>,
    pub exit_code: Option<u8>,
    /// PID of the loop that wrote this file.
    pub pid: u32,
    /// The current agent (profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Agents that may not be called now: name → why and until when.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents_limited: BTreeMap<String, crate::policy::failover::Limited>,
    /// VERIFY_COMMAND and its last results (absent when no check is configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<VerificationStatus>,
    /// The subscription usage windows last reported by the client (schema 2).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usage_windows: BTreeMap<String, WindowStatus>,
    /// The last delivery of this run's work (`hank deliver`): branch, head commit, PR,
    /// checks (as `.hank/delivery.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    /// The agent's questions while the loop waits for an answer (`NEEDS_ANSWERS=wait`,
    /// `wait_reason: needs_answers`); absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<String>,
    /// `REVIEW_AGENT`: the independent reviewer's last round of this run (its verdict and
    /// findings); absent without a reviewer or before its first round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewRound>,
    /// SANDBOX: the agent's confinement as `hank doctor` says it (absent from older writers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// The egress proxy's latest refusals of this run, `host:port at TIME`, newest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress_denied: Vec<String>,
    /// The sandbox's latest refused file accesses of this run (their paths, each once, newest
    /// last): allowed with SANDBOX_WRITE / SANDBOX_READ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox_denied: Vec<String>,
    /// While a call lasts: the client is retrying a failed API call (an overloaded API, …);
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_retry: Option<ApiRetry>,
    /// The run's exit message (its `exit` event's), once it ended with a reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_message: Option<String>,
}

/// The client retrying a failed API call inside hank's call (Claude Code's `api_retry`
/// stream events): in status.json while the call lasts, and the `api_retry` event (once per
/// call, at its first retry).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiRetry {
    /// The client's attempt number.
    pub attempt: u32,
    /// How many retries the client allows, when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// The error as the client names it (`overloaded`, `rate_limit`, `unknown`, …).
    pub error: String,
    /// The HTTP status of the failed request, when the client gives it (529: overloaded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// When the client tries again (when the retry was seen + its delay).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_at: Option<Timestamp>,
    /// When the first retry of this call was seen.
    pub since: Timestamp,
}

impl ApiRetry {
    /// In words, with times as `at` shows them: `the API is overloaded; the client is
    /// retrying, attempt 3 of 10, next at 14:05:12` ([`crate::policy::notify::retry_words`]).
    #[must_use]
    pub fn words(&self, at: impl Fn(Timestamp) -> String) -> String {
        crate::policy::notify::retry_words(&self.retrying(), at)
    }

    /// The rules' view of it.
    #[must_use]
    pub fn retrying(&self) -> crate::policy::notify::Retrying<'_> {
        crate::policy::notify::Retrying {
            attempt: self.attempt,
            max_retries: self.max_retries,
            error: &self.error,
            http_status: self.http_status,
            next_at: self.next_at,
        }
    }
}

impl Default for Status {
    fn default() -> Self {
        Self {
            schema_version: STATUS_SCHEMA,
            updated_at: Timestamp::UNIX_EPOCH,
            state: RunState::default(),
            loop_count: 0,
            calls_in_window: 0,
            max_calls_per_hour: 0,
            next_call_at: None,
            tokens_in_window: 0,
            max_tokens_per_hour: 0,
            wait_reason: None,
            waiting_until: None,
            circuit_state: CircuitState::default(),
            circuit_reason: String::new(),
            session_id: None,
            total_cost_usd: 0.0,
            estimated_cost_usd: 0.0,
            total_tokens: Tokens::default(),
            fix_plan: PlanCounts::default(),
            last_loop: None,
            exit_reason: None,
            exit_code: None,
            pid: 0,
            agent: None,
            agents_limited: BTreeMap::new(),
            verification: None,
            usage_windows: BTreeMap::new(),
            delivery: None,
            questions: Vec::new(),
            review: None,
            sandbox: None,
            egress_denied: Vec::new(),
            sandbox_denied: Vec::new(),
            api_retry: None,
            exit_message: None,
        }
    }
}

/// One line of `events.jsonl` (and of `hank run --json` on stdout):
/// `{"schema_version":2,"type":"…","at":"…",…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub schema_version: u32,
    pub at: Timestamp,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// An event of the current schema at `at`.
    #[must_use]
    pub fn new(at: Timestamp, kind: EventKind) -> Self {
        Self {
            schema_version: STATUS_SCHEMA,
            at,
            kind,
        }
    }

    /// The JSON line (no newline).
    #[must_use]
    pub fn to_line(&self) -> String {
        // Serializing these plain types cannot fail; an empty line would be skipped by readers.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What happened, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// A loop begins: the call is on the ledger and the agent is being spawned.
    LoopStarted {
        #[serde(rename = "loop")]
        number: u64,
        resume: bool,
        context_bytes: u64,
        /// The agent (profile) called.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    /// The agent answered (or failed): the analysis summary.
    AgentFinished(Box<AgentFinished>),
    /// The circuit breaker changed state.
    CircuitChanged {
        from: CircuitState,
        to: CircuitState,
        reason: String,
    },
    /// A wait begins (`rate_limit`, `token_limit`, `usage_limit`, `backoff`).
    Waiting {
        reason: WaitReason,
        until: Timestamp,
    },
    /// The next call goes to another agent (failover, or back to a preferred one).
    AgentSwitched {
        from: String,
        to: String,
        reason: String,
        /// When `from` may be called again (absent: not in this run, or it is not limited).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<Timestamp>,
    },
    /// VERIFY_COMMAND ran (before loop 1, after a loop, before a completion exit).
    Verification(Box<CheckResult>),
    /// Something the user should know.
    Warning { message: String },
    /// The sandbox's egress proxy refused a connection of the agent (`host:port`).
    EgressDenied { host: String },
    /// The confined agent changed something that would run later outside its sandbox, or
    /// that the sandbox's rules come from: `file` (`.git/config`, `.git/hooks/NAME`, `.git`,
    /// `commondir`…), `action` `undone` (hank put it back), `not_undone` or `stopped` (the
    /// run stopped), and what happened in words.
    Security {
        file: String,
        action: String,
        message: String,
    },
    /// The sandbox refused the agent a file access (the path its tool results, error output
    /// or answer named; once per path in a run).
    SandboxDenied { path: String },
    /// The agent crashed: it exited non-zero without a model answer. `message`: the line
    /// that says what went wrong; `tail`: the last lines of its error output; `fix`: what to
    /// try. The same crash twice in a row stops the run (`agent_crashed`).
    AgentCrashed {
        #[serde(rename = "loop")]
        number: u64,
        exit_code: i32,
        message: String,
        tail: Vec<String>,
        fix: String,
    },
    /// A file of the client's configuration (`[sandbox] config`) changed during a call of
    /// `agent`: `change` is `modified`, `created` or `removed`; `undone` whether hank put it
    /// back (`why_not` says why it could not).
    ClientConfigChanged {
        agent: String,
        path: String,
        change: String,
        undone: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why_not: Option<String>,
    },
    /// The client began retrying a failed API call (once per call): the call waits.
    ApiRetry(Box<ApiRetry>),
    /// A `hank ctl` command the loop took (or refused): its journal id, the command as
    /// typed, and the outcome written to the journal (`applied`, `refused: why`).
    Control {
        id: String,
        command: String,
        outcome: String,
    },
    /// `hank fleet`: a task changed state (in the main checkout's `events.jsonl`).
    FleetTask {
        task: String,
        state: crate::policy::fleet::TaskState,
        branch: String,
        message: String,
        /// The workspace's repositories the task changes (issue 51; none: the project).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        repos: Vec<String>,
    },
    /// `hank watch`: what it did with an issue of the tracker (in the checkout's
    /// `events.jsonl`): `claimed`, `taken_over`, `lost` (another watcher claimed it first),
    /// `delivered`, `failed`, `released` (the fleet did not finish it).
    Issue {
        tracker: String,
        issue: crate::policy::tracker::ItemKey,
        url: String,
        action: String,
        message: String,
    },
    /// A delivery step ended (`hank deliver`): the branch, the head commit, the pull request,
    /// the checks' state. The same object as `.hank/delivery.json`.
    Delivery(Box<Delivery>),
    /// A review round of the independent reviewer (`REVIEW_AGENT`) ended: its verdict,
    /// findings and cost.
    Review(Box<ReviewRound>),
    /// The run ended. `exit_reason` is null when it failed with an error (exit 1).
    Exit {
        exit_reason: Option<ExitReason>,
        exit_code: u8,
        message: String,
        /// A completion exit whose check passed (`true`); absent when no check ran.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verified: Option<bool>,
    },
}

pub use crate::policy::review::ReviewRound;

/// The `circuit_changed` event of a breaker transition (the run's and `hank reset circuit`'s).
impl From<&Transition> for EventKind {
    fn from(t: &Transition) -> Self {
        Self::CircuitChanged {
            from: t.from,
            to: t.to,
            reason: t.reason.clone(),
        }
    }
}

pub use crate::policy::deliver::record::{
    DELIVERY_RECORD_SCHEMA, Delivery, DeliveryEvidence, DeliveryStep,
};

/// `.hank/change-set.json`: a change set across a workspace's repositories (issue 51),
/// defined beside the machine that writes it.
pub use crate::policy::deliver::change_set::{
    CHANGE_SET_SCHEMA, ChangeSet, ChangeSetRepo, SetState,
};

/// The `agent_finished` event.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentFinished {
    #[serde(rename = "loop")]
    pub number: u64,
    pub outcome: Outcome,
    pub error_kind: Option<ErrorKind>,
    pub error_message: Option<String>,
    pub exit_signal: bool,
    pub status: Option<String>,
    pub work_type: Option<String>,
    pub tests_status: Option<String>,
    pub files_changed: u32,
    pub plan_items_checked: u32,
    pub cost_usd: f64,
    /// `cost_usd` is hank's estimate (the answer did not hold a readable cost).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    pub tokens: Tokens,
    pub duration_ms: u64,
    pub session_id: Option<String>,
    pub permission_denials: u64,
    pub completion_indicators: Vec<String>,
    pub recommendation: Option<String>,
    /// The agent (profile) that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The fix_plan items this loop ticked (their texts), for the cost receipts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plan_items: Vec<String>,
    /// The client's turn count (API requests) of this call, when it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_turns: Option<u32>,
    /// The usage windows this answer reported.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub usage_windows: BTreeMap<String, WindowStatus>,
}

/// How the call ended, besides its answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ended {
    /// No output within FIRST_OUTPUT_TIMEOUT.
    pub startup_hang: bool,
    /// hank stopped the agent or the user interrupted the run.
    pub interrupted: bool,
    /// With VERIFY_EVERY_LOOP: the loop turned a passing check red.
    pub regressed: bool,
}

/// One call as the loop saw it: the facts the fold, the judgment and the report take.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub number: u64,
    /// When the call (and the per-loop check) ended.
    pub now: Timestamp,
    /// The session the call resumed.
    pub resumed: Option<&'a str>,
    /// The agent called (its counters, the event).
    pub agent: &'a str,
    pub analysis: &'a Analysis,
    pub progress: &'a Progress,
    pub duration: std::time::Duration,
    pub ended: Ended,
}

/// One loop's results, to fold into [`State`].
#[derive(Debug, Clone, Copy)]
pub struct Fold<'a> {
    /// The call (its `ended.regressed`: the loop turned the project's passing check red, no
    /// progress for the breaker; `ended.interrupted`: hank itself stopped the agent, the
    /// answer says nothing about the agent and the breaker does not count it — an
    /// `interrupted` answer hank did not cause is a failed call like any other).
    pub call: &'a Call<'a>,
    pub decide: &'a DecideConfig,
    pub breaker: &'a BreakerConfig,
    /// A startup hang retried at once ([`crate::policy::startup`]): the breaker does not
    /// count it (totals, ledger and history do).
    pub free_retry: bool,
}

/// What folding a loop found, for the loop to report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Folded {
    /// Denials that count (relayed to the agent; in a row they stop the run).
    pub denied: Vec<Denial>,
    /// Denied compound commands whose base command is allowed (warnings only).
    pub denial_warnings: Vec<Denial>,
    /// The breaker changed state.
    pub transition: Option<Transition>,
}

impl State {
    /// A call starts at `now`: counted, and on the rolling-hour ledger before the agent
    /// exists (no crash of hank, kill -9 included, can under-count it once saved). Returns
    /// its loop number.
    pub fn start_call(&mut self, now: Timestamp) -> u64 {
        self.loop_count += 1;
        self.totals.loops += 1;
        self.ledger.record_call(now);
        self.loop_count
    }

    /// Folds one loop into the state (pure): the ledger's tokens, the totals, the session,
    /// the last recommendation, the bounded history and the breaker.
    pub fn fold(&mut self, f: &Fold<'_>) -> Folded {
        let (c, a) = (f.call, f.call.analysis);
        windows::observe(&mut self.windows, &a.usage_windows, c.now);
        self.ledger.add_tokens_to_last(a.tokens.sum());
        self.totals.cost_usd += a.cost_usd;
        if a.cost_estimated {
            self.totals.estimated_cost_usd += a.cost_usd;
        }
        self.totals.tokens.add(&a.tokens);
        self.session = session::after_answer(self.session.as_ref(), c.resumed, a, c.now);
        if let Some(rec) = a.recommendation() {
            self.last_recommendation = Some(rec.to_string());
        }
        let record = decide::record_loop(c.number, c.now, a, c.progress, f.decide);
        let folded = Folded {
            denied: record.denied.clone(),
            denial_warnings: record.denial_warnings.clone(),
            transition: None,
        };
        self.history.push(record);
        let excess = self.history.len().saturating_sub(HISTORY_LEN);
        self.history.drain(..excess);
        if c.ended.interrupted || f.free_retry {
            return folded;
        }
        // A loop that turned the project's passing check red made no progress, whatever it
        // changed (VERIFY_EVERY_LOOP).
        let none = Progress::default();
        let progress = if c.ended.regressed { &none } else { c.progress };
        Folded {
            transition: self.breaker.record(a, progress, c.now, f.breaker),
            ..folded
        }
    }
}

impl State {
    /// Clamps every timestamp of the past that lies in the future (the clock went back, or
    /// the file was edited) to `now`: a breaker "opened" tomorrow would never cool down, a
    /// session "used" tomorrow would never expire. Returns what was clamped, for a warning.
    /// (The call log's times are clamped by the store.)
    pub fn clamp_future(&mut self, now: Timestamp) -> Vec<String> {
        let mut out = Vec::new();
        let mut clamp = |t: &mut Timestamp, what: &str| {
            if *t > now {
                *t = now;
                if !out.iter().any(|o: &String| o == what) {
                    out.push(what.to_owned());
                }
            }
        };
        if let Some(t) = self.breaker.opened_at.as_mut() {
            clamp(t, "the circuit breaker's opening time");
        }
        for tr in &mut self.breaker.history {
            clamp(&mut tr.at, "the circuit breaker's history");
        }
        if let Some(s) = self.session.as_mut() {
            clamp(&mut s.started_at, "the session's times");
            clamp(&mut s.last_used_at, "the session's times");
        }
        for s in self.agents.sessions.values_mut() {
            clamp(&mut s.started_at, "the parked sessions' times");
            clamp(&mut s.last_used_at, "the parked sessions' times");
        }
        for r in &mut self.history {
            clamp(&mut r.at, "the loop history");
        }
        for l in self.agents.limited.values_mut() {
            clamp(&mut l.since, "the agent limits' start times");
        }
        for e in &mut self.ledger.entries {
            clamp(&mut e.at, "the call ledger");
        }
        out
    }
}

/// What `status.json` is made of besides the stored state.
#[derive(Debug, Clone)]
pub struct StatusParts<'a> {
    pub state: &'a State,
    pub run_state: RunState,
    pub plan: PlanCounts,
    pub last_loop: Option<&'a LastLoop>,
    pub wait: Option<(WaitReason, Timestamp)>,
    pub limits: &'a BudgetLimits,
    /// MAX_WINDOW_PERCENT (marked on each window in `usage_windows`).
    pub window_limits: &'a WindowLimits,
    pub exit: Option<ExitReason>,
    pub now: Timestamp,
    pub pid: u32,
    /// VERIFY_COMMAND's state (`None`: none configured).
    pub verification: Option<VerificationStatus>,
    /// The delivery's last step.
    pub delivery: Option<&'a Delivery>,
    /// The last loop's questions (shown while the run waits for an answer).
    pub questions: &'a [String],
    /// The reviewer's last round (`REVIEW_AGENT`).
    pub review: Option<&'a ReviewRound>,
}

impl Status {
    /// The live status of a run (pure). What a state implies: the questions only while the
    /// run waits for an answer, no end time for a pause, exit code 1 for a failed run.
    #[must_use]
    pub fn of(p: &StatusParts<'_>) -> Self {
        let st = p.state;
        Self {
            schema_version: STATUS_SCHEMA,
            updated_at: p.now,
            state: p.run_state,
            loop_count: st.loop_count,
            calls_in_window: st.ledger.calls_in_window(p.now),
            max_calls_per_hour: p.limits.max_calls_per_hour,
            next_call_at: st.ledger.next_free_at(p.now, p.limits),
            tokens_in_window: st.ledger.tokens_in_window(p.now),
            max_tokens_per_hour: p.limits.max_tokens_per_hour,
            wait_reason: p.wait.map(|w| w.0),
            // A pause has no end time.
            waiting_until: p.wait.filter(|w| w.0 != WaitReason::Paused).map(|w| w.1),
            circuit_state: st.breaker.state,
            circuit_reason: st.breaker.reason.clone(),
            session_id: st.session.as_ref().map(|s| s.id.clone()),
            total_cost_usd: st.totals.cost_usd,
            estimated_cost_usd: st.totals.estimated_cost_usd,
            total_tokens: st.totals.tokens,
            fix_plan: p.plan,
            last_loop: p.last_loop.cloned(),
            exit_reason: p.exit,
            exit_code: (p.exit.map(ExitReason::code))
                .or((p.run_state == RunState::Failed).then_some(crate::exit::ERROR)),
            pid: p.pid,
            agent: Some(
                st.agents
                    .current_or(crate::policy::failover::DEFAULT_AGENT)
                    .to_owned(),
            ),
            agents_limited: st.agents.limited.clone(),
            verification: p.verification.clone(),
            usage_windows: windows::status_windows(&st.windows, p.window_limits, p.now),
            delivery: p.delivery.cloned(),
            questions: match p.wait {
                Some((WaitReason::NeedsAnswers, _)) => p.questions.to_vec(),
                _ => Vec::new(),
            },
            review: p.review.cloned(),
            // The effects that know the run's sandbox fill these in (`effects::agent`).
            sandbox: None,
            egress_denied: Vec::new(),
            sandbox_denied: Vec::new(),
            api_retry: None,
            exit_message: None,
        }
    }
}

/// The JSON name of a unit enum value (`WorkStatus::InProgress` → `IN_PROGRESS`).
fn json_name<T: Serialize>(v: &T) -> Option<String> {
    serde_json::to_value(v)
        .ok()
        .and_then(|x| x.as_str().map(ToString::to_string))
}

impl AgentFinished {
    /// This loop as the receipts count it (finished at `at`).
    #[must_use]
    pub fn receipt(&self, at: Timestamp) -> crate::policy::receipts::LoopCost {
        crate::policy::receipts::LoopCost {
            number: self.number,
            at: Some(at),
            cost_usd: self.cost_usd,
            cost_estimated: self.cost_estimated,
            tokens: self.tokens.sum(),
            duration_ms: self.duration_ms,
            calls: self.num_turns,
            items: self.plan_items.clone(),
            recommendation: self.recommendation.clone(),
            windows: self.usage_windows.clone(),
        }
    }

    /// The event for loop `number` from its analysis and progress.
    #[must_use]
    pub fn of(number: u64, a: &Analysis, p: &Progress, duration: std::time::Duration) -> Self {
        let block = a.status.as_ref();
        Self {
            number,
            outcome: a.outcome,
            error_kind: a.error_kind(),
            error_message: a.error.as_ref().map(|e| e.message.clone()),
            exit_signal: a.exit_signal(),
            status: block.and_then(|s| s.status).and_then(|v| json_name(&v)),
            work_type: block.and_then(|s| s.work_type).and_then(|v| json_name(&v)),
            tests_status: block
                .and_then(|s| s.tests_status)
                .and_then(|v| json_name(&v)),
            files_changed: p.files_changed,
            plan_items_checked: p.plan_items_checked,
            cost_usd: a.cost_usd,
            cost_estimated: a.cost_estimated,
            tokens: a.tokens,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            session_id: a.session_id.clone(),
            permission_denials: a.permission_denials.len() as u64,
            completion_indicators: a.completion_indicators.clone(),
            recommendation: a.recommendation().map(ToString::to_string),
            agent: None,
            plan_items: p.checked_items.clone(),
            num_turns: a.num_turns,
            usage_windows: a
                .usage_windows
                .iter()
                .map(|w| {
                    (
                        w.name.clone(),
                        WindowStatus {
                            utilization: w.fields.utilization,
                            resets_at: w.fields.resets_at,
                            status: w.fields.status.clone(),
                            limit_percent: None,
                        },
                    )
                })
                .collect(),
        }
    }
}

impl LastLoop {
    /// `status.json`'s `last_loop`, from the loop's event.
    #[must_use]
    pub fn of(f: &AgentFinished) -> Self {
        Self {
            number: f.number,
            outcome: f.outcome,
            error_kind: f.error_kind,
            exit_signal: f.exit_signal,
            status: f.status.clone(),
            work_type: f.work_type.clone(),
            files_changed: f.files_changed,
            recommendation: f.recommendation.clone(),
            cost_usd: f.cost_usd,
            cost_estimated: f.cost_estimated,
            duration_ms: f.duration_ms,
        }
    }
}

/// `3.0` → `3`, recursively: a float-happy writer's whole numbers still fill integer fields
/// (a float field accepts an integer just as well).
fn integral_floats_to_integers(v: &mut Value) {
    match v {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64().filter(|f| f.is_finite() && f.fract() == 0.0) {
                // Whole numbers within i64/u64 range only; others stay floats.
                #[allow(clippy::cast_possible_truncation)]
                if f >= 0.0 && f <= u64::MAX as f64 {
                    *v = Value::from(f as u64);
                } else if f < 0.0 && f >= i64::MIN as f64 {
                    *v = Value::from(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_to_integers),
        _ => {}
    }
}

/// A schema value read tolerantly, with the names of the fields that were really there.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Lenient<T> {
    pub value: T,
    /// Top-level fields present in the input with a value of the right type.
    pub present: BTreeSet<String>,
    /// The input object as written (for what this hank cannot type: a newer writer's value).
    pub raw: Map<String, Value>,
}

impl<T> Lenient<T> {
    /// The field was in the input, readable.
    #[must_use]
    pub fn has(&self, field: &str) -> bool {
        self.present.contains(field)
    }

    /// A field's value (`get` of the typed value) when the input had it, readable.
    #[must_use]
    pub fn get<U>(&self, field: &str, get: impl FnOnce(&T) -> U) -> Option<U> {
        self.has(field).then(|| get(&self.value))
    }

    /// A field as its JSON string (an enum's stable name, a string), read through the type
    /// when it could be; else the string as written (a value a newer hank writes, e.g. a
    /// `state` this hank does not know). `None` when absent, null or not a string.
    #[must_use]
    pub fn text<U: Serialize>(&self, field: &str, get: impl FnOnce(&T) -> U) -> Option<String> {
        self.get(field, get)
            .and_then(|v| serde_json::to_value(v).ok())
            .and_then(|v| v.as_str().map(ToString::to_string))
            .or_else(|| {
                self.raw
                    .get(field)
                    .and_then(Value::as_str)
                    .map(ToString::to_string)
            })
    }
}

/// Serialized as what was read: each field of the input, through the type where it was
/// readable, as written where not (`hank monitor --json`).
impl<T: Serialize> Serialize for Lenient<T> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let typed = serde_json::to_value(&self.value).ok();
        let mut out = self.raw.clone();
        for (k, v) in &mut out {
            if self.has(k)
                && let Some(x) = typed.as_ref().and_then(|t| t.get(k))
            {
                *v = x.clone();
            }
        }
        out.serialize(ser)
    }
}

/// Reads a JSON object as `T` field by field: a field that is missing, `null` or of the wrong
/// type keeps `T`'s default, unknown fields are ignored, and [`Lenient::present`] says which
/// fields were read. For files that an older or newer hank may have written (the monitor and
/// `hank status` show what they can). `None` when `v` is not an object.
#[must_use]
pub fn read_lenient<T>(v: &Value) -> Option<Lenient<T>>
where
    T: DeserializeOwned + Serialize + Default,
{
    let mut v = v.clone();
    integral_floats_to_integers(&mut v);
    let v = &v;
    let input = v.as_object()?;
    if let Ok(value) = serde_json::from_value::<T>(v.clone()) {
        let present = input
            .iter()
            .filter(|(_, x)| !x.is_null())
            .map(|(k, _)| k.clone())
            .collect();
        return Some(Lenient {
            value,
            present,
            raw: input.clone(),
        });
    }
    let Ok(Value::Object(mut merged)) = serde_json::to_value(T::default()) else {
        return None;
    };
    // The fields a default value serializes, then the input's other keys: a field skipped
    // when empty (`skip_serializing_if`) is one when the value read back serializes it.
    let known: BTreeSet<String> = merged.keys().cloned().collect();
    let fields: Vec<String> = known
        .iter()
        .cloned()
        .chain(input.keys().filter(|k| !known.contains(*k)).cloned())
        .collect();
    let mut present = BTreeSet::new();
    for key in fields {
        let Some(candidate) = input.get(&key).filter(|x| !x.is_null()) else {
            continue;
        };
        let mut trial: Map<String, Value> = merged.clone();
        trial.insert(key.clone(), candidate.clone());
        let Ok(read) = serde_json::from_value::<T>(Value::Object(trial.clone())) else {
            continue;
        };
        let is_field = known.contains(&key)
            || serde_json::to_value(&read).is_ok_and(|v| v.get(&key).is_some());
        if is_field {
            merged = trial;
            present.insert(key);
        }
    }
    let value = serde_json::from_value::<T>(Value::Object(merged)).ok()?;
    Some(Lenient {
        value,
        present,
        raw: input.clone(),
    })
}

/// Reads `status.json` text with its own definition, leniently ([`read_lenient`]: a missing
/// or mistyped field is absent, not an error): the one reader of the file (`hank status`,
/// the monitor). `Err` is a one-line note when nothing usable is in it; `Ok` may carry a note
/// too (the schema version differs).
pub fn read_status(text: &str) -> Result<(Lenient<Status>, Option<String>), String> {
    if text.trim().is_empty() {
        return Err("status.json is empty (being written?)".to_string());
    }
    let raw: Value = serde_json::from_str(text)
        .map_err(|e| format!("status.json is not valid JSON (half-written?): {e}"))?;
    let status = read_lenient::<Status>(&raw)
        .ok_or_else(|| "status.json is not a JSON object".to_string())?;
    let note = match status.get("schema_version", |s| s.schema_version) {
        // Schema 1 is schema 2 without its additions.
        Some(1..=STATUS_SCHEMA) => None,
        Some(n) => Some(format!(
            "status.json has schema_version {n} (this hank knows {STATUS_SCHEMA}); \
             showing the fields it recognizes"
        )),
        None => Some("status.json has no schema_version (older hank?)".to_string()),
    };
    Ok((status, note))
}

/// One line of `events.jsonl`, read tolerantly: the one reader of the event stream (the
/// monitor, `hank status`, `hank report`). [`EventLine::event`] is the line as this hank's
/// [`Event`] when it reads as one; the object as written is kept for what it cannot type (a
/// newer writer's event, a field of another type). Serialized as the object as written.
#[derive(Debug, Clone, PartialEq)]
pub struct EventLine {
    /// The typed event, when the line is one this hank reads.
    pub event: Option<Event>,
    /// The object as written (`type`, `at` and the event's fields).
    pub raw: Map<String, Value>,
}

impl Serialize for EventLine {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(ser)
    }
}

impl EventLine {
    /// Reads one line; `None` when it is not a JSON object with a string `type` (a
    /// half-written last line, a cut first line, anything else).
    #[must_use]
    pub fn parse(line: &[u8]) -> Option<Self> {
        let raw: Value = serde_json::from_slice(line.trim_ascii()).ok()?;
        let event = serde_json::from_value::<Event>(raw.clone()).ok();
        match raw {
            Value::Object(raw) if raw.get("type").is_some_and(Value::is_string) => {
                Some(Self { event, raw })
            }
            _ => None,
        }
    }

    /// Every event line of a tail of `events.jsonl`, in order.
    #[must_use]
    pub fn parse_all(tail: &str) -> Vec<Self> {
        tail.lines()
            .filter_map(|l| Self::parse(l.as_bytes()))
            .collect()
    }

    /// The `type` (`loop_started`, `agent_finished`, …), as written.
    #[must_use]
    pub fn kind(&self) -> &str {
        self.str("type").unwrap_or_default()
    }

    /// When it happened, when readable.
    #[must_use]
    pub fn at(&self) -> Option<Timestamp> {
        self.event
            .as_ref()
            .map(|e| e.at)
            .or_else(|| self.time("at"))
    }

    /// A string field, as written.
    #[must_use]
    pub fn str(&self, key: &str) -> Option<&str> {
        self.raw.get(key).and_then(Value::as_str)
    }

    /// An unsigned integer field, as written.
    #[must_use]
    pub fn u64(&self, key: &str) -> Option<u64> {
        self.raw.get(key).and_then(Value::as_u64)
    }

    /// A number field, as written.
    #[must_use]
    pub fn f64(&self, key: &str) -> Option<f64> {
        self.raw.get(key).and_then(Value::as_f64)
    }

    /// A boolean field, as written.
    #[must_use]
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.raw.get(key).and_then(Value::as_bool)
    }

    /// A timestamp field.
    #[must_use]
    pub fn time(&self, key: &str) -> Option<Timestamp> {
        self.str(key).and_then(|s| s.parse().ok())
    }

    /// An `agent_finished` line as [`AgentFinished`], field by field ([`read_lenient`]: a
    /// field of another type is absent, the rest is read).
    #[must_use]
    pub fn finished(&self) -> Option<Lenient<AgentFinished>> {
        (self.kind() == "agent_finished")
            .then(|| read_lenient(&Value::Object(self.raw.clone())))
            .flatten()
    }

    /// The line's fields as `status.json`'s `last_loop` ([`LastLoop`], field by field).
    #[must_use]
    pub fn as_last_loop(&self) -> Option<Lenient<LastLoop>> {
        read_lenient(&Value::Object(self.raw.clone()))
    }
}

/// A `usage_windows` object (`status.json`, `agent_finished`), window by window: one that
/// does not read as a [`WindowStatus`] is left out, the others are kept.
#[must_use]
pub fn read_windows(v: Option<&Value>) -> BTreeMap<String, WindowStatus> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(name, w)| {
                    read_lenient::<WindowStatus>(w).map(|w| (name.clone(), w.value))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// An `agent_finished` event ([`AgentFinished`], read field by field: a field of another
/// type is absent, the rest is read) as the receipts need it (`hank report`, the PR body).
pub fn loop_cost(e: &EventLine, f: &Lenient<AgentFinished>) -> crate::policy::receipts::LoopCost {
    let tokens = e
        .raw
        .get("tokens")
        .and_then(read_lenient::<crate::analysis::Tokens>)
        .map(|t| t.value.sum())
        .unwrap_or(0);
    crate::policy::receipts::LoopCost {
        number: f.get("loop", |f| f.number).unwrap_or(0),
        at: e.at(),
        cost_usd: f
            .get("cost_usd", |f| f.cost_usd)
            .filter(|c| c.is_finite() && *c >= 0.0)
            .unwrap_or(0.0),
        cost_estimated: f
            .get("cost_estimated", |f| f.cost_estimated)
            .unwrap_or(false),
        tokens,
        duration_ms: f.get("duration_ms", |f| f.duration_ms).unwrap_or(0),
        calls: f.get("num_turns", |f| f.num_turns).flatten(),
        items: f
            .get("plan_items", |f| f.plan_items.clone())
            .unwrap_or_default(),
        recommendation: f
            .get("recommendation", |f| f.recommendation.clone())
            .flatten(),
        windows: read_windows(e.raw.get("usage_windows")),
    }
}

/// `breaker.history` of `state.json` text, each transition read as the breaker writes it;
/// one that does not read is left out, anything unexpected is an empty history.
#[must_use]
pub fn read_breaker_history(state: &str) -> Vec<Transition> {
    let Ok(v) = serde_json::from_str::<Value>(state) else {
        return Vec::new();
    };
    v.pointer("/breaker/history")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|t| serde_json::from_value::<Transition>(t.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Current schema of the per-user configuration approval file ([`ConfigApproval`]).
pub const CONFIG_APPROVAL_SCHEMA: u32 = 1;

/// What hank's configuration in a project was at one moment: `.hankrc` key by key and every
/// `.hank/agents/*.toml`. Kept outside the project (the per-user state directory).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfigFingerprint {
    /// `.hankrc`'s keys and values (the value of a secret-named key is kept as
    /// `hash:<hex>`); `None` when there is no `.hankrc`.
    pub hankrc: Option<BTreeMap<String, String>>,
    /// `hash:<hex>` of a `.hankrc` that does not parse (or cannot be read), else `None`.
    pub hankrc_unparsed: Option<String>,
    /// `.hank/agents/NAME.toml` → `hash:<hex>` of its bytes (or `unreadable: …`).
    pub profiles: BTreeMap<String, String>,
    /// What git runs from the repository: `.git/hooks/NAME` → `hash:<hex>` (`*.sample`
    /// left out), `git config KEY` → value for every key of the repository's configuration
    /// (but a branch's upstream naming a configured remote), `.gitattributes` and each file
    /// of `.git/info/` → `hash:<hex>`; `git config in FILE` → `unreadable: …` or
    /// `incomplete: …` (hank was interrupted: no evidence of a change). Empty outside a
    /// repository (and in files written before it existed).
    pub git: BTreeMap<String, String>,
}

/// A `hank run` in progress: who, and the configuration it started with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRun {
    pub pid: u32,
    /// The process's start time (`/proc/PID/stat` field 22), so a recycled pid is not taken
    /// for the run.
    pub pid_start: u64,
    pub started_at: String,
    pub fingerprint: ConfigFingerprint,
}

/// Changes made while a run was in progress, waiting for the user's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigPending {
    /// When hank found them (the end of the run, or the next start after a kill -9).
    pub found_at: String,
    /// The configuration as last approved (the run's start).
    pub approved: ConfigFingerprint,
}

/// `config-approval.json` in the project's per-user folder ([`crate::store::userdir`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfigApproval {
    pub schema_version: u32,
    pub run: Option<ConfigRun>,
    pub pending: Option<ConfigPending>,
}

impl Default for ConfigApproval {
    fn default() -> Self {
        Self {
            schema_version: CONFIG_APPROVAL_SCHEMA,
            run: None,
            pending: None,
        }
    }
}

/// `project.json` in a project's per-user folder ([`crate::store::userdir`]): which project
/// the folder is for (its canonical path), written the first time hank keeps something about
/// it there. `hank serve` lists the user's projects from these records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectRecord {
    pub schema_version: u32,
    /// The project's canonical path.
    pub path: std::path::PathBuf,
}

/// `schema_version` of [`ProjectRecord`].
pub const PROJECT_RECORD_SCHEMA: u32 = 1;

/// Where a `hank ctl` command came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlSource {
    /// `hank ctl …` on this machine.
    Local,
    /// A signed message read from `CONTROL_TOPIC` by `hank ctl poll`.
    Remote,
}

/// One line of `.hank/control.jsonl`, the append-only command journal: a command, or the
/// loop's acknowledgement of one (by id). A command without an acknowledgement is pending;
/// one with is never applied again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlEntry {
    Command {
        id: String,
        at: Timestamp,
        source: ControlSource,
        command: crate::policy::control::Command,
        /// `hank ctl --task NAME`: for that task of the running fleet only (absent: the
        /// loop, or every running task of the fleet).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The loop it was given to (its pid, from the project's lock): a run that starts
        /// finds it pending from another run and expires it. Absent: for the next run that
        /// takes it (a fleet's forward to a task about to start, a remote command).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run: Option<u32>,
    },
    Ack {
        id: String,
        at: Timestamp,
        /// `applied`, or why not (`refused: …`).
        outcome: String,
    },
}

/// `control-remote.json` in the per-user directory (where the agent cannot write): the
/// nonces of accepted remote commands (with their signed times, pruned once stale) and the
/// id of the last ntfy message read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RemoteControlState {
    /// ntfy's id of the last message read (`since=` of the next poll).
    pub since: Option<String>,
    /// Nonce → its signed time (Unix seconds).
    pub nonces: BTreeMap<String, i64>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What a run state implies in status.json: the questions only while the run waits for
    /// an answer, no end time for a pause, exit code 1 for a failed run, the exit's own code.
    #[test]
    fn a_delivery_waiting_for_ci_shows_its_countdown() {
        let due: Timestamp = "2026-11-24T10:30:00Z".parse().unwrap();
        let mut d = Delivery {
            mode: "pr".into(),
            branch: "hank/main".into(),
            base: "main".into(),
            pr_number: Some(3),
            checks: "pending".into(),
            ..Delivery::default()
        };
        assert_eq!(d.line(), "PR #3 hank/main → main: checks pending");
        let table = [
            (
                0,
                "waiting for CI until 2026-11-24T10:30:00Z: no check has appeared yet",
            ),
            (
                1,
                "waiting for CI until 2026-11-24T10:30:00Z: 1 check pending",
            ),
            (
                3,
                "waiting for CI until 2026-11-24T10:30:00Z: 3 checks pending",
            ),
        ];
        for (pending, want) in table {
            d.checks_due = Some(due);
            d.checks_pending = Some(pending);
            assert_eq!(d.line(), format!("PR #3 hank/main → main: {want}"));
        }
    }

    #[test]
    fn which_status_fields_a_state_implies() {
        let now: Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
        let (state, limits) = (State::default(), BudgetLimits::default());
        let (windows, questions) = (WindowLimits::default(), ["which database?".to_owned()]);
        let answer = Some((WaitReason::NeedsAnswers, now));
        let usage = Some((WaitReason::UsageLimit, now));
        let paused = Some((WaitReason::Paused, now));
        let done = Some(ExitReason::PlanComplete);
        // (run state, wait, exit) → (questions shown, waiting_until, exit_code).
        let table = [
            (RunState::Waiting, answer, None, 1, Some(now), None),
            (RunState::Waiting, usage, None, 0, Some(now), None),
            (RunState::Waiting, paused, None, 0, None, None),
            (RunState::Running, None, None, 0, None, None),
            (RunState::Failed, None, None, 0, None, Some(1)),
            (RunState::Completed, None, done, 0, None, Some(0)),
        ];
        for (run_state, wait, exit, shown, until, code) in table {
            let status = Status::of(&StatusParts {
                state: &state,
                run_state,
                plan: PlanCounts::default(),
                last_loop: None,
                wait,
                limits: &limits,
                window_limits: &windows,
                exit,
                now,
                pid: 7,
                verification: None,
                delivery: None,
                questions: &questions,
                review: None,
            });
            let what = format!("{run_state:?} {wait:?} {exit:?}");
            assert_eq!(status.questions.len(), shown, "{what}");
            assert_eq!(status.waiting_until, until, "{what}");
            assert_eq!(status.exit_code, code, "{what}");
            assert_eq!(status.wait_reason, wait.map(|w| w.0), "{what}");
        }
    }

    #[test]
    fn events_serialize_to_the_documented_lines() {
        let at: Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
        let cases = [
            (
                EventKind::LoopStarted {
                    number: 3,
                    resume: true,
                    context_bytes: 210,
                    agent: None,
                },
                json!({"schema_version":2,"at":"2026-11-24T10:00:00Z","type":"loop_started","loop":3,"resume":true,"context_bytes":210}),
            ),
            (
                EventKind::Waiting {
                    reason: WaitReason::UsageLimit,
                    until: at,
                },
                json!({"schema_version":2,"at":"2026-11-24T10:00:00Z","type":"waiting","reason":"usage_limit","until":"2026-11-24T10:00:00Z"}),
            ),
            (
                EventKind::Exit {
                    exit_reason: None,
                    exit_code: 1,
                    message: "boom".into(),
                    verified: None,
                },
                json!({"schema_version":2,"at":"2026-11-24T10:00:00Z","type":"exit","exit_reason":null,"exit_code":1,"message":"boom"}),
            ),
            (
                EventKind::CircuitChanged {
                    from: CircuitState::Open,
                    to: CircuitState::Closed,
                    reason: "manual".into(),
                },
                json!({"schema_version":2,"at":"2026-11-24T10:00:00Z","type":"circuit_changed","from":"OPEN","to":"CLOSED","reason":"manual"}),
            ),
        ];
        for (kind, want) in cases {
            let e = Event::new(at, kind);
            let line = e.to_line();
            let got: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(got, want);
            let back: Event = serde_json::from_str(&line).unwrap();
            assert_eq!(back, e);
        }
        let finished = Event::new(at, EventKind::AgentFinished(Box::default()));
        let v: Value = serde_json::from_str(&finished.to_line()).unwrap();
        assert_eq!(v["type"], "agent_finished");
        assert_eq!(v["loop"], 0);
    }

    /// `exit_reason` is typed, and written as the same stable strings as before, in
    /// `status.json` and in the `exit` event; a reason a newer hank writes reads as absent.
    #[test]
    fn exit_reasons_are_typed_and_written_as_their_stable_strings() {
        let at: Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
        for reason in ExitReason::ALL {
            let status = Status {
                exit_reason: Some(reason),
                exit_code: Some(reason.code()),
                ..Status::default()
            };
            let v = serde_json::to_value(&status).unwrap();
            assert_eq!(v["exit_reason"], reason.as_str());
            assert_eq!(serde_json::from_value::<Status>(v).unwrap(), status);
            let line = Event::new(
                at,
                EventKind::Exit {
                    exit_reason: Some(reason),
                    exit_code: reason.code(),
                    message: "m".into(),
                    verified: None,
                },
            )
            .to_line();
            let v: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["exit_reason"], reason.as_str(), "{line}");
        }
        let newer = json!({"schema_version": 2, "state": "stopped", "exit_reason": "tea_time"});
        let s = read_lenient::<Status>(&newer).unwrap();
        assert!(!s.has("exit_reason"));
        assert_eq!(s.value.exit_reason, None);
        assert_eq!(s.value.state, RunState::Stopped);
    }

    /// A field a default value does not serialize (`skip_serializing_if`) is still read
    /// when another field is broken; an unknown key is not taken for a field.
    #[test]
    fn lenient_reading_reads_fields_skipped_when_empty() {
        let v = json!({"loop": 3, "cost_usd": "broken", "plan_items": ["b", "a"],
                       "num_turns": 4, "no_such_field": 1});
        let f = read_lenient::<AgentFinished>(&v).unwrap();
        assert_eq!(f.value.plan_items, ["b", "a"]);
        assert_eq!(f.value.num_turns, Some(4));
        assert_eq!(f.value.number, 3);
        assert!(f.has("plan_items") && f.has("num_turns") && f.has("loop"));
        assert!(!f.has("cost_usd") && !f.has("no_such_field"));
        let st = read_lenient::<Status>(&json!({"loop_count": "x", "agent": "codex"})).unwrap();
        assert_eq!(st.value.agent.as_deref(), Some("codex"));
        assert!(st.has("agent") && !st.has("loop_count"));
    }

    #[test]
    fn lenient_reading_keeps_what_it_can() {
        let v = json!({
            "schema_version": 2, "state": "running", "loop_count": "seven",
            "total_cost_usd": 1.5, "future_field": {"x": 1}, "circuit_state": "PURPLE",
            "updated_at": "2026-11-24T10:00:00Z"
        });
        let s = read_lenient::<Status>(&v).unwrap();
        assert_eq!(s.value.schema_version, 2);
        assert_eq!(s.value.state, RunState::Running);
        assert!(s.has("state") && s.has("total_cost_usd") && s.has("updated_at"));
        assert!(!s.has("loop_count"), "a wrong type reads as absent");
        assert!(!s.has("circuit_state"), "an unknown value reads as absent");
        assert!(!s.has("future_field"));
        assert_eq!(s.value.loop_count, 0);
        assert!(read_lenient::<Status>(&json!([1, 2])).is_none());
        let full =
            read_lenient::<Status>(&serde_json::to_value(Status::default()).unwrap()).unwrap();
        assert!(full.has("state") && full.has("pid"));
    }

    #[test]
    fn fold_updates_totals_session_history_and_breaker() {
        use crate::analysis::{Analysis, Outcome, Tokens};
        use crate::policy::breaker::BreakerConfig;
        use crate::policy::decide::DecideConfig;
        use crate::policy::progress::Progress;

        let mut state = State::default();
        let t0: Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
        let answer = Analysis {
            outcome: Outcome::Success,
            session_id: Some("s-1".into()),
            cost_usd: 0.5,
            tokens: Tokens {
                input: 10,
                output: 5,
                ..Tokens::default()
            },
            ..Analysis::default()
        };
        let idle = Progress::default();
        let (dcfg, bcfg) = (DecideConfig::default(), BreakerConfig::default());
        let mut transitions = 0;
        for n in 1..=(HISTORY_LEN as u64 + 5) {
            state.ledger.record_call(t0);
            let call = Call {
                number: n,
                now: t0,
                resumed: None,
                agent: "claude",
                analysis: &answer,
                progress: &idle,
                duration: std::time::Duration::ZERO,
                ended: Ended::default(),
            };
            let folded = state.fold(&Fold {
                call: &call,
                decide: &dcfg,
                breaker: &bcfg,
                free_retry: false,
            });
            transitions += usize::from(folded.transition.is_some());
        }
        assert_eq!(state.history.len(), HISTORY_LEN, "history is bounded");
        assert_eq!(
            state.history.last().map(|r| r.number),
            Some(HISTORY_LEN as u64 + 5)
        );
        assert!((state.totals.cost_usd - 12.5).abs() < 1e-9);
        assert_eq!(state.totals.tokens.input, 250);
        assert_eq!(state.session.as_ref().map(|s| s.id.as_str()), Some("s-1"));
        // No progress loop after loop: the breaker went HALF_OPEN, then OPEN.
        assert!(transitions >= 2, "{transitions}");
        assert_eq!(state.breaker.state, CircuitState::Open);
    }

    #[test]
    fn a_fleet_that_says_it_runs_without_its_supervisor_is_shown_not_running() {
        let t = Timestamp::from_second(1_800_000_000).unwrap();
        let file = |state: &str, pid: Option<u32>| FleetFile {
            state: state.into(),
            pid,
            updated_at: Some(t),
            held: Some("2 of 2 agents running".into()),
            ..FleetFile::default()
        };
        // (file, a supervisor holds the lock, stale)
        let cases = [
            (file("running", Some(7)), false, true),
            (file("running", Some(7)), true, false),
            // A file that names no supervisor (written before it did) is shown as written.
            (file("running", None), false, false),
            (file("done", Some(7)), false, false),
            (file("interrupted", Some(7)), false, false),
        ];
        for (f, alive, stale) in cases {
            assert_eq!(f.is_stale(alive), stale, "{f:?} alive={alive}");
            let shown = f.clone().shown(alive);
            if stale {
                assert_eq!(
                    (shown.state.as_str(), shown.held),
                    (FLEET_NOT_RUNNING, None)
                );
            } else {
                assert_eq!(shown, f);
            }
        }
        let note = file("running", Some(7)).stale_note(&jiff::tz::TimeZone::UTC);
        assert_eq!(
            note,
            "the fleet is not running: its supervisor ended without a final state (last update Fri 08:00 UTC); `hank fleet` resumes it"
        );
    }
}

/// Version of the portable run-state bundle ([`StateBundle`]) this hank writes.
pub const BUNDLE_SCHEMA: u32 = 1;

/// The portable run state (`hank state save` / `restore`): the file `hank-state.json` in the
/// tree of the commit at `refs/hank/state/<name>`, or written as it is by `--to-dir`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateBundle {
    pub schema_version: u32,
    /// The task, or `run` for the whole project's run.
    pub name: String,
    pub saved_at: Timestamp,
    /// Who saved it (the job: `GITHUB_RUN_ID`/attempt/job, else host and PID).
    pub saved_by: String,
    /// `state.json` as it was (breaker, saved wait, usage windows, session hint, totals).
    pub state: State,
    /// The call ledger: the union of `.hank/state.json.calls` and its per-user copy.
    pub calls: Vec<crate::policy::budget::LedgerEntry>,
    /// The receipts: lines of `events.jsonl` carried from job to job (oldest first, bounded).
    #[serde(default)]
    pub receipts: Vec<Map<String, Value>>,
    /// Who may run the task now, and until when (`hank state claim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
}

/// A claim on a task: its owner runs it until `expires_at` (or releases it earlier).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub expires_at: Timestamp,
}

/// Current schema of `.hank/fleet.json` ([`FleetFile`]).
pub const FLEET_SCHEMA: u32 = 1;

pub use crate::policy::fleet::file::{FLEET_NOT_RUNNING, FleetFile, FleetTask};

/// One element of `hank fleet plan --json` (an array of them on stdout, in plan order): a task
/// that can start now, ready to be a GitHub Actions matrix entry (`matrix.task.name`, …).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PlannedTask {
    /// The `##` heading text without its `(after: …)` clause (`hank fleet run-task NAME`).
    pub name: String,
    /// The branch- and ref-safe form of the name (`refs/hank/state/<slug>`).
    pub slug: String,
    /// `hank/<slug>`: where its work goes.
    pub branch: String,
    /// The tasks it comes after (all merged, or it would not be listed).
    pub after: Vec<String>,
    /// Its open required items.
    pub items: Vec<String>,
}

/// The usage windows every hank run of this user has seen (`windows/windows.json` under the
/// per-user state folder, [`crate::store::shared_windows`]): window name → the latest
/// reading, as a run keeps them in `state.json`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SharedWindowsFile {
    pub schema_version: u32,
    pub windows: crate::policy::windows::Windows,
}

/// `.hank/workspace.toml` (issue 51): the repositories one change may span, one table per
/// repository (`[repos.NAME]`). Without the file a project is a workspace of one repository,
/// itself. Read and checked by [`crate::workspace::load`]; an unknown key is refused.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceFile {
    /// Repository name → where it is. The name is its folder in a task's folder and the name
    /// a plan section gives in `(repos: …)`.
    #[serde(default)]
    pub repos: BTreeMap<String, WorkspaceRepo>,
}

/// One `[repos.NAME]` table of `.hank/workspace.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceRepo {
    /// A local checkout, relative to the project (`"../api"`) or absolute; its `origin`
    /// remote is where its branches go.
    pub path: String,
    /// The branch the change starts from and its pull request goes into (default: the
    /// branch the checkout is on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The forge repository (`github.com/me/api`) where the remote's URL does not say it, as
    /// `GH_REPO` does for one repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge: Option<String>,
}
