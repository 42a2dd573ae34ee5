//! Trello through its REST API (`TRELLO_API_URL`, default `https://api.trello.com/1`;
//! `TRELLO_KEY` and `TRELLO_TOKEN` sent in the `Authorization: OAuth oauth_consumer_key=…,
//! oauth_token=…` header, never in a URL; the board `TRELLO_BOARD`, its id or short link).
//! Trello has no issue labels of a project's own: `--label` names a label of the board **or**
//! one of its lists (`--label "Ready for hank"`), and the open cards carrying that label or
//! lying in that list are the items. The key is the card's short link (as in
//! `trello.com/c/<shortLink>`). Comments are card actions (`commentCard`), edited in place;
//! the marks are board labels (made when missing); a delivered card moves to the list
//! `TRELLO_DONE_LIST` when it is set. Rate limits: 100 requests per 10 s per token, a 429
//! (waited 10 s when it says no `Retry-After`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{CacheFile, Client, Mark, Tracker, key_of, need, text, var, without_marker};
use crate::error::{HankError, Result};
use crate::forge::Http;
use crate::policy::tracker::{Issue, ItemKey, TrackerKind, is_hank_comment};

/// The public API.
pub const API: &str = "https://api.trello.com/1";
const CARD_FIELDS: &str = "id,shortLink,name,desc,url,closed,idList,labels";

/// A Trello board's cards.
pub struct Trello {
    client: Client,
    board: String,
    done_list: Option<String>,
    /// Board label name → id.
    labels: Option<BTreeMap<String, String>>,
    /// Card short link → (card id, its label ids).
    known: BTreeMap<ItemKey, (String, Vec<String>)>,
    /// The list `--label` named at the last listing (its id, the label), so a card read
    /// again in that list still carries it.
    list_label: Option<(String, String)>,
    cache: CacheFile,
}

impl Trello {
    /// The client of `TRELLO_API_URL` with `TRELLO_KEY`/`TRELLO_TOKEN` for `TRELLO_BOARD`.
    ///
    /// # Errors
    /// A variable is not set or holds a quote; the URL is not one.
    pub fn open(root: &std::path::Path) -> Result<Self> {
        let k = TrackerKind::Trello;
        let key = need(
            k,
            "TRELLO_KEY",
            "your Trello API key (trello.com/power-ups/admin)",
        )?;
        let token = need(k, "TRELLO_TOKEN", "a Trello token authorized for the board")?;
        let board = need(
            k,
            "TRELLO_BOARD",
            "the board's id or short link (trello.com/b/<this>)",
        )?;
        if format!("{key}{token}").contains(['"', '\\']) {
            return Err(HankError::usage(
                "TRELLO_KEY / TRELLO_TOKEN hold a quote or backslash: expected a key and a token",
            ));
        }
        let auth = format!(
            "OAuth oauth_consumer_key=\"{}\", oauth_token=\"{}\"",
            key.trim(),
            token.trim()
        );
        let base = var("TRELLO_API_URL").unwrap_or_else(|| API.to_string());
        let http = Http::with_headers(
            &base,
            "TRELLO_API_URL",
            "TRELLO_KEY / TRELLO_TOKEN",
            vec![
                ("Authorization".into(), auth),
                ("Accept".into(), "application/json".into()),
            ],
        )?;
        let budget = format!("trello-{}", http.token_key());
        Ok(Self {
            client: Client::new(k, Box::new(http), budget, rate, "TRELLO_KEY / TRELLO_TOKEN"),
            board: crate::forge::enc(board.trim()),
            done_list: var("TRELLO_DONE_LIST"),
            labels: None,
            known: BTreeMap::new(),
            list_label: None,
            cache: CacheFile::open(root)?,
        })
    }

    fn send(&self, what: &str, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let r = self.client.request(method, path, body, &[])?;
        self.client.json(what, &r)
    }

    fn issue_of(&mut self, c: &Value) -> Result<Option<Issue>> {
        let key = key_of(TrackerKind::Trello, &text(c, "shortLink"))?;
        let labels: Vec<(String, String)> = c
            .get("labels")
            .and_then(Value::as_array)
            .map(|ls| {
                ls.iter()
                    .map(|l| (text(l, "id"), text(l, "name")))
                    .collect()
            })
            .unwrap_or_default();
        self.known.insert(
            key.clone(),
            (
                text(c, "id"),
                labels.iter().map(|(id, _)| id.clone()).collect(),
            ),
        );
        if c.get("closed").and_then(Value::as_bool) == Some(true) {
            return Ok(None);
        }
        Ok(Some(Issue {
            key,
            title: text(c, "name"),
            body: text(c, "desc"),
            url: text(c, "url"),
            labels: labels.into_iter().map(|(_, n)| n).collect(),
        }))
    }

    fn card(&mut self, key: &ItemKey) -> Result<(String, Vec<String>)> {
        if !self.known.contains_key(key) {
            self.item(key)?;
        }
        self.known.get(key).cloned().ok_or_else(|| {
            HankError::Tool(format!("{key} at {}: no such card", self.client.describe()))
        })
    }

    fn board_labels(&mut self) -> Result<BTreeMap<String, String>> {
        if let Some(l) = &self.labels {
            return Ok(l.clone());
        }
        let v = self.send(
            "reading the board's labels",
            "GET",
            &format!("boards/{}/labels?fields=id,name", self.board),
            None,
        )?;
        let map: BTreeMap<String, String> = v
            .as_array()
            .map(|ls| {
                ls.iter()
                    .map(|l| (text(l, "name"), text(l, "id")))
                    .collect()
            })
            .unwrap_or_default();
        self.labels = Some(map.clone());
        Ok(map)
    }

    fn list_id(&self, name: &str) -> Result<Option<String>> {
        let v = self.send(
            "reading the board's lists",
            "GET",
            &format!("boards/{}/lists?fields=id,name", self.board),
            None,
        )?;
        Ok(v.as_array()
            .and_then(|ls| ls.iter().find(|l| text(l, "name") == name))
            .map(|l| text(l, "id")))
    }
}

/// Trello's answer in the budget's terms: a 429 without `Retry-After` waits 10 s.
#[must_use]
pub fn rate(r: &crate::forge::Reply, now: jiff::Timestamp) -> (u16, Vec<(String, String)>) {
    let (status, mut h) = super::jira::rate(r, now);
    h.retain(|(k, _)| k.eq_ignore_ascii_case("retry-after"));
    (status, h)
}

impl Tracker for Trello {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Trello
    }

    fn describe(&self) -> String {
        format!("{} board {}", self.client.describe(), self.board)
    }

    fn items(&mut self, label: &str) -> Result<Vec<Issue>> {
        let list = self.list_id(label)?;
        self.list_label = list.clone().map(|l| (l, label.to_string()));
        let v = self.send(
            "listing the board's open cards",
            "GET",
            &format!("boards/{}/cards/open?fields={CARD_FIELDS}", self.board),
            None,
        )?;
        let mut out = Vec::new();
        for c in v.as_array().into_iter().flatten() {
            let in_list = list.as_deref().is_some_and(|l| text(c, "idList") == l);
            if let Some(mut issue) = self.issue_of(c)? {
                // A card of the list carries the "label" the watch asks for.
                if in_list && !issue.labels.iter().any(|l| l == label) {
                    issue.labels.push(label.to_string());
                }
                if issue.labels.iter().any(|l| l == label) {
                    out.push(issue);
                }
            }
        }
        Ok(out)
    }

    fn item(&mut self, key: &ItemKey) -> Result<Option<Issue>> {
        let path = format!("cards/{}?fields={CARD_FIELDS}", key.as_str());
        let r = self.client.request("GET", &path, None, &[])?;
        if r.status == 404 {
            return Ok(None);
        }
        let v = self.client.json(&format!("reading card {key}"), &r)?;
        let mut issue = self.issue_of(&v)?;
        // A card taken from a list keeps the list's name as its label (as listed).
        if let (Some(i), Some((list, label))) = (issue.as_mut(), &self.list_label)
            && text(&v, "idList") == *list
            && !i.labels.contains(label)
        {
            i.labels.push(label.clone());
        }
        Ok(issue)
    }

    fn comment(&mut self, key: &ItemKey, body: &str) -> Result<()> {
        let body = without_marker(body);
        let (card, _) = self.card(key)?;
        let id = match self.cache.note(TrackerKind::Trello, key) {
            Some(id) => Some(id),
            None => {
                let v = self.send(
                    &format!("reading the comments of card {key}"),
                    "GET",
                    &format!("cards/{card}/actions?filter=commentCard"),
                    None,
                )?;
                v.as_array().and_then(|a| {
                    a.iter()
                        .find(|c| {
                            is_hank_comment(
                                c.pointer("/data/text")
                                    .and_then(Value::as_str)
                                    .unwrap_or(""),
                            )
                        })
                        .map(|c| text(c, "id"))
                })
            }
        };
        let payload = json!({ "text": body });
        if let Some(id) = id {
            let path = format!("cards/{card}/actions/{id}/comments");
            let r = self.client.request("PUT", &path, Some(&payload), &[])?;
            if r.ok() {
                return Ok(());
            }
            if r.status != 404 {
                return Err(self
                    .client
                    .refused(&format!("editing hank's comment on card {key}"), &r));
            }
        }
        let v = self.send(
            &format!("commenting on card {key}"),
            "POST",
            &format!("cards/{card}/actions/comments"),
            Some(&payload),
        )?;
        let id = text(&v, "id");
        if !id.is_empty() {
            self.cache.keep_note(TrackerKind::Trello, key, &id)?;
        }
        Ok(())
    }

    fn mark(&mut self, key: &ItemKey, mark: Mark) -> Result<()> {
        let (card, on) = self.card(key)?;
        let (add, remove) = mark.labels();
        let mut labels = self.board_labels()?;
        for l in remove {
            if let Some(id) = labels.get(*l).filter(|id| on.contains(id)) {
                let r = self.client.request(
                    "DELETE",
                    &format!("cards/{card}/idLabels/{id}"),
                    None,
                    &[],
                )?;
                if !r.ok() && r.status != 404 {
                    return Err(self
                        .client
                        .refused(&format!("removing the label {l} of card {key}"), &r));
                }
            }
        }
        for l in add {
            let id = match labels.get(*l) {
                Some(id) => id.clone(),
                None => {
                    // `idBoard` is the board's id (TRELLO_BOARD may be its short link).
                    let board = self.send(
                        "reading the board",
                        "GET",
                        &format!("boards/{}?fields=id", self.board),
                        None,
                    )?;
                    let v = self.send(
                        &format!("creating the label {l}"),
                        "POST",
                        "labels",
                        Some(&json!({ "name": l, "color": null, "idBoard": text(&board, "id") })),
                    )?;
                    let id = text(&v, "id");
                    labels.insert((*l).to_string(), id.clone());
                    self.labels = Some(labels.clone());
                    id
                }
            };
            if !on.contains(&id) {
                self.send(
                    &format!("labelling card {key} {l}"),
                    "POST",
                    &format!("cards/{card}/idLabels"),
                    Some(&json!({ "value": id })),
                )?;
            }
        }
        if mark == Mark::Done
            && let Some(list) = self.done_list.clone()
        {
            match self.list_id(&list)? {
                Some(id) => {
                    self.send(
                        &format!("moving card {key} to {list}"),
                        "PUT",
                        &format!("cards/{card}"),
                        Some(&json!({ "idList": id })),
                    )?;
                }
                None => {
                    return Err(HankError::usage(format!(
                        "TRELLO_DONE_LIST={list:?}: the board has no list of that name"
                    )));
                }
            }
        }
        self.known.remove(key);
        Ok(())
    }
}
