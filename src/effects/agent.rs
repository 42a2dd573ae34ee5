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
use crate::sandbox::guard::{Change, Guard};

/// What the agent's environment never carries: the client settings that fight the loop
/// ([`crate::agent::client::ENV_REMOVED`]) and, in a fleet, where the fleet-wide call ledger is
/// (an agent that knew it could empty the ledger and lift every task's call cap).
pub(crate) const AGENT_ENV_REMOVED: &[&str] = &[
    "CLAUDE_CODE_RETRY_WATCHDOG",
    crate::store::fleet_ledger::ENV,
    crate::git::TASK_CHECKOUT_ENV,
    crate::git::TASK_REPOS_ENV,
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
    // The trackers `hank watch` reads and writes (`tracker/`): hank's, never the agent's.
    "LINEAR_API_KEY",
    "JIRA_API_TOKEN",
    "JIRA_EMAIL",
    "TRELLO_KEY",
    "TRELLO_TOKEN",
    "PLANE_API_KEY",
    "SHORTCUT_API_TOKEN",
];

/// What names the user's session to a sandboxed agent: the sockets of its agents, buses,
/// displays, terminal multiplexers and editors (Landlock does not govern `connect()` on a Unix
/// socket's path: an agent told where one is could ask the SSH agent to sign, the keyring for
/// a secret, tmux to type into another pane, the editor to run a command), the runtime folder
/// that holds most of them, and the Kerberos ticket cache. A sandboxed agent never gets them,
/// whatever the profile passes; an unconfined one (`SANDBOX=off`) keeps them.
pub(crate) const SESSION_ENV: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "SSH_ASKPASS",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "WAYLAND_DISPLAY",
    "WAYLAND_SOCKET",
    "DISPLAY",
    "XAUTHORITY",
    "KRB5CCNAME",
    "GNOME_KEYRING_CONTROL",
    "GNOME_KEYRING_PID",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "ZELLIJ",
    "ZELLIJ_SESSION_NAME",
    "KITTY_LISTEN_ON",
    "KITTY_WINDOW_ID",
    "WEZTERM_UNIX_SOCKET",
    "ALACRITTY_SOCKET",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "EMACS_SOCKET_NAME",
    "VSCODE_IPC_HOOK_CLI",
    "VSCODE_GIT_IPC_HANDLE",
    "VSCODE_GIT_ASKPASS_MAIN",
    "VSCODE_GIT_ASKPASS_NODE",
    "VSCODE_GIT_ASKPASS_EXTRA_ARGS",
    "GIT_ASKPASS",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "PULSE_SERVER",
    "PIPEWIRE_REMOTE",
    "SWAYSOCK",
    "I3SOCK",
    "HYPRLAND_INSTANCE_SIGNATURE",
];

/// What is removed from an agent's environment: [`AGENT_ENV_REMOVED`], every credential of
/// [`CREDENTIALS`] but those the profile passes on purpose (`pass`), every `GIT_CONFIG_*`
/// variable of hank's environment (`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`/`KEY_n`/
/// `VALUE_n`: how hank's own steps in Actions give git the token's header), and for a
/// `sandboxed` agent the user's session ([`SESSION_ENV`]).
#[must_use]
pub(crate) fn removed_for(pass: &[String], sandboxed: bool) -> Vec<String> {
    let git_config = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with("GIT_CONFIG_"));
    let session = SESSION_ENV.iter().filter(|_| sandboxed);
    AGENT_ENV_REMOVED
        .iter()
        .chain(CREDENTIALS.iter().filter(|c| !pass.iter().any(|p| p == *c)))
        .chain(session)
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
        self.task_record_holds(&s.project_dir, false)?;
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
        let mut env_set = agent.env();
        // The rules come from the repository hank recorded at the run's start: a `.git` the
        // last call changed stops the run before anything is derived from it.
        self.guard_before()?;
        let mut rules = self.sandbox.prepare(agent, s, &mut env_set);
        if c.read_only
            && let Some(r) = rules.as_mut()
        {
            r.read_only_in(&s.project_dir);
        }
        // The client's configuration the agent could write under these rules, kept now and
        // put back after the call (the rest of it is read only to the agent).
        let client_guard = rules
            .as_ref()
            .map(|r| Sandboxing::client_guard(&agent.profile.sandbox, r));
        let removed = removed_for(&agent.profile.pass_env, rules.is_some());
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
            // Streamed lines are read whenever the answer streams: the client's retries of an
            // overloaded API show in status.json with or without --live.
            live: s.live.value || streaming,
            env_remove: &env_remove,
            env_set: &env_set,
            stop_after_result: matches!(agent.profile.parser, Parser::Claude),
            marker: Some(&self.marker),
            idle_timeout: watch(s.idle_timeout.value),
            first_output_timeout: watch(s.first_output_timeout.value),
            sandbox: rules.as_ref(),
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
        let show_live = s.live.value;
        let mut retries = Retries {
            store: &self.store,
            notify: &self.notify,
            base: self.last_status.as_ref(),
            json: self.json,
            seen: None,
        };
        // The call's stop: the user's signals, and a `hank ctl stop` given while it runs (the
        // control journal is read about twice a second during the call; what it takes is
        // handed to the loop at its next poll).
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(*self.cancel.borrow());
        let watch_stop = watch_stop(
            self.cancel.clone(),
            &stop_tx,
            self.control.as_mut(),
            &mut self.taken_in_call,
            &*self.clock,
        );
        let call = call::call(
            spawn,
            parser,
            argv::asked_format(agent, s),
            stop_rx,
            on_spawn,
            |line| {
                let items = match parser {
                    Parser::Claude => analysis::live_items(line),
                    Parser::Mapped(m) => analysis::mapped_live_items(m, line),
                };
                for mut item in items {
                    crate::agent::redact::redact_live(&mut item, secrets);
                    retries.seen(&item, wall.now(), reporter);
                    if !show_live {
                        continue;
                    }
                    if let Some(f) = live_file.as_mut() {
                        let _ = f.write_all(crate::report::live_log_line(&item).as_bytes());
                    }
                    reporter.live(&item);
                }
            },
            // Reset times printed without a zone ("resets 7pm") are in the local zone.
            || analysis::Clock::new(wall.now(), jiff::tz::TimeZone::system()),
        );
        let called = tokio::select! {
            called = call => called,
            never = watch_stop => match never {},
        };
        self.sandbox.end_call();
        // A task's last call is checked too: its commits are never imported then.
        self.task_record_holds(&s.project_dir, true)?;
        self.guard_after()?;
        let changes = client_guard.map(Guard::undo).unwrap_or_default();
        let called = called.map_err(HankError::usage);
        self.config_changed(agent.name(), &changes)?;
        let called = called?;
        self.reporter.agent_finished();
        self.lock.record_agent(None);
        self.egress_denied()?;
        let mut analysis = called.analysis;
        crate::agent::redact::redact_analysis(&mut analysis, &self.secrets);
        self.sandbox_denied(&analysis)?;
        Ok(AgentAnswer {
            analysis,
            duration: called.outcome.duration,
            startup_hang: called.outcome.facts.startup_hang,
            interrupted: called.outcome.facts.interrupted,
        })
    }
}

/// How often the control journal is read during a call (one `stat` when it did not move).
const CONTROL_IN_CALL: Duration = Duration::from_millis(500);

/// Watches a call's stop until the call ends (never returns): forwards the user's signals
/// (`signals`) to `stop`, and reads the control journal every [`CONTROL_IN_CALL`]; a `hank
/// ctl stop` among its commands stops the call at once (as one Ctrl-C: the agent's process
/// group is asked to end, killed after [`GRACE`]). The commands taken are kept in `taken`
/// for the loop's next poll.
async fn watch_stop(
    mut signals: tokio::sync::watch::Receiver<u32>,
    stop: &tokio::sync::watch::Sender<u32>,
    mut control: Option<&mut crate::control::LiveControl>,
    taken: &mut Vec<crate::policy::run::Control>,
    clock: &dyn crate::policy::time::Clock,
) -> std::convert::Infallible {
    let mut signals_open = true;
    loop {
        tokio::select! {
            changed = signals.changed(), if signals_open => {
                if changed.is_err() {
                    signals_open = false;
                } else {
                    let n = *signals.borrow();
                    stop.send_modify(|v| *v = (*v).max(n));
                }
            }
            () = tokio::time::sleep(CONTROL_IN_CALL) => {
                if let Some(c) = control.as_deref_mut() {
                    let commands = c.poll(clock.now());
                    if commands.contains(&crate::policy::run::Control::Stop) {
                        stop.send_modify(|v| *v = (*v).max(1));
                    }
                    taken.extend(commands);
                }
            }
        }
    }
}

/// The client's retries of a failed API call during one call (Claude Code's `api_retry`
/// events): each shown in status.json (`api_retry`: attempt, error, next try) while the call
/// lasts; the first one of the call also said on the terminal, logged, and recorded as the
/// `api_retry` event (one notification). The next status the run publishes drops it.
struct Retries<'a> {
    store: &'a crate::store::Store,
    notify: &'a crate::notify::Hook,
    /// status.json as last published (the retry is shown in it).
    base: Option<&'a crate::store::Status>,
    json: bool,
    seen: Option<crate::store::schema::ApiRetry>,
}

impl Retries<'_> {
    fn seen(
        &mut self,
        item: &analysis::LiveItem,
        now: jiff::Timestamp,
        reporter: &crate::report::Reporter,
    ) {
        let analysis::LiveItem::Retry {
            attempt,
            error,
            max_retries,
            delay_ms,
            status,
        } = item
        else {
            return;
        };
        let delay = delay_ms.and_then(|ms| i64::try_from(ms).ok());
        let retry = crate::store::schema::ApiRetry {
            attempt: *attempt,
            max_retries: *max_retries,
            error: error.split(" (HTTP ").next().unwrap_or(error).to_owned(),
            http_status: *status,
            next_at: delay
                .and_then(|ms| now.checked_add(jiff::SignedDuration::from_millis(ms)).ok()),
            since: self.seen.as_ref().map_or(now, |r| r.since),
        };
        let first = self.seen.is_none();
        let mut shown = self.base.cloned().unwrap_or_default();
        shown.api_retry = Some(retry.clone());
        shown.updated_at = now;
        let _ = self.store.write_status(&shown);
        if first {
            let tz = jiff::tz::TimeZone::system();
            let words = retry.words(|t| t.to_zoned(tz.clone()).strftime("%H:%M:%S").to_string());
            reporter.warn(&words);
            self.store.log(now, &format!("warning: {words}"));
            let event = crate::store::Event::new(
                now,
                crate::store::EventKind::ApiRetry(Box::new(retry.clone())),
            );
            let items = (shown.fix_plan.done, shown.fix_plan.total);
            let told = super::output::Told {
                store: self.store,
                notify: self.notify,
                reporter,
                json: self.json,
            };
            // An events.jsonl that cannot be written does not stop the call.
            let _ = told.event(&event, now, shown.total_cost_usd, items);
        }
        self.seen = Some(retry);
    }
}

/// SANDBOX for one run: the decision, and with Landlock the egress proxy, the private TMPDIR
/// and the refusals not yet told to the agent.
pub(crate) struct Sandboxing {
    pub(crate) confinement: crate::sandbox::Confinement,
    /// The project's repository as recorded at the run's start (confined runs only): checked
    /// before and after each call, its configuration and hooks put back after it.
    guard: Option<crate::sandbox::repo::RepoGuard>,
    proxy: Option<crate::sandbox::proxy::Proxy>,
    tmp: Option<tempfile::TempDir>,
    /// The folder of the proxy's Unix socket (where the agent's network namespace hands over
    /// its listening socket).
    _handover: Option<tempfile::TempDir>,
    /// The run's network namespace and the agent's view of the file system, held for the run
    /// and entered by each call (started at the first call, from its rules).
    holder: std::sync::Mutex<Holder>,
    notes: Vec<crate::policy::run::Control>,
    /// The latest refusals (`host:port at TIME`), for status.json.
    denied: Vec<String>,
    /// The hosts already said in this run (each is said once).
    told: std::collections::BTreeSet<String>,
    /// The refused file accesses of this run, each once, newest last.
    files: Vec<String>,
    /// The rules of each agent (program, folder, profile) as resolved at its first call and
    /// frozen for the run: nothing the agent writes later changes them, and no call resolves
    /// them again.
    frozen: std::sync::Mutex<Vec<(FrozenKey, crate::sandbox::Rules)>>,
}

/// The run's namespace holder ([`crate::proc::agent::NamespaceHolder`]).
#[derive(Debug)]
enum Holder {
    /// Started at the first call that gets a network namespace, with its view.
    Later,
    Running(crate::proc::agent::NamespaceHolder),
    /// None: no namespace for the agent, or the holder could not start (each call then makes
    /// its own: the same confinement, at a higher cost per call).
    Never,
}

/// What a call's rules are resolved from, besides the run's settings.
type FrozenKey = (
    std::path::PathBuf,
    std::path::PathBuf,
    crate::sandbox::ProfileSandbox,
);

/// Refusals kept for status.json.
const DENIED_SHOWN: usize = 10;

impl Sandboxing {
    /// The run's confinement (SANDBOX against this kernel), with a warning when `auto` finds no
    /// Landlock.
    ///
    /// # Errors
    /// `SANDBOX=landlock` without Landlock ABI 4 (exit 1, nothing started), or the proxy or
    /// TMPDIR cannot be made.
    pub(crate) fn open(s: &crate::settings::Settings) -> Result<(Self, Vec<String>)> {
        use crate::sandbox::{Confinement, Extras, available, decide};
        let mut confinement = decide(s.sandbox.value, available(), Extras::here(), || {
            crate::proc::agent::netns_probe()
        })
        .map_err(HankError::usage)?;
        let mut warnings = Vec::new();
        if let Confinement::Unconfined { warn: true, .. } = &confinement {
            warnings.push(confinement.describe());
        }
        // What a hank killed with SIGKILL left (whatever this run's SANDBOX).
        remove_stale(&std::env::temp_dir());
        let (mut proxy, mut tmp, mut handover, mut holder) = (None, None, None, Holder::Never);
        if let Confinement::Landlock { netns, .. } = &mut confinement {
            let mut p = crate::sandbox::proxy::Proxy::start(Vec::new()).map_err(|e| {
                HankError::usage(format!(
                    "SANDBOX: cannot open the egress proxy on 127.0.0.1: {e}"
                ))
            })?;
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            warnings.extend(crate::sandbox::refused_grants(
                &s.sandbox_read.value,
                &s.sandbox_write.value,
                home.as_deref(),
            ));
            tmp = Some(private_tmp(TMP_PREFIX).map_err(|e| {
                HankError::usage(format!("SANDBOX: cannot make the agent's TMPDIR: {e}"))
            })?);
            if netns.is_ok() {
                // The proxy's Unix socket, where the namespace hands over its listening
                // socket, in a folder of its own (0700) that the agent can neither read nor
                // write. Without it, no namespace is claimed.
                let made = private_tmp(EGRESS_PREFIX)
                    .and_then(|d| p.listen_unix(&d.path().join("proxy.sock")).map(|()| d));
                match made {
                    Ok(d) => handover = Some(d),
                    Err(e) => *netns = Err(format!("the proxy's Unix socket: {e}")),
                }
                // One namespace for the run, entered by each call, started at the first.
                if netns.is_ok() {
                    holder = Holder::Later;
                }
            }
            proxy = Some(p);
        }
        let guard = matches!(confinement, Confinement::Landlock { .. }).then(|| {
            crate::sandbox::repo::RepoGuard::record(
                &s.project_dir,
                crate::git::Checkout::at(&s.project_dir)
                    .reader_dirs()
                    .map(|(git_dir, _)| git_dir),
            )
        });
        Ok((
            Self {
                confinement,
                guard,
                proxy,
                tmp,
                _handover: handover,
                holder: std::sync::Mutex::new(holder),
                notes: Vec::new(),
                denied: Vec::new(),
                told: std::collections::BTreeSet::new(),
                files: Vec::new(),
                frozen: std::sync::Mutex::new(Vec::new()),
            },
            warnings,
        ))
    }

    /// The rules of the next call of `agent` in the project (`None`: unconfined), its allowed
    /// hosts given to the proxy, and the sandbox's variables added to `env` ([`sandbox_env`]).
    fn prepare(
        &self,
        agent: &super::Agent,
        s: &crate::settings::Settings,
        env: &mut Vec<(String, String)>,
    ) -> Option<crate::sandbox::Rules> {
        self.rules_for(
            &agent.profile.sandbox,
            &agent.command.program,
            &s.project_dir,
            s,
            env,
        )
    }

    /// The rules of a call of `program` (whose profile's `[sandbox]` is `sandbox`) working in
    /// `cwd` (`None`: unconfined); its allowed hosts given to the proxy, the sandbox's
    /// variables added to `env`. `hank import` confines its conversion call with it.
    pub(crate) fn rules_for(
        &self,
        sandbox: &crate::sandbox::ProfileSandbox,
        program: &std::path::Path,
        cwd: &std::path::Path,
        s: &crate::settings::Settings,
        env: &mut Vec<(String, String)>,
    ) -> Option<crate::sandbox::Rules> {
        let (proxy, tmp) = (self.proxy.as_ref()?, self.tmp.as_ref()?);
        let lookup = |key: &str| {
            env.iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(key).ok())
        };
        proxy.set_allowed(crate::sandbox::allowed_hosts(
            sandbox,
            lookup,
            &s.sandbox_allow_hosts.value,
        ));
        let key: FrozenKey = (program.to_path_buf(), cwd.to_path_buf(), sandbox.clone());
        let mut frozen = self
            .frozen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let rules = if let Some((_, rules)) = frozen.iter().find(|(k, _)| *k == key) {
            rules.clone()
        } else {
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            // A folder that cannot be made stays out of the rules: the client then reports
            // what it could not write.
            let _ = crate::sandbox::make_state_dirs(&sandbox.state, home.as_deref());
            let path = std::env::var_os("PATH");
            let rules = crate::sandbox::Rules::for_agent(&crate::sandbox::Place {
                cwd,
                home: home.as_deref(),
                tmp: tmp.path(),
                program,
                path: path.as_deref(),
                client_write: &sandbox.state,
                client_config: &sandbox.config,
                extra_read: &s.sandbox_read.value,
                extra_write: &s.sandbox_write.value,
                proxy_port: proxy.port(),
                netns: proxy.socket().filter(|_| self.confinement.netns()),
                held: None,
            });
            frozen.push((key, rules.clone()));
            rules
        };
        drop(frozen);
        // The run's namespace, entered while its holder runs (looked at each call).
        let mut rules = rules;
        rules.held = rules.netns.as_ref().and_then(|_| self.held_for(&rules));
        env.extend(sandbox_env(&proxy.url(), tmp.path()));
        Some(rules)
    }

    /// What a call with `rules` enters of the run's held namespaces ([`Holder`]), the holder
    /// started with the view of these rules at the first call.
    fn held_for(&self, rules: &crate::sandbox::Rules) -> Option<crate::sandbox::netns::Held> {
        use crate::proc::agent::NamespaceHolder;
        let mut holder = self
            .holder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(*holder, Holder::Later) {
            // Without its view (a mount the kernel refused), the namespace alone still saves
            // each call making one.
            *holder = NamespaceHolder::start(Some(rules))
                .or_else(|_| NamespaceHolder::start(None))
                .map_or(Holder::Never, Holder::Running);
        }
        match &*holder {
            Holder::Running(h) => h.held_for(rules),
            Holder::Later | Holder::Never => None,
        }
    }

    /// The client's configuration (`[sandbox] config`) that the agent could write under
    /// `rules` — the entries that lie in a path it writes —, kept before its call.
    pub(crate) fn client_guard(
        sandbox: &crate::sandbox::ProfileSandbox,
        rules: &crate::sandbox::Rules,
    ) -> Guard {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let roots = crate::sandbox::guard::guarded(&sandbox.config, &rules.write, home.as_deref());
        let state: Vec<std::path::PathBuf> = (sandbox.state.iter())
            .filter_map(|e| crate::sandbox::expand(e, home.as_deref()))
            .chain(rules.write.iter().cloned())
            .collect();
        Guard::take(roots, &state)
    }

    /// A note for the next loop's context (taken once, [`Sandboxing::take_notes`]).
    fn note(&mut self, text: String) {
        self.notes.push(crate::policy::run::Control::Note(
            crate::policy::run::ContextNote {
                kind: crate::policy::run::NoteKind::Note,
                text,
            },
        ));
    }

    /// status.json's `sandbox` line and latest refusals.
    pub(crate) fn describe_in(&self, status: &mut crate::store::Status) {
        status.sandbox = Some(self.confinement.describe());
        status.egress_denied.clone_from(&self.denied);
        let over = self.files.len().saturating_sub(DENIED_SHOWN);
        status.sandbox_denied = self.files[over..].to_vec();
    }

    /// The call is over: the listening socket its network namespace handed over is shut.
    pub(crate) fn end_call(&self) {
        if let Some(proxy) = &self.proxy {
            proxy.end_call();
        }
    }

    /// The egress proxy's refusals since the last take (none when unconfined).
    pub(crate) fn take_denied(&self) -> Vec<crate::sandbox::proxy::Denied> {
        self.proxy
            .as_ref()
            .map(crate::sandbox::proxy::Proxy::take_denied)
            .unwrap_or_default()
    }

    /// The refusals for the next loop's context (taken once).
    pub(crate) fn take_notes(&mut self) -> Vec<crate::policy::run::Control> {
        std::mem::take(&mut self.notes)
    }
}

/// A guarded file's change in words.
fn verb(what: &str) -> &'static str {
    match what {
        "added" => "added",
        "removed" => "removed",
        _ => "changed",
    }
}

/// The agent's private TMPDIR: `hank-agent-tmp-PID-TICKS-XXXXXX` in the system's temp folder.
const TMP_PREFIX: &str = "hank-agent-tmp-";
/// The folder of the egress proxy's Unix socket: `hank-egress-PID-TICKS-XXXXXX`.
const EGRESS_PREFIX: &str = "hank-egress-";

/// A new folder of this hank's in the system's temp folder, mode 0700, named `PREFIX` + the
/// owner's pid and start time + random letters (the next start removes it if this hank was
/// killed before its drop did: [`remove_stale`]).
fn private_tmp(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    let pid = std::process::id();
    let ticks = i32::try_from(pid)
        .ok()
        .and_then(crate::proc::agent::start_ticks)
        .unwrap_or(0);
    tempfile::Builder::new()
        .prefix(&format!("{prefix}{pid}-{ticks}-"))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}

/// The owner (pid, start time) a [`private_tmp`] folder's name says (pure).
fn owner_of(name: &str) -> Option<(i32, u64)> {
    let rest = [TMP_PREFIX, EGRESS_PREFIX]
        .iter()
        .find_map(|p| name.strip_prefix(p))?;
    let mut parts = rest.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let ticks = parts.next()?.parse().ok()?;
    parts.next().filter(|r| !r.is_empty())?;
    Some((pid, ticks))
}

/// Removes the [`private_tmp`] folders in `dir` that a hank of this user left when it was
/// killed (SIGKILL, a crash: no drop ran): a folder owned by this user whose owner process is
/// gone (its pid not running since the start time in the name). Folders of hanks still
/// running, of other users, links and other names stay.
fn remove_stale(dir: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, ticks)) = name.to_str().and_then(owner_of) else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        // A start time that could not be read (0) never says the owner is gone.
        if ticks == 0
            || !meta.is_dir()
            || meta.uid() != me
            || crate::proc::agent::is_running(pid, ticks)
        {
            continue;
        }
        let _ = std::fs::remove_dir_all(&path);
    }
}

/// What a sandboxed agent's environment gets: the egress proxy in every proxy variable (and no
/// host exempt from it) and the private TMPDIR.
fn sandbox_env(proxy: &str, tmp: &std::path::Path) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .map(|k| ((*k).to_string(), proxy.to_string()))
    .collect();
    env.push(("NO_PROXY".into(), String::new()));
    env.push(("no_proxy".into(), String::new()));
    env.push(("TMPDIR".into(), tmp.display().to_string()));
    env
}

impl Real {
    /// The changes of the client's configuration the guard found after a call of `agent` (and
    /// undid where it could): a `client_config_changed` event each, a warning naming the
    /// files, and one note for the next loop's context.
    fn config_changed(&mut self, agent: &str, changes: &[Change]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let now = self.clock.now();
        let mut named = Vec::new();
        for c in changes {
            let path = c.path.display().to_string();
            let event = crate::store::Event::new(
                now,
                crate::store::EventKind::ClientConfigChanged {
                    agent: agent.to_owned(),
                    path: path.clone(),
                    change: c.kind.name().to_owned(),
                    undone: c.undone.is_ok(),
                    why_not: c.undone.as_ref().err().cloned(),
                },
            );
            self.write_event(&event, 0.0, (0, 0))?;
            let outcome = match &c.undone {
                Ok(()) => "undone".to_owned(),
                Err(why) => format!("NOT undone: {why}"),
            };
            self.store.log(
                now,
                &format!(
                    "sandbox: the agent {} {path} (client configuration; {outcome})",
                    c.kind.name()
                ),
            );
            named.push(format!("{path} ({}, {outcome})", c.kind.name()));
        }
        let list = crate::sanitize::line(&named.join(", "));
        self.reporter.warn(&format!(
            "sandbox: the agent changed {agent}'s configuration: {list}"
        ));
        self.sandbox.note(format!(
                    "hank undid your changes to {agent}'s own configuration ({list}): the client's settings, hooks, MCP servers, memory files, commands and plugins are the user's and read only to you. Do not change them again."
        ));
        Ok(())
    }

    /// Before a confined call: `.git` is what was recorded at the run's start (else the run
    /// stops, a `security` event naming the file), and the files git runs programs from are
    /// saved.
    fn guard_before(&mut self) -> Result<()> {
        self.guard_check("before the call")?;
        if let Some(g) = self.sandbox.guard.as_mut() {
            g.save();
        }
        Ok(())
    }

    /// After a confined call: the same check, then whatever the agent changed among the
    /// repository's configuration, hooks and `info/` is put back, each file a `security`
    /// event, a warning, and a note for the next loop's context. A change that could not be
    /// undone stops the run.
    fn guard_after(&mut self) -> Result<()> {
        self.guard_check("during the call")?;
        let Some(g) = self.sandbox.guard.as_mut() else {
            return Ok(());
        };
        let undone = g.restore();
        if undone.is_empty() {
            return Ok(());
        }
        let now = self.clock.now();
        let mut stuck = Vec::new();
        for u in &undone {
            let (action, message) = if u.restored {
                (
                    "undone",
                    format!(
                        "the agent {} {}; hank put it back (git would run what it says outside the sandbox)",
                        verb(u.what),
                        u.file
                    ),
                )
            } else {
                stuck.push(u.file.clone());
                (
                    "not_undone",
                    format!(
                        "the agent {} {} and hank could not put it back",
                        verb(u.what),
                        u.file
                    ),
                )
            };
            let event = crate::store::Event::new(
                now,
                crate::store::EventKind::Security {
                    file: u.file.clone(),
                    action: action.into(),
                    message: message.clone(),
                },
            );
            self.write_event(&event, 0.0, (0, 0))?;
            self.store.log(now, &format!("sandbox: {message}"));
            self.reporter.warn(&format!("sandbox: {message}"));
        }
        let list = undone
            .iter()
            .map(|u| u.file.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        self.sandbox.note(format!(
                    "hank's sandbox undid your changes to {list}: the repository's git configuration, hooks and info/ are the user's and are not to be changed by the agent. Do not change them again."
        ));
        if stuck.is_empty() {
            return Ok(());
        }
        Err(HankError::usage_hint(
            format!(
                "security: the agent changed {} and hank could not put it back; the run stops before git runs it",
                stuck.join(", ")
            ),
            "look at the file (`git config --local --list`, the hooks folder), restore it, then `hank config accept`",
        ))
    }

    /// `.git` and `commondir` as recorded, else the run stops with a `security` event.
    fn guard_check(&mut self, when: &str) -> Result<()> {
        let Some(g) = self.sandbox.guard.as_mut() else {
            return Ok(());
        };
        let Err(t) = g.check() else {
            return Ok(());
        };
        let file = t.file.display().to_string();
        let message = format!(
            "{file} changed {when}: it {}; the sandbox's rules and hank's git come from it, so the run stops",
            t.what
        );
        self.security_stop(&file, &message)?;
        Err(HankError::usage_hint(
            format!("security: {message}"),
            format!("put {file} back as it was (the agent changed it), then start the run again"),
        ))
    }

    /// A fleet task's record (issue 47): the worktree's `.git` file, its git dir's `gitdir`
    /// and `commondir`, the agent repository's `commondir` and alternates as hank recorded them
    /// at the task's start ([`crate::git::TaskWorktree::tampered`]). One changed: a `security` event
    /// naming it, and the run stops before the call (the fleet fails the task with the reason);
    /// after the call too (`after`) for a task with its own repository. The same for the
    /// task's other repositories' worktrees inside it (a workspace of several, issue 51).
    fn task_record_holds(&mut self, dir: &std::path::Path, after: bool) -> Result<()> {
        let at = crate::git::Checkout::at(dir);
        let Some(task) = at.task() else {
            return Ok(());
        };
        let nested = crate::git::TaskWorktree::nested_of_process()
            .iter()
            .map(|(_, n)| n);
        let Some((file, what)) = std::iter::once(task)
            .chain(nested)
            .filter(|t| !after || t.agent.is_some())
            .find_map(crate::git::TaskWorktree::tampered)
        else {
            return Ok(());
        };
        let file = file.display().to_string();
        let message = format!("security: {file}: {what}; the task's run stops");
        self.security_stop(&file, &message)?;
        Err(HankError::usage(message))
    }

    /// What changed the place the run's rules come from, recorded before the run stops: a
    /// `security` event (`action: stopped`) naming `file`, and a line of the log.
    fn security_stop(&mut self, file: &str, message: &str) -> Result<()> {
        let now = self.clock.now();
        let event = crate::store::Event::new(
            now,
            crate::store::EventKind::Security {
                file: file.to_owned(),
                action: "stopped".into(),
                message: message.to_owned(),
            },
        );
        self.write_event(&event, 0.0, (0, 0))?;
        self.store.log(
            now,
            &format!("sandbox: {}", message.trim_start_matches("security: ")),
        );
        Ok(())
    }

    /// The egress proxy's refusals of the call, each host said once in a run: an
    /// `egress_denied` event, a warning and one note for the next loop's context so that the
    /// agent stops retrying; status.json lists each host once, at its latest refusal. Every
    /// refusal is a line of the log.
    fn egress_denied(&mut self) -> Result<()> {
        let Some(proxy) = self.sandbox.proxy.as_ref() else {
            return Ok(());
        };
        let denied = proxy.take_denied();
        if denied.is_empty() {
            return Ok(());
        }
        let now = self.clock.now();
        let mut hosts: Vec<String> = Vec::new();
        for d in &denied {
            self.store
                .log(now, &format!("sandbox: refused {} at {}", d.host, d.at));
            let host = format!("{} at ", d.host);
            self.sandbox.denied.retain(|e| !e.starts_with(&host));
            self.sandbox.denied.push(format!("{} at {}", d.host, d.at));
            if self.sandbox.told.insert(d.host.clone()) {
                let event = crate::store::Event::new(
                    now,
                    crate::store::EventKind::EgressDenied {
                        host: d.host.clone(),
                    },
                );
                self.write_event(&event, 0.0, (0, 0))?;
                hosts.push(d.host.clone());
            }
        }
        let over = self.sandbox.denied.len().saturating_sub(DENIED_SHOWN);
        self.sandbox.denied.drain(..over);
        if hosts.is_empty() {
            return Ok(());
        }
        let list = hosts.join(", ");
        self.reporter.warn(&format!(
            "sandbox: the agent was refused {list} (not an allowed host; said once a run). It matters only if the work needs it — a client also calls its vendor's default hosts when its API is pointed elsewhere — and then SANDBOX_ALLOW_HOSTS allows it"
        ));
        self.sandbox.note(format!(
                    "hank's sandbox refused connections to {list}: only the agent's API and SANDBOX_ALLOW_HOSTS are reachable. Do not retry them; say in your answer if the work needs them."
        ));
        Ok(())
    }
}

/// Refused file accesses kept per run (each said once).
const FILES_KEPT: usize = 1000;

impl Real {
    /// The refused file accesses the answer named, under hank's sandbox only (unconfined, a
    /// refusal is the system's, not the sandbox's): each path once in a run, a
    /// `sandbox_denied` event, a log line, a warning and one note for the next loop's context
    /// naming SANDBOX_WRITE / SANDBOX_READ; status.json lists the latest.
    fn sandbox_denied(&mut self, a: &crate::analysis::Analysis) -> Result<()> {
        if self.sandbox.proxy.is_none() || a.refused_paths.is_empty() {
            return Ok(());
        }
        let now = self.clock.now();
        let mut new: Vec<String> = Vec::new();
        for path in &a.refused_paths {
            if self.sandbox.files.contains(path) {
                continue;
            }
            let event = crate::store::Event::new(
                now,
                crate::store::EventKind::SandboxDenied { path: path.clone() },
            );
            self.write_event(&event, 0.0, (0, 0))?;
            self.store
                .log(now, &format!("sandbox: refused a file access: {path}"));
            self.sandbox.files.push(path.clone());
            new.push(path.clone());
        }
        let over = self.sandbox.files.len().saturating_sub(FILES_KEPT);
        self.sandbox.files.drain(..over);
        if new.is_empty() {
            return Ok(());
        }
        let list = new.join(", ");
        self.reporter.warn(&format!(
            "sandbox: the agent was refused {list}; allow a path in .hankrc with SANDBOX_WRITE (to write it) or SANDBOX_READ (to read it)"
        ));
        self.sandbox.note(format!(
                    "hank's sandbox refused access to {list}: outside the project only what SANDBOX_WRITE and SANDBOX_READ allow is reachable. Do not retry it; if the work needs it, say so in your answer (the user can allow it with SANDBOX_WRITE or SANDBOX_READ in .hankrc)."
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_folders_name_says_its_owner() {
        assert_eq!(owner_of("hank-agent-tmp-123-456-AbC12x"), Some((123, 456)));
        assert_eq!(owner_of("hank-egress-9-10-x-y"), Some((9, 10)));
        for other in [
            "hank-agent-tmp-AbC12x",
            "hank-agent-tmp-123-456-",
            "hank-agent-tmp-123-x-AbC",
            "hank-import-123-456-x",
            "other",
        ] {
            assert_eq!(owner_of(other), None, "{other}");
        }
    }

    /// Stale: this user's folder whose owner is gone; kept: a running owner's, an unreadable
    /// start time's, another name, a link.
    #[test]
    fn only_folders_of_gone_owners_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let ticks = crate::proc::agent::start_ticks(i32::try_from(me).unwrap()).unwrap();
        let gone = root
            .path()
            .join(format!("{TMP_PREFIX}{me}-{}-old", ticks + 1));
        let alive = root.path().join(format!("{TMP_PREFIX}{me}-{ticks}-new"));
        let unknown = root.path().join(format!("{EGRESS_PREFIX}{me}-0-x"));
        let other = root.path().join("hank-agent-tmp-legacy");
        for d in [&gone, &alive, &unknown, &other] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(gone.join("f"), "x").unwrap();
        let target = root.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let link = root
            .path()
            .join(format!("{TMP_PREFIX}{me}-{}-link", ticks + 1));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        remove_stale(root.path());
        assert!(!gone.exists());
        for kept in [&alive, &unknown, &other, &link, &target] {
            assert!(kept.exists(), "{}", kept.display());
        }
        let made = private_tmp(TMP_PREFIX).unwrap();
        let mode = std::fs::metadata(made.path()).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o700
        );
        let name = made
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(owner_of(&name), Some((i32::try_from(me).unwrap(), ticks)));
    }

    #[test]
    fn a_confined_agent_never_gets_the_users_session_sockets() {
        let confined = removed_for(&["SSH_AUTH_SOCK".to_string()], true);
        for key in [
            "SSH_AUTH_SOCK",
            "DBUS_SESSION_BUS_ADDRESS",
            "XDG_RUNTIME_DIR",
            "TMUX",
            "DISPLAY",
        ] {
            assert!(confined.iter().any(|r| r == key), "{key}");
        }
        let unconfined = removed_for(&[], false);
        assert!(!unconfined.iter().any(|r| r == "SSH_AUTH_SOCK"));
        assert!(unconfined.iter().any(|r| r == "GH_TOKEN"));
    }
}
