//! `hank` / `hank run`: checks the project and the client, then runs the loop
//! ([`crate::engine`]); `--dry-run` prints the call it would make; `--monitor` starts the tmux
//! session instead.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::agent::argv;
use crate::agent::profile::{self, Agent};
use crate::cli::RunArgs;
use crate::clock::SystemClock;
use crate::deliver::outside;
use crate::effects::Real;
use crate::engine;
use crate::error::{HankError, Result};
use crate::policy::fixplan;
use crate::policy::time::Clock;
use crate::report::shell_quote;
use crate::settings::{self, AgentCommand, Settings};
use crate::store::Store;

/// `hank run` (and bare `hank`); `args` is the whole command line, forwarded by `--monitor`.
pub(crate) fn run(run: &RunArgs, args: &[OsString]) -> Result<u8> {
    super::recording_exit_code(run.record_exit_code, || run_checked(run, args))
}

fn run_checked(run: &RunArgs, args: &[OsString]) -> Result<u8> {
    if run.monitor {
        crate::monitor::tmux::require_tmux()?;
    }
    let project_dir = super::project_dir()?;
    // A fleet task's worker reads its repository from the checkout's records, never through
    // the worktree's `.git` file (which its agent can rewrite).
    crate::git::TaskWorktree::pin_from_env(&project_dir).map_err(|e| {
        HankError::usage_hint(
            format!(
                "{} is not the fleet task worktree its checkout records: {e}",
                project_dir.display()
            ),
            "the task's worktree was changed under hank; `hank fleet` makes a new one",
        )
    })?;
    check_layout(&project_dir)?;
    // Nothing of a configuration changed during a run is used (or executed) unapproved.
    crate::approval::require(&project_dir, run.accept_config, "hank run")?;
    let settings = settings::load(&run.flags, &project_dir)?;
    check_required_files(&settings)?;
    // The last run's delivery stopped part-way (the forge, no CI, Ctrl-C): it is finished with
    // that run's evidence, no new run.
    if !settings.dry_run && !run.monitor && settings.deliver.value != settings::DeliverMode::None {
        let store = Store::new(&project_dir);
        let events = crate::deliver::events_text(&store);
        if let Some(rec) = outside::open_record(&project_dir, &events) {
            let _notify = crate::notify::install(&settings, SystemClock::from_env()?.now());
            let _lock = super::lock_or_hint(&store, "let the running loop finish first")?;
            let opts = outside::Opts::default();
            let ended = outside::resume(&project_dir, &store, &settings, opts, rec)?;
            return Ok(ended.code);
        }
    }
    let mut notes = settings.warnings.clone();
    if settings.dry_run && !run.monitor && settings.deliver.value != settings::DeliverMode::None {
        notes.push(crate::deliver::in_run::dry_run_note(&settings));
    }
    if settings.dry_run && !run.monitor {
        let agent = dry_run_agent(&settings, &mut notes)?;
        for w in &notes {
            errln!("hank: warning: {w}");
        }
        return dry_run(&settings, &agent);
    }
    let agents = resolve_agents(&settings, &mut notes)?;
    if let Some(note) = nested_session(
        std::env::var("CLAUDECODE").ok().as_deref(),
        run.force,
        std::io::stdin().is_terminal(),
    )? {
        notes.push(note);
    }
    if run.monitor {
        // Everything `hank run` would refuse is refused here, in the user's terminal, before
        // any tmux session exists: flags, .hankrc, files, agents, the client, the lock.
        for agent in &agents {
            if agent.profile.is_claude() {
                check_client(&agent.command)?;
            }
        }
        drop(Store::new(&project_dir).lock()?);
        let mut rest: Vec<OsString> = args.iter().skip(1).cloned().collect();
        if rest.first().is_some_and(|a| a.as_os_str() == "run") {
            rest.remove(0);
        }
        let forwarded: Vec<OsString> = rest
            .into_iter()
            .filter(|a| a.as_os_str() != "--monitor" && a.as_os_str() != "--monitor-exit")
            .collect();
        return crate::monitor::launch_tmux(&forwarded, &project_dir, !run.monitor_exit);
    }
    let clock = SystemClock::from_env()?;
    for agent in &agents {
        if agent.profile.is_claude() {
            notes.extend(check_client(&agent.command)?);
        }
        if !agent.profile.allowed_tools {
            notes.push(format!(
                "{} cannot be limited to ALLOWED_TOOLS: the list is given to it in the loop \
                 context to follow, and its own sandbox and approval settings apply (see \
                 `hank agents`)",
                agent.name()
            ));
        }
    }
    let record = crate::approval::begin_run(&project_dir)?;
    let result = start(settings, agents, notes, Box::new(clock));
    match record.end() {
        Ok(changed) if !changed.is_empty() => errln!(
            "hank: warning: the configuration changed during this run; the next run, `hank \
             doctor` and `hank agents` need your approval first (`hank config accept`):\n  - {}",
            changed.join("\n  - ")
        ),
        Ok(_) => {}
        Err(e) => errln!("hank: warning: cannot record the configuration's approval: {e}"),
    }
    result
}

/// Runs the loop until it stops: the project claimed, the runtime, the signal handler and
/// the real effects opened ([`crate::effects::claim`], [`Real::open`]), the delivery made
/// (`DELIVER`: [`crate::deliver::in_run::InRun::new`], started by the driver before any
/// call), then the driver ([`engine::drive`]);
/// `notes` are told once the event log is open.
fn start(
    settings: Settings,
    agents: Vec<Agent>,
    notes: Vec<String>,
    clock: Box<dyn Clock>,
) -> Result<u8> {
    let claimed = crate::effects::claim(&settings)?;
    let notes: Vec<String> = notes.into_iter().chain(claimed.note.clone()).collect();
    let runtime = crate::proc::runtime()
        .map_err(|e| HankError::Internal(format!("failed to start the async runtime: {e}")))?;
    runtime.block_on(async move {
        let cancel = crate::agent::signals::install()?;
        let (fx, state, warnings) = Real::open(&settings, claimed, cancel, clock)?;
        let notes = warnings.into_iter().chain(notes).collect();
        // DELIVER=branch|pr: started by the delivery machine's first command, before any
        // call (the engine's entry runs no git).
        let git = std::sync::Arc::new(crate::deliver::in_run::RealGit);
        let delivery = crate::deliver::in_run::InRun::new(&settings, git);
        engine::drive(settings, agents, state, Box::new(fx), notes, delivery).await
    })
}

/// Started from inside a Claude Code session (`CLAUDECODE=1`): the nested agent draws on
/// the same account's limits and windows as the session around it. A warning with a terminal
/// (the user sees it) or `--force`; without either, an error (a script or an agent started
/// hank, perhaps by mistake).
fn nested_session(claudecode: Option<&str>, force: bool, terminal: bool) -> Result<Option<String>> {
    if claudecode.map(str::trim) != Some("1") {
        return Ok(None);
    }
    let what = "hank is running inside a Claude Code session (CLAUDECODE=1): the agents it starts share that session's usage limits and windows";
    if force || terminal {
        return Ok(Some(what.to_string()));
    }
    Err(HankError::usage_hint(
        what,
        "run hank from a plain terminal, or pass --force to run it nested anyway",
    ))
}

/// The agents of the run (the failover chain): the first must be usable; a later one that is
/// not installed or has a bad profile is left out with a warning.
fn resolve_agents(s: &Settings, notes: &mut Vec<String>) -> Result<Vec<Agent>> {
    let mut agents = Vec::new();
    for (i, name) in s.agent_chain().iter().enumerate() {
        match profile::resolve(name, s) {
            Ok(a) => agents.push(a),
            Err(e) if i > 0 => notes.push(format!("{e}; left out of AGENTS for this run")),
            Err(e) => return Err(e),
        }
    }
    Ok(agents)
}

/// The agent `--dry-run` shows: the first of the chain, also when its program is not
/// installed (then its command is shown as configured, with a note saying so).
fn dry_run_agent(s: &Settings, notes: &mut Vec<String>) -> Result<Agent> {
    let name = s
        .agent_chain()
        .into_iter()
        .next()
        .unwrap_or_else(|| profile::DEFAULT_AGENT.to_string());
    match profile::resolve(&name, s) {
        Ok(a) => Ok(a),
        Err(HankError::Usage { message, hint }) => {
            let prof = profile::load(&name, &s.project_dir)?;
            let program = profile::program_of(&prof, s);
            let mut words = program.value.split_whitespace().map(ToString::to_string);
            let first = words.next().unwrap_or_else(|| prof.program.clone());
            notes.push(format!(
                "{message}: nothing is called in a dry run; the command below is what hank \
                 would run once it is installed{}",
                hint.map(|h| format!(" — {h}")).unwrap_or_default()
            ));
            Ok(Agent {
                profile: prof,
                command: AgentCommand {
                    program: first.into(),
                    leading_args: words.collect(),
                },
            })
        }
        Err(e) => Err(e),
    }
}

/// Asks the client for its version once per run: a release older than the oldest tested
/// one is refused (exit 1, with the upgrade command); a newer or unreadable one runs with a
/// warning. Also names the client settings hank removes from the agent's environment.
fn check_client(agent: &AgentCommand) -> Result<Vec<String>> {
    use crate::agent::client::{self, Support, Version};
    let range = client::tested_range();
    let mut notes = Vec::new();
    match client::probe(&agent.program, &agent.leading_args, Duration::from_secs(10)) {
        Ok(line) => match Version::parse(&line) {
            Some(v) => match range.support(v) {
                Support::TooOld => {
                    return Err(HankError::usage_hint(
                        format!(
                            "{} is Claude Code {v}, older than the oldest supported release {}",
                            agent.program.display(),
                            range.oldest
                        ),
                        format!(
                            "upgrade it: {} (or `claude update`), or point --claude-cmd / \
                             CLAUDE_CODE_CMD at a newer client",
                            client::UPGRADE_COMMAND
                        ),
                    ));
                }
                Support::Newer => notes.push(range.describe(v)),
                Support::Tested => {}
            },
            None => notes.push(format!(
                "{} --version printed {line:?}, not a Claude Code version; \
                 hank is tested with {}–{}",
                agent.program.display(),
                range.oldest,
                range.newest
            )),
        },
        Err(why) => notes.push(format!(
            "could not read the client's version ({why}); hank is tested with {}–{}",
            range.oldest, range.newest
        )),
    }
    for key in client::ENV_REMOVED {
        if std::env::var_os(key).is_some() {
            notes.push(format!(
                "{key} is set: removed from the agent's environment (the client would sleep \
                 through usage limits inside hank's timeout; hank waits for them itself, visibly)"
            ));
        }
    }
    Ok(notes)
}

/// A flat layout (root PROMPT.md + fix_plan.md) without `.hank/`: the user must migrate.
fn check_layout(dir: &Path) -> Result<()> {
    if dir.join(".hank").is_dir() {
        return Ok(());
    }
    let flat = dir.join("PROMPT.md").is_file()
        && (dir.join("fix_plan.md").is_file() || dir.join("@fix_plan.md").is_file());
    if flat {
        return Err(HankError::usage_hint(
            "this project uses the old flat layout (PROMPT.md and fix_plan.md at the root)",
            "run `hank migrate` to move them into .hank/",
        ));
    }
    Err(HankError::usage_hint(
        format!("{} is not a hank project (no .hank/ folder)", dir.display()),
        "run `hank enable` here, or `hank setup NAME` for a new project",
    ))
}

fn check_required_files(s: &Settings) -> Result<()> {
    s.check_special_files()?;
    let missing = s.missing_files();
    if missing.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
    Err(HankError::usage_hint(
        format!("missing required file(s): {}", list.join(", ")),
        "run `hank enable --repair` to recreate the missing ones (it touches nothing that exists)",
    ))
}

/// What `--dry-run` shows in place of the reviewer's prompt (made from the diff at the round).
const REVIEW_PROMPT_SHOWN: &str = "(the review prompt: the run's diff, its done items, the check)";

/// `--dry-run`: builds the agent command and prompt for one loop (and the reviewer's
/// command with REVIEW_AGENT), calls nothing.
fn dry_run(s: &Settings, agent: &Agent) -> Result<u8> {
    let store = Store::new(&s.project_dir);
    let now = SystemClock::from_env()?.now();
    let state = store.read_state()?;
    let plan_text = s.read_fix_plan().unwrap_or_default();
    let plan = fixplan::parse(&plan_text, &s.optional_sections.value);
    let prompt_path = s.prompt_path();
    let prompt = s.read_prompt()?;
    let same_agent = state.agents.current_or(profile::DEFAULT_AGENT) == agent.name();
    let resume = s
        .resumable(state.session.as_ref(), now)
        .filter(|_| same_agent && agent.profile.resume)
        .map(|x| x.id.clone());
    let context = argv::loop_context(&state, &plan, state.loop_count + 1);
    let prompt_file = store.loop_log(state.loop_count + 1, "prompt");
    let prepared = argv::prepare(agent, s, resume.as_deref(), &context, &prompt, &prompt_file);
    // For display only: words of CLAUDE_CODE_CMD may carry a secret.
    let args =
        crate::agent::redact::redacted(&prepared.args, &crate::agent::redact::secret_values());
    let stdin = prepared.prompt_file.unwrap_or(prepared.stdin);
    // REVIEW_AGENT: the reviewer's read-only command, as a round would start it.
    let reviewer = crate::agent::profile::resolve_reviewer(s)?.map(|r| {
        let p = argv::prepare_review(&r, s, REVIEW_PROMPT_SHOWN.as_bytes(), &prompt_file);
        let args = crate::agent::redact::redacted(&p.args, &crate::agent::redact::secret_values());
        (r, args)
    });
    let mut out = std::io::stdout().lock();
    let settings: Vec<serde_json::Value> = s
        .describe()
        .into_iter()
        .map(|(k, v, src)| json!({"key": k, "value": v, "source": src}))
        .collect();
    let written = if s.json {
        let obj = json!({
            "program": agent.command.program.display().to_string(),
            "args": args,
            "stdin": String::from_utf8_lossy(&stdin),
            "context_bytes": context.len(),
            "settings": settings,
            "reviewer": reviewer.as_ref().map(|(r, args)| json!({
                "agent": r.name(),
                "program": r.command.program.display().to_string(),
                "args": args,
            })),
        });
        writeln!(out, "{obj}")
    } else {
        let mut cmd = vec![shell_quote(&agent.command.program.display().to_string())];
        cmd.extend(args.iter().map(|a| shell_quote(a)));
        let mut text = String::new();
        text.push_str("# agent command (no shell is used; quoted here for reading)\n");
        text.push_str(&cmd.join(" "));
        text.push_str(&format!(
            "\n\n# stdin: the loop context ({} bytes), then {} ({} bytes)\n",
            context.len(),
            prompt_path.display(),
            prompt.len()
        ));
        text.push_str(&String::from_utf8_lossy(&stdin));
        if let Some((r, args)) = &reviewer {
            let mut cmd = vec![shell_quote(&r.command.program.display().to_string())];
            cmd.extend(args.iter().map(|a| shell_quote(a)));
            text.push_str(&format!(
                "\n# reviewer (REVIEW_AGENT={}): reads the run's diff read-only before a \
                 verified completion is accepted; its prompt is made at the round\n",
                r.name()
            ));
            text.push_str(&cmd.join(" "));
            text.push('\n');
        }
        text.push_str("\n# settings\n");
        for (k, v, src) in s.describe() {
            text.push_str(&format!("{k:<32} {v:<24} ({src})\n"));
        }
        write!(out, "{text}")
    };
    written.map_err(|e| HankError::io("failed to write to", "standard output", e))?;
    Ok(crate::exit::OK)
}
