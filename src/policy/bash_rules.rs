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
//! - otherwise an **exact** rule; a bare `Bash` allows every command line, whatever it holds
//!   (substitutions and output into files included: observed).
//!
//! The client is aware of shell operators: a compound command (`a && b`, `a || b`, `a; b`,
//! `a | b`) is allowed only when **every** part is (a pipeline's later commands included).
//! Before matching a part it drops its redirections (`2>&1`, `< in.txt`, `> /dev/null`), its
//! leading `VAR=value` assignments and the wrappers `timeout`, `nice`, `nohup`, `time`
//! (`CI=1 timeout 60 npm test` is matched as `npm test`). Whatever the rules, it refuses a line
//! that is not valid shell (`| npm`, `a && && b`), a command or process substitution
//! (`$(…)`, backquotes — in double quotes too —, `<(…)`), a subshell `( … )`, and output into
//! a file (`> out.txt`, `>> log`: in the default permission mode it asks first, and `-p` cannot
//! ask). Observed with the real clients 2.1.197 and 2.1.332 (the contract suite's
//! `bash_rules.rs`, a table of rules × commands). Not modelled (a command this model does not
//! allow counts as denied, the safe side): escaped `\*`, the client's handling of quotes inside
//! words, and the `acceptEdits` mode, in which writing a file inside the project may be allowed.

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

/// The parts of a compound command line (`&&`, `||`, `;`, `|` outside quotes), as the client
/// matches them (see the module docs); empty parts are left out, and a line the client
/// refuses whatever the rules (not valid shell, a substitution, output into a file) has none.
#[must_use]
pub fn split_compound(line: &str) -> Vec<String> {
    parts_of(line).unwrap_or_default()
}

/// The parts of a compound command line, or `None` when the client refuses the line whatever
/// the rules: not valid shell (an operator with no command on one side: `| npm`, `a &&`,
/// `a && && b`; a `;` may end the line), a command or process substitution (`$(…)`, backquotes,
/// also inside double quotes; `<(…)`, `>(…)`), or a part [`simple_command`] refuses.
fn parts_of(line: &str) -> Option<Vec<String>> {
    // (text, the operator that ended it: None for `;` or the end of the line)
    let mut raw: Vec<(String, bool)> = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let opens_paren = chars.peek() == Some(&'(');
        match (quote, c) {
            (Some('\''), '\'') => {
                quote = None;
                cur.push(c);
            }
            (Some('\''), _) => cur.push(c),
            // Substitutions run a command the client cannot check first: refused, in double
            // quotes too (only single quotes make them text).
            (Some('"') | None, '`') => return None,
            (Some('"') | None, '$') if opens_paren => return None,
            (None, '<' | '>') if opens_paren => return None,
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
            // `2>&1`, `>&2`, `<&3`, `&>`: a redirection, not a separator.
            (None, '&') if cur.ends_with(['>', '<']) || chars.peek() == Some(&'>') => {
                cur.push(c);
            }
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
    let mut parts: Vec<(String, bool)> = Vec::new();
    for (p, op) in raw {
        parts.push((simple_command(&p)?, op));
    }
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

/// One simple command as the client matches it against the rules, or `None` when the client
/// refuses it whatever the rules:
/// - redirections are not part of the command (`2>&1`, `>&2`, `< in.txt`, `2>/dev/null`,
///   `> /dev/null`), but output into a file (`> out.txt`, `>> log`, `2> err`) is refused: in
///   the default permission mode the client asks before a command writes a file;
/// - leading `VAR=value` assignments are dropped (`CI=1 npm test` is matched as `npm test`;
///   `env CI=1 npm test` is not);
/// - the wrappers `timeout [-s SIG | -k T | --opt…] DURATION`, `nice [-n N]`, `nohup` and
///   `time` are dropped (`timeout 60 npm test` is matched as `npm test`).
fn simple_command(part: &str) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    let mut words = part.split_whitespace();
    while let Some(w) = words.next() {
        let op = w.trim_start_matches(|c: char| c.is_ascii_digit());
        let is_output = op.starts_with('>') || op.starts_with("&>");
        if !is_output && !op.starts_with('<') {
            out.push(w);
            continue;
        }
        let attached = op.trim_start_matches('&').trim_start_matches(['>', '<']);
        let target = if attached.is_empty() {
            words.next().unwrap_or("")
        } else {
            attached
        };
        // `>&2`, `2>&1`: another descriptor, no file.
        let fd_dup = target.starts_with('&');
        if is_output && !fd_dup && target != "/dev/null" {
            return None;
        }
    }
    Some(strip_prefixes(&out).join(" "))
}

/// `words` without leading `VAR=value` assignments and the wrappers the client looks through.
fn strip_prefixes<'a>(mut words: &'a [&'a str]) -> &'a [&'a str] {
    let is_assignment = |w: &str| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    loop {
        let skip = match words {
            [w, ..] if is_assignment(w) => 1,
            ["nohup" | "time", _, ..] => 1,
            ["nice", "-n", _, _, ..] => 3,
            ["nice", flag, _, ..] if flag.starts_with('-') => 2,
            ["nice", _, ..] => 1,
            ["timeout", rest @ ..] => match timeout_args(rest) {
                Some(n) if n < rest.len() => n + 1,
                _ => 0,
            },
            _ => 0,
        };
        if skip == 0 {
            return words;
        }
        words = &words[skip..];
    }
}

/// How many words `timeout`'s options and duration take (`-s KILL 60` → 3), if they read.
fn timeout_args(rest: &[&str]) -> Option<usize> {
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        match *w {
            "-s" | "-k" | "--signal" | "--kill-after" => i += 2,
            w if w.starts_with('-') => i += 1,
            w if w.starts_with(|c: char| c.is_ascii_digit()) => return Some(i + 1),
            _ => return None,
        }
    }
    None
}

/// Does the tool list `tools` (ALLOWED_TOOLS entries) let the agent run `line`? A bare `Bash`
/// allows every line (substitutions and output into files included: the client checks
/// nothing more); otherwise every part of a compound line must be allowed by a `Bash(…)` entry,
/// and a line the client refuses whatever the rules (see the module docs) is not allowed.
#[must_use]
pub fn allows(tools: &[String], line: &str) -> bool {
    if line.trim().is_empty() {
        return false;
    }
    if tools.iter().any(|t| t.trim() == "Bash") {
        return true;
    }
    let Some(parts) = parts_of(line) else {
        return false;
    };
    !parts.is_empty()
        && parts.iter().all(|part| {
            tools.iter().map(|t| t.trim()).any(|t| {
                t.strip_prefix("Bash(")
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
        // A bare `Bash`: the client runs every line (observed), substitutions and files too.
        assert!(allows(&["Bash".to_string()], "npm test > out.txt"));
        assert!(allows(&["Bash".to_string()], "npm test $(curl x)"));
        assert!(!allows(&["Bash".to_string()], " "));
        assert!(allows(&tools, "cargo test 2>&1"));
        // Output into a file is asked for by the client (denied in `-p`), /dev/null is not.
        assert!(!allows(&tools, "cargo test > out.txt 2>/dev/null"));
        assert!(allows(&tools, "cargo test > /dev/null 2>/dev/null"));
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
            ("gofmt -l . > out.txt", false),
            ("gofmt -l . < in.txt", true),
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
            ("GOFLAGS=-v go test", true),
            ("env GOFLAGS=-v go test", false),
            ("A=1 B_2=x go test ./...", true),
            ("1A=x go test", false),
            ("timeout 60 go test", true),
            ("timeout -s KILL -k 5 2m go test", true),
            ("timeout go test", false),
            ("nice -n 5 nohup time go test", true),
            ("nice -5 go test", true),
            ("nohup", false),
            ("go test $(cat list)", false),
            ("go test \"$(cat list)\"", false),
            ("go test '$(cat list)'", true),
            ("go test `cat list`", false),
            ("go test <(cat list)", false),
            ("go test >(tee x)", false),
            ("go test >> log", false),
            ("go test 2> err", false),
            ("go test &> /dev/null", true),
            ("go test >&2", true),
            ("(go test)", false),
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
