//! The `.hankrc` parser. **\[pure\]**
//!
//! `.hankrc` is `KEY="VALUE"` lines and `#` comments. Hank parses it itself and never hands it
//! to a shell: a value that looks like shell syntax is refused rather than expanded.

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{HankError, Result};

use super::keys;

/// One `KEY=VALUE` assignment of a `.hankrc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcEntry {
    pub value: String,
    /// 1-based line number.
    pub line: usize,
}

/// Parses `.hankrc` text. `file` names the file in errors. Accepts `KEY="VALUE"`,
/// `KEY='VALUE'`, `KEY=VALUE` (a ` #` starts a comment after an unquoted value), an optional
/// leading `export `, blank lines and `#` comments. Unknown keys are errors (a typo must not
/// silently fall back to a default), naming the line.
pub fn parse_hankrc(text: &str, file: &Path) -> Result<BTreeMap<String, RcEntry>> {
    // A byte-order mark (some Windows editors write one) is not part of the first key.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = BTreeMap::new();
    // Every bad line at once (a file with three typos is fixed in one go, not three runs).
    let mut problems: Vec<(usize, String, String)> = Vec::new();
    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        match parse_line(raw) {
            Ok(None) => {}
            Ok(Some((k, value))) => {
                out.insert(
                    k,
                    RcEntry {
                        value,
                        line: line_no,
                    },
                );
            }
            Err((what, hint)) => problems.push((line_no, what, hint)),
        }
    }
    match problems.as_slice() {
        [] => Ok(out),
        [(line_no, what, hint)] => Err(HankError::usage_hint(
            format!("{} line {line_no}: {what}", file.display()),
            hint.clone(),
        )),
        many => {
            let mut msg = format!("{}: {} lines are not settings:", file.display(), many.len());
            for (line_no, what, hint) in many {
                msg.push_str(&format!("\n  line {line_no}: {what} ({hint})"));
            }
            Err(HankError::usage_hint(
                msg,
                "lines look like KEY=\"VALUE\"; `#` starts a comment; `hank doctor` lists every key",
            ))
        }
    }
}

/// One line of `.hankrc`: `None` for a blank line or a comment, the key and its value, or
/// what is wrong and the hint.
fn parse_line(raw: &str) -> std::result::Result<Option<(String, String)>, (String, String)> {
    let line = raw.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = line.strip_prefix("export ").map_or(line, str::trim_start);
    let bad = |what: &str| {
        (
            what.to_string(),
            "lines look like KEY=\"VALUE\"; `#` starts a comment".to_string(),
        )
    };
    let Some((k, v)) = line.split_once('=') else {
        return Err(bad(&format!(
            "expected KEY=\"VALUE\", found `{}`",
            clip(line, 60)
        )));
    };
    let k = k.trim();
    if k.is_empty()
        || !k
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        return Err(bad(&format!("`{}` is not a valid key name", clip(k, 60))));
    }
    if !keys::is_known(k) {
        let hint = keys::suggest(k).map_or_else(
            || "run `hank doctor` to see every key".to_string(),
            |s| format!("did you mean {s}?"),
        );
        return Err((format!("unknown key {k}"), hint));
    }
    let v = v.trim();
    let value = if let Some(rest) = v.strip_prefix('"') {
        quoted(rest, '"').map_err(bad)?
    } else if let Some(rest) = v.strip_prefix('\'') {
        quoted(rest, '\'').map_err(bad)?
    } else {
        let v = match v.find(" #") {
            Some(i) => &v[..i],
            None => v,
        };
        if v.contains('$') || v.contains('`') {
            return Err(bad(
                "values are not expanded by a shell; write the value literally",
            ));
        }
        v.trim().to_string()
    };
    Ok(Some((k.to_string(), value)))
}

/// The value of a quoted assignment (`rest` follows the opening quote); only a comment may
/// follow the closing quote.
fn quoted(rest: &str, quote: char) -> std::result::Result<String, &'static str> {
    let Some(end) = rest.find(quote) else {
        return Err(if quote == '"' {
            "missing closing \""
        } else {
            "missing closing '"
        });
    };
    let tail = rest[end + quote.len_utf8()..].trim();
    if tail.is_empty() || tail.starts_with('#') {
        Ok(rest[..end].to_string())
    } else {
        Err("unexpected text after the closing quote")
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_and_every_bad_line_at_once() {
        let rc = parse_hankrc("\u{feff}MAX_LOOPS=5\n", Path::new(".hankrc")).unwrap();
        assert_eq!(rc["MAX_LOOPS"].value, "5");
        let e = parse_hankrc(
            "MAX_LOOP=5\nMAX_LOOPS=2\nCLAUDE_MODL=opus\nnot a line\n",
            Path::new("/p/.hankrc"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/p/.hankrc: 3 lines are not settings"), "{e}");
        for want in [
            "line 1: unknown key MAX_LOOP (did you mean MAX_LOOPS?)",
            "line 3: unknown key CLAUDE_MODL",
            "line 4: expected KEY=\"VALUE\"",
        ] {
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn forms() {
        let rc = parse_hankrc(
            "export MAX_LOOPS=5 # five\nCLAUDE_MODEL='opus'\nPROJECT_NAME=\"demo app\" # x\n\n# c\n",
            Path::new(".hankrc"),
        )
        .unwrap();
        assert_eq!(
            rc["MAX_LOOPS"],
            RcEntry {
                value: "5".into(),
                line: 1
            }
        );
        assert_eq!(rc["CLAUDE_MODEL"].value, "opus");
        assert_eq!(rc["PROJECT_NAME"].value, "demo app");
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let cases = [
            (
                "\n\nMAX_CALL_PER_HOUR=5\n",
                "/p/.hankrc line 3: unknown key MAX_CALL_PER_HOUR",
            ),
            ("MAX_LOOPS\n", "/p/.hankrc line 1: expected KEY"),
            ("MAX_LOOPS=\"5\n", "line 1: missing closing \""),
            ("MAX_LOOPS='5\n", "line 1: missing closing '"),
            (
                "MAX_LOOPS=\"5\" 6\n",
                "line 1: unexpected text after the closing quote",
            ),
            ("max_loops=5\n", "`max_loops` is not a valid key name"),
            ("CLAUDE_MODEL=$(rm -rf ~)\n", "not expanded by a shell"),
        ];
        for (text, needle) in cases {
            let err = parse_hankrc(text, Path::new("/p/.hankrc"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err:?} should contain {needle:?}");
        }
    }

    #[test]
    fn unknown_key_suggests_the_closest() {
        let err = parse_hankrc("MAX_CALL_PER_HOUR=5", Path::new(".hankrc")).unwrap_err();
        assert_eq!(err.hint(), Some("did you mean MAX_CALLS_PER_HOUR?"));
        let err = parse_hankrc("WHATEVER_THIS_IS=5", Path::new(".hankrc")).unwrap_err();
        assert_eq!(err.hint(), Some("run `hank doctor` to see every key"));
    }
}
