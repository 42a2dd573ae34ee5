//! The three formats hank writes under `.hank/`, each defined once: `state.json` ([`State`],
//! internal, versioned), `status.json` ([`Status`], the public contract of HANK.md §2) and the
//! event stream ([`Event`]: `events.jsonl` and `--json` on stdout). The loop writes them; the
//! monitor, `hank status`, `hank circuit` and `hank reset` read them with these same types,
//! through [`read_lenient`] where a file may come from an older or newer hank.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::analysis::{ErrorKind, Outcome, Tokens};
use crate::policy::breaker::{Breaker, CircuitState};
use crate::policy::budget::{Ledger, WaitReason};
use crate::policy::decide::LoopRecord;
pub use crate::policy::session::Session;

/// Current `state.json` schema.
pub const STATE_SCHEMA: u32 = 1;
/// Current `status.json` and event schema.
pub const STATUS_SCHEMA: u32 = 1;
/// Loop records kept in `state.json`.
pub const HISTORY_LEN: usize = 20;

/// Running totals over every run of this project.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    pub loops: u64,
    pub cost_usd: f64,
    pub tokens: Tokens,
}

/// `state.json`: what hank must remember across restarts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    pub schema_version: u32,
    /// Number of the last loop started (cumulative; names the loop log files).
    pub loop_count: u64,
    /// The call ledger: written before every spawn.
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
        }
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
    pub number: u64,
    pub outcome: Outcome,
    pub error_kind: Option<ErrorKind>,
    pub exit_signal: bool,
    pub status: Option<String>,
    pub work_type: Option<String>,
    pub files_changed: u32,
    pub recommendation: Option<String>,
    pub cost_usd: f64,
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
    pub total_tokens: Tokens,
    pub fix_plan: PlanCounts,
    pub last_loop: Option<LastLoop>,
    pub exit_reason: Option<String>,
    pub exit_code: Option<u8>,
    /// PID of the loop that wrote this file.
    pub pid: u32,
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
            total_tokens: Tokens::default(),
            fix_plan: PlanCounts::default(),
            last_loop: None,
            exit_reason: None,
            exit_code: None,
            pid: 0,
        }
    }
}

/// One line of `events.jsonl` (and of `hank run --json` on stdout):
/// `{"schema_version":1,"type":"…","at":"…",…}`.
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
    /// Something the user should know.
    Warning { message: String },
    /// The run ended. `exit_reason` is null when it failed with an error (exit 1).
    Exit {
        exit_reason: Option<String>,
        exit_code: u8,
        message: String,
    },
}

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
    pub tokens: Tokens,
    pub duration_ms: u64,
    pub session_id: Option<String>,
    pub permission_denials: u64,
    pub completion_indicators: Vec<String>,
    pub recommendation: Option<String>,
}

/// A schema value read tolerantly, with the names of the fields that were really there.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Lenient<T> {
    pub value: T,
    /// Top-level fields present in the input with a value of the right type.
    pub present: BTreeSet<String>,
}

impl<T> Lenient<T> {
    /// The field was in the input, readable.
    #[must_use]
    pub fn has(&self, field: &str) -> bool {
        self.present.contains(field)
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
    let input = v.as_object()?;
    if let Ok(value) = serde_json::from_value::<T>(v.clone()) {
        let present = input
            .iter()
            .filter(|(_, x)| !x.is_null())
            .map(|(k, _)| k.clone())
            .collect();
        return Some(Lenient { value, present });
    }
    let Ok(Value::Object(mut merged)) = serde_json::to_value(T::default()) else {
        return None;
    };
    let fields: Vec<String> = merged.keys().cloned().collect();
    let mut present = BTreeSet::new();
    for key in fields {
        let Some(candidate) = input.get(&key).filter(|x| !x.is_null()) else {
            continue;
        };
        let mut trial: Map<String, Value> = merged.clone();
        trial.insert(key.clone(), candidate.clone());
        if serde_json::from_value::<T>(Value::Object(trial.clone())).is_ok() {
            merged = trial;
            present.insert(key);
        }
    }
    let value = serde_json::from_value::<T>(Value::Object(merged)).ok()?;
    Some(Lenient { value, present })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_serialize_to_the_documented_lines() {
        let at: Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
        let cases = [
            (
                EventKind::LoopStarted {
                    number: 3,
                    resume: true,
                    context_bytes: 210,
                },
                json!({"schema_version":1,"at":"2026-11-24T10:00:00Z","type":"loop_started","loop":3,"resume":true,"context_bytes":210}),
            ),
            (
                EventKind::Waiting {
                    reason: WaitReason::UsageLimit,
                    until: at,
                },
                json!({"schema_version":1,"at":"2026-11-24T10:00:00Z","type":"waiting","reason":"usage_limit","until":"2026-11-24T10:00:00Z"}),
            ),
            (
                EventKind::Exit {
                    exit_reason: None,
                    exit_code: 1,
                    message: "boom".into(),
                },
                json!({"schema_version":1,"at":"2026-11-24T10:00:00Z","type":"exit","exit_reason":null,"exit_code":1,"message":"boom"}),
            ),
            (
                EventKind::CircuitChanged {
                    from: CircuitState::Open,
                    to: CircuitState::Closed,
                    reason: "manual".into(),
                },
                json!({"schema_version":1,"at":"2026-11-24T10:00:00Z","type":"circuit_changed","from":"OPEN","to":"CLOSED","reason":"manual"}),
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
}
