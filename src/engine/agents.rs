//! Which agent the next call goes to: the failover chain (`AGENTS`), the switches between
//! agents and their sessions. The rules are in [`crate::policy::failover`] (pure); this file
//! applies them, reports every switch (event, status, terminal) and waits when every agent is
//! limited.

use jiff::Timestamp;

use super::Engine;
use super::wait::Waited;
use crate::agent::profile::{Agent, DEFAULT_AGENT};
use crate::analysis::Analysis;
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::budget::WaitReason;
use crate::policy::decide::{Decision, UsageLimitPolicy};
use crate::policy::failover::Pick;
use crate::report::local_time;
use crate::store::EventKind;

/// What step 4b decided.
pub(super) enum Choice {
    /// Call [`Engine::agent`].
    Call,
    /// A wait ended: check everything again.
    Again,
    Stop(ExitReason),
}

impl Engine {
    /// The agent of the next call.
    pub(super) fn agent(&self) -> &std::sync::Arc<Agent> {
        &self.agents[self.current]
    }

    fn chain(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.name().to_owned()).collect()
    }

    /// Step 4b: the first agent of the chain that may be called now; waits while every one
    /// is limited, stops when none is left for this run.
    pub(super) async fn choose_agent(&mut self) -> Result<Choice> {
        let now = self.clock.now();
        match self.state.agents.pick(&self.chain(), now) {
            Pick::Use(i) => {
                let name = self.agents[i].name().to_owned();
                // A limit that has passed is forgotten.
                if self.state.agents.limited.remove(&name).is_some() {
                    self.save()?;
                }
                let current = self.state.agents.current_or(DEFAULT_AGENT).to_owned();
                if name != current {
                    self.switch_to(i, &current, now)?;
                }
                self.current = i;
                Ok(Choice::Call)
            }
            Pick::WaitUntil(until) => match self.wait_until(WaitReason::UsageLimit, until).await? {
                Waited::Stop(r) => Ok(Choice::Stop(r)),
                Waited::Done => Ok(Choice::Again),
            },
            Pick::NoneLeft => {
                let why: Vec<String> = self
                    .state
                    .agents
                    .limited
                    .iter()
                    .map(|(n, l)| format!("{n}: {} ({})", l.kind, l.message))
                    .collect();
                self.warn(&format!(
                    "no agent can work for the rest of this run: {}",
                    why.join("; ")
                ));
                Ok(Choice::Stop(ExitReason::AgentFatal))
            }
        }
    }

    /// Makes agent `i` current: its parked session comes back, `from`'s is parked; an
    /// `agent_switched` event and a line on the terminal say why.
    fn switch_to(&mut self, i: usize, from: &str, now: Timestamp) -> Result<()> {
        let to = self.agents[i].name().to_owned();
        let session = self.state.session.take();
        self.state.session = self.state.agents.switch(DEFAULT_AGENT, &to, session);
        let limited = self.state.agents.limited.get(from).cloned();
        let in_chain = self.agents.iter().any(|a| a.name() == from);
        let reason = match (&limited, in_chain) {
            (Some(l), _) => match l.until {
                Some(until) => {
                    format!("{from} is limited ({}) until {}", l.kind, local_time(until))
                }
                None => format!("{from} cannot work for the rest of this run ({})", l.kind),
            },
            (None, true) => format!("{to} comes first in AGENTS and may work again"),
            (None, false) => format!("this run uses {to} (the last one used {from})"),
        };
        self.store
            .log(now, &format!("agent {from} → {to}: {reason}"));
        // Handing over work matters to the agent only when another agent did some.
        if self.state.loop_count > 0 {
            self.handover = Some(from.to_owned());
        }
        if in_chain || self.state.loop_count > 0 {
            self.reporter
                .info(&format!("agent {from} → {to}: {reason}"));
            self.emit(EventKind::AgentSwitched {
                from: from.to_owned(),
                to,
                reason,
                until: limited.and_then(|l| l.until),
            })?;
        }
        self.save()
    }

    /// After an answer (failover chains only): an answer that says the agent cannot work for
    /// a while limits it, and when another agent can work the run goes on with it at once
    /// instead of waiting or stopping. When every agent is limited, the run waits for the
    /// first one back (or exits, with `ON_USAGE_LIMIT=exit`).
    pub(super) fn failover_after(&mut self, a: &Analysis, decision: Decision) -> Decision {
        if self.agents.len() < 2 || decision == Decision::Stop(ExitReason::Interrupted) {
            return decision;
        }
        let Some(err) = a.error.as_ref() else {
            return decision;
        };
        let now = self.clock.now();
        let name = self.agent().name().to_owned();
        if !self
            .state
            .agents
            .on_error(&name, err.kind, err.reset_at, &err.message, now)
        {
            return decision;
        }
        match self.state.agents.pick(&self.chain(), now) {
            Pick::Use(j) if j != self.current => {
                let next = self.agents[j].name().to_owned();
                self.reporter.info(&format!(
                    "{name} answered {}; the next loop uses {next}",
                    err.kind.as_str()
                ));
                Decision::Continue
            }
            Pick::WaitUntil(until) => {
                if self.s.on_usage_limit.value == UsageLimitPolicy::Exit {
                    Decision::Stop(ExitReason::UsageLimit)
                } else {
                    Decision::Wait {
                        until,
                        reason: WaitReason::UsageLimit,
                    }
                }
            }
            _ => decision,
        }
    }
}
