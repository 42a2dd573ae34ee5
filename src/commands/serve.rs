//! `hank serve [--port P] [--bind ADDR]`: the read-only web view ([`crate::serve`]). The
//! first line of standard output is the URL to open, with its token.

use std::net::IpAddr;

use crate::cli;
use crate::error::{HankError, Result};
use crate::serve::{Config, data::ProjectRef};
use crate::store::userdir;

/// `--port`: a number from 0 to 65535 (0 or absent: a free one).
fn port(text: Option<&str>) -> Result<u16> {
    match text {
        None => Ok(0),
        Some(t) => t.trim().parse::<u16>().map_err(|_| {
            HankError::usage(format!(
                "--port {t:?}: expected a port number from 0 to 65535 (0: a free one)"
            ))
        }),
    }
}

/// `--bind`: an IP address (default 127.0.0.1).
fn bind(text: Option<&str>) -> Result<IpAddr> {
    match text {
        None => Ok(IpAddr::from([127, 0, 0, 1])),
        Some(t) => t.trim().parse::<IpAddr>().map_err(|_| {
            HankError::usage(format!(
                "--bind {t:?}: expected an IP address such as 127.0.0.1, 0.0.0.0 or ::1 \
                 (a name is not resolved)"
            ))
        }),
    }
}

/// The project the command runs in, when it is a hank project: its per-user folder is made
/// (with its record) so it is listed, and `/` opens on it.
fn home() -> Option<ProjectRef> {
    let root = super::project_dir().ok()?;
    if !root.join(".hank").is_dir() {
        return None;
    }
    let dir = userdir::project_dir(&root).ok()?;
    let canonical = std::fs::canonicalize(&root).ok()?;
    Some(ProjectRef {
        key: dir.file_name()?.to_str()?.to_owned(),
        root: canonical,
    })
}

/// `hank serve`.
pub(crate) fn run(args: &cli::ServeArgs) -> Result<u8> {
    let (port, bind) = (port(args.port.as_deref())?, bind(args.bind.as_deref())?);
    let home = home();
    // Canonical, as the project records' paths are (a fleet worktree is recognised by it).
    let root = userdir::root()?;
    let cfg = Config {
        port,
        bind,
        state_root: std::fs::canonicalize(&root).unwrap_or(root),
        home,
    };
    if !cfg.bind.is_loopback() {
        eprintln!(
            "hank serve: listening on {} — other machines can reach it; the token in the URL \
             is required for every page",
            cfg.bind
        );
    }
    crate::serve::serve(cfg, |url| {
        super::out(&format!("{url}\n"))?;
        eprintln!("hank serve: read-only; Ctrl-C stops it");
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_flags_name_the_flag_and_what_was_expected() {
        assert_eq!(port(None).unwrap(), 0);
        assert_eq!(port(Some("8080")).unwrap(), 8080);
        let e = port(Some("99999")).unwrap_err().to_string();
        assert!(e.contains("--port") && e.contains("0 to 65535"), "{e}");
        assert_eq!(bind(None).unwrap().to_string(), "127.0.0.1");
        assert_eq!(bind(Some("::1")).unwrap().to_string(), "::1");
        let e = bind(Some("localhost")).unwrap_err().to_string();
        assert!(e.contains("--bind") && e.contains("IP address"), "{e}");
    }
}
