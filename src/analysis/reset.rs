//! When a usage limit resets, from the wordings Claude Code has used.  **\[pure\]**
//!
//! `resets 5:09am (Europe/Oslo)`, `resets Nov 25, 2:09am (UTC)`, `resets Apr 23 at 4pm
//! (America/Recife)`, `resets Mon 9am`, `resets in 3 days`, `Your limit will reset at 3pm
//! (America/Bogota).`, `resets 2am` (no zone: the machine's local zone, passed in the
//! [`Clock`]). Anything after the time (`· progress saved`, `· /upgrade to …`) is ignored. The
//! wall-clock time is read in the named IANA zone: a time alone is its next occurrence at or
//! after `now`; a weekday or a date without a year is the next such day. DST gaps resolve
//! forward. A relative time (`in 3 days`, `in 5 hours`, `in 2h 30m`) is added to `now`.

use std::sync::LazyLock;

use jiff::civil::{Date, DateTime, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use regex::Regex;

use super::{Clock, re};

/// `reset`, `resets`, `will reset`, `resets at`, `try again at`/`in` (Codex): the reset time
/// follows.
static RESET_WORD: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(?:resets?|try\s+again)\b(?:\s+at\b)?"));

static WHEN: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?ix)^
        (?: (?:on\s+)?
            (?: (?P<wd>mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?
              | (?P<mon>[a-z]{3,9})\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?(?:\s+(?P<year>\d{4}),?)?
              | (?P<tomorrow>tomorrow)
              | (?:today|tonight)
            ) \s+ (?:at\s+)? )?
        (?P<h>\d{1,2}) (?: :(?P<m>\d{2}) )? \s* (?P<ampm>[ap]\.?m\.?)?
        (?: $ | [\s.,;!)] )")
});

static RELATIVE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^in\s+(?:about\s+|~)?\d+\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m)\b")
});
static RELATIVE_PART: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)(\d+)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m)\b"));

/// Separators after which a line says something else (`· progress saved`).
const SEPARATORS: [char; 5] = ['·', '∙', '•', '|', '\n'];

/// Finds a reset phrase in `line` and turns it into a timestamp (no zone given → UTC).
#[must_use]
pub fn reset_from_line(line: &str, now: Timestamp) -> Option<Timestamp> {
    reset_in_line(line, &Clock::utc(now))
}

/// Finds a reset phrase in `line` and turns it into a timestamp (no zone given → the
/// clock's local zone).
#[must_use]
pub fn reset_in_line(line: &str, clock: &Clock) -> Option<Timestamp> {
    RESET_WORD.find_iter(line).find_map(|m| {
        let rest = &line[m.end()..];
        let segment = rest.split(SEPARATORS).next().unwrap_or("").trim();
        let (when, zone) = match (segment.find('('), segment.find(')')) {
            (Some(open), Some(close)) if open < close => {
                (&segment[..open], Some(&segment[open + 1..close]))
            }
            _ => (segment, None),
        };
        parse_when(when, zone, clock)
    })
}

/// Parses `5:09am`, `1am`, `16:30`, `Nov 25, 2:09am`, `Apr 23 at 4pm`, `Mon 9am`, `in 3 days`
/// in `zone` (an IANA name; absent or unknown → UTC) as the next such moment at or after `now`.
#[must_use]
pub fn parse_reset(when: &str, zone: Option<&str>, now: Timestamp) -> Option<Timestamp> {
    parse_when(when, zone, &Clock::utc(now))
}

/// Upper bound of a relative reset time (a year).
const MAX_RELATIVE_SECS: i64 = 366 * 24 * 3600;

fn relative(when: &str, now: Timestamp) -> Option<Timestamp> {
    let m = RELATIVE.find(when)?;
    // Every `<n> <unit>` that follows (`in 2 hours 30 minutes`, `in 1d 4h`).
    let mut secs: i64 = 0;
    let tail = &when[m.start()..];
    let mut end = 0;
    for c in RELATIVE_PART.captures_iter(tail) {
        let whole = c.get(0)?;
        // Stop at the first part that does not follow the previous one closely.
        let gap = tail.get(end..whole.start())?;
        if end > 0 && !gap.chars().all(|ch| ch.is_whitespace() || ch == ',') && gap.trim() != "and"
        {
            break;
        }
        end = whole.end();
        let n: i64 = c.get(1)?.as_str().parse().ok()?;
        let unit = c.get(2)?.as_str().to_ascii_lowercase();
        let per = if unit.starts_with('d') {
            86_400
        } else if unit.starts_with('h') {
            3_600
        } else {
            60
        };
        secs = secs.checked_add(n.checked_mul(per)?)?;
        if secs > MAX_RELATIVE_SECS {
            return None;
        }
    }
    now.checked_add(SignedDuration::from_secs(secs)).ok()
}

fn parse_when(when: &str, zone: Option<&str>, clock: &Clock) -> Option<Timestamp> {
    let when = when.trim();
    let now = clock.now;
    if let Some(at) = relative(when, now) {
        return Some(at);
    }
    let caps = WHEN.captures(when)?;
    let mut hour: i8 = caps.name("h")?.as_str().parse().ok()?;
    let minute: i8 = match caps.name("m") {
        Some(m) => m.as_str().parse().ok()?,
        None => 0,
    };
    if let Some(ampm) = caps.name("ampm") {
        if !(1..=12).contains(&hour) {
            return None;
        }
        let pm = ampm.as_str().to_ascii_lowercase().starts_with('p');
        hour = match (hour, pm) {
            (12, false) => 0,
            (12, true) => 12,
            (h, false) => h,
            (h, true) => h + 12,
        };
    }
    let time = Time::new(hour, minute, 0, 0).ok()?;
    let tz = zone
        .and_then(|z| TimeZone::get(z.trim()).ok())
        .unwrap_or_else(|| clock.local.clone());
    let today = now.to_zoned(tz.clone()).date();
    if let Some(wd) = caps.name("wd") {
        let weekday = weekday_of(wd.as_str())?;
        return (0..=7).find_map(|ahead| {
            let date = today.checked_add(jiff::Span::new().days(ahead)).ok()?;
            if date.weekday() != weekday {
                return None;
            }
            at_in_zone(date.to_datetime(time), &tz).filter(|at| *at >= now)
        });
    }
    if caps.name("tomorrow").is_some() {
        return at_in_zone(today.tomorrow().ok()?.to_datetime(time), &tz);
    }
    match (caps.name("mon"), caps.name("day")) {
        (Some(mon), Some(day)) => {
            let month = month_number(mon.as_str())?;
            let day: i8 = day.as_str().parse().ok()?;
            if let Some(year) = caps.name("year") {
                let year: i16 = year.as_str().parse().ok()?;
                let date = Date::new(year, month, day).ok()?;
                return at_in_zone(date.to_datetime(time), &tz);
            }
            // Feb 29 may not exist this year: look up to eight years ahead.
            (0..=8).find_map(|ahead| {
                let date = Date::new(today.year().checked_add(ahead)?, month, day).ok()?;
                at_in_zone(date.to_datetime(time), &tz).filter(|at| *at >= now)
            })
        }
        (None, None) => {
            let at = at_in_zone(today.to_datetime(time), &tz)?;
            if at >= now {
                return Some(at);
            }
            at_in_zone(today.tomorrow().ok()?.to_datetime(time), &tz)
        }
        _ => None,
    }
}

fn weekday_of(name: &str) -> Option<Weekday> {
    let lower = name.to_ascii_lowercase();
    let d = match lower.get(..3)? {
        "mon" => Weekday::Monday,
        "tue" => Weekday::Tuesday,
        "wed" => Weekday::Wednesday,
        "thu" => Weekday::Thursday,
        "fri" => Weekday::Friday,
        "sat" => Weekday::Saturday,
        "sun" => Weekday::Sunday,
        _ => return None,
    };
    Some(d)
}

fn at_in_zone(dt: DateTime, tz: &TimeZone) -> Option<Timestamp> {
    dt.to_zoned(tz.clone()).ok().map(|z| z.timestamp())
}

fn month_number(name: &str) -> Option<i8> {
    let lower = name.to_ascii_lowercase();
    let short = lower.get(..3)?;
    let n = match short {
        "jan" => 1,
        "feb" => 2,
        "mar" => 3,
        "apr" => 4,
        "may" => 5,
        "jun" => 6,
        "jul" => 7,
        "aug" => 8,
        "sep" => 9,
        "oct" => 10,
        "nov" => 11,
        "dec" => 12,
        _ => return None,
    };
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn reset_times_in_named_zones() {
        // (line, now, expected)
        let cases = [
            // Oslo is UTC+1 in winter: 5:09 local = 04:09Z, later the same day.
            (
                "You've hit your session limit · resets 5:09am (Europe/Oslo)",
                "2026-01-10T01:00:00Z",
                "2026-01-10T04:09:00Z",
            ),
            // Already past today → tomorrow.
            (
                "You've hit your session limit · resets 5:09am (Europe/Oslo)",
                "2026-01-10T05:00:00Z",
                "2026-01-11T04:09:00Z",
            ),
            // Oslo in summer is UTC+2.
            (
                "You've hit your limit · resets 1am (Europe/Oslo)",
                "2026-07-01T20:00:00Z",
                "2026-07-01T23:00:00Z",
            ),
            // Around midnight: 23:30Z is already the next day in Oslo (01:30 local), 1am passed.
            (
                "You've hit your limit · resets 1am (Europe/Oslo)",
                "2026-07-01T23:30:00Z",
                "2026-07-02T23:00:00Z",
            ),
            // 12am is midnight, 12pm is noon.
            (
                "resets 12am (UTC)",
                "2026-03-03T10:00:00Z",
                "2026-03-04T00:00:00Z",
            ),
            (
                "resets 12:30pm (America/Toronto)",
                "2026-03-03T10:00:00Z",
                "2026-03-03T17:30:00Z",
            ),
            (
                "You've hit your weekly limit · resets Nov 25, 2:09am (UTC)",
                "2026-11-22T10:00:00Z",
                "2026-11-25T02:09:00Z",
            ),
            // Date already passed this year → next year.
            (
                "You've hit your weekly limit · resets Nov 25, 2:09am (UTC)",
                "2026-11-26T10:00:00Z",
                "2027-11-25T02:09:00Z",
            ),
            // Recife is UTC-3, no DST.
            (
                "You've hit your limit · resets Apr 23 at 4pm (America/Recife)",
                "2026-04-20T00:00:00Z",
                "2026-04-23T19:00:00Z",
            ),
            (
                "You've hit your limit · resets 3:30am (Europe/Moscow)",
                "2026-05-01T00:00:00Z",
                "2026-05-01T00:30:00Z",
            ),
            // Codex (ChatGPT plan window): local 12-hour time, and a date with its year.
            (
                "You’ve hit your usage limit. Upgrade to Pro, or try again at 4:03 AM.",
                "2026-11-24T01:00:00Z",
                "2026-11-24T04:03:00Z",
            ),
            (
                "You’ve hit your usage limit. try again at Nov 27th, 2026 2:40 AM.",
                "2026-11-24T01:00:00Z",
                "2026-11-27T02:40:00Z",
            ),
            // No zone → UTC.
            (
                "5-hour limit reached ∙ resets 2am",
                "2026-05-01T03:00:00Z",
                "2026-05-02T02:00:00Z",
            ),
            (
                "Claude usage limit reached. Your limit will reset at 3pm (America/Bogota).",
                "2026-05-01T03:00:00Z",
                "2026-05-01T20:00:00Z",
            ),
            // Unknown zone → UTC.
            (
                "resets 4am (Mars/Olympus)",
                "2026-05-01T03:00:00Z",
                "2026-05-01T04:00:00Z",
            ),
            // 24-hour clock.
            (
                "resets 16:45 (UTC)",
                "2026-05-01T03:00:00Z",
                "2026-05-01T16:45:00Z",
            ),
            // DST spring forward in New York (2026-03-08, 2:00 → 3:00): 2:30am does not exist,
            // it resolves forward to 3:30 EDT = 07:30Z.
            (
                "resets 2:30am (America/New_York)",
                "2026-03-08T05:00:00Z",
                "2026-03-08T07:30:00Z",
            ),
            // DST fall back (2026-11-01): 1:30am happens twice; the earlier one (EDT) is taken.
            (
                "resets 1:30am (America/New_York)",
                "2026-11-01T04:00:00Z",
                "2026-11-01T05:30:00Z",
            ),
            // Exactly now counts as "at or after now".
            (
                "resets 4am (UTC)",
                "2026-05-01T04:00:00Z",
                "2026-05-01T04:00:00Z",
            ),
        ];
        for (line, now, want) in cases {
            assert_eq!(
                reset_from_line(line, ts(now)),
                Some(ts(want)),
                "{line} @ {now}"
            );
        }
    }

    #[test]
    fn unreadable_reset_phrases_give_none() {
        let now = ts("2026-05-01T03:00:00Z");
        for line in [
            "You've hit your limit",
            "resets soon (UTC)",
            "resets 13pm (UTC)",
            "resets 25:00",
            "resets Foo 3, 2am (UTC)",
            "resets Feb 30, 2am (UTC)",
            "resets 4:61am",
        ] {
            assert_eq!(reset_from_line(line, now), None, "{line}");
        }
    }

    #[test]
    fn feb_29_is_the_next_leap_day() {
        let now = ts("2026-05-01T03:00:00Z");
        assert_eq!(
            parse_reset("Feb 29, 1am", None, now),
            Some(ts("2028-02-29T01:00:00Z"))
        );
    }
}
