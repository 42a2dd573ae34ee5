//! Which agent the next call goes to: the failover chain (`AGENTS`). The rules are in
//! [`crate::policy::failover`] (pure); this applies them and reports every switch; what a
//! limited chain means for the loop is [`crate::policy::run`]'s.

use super::Engine;
use crate::agent::profile::Agent;
use crate::analysis::Analysis;
use crate::effects::{News, Say};
use crate::error::Result;
use crate::policy::failover;
use crate::policy::run::FailoverPick;
use crate::report::local_time;

impl Engine {
    /// The agent of the next call.
    pub(super) fn agent(&self) -> &std::sync::Arc<Agent> {
        &self.agents[self.current]
    }

    pub(super) fn chain(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.name().to_owned()).collect()
    }

    /// Agent `i` (the state machine's pick) takes the call ([`failover::Agents::take_turn`]).
    pub(super) fn use_agent(&mut self, i: usize) -> Result<()> {
        let (chain, st) = (self.chain(), &mut self.state);
        let turn = (st.agents).take_turn((&chain, i), &mut st.session, st.loop_count, local_time);
        self.current = i;
        if let Some(s) = &turn.1 {
            if s.handover {
                self.handover = Some(s.from.clone());
            }
            self.tell(News::Switched(s))?;
        }
        if turn.0 { self.save() } else { Ok(()) }
    }

    /// After an answer with an error (failover chains only): what the chain can do now
    /// ([`failover::after_error`]) goes to the state machine, which decides.
    pub(super) fn failover_pick(&mut self, a: &Analysis) -> FailoverPick {
        let Some(err) = a.error.as_ref() else {
            return FailoverPick::Unchanged;
        };
        let (chain, now) = (self.chain(), self.fx.now());
        let (pick, line) =
            failover::after_error(&mut self.state.agents, &chain, self.current, err, now);
        if let Some(line) = line {
            self.fx.say(Say::Info(&line));
        }
        pick
    }
}
