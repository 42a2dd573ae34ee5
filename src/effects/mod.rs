//! What the loop does to the world, behind one trait: the driver (`engine/`) executes the
//! state machine's steps ([`crate::policy::run`]) only through [`Effects`], so that its unit
//! tests run a whole loop — a call, a check, a 5-hour wait — with no process and no sleep.
//!
//! [`Real`] is `hank run`'s implementation, one job per file: `agent.rs` (spawn, stream,
//! answer), `check.rs` (VERIFY_COMMAND), `output.rs` (state.json, status.json, events, the
//! log, the terminal), `open.rs` (the state loaded, leftovers of a killed hank stopped). The
//! test implementation is next to the engine's tests (`engine/tests/effects.rs`).
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! everything the loop does to the world, behind one trait: `mod.rs` (`Effects`: `now`, `sleep`,
//! `wait_until` (default: `wait.rs`), `suspend_wait` (Actions), `interrupted` (`interrupted_now`:
//! after the signal task ran), `poll_control`/`control_log` (`tell_control`, default: each
//! command taken told), `call_agent`, `baseline`/`measure` (progress), `run_check`, `persist`
//! (state.json), `tell` (default: status.json, terminal line, log line and event of one `News`,
//! through `publish`, `say`, `log`, `emit` (events.jsonl, `--json`, NOTIFY)), `restore_status`,
//! `prompt_file`/`write_file`/`write_prompt`, `ensure_dirs`, `prune_logs` (LOG_RETENTION: the
//! effects keep the window between calls), `reserve_call`/`settle_call` (fleet ledger),
//! `adopt_windows`/`publish_windows`, `suspend_job` (Actions), `desktop_notify`, `ended`
//! (default: the receipts said, the desktop notification), `tree_since` (default:
//! `snapshot_tree` and `diff_trees`, a review round's input), `delivery_env`/
//! `save_delivery_record` (what a delivery round reads, its per-user record), `close`),
//! `news.rs` (`News`: what the run tells; `RunView`: the status, cost and items it is told with;
//! `News::told`/`run_state`: the terminal line, log line, event and run state each implies
//! **\[pure, table-tested\]**), `wait.rs` (`WaitSpec`, `Woke`: ticks of at most a second on the
//! effects' clock, control polled each tick (a pause sleeps before it polls), the countdown and
//! status.json put back during a shown wait; the Actions suspension), `shown.rs` (`Shown`: what
//! the run shows beyond state.json — last loop, wait, questions, delivery step, limit note,
//! receipts —, kept by the driver; `Shown::status`: status.json for a piece of news over the
//! driver's records `RunParts`, through `Status::of`; `Shown::exit_message`), `host.rs` (the
//! effects as a delivery round's `deliver::in_run::RunIo`: clock, sleeps, records), `open.rs`
//! (`claim`: the store with its per-user ledger copy, the lock, subreaper/self-protection,
//! CONTROL_TOPIC's poller — before the runtime; `Real`: opened with the state loaded and a killed
//! hank's leftovers stopped; keeps the last status published), `agent.rs` (spawn + stream + answer,
//! `AGENT_ENV_REMOVED`, `GRACE`; streamed lines read whenever the answer streams: `Retries` shows
//! the client's `api_retry` events in status.json's `api_retry` and tells the first of a call
//! (event, notification); `watch_stop` forwards signals and reads the control journal during the
//! call, a `hank ctl stop` stopping it, the commands kept for the next poll), `check.rs`
//! (VERIFY_COMMAND through `proc::shell_to_log`, test files, tails; `Checks`: the run's checks
//! (`baseline`, `after_loop`, `claim`) run, numbered, recorded in `Verification`/`State` and told;
//! `rc_edit`; `hank verify` uses it), `output.rs` (events, terminal; `Told`: the one path of a
//! run's event to events.jsonl, `--json`'s stdout and NOTIFY — `Real::write_event` and `Retries` —,
//! a notifier's warnings said and logged)

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use jiff::Timestamp;

use crate::agent::profile::Agent;
use crate::analysis::Analysis;
use crate::error::Result;
use crate::policy::run::Control;
use crate::policy::time::Clock;
use crate::policy::verify::{CheckKind, CheckResult};
use crate::progress::{Baseline, Progress};
use crate::report::LoopSummary;
use crate::settings::Settings;
use crate::store::{Event, State, Status};

pub(crate) mod agent;
pub(crate) mod check;
mod host;
mod news;
mod open;
mod output;
pub(crate) mod plan;
mod shown;
mod wait;

pub(crate) use news::{News, RunView};
pub(crate) use open::{Real, claim};
pub(crate) use shown::{RunParts, Shown};
pub(crate) use wait::{WaitSpec, Woke};

/// A future an effect returns (boxed: the trait is used as `dyn Effects`).
pub(crate) type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// How a sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slept {
    /// The time passed (or the sleep was cut short for a reason that is not an interrupt).
    Done,
    /// Ctrl-C, SIGTERM or SIGHUP came.
    Interrupted,
}

/// One call of the agent, as the driver prepared it (argv and stdin built, status published).
pub(crate) struct AgentCall<'a> {
    pub number: u64,
    pub agent: &'a Agent,
    pub settings: &'a Settings,
    pub args: &'a [String],
    pub stdin: Vec<u8>,
    pub resume: bool,
    /// Bytes of the loop context and of the prompt (the terminal's call line).
    pub sizes: (usize, usize),
    /// The reviewer's call (`REVIEW_AGENT`): in the sandbox, the project is read-only.
    pub read_only: bool,
}

/// What a call came back with: the answer (secrets already redacted) and how the process ended.
#[derive(Debug, Clone, Default)]
pub(crate) struct AgentAnswer {
    pub analysis: Analysis,
    pub duration: Duration,
    /// No output within FIRST_OUTPUT_TIMEOUT.
    pub startup_hang: bool,
    /// hank stopped the agent (Ctrl-C, SIGTERM, SIGHUP).
    pub interrupted: bool,
}

/// One run of VERIFY_COMMAND.
pub(crate) struct CheckCall<'a> {
    pub kind: CheckKind,
    pub command: &'a str,
    pub project: &'a std::path::Path,
    /// The run's count of checks, this one included (names the log `verify-NNNNN.log`).
    pub number: u64,
    /// The loop after which it runs.
    pub after_loop: u64,
    pub timeout: Duration,
    /// The project's test files when the run started (relative path, size).
    pub tests_at_start: &'a [(String, u64)],
}

/// A check's record and, when it failed, the end of its output (for the agent's feedback).
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    pub result: CheckResult,
    pub tail: String,
}

/// A line or view for the terminal.
pub(crate) enum Say<'a> {
    Info(&'a str),
    Warn(&'a str),
    /// The analysis of an answer (verbose only).
    Analysis(&'a Analysis),
    Summary(&'a LoopSummary),
    WaitTick {
        reason: &'a str,
        until: Timestamp,
        now: Timestamp,
    },
    WaitDone,
}

/// Everything the driver does to the world. Every wait of the loop goes through
/// [`Effects::sleep`] and reads [`Clock::now`]; facts from outside the run (live control, the
/// fleet, delivery) come through [`Effects::poll_control`].
pub(crate) trait Effects: Clock {
    /// Sleeps `d`, or less when the user interrupts (the real one: tokio's timer raced with
    /// the signal counter; a test one: moves its clock).
    fn sleep(&mut self, d: Duration) -> Fut<'_, Slept>;
    /// Whether the user interrupted the run (Ctrl-C, SIGTERM, SIGHUP).
    fn interrupted(&self) -> bool;
    /// [`Effects::interrupted`] once the signal task ran (the driver is polled on the first
    /// yield, the handler runs on the second): a signal that came during synchronous work
    /// (the analysis of an answer) is seen.
    fn interrupted_now(&mut self) -> Fut<'_, bool> {
        Box::pin(async move {
            for _ in 0..2 {
                tokio::task::yield_now().await;
            }
            self.interrupted()
        })
    }
    /// Facts from outside the run that arrived since the last poll, oldest first: a pause,
    /// a note for the next context, a setting, a sibling's window reading
    /// (`policy::run::Control`). Polled before each call and during every wait.
    fn poll_control(&mut self) -> Vec<Control>;
    /// The commands taken since the last call (each an event) and warnings of the control
    /// source.
    fn control_log(&mut self) -> (Vec<crate::control::Taken>, Vec<String>) {
        (Vec::new(), Vec::new())
    }
    /// The commands taken since the last call told as the run looks in `view`: each a
    /// `control` event and a line; the control source's warnings as warnings.
    fn tell_control(&mut self, view: RunView<'_>) {
        let (taken, warnings) = self.control_log();
        for w in warnings {
            let _ = self.tell(view, News::Warning(&w));
        }
        for t in taken {
            if let Err(e) = self.tell(view, News::Control(t)) {
                self.say(Say::Warn(&format!("could not record a control event: {e}")));
            }
        }
    }
    /// Runs the agent and analyzes its answer.
    fn call_agent<'a>(&'a mut self, call: AgentCall<'a>) -> Fut<'a, Result<AgentAnswer>>;
    /// The project before a call (what `git status` shows, the plan), for its progress.
    fn baseline(&mut self, project: PathBuf, plan: String) -> Fut<'_, Baseline>;
    /// What a call changed since `base` (`plan_after`: fix_plan.md as it is now).
    fn measure(
        &mut self,
        project: PathBuf,
        base: Baseline,
        plan_after: String,
    ) -> Fut<'_, Progress>;
    /// Runs VERIFY_COMMAND once (its start and its result said on the terminal and logged).
    fn run_check<'a>(&'a mut self, check: CheckCall<'a>) -> Fut<'a, Result<Checked>>;
    /// Tells `news` as the run looks in `view`: status.json (when it changed), then the
    /// terminal line, the log line and the event it implies ([`News::told`], `news.rs`).
    fn tell(&mut self, view: RunView<'_>, news: News<'_>) -> Result<()> {
        let published = view.status.map_or(Ok(()), |s| self.publish(s));
        let told = news.told();
        if let Some((warn, line)) = &told.say {
            self.say(if *warn {
                Say::Warn(line)
            } else {
                Say::Info(line)
            });
        }
        if let News::Finished {
            summary, questions, ..
        } = &news
        {
            self.questions(questions);
            self.say(Say::Summary(summary));
        }
        if let Some(line) = &told.log {
            self.log(line);
        }
        let emitted = told.event.map_or(Ok(()), |kind| {
            let event = Event::new(self.now(), kind);
            self.emit(&event, view.cost_usd, view.items)
        });
        published.and(emitted)
    }
    /// Saves state.json (`durable`: fdatasync too).
    fn persist(&mut self, state: &State, durable: bool) -> Result<()>;
    /// Publishes status.json.
    fn publish(&mut self, status: &Status) -> Result<()>;
    /// status.json put back (the last one published) if someone deleted it.
    fn restore_status(&mut self) {}
    /// Waits as `spec` says, in ticks of at most a second: until its end, an interrupt, or
    /// commands from outside ([`Woke`]; `wait.rs`).
    fn wait_until(&mut self, spec: WaitSpec) -> Fut<'_, Woke> {
        Box::pin(wait::ticks(self, spec))
    }
    /// Inside GitHub Actions, a wait until `until` that outlasts the job (`deadline`) ends
    /// the job instead (the step summary says when the next one continues): `true`.
    fn suspend_wait(&mut self, until: Timestamp, deadline: Option<Timestamp>) -> bool {
        wait::suspend(self, until, deadline)
    }
    /// An event: `events.jsonl`, stdout with `--json`, NOTIFY (`cost_usd` of the run and the
    /// plan's `items` done/total for its message).
    fn emit(&mut self, event: &Event, cost_usd: f64, items: (u32, u32)) -> Result<()>;
    /// A line of `.hank/logs/hank.log`.
    fn log(&mut self, line: &str);
    /// The terminal.
    fn say(&mut self, what: Say<'_>);
    /// The last loop's questions (sent with NOTIFY's `needs_answers`).
    fn questions(&mut self, questions: &[String]);
    /// Where the prompt file of call `number` goes (profiles that take one).
    fn prompt_file(&mut self, number: u64) -> PathBuf;
    /// Writes `bytes` to `path` atomically (0600).
    fn write_file(&mut self, path: &std::path::Path, bytes: &[u8]) -> Result<()>;
    /// The prompt file of call `number` written (`bytes`; `None`: the profile takes none).
    fn write_prompt(&mut self, number: u64, bytes: Option<&[u8]>) -> Result<()> {
        let Some(bytes) = bytes else {
            return Ok(());
        };
        let file = self.prompt_file(number);
        self.write_file(&file, bytes)
    }
    /// `.hank/` recreated if the agent removed it; the store's notes since the last look.
    fn ensure_dirs(&mut self) -> Result<Vec<String>>;
    /// LOG_RETENTION: keeps the logs of the `keep` newest loops and checks (`newest`: the
    /// last loop's and check's numbers; `keep` 0: all).
    fn prune_logs(&mut self, keep: u64, newest: (u64, u64));
    /// In a fleet: takes the call on the fleet-wide ledger, or says until when to wait.
    fn reserve_call(
        &mut self,
        now: Timestamp,
        limits: &crate::policy::fleet::FleetLimits,
    ) -> Result<crate::policy::fleet::FleetVerdict>;
    /// In a fleet: what a call spent (tokens, dollars) on the fleet-wide ledger.
    fn settle_call(&mut self, now: Timestamp, tokens: u64, usd: f64) -> Result<()>;
    /// Newer usage-window readings of every other hank run of this user (the per-user
    /// shared file) folded into `own`.
    fn adopt_windows(&mut self, own: &mut crate::policy::windows::Windows, now: Timestamp);
    /// This run's readings offered to every other run of this user (best effort).
    fn publish_windows(&mut self, own: &crate::policy::windows::Windows, now: Timestamp);
    /// Inside GitHub Actions: writes `line` to the step summary and returns `true` (the job
    /// stops and the next one continues); elsewhere `false`.
    fn suspend_job(&mut self, line: &str) -> bool;
    /// NOTIFY=true's desktop notification at the end.
    fn desktop_notify(&mut self, title: &str, body: &str);
    /// The run's end, after its exit news: the receipts of its loops said
    /// ([`crate::policy::receipts::summary_lines`]) and, with NOTIFY=true (`notify`), the
    /// desktop notification of its exit `message`.
    fn ended(
        &mut self,
        reason: crate::exit::ExitReason,
        message: &str,
        receipts: &[crate::policy::receipts::LoopCost],
        notify: bool,
    ) {
        for line in crate::policy::receipts::summary_lines(receipts) {
            self.say(Say::Info(&line));
        }
        if notify {
            self.desktop_notify(&format!("hank: {}", reason.as_str()), message);
        }
    }
    /// What a delivery round (`DELIVER=branch|pr`, [`crate::deliver::in_run`]) reads and
    /// writes besides the host: the run's `events.jsonl` (the PR body's evidence), where
    /// `.hank/delivery.json` goes, the secret values to redact. `None` where nothing is
    /// delivered (a delivery step then ends the run with its verified reason).
    fn delivery_env(&self) -> Option<crate::deliver::in_run::RunRecords> {
        None
    }
    /// Saves the delivery record of the project at `project` (the per-user folder:
    /// [`crate::deliver::record::save`]).
    fn save_delivery_record(
        &mut self,
        project: &std::path::Path,
        rec: &crate::store::schema::Delivery,
    ) -> Result<()>;
    /// The project's whole work tree as a git tree id (tracked and untracked files, the
    /// user's index untouched: [`crate::git::Checkout::worktree_tree`]), for the reviewer's diffs;
    /// `None` outside a git repository (and in the test effects).
    fn snapshot_tree(&mut self, _project: &std::path::Path) -> Option<String> {
        None
    }
    /// The stat and patch between two trees of [`Effects::snapshot_tree`] (`None`: git could
    /// not say).
    fn diff_trees(
        &mut self,
        _project: &std::path::Path,
        _from: &str,
        _to: &str,
    ) -> Option<(String, String)> {
        None
    }
    /// The work tree now ([`Effects::snapshot_tree`]) and its diff from the tree `base`
    /// ([`Effects::diff_trees`]; `None` without a base or when git could not say): a review
    /// round's input.
    fn tree_since(
        &mut self,
        project: &std::path::Path,
        base: Option<&str>,
    ) -> (Option<String>, Option<(String, String)>) {
        let tree = self.snapshot_tree(project);
        let diff = match (base, &tree) {
            (Some(from), Some(to)) => self.diff_trees(project, from, to),
            _ => None,
        };
        (tree, diff)
    }
    /// The end of the run: queued notifications delivered (bounded).
    fn close(&mut self) -> Fut<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}
