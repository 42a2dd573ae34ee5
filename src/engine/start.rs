//! Starting the loop: the lock, the runtime and the signal handler, the real effects opened
//! (the stored state loaded, leftovers of a killed hank stopped), the run, the end.

use crate::agent::process;
use crate::agent::profile::Agent;
use crate::effects::{Effects, Real};
use crate::error::{HankError, Result};
use crate::policy::fixplan::Plan;
use crate::policy::time::Clock;
use crate::settings::Settings;
use crate::store::{State, Store};

use super::Engine;

/// Runs the loop until it stops: `settings` resolved, `agents` (the failover chain, at least
/// one) found and checked, `notes` (warnings found before the loop) reported once the event
/// log is open.
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
        let (fx, state, warnings) = Real::open(&settings, store, lock, cancel, clock, remote)?;
        let mut engine = Engine::new(settings, agents, state, Box::new(fx));
        // DELIVER=branch|pr: checked, and the work put on its branch, before any call.
        engine.delivery = crate::deliver::in_run::InRun::start(&engine.s)?;
        for note in warnings.into_iter().chain(notes) {
            engine.warn(&note);
        }
        let code = engine.run().await;
        engine.fx.close().await;
        code
    })
}

impl Engine {
    /// A driver over `fx` for a run of `s` with `agents`, from the stored `state`.
    pub(super) fn new(s: Settings, agents: Vec<Agent>, state: State, fx: Box<dyn Effects>) -> Self {
        let now = fx.now();
        let run = crate::policy::run::Run::new(crate::policy::run::RunConfig {
            deadline: None,
            loop_delay: jiff::SignedDuration::ZERO,
            on_usage_limit: crate::policy::decide::UsageLimitPolicy::Wait,
            failover: false,
            decide: crate::policy::decide::DecideConfig::default(),
            answer_wait: None,
        });
        Self {
            s,
            agents: agents.into_iter().map(std::sync::Arc::new).collect(),
            current: 0,
            handover: None,
            state,
            fx,
            run,
            seen: None,
            plan_text: String::new(),
            plan: Plan::default(),
            last_loop: None,
            wait: None,
            credential_warned: None,
            verify: crate::policy::verification::Verification::default(),
            run_deadline: None,
            run_started: now,
            logs_kept_from: None,
            limit_note: None,
            run_loops: Vec::new(),
            questions: Vec::new(),
            delivery: None,
        }
    }
}
