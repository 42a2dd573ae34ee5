//! `agent_crashed`: an agent that exited non-zero without a model answer.  **\[pure\]**
//!
//! A crash is not an outage: retrying it later rarely helps, and waiting for it in backoff
//! only hides it. The first crash is retried at once (no backoff); the same crash twice in a
//! row ([`same_twice`]: the crash lines compared as error signatures, numbers, paths and ids
//! left out) stops the run with `agent_crashed`, the crash's line and the fix to try
//! ([`remedy`]).

use std::sync::LazyLock;

use regex::Regex;

use crate::policy::decide::LoopRecord;

/// The record of a crash in a loop's record (`LoopRecord::crash`): how it ended and the line
/// that says what went wrong.
#[must_use]
pub fn record(c: &crate::analysis::Crash) -> String {
    if c.line.is_empty() {
        format!("exited with code {} and printed no error", c.exit_code)
    } else {
        format!("exited with code {}: {}", c.exit_code, c.line)
    }
}

/// Whether the last two loops of `history` (this loop last) crashed the same way.
#[must_use]
pub fn same_twice(history: &[LoopRecord]) -> bool {
    let [.., before, last] = history else {
        return false;
    };
    match (&before.crash, &last.crash) {
        (Some(a), Some(b)) => {
            crate::analysis::normalize_signature(a) == crate::analysis::normalize_signature(b)
        }
        _ => false,
    }
}

static REFUSED: LazyLock<Regex> = LazyLock::new(|| {
    crate::analysis::re(
        r"(?i)permission denied|operation not permitted|\bEACCES\b|\bEPERM\b|PermissionError|read-only file system|\bEROFS\b",
    )
});
static MISSING: LazyLock<Regex> = LazyLock::new(|| {
    crate::analysis::re(
        r"(?i)command not found|no such file or directory|\bENOENT\b|ModuleNotFoundError|ImportError|Cannot find module|not found in PATH",
    )
});
static MEMORY: LazyLock<Regex> = LazyLock::new(|| {
    crate::analysis::re(
        r"(?i)out of memory|MemoryError|heap out of memory|Cannot allocate memory|\bENOMEM\b",
    )
});

/// The fix to try for a crash whose line is `line`.
#[must_use]
pub fn remedy(line: &str) -> &'static str {
    if REFUSED.is_match(line) {
        "a file access was refused: under hank's sandbox (SANDBOX), allow the path with SANDBOX_WRITE (or SANDBOX_READ for reading) in .hankrc; otherwise fix the file's owner or permissions"
    } else if MISSING.is_match(line) {
        "a program, module or file the agent needs is missing: check the agent's installation and command (CLAUDE_CODE_CMD or its profile in .hank/agents/) with `hank doctor`"
    } else if MEMORY.is_match(line) {
        "the agent ran out of memory: free memory or run fewer agents at once (`hank fleet --agents N`, FLEET_MIN_FREE_MEMORY)"
    } else {
        "run the agent's command by hand in the project (its whole error output is in the last loop's .err log under .hank/logs/) and `hank doctor`, and fix what it says"
    }
}

/// The exit message of an `agent_crashed` stop, from the last loop's crash record.
#[must_use]
pub fn exit_message(last: Option<&str>) -> String {
    let what = last.unwrap_or("exited non-zero without an answer");
    let line = last.map_or("", |l| l.split_once(": ").map_or("", |(_, line)| line));
    format!(
        "the agent crashed the same way twice in a row, without an answer (it {what}); retrying cannot help — {}",
        remedy(line)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Crash;

    fn crashed(line: Option<&str>) -> LoopRecord {
        LoopRecord {
            crash: line.map(str::to_owned),
            ..LoopRecord::default()
        }
    }

    #[test]
    fn the_same_crash_twice_in_a_row_is_told_apart_from_others() {
        let denied =
            "exited with code 1: PermissionError: [Errno 13] Permission denied: '/wt/a/x.lock'";
        let other_path =
            "exited with code 1: PermissionError: [Errno 13] Permission denied: '/wt/b/x.lock'";
        let other = "exited with code 1: KeyError: 'x'";
        type Row<'a> = (&'a str, Vec<Option<&'a str>>, bool);
        let rows: Vec<Row<'_>> = vec![
            ("no history", vec![], false),
            ("one crash", vec![Some(denied)], false),
            ("twice the same", vec![Some(denied), Some(denied)], true),
            (
                "folders differ only",
                vec![Some(denied), Some(other_path)],
                true,
            ),
            (
                "two different crashes",
                vec![Some(denied), Some(other)],
                false,
            ),
            (
                "an answer in between",
                vec![Some(denied), None, Some(denied)],
                false,
            ),
            (
                "an older pair",
                vec![Some(denied), Some(denied), None],
                false,
            ),
            ("a crash after an answer", vec![None, Some(denied)], false),
        ];
        for (name, crashes, want) in rows {
            let history: Vec<LoopRecord> = crashes.into_iter().map(crashed).collect();
            assert_eq!(same_twice(&history), want, "{name}");
        }
    }

    #[test]
    fn each_kind_of_crash_gets_its_fix() {
        let rows = [
            (
                "PermissionError: [Errno 13] Permission denied: '/x'",
                "SANDBOX_WRITE",
            ),
            (
                "Error: EACCES: permission denied, open '/x'",
                "SANDBOX_WRITE",
            ),
            (
                "OSError: [Errno 30] Read-only file system: '/x'",
                "SANDBOX_WRITE",
            ),
            (
                "ModuleNotFoundError: No module named 'anthropic'",
                "hank doctor",
            ),
            ("claude: command not found", "CLAUDE_CODE_CMD"),
            (
                "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
                "--agents",
            ),
            ("KeyError: 'x'", "by hand"),
            ("", "by hand"),
        ];
        for (line, want) in rows {
            assert!(remedy(line).contains(want), "{line}: {}", remedy(line));
        }
    }

    #[test]
    fn the_exit_message_names_the_crash_and_its_fix() {
        let c = Crash {
            exit_code: 1,
            line: "PermissionError: [Errno 13] Permission denied: '/x'".into(),
            tail: vec![],
        };
        let r = record(&c);
        assert_eq!(
            r,
            "exited with code 1: PermissionError: [Errno 13] Permission denied: '/x'"
        );
        let m = exit_message(Some(&r));
        for want in ["twice in a row", "PermissionError", "SANDBOX_WRITE"] {
            assert!(m.contains(want), "{want}: {m}");
        }
        let silent = record(&Crash {
            exit_code: 3,
            line: String::new(),
            tail: vec![],
        });
        assert_eq!(silent, "exited with code 3 and printed no error");
        assert!(exit_message(Some(&silent)).contains("by hand"));
        assert!(exit_message(None).contains("without an answer"));
    }
}
