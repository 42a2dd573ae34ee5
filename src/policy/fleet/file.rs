//! `.hank/fleet.json` ([`FleetFile`], its tasks [`FleetTask`]): the fleet machine's state
//! ([`super::machine::Fleet`] writes it), defined here so that the pure machine owns it;
//! `store::schema` re-exports both (every format is named there). **\[pure\]**

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// One task of `.hank/fleet.json` (and of `hank fleet status --json`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FleetTask {
    pub name: String,
    /// Written only by the fleet machine ([`super::machine::Fleet`]), which tells each change
    /// ([`super::machine::TaskTold`]); read through [`FleetTask::state`].
    pub(super) state: super::TaskState,
    /// `hank/<slug>`.
    pub branch: String,
    /// The task's worktree while it has one (`None` once merged or failed).
    pub worktree: Option<String>,
    /// Loops of its `hank run` (from its `status.json`).
    pub loops: u64,
    pub cost_usd: f64,
    /// Its run ended with the plan done and VERIFY_COMMAND green (or no check configured).
    pub verified: Option<bool>,
    /// Its current agent.
    pub agent: Option<String>,
    /// What is happening or what went wrong, for people.
    pub message: String,
    /// The worker (`hank run`) process while one runs, and its start time
    /// (`/proc/PID/stat` field 22: a recycled pid is not taken for it).
    pub pid: Option<u32>,
    pub pid_start: Option<u64>,
    /// Merges of this task that conflicted or turned the check red.
    pub merge_attempts: u32,
    /// The integration branch's tip when a conflict was handed back to the task's agent: a
    /// conflict again on another tip was overtaken by newer merges, not a wrong resolution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handed_back_at: Option<String>,
    /// The last exit code of its worker.
    pub exit_code: Option<u8>,
    /// The plan items its finished run ticked, once its work is committed on its branch (its
    /// worktree is then free for another task): ticked in the integration plan at its merge.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub done_items: Vec<String>,
    /// The tracker's issue the task was made from (`hank watch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<super::IssueRef>,
    /// How many times `hank fleet --retry` queued it again after it failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// The workspace's repositories its heading names (`(repos: api, web)`, issue 51): it has
    /// a branch `hank/<slug>` in each, merged into each one's integration branch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repos: Vec<String>,
}

impl FleetTask {
    /// The task's state.
    #[must_use]
    pub fn state(&self) -> super::TaskState {
        self.state
    }

    /// A task named `name` in `state` (tests that show a fleet build one; a fleet's own tasks
    /// change state only in its machine).
    #[cfg(test)]
    #[must_use]
    pub(crate) fn in_state(name: &str, state: super::TaskState) -> Self {
        Self {
            name: name.to_owned(),
            state,
            ..Self::default()
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `.hank/fleet.json`: the fleet's own state (the tasks' states live in their worktrees).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FleetFile {
    pub schema_version: u32,
    pub updated_at: Option<Timestamp>,
    /// The integration branch (`--into`).
    pub into: String,
    /// The supervisor's pid while it runs.
    pub pid: Option<u32>,
    /// `running`, `done`, `failed`, `stopped`, `interrupted`.
    pub state: String,
    /// Calls in the last hour in the fleet-wide ledger, and the cap.
    pub calls_in_window: u32,
    pub max_calls_per_hour: u32,
    pub tasks: Vec<FleetTask>,
    /// What every task's calls cost together (the fleet-wide ledger), and the cap
    /// (MAX_COST_USD, 0 = none).
    pub cost_usd: f64,
    pub max_cost_usd: f64,
    /// Tokens of every task's calls in the last hour, and the cap (MAX_TOKENS_PER_HOUR).
    pub tokens_in_window: u64,
    pub max_tokens_per_hour: u64,
    /// When this fleet started, and when MAX_RUNTIME ends it (none: unlimited).
    pub started_at: Option<Timestamp>,
    pub deadline: Option<Timestamp>,
    /// Why no task starts now, when one is ready but held (agents, memory, a usage window,
    /// the runtime), and until when if known.
    pub held: Option<String>,
    /// `hank ctl pause` holds every start (and paused the running tasks) until `resume`.
    pub paused: bool,
}

/// `state` of a fleet whose file says it runs while no supervisor does ([`FleetFile::is_stale`]).
pub const FLEET_NOT_RUNNING: &str = "not_running";

impl FleetFile {
    /// Whether the file says its fleet runs (it names the supervisor's pid) while no
    /// supervisor holds the fleet's lock (`alive`: one does): it was killed or crashed, and
    /// the file is what it last wrote (pure).
    #[must_use]
    pub fn is_stale(&self, alive: bool) -> bool {
        !alive && self.state == "running" && self.pid.is_some()
    }

    /// The file as shown to the user: a stale one ([`FleetFile::is_stale`]) is
    /// [`FLEET_NOT_RUNNING`], holding nothing back (pure).
    #[must_use]
    pub fn shown(mut self, alive: bool) -> Self {
        if self.is_stale(alive) {
            self.state = FLEET_NOT_RUNNING.to_owned();
            self.held = None;
        }
        self
    }

    /// What a stale file says, with its last update in `tz` (pure).
    #[must_use]
    pub fn stale_note(&self, tz: &jiff::tz::TimeZone) -> String {
        let last = self.updated_at.map_or_else(
            || "unknown".to_owned(),
            |t| t.to_zoned(tz.clone()).strftime("%a %H:%M %Z").to_string(),
        );
        format!(
            "the fleet is not running: its supervisor ended without a final state (last update {last}); `hank fleet` resumes it"
        )
    }
}
