//! Project detection: language/type, framework, package manager, build/test/run commands,
//! git and GitHub remote, task sources.  **\[pure\]**
//!
//! The caller lists the files ([`ProjectFiles`], filled by `scan::scan_dir`) and says which
//! tools are on PATH; [`detect`] only looks at that. The first manifest found in this order
//! decides the type: `Cargo.toml`, `package.json`, `pyproject.toml` / `setup.py` /
//! `requirements.txt`, `go.mod`.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use serde::Serialize;

use super::rules;

/// The project types hank knows (`--project-type`).
pub(crate) const PROJECT_TYPES: &[&str] = &[
    "rust",
    "typescript",
    "javascript",
    "python",
    "go",
    "unknown",
];

/// What detection would find in a fresh project of type `ty` (for `setup --project-type` and
/// a `--project-type` that differs from the detected one): the same detector, run on the
/// minimal manifest of that type (`tools`: what is on PATH; uv makes a Python project a uv one). **\[pure\]**
///
/// # Errors
/// An unknown type, naming the known ones.
pub(crate) fn facts_for_type(
    name: &str,
    ty: &str,
    tools: &BTreeSet<String>,
) -> Result<ProjectFacts, String> {
    let manifest: &[(&str, &str)] = match ty {
        "rust" => &[
            ("Cargo.toml", "[package]\nname = \"x\"\n"),
            ("src/main.rs", ""),
        ],
        "typescript" => &[
            (
                "package.json",
                r#"{"scripts":{"build":"tsc","test":"vitest run","lint":"eslint ."},"devDependencies":{"typescript":"*","vitest":"*","eslint":"*"}}"#,
            ),
            ("tsconfig.json", ""),
        ],
        "javascript" => &[(
            "package.json",
            r#"{"scripts":{"test":"vitest run","lint":"eslint ."},"devDependencies":{"vitest":"*","eslint":"*"}}"#,
        )],
        "python" => &[(
            "pyproject.toml",
            "[project]\nname = \"x\"\n[dependency-groups]\ndev = [\"pytest\", \"ruff\"]\n",
        )],
        "go" => &[("go.mod", "module x\n"), ("main.go", "")],
        "unknown" => &[],
        other => {
            return Err(format!(
                "unknown project type `{other}`; expected one of {}",
                PROJECT_TYPES.join(", ")
            ));
        }
    };
    let mut files = ProjectFiles {
        dir_name: name.to_string(),
        ..ProjectFiles::default()
    };
    // A Python project is set up with uv when uv is installed.
    if ty == "python" && tools.contains("uv") {
        files.paths.insert("uv.lock".into());
    }
    for (path, content) in manifest {
        files.paths.insert((*path).to_string());
        if !content.is_empty() {
            files
                .contents
                .insert((*path).to_string(), (*content).to_string());
        }
    }
    files.tools.clone_from(tools);
    let mut facts = detect(&files);
    facts.name = name.to_string();
    facts.commands.run_cmd = None;
    // Without uv nothing installs the dev group: the check is what this machine has —
    // `pytest` on PATH, else pytest importable by python3, else the standard library's
    // unittest (`tools`: "pytest", "python3-pytest", "python3"; "python-probed": the caller
    // looked, as `hank setup` does).
    if ty == "python" && tools.contains("python-probed") && !tools.contains("uv") {
        facts.commands.test_cmd = Some(python_check(tools).into());
    }
    Ok(facts)
}

/// The test command of a new Python project set up without uv, from what is installed:
/// `pytest` on PATH, else `python3 -m pytest` when python3 imports it, else `unittest`
/// (with `python3` when it exists). **\[pure\]**
pub(crate) fn python_check(tools: &BTreeSet<String>) -> &'static str {
    if tools.contains("pytest") {
        "pytest"
    } else if tools.contains("python3-pytest") {
        "python3 -m pytest"
    } else if tools.contains("python3") {
        "python3 -m unittest"
    } else {
        "python -m unittest"
    }
}

/// What detection looks at: file names and the contents of a few well-known files.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProjectFiles {
    /// Relative paths (with `/`), directories with a trailing `/`: the root entries and the
    /// entries of `docs/` (two levels).
    pub paths: BTreeSet<String>,
    /// Contents of the manifests that exist (`Cargo.toml`, `package.json`, …) and of
    /// `.git/config` when there is one.
    pub contents: BTreeMap<String, String>,
    /// The project folder's own name (default project name).
    pub dir_name: String,
    /// External tools found on PATH (`bd`, `gh`, `git`).
    pub tools: BTreeSet<String>,
}

#[cfg(test)]
impl ProjectFiles {
    /// A folder `demo` with these files (`(path, content)`; an empty content: the name only).
    pub(crate) fn of(entries: &[(&str, &str)]) -> Self {
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
        f
    }
}

impl ProjectFiles {
    fn has(&self, path: &str) -> bool {
        self.paths.contains(path)
    }
    fn content(&self, path: &str) -> Option<&str> {
        self.contents.get(path).map(String::as_str)
    }
}

/// A place tasks can be imported from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TaskSourceKind {
    /// beads issues (`bd list --json`).
    Beads,
    /// GitHub issues (`gh issue list`).
    Github,
    /// A PRD / requirements / spec document.
    Prd,
}

impl TaskSourceKind {
    /// The `--from` spelling.
    #[must_use]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Beads => "beads",
            Self::Github => "github",
            Self::Prd => "prd",
        }
    }
}

/// A project's commands: what detection finds ([`ProjectFacts`]) and what the templates
/// show (`generate::ProjectSpec`, where the user's choice of project type may replace them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Commands {
    pub build_cmd: Option<String>,
    pub test_cmd: Option<String>,
    pub run_cmd: Option<String>,
    /// The linter or type check, when one is set up (`cargo clippy`, `npm run lint`, …).
    pub lint_cmd: Option<String>,
}

impl Commands {
    /// The build, test and lint commands that are known (the ones the agent checks its work
    /// with, which ALLOWED_TOOLS must allow; not the run command).
    pub(crate) fn checks(&self) -> impl Iterator<Item = &String> {
        [&self.build_cmd, &self.test_cmd, &self.lint_cmd]
            .into_iter()
            .flatten()
    }
}

/// What hank knows about a project before asking anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct ProjectFacts {
    /// Default project name (package name, else the folder name).
    pub name: String,
    /// `rust`, `typescript`, `javascript`, `python`, `go` or `unknown`.
    pub project_type: String,
    pub framework: Option<String>,
    pub package_manager: Option<String>,
    /// The build, test, run and lint commands found.
    #[serde(flatten)]
    pub commands: Commands,
    /// Node: the package.json scripts among [`rules::NODE_SCRIPTS`] (empty elsewhere).
    pub node_scripts: Vec<String>,
    /// Node: the tools among [`rules::NODE_TOOLS`] the project depends on.
    pub node_tools: Vec<String>,
    /// `.git` exists.
    pub git: bool,
    /// `owner/repo` of a GitHub remote (origin preferred).
    pub github_repo: Option<String>,
    /// `.beads/` exists.
    pub beads_dir: bool,
    pub bd_available: bool,
    pub gh_available: bool,
    /// `uv` is on PATH (a Python project set up by hank uses it).
    pub uv_available: bool,
    /// The built-in agents whose program is on PATH (`claude`, `codex`, `gemini`,
    /// `opencode`), in that order.
    pub agents_installed: Vec<String>,
    /// PRD-like documents (`*prd*.md`, `*requirements*.md`, `*spec*.md` at the root or
    /// under `docs/`).
    pub prd_files: Vec<String>,
}

impl ProjectFacts {
    /// Sources that look usable: beads (`.beads/` and `bd`), GitHub (remote and `gh`), PRD
    /// (a document found).
    #[must_use]
    pub(crate) fn available_sources(&self) -> Vec<TaskSourceKind> {
        let mut out = Vec::new();
        if self.beads_dir && self.bd_available {
            out.push(TaskSourceKind::Beads);
        }
        if self.github_repo.is_some() && self.gh_available {
            out.push(TaskSourceKind::Github);
        }
        if !self.prd_files.is_empty() {
            out.push(TaskSourceKind::Prd);
        }
        out
    }

    /// `DEFAULT_ALLOWED_TOOLS` plus the rules for the project's build, test and lint
    /// commands ([`rules::project_rules`]).
    #[must_use]
    pub(crate) fn allowed_tools(&self) -> Vec<String> {
        let mut tools: Vec<String> = crate::settings::DEFAULT_ALLOWED_TOOLS
            .iter()
            .map(|s| (*s).to_string())
            .collect();
        for entry in rules::project_rules(self) {
            if !tools.contains(&entry) {
                tools.push(entry);
            }
        }
        tools
    }

    /// The command `VERIFY_COMMAND` gets: the test command.
    #[must_use]
    pub(crate) fn verify_cmd(&self) -> Option<&str> {
        self.commands.test_cmd.as_deref()
    }
}

/// Detects everything from the listed files.
#[must_use]
pub(crate) fn detect(files: &ProjectFiles) -> ProjectFacts {
    let mut facts = ProjectFacts {
        name: files.dir_name.clone(),
        project_type: "unknown".into(),
        ..ProjectFacts::default()
    };
    if let Some(cargo) = files.content("Cargo.toml") {
        detect_rust(files, cargo, &mut facts);
    } else if let Some(pkg) = files.content("package.json") {
        detect_node(files, pkg, &mut facts);
    } else if files.has("pyproject.toml") || files.has("setup.py") || files.has("requirements.txt")
    {
        detect_python(files, &mut facts);
    } else if let Some(gomod) = files.content("go.mod") {
        detect_go(files, gomod, &mut facts);
    }
    facts.git = files.has(".git/") || files.has(".git");
    facts.github_repo = files
        .content(".git/config")
        .and_then(github_repo_from_git_config);
    facts.beads_dir = files.has(".beads/");
    facts.bd_available = files.tools.contains("bd");
    facts.gh_available = files.tools.contains("gh");
    facts.uv_available = files.tools.contains("uv");
    // (profile, program): the built-in profiles, in the order the wizard offers them.
    facts.agents_installed = [
        ("claude", "claude"),
        ("codex", "codex"),
        ("gemini", "gemini"),
        ("opencode", "opencode"),
        ("copilot", "copilot"),
        ("aider", "aider"),
        ("goose", "goose"),
        ("cursor", "cursor-agent"),
    ]
    .into_iter()
    .filter(|(_, program)| files.tools.contains(*program))
    .map(|(profile, _)| profile.to_owned())
    .collect();
    facts.prd_files = prd_files(&files.paths);
    facts
}

fn has_dep(text: &str, name: &str) -> bool {
    // A TOML key `name =` / `name.workspace =` at the start of a line, or a quoted name in a
    // list (pyproject `dependencies = ["fastapi>=0.1"]`).
    let escaped = regex::escape(name);
    let pattern =
        format!(r#"(?mi)^\s*["']?{escaped}["']?\s*[=.]|["']{escaped}\s*([<>=!~;\[ "']|$)"#);
    Regex::new(&pattern).is_ok_and(|re| re.is_match(text))
}

fn first_dep<'a>(text: &str, table: &[(&'a str, &'a str)]) -> Option<&'a str> {
    table
        .iter()
        .find(|(dep, _)| has_dep(text, dep))
        .map(|(_, name)| *name)
}

fn toml_string(text: &str, section: &str, key: &str) -> Option<String> {
    let mut in_section = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == format!("[{section}]");
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some((k, v)) = line.split_once('=')
            && k.trim() == key
        {
            let v = v.trim().trim_matches('"').trim_matches('\'');
            if !v.is_empty() {
                return Some(v.to_string());
            }
        }
    }
    None
}

fn detect_rust(files: &ProjectFiles, cargo: &str, facts: &mut ProjectFacts) {
    facts.project_type = "rust".into();
    facts.package_manager = Some("cargo".into());
    if let Some(name) = toml_string(cargo, "package", "name") {
        facts.name = name;
    }
    facts.framework = first_dep(
        cargo,
        &[
            ("axum", "axum"),
            ("actix-web", "actix-web"),
            ("rocket", "rocket"),
            ("warp", "warp"),
            ("leptos", "leptos"),
            ("bevy", "bevy"),
            ("tauri", "tauri"),
            ("ratatui", "ratatui"),
            ("clap", "clap"),
        ],
    )
    .map(str::to_string);
    let workspace = cargo.lines().any(|l| l.trim() == "[workspace]");
    if workspace && !cargo.lines().any(|l| l.trim() == "[package]") {
        facts.commands.build_cmd = Some("cargo build --workspace".into());
        facts.commands.test_cmd = Some("cargo test --workspace".into());
    } else {
        facts.commands.build_cmd = Some("cargo build".into());
        facts.commands.test_cmd = Some("cargo test".into());
    }
    facts.commands.lint_cmd = Some("cargo clippy".into());
    if files.has("src/main.rs") || cargo.contains("[[bin]]") {
        facts.commands.run_cmd = Some("cargo run".into());
    }
}

fn detect_node(files: &ProjectFiles, pkg: &str, facts: &mut ProjectFacts) {
    let json: serde_json::Value = serde_json::from_str(pkg).unwrap_or_default();
    let deps = |name: &str| {
        ["dependencies", "devDependencies", "peerDependencies"]
            .iter()
            .any(|table| json.get(table).and_then(|t| t.get(name)).is_some())
    };
    if let Some(name) = json.get("name").and_then(|n| n.as_str())
        && !name.trim().is_empty()
    {
        facts.name = name.trim().to_string();
    }
    let typescript = files.has("tsconfig.json") || deps("typescript");
    facts.project_type = if typescript {
        "typescript"
    } else {
        "javascript"
    }
    .into();

    let declared = json
        .get("packageManager")
        .and_then(|p| p.as_str())
        .and_then(|p| p.split('@').next())
        .filter(|p| ["npm", "yarn", "pnpm", "bun"].contains(p));
    let pm = declared.unwrap_or(if files.has("bun.lockb") || files.has("bun.lock") {
        "bun"
    } else if files.has("pnpm-lock.yaml") {
        "pnpm"
    } else if files.has("yarn.lock") {
        "yarn"
    } else {
        "npm"
    });
    facts.package_manager = Some(pm.to_string());

    facts.framework = [
        ("next", "next"),
        ("nuxt", "nuxt"),
        ("@remix-run/react", "remix"),
        ("@sveltejs/kit", "sveltekit"),
        ("astro", "astro"),
        ("@angular/core", "angular"),
        ("@nestjs/core", "nestjs"),
        ("vue", "vue"),
        ("svelte", "svelte"),
        ("react", "react"),
        ("fastify", "fastify"),
        ("express", "express"),
    ]
    .iter()
    .find(|(dep, _)| deps(dep))
    .map(|(_, name)| (*name).to_string());

    let script = |name: &str| {
        json.get("scripts")
            .and_then(|s| s.get(name))
            .and_then(|s| s.as_str())
            .filter(|s| !s.contains("no test specified"))
            .is_some()
    };
    let run = |s: &str| match pm {
        "npm" => format!("npm run {s}"),
        other => format!("{other} run {s}"),
    };
    if script("build") {
        facts.commands.build_cmd = Some(run("build"));
    }
    if script("test") {
        facts.commands.test_cmd = Some(match pm {
            // `bun test` is bun's own runner, not the script.
            "bun" => "bun run test".to_string(),
            other => format!("{other} test"),
        });
    }
    if script("lint") {
        facts.commands.lint_cmd = Some(run("lint"));
    }
    facts.node_scripts = rules::NODE_SCRIPTS
        .iter()
        .filter(|s| script(s))
        .map(|s| (*s).to_string())
        .collect();
    facts.node_tools = rules::NODE_TOOLS
        .iter()
        .filter(|t| {
            let dep = match **t {
                "tsc" => "typescript",
                "playwright" => "@playwright/test",
                other => other,
            };
            deps(dep)
        })
        .map(|t| (*t).to_string())
        .collect();
    if script("dev") {
        facts.commands.run_cmd = Some(run("dev"));
    } else if script("start") {
        facts.commands.run_cmd = Some(match pm {
            "bun" => "bun run start".to_string(),
            other => format!("{other} start"),
        });
    }
}

fn detect_python(files: &ProjectFiles, facts: &mut ProjectFacts) {
    facts.project_type = "python".into();
    let text: String = [
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
    ]
    .iter()
    .filter_map(|f| files.content(f))
    .collect::<Vec<_>>()
    .join("\n");
    let pyproject = files.content("pyproject.toml").unwrap_or("");
    if let Some(name) = toml_string(pyproject, "project", "name")
        .or_else(|| toml_string(pyproject, "tool.poetry", "name"))
    {
        facts.name = name;
    }
    let pm = if files.has("uv.lock") {
        "uv"
    } else if files.has("poetry.lock") || pyproject.contains("[tool.poetry]") {
        "poetry"
    } else {
        "pip"
    };
    facts.package_manager = Some(pm.into());
    facts.framework = first_dep(
        &text,
        &[
            ("django", "django"),
            ("fastapi", "fastapi"),
            ("flask", "flask"),
            ("streamlit", "streamlit"),
        ],
    )
    .map(str::to_string);
    let prefix = match pm {
        "uv" => "uv run ",
        "poetry" => "poetry run ",
        _ => "",
    };
    let installable = files.has("pyproject.toml") || files.has("setup.py");
    facts.commands.build_cmd = Some(match pm {
        "uv" => "uv sync".into(),
        "poetry" => "poetry install".into(),
        _ if installable => "pip install -e .".into(),
        _ => "pip install -r requirements.txt".into(),
    });
    let pytest = text.to_ascii_lowercase().contains("pytest") || files.has("pytest.ini");
    facts.commands.test_cmd = Some(if pytest {
        format!("{prefix}pytest")
    } else {
        format!("{prefix}python -m unittest")
    });
    if text.to_ascii_lowercase().contains("ruff") || files.has("ruff.toml") {
        facts.commands.lint_cmd = Some(format!("{prefix}ruff check ."));
    }
    if files.has("manage.py") {
        facts.commands.run_cmd = Some(format!("{prefix}python manage.py runserver"));
    } else if files.has("main.py") {
        facts.commands.run_cmd = Some(format!("{prefix}python main.py"));
    } else if files.has("app.py") {
        facts.commands.run_cmd = Some(format!("{prefix}python app.py"));
    }
}

fn detect_go(files: &ProjectFiles, gomod: &str, facts: &mut ProjectFacts) {
    facts.project_type = "go".into();
    facts.package_manager = Some("go".into());
    if let Some(module) = gomod
        .lines()
        .find_map(|l| l.trim().strip_prefix("module "))
        .and_then(|m| m.trim().rsplit('/').next())
        .filter(|m| !m.is_empty())
    {
        facts.name = module.to_string();
    }
    facts.framework = [
        ("github.com/gin-gonic/gin", "gin"),
        ("github.com/labstack/echo", "echo"),
        ("github.com/gofiber/fiber", "fiber"),
        ("github.com/go-chi/chi", "chi"),
        ("github.com/spf13/cobra", "cobra"),
    ]
    .iter()
    .find(|(path, _)| gomod.contains(path))
    .map(|(_, name)| (*name).to_string());
    facts.commands.build_cmd = Some("go build ./...".into());
    facts.commands.test_cmd = Some("go test ./...".into());
    facts.commands.lint_cmd = Some("go vet ./...".into());
    if files.has("main.go") {
        facts.commands.run_cmd = Some("go run .".into());
    }
}

/// `owner/repo` from a GitHub URL (`git@github.com:o/r.git`, `https://github.com/o/r`,
/// `ssh://git@github.com/o/r.git`).
#[must_use]
pub(crate) fn github_repo_from_url(url: &str) -> Option<String> {
    let url = url.trim();
    let idx = url.find("github.com")?;
    let rest = &url[idx + "github.com".len()..];
    let rest = rest.strip_prefix(':').or_else(|| rest.strip_prefix('/'))?;
    let rest = rest.trim_end_matches('/');
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let mut parts = rest.split('/');
    let owner = parts.next().filter(|s| !s.is_empty())?;
    let repo = parts.next().filter(|s| !s.is_empty())?;
    if parts.next().is_some() {
        return None;
    }
    Some(format!("{owner}/{repo}"))
}

/// The GitHub repository of the `origin` remote, else of any remote, from `.git/config`.
#[must_use]
pub(crate) fn github_repo_from_git_config(config: &str) -> Option<String> {
    let mut remote: Option<String> = None;
    let mut found: Vec<(String, String)> = Vec::new();
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            remote = line
                .strip_prefix("[remote \"")
                .and_then(|r| r.strip_suffix("\"]"))
                .map(str::to_string);
            continue;
        }
        if let Some(name) = &remote
            && let Some((k, v)) = line.split_once('=')
            && k.trim() == "url"
            && let Some(repo) = github_repo_from_url(v)
        {
            found.push((name.clone(), repo));
        }
    }
    found
        .iter()
        .find(|(name, _)| name == "origin")
        .or(found.first())
        .map(|(_, repo)| repo.clone())
}

fn prd_files(paths: &BTreeSet<String>) -> Vec<String> {
    paths
        .iter()
        .filter(|p| {
            let lower = p.to_ascii_lowercase();
            let file = lower.rsplit('/').next().unwrap_or(&lower);
            let at_root = !lower.contains('/');
            (at_root || lower.starts_with("docs/"))
                && file.ends_with(".md")
                && ["prd", "requirements", "spec"]
                    .iter()
                    .any(|k| file.contains(k))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `setup --project-type python` without uv: the check is one this machine can run.
    #[test]
    fn a_new_python_project_checks_with_what_is_installed() {
        let table: [(&[&str], &str); 5] = [
            (
                &["python-probed", "pytest", "python3", "python3-pytest"],
                "pytest",
            ),
            (
                &["python-probed", "python3", "python3-pytest"],
                "python3 -m pytest",
            ),
            (&["python-probed", "python3"], "python3 -m unittest"),
            (&["python-probed"], "python -m unittest"),
            (&["python-probed", "uv", "python3"], "uv run pytest"),
        ];
        for (tools, check) in table {
            let tools: BTreeSet<String> = tools.iter().map(|t| (*t).to_string()).collect();
            let facts = facts_for_type("demo", "python", &tools).unwrap();
            assert_eq!(facts.commands.test_cmd.as_deref(), Some(check), "{tools:?}");
            let allowed = facts.allowed_tools();
            assert!(
                crate::policy::bash_rules::allows(&allowed, &format!("{check} -q")),
                "{check} denied by {allowed:?}"
            );
        }
    }

    fn files(entries: &[(&str, &str)], tools: &[&str]) -> ProjectFiles {
        ProjectFiles {
            tools: tools.iter().map(|t| (*t).to_string()).collect(),
            ..ProjectFiles::of(entries)
        }
    }

    struct Case {
        files: &'static [(&'static str, &'static str)],
        ty: &'static str,
        name: &'static str,
        framework: Option<&'static str>,
        pm: Option<&'static str>,
        build: Option<&'static str>,
        test: Option<&'static str>,
        run: Option<&'static str>,
    }

    fn check(cases: &[Case]) {
        for (i, c) in cases.iter().enumerate() {
            let facts = detect(&files(c.files, &[]));
            let got = (
                facts.project_type.as_str(),
                facts.name.as_str(),
                facts.framework.as_deref(),
                facts.package_manager.as_deref(),
                facts.commands.build_cmd.as_deref(),
                facts.commands.test_cmd.as_deref(),
                facts.commands.run_cmd.as_deref(),
            );
            let want = (c.ty, c.name, c.framework, c.pm, c.build, c.test, c.run);
            assert_eq!(got, want, "case {i}: {:?}", c.files);
        }
    }

    #[test]
    fn rust_projects() {
        check(&[
            Case {
                files: &[
                    (
                        "Cargo.toml",
                        "[package]\nname = \"svc\"\n\n[dependencies]\naxum = \"0.8\"\ntokio = { version = \"1\" }\n",
                    ),
                    ("src/main.rs", ""),
                ],
                ty: "rust",
                name: "svc",
                framework: Some("axum"),
                pm: Some("cargo"),
                build: Some("cargo build"),
                test: Some("cargo test"),
                run: Some("cargo run"),
            },
            Case {
                files: &[(
                    "Cargo.toml",
                    "[package]\nname = \"lib-only\"\n[dependencies]\nserde = \"1\"\n",
                )],
                ty: "rust",
                name: "lib-only",
                framework: None,
                pm: Some("cargo"),
                build: Some("cargo build"),
                test: Some("cargo test"),
                run: None,
            },
            Case {
                files: &[("Cargo.toml", "[workspace]\nmembers = [\"a\", \"b\"]\n")],
                ty: "rust",
                name: "demo",
                framework: None,
                pm: Some("cargo"),
                build: Some("cargo build --workspace"),
                test: Some("cargo test --workspace"),
                run: None,
            },
            Case {
                files: &[(
                    "Cargo.toml",
                    "[package]\nname = \"cli\"\n[dependencies]\nclap.workspace = true\n[[bin]]\nname = \"x\"\n",
                )],
                ty: "rust",
                name: "cli",
                framework: Some("clap"),
                pm: Some("cargo"),
                build: Some("cargo build"),
                test: Some("cargo test"),
                run: Some("cargo run"),
            },
        ]);
    }

    #[test]
    fn node_projects() {
        check(&[
            Case {
                files: &[
                    (
                        "package.json",
                        r#"{"name":"web","scripts":{"build":"next build","dev":"next dev","test":"jest"},"dependencies":{"next":"14","react":"18"},"devDependencies":{"typescript":"5"}}"#,
                    ),
                    ("pnpm-lock.yaml", ""),
                ],
                ty: "typescript",
                name: "web",
                framework: Some("next"),
                pm: Some("pnpm"),
                build: Some("pnpm run build"),
                test: Some("pnpm test"),
                run: Some("pnpm run dev"),
            },
            Case {
                files: &[
                    (
                        "package.json",
                        r#"{"name":"api","scripts":{"start":"node index.js","test":"echo \"Error: no test specified\" && exit 1"},"dependencies":{"express":"4"}}"#,
                    ),
                    ("package-lock.json", ""),
                ],
                ty: "javascript",
                name: "api",
                framework: Some("express"),
                pm: Some("npm"),
                build: None,
                test: None,
                run: Some("npm start"),
            },
            Case {
                files: &[
                    (
                        "package.json",
                        r#"{"scripts":{"test":"vitest","build":"vite build"},"dependencies":{"vue":"3"}}"#,
                    ),
                    ("yarn.lock", ""),
                    ("tsconfig.json", ""),
                ],
                ty: "typescript",
                name: "demo",
                framework: Some("vue"),
                pm: Some("yarn"),
                build: Some("yarn run build"),
                test: Some("yarn test"),
                run: None,
            },
            Case {
                files: &[
                    (
                        "package.json",
                        r#"{"name":"b","scripts":{"test":"bun test","start":"bun index.ts"}}"#,
                    ),
                    ("bun.lockb", ""),
                ],
                ty: "javascript",
                name: "b",
                framework: None,
                pm: Some("bun"),
                build: None,
                test: Some("bun run test"),
                run: Some("bun run start"),
            },
            Case {
                files: &[
                    (
                        "package.json",
                        r#"{"name":"p","packageManager":"pnpm@9.1.0","scripts":{"build":"tsc"}}"#,
                    ),
                    ("package-lock.json", ""),
                ],
                ty: "javascript",
                name: "p",
                framework: None,
                pm: Some("pnpm"),
                build: Some("pnpm run build"),
                test: None,
                run: None,
            },
            Case {
                files: &[("package.json", "{ not json")],
                ty: "javascript",
                name: "demo",
                framework: None,
                pm: Some("npm"),
                build: None,
                test: None,
                run: None,
            },
        ]);
    }

    #[test]
    fn python_projects() {
        check(&[
            Case {
                files: &[
                    (
                        "pyproject.toml",
                        "[project]\nname = \"svc\"\ndependencies = [\"fastapi>=0.110\", \"uvicorn\"]\n[dependency-groups]\ndev = [\"pytest\"]\n",
                    ),
                    ("uv.lock", ""),
                    ("main.py", ""),
                ],
                ty: "python",
                name: "svc",
                framework: Some("fastapi"),
                pm: Some("uv"),
                build: Some("uv sync"),
                test: Some("uv run pytest"),
                run: Some("uv run python main.py"),
            },
            Case {
                files: &[
                    (
                        "pyproject.toml",
                        "[tool.poetry]\nname = \"site\"\n[tool.poetry.dependencies]\npython = \"^3.12\"\ndjango = \"^5\"\n",
                    ),
                    ("manage.py", ""),
                ],
                ty: "python",
                name: "site",
                framework: Some("django"),
                pm: Some("poetry"),
                build: Some("poetry install"),
                test: Some("poetry run python -m unittest"),
                run: Some("poetry run python manage.py runserver"),
            },
            Case {
                files: &[("requirements.txt", "flask==3.0\npytest\n"), ("app.py", "")],
                ty: "python",
                name: "demo",
                framework: Some("flask"),
                pm: Some("pip"),
                build: Some("pip install -r requirements.txt"),
                test: Some("pytest"),
                run: Some("python app.py"),
            },
            Case {
                files: &[(
                    "setup.py",
                    "from setuptools import setup\nsetup(name='x')\n",
                )],
                ty: "python",
                name: "demo",
                framework: None,
                pm: Some("pip"),
                build: Some("pip install -e ."),
                test: Some("python -m unittest"),
                run: None,
            },
        ]);
    }

    #[test]
    fn go_and_unknown_projects() {
        check(&[
            Case {
                files: &[
                    (
                        "go.mod",
                        "module github.com/acme/tool\n\ngo 1.22\n\nrequire github.com/spf13/cobra v1.8.0\n",
                    ),
                    ("main.go", ""),
                ],
                ty: "go",
                name: "tool",
                framework: Some("cobra"),
                pm: Some("go"),
                build: Some("go build ./..."),
                test: Some("go test ./..."),
                run: Some("go run ."),
            },
            Case {
                files: &[("README.md", "# hi")],
                ty: "unknown",
                name: "demo",
                framework: None,
                pm: None,
                build: None,
                test: None,
                run: None,
            },
        ]);
    }

    #[test]
    fn github_urls() {
        let cases = [
            ("git@github.com:acme/app.git", Some("acme/app")),
            ("https://github.com/acme/app", Some("acme/app")),
            ("https://github.com/acme/app.git/", Some("acme/app")),
            ("ssh://git@github.com/acme/app.git", Some("acme/app")),
            ("https://gitlab.com/acme/app.git", None),
            ("https://github.com/acme", None),
            ("https://github.com/acme/app/tree/main", None),
        ];
        for (url, want) in cases {
            assert_eq!(github_repo_from_url(url).as_deref(), want, "{url}");
        }
    }

    #[test]
    fn git_config_prefers_origin() {
        let config = "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = https://github.com/up/app.git\n[remote \"origin\"]\n\turl = git@github.com:me/app.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n";
        assert_eq!(
            github_repo_from_git_config(config).as_deref(),
            Some("me/app")
        );
        let only = "[remote \"fork\"]\n\turl = https://github.com/f/app\n";
        assert_eq!(github_repo_from_git_config(only).as_deref(), Some("f/app"));
        assert_eq!(github_repo_from_git_config("[core]\n"), None);
    }

    #[test]
    fn task_sources_need_their_tool() {
        let entries = [
            (".git/", ""),
            (
                ".git/config",
                "[remote \"origin\"]\n url = https://github.com/a/b\n",
            ),
            (".beads/", ""),
            ("docs/", ""),
            ("docs/product-prd.md", ""),
            ("docs/api/", ""),
            ("REQUIREMENTS.md", ""),
            ("README.md", ""),
            ("src/spec.md", ""),
        ];
        let none = detect(&files(&entries, &[]));
        assert!(none.git && none.beads_dir);
        assert_eq!(none.github_repo.as_deref(), Some("a/b"));
        assert_eq!(
            none.prd_files,
            vec!["REQUIREMENTS.md", "docs/product-prd.md"]
        );
        assert_eq!(none.available_sources(), vec![TaskSourceKind::Prd]);
        let all = detect(&files(&entries, &["bd", "gh"]));
        assert_eq!(
            all.available_sources(),
            vec![
                TaskSourceKind::Beads,
                TaskSourceKind::Github,
                TaskSourceKind::Prd
            ]
        );
    }

    #[test]
    fn allowed_tools_add_build_and_test() {
        let facts = detect(&files(&[("go.mod", "module x\n")], &[]));
        let tools = facts.allowed_tools();
        assert!(tools.starts_with(&["Write".to_string()]));
        assert!(tools.contains(&"Bash(go build *)".to_string()));
        assert!(tools.contains(&"Bash(go test *)".to_string()));
        assert!(!tools.iter().any(|t| t.contains("./...")), "{tools:?}");
        assert!(!tools.iter().any(|t| t == "Bash(git *)"));
    }

    proptest::proptest! {
        #[test]
        fn detect_never_panics(manifest in 0usize..5, content in "\\PC*", cfg in "\\PC*") {
            let name = ["Cargo.toml", "package.json", "pyproject.toml", "go.mod", "setup.py"][manifest];
            let facts = detect(&files(&[(name, content.as_str()), (".git/config", cfg.as_str())], &[]));
            proptest::prop_assert!(!facts.project_type.is_empty());
        }
    }
}
