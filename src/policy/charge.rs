//! What one call is charged.  **\[pure\]**
//!
//! Every call is paid for, whether its answer says what it cost or not:
//! - the answer reported a cost → that cost;
//! - the agent always reports one (Claude Code, or a profile with a `cost_usd` field) but this
//!   answer's cannot be read (no result, a missing or broken value) → an estimate: the highest
//!   reported cost of a call in the last [`ESTIMATE_LOOKBACK`] (among the loops the caller
//!   passes: the state's history), else `UNKNOWN_CALL_COST`;
//! - the agent never reports one (codex, gemini) → its tokens at the profile's
//!   [`Prices`], when the profile gives them; else nothing can be charged (hank warns at start
//!   that `MAX_COST_USD` cannot bind that agent).
//!
//! An estimate counts against every cap and total like a reported cost, and is shown as
//! estimated.
//!
//! A call that cannot have reached the API — not one byte on stdout, ended within
//! [`UNREACHED_WITHIN`] (a crash at start: a traceback, a missing module, a refused file) — is
//! charged nothing, and the warning says so ([`unreached_warning`]).

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::analysis::Tokens;

/// How far back the highest reported per-call cost is looked for.
pub const ESTIMATE_LOOKBACK: SignedDuration = SignedDuration::from_hours(24);

/// A call that printed nothing on stdout and ended within this long cannot have reached the
/// API: it is charged nothing.
pub const UNREACHED_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a call that printed `stdout_bytes` and lasted `duration` cannot have reached the
/// API (nothing on stdout, ended within [`UNREACHED_WITHIN`]).
#[must_use]
pub fn unreached(stdout_bytes: u64, duration: std::time::Duration) -> bool {
    stdout_bytes == 0 && duration <= UNREACHED_WITHIN
}

/// Token prices of an agent, in USD per million tokens (a profile's `[prices]`, read as it is:
/// a kind left out costs nothing, an unknown key is an error).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Prices {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_creation: f64,
}

impl Prices {
    /// The cost of `t` at these prices.
    #[must_use]
    pub fn cost(&self, t: &Tokens) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let part = |n: u64, per_million: f64| n as f64 * per_million / 1_000_000.0;
        part(t.input, self.input)
            + part(t.output, self.output)
            + part(t.cache_read, self.cache_read)
            + part(t.cache_creation, self.cache_creation)
    }
}

/// How the agent of a call tells its cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CostSource {
    /// Every answer carries a cost (Claude Code; a profile with a `cost_usd` field).
    Reported,
    /// Never reported: estimated from tokens at these prices.
    Priced(Prices),
    /// Never reported and no prices: the call cannot be charged.
    Unknown,
}

/// Why a charge is an estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Estimate {
    /// The answer should have held a cost and did not: the highest recent cost of a call.
    RecentHighest,
    /// The answer should have held a cost and did not, and no recent call reported one:
    /// UNKNOWN_CALL_COST.
    UnknownCallCost,
    /// From the call's tokens at the profile's prices.
    Tokens,
}

impl Estimate {
    /// The stable string (as serialized).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RecentHighest => "recent_highest",
            Self::UnknownCallCost => "unknown_call_cost",
            Self::Tokens => "tokens",
        }
    }
}

/// What a call is charged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Charge {
    pub usd: f64,
    /// `None`: the cost the answer reported.
    pub estimate: Option<Estimate>,
}

/// The inputs of [`charge`].
#[derive(Debug, Clone, Copy)]
pub struct ChargeInput<'a, I> {
    /// The cost the answer reported, when it held a readable one.
    pub reported: Option<f64>,
    pub tokens: &'a Tokens,
    pub source: CostSource,
    /// Earlier calls: (when, cost, whether that cost was an estimate).
    pub recent: I,
    pub now: Timestamp,
    /// UNKNOWN_CALL_COST.
    pub unknown_call_cost: f64,
    /// The call cannot have reached the API ([`unreached`]): charged nothing.
    pub unreached: bool,
}

/// What the call is charged (see the module doc).
#[must_use]
pub fn charge<I>(input: ChargeInput<'_, I>) -> Charge
where
    I: IntoIterator<Item = (Timestamp, f64, bool)>,
{
    if let Some(usd) = input.reported {
        return Charge {
            usd,
            estimate: None,
        };
    }
    if input.unreached {
        return Charge {
            usd: 0.0,
            estimate: None,
        };
    }
    match input.source {
        CostSource::Reported => {
            let since = crate::policy::budget::add_duration(input.now, -ESTIMATE_LOOKBACK);
            let highest = input
                .recent
                .into_iter()
                .filter(|(at, cost, estimated)| {
                    !*estimated && *at > since && cost.is_finite() && *cost > 0.0
                })
                .map(|(_, cost, _)| cost)
                .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
            match highest {
                Some(usd) => Charge {
                    usd,
                    estimate: Some(Estimate::RecentHighest),
                },
                None => Charge {
                    usd: input.unknown_call_cost,
                    estimate: Some(Estimate::UnknownCallCost),
                },
            }
        }
        CostSource::Priced(p) => Charge {
            usd: p.cost(input.tokens),
            estimate: Some(Estimate::Tokens),
        },
        CostSource::Unknown => Charge {
            usd: 0.0,
            estimate: None,
        },
    }
}

/// The warning when loop `number`'s answer of `agent` held no readable cost and `usd` was
/// charged as an estimate (`None`: the cost was reported, or estimated from tokens).
#[must_use]
pub fn estimate_warning(
    number: u64,
    agent: &str,
    usd: f64,
    estimate: Option<Estimate>,
) -> Option<String> {
    let basis = match estimate? {
        Estimate::Tokens => return None,
        Estimate::RecentHighest => "the highest cost of a call in the last 24 h",
        Estimate::UnknownCallCost => "UNKNOWN_CALL_COST",
    };
    Some(format!(
        "loop {number}: the answer of {agent} held no readable cost; charged an estimate of ${usd:.2} ({basis})"
    ))
}

/// The note when loop `number`'s call of `agent` cannot have reached the API ([`unreached`]):
/// it was charged nothing.
#[must_use]
pub fn unreached_warning(number: u64, agent: &str, duration: std::time::Duration) -> String {
    format!(
        "loop {number}: {agent} printed nothing and ended after {} ms: it cannot have reached the API; charged nothing",
        duration.as_millis()
    )
}

/// At start, with MAX_COST_USD set: the agents of the run whose cost hank cannot know
/// (`blind`: no cost reported and no `[prices]`; `text`: CLAUDE_OUTPUT_FORMAT=text).
#[must_use]
pub fn blind_agents_warning(blind: &[String], text: bool) -> Option<String> {
    (!blind.is_empty()).then(|| format!(
        "MAX_COST_USD cannot bind {}: no cost is reported{} and the profile gives no [prices] (add them to .hank/agents/NAME.toml to have hank estimate the cost from tokens)",
        blind.join(", "),
        if text { " (CLAUDE_OUTPUT_FORMAT=text holds none)" } else { "" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(h: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + h * 3600).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    const TOKENS: Tokens = Tokens {
        input: 1_000_000,
        output: 100_000,
        cache_read: 2_000_000,
        cache_creation: 0,
    };

    const PRICES: Prices = Prices {
        input: 1.25,
        output: 10.0,
        cache_read: 0.125,
        cache_creation: 2.0,
    };

    /// (case, reported, source, recent, want usd, want estimate)
    #[test]
    fn charges_table() {
        type Row = (
            &'static str,
            Option<f64>,
            CostSource,
            Vec<(Timestamp, f64, bool)>,
            f64,
            Option<Estimate>,
        );
        let now = t(100);
        let rows: Vec<Row> = vec![
            (
                "reported",
                Some(0.5),
                CostSource::Reported,
                vec![],
                0.5,
                None,
            ),
            (
                "reported zero",
                Some(0.0),
                CostSource::Reported,
                vec![(t(99), 3.0, false)],
                0.0,
                None,
            ),
            (
                "no history",
                None,
                CostSource::Reported,
                vec![],
                1.0,
                Some(Estimate::UnknownCallCost),
            ),
            (
                "highest of 24 h",
                None,
                CostSource::Reported,
                vec![
                    (t(99), 0.4, false),
                    (t(90), 2.5, false),
                    (t(98), 0.1, false),
                ],
                2.5,
                Some(Estimate::RecentHighest),
            ),
            (
                "older than 24 h and estimates ignored",
                None,
                CostSource::Reported,
                vec![(t(75), 9.0, false), (t(99), 7.0, true), (t(99), 0.0, false)],
                1.0,
                Some(Estimate::UnknownCallCost),
            ),
            (
                "exactly 24 h old is out",
                None,
                CostSource::Reported,
                vec![(t(76), 4.0, false)],
                1.0,
                Some(Estimate::UnknownCallCost),
            ),
            (
                "priced",
                None,
                CostSource::Priced(PRICES),
                vec![],
                1.25 + 1.0 + 0.25,
                Some(Estimate::Tokens),
            ),
            (
                "unknown",
                None,
                CostSource::Unknown,
                vec![(t(99), 3.0, false)],
                0.0,
                None,
            ),
        ];
        for (name, reported, source, recent, usd, estimate) in rows {
            let c = charge(ChargeInput {
                reported,
                tokens: &TOKENS,
                source,
                recent,
                now,
                unknown_call_cost: 1.0,
                unreached: false,
            });
            assert!((c.usd - usd).abs() < 1e-9, "{name}: {c:?}");
            assert_eq!(c.estimate, estimate, "{name}");
        }
    }

    /// A call that cannot have reached the API is charged nothing, whatever the agent's cost
    /// source; a cost it did report still counts.
    #[test]
    fn a_call_that_cannot_have_reached_the_api_is_charged_nothing() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        for (stdout, took, want) in [
            (0, ms(50), true),
            (0, ms(2000), true),
            (0, ms(2001), false),
            (1, ms(50), false),
            (0, Duration::from_secs(600), false),
        ] {
            assert_eq!(unreached(stdout, took), want, "{stdout} bytes in {took:?}");
        }
        for source in [
            CostSource::Reported,
            CostSource::Priced(PRICES),
            CostSource::Unknown,
        ] {
            let c = charge(ChargeInput {
                reported: None,
                tokens: &TOKENS,
                source,
                recent: vec![(t(99), 3.0, false)],
                now: t(100),
                unknown_call_cost: 1.0,
                unreached: true,
            });
            assert_eq!((c.usd, c.estimate), (0.0, None), "{source:?}");
        }
        let reported = charge(ChargeInput {
            reported: Some(0.25),
            tokens: &TOKENS,
            source: CostSource::Reported,
            recent: Vec::new(),
            now: t(100),
            unknown_call_cost: 1.0,
            unreached: true,
        });
        assert_eq!(reported.usd, 0.25);
        let w = unreached_warning(3, "claude", ms(50));
        assert!(
            w.contains("loop 3") && w.contains("50 ms") && w.contains("charged nothing"),
            "{w}"
        );
    }

    #[test]
    fn what_an_estimate_and_a_blind_agent_say() {
        let table = [
            (None, None),
            (Some(Estimate::Tokens), None),
            (
                Some(Estimate::RecentHighest),
                Some("(the highest cost of a call in the last 24 h)"),
            ),
            (Some(Estimate::UnknownCallCost), Some("(UNKNOWN_CALL_COST)")),
        ];
        for (estimate, basis) in table {
            let w = estimate_warning(3, "codex", 1.5, estimate);
            assert_eq!(
                w.as_deref().map(|w| w.ends_with(basis.unwrap_or(""))),
                basis.map(|_| true)
            );
            if let Some(w) = w {
                assert!(w.starts_with("loop 3: the answer of codex held no readable cost; charged an estimate of $1.50"), "{w}");
            }
        }
        assert_eq!(blind_agents_warning(&[], false), None);
        let w = blind_agents_warning(&["gemini".into(), "opencode".into()], true).unwrap();
        assert!(w.starts_with("MAX_COST_USD cannot bind gemini, opencode: no cost is reported (CLAUDE_OUTPUT_FORMAT=text holds none)"), "{w}");
    }
}
