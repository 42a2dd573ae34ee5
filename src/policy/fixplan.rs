//! `fix_plan.md` parsing: checkbox items, their sections and optionality.  **\[pure\]**
//!
//! A checkbox item is a list item whose text starts with `[ ]`, `[x]` or `[X]`: bullets `-`,
//! `*`, `+` or numbered `1.` / `1)`, at any indentation (sub-items count). Checkboxes inside
//! fenced code blocks (```` ``` ```` or `~~~`) are ignored. CRLF line endings are accepted.
//!
//! A section is optional when its heading (any level) starts with one of the optional names,
//! case-insensitively, as a whole word (`## Optional`, `## Future work`, `### Nice to have
//! (later)`); leading numbering, emoji or punctuation before the name are skipped. A
//! sub-heading inherits optionality from an optional parent until the next heading of the same
//! or a higher level.
//!
//! No I/O: the caller reads the file and passes its content.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Section names that are optional unless OPTIONAL_SECTIONS says otherwise.
pub const DEFAULT_OPTIONAL_SECTIONS: &[&str] = &["Optional", "Future", "Nice to Have"];

/// One checkbox item.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanItem {
    /// The item text after the checkbox, trimmed.
    pub text: String,
    pub done: bool,
    /// The text of the nearest heading above the item ("" before any heading).
    pub section: String,
    /// The item is under an optional section.
    pub optional: bool,
    /// 1-based line number.
    pub line: usize,
}

/// All checkbox items of a plan, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Plan {
    pub items: Vec<PlanItem>,
}

/// [`DEFAULT_OPTIONAL_SECTIONS`] as owned strings (the form [`parse`] takes).
#[must_use]
pub fn default_optional_sections() -> Vec<String> {
    DEFAULT_OPTIONAL_SECTIONS
        .iter()
        .map(|s| (*s).to_string())
        .collect()
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Plan {
    /// Checked items.
    #[must_use]
    pub fn done(&self) -> u32 {
        count(self.items.iter().filter(|i| i.done).count())
    }

    /// All items.
    #[must_use]
    pub fn total(&self) -> u32 {
        count(self.items.len())
    }

    /// Unchecked items outside optional sections.
    #[must_use]
    pub fn open_required(&self) -> u32 {
        count(self.items.iter().filter(|i| !i.done && !i.optional).count())
    }

    /// At least one checkbox and no open item outside optional sections.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        !self.items.is_empty() && self.open_required() == 0
    }

    /// The first open required item, else the first open optional one.
    #[must_use]
    pub fn next_open(&self) -> Option<&PlanItem> {
        self.items
            .iter()
            .find(|i| !i.done && !i.optional)
            .or_else(|| self.items.iter().find(|i| !i.done))
    }
}

/// A fence opener/closer: the fence character and its run length.
fn fence(trimmed: &str) -> Option<(char, usize)> {
    let c = trimmed.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = trimmed.chars().take_while(|&x| x == c).count();
    (n >= 3).then_some((c, n))
}

/// `(level, text)` of an ATX heading.
fn heading(trimmed: &str) -> Option<(usize, String)> {
    let level = trimmed.chars().take_while(|&c| c == '#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &trimmed[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let text = rest.trim().trim_end_matches('#').trim_end();
    Some((level, text.to_string()))
}

/// `(done, text)` of a checkbox list item.
fn checkbox(trimmed: &str) -> Option<(bool, String)> {
    let after_marker = if let Some(rest) = trimmed.strip_prefix(['-', '*', '+']) {
        rest
    } else {
        let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        trimmed[digits..].strip_prefix(['.', ')'])?
    };
    if !after_marker.starts_with([' ', '\t']) {
        return None;
    }
    let body = after_marker.trim_start();
    let mut chars = body.chars();
    if chars.next() != Some('[') {
        return None;
    }
    let mark = chars.next()?;
    if chars.next() != Some(']') {
        return None;
    }
    let done = match mark {
        ' ' => false,
        'x' | 'X' => true,
        _ => return None,
    };
    let rest = chars.as_str();
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some((done, rest.trim().to_string()))
}

/// Whether a heading's text names an optional section.
fn is_optional_heading(text: &str, names: &[String]) -> bool {
    let start = text.trim_start_matches(|c: char| !c.is_alphabetic());
    let lower = start.to_lowercase();
    names.iter().any(|name| {
        let name = name.trim().to_lowercase();
        if name.is_empty() {
            return false;
        }
        lower
            .strip_prefix(name.as_str())
            .is_some_and(|rest| !rest.chars().next().is_some_and(char::is_alphanumeric))
    })
}

/// Parses `fix_plan.md` content. `optional_sections` are the optional section names
/// (see [`default_optional_sections`]).
#[must_use]
pub fn parse(content: &str, optional_sections: &[String]) -> Plan {
    let mut items = Vec::new();
    let mut open_fence: Option<(char, usize)> = None;
    let mut section = String::new();
    // Level of the optional heading we are under, if any.
    let mut optional_level: Option<usize> = None;

    for (idx, raw) in content.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim_start();

        if let Some((c, n)) = open_fence {
            if let Some((c2, n2)) = fence(trimmed)
                && c2 == c
                && n2 >= n
                && trimmed.trim_start_matches(c).trim().is_empty()
            {
                open_fence = None;
            }
            continue;
        }
        if let Some(f) = fence(trimmed) {
            open_fence = Some(f);
            continue;
        }
        if let Some((level, text)) = heading(trimmed) {
            let inherited = optional_level.is_some_and(|ol| level > ol);
            if !inherited {
                optional_level = is_optional_heading(&text, optional_sections).then_some(level);
            }
            section = text;
            continue;
        }
        if let Some((done, text)) = checkbox(trimmed) {
            items.push(PlanItem {
                text,
                done,
                section: section.clone(),
                optional: optional_level.is_some(),
                line: idx + 1,
            });
        }
    }
    Plan { items }
}

fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `now` is the item `start` (both normalized): the same text, or the same text followed by
/// more words ("parse input — done").
fn same_item(start: &str, now: &str) -> bool {
    now.strip_prefix(start)
        .is_some_and(|rest| rest.is_empty() || !rest.starts_with(char::is_alphanumeric))
}

/// One required item known when the run started.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tracked {
    text: String,
    /// Lowercase, whitespace-normalized text.
    key: String,
    /// Seen checked (as a required item) at some point of this run.
    seen_done: bool,
}

/// Where a required item went when the plan no longer holds it as required and open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    /// Open required items that disappeared from the plan.
    pub missing: Vec<String>,
    /// Open required items that moved under an optional section.
    pub made_optional: Vec<String>,
}

impl Drift {
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.made_optional.is_empty()
    }

    /// Every drifted item, missing ones first.
    pub fn items(&self) -> impl Iterator<Item = &String> {
        self.missing.iter().chain(&self.made_optional)
    }
}

/// The required items of the plan as the run started: the plan cannot shrink to "done".
///
/// An item matches a later item whose normalized text equals its own or starts with it (an
/// agent that ticks an item and appends "— done in abc123" keeps it). An item that was seen
/// checked during the run may later disappear (agents prune finished work); an item that
/// disappears, or moves under an optional section, while still open stays required: the
/// plan is complete only when those are checked too, or when the user changes the plan
/// between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Required {
    items: Vec<Tracked>,
}

impl Required {
    /// The required (non-optional) items of `plan`, taken when the run starts.
    #[must_use]
    pub fn at_start(plan: &Plan) -> Self {
        Self {
            items: plan
                .items
                .iter()
                .filter(|i| !i.optional)
                .map(|i| Tracked {
                    text: i.text.clone(),
                    key: normalize(&i.text).to_lowercase(),
                    seen_done: i.done,
                })
                .collect(),
        }
    }

    /// Looks at the plan as it is now: remembers the items checked in it, and returns the
    /// items that left it (or became optional) while open.
    pub fn observe(&mut self, plan: &Plan) -> Drift {
        let now: Vec<(String, &PlanItem)> = plan
            .items
            .iter()
            .map(|i| (normalize(&i.text).to_lowercase(), i))
            .collect();
        let mut drift = Drift::default();
        for t in &mut self.items {
            let matches: Vec<&PlanItem> = now
                .iter()
                .filter(|(key, _)| same_item(&t.key, key))
                .map(|(_, item)| *item)
                .collect();
            if matches.iter().any(|i| i.done && !i.optional) {
                t.seen_done = true;
            }
            if t.seen_done {
                continue;
            }
            if matches.is_empty() {
                drift.missing.push(t.text.clone());
            } else if matches.iter().all(|i| i.optional) {
                drift.made_optional.push(t.text.clone());
            }
        }
        drift
    }

    /// Whether `plan` is complete once the items it lost are counted as open.
    pub fn complete(&mut self, plan: &Plan) -> bool {
        let drift = self.observe(plan);
        plan.is_complete() && drift.is_empty()
    }
}

/// Items open in `before` and checked in `after`, matched by (whitespace-normalized) text.
/// Duplicated texts are matched as a multiset.
#[must_use]
pub fn newly_checked(before: &str, after: &str) -> u32 {
    u32::try_from(newly_checked_items(before, after).len()).unwrap_or(u32::MAX)
}

/// The items [`newly_checked`] counts, by their (whitespace-normalized) text, in the order
/// they appear in `after`; an item ticked twice (duplicated text) appears twice.
#[must_use]
pub fn newly_checked_items(before: &str, after: &str) -> Vec<String> {
    let no_optional: Vec<String> = Vec::new();
    let b = parse(before, &no_optional);
    let a = parse(after, &no_optional);
    // text → (open before, done before)
    let mut counts: HashMap<String, (u32, u32)> = HashMap::new();
    for item in &b.items {
        let e = counts.entry(normalize(&item.text)).or_default();
        if item.done {
            e.1 = e.1.saturating_add(1);
        } else {
            e.0 = e.0.saturating_add(1);
        }
    }
    let mut out = Vec::new();
    for item in a.items.iter().filter(|i| i.done) {
        let text = normalize(&item.text);
        if let Some(e) = counts.get_mut(&text) {
            // Done items of `after` first match the ones already done before.
            if e.1 > 0 {
                e.1 -= 1;
            } else if e.0 > 0 {
                e.0 -= 1;
                out.push(text);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn newly_checked_items_name_what_newly_checked_counts() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("- [ ] a\n- [ ] b\n", "- [x] a\n- [ ] b\n", &["a"]),
            ("- [ ] a\n- [ ] b\n", "- [x] b\n- [x]  a\n", &["b", "a"]),
            ("- [x] a\n- [ ] b\n", "- [x] a\n- [ ] b\n", &[]),
            ("- [ ] a\n- [ ] a\n", "- [x] a\n- [ ] a\n", &["a"]),
            ("- [x] a\n- [ ] a\n", "- [x] a\n- [x] a\n", &["a"]),
            ("- [ ] a\n", "- [x] c\n", &[]),
            ("", "- [x] a\n", &[]),
        ];
        for (before, after, want) in cases {
            let got = newly_checked_items(before, after);
            assert_eq!(got, want.to_vec(), "{before:?} → {after:?}");
            assert_eq!(
                got.len() as u32,
                newly_checked(before, after),
                "{before:?} → {after:?}"
            );
        }
    }

    fn p(content: &str) -> Plan {
        parse(content, &default_optional_sections())
    }

    #[test]
    fn checkbox_forms() {
        // (line, expected (done, text))
        let cases: &[(&str, Option<(bool, &str)>)] = &[
            ("- [ ] a", Some((false, "a"))),
            ("- [x] b", Some((true, "b"))),
            ("- [X] c", Some((true, "c"))),
            ("* [ ] d", Some((false, "d"))),
            ("+ [x] e", Some((true, "e"))),
            ("1. [ ] f", Some((false, "f"))),
            ("12) [x] g", Some((true, "g"))),
            ("    - [ ] sub item  ", Some((false, "sub item"))),
            ("\t- [ ] tab", Some((false, "tab"))),
            ("- [ ]", Some((false, ""))),
            ("-  [ ] two spaces", Some((false, "two spaces"))),
            ("- [ ]x", None),
            ("- [] empty", None),
            ("- [y] other", None),
            ("-[ ] no space", None),
            ("- plain item", None),
            ("[ ] bare", None),
            ("1.[ ] tight", None),
            ("a. [ ] letter", None),
            ("- [ ] with [x] inside", Some((false, "with [x] inside"))),
        ];
        for (line, expected) in cases {
            let got = checkbox(line.trim_start());
            let expected = expected.map(|(d, t)| (d, t.to_string()));
            assert_eq!(got, expected, "{line:?}");
        }
    }

    #[test]
    fn optional_heading_matching() {
        let names = default_optional_sections();
        let cases: &[(&str, bool)] = &[
            ("Optional", true),
            ("optional", true),
            ("Future work", true),
            ("Nice to have (later)", true),
            ("NICE TO HAVE", true),
            ("🔮 Future", true),
            ("3. Optional extras", true),
            ("Futures", false),
            ("Optionality", false),
            ("High priority", false),
            ("Not optional", false),
            ("", false),
        ];
        for (text, expected) in cases {
            assert_eq!(is_optional_heading(text, &names), *expected, "{text:?}");
        }
        assert!(!is_optional_heading("Anything", &[String::new()]));
        assert!(is_optional_heading("Later stuff", &["later".to_string()]));
    }

    #[test]
    fn sections_and_inheritance() {
        let plan = p("# Plan\r\n\
             - [ ] top\r\n\
             ## High Priority\r\n\
             - [x] one\r\n\
             ## Optional\r\n\
             - [ ] opt1\r\n\
             ### Details\r\n\
             - [ ] opt2\r\n\
             ## Medium\r\n\
             - [ ] med\r\n\
             # Future work\r\n\
             ## Sub\r\n\
             - [ ] fut\r\n");
        let got: Vec<(&str, bool, &str, usize)> = plan
            .items
            .iter()
            .map(|i| (i.text.as_str(), i.optional, i.section.as_str(), i.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("top", false, "Plan", 2),
                ("one", false, "High Priority", 4),
                ("opt1", true, "Optional", 6),
                ("opt2", true, "Details", 8),
                ("med", false, "Medium", 10),
                ("fut", true, "Sub", 13),
            ]
        );
        assert_eq!(plan.done(), 1);
        assert_eq!(plan.total(), 6);
        assert_eq!(plan.open_required(), 2);
        assert!(!plan.is_complete());
        assert_eq!(plan.next_open().map(|i| i.text.as_str()), Some("top"));
    }

    #[test]
    fn fenced_blocks_are_ignored() {
        let plan = p(
            "- [ ] real\n```md\n- [ ] in fence\n~~~\n- [ ] still in\n```\n\
             - [x] after\n~~~~\n- [ ] tilde\n```\n~~~~\n  ```\n  - [ ] indented fence\n  ```\n",
        );
        let texts: Vec<&str> = plan.items.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, vec!["real", "after"]);
        // An unclosed fence hides the rest.
        assert_eq!(p("```\n- [ ] x\n").total(), 0);
    }

    #[test]
    fn completion_table() {
        // (content, is_complete, next_open)
        let cases: &[(&str, bool, Option<&str>)] = &[
            ("", false, None),
            ("# Plan\nno boxes here\n", false, None),
            ("- [x] a\n- [x] b\n", true, None),
            ("- [x] a\n## Optional\n- [ ] later\n", true, Some("later")),
            ("## Nice to Have\n- [ ] n\n", true, Some("n")),
            (
                "- [x] a\n## Future\n- [ ] f\n## Now\n- [ ] b\n",
                false,
                Some("b"),
            ),
            ("- [ ] a\n- [x] b\n", false, Some("a")),
        ];
        for (content, complete, next) in cases {
            let plan = p(content);
            assert_eq!(plan.is_complete(), *complete, "{content:?}");
            assert_eq!(
                plan.next_open().map(|i| i.text.as_str()),
                *next,
                "{content:?}"
            );
        }
        // With no optional names nothing is optional.
        assert!(!parse("- [x] a\n## Optional\n- [ ] l\n", &[]).is_complete());
    }

    #[test]
    fn newly_checked_table() {
        let cases: &[(&str, &str, u32)] = &[
            ("- [ ] a\n- [ ] b\n", "- [x] a\n- [ ] b\n", 1),
            ("- [ ] a\n- [ ] b\n", "- [x] a\n- [X] b\n", 2),
            ("- [ ] a\n", "- [ ] a\n", 0),
            ("- [x] a\n", "- [x] a\n", 0),
            // Reordered and re-indented still matches by text.
            ("- [ ] a  b\n- [ ] c\n", "- [x] c\n  - [x] a b\n", 2),
            // New items added already checked do not count.
            ("- [ ] a\n", "- [ ] a\n- [x] z\n", 0),
            // Duplicates as a multiset.
            ("- [x] t\n- [ ] t\n", "- [x] t\n- [x] t\n", 1),
            ("- [ ] t\n- [ ] t\n", "- [x] t\n- [ ] t\n", 1),
            ("", "- [x] a\n", 0),
            ("- [ ] a\r\n", "- [x] a\r\n", 1),
        ];
        for (before, after, expected) in cases {
            assert_eq!(
                newly_checked(before, after),
                *expected,
                "{before:?} → {after:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn never_panics_and_counts_add_up(content in "(([-*+] |[0-9]{1,3}[.)] |#{1,7} ?| {0,4}|```|~~~)(\\[[ xX]?\\] ?)?[a-zA-Z ]{0,12}(\r?\n))*") {
            let plan = p(&content);
            let open = u32::try_from(plan.items.iter().filter(|i| !i.done).count()).unwrap();
            prop_assert_eq!(plan.done() + open, plan.total());
            prop_assert!(plan.open_required() <= open);
            prop_assert_eq!(plan.is_complete(), plan.total() > 0 && plan.open_required() == 0);
            prop_assert!(newly_checked(&content, &content) == 0);
        }

        #[test]
        fn arbitrary_text_never_panics(content in "\\PC*") {
            let plan = p(&content);
            prop_assert!(plan.done() <= plan.total());
            let _ = newly_checked(&content, "");
        }
    }
    #[test]
    fn the_plan_cannot_shrink_to_done() {
        let opt = default_optional_sections();
        let start = parse(
            "## Tasks\n- [ ] parse input\n- [ ] write output\n- [x] set up\n## Optional\n- [ ] polish\n",
            &opt,
        );
        // (name, plan after, complete, missing, made optional)
        type Case<'a> = (&'a str, &'a str, bool, &'a [&'a str], &'a [&'a str]);
        let cases: &[Case<'_>] = &[
            (
                "all ticked",
                "## Tasks\n- [x] parse input\n- [x] write output\n- [x] set up\n",
                true,
                &[],
                &[],
            ),
            (
                "ticked with a note",
                "## Tasks\n- [x] Parse  input (done in abc123)\n- [x] write output\n",
                true,
                &[],
                &[],
            ),
            (
                "open item deleted",
                "## Tasks\n- [x] parse input\n- [x] set up\n",
                false,
                &["write output"],
                &[],
            ),
            (
                "open item moved to optional",
                "## Tasks\n- [x] parse input\n## Optional\n- [ ] write output\n",
                false,
                &[],
                &["write output"],
            ),
            (
                "section renamed to optional",
                "## Optional\n- [ ] parse input\n- [ ] write output\n- [x] set up\n",
                false,
                &[],
                &["parse input", "write output"],
            ),
            (
                "every checkbox removed",
                "# Plan\nall done!\n",
                false,
                &["parse input", "write output"],
                &[],
            ),
        ];
        for (name, after, complete, missing, optional) in cases {
            let mut req = Required::at_start(&start);
            let plan = parse(after, &opt);
            let drift = req.observe(&plan);
            assert_eq!(drift.missing, *missing, "{name}");
            assert_eq!(drift.made_optional, *optional, "{name}");
            assert_eq!(req.complete(&plan), *complete, "{name}");
        }
    }

    #[test]
    fn a_ticked_item_may_be_pruned_later() {
        let opt = default_optional_sections();
        let mut req = Required::at_start(&parse("- [ ] a\n- [ ] b\n", &opt));
        assert!(req.observe(&parse("- [x] a\n- [ ] b\n", &opt)).is_empty());
        // `a` was seen done, so pruning it is fine; `b` still open.
        let pruned = parse("- [ ] b\n", &opt);
        assert!(req.observe(&pruned).is_empty());
        assert!(!req.complete(&pruned));
        assert!(req.complete(&parse("- [x] b\n", &opt)));
    }

    #[test]
    fn a_longer_word_is_another_item() {
        assert!(same_item("parse input", "parse input"));
        assert!(same_item("parse input", "parse input — done"));
        assert!(same_item("parse input", "parse input (abc)"));
        assert!(!same_item("parse input", "parse inputs"));
        assert!(!same_item("a", "add tests"));
    }
}
