//! Tasks imported from beads, GitHub issues and PRD documents, and their fix_plan rendering.
//! **\[pure\]**
//!
//! Parsers take the text a tool printed or a document's content; `sources` runs the tools.
//! Every task becomes one `- [ ] [origin] title` line; titles are flattened to one line,
//! trimmed and capped, so nothing imported can break the plan's structure.

use std::collections::HashSet;

use regex::Regex;
use serde::Serialize;

use crate::error::{HankError, Result};

/// Longest title kept (characters); longer ones are cut with `…`.
pub(crate) const MAX_TITLE_CHARS: usize = 200;

/// Where a task came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "source", content = "id", rename_all = "lowercase")]
pub(crate) enum TaskOrigin {
    /// A beads issue id (`bd-7`).
    Beads(String),
    /// A GitHub issue number.
    Github(u64),
    /// A PRD / spec document.
    Prd,
}

/// One imported task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Task {
    pub title: String,
    pub origin: TaskOrigin,
}

impl Task {
    /// The origin tag: `[bd-7]`, `[#12]`, `[prd]`.
    #[must_use]
    pub(crate) fn tag(&self) -> String {
        match &self.origin {
            TaskOrigin::Beads(id) => format!("[{id}]"),
            TaskOrigin::Github(n) => format!("[#{n}]"),
            TaskOrigin::Prd => "[prd]".to_string(),
        }
    }

    /// The fix_plan line.
    #[must_use]
    pub(crate) fn plan_line(&self) -> String {
        format!("- [ ] {} {}", self.tag(), self.title)
    }
}

/// One line, inner whitespace collapsed, capped at [`MAX_TITLE_CHARS`].
#[must_use]
pub(crate) fn clean_title(raw: &str) -> String {
    let joined = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= MAX_TITLE_CHARS {
        return joined;
    }
    let mut cut: String = joined.chars().take(MAX_TITLE_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn is_closed(status: &str) -> bool {
    matches!(
        status.trim().to_ascii_lowercase().as_str(),
        "closed" | "done" | "resolved" | "tombstone"
    )
}

/// Parses `bd list --json`: an array of issues (or `{"issues": [...]}`), open ones kept,
/// sorted by priority (0 first, stable).
///
/// # Errors
/// The text is not JSON of that shape.
pub(crate) fn parse_beads_json(text: &str) -> Result<Vec<Task>> {
    let value: serde_json::Value = serde_json::from_str(text.trim())
        .map_err(|e| HankError::Tool(format!("`bd list --json` printed invalid JSON: {e}")))?;
    let items = value
        .as_array()
        .or_else(|| value.get("issues").and_then(|v| v.as_array()))
        .ok_or_else(|| {
            HankError::Tool("`bd list --json` did not print a JSON array of issues".into())
        })?;
    let mut tasks: Vec<(i64, Task)> = Vec::new();
    for item in items {
        let id = item.get("id").and_then(|v| v.as_str()).unwrap_or("").trim();
        let title = clean_title(item.get("title").and_then(|v| v.as_str()).unwrap_or(""));
        let status = item
            .get("status")
            .and_then(|v| v.as_str())
            .unwrap_or("open");
        if id.is_empty()
            || title.is_empty()
            || is_closed(status)
            || id.contains(char::is_whitespace)
        {
            continue;
        }
        let priority = item
            .get("priority")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(2);
        tasks.push((
            priority,
            Task {
                title,
                origin: TaskOrigin::Beads(id.to_string()),
            },
        ));
    }
    tasks.sort_by_key(|(p, _)| *p);
    Ok(tasks.into_iter().map(|(_, t)| t).collect())
}

/// Parses the text form of `bd list` (`bd-7 [P1] [task] open - Title`), for a `bd` without
/// `--json`. Lines that do not start with an issue id are skipped; closed issues dropped.
#[must_use]
pub(crate) fn parse_beads_text(text: &str) -> Vec<Task> {
    let Ok(line_re) =
        Regex::new(r"^\s*(?:[○◐●✓❄-]\s+)?([A-Za-z][A-Za-z0-9_]*-[A-Za-z0-9._]+)[:\s]+(.*)$")
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(caps) = line_re.captures(line) else {
            continue;
        };
        let id = caps.get(1).map_or("", |m| m.as_str());
        let rest = caps.get(2).map_or("", |m| m.as_str()).trim();
        let (meta, title): (String, String) = match rest.split_once(" - ") {
            Some((meta, title)) => (meta.to_string(), title.to_string()),
            None => {
                // No separator: leading `[..]` groups and a status word are metadata.
                let words: Vec<&str> = rest.split_whitespace().collect();
                let mut skip = 0;
                while words
                    .get(skip)
                    .is_some_and(|w| w.starts_with('[') && w.ends_with(']'))
                {
                    skip += 1;
                }
                if words
                    .get(skip)
                    .is_some_and(|w| matches!(*w, "open" | "in_progress" | "blocked" | "closed"))
                {
                    skip += 1;
                }
                (words[..skip].join(" "), words[skip..].join(" "))
            }
        };
        if meta.split_whitespace().any(is_closed) {
            continue;
        }
        let title = clean_title(&title);
        if !title.is_empty() {
            out.push(Task {
                title,
                origin: TaskOrigin::Beads(id.to_string()),
            });
        }
    }
    out
}

/// Parses `gh issue list --json number,title,labels`. When `label` is given, only issues
/// carrying it (case-insensitively) are kept — `gh` already filters, this guards recorded
/// output and older `gh` versions.
///
/// # Errors
/// The text is not a JSON array.
pub(crate) fn parse_github_json(text: &str, label: Option<&str>) -> Result<Vec<Task>> {
    let value: serde_json::Value = serde_json::from_str(text.trim())
        .map_err(|e| HankError::Tool(format!("`gh issue list` printed invalid JSON: {e}")))?;
    let items = value
        .as_array()
        .ok_or_else(|| HankError::Tool("`gh issue list` did not print a JSON array".into()))?;
    let mut out = Vec::new();
    for item in items {
        let Some(number) = item.get("number").and_then(serde_json::Value::as_u64) else {
            continue;
        };
        let title = clean_title(item.get("title").and_then(|v| v.as_str()).unwrap_or(""));
        if title.is_empty() {
            continue;
        }
        if let Some(wanted) = label.filter(|l| !l.trim().is_empty()) {
            let has = item
                .get("labels")
                .and_then(|v| v.as_array())
                .is_some_and(|labels| {
                    labels.iter().any(|l| {
                        l.get("name")
                            .and_then(|n| n.as_str())
                            .is_some_and(|n| n.eq_ignore_ascii_case(wanted.trim()))
                    })
                });
            if !has {
                continue;
            }
        }
        out.push(Task {
            title,
            origin: TaskOrigin::Github(number),
        });
    }
    Ok(out)
}

/// Markdown's fenced code blocks (```` ``` ```` or `~~~`), read line by line.
#[derive(Debug, Default)]
pub(crate) struct Fence(Option<&'static str>);

impl Fence {
    /// Whether `line` is code: it opens a fenced block, is inside one, or closes it.
    pub(crate) fn code(&mut self, line: &str) -> bool {
        let trimmed = line.trim_start();
        if let Some(marker) = self.0 {
            if trimmed.starts_with(marker) {
                self.0 = None;
            }
            return true;
        }
        self.0 = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        self.0.is_some()
    }
}

/// Extracts tasks from a PRD without AI: unchecked checkbox items (`- [ ] …`) and numbered
/// items (`1. …`, `2) …`) anywhere; plain bullets only under a heading that names
/// requirements, features, tasks, stories or a todo list. Fenced code is skipped. Tasks are
/// deduplicated (case- and space-insensitively) and at most `cap` are kept.
#[must_use]
pub(crate) fn extract_prd_tasks(content: &str, cap: usize) -> Vec<Task> {
    let (Ok(checkbox), Ok(numbered), Ok(bullet), Ok(heading)) = (
        Regex::new(r"^\s*[-*+]\s+\[([ xX])\]\s+(.+)$"),
        Regex::new(r"^\s*\d{1,3}[.)]\s+(.+)$"),
        Regex::new(r"^\s*[-*+]\s+(.+)$"),
        Regex::new(r"^\s{0,3}#{1,6}\s+(.*)$"),
    ) else {
        return Vec::new();
    };
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    let mut fence = Fence::default();
    let mut task_section = false;
    for line in content.lines() {
        if fence.code(line) {
            continue;
        }
        if let Some(caps) = heading.captures(line) {
            let h = caps.get(1).map_or("", |m| m.as_str()).to_ascii_lowercase();
            task_section = [
                "requirement",
                "feature",
                "task",
                "stor",
                "todo",
                "to do",
                "scope",
            ]
            .iter()
            .any(|k| h.contains(k))
                && !["out of scope", "non-goal", "non goal", "not in scope"]
                    .iter()
                    .any(|k| h.contains(k));
            continue;
        }
        let text = if let Some(caps) = checkbox.captures(line) {
            if caps.get(1).is_some_and(|m| m.as_str() != " ") {
                continue; // already done
            }
            caps.get(2).map_or("", |m| m.as_str())
        } else if let Some(caps) = numbered.captures(line) {
            caps.get(1).map_or("", |m| m.as_str())
        } else if task_section && let Some(caps) = bullet.captures(line) {
            caps.get(1).map_or("", |m| m.as_str())
        } else {
            continue;
        };
        let title = clean_title(text.trim().trim_start_matches("**").trim());
        let title = title.trim_end_matches(':').to_string();
        if title.len() < 3 {
            continue;
        }
        let key = title.to_lowercase();
        if seen.insert(key) {
            out.push(Task {
                title,
                origin: TaskOrigin::Prd,
            });
            if out.len() >= cap {
                break;
            }
        }
    }
    out
}

/// Removes tasks whose title repeats an earlier one (any source), keeping the first.
#[must_use]
pub(crate) fn dedupe(tasks: Vec<Task>) -> Vec<Task> {
    let mut seen: HashSet<String> = HashSet::new();
    tasks
        .into_iter()
        .filter(|t| seen.insert(t.title.to_lowercase()))
        .collect()
}

/// The fix_plan lines for `tasks`, or a starter item when there are none.
#[must_use]
pub(crate) fn plan_items(tasks: &[Task]) -> String {
    if tasks.is_empty() {
        return "- [ ] Read the code and `.hank/specs/`, then replace this item with the project's real tasks, most important first".to_string();
    }
    tasks
        .iter()
        .map(Task::plan_line)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BD_JSON: &str = include_str!("../../fixtures/tasks/bd-list.json");
    const BD_TEXT: &str = include_str!("../../fixtures/tasks/bd-list.txt");
    const GH_JSON: &str = include_str!("../../fixtures/tasks/gh-issues.json");

    /// Fence lines and what they enclose are code; a `~~~` inside a ```` ``` ```` block does
    /// not close it.
    #[test]
    fn fenced_code_is_told_line_by_line() {
        let lines = [
            ("text", false),
            ("  ```rust", true),
            ("# not a heading", true),
            ("~~~", true),
            ("```", true),
            ("- [ ] a task", false),
            ("~~~", true),
            ("```", true),
            ("~~~ ", true),
            ("after", false),
        ];
        let mut fence = Fence::default();
        for (i, (line, code)) in lines.into_iter().enumerate() {
            assert_eq!(fence.code(line), code, "line {i}: {line:?}");
        }
    }
    const PRD: &str = include_str!("../../fixtures/tasks/prd.md");

    fn lines(tasks: &[Task]) -> Vec<String> {
        tasks.iter().map(Task::plan_line).collect()
    }

    #[test]
    fn beads_json_open_issues_by_priority() {
        let tasks = parse_beads_json(BD_JSON).unwrap();
        assert_eq!(
            lines(&tasks),
            vec![
                "- [ ] [bd-a3f8] Fix crash when the config file is empty",
                "- [ ] [bd-7] Add CSV export to the report page",
                "- [ ] [bd-12] Document the export formats",
            ]
        );
    }

    #[test]
    fn beads_json_shapes() {
        let cases: &[(&str, Option<usize>)] = &[
            ("[]", Some(0)),
            (r#"{"issues":[{"id":"x-1","title":"t"}]}"#, Some(1)),
            (
                r#"[{"id":"x-1"},{"title":"no id"},{"id":"x-2","title":"ok","status":"closed"}]"#,
                Some(0),
            ),
            ("not json", None),
            (r#"{"error":"no database"}"#, None),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse_beads_json(text).ok().map(|t| t.len()),
                *want,
                "{text}"
            );
        }
    }

    #[test]
    fn beads_text_form() {
        let tasks = parse_beads_text(BD_TEXT);
        assert_eq!(
            lines(&tasks),
            vec![
                "- [ ] [bd-7] Add CSV export to the report page",
                "- [ ] [bd-a3f8] Fix crash when the config file is empty",
                "- [ ] [bd-12] Document the export formats",
            ]
        );
    }

    #[test]
    fn github_issues_with_and_without_label() {
        let all = parse_github_json(GH_JSON, None).unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(
            all[0].plan_line(),
            "- [ ] [#42] Login fails with SSO accounts"
        );
        let bugs = parse_github_json(GH_JSON, Some("BUG")).unwrap();
        assert_eq!(
            lines(&bugs),
            vec![
                "- [ ] [#42] Login fails with SSO accounts",
                "- [ ] [#12] Crash on empty search"
            ]
        );
        assert!(parse_github_json("{}", None).is_err());
        assert!(parse_github_json("", None).is_err());
    }

    #[test]
    fn prd_extraction() {
        let tasks = extract_prd_tasks(PRD, 50);
        assert_eq!(
            lines(&tasks),
            vec![
                "- [ ] [prd] Users can sign up with email and password",
                "- [ ] [prd] Users can reset a forgotten password",
                "- [ ] [prd] Export the report as CSV",
                "- [ ] [prd] Send a weekly summary email",
                "- [ ] [prd] Admins can deactivate accounts",
                "- [ ] [prd] Page load under 2 seconds on 3G",
            ]
        );
        assert_eq!(extract_prd_tasks(PRD, 2).len(), 2);
        assert!(extract_prd_tasks("", 10).is_empty());
    }

    #[test]
    fn titles_are_one_capped_line() {
        let long = "word ".repeat(100);
        let cases = [
            ("  a\n b\t c ", "a b c".to_string()),
            (
                long.as_str(),
                format!("{}…", &long.trim()[..MAX_TITLE_CHARS - 1]),
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(clean_title(raw), want);
        }
    }

    #[test]
    fn dedupe_across_sources_and_starter_item() {
        let t = |title: &str, origin| Task {
            title: title.into(),
            origin,
        };
        let tasks = dedupe(vec![
            t("Fix it", TaskOrigin::Github(1)),
            t("fix it", TaskOrigin::Prd),
            t("Other", TaskOrigin::Beads("bd-1".into())),
        ]);
        assert_eq!(
            lines(&tasks),
            vec!["- [ ] [#1] Fix it", "- [ ] [bd-1] Other"]
        );
        assert!(plan_items(&[]).starts_with("- [ ] "));
        assert_eq!(plan_items(&tasks), "- [ ] [#1] Fix it\n- [ ] [bd-1] Other");
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC*") {
            let _ = parse_beads_json(&s);
            let _ = parse_beads_text(&s);
            let _ = parse_github_json(&s, Some("x"));
            for t in extract_prd_tasks(&s, 20) {
                proptest::prop_assert!(!t.title.contains('\n'));
            }
        }
    }
}

#[cfg(test)]
mod scope_tests {
    use super::*;

    #[test]
    fn out_of_scope_bullets_are_not_tasks() {
        let prd =
            "## Scope\n- Login page\n\n## Out of scope\n- Billing\n\n## Non-goals\n- Mobile app\n";
        let titles: Vec<String> = extract_prd_tasks(prd, 50)
            .into_iter()
            .map(|t| t.title)
            .collect();
        assert_eq!(titles, vec!["Login page".to_string()]);
    }
}
