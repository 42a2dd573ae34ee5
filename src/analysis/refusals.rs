//! Refused file accesses in what the agent saw: the paths of `EACCES`/`EPERM`/`EROFS`
//! errors, `Permission denied`, `Operation not permitted` and `Read-only file system` in its
//! tool results, its error output and its own words.  **\[pure\]**
//!
//! Only a path that comes with the refusal is taken (`EACCES: permission denied, open
//! '/x'`, `PermissionError: [Errno 13] Permission denied: '/x'`, `touch: cannot touch '/x':
//! Permission denied`, `bash: /x: Permission denied`); a bare "Permission denied" names none.
//! Under hank's sandbox each is a `sandbox_denied` event (`effects`).

use std::sync::LazyLock;

use regex::Regex;

use super::re;

/// Paths kept from one answer.
pub const MAX_REFUSED: usize = 10;
/// Longest path kept (bytes).
const MAX_PATH: usize = 512;

/// The wording of a refusal, with the path quoted after it (Node's `EACCES: permission
/// denied, open '/x'`, Python's `Permission denied: '/x'`).
static AFTER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)(?:permission denied|operation not permitted|read-only file system)(?:,\s*[a-z_]+)?:?\s*['‘"]([^'’"\n]+)['’"]"#,
    )
});
/// A path (holding a `/`) right before the wording: `bash: /x: Permission denied`, `touch:
/// cannot touch '/x': Permission denied`, `mkdir: cannot create directory ‘/x’: …`.
static BEFORE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)(?:^|[\s'‘"])([^\s:'‘’"]*/[^\s:'‘’"]*)['’"]?:\s*(?:permission denied|operation not permitted|read-only file system)"#,
    )
});
/// A refusal worth reading further (most texts have none: one cheap test first).
static ANY: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)permission denied|operation not permitted|read-only file system"));

/// The refused paths `text` names, in order, each once (at most [`MAX_REFUSED`]).
#[must_use]
pub fn refused_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    add_refused(&mut out, text);
    out
}

/// Adds the refused paths `text` names to `out` (each once, at most [`MAX_REFUSED`] in all).
pub fn add_refused(out: &mut Vec<String>, text: &str) {
    if out.len() >= MAX_REFUSED || !ANY.is_match(text) {
        return;
    }
    for line in text.lines().filter(|l| ANY.is_match(l)) {
        let found = AFTER
            .captures_iter(line)
            .chain(BEFORE.captures_iter(line))
            .filter_map(|c| c.get(1).map(|m| (m.start(), m.as_str())))
            .collect::<Vec<_>>();
        let mut found = found;
        found.sort_by_key(|(at, _)| *at);
        for (_, path) in found {
            add_path(out, path);
            if out.len() >= MAX_REFUSED {
                return;
            }
        }
    }
}

/// Adds one refused `path` to `out` (once; at most [`MAX_REFUSED`] in all).
pub fn add_path(out: &mut Vec<String>, path: &str) {
    let path = path.trim();
    let keep = out.len() < MAX_REFUSED
        && !path.is_empty()
        && path.len() <= MAX_PATH
        && !path.contains("://")
        && !out.iter().any(|p| p == path);
    if keep {
        out.push(path.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_paths_are_read_from_every_wording() {
        let rows: &[(&str, &[&str])] = &[
            (
                "Error: EACCES: permission denied, open '/home/u/.npm/_cacache/tmp'",
                &["/home/u/.npm/_cacache/tmp"],
            ),
            (
                "Error: EPERM: operation not permitted, unlink '/etc/hosts'",
                &["/etc/hosts"],
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/opt/agent/lock'",
                &["/opt/agent/lock"],
            ),
            (
                "OSError: [Errno 30] Read-only file system: '/usr/lib/x'",
                &["/usr/lib/x"],
            ),
            (
                "touch: cannot touch '/root/x': Permission denied",
                &["/root/x"],
            ),
            (
                "mkdir: cannot create directory ‘/srv/data’: Permission denied",
                &["/srv/data"],
            ),
            (
                "/tmp/effect.sh: line 1: /home/u/blocked.txt: Permission denied",
                &["/home/u/blocked.txt"],
            ),
            ("bash: ../sibling/x: Permission denied", &["../sibling/x"]),
            (
                "/bin/sh: 1: cannot create /var/log/app.log: Permission denied",
                &["/var/log/app.log"],
            ),
            (
                "a: /x/1: Permission denied\nb: /x/1: Permission denied\nc: /x/2: Operation not permitted",
                &["/x/1", "/x/2"],
            ),
            // No path with the refusal: nothing.
            ("Permission denied (publickey).", &[]),
            ("sudo: Permission denied", &[]),
            ("the build passed", &[]),
            ("curl: (7) https://example.com/a: Permission denied", &[]),
        ];
        for (text, want) in rows {
            assert_eq!(refused_paths(text), *want, "{text}");
        }
    }

    #[test]
    fn at_most_ten_paths_are_kept() {
        let text: String = (0..30)
            .map(|i| format!("bash: /d/{i}: Permission denied\n"))
            .collect();
        let got = refused_paths(&text);
        assert_eq!(got.len(), MAX_REFUSED);
        assert_eq!(got[0], "/d/0");
    }

    /// In a stream, a tool result's refusal is read (its text or its text blocks) — never as
    /// an error of the call —, and so are stderr and the agent's own words.
    #[test]
    fn an_answer_names_the_refusals_of_its_tool_results_and_its_error_output() {
        let stream = concat!(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"Error: EACCES: permission denied, open '/home/u/.npm/x'","is_error":true}]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":[{"type":"text","text":"touch: cannot touch '/srv/y': Permission denied"}]}]}}"#,
            "\n",
            r#"{"type":"result","subtype":"success","is_error":false,"result":"Done, but /opt/z: Read-only file system","total_cost_usd":0.1}"#,
            "\n",
        );
        let a = crate::analysis::analyze_as(
            stream.as_bytes(),
            b"bash: /var/w: Operation not permitted\n",
            &crate::analysis::RunFacts {
                exit_code: Some(0),
                ..crate::analysis::RunFacts::default()
            },
            &crate::analysis::Clock::utc(jiff::Timestamp::UNIX_EPOCH),
            crate::analysis::AskedFormat::StreamJson,
        );
        assert_eq!(a.outcome, crate::analysis::Outcome::Success, "{a:?}");
        assert_eq!(
            a.refused_paths,
            ["/home/u/.npm/x", "/srv/y", "/var/w", "/opt/z"]
        );
    }
}
