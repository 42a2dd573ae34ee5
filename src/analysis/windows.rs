//! The subscription usage windows the client reports in stream-json.  **\[pure\]**
//!
//! Claude Code 2.x writes a `rate_limit_event` line after each API answer to a subscription:
//! `rate_limit_info` names the representative window (`rateLimitType`, `utilization`,
//! `resetsAt`, `status`); 2.1.330 adds `unifiedWindows` with every window the API reported
//! (`{"five_hour":{"utilization":0.42,"resetsAt":…,"status":"allowed"},…}`). Utilization is a
//! fraction (0–1, above 1 in overage). Both are read here leniently: a field of an unexpected
//! type drops that field (or that window), never the event.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::de::{Deserializer, MapAccess};
use serde::{Deserialize, Serialize};

use super::parse::{Lenient, Scalar, lenient};

/// Largest utilization believed (a fraction; 10 = 1000 %). Anything above, negative or not
/// finite is a broken value and is dropped.
const MAX_UTILIZATION: f64 = 10.0;

/// What is said of a window, each field when given: by one event ([`WindowReading`]), or by
/// the readings so far ([`crate::policy::windows::WindowState`]), merged by one rule
/// (`WindowFields::merge`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowFields {
    /// Fraction used (0–1, can exceed 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    /// When the window resets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<Timestamp>,
    /// `allowed`, `allowed_warning`, `rejected`, … as the client said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// What one event said about one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowReading {
    /// The window as the client names it: `five_hour`, `seven_day`, `seven_day_opus`, …
    pub name: String,
    #[serde(flatten)]
    pub fields: WindowFields,
}

/// One window of `unifiedWindows`, fields read leniently.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RawWindow {
    pub utilization: Scalar,
    #[serde(rename = "resetsAt")]
    pub resets_at: Scalar,
    pub status: Scalar,
}

/// `unifiedWindows`: window name → its fields. Anything that is not an object of objects
/// reads as empty (or loses only the entries that are not objects).
#[derive(Debug, Default)]
pub(crate) struct UnifiedWindows(pub Vec<(String, RawWindow)>);

impl Lenient for UnifiedWindows {
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut out = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            if let Some(w) = map.next_value::<MaybeWindow>()?.0 {
                out.push((name, w));
            }
        }
        Ok(UnifiedWindows(out))
    }
}

impl<'de> Deserialize<'de> for UnifiedWindows {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient(d)
    }
}

/// A window entry: an object, or nothing.
#[derive(Default)]
struct MaybeWindow(Option<RawWindow>);

impl Lenient for MaybeWindow {
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut w = RawWindow::default();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value::<Scalar>()?;
            match key.as_str() {
                "utilization" => w.utilization = value,
                "resetsAt" => w.resets_at = value,
                "status" => w.status = value,
                _ => {}
            }
        }
        Ok(MaybeWindow(Some(w)))
    }
}

impl<'de> Deserialize<'de> for MaybeWindow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient(d)
    }
}

/// A window name as the client writes them: lower-case letters, digits and `_`.
pub fn valid_window_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

pub(crate) fn utilization_of(s: &Scalar) -> Option<f64> {
    s.as_f64()
        .filter(|u| u.is_finite() && (0.0..=MAX_UTILIZATION).contains(u))
}

pub(crate) fn reset_of(s: &Scalar) -> Option<Timestamp> {
    s.as_u64()
        .and_then(|v| i64::try_from(v).ok())
        .and_then(|v| Timestamp::from_second(v).ok())
}

fn status_of(s: Scalar) -> Option<String> {
    s.into_string()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty() && t.len() <= 64)
}

/// The readings of one `rate_limit_info`: its representative window (when it names one),
/// then each entry of `unifiedWindows` (more precise, so it is applied last).
pub(crate) fn readings(
    limit_type: Option<&str>,
    utilization: &Scalar,
    resets_at: &Scalar,
    status: &Scalar,
    unified: UnifiedWindows,
) -> Vec<WindowReading> {
    let mut out = Vec::new();
    if let Some(name) = limit_type.map(str::trim).filter(|n| valid_window_name(n)) {
        out.push(WindowReading {
            name: name.to_owned(),
            fields: WindowFields {
                utilization: utilization_of(utilization),
                resets_at: reset_of(resets_at),
                status: status_of(status.clone()),
            },
        });
    }
    for (name, w) in unified.0 {
        if !valid_window_name(&name) {
            continue;
        }
        out.push(WindowReading {
            name,
            fields: WindowFields {
                utilization: utilization_of(&w.utilization),
                resets_at: reset_of(&w.resets_at),
                status: status_of(w.status),
            },
        });
    }
    out
}

impl WindowFields {
    /// The one merge rule of window readings, used within an answer ([`fold_readings`]) and
    /// across answers ([`crate::policy::windows::observe`]): a newer reading replaces the
    /// fields it gives and keeps the ones it leaves out, except that a new reset time without
    /// a utilization starts a new period, where the old figure is stale (dropped).
    pub(crate) fn merge(&mut self, newer: &WindowFields) {
        if newer.resets_at.is_some()
            && newer.resets_at != self.resets_at
            && newer.utilization.is_none()
        {
            self.utilization = None;
        }
        if newer.utilization.is_some() {
            self.utilization = newer.utilization;
        }
        if newer.resets_at.is_some() {
            self.resets_at = newer.resets_at;
        }
        if newer.status.is_some() {
            self.status.clone_from(&newer.status);
        }
    }
}

/// Folds `new` into `seen` (name → latest reading) with [`WindowFields::merge`].
pub(crate) fn fold_readings(seen: &mut BTreeMap<String, WindowReading>, new: Vec<WindowReading>) {
    for r in new {
        match seen.get_mut(&r.name) {
            Some(old) => old.fields.merge(&r.fields),
            None => {
                seen.insert(r.name.clone(), r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{RunFacts, analyze_bytes};

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn windows_of(stdout: &str) -> Vec<WindowReading> {
        analyze_bytes(
            stdout.as_bytes(),
            b"",
            &RunFacts::default(),
            at(1_795_000_000),
        )
        .usage_windows
    }

    fn fields(u: Option<f64>, reset: Option<i64>, status: Option<&str>) -> WindowFields {
        WindowFields {
            utilization: u,
            resets_at: reset.map(at),
            status: status.map(Into::into),
        }
    }

    fn w(name: &str, u: Option<f64>, reset: Option<i64>, status: Option<&str>) -> WindowReading {
        WindowReading {
            name: name.into(),
            fields: fields(u, reset, status),
        }
    }

    const INIT: &str = r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#;
    const RESULT: &str = r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s1","total_cost_usd":0.01}"#;
    /// Observed from 2.1.330 against the fake API (docs/claude-contract.md).
    const NEW: &str = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1795836389,"rateLimitType":"seven_day","utilization":0.86,"isUsingOverage":false,"unifiedWindows":{"five_hour":{"utilization":0.42,"resetsAt":1795501589,"status":"allowed"},"seven_day":{"utilization":0.86,"resetsAt":1795836389,"status":"allowed_warning"}}},"uuid":"u","session_id":"s1"}"#;
    /// Observed from 2.1.197: the representative window only.
    const OLD: &str = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1795836389,"rateLimitType":"seven_day","utilization":0.86,"isUsingOverage":false},"uuid":"u","session_id":"s1"}"#;

    #[test]
    fn rate_limit_events_of_both_clients_are_read() {
        let cases: Vec<(&str, String, Vec<WindowReading>)> = vec![
            (
                "2.1.330 unified windows",
                format!("{INIT}\n{NEW}\n{RESULT}\n"),
                vec![
                    w(
                        "five_hour",
                        Some(0.42),
                        Some(1_795_501_589),
                        Some("allowed"),
                    ),
                    w(
                        "seven_day",
                        Some(0.86),
                        Some(1_795_836_389),
                        Some("allowed_warning"),
                    ),
                ],
            ),
            (
                "2.1.197 representative window",
                format!("{INIT}\n{OLD}\n{RESULT}\n"),
                vec![w(
                    "seven_day",
                    Some(0.86),
                    Some(1_795_836_389),
                    Some("allowed_warning"),
                )],
            ),
            (
                "the later event wins, fields it omits are kept",
                format!(
                    "{INIT}\n{NEW}\n{}\n{RESULT}\n",
                    r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","unifiedWindows":{"five_hour":{"utilization":0.5}}}}"#
                ),
                vec![
                    w("five_hour", Some(0.5), Some(1_795_501_589), Some("allowed")),
                    w(
                        "seven_day",
                        Some(0.86),
                        Some(1_795_836_389),
                        Some("allowed_warning"),
                    ),
                ],
            ),
            (
                "utilization above 1 (overage) is kept; absurd values are dropped",
                format!(
                    "{INIT}\n{}\n{RESULT}\n",
                    r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","unifiedWindows":{"five_hour":{"utilization":1.07,"resetsAt":1795501589},"seven_day":{"utilization":-3,"resetsAt":"soon"},"BAD NAME":{"utilization":0.1}}}}"#
                ),
                vec![
                    w("five_hour", Some(1.07), Some(1_795_501_589), None),
                    w("seven_day", None, None, None),
                ],
            ),
            (
                "broken unifiedWindows keeps the representative window",
                format!(
                    "{INIT}\n{}\n{RESULT}\n",
                    r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","rateLimitType":"five_hour","utilization":"0.3","resetsAt":1795501589,"unifiedWindows":["x"]}}"#
                ),
                vec![w(
                    "five_hour",
                    Some(0.3),
                    Some(1_795_501_589),
                    Some("allowed"),
                )],
            ),
            (
                "a window entry that is not an object is skipped",
                format!(
                    "{INIT}\n{}\n{RESULT}\n",
                    r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","unifiedWindows":{"five_hour":3,"seven_day":{"utilization":0.2,"resetsAt":1795836389}}}}"#
                ),
                vec![w("seven_day", Some(0.2), Some(1_795_836_389), None)],
            ),
            (
                "a typed usage-limit result names its window",
                format!(
                    "{INIT}\n{}\n",
                    r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"api_error":"usage_limit_reached","api_error_params":{"rate_limit_info":{"status":"rejected","resetsAt":1795836389,"rateLimitType":"seven_day"}},"result":"You've hit your weekly limit","session_id":"s1"}"#
                ),
                vec![w("seven_day", None, Some(1_795_836_389), Some("rejected"))],
            ),
            (
                "no event, no windows",
                format!("{INIT}\n{RESULT}\n"),
                vec![],
            ),
            ("plain json result", format!("{RESULT}\n"), vec![]),
        ];
        for (name, out, want) in cases {
            assert_eq!(windows_of(&out), want, "{name}");
        }
    }

    /// The one merge rule, as a table: (known before, newer reading, known after).
    #[test]
    fn merge_rule_table() {
        type Known = (Option<f64>, Option<i64>, Option<&'static str>);
        let cases: &[(&str, Known, Known, Known)] = &[
            (
                "a figure replaces the figure",
                (Some(0.5), Some(100), None),
                (Some(0.7), None, None),
                (Some(0.7), Some(100), None),
            ),
            (
                "the same reset keeps the figure",
                (Some(0.5), Some(100), None),
                (None, Some(100), None),
                (Some(0.5), Some(100), None),
            ),
            (
                "a new reset without a figure drops it",
                (Some(0.5), Some(100), Some("allowed")),
                (None, Some(200), None),
                (None, Some(200), Some("allowed")),
            ),
            (
                "a new reset with a figure keeps the new one",
                (Some(0.5), Some(100), None),
                (Some(0.1), Some(200), None),
                (Some(0.1), Some(200), None),
            ),
            (
                "a status alone keeps the rest",
                (Some(0.5), Some(100), Some("allowed")),
                (None, None, Some("rejected")),
                (Some(0.5), Some(100), Some("rejected")),
            ),
            (
                "an empty reading changes nothing",
                (Some(0.5), Some(100), Some("allowed")),
                (None, None, None),
                (Some(0.5), Some(100), Some("allowed")),
            ),
            (
                "a first reset time without a figure drops an old figure",
                (Some(0.5), None, None),
                (None, Some(100), None),
                (None, Some(100), None),
            ),
        ];
        for (name, before, newer, after) in cases {
            let mut f = fields(before.0, before.1, before.2);
            f.merge(&fields(newer.0, newer.1, newer.2));
            assert_eq!(
                (f.utilization, f.resets_at, f.status.as_deref()),
                (after.0, after.1.map(at), after.2),
                "{name}"
            );
            // The loop's state folds by the same rule.
            let mut known = crate::policy::windows::Windows::new();
            known.insert(
                "x".into(),
                crate::policy::windows::WindowState {
                    fields: fields(before.0, before.1, before.2),
                    seen_at: at(0),
                },
            );
            crate::policy::windows::observe(
                &mut known,
                &[w("x", newer.0, newer.1, newer.2)],
                at(5),
            );
            let k = &known["x"].fields;
            assert_eq!(
                (k.utilization, k.resets_at, k.status.as_deref()),
                (after.0, after.1.map(at), after.2),
                "observe: {name}"
            );
            assert_eq!(known["x"].seen_at, at(5));
        }
    }

    #[test]
    fn a_new_period_without_a_figure_forgets_the_old_one() {
        let mut seen = BTreeMap::new();
        fold_readings(
            &mut seen,
            vec![w(
                "five_hour",
                Some(0.9),
                Some(100),
                Some("allowed_warning"),
            )],
        );
        fold_readings(&mut seen, vec![w("five_hour", None, Some(200), None)]);
        assert_eq!(
            seen.get("five_hour"),
            Some(&w("five_hour", None, Some(200), Some("allowed_warning")))
        );
    }
}
