//! The one place the forge layer starts a program (`gh`, `glab`, `curl`): no shell, its own
//! process group, stdin from bytes (request bodies, curl's config — never a token in argv),
//! output bounded, the whole group killed at the timeout. Kept in one small function so the
//! process layer (`src/proc/`) can take it over.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{HankError, Result};

/// Most bytes kept of a program's stdout or stderr.
pub const OUTPUT_LIMIT: u64 = 8 * 1024 * 1024;

/// A finished program.
#[derive(Debug, Clone)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Output {
    /// It exited 0.
    #[must_use]
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs `program args…` in `dir` with `stdin` as its input and the environment of hank
/// (the user's `GH_*`, `GITLAB_*` and proxy variables reach it as they are).
///
/// # Errors
/// It cannot be started, it ran longer than `timeout`, or hank received SIGINT/SIGTERM/SIGHUP
/// (exit 130) while it ran: then its process group is killed.
pub fn run(
    program: &Path,
    args: &[&str],
    stdin: &[u8],
    dir: &Path,
    timeout: Duration,
) -> Result<Output> {
    let name = program.file_name().map_or_else(
        || program.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("GH_PROMPT_DISABLED", "1")
        .env("GH_NO_UPDATE_NOTIFIER", "1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| HankError::Tool(format!("could not start `{name}`: {e}")))?;
    let pid = i32::try_from(child.id()).unwrap_or(0);
    let input = stdin.to_vec();
    let writer = child.stdin.take().map(|mut w| {
        std::thread::spawn(move || {
            let _ = w.write_all(&input);
        })
    });
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(p) = pipe {
                let _ = p.take(OUTPUT_LIMIT).read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() >= timeout => {
                if pid > 0 {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = child.wait();
                return Err(HankError::Tool(format!(
                    "`{name}` did not finish within {}s and was stopped",
                    timeout.as_secs()
                )));
            }
            Ok(None) if crate::agent::signals::received() != 0 => {
                if pid > 0 {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = child.wait();
                return Err(HankError::WithCode {
                    code: crate::exit::INTERRUPTED,
                    message: format!("interrupted while `{name}` ran; it was stopped"),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(HankError::Tool(format!("waiting for `{name}`: {e}"))),
        }
    };
    if let Some(w) = writer {
        let _ = w.join();
    }
    let stdout = out.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    Ok(Output {
        code: status.code(),
        stdout,
        stderr,
    })
}
