//! Failover between agents (`AGENTS="claude,codex"`). **\[pure\]**
//!
//! The chain is ordered by preference. Before each call hank picks the first agent that may be
//! called now: one that is not limited, or whose limit has passed — so when the first agent's
//! usage window resets, hank returns to it. An answer that says the agent cannot work for a
//! while limits it: a usage limit until its reset time; a spend cap, a billing problem or a
//! failed login for the rest of the run (a new run tries it again: the user may have fixed it).
//! With one agent nothing is ever limited here; the exit decision handles the answer as always.
//!
//! The state (`state.json` → `agents`) also parks the session of each agent that is not the
//! current one, so a return resumes where that agent stopped, and counts what each agent cost.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::analysis::{ErrorKind, Tokens};
use crate::policy::session::Session;

/// The next calls go to another agent ([`Agents::take_turn`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    pub from: String,
    pub to: String,
    /// Why, for the user ([`switch_reason`]).
    pub reason: String,
    /// When `from` may work again, if it is limited until a time.
    pub until: Option<Timestamp>,
    /// The next context says who worked before (a loop has run).
    pub handover: bool,
    /// Said and recorded as an event (not for the silent first pick of a run).
    pub shown: bool,
}

/// The agent when none is named (and the owner of a session stored before profiles existed).
pub const DEFAULT_AGENT: &str = "claude";

/// A name a profile file may have: letters, digits, `-` and `_`.
#[must_use]
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A usage limit without a reset time keeps the agent aside this long.
pub const UNKNOWN_RESET: SignedDuration = SignedDuration::from_hours(1);

/// Why an agent may not be called, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limited {
    /// The error kind that limited it (`usage_limit`, `spend_limit`, `auth`, `billing`).
    pub kind: String,
    /// When it may be called again; `None`: not again in this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
    pub since: Timestamp,
    pub message: String,
}

/// What one agent cost (all runs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentUsage {
    pub calls: u64,
    pub cost_usd: f64,
    pub tokens: u64,
}

/// The agents' part of `state.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Agents {
    /// The agent whose session `state.session` is (absent: `claude`, as before profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limited: BTreeMap<String, Limited>,
    /// Sessions of the agents that are not current, to resume when hank returns to them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sessions: BTreeMap<String, Session>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usage: BTreeMap<String, AgentUsage>,
    /// For agents that report a session's running token total: the last total per agent,
    /// with its session id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub session_tokens: BTreeMap<String, (String, Tokens)>,
}

/// Which agent to call now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The agent at this index of the chain.
    Use(usize),
    /// Every agent is limited; the first comes back at this time.
    WaitUntil(Timestamp),
    /// Every agent is limited for the rest of the run.
    NoneLeft,
}

impl Agents {
    /// The current agent's name.
    #[must_use]
    pub fn current_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.current.as_deref().unwrap_or(default)
    }

    /// At the start of a run: limits without an end (login, spend cap) and limits that have
    /// passed are forgotten.
    pub fn on_run_start(&mut self, now: Timestamp) {
        self.limited
            .retain(|_, l| l.until.is_some_and(|until| until > now));
    }

    /// The first agent of `chain` that may be called at `now`.
    #[must_use]
    pub fn pick(&self, chain: &[String], now: Timestamp) -> Pick {
        let mut earliest: Option<Timestamp> = None;
        for (i, name) in chain.iter().enumerate() {
            match self.limited.get(name) {
                None => return Pick::Use(i),
                Some(l) => match l.until {
                    Some(until) if until <= now => return Pick::Use(i),
                    Some(until) => earliest = Some(earliest.map_or(until, |e| e.min(until))),
                    None => {}
                },
            }
        }
        earliest.map_or(Pick::NoneLeft, Pick::WaitUntil)
    }

    /// Records an answer of `agent` that failed with `kind`: limits the agent when the kind
    /// means it cannot work for a while (see the module doc). Returns whether it was limited.
    pub fn on_error(
        &mut self,
        agent: &str,
        kind: ErrorKind,
        reset_at: Option<Timestamp>,
        message: &str,
        now: Timestamp,
    ) -> bool {
        let until = match kind {
            ErrorKind::UsageLimit => Some(
                reset_at
                    .filter(|r| *r > now)
                    .unwrap_or_else(|| now.saturating_add(UNKNOWN_RESET).unwrap_or(now)),
            ),
            ErrorKind::SpendLimit | ErrorKind::Auth | ErrorKind::Billing => None,
            _ => return false,
        };
        self.limited.insert(
            agent.to_owned(),
            Limited {
                kind: kind.as_str().to_owned(),
                until,
                since: now,
                message: message.to_owned(),
            },
        );
        true
    }

    /// Makes `to` the current agent: parks the session of the agent that was current and
    /// returns `to`'s parked session (to become `state.session`).
    pub fn switch(&mut self, default: &str, to: &str, session: Option<Session>) -> Option<Session> {
        let from = self.current_or(default).to_owned();
        if from == to {
            return session;
        }
        if let Some(s) = session {
            self.sessions.insert(from, s);
        }
        self.current = Some(to.to_owned());
        self.sessions.remove(to)
    }

    /// Agent `i` of `chain` takes the next call: its limit, passed, is forgotten; when it is not
    /// the current agent, `session` is parked and `to`'s comes back ([`Agents::switch`]).
    /// Returns whether anything changed (state.json is saved then) and the switch to report.
    pub fn take_turn(
        &mut self,
        (chain, i): (&[String], usize),
        session: &mut Option<Session>,
        loops: u64,
        local: impl Fn(Timestamp) -> String,
    ) -> (bool, Option<Switch>) {
        let to = chain.get(i).cloned().unwrap_or_default();
        let forgot = self.limited.remove(&to).is_some();
        let from = self.current_or(DEFAULT_AGENT).to_owned();
        if to == from {
            return (forgot, None);
        }
        *session = self.switch(DEFAULT_AGENT, &to, session.take());
        let limited = self.limited.get(&from);
        let in_chain = chain.contains(&from);
        let switch = Switch {
            reason: switch_reason((&from, &to), limited, in_chain, local),
            until: limited.and_then(|l| l.until),
            // Handing over work matters to the agent only when another agent did some.
            handover: loops > 0,
            shown: in_chain || loops > 0,
            from,
            to,
        };
        (true, Some(switch))
    }

    /// This call's tokens from a running session total: the total minus what the same
    /// session had reported before (a new session counts whole). Remembers the new total.
    pub fn tokens_of_call(&mut self, agent: &str, session: Option<&str>, total: Tokens) -> Tokens {
        let Some(session) = session else {
            return total;
        };
        let before = match self.session_tokens.get(agent) {
            Some((id, t)) if id == session => *t,
            _ => Tokens::default(),
        };
        self.session_tokens
            .insert(agent.to_owned(), (session.to_owned(), total));
        Tokens {
            input: total.input.saturating_sub(before.input),
            output: total.output.saturating_sub(before.output),
            cache_read: total.cache_read.saturating_sub(before.cache_read),
            cache_creation: total.cache_creation.saturating_sub(before.cache_creation),
        }
    }

    /// Adds one call of `agent` to its usage.
    pub fn count(&mut self, agent: &str, cost_usd: f64, tokens: u64) {
        let u = self.usage.entry(agent.to_owned()).or_default();
        u.calls = u.calls.saturating_add(1);
        if cost_usd.is_finite() && cost_usd >= 0.0 {
            u.cost_usd += cost_usd;
        }
        u.tokens = u.tokens.saturating_add(tokens);
    }
}

/// Why the run switches from agent `from` to `to` (`limited`: `from`'s limit, if any;
/// `in_chain`: `from` is in this run's AGENTS; `local`: a time as the user reads it).
#[must_use]
pub fn switch_reason(
    (from, to): (&str, &str),
    limited: Option<&Limited>,
    in_chain: bool,
    local: impl Fn(Timestamp) -> String,
) -> String {
    match (limited, in_chain) {
        (Some(l), _) => match l.until {
            Some(until) => format!("{from} is limited ({}) until {}", l.kind, local(until)),
            None => format!("{from} cannot work for the rest of this run ({})", l.kind),
        },
        (None, true) => format!("{to} comes first in AGENTS and may work again"),
        (None, false) => format!("this run uses {to} (the last one used {from})"),
    }
}

/// What a stop because no agent can work says: each agent and why.
#[must_use]
pub fn none_can_work(agents: &Agents) -> String {
    let why: Vec<String> = (agents.limited.iter())
        .map(|(n, l)| format!("{n}: {} ({})", l.kind, l.message))
        .collect();
    format!(
        "no agent can work for the rest of this run: {}",
        why.join("; ")
    )
}

/// After an answer with the error `err` from agent `current` of `chain` (failover chains
/// only): an error that says the agent cannot work for a while limits it; what the chain can do
/// then goes to the state machine, which decides — another agent at once (with the line that
/// says so), every one limited until a time, or nothing changed.
pub fn after_error(
    agents: &mut Agents,
    chain: &[String],
    current: usize,
    err: &crate::analysis::AgentError,
    now: Timestamp,
) -> (crate::policy::run::FailoverPick, Option<String>) {
    use crate::policy::run::FailoverPick;
    let name = chain.get(current).cloned().unwrap_or_default();
    if !agents.on_error(&name, err.kind, err.reset_at, &err.message, now) {
        return (FailoverPick::Unchanged, None);
    }
    match agents.pick(chain, now) {
        Pick::Use(j) if j != current => {
            let next = chain.get(j).map_or("", String::as_str);
            let line = format!(
                "{name} answered {}; the next loop uses {next}",
                err.kind.as_str()
            );
            (FailoverPick::Other, Some(line))
        }
        Pick::WaitUntil(until) => (FailoverPick::AllLimitedUntil(until), None),
        Pick::Use(_) | Pick::NoneLeft => (FailoverPick::Unchanged, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn chain() -> Vec<String> {
        vec!["claude".into(), "codex".into(), "gemini".into()]
    }

    #[test]
    fn pick_table() {
        let now = t("2026-11-24T10:00:00Z");
        let later = t("2026-11-24T11:00:00Z");
        let sooner = t("2026-11-24T10:30:00Z");
        let earlier = t("2026-11-24T09:00:00Z");
        // (limited: name → until (None = run), expected)
        type Limits<'a> = Vec<(&'a str, Option<Timestamp>)>;
        let cases: Vec<(Limits<'_>, Pick)> = vec![
            (vec![], Pick::Use(0)),
            (vec![("claude", Some(later))], Pick::Use(1)),
            (vec![("claude", Some(earlier))], Pick::Use(0)),
            (vec![("claude", Some(now))], Pick::Use(0)),
            (vec![("claude", None)], Pick::Use(1)),
            (vec![("claude", Some(later)), ("codex", None)], Pick::Use(2)),
            (
                vec![
                    ("claude", Some(later)),
                    ("codex", Some(sooner)),
                    ("gemini", None),
                ],
                Pick::WaitUntil(sooner),
            ),
            (
                vec![("claude", None), ("codex", None), ("gemini", None)],
                Pick::NoneLeft,
            ),
        ];
        for (limited, expected) in cases {
            let mut a = Agents::default();
            for (name, until) in &limited {
                a.limited.insert(
                    (*name).into(),
                    Limited {
                        kind: "usage_limit".into(),
                        until: *until,
                        since: earlier,
                        message: String::new(),
                    },
                );
            }
            assert_eq!(a.pick(&chain(), now), expected, "{limited:?}");
        }
    }

    #[test]
    fn errors_that_limit_an_agent() {
        let now = t("2026-11-24T10:00:00Z");
        let reset = t("2026-11-24T14:00:00Z");
        // (kind, reset, limited?, until)
        let cases = [
            (ErrorKind::UsageLimit, Some(reset), true, Some(reset)),
            (
                ErrorKind::UsageLimit,
                None,
                true,
                Some(t("2026-11-24T11:00:00Z")),
            ),
            // A reset in the past is no reset: the default hour applies.
            (
                ErrorKind::UsageLimit,
                Some(t("2026-11-24T09:00:00Z")),
                true,
                Some(t("2026-11-24T11:00:00Z")),
            ),
            (ErrorKind::SpendLimit, None, true, None),
            (ErrorKind::Auth, None, true, None),
            (ErrorKind::Billing, None, true, None),
            (ErrorKind::RateLimit, Some(reset), false, None),
            (ErrorKind::Overloaded, None, false, None),
            (ErrorKind::Network, None, false, None),
        ];
        for (kind, reset_at, limited, until) in cases {
            let mut a = Agents::default();
            assert_eq!(
                a.on_error("claude", kind, reset_at, "m", now),
                limited,
                "{kind:?}"
            );
            assert_eq!(
                a.limited.get("claude").and_then(|l| l.until),
                until,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn run_start_forgets_limits_without_an_end_and_past_ones() {
        let now = t("2026-11-24T10:00:00Z");
        let mut a = Agents::default();
        a.on_error("claude", ErrorKind::Auth, None, "m", now);
        a.on_error(
            "codex",
            ErrorKind::UsageLimit,
            Some(t("2026-11-24T12:00:00Z")),
            "m",
            now,
        );
        a.on_error(
            "gemini",
            ErrorKind::UsageLimit,
            Some(t("2026-11-24T10:30:00Z")),
            "m",
            now,
        );
        a.on_run_start(t("2026-11-24T11:00:00Z"));
        let left: Vec<&String> = a.limited.keys().collect();
        assert_eq!(left, ["codex"]);
    }

    #[test]
    fn switching_parks_and_restores_sessions() {
        let now = t("2026-11-24T10:00:00Z");
        let s = |id: &str| Session {
            id: id.into(),
            started_at: now,
            last_used_at: now,
        };
        let mut a = Agents::default();
        // claude (the default current) → codex: claude's session is parked, codex has none.
        assert_eq!(a.switch("claude", "codex", Some(s("c1"))), None);
        assert_eq!(a.current.as_deref(), Some("codex"));
        // codex → claude: codex's session parked, claude's back.
        assert_eq!(a.switch("claude", "claude", Some(s("x1"))), Some(s("c1")));
        assert_eq!(a.sessions.get("codex"), Some(&s("x1")));
        // Same agent: nothing moves.
        assert_eq!(a.switch("claude", "claude", Some(s("c2"))), Some(s("c2")));
    }

    #[test]
    fn session_totals_become_per_call_tokens() {
        let t = |input: u64, output: u64| Tokens {
            input,
            output,
            ..Tokens::default()
        };
        let mut a = Agents::default();
        // (session, reported total, this call's tokens)
        let cases = [
            (Some("s1"), t(100, 10), t(100, 10)),
            (Some("s1"), t(250, 25), t(150, 15)),
            // A new session counts whole.
            (Some("s2"), t(40, 4), t(40, 4)),
            // No session id: the numbers are all hank has.
            (None, t(7, 1), t(7, 1)),
            // A total that went down (a client reset) never counts negative.
            (Some("s2"), t(10, 1), t(0, 0)),
        ];
        for (session, total, want) in cases {
            assert_eq!(
                a.tokens_of_call("codex", session, total),
                want,
                "{session:?}"
            );
        }
    }

    #[test]
    fn usage_is_counted_per_agent_and_ignores_broken_costs() {
        let mut a = Agents::default();
        a.count("claude", 0.5, 100);
        a.count("claude", f64::INFINITY, 1);
        a.count("codex", 0.25, 10);
        assert_eq!(a.usage["claude"].calls, 2);
        assert!((a.usage["claude"].cost_usd - 0.5).abs() < 1e-9);
        assert_eq!(a.usage["claude"].tokens, 101);
        assert_eq!(a.usage["codex"].calls, 1);
    }

    #[test]
    fn why_the_run_switches_agents() {
        let local = |t: Timestamp| t.to_string();
        let until = t("2026-11-24T05:00:00Z");
        let limited = Limited {
            kind: "usage_limit".into(),
            until: Some(until),
            since: t("2026-11-24T00:00:00Z"),
            message: "limit".into(),
        };
        let forever = Limited {
            until: None,
            kind: "auth".into(),
            ..limited.clone()
        };
        let table = [
            (
                Some(&limited),
                true,
                format!("claude is limited (usage_limit) until {until}"),
            ),
            (
                Some(&forever),
                false,
                "claude cannot work for the rest of this run (auth)".to_owned(),
            ),
            (
                None,
                true,
                "codex comes first in AGENTS and may work again".to_owned(),
            ),
            (
                None,
                false,
                "this run uses codex (the last one used claude)".to_owned(),
            ),
        ];
        for (l, in_chain, want) in table {
            assert_eq!(switch_reason(("claude", "codex"), l, in_chain, local), want);
        }
        let mut agents = Agents::default();
        agents.limited.insert("claude".into(), forever);
        assert_eq!(
            none_can_work(&agents),
            "no agent can work for the rest of this run: claude: auth (limit)"
        );
    }

    #[test]
    fn taking_a_turn_table() {
        let now = t("2026-11-24T10:00:00Z");
        let until = t("2026-11-24T12:00:00Z");
        let chain = chain();
        let s = |id: &str| Session {
            id: id.into(),
            started_at: now,
            last_used_at: now,
        };
        let local = |t: Timestamp| t.to_string();
        // A limit of the agent taking the turn, passed, is forgotten: saved, no switch.
        let mut a = Agents::default();
        a.on_error("claude", ErrorKind::UsageLimit, Some(now), "m", now);
        let mut session = Some(s("c1"));
        assert_eq!(
            a.take_turn((&chain, 0), &mut session, 3, local),
            (true, None)
        );
        assert!(a.limited.is_empty());
        assert_eq!(session, Some(s("c1")));
        // Same agent, nothing limited: nothing to save.
        assert_eq!(
            a.take_turn((&chain, 0), &mut session, 3, local),
            (false, None)
        );
        // claude limited → codex: claude's session parked, the switch says why and until when.
        a.on_error("claude", ErrorKind::UsageLimit, Some(until), "m", now);
        let (changed, switch) = a.take_turn((&chain, 1), &mut session, 3, local);
        let expected = Switch {
            from: "claude".into(),
            to: "codex".into(),
            reason: format!("claude is limited (usage_limit) until {until}"),
            until: Some(until),
            handover: true,
            shown: true,
        };
        assert_eq!((changed, switch), (true, Some(expected)));
        assert_eq!(session, None);
        assert_eq!(a.sessions.get("claude"), Some(&s("c1")));
        // Back to claude (its limit passed): its session returns.
        let (_, switch) = a.take_turn((&chain, 0), &mut session, 4, local);
        assert_eq!(session, Some(s("c1")));
        let switch = switch.unwrap_or_else(|| panic!("a switch back to claude"));
        assert_eq!(
            switch.reason,
            "claude comes first in AGENTS and may work again"
        );
        // The first pick of a run, from an agent no longer in the chain, before any loop:
        // silent, no handover.
        let mut a = Agents {
            current: Some("opencode".into()),
            ..Agents::default()
        };
        let (_, switch) = a.take_turn((&chain, 0), &mut session, 0, local);
        let switch = switch.unwrap_or_else(|| panic!("a switch from opencode"));
        assert_eq!((switch.shown, switch.handover), (false, false));
        assert_eq!(
            switch.reason,
            "this run uses claude (the last one used opencode)"
        );
    }
}
