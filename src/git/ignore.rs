//! `.gitignore` rules as git reads them (pure): git's `wildmatch`, the pattern syntax of
//! `gitignore(5)` and the order in which the lists decide. Used by the in-process status
//! reader ([`super::snapshot`]); no file is read here.

/// The outcome of [`wildmatch`]'s inner matcher (git's `WM_*` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wm {
    Match,
    NoMatch,
    AbortAll,
    AbortToStarStar,
}

/// The byte at `i`, 0 past the end (git's matcher works on NUL-terminated strings).
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn is_glob_special(c: u8) -> bool {
    matches!(c, b'*' | b'?' | b'[' | b'\\')
}

/// Whether `text` matches the glob `pattern` with git's `wildmatch` rules; `pathname` is
/// `WM_PATHNAME` (`*`, `?` and classes never match `/`; `**` between slashes matches any
/// number of directories). Case-sensitive (`core.ignoreCase` is off on Linux).
#[must_use]
pub fn wildmatch(pattern: &[u8], text: &[u8], pathname: bool) -> bool {
    dowild(pattern, 0, text, 0, pathname) == Wm::Match
}

/// A port of git's `dowild` (wildmatch.c), indices in place of pointers.
#[allow(clippy::too_many_lines)]
fn dowild(pat: &[u8], mut p: usize, text: &[u8], mut t: usize, pathname: bool) -> Wm {
    while at(pat, p) != 0 {
        let mut p_ch = at(pat, p);
        let t_ch = at(text, t);
        if t_ch == 0 && p_ch != b'*' {
            return Wm::AbortAll;
        }
        match p_ch {
            b'?' => {
                if pathname && t_ch == b'/' {
                    return Wm::NoMatch;
                }
            }
            b'*' => {
                p += 1;
                let match_slash;
                if at(pat, p) == b'*' {
                    let prev = p.checked_sub(2);
                    while at(pat, p) == b'*' {
                        p += 1;
                    }
                    let after = at(pat, p);
                    if prev.is_none_or(|i| at(pat, i) == b'/')
                        && (after == 0
                            || after == b'/'
                            || (after == b'\\' && at(pat, p + 1) == b'/'))
                    {
                        if after == b'/' && dowild(pat, p + 1, text, t, pathname) == Wm::Match {
                            return Wm::Match;
                        }
                        match_slash = true;
                    } else {
                        match_slash = false;
                    }
                } else {
                    match_slash = !pathname;
                }
                if at(pat, p) == 0 {
                    if !match_slash && text[t.min(text.len())..].contains(&b'/') {
                        return Wm::NoMatch;
                    }
                    return Wm::Match;
                } else if !match_slash && at(pat, p) == b'/' {
                    // One asterisk followed by a slash matches the rest of this directory.
                    match text[t.min(text.len())..].iter().position(|&c| c == b'/') {
                        Some(i) => t += i,
                        None => return Wm::NoMatch,
                    }
                    // The slash is consumed by the loop.
                    p += 1;
                    t += 1;
                    continue;
                }
                let mut t_ch = at(text, t);
                loop {
                    if t_ch == 0 {
                        break;
                    }
                    if !is_glob_special(at(pat, p)) {
                        let want = at(pat, p);
                        loop {
                            t_ch = at(text, t);
                            if t_ch == 0 || (!match_slash && t_ch == b'/') || t_ch == want {
                                break;
                            }
                            t += 1;
                        }
                        if t_ch != want {
                            return if match_slash {
                                Wm::AbortAll
                            } else {
                                Wm::AbortToStarStar
                            };
                        }
                    }
                    let matched = dowild(pat, p, text, t, pathname);
                    if matched != Wm::NoMatch {
                        if !match_slash || matched != Wm::AbortToStarStar {
                            return matched;
                        }
                    } else if !match_slash && t_ch == b'/' {
                        return Wm::AbortToStarStar;
                    }
                    t += 1;
                    t_ch = at(text, t);
                }
                return Wm::AbortAll;
            }
            b'[' => {
                p += 1;
                p_ch = at(pat, p);
                if p_ch == b'^' {
                    p_ch = b'!';
                }
                let negated = p_ch == b'!';
                if negated {
                    p += 1;
                    p_ch = at(pat, p);
                }
                let mut prev_ch = 0u8;
                let mut matched = false;
                loop {
                    if p_ch == 0 {
                        return Wm::AbortAll;
                    }
                    if p_ch == b'\\' {
                        p += 1;
                        p_ch = at(pat, p);
                        if p_ch == 0 {
                            return Wm::AbortAll;
                        }
                        if t_ch == p_ch {
                            matched = true;
                        }
                    } else if p_ch == b'-'
                        && prev_ch != 0
                        && at(pat, p + 1) != 0
                        && at(pat, p + 1) != b']'
                    {
                        p += 1;
                        p_ch = at(pat, p);
                        if p_ch == b'\\' {
                            p += 1;
                            p_ch = at(pat, p);
                            if p_ch == 0 {
                                return Wm::AbortAll;
                            }
                        }
                        if t_ch <= p_ch && t_ch >= prev_ch {
                            matched = true;
                        }
                        p_ch = 0;
                    } else if p_ch == b'[' && at(pat, p + 1) == b':' {
                        let s = p + 2;
                        let mut q = s;
                        while at(pat, q) != 0 && at(pat, q) != b']' {
                            q += 1;
                        }
                        if at(pat, q) == 0 {
                            return Wm::AbortAll;
                        }
                        if q == s || at(pat, q - 1) != b':' {
                            // No ":]": a plain `[` in the set.
                            p_ch = b'[';
                            if t_ch == p_ch {
                                matched = true;
                            }
                            prev_ch = p_ch;
                            p += 1;
                            p_ch = at(pat, p);
                            if p_ch == b']' {
                                break;
                            }
                            continue;
                        }
                        let class = &pat[s..q - 1];
                        let c = t_ch;
                        let hit = match class {
                            b"alnum" => c.is_ascii_alphanumeric(),
                            b"alpha" => c.is_ascii_alphabetic(),
                            b"blank" => c == b' ' || c == b'\t',
                            b"cntrl" => c.is_ascii_control(),
                            b"digit" => c.is_ascii_digit(),
                            b"graph" => c.is_ascii_graphic(),
                            b"lower" => c.is_ascii_lowercase(),
                            b"print" => c.is_ascii_graphic() || c == b' ',
                            b"punct" => c.is_ascii_punctuation(),
                            b"space" => c.is_ascii_whitespace() || c == 0x0b,
                            b"upper" => c.is_ascii_uppercase(),
                            b"xdigit" => c.is_ascii_hexdigit(),
                            _ => return Wm::AbortAll,
                        };
                        matched |= hit;
                        p = q;
                        p_ch = 0;
                    } else if t_ch == p_ch {
                        matched = true;
                    }
                    prev_ch = p_ch;
                    p += 1;
                    p_ch = at(pat, p);
                    if p_ch == b']' {
                        break;
                    }
                }
                if matched == negated || (pathname && t_ch == b'/') {
                    return Wm::NoMatch;
                }
            }
            _ => {
                if p_ch == b'\\' {
                    p += 1;
                    p_ch = at(pat, p);
                }
                if t_ch != p_ch {
                    return Wm::NoMatch;
                }
            }
        }
        p += 1;
        t += 1;
    }
    if t < text.len() {
        Wm::NoMatch
    } else {
        Wm::Match
    }
}

/// One line of a `.gitignore`-style file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The glob, without `!`, the leading `/` and the trailing `/`.
    glob: Vec<u8>,
    /// `!`: a match re-includes.
    negative: bool,
    /// A trailing `/`: matches directories only.
    dir_only: bool,
    /// No `/` left in the glob: matched against the last path component only.
    basename: bool,
}

/// The patterns of one file, with the directory they apply to (`""` or `dir/`, relative to
/// the top of the work tree).
#[derive(Debug, Clone, Default)]
pub struct List {
    base: Vec<u8>,
    patterns: Vec<Pattern>,
}

/// Longest `.gitignore` line considered (git stops at 8 KiB too, `PATH_MAX`-ish).
const MAX_LINE: usize = 8192;

impl List {
    /// Parses `text` (a `.gitignore`, `info/exclude` or `core.excludesFile`) whose patterns
    /// apply below `base` (`""` or ending in `/`).
    #[must_use]
    pub fn parse(base: &[u8], text: &[u8]) -> List {
        // A UTF-8 byte order mark at the start is skipped, as git does.
        let text = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
        let patterns = text
            .split(|&b| b == b'\n')
            .filter(|l| l.len() <= MAX_LINE)
            .filter_map(Pattern::parse)
            .collect();
        List {
            base: base.to_vec(),
            patterns,
        }
    }

    /// Whether it holds no pattern.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The decision of this list for `path` (relative to the top of the work tree, no
    /// trailing `/`): `Some(true)` ignored, `Some(false)` re-included, `None` no pattern
    /// matched. The last matching pattern decides.
    #[must_use]
    pub fn decide(&self, path: &[u8], is_dir: bool) -> Option<bool> {
        let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
        self.patterns
            .iter()
            .rev()
            .find(|p| p.matches(&self.base, path, name, is_dir))
            .map(|p| !p.negative)
    }
}

impl Pattern {
    fn parse(line: &[u8]) -> Option<Pattern> {
        let line = trim_trailing_spaces(line);
        if line.is_empty() || line[0] == b'#' {
            return None;
        }
        let (negative, mut glob) = match line.strip_prefix(b"!") {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let dir_only = glob.len() > 1 && glob.ends_with(b"/");
        if dir_only {
            glob = &glob[..glob.len() - 1];
        } else if glob == b"/" {
            return None;
        }
        let basename = !glob.contains(&b'/');
        let glob = glob.strip_prefix(b"/").unwrap_or(glob);
        if glob.is_empty() {
            return None;
        }
        Some(Pattern {
            glob: glob.to_vec(),
            negative,
            dir_only,
            basename,
        })
    }

    fn matches(&self, base: &[u8], path: &[u8], name: &[u8], is_dir: bool) -> bool {
        if self.dir_only && !is_dir {
            return false;
        }
        if self.basename {
            return wildmatch(&self.glob, name, false);
        }
        match path.strip_prefix(base) {
            Some(rest) => wildmatch(&self.glob, rest, true),
            None => false,
        }
    }
}

/// Trailing spaces removed unless escaped with a backslash (git's `trim_trailing_spaces`); a
/// trailing `\r` too (a file saved with CRLF line ends).
fn trim_trailing_spaces(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut end = line.len();
    while end > 0 && line[end - 1] == b' ' {
        // An odd number of backslashes before it escapes this space.
        let slashes = line[..end - 1]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if slashes % 2 == 1 {
            break;
        }
        end -= 1;
    }
    &line[..end]
}

/// Whether `path` is ignored by the lists of its directories (`dirs`, the top's first, the
/// deepest last) and then the repository-wide lists (`info/exclude`, then
/// `core.excludesFile`): the deepest list with a matching pattern decides, as in git.
#[must_use]
pub fn ignored(dirs: &[List], global: &[List], path: &[u8], is_dir: bool) -> bool {
    dirs.iter()
        .rev()
        .chain(global.iter())
        .find_map(|l| l.decide(path, is_dir))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildmatch_table() {
        // (pattern, text, pathname, matches) — cases from git's t3070-wildmatch.
        let cases: &[(&str, &str, bool, bool)] = &[
            ("foo", "foo", true, true),
            ("foo", "bar", true, false),
            ("", "", true, true),
            ("???", "foo", true, true),
            ("??", "foo", true, false),
            ("*", "foo", true, true),
            ("f*", "foo", true, true),
            ("*f", "foo", true, false),
            ("*foo*", "foo", true, true),
            ("*ob*a*r*", "foobar", true, true),
            ("*ab", "aaaaaaabababab", true, true),
            ("foo\\*", "foo*", true, true),
            ("foo\\*bar", "foobar", true, false),
            ("f\\\\oo", "f\\oo", true, true),
            ("*[al]?", "ball", true, true),
            ("[ten]", "ten", true, false),
            ("**[!te]", "ten", true, true),
            ("**[!ten]", "ten", true, false),
            ("t[a-g]n", "ten", true, true),
            ("t[!a-g]n", "ten", true, false),
            ("t[!a-g]n", "ton", true, true),
            ("t[^a-g]n", "ton", true, true),
            ("a[]]b", "a]b", true, true),
            ("a[]-]b", "a-b", true, true),
            ("]", "]", true, true),
            ("foo*bar", "foo/baz/bar", true, false),
            ("foo*bar", "foo/baz/bar", false, true),
            ("foo**bar", "foo/baz/bar", true, false),
            ("foo/**/bar", "foo/baz/bar", true, true),
            ("foo/**/bar", "foo/b/a/z/bar", true, true),
            ("foo/**/bar", "foo/bar", true, true),
            ("foo/**/**/bar", "foo/b/a/z/bar", true, true),
            ("**/foo", "foo", true, true),
            ("**/foo", "XXX/foo", true, true),
            ("**/foo", "bar/baz/foo", true, true),
            ("*/foo", "bar/baz/foo", true, false),
            ("**/bar*", "foo/bar/baz", true, false),
            ("**/bar/*", "deep/foo/bar/baz", true, true),
            ("**/bar/*", "deep/foo/bar/baz/", true, false),
            ("**/bar/**", "deep/foo/bar/baz/", true, true),
            ("**/bar/*", "deep/foo/bar", true, false),
            ("**/bar/**", "deep/foo/bar/", true, true),
            ("*/bar/**", "foo/bar/baz/x", true, true),
            ("foo?bar", "foo/bar", true, false),
            ("foo[/]bar", "foo/bar", true, false),
            ("f[^eiu][^eiu][^eiu][^eiu][^eiu]r", "foo-bar", true, true),
            ("**/t[o]", "foo/bar/baz/to", true, true),
            ("[[:alpha:]][[:digit:]][[:upper:]]", "a1B", true, true),
            ("[[:digit:][:upper:][:space:]]", "a", true, false),
            ("[[:digit:][:upper:][:space:]]", "A", true, true),
            ("[a-c[:digit:]x-z]", "5", true, true),
            ("[a-c[:digit:]x-z]", "q", true, false),
            ("[\\-^]", "^", true, true),
            ("[[]", "[", true, true),
            ("[", "[", true, false),
            ("[!", "[!", true, false),
            ("*/*/*", "foo/bba/arr", true, true),
            ("*/*/*", "foo/bb/aa/rr", true, false),
            ("**/**/**", "foo/bb/aa/rr", true, true),
            ("*X*i", "abcXdefXghi", true, true),
            ("*/*X*/*/*i", "ab/cXd/efXg/hi", true, true),
            ("**/*X*/**/*i", "ab/cXd/efXg/hi", true, true),
            (
                "-*-*-*-*-*-*-12-*-*-*-m-*-*-*",
                "-adobe-courier-bold-o-normal--12-120-75-75-/-70-iso8859-1",
                true,
                false,
            ),
            (
                "XXX/*/*/*/*/*/*/12/*/*/*/m/*/*/*",
                "XXX/adobe/courier/bold/o/normal//12/120/75/75/m/70/iso8859/1",
                true,
                true,
            ),
            ("*.log", "x.log", false, true),
            ("a*", "abc/d", false, true),
        ];
        for (pattern, text, pathname, want) in cases {
            assert_eq!(
                wildmatch(pattern.as_bytes(), text.as_bytes(), *pathname),
                *want,
                "{pattern:?} vs {text:?} pathname={pathname}"
            );
        }
        // A pathological pattern ends quickly (git's aborts bound the backtracking).
        let long = "a".repeat(60);
        assert!(!wildmatch(
            b"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
            long.as_bytes(),
            true
        ));
    }

    #[test]
    fn gitignore_lists() {
        let root = List::parse(
            b"",
            b"# comment\n*.log\n!keep.log\nbuild/\n/top.txt\ndoc/*.html\n\\#hash\n\\!bang\n  \nsp\\ \ntrail   \n",
        );
        let sub = List::parse(b"pkg/", b"local.txt\n/anchored\n!*.log\n");
        let global = List::parse(b"", b"*.swp\n");
        // (path, is_dir, ignored)
        let cases: &[(&str, bool, bool)] = &[
            ("x.log", false, true),
            ("a/b/x.log", false, true),
            ("keep.log", false, false),
            ("build", true, true),
            ("build", false, false),
            ("src/build", true, true),
            ("top.txt", false, true),
            ("src/top.txt", false, false),
            ("doc/a.html", false, true),
            ("doc/x/a.html", false, false),
            ("#hash", false, true),
            ("!bang", false, true),
            ("sp ", false, true),
            ("trail", false, true),
            ("pkg/local.txt", false, true),
            ("pkg/deeper/local.txt", false, true),
            ("local.txt", false, false),
            ("pkg/anchored", false, true),
            ("pkg/x/anchored", false, false),
            ("pkg/x.log", false, false),
            ("a.swp", false, true),
            ("src/main.rs", false, false),
        ];
        for (path, is_dir, want) in cases {
            let dirs = if path.starts_with("pkg/") {
                vec![root.clone(), sub.clone()]
            } else {
                vec![root.clone()]
            };
            assert_eq!(
                ignored(
                    &dirs,
                    std::slice::from_ref(&global),
                    path.as_bytes(),
                    *is_dir
                ),
                *want,
                "{path}"
            );
        }
        assert!(List::parse(b"", b"\n# only\n/\n").is_empty());
    }
}
