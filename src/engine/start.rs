//! Starting the loop: the lock, the runtime and the signal handler, the stored state (moved
//! aside when unreadable), an agent group orphaned by a killed hank stopped.

use tokio::sync::watch;

use super::Engine;
use crate::agent::process;
use crate::agent::profile::Agent;
use crate::error::{HankError, Result};
use crate::policy::fixplan::Plan;
use crate::policy::time::Clock;
use crate::report::{DisplayMode, Reporter};
use crate::settings::Settings;
use crate::store::{LockGuard, Store};

/// SIGTERM to SIGKILL for what a killed hank left running (its agent's call is over: only
/// its cleanup is waited for).
const ORPHAN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs the loop until it stops: `settings` resolved, `agents` (the failover chain, at least
/// one) found and checked, `notes`
/// (warnings found before the loop) reported once the event log is open.
pub(crate) fn start(
    settings: Settings,
    agents: Vec<Agent>,
    notes: Vec<String>,
    clock: Box<dyn Clock>,
) -> Result<u8> {
    // The call ledger has a copy in the per-user state directory (outside the agent's reach).
    let store = Store::new(&settings.project_dir)
        .with_ledger_copy(crate::store::userdir::project_dir(&settings.project_dir)?.join("calls"))
        .with_user_control()?;
    store.ensure_dirs()?;
    let lock = store.lock()?;
    // The agent's descendants that leave its group are re-parented to hank (and stopped with
    // it); the agent cannot reach hank's memory or open files (its answer) through /proc.
    process::become_subreaper();
    process::protect_self();
    // CONTROL_TOPIC: signed remote commands, read on a thread of their own into the journal.
    let (remote, remote_note) =
        crate::control::remote::topic(&settings)?.map_or(Ok((None, None)), |topic| {
            crate::control::remote::RemotePoller::start(
                settings.project_dir.clone(),
                store.clone(),
                topic,
                crate::control::remote::POLL_EVERY,
            )
        })?;
    let notes: Vec<String> = notes.into_iter().chain(remote_note).collect();
    let runtime = crate::proc::runtime()
        .map_err(|e| HankError::Internal(format!("failed to start the async runtime: {e}")))?;
    runtime.block_on(async move {
        let cancel = crate::agent::signals::install()?;
        let signals = cancel.clone();
        let control = crate::control::LiveControl::open(store.clone()).with_remote(remote);
        let fx = Box::new(super::drive::Real(clock, Some(control)));
        let mut engine = Engine::new(settings, agents, store, cancel, lock, fx)?;
        // DELIVER=branch|pr: checked, and the work put on its branch, before any call.
        engine.delivery = crate::deliver::in_run::InRun::start(&engine.s)?;
        for note in notes {
            engine.warn(&note);
        }
        let code = engine.run().await;
        engine.notify.finish(signals).await;
        code
    })
}

impl Engine {
    pub(super) fn new(
        s: Settings,
        agents: Vec<Agent>,
        store: Store,
        cancel: watch::Receiver<u32>,
        lock: LockGuard,
        clock: Box<dyn super::drive::Effects>,
    ) -> Result<Self> {
        let reporter = Reporter::new(DisplayMode::detect(), s.verbose.value);
        let now = clock.now();
        let mut loaded = store.load_state(now)?;
        loaded.state.ledger.prune(now);
        let marker = process::Marker::new(&s.project_dir);
        let notify = crate::notify::Hook::new(&s, now);
        let mut engine = Self {
            notify,
            s,
            agents: agents.into_iter().map(std::sync::Arc::new).collect(),
            current: 0,
            handover: None,
            store,
            state: loaded.state,
            reporter,
            cancel,
            run: crate::policy::run::Run::new(crate::policy::run::RunConfig {
                deadline: None,
                loop_delay: jiff::SignedDuration::ZERO,
                on_usage_limit: crate::policy::decide::UsageLimitPolicy::Wait,
                failover: false,
                decide: crate::policy::decide::DecideConfig::default(),
                answer_wait: None,
            }),
            seen: None,
            plan_text: String::new(),
            plan: Plan::default(),
            last_loop: None,
            wait: None,
            secrets: crate::agent::redact::secret_values(),
            lock,
            credential_warned: None,
            limit_note: None,
            run_loops: Vec::new(),
            verify: super::verify::Verify::default(),
            run_deadline: None,
            run_started: now,
            logs_kept_from: None,
            clock,
            marker,
            delivery: None,
        };
        // A hank of this project killed with SIGKILL may have left its agent running (its
        // group, and anything carrying the project's marker): we hold the lock, so no loop of
        // the project runs and all of it is left over.
        let recorded = engine.lock.orphaned_agent();
        // Descendants that left the agent's group (and maybe dropped the marker) were
        // recorded while it ran.
        let procs = engine.lock.orphaned_procs();
        let stopped = process::stop_recorded(&procs, ORPHAN_GRACE)
            + process::stop_orphans(&engine.marker.project, recorded, ORPHAN_GRACE);
        if stopped > 0 {
            engine.warn(&format!(
                "stopped {stopped} agent process(es) left running by a hank that was killed{}",
                recorded.map_or_else(String::new, |(pgid, _)| format!(" (process group {pgid})"))
            ));
        }
        if recorded.is_some() || !procs.is_empty() {
            engine.lock.record_agent(None);
        }
        // Likewise a VERIFY_COMMAND that was running when hank (or `hank verify`) was killed.
        if let Some((pgid, ticks)) = engine.lock.orphaned_verify() {
            if process::stop_orphan_group(pgid, ticks) {
                engine.warn(&format!(
                    "stopped the VERIFY_COMMAND left running by a hank that was killed (process group {pgid})"
                ));
            }
            engine.lock.record_verify(None);
        }
        if let Some(aside) = loaded.moved_aside {
            engine.warn(&format!(
                "state.json {}; moved it aside to {} and started a fresh state",
                loaded.problem,
                aside.display()
            ));
        }
        if !loaded.clamped.is_empty() {
            engine.warn(&format!(
                "state.json held times in the future (the clock went back?): {} set to now",
                loaded.clamped.join(", ")
            ));
        }
        for note in engine.store.take_notes() {
            engine.warn(&note);
        }
        Ok(engine)
    }
}
