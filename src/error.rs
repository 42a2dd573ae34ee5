//! The error type of every command, and its exit code.

use std::path::PathBuf;

use crate::exit;

/// An error that ends a hank command. Messages are lowercase sentence fragments; the
/// top level prints `error: {message}` (plus a hint when there is one).
#[derive(Debug, thiserror::Error)]
pub enum HankError {
    /// Bad command-line arguments, bad config value, unusable project layout.
    #[error("{message}")]
    Usage {
        message: String,
        hint: Option<String>,
    },
    /// A file could not be read or written.
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file hank reads holds something it cannot use (the message says what it expected).
    #[error("{} {problem}", path.display())]
    Unreadable { path: PathBuf, problem: String },
    /// Another hank loop holds the project's lock (`holder` is its PID when known).
    #[error("another hank loop is already running in this project ({} holds {})", holder.as_deref().map_or_else(|| "another process".to_string(), |p| format!("PID {p}")), path.display())]
    Locked {
        path: PathBuf,
        holder: Option<String>,
    },
    /// An external program hank runs (`bd`, `gh`, `tmux`, the terminal) failed or printed
    /// something unusable; the message names it.
    #[error("{0}")]
    Tool(String),
    /// The user stopped the command before it changed anything.
    #[error("{0}")]
    Cancelled(String),
    /// Something that should not happen (a bug), or the process environment failed under
    /// hank (no async runtime, no signal handlers).
    #[error("internal error: {0}")]
    Internal(String),
    /// The command ends with a specific code and has already reported why
    /// (e.g. `enable` on an already enabled project → 2).
    #[error("{message}")]
    WithCode { code: u8, message: String },
}

impl HankError {
    /// A usage/config error without a hint.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::Usage {
            message: message.into(),
            hint: None,
        }
    }

    /// A usage/config error with a hint line.
    pub fn usage_hint(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::Usage {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    /// Wraps an I/O error with what was being done and to which file.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// The process exit code for this error.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::WithCode { code, .. } => *code,
            _ => exit::ERROR,
        }
    }

    /// The message with its hint in parentheses, for one-line reports (`--json`).
    #[must_use]
    pub fn with_hint(&self) -> String {
        match self.hint() {
            Some(hint) => format!("{self} ({hint})"),
            None => self.to_string(),
        }
    }

    /// A hint to print below the message, if any.
    #[must_use]
    pub fn hint(&self) -> Option<&str> {
        match self {
            Self::Usage { hint, .. } => hint.as_deref(),
            Self::Locked { .. } => Some("watch it with `hank monitor`, or stop it first"),
            _ => None,
        }
    }
}

/// Result alias used across the crate.
pub type Result<T, E = HankError> = std::result::Result<T, E>;
