//! The loop's own terminal output, on stderr: one compact summary block per loop, a spinner
//! with elapsed time while the agent runs, a countdown while waiting, and the live view of
//! `--live`. Bars and colours only on a terminal without `NO_COLOR` and outside CI
//! ([`DisplayMode::resolve`], pure). stdout is reserved for `--json` events.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! the loop's stderr output (summary block, spinner, countdown, live view, exit messages;
//! `exit_summary`/`exit_line`: a run's exit message, its last terminal line and end state,
//! table-tested)

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use console::style;
use indicatif::{ProgressBar, ProgressStyle};
use jiff::Timestamp;

use crate::analysis::Analysis;
use crate::analysis::Outcome;
use crate::exit::ExitReason;
use crate::policy::breaker::CircuitState;
use crate::policy::fixplan::Plan;
use crate::store::State;
use crate::store::schema::AgentFinished;

/// How human output is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayMode {
    /// Spinners, countdown bars, colours.
    Fancy,
    /// Plain lines (pipes, CI, NO_COLOR).
    Plain,
}

impl DisplayMode {
    /// Decides the mode from facts passed in (rather than queried) so it can be tested.
    #[must_use]
    pub fn resolve(stderr_is_terminal: bool, no_color: bool, is_ci: bool) -> Self {
        if stderr_is_terminal && !no_color && !is_ci {
            Self::Fancy
        } else {
            Self::Plain
        }
    }

    /// The mode for this process.
    #[must_use]
    pub fn detect() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
        Self::resolve(std::io::stderr().is_terminal(), no_color, ci)
    }
}

/// Writes human output to stderr.
#[derive(Debug)]
pub struct Reporter {
    mode: DisplayMode,
    pub verbose: bool,
    bar: Option<ProgressBar>,
    last_plain_wait: Option<Timestamp>,
}

/// The facts of one loop's summary block: the loop's `agent_finished` event and what the
/// run adds to it.
#[derive(Debug, Clone, Default)]
pub struct LoopSummary {
    pub finished: AgentFinished,
    /// The error's kind and full message (the event holds a cut one).
    pub error: Option<String>,
    /// The fix_plan's items done and in total.
    pub plan: (u32, u32),
    pub total_cost_usd: f64,
    pub duration: Duration,
    pub circuit: String,
}

impl LoopSummary {
    /// The summary block of a finished loop.
    #[must_use]
    pub fn of(
        f: &AgentFinished,
        a: &Analysis,
        plan: (u32, u32),
        total_cost_usd: f64,
        duration: Duration,
        circuit: CircuitState,
    ) -> Self {
        Self {
            finished: f.clone(),
            error: a
                .error
                .as_ref()
                .map(|e| format!("{}: {}", e.kind.as_str(), e.message)),
            plan,
            total_cost_usd,
            duration,
            circuit: circuit.as_str().to_string(),
        }
    }
}

fn outcome_name(o: Outcome) -> String {
    serde_json::to_value(o)
        .ok()
        .and_then(|v| v.as_str().map(ToString::to_string))
        .unwrap_or_default()
}

/// The warnings about a loop's permission denials.
#[must_use]
pub fn denial_warnings(
    denied: &[crate::analysis::Denial],
    compound: &[crate::analysis::Denial],
) -> Vec<String> {
    let names = |list: &[crate::analysis::Denial]| -> String {
        list.iter()
            .map(|d| d.command.clone().unwrap_or_else(|| d.tool.clone()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    if !compound.is_empty() {
        out.push(format!(
            "denied compound command(s) whose base command is allowed: {} (not counted as a denial)",
            names(compound)
        ));
    }
    if !denied.is_empty() {
        out.push(format!(
            "the agent was denied: {}; it will be told not to retry. Add the tool to ALLOWED_TOOLS in .hankrc if it needs it",
            names(denied)
        ));
    }
    out
}

/// The `hank.log` line of a finished loop.
#[must_use]
pub fn loop_log_line(f: &AgentFinished) -> String {
    format!(
        "loop {} finished: {}{} · {} file(s) changed · ${:.4}{}",
        f.number,
        outcome_name(f.outcome),
        f.error_kind
            .map(|k| format!(" ({})", k.as_str()))
            .unwrap_or_default(),
        f.files_changed,
        f.cost_usd,
        if f.cost_estimated { " (estimated)" } else { "" }
    )
}

/// Agent text for one terminal line: control characters and escape sequences removed.
fn one(text: &str) -> std::borrow::Cow<'_, str> {
    crate::sanitize::for_terminal(text, crate::sanitize::Lines::Join)
}

/// Agent text for a multi-line view: control characters and escape sequences removed,
/// newlines and tabs kept.
fn keep(text: &str) -> std::borrow::Cow<'_, str> {
    crate::sanitize::for_terminal(text, crate::sanitize::Lines::Keep)
}

/// The `live.log` line of one live item (empty for items that show nothing); `live.log` is
/// shown in a terminal (the `hank --monitor` pane), so agent text is sanitized.
#[must_use]
pub fn live_log_line(item: &crate::analysis::LiveItem) -> String {
    use crate::analysis::LiveItem;
    match item {
        LiveItem::Text(t) => format!("{}\n", keep(t.trim_end())),
        LiveItem::Tool { name, detail } => format!("⚙ {} {}\n", one(name), one(detail)),
        LiveItem::Retry { attempt, error, .. } => format!("API retry {attempt}: {}\n", one(error)),
        LiveItem::Init { .. } | LiveItem::Result { .. } => String::new(),
    }
}

/// The warning for a client login that expires soon (`left` may be negative: expired).
#[must_use]
pub fn credential_warning(at: Timestamp, left: jiff::SignedDuration) -> String {
    let at = at
        .to_zoned(jiff::tz::TimeZone::system())
        .strftime("%a %H:%M %Z")
        .to_string();
    if left.is_negative() {
        format!(
            "the client's login expired at {at}: renew it (log in again, or a new \
             `claude setup-token`) or the next calls fail on auth"
        )
    } else {
        format!(
            "the client's login expires at {at} (in {}): renew it now (log in again, or a new \
             `claude setup-token`) so a long run does not stop on auth then",
            format_secs(left.as_secs().unsigned_abs())
        )
    }
}

impl Reporter {
    #[must_use]
    pub fn new(mode: DisplayMode, verbose: bool) -> Self {
        Self {
            mode,
            verbose,
            bar: None,
            last_plain_wait: None,
        }
    }

    #[must_use]
    pub fn mode(&self) -> DisplayMode {
        self.mode
    }

    fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| errln!("{line}")),
            None => errln!("{line}"),
        }
    }

    /// A plain informational line.
    pub fn info(&self, msg: &str) {
        self.println(&format!("{} {}", style("hank:").bold(), keep(msg)));
    }

    /// A warning line.
    pub fn warn(&self, msg: &str) {
        self.println(&format!(
            "{} {}",
            style("hank: warning:").yellow().bold(),
            keep(msg)
        ));
    }

    /// Detail shown with `--verbose`.
    pub fn detail(&self, msg: &str) {
        if self.verbose {
            self.println(&format!("  {}", style(keep(msg)).dim()));
        }
    }

    /// With `--verbose`, before the call: the agent command (quoted for reading; the
    /// environment is never printed) and the sizes of what goes on its stdin.
    pub fn call_detail(
        &self,
        program: &Path,
        args: &[String],
        context_bytes: usize,
        prompt_bytes: usize,
    ) {
        if self.verbose {
            self.detail(&agent_command_line(program, args));
            self.detail(&format!(
                "stdin: loop context {context_bytes} bytes + prompt {prompt_bytes} bytes"
            ));
        }
    }

    /// With `--verbose`, after the call: the analysis in one line.
    pub fn analysis_detail(&self, a: &Analysis) {
        if self.verbose {
            self.detail(&analysis_line(a));
        }
    }

    /// The agent call started.
    pub fn agent_started(&mut self, number: u64, resume: bool) {
        self.clear_bar();
        let what = if resume {
            "resuming the session"
        } else {
            "new session"
        };
        match self.mode {
            DisplayMode::Fancy => {
                let bar = ProgressBar::new_spinner();
                bar.set_style(
                    ProgressStyle::with_template("{spinner} loop {msg} · agent running {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.set_message(format!("{number} ({what})"));
                bar.enable_steady_tick(Duration::from_millis(120));
                self.bar = Some(bar);
            }
            DisplayMode::Plain => errln!("hank: loop {number}: calling the agent ({what})"),
        }
    }

    /// The agent call ended.
    pub fn agent_finished(&mut self) {
        self.clear_bar();
    }

    fn clear_bar(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// One live item of `--live` (text as it arrives, one line per tool use).
    pub fn live(&self, item: &crate::analysis::LiveItem) {
        use crate::analysis::LiveItem;
        let line = match item {
            LiveItem::Text(t) => {
                let t = keep(t.trim_end()).into_owned();
                if t.trim_end().is_empty() {
                    return;
                }
                t
            }
            LiveItem::Tool { name, detail } => {
                format!(
                    "  {} {}",
                    style(format!("⚙ {}", one(name))).cyan(),
                    one(detail)
                )
            }
            LiveItem::Init { model, .. } => {
                format!(
                    "  {}",
                    style(format!(
                        "session started ({})",
                        one(model.as_deref().unwrap_or("default model"))
                    ))
                    .dim()
                )
            }
            LiveItem::Retry { attempt, error, .. } => {
                format!(
                    "  {}",
                    style(format!("API retry {attempt}: {}", one(error))).yellow()
                )
            }
            LiveItem::Result { is_error, .. } => {
                if *is_error {
                    format!("  {}", style("agent reported an error").red())
                } else {
                    return;
                }
            }
        };
        self.println(&line);
    }

    /// The summary block after each loop.
    pub fn summary(&self, s: &LoopSummary) {
        let f = &s.finished;
        let head = format!(
            "── loop {} · {} · {:.1}s · ${:.4}{} (total ${:.4}) ──",
            f.number,
            outcome_name(f.outcome),
            s.duration.as_secs_f64(),
            f.cost_usd,
            if f.cost_estimated { " estimated" } else { "" },
            s.total_cost_usd
        );
        let mut lines = vec![style(head).bold().to_string()];
        if let Some(e) = &s.error {
            lines.push(format!("  error:    {}", style(one(e)).red()));
        }
        lines.push(format!(
            "  status:   {} · {} · tests {} · EXIT_SIGNAL {}",
            one(f.status.as_deref().unwrap_or("(no status block)")),
            one(f.work_type.as_deref().unwrap_or("-")),
            one(f.tests_status.as_deref().unwrap_or("-")),
            f.exit_signal
        ));
        lines.push(format!(
            "  progress: {} file(s) changed · fix_plan {}/{} done · circuit {}",
            f.files_changed, s.plan.0, s.plan.1, s.circuit
        ));
        if let Some(r) = &f.recommendation {
            lines.push(format!("  next:     {}", one(r)));
        }
        self.println(&lines.join("\n"));
    }

    /// Called about once a second while waiting; draws a countdown (or a plain line a minute).
    pub fn wait_tick(&mut self, reason: &str, until: Timestamp, now: Timestamp) {
        let left = until.duration_since(now).as_secs().max(0);
        let left_u = u64::try_from(left).unwrap_or(0);
        match self.mode {
            DisplayMode::Fancy => {
                if self.bar.is_none() {
                    let bar = ProgressBar::new(left_u.max(1));
                    bar.set_style(
                        ProgressStyle::with_template("{msg} [{bar:30}] {prefix} left")
                            .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    bar.set_message(format!("waiting ({reason}) until {}", short_time(until)));
                    self.bar = Some(bar);
                }
                if let Some(bar) = &self.bar {
                    let len = bar.length().unwrap_or(1);
                    bar.set_position(len.saturating_sub(left_u));
                    bar.set_prefix(format_secs(left_u));
                }
            }
            DisplayMode::Plain => {
                let due = self
                    .last_plain_wait
                    .is_none_or(|last| now.duration_since(last).as_secs() >= 60);
                if due {
                    errln!(
                        "hank: waiting ({reason}) until {} — {} left",
                        short_time(until),
                        format_secs(left_u)
                    );
                    let _ = std::io::stderr().flush();
                    self.last_plain_wait = Some(now);
                }
            }
        }
    }

    /// The wait is over.
    pub fn wait_done(&mut self) {
        self.clear_bar();
        self.last_plain_wait = None;
    }
}

pub use crate::policy::time::format_secs;

/// A time as the user reads it: local day and time with the zone, then UTC
/// (`Tue 14:00 CET (13:00 UTC)`).
#[must_use]
pub fn local_time(t: Timestamp) -> String {
    let local = t
        .to_zoned(jiff::tz::TimeZone::system())
        .strftime("%a %H:%M %Z")
        .to_string();
    let utc = t
        .to_zoned(jiff::tz::TimeZone::UTC)
        .strftime("%H:%M UTC")
        .to_string();
    format!("{local} ({utc})")
}

/// The warning when the reviewer (`agent`) hit its usage limit: no round is spent.
#[must_use]
pub fn reviewer_at_limit(agent: &str) -> String {
    format!("the reviewer ({agent}) hit its usage limit: the review round runs after its reset")
}

/// The line a start says when it resumes the wait the last run was in (`w`).
#[must_use]
pub fn resuming_wait(w: &crate::policy::budget::SavedWait) -> String {
    format!(
        "resuming the {} wait of the last run: no call before {} (`hank reset wait` to call at once)",
        w.reason.as_str(),
        local_time(w.until)
    )
}

/// What an OPEN message adds: when the cooldown ends (local time and UTC) and how to run
/// before that.
#[must_use]
pub fn cooldown_note(ends: Timestamp, now: Timestamp) -> String {
    let when = if ends > now {
        format!("the cooldown ends {}", local_time(ends))
    } else {
        "the cooldown has passed".to_string()
    };
    format!(
        "; {when}: a start after that gets one trial loop. To run sooner: `hank reset circuit`, or start with --auto-reset-circuit"
    )
}

/// A timestamp to the second, UTC.
#[must_use]
pub fn short_time(t: Timestamp) -> String {
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// An argument quoted for a POSIX shell, for display and for tmux command lines (hank itself
/// never runs the agent through a shell).
#[must_use]
pub fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// `agent: PROGRAM ARGS…`, each word quoted for a POSIX shell (for reading: hank never runs
/// the agent through a shell).
#[must_use]
pub fn agent_command_line(program: &Path, args: &[String]) -> String {
    let mut line = format!("agent: {}", shell_quote(&program.display().to_string()));
    for a in args {
        line.push(' ');
        line.push_str(&shell_quote(a));
    }
    line
}

/// One line summing up an analysis: shape, outcome, error kind, session (shortened), cost,
/// tokens, permission denials and error signatures.
#[must_use]
pub fn analysis_line(a: &Analysis) -> String {
    let session = a.session_id.as_deref().map_or_else(
        || "-".to_string(),
        |id| {
            let short: String = id.chars().take(8).collect();
            if short.len() < id.len() {
                format!("{short}…")
            } else {
                short
            }
        },
    );
    format!(
        "analysis: shape={} outcome={} error={} session={session} cost=${:.4} tokens={} \
         denials={} signatures={}",
        snake_name(a.shape),
        snake_name(a.outcome),
        a.error_kind().map_or("-", |k| k.as_str()),
        a.cost_usd,
        a.tokens.sum(),
        a.permission_denials.len(),
        a.error_signatures.len()
    )
}

/// The stable snake_case name a value serializes to (`result_object`, `agent_error`).
fn snake_name(v: impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// The final one-line explanation.
pub fn exit_message(reason: ExitReason, state: &State, plan: &Plan) -> String {
    match reason {
        ExitReason::ProjectComplete => "the agent signalled completion (EXIT_SIGNAL true, confirmed by recent loops)".into(),
        ExitReason::PlanComplete => format!("every required fix_plan item is done ({}/{})", plan.done(), plan.total()),
        ExitReason::TestSaturation => "only tests were run in the last loops: the work looks finished".into(),
        ExitReason::CircuitOpen => format!(
            "circuit breaker OPEN: {}",
            state.breaker.reason
        ),
        ExitReason::PermissionDenied => "the agent was denied tools in consecutive loops; add what it needs to ALLOWED_TOOLS in .hankrc".into(),
        ExitReason::AgentFatal => {
            let last = state.history.last().and_then(|r| r.error_kind).map_or("error", |k| k.as_str());
            format!("the agent cannot work ({last}); retrying cannot help — see the last loop log")
        }
        ExitReason::AgentCrashed => crate::policy::crash::exit_message(
            state.history.last().and_then(|r| r.crash.as_deref()),
        ),
        ExitReason::NeedsAnswers => format!(
            "the agent only asked questions, without progress, in the last {} loops: answer them in .hank/PROMPT.md or .hank/fix_plan.md, then run hank again (with NEEDS_ANSWERS=wait hank waits for `hank ctl answer` instead)",
            crate::policy::decide::MAX_QUESTION_LOOPS
        ),
        ExitReason::IntegrityFailure => "a required hank file disappeared (PROMPT.md, fix_plan.md, AGENT.md or .hankrc)".into(),
        ExitReason::VerificationFailed => match &state.last_verification {
            Some(v) => format!(
                "the agent claimed \"done\" and VERIFY_COMMAND failed ({}) every time, MAX_REJECTED_COMPLETIONS in a row; last output: {}",
                v.how_it_ended(),
                v.log
            ),
            None => "the agent's \"done\" claims were rejected by VERIFY_COMMAND, MAX_REJECTED_COMPLETIONS in a row".into(),
        },
        ExitReason::MaxLoops => "MAX_LOOPS reached".into(),
        ExitReason::MaxRuntime => "MAX_RUNTIME reached: the run has lasted as long as allowed".into(),
        ExitReason::CostBudget => "MAX_COST_USD reached".into(),
        ExitReason::UsageLimit => "the usage limit was reached (ON_USAGE_LIMIT=exit)".into(),
        ExitReason::UsageWindow => "a usage window reached its MAX_WINDOW_PERCENT limit (ON_USAGE_LIMIT=exit)".into(),
        ExitReason::SpendLimit => crate::exit::SPEND_LIMIT_MESSAGE.into(),
        ExitReason::Interrupted => "interrupted; state saved".into(),
        ExitReason::Delivered => "the work was delivered (pushed; with a pull request, its checks passed)".into(),
        ExitReason::CiFailed => "checks of the delivered commit failed".into(),
        ExitReason::CiMissing => "no check appeared for the delivered commit within CI_APPEAR_TIMEOUT: no CI is never green".into(),
        ExitReason::CiTimeout => "checks of the delivered commit were still running at CI_TIMEOUT".into(),
        ExitReason::PushRejected => "the push of the delivery branch was refused (pre-push hook or remote); its output is kept for the agent".into(),
        ExitReason::ForgeFailed => "a delivery step at the forge failed (the branch is pushed): `hank deliver` finishes the delivery from where it stopped, with this run's evidence".into(),
        ExitReason::CheckCouldNotRun => "the agent claimed \"done\" but nothing was tested: the claim was neither accepted nor rejected".into(),
        ExitReason::ReviewRejected => "the independent reviewer (REVIEW_AGENT) did not approve the work within REVIEW_MAX_ROUNDS rounds; the work is kept, its last findings are in .hank/status.json (`review`)".into(),
        ExitReason::ReviewBudget => "reviews cost more than REVIEW_MAX_SHARE of the run: reviewing stopped before an approval; the work is kept".into(),
        ExitReason::SecretsInCommits => "a commit to be pushed adds files that look like secrets (named above); nothing was pushed (allow a file on purpose with DELIVER_ALLOW_FILES)".into(),
    }
}

/// What a run's end adds to [`exit_message`]: the usage limit or window it stopped at, the
/// verification's summary, and the breaker's cooldown end (with `now`, for "in 5m").
pub struct ExitNotes<'a> {
    pub limit: Option<&'a str>,
    pub verified: &'a str,
    pub cooldown_ends: Option<Timestamp>,
    pub now: Timestamp,
    /// The run's last delivery's error (the forge's own words), if it failed.
    pub delivery_error: Option<&'a str>,
    /// The reviewer's last round.
    pub review: Option<&'a crate::policy::review::ReviewRound>,
}

/// The exit summary of a run: [`exit_message`], the limit named (usage exits only), the
/// verification's summary, the cooldown's end (an open circuit only); a delivery stop says
/// what failed (the forge's own error) and what to do next, a rejected review its blockers.
pub fn exit_summary(reason: ExitReason, state: &State, plan: &Plan, n: &ExitNotes<'_>) -> String {
    let mut message = exit_message(reason, state, plan);
    if let (ExitReason::UsageLimit | ExitReason::UsageWindow, Some(note)) = (reason, n.limit) {
        message.push_str(&format!(" — {note}"));
    }
    message.push_str(n.verified);
    if let (ExitReason::CircuitOpen, Some(end)) = (reason, n.cooldown_ends) {
        message.push_str(&cooldown_note(end, n.now));
    }
    let tail = match (reason, n.delivery_error, n.review) {
        (ExitReason::ForgeFailed, Some(error), _) => Some(error.to_owned()),
        (ExitReason::CiMissing, _, _) => Some(crate::policy::deliver::CI_MISSING_NEXT.to_owned()),
        (ExitReason::ReviewRejected, _, Some(last)) => {
            Some(crate::policy::review::rejected_note(last))
        }
        _ => None,
    };
    if let Some(tail) = tail {
        message.push_str(&format!(" — {tail}"));
    }
    message
}

/// The run's last line on the terminal (`true`: a warning, the run did not succeed), and the
/// `state` status.json ends with.
pub fn exit_line(reason: ExitReason, message: &str) -> (bool, String, crate::store::RunState) {
    use crate::store::RunState;
    let (name, code) = (reason.as_str(), reason.code());
    match code {
        crate::exit::OK => (
            false,
            format!("done: {message} [{name}]"),
            RunState::Completed,
        ),
        _ => {
            let line = format!("stopped: {message} [{name}, exit {code}]");
            let halted = code == crate::exit::HALTED;
            (
                true,
                line,
                if halted {
                    RunState::Halted
                } else {
                    RunState::Stopped
                },
            )
        }
    }
}

/// How long a desktop notification may take before it is given up (and its group killed).
const NOTIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Best-effort desktop notification (`notify-send` or `osascript` when present), bounded (5 s).
pub fn notify(title: &str, body: &str) {
    if let Ok(p) = which::which("notify-send") {
        let _ = crate::proc::Cmd::new(p)
            .arg(title)
            .arg(body)
            .timeout(NOTIFY_TIMEOUT)
            .run();
    } else if let Ok(p) = which::which("osascript") {
        let script = format!(
            "display notification {} with title {}",
            apple_quote(body),
            apple_quote(title)
        );
        let _ = crate::proc::Cmd::new(p)
            .arg("-e")
            .arg(script)
            .timeout(NOTIFY_TIMEOUT)
            .run();
    }
}

fn apple_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_summary_table() {
        let now: Timestamp = "2026-01-01T10:00:00Z".parse().unwrap();
        let end: Timestamp = "2026-01-01T10:05:00Z".parse().unwrap();
        let (state, plan) = (State::default(), Plan::default());
        let notes = |limit, cooldown_ends| ExitNotes {
            delivery_error: None,
            review: None,
            limit,
            verified: "; verified",
            cooldown_ends,
            now,
        };
        let cooldown = cooldown_note(end, now);
        let table = [
            (
                ExitReason::UsageLimit,
                Some("5h window"),
                None,
                " — 5h window; verified",
            ),
            (
                ExitReason::UsageWindow,
                Some("7d at 90%"),
                None,
                " — 7d at 90%; verified",
            ),
            (
                ExitReason::MaxLoops,
                Some("5h window"),
                Some(end),
                "; verified",
            ),
            (ExitReason::UsageLimit, None, None, "; verified"),
        ];
        for (reason, limit, ends, tail) in table {
            let got = exit_summary(reason, &state, &plan, &notes(limit, ends));
            let want = exit_message(reason, &state, &plan) + tail;
            assert_eq!(got, want, "{reason:?}");
        }
        let open = exit_summary(
            ExitReason::CircuitOpen,
            &state,
            &plan,
            &notes(None, Some(end)),
        );
        let want = exit_message(ExitReason::CircuitOpen, &state, &plan) + "; verified" + &cooldown;
        assert_eq!(open, want);
    }

    #[test]
    fn exit_line_table() {
        use crate::store::RunState;
        let table = [
            (
                ExitReason::PlanComplete,
                false,
                "done: m [plan_complete]",
                RunState::Completed,
            ),
            (
                ExitReason::MaxLoops,
                true,
                "stopped: m [max_loops, exit 3]",
                RunState::Stopped,
            ),
            (
                ExitReason::CircuitOpen,
                true,
                "stopped: m [circuit_open, exit 2]",
                RunState::Halted,
            ),
        ];
        for (reason, warn, line, state) in table {
            assert_eq!(
                exit_line(reason, "m"),
                (warn, line.to_owned(), state),
                "{reason:?}"
            );
        }
    }

    #[test]
    fn display_mode_table() {
        let table = [
            (true, false, false, DisplayMode::Fancy),
            (true, true, false, DisplayMode::Plain),
            (true, false, true, DisplayMode::Plain),
            (false, false, false, DisplayMode::Plain),
        ];
        for (tty, no_color, ci, want) in table {
            assert_eq!(
                DisplayMode::resolve(tty, no_color, ci),
                want,
                "{tty} {no_color} {ci}"
            );
        }
    }

    #[test]
    fn seconds_format() {
        assert_eq!(format_secs(0), "0s");
        assert_eq!(format_secs(61), "1m01s");
        assert_eq!(format_secs(3723), "1h02m03s");
    }

    #[test]
    fn verbose_lines() {
        let args: Vec<String> = [
            "-p",
            "--allowedTools=Read,Bash(git add *)",
            "--model",
            "opus",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            agent_command_line(Path::new("/opt/my tools/claude"), &args),
            "agent: '/opt/my tools/claude' -p '--allowedTools=Read,Bash(git add *)' --model opus"
        );
        let mut a = Analysis {
            shape: crate::analysis::OutputShape::ResultObject,
            session_id: Some("0123456789abcdef".into()),
            cost_usd: 0.01234,
            error_signatures: vec!["x".into()],
            ..Analysis::default()
        };
        a.tokens.input = 10;
        a.tokens.output = 5;
        assert_eq!(
            analysis_line(&a),
            "analysis: shape=result_object outcome=success error=- session=01234567… \
             cost=$0.0123 tokens=15 denials=0 signatures=1"
        );
        a.session_id = Some("short".into());
        a.outcome = crate::analysis::Outcome::AgentError;
        a.error = Some(crate::analysis::AgentError {
            kind: crate::analysis::ErrorKind::RateLimit,
            message: "429".into(),
            api_status: Some(429),
            reset_at: None,
            window: None,
        });
        let line = analysis_line(&a);
        assert!(
            line.contains("outcome=agent_error error=rate_limit session=short "),
            "{line}"
        );
        a.session_id = None;
        assert!(analysis_line(&a).contains("session=- "));
    }

    #[test]
    fn quoting_for_a_shell() {
        let cases = [
            ("", "''"),
            ("plain", "plain"),
            ("--allowedTools=Read,Edit", "--allowedTools=Read,Edit"),
            ("two words", "'two words'"),
            ("Bash(git *)", "'Bash(git *)'"),
            ("it's", "'it'\\''s'"),
            ("$HOME `x` $(y) \\ \" *", "'$HOME `x` $(y) \\ \" *'"),
            ("''", "''\\'''\\'''"),
            ("new\nline", "'new\nline'"),
        ];
        for (input, want) in cases {
            assert_eq!(shell_quote(input), want, "{input:?}");
        }
    }
}
