//! Fakes of the trackers' APIs on 127.0.0.1, written from their public documentation, as much
//! as `hank watch` reads and writes: Linear's GraphQL API ([`Linear`]: issues by label and
//! team, one issue by id or identifier, comments, labels, workflow states, attachments; the
//! variables' `String!`/`ID!` types checked as Linear's schema types them; `RATELIMITED`) and
//! Jira Cloud's REST API v3 ([`Jira`]: JQL search, issues, comments in Atlassian Document
//! Format, label edits, transitions; 429 with `Retry-After`; 401). Every request is recorded;
//! the credential headers are checked.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One request as a fake received it.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Req {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An answer: status, extra headers, JSON body.
pub(crate) type Answer = (u16, Vec<(String, String)>, Value);

/// A fake serving `W` on a loopback port.
pub(crate) struct Served<W> {
    pub port: u16,
    pub world: Arc<Mutex<W>>,
    pub requests: Arc<Mutex<Vec<Req>>>,
}

impl<W: Send + 'static> Served<W> {
    pub(crate) fn start(world: W, answer: fn(&mut W, &Req) -> Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let world = Arc::new(Mutex::new(world));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (w, rs) = (Arc::clone(&world), Arc::clone(&requests));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (w, rs) = (Arc::clone(&w), Arc::clone(&rs));
                std::thread::spawn(move || serve(stream, &w, &rs, answer));
            }
        });
        Self {
            port,
            world,
            requests,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn requests(&self) -> Vec<Req> {
        self.requests.lock().unwrap().clone()
    }
}

/// One request per connection (hank's client sends `Connection: close`).
fn serve<W>(
    stream: TcpStream,
    world: &Mutex<W>,
    requests: &Mutex<Vec<Req>>,
    answer: fn(&mut W, &Req) -> Answer,
) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut stream = stream;
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return;
    };
    let (method, path) = (method.to_string(), path.to_string());
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
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let req = Req {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let (status, extra, reply) = {
        let mut w = world.lock().unwrap();
        requests.lock().unwrap().push(req.clone());
        answer(&mut w, &req)
    };
    let text = if reply.is_null() {
        String::new()
    } else {
        reply.to_string()
    };
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        text.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let _ = stream.write_all(format!("{head}\r\n{text}").as_bytes());
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

// ---------------------------------------------------------------------------------------------
// Linear

/// What the Linear fake holds.
#[derive(Debug, Default)]
pub(crate) struct Linear {
    /// The API key every request must carry as `Authorization` (no `Bearer`).
    pub key: String,
    /// Issues: `id`, `identifier`, `title`, `description`, `url`, `team` (id), `teamKey`,
    /// `state` (type), `labels` (names).
    pub issues: Vec<Value>,
    /// Workspace labels: (id, name).
    pub labels: Vec<(String, String)>,
    /// Comments: `id`, `issue` (id), `body`, and every body it had (`versions`).
    pub comments: Vec<Value>,
    /// Attachments linked: (issue id, url).
    pub attachments: Vec<(String, String)>,
    /// Requests answered `RATELIMITED` before one is served.
    pub throttle: u32,
    /// An edit made to an issue's description as soon as it is read alone (identifier, text):
    /// the issue changed between the listing and the claim.
    pub edit_on_read: Option<(String, String)>,
    /// An issue completed as soon as it is read alone (closed between the listing and the
    /// claim).
    pub close_on_read: Option<String>,
    /// GraphQL errors sent for a wrongly typed variable (a test asserts there are none).
    pub type_errors: Vec<String>,
}

impl Linear {
    pub(crate) fn issue(&mut self, n: u64, title: &str, description: &str, labels: &[&str]) {
        for l in labels {
            if !self.labels.iter().any(|(_, name)| name == l) {
                let id = format!("label-{}", self.labels.len() + 1);
                self.labels.push((id, (*l).to_string()));
            }
        }
        self.issues.push(json!({
            "id": format!("6f0c-uuid-{n}"), "identifier": format!("ENG-{n}"), "title": title,
            "description": description, "url": format!("https://linear.app/acme/issue/ENG-{n}"),
            "team": "team-eng", "teamKey": "ENG", "state": "unstarted", "labels": labels,
        }));
    }

    pub(crate) fn get(&self, identifier: &str) -> Value {
        self.issues
            .iter()
            .find(|i| i["identifier"] == identifier)
            .cloned()
            .unwrap()
    }

    pub(crate) fn labels_of(&self, identifier: &str) -> Vec<String> {
        self.get(identifier)["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect()
    }

    pub(crate) fn comments_on(&self, identifier: &str) -> Vec<Value> {
        let id = self.get(identifier)["id"].clone();
        self.comments
            .iter()
            .filter(|c| c["issue"] == id)
            .cloned()
            .collect()
    }

    fn node(&self, i: &Value) -> Value {
        let labels: Vec<Value> = i["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|name| {
                let id = self
                    .labels
                    .iter()
                    .find(|(_, n)| n == name.as_str().unwrap())
                    .map(|(id, _)| id.clone())
                    .unwrap_or_default();
                json!({"id": id, "name": name})
            })
            .collect();
        json!({
            "id": i["id"], "identifier": i["identifier"], "title": i["title"],
            "description": i["description"], "url": i["url"], "team": {"id": i["team"]},
            "state": {"type": i["state"]}, "labels": {"nodes": labels},
        })
    }

    fn find(&mut self, id: &str) -> Option<&mut Value> {
        self.issues
            .iter_mut()
            .find(|i| i["id"] == id || i["identifier"] == id)
    }
}

fn linear_headers() -> Vec<(String, String)> {
    let reset = (now_ms() + 3_600_000).to_string();
    vec![
        ("X-RateLimit-Requests-Limit".into(), "5000".into()),
        ("X-RateLimit-Requests-Remaining".into(), "4990".into()),
        ("X-RateLimit-Requests-Reset".into(), reset.clone()),
        ("X-RateLimit-Complexity-Remaining".into(), "240000".into()),
        ("X-RateLimit-Complexity-Reset".into(), reset),
    ]
}

/// The variable declarations Linear's schema asks of each operation hank sends.
const LINEAR_TYPES: &[(&str, &[&str])] = &[
    ("HankItems", &["$filter: IssueFilter", "$after: String"]),
    ("HankItem", &["$id: String!"]),
    ("HankComments", &["$id: String!"]),
    ("HankCommentCreate", &["$input: CommentCreateInput!"]),
    (
        "HankCommentUpdate",
        &["$id: String!", "$input: CommentUpdateInput!"],
    ),
    ("HankLabel", &["$name: String!"]),
    ("HankLabelCreate", &["$input: IssueLabelCreateInput!"]),
    ("HankLabelAdd", &["$id: String!", "$labelId: String!"]),
    ("HankLabelRemove", &["$id: String!", "$labelId: String!"]),
    ("HankStarted", &["$team: ID!"]),
    (
        "HankIssueUpdate",
        &["$id: String!", "$input: IssueUpdateInput!"],
    ),
    ("HankLink", &["$issueId: String!", "$url: String!"]),
];

pub(crate) fn linear(w: &mut Linear, r: &Req) -> Answer {
    let err = |status: u16, code: &str, message: &str| -> Answer {
        (
            status,
            linear_headers(),
            json!({"errors": [{"message": message, "extensions": {"code": code}}]}),
        )
    };
    if r.method != "POST" || r.path != "/graphql" {
        return (404, vec![], json!({"message": "not found"}));
    }
    if r.header("authorization") != Some(w.key.as_str()) {
        return err(
            400,
            "AUTHENTICATION_ERROR",
            "Authentication required, not authenticated",
        );
    }
    if w.throttle > 0 {
        w.throttle -= 1;
        let soon = (now_ms() + 1000).to_string();
        let mut h = linear_headers();
        h.retain(|(k, _)| !k.ends_with("Reset"));
        h.push(("X-RateLimit-Requests-Reset".into(), soon.clone()));
        h.push(("X-RateLimit-Complexity-Reset".into(), soon));
        return (
            400,
            h,
            json!({"errors": [{"message": "Rate limit exceeded", "extensions": {"code": "RATELIMITED"}}]}),
        );
    }
    let query = r.body["query"].as_str().unwrap_or_default().to_string();
    let vars = r.body["variables"].clone();
    let Some((op, wanted)) = LINEAR_TYPES
        .iter()
        .find(|(op, _)| query.contains(&format!(" {op}(")))
    else {
        return err(400, "GRAPHQL_VALIDATION_FAILED", "unknown operation");
    };
    for decl in *wanted {
        if !query.contains(decl) {
            let m = format!("{op}: expected the declaration {decl}");
            w.type_errors.push(m.clone());
            return err(400, "GRAPHQL_VALIDATION_FAILED", &m);
        }
    }
    let ok = |data: Value| -> Answer { (200, linear_headers(), json!({ "data": data })) };
    let s = |k: &str| vars[k].as_str().unwrap_or_default().to_string();
    match *op {
        "HankItems" => {
            let f = &vars["filter"];
            let label = f.pointer("/labels/some/name/eq").and_then(Value::as_str);
            let nin: Vec<String> = f
                .pointer("/state/type/nin")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let team = f.pointer("/team/key/eq").and_then(Value::as_str);
            let nodes: Vec<Value> = w
                .issues
                .iter()
                .filter(|i| {
                    label.is_none_or(|l| i["labels"].as_array().unwrap().iter().any(|x| x == l))
                })
                .filter(|i| !nin.iter().any(|t| i["state"] == t.as_str()))
                .filter(|i| team.is_none_or(|t| i["teamKey"] == t))
                .map(|i| w.node(i))
                .collect();
            ok(
                json!({"issues": {"nodes": nodes, "pageInfo": {"hasNextPage": false, "endCursor": null}}}),
            )
        }
        "HankItem" => {
            let id = s("id");
            if let Some(ident) = w.close_on_read.take()
                && let Some(i) = w.find(&ident)
            {
                i["state"] = json!("completed");
            }
            if let Some((ident, text)) = w.edit_on_read.take()
                && let Some(i) = w.find(&ident)
            {
                i["description"] = json!(text);
            }
            let found = w.find(&id).cloned();
            match found {
                Some(i) => ok(json!({"issue": w.node(&i)})),
                None => err(200, "ENTITY_NOT_FOUND", "Entity not found"),
            }
        }
        "HankComments" => {
            let id = s("id");
            let nodes: Vec<Value> = w
                .comments
                .iter()
                .filter(|c| c["issue"] == id.as_str())
                .map(|c| json!({"id": c["id"], "body": c["body"]}))
                .collect();
            ok(json!({"issue": {"comments": {"nodes": nodes}}}))
        }
        "HankCommentCreate" => {
            let issue = vars.pointer("/input/issueId").cloned().unwrap_or_default();
            if !w.issues.iter().any(|i| i["id"] == issue) {
                return err(200, "INVALID_INPUT", "issueId is not an issue's id");
            }
            let body = vars.pointer("/input/body").cloned().unwrap_or_default();
            let id = format!("comment-{}", w.comments.len() + 1);
            w.comments
                .push(json!({"id": id, "issue": issue, "body": body, "versions": [body]}));
            ok(json!({"commentCreate": {"success": true, "comment": {"id": id}}}))
        }
        "HankCommentUpdate" => {
            let id = s("id");
            let body = vars.pointer("/input/body").cloned().unwrap_or_default();
            match w.comments.iter_mut().find(|c| c["id"] == id.as_str()) {
                Some(c) => {
                    c["body"] = body.clone();
                    c["versions"].as_array_mut().unwrap().push(body);
                    ok(json!({"commentUpdate": {"success": true}}))
                }
                None => err(200, "ENTITY_NOT_FOUND", "Entity not found"),
            }
        }
        "HankLabel" => {
            let name = s("name");
            let nodes: Vec<Value> = w
                .labels
                .iter()
                .filter(|(_, n)| *n == name)
                .map(|(id, _)| json!({"id": id}))
                .collect();
            ok(json!({"issueLabels": {"nodes": nodes}}))
        }
        "HankLabelCreate" => {
            let name = vars
                .pointer("/input/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let id = format!("label-{}", w.labels.len() + 1);
            w.labels.push((id.clone(), name.to_string()));
            ok(json!({"issueLabelCreate": {"success": true, "issueLabel": {"id": id}}}))
        }
        "HankLabelAdd" | "HankLabelRemove" => {
            let (id, label) = (s("id"), s("labelId"));
            let Some(name) = w
                .labels
                .iter()
                .find(|(l, _)| *l == label)
                .map(|(_, n)| n.clone())
            else {
                return err(200, "ENTITY_NOT_FOUND", "label not found");
            };
            let add = *op == "HankLabelAdd";
            match w.find(&id) {
                Some(i) => {
                    let ls = i["labels"].as_array_mut().unwrap();
                    ls.retain(|l| l != name.as_str());
                    if add {
                        ls.push(json!(name));
                    }
                    let key = if add {
                        "issueAddLabel"
                    } else {
                        "issueRemoveLabel"
                    };
                    ok(json!({ key: {"success": true} }))
                }
                None => err(200, "ENTITY_NOT_FOUND", "Entity not found"),
            }
        }
        "HankStarted" => {
            let nodes = if s("team") == "team-eng" {
                json!([{"id": "state-in-progress"}])
            } else {
                json!([])
            };
            ok(json!({"workflowStates": {"nodes": nodes}}))
        }
        "HankIssueUpdate" => {
            let id = s("id");
            let state = vars
                .pointer("/input/stateId")
                .and_then(Value::as_str)
                .map(str::to_string);
            match w.find(&id) {
                Some(i) => {
                    if state.as_deref() == Some("state-in-progress") {
                        i["state"] = json!("started");
                    }
                    ok(json!({"issueUpdate": {"success": true}}))
                }
                None => err(200, "ENTITY_NOT_FOUND", "Entity not found"),
            }
        }
        "HankLink" => {
            w.attachments.push((s("issueId"), s("url")));
            ok(json!({"attachmentLinkURL": {"success": true}}))
        }
        _ => err(400, "GRAPHQL_VALIDATION_FAILED", "unknown operation"),
    }
}

// ---------------------------------------------------------------------------------------------
// Jira

/// What the Jira fake holds.
#[derive(Debug, Default)]
pub(crate) struct Jira {
    /// The `Authorization` every request must carry (`Basic base64(email:token)`).
    pub auth: String,
    /// Issues: `key`, `summary`, `description` (ADF), `labels`, `category` (`new`,
    /// `indeterminate`, `done`).
    pub issues: Vec<Value>,
    /// Comments: `id`, `issue` (key), `body` (ADF), every body it had (`versions`).
    pub comments: Vec<Value>,
    /// Transitions made: (key, transition id).
    pub transitions: Vec<(String, String)>,
    /// Requests answered 429 with `Retry-After: 1` before one is served.
    pub throttle: u32,
}

/// An Atlassian document of paragraphs and a task list.
pub(crate) fn adf(paragraphs: &[&str], tasks: &[&str]) -> Value {
    let mut content: Vec<Value> = paragraphs
        .iter()
        .map(|p| json!({"type": "paragraph", "content": [{"type": "text", "text": p}]}))
        .collect();
    if !tasks.is_empty() {
        let items: Vec<Value> = tasks
            .iter()
            .enumerate()
            .map(|(n, t)| json!({"type": "taskItem", "attrs": {"localId": n.to_string(), "state": "TODO"}, "content": [{"type": "text", "text": t}]}))
            .collect();
        content.push(json!({"type": "taskList", "attrs": {"localId": "l"}, "content": items}));
    }
    json!({"type": "doc", "version": 1, "content": content})
}

/// The text of an Atlassian document's text nodes, one paragraph a line.
pub(crate) fn adf_lines(doc: &Value) -> String {
    doc["content"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    p["content"]
                        .as_array()
                        .map(|ts| {
                            ts.iter()
                                .filter_map(|t| t["text"].as_str())
                                .collect::<String>()
                        })
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

impl Jira {
    pub(crate) fn issue(&mut self, key: &str, summary: &str, description: Value, labels: &[&str]) {
        self.issues.push(json!({
            "key": key, "summary": summary, "description": description,
            "labels": labels, "category": "new",
        }));
    }

    pub(crate) fn get(&self, key: &str) -> Value {
        self.issues
            .iter()
            .find(|i| i["key"] == key)
            .cloned()
            .unwrap()
    }

    pub(crate) fn labels_of(&self, key: &str) -> Vec<String> {
        self.get(key)["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect()
    }

    pub(crate) fn comments_on(&self, key: &str) -> Vec<Value> {
        self.comments
            .iter()
            .filter(|c| c["issue"] == key)
            .cloned()
            .collect()
    }

    fn shown(i: &Value) -> Value {
        json!({
            "id": "10001", "key": i["key"],
            "fields": {
                "summary": i["summary"], "description": i["description"], "labels": i["labels"],
                "status": {"name": "x", "statusCategory": {"key": i["category"]}},
            }
        })
    }
}

fn query_value(path: &str, name: &str) -> Option<String> {
    let q = path.split_once('?')?.1;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| decode(v))
    })
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(n) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(n);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn jira(w: &mut Jira, r: &Req) -> Answer {
    let h = vec![("X-RateLimit-Remaining".to_string(), "100".to_string())];
    if r.header("authorization") != Some(w.auth.as_str()) {
        return (
            401,
            vec![],
            json!({"errorMessages": ["Client must be authenticated to access this resource."]}),
        );
    }
    if w.throttle > 0 {
        w.throttle -= 1;
        return (
            429,
            vec![("Retry-After".into(), "1".into())],
            json!({"errorMessages": ["Rate limit exceeded."]}),
        );
    }
    let path = r.path.split_once('?').map_or(r.path.as_str(), |(p, _)| p);
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let not_found = (
        404,
        vec![],
        json!({"errorMessages": ["Issue does not exist or you do not have permission to see it."]}),
    );
    match (r.method.as_str(), segs.as_slice()) {
        ("GET", ["rest", "api", "3", "search", "jql"]) => {
            let jql = query_value(&r.path, "jql").unwrap_or_default();
            // `labels = "L" AND statusCategory != Done …`: the label between the first quotes.
            let label = jql.split('"').nth(1).unwrap_or_default().to_string();
            let done_left_out = jql.contains("statusCategory != Done");
            let issues: Vec<Value> = w
                .issues
                .iter()
                .filter(|i| {
                    i["labels"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|l| l == label.as_str())
                })
                .filter(|i| !(done_left_out && i["category"] == "done"))
                .map(Jira::shown)
                .collect();
            (200, h, json!({"issues": issues, "isLast": true}))
        }
        ("GET", ["rest", "api", "3", "issue", key]) => {
            match w.issues.iter().find(|i| i["key"] == *key) {
                Some(i) => (200, h, Jira::shown(i)),
                None => not_found,
            }
        }
        ("PUT", ["rest", "api", "3", "issue", key]) => {
            let ops = r
                .body
                .pointer("/update/labels")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            match w.issues.iter_mut().find(|i| i["key"] == *key) {
                Some(i) => {
                    let ls = i["labels"].as_array_mut().unwrap();
                    for op in ops {
                        if let Some(a) = op["add"].as_str()
                            && !ls.iter().any(|l| l == a)
                        {
                            ls.push(json!(a));
                        }
                        if let Some(d) = op["remove"].as_str() {
                            ls.retain(|l| l != d);
                        }
                    }
                    (204, h, Value::Null)
                }
                None => not_found,
            }
        }
        ("GET", ["rest", "api", "3", "issue", key, "comment"]) => {
            let cs: Vec<Value> = w
                .comments
                .iter()
                .filter(|c| c["issue"] == *key)
                .map(|c| json!({"id": c["id"], "body": c["body"]}))
                .collect();
            (200, h, json!({"comments": cs, "total": cs.len()}))
        }
        ("POST", ["rest", "api", "3", "issue", key, "comment"]) => {
            if !w.issues.iter().any(|i| i["key"] == *key) {
                return not_found;
            }
            let body = r.body["body"].clone();
            if body["type"] != "doc" || body["version"] != 1 {
                return (
                    400,
                    vec![],
                    json!({"errorMessages": ["Comment body is not valid!"]}),
                );
            }
            let id = (20000 + w.comments.len()).to_string();
            w.comments
                .push(json!({"id": id, "issue": key, "body": body, "versions": [body]}));
            (201, h, json!({"id": id}))
        }
        ("PUT", ["rest", "api", "3", "issue", _, "comment", id]) => {
            let body = r.body["body"].clone();
            match w.comments.iter_mut().find(|c| c["id"] == *id) {
                Some(c) => {
                    c["body"] = body.clone();
                    c["versions"].as_array_mut().unwrap().push(body);
                    (200, h, json!({"id": id}))
                }
                None => not_found,
            }
        }
        ("GET", ["rest", "api", "3", "issue", _, "transitions"]) => (
            200,
            h,
            json!({"transitions": [
                {"id": "11", "name": "To Do", "to": {"statusCategory": {"key": "new"}}},
                {"id": "21", "name": "Start progress", "to": {"statusCategory": {"key": "indeterminate"}}},
                {"id": "31", "name": "Done", "to": {"statusCategory": {"key": "done"}}}
            ]}),
        ),
        ("POST", ["rest", "api", "3", "issue", key, "transitions"]) => {
            let t = r
                .body
                .pointer("/transition/id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            match w.issues.iter_mut().find(|i| i["key"] == *key) {
                Some(i) => {
                    if t == "21" {
                        i["category"] = json!("indeterminate");
                    }
                    w.transitions.push(((*key).to_string(), t));
                    (204, h, Value::Null)
                }
                None => not_found,
            }
        }
        _ => not_found,
    }
}

// ---------------------------------------------------------------------------------------------
// Trello, Plane, Shortcut: smaller fakes (one board, one project, one workspace)

/// What the Trello fake holds.
#[derive(Debug, Default)]
pub(crate) struct Trello {
    /// The `Authorization` every request must carry.
    pub auth: String,
    /// Lists: (id, name).
    pub lists: Vec<(String, String)>,
    /// Board labels: (id, name).
    pub labels: Vec<(String, String)>,
    /// Cards: `id`, `shortLink`, `name`, `desc`, `url`, `closed`, `idList`, `idLabels`.
    pub cards: Vec<Value>,
    /// Comments: `id`, `card`, `text`, `versions`.
    pub comments: Vec<Value>,
}

impl Trello {
    pub(crate) fn card(&mut self, short: &str, name: &str, list: &str, labels: &[&str]) {
        let mut ids = Vec::new();
        for l in labels {
            ids.push(self.label_id(l));
        }
        self.cards.push(json!({
            "id": format!("card-{short}"), "shortLink": short, "name": name, "desc": "",
            "url": format!("https://trello.com/c/{short}"), "closed": false, "idList": list,
            "idLabels": ids,
        }));
    }

    fn label_id(&mut self, name: &str) -> String {
        if let Some((id, _)) = self.labels.iter().find(|(_, n)| n == name) {
            return id.clone();
        }
        let id = format!("lab-{}", self.labels.len() + 1);
        self.labels.push((id.clone(), name.to_string()));
        id
    }

    pub(crate) fn get(&self, short: &str) -> Value {
        self.cards
            .iter()
            .find(|c| c["shortLink"] == short)
            .cloned()
            .unwrap()
    }

    pub(crate) fn labels_of(&self, short: &str) -> Vec<String> {
        self.get(short)["idLabels"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|id| {
                self.labels
                    .iter()
                    .find(|(l, _)| id == l.as_str())
                    .map(|(_, n)| n.clone())
            })
            .collect()
    }

    pub(crate) fn comments_on(&self, short: &str) -> Vec<Value> {
        let id = self.get(short)["id"].clone();
        self.comments
            .iter()
            .filter(|c| c["card"] == id)
            .cloned()
            .collect()
    }

    fn shown(&self, c: &Value) -> Value {
        let labels: Vec<Value> = c["idLabels"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|id| self.labels.iter().find(|(l, _)| id == l.as_str()))
            .map(|(id, name)| json!({"id": id, "name": name}))
            .collect();
        let mut c = c.clone();
        c["labels"] = Value::Array(labels);
        c
    }
}

pub(crate) fn trello(w: &mut Trello, r: &Req) -> Answer {
    if r.header("authorization") != Some(w.auth.as_str()) {
        return (401, vec![], json!("invalid token"));
    }
    let path = r.path.split_once('?').map_or(r.path.as_str(), |(p, _)| p);
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let missing = (404, vec![], json!("The requested resource was not found."));
    let card_of = |w: &Trello, id: &str| {
        w.cards
            .iter()
            .position(|c| c["id"] == id || c["shortLink"] == id)
    };
    match (r.method.as_str(), segs.as_slice()) {
        ("GET", ["1", "boards", "b1"]) => (200, vec![], json!({"id": "5f0000000000000000000b01"})),
        ("POST", ["1", "labels"]) if r.body["idBoard"] != "5f0000000000000000000b01" => {
            (400, vec![], json!("invalid value for idBoard"))
        }
        ("GET", ["1", "boards", "b1", "lists"]) => {
            let ls: Vec<Value> = w
                .lists
                .iter()
                .map(|(id, n)| json!({"id": id, "name": n}))
                .collect();
            (200, vec![], Value::Array(ls))
        }
        ("GET", ["1", "boards", "b1", "labels"]) => {
            let ls: Vec<Value> = w
                .labels
                .iter()
                .map(|(id, n)| json!({"id": id, "name": n}))
                .collect();
            (200, vec![], Value::Array(ls))
        }
        ("GET", ["1", "boards", "b1", "cards", "open"]) => {
            let cs: Vec<Value> = w
                .cards
                .iter()
                .filter(|c| c["closed"] == false)
                .map(|c| w.shown(c))
                .collect();
            (200, vec![], Value::Array(cs))
        }
        ("GET", ["1", "cards", id]) => match card_of(w, id) {
            Some(n) => (200, vec![], w.shown(&w.cards[n])),
            None => missing,
        },
        ("PUT", ["1", "cards", id]) => match card_of(w, id) {
            Some(n) => {
                if let Some(l) = r.body["idList"].as_str() {
                    w.cards[n]["idList"] = json!(l);
                }
                (200, vec![], w.cards[n].clone())
            }
            None => missing,
        },
        ("GET", ["1", "cards", id, "actions"]) => {
            let cs: Vec<Value> = w
                .comments
                .iter()
                .filter(|c| c["card"] == *id)
                .map(|c| json!({"id": c["id"], "type": "commentCard", "data": {"text": c["text"]}}))
                .collect();
            (200, vec![], Value::Array(cs))
        }
        ("POST", ["1", "cards", id, "actions", "comments"]) => {
            let text = r.body["text"].clone();
            let cid = format!("action-{}", w.comments.len() + 1);
            w.comments
                .push(json!({"id": cid, "card": id, "text": text, "versions": [text]}));
            (200, vec![], json!({"id": cid, "type": "commentCard"}))
        }
        ("PUT", ["1", "cards", _, "actions", cid, "comments"]) => {
            let text = r.body["text"].clone();
            match w.comments.iter_mut().find(|c| c["id"] == *cid) {
                Some(c) => {
                    c["text"] = text.clone();
                    c["versions"].as_array_mut().unwrap().push(text);
                    (200, vec![], json!({"id": cid}))
                }
                None => missing,
            }
        }
        ("POST", ["1", "labels"]) => {
            let name = r.body["name"].as_str().unwrap_or_default().to_string();
            let id = w.label_id(&name);
            (200, vec![], json!({"id": id, "name": name}))
        }
        ("POST", ["1", "cards", id, "idLabels"]) => match card_of(w, id) {
            Some(n) => {
                w.cards[n]["idLabels"]
                    .as_array_mut()
                    .unwrap()
                    .push(r.body["value"].clone());
                (200, vec![], json!([]))
            }
            None => missing,
        },
        ("DELETE", ["1", "cards", id, "idLabels", label]) => match card_of(w, id) {
            Some(n) => {
                w.cards[n]["idLabels"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|l| l != *label);
                (200, vec![], json!({}))
            }
            None => missing,
        },
        _ => missing,
    }
}

/// What the Plane fake holds (workspace `acme`, project `p1` identified `WEB`).
#[derive(Debug, Default)]
pub(crate) struct Plane {
    pub key: String,
    /// Labels: (id, name).
    pub labels: Vec<(String, String)>,
    /// Issues: `id`, `sequence_id`, `name`, `description_html`, `labels` (ids), `state`.
    pub issues: Vec<Value>,
    /// Comments: `id`, `issue`, `comment_html`, `versions`.
    pub comments: Vec<Value>,
}

/// Plane's states of the project: (id, group).
pub(crate) const PLANE_STATES: &[(&str, &str)] = &[
    ("st-backlog", "backlog"),
    ("st-todo", "unstarted"),
    ("st-doing", "started"),
    ("st-done", "completed"),
];

impl Plane {
    pub(crate) fn issue(&mut self, seq: u64, name: &str, html: &str, labels: &[&str], state: &str) {
        let ids: Vec<String> = labels.iter().map(|l| self.label_id(l)).collect();
        self.issues.push(json!({
            "id": format!("iss-{seq}"), "sequence_id": seq, "name": name,
            "description_html": html, "labels": ids, "state": state,
        }));
    }

    fn label_id(&mut self, name: &str) -> String {
        if let Some((id, _)) = self.labels.iter().find(|(_, n)| n == name) {
            return id.clone();
        }
        let id = format!("lbl-{}", self.labels.len() + 1);
        self.labels.push((id.clone(), name.to_string()));
        id
    }

    pub(crate) fn get(&self, seq: u64) -> Value {
        self.issues
            .iter()
            .find(|i| i["sequence_id"] == seq)
            .cloned()
            .unwrap()
    }

    pub(crate) fn labels_of(&self, seq: u64) -> Vec<String> {
        self.get(seq)["labels"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|id| {
                self.labels
                    .iter()
                    .find(|(l, _)| id == l.as_str())
                    .map(|(_, n)| n.clone())
            })
            .collect()
    }

    pub(crate) fn comments_on(&self, seq: u64) -> Vec<Value> {
        let id = self.get(seq)["id"].clone();
        self.comments
            .iter()
            .filter(|c| c["issue"] == id)
            .cloned()
            .collect()
    }
}

pub(crate) fn plane(w: &mut Plane, r: &Req) -> Answer {
    if r.header("x-api-key") != Some(w.key.as_str()) {
        return (
            401,
            vec![],
            json!({"detail": "Given API token is not valid"}),
        );
    }
    let h = vec![
        ("X-RateLimit-Remaining".to_string(), "55".to_string()),
        (
            "X-RateLimit-Reset".to_string(),
            ((now_ms() / 1000) + 60).to_string(),
        ),
    ];
    let path = r.path.split_once('?').map_or(r.path.as_str(), |(p, _)| p);
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let missing = (404, vec![], json!({"error": "Not found"}));
    let Some(rest) = segs.strip_prefix(&["api", "v1", "workspaces", "acme", "projects", "p1"][..])
    else {
        return missing;
    };
    match (r.method.as_str(), rest) {
        ("GET", []) => (
            200,
            h,
            json!({"id": "p1", "identifier": "WEB", "name": "Web"}),
        ),
        ("GET", ["labels"]) => {
            let ls: Vec<Value> = w
                .labels
                .iter()
                .map(|(id, n)| json!({"id": id, "name": n}))
                .collect();
            (200, h, json!({"results": ls, "next_page_results": false}))
        }
        ("POST", ["labels"]) => {
            let name = r.body["name"].as_str().unwrap_or_default().to_string();
            let id = w.label_id(&name);
            (201, h, json!({"id": id, "name": name}))
        }
        ("GET", ["states"]) => {
            let ss: Vec<Value> = PLANE_STATES
                .iter()
                .map(|(id, g)| json!({"id": id, "group": g, "name": g}))
                .collect();
            (200, h, json!({"results": ss}))
        }
        ("GET", ["issues"]) => (
            200,
            h,
            json!({"results": w.issues, "next_page_results": false, "next_cursor": null}),
        ),
        ("GET", ["issues", id]) => match w.issues.iter().find(|i| i["id"] == *id) {
            Some(i) => (200, h, i.clone()),
            None => missing,
        },
        ("PATCH", ["issues", id]) => match w.issues.iter_mut().find(|i| i["id"] == *id) {
            Some(i) => {
                for k in ["labels", "state"] {
                    if !r.body[k].is_null() {
                        i[k] = r.body[k].clone();
                    }
                }
                (200, h, i.clone())
            }
            None => missing,
        },
        ("GET", ["issues", id, "comments"]) => {
            let cs: Vec<Value> = w
                .comments
                .iter()
                .filter(|c| c["issue"] == *id)
                .cloned()
                .collect();
            (200, h, json!({"results": cs}))
        }
        ("POST", ["issues", id, "comments"]) => {
            let html = r.body["comment_html"].clone();
            let cid = format!("cmt-{}", w.comments.len() + 1);
            w.comments
                .push(json!({"id": cid, "issue": id, "comment_html": html, "versions": [html]}));
            (201, h, json!({"id": cid}))
        }
        ("PATCH", ["issues", _, "comments", cid]) => {
            let html = r.body["comment_html"].clone();
            match w.comments.iter_mut().find(|c| c["id"] == *cid) {
                Some(c) => {
                    c["comment_html"] = html.clone();
                    c["versions"].as_array_mut().unwrap().push(html);
                    (200, h, json!({"id": cid}))
                }
                None => missing,
            }
        }
        _ => missing,
    }
}

/// What the Shortcut fake holds.
#[derive(Debug, Default)]
pub(crate) struct Shortcut {
    pub token: String,
    /// Stories: `id`, `name`, `description`, `app_url`, `labels` ([{name}]), `completed`,
    /// `archived`, `workflow_id`, `workflow_state_id`, `comments` ([{id, text, versions}]).
    pub stories: Vec<Value>,
    /// Searches asked (their `query`).
    pub searches: Vec<String>,
}

impl Shortcut {
    pub(crate) fn story(&mut self, id: u64, name: &str, description: &str, labels: &[&str]) {
        let labels: Vec<Value> = labels.iter().map(|l| json!({"id": 1, "name": l})).collect();
        self.stories.push(json!({
            "id": id, "name": name, "description": description,
            "app_url": format!("https://app.shortcut.com/acme/story/{id}"), "labels": labels,
            "completed": false, "archived": false, "workflow_id": 500000001,
            "workflow_state_id": 500000002, "comments": [],
        }));
    }

    pub(crate) fn get(&self, id: u64) -> Value {
        self.stories
            .iter()
            .find(|s| s["id"] == id)
            .cloned()
            .unwrap()
    }

    pub(crate) fn labels_of(&self, id: u64) -> Vec<String> {
        self.get(id)["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect()
    }
}

pub(crate) fn shortcut(w: &mut Shortcut, r: &Req) -> Answer {
    if r.header("shortcut-token") != Some(w.token.as_str()) {
        return (401, vec![], json!({"message": "Unauthorized"}));
    }
    let path = r.path.split_once('?').map_or(r.path.as_str(), |(p, _)| p);
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let missing = (404, vec![], json!({"message": "Resource not found."}));
    let num = |s: &str| s.parse::<u64>().unwrap_or(0);
    match (r.method.as_str(), segs.as_slice()) {
        ("GET", ["api", "v3", "search", "stories"]) => {
            let q = query_value(&r.path, "query").unwrap_or_default();
            w.searches.push(q.clone());
            let label = q.split('"').nth(1).unwrap_or_default().to_string();
            let found: Vec<Value> = w
                .stories
                .iter()
                .filter(|s| {
                    s["labels"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|l| l["name"] == label.as_str())
                })
                .filter(|s| !(q.contains("!is:done") && s["completed"] == true))
                .cloned()
                .collect();
            (
                200,
                vec![],
                json!({"data": found, "next": null, "total": found.len()}),
            )
        }
        ("GET", ["api", "v3", "stories", id]) => {
            match w.stories.iter().find(|s| s["id"] == num(id)) {
                Some(s) => (200, vec![], s.clone()),
                None => missing,
            }
        }
        ("PUT", ["api", "v3", "stories", id]) => {
            match w.stories.iter_mut().find(|s| s["id"] == num(id)) {
                Some(s) => {
                    if let Some(ls) = r.body["labels"].as_array() {
                        s["labels"] = Value::Array(
                            ls.iter()
                                .map(|l| json!({"id": 1, "name": l["name"]}))
                                .collect(),
                        );
                    }
                    if !r.body["workflow_state_id"].is_null() {
                        s["workflow_state_id"] = r.body["workflow_state_id"].clone();
                    }
                    (200, vec![], s.clone())
                }
                None => missing,
            }
        }
        ("GET", ["api", "v3", "workflows"]) => (
            200,
            vec![],
            json!([{"id": 500000001, "states": [
                {"id": 500000002, "type": "unstarted", "name": "Ready"},
                {"id": 500000003, "type": "started", "name": "In Progress"},
                {"id": 500000004, "type": "done", "name": "Done"}
            ]}]),
        ),
        ("POST", ["api", "v3", "stories", id, "comments"]) => {
            match w.stories.iter_mut().find(|s| s["id"] == num(id)) {
                Some(s) => {
                    let text = r.body["text"].clone();
                    let cid = 900 + s["comments"].as_array().unwrap().len() as u64;
                    s["comments"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"id": cid, "text": text, "versions": [text]}));
                    (201, vec![], json!({"id": cid, "text": text}))
                }
                None => missing,
            }
        }
        ("PUT", ["api", "v3", "stories", id, "comments", cid]) => {
            let text = r.body["text"].clone();
            let found = w
                .stories
                .iter_mut()
                .find(|s| s["id"] == num(id))
                .and_then(|s| {
                    s["comments"]
                        .as_array_mut()
                        .unwrap()
                        .iter_mut()
                        .find(|c| c["id"] == num(cid))
                });
            match found {
                Some(c) => {
                    c["text"] = text.clone();
                    c["versions"].as_array_mut().unwrap().push(text);
                    (200, vec![], c.clone())
                }
                None => missing,
            }
        }
        _ => missing,
    }
}
