//! Jira Cloud through its REST API v3 (`JIRA_URL`, e.g. `https://acme.atlassian.net`, with
//! `JIRA_EMAIL` and `JIRA_API_TOKEN` as HTTP basic authentication; `JIRA_PROJECT` narrows the
//! search to one project). Items: `GET /rest/api/3/search/jql` with the JQL `labels = "L" AND
//! statusCategory != Done` (`--label` is the Jira label; paged by `nextPageToken`); the key
//! is the issue key (`PROJ-42`), which Jira's development panel finds in the branch's name.
//! Descriptions and comments are in Atlassian Document Format, read as text
//! ([`adf_text`]) and written as paragraphs ([`adf_of`]); hank's comment is found by its id,
//! else by its first line. Marks: the labels (plain strings in Jira, edited with `update`),
//! and a claimed issue moved by the first transition into the "In Progress" category
//! (`indeterminate`). Rate limits: a 429 with `Retry-After` (seconds).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{CacheFile, Client, Mark, Tracker, key_of, need, text, without_marker};
use crate::error::Result;
use crate::forge::{Http, Reply, enc};
use crate::policy::tracker::{Issue, ItemKey, TrackerKind, is_hank_comment};

const FIELDS: &str = "summary,description,labels,status";

/// A Jira site's issues.
pub struct Jira {
    client: Client,
    site: String,
    project: Option<String>,
    /// Each issue's status category as last read (`new`, `indeterminate`, `done`).
    category: BTreeMap<ItemKey, String>,
    cache: CacheFile,
}

/// Jira's answer in the budget's terms: `Retry-After` as sent; a 429 without one waits 10 s.
#[must_use]
pub fn rate(r: &Reply, _now: jiff::Timestamp) -> (u16, Vec<(String, String)>) {
    let mut out: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
        .cloned()
        .collect();
    if r.status == 429 && out.is_empty() {
        out.push(("Retry-After".into(), "10".into()));
    }
    (r.status, out)
}

/// Standard base64 (for the basic authentication header).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An Atlassian document as text: paragraphs and headings as lines, list items as `- `, task
/// items as `- [ ] ` / `- [x] `, hard breaks as line breaks.
#[must_use]
pub fn adf_text(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => out.push_str(v.get("text").and_then(Value::as_str).unwrap_or("")),
            "hardBreak" => out.push('\n'),
            "mention" => out.push_str(
                v.pointer("/attrs/text")
                    .and_then(Value::as_str)
                    .unwrap_or("@someone"),
            ),
            _ => {
                let prefix = match kind {
                    "listItem" => "- ",
                    "taskItem"
                        if v.pointer("/attrs/state").and_then(Value::as_str) == Some("DONE") =>
                    {
                        "- [x] "
                    }
                    "taskItem" => "- [ ] ",
                    _ => "",
                };
                out.push_str(prefix);
                for c in v
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    walk(c, out);
                }
                if matches!(
                    kind,
                    "paragraph" | "heading" | "taskItem" | "codeBlock" | "rule"
                ) && !out.ends_with('\n')
                {
                    out.push('\n');
                }
            }
        }
    }
    let mut out = String::new();
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    walk(v, &mut out);
    out.replace("- - ", "- ").trim_end().to_string()
}

/// Text as an Atlassian document: a paragraph per non-empty line, Markdown's `**` left out.
#[must_use]
pub fn adf_of(body: &str) -> Value {
    let content: Vec<Value> = body
        .lines()
        .map(|l| l.replace("**", ""))
        .filter(|l| !l.trim().is_empty())
        .map(|l| json!({ "type": "paragraph", "content": [ { "type": "text", "text": l } ] }))
        .collect();
    json!({ "type": "doc", "version": 1, "content": content })
}

impl Jira {
    /// The client of `JIRA_URL` with `JIRA_EMAIL` and `JIRA_API_TOKEN`.
    ///
    /// # Errors
    /// A variable is not set; the URL is not one.
    pub fn open(root: &std::path::Path) -> Result<Self> {
        let k = TrackerKind::Jira;
        let site = need(
            k,
            "JIRA_URL",
            "the site's address, e.g. https://acme.atlassian.net",
        )?;
        let email = need(k, "JIRA_EMAIL", "the Atlassian account's email")?;
        let token = need(
            k,
            "JIRA_API_TOKEN",
            "an Atlassian API token (id.atlassian.com → Security)",
        )?;
        let site = site.trim().trim_end_matches('/').to_string();
        let basic = base64(format!("{}:{}", email.trim(), token.trim()).as_bytes());
        let http = Http::with_headers(
            &site,
            "JIRA_URL",
            "JIRA_EMAIL / JIRA_API_TOKEN",
            vec![
                ("Authorization".into(), format!("Basic {basic}")),
                ("Accept".into(), "application/json".into()),
            ],
        )?;
        let budget = format!("jira-{}", http.token_key());
        Ok(Self {
            client: Client::new(
                k,
                Box::new(http),
                budget,
                rate,
                "JIRA_EMAIL / JIRA_API_TOKEN",
            ),
            site,
            project: super::var("JIRA_PROJECT"),
            category: BTreeMap::new(),
            cache: CacheFile::open(root)?,
        })
    }

    fn issue_of(&mut self, v: &Value) -> Result<Option<Issue>> {
        let key = key_of(TrackerKind::Jira, &text(v, "key"))?;
        let f = v.get("fields").cloned().unwrap_or(Value::Null);
        let category = f
            .pointer("/status/statusCategory/key")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        self.category.insert(key.clone(), category.clone());
        if category == "done" {
            return Ok(None);
        }
        Ok(Some(Issue {
            url: format!("{}/browse/{}", self.site, key.as_str()),
            key,
            title: text(&f, "summary"),
            body: f.get("description").map(adf_text).unwrap_or_default(),
            labels: f
                .get("labels")
                .and_then(Value::as_array)
                .map(|ls| {
                    ls.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        }))
    }

    fn send(&self, what: &str, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let r = self.client.request(method, path, body, &[])?;
        self.client.json(what, &r)
    }
}

impl Tracker for Jira {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Jira
    }

    fn describe(&self) -> String {
        match &self.project {
            Some(p) => format!("{} project {p}", self.client.describe()),
            None => self.client.describe(),
        }
    }

    fn items(&mut self, label: &str) -> Result<Vec<Issue>> {
        let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        let mut jql = format!("labels = {} AND statusCategory != Done", quote(label));
        if let Some(p) = &self.project {
            jql = format!("project = {} AND {jql}", quote(p));
        }
        jql.push_str(" ORDER BY created ASC");
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..10 {
            let mut path = format!(
                "rest/api/3/search/jql?jql={}&fields={FIELDS}&maxResults=100",
                enc(&jql)
            );
            if let Some(t) = &token {
                path.push_str(&format!("&nextPageToken={}", enc(t)));
            }
            let v = self.send("searching the labelled issues", "GET", &path, None)?;
            for i in v
                .get("issues")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(issue) = self.issue_of(i)? {
                    out.push(issue);
                }
            }
            token = v
                .get("nextPageToken")
                .and_then(Value::as_str)
                .map(str::to_string);
            if token.is_none() || v.get("isLast").and_then(Value::as_bool) == Some(true) {
                break;
            }
        }
        Ok(out)
    }

    fn item(&mut self, key: &ItemKey) -> Result<Option<Issue>> {
        let path = format!("rest/api/3/issue/{}?fields={FIELDS}", key.as_str());
        let r = self.client.request("GET", &path, None, &[])?;
        if r.status == 404 {
            return Ok(None);
        }
        let v = self.client.json(&format!("reading {key}"), &r)?;
        self.issue_of(&v)
    }

    fn comment(&mut self, key: &ItemKey, body: &str) -> Result<()> {
        let doc = json!({ "body": adf_of(&without_marker(body)) });
        let base = format!("rest/api/3/issue/{}/comment", key.as_str());
        let id = match self.cache.note(TrackerKind::Jira, key) {
            Some(id) => Some(id),
            None => {
                let v = self.send(
                    &format!("reading the comments of {key}"),
                    "GET",
                    &format!("{base}?maxResults=100"),
                    None,
                )?;
                v.get("comments").and_then(Value::as_array).and_then(|cs| {
                    cs.iter()
                        .find(|c| is_hank_comment(&c.get("body").map(adf_text).unwrap_or_default()))
                        .map(|c| text(c, "id"))
                })
            }
        };
        if let Some(id) = id {
            let r = self
                .client
                .request("PUT", &format!("{base}/{id}"), Some(&doc), &[])?;
            if r.ok() {
                return Ok(());
            }
            if r.status != 404 {
                return Err(self
                    .client
                    .refused(&format!("editing hank's comment on {key}"), &r));
            }
        }
        let v = self.send(&format!("commenting on {key}"), "POST", &base, Some(&doc))?;
        let id = text(&v, "id");
        if !id.is_empty() {
            self.cache.keep_note(TrackerKind::Jira, key, &id)?;
        }
        Ok(())
    }

    fn mark(&mut self, key: &ItemKey, mark: Mark) -> Result<()> {
        let (add, remove) = mark.labels();
        let ops: Vec<Value> = add
            .iter()
            .map(|l| json!({ "add": l }))
            .chain(remove.iter().map(|l| json!({ "remove": l })))
            .collect();
        if !ops.is_empty() {
            self.send(
                &format!("labelling {key}"),
                "PUT",
                &format!("rest/api/3/issue/{}", key.as_str()),
                Some(&json!({ "update": { "labels": ops } })),
            )?;
        }
        if mark == Mark::Working && self.category.get(key).is_none_or(|c| c != "indeterminate") {
            let path = format!("rest/api/3/issue/{}/transitions", key.as_str());
            let v = self.send(
                &format!("reading the transitions of {key}"),
                "GET",
                &path,
                None,
            )?;
            let to_progress = v
                .get("transitions")
                .and_then(Value::as_array)
                .and_then(|ts| {
                    ts.iter().find(|t| {
                        t.pointer("/to/statusCategory/key").and_then(Value::as_str)
                            == Some("indeterminate")
                    })
                });
            if let Some(t) = to_progress {
                let body = json!({ "transition": { "id": text(t, "id") } });
                self.send(
                    &format!("moving {key} to in progress"),
                    "POST",
                    &path,
                    Some(&body),
                )?;
                self.category.insert(key.clone(), "indeterminate".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_one() {
        assert_eq!(base64(b"a@b.c:tok"), "YUBiLmM6dG9r");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b""), "");
    }

    #[test]
    fn documents_read_as_text_and_text_writes_as_a_document() {
        let doc = json!({"type": "doc", "version": 1, "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": "Fix the login."}]},
            {"type": "taskList", "content": [
                {"type": "taskItem", "attrs": {"state": "TODO"}, "content": [{"type": "text", "text": "reproduce"}]},
                {"type": "taskItem", "attrs": {"state": "DONE"}, "content": [{"type": "text", "text": "triage"}]}
            ]},
            {"type": "bulletList", "content": [
                {"type": "listItem", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "note"}]}]}
            ]}
        ]});
        assert_eq!(
            adf_text(&doc),
            "Fix the login.\n- [ ] reproduce\n- [x] triage\n- note"
        );
        let d = adf_of("**hank is working on this issue** (me).\n\n- [ ] a");
        assert_eq!(d["content"].as_array().unwrap().len(), 2);
        assert_eq!(
            d["content"][0]["content"][0]["text"],
            "hank is working on this issue (me)."
        );
        assert!(is_hank_comment(&adf_text(&d)));
    }

    #[test]
    fn a_429_without_retry_after_still_waits() {
        let r = Reply {
            status: 429,
            body: String::new(),
            headers: vec![],
        };
        let (s, h) = rate(&r, jiff::Timestamp::UNIX_EPOCH);
        assert_eq!(
            (s, h),
            (429, vec![("Retry-After".to_string(), "10".to_string())])
        );
    }
}
