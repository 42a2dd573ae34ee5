//! The run's agents in failover order (`AGENTS`, [`Chain`]): the agent of the next call, the
//! turn it takes (the switch to report, the handover said once in the next loop's context),
//! and what the chain can do after an error ([`failover::after_error`]). Plain data over the
//! run's [`State`]: the driver tells and saves what comes back. The reviewer (`REVIEW_AGENT`,
//! [`Reviewer`]) and its rounds ([`crate::policy::review::Rounds`]).

use std::sync::Arc;

use jiff::Timestamp;

use crate::agent::profile::Agent;
use crate::analysis::Analysis;
use crate::policy::failover::{self, Switch};
use crate::policy::run::FailoverPick;
use crate::store::State;

/// The reviewer of a run (`REVIEW_AGENT`, resolved before any call) and its rounds.
#[derive(Debug, Default)]
pub struct Reviewer {
    pub agent: Option<Arc<Agent>>,
    pub rounds: crate::policy::review::Rounds,
}

/// The agents of a run (at least one) and whose turn it is.
#[derive(Debug, Clone)]
pub struct Chain {
    agents: Vec<Arc<Agent>>,
    /// Index of the agent of the next call.
    current: usize,
    /// The agent the current one took over from (said once in the next loop's context).
    handover: Option<String>,
}

impl Chain {
    /// The chain of `agents`, the first one's turn.
    #[must_use]
    pub fn new(agents: Vec<Agent>) -> Self {
        Self {
            agents: agents.into_iter().map(Arc::new).collect(),
            current: 0,
            handover: None,
        }
    }

    /// The agent of the next call.
    ///
    /// # Panics
    /// Never: a chain has at least one agent, and a turn goes only to one of them.
    #[must_use]
    pub fn agent(&self) -> &Arc<Agent> {
        &self.agents[self.current.min(self.agents.len().saturating_sub(1))]
    }

    /// The agents' names, in order.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.name().to_owned()).collect()
    }

    /// The agents, in order.
    pub fn agents(&self) -> impl Iterator<Item = &Agent> {
        self.agents.iter().map(AsRef::as_ref)
    }

    /// Whether more than one agent is in the chain (failover may happen).
    #[must_use]
    pub fn fails_over(&self) -> bool {
        self.agents.len() > 1
    }

    /// Agent `i` (the state machine's pick) takes the call ([`failover::Agents::take_turn`],
    /// times as `local` words them): whether `state` changed (to be saved) and the switch to
    /// report.
    pub fn take_turn(
        &mut self,
        i: usize,
        state: &mut State,
        local: impl Fn(Timestamp) -> String,
    ) -> (bool, Option<Switch>) {
        let (chain, st) = (self.names(), state);
        let turn = (st.agents).take_turn((&chain, i), &mut st.session, st.loop_count, local);
        self.current = i.min(self.agents.len().saturating_sub(1));
        if let Some(s) = turn.1.as_ref().filter(|s| s.handover) {
            self.handover = Some(s.from.clone());
        }
        turn
    }

    /// The agent the current one took over from, once.
    pub fn take_handover(&mut self) -> Option<String> {
        self.handover.take()
    }

    /// After the answer `a` at `now` (an error, failover chains only): what the chain can do
    /// now, for the state machine to decide, and the line to say.
    pub fn after_error(
        &self,
        state: &mut State,
        a: &Analysis,
        now: Timestamp,
    ) -> (FailoverPick, Option<String>) {
        let Some(err) = a.error.as_ref() else {
            return (FailoverPick::Unchanged, None);
        };
        let chain = self.names();
        failover::after_error(&mut state.agents, &chain, self.current, err, now)
    }
}
