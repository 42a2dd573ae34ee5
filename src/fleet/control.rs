//! `hank ctl` for a running fleet: the supervisor takes the main checkout's control journal
//! (the one `hank ctl` writes in the checkout, in the per-user folder) and applies each
//! command to the fleet ([`crate::policy::control::steer_fleet`]): it forwards the command
//! to the journal of each running task's worktree (where that task's `hank run` takes it),
//! holds new starts while paused or stopping, and gives the `set`s taken to each task
//! started later.
//!
//! Each command is acknowledged in the main journal with its outcome (`forwarded to 2
//! tasks: Alpha, Beta`) and is a `control` event in the main `events.jsonl`. A forwarded
//! copy carries the id `MAIN-ID.SLUG`, written only when the task's journal does not hold
//! it yet: a command the fleet forwarded but had not acknowledged when it was killed is
//! forwarded again after a restart without reaching a task twice; one acknowledged is not
//! taken again.

use std::fs;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use crate::control::{self, ControlInbox, Polled, read_journal};
use crate::error::Result;
use crate::policy::control::{self as rules, Command, FleetSteer};
use crate::store::Store;
use crate::store::schema::{ControlSource, Event, EventKind};

/// A running task as the fleet's control sees it.
pub struct RunningTask<'a> {
    pub name: &'a str,
    pub slug: &'a str,
    pub worktree: &'a Path,
}

/// The fleet's reader of the main journal.
pub struct FleetControl {
    root: PathBuf,
    inbox: ControlInbox,
    pub steer: FleetSteer,
    /// The main journal's id of each `set` in `steer.sets` (its forwarded copies' ids).
    set_ids: std::collections::BTreeMap<String, String>,
}

/// A task's own journal (its `hank run` reads it: keyed by its worktree).
fn task_store(worktree: &Path) -> Result<Store> {
    Store::new(worktree).with_user_control()
}

/// Is a fleet running for the project at `root` now (its lock is held)?
#[must_use]
pub fn fleet_running(root: &Path) -> bool {
    let Ok(paths) = super::Paths::of(root) else {
        return false;
    };
    let Ok(lock) = fs::OpenOptions::new()
        .read(true)
        .open(paths.user.join("fleet.lock"))
    else {
        return false;
    };
    match lock.try_lock_shared() {
        Ok(()) => {
            let _ = lock.unlock();
            false
        }
        Err(_) => true,
    }
}

impl FleetControl {
    /// The control of the fleet of the project at `root`. What the journal says was taken
    /// before a restart holds again: a pause not resumed, the `set`s for every task.
    pub fn open(root: &Path) -> Result<Self> {
        let store = Store::new(root).with_user_control()?;
        let mut steer = FleetSteer::default();
        let mut set_ids = std::collections::BTreeMap::new();
        let journal = read_journal(&store)?;
        if let Some(j) = control::last_pause_or_resume(&journal) {
            steer.paused = j.pending.command == Command::Pause;
        }
        for j in journal
            .iter()
            .filter(|j| j.pending.task.is_none() && control::taken(j))
        {
            if let Command::Set { key, value } = &j.pending.command {
                steer.sets.retain(|(k, _)| k != key);
                steer.sets.push((key.clone(), value.clone()));
                set_ids.insert(key.clone(), j.pending.id.clone());
            }
        }
        Ok(Self {
            root: root.to_path_buf(),
            inbox: ControlInbox::new(store),
            steer,
            set_ids,
        })
    }

    /// Takes the commands that came since the last poll and applies them to the fleet with
    /// the tasks `running` now; one line per command for the terminal. A journal that cannot
    /// be read is a warning (once), never an error of the fleet.
    pub fn poll(&mut self, running: &[RunningTask<'_>], now: Timestamp) -> Vec<String> {
        let mut lines = Vec::new();
        let pending = match self.inbox.poll_moved() {
            Polled::New(pending) => pending,
            Polled::Same => return lines,
            Polled::Failed(warning) => {
                lines.extend(
                    warning.map(|e| format!("warning: hank ctl commands cannot be read: {e}")),
                );
                return lines;
            }
        };
        let names: Vec<String> = running.iter().map(|r| r.name.to_string()).collect();
        for p in pending {
            let mut outcome = match rules::to_control(&p.command, &crate::settings::live::check) {
                Err(why) => format!("refused: {why}"),
                Ok(_) => {
                    let mut next = self.steer.clone();
                    let steered =
                        rules::steer_fleet(&mut next, &p.command, p.task.as_deref(), &names);
                    let mut failed = Vec::new();
                    for name in &steered.forward_to {
                        let Some(task) = running.iter().find(|r| r.name == name) else {
                            continue;
                        };
                        if let Err(e) = forward(&p.id, &p.command, task, now) {
                            failed.push(format!("{name}: {e}"));
                        }
                    }
                    self.steer = next;
                    if let (Command::Set { key, .. }, None, false) =
                        (&p.command, &p.task, steered.refused)
                    {
                        self.set_ids.insert(key.clone(), p.id.clone());
                    }
                    if failed.is_empty() {
                        steered.outcome
                    } else {
                        format!("{} (not reached: {})", steered.outcome, failed.join("; "))
                    }
                }
            };
            outcome = crate::sanitize::line(&outcome);
            if let Err(e) = self.inbox.ack(&p.id, &outcome, now) {
                // Not acknowledged: it comes again after a restart (its forwarded copies
                // are not written twice).
                lines.push(format!(
                    "warning: hank ctl {} not acknowledged: {e}",
                    p.command.to_text()
                ));
                continue;
            }
            let command = match &p.task {
                Some(t) => format!("{} (--task {t})", p.command.to_text()),
                None => p.command.to_text(),
            };
            let event = Event::new(
                now,
                EventKind::Control {
                    id: p.id.clone(),
                    command: command.clone(),
                    outcome: outcome.clone(),
                },
            );
            let _ = Store::new(&self.root).append_event(&event.to_line());
            lines.push(format!(
                "hank ctl {}: {outcome}",
                crate::sanitize::line(&command)
            ));
        }
        self.inbox.settle();
        lines
    }

    /// Gives a task about to start the `set`s taken for every task (each once: a restart
    /// does not give it twice).
    pub fn give_sets(&self, task: &RunningTask<'_>, now: Timestamp) -> Result<()> {
        for (key, value) in &self.steer.sets {
            let command = Command::Set {
                key: key.clone(),
                value: value.clone(),
            };
            let id = self
                .set_ids
                .get(key)
                .cloned()
                .unwrap_or_else(|| format!("set-{key}"));
            forward(&id, &command, task, now)?;
        }
        Ok(())
    }
}

/// Writes `command` into the task's journal as `ID.SLUG`, once.
fn forward(id: &str, command: &Command, task: &RunningTask<'_>, now: Timestamp) -> Result<()> {
    let store = task_store(task.worktree)?;
    control::submit_once(
        &store,
        &format!("{id}.{}", task.slug),
        command.clone(),
        ControlSource::Local,
        now,
    )?;
    Ok(())
}
