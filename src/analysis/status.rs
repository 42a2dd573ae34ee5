//! The `---HANK_STATUS---` block the agent ends each answer with.  **\[pure\]**
//!
//! Tolerant of what models actually write: any case, extra spaces, markdown fences and bold
//! around it, `-`/`*` bullets, `--- HANK_STATUS ---`, a YAML-style `HANK_STATUS:` header with
//! indented `key: value` fields, a missing end marker. The last block wins; a value that cannot
//! be read is `None`.

use super::{StatusBlock, TestsStatus, WorkStatus, WorkType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    /// `---HANK_STATUS---`
    Start,
    /// `HANK_STATUS:` (fields follow, indented or not)
    YamlStart,
    /// `---END_HANK_STATUS---`
    End,
}

/// Longest part of one line read for the status block (a longer line is cut).
const STATUS_LINE_MAX: usize = 64 * 1024;

fn cut_line(line: &str) -> &str {
    crate::sanitize::cut_bytes(line, STATUS_LINE_MAX)
}

/// Removes markdown decoration and bullets from a line: `**`, `__`, backticks, `>` quotes,
/// leading `-`/`*`/`+` bullets.
fn clean(line: &str) -> String {
    let no_marks: String = line.chars().filter(|c| !matches!(c, '*' | '`')).collect();
    let mut s = no_marks.trim();
    loop {
        let before = s;
        s = s.trim_start_matches('>').trim_start();
        if let Some(rest) = s.strip_prefix("- ").or_else(|| s.strip_prefix("+ ")) {
            s = rest.trim_start();
        }
        if s == before {
            break;
        }
    }
    s.replace("__", "")
}

fn marker(cleaned: &str) -> Option<Marker> {
    let squeezed: String = cleaned
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_uppercase()
        .replace('-', "_");
    let core = squeezed.trim_matches('_');
    if squeezed.starts_with("___") || squeezed.ends_with("___") {
        match core {
            "HANK_STATUS" => return Some(Marker::Start),
            "END_HANK_STATUS" | "ENDHANK_STATUS" | "END_OF_HANK_STATUS" => {
                return Some(Marker::End);
            }
            _ => {}
        }
    }
    match squeezed.as_str() {
        "HANK_STATUS:" | "HANK_STATUS" => Some(Marker::YamlStart),
        _ => None,
    }
}

/// Splits `KEY: value` (or `KEY = value`) and normalizes the key
/// (`tasks completed this loop` → `TASKS_COMPLETED_THIS_LOOP`).
fn field(cleaned: &str) -> Option<(String, &str)> {
    let idx = cleaned.find([':', '='])?;
    let key: String = cleaned[..idx]
        .trim()
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("_")
        .to_ascii_uppercase();
    let value = cleaned[idx + 1..].trim();
    matches!(
        key.as_str(),
        "STATUS"
            | "TASKS_COMPLETED_THIS_LOOP"
            | "TASKS_COMPLETED"
            | "FILES_MODIFIED"
            | "TESTS_STATUS"
            | "WORK_TYPE"
            | "EXIT_SIGNAL"
            | "RECOMMENDATION"
    )
    .then_some((key, value))
}

/// `IN PROGRESS`, `in-progress`, `"COMPLETE"` → `IN_PROGRESS`, `COMPLETE`.
fn word(value: &str) -> String {
    let v = value
        .trim()
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '.' | ',' | ';'));
    v.split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("_")
        .to_ascii_uppercase()
}

fn number(value: &str) -> Option<u32> {
    let digits: String = value
        .trim()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn set_field(block: &mut StatusBlock, key: &str, value: &str) {
    match key {
        "STATUS" => {
            block.status = match word(value).as_str() {
                "IN_PROGRESS" | "INPROGRESS" | "WORKING" => Some(WorkStatus::InProgress),
                "COMPLETE" | "COMPLETED" | "DONE" => Some(WorkStatus::Complete),
                "BLOCKED" => Some(WorkStatus::Blocked),
                _ => None,
            };
        }
        "TASKS_COMPLETED_THIS_LOOP" | "TASKS_COMPLETED" => block.tasks_completed = number(value),
        "FILES_MODIFIED" => block.files_modified = number(value),
        "TESTS_STATUS" => {
            block.tests_status = match word(value).as_str() {
                "PASSING" | "PASSED" | "PASS" => Some(TestsStatus::Passing),
                "FAILING" | "FAILED" | "FAIL" => Some(TestsStatus::Failing),
                "NOT_RUN" | "NOTRUN" | "NONE" | "SKIPPED" => Some(TestsStatus::NotRun),
                _ => None,
            };
        }
        "WORK_TYPE" => {
            block.work_type = match word(value).as_str() {
                "IMPLEMENTATION" => Some(WorkType::Implementation),
                "TESTING" => Some(WorkType::Testing),
                "DOCUMENTATION" => Some(WorkType::Documentation),
                "REFACTORING" => Some(WorkType::Refactoring),
                _ => None,
            };
        }
        "EXIT_SIGNAL" => {
            block.exit_signal = match word(value).as_str() {
                "TRUE" | "YES" => Some(true),
                "FALSE" | "NO" => Some(false),
                _ => None,
            };
        }
        "RECOMMENDATION" => {
            let v = value.trim().trim_matches(|c: char| matches!(c, '"' | '\''));
            block.recommendation = (!v.trim().is_empty()).then(|| v.trim().to_owned());
        }
        _ => {}
    }
}

/// Parses the last `HANK_STATUS` block in `text`, if any block has at least one known field.
#[must_use]
pub fn parse_status_block(text: &str) -> Option<StatusBlock> {
    let mut found: Option<StatusBlock> = None;
    // The block being read, and whether it is YAML-style (ends at the first non-field line).
    let mut current: Option<(StatusBlock, bool, bool)> = None;
    for raw in text.lines() {
        // A status line is short: only the start of a huge line is looked at (memory stays
        // flat whatever the answer holds).
        let line = clean(cut_line(raw));
        if let Some(m) = marker(&line) {
            if let Some((block, _, true)) = current.take() {
                found = Some(block);
            }
            match m {
                Marker::Start => current = Some((StatusBlock::default(), false, false)),
                Marker::YamlStart => current = Some((StatusBlock::default(), true, false)),
                Marker::End => {}
            }
            continue;
        }
        let Some((block, yaml, any)) = current.as_mut() else {
            continue;
        };
        if line.is_empty() || line.starts_with("```") || line.starts_with("~~~") {
            continue;
        }
        match field(&line) {
            Some((key, value)) => {
                set_field(block, &key, value);
                *any = true;
            }
            None if *yaml => {
                if let Some((block, _, true)) = current.take() {
                    found = Some(block);
                }
            }
            None => {}
        }
    }
    if let Some((block, _, true)) = current {
        found = Some(block);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> StatusBlock {
        StatusBlock {
            status: Some(WorkStatus::InProgress),
            tasks_completed: Some(2),
            files_modified: Some(5),
            tests_status: Some(TestsStatus::Passing),
            work_type: Some(WorkType::Implementation),
            exit_signal: Some(false),
            recommendation: Some("Implement the parser next".to_owned()),
        }
    }

    #[test]
    fn block_variants_parse_to_the_same_fields() {
        let variants = [
            // The canonical form.
            "Done.\n---HANK_STATUS---\nSTATUS: IN_PROGRESS\nTASKS_COMPLETED_THIS_LOOP: 2\nFILES_MODIFIED: 5\nTESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: false\nRECOMMENDATION: Implement the parser next\n---END_HANK_STATUS---\n",
            // Lower case, extra spaces, fenced.
            "```\n--- hank_status ---\n  status :  in_progress\n tasks_completed_this_loop: 2 \nfiles_modified:5\ntests_status: passing\nwork_type: implementation\nexit_signal: FALSE\nrecommendation:   Implement the parser next  \n--- end_hank_status ---\n```",
            // Bold and bullets.
            "**---HANK_STATUS---**\n- **STATUS:** IN_PROGRESS\n- **TASKS_COMPLETED_THIS_LOOP:** 2\n* FILES_MODIFIED: 5\n* TESTS_STATUS: `PASSING`\n- WORK_TYPE: IMPLEMENTATION\n- EXIT_SIGNAL: no\n- RECOMMENDATION: Implement the parser next\n**---END_HANK_STATUS---**",
            // YAML style with indented fields, ended by prose.
            "HANK_STATUS:\n  STATUS: IN_PROGRESS\n  TASKS_COMPLETED_THIS_LOOP: 2\n  FILES_MODIFIED: 5\n  TESTS_STATUS: PASSING\n  WORK_TYPE: IMPLEMENTATION\n  EXIT_SIGNAL: false\n  RECOMMENDATION: \"Implement the parser next\"\nThat is all.",
            // No end marker, CRLF line ends, spaces in keys.
            "---HANK_STATUS---\r\nStatus: In Progress\r\nTasks completed this loop: 2 tasks\r\nFiles modified: 5\r\nTests status: Passing\r\nWork type: Implementation\r\nExit signal: False\r\nRecommendation: Implement the parser next\r\n",
        ];
        for v in variants {
            assert_eq!(parse_status_block(v), Some(full()), "{v}");
        }
    }

    #[test]
    fn last_block_wins() {
        let text = "---HANK_STATUS---\nSTATUS: BLOCKED\nEXIT_SIGNAL: true\n---END_HANK_STATUS---\nmore work\n---HANK_STATUS---\nSTATUS: COMPLETE\n---END_HANK_STATUS---";
        let b = parse_status_block(text).unwrap();
        assert_eq!(b.status, Some(WorkStatus::Complete));
        assert_eq!(b.exit_signal, None);
    }

    #[test]
    fn unreadable_values_are_none() {
        let text = "---HANK_STATUS---\nSTATUS: MAYBE\nTASKS_COMPLETED_THIS_LOOP: several\nFILES_MODIFIED: -3\nTESTS_STATUS: green\nWORK_TYPE: vibes\nEXIT_SIGNAL: perhaps\nRECOMMENDATION:\n---END_HANK_STATUS---";
        assert_eq!(parse_status_block(text), Some(StatusBlock::default()));
    }

    #[test]
    fn exit_signal_words() {
        for (v, want) in [
            ("true", Some(true)),
            ("TRUE", Some(true)),
            ("Yes", Some(true)),
            ("false", Some(false)),
            ("NO", Some(false)),
            ("1", None),
            ("", None),
        ] {
            let text = format!(
                "---HANK_STATUS---\nSTATUS: COMPLETE\nEXIT_SIGNAL: {v}\n---END_HANK_STATUS---"
            );
            assert_eq!(parse_status_block(&text).unwrap().exit_signal, want, "{v}");
        }
    }

    #[test]
    fn no_block_or_empty_block_is_none() {
        for text in [
            "",
            "STATUS: COMPLETE\nEXIT_SIGNAL: true",
            "---HANK_STATUS---\n---END_HANK_STATUS---",
            "the HANK_STATUS block is parsed in status.rs",
        ] {
            assert_eq!(parse_status_block(text), None, "{text}");
        }
    }
}
