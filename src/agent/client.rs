//! Which Claude Code release the agent command is, and whether hank is tested with it.
//!
//! The tested range lives in one place, `scripts/claude-versions.env`, embedded here: the
//! install script and `.ci/run` read the same file. The pure part parses and compares
//! versions; [`probe`] asks the client (`claude --version`, no shell, bounded in time).

use std::cmp::Ordering;
use std::fmt;
use std::path::Path;
use std::time::Duration;

/// `scripts/claude-versions.env`, as built into the binary.
const VERSIONS_FILE: &str = include_str!("../../scripts/claude-versions.env");

/// Client settings removed from the agent's environment because they fight the loop:
/// `CLAUDE_CODE_RETRY_WATCHDOG` makes the client retry and sleep through usage limits by
/// itself, inside hank's per-call timeout, where hank can neither show nor persist the wait.
pub const ENV_REMOVED: &[&str] = &["CLAUDE_CODE_RETRY_WATCHDOG"];

/// The command that upgrades a global npm install of the client.
pub const UPGRADE_COMMAND: &str = "npm install -g @anthropic-ai/claude-code@latest";

/// A client release, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Version {
    /// Reads `2.1.330` or `2.1.330 (Claude Code)` (the first word of the first line that
    /// starts with a digit; pre-release suffixes such as `-beta.1` are ignored).
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let word = text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with(|c: char| c.is_ascii_digit()))?
            .split_whitespace()
            .next()?;
        let core = word.split(['-', '+']).next()?;
        let mut parts = core.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next().unwrap_or("0").parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(Self {
            major,
            minor,
            patch,
        })
    }
}

/// The oldest and the newest release the contract suite runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestedRange {
    pub oldest: Version,
    pub newest: Version,
}

fn range_from(file: &str) -> Option<TestedRange> {
    let value = |key: &str| {
        file.lines()
            .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .find_map(|v| Version::parse(v.trim().trim_matches('"')))
    };
    Some(TestedRange {
        oldest: value("CLAUDE_OLDEST")?,
        newest: value("CLAUDE_NEWEST")?,
    })
}

/// The tested range built into this binary.
#[must_use]
pub fn tested_range() -> TestedRange {
    // The file is part of the source tree and a unit test parses it, so the fallback is
    // only reached by a broken build; it names the same releases.
    range_from(VERSIONS_FILE).unwrap_or(TestedRange {
        oldest: Version {
            major: 2,
            minor: 1,
            patch: 197,
        },
        newest: Version {
            major: 2,
            minor: 1,
            patch: 330,
        },
    })
}

/// Where a client stands against the tested range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Older than the oldest tested release: `hank run` refuses it.
    TooOld,
    /// Inside the tested range.
    Tested,
    /// Newer than the newest tested release: it runs, with a note.
    Newer,
}

impl TestedRange {
    #[must_use]
    pub fn support(&self, v: Version) -> Support {
        match (v.cmp(&self.oldest), v.cmp(&self.newest)) {
            (Ordering::Less, _) => Support::TooOld,
            (_, Ordering::Greater) => Support::Newer,
            _ => Support::Tested,
        }
    }

    /// One line for `hank doctor` and the run's warnings.
    #[must_use]
    pub fn describe(&self, v: Version) -> String {
        match self.support(v) {
            Support::Tested => format!(
                "Claude Code {v}: inside the tested range {}–{}",
                self.oldest, self.newest
            ),
            Support::Newer => format!(
                "Claude Code {v}: newer than the newest tested release {} (tested {}–{}); \
                 it should work, report anything odd",
                self.newest, self.oldest, self.newest
            ),
            Support::TooOld => format!(
                "Claude Code {v} is older than the oldest supported release {} (tested {}–{}); \
                 upgrade: {UPGRADE_COMMAND}",
                self.oldest, self.oldest, self.newest
            ),
        }
    }
}

/// What `PROGRAM [LEADING_ARGS] --version` printed on its first line, or why nothing usable
/// came back. Bounded by `limit`: the probe runs in its own process group, and the whole group
/// is killed past the limit, also when the program exits but a child of it keeps stdout open.
pub fn probe(program: &Path, leading_args: &[String], limit: Duration) -> Result<String, String> {
    probe_with(program, leading_args, &["--version".to_owned()], limit)
}

/// [`probe`] with the version arguments of a profile (`version_args`).
pub fn probe_with(
    program: &Path,
    leading_args: &[String],
    version_args: &[String],
    limit: Duration,
) -> Result<String, String> {
    let name = program.display();
    // The first line is all that is needed; a version line is far shorter than the cap.
    let done = crate::proc::Cmd::new(program)
        .args(leading_args)
        .args(version_args)
        .timeout(limit)
        .stdout_max(64 * 1024)
        .run()
        .map_err(|e| match e {
            crate::proc::RunError::Spawn(e) => format!("{name} could not be started: {e}"),
            _ => format!(
                "{name} --version did not answer within {} s",
                limit.as_secs()
            ),
        })?;
    let (status, bytes) = (done.status, done.stdout);
    let text = String::from_utf8_lossy(&bytes);
    let first = text.lines().next().unwrap_or("").trim().to_string();
    if status.success() && !first.is_empty() {
        Ok(first)
    } else {
        Err(format!(
            "{name} --version exited with {status} and printed {first:?}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn parses_what_clients_print() {
        let cases = [
            ("2.1.330 (Claude Code)", Some((2, 1, 330))),
            ("2.1.197 (Claude Code)\n", Some((2, 1, 197))),
            ("1.0.128", Some((1, 0, 128))),
            ("  2.2.0-beta.3 (Claude Code)", Some((2, 2, 0))),
            ("warning: node 20\n2.1.330 (Claude Code)", Some((2, 1, 330))),
            ("2.1", Some((2, 1, 0))),
            ("Claude Code", None),
            ("", None),
            ("2.x.1", None),
            ("1.2.3.4", None),
        ];
        for (text, want) in cases {
            let got = Version::parse(text).map(|x| (x.major, x.minor, x.patch));
            assert_eq!(got, want, "{text:?}");
        }
    }

    #[test]
    fn the_embedded_range_is_the_versions_file() {
        let r = range_from(VERSIONS_FILE).expect("scripts/claude-versions.env parses");
        assert_eq!(r, tested_range());
        assert!(r.oldest < r.newest);
    }

    #[test]
    fn probe_reads_the_first_line_and_never_hangs() {
        let dir = std::env::temp_dir().join(format!("hank-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = |name: &str, body: &str| {
            use std::os::unix::fs::PermissionsExt;
            let p = dir.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let limit = Duration::from_secs(2);
        // (the script, its body — none: no such file —, the first line or part of the error)
        let cases: &[(&str, Option<&str>, std::result::Result<&str, &str>)] = &[
            (
                "ok",
                Some("echo '2.1.330 (Claude Code)'; echo extra"),
                Ok("2.1.330 (Claude Code)"),
            ),
            (
                "fails",
                Some("echo 'unknown option'; exit 1"),
                Err("exited with"),
            ),
            // Exits at once but leaves a child holding stdout: the group is killed at the limit.
            ("holder", Some("echo 2.1.200; sleep 300 &"), Ok("2.1.200")),
            ("hangs", Some("sleep 300"), Err("did not answer")),
            ("missing", None, Err("could not be started")),
        ];
        for (name, body, want) in cases {
            let path = body.map_or_else(|| dir.join(name), |b| script(name, b));
            match (probe(&path, &[], limit), want) {
                (Ok(line), Ok(w)) => assert_eq!(line, *w, "{name}"),
                (Err(e), Err(w)) => assert!(e.contains(w), "{name}: {e}"),
                (got, _) => panic!("{name}: {got:?}, expected {want:?}"),
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn support_against_the_range() {
        let r = TestedRange {
            oldest: v("2.1.197"),
            newest: v("2.1.330"),
        };
        assert_eq!(r.support(v("2.1.196")), Support::TooOld);
        assert_eq!(r.support(v("1.0.99")), Support::TooOld);
        assert_eq!(r.support(v("2.1.197")), Support::Tested);
        assert_eq!(r.support(v("2.1.257")), Support::Tested);
        assert_eq!(r.support(v("2.1.330")), Support::Tested);
        assert_eq!(r.support(v("2.1.331")), Support::Newer);
        assert_eq!(r.support(v("3.0.0")), Support::Newer);
        assert!(r.describe(v("2.0.1")).contains(UPGRADE_COMMAND));
        assert!(r.describe(v("2.1.200")).contains("inside the tested range"));
    }
}
