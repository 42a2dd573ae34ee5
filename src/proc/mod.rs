//! The process layer: every child process hank starts goes through here, and nowhere else
//! names `Command::new` (`tests/integration/architecture.rs` checks it).
//!
//! - [`agent`]: the agent, streamed (stdout held for the analysis, logs, live view, timeouts,
//!   the run's [`agent::Marker`] in its environment, leftovers found from hank's own tree as
//!   child subreaper).
//! - [`shell_to_log`]: `VERIFY_COMMAND`, through `/bin/sh -c`, output into a log, with its
//!   timeout and the user's interrupt.
//! - [`Cmd`]: a short blocking tool run (git, a client's `--version`, `gh`, `bd`, tmux,
//!   notify-send, doctor's checks), its output captured up to a cap.
//! - [`Cmd::interactive`] and [`Cmd::exec`]: a program that takes over the terminal
//!   (`tmux attach`) or this process (`hank __with-env`).
//!
//! Every child gets stdin closed (the agent: its prompt, then closed) and, except the
//! interactive one, its own process group; the group is what a timeout, an interrupt or the
//! end of the run stops ([`signal_group`], [`stop_group`]). The signal counter the blocking
//! runs poll is [`signals`]; the one tokio runtime builder is [`runtime`].
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! the process layer, the only place that names `Command::new` or builds a tokio runtime
//! (`architecture.rs`): `agent.rs` (the agent streamed — its `RunOutcome` holds the analyzer's
//! `analysis::RunFacts` as they are, the one definition of how it ended —: spawn without a shell,
//! own process group, drain to logs, timeout / IDLE_TIMEOUT / FIRST_OUTPUT_TIMEOUT (`startup_hang`)
//! / interrupt → SIGTERM, 5 s, SIGKILL; the run's `Marker` in its environment; its leftovers found
//! by walking hank's own tree as child subreaper — `/proc/PID/task/*/children`, never a scan of the
//! machine in the loop; one walk per call on the happy path (`Stopping` skips the later walks once
//! a walk found hank with no child and its threads unchanged, `Walk::childless`: no descendant can
//! appear then); the marker scan only at the next start after a kill -9; what was read is kept when
//! a pipe stays open), `mod.rs` (`spawn_grouped`: the one start of an async child as its own
//! group's leader, for the agent and `VERIFY_COMMAND`; `shell_to_log`: `VERIFY_COMMAND` through
//! `/bin/sh -c` into its log; `Cmd`: a blocking tool run (a bare program name is resolved in the
//! child's PATH, `resolve_in_path`, so std uses `posix_spawn` rather than a fork of hank) — git
//! (through `crate::git`'s handles), `--version` probes, `bd`, the forge programs (`gh`,
//! `glab`, with stdin bytes), tmux, notify-send, doctor — no shell, stdin closed, own group,
//! stdout/stderr caps, timeout and optional stop on hank's signals, group killed at the end;
//! `Cmd::interactive`/`Cmd::exec` for `tmux attach` and `__with-env`; `signal_group`, `stop_group`,
//! `await_or_kill`: the one SIGTERM → grace → SIGKILL; `on_exit`: told when a child ended without
//! reaping it (a small thread in `waitid(WEXITED | WNOWAIT)`; the fleet wakes on its workers' exits
//! so); `runtime()`: the one tokio runtime builder), `signals.rs` (the SIGINT/SIGTERM/SIGHUP
//! counter)

pub mod agent;
pub mod signals;

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::watch;

/// The tokio runtime every async part of a command runs on (one thread: hank's work is a
/// handful of pipes and timers).
///
/// # Errors
/// The runtime cannot be built (no file descriptors, no memory).
pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Sends `sig` to the process group `pgid`; false when there is no such group (or `pgid` is
/// not a group id hank may signal: 0 or below).
pub fn signal_group(pgid: i32, sig: Signal) -> bool {
    pgid > 0 && killpg(Pid::from_raw(pgid), sig).is_ok()
}

/// Stops `child`, the leader of group `pgid`, and its group: SIGTERM, then SIGKILL after
/// `grace` — at once on a second interrupt (`cancel` reaching 2) — and returns its status.
///
/// # Errors
/// Waiting for the child failed.
pub async fn stop_group(
    child: &mut tokio::process::Child,
    pgid: i32,
    grace: Duration,
    cancel: &mut watch::Receiver<u32>,
) -> io::Result<ExitStatus> {
    signal_group(pgid, Signal::SIGTERM);
    await_or_kill(child, grace, cancel, || {
        signal_group(pgid, Signal::SIGKILL);
    })
    .await
}

/// The grace of every stop, after the caller sent SIGTERM: waits up to `grace` for `child`
/// to exit; past it, or on a second interrupt (`cancel` reaching 2), calls `kill_all` (the
/// caller's SIGKILL to the group and whatever else it tracks), kills the child and reaps it.
///
/// # Errors
/// Waiting for the child failed.
pub async fn await_or_kill(
    child: &mut tokio::process::Child,
    grace: Duration,
    cancel: &mut watch::Receiver<u32>,
    kill_all: impl FnOnce(),
) -> io::Result<ExitStatus> {
    let grace_timer = tokio::time::sleep(grace);
    tokio::pin!(grace_timer);
    // A closed channel brings no second interrupt: the grace runs out.
    let mut cancel_open = *cancel.borrow() < 2;
    loop {
        tokio::select! {
            status = child.wait() => return status,
            () = &mut grace_timer => break,
            changed = cancel.changed(), if cancel_open => {
                if changed.is_err() {
                    cancel_open = false;
                } else if *cancel.borrow() >= 2 {
                    break;
                }
            }
        }
    }
    kill_all();
    child.start_kill().ok();
    child.wait().await
}

/// Starts `program` with `args` in `cwd` as a long-running child of its own process group,
/// stdin closed, stdout and stderr both into `log`, with `env` added to hank's environment;
/// the caller watches it and stops its group (`hank fleet`'s workers and its merge checks).
///
/// # Errors
/// The program cannot be started, or the log cannot be shared between stdout and stderr.
pub fn spawn_to_log(
    program: &OsStr,
    args: &[std::ffi::OsString],
    cwd: &Path,
    env: &[(&OsStr, &OsStr)],
    log: std::fs::File,
) -> io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let err = log.try_clone()?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err))
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn()
}

/// Calls `told` once the child `pid` of this process has ended, from a small thread of its
/// own blocked in `waitid(WEXITED | WNOWAIT)`: the child is **not** reaped (its status stays
/// for the caller's `try_wait`, so its pid cannot be reused while the caller may still
/// signal it). `told` also runs when the wait fails (the child was reaped meanwhile, or is
/// not this process's): the caller looks again. `hank fleet` wakes on its workers' exits so.
///
/// # Errors
/// The thread cannot be started (the caller falls back to looking periodically).
pub fn on_exit(pid: u32, told: impl FnOnce() + Send + 'static) -> io::Result<()> {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let pid = i32::try_from(pid)
        .map(Pid::from_raw)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    std::thread::Builder::new()
        .name("hank-exit-watch".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
            while waitid(Id::Pid(pid), flags) == Err(nix::errno::Errno::EINTR) {}
            told();
        })
        .map(drop)
}

/// The file a bare program name (no `/`) starts from with `path` as its PATH, found the way
/// `execvp` searches: the first executable regular file. `None` — the name is then passed on
/// as it is, and the standard library searches — for a name with a `/`, no PATH, or a PATH
/// with an empty or relative entry before the match (those depend on the child's folder).
///
/// Why: when the child's environment sets PATH, the standard library cannot let
/// `posix_spawnp` search (it would use hank's PATH) and falls back to a `fork` of hank,
/// copying its page tables; with the absolute path it uses `posix_spawn` (a `vfork`). Same
/// program, ~0.5 ms less per git call (PERFORMANCE.md, "per-loop cost").
fn resolve_in_path(program: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if program.is_empty() || program.as_bytes().contains(&b'/') {
        return None;
    }
    for dir in path?.as_bytes().split(|&b| b == b':') {
        let dir = Path::new(OsStr::from_bytes(dir));
        if !dir.is_absolute() {
            return None;
        }
        let candidate = dir.join(program);
        if candidate.is_file()
            && nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK).is_ok()
        {
            return Some(candidate);
        }
    }
    None
}

/// How a [`shell_to_log`] run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logged {
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub interrupted: bool,
    pub duration: Duration,
}

/// Starts `command` as the leader of a process group of its own, killed if hank drops it;
/// with its group id (0 when the id cannot be read: the child is already gone).
pub(crate) fn spawn_grouped(
    command: &mut tokio::process::Command,
) -> io::Result<(tokio::process::Child, i32)> {
    let child = command.process_group(0).kill_on_drop(true).spawn()?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .unwrap_or(0);
    Ok((child, pgid))
}

/// Runs `command` with `/bin/sh -c` in `cwd` (the user's own command line needs the shell),
/// in its own process group, stdin closed, stdout and stderr both into `log` (an open file).
/// After `timeout`, or on the user's interrupt (`cancel` above 0), the group is stopped
/// ([`stop_group`]); whatever the command left running in its group is stopped when it
/// ends. `on_spawn(pgid)` runs right after the start (the caller records the group so that
/// the next start stops it if hank is killed with SIGKILL meanwhile).
///
/// # Errors
/// `/bin/sh` cannot be started, or waiting for it failed.
pub async fn shell_to_log(
    command: &str,
    cwd: &Path,
    log: std::fs::File,
    timeout: Duration,
    grace: Duration,
    mut cancel: watch::Receiver<u32>,
    on_spawn: impl FnOnce(i32),
) -> io::Result<Logged> {
    let started = Instant::now();
    let err = log.try_clone()?;
    let (mut child, pgid) = spawn_grouped(
        tokio::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .current_dir(cwd)
            .env("PWD", cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err)),
    )?;
    if pgid > 0 {
        on_spawn(pgid);
    }
    let mut ran = Logged {
        exit_code: None,
        timed_out: false,
        interrupted: *cancel.borrow() > 0,
        duration: Duration::ZERO,
    };
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let status = if ran.interrupted {
        None
    } else {
        loop {
            tokio::select! {
                status = child.wait() => break Some(status?),
                () = &mut deadline => {
                    ran.timed_out = true;
                    break None;
                }
                changed = cancel.changed() => {
                    if changed.is_err() || *cancel.borrow() > 0 {
                        ran.interrupted = true;
                        break None;
                    }
                }
            }
        }
    };
    let status = match status {
        Some(s) => s,
        None => stop_group(&mut child, pgid, grace, &mut cancel).await?,
    };
    // Leftovers in the group (a background job of the command) go with it.
    signal_group(pgid, Signal::SIGKILL);
    ran.exit_code = status.code();
    ran.duration = started.elapsed();
    Ok(ran)
}

/// Why a [`Cmd::run`] gave no [`Finished`].
#[derive(Debug)]
pub enum RunError {
    /// The program could not be started.
    Spawn(io::Error),
    /// It ran past its timeout; its group was killed.
    Timeout,
    /// Hank received SIGINT/SIGTERM/SIGHUP ([`Cmd::interruptible`]); its group was killed.
    Interrupted,
    /// Reading its output or waiting for it failed.
    Io(io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "could not be started: {e}"),
            RunError::Timeout => write!(f, "did not finish in time and was stopped"),
            RunError::Interrupted => write!(f, "was stopped: hank was interrupted"),
            RunError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// What a finished [`Cmd::run`] left.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    /// Stdout, up to the cap ([`Cmd::stdout_max`]).
    pub stdout: Vec<u8>,
    /// Stderr, up to the cap ([`Cmd::stderr_max`]; empty when stderr is discarded).
    pub stderr: Vec<u8>,
    /// The program exited but a process it started (outside its group) still held a pipe
    /// open past [`Cmd::held_pipe`]: the output may be incomplete.
    pub held_open: bool,
}

/// How long the reading waits past the program's exit for its pipes to close, by default.
const HELD_PIPE_GRACE: Duration = Duration::from_millis(500);
/// Longest single wait for output before the timeout and signals are checked again.
const POLL_TICK_MS: u16 = 50;

/// A short blocking run of a tool: no shell, stdin closed, its own process group, stdout
/// (and stderr when asked) captured up to a cap — what is beyond is read and dropped, so the
/// tool never blocks on a full pipe — and the whole group killed (SIGKILL) past the timeout
/// or, with [`Cmd::interruptible`], once hank received a signal. Once the program has exited,
/// the reading stops after [`Cmd::held_pipe`] even when a process it started elsewhere
/// still holds the pipe, and what is left in its group is killed.
#[derive(Debug, Clone)]
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    clear_env: bool,
    env: Vec<(OsString, Option<OsString>)>,
    timeout: Duration,
    stdout_max: usize,
    stderr_max: usize,
    interruptible: bool,
    held_pipe: Duration,
    stdin: Option<Vec<u8>>,
}

impl Cmd {
    /// `program` with no argument, hank's environment, a 60 s timeout, stdout kept up to
    /// 16 MiB, stderr discarded.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            clear_env: false,
            env: Vec::new(),
            timeout: Duration::from_secs(60),
            stdout_max: 16 << 20,
            stderr_max: 0,
            interruptible: false,
            held_pipe: HELD_PIPE_GRACE,
            stdin: None,
        }
    }

    #[must_use]
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The working directory.
    #[must_use]
    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Self {
        self.cwd = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Starts from an empty environment (then [`Cmd::env`] sets what the tool needs).
    #[must_use]
    pub fn env_clear(mut self) -> Self {
        self.clear_env = true;
        self.env.clear();
        self
    }

    #[must_use]
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    #[must_use]
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    #[must_use]
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    /// Stdout bytes kept (`usize::MAX`: all).
    #[must_use]
    pub fn stdout_max(mut self, bytes: usize) -> Self {
        self.stdout_max = bytes;
        self
    }

    /// Stderr bytes kept; 0 (the default) discards stderr.
    #[must_use]
    pub fn stderr_max(mut self, bytes: usize) -> Self {
        self.stderr_max = bytes;
        self
    }

    /// Ends the run (the group killed, [`RunError::Interrupted`]) once hank has received
    /// SIGINT, SIGTERM or SIGHUP ([`signals::received`]), and never starts it after one.
    #[must_use]
    pub fn interruptible(mut self) -> Self {
        self.interruptible = true;
        self
    }

    /// How long the reading waits past the program's exit for its pipes to close.
    #[must_use]
    pub fn held_pipe(mut self, grace: Duration) -> Self {
        self.held_pipe = grace;
        self
    }

    /// Bytes written to the program's stdin (then closed) instead of a closed stdin.
    #[must_use]
    pub fn stdin(mut self, bytes: Vec<u8>) -> Self {
        self.stdin = Some(bytes);
        self
    }

    /// The program as given (for messages).
    #[must_use]
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The PATH the program will see: its own `PATH` setting, else hank's (unless the
    /// environment is cleared).
    fn child_path(&self) -> Option<OsString> {
        match self.env.iter().rev().find(|(k, _)| k == "PATH") {
            Some((_, v)) => v.clone(),
            None if self.clear_env => None,
            None => std::env::var_os("PATH"),
        }
    }

    fn command(&self) -> std::process::Command {
        let program = resolve_in_path(&self.program, self.child_path().as_deref())
            .map_or_else(|| self.program.clone(), PathBuf::into_os_string);
        let mut cmd = std::process::Command::new(program);
        cmd.args(&self.args);
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        if self.clear_env {
            cmd.env_clear();
        }
        for (key, value) in &self.env {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        cmd
    }

    fn should_stop(&self, started: Instant) -> Option<RunError> {
        if self.interruptible && signals::received() != 0 {
            Some(RunError::Interrupted)
        } else if started.elapsed() >= self.timeout {
            Some(RunError::Timeout)
        } else {
            None
        }
    }

    /// Runs the tool to its end (see [`Cmd`]).
    ///
    /// # Errors
    /// See [`RunError`].
    pub fn run(&self) -> Result<Finished, RunError> {
        if self.interruptible && signals::received() != 0 {
            return Err(RunError::Interrupted);
        }
        let mut cmd = self.command();
        cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(if self.stderr_max > 0 {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .process_group(0);
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(RunError::Spawn)?;
        let pid = i32::try_from(child.id()).unwrap_or(0);
        // The input goes in from a thread of its own: a program that answers before it has
        // read everything must not block hank.
        if let (Some(mut pipe), Some(bytes)) = (child.stdin.take(), self.stdin.clone()) {
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = pipe.write_all(&bytes);
            });
        }
        // Until the child is reaped its pid is its group's id and cannot be recycled.
        let kill = || signal_group(pid, Signal::SIGKILL);
        let mut out = Pipe::new(child.stdout.take(), self.stdout_max);
        let mut err = Pipe::new(child.stderr.take(), self.stderr_max);
        let mut exited_at: Option<Instant> = None;
        let mut held_open = false;
        while out.is_open() || err.is_open() {
            if let Some(why) = self.should_stop(started) {
                kill();
                let _ = child.wait();
                return Err(why);
            }
            if exited_at.is_none() && exited(pid) {
                exited_at = Some(Instant::now());
            }
            if exited_at.is_some_and(|t| t.elapsed() >= self.held_pipe) {
                held_open = true;
                break;
            }
            if let Err(e) = poll_pipes(&mut out, &mut err) {
                kill();
                let _ = child.wait();
                return Err(RunError::Io(e));
            }
        }
        // The pipes are closed (or held by a stranger): wait for the exit, still bounded.
        let mut nap = Duration::from_micros(200);
        while !exited(pid) {
            if let Some(why) = self.should_stop(started) {
                kill();
                let _ = child.wait();
                return Err(why);
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(u64::from(POLL_TICK_MS)));
        }
        // Whatever the tool left running in its group goes with it.
        kill();
        let status = child.wait().map_err(RunError::Io)?;
        Ok(Finished {
            status,
            stdout: out.buf,
            stderr: err.buf,
            held_open,
        })
    }

    /// Runs the program on hank's terminal (stdio inherited, in hank's process group so that
    /// it can read the terminal) until it exits; for an interactive program the user ends
    /// (`tmux attach`).
    ///
    /// # Errors
    /// It cannot be started or waited for.
    pub fn interactive(&self) -> io::Result<ExitStatus> {
        self.command().status()
    }

    /// Replaces this process with the program (`hank __with-env`); returns only on failure.
    #[must_use]
    pub fn exec(&self) -> io::Error {
        self.command().exec()
    }
}

/// One pipe of a blocking run: read while open, kept up to `max` bytes.
struct Pipe<R> {
    reader: Option<R>,
    max: usize,
    buf: Vec<u8>,
}

impl<R: Read + std::os::fd::AsFd> Pipe<R> {
    fn new(reader: Option<R>, max: usize) -> Self {
        Self {
            reader,
            max,
            buf: Vec::new(),
        }
    }

    fn is_open(&self) -> bool {
        self.reader.is_some()
    }

    /// One read of what the pipe holds; closes it at the end of the stream.
    fn read_some(&mut self, scratch: &mut [u8]) -> io::Result<()> {
        let Some(reader) = self.reader.as_mut() else {
            return Ok(());
        };
        match reader.read(scratch) {
            Ok(0) => self.reader = None,
            Ok(n) => {
                let room = self.max.saturating_sub(self.buf.len());
                let got = scratch.get(..n.min(room)).unwrap_or_default();
                self.buf.extend_from_slice(got);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

/// Waits up to [`POLL_TICK_MS`] for either open pipe, then reads what arrived.
fn poll_pipes<A, B>(out: &mut Pipe<A>, err: &mut Pipe<B>) -> io::Result<()>
where
    A: Read + std::os::fd::AsFd,
    B: Read + std::os::fd::AsFd,
{
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let (ready_out, ready_err) = {
        let mut fds = Vec::with_capacity(2);
        if let Some(r) = out.reader.as_ref() {
            fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
        }
        if let Some(r) = err.reader.as_ref() {
            fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::from(POLL_TICK_MS)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(io::Error::from(e)),
        }
        let ready =
            |fd: Option<&PollFd<'_>>| fd.and_then(PollFd::revents).is_some_and(|r| !r.is_empty());
        let first = ready(fds.first());
        let second = ready(fds.get(1));
        match (out.is_open(), err.is_open()) {
            (true, true) => (first, second),
            (true, false) => (first, false),
            (false, true) => (false, first),
            (false, false) => (false, false),
        }
    };
    let mut scratch = vec![0u8; 64 * 1024];
    if ready_out {
        out.read_some(&mut scratch)?;
    }
    if ready_err {
        err.read_some(&mut scratch)?;
    }
    Ok(())
}

/// Whether the child `pid` has exited (without reaping it, so its group id stays its own).
fn exited(pid: i32) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    if pid <= 0 {
        return true;
    }
    loop {
        match waitid(
            Id::Pid(Pid::from_raw(pid)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG,
        ) {
            Err(nix::errno::Errno::EINTR) => {}
            Ok(WaitStatus::StillAlive) => return false,
            _ => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_found_in_the_childs_path_as_execvp_would() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        // Not executable in `a`, executable in `b`; a folder of that name first.
        std::fs::write(a.join("tool"), "").unwrap();
        std::fs::create_dir_all(d.path().join("c/tool")).unwrap();
        std::fs::write(b.join("tool"), "#!/bin/sh\necho from-b\n").unwrap();
        std::fs::set_permissions(b.join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}:{}",
            d.path().join("c").display(),
            a.display(),
            b.display()
        );
        let found = resolve_in_path(OsStr::new("tool"), Some(OsStr::new(&path)));
        assert_eq!(found, Some(b.join("tool")));
        // What the child runs is that file.
        let out = Cmd::new("tool")
            .env_clear()
            .env("PATH", &path)
            .run()
            .unwrap();
        assert_eq!(out.stdout, b"from-b\n");
        // Left to the standard library: a path, no PATH, a relative or empty entry first.
        for (program, p) in [
            ("./tool", Some(path.clone())),
            ("tool", None),
            ("tool", Some(format!("rel:{path}"))),
            ("tool", Some(format!(":{path}"))),
            ("missing", Some(path.clone())),
        ] {
            let p = p.as_deref().map(OsStr::new);
            assert_eq!(
                resolve_in_path(OsStr::new(program), p),
                None,
                "{program} {p:?}"
            );
        }
        // A relative entry after the match does not matter.
        let later = format!("{}:rel", b.display());
        assert_eq!(
            resolve_in_path(OsStr::new("tool"), Some(OsStr::new(&later))),
            Some(b.join("tool"))
        );
    }

    #[test]
    fn captures_stdout_and_stderr_up_to_their_caps() {
        let r = Cmd::new("/bin/sh")
            .args(["-c", "printf 0123456789; printf abcdef >&2; exit 3"])
            .stdout_max(4)
            .stderr_max(100)
            .run()
            .unwrap();
        assert_eq!(r.stdout, b"0123");
        assert_eq!(r.stderr, b"abcdef");
        assert_eq!(r.status.code(), Some(3));
        assert!(!r.held_open);
    }

    #[test]
    fn stderr_is_discarded_unless_asked() {
        let r = Cmd::new("/bin/sh")
            .args(["-c", "echo out; echo err >&2"])
            .run()
            .unwrap();
        assert_eq!(r.stdout, b"out\n");
        assert!(r.stderr.is_empty());
    }

    #[test]
    fn a_flood_past_the_cap_is_drained_not_blocking() {
        let r = Cmd::new("/bin/sh")
            .args(["-c", "head -c 3000000 /dev/zero; echo done >&2"])
            .stdout_max(10)
            .stderr_max(10)
            .run()
            .unwrap();
        assert_eq!(r.stdout.len(), 10);
        assert_eq!(r.stderr, b"done\n");
    }

    #[test]
    fn the_timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let r = Cmd::new("/bin/sh")
            .args(["-c", &script])
            .timeout(Duration::from_millis(300))
            .run();
        assert!(matches!(r, Err(RunError::Timeout)), "{r:?}");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild was killed with the group (it is reaped by init or the subreaper).
        let gone = (0..100).any(|_| {
            let alive = agent::exists(pid);
            if alive {
                std::thread::sleep(Duration::from_millis(20));
            }
            !alive
        });
        assert!(gone, "grandchild {pid} survived the timeout");
    }

    #[test]
    fn a_pipe_held_by_a_stranger_does_not_hold_the_run() {
        // The grandchild leaves the group (setsid) and keeps stdout open.
        let r = Cmd::new("/bin/sh")
            .args(["-c", "echo first; setsid sleep 5 & exit 0"])
            .held_pipe(Duration::from_millis(100))
            .timeout(Duration::from_secs(4))
            .run()
            .unwrap();
        assert!(r.held_open);
        assert_eq!(r.stdout, b"first\n");
        assert!(r.status.success());
    }

    #[test]
    fn stdin_bytes_reach_the_program() {
        let r = Cmd::new("/bin/cat")
            .stdin(b"request body".to_vec())
            .run()
            .unwrap();
        assert_eq!(r.stdout, b"request body");
    }

    #[test]
    fn on_exit_tells_a_childs_end_and_leaves_it_to_be_reaped() {
        let d = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(d.path().join("log")).unwrap();
        let args: Vec<OsString> = vec!["-c".into(), "sleep 0.3; exit 7".into()];
        let mut child = spawn_to_log(OsStr::new("/bin/sh"), &args, d.path(), &[], log).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        on_exit(child.id(), move || tx.send(()).unwrap()).unwrap();
        assert!(child.try_wait().unwrap().is_none(), "still running");
        rx.recv_timeout(Duration::from_secs(30)).unwrap();
        // Told, not reaped: its status is still the caller's to take.
        let status = child.try_wait().unwrap().expect("ended");
        assert_eq!(status.code(), Some(7));
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let r = Cmd::new("/nonexistent/hank-no-such-tool").run();
        assert!(matches!(r, Err(RunError::Spawn(_))), "{r:?}");
    }

    #[test]
    fn the_environment_is_what_was_asked() {
        let r = Cmd::new("/usr/bin/env")
            .env_clear()
            .env("A_VAR", "1")
            .run()
            .unwrap();
        assert_eq!(r.stdout, b"A_VAR=1\n");
        let r = Cmd::new("/usr/bin/env")
            .env("HANK_PROC_TEST_VAR", "x")
            .env_remove("HANK_PROC_TEST_VAR")
            .run()
            .unwrap();
        assert!(!String::from_utf8_lossy(&r.stdout).contains("HANK_PROC_TEST_VAR"));
    }

    #[test]
    fn shell_to_log_stops_on_timeout_and_logs() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let file = std::fs::File::create(&log).unwrap();
        let (_tx, rx) = watch::channel(0u32);
        let rt = runtime().unwrap();
        let mut group = 0;
        let ran = rt
            .block_on(shell_to_log(
                "echo hi; sleep 30",
                dir.path(),
                file,
                Duration::from_millis(300),
                Duration::from_millis(200),
                rx,
                |g| group = g,
            ))
            .unwrap();
        assert!(ran.timed_out);
        assert!(!ran.interrupted);
        assert!(group > 0);
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "hi\n");
        assert!(ran.duration < Duration::from_secs(20), "{ran:?}");
    }
}
