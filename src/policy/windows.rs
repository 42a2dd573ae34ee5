//! The usage-window budget: MAX_WINDOW_PERCENT against the subscription windows the client
//! reports (`five_hour`, `seven_day`, …).  **\[pure\]**
//!
//! - [`observe`] folds the readings of one answer into the windows seen so far (persisted in
//!   `state.json`, so a restart knows them): the latest reading of each window wins, fields it
//!   leaves out are kept.
//! - [`check`], before each call: a window at or above its limit blocks until its reset
//!   (+ [`WINDOW_RESET_MARGIN`]). A window whose reset time has passed counts as reset (0 %).
//!   A window over its limit with no known reset blocks for [`WINDOW_UNKNOWN_WAIT`] after it
//!   was seen, then counts as stale (the next answer brings a fresh reading).
//! - [`status_windows`] is what `status.json` shows.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::analysis::{WindowFields, WindowReading};
use crate::policy::budget::add_duration;

/// Extra wait after a window's reset time (clock skew between this machine and the API; the
/// window is not exhausted, so a call a little early costs nothing but one more check).
pub const WINDOW_RESET_MARGIN: SignedDuration = SignedDuration::from_secs(15);
/// How long a window over its limit, with no reset time, blocks after it was seen.
pub const WINDOW_UNKNOWN_WAIT: SignedDuration = SignedDuration::from_mins(60);

/// Utilization compared with a limit gets this much slack (0.8 × 100 is 80.00000000000001).
const EPSILON: f64 = 1e-9;

/// What is known about one window (in `state.json`): its readings merged, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowState {
    #[serde(flatten)]
    pub fields: WindowFields,
    /// When hank last read something about it.
    pub seen_at: Timestamp,
}

impl WindowState {
    /// Its reset time has passed: the window counts as reset.
    #[must_use]
    pub fn is_reset(&self, now: Timestamp) -> bool {
        self.fields.resets_at.is_some_and(|r| r <= now)
    }

    /// No reset time, and seen [`WINDOW_UNKNOWN_WAIT`] ago or more: what is known is stale.
    #[must_use]
    pub fn is_stale(&self, now: Timestamp) -> bool {
        self.fields.resets_at.is_none() && add_duration(self.seen_at, WINDOW_UNKNOWN_WAIT) <= now
    }

    /// The utilization in force at `now`: 0 after the reset; 1 (100 %) for a window the
    /// client said is `rejected` without a figure.
    #[must_use]
    pub fn utilization_at(&self, now: Timestamp) -> Option<f64> {
        if self.is_reset(now) {
            return Some(0.0);
        }
        self.fields
            .utilization
            .or_else(|| (self.fields.status.as_deref() == Some("rejected")).then_some(1.0))
    }
}

/// Window name → what is known.
pub type Windows = BTreeMap<String, WindowState>;

/// Folds one answer's readings into `windows` at `now`, with the one merge rule
/// (`analysis::windows::WindowFields::merge`).
pub fn observe(windows: &mut Windows, readings: &[WindowReading], now: Timestamp) {
    for r in readings {
        let w = windows
            .entry(r.name.clone())
            .or_insert_with(|| WindowState {
                fields: WindowFields::default(),
                seen_at: now,
            });
        w.fields.merge(&r.fields);
        w.seen_at = now;
    }
}

/// Takes from `other` (what another run of the same user saw: the per-user shared readings)
/// every window seen later than this run's own reading of it; returns whether anything
/// changed. The one rule both ways: a run adopts the shared readings before its gates, and
/// the shared file adopts a run's windows after each answer that brought readings.
///
/// A shared file can only make a run stricter within a window's period: a reading dated after
/// `now` is ignored (a planted future date cannot outrank the run's next own reading), and for
/// the same reset time the higher utilization is kept (a window only fills until it resets);
/// a later reading with another reset time replaces the window whole.
pub fn adopt_newer(windows: &mut Windows, other: &Windows, now: Timestamp) -> bool {
    let mut changed = false;
    for (name, theirs) in other {
        if theirs.seen_at > now {
            continue;
        }
        let Some(ours) = windows.get_mut(name) else {
            windows.insert(name.clone(), theirs.clone());
            changed = true;
            continue;
        };
        if theirs.seen_at <= ours.seen_at {
            continue;
        }
        let (o, t) = (&ours.fields, &theirs.fields);
        if o.resets_at.is_some() && o.resets_at == t.resets_at {
            let higher = match (o.utilization, t.utilization) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            let merged = WindowState {
                fields: WindowFields {
                    utilization: higher,
                    resets_at: o.resets_at,
                    status: t.status.clone().or_else(|| o.status.clone()),
                },
                seen_at: theirs.seen_at,
            };
            if merged != *ours {
                *ours = merged;
                changed = true;
            }
        } else {
            *ours = theirs.clone();
            changed = true;
        }
    }
    changed
}

/// MAX_WINDOW_PERCENT: window name → limit in percent (1–100). Empty: off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowLimits(pub BTreeMap<String, u32>);

impl WindowLimits {
    /// No limit set.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The limit of `window`, if set.
    #[must_use]
    pub fn of(&self, window: &str) -> Option<u32> {
        self.0.get(window).copied()
    }

    /// Parses `five_hour=80,seven_day=90` (a `%` after a number is allowed); `off` or an
    /// empty text is no limit. `None` when the text is not that.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let mut out = BTreeMap::new();
        if text.is_empty() || text.eq_ignore_ascii_case("off") {
            return Some(Self(out));
        }
        for item in text.split(',').map(str::trim) {
            let (name, pct) = item.split_once('=')?;
            let name = name.trim();
            let pct: u32 = pct.trim().trim_end_matches('%').trim().parse().ok()?;
            if !crate::analysis::valid_window_name(name) || !(1..=100).contains(&pct) {
                return None;
            }
            if out.insert(name.to_string(), pct).is_some() {
                return None;
            }
        }
        Some(Self(out))
    }
}

impl std::fmt::Display for WindowLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("off");
        }
        let items: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&items.join(","))
    }
}

/// A window at or above its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct OverLimit {
    pub window: String,
    /// Percent used (utilization × 100).
    pub percent: f64,
    pub limit: u32,
    /// Its reset time, when known.
    pub resets_at: Option<Timestamp>,
}

/// What [`check`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum WindowCheck {
    /// Every limited window is below its limit (or unknown, or reset).
    Allow,
    /// Wait until `until` (the latest of the blocking windows' resets + margin); `over` is the
    /// window that sets it.
    Wait { until: Timestamp, over: OverLimit },
}

/// Compares the latest utilization of each limited window with its limit at `now`.
#[must_use]
pub fn check(windows: &Windows, limits: &WindowLimits, now: Timestamp) -> WindowCheck {
    let mut worst: Option<(Timestamp, OverLimit)> = None;
    for (name, &limit) in &limits.0 {
        let Some(w) = windows.get(name) else { continue };
        let Some(u) = w.utilization_at(now) else {
            continue;
        };
        let percent = u * 100.0;
        if percent + EPSILON < f64::from(limit) {
            continue;
        }
        let until = match w.fields.resets_at {
            Some(r) => add_duration(r, WINDOW_RESET_MARGIN),
            None => add_duration(w.seen_at, WINDOW_UNKNOWN_WAIT),
        };
        if until <= now {
            continue;
        }
        let over = OverLimit {
            window: name.clone(),
            percent,
            limit,
            resets_at: w.fields.resets_at,
        };
        if worst.as_ref().is_none_or(|(t, _)| until > *t) {
            worst = Some((until, over));
        }
    }
    match worst {
        Some((until, over)) => WindowCheck::Wait { until, over },
        None => WindowCheck::Allow,
    }
}

/// One window as `status.json` shows it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WindowStatus {
    /// Fraction used (0–1, can exceed 1); 0 once the reset time has passed.
    pub utilization: Option<f64>,
    /// When it resets (absent when unknown or passed).
    pub resets_at: Option<Timestamp>,
    /// As the client said (`allowed`, `allowed_warning`, `rejected`); absent after a reset.
    pub status: Option<String>,
    /// MAX_WINDOW_PERCENT for this window, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_percent: Option<u32>,
}

/// `status.json` `usage_windows` at `now` (a window past its reset shows 0 %; one without a
/// reset time seen long ago shows no figure).
#[must_use]
pub fn status_windows(
    windows: &Windows,
    limits: &WindowLimits,
    now: Timestamp,
) -> BTreeMap<String, WindowStatus> {
    windows
        .iter()
        .map(|(name, w)| {
            let reset = w.is_reset(now);
            let stale = w.is_stale(now);
            (
                name.clone(),
                WindowStatus {
                    utilization: match (reset, stale) {
                        (true, _) => Some(0.0),
                        (_, true) => None,
                        _ => w.fields.utilization,
                    },
                    resets_at: if reset { None } else { w.fields.resets_at },
                    status: if reset || stale {
                        None
                    } else {
                        w.fields.status.clone()
                    },
                    limit_percent: limits.of(name),
                },
            )
        })
        .collect()
}

/// How people call a window: `five_hour` → `5-hour window`, `seven_day` → `weekly window`.
#[must_use]
pub fn window_label(name: &str) -> String {
    match name {
        "five_hour" => "5-hour window".into(),
        "seven_day" => "weekly window".into(),
        "seven_day_opus" => "weekly Opus window".into(),
        "seven_day_sonnet" => "weekly Sonnet window".into(),
        "seven_day_overage_included" => "weekly window (overage included)".into(),
        "overage" => "overage window".into(),
        other => format!("{} window", other.replace('_', " ")),
    }
}

/// `weekly window, resets Mon 09:00 local` (the parts that are known; the time in `tz`).
#[must_use]
pub fn describe_limit(window: Option<&str>, resets_at: Option<Timestamp>, tz: &TimeZone) -> String {
    let when = resets_at.map(|t| {
        format!(
            "resets {} local",
            t.to_zoned(tz.clone()).strftime("%a %H:%M")
        )
    });
    match (window.map(window_label), when) {
        (Some(w), Some(t)) => format!("{w}, {t}"),
        (Some(w), None) => format!("{w}, reset time unknown"),
        (None, Some(t)) => t,
        (None, None) => "reset time unknown".into(),
    }
}

/// The window at or above its MAX_WINDOW_PERCENT limit, named for the user (`None`: none is).
#[must_use]
pub fn over_limit_note(check: &WindowCheck, tz: &TimeZone) -> Option<String> {
    let WindowCheck::Wait { over, .. } = check else {
        return None;
    };
    let what = describe_limit(Some(&over.window), over.resets_at, tz);
    Some(format!(
        "{} at {:.0}% of its {}% limit (MAX_WINDOW_PERCENT): {what}",
        over.window, over.percent, over.limit
    ))
}

/// After a loop's decision: a usage limit that stops the run or makes it wait, named with
/// its window and reset time (from the typed `rate_limit_info` when the client gave it), and
/// the end of the wait (`None`: the run stops). `None` for any other answer or decision.
#[must_use]
pub fn usage_limit_note(
    a: &crate::analysis::Analysis,
    decision: &crate::policy::decide::Decision,
    tz: &TimeZone,
) -> Option<(String, Option<Timestamp>)> {
    use crate::analysis::ErrorKind;
    use crate::policy::budget::WaitReason;
    use crate::policy::decide::Decision;
    let e = a
        .error
        .as_ref()
        .filter(|e| e.kind == ErrorKind::UsageLimit)?;
    let until = match decision {
        Decision::Stop(crate::exit::ExitReason::UsageLimit) => None,
        Decision::Wait {
            reason: WaitReason::UsageLimit,
            until,
        } => Some(*until),
        _ => return None,
    };
    let what = describe_limit(e.window.as_deref(), e.reset_at, tz);
    Some((format!("usage limit: {what}"), until))
}

/// Whether a saved wait still stands at a restart: a usage-window wait only while a window
/// is still at this run's limit (MAX_WINDOW_PERCENT may have been raised or turned off since);
/// every other wait always.
#[must_use]
pub fn saved_wait_stands(
    w: &crate::policy::budget::SavedWait,
    windows: &Windows,
    limits: &WindowLimits,
    now: Timestamp,
) -> bool {
    w.reason != crate::policy::budget::WaitReason::UsageWindow
        || matches!(check(windows, limits, now), WindowCheck::Wait { .. })
}

/// At start: what to do with the wait the last run was in (`saved`), once it still stands
/// ([`saved_wait_stands`]) — resumed, ended at once, or the run exits as ON_USAGE_LIMIT=exit
/// (`exit`) says ([`crate::policy::budget::resume_wait`]).
#[must_use]
pub fn resume_saved(
    saved: Option<crate::policy::budget::SavedWait>,
    windows: &Windows,
    limits: &WindowLimits,
    now: Timestamp,
    exit: bool,
) -> crate::policy::budget::Resume {
    let saved = saved.filter(|w| saved_wait_stands(w, windows, limits, now));
    crate::policy::budget::resume_wait(saved, now, exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `state.json`'s windows and a reading on the wire keep their flat JSON form: the shared
    /// fields sit beside `seen_at` and `name`, a field not given is left out.
    #[test]
    fn window_json_is_flat() {
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let state = WindowState {
            fields: WindowFields {
                utilization: Some(0.5),
                resets_at: Some(at(3600)),
                status: Some("allowed".into()),
            },
            seen_at: at(0),
        };
        let text = r#"{"utilization":0.5,"resets_at":"2027-01-15T09:00:00Z","status":"allowed","seen_at":"2027-01-15T08:00:00Z"}"#;
        assert_eq!(serde_json::to_string(&state).unwrap(), text);
        assert_eq!(serde_json::from_str::<WindowState>(text).unwrap(), state);
        let bare = WindowState {
            fields: WindowFields::default(),
            seen_at: at(0),
        };
        let text = r#"{"seen_at":"2027-01-15T08:00:00Z"}"#;
        assert_eq!(serde_json::to_string(&bare).unwrap(), text);
        assert_eq!(serde_json::from_str::<WindowState>(text).unwrap(), bare);
        let reading = WindowReading {
            name: "five_hour".into(),
            fields: WindowFields {
                utilization: Some(0.25),
                ..WindowFields::default()
            },
        };
        let text = r#"{"name":"five_hour","utilization":0.25}"#;
        assert_eq!(serde_json::to_string(&reading).unwrap(), text);
        assert_eq!(
            serde_json::from_str::<WindowReading>(text).unwrap(),
            reading
        );
    }

    #[test]
    fn adopt_newer_takes_only_later_readings_and_never_empties_a_window() {
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let w = |u: f64, seen: i64, reset: i64| WindowState {
            fields: WindowFields {
                utilization: Some(u),
                resets_at: Some(at(reset)),
                status: None,
            },
            seen_at: at(seen),
        };
        let ours: Windows = [("five_hour".to_string(), w(0.2, 10, 18_000))].into();
        for (name, theirs, changed, want) in [
            ("older reading: kept ours", w(0.9, 5, 18_000), false, 0.2),
            ("same time: kept ours", w(0.9, 10, 18_000), false, 0.2),
            (
                "later, same period: the higher",
                w(0.85, 20, 18_000),
                true,
                0.85,
            ),
            (
                "later, same period, lower: ours stays",
                w(0.05, 20, 18_000),
                true,
                0.2,
            ),
            (
                "later, another period: taken whole",
                w(0.05, 20, 36_000),
                true,
                0.05,
            ),
            ("dated after now: ignored", w(0.0, 500, 36_000), false, 0.2),
        ] {
            let other: Windows = [("five_hour".to_string(), theirs)].into();
            let mut mine = ours.clone();
            assert_eq!(adopt_newer(&mut mine, &other, at(100)), changed, "{name}");
            assert_eq!(mine["five_hour"].fields.utilization, Some(want), "{name}");
        }
        let mut mine = ours.clone();
        let other: Windows = [("seven_day".to_string(), w(0.5, 1, 9))].into();
        assert!(adopt_newer(&mut mine, &other, at(100)));
        assert_eq!(mine.len(), 2, "a window only the other run saw is taken");
    }

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn reading(
        name: &str,
        u: Option<f64>,
        reset: Option<i64>,
        status: Option<&str>,
    ) -> WindowReading {
        WindowReading {
            name: name.into(),
            fields: WindowFields {
                utilization: u,
                resets_at: reset.map(ts),
                status: status.map(Into::into),
            },
        }
    }

    /// (name, utilization, reset, status)
    type Seen<'a> = (&'a str, Option<f64>, Option<i64>, Option<&'a str>);

    fn seen(list: &[Seen<'_>], at: i64) -> Windows {
        let mut w = Windows::new();
        let readings: Vec<WindowReading> = list
            .iter()
            .map(|&(n, u, r, s)| reading(n, u, r, s))
            .collect();
        observe(&mut w, &readings, ts(at));
        w
    }

    #[test]
    fn limits_parse_and_show() {
        let ok: Vec<(&str, &str)> = vec![
            ("five_hour=80,seven_day=90", "five_hour=80,seven_day=90"),
            (
                " seven_day = 90% , five_hour=80 ",
                "five_hour=80,seven_day=90",
            ),
            ("seven_day_opus=100", "seven_day_opus=100"),
            ("", "off"),
            ("off", "off"),
        ];
        for (text, shown) in ok {
            let l = WindowLimits::parse(text).unwrap_or_else(|| panic!("{text:?}"));
            assert_eq!(l.to_string(), shown, "{text:?}");
        }
        for bad in [
            "five_hour",
            "five_hour=0",
            "five_hour=101",
            "five_hour=-5",
            "five_hour=eighty",
            "Five Hour=80",
            "five_hour=80,five_hour=90",
            "five_hour=80,",
            "=80",
        ] {
            assert_eq!(WindowLimits::parse(bad), None, "{bad:?}");
        }
    }

    /// (windows seen at t=0, limits, now, expected: None = allow, Some((until, window)))
    type Case = (
        Vec<Seen<'static>>,
        &'static str,
        i64,
        Option<(i64, &'static str)>,
    );

    #[test]
    fn check_table() {
        let cases: Vec<Case> = vec![
            // Below the limit: untouched.
            (
                vec![("five_hour", Some(0.79), Some(3600), None)],
                "five_hour=80",
                10,
                None,
            ),
            // At the limit (0.8 × 100 is not exactly 80): wait until the reset + margin.
            (
                vec![("five_hour", Some(0.8), Some(3600), None)],
                "five_hour=80",
                10,
                Some((3615, "five_hour")),
            ),
            (
                vec![("five_hour", Some(0.29), Some(3600), None)],
                "five_hour=29",
                10,
                Some((3615, "five_hour")),
            ),
            // Above 1 (overage) is above any limit.
            (
                vec![("seven_day", Some(1.2), Some(86_400), None)],
                "seven_day=100",
                10,
                Some((86_415, "seven_day")),
            ),
            // The reset has passed: the window counts as reset.
            (
                vec![("five_hour", Some(0.95), Some(3600), None)],
                "five_hour=80",
                3600,
                None,
            ),
            // Between the reset and reset + margin: reset already.
            (
                vec![("five_hour", Some(0.95), Some(3600), None)],
                "five_hour=80",
                3630,
                None,
            ),
            // A window without a limit does not block.
            (
                vec![("five_hour", Some(0.95), Some(3600), None)],
                "seven_day=80",
                10,
                None,
            ),
            // A limited window never seen does not block.
            (vec![], "five_hour=80", 10, None),
            // Two over: the later reset wins.
            (
                vec![
                    ("five_hour", Some(0.9), Some(3600), None),
                    ("seven_day", Some(0.95), Some(90_000), None),
                ],
                "five_hour=80,seven_day=90",
                10,
                Some((90_015, "seven_day")),
            ),
            // Only one of two over.
            (
                vec![
                    ("five_hour", Some(0.5), Some(3600), None),
                    ("seven_day", Some(0.95), Some(90_000), None),
                ],
                "five_hour=80,seven_day=99",
                10,
                None,
            ),
            // Rejected without a figure counts as 100 %.
            (
                vec![("five_hour", None, Some(3600), Some("rejected"))],
                "five_hour=100",
                10,
                Some((3615, "five_hour")),
            ),
            // No figure, not rejected: unknown, no block.
            (
                vec![("five_hour", None, Some(3600), Some("allowed"))],
                "five_hour=1",
                10,
                None,
            ),
            // Over with no reset time: blocks for an hour after it was seen, then stale.
            (
                vec![("five_hour", Some(0.9), None, None)],
                "five_hour=80",
                10,
                Some((3600, "five_hour")),
            ),
            (
                vec![("five_hour", Some(0.9), None, None)],
                "five_hour=80",
                3600,
                None,
            ),
            // Limits off.
            (
                vec![("five_hour", Some(1.0), Some(3600), None)],
                "",
                10,
                None,
            ),
        ];
        for (i, (list, limits, now, want)) in cases.into_iter().enumerate() {
            let w = seen(&list, 0);
            let limits = WindowLimits::parse(limits).unwrap();
            let got = check(&w, &limits, ts(now));
            match (got, want) {
                (WindowCheck::Allow, None) => {}
                (WindowCheck::Wait { until, over }, Some((u, name))) => {
                    assert_eq!((until, over.window.as_str()), (ts(u), name), "case {i}");
                    assert_eq!(over.limit, limits.of(name).unwrap(), "case {i}");
                }
                (got, want) => panic!("case {i}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn observe_keeps_the_latest_and_the_missing_fields() {
        let mut w = seen(&[("five_hour", Some(0.4), Some(3600), Some("allowed"))], 0);
        observe(
            &mut w,
            &[
                reading("five_hour", Some(0.6), None, None),
                reading("seven_day", Some(0.1), Some(9000), None),
            ],
            ts(100),
        );
        let five = &w["five_hour"];
        assert_eq!(five.fields.utilization, Some(0.6));
        assert_eq!(five.fields.resets_at, Some(ts(3600)));
        assert_eq!(five.fields.status.as_deref(), Some("allowed"));
        assert_eq!(five.seen_at, ts(100));
        assert_eq!(w.len(), 2);
        // A new period without a figure drops the old figure.
        observe(
            &mut w,
            &[reading("five_hour", None, Some(21_600), None)],
            ts(200),
        );
        assert_eq!(w["five_hour"].fields.utilization, None);
    }

    #[test]
    fn status_shows_reset_windows_as_zero_with_their_limit() {
        let w = seen(
            &[
                ("five_hour", Some(0.9), Some(3600), Some("allowed_warning")),
                ("seven_day", Some(0.5), Some(90_000), Some("allowed")),
            ],
            0,
        );
        let limits = WindowLimits::parse("five_hour=80").unwrap();
        let s = status_windows(&w, &limits, ts(4000));
        assert_eq!(
            s["five_hour"],
            WindowStatus {
                utilization: Some(0.0),
                resets_at: None,
                status: None,
                limit_percent: Some(80)
            }
        );
        assert_eq!(s["seven_day"].utilization, Some(0.5));
        assert_eq!(s["seven_day"].resets_at, Some(ts(90_000)));
        assert_eq!(s["seven_day"].limit_percent, None);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["seven_day"]["status"], "allowed");
        assert!(json["seven_day"].get("limit_percent").is_none());
        // Rejected without a reset time (from the text of a limit): stale after an hour.
        let w = seen(&[("five_hour", None, None, Some("rejected"))], 0);
        let fresh = status_windows(&w, &limits, ts(10));
        assert_eq!(fresh["five_hour"].status.as_deref(), Some("rejected"));
        let old = status_windows(&w, &limits, ts(3600));
        assert_eq!(
            (
                old["five_hour"].utilization,
                old["five_hour"].status.as_deref()
            ),
            (None, None)
        );
    }

    #[test]
    fn limits_are_described_with_the_window_and_local_reset() {
        // 2027-01-18 is a Monday.
        let t: Timestamp = "2027-01-18T08:00:00Z".parse().unwrap();
        let oslo = TimeZone::get("Europe/Oslo").unwrap();
        assert_eq!(
            describe_limit(Some("seven_day"), Some(t), &oslo),
            "weekly window, resets Mon 09:00 local"
        );
        assert_eq!(
            describe_limit(Some("five_hour"), Some(t), &TimeZone::UTC),
            "5-hour window, resets Mon 08:00 local"
        );
        assert_eq!(
            describe_limit(Some("seven_day_opus"), None, &TimeZone::UTC),
            "weekly Opus window, reset time unknown"
        );
        assert_eq!(
            describe_limit(None, Some(t), &TimeZone::UTC),
            "resets Mon 08:00 local"
        );
        assert_eq!(window_label("future_thing"), "future thing window");
    }

    #[test]
    fn limit_notes_name_the_window_and_the_wait() {
        use crate::analysis::{AgentError, Analysis, ErrorKind};
        use crate::policy::budget::WaitReason;
        use crate::policy::decide::Decision;
        let tz = TimeZone::UTC;
        assert_eq!(over_limit_note(&WindowCheck::Allow, &tz), None);
        let over = OverLimit {
            window: "five_hour".into(),
            percent: 96.4,
            limit: 90,
            resets_at: None,
        };
        let note = over_limit_note(
            &WindowCheck::Wait {
                until: ts(60),
                over,
            },
            &tz,
        )
        .unwrap();
        assert!(
            note.starts_with("five_hour at 96% of its 90% limit (MAX_WINDOW_PERCENT): "),
            "{note}"
        );
        let limited = Analysis {
            error: Some(AgentError {
                kind: ErrorKind::UsageLimit,
                message: "limit".into(),
                api_status: None,
                reset_at: Some(ts(3600)),
                window: Some("seven_day".into()),
            }),
            ..Analysis::default()
        };
        let wait = Decision::Wait {
            until: ts(3700),
            reason: WaitReason::UsageLimit,
        };
        let stop = Decision::Stop(crate::exit::ExitReason::UsageLimit);
        let backoff = Decision::Wait {
            until: ts(30),
            reason: WaitReason::Backoff,
        };
        let table = [
            (&limited, &wait, Some(Some(ts(3700)))),
            (&limited, &stop, Some(None)),
            (&limited, &backoff, None),
            (&Analysis::default(), &wait, None),
        ];
        for (a, d, until) in table {
            let got = usage_limit_note(a, d, &tz);
            assert_eq!(got.as_ref().map(|g| g.1), until, "{d:?}");
            if let Some((note, _)) = got {
                assert!(note.starts_with("usage limit: "), "{note}");
            }
        }
    }

    #[test]
    fn a_saved_window_wait_stands_only_while_a_window_is_over_its_limit() {
        use crate::policy::budget::{SavedWait, WaitReason};
        let mut windows = Windows::default();
        let mut limits = WindowLimits::default();
        limits.0.insert("five_hour".into(), 90);
        let window_wait = SavedWait {
            reason: WaitReason::UsageWindow,
            until: ts(3600),
        };
        let limit_wait = SavedWait {
            reason: WaitReason::UsageLimit,
            until: ts(3600),
        };
        assert!(!saved_wait_stands(&window_wait, &windows, &limits, ts(0)));
        assert!(saved_wait_stands(&limit_wait, &windows, &limits, ts(0)));
        let reading = reading("five_hour", Some(0.95), Some(3600), None);
        observe(&mut windows, &[reading], ts(0));
        assert!(saved_wait_stands(&window_wait, &windows, &limits, ts(10)));
    }

    #[test]
    fn a_restart_resumes_the_saved_wait_that_stands() {
        use crate::policy::budget::{Resume, SavedWait, WaitReason};
        let mut limits = WindowLimits::default();
        limits.0.insert("five_hour".into(), 90);
        let over = {
            let mut w = Windows::default();
            observe(
                &mut w,
                &[reading("five_hour", Some(0.95), Some(3600), None)],
                ts(0),
            );
            w
        };
        let wait = |reason| SavedWait {
            reason,
            until: ts(3600),
        };
        let (limit, window) = (wait(WaitReason::UsageLimit), wait(WaitReason::UsageWindow));
        // (saved, windows over their limit, now, ON_USAGE_LIMIT=exit) → what the start does.
        let table = [
            (None, false, 0, false, Resume::Call),
            (Some(limit), false, 0, false, Resume::Wait(limit)),
            (Some(limit), false, 3600, false, Resume::Call),
            (Some(limit), false, 0, true, Resume::ExitUsageLimit),
            // A window wait whose window is no longer over the limit is not resumed.
            (Some(window), false, 0, false, Resume::Call),
            (Some(window), true, 10, false, Resume::Wait(window)),
            (Some(window), true, 10, true, Resume::ExitUsageWindow),
        ];
        for (saved, is_over, now, exit, want) in table {
            let windows = if is_over {
                over.clone()
            } else {
                Windows::default()
            };
            let got = resume_saved(saved, &windows, &limits, ts(now), exit);
            assert_eq!(got, want, "{saved:?} {is_over} {now} {exit}");
        }
    }
}
