//! A fake of the GitLab REST API (v4) on 127.0.0.1, as much as `hank watch` reads and writes:
//! a project's issues by label, its open merge requests, notes on issues (created, listed,
//! edited) and labels (`PUT …/issues/N` with `add_labels`/`remove_labels`). Every request is
//! recorded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// What the fake holds.
#[derive(Debug, Default)]
pub(crate) struct World {
    /// (method, path) of every request.
    pub requests: Vec<(String, String)>,
    /// Issues: `iid`, `title`, `description`, `web_url`, `labels` (names), `state`.
    pub issues: Vec<Value>,
    /// Notes: `id`, `issue`, `body`.
    pub notes: Vec<Value>,
}

impl World {
    pub(crate) fn issue(&mut self, iid: u64, title: &str, labels: &[&str]) {
        self.issues.push(json!({
            "iid": iid, "title": title, "description": "", "state": "opened",
            "web_url": format!("https://gitlab.example.com/o/r/-/issues/{iid}"),
            "labels": labels,
        }));
    }

    pub(crate) fn labels_of(&self, iid: u64) -> Vec<String> {
        self.issues
            .iter()
            .find(|i| i["iid"] == iid)
            .map(|i| {
                i["labels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn notes_on(&self, iid: u64) -> Vec<String> {
        self.notes
            .iter()
            .filter(|n| n["issue"] == iid)
            .map(|n| n["body"].as_str().unwrap().to_string())
            .collect()
    }
}

pub(crate) struct FakeGitLab {
    pub port: u16,
    pub world: Arc<Mutex<World>>,
}

impl FakeGitLab {
    pub(crate) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let world = Arc::new(Mutex::new(World::default()));
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
}

/// One request per connection (hank's REST client sends `Connection: close`).
fn serve(stream: TcpStream, world: &Mutex<World>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut stream = stream;
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return;
    };
    let (method, target) = (method.to_string(), target.to_string());
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
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (status, reply) = {
        let mut w = world.lock().unwrap();
        w.requests.push((method.clone(), target.clone()));
        answer(&mut w, &method, &target, &body)
    };
    let text = reply.to_string();
    let out = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRateLimit-Remaining: 1999\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.write_all(out.as_bytes());
}

fn answer(w: &mut World, method: &str, target: &str, body: &Value) -> (u16, Value) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let num = |s: &str| s.parse::<u64>().unwrap_or(0);
    match (method, segs.as_slice()) {
        ("GET", ["projects", "o%2Fr", "issues"]) => {
            let label = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("labels="))
                .unwrap_or_default()
                .to_string();
            let listed: Vec<Value> = w
                .issues
                .iter()
                .filter(|i| i["state"] == "opened")
                .filter(|i| {
                    i["labels"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|l| l == label.as_str())
                })
                .cloned()
                .collect();
            (200, Value::Array(listed))
        }
        ("GET", ["projects", "o%2Fr", "merge_requests"]) => (200, json!([])),
        ("GET", ["projects", "o%2Fr", "issues", n, "notes"]) => {
            let n = num(n);
            let listed: Vec<Value> = w
                .notes
                .iter()
                .filter(|x| x["issue"] == n)
                .cloned()
                .collect();
            (200, Value::Array(listed))
        }
        ("POST", ["projects", "o%2Fr", "issues", n, "notes"]) => {
            let note =
                json!({"id": 500 + w.notes.len() as u64, "issue": num(n), "body": body["body"]});
            w.notes.push(note.clone());
            (201, note)
        }
        ("PUT", ["projects", "o%2Fr", "issues", _, "notes", id]) => {
            let id = num(id);
            match w.notes.iter_mut().find(|x| x["id"] == id) {
                Some(x) => {
                    x["body"] = body["body"].clone();
                    (200, x.clone())
                }
                None => (404, json!({"message": "404 Not found"})),
            }
        }
        ("GET", ["projects", "o%2Fr", "issues", n]) => {
            let n = num(n);
            let found = w.issues.iter().find(|i| i["iid"] == n).cloned();
            found.map_or((404, json!({"message": "404 Not found"})), |i| (200, i))
        }
        ("PUT", ["projects", "o%2Fr", "issues", n]) => {
            let n = num(n);
            let split = |k: &str| -> Vec<String> {
                body[k]
                    .as_str()
                    .unwrap_or_default()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            };
            let (add, remove) = (split("add_labels"), split("remove_labels"));
            match w.issues.iter_mut().find(|i| i["iid"] == n) {
                Some(i) => {
                    let labels = i["labels"].as_array_mut().unwrap();
                    labels.retain(|l| !remove.iter().any(|r| l == r.as_str()));
                    for a in add {
                        if !labels.iter().any(|l| l == a.as_str()) {
                            labels.push(json!(a));
                        }
                    }
                    (200, i.clone())
                }
                None => (404, json!({"message": "404 Not found"})),
            }
        }
        _ => (404, json!({"message": "404 Not found"})),
    }
}
