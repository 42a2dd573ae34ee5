//! Cost receipts: what each fix_plan item cost.  **\[pure\]**
//!
//! Each loop's cost, tokens, wall time and API requests ("calls", the client's `num_turns`;
//! 1 when it did not say) go to the fix_plan items that loop ticked, split evenly when it
//! ticked several (the remainder of a whole-number split goes to the first items, so the rows
//! add up to the totals exactly). A loop that ticked none goes to "unattributed", with its
//! recommendation line. `loops` counts every loop that ticked the item (a loop that ticked
//! two items counts once for each), so loop counts are not split. Items appear in the order
//! they were first ticked; [`Receipts::most_expensive`] sorts them by cost.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use crate::policy::windows::WindowStatus;

/// One loop as the receipts need it (from its `agent_finished` event).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoopCost {
    pub number: u64,
    pub at: Option<Timestamp>,
    pub cost_usd: f64,
    /// `cost_usd` is hank's estimate (the answer held no readable cost).
    pub cost_estimated: bool,
    pub tokens: u64,
    pub duration_ms: u64,
    /// API requests of the call (`num_turns`), when known.
    pub calls: Option<u32>,
    /// The fix_plan items it ticked.
    pub items: Vec<String>,
    pub recommendation: Option<String>,
    /// The windows this answer reported.
    pub windows: BTreeMap<String, WindowStatus>,
}

/// The cost of one item (or of the unattributed loops).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ItemCost {
    pub item: String,
    pub loops: u64,
    pub calls: u64,
    pub cost_usd: f64,
    pub tokens: u64,
    pub duration_ms: u64,
    /// For the unattributed row: the recommendations of its loops (distinct, in order).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recommendations: Vec<String>,
}

/// Totals over every loop of the range.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Totals {
    pub loops: u64,
    pub calls: u64,
    pub cost_usd: f64,
    /// The part of `cost_usd` that hank estimated.
    #[serde(skip_serializing_if = "no_cost")]
    pub estimated_cost_usd: f64,
    pub tokens: u64,
    pub duration_ms: u64,
}

/// How a usage window moved over the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowUse {
    pub window: String,
    /// The first and the last utilization reported (fractions).
    pub first: Option<f64>,
    pub last: Option<f64>,
    /// The highest reported.
    pub peak: Option<f64>,
    /// The window reset in between (its reset time changed): `last - first` is not what the
    /// range used.
    pub reset_between: bool,
    /// The last reported reset time.
    pub resets_at: Option<Timestamp>,
}

/// The receipts of a range of loops.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Receipts {
    pub items: Vec<ItemCost>,
    /// Loops that ticked no item (absent when there were none).
    pub unattributed: Option<ItemCost>,
    pub totals: Totals,
    pub windows: Vec<WindowUse>,
}

/// The label of the row of loops that ticked nothing.
pub const UNATTRIBUTED: &str = "unattributed";

/// Splits `n` into `parts` whole shares, the remainder to the first shares.
fn split(n: u64, parts: u64, index: u64) -> u64 {
    let base = n / parts;
    base + u64::from(index < n % parts)
}

fn add(row: &mut ItemCost, share: &ItemCost) {
    row.loops += share.loops;
    row.calls += share.calls;
    row.cost_usd += share.cost_usd;
    row.tokens += share.tokens;
    row.duration_ms += share.duration_ms;
}

fn no_cost(v: &f64) -> bool {
    *v <= 0.0
}

/// Attributes `loops` (in loop order) to the items they ticked.
#[must_use]
pub fn attribute(loops: &[LoopCost]) -> Receipts {
    let mut r = Receipts::default();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut windows: BTreeMap<String, WindowUse> = BTreeMap::new();
    for l in loops {
        let calls = u64::from(l.calls.unwrap_or(1));
        r.totals.loops += 1;
        r.totals.calls += calls;
        r.totals.cost_usd += l.cost_usd;
        if l.cost_estimated {
            r.totals.estimated_cost_usd += l.cost_usd;
        }
        r.totals.tokens += l.tokens;
        r.totals.duration_ms += l.duration_ms;
        // The loop's share of `parts` items: whole numbers split, the remainder to the first.
        let share = |parts: u64, i: u64| ItemCost {
            loops: 1,
            calls: split(calls, parts, i),
            cost_usd: l.cost_usd / parts as f64,
            tokens: split(l.tokens, parts, i),
            duration_ms: split(l.duration_ms, parts, i),
            ..ItemCost::default()
        };
        if l.items.is_empty() {
            let row = r.unattributed.get_or_insert_with(|| ItemCost {
                item: UNATTRIBUTED.into(),
                ..ItemCost::default()
            });
            add(row, &share(1, 0));
            if let Some(rec) = l.recommendation.as_deref().map(str::trim)
                && !rec.is_empty()
                && !row.recommendations.iter().any(|x| x == rec)
            {
                row.recommendations.push(rec.to_string());
            }
        } else {
            let parts = l.items.len() as u64;
            for (i, item) in l.items.iter().enumerate() {
                let at = *index.entry(item.clone()).or_insert_with(|| {
                    r.items.push(ItemCost {
                        item: item.clone(),
                        ..ItemCost::default()
                    });
                    r.items.len() - 1
                });
                add(&mut r.items[at], &share(parts, i as u64));
            }
        }
        for (name, w) in &l.windows {
            let u = windows.entry(name.clone()).or_insert_with(|| WindowUse {
                window: name.clone(),
                first: w.utilization,
                last: None,
                peak: None,
                reset_between: false,
                resets_at: w.resets_at,
            });
            if u.first.is_none() {
                u.first = w.utilization;
            }
            if let Some(x) = w.utilization {
                u.last = Some(x);
                u.peak = Some(u.peak.map_or(x, |p| p.max(x)));
            }
            if w.resets_at.is_some() {
                if u.resets_at.is_some() && u.resets_at != w.resets_at {
                    u.reset_between = true;
                }
                u.resets_at = w.resets_at;
            }
        }
    }
    r.windows = windows.into_values().collect();
    r
}

impl Receipts {
    /// The `n` items that cost most (ties: the one ticked first), unattributed excluded.
    #[must_use]
    pub fn most_expensive(&self, n: usize) -> Vec<&ItemCost> {
        let mut all: Vec<&ItemCost> = self.items.iter().collect();
        all.sort_by(|a, b| b.cost_usd.total_cmp(&a.cost_usd));
        all.truncate(n);
        all
    }
}

/// The exit summary's lines on the three most expensive items of a run's `loops` (none when
/// no loop ticked an item).
#[must_use]
pub fn summary_lines(loops: &[LoopCost]) -> Vec<String> {
    let r = attribute(loops);
    let top = r.most_expensive(3);
    if top.is_empty() {
        return Vec::new();
    }
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let mut out = vec![format!(
        "most expensive items of this run (of ${:.2} in {} loop{}; `hank report` for all):",
        r.totals.cost_usd,
        r.totals.loops,
        plural(r.totals.loops)
    )];
    for (i, item) in top.iter().enumerate() {
        out.push(format!(
            "  {}. ${:.2}  {} loop{}  {}",
            i + 1,
            item.cost_usd,
            item.loops,
            plural(item.loops),
            item.item
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(
        cost: f64,
        tokens: u64,
        ms: u64,
        calls: Option<u32>,
        items: &[&str],
        rec: &str,
    ) -> LoopCost {
        LoopCost {
            cost_usd: cost,
            tokens,
            duration_ms: ms,
            calls,
            items: items.iter().map(|s| (*s).to_string()).collect(),
            recommendation: Some(rec.to_string()),
            ..LoopCost::default()
        }
    }

    #[test]
    fn loops_go_to_the_items_they_ticked() {
        let loops = vec![
            l(0.30, 1000, 60_000, Some(4), &[], "explore the parser"),
            l(
                0.50,
                3001,
                90_001,
                Some(5),
                &["parse input", "write tests"],
                "next",
            ),
            l(0.20, 500, 30_000, None, &["parse input"], "go on"),
            l(0.10, 100, 5_000, Some(1), &[], "explore the parser"),
            l(0.40, 700, 20_000, Some(2), &["docs"], "done"),
        ];
        let r = attribute(&loops);
        let names: Vec<&str> = r.items.iter().map(|i| i.item.as_str()).collect();
        assert_eq!(names, ["parse input", "write tests", "docs"]);
        let parse = &r.items[0];
        assert_eq!(parse.loops, 2);
        assert!((parse.cost_usd - 0.45).abs() < 1e-9, "{}", parse.cost_usd);
        assert_eq!(parse.tokens, 1501 + 500);
        assert_eq!(parse.duration_ms, 45_001 + 30_000);
        assert_eq!(parse.calls, 3 + 1);
        let tests = &r.items[1];
        assert_eq!(
            (tests.loops, tests.tokens, tests.duration_ms, tests.calls),
            (1, 1500, 45_000, 2)
        );
        let un = r.unattributed.as_ref().unwrap();
        assert_eq!(un.item, UNATTRIBUTED);
        assert_eq!((un.loops, un.calls, un.tokens), (2, 5, 1100));
        assert!((un.cost_usd - 0.40).abs() < 1e-9);
        assert_eq!(un.recommendations, ["explore the parser"]);
        // The rows add up to the totals.
        let rows: Vec<&ItemCost> = r.items.iter().chain(r.unattributed.iter()).collect();
        assert_eq!(rows.iter().map(|i| i.tokens).sum::<u64>(), r.totals.tokens);
        assert_eq!(rows.iter().map(|i| i.calls).sum::<u64>(), r.totals.calls);
        assert_eq!(
            rows.iter().map(|i| i.duration_ms).sum::<u64>(),
            r.totals.duration_ms
        );
        let cost: f64 = rows.iter().map(|i| i.cost_usd).sum();
        assert!((cost - r.totals.cost_usd).abs() < 1e-9);
        assert_eq!(r.totals.loops, 5);
        let top: Vec<&str> = r
            .most_expensive(3)
            .iter()
            .map(|i| i.item.as_str())
            .collect();
        assert_eq!(top, ["parse input", "docs", "write tests"]);
        assert_eq!(r.most_expensive(1).len(), 1);
        assert!(attribute(&[]).most_expensive(3).is_empty());
    }

    #[test]
    fn windows_track_first_last_peak_and_resets() {
        let ts = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let w = |u: f64, reset: i64| WindowStatus {
            utilization: Some(u),
            resets_at: Some(ts(reset)),
            status: None,
            limit_percent: None,
        };
        let mut a = l(0.1, 1, 1, None, &[], "");
        a.windows.insert("five_hour".into(), w(0.40, 100));
        a.windows.insert("seven_day".into(), w(0.10, 900));
        let mut b = l(0.1, 1, 1, None, &[], "");
        b.windows.insert("five_hour".into(), w(0.70, 100));
        let mut c = l(0.1, 1, 1, None, &[], "");
        c.windows.insert("five_hour".into(), w(0.05, 200));
        c.windows.insert("seven_day".into(), w(0.12, 900));
        let r = attribute(&[a, b, c]);
        assert_eq!(r.windows.len(), 2);
        let five = &r.windows[0];
        assert_eq!(
            (five.first, five.last, five.peak),
            (Some(0.40), Some(0.05), Some(0.70))
        );
        assert!(five.reset_between);
        assert_eq!(five.resets_at, Some(ts(200)));
        let seven = &r.windows[1];
        assert_eq!((seven.first, seven.last), (Some(0.10), Some(0.12)));
        assert!(!seven.reset_between);
    }

    #[test]
    fn the_exit_summary_names_the_most_expensive_items() {
        assert!(summary_lines(&[l(1.0, 10, 1000, None, &[], "x")]).is_empty());
        let loops = [
            l(2.0, 10, 1000, None, &["a"], "x"),
            l(1.0, 10, 1000, None, &["b"], "x"),
            l(3.0, 10, 1000, None, &["a"], "x"),
        ];
        let lines = summary_lines(&loops);
        assert_eq!(
            lines[0],
            "most expensive items of this run (of $6.00 in 3 loops; `hank report` for all):"
        );
        assert_eq!(lines[1], "  1. $5.00  2 loops  a");
        assert_eq!(lines[2], "  2. $1.00  1 loop  b");
    }
}
