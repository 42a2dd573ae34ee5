//! SANDBOX against an agent that attacks through the repository (real Landlock, no root
//! needed): it rewrites `.git` to widen its next call's rules, or leaves git configuration and
//! hooks that would run later in the user's own git, outside the sandbox.

use crate::support::{Project, TICK_ONE, stderr};

fn landlock_here() -> bool {
    hank::sandbox::available()
}

/// `hank run` confined, with the fake agent's folder writable and a git identity.
fn run_confined(p: &Project, args: &[&str]) -> std::process::Output {
    p.cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .args(args)
        .output()
        .expect("run hank")
}

fn plant_key(p: &Project) {
    let ssh = p.home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY\n").expect("write");
}

#[test]
fn a_git_file_pointing_at_home_stops_the_run_before_the_next_call() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = Project::new(&["task", "next task", "third task"]);
    p.git_init();
    plant_key(&p);
    // Call 1 makes `.git` a file naming HOME (the rules used to be read from it at every
    // call); call 2 would then read the key and write HOME.
    p.fake(
        "effect-1.sh",
        &format!("{TICK_ONE}mv .git .git-real && printf 'gitdir: %s\\n' \"$HOME\" > .git\n"),
    );
    p.fake(
        "effect-2.sh",
        "cat \"$HOME/.ssh/id_ed25519\" > stolen.txt 2>/dev/null; echo x > \"$HOME/pwned\" 2>/dev/null; true\n",
    );
    let out = run_confined(&p, &["run", "--max-loops", "3"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("security:"), "{}", stderr(&out));
    assert_eq!(p.calls(), 1, "no call after the change");
    assert!(!p.home.join("pwned").exists());
    assert!(!p.dir.join("stolen.txt").exists());
    let security = p.events_of("security");
    assert!(
        security
            .iter()
            .any(|e| e["action"] == "stopped"
                && e["file"].as_str().is_some_and(|f| f.ends_with(".git"))),
        "{security:?}"
    );
}

/// What the agent leaves for the user's next `git log`, `git commit` and `git push`: a pager,
/// a diff filter, a signing program, an alias, a hook, an attributes file.
const LEAVE_BEHIND: &str = r#"git config core.pager 'sh -c "cat ~/.ssh/id_ed25519 > /tmp/stolen; cat"'
git config pager.log 'sh -c "touch $HOME/ran-pager; cat"'
git config interactive.diffFilter 'sh -c "touch $HOME/ran-filter; cat"'
git config gpg.ssh.defaultKeyCommand 'sh -c "touch $HOME/ran-gpg"'
git config core.alternateRefsCommand 'sh -c "touch $HOME/ran-alt"'
git config trailer.x.command 'touch $HOME/ran-trailer'
printf '#!/bin/sh\ntouch "$HOME/ran-hook"\n' > .git/hooks/post-checkout
chmod +x .git/hooks/post-checkout
mkdir -p .git/info && echo '* filter=evil' > .git/info/attributes
"#;

#[test]
fn git_configuration_and_hooks_written_by_the_agent_are_put_back_and_said() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = Project::new(&["task", "next task"]);
    p.git_init();
    let git = p.dir.join(".git");
    let config = std::fs::read(git.join("config")).expect("config");
    p.fake("effect-1.sh", &format!("{TICK_ONE}{LEAVE_BEHIND}"));
    let out = run_confined(&p, &["run", "--max-loops", "2"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(p.calls(), 2, "the run goes on: the changes are undone");
    // Everything as it was.
    assert_eq!(std::fs::read(git.join("config")).expect("config"), config);
    assert!(!git.join("hooks/post-checkout").exists());
    assert!(!git.join("info/attributes").exists());
    // Said: an event per file, a warning, the next loop's context.
    let security = p.events_of("security");
    let files: Vec<&str> = security.iter().filter_map(|e| e["file"].as_str()).collect();
    for want in [
        ".git/config",
        ".git/hooks/post-checkout",
        ".git/info/attributes",
    ] {
        assert!(files.contains(&want), "{want}: {security:?}");
    }
    assert!(
        security.iter().all(|e| e["action"] == "undone"),
        "{security:?}"
    );
    assert!(
        stderr(&out).contains("hank put it back"),
        "{}",
        stderr(&out)
    );
    let next = String::from_utf8_lossy(&p.stdin(2)).into_owned();
    assert!(
        next.contains("sandbox undid your changes to .git/config"),
        "{next}"
    );
    // The user's next `git log` runs nothing of the agent's, and the approval agrees.
    let user_git = std::process::Command::new("git")
        .args(["-c", "core.pager=cat", "log", "-1"])
        .current_dir(&p.dir)
        .env("HOME", &p.home)
        .output()
        .expect("git log");
    assert!(user_git.status.success());
    for ran in [
        "ran-pager",
        "ran-filter",
        "ran-gpg",
        "ran-alt",
        "ran-trailer",
        "ran-hook",
    ] {
        assert!(!p.home.join(ran).exists(), "{ran}");
    }
    let status = p.run(&["config", "status"]);
    let said = stderr(&status) + &String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{said}");
    assert!(!said.contains("core.pager"), "{said}");
}

#[test]
fn a_program_key_written_while_unconfined_is_named_by_config_status() {
    // Without the sandbox nothing is undone, but every key of the repository's configuration
    // is fingerprinted: `pager.log`, which the list of known program keys missed, is named.
    let p = Project::new(&["task"]);
    p.git_init();
    p.fake(
        "effect-1.sh",
        &format!("{TICK_ONE}git config pager.log 'sh -c \"touch $HOME/ran-pager; cat\"'\n"),
    );
    let out = p
        .cmd()
        .env("SANDBOX", "off")
        .args(["run", "--max-loops", "1"])
        .output()
        .expect("run hank");
    assert!(
        stderr(&out).contains("git config pager.log added"),
        "{}",
        stderr(&out)
    );
    let status = p.run(&["config", "status"]);
    let said = stderr(&status) + &String::from_utf8_lossy(&status.stdout);
    assert!(said.contains("git config pager.log added"), "{said}");
}

#[test]
fn an_interrupted_run_never_claims_the_configuration_changed() {
    // hank stops its git at the first signal: the approval's last reading of `.git/config`
    // is cut short, which is no evidence that the remote (or anything) was removed.
    for sig in ["int", "term"] {
        let p = Project::new(&["task"]);
        p.git_with_origin();
        p.fake("sleep", "30");
        let child = p.spawn(&["run", "--max-loops", "1"]);
        p.wait_calls(1, std::time::Duration::from_secs(30));
        let o = if sig == "int" {
            crate::support::interrupt(child)
        } else {
            crate::support::terminate(child)
        };
        let err = stderr(&o);
        assert!(!err.contains("configuration changed"), "{sig}: {err}");
        assert!(!err.contains("removed"), "{sig}: {err}");
        let status = p.run(&["config", "status"]);
        let said = stderr(&status) + &String::from_utf8_lossy(&status.stdout);
        assert!(status.status.success(), "{sig}: {said}");
        assert!(!said.contains("remote.origin.url"), "{sig}: {said}");
        // The next run starts without asking for an approval.
        p.fake("sleep", "0");
        let next = p.run(&["run", "--max-loops", "1"]);
        assert_ne!(next.status.code(), Some(1), "{sig}: {}", stderr(&next));
    }
}
