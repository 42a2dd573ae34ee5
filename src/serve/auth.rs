//! Who may read the pages: the token (in the URL once, then a cookie), compared in constant
//! time, and the `Host` header checked against the address served (DNS rebinding) **[pure]**.

use std::net::IpAddr;

/// The cookie that carries the token after the first visit.
pub(crate) const COOKIE: &str = "hank_token";

/// What a request gets before any page is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Access {
    /// The token came in the URL: set the cookie and send the browser to the same page
    /// without it (the token leaves the address bar and the history).
    SetCookie,
    /// The cookie holds the token.
    Allowed,
    /// Nothing but this status and a line of text (no data).
    Refused(u16, &'static str),
}

/// The two tokens are equal, compared in time that depends only on their lengths (every
/// byte is looked at; no early return on the first difference).
#[must_use]
pub(crate) fn same_token(given: &str, expected: &str) -> bool {
    let (g, e) = (given.as_bytes(), expected.as_bytes());
    let mut diff = u8::from(g.len() != e.len());
    for (i, b) in e.iter().enumerate() {
        diff |= b ^ g.get(i).copied().unwrap_or(!b);
    }
    diff == 0
}

/// The value of the cookie [`COOKIE`] in a `Cookie` header.
#[must_use]
pub(crate) fn cookie_token(header: &str) -> Option<&str> {
    header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE).then_some(value)
    })
}

/// The `token` parameter of a query string.
#[must_use]
pub(crate) fn query_token(query: &str) -> Option<&str> {
    query.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        (name == "token").then_some(value)
    })
}

/// Where the browser goes once the token of the URL became a cookie: the same path, unless
/// it could be read as another site's (`//host`, `/\\host`): then `/`.
#[must_use]
pub(crate) fn same_page(path: &str) -> &str {
    let b = path.as_bytes();
    if b.first() == Some(&b'/') && !matches!(b.get(1), Some(b'/' | b'\\')) {
        path
    } else {
        "/"
    }
}

/// Whether the `Host` header names the server as the browser was told to reach it: the
/// port served, and as the host `localhost` or an IP address — a loopback address when the
/// server listens on loopback. A name that resolves to the machine (DNS rebinding: a page of
/// `attacker.example` whose name now points at 127.0.0.1) is refused.
#[must_use]
pub(crate) fn host_allowed(host: Option<&str>, bind: IpAddr, port: u16) -> bool {
    let Some(host) = host else {
        return false;
    };
    let (name, port_text) = match host.rsplit_once(':') {
        Some((n, p)) if !p.contains(']') => (n, p),
        _ => return false,
    };
    if port_text.parse::<u16>().ok() != Some(port) {
        return false;
    }
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let literal = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    let Ok(ip) = literal.parse::<IpAddr>() else {
        return false;
    };
    if bind.is_loopback() {
        ip.is_loopback()
    } else {
        bind.is_unspecified() || ip == bind || ip.is_loopback()
    }
}

/// The decision for one request: the Host first, then the token of the URL, then the
/// cookie's.
#[must_use]
pub(crate) fn decide(
    host_ok: bool,
    query: Option<&str>,
    cookie: Option<&str>,
    token: &str,
) -> Access {
    if !host_ok {
        return Access::Refused(421, "wrong Host: open the address hank serve printed\n");
    }
    if let Some(given) = query.and_then(query_token) {
        return if same_token(given, token) {
            Access::SetCookie
        } else {
            Access::Refused(403, "wrong token: open the address hank serve printed\n")
        };
    }
    match cookie.and_then(cookie_token) {
        Some(given) if same_token(given, token) => Access::Allowed,
        _ => Access::Refused(401, "token required: open the address hank serve printed\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_equal_only_when_every_byte_is() {
        let table = [
            ("abcd", "abcd", true),
            ("abce", "abcd", false),
            ("abc", "abcd", false),
            ("abcde", "abcd", false),
            ("", "abcd", false),
            ("", "", true),
            // A byte that is the complement of the expected one past the end still differs.
            ("ab", "ab\u{0}", false),
        ];
        for (given, expected, want) in table {
            assert_eq!(
                same_token(given, expected),
                want,
                "{given:?} vs {expected:?}"
            );
        }
    }

    #[test]
    fn the_token_is_read_from_the_query_and_the_cookie() {
        assert_eq!(query_token("token=T1&x=2"), Some("T1"));
        assert_eq!(query_token("x=2&token=T2"), Some("T2"));
        assert_eq!(query_token("tokens=T"), None);
        assert_eq!(cookie_token("a=b; hank_token=C1; c=d"), Some("C1"));
        assert_eq!(cookie_token("hank_token_x=C1"), None);
        assert_eq!(cookie_token(""), None);
    }

    #[test]
    fn the_host_must_name_the_server() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        let lan: IpAddr = "192.168.1.5".parse().unwrap();
        let table = [
            (Some("127.0.0.1:8080"), lo, true),
            (Some("localhost:8080"), lo, true),
            (Some("LOCALHOST:8080"), lo, true),
            (Some("[::1]:8080"), lo, true),
            (Some("127.0.0.1:8081"), lo, false),
            (Some("127.0.0.1"), lo, false),
            (Some("attacker.example:8080"), lo, false),
            (Some("192.168.1.5:8080"), lo, false),
            (None, lo, false),
            (Some("192.168.1.5:8080"), lan, true),
            (Some("192.168.1.6:8080"), lan, false),
            (Some("127.0.0.1:8080"), lan, true),
            (Some("10.0.0.2:8080"), any, true),
            (Some("rebind.example:8080"), any, false),
            (Some("[::1]"), lo, false),
        ];
        for (host, bind, want) in table {
            assert_eq!(host_allowed(host, bind, 8080), want, "{host:?} on {bind}");
        }
    }

    #[test]
    fn the_page_after_the_token_stays_on_this_server() {
        let table = [
            ("/p/k", "/p/k"),
            ("/", "/"),
            ("//evil.example/x", "/"),
            ("/\\evil.example", "/"),
            ("", "/"),
            ("p/k", "/"),
        ];
        for (path, want) in table {
            assert_eq!(same_page(path), want, "{path:?}");
        }
    }

    #[test]
    fn decide_table() {
        let t = "secret";
        let table = [
            (false, Some("token=secret"), None, Access::Refused(421, "")),
            (true, Some("token=secret"), None, Access::SetCookie),
            (
                true,
                Some("token=wrong"),
                Some("hank_token=secret"),
                Access::Refused(403, ""),
            ),
            (true, None, Some("hank_token=secret"), Access::Allowed),
            (
                true,
                Some("page=2"),
                Some("hank_token=secret"),
                Access::Allowed,
            ),
            (
                true,
                None,
                Some("hank_token=secrets"),
                Access::Refused(401, ""),
            ),
            (true, None, None, Access::Refused(401, "")),
        ];
        for (host_ok, query, cookie, want) in table {
            let got = decide(host_ok, query, cookie, t);
            match (&got, &want) {
                (Access::Refused(a, _), Access::Refused(b, _)) => assert_eq!(a, b),
                _ => assert_eq!(got, want, "{query:?} {cookie:?}"),
            }
        }
    }
}
