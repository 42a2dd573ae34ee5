//! setup / enable / enable-ci / migrate end to end
//!
//! Each test runs the built binary in a temp folder with HOME in a temp dir, no global or
//! system git config, and the fake `bd`/`gh` of `fixtures/bin` first on PATH when wanted.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

use crate::support::{Workspace, assert_contains, exits, fixtures};

/// `Env`: the shared temp workspace, with the fake `bd`/`gh` on PATH for `hank` here.
type Env = Workspace;

impl Workspace {
    /// PATH with the fake tools first.
    fn path_with_fakes(&self) -> String {
        format!(
            "{}:{}",
            fixtures().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
    /// PATH with no bd/gh (the real PATH minus nothing: the host has none of them is not
    /// assumed — an empty folder plus git's folder only).
    fn path_without_tools(&self) -> String {
        let mut dirs = vec![self.root.path().join("empty-bin")];
        if let Ok(git) = which_git() {
            dirs.push(git.parent().unwrap().to_path_buf());
        }
        std::env::join_paths(dirs).unwrap().into_string().unwrap()
    }
    fn hank(&self) -> Command {
        let mut cmd = Command::cargo_bin("hank").unwrap();
        cmd.current_dir(self.work())
            .env_remove("GH_TOKEN")
            .env_remove("GITHUB_TOKEN")
            .env("HOME", self.home())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("NO_COLOR", "1")
            .env("PATH", self.path_with_fakes());
        cmd
    }
}

fn which_git() -> Result<PathBuf, ()> {
    let path = std::env::var_os("PATH").ok_or(())?;
    std::env::split_paths(&path)
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .ok_or(())
}

fn json_of(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "exactly one JSON line expected, got {stdout:?}"
    );
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// A workspace holding a small Rust project (clap as a dependency).
fn rust_project() -> Env {
    let env = Workspace::new();
    env.write(
        "Cargo.toml",
        "[package]\nname = \"reports\"\nversion = \"0.1.0\"\n\n[dependencies]\nclap = \"4\"\n",
    );
    env.write("src/main.rs", "fn main() {}\n");
    env
}

#[test]
fn setup_creates_a_committed_project() {
    let env = Workspace::new();
    env.hank().args(["setup", "demo"]).assert().success();
    let dir = env.work().join("demo");
    for f in [
        ".hank/PROMPT.md",
        ".hank/fix_plan.md",
        ".hank/AGENT.md",
        ".hankrc",
        ".gitignore",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    assert!(dir.join(".hank/specs").is_dir() && dir.join(".hank/logs").is_dir());
    let gitignore = std::fs::read_to_string(dir.join(".gitignore")).unwrap();
    assert!(gitignore.contains(".hank/state.json*") && gitignore.contains(".hank/hank.lock"));
    assert!(
        std::fs::read_to_string(dir.join(".hankrc"))
            .unwrap()
            .contains("PROJECT_NAME=\"demo\"")
    );
    if which_git().is_ok() {
        let log = std::process::Command::new("git")
            .args(["log", "--format=%an <%ae>|%s"])
            .current_dir(&dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&log.stdout);
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(log.starts_with("hank <hank@localhost>|"), "{log}");
    }
}

#[test]
fn setup_refuses_bad_names_and_non_empty_folders() {
    let env = Workspace::new();
    env.write("taken/file.txt", "x");
    for name in ["", ".", "..", "a/b", "taken"] {
        env.hank().args(["setup", name]).assert().code(1);
    }
    assert_eq!(env.read("taken/file.txt"), "x");
    assert!(!env.work().join("a").exists());
}

#[test]
fn setup_without_git_warns_and_still_creates() {
    let env = Workspace::new();
    let out = env
        .hank()
        .env("PATH", env.root.path().join("empty-bin"))
        .args(["setup", "nogit"])
        .output()
        .unwrap();
    assert_contains(&exits(&out, 0), "git is not on PATH");
    assert!(env.work().join("nogit/.hank/PROMPT.md").is_file());
    assert!(!env.work().join("nogit/.git").exists());
}

#[test]
fn enable_ci_json_then_already_enabled_changes_nothing() {
    let env = rust_project();
    let out = env.hank().args(["enable-ci", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json_of(&out);
    assert_eq!(v["success"], true);
    assert_eq!(v["project_name"], "reports");
    assert_eq!(v["project_type"], "rust");
    assert_eq!(v["tasks_imported"], 0);
    let files: Vec<&str> = v["files_created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for f in [
        ".hankrc",
        ".hank/PROMPT.md",
        ".hank/fix_plan.md",
        ".hank/AGENT.md",
        ".gitignore",
    ] {
        assert!(files.contains(&f), "{f} in {files:?}");
    }
    let rc = env.read(".hankrc");
    assert!(
        rc.contains("Bash(cargo build *)") && rc.contains("Bash(cargo test *)"),
        "{rc}"
    );
    assert!(rc.contains("Bash(git commit *)") && !rc.contains("Bash(git *)"));

    let before = env.tree();
    let again = env.hank().args(["enable-ci", "--json"]).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    let v = json_of(&again);
    assert_eq!(v["success"], false);
    assert_eq!(v["code"], 2);
    assert!(v["message"].as_str().unwrap().contains("already enabled"));
    assert_eq!(env.tree(), before, "a second run must not change anything");

    // Without --json: exit 2 and a message on stderr, nothing on stdout.
    let plain = env.hank().arg("enable-ci").output().unwrap();
    assert_eq!(plain.status.code(), Some(2));
    assert!(plain.stdout.is_empty());
    assert!(String::from_utf8_lossy(&plain.stderr).contains("already enabled"));

    // --force regenerates.
    env.write(".hank/PROMPT.md", "edited");
    env.hank()
        .args(["enable-ci", "--force", "--quiet"])
        .assert()
        .success();
    assert!(env.read(".hank/PROMPT.md").contains("---HANK_STATUS---"));
}

#[test]
fn enable_ci_imports_github_issues_with_label_and_limit() {
    let env = rust_project();
    let argv = env.root.path().join("gh-argv");
    let out = env
        .hank()
        .env("FAKE_GH_ARGV", &argv)
        .args([
            "enable-ci",
            "--json",
            "--from",
            "github",
            "--label",
            "sprint-1",
            "--limit",
            "10",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["tasks_imported"], 2);
    let plan = env.plan();
    assert_contains(&plan, "- [ ] [#17] Dark mode for the dashboard");
    assert!(plan.contains("- [ ] [#12] Crash on empty search"), "{plan}");
    let argv = std::fs::read_to_string(argv).unwrap();
    assert!(
        argv.contains("--label sprint-1") && argv.contains("--limit 10"),
        "{argv}"
    );
    assert!(argv.contains("--json number,title,labels"), "{argv}");
}

#[test]
fn enable_ci_failing_sources_are_clear_and_write_nothing() {
    struct Case {
        args: &'static [&'static str],
        env: &'static [(&'static str, &'static str)],
        no_tools: bool,
        needle: &'static str,
    }
    let cases = [
        Case {
            args: &["--from", "github"],
            env: &[("FAKE_GH_MODE", "unauth")],
            no_tools: false,
            needle: "gh auth login",
        },
        Case {
            args: &["--from", "github"],
            env: &[("FAKE_GH_MODE", "fail")],
            no_tools: false,
            needle: "502",
        },
        Case {
            args: &["--from", "github"],
            env: &[],
            no_tools: true,
            needle: "not on PATH",
        },
        Case {
            args: &["--from", "beads"],
            env: &[],
            no_tools: true,
            needle: "not on PATH",
        },
        Case {
            args: &["--from", "beads"],
            env: &[("FAKE_BD_MODE", "fail")],
            no_tools: false,
            needle: "bd init",
        },
        Case {
            args: &["--prd", "missing.md"],
            env: &[],
            no_tools: false,
            needle: "missing.md",
        },
        Case {
            args: &["--project-name", "bad\"name"],
            env: &[],
            no_tools: false,
            needle: "double quote",
        },
    ];
    for case in cases {
        let env = rust_project();
        let before = env.tree();
        let mut cmd = env.hank();
        cmd.args(["enable-ci", "--json"]).args(case.args);
        for (k, v) in case.env {
            cmd.env(k, v);
        }
        if case.no_tools {
            cmd.env("PATH", env.path_without_tools());
        }
        let out = cmd.output().unwrap();
        let v = json_of(&out);
        assert_eq!(out.status.code(), Some(1), "{:?}: {v}", case.args);
        assert_eq!(v["success"], false);
        assert_eq!(v["code"], 1);
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains(case.needle), "{:?}: {msg}", case.args);
        assert_eq!(env.tree(), before, "{:?} wrote files", case.args);
    }
}

#[test]
fn enable_ci_imports_beads_json_and_text_and_prd() {
    for (mode, first) in [("ok", "[bd-a3f8]"), ("nojson", "[bd-7]")] {
        let env = rust_project();
        env.write(".beads/issues.jsonl", "");
        let out = env
            .hank()
            .env("FAKE_BD_MODE", mode)
            .args(["enable-ci", "--json", "--from", "beads"])
            .output()
            .unwrap();
        let v = json_of(&out);
        assert_eq!(v["tasks_imported"], 3, "{mode}: {v}");
        let plan = env.plan();
        let first_item = plan.lines().find(|l| l.starts_with("- [ ]")).unwrap();
        assert!(first_item.contains(first), "{mode}: {plan}");
        assert!(!plan.contains("skeleton"), "closed issues are skipped");
    }
    let env = Workspace::new();
    env.write("docs/prd.md", include_str!("../../fixtures/tasks/prd.md"));
    let out = env
        .hank()
        .args(["enable-ci", "--json", "--prd", "docs/prd.md"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["tasks_imported"], 6, "{v}");
    assert_eq!(v["project_type"], "unknown");
    assert_contains(&env.plan(), "- [ ] [prd] Export the report as CSV");
}

#[test]
fn enable_needs_a_terminal_unless_yes() {
    let env = rust_project();
    let out = env.hank().arg("enable").output().unwrap();
    assert_contains(&exits(&out, 1), "enable-ci");
    assert!(!env.work().join(".hank").exists());

    let out = env
        .hank()
        .args(["enable", "--yes", "--from", "none"])
        .output()
        .unwrap();
    exits(&out, 0);
    assert!(out.stdout.is_empty(), "human output goes to stderr");
    assert!(env.work().join(".hank/PROMPT.md").is_file());
    let before = env.tree();
    env.hank().args(["enable", "--yes"]).assert().code(2);
    assert_eq!(env.tree(), before);
}

#[test]
fn enable_refuses_a_flat_layout() {
    let env = Workspace::new();
    env.write("PROMPT.md", "p");
    env.write("fix_plan.md", "- [ ] x");
    let out = env.hank().args(["enable-ci"]).output().unwrap();
    assert_contains(&exits(&out, 1), "hank migrate");
}

#[test]
fn migrate_moves_flat_layout_with_backup() {
    let env = Workspace::new();
    env.write("PROMPT.md", "my prompt");
    env.write("@fix_plan.md", "- [ ] one\n");
    env.write("@AGENT.md", "notes");
    env.write("specs/a.md", "spec");
    let out = env.hank().arg("migrate").output().unwrap();
    exits(&out, 0);
    assert_eq!(env.read(".hank/PROMPT.md"), "my prompt");
    assert_eq!(env.plan(), "- [ ] one\n");
    assert_eq!(env.read(".hank/AGENT.md"), "notes");
    assert_eq!(env.read(".hank/specs/a.md"), "spec");
    assert!(env.work().join(".hankrc").is_file());
    let backups: Vec<String> = std::fs::read_dir(env.work().join(".hank/backup"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(backups.len(), 1);
    assert_eq!(
        env.read(&format!(".hank/backup/{}/PROMPT.md", backups[0])),
        "my prompt"
    );
    assert!(
        env.read(".gitignore").lines().any(|l| l == ".hank/backup/"),
        "the backup folder is git-ignored"
    );

    let again = env.hank().args(["migrate", "--json"]).output().unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert!(
        json_of(&again)["message"]
            .as_str()
            .unwrap()
            .contains("already migrated")
    );

    let empty = Env::new();
    let out = empty.hank().arg("migrate").output().unwrap();
    assert_contains(&exits(&out, 1), "nothing to migrate");
    // DIR argument.
    let other = Env::new();
    other.write("proj/PROMPT.md", "p");
    other.write("proj/fix_plan.md", "f");
    let mut cmd = other.hank();
    cmd.args(["migrate", "proj"]).assert().success();
    assert!(other.work().join("proj/.hank/PROMPT.md").is_file());
}

/// A link `name` to hank in the workspace's root, as a command run in `work` with the
/// workspace's HOME and stdin closed.
fn alias(env: &Env, name: &str) -> std::process::Command {
    let link = env.root.path().join(name);
    std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin("hank"), &link).unwrap();
    let mut cmd = std::process::Command::new(&link);
    cmd.current_dir(env.work())
        .env("HOME", env.home())
        .stdin(std::process::Stdio::null());
    cmd
}

#[test]
fn alias_names_dispatch() {
    let env = rust_project();
    let out = alias(&env, "hank-enable-ci")
        .arg("--json")
        .env("PATH", env.path_with_fakes())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json_of(&out)["success"], true);

    let status = alias(&env, "hank-setup")
        .arg("aliased")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(0));
    assert!(env.work().join("aliased/.hank/PROMPT.md").is_file());
}

/// A private tmux server (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new(tag: &str) -> Self {
        Self {
            socket: format!("hank-test-{tag}-{}", std::process::id()),
        }
    }
    fn run(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "w"])
    }
    fn wait_for(&self, needle: &str) -> String {
        self.wait_for_all(&[needle])
    }

    /// The screen once it shows every one of `needles` (a prompt's header is drawn before its
    /// options: keys sent in between may be lost).
    fn wait_for_all(&self, needles: &[&str]) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if needles.iter().all(|n| screen.contains(n)) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no {needles:?} on screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

fn wait_for_file(path: &Path) -> String {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if let Ok(s) = std::fs::read_to_string(path)
            && s.ends_with('\n')
        {
            return s;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} never appeared", path.display());
}

fn wizard_command(env: &Env, exit_file: &Path) -> String {
    format!(
        "cd '{}' && env HOME='{}' PATH='{}' GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 '{}' enable; echo $? > '{}'; sleep 30",
        env.work().display(),
        env.home().display(),
        env.path_with_fakes(),
        assert_cmd::cargo::cargo_bin("hank").display(),
        exit_file.display()
    )
}

/// Starts `hank enable`'s wizard over the project in `env` in a detached 120×40 session `w`
/// of a private tmux server `tag`; the server and the file that gets the exit code, or `None`
/// (with a note) when tmux is not installed.
fn start_wizard(tag: &str, env: &Env) -> Option<(Tmux, PathBuf)> {
    if crate::support::missing("tmux") {
        return None;
    }
    let exit_file = env.root.path().join("exit");
    let tmux = Tmux::new(tag);
    tmux.run(&[
        "new-session",
        "-d",
        "-x",
        "120",
        "-y",
        "40",
        "-s",
        "w",
        &wizard_command(env, &exit_file),
    ]);
    Some((tmux, exit_file))
}

#[test]
fn wizard_under_tmux() {
    let env = rust_project();
    env.write("docs/requirements.md", "- [ ] Ship the first report\n");
    let Some((tmux, exit_file)) = start_wizard("wizard", &env) else {
        return;
    };
    tmux.wait_for_all(&["Import tasks from", "docs/requirements.md"]);
    tmux.run(&["send-keys", "-t", "w", "Enter"]); // keep the pre-checked PRD source
    tmux.wait_for("Project name");
    tmux.run(&["send-keys", "-t", "w", "Enter"]);
    tmux.wait_for("Agent calls per hour");
    tmux.run(&[
        "send-keys",
        "-t",
        "w",
        "BSpace",
        "BSpace",
        "BSpace",
        "25",
        "Enter",
    ]);
    tmux.wait_for("PRD file");
    tmux.run(&["send-keys", "-t", "w", "Enter"]);
    // The fake claude, codex and gemini are all on PATH: the wizard asks which to use, with
    // claude checked.
    tmux.wait_for_all(&["Agents to use", "codex (installed)"]);
    tmux.run(&["send-keys", "-t", "w", "Down", "Space", "Enter"]);
    assert_eq!(wait_for_file(&exit_file).trim(), "0", "{}", tmux.screen());
    let rc = env.read(".hankrc");
    assert!(rc.contains("\nAGENT=\"claude\"\n"), "{rc}");
    assert!(rc.contains("\nAGENTS=\"claude,codex\"\n"), "{rc}");
    assert!(rc.contains("MAX_CALLS_PER_HOUR=\"25\""), "{rc}");
    assert_contains(&env.plan(), "- [ ] [prd] Ship the first report");
}

#[test]
fn wizard_ctrl_c_exits_130_and_writes_nothing() {
    let env = rust_project();
    let Some((tmux, exit_file)) = start_wizard("ctrlc", &env) else {
        return;
    };
    tmux.wait_for("Import tasks from");
    tmux.run(&["send-keys", "-t", "w", "C-c"]);
    assert_eq!(wait_for_file(&exit_file).trim(), "130", "{}", tmux.screen());
    assert!(!env.work().join(".hank").exists());
}

#[test]
fn enable_ci_writes_the_agents_and_refuses_unknown_ones() {
    let env = rust_project();
    let bad = env
        .hank()
        .args(["enable-ci", "--json", "--agents", "claude,nope"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let v = json_of(&bad);
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("unknown agent `nope`"),
        "{v}"
    );
    assert!(!env.work().join(".hankrc").exists(), "nothing written");
    let out = env
        .hank()
        .args(["enable-ci", "--json", "--agents", "claude,codex"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", json_of(&out));
    let rc = env.read(".hankrc");
    assert!(rc.contains("\nAGENT=\"claude\"\n"), "{rc}");
    assert!(rc.contains("\nAGENTS=\"claude,codex\"\n"), "{rc}");
}

/// `enable-ci --json` reports the files it wrote relative to the project on every call, and
/// the project's real name when it only adds the workflow.
#[test]
fn enable_ci_json_reports_relative_files_and_the_name() {
    let env = Workspace::new();
    std::fs::write(
        env.work().join("Cargo.toml"),
        "[package]\nname = \"shop\"\n",
    )
    .unwrap();
    let args = ["enable-ci", "--json", "--project-name", "shop"];
    let first = json_of(&env.hank().args(args).output().unwrap());
    let files = first["files_created"].as_array().unwrap();
    assert!(!files.is_empty(), "{first}");
    let workflow = [
        "enable-ci",
        "--json",
        "--github-actions",
        "--action",
        "example/hank@v1",
    ];
    let second = json_of(&env.hank().args(workflow).output().unwrap());
    assert_eq!(second["success"], true, "{second}");
    assert_eq!(
        second["files_created"],
        serde_json::json!([".github/workflows/hank.yml"]),
        "{second}"
    );
    assert_eq!(second["project_name"], "shop", "{second}");
    for f in files {
        assert!(!Path::new(f.as_str().unwrap()).is_absolute(), "{first}");
    }
}
