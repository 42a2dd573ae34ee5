//! The agent called for real (step 5): its group tracked in the lock, live lines to the
//! terminal and `live.log`, the answer analyzed in the format asked, secrets redacted.

use std::io::Write;
use std::time::Duration;

use super::{AgentAnswer, AgentCall, Real};
use crate::agent::argv;
use crate::agent::call;
use crate::agent::process::{self, Spawn};
use crate::agent::profile::Parser;
use crate::analysis;
use crate::error::{HankError, Result};

/// What the agent's environment never carries: the client settings that fight the loop
/// ([`crate::agent::client::ENV_REMOVED`]) and, in a fleet, where the fleet-wide call ledger is
/// (an agent that knew it could empty the ledger and lift every task's call cap).
pub(crate) const AGENT_ENV_REMOVED: &[&str] = &[
    "CLAUDE_CODE_RETRY_WATCHDOG",
    crate::store::fleet_ledger::ENV,
];

/// Credentials hank keeps to itself: the forge tokens it pushes and opens pull requests with,
/// the CI's own tokens, and the settings that carry notification and control material. None
/// of them reaches an agent's environment unless its profile names it in `pass_env`.
pub(crate) const CREDENTIALS: &[&str] = &[
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "GITLAB_PRIVATE_TOKEN",
    "GL_TOKEN",
    "CI_JOB_TOKEN",
    "CI_JOB_JWT",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "NOTIFY",
    "CONTROL_TOPIC",
];

/// What is removed from an agent's environment: [`AGENT_ENV_REMOVED`], every credential of
/// [`CREDENTIALS`] but those the profile passes on purpose (`pass`), and every `GIT_CONFIG_*`
/// variable of hank's environment (`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`/`KEY_n`/
/// `VALUE_n`: how hank's own steps in Actions give git the token's header).
#[must_use]
pub(crate) fn removed_for(pass: &[String]) -> Vec<String> {
    let git_config = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with("GIT_CONFIG_"));
    AGENT_ENV_REMOVED
        .iter()
        .chain(CREDENTIALS.iter().filter(|c| !pass.iter().any(|p| p == *c)))
        .map(|k| (*k).to_string())
        .chain(git_config)
        .collect()
}

/// Time between SIGTERM and SIGKILL when stopping the agent or the check.
pub(crate) const GRACE: Duration = Duration::from_secs(5);

impl Real {
    /// Runs the agent of `c` and analyzes its answer.
    pub(super) async fn call(&mut self, c: AgentCall<'_>) -> Result<AgentAnswer> {
        let (agent, s, number) = (c.agent, c.settings, c.number);
        self.reporter.agent_started(number, c.resume);
        self.reporter.call_detail(
            &agent.command.program,
            &crate::agent::redact::redacted(c.args, &self.secrets),
            c.sizes.0,
            c.sizes.1,
        );
        let mut live_file = if s.live.value {
            process::create_log(&self.store.path(crate::store::HankFile::Live)).ok()
        } else {
            None
        };
        let env_set = agent.env();
        let removed = removed_for(&agent.profile.pass_env);
        let env_remove: Vec<&str> = removed.iter().map(String::as_str).collect();
        // Only an answer that streams shows life while the agent works: FIRST_OUTPUT_TIMEOUT
        // and IDLE_TIMEOUT watch it (hank asks for stream-json whenever the profile has it).
        let streaming = argv::output_streams(agent, s);
        let watch = |d: Duration| (streaming && !d.is_zero()).then_some(d);
        let (stdout_log, stderr_log) = self.store.loop_logs(number);
        let spawn = Spawn {
            program: &agent.command.program,
            args: c.args,
            cwd: &s.project_dir,
            stdin: c.stdin,
            stdout_log,
            stderr_log,
            timeout: s.timeout.value,
            grace: GRACE,
            live: s.live.value,
            env_remove: &env_remove,
            env_set: &env_set,
            stop_after_result: matches!(agent.profile.parser, Parser::Claude),
            marker: Some(&self.marker),
            idle_timeout: watch(s.idle_timeout.value),
            first_output_timeout: watch(s.first_output_timeout.value),
        };
        let (reporter, lock) = (&self.reporter, &mut self.lock);
        let on_spawn = |t: process::Tracked<'_>| match t {
            process::Tracked::Spawned(pgid) => {
                if let Some(ticks) = process::start_ticks(pgid) {
                    lock.record_agent(Some((pgid, ticks)));
                }
            }
            process::Tracked::Outside(procs) => lock.record_procs(procs),
        };
        let (wall, parser, secrets) = (&self.clock, &agent.profile.parser, &self.secrets);
        let called = call::call(
            spawn,
            parser,
            argv::asked_format(agent, s),
            self.cancel.clone(),
            on_spawn,
            |line| {
                let items = match parser {
                    Parser::Claude => analysis::live_items(line),
                    Parser::Mapped(m) => analysis::mapped_live_items(m, line),
                };
                for mut item in items {
                    crate::agent::redact::redact_live(&mut item, secrets);
                    if let Some(f) = live_file.as_mut() {
                        let _ = f.write_all(crate::report::live_log_line(&item).as_bytes());
                    }
                    reporter.live(&item);
                }
            },
            // Reset times printed without a zone ("resets 7pm") are in the local zone.
            || analysis::Clock::new(wall.now(), jiff::tz::TimeZone::system()),
        )
        .await
        .map_err(HankError::usage)?;
        self.reporter.agent_finished();
        self.lock.record_agent(None);
        let mut analysis = called.analysis;
        crate::agent::redact::redact_analysis(&mut analysis, &self.secrets);
        Ok(AgentAnswer {
            analysis,
            duration: called.outcome.duration,
            startup_hang: called.outcome.facts.startup_hang,
            interrupted: called.outcome.facts.interrupted,
        })
    }
}
