//! The module map is a layering, and the compiler alone does not keep it: this test reads
//! `src/` and checks that the top-level modules depend on each other without cycles, that
//! clap types (`cli`) reach only `lib.rs` and `commands/`, and that the pure core
//! (`policy/`, `analysis/`) names no clock, file, process or runtime API (clippy's
//! `disallowed_methods` enforces the same at the call level).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The file's code without comment lines and without its `#[cfg(test)] mod tests` tail.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Top-level module → the top-level modules it names through `crate::`.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        let code = code_of(&f);
        let set = deps.entry(module.clone()).or_default();
        let mut rest = code.as_str();
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name == "{" || name.is_empty() {
                // `crate::{a, b}`: every name in the braces.
                if let Some(end) = rest.find('}') {
                    for n in rest[1..end].split([',', ' ', '\n']) {
                        let n = n.split("::").next().unwrap_or("").trim();
                        if !n.is_empty() && n != module {
                            set.insert(n.to_string());
                        }
                    }
                }
            } else if name != module {
                set.insert(name);
            }
        }
    }
    deps
}

fn find_cycle(deps: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        deps: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for d in deps.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, deps, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in deps.keys() {
        if let Some(c) = visit(n, deps, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn module_graph_has_no_cycles() {
    let deps = graph();
    assert!(deps.len() >= 10, "the walk found the modules: {deps:?}");
    if let Some(c) = find_cycle(&deps) {
        panic!("module cycle: {}\n{deps:#?}", c.join(" -> "));
    }
}

#[test]
fn clap_types_stay_in_the_command_layer() {
    let deps = graph();
    let users: Vec<&String> = deps
        .iter()
        .filter(|(_, d)| d.contains("cli"))
        .map(|(m, _)| m)
        .collect();
    assert_eq!(
        users,
        ["commands", "lib"],
        "only lib.rs and commands/ may use cli"
    );
}

/// The command files name no other command's file: what two commands share is in the
/// command layer's helpers (`commands/context.rs`, `commands/view.rs`, `commands/mod.rs`) or in
/// the library's rooms. A reference is `super::NAME`, `commands::NAME` or a name in
/// `super::{…}`, NAME a command file's.
#[test]
fn command_files_name_no_other_command() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands");
    let helpers = ["context", "view", "mod"];
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let stem = |p: &Path| p.file_stem().unwrap().to_string_lossy().to_string();
    let commands: BTreeSet<String> = files
        .iter()
        .map(|f| stem(f))
        .filter(|n| !helpers.contains(&n.as_str()))
        .collect();
    assert!(
        commands.len() >= 10 && commands.contains("run") && commands.contains("deliver"),
        "the walk found the command files: {commands:?}"
    );
    let mut links = Vec::new();
    for f in &files {
        let me = stem(f);
        if !commands.contains(&me) {
            continue;
        }
        let code = code_of(f);
        for prefix in ["super::", "commands::"] {
            let mut rest = code.as_str();
            while let Some(i) = rest.find(prefix) {
                rest = &rest[i + prefix.len()..];
                let names: Vec<String> = if let Some(inner) = rest.strip_prefix('{') {
                    let end = inner.find('}').unwrap_or(inner.len());
                    inner[..end]
                        .split(',')
                        .map(|n| n.trim().split("::").next().unwrap_or("").to_string())
                        .collect()
                } else {
                    vec![
                        rest.chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect(),
                    ]
                };
                for n in names {
                    if n != me && commands.contains(&n) {
                        links.push(format!("{me} -> {n}"));
                    }
                }
            }
        }
    }
    assert!(
        links.is_empty(),
        "a command file names another command's (share through context/view or a library room): {links:?}"
    );
}

/// The clap crate stays in the command layer too: `lib.rs`, `cli.rs` (the parser),
/// `commands/`, and the files that define a command's options once, with their clap
/// attributes, next to the code that runs the command (`project/args.rs` for setup, enable,
/// enable-ci and import; `monitor/args.rs`; `settings/flags.rs`, `hank run`'s settings flags). No other module names clap, so no second, plain
/// copy of those options is needed anywhere (issue 25: they used to be defined twice).
#[test]
fn clap_is_named_only_by_the_command_layer_and_the_option_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed = |rel: &str| {
        rel == "lib.rs"
            || rel == "cli.rs"
            || rel.starts_with("commands/")
            || rel == "project/args.rs"
            || rel == "monitor/args.rs"
            || rel == "settings/flags.rs"
    };
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut users = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let code = code_of(&f);
        if ["clap::", "use clap", "#[arg(", "#[command("]
            .iter()
            .any(|p| code.contains(p))
        {
            users.push(rel.clone());
            assert!(allowed(&rel), "{rel} names clap");
        }
    }
    assert!(users.iter().any(|u| u == "project/args.rs"), "{users:?}");
}

#[test]
fn the_pure_core_names_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let forbidden = [
        "std::fs",
        "std::process",
        "std::net",
        "tokio::",
        "Timestamp::now",
        "Zoned::now",
        "SystemTime",
        "Instant::now",
        "std::env::",
        "TimeZone::system",
    ];
    for dir in ["policy", "analysis"] {
        let mut files = Vec::new();
        rust_files(&src.join(dir), &mut files);
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name.contains("tests") {
                continue; // test files read fixtures
            }
            let code = code_of(&f);
            for bad in forbidden {
                assert!(
                    !code.contains(bad),
                    "{} uses `{bad}`: the pure core takes time, files and facts as arguments",
                    f.display()
                );
            }
        }
    }
}

/// The nextest `slow` group (`.config/nextest.toml`) names exactly the tests of
/// `support::SLOW_TESTS`, each of them is `#[ignore]`d with `support::SLOW_REASON` (a plain
/// `cargo test` reports it as ignored, not passed), no other test uses that reason, and
/// `.ci/run` runs the ignored slow tests by the names in `.config/nextest.toml`.
#[test]
fn the_slow_group_is_the_ignored_slow_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = std::fs::read_to_string(root.join(".config/nextest.toml")).unwrap();
    let named: BTreeSet<&str> = config
        .split("test(=")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect();
    let slow: BTreeSet<&str> = crate::support::SLOW_TESTS.into_iter().collect();
    assert_eq!(
        named, slow,
        ".config/nextest.toml and support::SLOW_TESTS differ"
    );
    let attribute = format!("#[ignore = \"{}\"]", crate::support::SLOW_REASON);
    let mut marked = BTreeSet::new();
    for entry in std::fs::read_dir(root.join("tests/integration")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let file = path.file_stem().unwrap().to_string_lossy().into_owned();
        let code = std::fs::read_to_string(&path).unwrap();
        for (at, _) in code.match_indices(&attribute) {
            let rest = &code[at + attribute.len()..];
            let name = rest
                .split("fn ")
                .nth(1)
                .and_then(|r| r.split('(').next())
                .unwrap();
            marked.insert(format!("{file}::{name}"));
        }
    }
    let slow: BTreeSet<String> = slow.into_iter().map(String::from).collect();
    assert_eq!(
        marked, slow,
        "the tests ignored as slow and support::SLOW_TESTS differ"
    );
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        ci.contains("--ignored --exact $(slow_tests)") && ci.contains(".config/nextest.toml"),
        ".ci/run does not run the ignored slow tests"
    );
}

/// Every child process goes through the process layer (`src/proc/`): nothing else in `src/`
/// — its tests included — names `Command::new`, spawns through `CommandExt`, or builds a
/// tokio runtime of its own (`proc::runtime` is the one builder).
#[test]
fn child_processes_start_only_in_the_process_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let forbidden = [
        "Command::new",
        "process::CommandExt",
        "new_current_thread",
        "new_multi_thread",
    ];
    let mut checked = 0;
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        if rel.starts_with("proc") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for bad in forbidden {
            assert!(
                !text.contains(bad),
                "src/{} names `{bad}`: start child processes (and runtimes) through crate::proc",
                rel.display()
            );
        }
        checked += 1;
    }
    assert!(checked > 50, "only {checked} files read");
    let layer = std::fs::read_to_string(src.join("proc/mod.rs")).unwrap();
    assert!(layer.contains("Command::new"), "the process layer moved?");
}

/// Every git command hank runs goes through the git door (`src/git/`: hooks, filters,
/// fsmonitor, external diff and pager off unless approved; the recorded git directory):
/// nothing else in `src/` — its tests included — starts git or looks it up to run it.
#[test]
fn git_starts_only_in_the_git_door() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let forbidden = [
        "Cmd::new(\"git\")",
        "Command::new(\"git\")",
        "which(\"git\")",
        "Cmd::new(git)",
        "Cmd::new(&git)",
    ];
    let mut checked = 0;
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        if rel.starts_with("git") {
            continue;
        }
        let text: String = std::fs::read_to_string(&f)
            .unwrap()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        for bad in forbidden {
            assert!(
                !text.contains(bad),
                "src/{} names `{bad}`: run git through crate::git (the one door for git)",
                rel.display()
            );
        }
        checked += 1;
    }
    assert!(checked > 50, "only {checked} files read");
    let door = std::fs::read_to_string(src.join("git/mod.rs")).unwrap();
    assert!(door.contains("Cmd::new(\"git\")"), "the git door moved?");
}

/// Git runs through its handles (`crate::git::Checkout`, `TaskWorktree`, `Integration`, each
/// giving a `Git` command with its environment, hooks and timeout): the git door starts git in
/// one file (`src/git/mod.rs`), its only free function that runs git is `version`, it keeps
/// no registry of worktrees looked up by path (a task's record travels with its handle), and
/// nothing in `src/` calls one of the free entry functions the handles replaced.
#[test]
fn git_runs_only_through_its_handles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut door = Vec::new();
    rust_files(&src.join("git"), &mut door);
    assert!(door.len() > 5, "the git door moved?");
    for f in &door {
        let rel = f.strip_prefix(&src).unwrap();
        let text: String = std::fs::read_to_string(f)
            .unwrap()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if rel != Path::new("git/mod.rs") {
            assert!(
                !text.contains("Cmd::new(\"git\")"),
                "src/{} starts git: git starts in src/git/mod.rs only, behind the handles",
                rel.display()
            );
        }
        let code = code_of(f);
        for line in code.lines() {
            let line = line.trim_start();
            assert!(
                !(line.starts_with("static") || line.starts_with("pub static"))
                    || !line.contains("Mutex<")
                    || !(line.contains("TaskWorktree") || line.contains("TaskGit")),
                "src/{}: `{line}`: a registry of worktrees; a task's record travels with its handle",
                rel.display()
            );
        }
    }
    let mod_rs = code_of(&src.join("git/mod.rs"));
    let free: Vec<&str> = mod_rs
        .lines()
        .filter_map(|l| l.strip_prefix("pub fn "))
        .filter_map(|l| l.split('(').next())
        .collect();
    assert_eq!(
        free,
        ["version"],
        "free functions of the git door that run git"
    );
    let replaced = [
        "run_git(",
        "run_git_for(",
        "git_run(",
        "git_run_hooks(",
        "git_run_input(",
        "run_git_answer(",
        "run_git_timed(",
        "pinned_git_dir(",
        "task_git(",
        "PINNED",
        "Repo::task_worktree",
        "Repo::pinned",
    ];
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for f in files {
        let text: String = std::fs::read_to_string(&f)
            .unwrap()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        for old in replaced {
            assert!(
                !text.contains(old),
                "src/{} names `{old}`: git runs through its handles (crate::git::Checkout, \
                 TaskWorktree, Integration)",
                f.strip_prefix(&src).unwrap().display()
            );
        }
    }
}
