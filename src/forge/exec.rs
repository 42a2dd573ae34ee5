//! The one place the forge layer starts a program (`gh`, `glab`): no shell, its own
//! process group, stdin from bytes (request bodies — never a token in argv),
//! output bounded, the whole group killed at the timeout — through the process layer
//! ([`crate::proc::Cmd`]).

use std::path::Path;
use std::time::Duration;

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
    let limit = usize::try_from(OUTPUT_LIMIT).unwrap_or(usize::MAX);
    let done = crate::proc::Cmd::new(program)
        .args(args)
        .cwd(dir)
        .env("GH_PROMPT_DISABLED", "1")
        .env("GH_NO_UPDATE_NOTIFIER", "1")
        .env("NO_COLOR", "1")
        .stdin(stdin.to_vec())
        .stdout_max(limit)
        .stderr_max(limit)
        .timeout(timeout)
        .interruptible()
        .run()
        .map_err(|e| match e {
            crate::proc::RunError::Spawn(e) => {
                HankError::Tool(format!("could not start `{name}`: {e}"))
            }
            crate::proc::RunError::Timeout => HankError::Tool(format!(
                "`{name}` did not finish within {}s and was stopped",
                timeout.as_secs()
            )),
            crate::proc::RunError::Interrupted => HankError::WithCode {
                code: crate::exit::INTERRUPTED,
                message: format!("interrupted while `{name}` ran; it was stopped"),
            },
            crate::proc::RunError::Io(e) => HankError::Tool(format!("waiting for `{name}`: {e}")),
        })?;
    let stdout = done.stdout;
    let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
    let status = done.status;
    Ok(Output {
        code: status.code(),
        stdout,
        stderr,
    })
}
