//! The tasks' event streams, gathered by the supervisor: each task's `.hank/events.jsonl`
//! (in its worktree, written by its `hank run`) is followed as it grows and its new lines are
//! kept in the per-user folder (`fleet-logs/<slug>.events.jsonl`, what `hank report --fleet`
//! reads once the worktree is gone), and with `hank fleet --json` printed on stdout with the
//! task's name added (`"task": NAME`), the same events `hank run --json` prints.
//!
//! The kept copy is the followed file's prefix: after a restart of the fleet, following goes
//! on from the copy's length (nothing is printed or kept twice).

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::Paths;

/// Where each task's stream was read up to.
#[derive(Debug, Default)]
pub struct Tail {
    offsets: BTreeMap<String, u64>,
    json: bool,
}

/// The kept copy of the events of the task `slug`.
#[must_use]
pub fn kept(paths: &Paths, slug: &str) -> PathBuf {
    paths
        .user
        .join("fleet-logs")
        .join(format!("{slug}.events.jsonl"))
}

impl Tail {
    /// `json`: print the new events on stdout too.
    #[must_use]
    pub fn new(json: bool) -> Self {
        Self {
            offsets: BTreeMap::new(),
            json,
        }
    }

    /// Takes the new complete lines of the task's events in the worktree `wt` (best effort:
    /// the fleet's own state is `fleet.json`; a task's events are a view of it).
    pub fn follow(&mut self, paths: &Paths, task: &str, slug: &str, wt: &Path) {
        let source = wt.join(".hank").join("events.jsonl");
        let copy = kept(paths, slug);
        let Ok(meta) = fs::symlink_metadata(&source) else {
            return;
        };
        if !meta.is_file() {
            return;
        }
        let len = meta.len();
        let offset = *self
            .offsets
            .entry(task.to_string())
            .or_insert_with(|| fs::metadata(&copy).map_or(0, |m| m.len()));
        if len <= offset {
            return;
        }
        let Ok(mut f) = fs::File::open(&source) else {
            return;
        };
        let mut bytes = Vec::new();
        if f.seek(SeekFrom::Start(offset)).is_err()
            || f.take(len - offset).read_to_end(&mut bytes).is_err()
        {
            return;
        }
        // Complete lines only; a line being written is taken at the next look.
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
            return;
        };
        let chunk = &bytes[..=end];
        if let Some(p) = copy.parent() {
            let _ = fs::create_dir_all(p);
        }
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&copy)
            .and_then(|mut c| c.write_all(chunk));
        if written.is_err() {
            return;
        }
        self.offsets
            .insert(task.to_string(), offset + chunk.len() as u64);
        if self.json {
            for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                if let Some(text) = with_task(line, task) {
                    outln!("{text}");
                }
            }
        }
    }

    /// Prints a fleet event (`fleet_task`) on stdout under `--json`.
    pub fn fleet_event(&self, line: &str) {
        if self.json {
            outln!("{line}");
        }
    }
}

/// The event line with `"task": NAME` added (`None`: not a JSON object).
#[must_use]
pub fn with_task(line: &[u8], task: &str) -> Option<String> {
    let mut v: serde_json::Value = serde_json::from_slice(line).ok()?;
    v.as_object_mut()?
        .insert("task".into(), serde_json::Value::String(task.to_string()));
    serde_json::to_string(&v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_complete_lines_once_and_keeps_them_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths {
            root: dir.path().join("root"),
            user: dir.path().join("user"),
            repos: Vec::new(),
        };
        let wt = dir.path().join("wt");
        fs::create_dir_all(wt.join(".hank")).unwrap();
        let ev = wt.join(".hank/events.jsonl");
        fs::write(&ev, "{\"event\":\"a\"}\n{\"event\":\"b\"}\n{\"event\":").unwrap();
        let mut t = Tail::new(false);
        t.follow(&paths, "Alpha", "alpha", &wt);
        let copy = kept(&paths, "alpha");
        assert_eq!(
            fs::read_to_string(&copy).unwrap(),
            "{\"event\":\"a\"}\n{\"event\":\"b\"}\n"
        );
        t.follow(&paths, "Alpha", "alpha", &wt);
        fs::write(
            &ev,
            "{\"event\":\"a\"}\n{\"event\":\"b\"}\n{\"event\":\"c\"}\n",
        )
        .unwrap();
        // A new supervisor (a restart) goes on from the copy.
        let mut again = Tail::new(false);
        again.follow(&paths, "Alpha", "alpha", &wt);
        assert_eq!(fs::read_to_string(&copy).unwrap().lines().count(), 3);
        assert_eq!(
            with_task(b"{\"event\":\"c\"}", "Alpha").unwrap(),
            "{\"event\":\"c\",\"task\":\"Alpha\"}"
        );
        assert_eq!(with_task(b"[1]", "Alpha"), None);
    }
}
