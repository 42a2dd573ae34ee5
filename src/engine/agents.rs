//! Which agent the next call goes to: the failover chain (`AGENTS`), the switches between
//! agents and their sessions. The rules are in [`crate::policy::failover`] (pure); this file
//! applies them and reports every switch (event, status, terminal); what a limited chain means
//! for the loop is [`crate::policy::run`]'s.

use super::Engine;
use crate::agent::profile::{Agent, DEFAULT_AGENT};
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

    /// Step 4b: agent `i` (the first of the chain that may be called now, see
    /// [`crate::policy::failover::Agents::pick`]) becomes the agent of the call.
    pub(super) fn use_agent(&mut self, i: usize) -> Result<()> {
        let name = self.agents[i].name().to_owned();
        // A limit that has passed is forgotten.
        if self.state.agents.limited.remove(&name).is_some() {
            self.save()?;
        }
        let current = self.state.agents.current_or(DEFAULT_AGENT).to_owned();
        if name != current {
            self.switch_to(i, &current)?;
        }
        self.current = i;
        Ok(())
    }

    /// Makes agent `i` current: its parked session comes back, `from`'s is parked; an
    /// `agent_switched` event and a line on the terminal say why.
    fn switch_to(&mut self, i: usize, from: &str) -> Result<()> {
        let to = self.agents[i].name().to_owned();
        let session = self.state.session.take();
        self.state.session = self.state.agents.switch(DEFAULT_AGENT, &to, session);
        let limited = self.state.agents.limited.get(from).cloned();
        let in_chain = self.agents.iter().any(|a| a.name() == from);
        let reason = failover::switch_reason((from, &to), limited.as_ref(), in_chain, local_time);
        // Handing over work matters to the agent only when another agent did some.
        if self.state.loop_count > 0 {
            self.handover = Some(from.to_owned());
        }
        self.tell(News::Switched {
            from,
            to: &to,
            reason: &reason,
            until: limited.and_then(|l| l.until),
            shown: in_chain || self.state.loop_count > 0,
        })?;
        self.save()
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
