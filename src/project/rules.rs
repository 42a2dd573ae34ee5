//! The `Bash(…)` rules a new project's `.hankrc` allows for its build, test and lint commands.
//! **\[pure\]**
//!
//! Rules name a tool and its subcommand and let any arguments follow (`Bash(go test *)`,
//! `Bash(uv run pytest *)`), because that is how people and agents call them: `go test ./pkg`,
//! `go test -run X ./...`, `npm test -- --watch=false`, `cargo test -p x`. They are checked
//! with [`crate::policy::bash_rules`], the model of the client's matching.

use crate::policy::bash_rules::allows;

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
            "python3 -m unittest",
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
    for cmd in facts.commands.checks() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::detect::{self, ProjectFiles};

    fn facts_of(entries: &[(&str, &str)]) -> ProjectFacts {
        detect::detect(&ProjectFiles::of(entries))
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
                    "python -m unittest",
                    "python3 -m unittest discover -s tests",
                    "pip install -r requirements.txt",
                ],
                &["python app.py", "python -c 'print(1)'"],
            ),
        ];
        for (files, allowed, denied) in cases {
            let facts = facts_of(files);
            let tools = facts.allowed_tools();
            for cmd in facts.commands.checks() {
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
            for cmd in facts.commands.checks() {
                assert!(allows(&tools, cmd), "{ty}: {cmd:?} denied");
            }
            if *ty != "unknown" {
                assert!(
                    facts.commands.test_cmd.is_some(),
                    "{ty} has no test command"
                );
            }
        }
        let uv: std::collections::BTreeSet<String> = ["uv".to_string()].into();
        let facts = detect::facts_for_type("demo", "python", &uv).unwrap();
        assert_eq!(facts.commands.test_cmd.as_deref(), Some("uv run pytest"));
        assert!(allows(&facts.allowed_tools(), "uv run pytest -k x"));
        assert!(detect::facts_for_type("demo", "cobol", &uv).is_err());
    }
}
