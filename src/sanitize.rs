//! Text from the agent made safe for a terminal: control characters and escape sequences
//! removed. **\[pure\]**
//!
//! The agent's words reach the user's terminal in the loop summary, the `--live` view,
//! warnings and errors that quote it, `hank status`, `hank monitor` and `hank analyze`. A raw
//! `ESC ] 0 ; … BEL` would retitle the terminal, `ESC [ 31 m` recolour it, a `\r` overwrite
//! the line. [`for_terminal`] is the one function every such output goes through:
//! - escape sequences are removed whole: CSI (`ESC [` … final byte, and the 8-bit `\u{9b}`),
//!   OSC (`ESC ]` … BEL or `ESC \`), DCS/SOS/PM/APC (`ESC P|X|^|_` … `ESC \`) and two-byte
//!   `ESC x`;
//! - every other C0 control, DEL and every C1 control (`\u{80}`–`\u{9f}`) is removed, and so
//!   are the bidirectional overrides (`\u{202a}`–`\u{202e}`, `\u{2066}`–`\u{2069}`) that
//!   reorder what the user reads;
//! - `\n` and `\t` are kept when [`Lines::Keep`] (a multi-line view), else each becomes a
//!   space; `\r\n` is a newline.
//!
//! Data outputs (`--json`, status.json) are JSON: serde escapes control characters there.
//!
//! The two cuts every bounded text uses are here too: [`cut_bytes`] (a byte budget, on a
//! character boundary) and [`cut_chars`] (a character budget, the cut marked with `…`).

use std::borrow::Cow;

/// Whether the output may span lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// Keep `\n` and `\t` (multi-line views: the live text, a summary body).
    Keep,
    /// One line: `\n` and `\t` become spaces.
    Join,
}

fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn needs_work(text: &str) -> bool {
    text.chars().any(|c| c.is_control() || is_bidi(c))
}

/// `text` without control characters and escape sequences (see the module doc).
#[must_use]
pub fn for_terminal(text: &str, lines: Lines) -> Cow<'_, str> {
    if !needs_work(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(if lines == Lines::Keep { c } else { ' ' }),
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    continue;
                }
                // A lone carriage return would overwrite the line: a line break instead.
                out.push(if lines == Lines::Keep { '\n' } else { ' ' });
            }
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // A two-byte sequence (ESC 7, ESC c, …) or a lone ESC at the end.
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if c.is_control() || is_bidi(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Skips the rest of a CSI sequence: parameter and intermediate bytes, then one final byte
/// (`@`–`~`). Stops early at anything else (the sequence was broken).
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(&c) = chars.peek() {
        match c {
            '\u{30}'..='\u{3f}' | '\u{20}'..='\u{2f}' => {
                chars.next();
            }
            '\u{40}'..='\u{7e}' => {
                chars.next();
                return;
            }
            _ => return,
        }
    }
}

/// Skips a string sequence (OSC, DCS, …) up to its terminator: BEL, `ESC \` or the 8-bit ST.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

/// `s` cut to at most `max` bytes, on a character boundary.
#[must_use]
pub fn cut_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// At most `max` characters of `s`; a cut is marked with `…` (one of the `max`).
#[must_use]
pub fn cut_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// [`for_terminal`] as an owned one-line string.
#[must_use]
pub fn line(text: &str) -> String {
    for_terminal(text, Lines::Join).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        use Lines::{Join, Keep};
        // (input, mode, expected)
        let cases: &[(&str, Lines, &str)] = &[
            ("plain text", Join, "plain text"),
            ("ünïcödé ✓ 日本", Join, "ünïcödé ✓ 日本"),
            ("\u{1b}]0;pwned\u{7}title", Join, "title"),
            ("\u{1b}]0;pwned\u{1b}\\title", Join, "title"),
            (
                "\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\",
                Join,
                "link",
            ),
            ("\u{1b}[31mred\u{1b}[0m", Join, "red"),
            ("\u{1b}[1;38;2;255;0;0mx", Join, "x"),
            ("\u{1b}[?1049h\u{1b}[2J", Join, ""),
            ("\u{9b}31mred", Join, "red"),
            ("a\u{9d}0;t\u{9c}b", Join, "ab"),
            ("\u{1b}P1$qm\u{1b}\\ok", Join, "ok"),
            ("\u{1b}_apc\u{1b}\\ok", Join, "ok"),
            ("\u{1b}7saved\u{1b}8", Join, "saved"),
            ("\u{1b}c", Join, ""),
            ("ends with esc\u{1b}", Join, "ends with esc"),
            ("unterminated \u{1b}]0;title", Join, "unterminated "),
            (
                "bell\u{7} bs\u{8} nul\u{0} del\u{7f}",
                Join,
                "bell bs nul del",
            ),
            ("c1\u{85}\u{8d}x", Join, "c1x"),
            ("\u{9f}apc\u{9c}x", Join, "x"),
            ("over\rwrite", Join, "over write"),
            ("over\rwrite", Keep, "over\nwrite"),
            ("crlf\r\nline", Keep, "crlf\nline"),
            ("crlf\r\nline", Join, "crlf line"),
            ("a\nb\tc", Keep, "a\nb\tc"),
            ("a\nb\tc", Join, "a b c"),
            ("evil\u{202e}txt.exe", Join, "eviltxt.exe"),
            ("\u{2066}isolate\u{2069}", Join, "isolate"),
        ];
        for (input, mode, want) in cases {
            assert_eq!(for_terminal(input, *mode), *want, "{input:?} {mode:?}");
        }
    }

    #[test]
    fn cuts_keep_characters_whole() {
        // (text, max, cut_bytes, cut_chars)
        let cases = [
            ("", 0, "", ""),
            ("abc", 3, "abc", "abc"),
            ("abcd", 3, "abc", "ab…"),
            ("héllo", 2, "h", "h…"),
            ("héllo", 3, "hé", "hé…"),
            ("日本語", 4, "日", "日本語"),
            ("日本語", 2, "", "日…"),
            ("ab", 0, "", "…"),
        ];
        for (text, max, bytes, chars) in cases {
            assert_eq!(cut_bytes(text, max), bytes, "bytes {text:?} {max}");
            assert_eq!(cut_chars(text, max), chars, "chars {text:?} {max}");
        }
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(
            for_terminal("clean", Lines::Join),
            Cow::Borrowed(_)
        ));
        assert!(matches!(for_terminal("a\nb", Lines::Keep), Cow::Owned(_)));
    }

    #[test]
    fn output_never_holds_a_control_character() {
        let mut all = String::new();
        for c in (0u32..0x3000).filter_map(char::from_u32) {
            all.push(c);
            all.push('x');
        }
        for mode in [Lines::Join, Lines::Keep] {
            let out = for_terminal(&all, mode);
            assert!(
                out.chars()
                    .all(|c| !(is_bidi(c) || (c.is_control() && c != '\n' && c != '\t'))),
                "{mode:?}"
            );
            if mode == Lines::Join {
                assert!(!out.contains('\n') && !out.contains('\t'));
            }
        }
    }
}
