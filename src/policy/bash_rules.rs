//! The one model of how Claude Code matches an `ALLOWED_TOOLS` entry `Bash(…)` against a
//! command line. **\[pure\]** Used to check the rules `enable`/`setup` generate
//! (`project::rules`) and to tell a real denial from a denied command the rules
//! allow ([`crate::policy::decide::classify_denials`]). Documented in
//! `docs/claude-contract.md` ("Bash permission rules").
//!
//! How the client matches (Claude Code 2.1.x: its permissions documentation and its
//! permission-rule matcher): a rule `Bash(SPEC)` is
//! - a **prefix** rule when SPEC ends in `:*` (legacy): the command equals the prefix or
//!   starts with the prefix and a space (`Bash(npm:*)` matches `npm test`, not `npmx`);
//! - a **wildcard** rule when SPEC holds a `*`: every `*` matches any text, spaces included,
//!   the whole command must match, and when the only `*` is a final ` *`, the space and the
//!   rest are optional (`Bash(ls *)` matches `ls` and `ls -la`, not `lsof`);
//! - otherwise an **exact** rule; a bare `Bash` allows every command.
//!
//! The client is aware of shell operators: a compound command (`a && b`, `a || b`, `a; b`,
//! `a | b`) is allowed only when **every** part is (a pipeline's later commands included);
//! redirections (`2>&1`, `> out.txt`) are not part of the command. A line that is not valid
//! shell (`| npm`, `a && && b`) is allowed by nothing. Not modelled (a command this model
//! does not allow counts as denied, the safe side): escaped `\*`, the client's handling of
//! quotes inside words, the process wrappers it strips before matching (`timeout`, `nice`,
//! `nohup`), and leading `VAR=value` assignments (undocumented; kept as part of the command).

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

/// Does the `Bash(…)` rule content `spec` allow the single command `command`? A model of the
/// client's matcher (see the module docs).
#[must_use]
pub fn bash_rule_matches(spec: &str, command: &str) -> bool {
    let command = command.trim();
    if let Some(prefix) = spec.strip_suffix(":*") {
        return command == prefix
            || command
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(' '));
    }
    if !spec.contains('*') {
        return command == spec;
    }
    let spec = spec.trim();
    let stars = spec.matches('*').count();
    let mut pattern = String::from("^");
    let body = if stars == 1 && spec.ends_with(" *") {
        &spec[..spec.len() - 2]
    } else {
        spec
    };
    for (i, piece) in body.split('*').enumerate() {
        if i > 0 {
            pattern.push_str(".*");
        }
        pattern.push_str(&regex::escape(piece));
    }
    if stars == 1 && spec.ends_with(" *") {
        pattern.push_str("( .*)?");
    }
    pattern.push('$');
    regex::RegexBuilder::new(&pattern)
        .dot_matches_new_line(true)
        .build()
        .is_ok_and(|re| re.is_match(command))
}

/// The parts of a compound command line (`&&`, `||`, `;`, `|` outside quotes), without their
/// redirections; empty parts are left out.
#[must_use]
pub fn split_compound(line: &str) -> Vec<String> {
    parts_of(line).unwrap_or_default()
}

/// The parts of a compound command line, or `None` when it is not valid shell: an operator
/// with no command on one side (`| npm`, `a &&`, `a && && b`); a `;` may end the line.
fn parts_of(line: &str) -> Option<Vec<String>> {
    // (text, the operator that ended it: None for `;` or the end of the line)
    let mut raw: Vec<(String, bool)> = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), _) if c == q => {
                quote = None;
                cur.push(c);
            }
            (Some(_), _) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (None, ';') => raw.push((std::mem::take(&mut cur), false)),
            // `2>&1`, `>&2`, `<&3`: a redirection, not a separator.
            (None, '&') if cur.ends_with(['>', '<']) => cur.push(c),
            (None, '&' | '|') => {
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                raw.push((std::mem::take(&mut cur), true));
            }
            _ => cur.push(c),
        }
    }
    raw.push((cur, false));
    let parts: Vec<(String, bool)> = raw
        .into_iter()
        .map(|(p, op)| (without_redirections(&p), op))
        .collect();
    for (i, (p, joins)) in parts.iter().enumerate() {
        let next_empty = parts.get(i + 1).is_none_or(|(n, _)| n.is_empty());
        if *joins && (p.is_empty() || next_empty) {
            return None;
        }
    }
    Some(
        parts
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| !p.is_empty())
            .collect(),
    )
}

/// A command without its redirections (`2>&1`, `> out.txt`, `2>/dev/null`), which the
/// client does not count as part of the command when it matches rules.
fn without_redirections(part: &str) -> String {
    let redirect = |w: &str| {
        let w = w.trim_start_matches(|c: char| c.is_ascii_digit());
        w.starts_with('>') || w.starts_with('<') || w.starts_with("&>")
    };
    let mut out: Vec<&str> = Vec::new();
    let mut words = part.split_whitespace();
    while let Some(w) = words.next() {
        if redirect(w) {
            let op_only = w
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start_matches('&')
                .trim_start_matches(['>', '<'])
                .is_empty();
            if op_only {
                words.next();
            }
            continue;
        }
        out.push(w);
    }
    out.join(" ")
}

/// Does the tool list `tools` (ALLOWED_TOOLS entries) let the agent run `line`? Every part of
/// a compound line must be allowed by a `Bash(…)` entry (or a bare `Bash`).
#[must_use]
pub fn allows(tools: &[String], line: &str) -> bool {
    let Some(parts) = parts_of(line) else {
        return false;
    };
    !parts.is_empty()
        && parts.iter().all(|part| {
            tools.iter().map(|t| t.trim()).any(|t| {
                t == "Bash"
                    || t.strip_prefix("Bash(")
                        .and_then(|r| r.strip_suffix(')'))
                        .is_some_and(|spec| bash_rule_matches(spec, part))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The matcher against the client's documented examples and its edge cases.
    #[test]
    fn matcher_table() {
        let cases: &[(&str, &str, bool)] = &[
            ("ls *", "ls", true),
            ("ls *", "ls -la", true),
            ("ls *", "lsof", false),
            ("ls*", "lsof", true),
            ("git *", "git diff", true),
            ("git *", "gitk", false),
            ("mix test *", "mix test test/foo.exs", true),
            ("mix test *", "mix testing", false),
            ("* --version", "node --version", true),
            ("* --version", "node -v", false),
            ("npm run build", "npm run build", true),
            ("npm run build", "npm run build:dev", false),
            ("npm run build", "npm run build --prod", false),
            ("npm:*", "npm", true),
            ("npm:*", "npm test", true),
            ("npm:*", "npmx", false),
            ("go test ./... *", "go test ./...", true),
            ("go test ./... *", "go test ./pkg", false),
            ("go test ./... *", "go test -run X ./...", false),
            ("go test *", "go test ./pkg", true),
            ("go test *", "go test -run X ./...", true),
            ("npm run * --silent", "npm run a b --silent", true),
            ("git commit *", "git commit -m 'a b'", true),
            ("a.b *", "aXb c", false),
        ];
        for (spec, cmd, want) in cases {
            assert_eq!(
                bash_rule_matches(spec, cmd),
                *want,
                "Bash({spec}) vs {cmd:?}"
            );
        }
    }

    #[test]
    fn compound_lines_need_every_part() {
        let tools = vec!["Bash(cargo test *)".to_string(), "Bash(git add *)".into()];
        assert!(allows(&tools, "cargo test && git add -A"));
        assert!(!allows(&tools, "cargo test && rm -rf /"));
        assert!(!allows(&tools, "cargo test | tee x"));
        assert!(!allows(&tools, "cargo test; curl x"));
        assert!(allows(&tools, "git add 'a && b'"));
        assert!(!allows(&tools, ""));
        assert!(allows(&["Bash".to_string()], "anything | at all"));
        assert!(allows(&tools, "cargo test 2>&1"));
        assert!(allows(&tools, "cargo test > out.txt 2>/dev/null"));
        assert_eq!(split_compound("a 2>&1 | b"), vec!["a", "b"]);
    }

    /// Whole lines against a tool list, as the client decides them: every part of a compound
    /// line (pipelines included) must be allowed; a line that is not valid shell never is.
    #[test]
    fn lines_table() {
        let tools: Vec<String> = [
            "Read",
            " Bash(go test *) ",
            "Bash(gofmt:*)",
            "Bash(git * main)",
            "Bash(pwd)",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        let cases: &[(&str, bool)] = &[
            ("go test ./...", true),
            ("go test", true),
            ("go testx", false),
            ("gofmt -l . > out.txt", true),
            ("gofmtx", false),
            ("go build", false),
            ("git checkout main 2>/dev/null", true),
            ("git checkout dev", false),
            ("pwd", true),
            ("pwd -P", false),
            ("pwd && go test ./pkg", true),
            ("go test ./... | tee log", false),
            ("go test ./... | gofmt -l", true),
            ("go test; rm -rf /", false),
            ("go test;", true),
            ("GOFLAGS=-v go test", false),
            ("", false),
            ("  ", false),
            ("| pwd", false),
            ("pwd ||", false),
            ("pwd || || pwd", false),
            ("git merge 'x && y' main", true),
        ];
        for (line, want) in cases {
            assert_eq!(allows(&tools, line), *want, "{line:?}");
        }
    }
}
