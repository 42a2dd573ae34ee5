//! `hank monitor --live`: the live output of every running task of a fleet, one stream.
//!
//! Each turn reads `.hank/fleet.json` (through [`crate::store::schema::FleetFile`]) for the
//! tasks that run and their worktrees, says which tasks started and ended, and prints the new
//! lines of each running task's `.hank/live.log`, prefixed with the task's name. The rules
//! (which tasks, offsets, framing, prefixes) are in [`super::live`]; this is the thin loop.
//!
//! A worktree's `.hank/` is the agent's to write: `live.log` is opened without following a
//! link and without blocking (`O_NOFOLLOW|O_NONBLOCK`, [`crate::fsread::open_regular`]) and
//! read only when `fstat` says it is a regular file, at most [`live::CHUNK`] bytes a turn from
//! the offset reached, so a link, a FIFO or a device planted there can neither redirect nor
//! hang the follower, and a huge file is never read whole.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::live::{self, Cursor, Notice, Watch};
use crate::error::{HankError, Result};
use crate::exit;
use crate::fsread::{self, Follow};
use crate::store::schema::FleetFile;

/// Time between two turns.
const TURN: Duration = Duration::from_millis(250);

/// A followed task: its worktree and where its `live.log` stands.
struct Followed {
    worktree: PathBuf,
    cursor: Cursor,
}

/// Where the output goes; a closed output (the pipe's reader or the terminal gone) ends the
/// follower.
struct Out<W: Write> {
    w: W,
}

impl<W: Write> Out<W> {
    /// `Ok(false)` once the output is closed.
    fn put(&mut self, text: &str) -> Result<bool> {
        match self
            .w
            .write_all(text.as_bytes())
            .and_then(|()| self.w.flush())
        {
            Ok(()) => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::WriteZero
                ) || e.raw_os_error() == Some(nix::libc::EIO) =>
            {
                Ok(false)
            }
            Err(e) => Err(HankError::io("write", "standard output", e)),
        }
    }
}

/// `hank monitor --live` in the checkout at `root`; `once`: one turn, then exit.
pub(crate) fn run(root: &Path, once: bool) -> Result<u8> {
    let colour = std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut out = Out {
        w: std::io::stdout().lock(),
    };
    let mut f = Follower {
        root: root.to_path_buf(),
        colour,
        watch: Watch::default(),
        followed: BTreeMap::new(),
        said: None,
    };
    if once && crate::fleet::read(root).is_ok_and(|f| f.is_none()) {
        return Err(HankError::usage_hint(
            format!(
                "no fleet has run in {} (no .hank/fleet.json)",
                root.display()
            ),
            "start one with `hank fleet` (or `hank fleet --monitor`)",
        ));
    }
    loop {
        let text = f.turn();
        if !text.is_empty() && !out.put(&text)? {
            return Ok(exit::OK);
        }
        if once {
            return Ok(exit::OK);
        }
        std::thread::sleep(TURN);
    }
}

struct Follower {
    root: PathBuf,
    colour: bool,
    watch: Watch,
    followed: BTreeMap<String, Followed>,
    /// The last problem with `fleet.json` said (said once).
    said: Option<String>,
}

impl Follower {
    /// One turn: what to print.
    fn turn(&mut self) -> String {
        let mut text = String::new();
        let file = match crate::fleet::read(&self.root) {
            Ok(Some(file)) => {
                self.said = None;
                // A fleet killed while running is shown ended (not running).
                file.shown(crate::fleet::control::fleet_running(&self.root))
            }
            Ok(None) => {
                self.say_once(
                    &mut text,
                    "hank: waiting for a fleet to start here (no .hank/fleet.json yet)",
                );
                // A look at an empty fleet: every task that comes is new, shown from its
                // first line.
                self.watch.update(&FleetFile::default());
                return text;
            }
            Err(e) => {
                self.say_once(&mut text, &format!("hank: {e}"));
                return text;
            }
        };
        let new_task_from_start = self.watch.has_looked();
        let notices = self.watch.update(&file);
        for n in notices.iter().filter(|n| !n.after_lines()) {
            text.push_str(&self.notice(n, &file.into));
        }
        let targets = live::targets(&file);
        for t in &targets {
            self.followed
                .entry(t.name.clone())
                .or_insert_with(|| Followed {
                    worktree: t.worktree.clone(),
                    cursor: Cursor::new(new_task_from_start),
                })
                .worktree
                .clone_from(&t.worktree);
        }
        let names: Vec<String> = self.followed.keys().cloned().collect();
        for name in names {
            let colour = self.watch.colour(&name, self.colour);
            let Some(fw) = self.followed.get_mut(&name) else {
                continue;
            };
            let path = fw.worktree.join(".hank").join("live.log");
            for line in read_new(&fw.worktree, &path, &mut fw.cursor) {
                text.push_str(&live::prefixed(&name, colour, &line));
            }
            if !targets.iter().any(|t| t.name == name) {
                if let Some(last) = fw.cursor.gone() {
                    text.push_str(&live::prefixed(&name, colour, &last));
                }
                self.followed.remove(&name);
            }
        }
        for n in notices.iter().filter(|n| n.after_lines()) {
            text.push_str(&self.notice(n, &file.into));
        }
        text
    }

    fn notice(&self, n: &Notice, into: &str) -> String {
        match n.task() {
            Some(task) => live::prefixed(task, self.watch.colour(task, self.colour), &n.text(into)),
            None => format!("{}\n", n.text(into)),
        }
    }

    fn say_once(&mut self, text: &mut String, what: &str) {
        if self.said.as_deref() != Some(what) {
            text.push_str(&crate::sanitize::line(what));
            text.push('\n');
            self.said = Some(what.to_string());
        }
    }
}

/// The new complete lines of the task's `live.log` (and what to say when it cannot be read).
fn read_new(worktree: &Path, path: &Path, cursor: &mut Cursor) -> Vec<String> {
    // The worktree's `.hank` itself must be a folder, not a link out of it.
    match std::fs::symlink_metadata(worktree.join(".hank")) {
        Ok(m) if m.file_type().is_symlink() => {
            return cursor
                .refuse("is under a .hank that is a symbolic link")
                .into_iter()
                .collect();
        }
        Err(_) => return cursor.gone().into_iter().collect(),
        Ok(_) => {}
    }
    let mut file = match fsread::open_regular(path, Follow::No) {
        Ok(f) => f,
        // Not written yet (no call so far), or removed with its worktree.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return cursor.gone().into_iter().collect();
        }
        Err(e) => return cursor.refuse(&e.to_string()).into_iter().collect(),
    };
    match read_plan(&mut file, cursor) {
        Ok(lines) => lines,
        Err(e) => cursor
            .refuse(&format!("cannot be read ({e})"))
            .into_iter()
            .collect(),
    }
}

fn read_plan(file: &mut File, cursor: &mut Cursor) -> std::io::Result<Vec<String>> {
    let meta = file.metadata()?;
    let len = meta.len();
    let mut head = Vec::new();
    Read::by_ref(file)
        .take(live::HEAD.min(len))
        .read_to_end(&mut head)?;
    let plan = cursor.plan((meta.dev(), meta.ino()), len, &head);
    let mut lines: Vec<String> = plan
        .reset
        .map(|r| r.text().to_string())
        .into_iter()
        .collect();
    if plan.len > 0 {
        file.seek(SeekFrom::Start(plan.from))?;
        let mut bytes = Vec::new();
        file.take(plan.len).read_to_end(&mut bytes)?;
        lines.extend(cursor.feed(&bytes));
    }
    Ok(lines)
}
