//! Verified completion: what a run of the project's check means for a "done" claim, and what
//! the agent is told when its claim is rejected.  **\[pure\]**
//!
//! The check is the user's `VERIFY_COMMAND`, frozen when the run starts. Before any completion
//! exit (`project_complete`, `plan_complete`, `test_saturation`) the engine runs it:
//! - it passes → the run ends as decided, recorded as verified;
//! - it fails → the claim is rejected ([`judge_claim`]): the run goes on and the next loop's
//!   context carries [`rejection_feedback`] (at most [`FEEDBACK_BUDGET`] bytes, hank's text
//!   included: the command, its exit code, the failing tests first, then the output's tail);
//! - after `MAX_REJECTED_COMPLETIONS` rejected claims in a row → stop `verification_failed`.
//!
//! No I/O: the engine runs the command and passes its result and the tail of its output.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::sanitize::{cut_bytes, cut_chars};

/// Bytes of the rejection text in the loop context, hank's own words included.
pub const FEEDBACK_BUDGET: usize = 1500;
/// Failing test names listed at most.
const MAX_NAMES: usize = 12;

/// Why the check ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// Before loop 1 (`VERIFY_AT_START`).
    Baseline,
    /// After a loop (`VERIFY_EVERY_LOOP`).
    Loop,
    /// Before a completion exit.
    #[default]
    Completion,
    /// `hank verify`.
    Manual,
}

impl CheckKind {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Loop => "loop",
            Self::Completion => "completion",
            Self::Manual => "manual",
        }
    }
}

/// One run of the check: `status.json` `verification.last`/`.baseline`, the `verification`
/// event and `hank verify --json`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckResult {
    pub kind: CheckKind,
    pub passed: bool,
    pub command: String,
    /// The command's exit code (absent when it was killed).
    pub exit_code: Option<i32>,
    /// VERIFY_TIMEOUT stopped it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Ctrl-C stopped it (never a pass, never a rejection).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    pub duration_ms: u64,
    /// When it finished.
    pub at: Timestamp,
    /// The captured output (stdout and stderr), relative to the project.
    pub log: String,
    /// The loop after which it ran (0: before the first loop of the project).
    #[serde(rename = "loop")]
    pub number: u64,
    /// Test files present when the run started that are now gone or empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed_tests: Vec<String>,
}

impl CheckResult {
    /// "exit 101", "timed out", "interrupted", "killed by a signal".
    #[must_use]
    pub fn how_it_ended(&self) -> String {
        if self.interrupted {
            "interrupted".into()
        } else if self.timed_out {
            "timed out".into()
        } else if let Some(code) = self.exit_code {
            format!("exit {code}")
        } else {
            "killed by a signal".into()
        }
    }
}

/// `status.json` `verification`: the check of this run and its latest results.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct VerificationStatus {
    /// VERIFY_COMMAND as taken when the run started.
    pub command: String,
    /// The latest run of the check.
    pub last: Option<CheckResult>,
    /// The run before loop 1 (`VERIFY_AT_START`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<CheckResult>,
    /// "Done" claims rejected in a row.
    pub rejected_in_a_row: u32,
    /// MAX_REJECTED_COMPLETIONS.
    pub max_rejected: u32,
}

impl CheckResult {
    /// Whether the check could not run at all: the shell's 127 (program not found) or 126
    /// (found but not executable). Not a failed check: nothing was tested.
    #[must_use]
    pub fn could_not_run(&self) -> bool {
        !self.timed_out && !self.interrupted && matches!(self.exit_code, Some(126 | 127))
    }
}

/// The program a check that could not run names: the one the shell's own message names in
/// `output` (`sh: 1: pytest: not found`, `bash: pytest: command not found`, `…: Permission
/// denied`), else the command's first word after any `NAME=value` assignments.
#[must_use]
pub fn missing_program(command: &str, output: &str) -> String {
    for line in output.lines().rev() {
        let t = line.trim();
        let rest = t
            .strip_suffix(": command not found")
            .or_else(|| t.strip_suffix(": not found"))
            .or_else(|| t.strip_suffix(": Permission denied"))
            .or_else(|| t.strip_suffix(": No such file or directory"));
        if let Some(rest) = rest
            && (t.starts_with("sh:") || t.starts_with("/bin/sh:") || t.contains("sh: "))
            && let Some(name) = rest.rsplit(": ").next()
            && !name.trim().is_empty()
        {
            return name.trim().to_string();
        }
    }
    first_program(command).unwrap_or_else(|| command.trim().to_string())
}

/// What to say of a check that [could not run](CheckResult::could_not_run): the message
/// naming its program (`output`: the end of the check's output, where the shell names it)
/// and the hint. One text for `hank verify` and the loop's own check.
#[must_use]
pub fn could_not_run_text(r: &CheckResult, output: &str) -> (String, String) {
    let program = missing_program(&r.command, output);
    let what = if r.exit_code == Some(126) {
        "is not executable"
    } else {
        "was not found"
    };
    (
        format!(
            "the check could not run: `{program}` {what} (VERIFY_COMMAND {:?}, {}; output: {})",
            r.command,
            r.how_it_ended(),
            r.log
        ),
        format!(
            "install `{program}`, or set VERIFY_COMMAND in .hankrc to a command that exists here (`hank doctor` checks it)"
        ),
    )
}

/// The first program of a shell command: its first word after `NAME=value` assignments (and
/// `env`/`exec`), quotes removed; `None` for an empty command.
#[must_use]
pub fn first_program(command: &str) -> Option<String> {
    command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\'').to_string())
        .find(|w| {
            let assignment = w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            !w.is_empty() && !assignment && w != "env" && w != "exec"
        })
}

/// What a check result means for a "done" claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The check passed: the run ends as decided.
    Accept,
    /// The check failed: the run goes on; this is the `n`th rejection in a row.
    Reject { in_a_row: u32 },
    /// The check failed for the `max`th time in a row: stop `verification_failed`.
    Halt { in_a_row: u32 },
}

/// Judges a claim: `rejected_before` rejections in a row so far, the check `passed`, at most
/// `max` (MAX_REJECTED_COMPLETIONS, ≥ 1) rejections in a row.
#[must_use]
pub fn judge_claim(rejected_before: u32, passed: bool, max: u32) -> Verdict {
    if passed {
        return Verdict::Accept;
    }
    let in_a_row = rejected_before.saturating_add(1);
    if in_a_row >= max.max(1) {
        Verdict::Halt { in_a_row }
    } else {
        Verdict::Reject { in_a_row }
    }
}

/// A loop that turned a passing check into a failing one: not progress for the breaker
/// (`VERIFY_EVERY_LOOP`).
#[must_use]
pub fn regressed(before: Option<&CheckResult>, after: &CheckResult) -> bool {
    before.is_some_and(|b| b.passed) && !after.passed && !after.interrupted
}

/// Removes escape sequences and control characters (keeps `\n` and `\t`), so test output
/// colours and cursor moves do not reach the agent's context ([`crate::sanitize`]).
#[must_use]
pub fn plain_text(s: &str) -> String {
    crate::sanitize::for_terminal(s, crate::sanitize::Lines::Keep).into_owned()
}

/// Failing test names found in test-runner output: cargo test and nextest, pytest, go test,
/// jest and vitest. In order of appearance, without duplicates, at most 12.
#[must_use]
pub fn failing_tests(output: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut push = |name: &str| {
        let name = name.trim();
        if !name.is_empty() && name.len() <= 200 && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    };
    for line in output.lines() {
        let t = line.trim();
        // cargo test: `test path::to::name ... FAILED`
        if let Some(rest) = t.strip_prefix("test ")
            && let Some(name) = rest.strip_suffix(" ... FAILED")
        {
            push(name);
            continue;
        }
        // nextest: `FAIL [   0.004s] crate::module tests::name` (also `SIGSEGV`, `TIMEOUT`)
        if let Some(rest) = ["FAIL [", "SIGSEGV [", "SIGABRT [", "TIMEOUT ["]
            .iter()
            .find_map(|p| t.strip_prefix(p))
            && let Some((_, name)) = rest.split_once(']')
        {
            push(name);
            continue;
        }
        // pytest short summary: `FAILED tests/test_x.py::test_y - AssertionError`
        if let Some(rest) = t
            .strip_prefix("FAILED ")
            .or_else(|| t.strip_prefix("ERROR "))
            && (rest.contains("::") || rest.contains(".py"))
        {
            push(rest.split(" - ").next().unwrap_or(rest));
            continue;
        }
        // go test: `--- FAIL: TestName (0.00s)`
        if let Some(rest) = t.strip_prefix("--- FAIL: ") {
            push(rest.split(" (").next().unwrap_or(rest));
            continue;
        }
        // jest: `✕ name (5 ms)`; vitest: `× name 5ms`, ` FAIL  src/a.test.ts > suite > name`
        if let Some(rest) = t.strip_prefix("✕ ").or_else(|| t.strip_prefix("× ")) {
            let name = rest
                .rsplit_once(" (")
                .filter(|(_, tail)| tail.ends_with("ms)") || tail.ends_with(" s)"))
                .map_or(rest, |(n, _)| n);
            let name = name
                .rsplit_once(' ')
                .filter(|(_, tail)| {
                    tail.ends_with("ms")
                        && tail[..tail.len() - 2]
                            .chars()
                            .all(|c| c.is_ascii_digit() || c == '.')
                })
                .map_or(name, |(n, _)| n);
            push(name);
            continue;
        }
        if let Some(rest) = t.strip_prefix("FAIL ")
            && rest.contains(" > ")
        {
            push(rest);
        }
    }
    names.truncate(MAX_NAMES);
    names
}

/// The last lines of `output` that fit in `budget` bytes (whole lines, blank lines dropped,
/// each line cut at 200 characters).
#[must_use]
pub fn tail_lines(output: &str, budget: usize) -> String {
    let mut kept: Vec<String> = Vec::new();
    let mut used = 0;
    for line in output.lines().rev() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let line = cut_chars(line, 200);
        if used + line.len() + 1 > budget {
            break;
        }
        used += line.len() + 1;
        kept.push(line);
    }
    kept.reverse();
    kept.join("\n")
}

/// The context text after a rejected claim: the command, how it ended, the failing tests, the
/// tail of the output; at most [`FEEDBACK_BUDGET`] bytes. `output` is the (tail of the)
/// captured output as text; `in_a_row`/`max` say how many rejections are left.
#[must_use]
pub fn rejection_feedback(r: &CheckResult, output: &str, in_a_row: u32, max: u32) -> String {
    let left = max.saturating_sub(in_a_row);
    let head = format!(
        "Your \"done\" was REJECTED: hank ran the project's check and it failed \
         (rejection {in_a_row} of {max}; {left} more and the run stops).\n\
         Command: {}\nResult: {} after {:.1} s (full output: {})",
        cut_chars(&r.command, 200),
        r.how_it_ended(),
        r.duration_ms as f64 / 1000.0,
        r.log
    );
    feedback_with(
        head,
        r,
        output,
        "Fix the cause, run the check yourself, then claim done again.",
    )
}

/// The context text when the baseline check (`VERIFY_AT_START`) failed: the tests were red
/// before the agent's first loop.
#[must_use]
pub fn baseline_feedback(r: &CheckResult, output: &str) -> String {
    let head = format!(
        "Before this run the project's check already failed: the tests were red before you started.\n\
         Command: {}\nResult: {} after {:.1} s (full output: {})",
        cut_chars(&r.command, 200),
        r.how_it_ended(),
        r.duration_ms as f64 / 1000.0,
        r.log
    );
    feedback_with(head, r, output, "Bring it to green as part of the work.")
}

/// The context text when the per-loop check (`VERIFY_EVERY_LOOP`) failed after the last loop.
#[must_use]
pub fn loop_feedback(r: &CheckResult, output: &str, regressed: bool) -> String {
    let what = if regressed {
        "Your last loop turned the project's check from passing to failing"
    } else {
        "The project's check fails after your last loop"
    };
    let head = format!(
        "{what} ({}, {}; full output: {}).",
        cut_chars(&r.command, 200),
        r.how_it_ended(),
        r.log
    );
    feedback_with(head, r, output, "")
}

fn feedback_with(head: String, r: &CheckResult, output: &str, close: &str) -> String {
    let mut out = cut_bytes(&head, FEEDBACK_BUDGET / 2).to_string();
    if !r.removed_tests.is_empty() {
        let list: Vec<String> = r
            .removed_tests
            .iter()
            .take(5)
            .map(|p| cut_chars(p, 80))
            .collect();
        let more = r.removed_tests.len().saturating_sub(5);
        out.push_str(&format!(
            "\nTest files deleted or emptied during this run: {}{}.",
            list.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    let text = plain_text(output);
    let names = failing_tests(&text);
    if !names.is_empty() {
        let mut line = String::from("\nFailing tests:");
        for n in &names {
            let item = format!(" {},", cut_chars(n, 120));
            // Keep room for the tail and the closing line.
            if out.len() + line.len() + item.len() > FEEDBACK_BUDGET * 2 / 3 {
                break;
            }
            line.push_str(&item);
        }
        if line.ends_with(',') {
            line.pop();
            out.push_str(&line);
        }
    }
    let closing = if close.is_empty() {
        String::new()
    } else {
        format!("\n{close}")
    };
    let intro = "\nOutput (last lines):\n";
    let room = FEEDBACK_BUDGET.saturating_sub(out.len() + closing.len() + intro.len());
    let tail = tail_lines(&text, room);
    if !tail.is_empty() {
        out.push_str(intro);
        out.push_str(&tail);
    }
    out.push_str(&closing);
    cut_bytes(&out, FEEDBACK_BUDGET).to_string()
}

/// Test files (relative path, size in bytes) that were there at the start of the run and are
/// now missing or empty. `now(path)` is the file's size now (`None`: gone); `blank(path)`
/// says whether a file that still has bytes holds only whitespace.
#[must_use]
pub fn removed_tests(
    at_start: &[(String, u64)],
    now: impl Fn(&str) -> Option<u64>,
    blank: impl Fn(&str) -> bool,
) -> Vec<String> {
    at_start
        .iter()
        .filter(|(path, size)| {
            *size > 0
                && match now(path) {
                    None => true,
                    Some(0) => true,
                    Some(_) => blank(path),
                }
        })
        .map(|(path, _)| path.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_that_could_not_run_names_its_program() {
        let table = [
            // (command, output, program)
            ("pytest", "/bin/sh: 1: pytest: not found\n", "pytest"),
            ("cd app && npm test", "sh: 1: npm: not found", "npm"),
            ("make check", "bash: make: command not found", "make"),
            (
                "./check.sh",
                "/bin/sh: 1: ./check.sh: Permission denied",
                "./check.sh",
            ),
            ("CI=1 \"pytest\" -q", "", "pytest"),
            ("env X=1 cargo test", "some output\n", "cargo"),
        ];
        for (command, output, program) in table {
            assert_eq!(missing_program(command, output), program, "{command}");
        }
        assert_eq!(first_program("   "), None);
        let mut r = result(false, Some(127));
        assert!(r.could_not_run());
        r.exit_code = Some(126);
        assert!(r.could_not_run());
        r.exit_code = Some(1);
        assert!(!r.could_not_run());
        r.exit_code = Some(127);
        r.timed_out = true;
        assert!(!r.could_not_run());
    }

    fn result(passed: bool, code: Option<i32>) -> CheckResult {
        CheckResult {
            kind: CheckKind::Completion,
            passed,
            command: "cargo test --locked".into(),
            exit_code: code,
            duration_ms: 12_300,
            log: ".hank/logs/verify-00003.log".into(),
            number: 7,
            ..CheckResult::default()
        }
    }

    #[test]
    fn claims_are_judged_in_a_row() {
        let table = [
            (0, true, 3, Verdict::Accept),
            (2, true, 3, Verdict::Accept),
            (0, false, 3, Verdict::Reject { in_a_row: 1 }),
            (1, false, 3, Verdict::Reject { in_a_row: 2 }),
            (2, false, 3, Verdict::Halt { in_a_row: 3 }),
            (0, false, 1, Verdict::Halt { in_a_row: 1 }),
            (0, false, 0, Verdict::Halt { in_a_row: 1 }),
            (u32::MAX, false, 3, Verdict::Halt { in_a_row: u32::MAX }),
        ];
        for (before, passed, max, want) in table {
            assert_eq!(
                judge_claim(before, passed, max),
                want,
                "{before} {passed} {max}"
            );
        }
    }

    #[test]
    fn regression_needs_a_pass_before() {
        let pass = result(true, Some(0));
        let fail = result(false, Some(1));
        let mut stopped = result(false, None);
        stopped.interrupted = true;
        assert!(regressed(Some(&pass), &fail));
        assert!(!regressed(Some(&fail), &fail));
        assert!(!regressed(None, &fail));
        assert!(!regressed(Some(&pass), &pass));
        assert!(!regressed(Some(&pass), &stopped));
    }

    #[test]
    fn failing_test_names_from_each_runner() {
        let table: &[(&str, &str, &[&str])] = &[
            (
                "cargo test",
                "running 3 tests\ntest parse::ok ... ok\ntest parse::bad_input ... FAILED\n\
                 test io::reads ... FAILED\n\nfailures:\n\n---- parse::bad_input stdout ----\n\
                 thread 'parse::bad_input' panicked\n\nfailures:\n    parse::bad_input\n    io::reads\n\n\
                 test result: FAILED. 1 passed; 2 failed",
                &["parse::bad_input", "io::reads"],
            ),
            (
                "nextest",
                "        PASS [   0.003s] hank policy::a\n        FAIL [   0.004s] hank policy::verify::tests::b\n\
                 TIMEOUT [  60.001s] hank engine::slow\n",
                &["hank policy::verify::tests::b", "hank engine::slow"],
            ),
            (
                "pytest",
                "=========================== short test summary info ============================\n\
                 FAILED tests/test_calc.py::test_add - assert 3 == 4\n\
                 ERROR tests/test_db.py::test_conn - ConnectionError\n1 failed, 1 error in 0.12s",
                &[
                    "tests/test_calc.py::test_add",
                    "tests/test_db.py::test_conn",
                ],
            ),
            (
                "go test",
                "=== RUN   TestAdd\n--- FAIL: TestAdd (0.00s)\n    calc_test.go:9: got 3\n\
                 --- FAIL: TestSub/negative (0.00s)\nFAIL\nFAIL\texample.com/calc\t0.002s",
                &["TestAdd", "TestSub/negative"],
            ),
            (
                "jest",
                " FAIL  src/sum.test.js\n  sum\n    ✓ adds (2 ms)\n    ✕ subtracts (3 ms)\n",
                &["subtracts"],
            ),
            (
                "vitest",
                " ❯ src/sum.test.ts (2 tests | 1 failed) 5ms\n   × sum > subtracts 3ms\n\
                  FAIL  src/sum.test.ts > sum > subtracts\nAssertionError: expected 1 to be 2",
                &["sum > subtracts", "src/sum.test.ts > sum > subtracts"],
            ),
            ("plain make", "make: *** [Makefile:3: check] Error 1", &[]),
        ];
        for (runner, output, want) in table {
            assert_eq!(failing_tests(output), *want, "{runner}");
        }
    }

    #[test]
    fn escape_codes_never_reach_the_context() {
        let raw =
            "\u{1b}[31mFAIL\u{1b}[0m x\r\n\u{1b}]0;title\u{7}ok\ttab\u{7}\u{1b}P1;2\u{1b}\\end";
        assert_eq!(plain_text(raw), "FAIL x\nok\ttabend");
    }

    #[test]
    fn feedback_names_the_command_the_failures_and_the_tail_within_budget() {
        let r = result(false, Some(101));
        let output = "test a::one ... FAILED\nnoise\nthread 'a::one' panicked at src/a.rs:3:5\n\
                      test result: FAILED. 0 passed; 1 failed\n";
        let fb = rejection_feedback(&r, output, 1, 3);
        for want in [
            "REJECTED",
            "cargo test --locked",
            "exit 101",
            "rejection 1 of 3",
            "2 more",
            "Failing tests: a::one",
            "test result: FAILED",
            ".hank/logs/verify-00003.log",
        ] {
            assert!(fb.contains(want), "{want} missing in {fb}");
        }
        assert!(fb.len() <= FEEDBACK_BUDGET);
    }

    /// The byte budget holds whatever the output, the command and the names look like.
    #[test]
    fn feedback_stays_within_the_byte_budget() {
        let mut r = result(false, Some(1));
        r.command = "x".repeat(5000);
        r.removed_tests = (0..40)
            .map(|i| format!("tests/t{i}_{}.rs", "y".repeat(300)))
            .collect();
        let many: String = (0..500)
            .map(|i| format!("test mod{i}::{} ... FAILED\n", "n".repeat(150)))
            .collect();
        let long_line = "é".repeat(100_000);
        for output in [many.as_str(), long_line.as_str(), "", "short"] {
            for fb in [
                rejection_feedback(&r, output, 2, 3),
                baseline_feedback(&r, output),
                loop_feedback(&r, output, true),
            ] {
                assert!(fb.len() <= FEEDBACK_BUDGET, "{} bytes", fb.len());
                assert!(fb.contains("Command") || fb.contains("check"));
            }
        }
    }

    #[test]
    fn tail_keeps_whole_last_lines() {
        let out = "one\n\ntwo\nthree\n";
        assert_eq!(tail_lines(out, 100), "one\ntwo\nthree");
        assert_eq!(tail_lines(out, 11), "two\nthree");
        assert_eq!(tail_lines(out, 3), "");
    }

    #[test]
    fn deleted_and_emptied_test_files_are_listed() {
        let start = vec![
            ("tests/a.rs".to_string(), 120),
            ("tests/b.rs".to_string(), 80),
            ("tests/c.rs".to_string(), 50),
            ("tests/d.rs".to_string(), 40),
            ("tests/empty_before.rs".to_string(), 0),
        ];
        let now = |p: &str| match p {
            "tests/a.rs" => Some(120),
            "tests/b.rs" => None,
            "tests/c.rs" => Some(0),
            "tests/d.rs" => Some(3),
            _ => None,
        };
        let blank = |p: &str| p == "tests/d.rs";
        assert_eq!(
            removed_tests(&start, now, blank),
            vec!["tests/b.rs", "tests/c.rs", "tests/d.rs"]
        );
    }
}
