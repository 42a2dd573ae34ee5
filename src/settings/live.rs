//! The settings `hank ctl set KEY=VALUE` changes in a running loop: one typed definition per
//! live key, and the table [`LIVE`] everything reads. **\[pure\]**
//!
//! A [`Live`] names its key, its parser (the very function resolution uses for `.hankrc`, the
//! environment and the flag: [`super::resolve`] reads it from here), the field of
//! [`Settings`] it sets, how the new value is shown, and when the new value holds. Checking a
//! value ([`check`]: `hank ctl`, the journal's reader, the fleet's forwarding, the signed
//! remote commands) and applying it ([`apply`]: the engine) go through the same parser, so the
//! two cannot disagree. The error for a key that is not live, `hank ctl --help`, and the two
//! places in `docs/control.md` that list the keys come from [`LIVE`] (a test checks the docs).
//!
//! Adding a live key: a `Live` here, its entry in [`LIVE`], and the key's line in
//! `resolve()` reading it (`r.live(&live::KEY, …)`); the table tests below list a good and a
//! bad value for it.

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Duration;

use super::resolve::{parse_timeout_or_off, parse_u32_min, parse_u64, parse_usd};
use super::{Settings, Source, Sourced, keys};
use crate::policy::windows::WindowLimits;

/// The source a value set live records (shown as `flag hank ctl set`).
pub const SOURCE: Source = Source::Flag("hank ctl set");

/// One setting a running loop takes from `hank ctl set`.
pub struct Live<T: 'static> {
    /// The key (a [`keys::KEYS`] entry: its expected value is that entry's).
    pub name: &'static str,
    /// When the new value holds, as `docs/control.md` says it ("against this run's loops so
    /// far").
    pub holds: &'static str,
    /// The key's parser, the one resolution uses: `None` for a value it refuses.
    pub parse: fn(&str) -> Option<T>,
    /// The field of the run's settings it sets.
    pub field: fn(&mut Settings) -> &mut Sourced<T>,
    /// How the value now in effect is shown (`MAX_LOOPS is now 3`).
    pub show: fn(&T) -> String,
}

/// A live key whatever its value's type: what [`LIVE`] holds.
pub trait LiveKey {
    /// The key.
    fn name(&self) -> &'static str;
    /// When the new value holds (docs).
    fn holds(&self) -> &'static str;
    /// Whether the key's parser takes `raw`.
    fn accepts(&self, raw: &str) -> bool;
    /// Parses `raw` and, when it parses, sets the field (source: `hank ctl set`); the value
    /// shown. `None`: refused, nothing changed.
    fn apply(&self, s: &mut Settings, raw: &str) -> Option<String>;
    /// The value `s` holds now, shown as [`LiveKey::apply`] shows it.
    fn shown(&self, s: &mut Settings) -> String;
}

impl<T: 'static> LiveKey for Live<T> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn holds(&self) -> &'static str {
        self.holds
    }

    fn accepts(&self, raw: &str) -> bool {
        (self.parse)(raw).is_some()
    }

    fn apply(&self, s: &mut Settings, raw: &str) -> Option<String> {
        let value = (self.parse)(raw)?;
        let field = (self.field)(s);
        field.value = value;
        field.source = SOURCE;
        Some((self.show)(&field.value))
    }

    fn shown(&self, s: &mut Settings) -> String {
        (self.show)(&(self.field)(s).value)
    }
}

/// `MAX_LOOPS`.
pub const MAX_LOOPS: Live<u64> = Live {
    name: "MAX_LOOPS",
    holds: "against this run's loops so far",
    parse: parse_u64,
    field: |s| &mut s.max_loops,
    show: |v| v.to_string(),
};

/// `MAX_COST_USD`.
pub const MAX_COST_USD: Live<f64> = Live {
    name: "MAX_COST_USD",
    holds: "against this run's cost so far",
    parse: parse_usd,
    field: |s| &mut s.max_cost_usd,
    show: |v| format!("{v:.2}"),
};

/// `MAX_RUNTIME`.
pub const MAX_RUNTIME: Live<Duration> = Live {
    name: "MAX_RUNTIME",
    holds: "from this run's start",
    parse: parse_timeout_or_off,
    field: |s| &mut s.max_runtime,
    show: |v| format!("{}s", v.as_secs()),
};

/// `MAX_CALLS_PER_HOUR`.
pub const MAX_CALLS_PER_HOUR: Live<u32> = Live {
    name: "MAX_CALLS_PER_HOUR",
    holds: "at the next check",
    parse: |raw| parse_u32_min(1)(raw),
    field: |s| &mut s.max_calls_per_hour,
    show: |v| v.to_string(),
};

/// `MAX_WINDOW_PERCENT`.
pub const MAX_WINDOW_PERCENT: Live<WindowLimits> = Live {
    name: "MAX_WINDOW_PERCENT",
    holds: "at the next check",
    parse: WindowLimits::parse,
    field: |s| &mut s.max_window_percent,
    show: ToString::to_string,
};

/// Every key `hank ctl set` may change in a running loop, in the order they are listed.
pub const LIVE: &[&dyn LiveKey] = &[
    &MAX_LOOPS,
    &MAX_COST_USD,
    &MAX_RUNTIME,
    &MAX_CALLS_PER_HOUR,
    &MAX_WINDOW_PERCENT,
];

/// The live key `name`, if it is one.
#[must_use]
pub fn find(name: &str) -> Option<&'static dyn LiveKey> {
    LIVE.iter().copied().find(|k| k.name() == name)
}

/// The live keys' names, comma-separated.
#[must_use]
pub fn names() -> String {
    LIVE.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// When each key's new value holds, as `docs/control.md`'s `set` row says it:
/// "`MAX_LOOPS` against this run's loops so far, …".
#[must_use]
pub fn holds_text() -> String {
    LIVE.iter()
        .map(|k| format!("`{}` {}", k.name(), k.holds()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The help of `hank ctl`'s COMMAND words (the settable keys from [`LIVE`]).
#[must_use]
pub fn ctl_words_help() -> String {
    format!(
        "pause | resume | stop | retry-now | note TEXT | answer TEXT | set KEY=VALUE | \
         status | init | poll | sign COMMAND… (set: {})",
        names()
    )
}

/// The live key `name`, or why it cannot be set in a running loop.
fn live_key(name: &str) -> Result<&'static dyn LiveKey, String> {
    find(name).ok_or_else(|| {
        let why = if keys::is_known(name) {
            "it is read once when the run starts; change it in .hankrc and start hank again"
        } else {
            "it is not a hank setting"
        };
        format!(
            "{name} cannot be set in a running loop: {why} (settable: {})",
            names()
        )
    })
}

/// Why `raw` is refused for `name`: the key and what it expects.
fn refused(name: &str, raw: &str) -> String {
    let expected =
        keys::find(name).map_or_else(String::new, |k| format!(": expected {}", k.expected()));
    format!("invalid value `{raw}` for {name}{expected}")
}

/// Checks a value `hank ctl set KEY=VALUE` gives a running loop, with the parser the key
/// uses in `.hankrc`: why it is refused, naming the key and what is expected.
///
/// # Errors
/// The key is not live, or its parser refuses the value.
pub fn check(name: &str, raw: &str) -> Result<(), String> {
    if live_key(name)?.accepts(raw) {
        Ok(())
    } else {
        Err(refused(name, raw))
    }
}

/// Applies each `hank ctl set KEY=VALUE` of `settings` to the run's settings, in order: for
/// each, the line to say (`KEY is now …`) or, when it was not applied, the warning. No I/O:
/// the loop reads the settings again at its next gate.
#[must_use]
pub fn apply_all(s: &mut Settings, settings: Vec<(String, String)>) -> Vec<Result<String, String>> {
    (settings.into_iter())
        .map(|(key, value)| match apply(s, &key, &value) {
            Ok(shown) => Ok(format!("{key} is now {shown}")),
            Err(why) => Err(format!("hank ctl set {key}={value} not applied: {why}")),
        })
        .collect()
}

/// Applies `hank ctl set KEY=VALUE` to the run's settings; the value shown afterwards.
///
/// # Errors
/// As [`check`]; nothing is changed then.
pub fn apply(s: &mut Settings, name: &str, raw: &str) -> Result<String, String> {
    live_key(name)?
        .apply(s, raw)
        .ok_or_else(|| refused(name, raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::resolve::resolve_args;
    use std::path::Path;

    fn base() -> Settings {
        resolve_args(&[], Path::new("/p"), &[], "MAX_LOOPS=50\n").unwrap()
    }

    /// Every live key's values shown, for "nothing changed".
    fn all_shown(s: &mut Settings) -> Vec<String> {
        LIVE.iter().map(|k| k.shown(s)).collect()
    }

    /// One row per live key at least: a good value and how it is shown once applied.
    const GOOD: &[(&str, &str, &str)] = &[
        ("MAX_LOOPS", "20", "20"),
        ("MAX_LOOPS", "0", "0"),
        ("MAX_COST_USD", "$12.5", "12.50"),
        ("MAX_COST_USD", "0", "0.00"),
        ("MAX_RUNTIME", "8h", "28800s"),
        ("MAX_RUNTIME", "1h30m", "5400s"),
        ("MAX_RUNTIME", "0", "0s"),
        ("MAX_CALLS_PER_HOUR", "40", "40"),
        ("MAX_WINDOW_PERCENT", "five_hour=80", "five_hour=80"),
        ("MAX_WINDOW_PERCENT", "off", "off"),
    ];

    /// One row per live key at least: a value its parser refuses.
    const BAD: &[(&str, &str)] = &[
        ("MAX_LOOPS", "-1"),
        ("MAX_LOOPS", "many"),
        ("MAX_COST_USD", "lots"),
        ("MAX_COST_USD", "-3"),
        ("MAX_RUNTIME", "soon"),
        ("MAX_CALLS_PER_HOUR", "0"),
        ("MAX_WINDOW_PERCENT", "five_hour=180"),
    ];

    #[test]
    fn every_live_key_is_a_setting_once_and_in_the_tables_below() {
        let mut seen = Vec::new();
        for k in LIVE {
            assert!(
                keys::find(k.name()).is_some(),
                "{} is not in KEYS",
                k.name()
            );
            assert!(!seen.contains(&k.name()), "{} twice", k.name());
            seen.push(k.name());
            assert!(
                GOOD.iter().any(|(n, ..)| *n == k.name()),
                "no good value for {}",
                k.name()
            );
            assert!(
                BAD.iter().any(|(n, _)| *n == k.name()),
                "no bad value for {}",
                k.name()
            );
        }
        let rows = GOOD
            .iter()
            .map(|(n, ..)| n)
            .chain(BAD.iter().map(|(n, _)| n));
        for name in rows {
            assert!(find(name).is_some(), "{name} is not live");
        }
    }

    #[test]
    fn a_good_value_is_accepted_and_shown_as_applied() {
        for (name, raw, shown) in GOOD {
            assert_eq!(check(name, raw), Ok(()), "{name}={raw}");
            let mut s = base();
            assert_eq!(
                apply(&mut s, name, raw).as_deref(),
                Ok(*shown),
                "{name}={raw}"
            );
            let key = find(name).unwrap();
            assert_eq!(key.shown(&mut s), *shown, "{name}={raw}");
            // Set live, the value is the one the environment (or `.hankrc`) would have
            // given at the start: one parser.
            let mut at_start = resolve_args(&[], Path::new("/p"), &[(name, raw)], "").unwrap();
            assert_eq!(
                key.shown(&mut at_start),
                *shown,
                "{name}={raw} at the start"
            );
        }
    }

    #[test]
    fn a_good_value_records_where_it_came_from() {
        let mut s = base();
        apply(&mut s, "MAX_LOOPS", "3").unwrap();
        assert_eq!(s.max_loops.value, 3);
        assert_eq!(s.max_loops.source, SOURCE);
        apply(&mut s, "MAX_WINDOW_PERCENT", "five_hour=80").unwrap();
        assert!(!s.max_window_percent.value.is_empty());
        assert_eq!(s.max_window_percent.source, SOURCE);
        apply(&mut s, "MAX_RUNTIME", "90m").unwrap();
        assert_eq!(s.max_runtime.value, Duration::from_secs(5400));
    }

    #[test]
    fn a_bad_value_is_refused_naming_the_key_and_what_it_expects_and_changes_nothing() {
        for (name, raw) in BAD {
            let expected = keys::find(name).unwrap().expected();
            let want = format!("invalid value `{raw}` for {name}: expected {expected}");
            assert_eq!(check(name, raw), Err(want.clone()), "{name}={raw}");
            let mut s = base();
            let before = all_shown(&mut s);
            assert_eq!(apply(&mut s, name, raw), Err(want), "{name}={raw}");
            assert_eq!(all_shown(&mut s), before, "{name}={raw} changed a value");
            // Refused at the start too (one parser).
            assert!(
                resolve_args(&[], Path::new("/p"), &[(name, raw)], "").is_err(),
                "{name}={raw} at the start"
            );
        }
    }

    #[test]
    fn a_key_that_is_not_live_is_refused_with_why_and_the_live_keys() {
        let settable = "(settable: MAX_LOOPS, MAX_COST_USD, MAX_RUNTIME, MAX_CALLS_PER_HOUR, \
                        MAX_WINDOW_PERCENT)";
        for (name, why) in [
            (
                "AGENT",
                "AGENT cannot be set in a running loop: it is read once when the run starts",
            ),
            (
                "FOO",
                "FOO cannot be set in a running loop: it is not a hank setting",
            ),
        ] {
            let err = check(name, "codex").unwrap_err();
            assert!(err.starts_with(why), "{name}: {err}");
            assert!(err.ends_with(settable), "{name}: {err}");
            let mut s = base();
            let before = all_shown(&mut s);
            assert_eq!(apply(&mut s, name, "codex"), Err(err));
            assert_eq!(all_shown(&mut s), before);
        }
    }

    /// The row of `docs/control.md`'s table whose first cell is `first`.
    fn row<'a>(doc: &'a str, first: &str) -> &'a str {
        doc.lines()
            .find(|l| l.starts_with(&format!("| `{first}` |")))
            .unwrap_or_else(|| panic!("docs/control.md has no row `{first}`"))
    }

    #[test]
    fn docs_control_lists_the_live_keys_and_when_each_holds() {
        let doc = include_str!("../../docs/control.md");
        let listed = format!(
            "| `hank ctl set KEY=VALUE` | {}, checked like `.hankrc` values",
            LIVE.iter()
                .map(|k| format!("`{}`", k.name()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(
            row(doc, "hank ctl set KEY=VALUE").starts_with(&listed),
            "docs/control.md's `hank ctl set KEY=VALUE` row should start with:\n{listed}"
        );
        let holds = format!("the new value holds from the next gate: {}.", holds_text());
        assert!(
            row(doc, "set KEY=VALUE").contains(&holds),
            "docs/control.md's `set KEY=VALUE` row should say:\n{holds}"
        );
    }

    #[test]
    fn ctl_help_names_the_live_keys() {
        assert!(ctl_words_help().ends_with(
            "(set: MAX_LOOPS, MAX_COST_USD, MAX_RUNTIME, MAX_CALLS_PER_HOUR, MAX_WINDOW_PERCENT)"
        ));
    }
}
