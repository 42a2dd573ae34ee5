//! `hank monitor --live`, the pure half: which tasks of `.hank/fleet.json` are followed, what
//! is said when a task starts and ends, the offset bookkeeping of each followed `live.log`
//! (a truncated or replaced file is read again from its start), the line framing and the
//! task prefixes. No clock, no I/O: [`super::follow`] reads the files and prints.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::policy::fleet::TaskState;
use crate::store::schema::{FLEET_NOT_RUNNING, FleetFile};

/// The most bytes read from one `live.log` per turn (the rest waits for the next turn).
pub(crate) const CHUNK: u64 = 64 * 1024;
/// At the first look at a task already running, how much of the end of its `live.log` is
/// shown (a task that starts while the follower watches is shown from its first byte).
pub(crate) const BACKLOG: u64 = 4 * 1024;
/// A line longer than this is shown in pieces of this size.
pub(crate) const MAX_LINE: usize = 4 * 1024;
/// How many first bytes of a file identify its content (a file truncated and written again
/// past the old offset between two turns has another beginning).
pub(crate) const HEAD: u64 = 64;

/// ANSI colours of the task prefixes, given in the order the tasks are first seen.
const PALETTE: [&str; 8] = ["36", "33", "35", "32", "34", "96", "93", "95"];

/// A task whose `live.log` is followed: running, verifying or merging, with a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub name: String,
    pub worktree: PathBuf,
}

/// The tasks to follow in `file`, in its order.
#[must_use]
pub(crate) fn targets(file: &FleetFile) -> Vec<Target> {
    file.tasks
        .iter()
        .filter(|t| t.state().is_active())
        .filter_map(|t| {
            let wt = t.worktree.as_deref().filter(|w| !w.is_empty())?;
            Some(Target {
                name: t.name.clone(),
                worktree: PathBuf::from(wt),
            })
        })
        .collect()
}

/// Something the follower says about a task or the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// At the first look: a task already running.
    Following { task: String, state: TaskState },
    /// A task began to run (or runs again after a wait).
    Started { task: String, branch: String },
    /// A merge conflicted or turned the check red: the task's agent works again.
    BackToAgent { task: String, message: String },
    /// A running task waits (paused, held, interrupted).
    Waiting { task: String, message: String },
    /// Merged, failed or blocked: nothing more happens to the task.
    Ended {
        task: String,
        state: TaskState,
        branch: String,
        message: String,
    },
    /// A fleet began to run here.
    FleetStarted { tasks: usize },
    /// The fleet stopped running (`done`, `failed`, `stopped`, `interrupted`).
    FleetEnded { state: String },
}

impl Notice {
    /// Said after the turn's live lines (a task's last lines come before its end).
    #[must_use]
    pub(crate) fn after_lines(&self) -> bool {
        matches!(self, Self::Ended { .. } | Self::FleetEnded { .. })
    }

    /// The task it is about (none for the fleet's own notices).
    #[must_use]
    pub(crate) fn task(&self) -> Option<&str> {
        match self {
            Self::Following { task, .. }
            | Self::Started { task, .. }
            | Self::BackToAgent { task, .. }
            | Self::Waiting { task, .. }
            | Self::Ended { task, .. } => Some(task),
            Self::FleetStarted { .. } | Self::FleetEnded { .. } => None,
        }
    }

    /// The text after the task's prefix (or the whole line for the fleet's notices).
    #[must_use]
    pub(crate) fn text(&self, into: &str) -> String {
        let why = |m: &str| {
            if m.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", crate::sanitize::line(m))
            }
        };
        match self {
            Self::Following { state, .. } => {
                format!("● {} (following its live output)", state.as_str())
            }
            Self::Started { branch, .. } => format!("▶ started on {branch}"),
            Self::BackToAgent { message, .. } => format!("↺ back to its agent{}", why(message)),
            Self::Waiting { message, .. } => format!("‖ waiting{}", why(message)),
            Self::Ended {
                state: TaskState::Merged,
                ..
            } => format!("■ merged into {into}"),
            Self::Ended {
                state,
                branch,
                message,
                ..
            } => format!(
                "✗ {}{} (its work stays on {branch})",
                state.as_str(),
                why(message)
            ),
            Self::FleetStarted { tasks } => format!("fleet: running, {tasks} task(s)"),
            Self::FleetEnded { state } if state == FLEET_NOT_RUNNING => "fleet: not running — \
                 its supervisor ended without a final state (`hank fleet` resumes it)"
                .to_owned(),
            Self::FleetEnded { state } => {
                format!(
                    "fleet: {} (`hank fleet status` for each task)",
                    crate::sanitize::line(state)
                )
            }
        }
    }
}

/// What the follower knows of the fleet between two reads of `fleet.json`.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    seen: Option<BTreeMap<String, TaskState>>,
    fleet_state: String,
    colours: BTreeMap<String, usize>,
}

impl Watch {
    /// Whether `fleet.json` was read before (a task first seen later is new: its `live.log`
    /// is shown from its start).
    #[must_use]
    pub(crate) fn has_looked(&self) -> bool {
        self.seen.is_some()
    }

    /// What changed since the last read of `file`.
    pub(crate) fn update(&mut self, file: &FleetFile) -> Vec<Notice> {
        let mut out = Vec::new();
        for t in &file.tasks {
            if !self.colours.contains_key(&t.name) {
                let next = self.colours.len();
                self.colours.insert(t.name.clone(), next);
            }
        }
        let Some(seen) = &self.seen else {
            if file.state == "running" {
                out.push(Notice::FleetStarted {
                    tasks: file.tasks.len(),
                });
            }
            if file.state == FLEET_NOT_RUNNING {
                out.push(Notice::FleetEnded {
                    state: file.state.clone(),
                });
            }
            out.extend(
                file.tasks
                    .iter()
                    .filter(|t| t.state().is_active())
                    .map(|t| Notice::Following {
                        task: t.name.clone(),
                        state: t.state(),
                    }),
            );
            self.remember(file);
            return out;
        };
        if file.state == "running" && self.fleet_state != "running" {
            out.push(Notice::FleetStarted {
                tasks: file.tasks.len(),
            });
        }
        for t in &file.tasks {
            let before = seen.get(&t.name).copied();
            if before == Some(t.state()) {
                continue;
            }
            let was_active = before.is_some_and(TaskState::is_active);
            let (task, branch, message) = (t.name.clone(), t.branch.clone(), t.message.clone());
            match t.state() {
                TaskState::Running
                    if matches!(before, Some(TaskState::Merging | TaskState::Verifying)) =>
                {
                    out.push(Notice::BackToAgent { task, message });
                }
                s if s.is_active() && !was_active => out.push(Notice::Started { task, branch }),
                s if s.is_final() => out.push(Notice::Ended {
                    task,
                    state: s,
                    branch,
                    message,
                }),
                TaskState::Waiting | TaskState::Pending if was_active => {
                    out.push(Notice::Waiting { task, message });
                }
                _ => {}
            }
        }
        if self.fleet_state == "running" && file.state != "running" && !file.state.is_empty() {
            out.push(Notice::FleetEnded {
                state: file.state.clone(),
            });
        }
        self.remember(file);
        out
    }

    fn remember(&mut self, file: &FleetFile) {
        self.seen = Some(
            file.tasks
                .iter()
                .map(|t| (t.name.clone(), t.state()))
                .collect(),
        );
        self.fleet_state.clone_from(&file.state);
    }

    /// The task's colour (`None` without colours): one per task, in the order first seen.
    #[must_use]
    pub(crate) fn colour(&self, task: &str, colour: bool) -> Option<&'static str> {
        let i = *self.colours.get(task)?;
        colour.then(|| PALETTE[i % PALETTE.len()])
    }
}

/// One output line: `[task] text`, the prefix in `colour` when given; the task name and the
/// text are made safe for a terminal.
#[must_use]
pub(crate) fn prefixed(task: &str, colour: Option<&str>, text: &str) -> String {
    let name = crate::sanitize::line(task);
    let text = crate::sanitize::line(text);
    match colour {
        Some(c) => format!("\u{1b}[{c}m[{name}]\u{1b}[0m {text}\n"),
        None => format!("[{name}] {text}\n"),
    }
}

/// Why a turn reads a followed file from its start again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reset {
    /// Shorter than what was read, or another beginning: written again (hank truncates
    /// `live.log` at each call).
    Truncated,
    /// Another file at the path (another inode).
    Replaced,
}

impl Reset {
    /// The line said when it happens.
    #[must_use]
    pub(crate) fn text(self) -> &'static str {
        match self {
            Self::Truncated => "── live.log started again (a new call) ──",
            Self::Replaced => "── live.log replaced: read from its start ──",
        }
    }
}

/// Where a followed `live.log` stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// Read from its first byte (a task started while watching), else from [`BACKLOG`]
    /// before its end.
    from_start: bool,
    /// (device, inode) of the file read so far.
    id: Option<(u64, u64)>,
    /// Bytes consumed so far.
    offset: u64,
    /// The file's first bytes (up to [`HEAD`]) as last seen.
    head: Vec<u8>,
    /// The bytes of a line not yet ended.
    partial: Vec<u8>,
    /// Started inside the file: the bytes up to the first newline are the end of a line.
    skip_to_newline: bool,
    /// The last problem said (a link, a FIFO…), so it is said once.
    problem: Option<String>,
}

/// One turn's read: from where, how many bytes at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadPlan {
    pub from: u64,
    pub len: u64,
    pub reset: Option<Reset>,
}

impl Cursor {
    #[must_use]
    pub(crate) fn new(from_start: bool) -> Self {
        Self {
            from_start,
            id: None,
            offset: 0,
            head: Vec::new(),
            partial: Vec::new(),
            skip_to_newline: false,
            problem: None,
        }
    }

    /// The file is there: `id` its (device, inode), `len` its size, `head` its first
    /// `min(len, HEAD)` bytes. Says what to read now.
    pub(crate) fn plan(&mut self, id: (u64, u64), len: u64, head: &[u8]) -> ReadPlan {
        self.problem = None;
        let reset = match self.id {
            None => {
                self.offset = if self.from_start {
                    0
                } else {
                    len.saturating_sub(BACKLOG)
                };
                self.skip_to_newline = self.offset > 0;
                None
            }
            Some(old) if old != id => Some(Reset::Replaced),
            Some(_) if len < self.offset || !head.starts_with(&self.head) => Some(Reset::Truncated),
            Some(_) => None,
        };
        if reset.is_some() {
            self.offset = 0;
            self.partial.clear();
            self.skip_to_newline = false;
        }
        self.id = Some(id);
        self.head = head.to_vec();
        ReadPlan {
            from: self.offset,
            len: len.saturating_sub(self.offset).min(CHUNK),
            reset,
        }
    }

    /// The bytes read at the planned offset: the complete lines among them (a line longer
    /// than [`MAX_LINE`] comes in pieces; a trailing `\r` is dropped).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.offset += bytes.len() as u64;
        let mut rest = bytes;
        if self.skip_to_newline {
            match rest.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    rest = &rest[i + 1..];
                    self.skip_to_newline = false;
                }
                None => return Vec::new(),
            }
        }
        let mut out = Vec::new();
        for &b in rest {
            if b == b'\n' {
                out.push(take_line(&mut self.partial));
            } else {
                self.partial.push(b);
                if self.partial.len() >= MAX_LINE {
                    out.push(take_line(&mut self.partial));
                }
            }
        }
        out
    }

    /// The file is gone (the worktree was removed): the last unfinished line, if any.
    pub(crate) fn gone(&mut self) -> Option<String> {
        (!self.partial.is_empty()).then(|| take_line(&mut self.partial))
    }

    /// The file cannot be followed (`why`: a link, a FIFO…): the text to say, once until
    /// it is readable again. What was read of the old file is dropped.
    pub(crate) fn refuse(&mut self, why: &str) -> Option<String> {
        self.id = None;
        self.partial.clear();
        // A file put back after a problem is new: read from its start.
        self.from_start = true;
        if self.problem.as_deref() == Some(why) {
            return None;
        }
        self.problem = Some(why.to_string());
        Some(format!("live.log {why}: not followed"))
    }
}

fn take_line(partial: &mut Vec<u8>) -> String {
    let mut bytes = std::mem::take(partial);
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::FleetTask;

    fn task(name: &str, state: TaskState, wt: Option<&str>) -> FleetTask {
        let mut t = FleetTask::in_state(name, state);
        t.branch = format!("hank/{name}");
        t.worktree = wt.map(Into::into);
        t.message = format!("{name} message");
        t
    }

    fn fleet(state: &str, tasks: Vec<FleetTask>) -> FleetFile {
        FleetFile {
            state: state.into(),
            into: "hank/fleet".into(),
            tasks,
            ..FleetFile::default()
        }
    }

    #[test]
    fn the_active_tasks_with_a_worktree_are_followed() {
        use TaskState::*;
        let f = fleet(
            "running",
            vec![
                task("run", Running, Some("/w/run")),
                task("verify", Verifying, Some("/w/verify")),
                task("merge", Merging, Some("/w/merge")),
                task("nowt", Running, None),
                task("empty", Running, Some("")),
                task("wait", Waiting, Some("/w/wait")),
                task("pend", Pending, None),
                task("done", Merged, None),
                task("bad", Failed, Some("/w/bad")),
                task("blk", Blocked, None),
            ],
        );
        let names: Vec<_> = targets(&f).into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["run", "verify", "merge"]);
        assert_eq!(targets(&f)[0].worktree, PathBuf::from("/w/run"));
    }

    #[test]
    fn notices_follow_the_task_states() {
        use TaskState::*;
        let mut w = Watch::default();
        assert!(!w.has_looked());
        // First look: the fleet runs, one task already running (followed), one pending.
        let n = w.update(&fleet(
            "running",
            vec![task("a", Running, Some("/a")), task("b", Pending, None)],
        ));
        assert_eq!(
            n,
            [
                Notice::FleetStarted { tasks: 2 },
                Notice::Following {
                    task: "a".into(),
                    state: Running
                }
            ]
        );
        assert!(w.has_looked());
        // Nothing changed: nothing said.
        let same = fleet(
            "running",
            vec![task("a", Running, Some("/a")), task("b", Pending, None)],
        );
        assert!(w.update(&same).is_empty());
        // (before, after, notice)
        let cases: Vec<(TaskState, TaskState, Option<Notice>)> = vec![
            (
                Pending,
                Running,
                Some(Notice::Started {
                    task: "b".into(),
                    branch: "hank/b".into(),
                }),
            ),
            (
                Waiting,
                Running,
                Some(Notice::Started {
                    task: "b".into(),
                    branch: "hank/b".into(),
                }),
            ),
            (Running, Verifying, None),
            (Verifying, Merging, None),
            (
                Merging,
                Running,
                Some(Notice::BackToAgent {
                    task: "b".into(),
                    message: "b message".into(),
                }),
            ),
            (
                Running,
                Waiting,
                Some(Notice::Waiting {
                    task: "b".into(),
                    message: "b message".into(),
                }),
            ),
            (Pending, Waiting, None),
            (
                Merging,
                Merged,
                Some(Notice::Ended {
                    task: "b".into(),
                    state: Merged,
                    branch: "hank/b".into(),
                    message: "b message".into(),
                }),
            ),
            (
                Running,
                Failed,
                Some(Notice::Ended {
                    task: "b".into(),
                    state: Failed,
                    branch: "hank/b".into(),
                    message: "b message".into(),
                }),
            ),
            (
                Pending,
                Blocked,
                Some(Notice::Ended {
                    task: "b".into(),
                    state: Blocked,
                    branch: "hank/b".into(),
                    message: "b message".into(),
                }),
            ),
        ];
        for (before, after, want) in cases {
            let mut w = Watch::default();
            w.update(&fleet("running", vec![task("b", before, Some("/b"))]));
            let got = w.update(&fleet("running", vec![task("b", after, Some("/b"))]));
            assert_eq!(
                got,
                want.into_iter().collect::<Vec<_>>(),
                "{before:?} → {after:?}"
            );
        }
    }

    /// A running fleet of one running task `a`: said as the fleet's start and `a`'s.
    fn assert_fleet_starts_with_a(w: &mut Watch) {
        let n = w.update(&fleet(
            "running",
            vec![task("a", TaskState::Running, Some("/a"))],
        ));
        assert_eq!(
            n,
            [
                Notice::FleetStarted { tasks: 1 },
                Notice::Started {
                    task: "a".into(),
                    branch: "hank/a".into()
                }
            ]
        );
    }

    #[test]
    fn the_fleet_start_and_end_are_said_once() {
        let mut w = Watch::default();
        // A finished fleet at the first look: history, nothing said.
        assert!(
            w.update(&fleet("done", vec![task("a", TaskState::Merged, None)]))
                .is_empty()
        );
        // A new fleet starts; the old task is a new one's now (pending → running).
        assert_fleet_starts_with_a(&mut w);
        let n = w.update(&fleet("done", vec![task("a", TaskState::Merged, None)]));
        assert_eq!(n.len(), 2);
        assert!(n.iter().all(Notice::after_lines));
        assert_eq!(
            n[1],
            Notice::FleetEnded {
                state: "done".into()
            }
        );
        assert!(
            w.update(&fleet("done", vec![task("a", TaskState::Merged, None)]))
                .is_empty()
        );
    }

    /// A fleet killed while running (shown [`FLEET_NOT_RUNNING`] by `FleetFile::shown`) has
    /// ended: said once, whether it ends under the follower's eyes or before its first look.
    #[test]
    fn a_killed_fleet_is_said_to_be_not_running() {
        let ended = Notice::FleetEnded {
            state: FLEET_NOT_RUNNING.into(),
        };
        let running = |w: &mut Watch| w.update(&fleet("running", vec![]));
        let killed = |w: &mut Watch| w.update(&fleet(FLEET_NOT_RUNNING, vec![]));
        let mut w = Watch::default();
        assert_eq!(running(&mut w), [Notice::FleetStarted { tasks: 0 }]);
        assert_eq!(killed(&mut w), std::slice::from_ref(&ended));
        assert!(killed(&mut w).is_empty());
        let mut w = Watch::default();
        assert_eq!(killed(&mut w), std::slice::from_ref(&ended));
        assert!(killed(&mut w).is_empty());
        assert_eq!(
            ended.text("hank/fleet"),
            "fleet: not running — its supervisor ended without a final state (`hank fleet` resumes it)"
        );
    }

    /// The follower started before the fleet (no `fleet.json`: a look at an empty fleet):
    /// the tasks that come are new, and said as started.
    #[test]
    fn tasks_after_an_empty_look_are_started() {
        let mut w = Watch::default();
        assert!(w.update(&FleetFile::default()).is_empty());
        assert!(w.has_looked());
        assert_fleet_starts_with_a(&mut w);
    }

    #[test]
    fn notice_texts() {
        let ended = |state, message: &str| Notice::Ended {
            task: "a".into(),
            state,
            branch: "hank/a".into(),
            message: message.into(),
        };
        let cases = [
            (ended(TaskState::Merged, "x"), "■ merged into hank/fleet"),
            (
                ended(TaskState::Failed, "merge conflict\x1b[2J in src/a.rs"),
                "✗ failed: merge conflict in src/a.rs (its work stays on hank/a)",
            ),
            (
                ended(TaskState::Blocked, ""),
                "✗ blocked (its work stays on hank/a)",
            ),
            (
                Notice::Started {
                    task: "a".into(),
                    branch: "hank/a".into(),
                },
                "▶ started on hank/a",
            ),
            (
                Notice::Following {
                    task: "a".into(),
                    state: TaskState::Verifying,
                },
                "● verifying (following its live output)",
            ),
            (
                Notice::BackToAgent {
                    task: "a".into(),
                    message: "conflict".into(),
                },
                "↺ back to its agent: conflict",
            ),
            (
                Notice::Waiting {
                    task: "a".into(),
                    message: String::new(),
                },
                "‖ waiting",
            ),
            (
                Notice::FleetStarted { tasks: 3 },
                "fleet: running, 3 task(s)",
            ),
            (
                Notice::FleetEnded {
                    state: "failed".into(),
                },
                "fleet: failed (`hank fleet status` for each task)",
            ),
        ];
        for (n, want) in cases {
            assert_eq!(n.text("hank/fleet"), want, "{n:?}");
        }
        assert_eq!(Notice::FleetStarted { tasks: 1 }.task(), None);
        assert_eq!(ended(TaskState::Merged, "").task(), Some("a"));
    }

    #[test]
    fn prefixes_and_colours() {
        let mut w = Watch::default();
        let names: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
        w.update(&fleet(
            "running",
            names
                .iter()
                .map(|n| task(n, TaskState::Pending, None))
                .collect(),
        ));
        assert_eq!(w.colour("t0", true), Some("36"));
        assert_eq!(w.colour("t1", true), Some("33"));
        assert_eq!(w.colour("t8", true), Some("36"), "the palette wraps");
        assert_eq!(w.colour("t0", false), None, "NO_COLOR or no terminal");
        assert_eq!(w.colour("unknown", true), None);
        // (task, colour, text, line)
        let cases = [
            ("api", None, "hello", "[api] hello\n"),
            (
                "api",
                Some("36"),
                "hello",
                "\u{1b}[36m[api]\u{1b}[0m hello\n",
            ),
            ("a\nb", None, "x\u{1b}]0;title\u{7}y", "[a b] xy\n"),
            ("ui", None, "", "[ui] \n"),
        ];
        for (t, c, text, want) in cases {
            assert_eq!(prefixed(t, c, text), want, "{t:?} {text:?}");
        }
    }

    #[test]
    fn framing_keeps_partial_lines_and_cuts_long_ones() {
        let mut c = Cursor::new(true);
        let p = c.plan((1, 1), 10, b"");
        assert_eq!((p.from, p.reset), (0, None));
        // (bytes fed, lines out)
        let cases: Vec<(&[u8], Vec<&str>)> = vec![
            (b"one\ntw", vec!["one"]),
            (b"o\n", vec!["two"]),
            (b"\n", vec![""]),
            (b"crlf\r\n", vec!["crlf"]),
            (b"no end", vec![]),
            (
                b" yet\nand \xff bytes\n",
                vec!["no end yet", "and \u{fffd} bytes"],
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(c.feed(bytes), want, "{bytes:?}");
        }
        let long = vec![b'x'; MAX_LINE * 2 + 10];
        let lines = c.feed(&long);
        assert_eq!(lines.len(), 2);
        assert!(lines.iter().all(|l| l.len() == MAX_LINE));
        assert_eq!(c.gone().as_deref(), Some("xxxxxxxxxx"));
        assert_eq!(c.gone(), None);
    }

    #[test]
    fn offsets_follow_growth_truncation_and_replacement() {
        // A task already running: its backlog only, from the first whole line.
        let mut c = Cursor::new(false);
        let p = c.plan((1, 7), 10_000, b"head");
        assert_eq!(
            p,
            ReadPlan {
                from: 10_000 - BACKLOG,
                len: BACKLOG,
                reset: None
            }
        );
        assert!(c.feed(b"end of an old line").is_empty());
        let mut rest = b"\nwhole\n".to_vec();
        rest.resize(BACKLOG as usize - 18, b'w');
        let lines = c.feed(&rest);
        assert_eq!(lines, ["whole"], "the w's are an unfinished line");
        // Grown: read from where it stood.
        let p = c.plan((1, 7), 10_000 + 100, b"head");
        assert_eq!((p.from, p.len, p.reset), (10_000, 100, None));
        c.feed(&[b'y'; 100]);
        // A big growth is read a chunk at a time.
        let p = c.plan((1, 7), 10_100 + 3 * CHUNK, b"head");
        assert_eq!((p.from, p.len), (10_100, CHUNK));
        // Truncated to less than was read: from the start.
        let mut c = Cursor::new(true);
        c.plan((1, 7), 5, b"abcd\n");
        c.feed(b"abcd\n");
        let p = c.plan((1, 7), 3, b"xy\n");
        assert_eq!((p.from, p.len, p.reset), (0, 3, Some(Reset::Truncated)));
        assert_eq!(c.feed(b"xy\n"), ["xy"]);
        // Truncated and written again past the old offset between two turns: another head.
        let p = c.plan((1, 7), 50, b"zz, another call's first line");
        assert_eq!((p.from, p.reset), (0, Some(Reset::Truncated)));
        c.feed(&[b'z'; 50]);
        // The same file growing keeps its head (a short head may grow).
        let mut c = Cursor::new(true);
        c.plan((1, 8), 2, b"ab");
        c.feed(b"ab");
        let p = c.plan((1, 8), 4, b"abcd");
        assert_eq!((p.from, p.reset), (2, None));
        // Another inode at the path: from its start.
        c.feed(b"cd");
        let p = c.plan((1, 9), 4, b"abcd");
        assert_eq!((p.from, p.reset), (0, Some(Reset::Replaced)));
        // Started at the tail of a small file: from 0, nothing skipped.
        let mut c = Cursor::new(false);
        let p = c.plan((1, 1), 6, b"a\nb\nc\n");
        assert_eq!(p.from, 0);
        assert_eq!(c.feed(b"a\nb\nc\n"), ["a", "b", "c"]);
    }

    #[test]
    fn a_refused_file_is_said_once_and_read_from_its_start_when_it_is_back() {
        let mut c = Cursor::new(false);
        c.plan((1, 1), 10_000, b"h");
        c.feed(b"x\npartial");
        let why = "is a FIFO (named pipe); expected a regular file";
        assert_eq!(
            c.refuse(why).as_deref(),
            Some("live.log is a FIFO (named pipe); expected a regular file: not followed")
        );
        assert_eq!(c.refuse(why), None);
        assert!(c.refuse("is a symbolic link").is_some());
        // A regular file again: new, from its first byte, the old partial line dropped.
        let p = c.plan((1, 2), 20, b"h");
        assert_eq!((p.from, p.len, p.reset), (0, 20, None));
        assert_eq!(c.feed(b"fresh\n"), ["fresh"]);
        assert!(c.refuse(why).is_some(), "said again after a good read");
    }
}
