//! `hank reset circuit|session|wait` (also `--reset-circuit`, `--reset-session`).

use crate::clock::SystemClock;
use crate::policy::time::Clock;

use crate::cli::ResetWhat;
use crate::error::Result;
use crate::exit;
use crate::store::{Event, EventKind};

use super::{project_dir, require_hank_dir};

/// `hank reset circuit|session|wait`. Refuses while a loop runs (it owns state.json).
pub(crate) fn run(what: ResetWhat) -> Result<u8> {
    let dir = project_dir()?;
    let store = require_hank_dir(&dir)?;
    let now = SystemClock::from_env()?.now();
    // A running loop owns state.json: say so, and how to get past it.
    let _lock = super::lock_or_hint(&store, "stop the running loop first (Ctrl-C), then reset")?;
    let loaded = store.load_state(now)?;
    let mut state = loaded.state;
    let msg = match what {
        ResetWhat::Circuit => {
            let t = state
                .breaker
                .reset(now, "manual reset (`hank reset circuit`)");
            if let Some(t) = &t {
                let event = Event::new(t.at, EventKind::from(t));
                store.append_event(&event.to_line())?;
            }
            "circuit breaker reset to CLOSED"
        }
        ResetWhat::Session => {
            state.session = None;
            "session forgotten: the next loop starts a new conversation"
        }
        ResetWhat::Wait => {
            state.wait = None;
            state.agents.limited.clear();
            "saved wait and usage limits cleared: the next start calls the agent at once"
        }
    };
    store.save_state(&state)?;
    if let Some(mut status) = store.read_status() {
        status.circuit_state = state.breaker.state;
        status.circuit_reason = state.breaker.reason.clone();
        status.session_id = state.session.as_ref().map(|s| s.id.clone());
        status.updated_at = now;
        store.write_status(&status)?;
    }
    errln!("hank: {msg}");
    Ok(exit::OK)
}
