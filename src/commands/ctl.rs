//! `hank ctl`: commands for the running loop (into `.hank/control.jsonl`, or signed to
//! `CONTROL_TOPIC` with `--remote`), their status, the remote key (`init`), reading the
//! control topic (`poll`) and signing a command for another device (`sign`).

use std::time::Duration;

use serde_json::json;

use crate::cli;
use crate::control;
use crate::error::{HankError, Result};
use crate::exit;
use crate::policy::control::{self as rules, Command};
use crate::policy::time::Clock;
use crate::settings::{self, Flags};
use crate::store::schema::ControlSource;

use super::{out, project_dir, require_hank_dir};

/// Request timeout of `poll` and `--remote`.
const HTTP_TIMEOUT: Duration = Duration::from_secs(20);

/// `poll --watch`: time between two polls.
const WATCH_EVERY: Duration = Duration::from_secs(15);

/// When a running fleet takes a command.
const WHEN_FLEET: &str =
    "the fleet takes it within a second and forwards it; hank ctl status shows the acknowledgement";

/// When the loop takes a command (said after each one is recorded).
const WHEN_TAKEN: &str = "the loop takes it before its next call, or within a second while it waits; hank ctl status shows the acknowledgement";

pub(crate) fn run(args: &cli::CtlArgs) -> Result<u8> {
    let words: Vec<&str> = args.words.iter().map(String::as_str).collect();
    let dir = project_dir()?;
    // The journal lives in the per-user folder: the agent, which can write `.hank/`, cannot
    // give the loop commands.
    let store = require_hank_dir(&dir)?.with_user_control()?;
    let now = crate::clock::SystemClock::from_env()?.now();
    if args.task.is_some()
        && let Some(w @ ("status" | "init" | "poll" | "sign")) = words.first().copied()
    {
        return Err(HankError::usage(format!(
            "hank ctl {w}: --task goes with note, answer, set and retry-now"
        )));
    }
    match words.first().copied() {
        Some("status") => status(&store, args.json),
        Some("init") => {
            let secret = control::init_secret(&dir, args.rotate)?;
            let path = control::secret_path(&dir)?;
            eprintln!(
                "hank: the control key of this project is in {} (0600, outside the project: the agent cannot read it).\n\
                 hank: it is printed once, below; keep it where you sign commands (hank ctl sign, README: Notifications and control).",
                path.display()
            );
            out(&format!("{secret}\n"))?;
            Ok(exit::OK)
        }
        Some("poll") => {
            let topic = control_topic(&dir)?;
            let clock = crate::clock::SystemClock::from_env()?;
            loop {
                match control::poll_remote(&dir, &store, &topic, clock.now(), HTTP_TIMEOUT) {
                    Ok(report) => {
                        for warning in &report.refused {
                            eprintln!("hank: warning: {}", crate::sanitize::line(warning));
                        }
                        for (id, cmd) in &report.accepted {
                            out(&format!("{id} {}\n", cmd.to_text()))?;
                        }
                        eprintln!(
                            "hank: {} remote command(s) recorded, {} refused",
                            report.accepted.len(),
                            report.refused.len()
                        );
                    }
                    // With --watch a failed poll (network down) is a warning; the next
                    // one tries again.
                    Err(e) if args.watch => eprintln!("hank: warning: {e}"),
                    Err(e) => return Err(e),
                }
                if !args.watch {
                    return Ok(exit::OK);
                }
                std::thread::sleep(WATCH_EVERY);
            }
        }
        Some("sign") => {
            let cmd = parse(&words[1..])?;
            out(&format!("{}\n", control::sign_now(&dir, &cmd, now)?))?;
            eprintln!(
                "hank: valid for {} minutes, once; publish it to CONTROL_TOPIC",
                rules::MAX_SKEW_SECS / 60
            );
            Ok(exit::OK)
        }
        _ => {
            let cmd = parse(&words)?;
            if args.remote {
                if args.task.is_some() {
                    return Err(HankError::usage(
                        "hank ctl: --task goes with a command for this machine's running fleet, not with --remote",
                    ));
                }
                let topic = control_topic(&dir)?;
                control::send_remote(&dir, &topic, &cmd, now, HTTP_TIMEOUT)?;
                eprintln!("hank: sent `{}` signed to CONTROL_TOPIC", cmd.to_text());
                return Ok(exit::OK);
            }
            if let Some(task) = &args.task {
                check_task(&dir, &cmd, task)?;
            }
            // A command is for the loop running now: with none, it would wait for (and
            // steer) whichever run starts next.
            let fleet = crate::fleet::control::fleet_running(&dir);
            if !fleet && !store.loop_running() && !fleet_task_running(&dir) {
                return Err(HankError::usage_hint(
                    format!(
                        "no loop is running: `hank ctl {}` was not recorded",
                        cmd.to_text()
                    ),
                    "a command applies to the loop (or fleet) running when it is given; start one with `hank run` or `hank fleet`, then give it",
                ));
            }
            // For the loop running now only (a fleet forwards to its tasks itself).
            let id = match store.loop_pid().filter(|_| !fleet && args.task.is_none()) {
                Some(pid) => {
                    control::submit_to_run(&store, cmd.clone(), ControlSource::Local, pid, now)?
                }
                None => control::submit_to(
                    &store,
                    cmd.clone(),
                    ControlSource::Local,
                    args.task.clone(),
                    now,
                )?,
            };
            out(&format!("{id}\n"))?;
            if fleet {
                let to = args.task.as_ref().map_or_else(
                    || "every running task".to_string(),
                    |t| format!("task {t:?}"),
                );
                eprintln!(
                    "hank: recorded `{}` as {id} (a fleet is running: it forwards it to {to})\nhank: {WHEN_FLEET}",
                    cmd.to_text()
                );
                return Ok(exit::OK);
            }
            eprintln!(
                "hank: recorded `{}` as {id} (a loop is running)\nhank: {WHEN_TAKEN}",
                cmd.to_text()
            );
            Ok(exit::OK)
        }
    }
}

/// A task of a fleet whose supervisor is gone (killed) still runs its loop: the next `hank
/// fleet` adopts it and forwards what was given meanwhile.
fn fleet_task_running(dir: &std::path::Path) -> bool {
    crate::fleet::read(dir).ok().flatten().is_some_and(|f| {
        f.tasks
            .iter()
            .filter_map(|t| t.worktree.as_deref())
            .any(|w| crate::store::Store::new(std::path::Path::new(w)).loop_running())
    })
}

/// `--task NAME` needs a running fleet that has a task of that name, and a command that
/// can go to one task.
fn check_task(dir: &std::path::Path, cmd: &Command, task: &str) -> Result<()> {
    if !rules::takes_task(cmd) {
        return Err(HankError::usage(format!(
            "hank ctl --task {task}: {} steers the whole fleet; --task goes with note, answer, set and retry-now",
            cmd.name()
        )));
    }
    if !crate::fleet::control::fleet_running(dir) {
        return Err(HankError::usage_hint(
            format!("hank ctl --task {task}: no hank fleet is running for this project"),
            "--task names a task of a running fleet; without a fleet, leave it out",
        ));
    }
    let known: Vec<String> = crate::fleet::read(dir)?
        .map(|f| f.tasks.into_iter().map(|t| t.name).collect())
        .unwrap_or_default();
    if !known.iter().any(|k| k == task) {
        return Err(HankError::usage(format!(
            "hank ctl --task: the fleet has no task {task:?} (its tasks: {})",
            if known.is_empty() {
                "none yet".to_string()
            } else {
                known.join(", ")
            }
        )));
    }
    Ok(())
}

fn parse(words: &[&str]) -> Result<Command> {
    rules::parse(words, &settings::live::check)
        .map_err(|e| HankError::usage(format!("hank ctl: {e}")))
}

fn control_topic(dir: &std::path::Path) -> Result<String> {
    // CONTROL_TOPIC (and NOTIFY) are approved settings: not one the agent changed.
    crate::approval::require(dir, false, "hank ctl (CONTROL_TOPIC)")?;
    let s = settings::load(&Flags::default(), dir)?;
    control::remote::topic(&s)?.ok_or_else(|| {
        HankError::usage_hint(
            "CONTROL_TOPIC is not set",
            "set CONTROL_TOPIC=https://ntfy.sh/SOME-LONG-RANDOM-TOPIC in .hankrc (or the environment), and run hank ctl init once",
        )
    })
}

fn status(store: &crate::store::Store, as_json: bool) -> Result<u8> {
    let journal = control::read_journal(store)?;
    if as_json {
        let items: Vec<_> = journal
            .iter()
            .map(|j| {
                json!({
                    "id": j.pending.id,
                    "at": j.pending.at.to_string(),
                    "source": j.pending.source,
                    "command": j.pending.command.to_text(),
                    "acknowledged": j.ack.as_ref().map(|(at, outcome)| json!({"at": at.to_string(), "outcome": outcome})),
                    "expired": j.ack.as_ref().is_some_and(|(_, o)| o.starts_with(control::EXPIRED)),
                })
            })
            .collect();
        out(&format!("{}\n", json!({ "commands": items })))?;
        return Ok(exit::OK);
    }
    let pending: Vec<_> = journal.iter().filter(|j| j.ack.is_none()).collect();
    let expired = journal
        .iter()
        .filter(|j| {
            j.ack
                .as_ref()
                .is_some_and(|(_, o)| o.starts_with(control::EXPIRED))
        })
        .count();
    let mut text = format!(
        "commands: {} pending, {} acknowledged, {expired} expired (given to a run that ended before it took them)\n",
        pending.len(),
        journal.len() - pending.len() - expired
    );
    if !pending.is_empty() && !store.loop_running() {
        text.push_str(
            "  no loop is running: the pending commands expire when the next run starts\n",
        );
    }
    for j in journal.iter().rev().take(20).rev() {
        let p = &j.pending;
        let source = match p.source {
            ControlSource::Local => "local",
            ControlSource::Remote => "remote",
        };
        let state = j
            .ack
            .as_ref()
            .map_or_else(|| "pending".to_string(), |(at, o)| format!("{o} at {at}"));
        text.push_str(&format!(
            "  {} {} [{source}] {} — {state}\n",
            p.id,
            p.at,
            crate::sanitize::line(&p.command.to_text())
        ));
    }
    out(&text)?;
    Ok(exit::OK)
}
