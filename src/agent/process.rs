//! Spawning the agent: no shell, its own process group, stdout/stderr drained concurrently to
//! the loop logs, timeout and Ctrl-C that terminate the whole group (SIGTERM, grace, SIGKILL),
//! and no wait on a pipe that a leftover grandchild keeps open.

use std::fs::File;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

/// Bytes of stderr kept in memory for the analyzer (the whole stream goes to the `.err` log).
pub const STDERR_KEEP: usize = 64 * 1024;
/// Longest stdout line passed to the live view (longer lines are logged, not displayed).
pub const LIVE_LINE_MAX: usize = 1024 * 1024;

/// One agent run to perform.
#[derive(Debug)]
pub struct Spawn<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub cwd: &'a Path,
    /// Sent on stdin, then stdin is closed.
    pub stdin: Vec<u8>,
    pub stdout_log: PathBuf,
    /// Created only when the agent writes to stderr.
    pub stderr_log: PathBuf,
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Pass stdout lines to the live callback.
    pub live: bool,
    /// Variables removed from the agent's environment (it inherits hank's otherwise).
    pub env_remove: &'a [&'a str],
    /// Variables set in the agent's environment (the profile's `[env]`).
    pub env_set: &'a [(String, String)],
}

/// What happened to the process.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Stopped because hank received SIGINT/SIGTERM.
    pub interrupted: bool,
    pub stdout_bytes: u64,
    /// The first [`STDERR_KEEP`] bytes of stderr.
    pub stderr_head: Vec<u8>,
    pub stderr_bytes: u64,
    pub duration: Duration,
    /// A process of the agent's group outlived it and had to be terminated.
    pub leftovers_killed: bool,
}

/// Creates (truncates) a log file with mode 0600, never following a symlink at `path`.
pub fn create_log(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}

/// The kernel start time of `pid` (field 22 of `/proc/PID/stat`), to recognise a process
/// group leader again without risking a reused PID. `None` where /proc is unavailable.
#[must_use]
pub fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Stops a process group left over by a previous hank that was killed with SIGKILL, if its
/// leader is still the same process (same start time). Returns true when it had to.
pub fn stop_orphan_group(pgid: i32, ticks: u64) -> bool {
    if pgid <= 1 || start_ticks(pgid) != Some(ticks) {
        return false;
    }
    signal_group(pgid, Signal::SIGTERM);
    let start = Instant::now();
    while start_ticks(pgid) == Some(ticks) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    signal_group(pgid, Signal::SIGKILL);
    true
}

fn signal_group(pgid: i32, sig: Signal) -> bool {
    killpg(Pid::from_raw(pgid), sig).is_ok()
}

/// Runs the agent. `cancel` counts the user's interrupts (1 = stop gracefully, 2 = now);
/// `on_line` sees each stdout line when `spawn.live` is set.
pub async fn run(
    spawn: Spawn<'_>,
    cancel: watch::Receiver<u32>,
    on_line: impl FnMut(&[u8]),
) -> std::io::Result<RunOutcome> {
    run_with_hook(spawn, cancel, |_| {}, on_line).await
}

/// [`run`], plus `on_spawn(pgid)` called right after the agent started (the loop records the
/// group so that a later start can stop it if hank itself is killed with SIGKILL).
pub async fn run_with_hook(
    spawn: Spawn<'_>,
    mut cancel: watch::Receiver<u32>,
    on_spawn: impl FnOnce(i32),
    mut on_line: impl FnMut(&[u8]),
) -> std::io::Result<RunOutcome> {
    let started = Instant::now();
    let stdout_file = create_log(&spawn.stdout_log)?;
    let mut command = tokio::process::Command::new(spawn.program);
    // PWD names the folder the agent runs in (some CLIs, e.g. opencode, trust PWD over the
    // process's real working directory).
    command.env("PWD", spawn.cwd);
    for (key, value) in spawn.env_set {
        command.env(key, value);
    }
    for key in spawn.env_remove {
        command.env_remove(key);
    }
    let mut child = command
        .args(spawn.args)
        .current_dir(spawn.cwd)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .unwrap_or(0);
    if pgid > 0 {
        on_spawn(pgid);
    }

    if let Some(mut stdin) = child.stdin.take() {
        let prompt = spawn.stdin;
        tokio::spawn(async move {
            // The agent may exit without reading stdin: a broken pipe is not an error.
            let _ = stdin.write_all(&prompt).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (line_tx, mut line_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let stdout_task = child.stdout.take().map(|out| {
        let tx = spawn.live.then_some(line_tx.clone());
        tokio::spawn(drain_stdout(out, stdout_file, tx))
    });
    drop(line_tx);
    let stderr_task = child
        .stderr
        .take()
        .map(|err| tokio::spawn(drain_stderr(err, spawn.stderr_log.clone())));

    let mut outcome = RunOutcome::default();
    let deadline = tokio::time::sleep(spawn.timeout);
    tokio::pin!(deadline);
    let mut lines_open = true;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            () = &mut deadline => {
                outcome.timed_out = true;
                break terminate(&mut child, pgid, spawn.grace, &mut cancel).await?;
            }
            changed = cancel.changed() => {
                if changed.is_ok() && *cancel.borrow() > 0 {
                    outcome.interrupted = true;
                    break terminate(&mut child, pgid, spawn.grace, &mut cancel).await?;
                }
            }
            line = line_rx.recv(), if lines_open => match line {
                Some(line) => on_line(&line),
                None => lines_open = false,
            },
        }
    };
    outcome.exit_code = status.code();
    outcome.signal = status.signal();

    // Anything left in the agent's group (a background server, an MCP helper, a grandchild
    // holding stdout) is terminated the same way; never wait forever on its pipes.
    if pgid > 0 && signal_group(pgid, Signal::SIGTERM) {
        outcome.leftovers_killed = true;
    }
    let readers = async {
        let out = match stdout_task {
            Some(t) => t.await.unwrap_or(Ok(0)).unwrap_or(0),
            None => 0,
        };
        let err = match stderr_task {
            Some(t) => t
                .await
                .unwrap_or(Ok((Vec::new(), 0)))
                .unwrap_or((Vec::new(), 0)),
            None => (Vec::new(), 0),
        };
        (out, err)
    };
    tokio::pin!(readers);
    let grace_end = tokio::time::sleep(spawn.grace);
    tokio::pin!(grace_end);
    let mut killed = false;
    let hard_end = tokio::time::sleep(spawn.grace + Duration::from_secs(2));
    tokio::pin!(hard_end);
    let (out_bytes, (err_head, err_bytes)) = loop {
        tokio::select! {
            res = &mut readers => break res,
            line = line_rx.recv(), if lines_open => match line {
                Some(line) => on_line(&line),
                None => lines_open = false,
            },
            () = &mut grace_end, if !killed => {
                killed = true;
                if pgid > 0 {
                    signal_group(pgid, Signal::SIGKILL);
                }
            }
            () = &mut hard_end => break (0, (Vec::new(), 0)),
        }
    };
    while let Ok(line) = line_rx.try_recv() {
        on_line(&line);
    }
    outcome.stdout_bytes = out_bytes;
    outcome.stderr_head = err_head;
    outcome.stderr_bytes = err_bytes;
    outcome.duration = started.elapsed();
    Ok(outcome)
}

/// SIGTERM to the group, wait up to `grace` (or until a second interrupt), then SIGKILL.
async fn terminate(
    child: &mut tokio::process::Child,
    pgid: i32,
    grace: Duration,
    cancel: &mut watch::Receiver<u32>,
) -> std::io::Result<std::process::ExitStatus> {
    if pgid > 0 {
        signal_group(pgid, Signal::SIGTERM);
    }
    let grace_timer = tokio::time::sleep(grace);
    tokio::pin!(grace_timer);
    loop {
        tokio::select! {
            status = child.wait() => return status,
            () = &mut grace_timer => break,
            changed = cancel.changed() => {
                if changed.is_err() || *cancel.borrow() >= 2 {
                    break;
                }
            }
        }
    }
    if pgid > 0 {
        signal_group(pgid, Signal::SIGKILL);
    }
    child.start_kill().ok();
    child.wait().await
}

async fn drain_stdout(
    mut out: impl AsyncRead + Unpin,
    mut file: File,
    live: Option<mpsc::UnboundedSender<Vec<u8>>>,
) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    let mut line: Vec<u8> = Vec::new();
    let mut overlong = false;
    loop {
        let n = out.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n as u64;
        file.write_all(&buf[..n])?;
        if let Some(tx) = &live {
            for chunk in buf[..n].split_inclusive(|b| *b == b'\n') {
                let ends = chunk.last() == Some(&b'\n');
                if !overlong {
                    line.extend_from_slice(chunk);
                    if line.len() > LIVE_LINE_MAX {
                        overlong = true;
                        line = Vec::new();
                    }
                }
                if ends {
                    if !overlong {
                        let _ = tx.send(std::mem::take(&mut line));
                    }
                    overlong = false;
                    line.clear();
                }
            }
        }
    }
    if let Some(tx) = &live
        && !line.is_empty()
        && !overlong
    {
        let _ = tx.send(line);
    }
    file.flush()?;
    Ok(total)
}

async fn drain_stderr(
    mut err: impl AsyncRead + Unpin,
    path: PathBuf,
) -> std::io::Result<(Vec<u8>, u64)> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut head = Vec::new();
    let mut total = 0u64;
    let mut file: Option<File> = None;
    loop {
        let n = err.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if head.len() < STDERR_KEEP {
            let take = n.min(STDERR_KEEP - head.len());
            head.extend_from_slice(&buf[..take]);
        }
        if file.is_none() {
            file = Some(create_log(&path)?);
        }
        if let Some(f) = file.as_mut() {
            f.write_all(&buf[..n])?;
        }
    }
    Ok((head, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Alive and not a zombie (the container's PID 1 may not reap orphans).
    pub(crate) fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()
                    .map(|r| !r.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    }

    /// Waits up to 2 s for `pid` to be gone (exit is not instantaneous after the pipe closes).
    fn gone(pid: i32) -> bool {
        let start = Instant::now();
        while alive(pid) {
            if start.elapsed() > Duration::from_secs(2) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    fn read_pid(path: &Path) -> i32 {
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn sh(dir: &Path, script: &str, timeout: Duration, live: bool) -> (RunOutcome, Vec<Vec<u8>>) {
        let args = vec!["-c".to_string(), script.to_string()];
        let spawn = Spawn {
            program: Path::new("/bin/sh"),
            args: &args,
            cwd: dir,
            stdin: b"hello prompt".to_vec(),
            stdout_log: dir.join("out"),
            stderr_log: dir.join("err"),
            timeout,
            grace: Duration::from_millis(500),
            live,
            env_remove: &[],
            env_set: &[],
        };
        let (_tx, rx) = watch::channel(0u32);
        let mut lines = Vec::new();
        let outcome = rt()
            .block_on(run(spawn, rx, |l| lines.push(l.to_vec())))
            .unwrap();
        (outcome, lines)
    }

    #[test]
    fn stdin_reaches_the_child_and_outputs_are_logged() {
        let dir = tempfile::tempdir().unwrap();
        let (o, lines) = sh(
            dir.path(),
            "cat; echo; echo oops >&2; exit 3",
            Duration::from_secs(10),
            true,
        );
        assert_eq!(o.exit_code, Some(3));
        assert_eq!(
            std::fs::read(dir.path().join("out")).unwrap(),
            b"hello prompt\n"
        );
        assert_eq!(std::fs::read(dir.path().join("err")).unwrap(), b"oops\n");
        assert_eq!(o.stderr_head, b"oops\n");
        assert_eq!(lines, vec![b"hello prompt\n".to_vec()]);
    }

    #[test]
    fn no_stderr_file_when_stderr_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let (o, _) = sh(dir.path(), "exit 0", Duration::from_secs(10), false);
        assert_eq!(o.exit_code, Some(0));
        assert!(!dir.path().join("err").exists());
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("gc.pid");
        let script = format!("sleep 300 & echo $! > {}; sleep 300", pidfile.display());
        let (o, _) = sh(dir.path(), &script, Duration::from_millis(500), false);
        assert!(o.timed_out);
        assert!(gone(read_pid(&pidfile)), "grandchild survived");
    }

    #[test]
    fn a_grandchild_holding_stdout_does_not_hang_the_loop() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("gc.pid");
        let script = format!("sleep 300 & echo $! > {}; echo done", pidfile.display());
        let (o, _) = sh(dir.path(), &script, Duration::from_secs(60), false);
        assert_eq!(o.exit_code, Some(0));
        assert!(o.leftovers_killed);
        assert!(o.duration < Duration::from_secs(30));
        assert!(gone(read_pid(&pidfile)), "grandchild survived");
    }

    #[test]
    fn interrupt_terminates_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let args = vec!["-c".to_string(), "sleep 300".to_string()];
        let spawn = Spawn {
            program: Path::new("/bin/sh"),
            args: &args,
            cwd: dir.path(),
            stdin: Vec::new(),
            stdout_log: dir.path().join("out"),
            stderr_log: dir.path().join("err"),
            timeout: Duration::from_secs(300),
            grace: Duration::from_secs(5),
            live: false,
            env_remove: &[],
            env_set: &[],
        };
        let (tx, rx) = watch::channel(0u32);
        let o = rt()
            .block_on(async {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let _ = tx.send(1);
                    tokio::time::sleep(Duration::from_secs(60)).await;
                });
                run(spawn, rx, |_| {}).await
            })
            .unwrap();
        assert!(o.interrupted);
        assert!(o.duration < Duration::from_secs(5));
    }

    #[test]
    fn missing_program_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let spawn = Spawn {
            program: Path::new("/nonexistent/claude"),
            args: &[],
            cwd: dir.path(),
            stdin: Vec::new(),
            stdout_log: dir.path().join("out"),
            stderr_log: dir.path().join("err"),
            timeout: Duration::from_secs(1),
            grace: Duration::from_secs(1),
            live: false,
            env_remove: &[],
            env_set: &[],
        };
        let (_tx, rx) = watch::channel(0u32);
        assert!(rt().block_on(run(spawn, rx, |_| {})).is_err());
    }
}
