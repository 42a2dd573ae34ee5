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
        /// The workspace's repositories it changes (issue 51; none: the project).
        repos: &'a [String],
    },
    /// A delivery step ended: the branch pushed, the pull request, its checks.
    Delivery(Delivered<'a>),
    /// A `hank ctl` command the run took (`command` its name, `outcome` `applied` or why
    /// not): no message of its own; a stop taken makes the run's end "stopped by you".
    Control {
        command: &'a str,
        outcome: &'a str,
    },
    /// The client began retrying a failed API call inside a call (once per call).
    ApiRetry(Retrying<'a>),
    /// Any other event (loop started, agent finished, warning): no message.
    Other,
}

/// The client retrying a failed API call (the `api_retry` event's fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retrying<'a> {
    pub attempt: u32,
    pub max_retries: Option<u32>,
    /// As the client names it (`overloaded`, `rate_limit`, `unknown`, …).
    pub error: &'a str,
    pub http_status: Option<u16>,
    pub next_at: Option<Timestamp>,
}

impl Retrying<'_> {
    /// The API said it is overloaded (HTTP 529, or the client's `overloaded` error).
    #[must_use]
    pub fn overloaded(&self) -> bool {
        self.http_status == Some(529) || self.error.to_ascii_lowercase().contains("overloaded")
    }
}

/// A retry in words, with times as `at` shows them: `the API is overloaded; the client is
/// retrying, attempt 3 of 10, next at 14:05`.
#[must_use]
pub fn retry_words(r: &Retrying<'_>, at: impl Fn(Timestamp) -> String) -> String {
    let what = if r.overloaded() {
        "the API is overloaded".to_string()
    } else {
        let status = r
            .http_status
            .map(|s| format!(", HTTP {s}"))
            .unwrap_or_default();
        format!("an API request failed ({}{status})", one_line(r.error, 80))
    };
    let of = r
        .max_retries
        .map(|m| format!(" of {m}"))
        .unwrap_or_default();
    let next = r
        .next_at
        .map(|t| format!(", next at {}", at(t)))
        .unwrap_or_default();
    format!(
        "{what}; the client is retrying, attempt {}{of}{next}",
        r.attempt
    )
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

/// The host of what follows a URL's `scheme://` (lower case; an IPv6 address without its
/// brackets).
fn host_of(rest: &str) -> String {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("").to_string()
    } else {
        host.split(':').next().unwrap_or("").to_ascii_lowercase()
    }
}

/// Whether `url` goes to this machine's loopback interface (127.0.0.1, localhost, ::1):
/// such a request never goes through an `HTTP_PROXY`/`HTTPS_PROXY`, which could not reach it.
#[must_use]
pub fn is_loopback(url: &str) -> bool {
    url.split_once("://").is_some_and(|(_, rest)| {
        matches!(host_of(rest).as_str(), "127.0.0.1" | "localhost" | "::1")
    })
}

/// Whether `url` may be used: `https://HOST…`, or `http://` to the loopback interface.
#[must_use]
pub fn url_allowed(url: &str) -> bool {
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
    /// What happened, the run, and what to do next, in words a phone reader understands.
    pub body: String,
    /// What to do next, in words (no shell command, no setting name).
    pub next: String,
    /// The same next step as a command, for who reads it at a terminal (the webhook's
    /// `command` field; never in the phone's text).
    pub command: String,
    /// A link the reader can tap (the pull request): ntfy's `click`, the webhook's `url`.
    pub click: Option<String>,
    /// ntfy priority 1–5 (4 when the user must act).
    pub priority: u8,
}

/// What the run's earlier events say about the next one: one message per event (the
/// circuit opening is not told again as the run's end), and a stop the user sent is told
/// as theirs. Fed every event of the run in order by the sender.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// A `circuit_open` message was sent in this run.
    circuit_open_told: bool,
    /// `hank ctl stop` was taken by this run.
    stopped_by_user: bool,
}

impl Seen {
    /// The message for `event`, given what this run told before (see [`message`]).
    pub fn message(
        &mut self,
        at: Timestamp,
        event: &Happening<'_>,
        facts: &RunFacts,
        wanted: &[EventClass],
    ) -> Option<Message> {
        match *event {
            Happening::Control { command, outcome } => {
                if command == "stop" && outcome == "applied" {
                    self.stopped_by_user = true;
                }
                return None;
            }
            Happening::Exit {
                reason: Some(ExitReason::CircuitOpen),
                ..
            } if self.circuit_open_told => return None,
            _ => {}
        }
        let m = build(at, event, facts, wanted, self.stopped_by_user)?;
        if m.class == EventClass::CircuitOpen {
            self.circuit_open_told = true;
        }
        Some(m)
    }
}

/// The message for what happened at `at`, or `None` when it is not one the user asked for
/// (one event on its own; the sender goes through [`Seen::message`]).
#[must_use]
pub fn message(
    at: Timestamp,
    event: &Happening<'_>,
    facts: &RunFacts,
    wanted: &[EventClass],
) -> Option<Message> {
    build(at, event, facts, wanted, false)
}

fn build(
    at: Timestamp,
    event: &Happening<'_>,
    facts: &RunFacts,
    wanted: &[EventClass],
    stopped_by_user: bool,
) -> Option<Message> {
    let d = describe(at, event, facts, stopped_by_user)?;
    // A run that ended at `needs_answers` is still a run end for who asked only for those.
    let class = if d.class == EventClass::NeedsAnswers
        && !wanted.contains(&d.class)
        && matches!(event, Happening::Exit { .. })
    {
        EventClass::RunEnd
    } else {
        d.class
    };
    if !wanted.contains(&class) {
        return None;
    }
    let project = one_line(&facts.project, 80);
    let mut body = one_line(&d.what, 300);
    for line in &d.detail {
        body.push('\n');
        body.push_str(&one_line(line, 400));
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
    body.push_str(&format!("\nnext: {}", one_line(&d.next, 300)));
    Some(Message {
        class,
        title: format!("hank · {project}: {}", one_line(&d.what, 120)),
        body,
        next: d.next,
        command: d.command,
        click: d.click,
        priority: d.priority,
    })
}

/// An event as words: what happened, its details, what to do next (in words and as a
/// command), the link to tap.
struct Described {
    class: EventClass,
    what: String,
    detail: Vec<String>,
    next: String,
    command: String,
    click: Option<String>,
    priority: u8,
}

fn said(
    class: EventClass,
    what: String,
    detail: Vec<String>,
    (next, command): (&str, &str),
    priority: u8,
) -> Described {
    Described {
        class,
        what,
        detail,
        next: next.to_string(),
        command: command.to_string(),
        click: None,
        priority,
    }
}

/// A wait's reason in words.
fn wait_words(reason: WaitReason) -> &'static str {
    match reason {
        WaitReason::RateLimit => "the hourly limit of agent calls was reached",
        WaitReason::TokenLimit => "the hourly limit of tokens was reached",
        WaitReason::UsageLimit => "the agent's usage limit was reached",
        WaitReason::UsageWindow => "the agent's usage window is nearly used up",
        WaitReason::Backoff => "the agent failed; it is tried again after a pause",
        WaitReason::Paused => "paused by you",
        WaitReason::NeedsAnswers => "the agent needs answers",
    }
}

fn describe(
    at: Timestamp,
    event: &Happening<'_>,
    f: &RunFacts,
    stopped_by_user: bool,
) -> Option<Described> {
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
                "the loop waits for your answer until {}; without one it stops then",
                local(until)
            ));
            said(
                EventClass::NeedsAnswers,
                "the agent needs answers: the loop waits for yours".into(),
                detail,
                (
                    "reply with your answer from the project's terminal or by a remote command",
                    "hank ctl answer TEXT (or hank ctl --remote answer TEXT)",
                ),
                4,
            )
        }
        Happening::Waiting { reason, until } => said(
            EventClass::Wait,
            format!("{}: waiting until {}", wait_words(reason), local(until)),
            vec![],
            (
                "nothing to do: the loop goes on by itself (you can end the wait early)",
                "hank ctl retry-now (end the wait now) · hank status",
            ),
            3,
        ),
        Happening::ApiRetry(r) => said(
            EventClass::Wait,
            retry_words(&r, local),
            vec!["the agent's call waits while the client tries again".into()],
            (
                "nothing to do: the client keeps trying (you can stop the run if it lasts)",
                "hank status · hank ctl stop",
            ),
            3,
        ),
        Happening::CircuitChanged {
            to: CircuitState::Open,
            reason,
        } => said(
            EventClass::CircuitOpen,
            format!("stopped: the agent made no headway ({reason})"),
            vec![format!(
                "the safety stop tripped at {}; the run has ended",
                local(at)
            )],
            (
                "look at what the agent did, fix what blocks it, then reset the stop and start again",
                "hank circuit · then hank reset circuit && hank run",
            ),
            4,
        ),
        Happening::Verification(check)
            if check.kind == CheckKind::Completion
                && !check.passed
                && !check.interrupted
                && !check.could_not_run() =>
        {
            said(
                EventClass::VerificationRejected,
                format!(
                    "\"done\" rejected: the project's check failed ({}) after loop {}",
                    check.how_it_ended(),
                    check.number
                ),
                vec![],
                (
                    "nothing to do: the agent gets the failure and goes on",
                    "hank status",
                ),
                3,
            )
        }
        Happening::AgentSwitched {
            from,
            to,
            reason,
            until,
        } => said(
            EventClass::AgentSwitch,
            format!("agent switched from {from} to {to}: {reason}"),
            until
                .map(|u| vec![format!("{from} may be called again at {}", local(u))])
                .unwrap_or_default(),
            ("nothing to do: the run goes on", "hank status"),
            3,
        ),
        Happening::Exit {
            reason: exit_reason,
            exit_code,
            message,
        } => {
            let by_user = stopped_by_user && exit_reason == Some(ExitReason::Interrupted);
            let reason = exit_reason.map_or("error", ExitReason::as_str);
            let mut detail = vec![
                if by_user {
                    "you asked it to stop (hank ctl stop)".to_string()
                } else {
                    message.to_string()
                },
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
            let next: (&str, &str) = match exit_reason {
                Some(ExitReason::NeedsAnswers) => (
                    "answer the questions in the project's prompt file, then start the run again",
                    "answer in .hank/PROMPT.md, then hank run (NEEDS_ANSWERS=wait: answer with hank ctl answer while it waits)",
                ),
                Some(r) if r.is_completion() => (
                    "nothing to do: read the run's report when you are back",
                    "hank report",
                ),
                Some(ExitReason::MaxLoops) => (
                    "it used all the loops it was allowed: start it again with more to go on",
                    "hank run --max-loops N (a higher N)",
                ),
                Some(ExitReason::CostBudget) => (
                    "it spent its budget: start it again with a higher one to go on",
                    "hank run --max-cost USD (a higher amount)",
                ),
                Some(ExitReason::MaxRuntime) => (
                    "its time was up: start it again to go on",
                    "hank run --max-runtime DURATION",
                ),
                Some(ExitReason::CircuitOpen) => (
                    "look at what the agent did, fix what blocks it, then reset the stop and start again",
                    "hank circuit · then hank reset circuit && hank run",
                ),
                Some(ExitReason::Interrupted) if by_user => (
                    "nothing to do: start it again when you want, it resumes",
                    "hank run (it resumes)",
                ),
                Some(ExitReason::Interrupted) => (
                    "start it again when you want: it resumes where it stopped",
                    "hank run (it resumes)",
                ),
                _ => (
                    "look at the project's status at the terminal",
                    "hank status · hank doctor",
                ),
            };
            let what = if by_user {
                format!("run stopped by you (exit {exit_code})")
            } else {
                format!("run ended: {reason} (exit {exit_code})")
            };
            said(
                if needs_answers {
                    EventClass::NeedsAnswers
                } else {
                    EventClass::RunEnd
                },
                what,
                detail,
                next,
                if exit_code == 0 || by_user { 3 } else { 4 },
            )
        }
        Happening::FleetTask {
            task,
            state,
            branch,
            message,
            repos,
        } => fleet_task(task, state, (branch, repos), message)?,
        Happening::Delivery(d) => delivery(&d)?,
        _ => return None,
    })
}

/// A fleet task merged or failed (other states send nothing); a task across repositories
/// names them.
fn fleet_task(
    task: &str,
    state: crate::policy::fleet::TaskState,
    (branch, repos): (&str, &[String]),
    message: &str,
) -> Option<Described> {
    use crate::policy::fleet::TaskState;
    let (task, kept) = if repos.is_empty() {
        (task.to_string(), branch.to_string())
    } else {
        let names = repos.join(", ");
        (format!("{task} ({names})"), format!("{branch} in {names}"))
    };
    let detail: Vec<String> = if message.trim().is_empty() {
        Vec::new()
    } else {
        vec![message.to_string()]
    };
    Some(match state {
        TaskState::Merged => said(
            EventClass::FleetTask,
            format!("fleet task {task} merged"),
            detail,
            (
                "nothing to do: the fleet goes on with the other tasks",
                "hank fleet status",
            ),
            3,
        ),
        TaskState::Failed => said(
            EventClass::FleetTask,
            format!("fleet task {task} failed; its work is kept on branch {kept}"),
            detail,
            (
                "look at the task's branch when you are back; the other tasks go on",
                &format!("hank fleet status · git log {branch}"),
            ),
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
    let status = "hank status";
    let mut described = if !d.pushed {
        said(
            EventClass::Delivery,
            format!("push of {} to {} rejected", d.branch, d.remote),
            detail,
            (
                "nothing to do now: the agent gets the rejection in its next loop",
                "hank status (the hook's output goes to the next loop) · hank deliver",
            ),
            4,
        )
    } else {
        match d.checks {
            "failed" => said(
                EventClass::Delivery,
                format!("CI failed on {pr}"),
                detail,
                (
                    "nothing to do now: the agent gets the failure in its next loop",
                    "hank status (the failure goes to the next loop) · hank deliver after a fix",
                ),
                4,
            ),
            "green" => said(
                EventClass::Delivery,
                format!("CI green on {pr}"),
                detail,
                ("review the pull request", d.pr_url.unwrap_or(status)),
                3,
            ),
            "missing" => said(
                EventClass::Delivery,
                format!("no CI check appeared on {pr}"),
                detail,
                (
                    "the repository may have no CI for this branch: look at its workflows, then deliver again",
                    "hank deliver (CI_APPEAR_TIMEOUT) · check the repository's workflows",
                ),
                4,
            ),
            "timed_out" => said(
                EventClass::Delivery,
                format!("CI did not finish on {pr} in the time allowed"),
                detail,
                (
                    "deliver again to wait for it once more",
                    "hank deliver (it waits again)",
                ),
                4,
            ),
            _ if d.pr_url.is_some() || d.pr_number.is_some() => said(
                EventClass::Delivery,
                format!("{pr} opened from {} into {}", d.branch, d.base),
                detail,
                ("review the pull request", d.pr_url.unwrap_or(status)),
                3,
            ),
            _ => said(
                EventClass::Delivery,
                format!("branch {} pushed to {}", d.branch, d.remote),
                detail,
                ("nothing to do: the branch is on the remote", status),
                3,
            ),
        }
    };
    described.click = d.pr_url.map(str::to_string);
    Some(described)
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
            run: "04:20".into(),
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
        for (url, loopback) in [
            ("http://127.0.0.1:9/h", true),
            ("http://LOCALHOST/h", true),
            ("https://[::1]:8443/h", true),
            ("http://user@localhost:1/h", true),
            ("http://127.0.0.1.evil.com/x", false),
            ("https://ntfy.sh/t", false),
            ("https://evil.com/?u=http://127.0.0.1/", false),
            ("localhost", false),
        ] {
            assert_eq!(is_loopback(url), loopback, "{url}");
        }
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
                    "the agent's usage limit was reached: waiting until 14:05 Thu 26 Nov (Europe/Paris)",
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
                    "stopped: the agent made no headway (no progress in 3 loops)",
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
                    "\"done\" rejected: the project's check failed (exit 101) after loop 4",
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
                    assert!(m.command.contains(next), "{kind:?}: {}", m.command);
                    assert!(m.body.contains("project shop · run 04:20"));
                    assert!(m.body.contains(&format!("next: {}", m.next)));
                    assert_words(&m);
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
        assert!(
            m.command.starts_with("hank ctl answer TEXT"),
            "{}",
            m.command
        );
        assert_words(&m);
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
            repos: &[],
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
                    assert!(m.command.contains(next), "{}", m.command);
                    assert_words(&m);
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
        // A task across repositories names them.
        let repos = ["api".to_string(), "web".to_string()];
        let across = |state| Happening::FleetTask {
            task: "Rename",
            state,
            branch: "hank/rename",
            message: "",
            repos: &repos,
        };
        for (state, title) in [
            (TaskState::Merged, "fleet task Rename (api, web) merged"),
            (
                TaskState::Failed,
                "fleet task Rename (api, web) failed; its work is kept on branch hank/rename in api, web",
            ),
        ] {
            let m = message(now(), &across(state), &facts(), &EventClass::ALL).unwrap();
            assert!(m.title.contains(title), "{}", m.title);
            assert_words(&m);
        }
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
            assert_words(&m);
            // The pull request is a link to tap, wherever there is one.
            assert_eq!(m.click.as_deref(), d.pr_url, "{title}");
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
            m.command.contains("the failure goes to the next loop"),
            "{}",
            m.command
        );
        assert!(m.next.contains("the agent gets the failure"), "{}", m.next);
    }

    /// What a phone shows is words: no process id, no setting name, no shell command.
    fn assert_words(m: &Message) {
        let settings = [
            "CB_COOLDOWN_MINUTES",
            "ANSWER_TIMEOUT",
            "VERIFY_COMMAND",
            "CI_TIMEOUT",
            "CI_APPEAR_TIMEOUT",
            "NEEDS_ANSWERS",
        ];
        for text in [&m.title, &m.body, &m.next] {
            assert!(!text.contains("pid"), "{text}");
            for s in settings {
                assert!(!text.contains(s), "{s} in {text}");
            }
        }
        assert!(!m.next.contains("hank "), "a command: {}", m.next);
        assert!(!m.body.contains("next: hank"), "{}", m.body);
    }

    /// The circuit opening is one message: the run's end it causes is not told again; a
    /// run end of another kind still is.
    #[test]
    fn one_message_per_event_the_circuit_opening_is_not_told_twice() {
        let open = Happening::CircuitChanged {
            to: CircuitState::Open,
            reason: "no progress in 3 loops",
        };
        let end = |reason| Happening::Exit {
            reason: Some(reason),
            exit_code: 2,
            message: "circuit breaker open",
        };
        let all = EventClass::ALL;
        let mut seen = Seen::default();
        let m = seen.message(now(), &open, &facts(), &all).unwrap();
        assert_eq!(m.class, EventClass::CircuitOpen);
        assert_eq!(
            seen.message(now(), &end(ExitReason::CircuitOpen), &facts(), &all),
            None
        );
        // Who asked only for run ends gets the end (the opening was not sent to them).
        let mut seen = Seen::default();
        let wanted = [EventClass::RunEnd];
        assert_eq!(seen.message(now(), &open, &facts(), &wanted), None);
        let m = seen
            .message(now(), &end(ExitReason::CircuitOpen), &facts(), &wanted)
            .unwrap();
        assert_eq!(m.class, EventClass::RunEnd);
        // Without an opening told, a circuit_open end is told.
        let mut seen = Seen::default();
        assert!(
            seen.message(now(), &end(ExitReason::CircuitOpen), &facts(), &all)
                .is_some()
        );
    }

    /// A stop taken from `hank ctl stop` makes the run's end "stopped by you"; a refused
    /// stop or another command does not, nor does a Ctrl-C.
    #[test]
    fn a_client_retrying_the_api_is_one_wait_message_in_words() {
        let at_t = |_: Timestamp| "14:05".to_string();
        let r = |error, http_status, max_retries, next_at| Retrying {
            attempt: 3,
            max_retries,
            error,
            http_status,
            next_at,
        };
        let next = Some(at("2026-11-24T14:05:00Z"));
        let table = [
            (
                r("overloaded", Some(529), Some(10), next),
                "the API is overloaded; the client is retrying, attempt 3 of 10, next at 14:05",
            ),
            (
                r("overloaded_error", None, None, None),
                "the API is overloaded; the client is retrying, attempt 3",
            ),
            (
                r("unknown", Some(500), Some(10), next),
                "an API request failed (unknown, HTTP 500); the client is retrying, attempt 3 of 10, next at 14:05",
            ),
        ];
        for (retry, want) in table {
            assert_eq!(retry_words(&retry, at_t), want);
        }
        let m = message(
            at("2026-11-24T14:04:00Z"),
            &Happening::ApiRetry(table[0].0),
            &facts(),
            &EventClass::ALL,
        )
        .unwrap();
        assert_eq!(m.class, EventClass::Wait);
        assert!(m.title.contains("the API is overloaded"), "{}", m.title);
        assert_words(&m);
    }

    #[test]
    fn a_stop_you_sent_is_told_as_yours() {
        let interrupted = Happening::Exit {
            reason: Some(ExitReason::Interrupted),
            exit_code: 130,
            message: "interrupted by the user (Ctrl-C / SIGTERM)",
        };
        let control = |command, outcome| Happening::Control { command, outcome };
        let cases = [
            (vec![control("stop", "applied")], true),
            (vec![control("stop", "refused: no loop is running")], false),
            (vec![control("pause", "applied")], false),
            (vec![], false),
        ];
        for (before, by_user) in cases {
            let mut seen = Seen::default();
            for c in &before {
                assert_eq!(seen.message(now(), c, &facts(), &EventClass::ALL), None);
            }
            let m = seen
                .message(now(), &interrupted, &facts(), &EventClass::ALL)
                .unwrap();
            assert_eq!(
                m.title.ends_with("run stopped by you (exit 130)"),
                by_user,
                "{before:?}: {}",
                m.title
            );
            assert_eq!(m.body.contains("interrupted"), !by_user, "{}", m.body);
            assert_words(&m);
        }
    }
}
