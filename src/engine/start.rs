//! Starting the loop: the project claimed and the real effects opened
//! ([`crate::effects::claim`], [`Real::open`]), the runtime and the signal handler, the run,
//! the end.

use crate::agent::profile::Agent;
use crate::effects::{Effects, Real};
use crate::error::{HankError, Result};
use crate::policy::run::{Run, RunConfig};
use crate::policy::time::Clock;
use crate::settings::Settings;
use crate::store::State;

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
    let claimed = crate::effects::claim(&settings)?;
    let notes: Vec<String> = notes.into_iter().chain(claimed.note.clone()).collect();
    let runtime = crate::proc::runtime()
        .map_err(|e| HankError::Internal(format!("failed to start the async runtime: {e}")))?;
    runtime.block_on(async move {
        let cancel = crate::agent::signals::install()?;
        let (fx, state, warnings) = Real::open(&settings, claimed, cancel, clock)?;
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
        Self {
            s,
            agents: agents.into_iter().map(std::sync::Arc::new).collect(),
            current: 0,
            handover: None,
            state,
            run_started: fx.now(),
            fx,
            run: Run::new(RunConfig::default()),
            seen: None,
            plan_text: String::new(),
            plan: crate::policy::fixplan::Plan::default(),
            last_loop: None,
            wait: None,
            credential_warned: None,
            verify: crate::policy::verification::Verification::default(),
            limit_note: None,
            run_loops: Vec::new(),
            questions: Vec::new(),
            delivery: None,
        }
    }
}
