//! Hank's own git runs no filter the agent configures, now that the filter listing is kept
//! between git calls (issue 24, per-loop cost): each test is the attack, planted where the
//! kept listing could miss it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{Project, TICK_ONE, stderr, wait_with_timeout};

/// A generous bound for runs that must end by themselves (a hang would take forever).
pub(crate) const ENDS_WITHIN: Duration = Duration::from_secs(90);

/// A filter script that leaves a marker when it runs, runs the shell lines `then`, and passes
/// the content through; (the marker, the script).
pub(crate) fn filter_script(p: &Project, then: &str) -> (PathBuf, PathBuf) {
    let marker = p.fake.join("filter-ran");
    let script = p.fake.join("filter.sh");
    let body = format!("touch '{}'\n{then}cat\n", marker.display());
    std::fs::write(&script, body).unwrap();
    (marker, script)
}

/// Appends `text` to the file at `path`.
pub(crate) fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// A project with `items` whose tracked `notes.txt` has the attribute `attribute` (e.g.
/// `filter=x`) from `.gitattributes`.
pub(crate) fn with_filtered_notes(items: &[&str], attribute: &str) -> Project {
    let p = Project::new(items);
    std::fs::write(p.dir.join("notes.txt"), "tracked\n").unwrap();
    std::fs::write(p.dir.join(".gitattributes"), format!("*.txt {attribute}\n")).unwrap();
    p.git_init();
    p
}

/// A git configuration section `[SECTION]` (e.g. `filter "x"`) that makes `script` the
/// required clean and smudge filter.
pub(crate) fn filter_driver(section: &str, script: &Path) -> String {
    format!(
        "[{section}]\n\tclean = sh '{s}'\n\tsmudge = sh '{s}'\n\trequired = true\n",
        s = script.display()
    )
}

/// Runs `hank --max-loops N` to its end with `effect` as the agent's effect, and returns its
/// stderr; the agent was called N times.
fn run(p: &Project, effect: &str, loops: u32) -> String {
    p.fake("effect.sh", effect);
    let out = wait_with_timeout(p.spawn(&["--max-loops", &loops.to_string()]), ENDS_WITHIN);
    let err = stderr(&out);
    assert_eq!(p.calls(), loops, "{err}");
    err
}

/// Every call so far changed at least one file (progress was measured).
pub(crate) fn every_loop_counted(p: &Project) {
    let events = p.events();
    let finished: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "agent_finished")
        .collect();
    assert!(!finished.is_empty(), "{events:?}");
    assert!(
        finished
            .iter()
            .all(|e| e["files_changed"].as_u64() >= Some(1)),
        "{events:?}"
    );
}

/// The include target named by `.git/config` does not exist when hank starts (the listing
/// is kept with it absent); the agent creates it with a filter driver for the project's
/// files, then rewrites it in place keeping its size and mtime (only the ctime tells). The
/// filter never runs.
#[test]
fn an_include_written_mid_run_adds_no_filter_that_runs() {
    let p = with_filtered_notes(&["a", "b", "c", "d", "e"], "filter=x");
    let (marker, script) = filter_script(&p, "");
    append(
        &p.dir.join(".git/config"),
        "[include]\n\tpath = extra.cfg\n",
    );
    // Older than the racy window: hank keeps its first listing.
    std::thread::sleep(Duration::from_millis(2100));
    // Call 2 writes the include with the driver under another section name (`filtex`); call 3
    // outlasts the racy window (so hank keeps the listing with that file); call 4 turns it
    // into `filter` in place (same inode, same size, mtime restored). Every call touches the
    // filtered file.
    std::fs::write(
        p.fake.join("evil.cfg"),
        filter_driver("filtex \"x\"", &script),
    )
    .unwrap();
    let effect = format!(
        "sleep 1.1; touch notes.txt\n\
         n=$(cat \"$FAKE_CLAUDE_DIR/calls\")\n\
         if [ \"$n\" = 2 ]; then cp \"$FAKE_CLAUDE_DIR/evil.cfg\" .git/extra.cfg; fi\n\
         if [ \"$n\" = 3 ]; then sleep 1.5; fi\n\
         if [ \"$n\" = 4 ]; then touch -r .git/extra.cfg \"$FAKE_CLAUDE_DIR/ref\"; \
         printf '[filter' 1<> .git/extra.cfg; touch -r \"$FAKE_CLAUDE_DIR/ref\" .git/extra.cfg; fi\n\
         {TICK_ONE}"
    );
    let err = run(&p, &effect, 5);
    let text = std::fs::read_to_string(p.dir.join(".git/extra.cfg")).unwrap();
    assert!(
        text.starts_with("[filter \"x\"]"),
        "the attack was not set up: {text}\n{err}"
    );
    assert!(
        !marker.exists(),
        "the included filter ran as hank's child\n{err}"
    );
    every_loop_counted(&p);
}

/// Attributes from `.git/info/attributes` and from a `core.attributesFile` set in
/// `.git/config`, the driver from an `includeIf` that is off on the current branch and on
/// after the agent switches to it: nothing runs.
#[test]
fn filters_from_info_attributes_and_a_conditional_include_never_run() {
    let p = Project::new(&["a", "b", "c"]);
    std::fs::write(p.dir.join("notes.txt"), "tracked\n").unwrap();
    std::fs::write(p.dir.join("data.md"), "tracked\n").unwrap();
    p.git_init();
    let (marker, script) = filter_script(&p, "");
    crate::support::write_new(&p.dir.join(".git/info/attributes"), "*.txt filter=x\n");
    let attrs = p.fake.join("attributes");
    std::fs::write(&attrs, "*.md filter=x\n").unwrap();
    std::fs::write(
        p.dir.join(".git/on-work.cfg"),
        filter_driver("filter \"x\"", &script),
    )
    .unwrap();
    append(
        &p.dir.join(".git/config"),
        &format!(
            "[core]\n\tattributesFile = {}\n[includeIf \"onbranch:work\"]\n\tpath = on-work.cfg\n",
            attrs.display()
        ),
    );
    std::thread::sleep(Duration::from_millis(2100));
    // The agent's own switch runs no git command that reads the work tree (`checkout` would
    // refresh the index and run the filter itself, as the agent's child).
    let effect = format!(
        "sleep 1.1; touch notes.txt data.md\n\
         git branch -f work 2>/dev/null; git symbolic-ref HEAD refs/heads/work\n{TICK_ONE}"
    );
    let err = run(&p, &effect, 2);
    let head = std::fs::read_to_string(p.dir.join(".git/HEAD")).unwrap();
    assert!(
        head.contains("refs/heads/work"),
        "the agent did not switch: {head}\n{err}"
    );
    assert!(!marker.exists(), "a filter ran as hank's child\n{err}");
    every_loop_counted(&p);
}

/// A driver named `a=b`: `-c filter.a=b.clean=` would set `filter.a`, leaving the driver on.
/// Hank does not run git with such a configuration (progress comes from the file walk).
#[test]
fn a_filter_named_with_an_equals_sign_never_runs() {
    let p = with_filtered_notes(&["a", "b", "c"], "filter=a=b");
    let (marker, script) = filter_script(&p, "");
    append(
        &p.dir.join(".git/config"),
        &filter_driver("filter \"a=b\"", &script),
    );
    let err = run(&p, &format!("sleep 1.1; touch notes.txt\n{TICK_ONE}"), 2);
    assert!(
        !marker.exists(),
        "the filter `a=b` ran as hank's child\n{err}"
    );
    every_loop_counted(&p);
}
