//! Plane through its REST API v1 (`PLANE_URL`, default `https://api.plane.so`, a
//! self-hosted instance's address otherwise; `PLANE_API_KEY` in the `X-API-Key` header; the
//! workspace `PLANE_WORKSPACE` (its slug) and the project `PLANE_PROJECT` (its id)). Items:
//! the project's issues carrying the label (labels and states are ids, resolved by name and
//! group through the project's `labels/` and `states/`), open while their state's group is
//! neither `completed` nor `cancelled`; the key is the project's identifier and the issue's
//! sequence number (`WEB-42`), as Plane shows it. Descriptions are HTML (read as text);
//! comments are written as `comment_html` and edited in place; the marks are labels (made
//! when missing), and a claimed issue moves to the project's first `started` state. Rate
//! limit: 60 requests a minute (`X-RateLimit-Remaining`, `X-RateLimit-Reset`), a 429.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{
    CacheFile, Client, Mark, Tracker, key_of, need, rate_as_is, text, var, without_marker,
};
use crate::error::{HankError, Result};
use crate::forge::Http;
use crate::policy::tracker::{Issue, ItemKey, TrackerKind, is_hank_comment};

/// Plane Cloud.
pub const API: &str = "https://api.plane.so";

/// A Plane project's issues.
pub struct Plane {
    client: Client,
    /// `api/v1/workspaces/<slug>/projects/<id>`.
    root: String,
    /// The web app's address of the project's issues (`…/<slug>/projects/<id>/issues`).
    web: String,
    /// The project's identifier (`WEB`), read once.
    identifier: Option<String>,
    /// Label name → id, and state id → group, read once.
    labels: Option<BTreeMap<String, String>>,
    states: Option<Vec<(String, String)>>,
    /// Key → (issue id, its label ids, its state id).
    known: BTreeMap<ItemKey, (String, Vec<String>, String)>,
    cache: CacheFile,
}

/// HTML as text: tags left out, a paragraph or list item a line, entities of `&`, `<`, `>`,
/// `"` and `'` read.
#[must_use]
pub fn html_text(html: &str) -> String {
    let mut out = String::new();
    let mut tag = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match (in_tag, c) {
            (false, '<') => {
                in_tag = true;
                tag.clear();
            }
            (true, '>') => {
                in_tag = false;
                let name = tag
                    .trim_start_matches('/')
                    .split_whitespace()
                    .next()
                    .unwrap_or("");
                match (tag.starts_with('/'), name) {
                    // Plane's task lists: `<li data-checked="false" …>`.
                    (false, "li") if tag.contains("data-checked=\"false\"") => {
                        out.push_str("- [ ] ")
                    }
                    (false, "li") if tag.contains("data-checked=\"true\"") => {
                        out.push_str("- [x] ")
                    }
                    (false, "li") => out.push_str("- "),
                    (true, "p" | "li" | "h1" | "h2" | "h3" | "div") | (false, "br" | "br/") => {
                        out.push('\n');
                    }
                    _ => {}
                }
            }
            (true, c) => tag.push(c),
            (false, c) => out.push(c),
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&")
        .trim_end()
        .to_string()
}

/// Text as HTML paragraphs (escaped), Markdown's `**` left out.
#[must_use]
pub fn html_of(body: &str) -> String {
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let l = l
                .replace("**", "")
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;");
            format!("<p>{l}</p>")
        })
        .collect()
}

fn ids_of(update: &Value) -> Vec<String> {
    update["labels"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The objects of a listing: an array, or a page's `results`.
fn results(v: &Value) -> Vec<Value> {
    v.as_array()
        .or_else(|| v.get("results").and_then(Value::as_array))
        .cloned()
        .unwrap_or_default()
}

impl Plane {
    /// The client of `PLANE_URL` with `PLANE_API_KEY` for `PLANE_WORKSPACE`/`PLANE_PROJECT`.
    ///
    /// # Errors
    /// A variable is not set; the URL is not one.
    pub fn open(root: &std::path::Path) -> Result<Self> {
        let k = TrackerKind::Plane;
        let key = need(
            k,
            "PLANE_API_KEY",
            "a Plane API token (Profile settings → API tokens)",
        )?;
        let workspace = need(
            k,
            "PLANE_WORKSPACE",
            "the workspace's slug (app.plane.so/<slug>)",
        )?;
        let project = need(
            k,
            "PLANE_PROJECT",
            "the project's id (its settings' URL holds it)",
        )?;
        let base = var("PLANE_URL").unwrap_or_else(|| API.to_string());
        let http = Http::with_headers(
            &base,
            "PLANE_URL",
            "PLANE_API_KEY",
            vec![
                ("X-API-Key".into(), key.trim().to_string()),
                ("Accept".into(), "application/json".into()),
            ],
        )?;
        let budget = format!("plane-{}", http.token_key());
        let e = crate::forge::enc;
        let app = base
            .trim_end_matches('/')
            .replace("://api.plane.so", "://app.plane.so");
        let web = format!(
            "{app}/{}/projects/{}/issues",
            e(workspace.trim()),
            e(project.trim())
        );
        Ok(Self {
            web,
            client: Client::new(k, Box::new(http), budget, rate_as_is, "PLANE_API_KEY"),
            root: format!(
                "api/v1/workspaces/{}/projects/{}",
                e(workspace.trim()),
                e(project.trim())
            ),
            identifier: None,
            labels: None,
            states: None,
            known: BTreeMap::new(),
            cache: CacheFile::open(root)?,
        })
    }

    fn send(&self, what: &str, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let r = self.client.request(method, path, body, &[])?;
        self.client.json(what, &r)
    }

    fn identifier(&mut self) -> Result<String> {
        if let Some(i) = &self.identifier {
            return Ok(i.clone());
        }
        let v = self.send(
            "reading the project",
            "GET",
            &format!("{}/", self.root),
            None,
        )?;
        let i = text(&v, "identifier");
        if i.is_empty() {
            return Err(HankError::Tool(format!(
                "{}: the project has no identifier (PLANE_PROJECT is a project's id?)",
                self.client.describe()
            )));
        }
        self.identifier = Some(i.clone());
        Ok(i)
    }

    fn labels(&mut self) -> Result<BTreeMap<String, String>> {
        if let Some(l) = &self.labels {
            return Ok(l.clone());
        }
        let v = self.send(
            "reading the labels",
            "GET",
            &format!("{}/labels/", self.root),
            None,
        )?;
        let map: BTreeMap<String, String> = results(&v)
            .iter()
            .map(|l| (text(l, "name"), text(l, "id")))
            .collect();
        self.labels = Some(map.clone());
        Ok(map)
    }

    fn states(&mut self) -> Result<Vec<(String, String)>> {
        if let Some(s) = &self.states {
            return Ok(s.clone());
        }
        let v = self.send(
            "reading the states",
            "GET",
            &format!("{}/states/", self.root),
            None,
        )?;
        let list: Vec<(String, String)> = results(&v)
            .iter()
            .map(|s| (text(s, "id"), text(s, "group")))
            .collect();
        self.states = Some(list.clone());
        Ok(list)
    }

    fn issue_of(&mut self, i: &Value) -> Result<Option<Issue>> {
        let ident = self.identifier()?;
        let seq = i.get("sequence_id").and_then(Value::as_u64).unwrap_or(0);
        let key = key_of(TrackerKind::Plane, &format!("{ident}-{seq}"))?;
        let label_ids: Vec<String> = i
            .get("labels")
            .and_then(Value::as_array)
            .map(|ls| {
                ls.iter()
                    .filter_map(|l| {
                        l.as_str()
                            .map(str::to_string)
                            .or_else(|| Some(text(l, "id")))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let state = text(i, "state");
        self.known.insert(
            key.clone(),
            (text(i, "id"), label_ids.clone(), state.clone()),
        );
        let group = self
            .states()?
            .into_iter()
            .find(|(id, _)| *id == state)
            .map(|(_, g)| g)
            .unwrap_or_default();
        if matches!(group.as_str(), "completed" | "cancelled") {
            return Ok(None);
        }
        let by_id = self.labels()?;
        let body = match text(i, "description_stripped") {
            s if !s.trim().is_empty() => s,
            _ => html_text(&text(i, "description_html")),
        };
        Ok(Some(Issue {
            title: text(i, "name"),
            body,
            url: format!("{}/{}", self.web, text(i, "id")),
            labels: by_id
                .iter()
                .filter(|(_, id)| label_ids.contains(id))
                .map(|(name, _)| name.clone())
                .collect(),
            key,
        }))
    }

    fn known(&mut self, key: &ItemKey) -> Result<(String, Vec<String>, String)> {
        if !self.known.contains_key(key) {
            self.item(key)?;
        }
        self.known.get(key).cloned().ok_or_else(|| {
            HankError::Tool(format!(
                "{key} at {}: no such issue",
                self.client.describe()
            ))
        })
    }
}

impl Tracker for Plane {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Plane
    }

    fn describe(&self) -> String {
        self.client.describe()
    }

    fn items(&mut self, label: &str) -> Result<Vec<Issue>> {
        let Some(label_id) = self.labels()?.get(label).cloned() else {
            // No such label in the project: no item carries it.
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10 {
            let mut path = format!("{}/issues/?per_page=100", self.root);
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={}", crate::forge::enc(c)));
            }
            let v = self.send("listing the project's issues", "GET", &path, None)?;
            for i in results(&v) {
                let carries = i.get("labels").and_then(Value::as_array).is_some_and(|ls| {
                    ls.iter()
                        .any(|l| l.as_str() == Some(label_id.as_str()) || text(l, "id") == label_id)
                });
                if carries && let Some(issue) = self.issue_of(&i)? {
                    out.push(issue);
                }
            }
            cursor = v
                .get("next_cursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            if v.get("next_page_results").and_then(Value::as_bool) != Some(true) || cursor.is_none()
            {
                break;
            }
        }
        Ok(out)
    }

    fn item(&mut self, key: &ItemKey) -> Result<Option<Issue>> {
        let Some((id, _, _)) = self.known.get(key).cloned() else {
            return Ok(None);
        };
        let r = self
            .client
            .request("GET", &format!("{}/issues/{id}/", self.root), None, &[])?;
        if r.status == 404 {
            return Ok(None);
        }
        let v = self.client.json(&format!("reading {key}"), &r)?;
        self.issue_of(&v)
    }

    fn comment(&mut self, key: &ItemKey, body: &str) -> Result<()> {
        let (id, _, _) = self.known(key)?;
        let html = html_of(&without_marker(body));
        let base = format!("{}/issues/{id}/comments/", self.root);
        let comment = match self.cache.note(TrackerKind::Plane, key) {
            Some(c) => Some(c),
            None => {
                let v = self.send(
                    &format!("reading the comments of {key}"),
                    "GET",
                    &base,
                    None,
                )?;
                results(&v)
                    .iter()
                    .find(|c| is_hank_comment(&html_text(&text(c, "comment_html"))))
                    .map(|c| text(c, "id"))
            }
        };
        let payload = json!({ "comment_html": html });
        if let Some(c) = comment {
            let r = self
                .client
                .request("PATCH", &format!("{base}{c}/"), Some(&payload), &[])?;
            if r.ok() {
                return Ok(());
            }
            if r.status != 404 {
                return Err(self
                    .client
                    .refused(&format!("editing hank's comment on {key}"), &r));
            }
        }
        let v = self.send(
            &format!("commenting on {key}"),
            "POST",
            &base,
            Some(&payload),
        )?;
        let c = text(&v, "id");
        if !c.is_empty() {
            self.cache.keep_note(TrackerKind::Plane, key, &c)?;
        }
        Ok(())
    }

    fn mark(&mut self, key: &ItemKey, mark: Mark) -> Result<()> {
        let (id, on, state) = self.known(key)?;
        let (add, remove) = mark.labels();
        let mut labels = self.labels()?;
        let mut ids: Vec<String> = on
            .into_iter()
            .filter(|l| !remove.iter().any(|r| labels.get(*r) == Some(l)))
            .collect();
        for l in add {
            let lid = match labels.get(*l) {
                Some(lid) => lid.clone(),
                None => {
                    let v = self.send(
                        &format!("creating the label {l}"),
                        "POST",
                        &format!("{}/labels/", self.root),
                        Some(&json!({ "name": l })),
                    )?;
                    let lid = text(&v, "id");
                    labels.insert((*l).to_string(), lid.clone());
                    self.labels = Some(labels.clone());
                    lid
                }
            };
            if !ids.contains(&lid) {
                ids.push(lid);
            }
        }
        let mut update = json!({ "labels": ids });
        if mark == Mark::Working {
            let states = self.states()?;
            let current = states
                .iter()
                .find(|(s, _)| *s == state)
                .map(|(_, g)| g.as_str());
            if current != Some("started")
                && let Some((started, _)) = states.iter().find(|(_, g)| g == "started")
            {
                update["state"] = json!(started);
            }
        }
        let v = self.send(
            &format!("labelling {key}"),
            "PATCH",
            &format!("{}/issues/{id}/", self.root),
            Some(&update),
        )?;
        // What it is now (its labels and state), or as written when the answer does not say.
        if v.get("sequence_id").is_some() {
            self.issue_of(&v)?;
        } else if let Some(k) = self.known.get_mut(key) {
            k.1 = ids_of(&update);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_reads_as_text_and_text_writes_as_escaped_paragraphs() {
        assert_eq!(
            html_text("<p>Fix &amp; ship</p><ul><li><p>one</p></li><li>two</li></ul>"),
            "Fix & ship\n- one\n\n- two"
        );
        assert_eq!(
            html_text(
                r#"<ul data-type="taskList"><li data-checked="false" data-type="taskItem"><p>first</p></li><li data-checked="true"><p>done</p></li></ul>"#
            ),
            "- [ ] first\n\n- [x] done"
        );
        assert_eq!(
            html_of("**hank is working on this issue** (a<b).\n\n- [ ] x"),
            "<p>hank is working on this issue (a&lt;b).</p><p>- [ ] x</p>"
        );
        assert!(is_hank_comment(&html_text(&html_of(
            "**hank delivered this issue** (me)."
        ))));
    }
}
