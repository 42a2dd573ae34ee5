//! Notifications: which targets `NOTIFY` names, which events `NOTIFY_EVENTS` lets through,
//! and the message each event becomes (what happened, in which project and run, and the next
//! step as a command). **\[pure\]**
//!
//! The sender (`crate::notify`) redacts secrets and delivers; nothing here does I/O. Times
//! are shown in the zone the caller passes (the user's local zone).

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;

use crate::exit::ExitReason;
use crate::policy::breaker::CircuitState;
use crate::policy::budget::WaitReason;
use crate::policy::verify::{CheckKind, CheckResult};
use crate::sanitize::cut_chars;

/// An event of the loop as the rules see it (the sender maps each `events.jsonl` event
/// kind to one, field for field).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Happening<'a> {
    Waiting {
        reason: WaitReason,
        until: Timestamp,
    },
    CircuitChanged {
        to: CircuitState,
        reason: &'a str,
    },
    Verification(&'a CheckResult),
    AgentSwitched {
        from: &'a str,
        to: &'a str,
        reason: &'a str,
        until: Option<Timestamp>,
    },
    Exit {
        reason: Option<ExitReason>,
        exit_code: u8,
        message: &'a str,
    },
    /// `hank fleet`: a task changed state (merged and failed become messages).
    FleetTask {
        task: &'a str,
        state: crate::policy::fleet::TaskState,
        branch: &'a str,
        message: &'a str,
    },
    /// A delivery step ended: the branch pushed, the pull request, its checks.
    Delivery(Delivered<'a>),
    /// Any other event (loop started, agent finished, warning): no message.
    Other,
}

/// A delivery as the rules see it (the `delivery` event's fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered<'a> {
    pub branch: &'a str,
    pub base: &'a str,
    pub remote: &'a str,
    /// The push happened (a head commit is known).
    pub pushed: bool,
    pub pr_url: Option<&'a str>,
    pub pr_number: Option<u64>,
    /// `not_waited`, `green`, `failed`, `missing`, `timed_out`.
    pub checks: &'a str,
    /// The failing (or still pending) checks' names.
    pub check_names: &'a [String],
}

/// What a `NOTIFY` value looks like (the end of "expected …").
pub const TARGETS_EXPECTED: &str = "comma-separated KIND:URL targets, KIND one of ntfy, webhook, slack; each URL https:// (http:// only to 127.0.0.1, ::1 or localhost), e.g. ntfy:https://ntfy.sh/my-topic";

/// What a `NOTIFY_EVENTS` value looks like.
pub const EVENTS_EXPECTED: &str = "all, or a comma-separated list of wait, circuit_open, verification_rejected, needs_answers, agent_switch, fleet_task, delivery, run_end";

/// Longest message body sent (characters); the agent's questions are cut to fit.
pub const MAX_BODY_CHARS: usize = 1500;

/// Where a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// An ntfy topic URL (`https://ntfy.sh/topic` or a self-hosted server): JSON publish.
    Ntfy,
    /// Any URL: a JSON POST of the event plus a human `message`.
    Webhook,
    /// A Slack incoming-webhook URL: `{"text": …}`.
    Slack,
}

impl TargetKind {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ntfy => "ntfy",
            Self::Webhook => "webhook",
            Self::Slack => "slack",
        }
    }
}

/// One `NOTIFY` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: TargetKind,
    pub url: String,
}

impl Target {
    /// The target as the user wrote it, without the URL's path and query (topics and
    /// webhook paths are secrets of a kind): `ntfy:https://ntfy.sh/…`.
    #[must_use]
    pub fn shown(&self) -> String {
        let host_end = self
            .url
            .find("://")
            .map(|i| i + 3)
            .and_then(|start| self.url[start..].find('/').map(|j| start + j))
            .unwrap_or(self.url.len());
        let tail = if host_end < self.url.len() {
            "/…"
        } else {
            ""
        };
        format!("{}:{}{tail}", self.kind.as_str(), &self.url[..host_end])
    }

    /// ntfy's JSON publish goes to the server's root with the topic in the body: the base
    /// URL and the topic of an `ntfy:` URL (`None`: no topic in the path).
    #[must_use]
    pub fn ntfy_parts(&self) -> Option<(String, String)> {
        ntfy_parts(&self.url)
    }
}

/// The server root and the topic of an ntfy topic URL.
#[must_use]
pub fn ntfy_parts(url: &str) -> Option<(String, String)> {
    let scheme_end = url.find("://")? + 3;
    let path_start = scheme_end + url[scheme_end..].find('/')?;
    let (base, path) = url.split_at(path_start);
    let topic = path.trim_matches('/');
    let valid = !topic.is_empty()
        && topic.len() <= 64
        && topic
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    valid.then(|| (base.to_string(), topic.to_string()))
}

/// Whether `url` may be used: `https://HOST…`, or `http://` to the loopback interface.
#[must_use]
pub fn url_allowed(url: &str) -> bool {
    let host_of = |rest: &str| -> String {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = authority.rsplit('@').next().unwrap_or("");
        if let Some(v6) = host.strip_prefix('[') {
            v6.split(']').next().unwrap_or("").to_string()
        } else {
            host.split(':').next().unwrap_or("").to_ascii_lowercase()
        }
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    if let Some(rest) = url.strip_prefix("https://") {
        return !host_of(rest).is_empty();
    }
    if let Some(rest) = url.strip_prefix("http://") {
        return matches!(host_of(rest).as_str(), "127.0.0.1" | "localhost" | "::1");
    }
    false
}

/// Parses `NOTIFY`: why a target is refused, naming it.
pub fn parse_targets(text: &str) -> Result<Vec<Target>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((kind, url)) = item.split_once(':') else {
            return Err(format!("`{item}` is not KIND:URL"));
        };
        let kind = match kind.trim().to_ascii_lowercase().as_str() {
            "ntfy" => TargetKind::Ntfy,
            "webhook" => TargetKind::Webhook,
            "slack" => TargetKind::Slack,
            other => {
                return Err(format!(
                    "`{other}` is not a target kind (ntfy, webhook, slack)"
                ));
            }
        };
        let url = url.trim();
        if !url_allowed(url) {
            return Err(format!(
                "`{url}` is not an https:// URL (http:// is allowed only to 127.0.0.1, ::1 or localhost)"
            ));
        }
        if kind == TargetKind::Ntfy && ntfy_parts(url).is_none() {
            return Err(format!(
                "`{url}` names no ntfy topic (expected https://SERVER/TOPIC, the topic letters, digits, - or _)"
            ));
        }
        out.push(Target {
            kind,
            url: url.to_string(),
        });
    }
    if out.is_empty() {
        return Err("no target".into());
    }
    Ok(out)
}

/// The kinds of event that become messages (`NOTIFY_EVENTS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventClass {
    Wait,
    CircuitOpen,
    VerificationRejected,
    NeedsAnswers,
    AgentSwitch,
    /// A fleet task merged or failed.
    FleetTask,
    /// Work delivered: a branch pushed, a pull request opened, its CI green or red.
    Delivery,
    RunEnd,
}

impl EventClass {
    pub const ALL: [Self; 8] = [
        Self::Wait,
        Self::CircuitOpen,
        Self::VerificationRejected,
        Self::NeedsAnswers,
        Self::AgentSwitch,
        Self::FleetTask,
        Self::Delivery,
        Self::RunEnd,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wait => "wait",
            Self::CircuitOpen => "circuit_open",
            Self::VerificationRejected => "verification_rejected",
            Self::NeedsAnswers => "needs_answers",
            Self::AgentSwitch => "agent_switch",
            Self::FleetTask => "fleet_task",
            Self::Delivery => "delivery",
            Self::RunEnd => "run_end",
        }
    }
}

/// Parses `NOTIFY_EVENTS` (`all` or a list of [`EventClass`] names).
#[must_use]
pub fn parse_events(text: &str) -> Option<Vec<EventClass>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("all") {
        return Some(EventClass::ALL.to_vec());
    }
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let class = EventClass::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(name))?;
        if !out.contains(&class) {
            out.push(class);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// What the message says about the run besides the event.
#[derive(Debug, Clone)]
pub struct RunFacts {
    /// The project's name (its folder).
    pub project: String,
    /// Which run: its start time and process id.
    pub run: String,
    /// The fleet task, when the run is one.
    pub task: Option<String>,
    /// This run's cost so far (USD).
    pub cost_usd: f64,
    pub items_done: usize,
    pub items_total: usize,
    /// The last loop's questions (for `needs_answers`).
    pub questions: Vec<String>,
    /// The user's zone, for the times in the text.
    pub tz: TimeZone,
}

/// One notification.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub class: EventClass,
    /// One line: `hank · PROJECT: what happened`.
    pub title: String,
    /// What happened, the run, and the next step.
    pub body: String,
    /// The next step, as a command.
    pub next: String,
    /// ntfy priority 1–5 (4 when the user must act).
    pub priority: u8,
}

/// The message for what happened at `at`, or `None` when it is not one the user asked for.
#[must_use]
pub fn message(
    at: Timestamp,
    event: &Happening<'_>,
    facts: &RunFacts,
    wanted: &[EventClass],
) -> Option<Message> {
    let (class, what, detail, next, priority) = describe(at, event, facts)?;
    // A run that ended at `needs_answers` is still a run end for who asked only for those.
    let class = if class == EventClass::NeedsAnswers
        && !wanted.contains(&class)
        && matches!(event, Happening::Exit { .. })
    {
        EventClass::RunEnd
    } else {
        class
    };
    if !wanted.contains(&class) {
        return None;
    }
    let project = one_line(&facts.project, 80);
    let mut body = one_line(&what, 300);
    for line in detail {
        body.push('\n');
        body.push_str(&one_line(&line, 400));
    }
    let task = facts
        .task
        .as_deref()
        .map(|t| format!(", task {}", one_line(t, 80)))
        .unwrap_or_default();
    // The facts are cut so that the run and the next step always fit.
    let mut body = cut_chars(&body, MAX_BODY_CHARS - 400);
    body.push_str(&format!(
        "\nproject {project} · run {}{task}",
        one_line(&facts.run, 80)
    ));
    body.push_str(&format!("\nnext: {next}"));
    Some(Message {
        class,
        title: format!("hank · {project}: {}", one_line(&what, 120)),
        body,
        next,
        priority,
    })
}

type Described = (EventClass, String, Vec<String>, String, u8);

fn describe(at: Timestamp, event: &Happening<'_>, f: &RunFacts) -> Option<Described> {
    let local = |t: Timestamp| local_time(t, &f.tz);
    Some(match *event {
        Happening::Waiting {
            reason: WaitReason::NeedsAnswers,
            until,
        } => {
            let mut detail: Vec<String> = f
                .questions
                .iter()
                .take(10)
                .map(|q| format!("? {}", one_line(q, 300)))
                .collect();
            detail.push(format!(
                "waiting for an answer until {} (ANSWER_TIMEOUT); then the run stops (needs_answers)",
                local(until)
            ));
            (
                EventClass::NeedsAnswers,
                "the agent needs answers: the loop waits for yours".into(),
                detail,
                "hank ctl answer TEXT (or hank ctl --remote answer TEXT)".into(),
                4,
            )
        }
        Happening::Waiting { reason, until } => (
            EventClass::Wait,
            format!("waiting ({}) until {}", reason.as_str(), local(until)),
            vec![],
            "hank ctl retry-now (end the wait now) · hank status".into(),
            3,
        ),
        Happening::CircuitChanged {
            to: CircuitState::Open,
            reason,
        } => (
            EventClass::CircuitOpen,
            format!("circuit breaker opened: {reason}"),
            vec![format!(
                "opened {}; it may be tried again after CB_COOLDOWN_MINUTES at a later start",
                local(at)
            )],
            "hank circuit · then hank reset circuit && hank run".into(),
            4,
        ),
        Happening::Verification(check)
            if check.kind == CheckKind::Completion && !check.passed && !check.interrupted =>
        {
            (
                EventClass::VerificationRejected,
                format!(
                    "\"done\" rejected: VERIFY_COMMAND failed ({}) after loop {}",
                    check.how_it_ended(),
                    check.number
                ),
                vec![format!("log: {}", check.log)],
                "hank status (the loop goes on with the failure in its context)".into(),
                3,
            )
        }
        Happening::AgentSwitched {
            from,
            to,
            reason,
            until,
        } => (
            EventClass::AgentSwitch,
            format!("agent switched from {from} to {to}: {reason}"),
            until
                .map(|u| vec![format!("{from} may be called again at {}", local(u))])
                .unwrap_or_default(),
            "hank status".into(),
            3,
        ),
        Happening::Exit {
            reason: exit_reason,
            exit_code,
            message,
        } => {
            let reason = exit_reason.map_or("error", ExitReason::as_str);
            let mut detail = vec![
                message.to_string(),
                format!(
                    "exit code {exit_code} · cost ${:.2} · items done {}/{}",
                    f.cost_usd, f.items_done, f.items_total
                ),
            ];
            let needs_answers = exit_reason == Some(ExitReason::NeedsAnswers);
            if needs_answers {
                for q in f.questions.iter().take(10) {
                    detail.push(format!("? {}", one_line(q, 300)));
                }
            }
            let next = match exit_reason {
                Some(ExitReason::NeedsAnswers) => {
                    "answer in .hank/PROMPT.md, then hank run (NEEDS_ANSWERS=wait: answer with hank ctl answer while it waits)".to_string()
                }
                Some(r) if r.is_completion() => "hank report".into(),
                Some(ExitReason::MaxLoops) => "hank run --max-loops N (a higher N)".into(),
                Some(ExitReason::CostBudget) => "hank run --max-cost USD (a higher amount)".into(),
                Some(ExitReason::MaxRuntime) => "hank run --max-runtime DURATION".into(),
                Some(ExitReason::CircuitOpen) => {
                    "hank circuit · then hank reset circuit && hank run".into()
                }
                Some(ExitReason::Interrupted) => "hank run (it resumes)".into(),
                _ => "hank status · hank doctor".into(),
            };
            (
                if needs_answers {
                    EventClass::NeedsAnswers
                } else {
                    EventClass::RunEnd
                },
                format!("run ended: {reason} (exit {exit_code})"),
                detail,
                next,
                if exit_code == 0 { 3 } else { 4 },
            )
        }
        Happening::FleetTask {
            task,
            state,
            branch,
            message,
        } => fleet_task(task, state, branch, message)?,
        Happening::Delivery(d) => delivery(&d)?,
        _ => return None,
    })
}

/// A fleet task merged or failed (other states send nothing).
fn fleet_task(
    task: &str,
    state: crate::policy::fleet::TaskState,
    branch: &str,
    message: &str,
) -> Option<Described> {
    use crate::policy::fleet::TaskState;
    let detail: Vec<String> = if message.trim().is_empty() {
        Vec::new()
    } else {
        vec![message.to_string()]
    };
    Some(match state {
        TaskState::Merged => (
            EventClass::FleetTask,
            format!("fleet task {task} merged"),
            detail,
            "hank fleet status".into(),
            3,
        ),
        TaskState::Failed => (
            EventClass::FleetTask,
            format!("fleet task {task} failed; its work is kept on branch {branch}"),
            detail,
            format!("hank fleet status · git log {branch}"),
            4,
        ),
        _ => return None,
    })
}

/// A delivery: the push, the pull request opened, its CI green or red.
fn delivery(d: &Delivered<'_>) -> Option<Described> {
    let pr = match (d.pr_number, d.pr_url) {
        (Some(n), _) => format!("PR #{n}"),
        (None, Some(_)) => "the pull request".to_string(),
        (None, None) => format!("branch {}", d.branch),
    };
    let mut detail: Vec<String> = d.pr_url.iter().map(|u| (*u).to_string()).collect();
    if !d.check_names.is_empty() {
        detail.push(format!("checks: {}", d.check_names.join(", ")));
    }
    let status = "hank status".to_string();
    if !d.pushed {
        return Some((
            EventClass::Delivery,
            format!("push of {} to {} rejected", d.branch, d.remote),
            detail,
            "hank status (the hook's output goes to the next loop) · hank deliver".into(),
            4,
        ));
    }
    let pr_url = d.pr_url.map(str::to_string);
    Some(match d.checks {
        "failed" => (
            EventClass::Delivery,
            format!("CI failed on {pr}"),
            detail,
            "hank status (the failure goes to the next loop) · hank deliver after a fix".into(),
            4,
        ),
        "green" => (
            EventClass::Delivery,
            format!("CI green on {pr}"),
            detail,
            pr_url.clone().unwrap_or(status),
            3,
        ),
        "missing" => (
            EventClass::Delivery,
            format!("no CI check appeared on {pr}"),
            detail,
            "hank deliver (CI_APPEAR_TIMEOUT) · check the repository's workflows".into(),
            4,
        ),
        "timed_out" => (
            EventClass::Delivery,
            format!("CI did not finish on {pr} within CI_TIMEOUT"),
            detail,
            "hank deliver (it waits again)".into(),
            4,
        ),
        _ if d.pr_url.is_some() || d.pr_number.is_some() => (
            EventClass::Delivery,
            format!("{pr} opened from {} into {}", d.branch, d.base),
            detail,
            pr_url.clone().unwrap_or(status),
            3,
        ),
        _ => (
            EventClass::Delivery,
            format!("branch {} pushed to {}", d.branch, d.remote),
            detail,
            status,
            3,
        ),
    })
}

/// `14:05 (Thu 26 Nov, Europe/Paris)`: a time as the user reads it.
#[must_use]
pub fn local_time(t: Timestamp, tz: &TimeZone) -> String {
    let z = t.to_zoned(tz.clone());
    let name = tz.iana_name().map_or_else(
        || z.strftime("%:z").to_string(),
        std::string::ToString::to_string,
    );
    format!("{} ({name})", z.strftime("%H:%M %a %-d %b"))
}

/// Text on one line: control characters and line breaks become spaces, cut to `max` chars.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    cut_chars(flat.trim(), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn facts() -> RunFacts {
        RunFacts {
            project: "shop".into(),
            run: "04:20 (pid 7)".into(),
            task: None,
            cost_usd: 1.5,
            items_done: 3,
            items_total: 5,
            questions: vec!["Use Postgres\nor SQLite?".into()],
            tz: TimeZone::get("Europe/Paris").unwrap(),
        }
    }

    fn now() -> Timestamp {
        at("2026-11-26T10:00:00Z")
    }

    #[test]
    fn targets_parse_and_refuse_with_the_reason() {
        let t = parse_targets(
            "ntfy:https://ntfy.sh/hank-x, webhook:http://127.0.0.1:9/h,slack:https://hooks.slack.com/services/A",
        )
        .unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].kind, TargetKind::Ntfy);
        assert_eq!(
            t[0].ntfy_parts(),
            Some(("https://ntfy.sh".into(), "hank-x".into()))
        );
        assert_eq!(t[2].shown(), "slack:https://hooks.slack.com/…");
        let cases = [
            ("", "no target"),
            ("ntfy", "is not KIND:URL"),
            ("mail:https://x", "not a target kind"),
            ("webhook:http://example.com/h", "not an https:// URL"),
            ("webhook:https://", "not an https:// URL"),
            ("webhook:https://a b", "not an https:// URL"),
            ("ntfy:https://ntfy.sh", "names no ntfy topic"),
            ("ntfy:https://ntfy.sh/a/b", "names no ntfy topic"),
        ];
        for (text, want) in cases {
            let err = parse_targets(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        assert!(url_allowed("http://localhost:8080/x"));
        assert!(url_allowed("http://[::1]:8080/x"));
        assert!(!url_allowed("http://127.0.0.1.evil.com/x"));
    }

    #[test]
    fn event_filter() {
        assert_eq!(parse_events("all").unwrap().len(), 8);
        assert_eq!(
            parse_events("wait, run_end,wait").unwrap(),
            vec![EventClass::Wait, EventClass::RunEnd]
        );
        assert_eq!(parse_events("wait,nope"), None);
        assert_eq!(parse_events(""), None);
    }

    /// Every event kind the loop emits today, and what it becomes.
    #[test]
    fn each_event_kind_names_what_happened_and_the_next_step() {
        let all = EventClass::ALL;
        let failed = CheckResult {
            kind: CheckKind::Completion,
            passed: false,
            exit_code: Some(101),
            number: 4,
            log: ".hank/logs/check-1.log".into(),
            ..CheckResult::default()
        };
        let passed = CheckResult {
            kind: CheckKind::Completion,
            passed: true,
            ..CheckResult::default()
        };
        type Want = Option<(EventClass, &'static str, &'static str)>;
        let cases: Vec<(Happening<'_>, Want)> = vec![
            (
                Happening::Waiting {
                    reason: WaitReason::UsageLimit,
                    until: at("2026-11-26T13:05:00Z"),
                },
                Some((
                    EventClass::Wait,
                    "waiting (usage_limit) until 14:05 Thu 26 Nov (Europe/Paris)",
                    "hank ctl retry-now",
                )),
            ),
            (
                Happening::CircuitChanged {
                    to: CircuitState::Open,
                    reason: "no progress in 3 loops",
                },
                Some((
                    EventClass::CircuitOpen,
                    "circuit breaker opened: no progress in 3 loops",
                    "hank reset circuit",
                )),
            ),
            (
                Happening::CircuitChanged {
                    to: CircuitState::HalfOpen,
                    reason: "cooldown",
                },
                None,
            ),
            (
                Happening::Verification(&failed),
                Some((
                    EventClass::VerificationRejected,
                    "\"done\" rejected: VERIFY_COMMAND failed (exit 101) after loop 4",
                    "hank status",
                )),
            ),
            (Happening::Verification(&passed), None),
            (
                Happening::AgentSwitched {
                    from: "claude",
                    to: "codex",
                    reason: "usage limit",
                    until: Some(at("2026-11-26T15:00:00Z")),
                },
                Some((
                    EventClass::AgentSwitch,
                    "agent switched from claude to codex: usage limit",
                    "hank status",
                )),
            ),
            (
                Happening::Exit {
                    reason: Some(ExitReason::MaxLoops),
                    exit_code: 3,
                    message: "MAX_LOOPS reached",
                },
                Some((
                    EventClass::RunEnd,
                    "run ended: max_loops (exit 3)",
                    "hank run --max-loops N",
                )),
            ),
            (
                Happening::Exit {
                    reason: Some(ExitReason::NeedsAnswers),
                    exit_code: 2,
                    message: "the agent only asked questions",
                },
                Some((
                    EventClass::NeedsAnswers,
                    "run ended: needs_answers (exit 2)",
                    "answer in .hank/PROMPT.md",
                )),
            ),
            (Happening::Other, None),
        ];
        for (kind, want) in cases {
            let got = message(now(), &kind, &facts(), &all);
            match (got, want) {
                (None, None) => {}
                (Some(m), Some((class, what, next))) => {
                    assert_eq!(m.class, class, "{kind:?}");
                    assert!(m.body.starts_with(what), "{kind:?}: {}", m.body);
                    assert_eq!(m.title, format!("hank · shop: {what}"));
                    assert!(m.next.contains(next), "{kind:?}: {}", m.next);
                    assert!(m.body.contains("project shop · run 04:20 (pid 7)"));
                    assert!(m.body.contains(&format!("next: {}", m.next)));
                }
                (got, want) => panic!("{kind:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn run_end_carries_cost_items_and_questions() {
        let asked = Happening::Exit {
            reason: Some(ExitReason::NeedsAnswers),
            exit_code: 2,
            message: "asked",
        };
        let m = message(now(), &asked, &facts(), &EventClass::ALL).unwrap();
        assert!(m.body.contains("exit code 2 · cost $1.50 · items done 3/5"));
        assert!(m.body.contains("? Use Postgres or SQLite?"), "{}", m.body);
        assert_eq!(m.priority, 4);
        // needs_answers not asked for, run_end is: delivered as a run end.
        let m = message(now(), &asked, &facts(), &[EventClass::RunEnd]).unwrap();
        assert_eq!(m.class, EventClass::RunEnd);
        // Filtered out.
        let wait = Happening::Waiting {
            reason: WaitReason::Backoff,
            until: at("2026-11-26T10:01:00Z"),
        };
        assert_eq!(message(now(), &wait, &facts(), &[EventClass::RunEnd]), None);
    }

    #[test]
    fn text_is_one_line_per_fact_and_bounded() {
        let mut f = facts();
        f.project = "a\u{1b}[31mb\nc".into();
        f.questions = vec!["q".repeat(5000); 20];
        let m = message(
            now(),
            &Happening::Exit {
                reason: Some(ExitReason::NeedsAnswers),
                exit_code: 2,
                message: "m\r\nx",
            },
            &f,
            &EventClass::ALL,
        )
        .unwrap();
        assert!(!m.title.contains('\n') && !m.title.contains('\u{1b}'));
        assert!(m.body.contains("m  x"));
        assert!(m.body.chars().count() <= MAX_BODY_CHARS);
    }

    /// `NEEDS_ANSWERS=wait`: the wait for an answer is a `needs_answers` message with the
    /// questions, until when, and `hank ctl answer` as the next step.
    #[test]
    fn a_wait_for_answers_carries_the_questions() {
        let e = Happening::Waiting {
            reason: WaitReason::NeedsAnswers,
            until: at("2026-11-26T18:00:00Z"),
        };
        let m = message(now(), &e, &facts(), &EventClass::ALL).unwrap();
        assert_eq!(m.class, EventClass::NeedsAnswers);
        assert_eq!(m.priority, 4);
        assert!(m.body.contains("? Use Postgres or SQLite?"), "{}", m.body);
        assert!(m.body.contains("until 19:00"), "{}", m.body);
        assert!(m.next.starts_with("hank ctl answer TEXT"), "{}", m.next);
        // Not asked for: nothing (a wait for answers is neither a plain `wait` nor a run end).
        assert!(message(now(), &e, &facts(), &[EventClass::Wait]).is_none());
        assert!(message(now(), &e, &facts(), &[EventClass::RunEnd]).is_none());
    }

    #[test]
    fn fleet_tasks_merged_and_failed() {
        use crate::policy::fleet::TaskState;
        let task = |state| Happening::FleetTask {
            task: "api",
            state,
            branch: "hank/api",
            message: "merge conflict in src/a.rs",
        };
        // (state, class and title fragment, next step fragment, priority); others: nothing.
        let cases = [
            (
                TaskState::Merged,
                Some(("fleet task api merged", "hank fleet status", 3)),
            ),
            (
                TaskState::Failed,
                Some(("fleet task api failed", "git log hank/api", 4)),
            ),
            (TaskState::Running, None),
            (TaskState::Merging, None),
            (TaskState::Blocked, None),
        ];
        for (state, want) in cases {
            let got = message(now(), &task(state), &facts(), &EventClass::ALL);
            match want {
                None => assert!(got.is_none(), "{state:?}"),
                Some((title, next, priority)) => {
                    let m = got.unwrap();
                    assert_eq!(m.class, EventClass::FleetTask);
                    assert!(m.title.contains(title), "{}", m.title);
                    assert!(m.next.contains(next), "{}", m.next);
                    assert_eq!(m.priority, priority);
                    assert!(m.body.contains("project shop"), "{}", m.body);
                }
            }
        }
        assert!(
            message(
                now(),
                &task(TaskState::Merged),
                &facts(),
                &[EventClass::RunEnd]
            )
            .is_none()
        );
    }

    #[test]
    fn deliveries_pr_opened_ci_green_and_red() {
        let failing = vec!["test (linux)".to_string()];
        let pr = Delivered {
            branch: "hank/work",
            base: "main",
            remote: "origin",
            pushed: true,
            pr_url: Some("https://github.com/o/r/pull/7"),
            pr_number: Some(7),
            checks: "not_waited",
            check_names: &[],
        };
        let with = |checks, check_names| Delivered {
            checks,
            check_names,
            ..pr
        };
        let branch = Delivered {
            pr_url: None,
            pr_number: None,
            ..pr
        };
        let rejected = Delivered {
            pushed: false,
            ..branch
        };
        // (delivery, title fragment, priority)
        let cases = [
            (pr, "PR #7 opened from hank/work into main", 3),
            (with("green", &[]), "CI green on PR #7", 3),
            (with("failed", &failing), "CI failed on PR #7", 4),
            (with("missing", &[]), "no CI check appeared on PR #7", 4),
            (with("timed_out", &failing), "CI did not finish on PR #7", 4),
            (branch, "branch hank/work pushed to origin", 3),
            (rejected, "push of hank/work to origin rejected", 4),
        ];
        for (d, title, priority) in cases {
            let m = message(now(), &Happening::Delivery(d), &facts(), &EventClass::ALL)
                .unwrap_or_else(|| panic!("{title}"));
            assert_eq!(m.class, EventClass::Delivery);
            assert!(m.title.contains(title), "{title}: {}", m.title);
            assert_eq!(m.priority, priority, "{title}");
        }
        let red = with("failed", &failing);
        let m = message(now(), &Happening::Delivery(red), &facts(), &EventClass::ALL).unwrap();
        assert!(m.body.contains("checks: test (linux)"), "{}", m.body);
        assert!(
            m.body.contains("https://github.com/o/r/pull/7"),
            "{}",
            m.body
        );
        assert!(
            m.next.contains("the failure goes to the next loop"),
            "{}",
            m.next
        );
    }
}
