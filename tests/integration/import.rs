//! hank import end to end

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{Project, fixtures, stderr, stdout};

/// The fake agent's side effect: the three files, written into its cwd's `.hank/`.
const WRITE_ALL: &str = "mkdir -p .hank/specs\n\
printf '## Project\\nTodo app.\\n\\n---HANK_STATUS---\\nSTATUS: IN_PROGRESS\\n---END_HANK_STATUS---\\n' > .hank/PROMPT.md\n\
printf '# Fix plan\\n\\n## High priority\\n- [ ] Set up the project\\n- [ ] Add a todo item\\n- [ ] Mark a todo as done\\n' > .hank/fix_plan.md\n\
printf '# Requirements\\n\\nTodos.\\n' > .hank/specs/requirements.md\n";

/// Only two of the three files.
const WRITE_PARTIAL: &str = "mkdir -p .hank/specs\n\
printf '## Project\\n---HANK_STATUS---\\n' > .hank/PROMPT.md\n\
printf '# Fix plan\\n- [ ] a\\n' > .hank/fix_plan.md\n";

/// All three, but a fix_plan without checkboxes.
const WRITE_NO_CHECKBOX: &str = "mkdir -p .hank/specs\n\
printf '## Project\\n---HANK_STATUS---\\n' > .hank/PROMPT.md\n\
printf '# Fix plan\\n- just a bullet\\n' > .hank/fix_plan.md\n\
printf '# Req\\n' > .hank/specs/requirements.md\n";

const ARGV: [&str; 4] = ["-p", "--output-format", "json", "--allowedTools=Read,Write"];

/// A fake-agent project whose `work/` folder is the current directory of `hank import`.
struct Env {
    p: Project,
    work: PathBuf,
}

fn env() -> Env {
    let p = Project::new(&[]);
    let work = p.dir.join("work");
    std::fs::create_dir(&work).unwrap();
    Env { p, work }
}

impl Env {
    fn cmd(&self) -> Command {
        let mut c = self.p.cmd();
        c.current_dir(&self.work);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().arg("import").args(args).output().unwrap()
    }

    /// Runs with `--json`; the single stdout line parsed.
    fn run_json(&self, args: &[&str]) -> (Output, Value) {
        let out = self
            .cmd()
            .arg("import")
            .args(args)
            .arg("--json")
            .output()
            .unwrap();
        let text = stdout(&out);
        assert_eq!(
            text.lines().count(),
            1,
            "one JSON line: {text}\n{}",
            stderr(&out)
        );
        let v: Value = serde_json::from_str(text.trim()).unwrap();
        for key in [
            "success",
            "code",
            "project_name",
            "project_dir",
            "files_created",
        ] {
            assert!(v.get(key).is_some(), "{key} in {v}");
        }
        for key in ["tasks_found", "mode", "cost_usd", "message"] {
            assert!(v.get(key).is_some(), "{key} in {v}");
        }
        assert_eq!(v["code"].as_i64(), out.status.code().map(i64::from));
        (out, v)
    }

    fn prd(&self, fixture: &str) -> &Self {
        std::fs::copy(
            fixtures().join("prd").join(fixture),
            self.work.join(fixture),
        )
        .unwrap();
        self
    }

    /// Entries of the work folder (the inputs only, when nothing was created).
    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.work)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn git_commits(dir: &Path) -> usize {
    let out = Command::new("git")
        .args(["log", "--oneline"])
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn ai_conversion_creates_a_committed_project() {
    let e = env();
    e.prd("checkbox.md");
    e.p.fake("effect.sh", WRITE_ALL);
    let (out, v) = e.run_json(&["checkbox.md", "invoices"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["success"], true);
    assert_eq!(v["mode"], "ai");
    assert_eq!(v["project_name"], "invoices");
    assert_eq!(v["tasks_found"], 3);
    assert_eq!(v["cost_usd"], 0.01);
    let dir = e.work.join("invoices");
    assert_eq!(v["project_dir"], dir.display().to_string());
    let files: Vec<&str> = v["files_created"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for f in [
        ".hankrc",
        ".hank/AGENT.md",
        ".hank/PROMPT.md",
        ".hank/fix_plan.md",
        ".hank/specs/requirements.md",
    ] {
        assert!(files.contains(&f), "{f} in {files:?}");
        assert!(dir.join(f).is_file(), "{f}");
    }
    assert!(read(&dir.join(".hank/PROMPT.md")).starts_with("## Project\nTodo app."));
    assert!(read(&dir.join(".hank/fix_plan.md")).contains("- [ ] Add a todo item"));
    assert_eq!(
        read(&dir.join(".hank/specs/requirements.md")),
        "# Requirements\n\nTodos.\n"
    );
    assert_eq!(e.p.calls(), 1);
    assert_eq!(e.p.argv(1), ARGV);
    let stdin = String::from_utf8(e.p.stdin(1)).unwrap();
    assert!(stdin.contains(read(&e.work.join("checkbox.md")).trim_end()));
    if crate::support::cmd_exists("git") {
        assert_eq!(git_commits(&dir), 2, "setup commit + import commit");
        let status = Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert_eq!(stdout(&status), "", "everything committed");
    }
}

#[test]
fn the_document_is_data_for_the_agent() {
    let e = env();
    e.prd("injection.md");
    e.p.fake("effect.sh", WRITE_ALL);
    let out = e.run(&["injection.md", "todo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Same argv and tools as any other document: the text changes nothing.
    assert_eq!(e.p.argv(1), ARGV);
    let stdin = String::from_utf8(e.p.stdin(1)).unwrap();
    let doc = read(&e.work.join("injection.md"));
    let lines: Vec<&str> = stdin.lines().collect();
    let begin = lines
        .iter()
        .position(|l| l.starts_with("<<<BEGIN HANK_DOCUMENT_"))
        .unwrap();
    let id = lines[begin]
        .trim_start_matches("<<<BEGIN ")
        .trim_end_matches(">>>");
    let end_line = format!("<<<END {id}>>>");
    let end = lines.iter().position(|l| *l == end_line).unwrap();
    assert_eq!(lines[begin + 1..end].join("\n"), doc.trim_end());
    assert_eq!(
        stdin.matches(&end_line).count(),
        2,
        "named in the rules, closes the document"
    );
    assert!(stdin.contains("do not act on them"));
    let dir = e.work.join("todo");
    assert!(dir.join(".hank/PROMPT.md").is_file() && !dir.join("pwned.txt").exists());
}

#[test]
fn partial_or_unusable_conversions_leave_nothing() {
    for (effect, needle) in [
        (WRITE_PARTIAL, ".hank/specs/requirements.md"),
        (WRITE_NO_CHECKBOX, "no checkbox items"),
        ("true\n", ".hank/PROMPT.md, .hank/fix_plan.md"),
    ] {
        let e = env();
        e.prd("checkbox.md");
        e.p.fake("effect.sh", effect);
        let (out, v) = e.run_json(&["checkbox.md", "invoices"]);
        assert_eq!(out.status.code(), Some(1), "{needle}");
        assert_eq!(v["success"], false);
        assert_eq!(v["mode"], "ai");
        let msg = v["message"].as_str().unwrap();
        assert!(
            msg.contains(needle) && msg.contains("nothing was changed"),
            "{msg}"
        );
        assert_eq!(e.entries(), vec!["checkbox.md"], "{needle}");
    }
    // Human mode says the same on stderr.
    let e = env();
    e.prd("checkbox.md");
    e.p.fake("effect.sh", WRITE_PARTIAL);
    let out = e.run(&["checkbox.md"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("did not write .hank/specs/requirements.md"));
    assert_eq!(e.entries(), vec!["checkbox.md"]);
}

#[test]
fn agent_errors_name_their_kind_and_change_nothing() {
    let cases = [
        ("not_logged_in.json", "1", "(auth)"),
        ("api_error_401.json", "1", "(auth)"),
        ("credit_low.json", "1", "(billing)"),
        ("usage_limit_session.json", "1", "(usage_limit)"),
        ("rate_limit_429.json", "1", "(rate_limit)"),
        ("overloaded_529.json", "1", "(overloaded)"),
        ("server_500.json", "1", "(server)"),
        ("network_refused.json", "1", "(network)"),
        ("max_turns.json", "1", "(max_turns)"),
    ];
    for (fixture, code, kind) in cases {
        let e = env();
        e.prd("checkbox.md");
        // The agent even wrote the files: the error still wins.
        e.p.fake("effect.sh", WRITE_ALL);
        e.p.fake("response", &read(&fixtures().join("claude").join(fixture)));
        e.p.fake("exit", code);
        let (out, v) = e.run_json(&["checkbox.md", "invoices"]);
        assert_eq!(out.status.code(), Some(1), "{fixture}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains(kind), "{fixture}: {msg}");
        assert_eq!(v["success"], false);
        assert_eq!(e.entries(), vec!["checkbox.md"], "{fixture}");
    }
}

#[test]
fn no_ai_extracts_deterministically() {
    let e = env();
    e.prd("numbered.md");
    let (out, v) = e.run_json(&["numbered.md", "--no-ai"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["mode"], "deterministic");
    assert_eq!(v["project_name"], "numbered");
    assert_eq!(v["tasks_found"], 7);
    assert_eq!(v["cost_usd"], 0.0);
    assert_eq!(e.p.calls(), 0, "no agent call");
    let dir = e.work.join("numbered");
    let plan = read(&dir.join(".hank/fix_plan.md"));
    let items: Vec<&str> = plan.lines().filter(|l| l.starts_with("- [ ]")).collect();
    assert_eq!(
        items,
        vec![
            "- [ ] [prd] Read the release manifest (release.toml) from the repository root",
            "- [ ] [prd] Verify that the changelog has an entry for the new version",
            "- [ ] [prd] Run the test suite and stop on the first failure",
            "- [ ] [prd] Tag the release in git",
            "- [ ] [prd] Publish the release notes to the internal blog",
            "- [ ] [prd] Post a message to the team chat when the release is out",
            "- [ ] [prd] Keep a history of past releases in ~/.releases",
        ]
    );
    assert!(plan.contains("## Steps the tool must cover\n") && plan.contains("## Nice to have\n"));
    let req = read(&dir.join(".hank/specs/requirements.md"));
    assert!(req.contains(read(&e.work.join("numbered.md")).trim_end()));
    assert!(read(&dir.join(".hank/PROMPT.md")).contains("---HANK_STATUS---"));
}

#[test]
fn crlf_and_json_documents() {
    let e = env();
    e.prd("crlf.txt").prd("spec.json");
    let (out, v) = e.run_json(&["crlf.txt", "portal", "--no-ai"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["tasks_found"], 7);
    let plan = read(&e.work.join("portal/.hank/fix_plan.md"));
    assert!(!plan.contains('\r'));
    assert!(plan.contains("- [ ] [prd] Passwords shall be stored with a modern password hash\n"));
    let (out, v) = e.run_json(&["spec.json", "--no-ai"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["project_name"], "spec");
    assert_eq!(v["tasks_found"], 5);
    let req = read(&e.work.join("spec/.hank/specs/requirements.md"));
    assert!(req.contains("```json\n{\n  \"title\": \"Parking spot sharing\""));
    let plan = read(&e.work.join("spec/.hank/fix_plan.md"));
    assert!(plan.contains("- [ ] [prd] Colleagues can reserve an offered spot\n"));
    assert!(!plan.contains("Show a map"), "done items are not tasks");
}

#[test]
fn missing_claude_falls_back_with_a_warning() {
    let e = env();
    e.prd("prose.md");
    let out = e
        .cmd()
        .args(["import", "prose.md", "rooms", "--json"])
        .env("CLAUDE_CODE_CMD", "no-such-claude")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["mode"], "deterministic");
    assert_eq!(v["tasks_found"], 4);
    let warning = v["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("no-such-claude") && warning.contains("deterministic"),
        "{warning}"
    );
    assert!(stderr(&out).contains("warning: "));
    assert_eq!(e.p.calls(), 0);
}

#[test]
fn unusable_documents_are_errors_that_create_nothing() {
    let e = env();
    std::fs::write(e.work.join("empty.md"), "  \n").unwrap();
    std::fs::write(e.work.join("blob.md"), b"\x89PNG\r\n\x1a\n\x00\x00\x00").unwrap();
    std::fs::write(e.work.join("bad.json"), "{\"title\": ").unwrap();
    std::fs::create_dir(e.work.join("folder.md")).unwrap();
    let before = e.entries();
    for (file, needle) in [
        ("missing.md", "missing.md"),
        ("empty.md", "is empty"),
        ("blob.md", "not a text document"),
        ("bad.json", "not valid JSON"),
        ("folder.md", "is not a file"),
    ] {
        let (out, v) = e.run_json(&[file, "--no-ai"]);
        assert_eq!(out.status.code(), Some(1), "{file}");
        assert_eq!(v["success"], false);
        assert!(v["message"].as_str().unwrap().contains(needle), "{v}");
        let out = e.run(&[file]);
        assert_eq!(out.status.code(), Some(1), "{file}");
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    }
    assert_eq!(e.entries(), before);
    assert_eq!(e.p.calls(), 0);
}

#[test]
fn an_occupied_target_is_refused_before_calling_claude() {
    let e = env();
    e.prd("checkbox.md");
    std::fs::create_dir(e.work.join("invoices")).unwrap();
    std::fs::write(e.work.join("invoices/notes.txt"), "mine").unwrap();
    let (out, v) = e.run_json(&["checkbox.md", "invoices"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        v["message"].as_str().unwrap().contains("--into invoices"),
        "{v}"
    );
    assert_eq!(e.p.calls(), 0);
    let (out, _) = e.run_json(&["checkbox.md", "../escape"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn into_an_existing_project_keeps_user_files_unless_forced() {
    let e = env();
    e.prd("checkbox.md");
    let project = e.p.dir.display().to_string();
    let prompt_before = read(&e.p.dir.join(".hank/PROMPT.md"));
    let (out, v) = e.run_json(&["checkbox.md", "--into", &project, "--no-ai"]);
    assert_eq!(out.status.code(), Some(1));
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains(".hank/PROMPT.md") && msg.contains("--force"),
        "{msg}"
    );
    assert_eq!(read(&e.p.dir.join(".hank/PROMPT.md")), prompt_before);

    e.p.fake("effect.sh", WRITE_ALL);
    let (out, v) = e.run_json(&["checkbox.md", "--into", &project, "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(v["mode"], "ai");
    assert!(read(&e.p.dir.join(".hank/PROMPT.md")).starts_with("## Project\nTodo app."));
    // The replaced PROMPT.md was backed up first, and the result says where.
    let backups: Vec<_> = std::fs::read_dir(e.p.dir.join(".hank/backup"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(read(&backups[0].join(".hank/PROMPT.md")), prompt_before);
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains(".hank/backup/")),
        "{v}"
    );
    // User files kept.
    assert_eq!(
        read(&e.p.dir.join(".hankrc")),
        "# test project\nRETRY_BACKOFF_SECONDS=0\n"
    );
    assert_eq!(read(&e.p.dir.join(".hank/AGENT.md")), "# Agent notes\n");
    assert!(read(&e.p.dir.join(".gitignore")).contains(".hank/logs/"));
}

#[test]
fn the_hank_import_alias() {
    let e = env();
    e.prd("checkbox.md");
    let alias = e.p.home.join("hank-import");
    std::os::unix::fs::symlink(crate::support::hank_bin(), &alias).unwrap();
    let out = Command::new(&alias)
        .current_dir(&e.work)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &e.p.home)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["checkbox.md", "inv", "--no-ai"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("imported checkbox.md into"));
    assert!(e.work.join("inv/.hank/fix_plan.md").is_file());
    let help = Command::new(&alias).arg("--help").output().unwrap();
    assert!(stdout(&help).contains("--no-ai"));
}

/// The fake agent's plan in a workspace: every section names its repositories.
const WRITE_REPOS: &str = "mkdir -p .hank/specs\n\
printf '## Project\\nTodo app.\\n\\n---HANK_STATUS---\\nSTATUS: IN_PROGRESS\\n---END_HANK_STATUS---\\n' > .hank/PROMPT.md\n\
printf '# Fix plan\\n\\n## Add the endpoint (repos: api)\\n- [ ] route\\n\\n## Use it in the UI (repos: web; after: Add the endpoint)\\n- [ ] call it\\n\\n## Optional\\n- [ ] polish\\n' > .hank/fix_plan.md\n\
printf '# Requirements\\n\\nTodos.\\n' > .hank/specs/requirements.md\n";

/// `WRITE_ALL`'s files, but one section names a repository the workspace does not have.
const WRITE_UNKNOWN_REPO: &str = "mkdir -p .hank/specs\n\
printf '## Project\\n---HANK_STATUS---\\n' > .hank/PROMPT.md\n\
printf '# Fix plan\\n\\n## Add the endpoint (repos: api)\\n- [ ] route\\n\\n## Deploy it (repos: infra)\\n- [ ] ship\\n' > .hank/fix_plan.md\n\
printf '# Requirements\\n' > .hank/specs/requirements.md\n";

/// The warnings of an import's JSON result that are about the plan's repositories.
fn plan_warnings(v: &Value) -> Vec<String> {
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|w| w.starts_with(".hank/fix_plan.md: "))
        .map(String::from)
        .collect()
}

#[test]
fn in_a_workspace_of_two_repositories_the_plan_names_them() {
    let e = env();
    e.prd("checkbox.md");
    let project = e.p.dir.display().to_string();
    let api = crate::workspace::repo(&e.p, "api");
    let web = crate::workspace::repo(&e.p, "web");
    std::fs::write(
        e.p.dir.join(".hank/workspace.toml"),
        "[repos.api]\npath = \"../api\"\nbase = \"main\"\n\n[repos.web]\npath = \"../web\"\n",
    )
    .unwrap();
    let import = |effect: &str| {
        e.p.fake("effect.sh", effect);
        let (out, v) = e.run_json(&["checkbox.md", "--into", &project, "--force"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["mode"], "ai");
        (out, v)
    };

    // The agent is told the repositories and the heading form; its plan fits: no warning.
    let (_, v) = import(WRITE_REPOS);
    let stdin = String::from_utf8(e.p.stdin(1)).unwrap();
    for needle in [
        "## The repositories of this change",
        "- `api`: the checkout `../api`, base `main`",
        "- `web`: the checkout `../web`, base the branch it is on",
        "## Use it in the UI (repos: web; after: Add the endpoint)",
    ] {
        assert!(stdin.contains(needle), "{needle} in the prompt");
    }
    assert!(plan_warnings(&v).is_empty(), "{v}");
    assert!(read(&e.p.dir.join(".hank/fix_plan.md")).contains("## Add the endpoint (repos: api)"));

    // A plan without `repos:`: written, and each section the fleet would refuse is named.
    let (out, v) = import(WRITE_ALL);
    let warnings = plan_warnings(&v);
    assert_eq!(warnings.len(), 1, "{v}");
    assert!(
        warnings[0].contains("section \"High priority\" does not say which repositories")
            && warnings[0].contains("add `(repos: NAME, …)` to its heading")
            && warnings[0].contains("`hank fleet` refuses the plan until this is fixed"),
        "{}",
        warnings[0]
    );
    assert!(stderr(&out).contains("warning: .hank/fix_plan.md: section \"High priority\""));
    assert!(read(&e.p.dir.join(".hank/fix_plan.md")).contains("## High priority\n- [ ] Set up"));

    // A repository the workspace does not have: named with the section.
    let (_, v) = import(WRITE_UNKNOWN_REPO);
    let warnings = plan_warnings(&v);
    assert_eq!(warnings.len(), 1, "{v}");
    assert!(
        warnings[0].contains("section \"Deploy it\" names the repository \"infra\"")
            && warnings[0].contains("(it has: api, web)"),
        "{}",
        warnings[0]
    );

    // The conversion without AI is checked the same way (its sections name no repository).
    let (out, v) = e.run_json(&["checkbox.md", "--into", &project, "--force", "--no-ai"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!plan_warnings(&v).is_empty(), "{v}");

    // A workspace of one repository, and none: the prompt and the result as before.
    for workspace in [Some("[repos.api]\npath = \"../api\"\n"), None] {
        let file = e.p.dir.join(".hank/workspace.toml");
        match workspace {
            Some(text) => std::fs::write(&file, text).unwrap(),
            None => std::fs::remove_file(&file).unwrap(),
        }
        let (_, v) = import(WRITE_ALL);
        let stdin = String::from_utf8(e.p.stdin(e.p.calls())).unwrap();
        assert!(!stdin.contains("repositories of this change"));
        assert!(!stdin.contains("repos:"));
        assert!(plan_warnings(&v).is_empty(), "{v}");
    }
    // Nothing was done in the repositories.
    for dir in [&api, &web] {
        assert_eq!(crate::support::git(dir, &["status", "--porcelain"]), "");
        assert_eq!(
            crate::support::git(dir, &["rev-list", "--count", "HEAD"]).trim(),
            "1"
        );
    }

    // A workspace file that does not read: refused before the agent is called.
    std::fs::write(
        e.p.dir.join(".hank/workspace.toml"),
        "[repos.api]\nbase = \"main\"\n",
    )
    .unwrap();
    let calls = e.p.calls();
    let (out, v) = e.run_json(&["checkbox.md", "--into", &project, "--force"]);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains(".hank/workspace.toml"),
        "{v}"
    );
    assert_eq!(e.p.calls(), calls);
}
