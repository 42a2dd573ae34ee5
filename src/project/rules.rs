//! The `Bash(…)` rules a new project's `.hankrc` allows for its build, test and lint commands,
//! and a model of how Claude Code matches such a rule against a command line. **\[pure\]**
//!
//! Rules name a tool and its subcommand and let any arguments follow (`Bash(go test *)`,
//! `Bash(uv run pytest *)`), because that is how people and agents call them: `go test ./pkg`,
//! `go test -run X ./...`, `npm test -- --watch=false`, `cargo test -p x`.
//!
//! How the client matches (Claude Code 2.1.x, its permission-rule matcher, read from the
//! released client): a rule `Bash(SPEC)` is
//! - a **prefix** rule when SPEC ends in `:*` (legacy): the command equals the prefix or
//!   starts with the prefix and a space;
//! - a **wildcard** rule when SPEC holds an unescaped `*`: every `*` matches any text,
//!   spaces included, the whole command must match, and when the only `*` is a final ` *`,
//!   the space and the rest are optional (`Bash(ls *)` matches `ls` and `ls -la`, not
//!   `lsof`);
//! - otherwise an **exact** rule.
//!
//! A compound command (`a && b`, `a | b`, `a; b`) is allowed only when every part is.

use super::detect::ProjectFacts;

/// How one ecosystem is driven: the package manager's spelling of the commands.
fn rule(cmd: &str) -> String {
    format!("Bash({cmd} *)")
}

/// Rules for a Rust project (cargo).
fn rust_rules() -> Vec<String> {
    ["build", "test", "check", "clippy", "fmt", "run", "add"]
        .iter()
        .map(|sub| rule(&format!("cargo {sub}")))
        .collect()
}

/// Rules for a Go project.
fn go_rules() -> Vec<String> {
    let mut out: Vec<String> = ["build", "test", "vet", "run", "mod", "fmt"]
        .iter()
        .map(|sub| rule(&format!("go {sub}")))
        .collect();
    out.push(rule("gofmt"));
    out
}

/// The test runners, linters and compilers a Node project may call directly.
pub(crate) const NODE_TOOLS: &[&str] = &[
    "vitest",
    "jest",
    "mocha",
    "eslint",
    "tsc",
    "prettier",
    "playwright",
];

/// The package.json scripts the agent may run with `<pm> run NAME`.
pub(crate) const NODE_SCRIPTS: &[&str] = &[
    "build",
    "test",
    "lint",
    "typecheck",
    "check",
    "format",
    "test:unit",
];

/// Rules for a Node project driven by `pm` (npm, pnpm, yarn, bun): its `test`, `install`,
/// the listed `scripts` through `run`, and the `tools` (see [`NODE_TOOLS`]) through the
/// package manager's runner and `npx`.
fn node_rules(pm: &str, scripts: &[String], tools: &[String]) -> Vec<String> {
    let mut out = vec![rule(&format!("{pm} test")), rule(&format!("{pm} install"))];
    if pm == "npm" {
        out.push(rule("npm ci"));
    }
    for s in scripts {
        out.push(rule(&format!("{pm} run {s}")));
    }
    for t in tools {
        match pm {
            "pnpm" => out.push(rule(&format!("pnpm exec {t}"))),
            "yarn" => out.push(rule(&format!("yarn {t}"))),
            "bun" => out.push(rule(&format!("bunx {t}"))),
            _ => {}
        }
        out.push(rule(&format!("npx {t}")));
    }
    out
}

/// Rules for a Python project managed by `pm` (uv, poetry, pip).
fn python_rules(pm: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let prefixes: &[&str] = match pm {
        "uv" => &["uv run ", ""],
        "poetry" => &["poetry run ", ""],
        _ => &[""],
    };
    for p in prefixes {
        for tool in [
            "pytest",
            "python -m pytest",
            "python3 -m pytest",
            "python -m unittest",
            "ruff",
            "mypy",
        ] {
            out.push(rule(&format!("{p}{tool}")));
        }
    }
    match pm {
        "uv" => out.extend([rule("uv sync"), rule("uv add"), rule("uv lock")]),
        "poetry" => out.extend([rule("poetry install"), rule("poetry add")]),
        _ => out.extend([rule("pip install"), rule("python -m pip install")]),
    }
    out
}

/// The rules for the project's build, test and lint commands: per type, then any detected
/// command none of them allows yet (`Bash(<command> *)`).
#[must_use]
pub(crate) fn project_rules(facts: &ProjectFacts) -> Vec<String> {
    let pm = facts.package_manager.as_deref();
    let mut out = match facts.project_type.as_str() {
        "rust" => rust_rules(),
        "go" => go_rules(),
        "typescript" | "javascript" => {
            node_rules(pm.unwrap_or("npm"), &facts.node_scripts, &facts.node_tools)
        }
        "python" => python_rules(pm.unwrap_or("pip")),
        _ => Vec::new(),
    };
    for cmd in [&facts.build_cmd, &facts.test_cmd, &facts.lint_cmd]
        .into_iter()
        .flatten()
    {
        if !allows(&out, cmd) {
            out.push(rule(cmd));
        }
    }
    let mut seen = Vec::new();
    out.retain(|r| {
        let fresh = !seen.contains(r);
        if fresh {
            seen.push(r.clone());
        }
        fresh
    });
    out
}

/// Does the `Bash(…)` rule content `spec` allow the single command `command`? A model of the
/// client's matcher (see the module docs).
#[must_use]
pub(crate) fn bash_rule_matches(spec: &str, command: &str) -> bool {
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

/// The parts of a compound command line (`&&`, `||`, `;`, `|` outside quotes).
#[must_use]
pub(crate) fn split_compound(line: &str) -> Vec<String> {
    let mut parts = Vec::new();
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
            (None, ';') => parts.push(std::mem::take(&mut cur)),
            // `2>&1`, `>&2`, `<&3`: a redirection, not a separator.
            (None, '&') if cur.ends_with(['>', '<']) => cur.push(c),
            (None, '&' | '|') => {
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                parts.push(std::mem::take(&mut cur));
            }
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .iter()
        .map(|p| without_redirections(p))
        .filter(|p| !p.is_empty())
        .collect()
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
pub(crate) fn allows(tools: &[String], line: &str) -> bool {
    let parts = split_compound(line);
    !parts.is_empty()
        && parts.iter().all(|part| {
            tools.iter().any(|t| {
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
    use crate::project::detect::{self, ProjectFiles};

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

    fn facts_of(entries: &[(&str, &str)]) -> ProjectFacts {
        let mut f = ProjectFiles {
            dir_name: "demo".into(),
            ..ProjectFiles::default()
        };
        for (path, content) in entries {
            f.paths.insert((*path).to_string());
            if !content.is_empty() {
                f.contents
                    .insert((*path).to_string(), (*content).to_string());
            }
        }
        detect::detect(&f)
    }

    /// Real command lines against the rules hank generates for each kind of project.
    #[test]
    fn real_command_lines_against_the_generated_rules() {
        let node = r#"{"name":"web","scripts":{"build":"tsc","test":"vitest","lint":"eslint ."},"devDependencies":{"vitest":"2","typescript":"5","eslint":"9"}}"#;
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a [&'a str]);
        let cases: &[Case<'_>] = &[
            (
                &[
                    ("Cargo.toml", "[package]\nname = \"x\"\n"),
                    ("src/main.rs", ""),
                ],
                &[
                    "cargo build",
                    "cargo build --release",
                    "cargo test",
                    "cargo test -p x",
                    "cargo test --workspace -- --nocapture",
                    "cargo clippy --all-targets -- -D warnings",
                    "cargo fmt --check",
                    "cargo check",
                    "cargo run -- --help",
                    "cargo test 2>&1 && git add -A",
                ],
                &[
                    "cargo install ripgrep",
                    "cargo publish",
                    "cargo testing",
                    "rm -rf target",
                ],
            ),
            (
                &[("go.mod", "module example.com/tool\n"), ("main.go", "")],
                &[
                    "go build ./...",
                    "go test ./...",
                    "go test ./pkg",
                    "go test -run X ./...",
                    "go test -v -count=1 ./internal/...",
                    "go vet ./...",
                    "go mod tidy",
                    "gofmt -l .",
                    "go run .",
                ],
                &["go install x@latest", "go get evil.example/x", "gotest"],
            ),
            (
                &[("package.json", node), ("package-lock.json", "")],
                &[
                    "npm test",
                    "npm test -- --watch=false",
                    "npm run build",
                    "npm run lint -- --fix",
                    "npm install",
                    "npm install -D zod",
                    "npm ci",
                    "npx vitest",
                    "npx vitest run",
                    "npx vitest run src/a.test.ts",
                    "npx tsc --noEmit",
                    "npx eslint .",
                ],
                &[
                    "npm publish",
                    "npx cowsay hi",
                    "npm run deploy",
                    "npm testing",
                ],
            ),
            (
                &[("package.json", node), ("pnpm-lock.yaml", "")],
                &[
                    "pnpm test",
                    "pnpm test -- --run",
                    "pnpm run build",
                    "pnpm exec vitest run",
                    "npx vitest run",
                    "pnpm install",
                ],
                &["pnpm publish", "pnpm dlx cowsay"],
            ),
            (
                &[
                    (
                        "pyproject.toml",
                        "[project]\nname = \"svc\"\n[dependency-groups]\ndev = [\"pytest\"]\n",
                    ),
                    ("uv.lock", ""),
                ],
                &[
                    "uv sync",
                    "uv run pytest",
                    "uv run pytest -k x",
                    "uv run pytest -q tests/test_a.py",
                    "uv run python -m pytest -x",
                    "uv run ruff check .",
                    "uv run mypy src",
                    "pytest -q",
                    "uv add httpx",
                ],
                &[
                    "uv run python -c 'import os'",
                    "uv tool install x",
                    "uv pip install x",
                ],
            ),
            (
                &[("requirements.txt", "flask\npytest\n")],
                &[
                    "pytest",
                    "pytest -q",
                    "pytest tests/test_app.py::test_index -x",
                    "python -m pytest",
                    "python3 -m pytest -q",
                    "pip install -r requirements.txt",
                ],
                &["python app.py", "python -c 'print(1)'"],
            ),
        ];
        for (files, allowed, denied) in cases {
            let facts = facts_of(files);
            let tools = facts.allowed_tools();
            for cmd in [&facts.build_cmd, &facts.test_cmd, &facts.lint_cmd]
                .into_iter()
                .flatten()
            {
                assert!(
                    allows(&tools, cmd),
                    "{}: detected {cmd:?} denied",
                    facts.project_type
                );
            }
            for cmd in *allowed {
                assert!(
                    allows(&tools, cmd),
                    "{}: {cmd:?} denied by {tools:?}",
                    facts.project_type
                );
            }
            for cmd in *denied {
                assert!(
                    !allows(&tools, cmd),
                    "{}: {cmd:?} allowed",
                    facts.project_type
                );
            }
        }
    }

    /// Every project type `setup --project-type` knows gets rules that allow its own
    /// build, test and lint commands.
    #[test]
    fn type_defaults_allow_their_own_commands() {
        for ty in detect::PROJECT_TYPES {
            let facts = detect::facts_for_type("demo", ty, &Default::default()).unwrap();
            let tools = facts.allowed_tools();
            for cmd in [&facts.build_cmd, &facts.test_cmd, &facts.lint_cmd]
                .into_iter()
                .flatten()
            {
                assert!(allows(&tools, cmd), "{ty}: {cmd:?} denied");
            }
            if *ty != "unknown" {
                assert!(facts.test_cmd.is_some(), "{ty} has no test command");
            }
        }
        let uv: std::collections::BTreeSet<String> = ["uv".to_string()].into();
        let facts = detect::facts_for_type("demo", "python", &uv).unwrap();
        assert_eq!(facts.test_cmd.as_deref(), Some("uv run pytest"));
        assert!(allows(&facts.allowed_tools(), "uv run pytest -k x"));
        assert!(detect::facts_for_type("demo", "cobol", &uv).is_err());
    }
}
