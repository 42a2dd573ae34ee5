//! What hank derives from the agent's own words: completion indicators, questions asked of
//! the user, test-only commands and normalized error signatures.  **\[pure\]**
//!
//! Conservative by design: a wrong "complete" stops a user's run early, so only unambiguous
//! phrases count, and never when negated or conditional ("once all tasks are complete").

use std::sync::LazyLock;

use regex::Regex;

use super::{StatusBlock, WorkStatus, re};
use crate::sanitize::cut_bytes;

/// At most this many error signatures per call.
pub(super) const MAX_SIGNATURES: usize = 10;
/// At most this many questions per call.
const MAX_QUESTIONS: usize = 10;
/// A signature or question longer than this is cut.
const MAX_LINE_CHARS: usize = 200;

static COMPLETION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(all (?:the )?tasks (?:are |have been )?(?:now )?(?:complete|completed|done|finished)|project is (?:now )?(?:complete|completed|finished|done)|nothing (?:else )?left to do|no (?:remaining|more) tasks(?: remain| left)?|all items in (?:the )?fix_plan(?:\.md)? are (?:complete|completed|checked|done))\b",
    )
});

/// Words that make a completion phrase conditional or negated when they come before it in
/// the same sentence.
static HEDGE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(not|isn't|aren't|never|until|once|when|whenever|if|unless|before|after|will|would|should|could|might|soon|almost|nearly|yet)\b",
    )
});

static QUESTION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:should i|shall i|would you like|would you prefer|do you want|do you prefer|can you (?:confirm|clarify)|could you (?:please )?(?:confirm|clarify|tell me|let me know)|which\b.*\b(?:prefer|want|would you|should i)|what would you like|how would you like|is it ok(?:ay)? (?:if|to)|may i)\b",
    )
});

/// Declarative waits: the agent stops and asks for a decision without a question mark.
static DECLARATIVE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?ix)^(?:
            please\s+(?:confirm|advise|let\s+me\s+know|clarify|tell\s+me|choose|decide|specify|select|pick|approve|review\s+and\s+(?:confirm|approve))\b
          | (?:I(?:'|’)m\s+|I\s+am\s+|now\s+)?(?:awaiting|waiting\s+(?:for|on))\s+(?:your|you\b|a\s+decision|confirmation|approval|input)
          | (?:I(?:'|’)ll|I\s+will)\s+wait\s+for\s+your\b
          | let\s+me\s+know\s+(?:which|whether|what\s+you|how\s+you|if\s+you(?:'|’)?d?\s+(?:like|want|prefer)\s+me\s+to|your\s+(?:choice|decision|preference))
          | I\s+need\s+(?:your|you\s+to\s+(?:confirm|decide|choose|tell)|a\s+decision|clarification|input|confirmation|guidance)\b
          | (?:a\s+)?decision\s+(?:is\s+)?needed\b
        )")
});

static TEST_COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?x)(?:^|[\s;&|(])(?:
        cargo\s+(?:test|nextest)
        | (?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test(?::\S+)?
        | npx\s+(?:jest|vitest|mocha|playwright)
        | (?:python3?\s+-m\s+)?pytest | tox | nox
        | go\s+test
        | jest | vitest | mocha
        | mix\s+test | rspec | bundle\s+exec\s+rspec | rake\s+test
        | make\s+(?:test|check) | ctest | bats
        | dotnet\s+test | mvn\s+(?:-\S+\s+)*test | gradle\w*\s+test | \./gradlew\s+test
        | phpunit | swift\s+test | zig\s+build\s+test | deno\s+test
    )(?:$|[\s;&|)])")
});

/// Lines that clearly report an error (compiler, test runner, runtime), and the original
/// tool's rules: `Error:`/`ERROR:`/`error:` at a line start, `]: error`, `Link: error`,
/// `Error occurred`, `failed with error`, `Exception`, `Fatal`/`FATAL`.
static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:error(?:\[[A-Z]+\d+\])?:|Error:|ERROR[:\s]|FAILED\b|FAIL[:\s]|fatal:|panic:|thread '.*' panicked|test .+ \.\.\. FAILED|[A-Z][A-Za-z]*(?:Error|Exception)(?::|$)|Traceback \(most recent call last\)|npm ERR!)|\]: error\b|\bLink: error\b|\bError occurred\b|\bfailed with error\b|(?:\b|[a-z])Exception\b|\bFatal\b|\bFATAL\b",
    )
});

/// A JSON field whose name holds "error" (`"is_error": false`): never an error line.
static JSON_ERROR_FIELD: LazyLock<Regex> = LazyLock::new(|| re(r#""[^"]*error[^"]*"\s*:"#));

/// Stderr lines worth a signature.
static STDERR_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:error|fatal|panic(?:ked)?|exception|failed|failure|refused|denied|not found|invalid|no conversation)\b",
    )
});

static UUID: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"));
static HEX: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(?:0x[0-9a-f]+|[0-9a-f]{7,})\b"));
static PATH: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(^|[\s'"`(=\[<])(?:[A-Za-z]:)?[/\\](?:[^\s:'"`,;()\[\]{}<>]*[/\\])?([^\s/\\:'"`,;()\[\]{}<>]+)"#,
    )
});
static DIGITS: LazyLock<Regex> = LazyLock::new(|| re(r"\d+"));
static SPACES: LazyLock<Regex> = LazyLock::new(|| re(r"\s+"));

/// Whether a shell command runs a test suite (`cargo test`, `npm test`, `pytest`, `go test`, …).
#[must_use]
pub fn is_test_command(command: &str) -> bool {
    TEST_COMMAND.is_match(command)
}

/// The agent's text without its `HANK_STATUS` block and without fenced code.
/// Returns the prose lines only (code blocks hold quoted material, not the agent's words).
/// `needle` (ASCII) in `hay`, ignoring ASCII case.
fn contains_ignore_case(hay: &str, needle: &str) -> bool {
    let n = needle.as_bytes();
    hay.as_bytes()
        .windows(n.len())
        .any(|w| w.eq_ignore_ascii_case(n))
}

fn prose_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut in_status = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        // Compared in place: an answer line can be hundreds of MiB (no uppercase copy).
        if contains_ignore_case(t, "HANK_STATUS") {
            in_status = !contains_ignore_case(t, "END");
            continue;
        }
        if in_fence || in_status {
            continue;
        }
        out.push(line);
    }
    out
}

/// Completion indicators: `status_complete`, `exit_signal`, `phrase: <phrase>`.
#[must_use]
pub fn completion_indicators(status: Option<&StatusBlock>, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(s) = status {
        if s.status == Some(WorkStatus::Complete) {
            out.push("status_complete".to_owned());
        }
        if s.exit_signal == Some(true) {
            out.push("exit_signal".to_owned());
        }
    }
    for line in prose_lines(text) {
        for m in COMPLETION.find_iter(line) {
            // The sentence up to the phrase: a hedge word there makes it conditional.
            let before = &line[..m.start()];
            let sentence_start = before.rfind(['.', '!', '?', ';']).map_or(0, |i| i + 1);
            let lead = &before[sentence_start..];
            if HEDGE.is_match(lead) {
                continue;
            }
            // "... is complete?" is a question, "… complete, moving on to tests" goes on.
            let after = line[m.end()..].trim_start();
            if after.starts_with('?') {
                continue;
            }
            if after.starts_with(',') && !after[1..].trim_start().is_empty() {
                continue;
            }
            let label = format!("phrase: {}", m.as_str().to_lowercase());
            if !out.contains(&label) {
                out.push(label);
            }
        }
    }
    out
}

fn strip_bullet(line: &str) -> &str {
    let t = line.trim();
    let t = t.trim_start_matches(['-', '*', '+', '>', '•']).trim_start();
    // "1. Should I …" / "2) Should I …"
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 {
        let rest = &t[digits..];
        if let Some(r) = rest.strip_prefix('.').or_else(|| rest.strip_prefix(')')) {
            return r.trim_start();
        }
    }
    t
}

fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Lines of the agent's own text that ask the user something.
#[must_use]
pub fn questions(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in prose_lines(text) {
        let t = strip_bullet(line)
            .trim_matches(|c| c == '*' || c == '_')
            .trim();
        let asks = (QUESTION.is_match(t) && t.contains('?')) || DECLARATIVE.is_match(t);
        if asks {
            let q = cut_chars(t, MAX_LINE_CHARS);
            if !out.contains(&q) {
                out.push(q);
            }
            if out.len() >= MAX_QUESTIONS {
                break;
            }
        }
    }
    out
}

/// Normalizes an error line: uuids and hex ids → `X`, absolute paths → basename, digits → `N`,
/// whitespace collapsed, cut to 200 characters.
#[must_use]
pub fn normalize_signature(line: &str) -> String {
    // Only the start of a long line can end up in the 200 characters kept: normalizing a
    // bounded prefix keeps memory flat whatever the line's length.
    let line = cut_bytes(line.trim(), SIGNATURE_INPUT_BYTES);
    let s = UUID.replace_all(line, "X");
    let s = PATH.replace_all(&s, "${1}${2}");
    // Hex ids (7+ hex digits with at least one digit and one letter, or 0x…); plain numbers
    // are left to the digit rule.
    let s = HEX.replace_all(&s, |c: &regex::Captures<'_>| {
        let m = &c[0];
        let hexish = m.starts_with("0x")
            || (m.bytes().any(|b| b.is_ascii_digit())
                && m.bytes().any(|b| b.is_ascii_alphabetic()));
        if hexish { "X".to_owned() } else { m.to_owned() }
    });
    let s = DIGITS.replace_all(&s, "N");
    let s = SPACES.replace_all(&s, " ");
    cut_chars(s.trim(), MAX_LINE_CHARS)
}

/// Bytes of an error line looked at to make its signature.
const SIGNATURE_INPUT_BYTES: usize = 16 * 1024;

/// A line of JSON (an object, a string, an array of values), not a log line like
/// `[build]: error …`.
fn looks_like_json(t: &str) -> bool {
    if t.starts_with('{') || t.starts_with('"') {
        return true;
    }
    t.strip_prefix('[').is_some_and(|rest| {
        rest.trim_start()
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphabetic())
    })
}

/// Error lines the agent reports in its own final text (`error[E0308]: …`, `Error: …`,
/// `FAILED`), never JSON or quoted code.
#[must_use]
pub(super) fn error_lines_in_text(text: &str) -> Vec<&str> {
    prose_lines(text)
        .into_iter()
        .map(|l| strip_bullet(l).trim_matches('`').trim())
        .filter(|t| {
            !t.is_empty()
                && !looks_like_json(t)
                && !JSON_ERROR_FIELD.is_match(t)
                && ERROR_LINE.is_match(t)
        })
        .collect()
}

/// Lines of stderr that report an error.
#[must_use]
pub(super) fn error_lines_in_stderr(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .map(str::trim)
        .filter(|t| {
            !t.is_empty()
                && !looks_like_json(t)
                && !JSON_ERROR_FIELD.is_match(t)
                && STDERR_ERROR.is_match(t)
        })
        .take(50)
        .collect()
}

/// Normalizes, deduplicates, sorts and caps the signatures.
#[must_use]
pub fn signatures<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = lines
        .into_iter()
        .map(normalize_signature)
        .filter(|s| !s.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out.truncate(MAX_SIGNATURES);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_phrases_are_conservative() {
        let cases: &[(&str, &[&str])] = &[
            ("All tasks complete.", &["phrase: all tasks complete"]),
            (
                "Great news: all tasks are complete!",
                &["phrase: all tasks are complete"],
            ),
            (
                "The project is now complete.",
                &["phrase: project is now complete"],
            ),
            (
                "There is nothing left to do.",
                &["phrase: nothing left to do"],
            ),
            (
                "All items in fix_plan.md are checked.",
                &["phrase: all items in fix_plan.md are checked"],
            ),
            ("Feature complete, moving on to tests", &[]),
            ("All tasks complete, moving on to the docs next.", &[]),
            ("Not all tasks are complete yet.", &[]),
            ("Once all tasks are complete I will set EXIT_SIGNAL.", &[]),
            ("I will stop when the project is complete.", &[]),
            ("Is the project is complete?", &[]),
            ("```\nall tasks complete\n```", &[]),
            ("Fixed the parser. Tests pass.", &[]),
        ];
        for (text, want) in cases {
            let got = completion_indicators(None, text);
            assert_eq!(
                got,
                want.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "{text}"
            );
        }
    }

    #[test]
    fn status_indicators() {
        let b = StatusBlock {
            status: Some(WorkStatus::Complete),
            exit_signal: Some(false),
            ..StatusBlock::default()
        };
        assert_eq!(completion_indicators(Some(&b), ""), vec!["status_complete"]);
        let b = StatusBlock {
            exit_signal: Some(true),
            ..StatusBlock::default()
        };
        assert_eq!(completion_indicators(Some(&b), ""), vec!["exit_signal"]);
    }

    #[test]
    fn questions_are_found() {
        let text = "I refactored the module.\n\nShould I also update the docs?\n- Would you like me to add tests?\n1. Which database do you prefer, SQLite or Postgres?\nPlease confirm the API shape.\nDo you want X? \nThe question is whether it works.\nWhy did it fail? Because of a typo.\n```\nShould I quote code?\n```";
        assert_eq!(
            questions(text),
            vec![
                "Should I also update the docs?",
                "Would you like me to add tests?",
                "Which database do you prefer, SQLite or Postgres?",
                "Please confirm the API shape.",
                "Do you want X?",
            ]
        );
        assert_eq!(
            questions("No questions here. Should I? is a phrase"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn declarative_waits_are_questions_ordinary_prose_is_not() {
        let asks = [
            "Awaiting your input on the database choice.",
            "I'm awaiting your decision before touching the schema.",
            "Waiting for your decision on the API shape.",
            "Please confirm that the old endpoint can be removed.",
            "Please choose between option A and option B.",
            "Let me know which approach you prefer.",
            "Let me know whether I should keep the v1 format.",
            "Let me know if you'd like me to migrate the data too.",
            "I need your input on the naming.",
            "I need a decision on the storage backend.",
            "I'll wait for your go-ahead before deleting files.",
            "- **Please advise** on the retry policy.",
        ];
        for line in asks {
            assert_eq!(questions(line).len(), 1, "{line}");
        }
        let prose = [
            "Let me know if you have any questions.",
            "I need to fix the parser next.",
            "The loop was waiting for the lock, now it is not.",
            "Please note that the tests are slow.",
            "Confirmed: the endpoint is gone.",
            "We are awaiting the CI run.",
            "The user asked which format to use; I chose JSON.",
        ];
        for line in prose {
            assert!(questions(line).is_empty(), "{line}: {:?}", questions(line));
        }
    }

    #[test]
    fn the_original_error_line_rules() {
        let hits = [
            "Error: cannot open config",
            "ERROR: build failed",
            "error: could not compile x",
            "[build]: error in step 3",
            "Link: error LNK2019 unresolved symbol",
            "An Error occurred while saving",
            "the command failed with error code 2",
            "java.lang.NullPointerException at Foo.bar",
            "Unhandled Exception in worker",
            "Fatal: out of memory",
            "FATAL database is locked",
        ];
        for line in hits {
            assert_eq!(error_lines_in_text(line), vec![line], "{line}");
        }
        let misses = [
            "\"is_error\": false",
            "result \"is_error\": false, \"error_count\": 0",
            "The error handling is now better.",
            "No errors, all green.",
            "I added exception handling.",
            "fatalism is not a bug",
        ];
        for line in misses {
            assert!(error_lines_in_text(line).is_empty(), "{line}");
        }
        // Same errors in another order, repeated: the same signature set.
        let a = signatures(error_lines_in_text(
            "Error: b at 1\nError: a at 2\nError: b at 3",
        ));
        let b = signatures(error_lines_in_text("Error: a at 9\nError: b at 8"));
        assert_eq!(a, b);
        // A new error in the set makes a different set.
        let c = signatures(error_lines_in_text("Error: a at 9\nError: b at 8\nFATAL c"));
        assert_ne!(a, c);
    }

    #[test]
    fn test_commands() {
        for (cmd, want) in [
            ("cargo test", true),
            ("cargo test --all-targets 2>&1 | tail -20", true),
            ("cd api && npm test", true),
            ("npm run test:unit", true),
            ("pytest -x tests/", true),
            ("python -m pytest", true),
            ("go test ./...", true),
            ("make check", true),
            ("cargo build", false),
            ("npm install", false),
            ("git status", false),
            ("cat test.txt", false),
            ("echo latest", false),
        ] {
            assert_eq!(is_test_command(cmd), want, "{cmd}");
        }
    }

    #[test]
    fn signatures_are_normalized() {
        let cases = [
            (
                "error[E0308]: mismatched types at /home/u/p/src/main.rs:12:5",
                "error[EN]: mismatched types at main.rs:N:N",
            ),
            (
                "No conversation found with session ID: 3f2a9c1e-1111-4222-8333-444455556666",
                "No conversation found with session ID: X",
            ),
            (
                "API Error: 500   Internal\tserver error (req_011CAbc, id deadbeef42)",
                "API Error: N Internal server error (req_NCAbc, id X)",
            ),
            (
                "thread 'main' panicked at src/lib.rs:3:9",
                "thread 'main' panicked at src/lib.rs:N:N",
            ),
            (
                "FAILED tests/test_x.py::test_y - assert 1 == 2",
                "FAILED tests/test_x.py::test_y - assert N == N",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(normalize_signature(line), want, "{line}");
        }
    }

    #[test]
    fn error_lines_only_from_clear_reports() {
        let text = "Fixed it.\nerror[E0308]: mismatched types\n- `Error: file not found`\n\"is_error\": false\n{\"is_error\": true}\nThe error handling is now better.\ntest parser::tests::x ... FAILED\n```\nError: quoted in code\n```";
        assert_eq!(
            error_lines_in_text(text),
            vec![
                "error[E0308]: mismatched types",
                "Error: file not found",
                "test parser::tests::x ... FAILED"
            ]
        );
        let sigs = signatures(error_lines_in_text(
            "\"is_error\": false\nresult is_error: false",
        ));
        assert!(sigs.is_empty(), "{sigs:?}");
    }

    #[test]
    fn signatures_are_sorted_deduplicated_and_capped() {
        let lines: Vec<String> = (0..30)
            .map(|i| {
                format!(
                    "Error: case {} at line {i}",
                    (b'a' + (i % 15) as u8) as char
                )
            })
            .collect();
        let sigs = signatures(lines.iter().map(String::as_str));
        assert_eq!(sigs.len(), MAX_SIGNATURES);
        let mut sorted = sigs.clone();
        sorted.sort();
        assert_eq!(sigs, sorted);
    }
}
