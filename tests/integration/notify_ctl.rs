//! NOTIFY against a loopback server speaking ntfy's publish/poll JSON and a webhook
//! receiver; `hank ctl` (journal, status, set refused) and signed remote commands (signed,
//! unsigned, replayed, tampered, stale).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::ctl_loop::{journal, user_dir};
use crate::support::{
    Project, TICK_ONE, assert_contains, assert_contains_all, error_json, stderr, stdout,
};

/// One request the server received.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) body: String,
}

/// A loopback HTTP server: records every request; answers GETs with `poll_body` (as ntfy
/// does, only the lines after the one whose `id` is the request's `since`).
pub(crate) struct Server {
    port: u16,
    pub(crate) reqs: Arc<Mutex<Vec<Req>>>,
    pub(crate) poll_body: Arc<Mutex<String>>,
}

/// The lines of `body` after the message `since=ID` of `path` names (all when none does).
fn after_since(body: &str, path: &str) -> String {
    let since = path
        .split(['?', '&'])
        .find_map(|kv| kv.strip_prefix("since="))
        .unwrap_or("");
    let lines: Vec<&str> = body.lines().collect();
    let from = lines
        .iter()
        .position(|l| {
            serde_json::from_str::<Value>(l).is_ok_and(|v| v["id"].as_str() == Some(since))
        })
        .map_or(0, |i| i + 1);
    lines[from..].iter().map(|l| format!("{l}\n")).collect()
}

impl Server {
    pub(crate) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let reqs = Arc::new(Mutex::new(Vec::new()));
        let poll_body = Arc::new(Mutex::new(String::new()));
        let (r, b) = (Arc::clone(&reqs), Arc::clone(&poll_body));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let Some(req) = read_request(&mut conn) else {
                    continue;
                };
                let answer = if req.method == "GET" {
                    after_since(&b.lock().unwrap(), &req.path)
                } else {
                    String::new()
                };
                r.lock().unwrap().push(req);
                let _ = conn.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                        answer.len()
                    )
                    .as_bytes(),
                );
            }
        });
        Self {
            port,
            reqs,
            poll_body,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The requests received with `method`, in order.
    fn with_method(&self, method: &str) -> Vec<Req> {
        self.reqs
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == method)
            .cloned()
            .collect()
    }

    pub(crate) fn posts(&self) -> Vec<Req> {
        self.with_method("POST")
    }

    /// The paths of the GET requests (the polls), in order.
    pub(crate) fn gets(&self) -> Vec<String> {
        self.with_method("GET")
            .into_iter()
            .map(|r| r.path)
            .collect()
    }

    /// The JSON bodies POSTed to `path`, in order.
    pub(crate) fn posted_json(&self, path: &str) -> Vec<Value> {
        self.posts()
            .iter()
            .filter(|r| r.path == path)
            .map(|r| serde_json::from_str(&r.body).unwrap())
            .collect()
    }

    /// The lines ntfy answers to the next polls (each a message, [`ntfy_line`]).
    pub(crate) fn serve_lines(&self, lines: &[String]) {
        *self.poll_body.lock().unwrap() = lines.join("\n") + "\n";
    }
}

/// A server and a project of `items` whose `.hankrc` is `hankrc` with `$SERVER` standing for
/// the server's URL.
pub(crate) fn served_project(items: &[&str], hankrc: &str) -> (Server, Project) {
    let server = Server::start();
    let p = Project::new(items);
    p.hankrc(&hankrc.replace("$SERVER", &server.url("")));
    (server, p)
}

fn read_request(conn: &mut std::net::TcpStream) -> Option<Req> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let len: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0);
        if body.len() >= len {
            let mut first = head.lines().next()?.split(' ');
            return Some(Req {
                method: first.next()?.to_string(),
                path: first.next()?.to_string(),
                body: body.to_string(),
            });
        }
    }
}

/// The webhook bodies received, by class.
pub(crate) fn webhook_classes(server: &Server) -> Vec<Value> {
    server.posted_json("/hook")
}

/// An always-failing agent: a backoff wait and the circuit opening — each delivered once
/// to ntfy and to the webhook with project, run, what happened and the next step in words
/// (no process id, no setting name, no shell command in the text); the run's end at the
/// open circuit is not a second, near-identical message.
#[test]
fn wait_and_circuit_open_are_delivered_once_to_each_target_in_words() {
    let (server, p) = served_project(
        &["a"],
        "RETRY_BACKOFF_SECONDS=0\nNOTIFY=\"ntfy:$SERVER/alerts,webhook:$SERVER/hook\"\n",
    );
    p.fake(
        "response",
        &error_json(
            "API Error: 500 Internal server error. This is a server-side issue",
            Some(500),
        ),
    )
    .fake("exit", "1")
    .fake("effect.sh", "date +%s%N >> changing.txt\n");
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "circuit_open");
    let hooks = webhook_classes(&server);
    let classes: Vec<&str> = hooks.iter().map(|h| h["class"].as_str().unwrap()).collect();
    assert!(classes.contains(&"wait"), "{classes:?}");
    assert_eq!(
        classes.iter().filter(|c| **c == "circuit_open").count(),
        1,
        "{classes:?}"
    );
    assert!(!classes.contains(&"run_end"), "told twice: {classes:?}");
    for h in &hooks {
        let msg = h["message"].as_str().unwrap();
        assert!(msg.contains("project proj · run started "), "{msg}");
        assert!(msg.contains(&format!("next: {}", h["next"].as_str().unwrap())));
        assert!(!msg.contains("pid"), "{msg}");
        assert!(!msg.contains("next: hank "), "{msg}");
        for setting in ["CB_COOLDOWN_MINUTES", "RETRY_BACKOFF", "VERIFY_COMMAND"] {
            assert!(!msg.contains(setting), "{msg}");
        }
        assert!(h["command"].as_str().unwrap().contains("hank"), "{h}");
        assert!(h["event"]["type"].is_string());
    }
    let open = hooks.iter().find(|h| h["class"] == "circuit_open").unwrap();
    assert!(
        open["command"]
            .as_str()
            .unwrap()
            .contains("hank reset circuit")
    );
    // The same messages through ntfy's JSON publish: POST / with the topic in the body.
    let ntfy = server.posted_json("/");
    assert_eq!(ntfy.len(), hooks.len());
    assert!(ntfy.iter().all(|n| n["topic"] == "alerts"));
    assert!(ntfy.iter().any(|n| {
        n["title"]
            .as_str()
            .unwrap()
            .starts_with("hank · proj: stopped: the agent made no headway")
    }));
}

/// `hank ctl stop` during a loop: the run's end arrives as "stopped by you", not as an
/// interruption the reader has to explain.
#[test]
fn a_stop_you_sent_arrives_as_stopped_by_you() {
    let (server, p) = served_project(&["a", "b", "c"], "NOTIFY=\"webhook:$SERVER/hook\"\n");
    p.fake("effect.sh", TICK_ONE).fake("sleep-1", "2");
    let child = crate::ctl_loop::Running::start(&p, &[], Duration::from_secs(60));
    p.wait_calls(1, Duration::from_secs(60));
    crate::ctl_loop::ctl(&p, &["stop"]);
    let o = child.wait();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let end = webhook_of(&server, "run_end");
    let msg = end["message"].as_str().unwrap();
    assert!(msg.starts_with("run stopped by you (exit 130)"), "{msg}");
    assert!(!msg.contains("interrupted"), "{msg}");
}

/// A loopback webhook is reached directly while `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY`
/// name a proxy (one that answers nothing: through it, nothing would arrive).
#[test]
fn a_loopback_webhook_bypasses_the_proxy() {
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let proxy = format!("http://127.0.0.1:{dead}");
    let (server, p) = served_project(
        &["a"],
        "NOTIFY=\"webhook:$SERVER/hook\"\nNOTIFY_EVENTS=run_end\n",
    );
    p.fake("effect.sh", TICK_ONE);
    let env: Vec<(&str, &str)> = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy"]
        .into_iter()
        .map(|k| (k, proxy.as_str()))
        .collect();
    let o = p.run_env(&env, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("notification to"), "{}", stderr(&o));
    let end = webhook_of(&server, "run_end");
    assert!(
        end["message"]
            .as_str()
            .unwrap()
            .starts_with("run ended: plan_complete"),
        "{end}"
    );
}

/// A "done" rejected by VERIFY_COMMAND, with NOTIFY_EVENTS filtering the rest out.
#[test]
fn a_rejected_done_is_delivered_and_the_filter_holds() {
    let (server, p) = served_project(
        &["a"],
        "RETRY_BACKOFF_SECONDS=0\nVERIFY_COMMAND=\"false\"\nMAX_REJECTED_COMPLETIONS=1\nNOTIFY=\"webhook:$SERVER/hook\"\nNOTIFY_EVENTS=verification_rejected\n",
    );
    p.fake("effect.sh", TICK_ONE);
    let o = p.run(&["--max-loops", "3"]);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    let hooks = webhook_classes(&server);
    assert!(!hooks.is_empty(), "{}", stderr(&o));
    for h in &hooks {
        assert_eq!(h["class"], "verification_rejected", "{h}");
        assert!(
            h["message"]
                .as_str()
                .unwrap()
                .starts_with("\"done\" rejected: the project's check failed (exit 1)")
        );
    }
}

/// A dead endpoint: the run's decisions and result are those of a run without NOTIFY, and
/// the failure is one warning naming the target.
#[test]
fn a_dead_endpoint_changes_nothing_but_one_warning() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let with = Project::new(&["a", "b"]);
    let without = Project::new(&["a", "b"]);
    for p in [&with, &without] {
        p.fake("effect.sh", TICK_ONE);
    }
    with.hankrc(&format!(
        "RETRY_BACKOFF_SECONDS=0\nNOTIFY=\"webhook:http://127.0.0.1:{port}/dead\"\n"
    ));
    let a = with.run(&[]);
    let b = without.run(&[]);
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    assert_eq!(a.status.code(), b.status.code());
    assert_eq!(with.calls(), without.calls());
    assert_eq!(
        with.status()["exit_reason"],
        without.status()["exit_reason"]
    );
    let warnings = stderr(&a)
        .lines()
        .filter(|l| l.contains("notification to webhook:http://127.0.0.1"))
        .count();
    assert_eq!(warnings, 1, "{}", stderr(&a));
}

#[test]
fn bad_notify_settings_are_refused_naming_the_key() {
    let p = Project::new(&["a"]);
    for (hankrc, says) in [
        (
            "NOTIFY=\"webhook:http://example.com/x\"\n",
            &["NOTIFY", "https://"][..],
        ),
        ("NOTIFY_EVENTS=\"wait,everything\"\n", &["NOTIFY_EVENTS"]),
    ] {
        p.hankrc(hankrc);
        let o = p.run(&[]);
        assert_eq!(o.status.code(), Some(1), "{hankrc}");
        assert_contains_all(&stderr(&o), says);
        assert_eq!(p.calls(), 0);
    }
}

#[test]
fn ctl_refuses_what_it_cannot_set_and_records_nothing_with_no_loop_running() {
    let p = Project::new(&["a"]);
    // No loop runs: a command would steer whichever run starts next.
    let o = p.run(&["ctl", "pause"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no loop is running"), "{}", stderr(&o));
    for (args, want) in [
        (
            vec!["ctl", "set", "AGENT=codex"],
            "read once when the run starts",
        ),
        (vec!["ctl", "set", "NOPE=1"], "not a hank setting"),
        (
            vec!["ctl", "set", "MAX_COST_USD=-3"],
            "expected an amount in USD",
        ),
        (vec!["ctl", "launch"], "is not a command"),
    ] {
        let o = p.run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    assert!(journal(&p).is_empty());
    let text = stdout(&p.run(&["ctl", "status"]));
    assert!(
        text.starts_with("commands: 0 pending, 0 acknowledged, 0 expired"),
        "{text}"
    );
}

fn sign(key: &str, time: i64, nonce: &str, command: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(format!("hank1\n{time}\n{nonce}\n{command}").as_bytes());
    let sig: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("hank1 {time} {nonce} {sig} {command}")
}

pub(crate) fn ntfy_line(id: &str, message: &str) -> String {
    serde_json::json!({"id": id, "time": 1, "event": "message", "topic": "ctl", "message": message})
        .to_string()
}

/// `hank ctl init` → a key outside the project; `hank ctl poll` reads the ntfy topic and
/// journals only the signed, fresh, unused command; every other is a warning saying why.
#[test]
fn remote_commands_signed_unsigned_replayed_tampered_and_stale() {
    let (server, p) = served_project(
        &["a"],
        "RETRY_BACKOFF_SECONDS=0\nCONTROL_TOPIC=\"$SERVER/ctl\"\n",
    );
    let o = p.run(&["ctl", "init"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let key = stdout(&o).trim().to_string();
    assert_eq!(key.len(), 64);
    let key_file = user_dir(&p).join("control.key");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&key_file).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    assert!(!std::fs::read_to_string(&key_file).unwrap().is_empty());
    // A second init does not replace the key.
    assert_eq!(p.run(&["ctl", "init"]).status.code(), Some(1));

    let now = "2026-11-26T10:00:00Z".parse::<jiff::Timestamp>().unwrap();
    let t = now.as_second();
    let good = sign(&key, t - 10, "nonce-good-000001", "set MAX_LOOPS=7");
    server.serve_lines(&[
        ntfy_line("m1", &good),
        ntfy_line("m2", "pause"),
        ntfy_line("m3", &good.replace("MAX_LOOPS=7", "MAX_LOOPS=9")),
        ntfy_line("m4", &sign(&key, t - 600, "nonce-stale-00001", "stop")),
        ntfy_line(
            "m5",
            &sign("another key entirely!", t, "nonce-other-00001", "stop"),
        ),
        ntfy_line("m6", &good),
        serde_json::json!({"id": "k", "time": 1, "event": "keepalive", "topic": "ctl"}).to_string(),
    ]);
    // `hank ctl ARGS` at `now`.
    let ctl_now = |args: &[&str]| {
        p.cmd()
            .env("HANK_NOW", now.to_string())
            .arg("ctl")
            .args(args)
            .output()
            .unwrap()
    };
    let o = ctl_now(&["poll"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert_contains(&stdout(&o), " set MAX_LOOPS=7");
    for (id, why) in [
        ("m2", "unsigned"),
        ("m3", "tampered"),
        ("m4", "stale"),
        ("m5", "tampered"),
        ("m6", "replayed"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains(&format!("refused, {why}")) && l.contains(id)),
            "{id} {why}: {err}"
        );
    }
    assert!(
        err.contains("1 remote command(s) recorded, 5 refused"),
        "{err}"
    );
    assert_eq!(server.gets()[0], "/ctl/json?poll=1&since=300s");

    // The next poll asks from the last message on; the same message again is a replay.
    server.serve_lines(&[ntfy_line("m7", &good)]);
    let o = ctl_now(&["poll"]);
    assert_contains(&stderr(&o), "refused, replayed");
    assert_eq!(server.gets().last().unwrap(), "/ctl/json?poll=1&since=m6");

    let cmds = journal(&p);
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0]["source"], "remote");
    assert!(cmds[0]["acknowledged"].is_null());
    assert_eq!(cmds[0]["command"], "set MAX_LOOPS=7");

    // `hank ctl sign` prints what a phone would publish; polled, it is taken.
    let o = ctl_now(&["sign", "retry-now"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let signed = stdout(&o).trim().to_string();
    server.serve_lines(&[ntfy_line("m8", &signed)]);
    let o = ctl_now(&["poll"]);
    assert_contains(&stdout(&o), " retry-now");

    // `--remote` publishes a signed command to the topic (the message is the body).
    let o = p.run(&["ctl", "--remote", "note", "use", "the", "v2", "API"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let posted = server
        .posts()
        .into_iter()
        .find(|r| r.path == "/ctl")
        .unwrap();
    assert!(posted.body.starts_with("hank1 "), "{}", posted.body);
    assert!(posted.body.ends_with(" note use the v2 API"));
}

/// The question [`asking`] makes the agent ask.
pub(crate) const QUESTION: &str = "Should I use PostgreSQL or SQLite for the storage layer?";

/// The fake agent answers every call with [`QUESTION`] (the run ends at `needs_answers`).
pub(crate) fn asking(p: &Project) {
    p.fake(
        "response",
        &crate::support::result_json("IN_PROGRESS", "IMPLEMENTATION", false, QUESTION),
    );
}

/// The first webhook body of `class` the server received.
pub(crate) fn webhook_of(server: &Server, class: &str) -> Value {
    let hooks = webhook_classes(server);
    hooks
        .iter()
        .find(|h| h["class"] == class)
        .cloned()
        .unwrap_or_else(|| panic!("no {class} in {hooks:?}"))
}

/// `needs_answers`: the run's end carries the agent's questions and says where to answer.
#[test]
fn needs_answers_is_delivered_with_the_questions() {
    let (server, p) = served_project(
        &["task"],
        "RETRY_BACKOFF_SECONDS=0\nNOTIFY=\"webhook:$SERVER/hook\"\n",
    );
    asking(&p);
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let h = webhook_of(&server, "needs_answers");
    let msg = h["message"].as_str().unwrap();
    assert_contains(msg, &format!("? {QUESTION}"));
    assert!(msg.contains("run ended: needs_answers (exit 2)"), "{msg}");
    assert!(h["command"].as_str().unwrap().contains(".hank/PROMPT.md"));
}

/// An agent switch (claude at its usage limit → a project profile) is delivered with the
/// time claude may be called again.
#[test]
fn an_agent_switch_is_delivered() {
    let (server, p) = served_project(
        &["a", "b"],
        "RETRY_BACKOFF_SECONDS=0\nNOTIFY=\"webhook:$SERVER/hook\"\nNOTIFY_EVENTS=agent_switch\n",
    );
    let demo = crate::agents::with_demo(&p);
    p.fake_usage_limit(None, 3600);
    std::fs::write(demo.join("effect.sh"), TICK_ONE).unwrap();
    let o = p.run(&["--agents", "claude,demo"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let hooks = webhook_classes(&server);
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    let msg = hooks[0]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("agent switched from claude to demo"),
        "{msg}"
    );
    assert!(msg.contains("claude may be called again at "), "{msg}");
}

/// More than a page (4 MiB) of junk on the control topic before a signed command: the poll
/// reads the topic in bounded pages from the last message taken, so the flood never makes
/// every poll fail and the signed `stop` after it is recorded.
#[test]
fn a_flood_on_the_control_topic_does_not_hide_a_signed_command() {
    let (server, p) = served_project(
        &["a"],
        "RETRY_BACKOFF_SECONDS=0\nCONTROL_TOPIC=\"$SERVER/ctl\"\n",
    );
    let o = p.run(&["ctl", "init"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let key = stdout(&o).trim().to_string();
    let now = "2026-11-26T10:00:00Z".parse::<jiff::Timestamp>().unwrap();
    let junk = "x".repeat(4000);
    let mut lines: Vec<String> = (0..1400)
        .map(|i| ntfy_line(&format!("j{i}"), &junk))
        .collect();
    lines.push(ntfy_line(
        "signed",
        &sign(&key, now.as_second() - 5, "nonce-after-flood", "stop"),
    ));
    server.serve_lines(&lines);
    let o = p
        .cmd()
        .env("HANK_NOW", now.to_string())
        .args(["ctl", "poll"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_contains(&stdout(&o), " stop");
    let cmds = journal(&p);
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    assert_eq!(cmds[0]["command"], "stop");
    assert!(server.gets().len() >= 2, "{:?}", server.gets().len());
}

/// The agent points CONTROL_TOPIC elsewhere during a run: `hank ctl poll` and `hank ctl
/// --remote` refuse, listing the change, until `hank config accept`.
#[test]
fn a_control_topic_the_agent_changed_is_refused_by_ctl_poll_and_remote() {
    let p = Project::new(&["a"]);
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nCONTROL_TOPIC=\"http://127.0.0.1:9/mine\"\n");
    p.fake(
        "effect.sh",
        &format!("{TICK_ONE}\necho 'CONTROL_TOPIC=\"http://127.0.0.1:9/agents\"' >> .hankrc\n"),
    );
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for args in [&["ctl", "poll"][..], &["ctl", "--remote", "stop"][..]] {
        let o = p.run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_contains_all(
            &err,
            &["CONTROL_TOPIC changed", "/agents", "hank config accept"],
        );
    }
}

/// The client retrying an overloaded API inside a call (Claude Code's `api_retry` stream
/// events) is a wait: status.json and `hank status` show it while the call lasts, the first
/// retry of the call is one `api_retry` event and one notification in words, and the next
/// status drops it.
#[test]
fn an_overloaded_api_retried_by_the_client_shows_as_a_wait() {
    let (server, p) = served_project(&["a"], "NOTIFY=\"webhook:$SERVER/hook\"\nMAX_LOOPS=1\n");
    let retry = |n: u32| {
        format!(
            r#"{{"type":"system","subtype":"api_retry","attempt":{n},"max_retries":10,"retry_delay_ms":60000,"error_status":529,"error":"overloaded","session_id":"s1"}}"#
        )
    };
    p.fake("early", &format!("{}\n{}\n", retry(1), retry(2)))
        .fake("sleep", "3");
    let child = p.spawn(&[]);
    let st = p.wait_status(Duration::from_secs(30), |s| s["api_retry"]["attempt"] == 2);
    assert_eq!(st["state"], "running");
    assert_eq!(st["api_retry"]["http_status"], 529);
    assert_eq!(st["api_retry"]["max_retries"], 10);
    assert!(st["api_retry"]["next_at"].is_string(), "{st}");
    let shown = p.run_code(&["status"], 0);
    assert_contains_all(
        &stdout(&shown),
        &["the API is overloaded; the client is retrying, attempt 2 of 10, next at"],
    );
    let out = child.wait_with_output().expect("hank run");
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    assert!(p.status().get("api_retry").is_none(), "{}", p.status());
    let events = p.events_of("api_retry");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["attempt"], 1);
    let hooks = webhook_classes(&server);
    let told: Vec<&Value> = hooks
        .iter()
        .filter(|h| h["message"].as_str().unwrap_or("").contains("overloaded"))
        .collect();
    assert_eq!(told.len(), 1, "{hooks:?}");
    assert_eq!(told[0]["class"], "wait");
    assert_contains(
        told[0]["message"].as_str().unwrap(),
        "the API is overloaded; the client is retrying, attempt 1 of 10, next at",
    );
}
