//! A fake of the GitHub REST and GraphQL APIs on 127.0.0.1, for `hank deliver` through the
//! REST path (`GITHUB_API_URL=http://127.0.0.1:PORT`) and through the real `gh` (as its HTTP
//! proxy: `GH_HOST=github.localhost HTTP_PROXY=http://127.0.0.1:PORT` makes gh send
//! `GET http://api.github.localhost/user` here). Every request is recorded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub method: String,
    /// The path with its query, the scheme and host of a proxy request removed.
    pub path: String,
    /// The request target as sent (absolute-form through a proxy).
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// What the fake answers.
#[derive(Debug, Default)]
pub(crate) struct World {
    pub requests: Vec<Recorded>,
    /// Check runs of every commit.
    pub check_runs: Vec<Value>,
    /// When not empty: the check runs of the n-th distinct commit asked about (the last entry
    /// for every later one), instead of `check_runs` (a red CI, then green after a fix).
    pub check_runs_per_commit: Vec<Vec<Value>>,
    /// The commits whose check runs were asked for, in order.
    pub commits_asked: Vec<String>,
    /// Commit statuses of every commit.
    pub statuses: Vec<Value>,
    pub reviews: Vec<Value>,
    pub review_comments: Vec<Value>,
    pub pulls: Vec<Value>,
    /// `permissions.push` of the repository.
    pub can_push: bool,
    /// How many pull request creations are refused (403, GitHub's own message) before one
    /// is accepted.
    pub refuse_pulls: u32,
    /// When set, `refuse_pulls` counts only the pull requests of this repository
    /// (`owner/name`): a forge failing one route of a change set.
    pub refuse_pulls_of: Option<String>,
    /// The repository's issues (`number`, `title`, `body`, `html_url`, `labels` as
    /// `{"name"}`, `state`): listed by label, labelled, commented (`hank watch`).
    pub issues: Vec<Value>,
    /// Issue comments: `id`, `issue`, `body` (created, edited in place).
    pub comments: Vec<Value>,
    /// Listings answered 304 (`If-None-Match` equal to their `ETag`).
    pub not_modified: u32,
    /// How many issue listings are answered 429 with `Retry-After: 1` (a secondary rate
    /// limit) before one is served.
    pub throttle_issues: u32,
}

impl World {
    /// An open issue `n` titled `title` carrying `labels`.
    pub(crate) fn issue(&mut self, n: u64, title: &str, body: &str, labels: &[&str]) {
        let labels: Vec<Value> = labels.iter().map(|l| json!({"name": l})).collect();
        self.issues.push(json!({
            "number": n, "title": title, "body": body, "state": "open",
            "html_url": format!("https://github.com/o/r/issues/{n}"),
            "labels": labels,
        }));
    }

    /// The label names of issue `n`.
    pub(crate) fn labels_of(&self, n: u64) -> Vec<String> {
        self.issues
            .iter()
            .find(|i| i["number"] == n)
            .map(|i| {
                i["labels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The comments on issue `n`, their bodies.
    pub(crate) fn comments_on(&self, n: u64) -> Vec<String> {
        self.comments
            .iter()
            .filter(|c| c["issue"] == n)
            .map(|c| c["body"].as_str().unwrap().to_string())
            .collect()
    }
}

pub(crate) struct FakeGitHub {
    pub port: u16,
    pub world: Arc<Mutex<World>>,
}

impl FakeGitHub {
    pub(crate) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let world = Arc::new(Mutex::new(World {
            can_push: true,
            ..World::default()
        }));
        let w = Arc::clone(&world);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let w = Arc::clone(&w);
                std::thread::spawn(move || serve(stream, &w));
            }
        });
        Self { port, world }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.world.lock().unwrap().requests.clone()
    }

    pub(crate) fn set(&self, f: impl FnOnce(&mut World)) {
        f(&mut self.world.lock().unwrap());
    }
}

fn serve(stream: TcpStream, world: &Mutex<World>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return;
        };
        let (method, target) = (method.to_string(), target.to_string());
        let mut headers = Vec::new();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let chunked = headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
        });
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if chunked {
            // gh streams a `--input -` body: chunked, no Content-Length.
            loop {
                let mut size = String::new();
                if reader.read_line(&mut size).unwrap_or(0) == 0 {
                    return;
                }
                let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0u8; n + 2];
                if reader.read_exact(&mut chunk).is_err() {
                    return;
                }
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
            headers.push(("X-Fake-Body".into(), "chunked".into()));
        }
        let path = match target.strip_prefix("http://") {
            Some(rest) => rest
                .find('/')
                .map_or("/".to_string(), |i| rest[i..].to_string()),
            None => target.clone(),
        };
        let rec = Recorded {
            method,
            path,
            target,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        };
        let close = rec
            .header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"));
        let (status, reply, etag) = {
            let mut w = world.lock().unwrap();
            let throttled =
                w.throttle_issues > 0 && rec.method == "GET" && rec.path.contains("/issues?");
            let (status, reply) = if throttled {
                w.throttle_issues -= 1;
                (
                    429,
                    json!({"message": "You have exceeded a secondary rate limit."}),
                )
            } else {
                answer(&mut w, &rec)
            };
            // Listings carry an ETag; asked again with it unchanged, they are a 304.
            let listing = rec.method == "GET"
                && status == 200
                && reply.is_array()
                && (rec.path.contains("/issues?")
                    || rec.path.contains("/pulls?state=open&per_page"));
            let etag = listing.then(|| format!("\"{:x}\"", fnv(reply.to_string().as_bytes())));
            let mut status = status;
            if etag.is_some() && rec.header("if-none-match") == etag.as_deref() {
                status = 304;
                w.not_modified += 1;
            }
            w.requests.push(rec);
            (status, reply, etag)
        };
        let text = if status == 304 {
            String::new()
        } else {
            reply.to_string()
        };
        let reason = match status {
            200 => "OK",
            201 => "Created",
            304 => "Not Modified",
            429 => "Too Many Requests",
            403 => "Forbidden",
            404 => "Not Found",
            _ => "Unprocessable Entity",
        };
        let mut etag = etag.map_or_else(String::new, |e| format!("ETag: {e}\r\n"));
        if status == 429 {
            etag.push_str("Retry-After: 1\r\n");
        }
        let out = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\nX-GitHub-Media-Type: github.v3\r\nX-RateLimit-Limit: 5000\r\nX-RateLimit-Remaining: 4990\r\n{etag}\r\n{text}",
            text.len()
        );
        if stream.write_all(out.as_bytes()).is_err() || close {
            return;
        }
    }
}

fn answer(w: &mut World, r: &Recorded) -> (u16, Value) {
    let (path, _query) = r.path.split_once('?').unwrap_or((&r.path, ""));
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (r.method.as_str(), segs.as_slice()) {
        ("GET", ["user"]) => (200, json!({"login": "hank-bot", "id": 1})),
        ("GET", ["repos", o, n]) => (
            200,
            json!({"full_name": format!("{o}/{n}"), "default_branch": "main",
                   "permissions": {"admin": false, "push": w.can_push, "pull": true}}),
        ),
        ("POST", ["repos", o, n, "pulls"])
            if w.refuse_pulls > 0
                && w.refuse_pulls_of
                    .as_ref()
                    .is_none_or(|r| *r == format!("{o}/{n}")) =>
        {
            w.refuse_pulls -= 1;
            (
                403,
                json!({"message": "Resource not accessible by integration", "status": "403"}),
            )
        }
        ("POST", ["repos", o, n, "pulls"]) => {
            let req = r.json();
            let number = w.pulls.len() as u64 + 1;
            let pr = json!({
                "number": number,
                "node_id": format!("PR_node{number}"),
                "html_url": format!("https://github.com/{o}/{n}/pull/{number}"),
                "state": "open",
                "title": req["title"], "body": req["body"],
                "head": {"ref": req["head"], "sha": "0000000000000000000000000000000000000000"},
                "base": {"ref": req["base"]},
                "base_repo": format!("{o}/{n}"),
            });
            w.pulls.push(pr.clone());
            (201, pr)
        }
        ("PATCH", ["repos", _, _, "pulls", number]) => {
            let number: u64 = number.parse().unwrap_or(0);
            let body = r.json()["body"].clone();
            match w.pulls.iter_mut().find(|p| p["number"] == number) {
                Some(p) => {
                    p["body"] = body;
                    (200, p.clone())
                }
                None => (404, json!({"message": "Not Found"})),
            }
        }
        ("GET", ["repos", _, _, "pulls"]) => (200, Value::Array(w.pulls.clone())),
        ("GET", ["repos", _, _, "commits", sha, "check-runs"]) => {
            if !w.commits_asked.iter().any(|s| s == sha) {
                w.commits_asked.push((*sha).to_string());
            }
            let runs = if w.check_runs_per_commit.is_empty() {
                w.check_runs.clone()
            } else {
                let n = w.commits_asked.iter().position(|s| s == sha).unwrap_or(0);
                let last = w.check_runs_per_commit.len() - 1;
                w.check_runs_per_commit[n.min(last)].clone()
            };
            (200, json!({"total_count": runs.len(), "check_runs": runs}))
        }
        ("GET", ["repos", _, _, "commits", sha, "status"]) => (
            200,
            json!({"state": "pending", "sha": sha, "total_count": w.statuses.len(), "statuses": w.statuses}),
        ),
        ("GET", ["repos", _, _, "check-runs", id]) => {
            let found = w
                .check_runs
                .iter()
                .chain(w.check_runs_per_commit.iter().flatten())
                .find(|c| c["id"].as_u64().is_some_and(|n| id.parse() == Ok(n)))
                .cloned();
            found.map_or((404, json!({"message": "Not Found"})), |c| (200, c))
        }
        ("GET", ["repos", _, _, "pulls", _, "reviews"]) => (200, Value::Array(w.reviews.clone())),
        ("GET", ["repos", _, _, "pulls", _, "comments"]) => {
            (200, Value::Array(w.review_comments.clone()))
        }
        ("GET", ["repos", _, _, "issues"]) => {
            let query = r.path.split_once('?').map_or("", |(_, q)| q);
            let label = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("labels="))
                .map(|l| l.replace("%3A", ":"));
            let listed: Vec<Value> = w
                .issues
                .iter()
                .filter(|i| i["state"] == "open")
                .filter(|i| {
                    label.as_ref().is_none_or(|l| {
                        i["labels"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|x| x["name"] == l.as_str())
                    })
                })
                .cloned()
                .collect();
            (200, Value::Array(listed))
        }
        ("GET", ["repos", _, _, "issues", n]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let found = w.issues.iter().find(|i| i["number"] == n).cloned();
            found.map_or((404, json!({"message": "Not Found"})), |i| (200, i))
        }
        ("GET", ["repos", _, _, "issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let listed: Vec<Value> = w
                .comments
                .iter()
                .filter(|c| c["issue"] == n)
                .cloned()
                .collect();
            (200, Value::Array(listed))
        }
        ("POST", ["repos", _, _, "issues", n, "comments"]) => {
            let id = 100 + w.comments.len() as u64;
            let c =
                json!({"id": id, "issue": n.parse::<u64>().unwrap_or(0), "body": r.json()["body"]});
            w.comments.push(c.clone());
            (201, c)
        }
        ("PATCH", ["repos", _, _, "issues", "comments", id]) => {
            let id: u64 = id.parse().unwrap_or(0);
            let body = r.json()["body"].clone();
            match w.comments.iter_mut().find(|c| c["id"] == id) {
                Some(c) => {
                    c["body"] = body;
                    (200, c.clone())
                }
                None => (404, json!({"message": "Not Found"})),
            }
        }
        ("POST", ["repos", _, _, "issues", n, "labels"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let add: Vec<Value> = r.json()["labels"].as_array().cloned().unwrap_or_default();
            match w.issues.iter_mut().find(|i| i["number"] == n) {
                Some(i) => {
                    let labels = i["labels"].as_array_mut().unwrap();
                    for l in add {
                        if !labels.iter().any(|x| x["name"] == l) {
                            labels.push(json!({"name": l}));
                        }
                    }
                    (200, Value::Array(labels.clone()))
                }
                None => (404, json!({"message": "Not Found"})),
            }
        }
        ("DELETE", ["repos", _, _, "issues", n, "labels", name]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let name = name.replace("%3A", ":");
            match w.issues.iter_mut().find(|i| i["number"] == n) {
                Some(i) => {
                    let labels = i["labels"].as_array_mut().unwrap();
                    let before = labels.len();
                    labels.retain(|x| x["name"] != name.as_str());
                    if labels.len() == before {
                        (404, json!({"message": "Label does not exist"}))
                    } else {
                        (200, Value::Array(labels.clone()))
                    }
                }
                None => (404, json!({"message": "Not Found"})),
            }
        }
        ("POST", ["graphql"]) => (
            200,
            json!({"data": {"enablePullRequestAutoMerge": {"pullRequest": {"number": 1}}}}),
        ),
        _ => (
            404,
            json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}),
        ),
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
