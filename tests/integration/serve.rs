//! `hank serve`: the pages of a real run's records over a real socket, the token and the
//! cookie, the Host check, the escaping of what the agent wrote, the live updates (a
//! `change` event after a record changes), and that serving writes nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use crate::support::{Project, TICK_ONE, exits, terminate};

/// A running `hank serve`: its process and the URL it printed.
struct Served {
    child: Option<Child>,
    /// `127.0.0.1:P`.
    addr: String,
    token: String,
}

impl Served {
    fn start(p: &Project) -> Served {
        let mut child = p.spawn(&["serve"]);
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let rest = first
            .trim()
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("first line {first:?}"));
        let (addr, query) = rest.split_once("/?token=").unwrap();
        assert!(addr.starts_with("127.0.0.1:"), "{first}");
        Served {
            child: Some(child),
            addr: addr.to_owned(),
            token: query.to_owned(),
        }
    }

    fn cookie(&self) -> String {
        format!("hank_token={}", self.token)
    }

    /// `GET path` with `Host` and `Cookie` as given; the status, headers (lower-case names)
    /// and body.
    fn get(&self, path: &str, host: Option<&str>, cookie: Option<&str>) -> Answer {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
        if let Some(h) = host {
            req.push_str(&format!("Host: {h}\r\n"));
        }
        if let Some(c) = cookie {
            req.push_str(&format!("Cookie: {c}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        Answer::parse(&raw)
    }

    fn page(&self, path: &str) -> Answer {
        self.get(path, Some(&self.addr.clone()), Some(&self.cookie()))
    }

    fn stop(mut self) {
        terminate(self.child.take().unwrap());
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn parse(raw: &str) -> Answer {
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Answer {
            status,
            headers,
            body: body.to_owned(),
        }
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// A project after a real two-loop run with the fake agent, a live log line that holds a
/// script, and its key under the per-user state.
fn served_project() -> (Project, String) {
    let p = Project::new(&["one", "two"]);
    p.git_init();
    p.fake("effect.sh", TICK_ONE);
    p.run_code(&[], 0);
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(p.dir.join(".hank/live.log"))
        .unwrap();
    writeln!(log, "<script>document.title='pwned'</script> done").unwrap();
    let projects = p.home.join(".local/state/hank/projects");
    let key = std::fs::read_dir(&projects)
        .unwrap()
        .flatten()
        .find(|e| e.path().join("project.json").is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .expect("the run left its project record");
    (p, key)
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_pages_show_a_run_to_the_token_only_and_write_nothing() {
    let (p, key) = served_project();
    let before = files(&p.dir.join(".hank"));
    let s = Served::start(&p);
    let host = s.addr.clone();

    // No token, a wrong one, a wrong Host: a status and a line, no data.
    for (path, h, cookie, code) in [
        ("/projects", Some(host.as_str()), None, 401),
        (format!("/p/{key}").as_str(), Some(host.as_str()), None, 401),
        ("/events?watch=*", Some(host.as_str()), None, 401),
        ("/projects?token=nope", Some(host.as_str()), None, 403),
        (
            "/projects",
            Some("attacker.example:80"),
            Some(s.cookie()),
            421,
        ),
        ("/projects", None, Some(s.cookie()), 421),
        (
            "/projects",
            Some(&format!(
                "rebind.example:{}",
                host.rsplit(':').next().unwrap()
            )),
            Some(s.cookie()),
            421,
        ),
    ] {
        let a = s.get(path, h, cookie.as_deref());
        assert_eq!(a.status, code, "{path} {h:?}: {}", a.body);
        assert!(!a.body.contains("proj"), "{path}: {}", a.body);
        assert!(
            a.header("content-security-policy")
                .contains("default-src 'none'")
        );
    }

    // The token of the URL: a cookie for the whole site, and the same page without it.
    let a = s.get(&format!("/?token={}", s.token), Some(&host), None);
    assert_eq!(a.status, 303);
    assert_eq!(a.header("location"), "/");
    let cookie = a.header("set-cookie");
    assert!(cookie.starts_with(&s.cookie()), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));

    // Started in the project: `/` opens on it.
    let a = s.page("/");
    assert_eq!(a.status, 303);
    assert_eq!(a.header("location"), format!("/p/{key}"));

    let list = s.page("/projects");
    assert_eq!(list.status, 200);
    assert!(
        list.body.contains(&format!("href=\"/p/{key}\"")),
        "{}",
        list.body
    );
    assert!(list.body.contains("completed") && list.body.contains("plan_complete"));

    let run = s.page(&format!("/p/{key}"));
    assert_eq!(run.status, 200, "{}", run.body);
    assert!(run.body.contains(r#"id="loop-timeline""#), "{}", run.body);
    let chart = run.body.split(r#"id="loop-timeline""#).nth(1).unwrap();
    let chart = chart.split("</svg>").next().unwrap();
    assert_eq!(
        chart.matches("<rect class=\"ok\"").count(),
        2,
        "two loops drawn: {chart}"
    );
    assert!(run.body.contains(r#"id="breaker""#) && run.body.contains("CLOSED"));
    assert_eq!(run.header("x-frame-options"), "DENY");
    assert_eq!(run.header("cache-control"), "no-store");

    let log = s.page(&format!("/p/{key}/log"));
    assert!(
        log.body
            .contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt; done"),
        "{}",
        log.body
    );
    assert!(!log.body.contains("<script>document"));

    let fleet = s.page(&format!("/p/{key}/fleet"));
    assert!(fleet.body.contains("no fleet has run"), "{}", fleet.body);
    assert_eq!(s.page("/p/nope-0000000000000000").status, 404);
    assert_eq!(s.page("/p/..%2F..%2Fetc/log").status, 404);
    let css = s.page("/static/app.css");
    assert!(css.header("content-type").starts_with("text/css"));

    s.stop();
    assert_eq!(before, files(&p.dir.join(".hank")), "serving wrote nothing");
}

#[test]
fn a_changed_record_is_pushed_as_an_event() {
    let (p, key) = served_project();
    let s = Served::start(&p);
    let mut stream = TcpStream::connect(&s.addr).unwrap();
    // A bound on a stuck server, not a timing assertion: the event comes within a second.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET /events?watch={key} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\n\r\n",
        s.addr,
        s.cookie()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    let mut head = String::new();
    while line != "\r\n" {
        line.clear();
        reader.read_line(&mut line).unwrap();
        head.push_str(&line);
    }
    assert!(head.contains("text/event-stream"), "{head}");
    // The record changes.
    let status = p.dir.join(".hank/status.json");
    let text = std::fs::read_to_string(&status).unwrap();
    std::fs::write(&status, text.replace("\"completed\"", "\"running\"")).unwrap();
    let mut got = String::new();
    while !got.contains("event: change") {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "stream ended: {got}"
        );
        got.push_str(&line);
    }
    s.stop();
}

#[test]
fn a_finished_fleet_is_drawn_from_its_records_and_its_worktrees_are_not_projects() {
    let p = crate::fleet::project("## Api\n- [ ] a\n## Ui\n- [ ] b\n");
    let o = p.run(&["fleet", "--agents", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", crate::support::stderr(&o));
    let records = std::fs::read_dir(p.home.join(".local/state/hank/projects"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("project.json").is_file())
        .count();
    assert!(records > 1, "the tasks' runs keep records too: {records}");
    let s = Served::start(&p);
    let list = s.page("/projects");
    // The checkout is the one project: its tasks' worktree runs (under the per-user state)
    // keep records too, and are shown on the fleet's page only.
    assert_eq!(
        list.body.matches("<section class=\"project\"").count(),
        1,
        "{}",
        list.body
    );
    let key = list
        .body
        .split("href=\"/p/")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_owned();
    let fleet = s.page(&format!("/p/{key}/fleet"));
    assert_eq!(fleet.status, 200);
    for task in ["Api", "Ui"] {
        assert!(
            fleet
                .body
                .contains(&format!(r#"<tr id="task-{task}" data-state="merged">"#)),
            "{}",
            fleet.body
        );
    }
    assert!(fleet.body.contains(r#"id="fleet-gantt""#));
    assert!(
        fleet.body.contains(r#"class="state-running""#),
        "{}",
        fleet.body
    );
    assert!(fleet.body.contains(r#"class="state-merged""#));
    assert!(fleet.body.contains("<code>hank/fleet</code>"));
    s.stop();
}

#[test]
fn bad_flags_are_refused_by_name() {
    let p = Project::new(&["one"]);
    let o = p.run(&["serve", "--port", "http"]);
    let err = exits(&o, 1);
    assert!(
        err.contains("--port") && err.contains("0 to 65535"),
        "{err}"
    );
    let o = p.run(&["serve", "--bind", "my-laptop"]);
    let err = exits(&o, 1);
    assert!(
        err.contains("--bind") && err.contains("IP address"),
        "{err}"
    );
}
