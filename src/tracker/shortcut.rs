//! Shortcut through its REST API v3 (`SHORTCUT_API_URL`, default
//! `https://api.app.shortcut.com/api/v3`; `SHORTCUT_API_TOKEN` in the `Shortcut-Token`
//! header). Items: the stories found by the search `label:"L" !is:done !is:archived`; the key
//! is `sc-<id>`, the form Shortcut's VCS integrations find in a branch's name. Comments are
//! the story's (`text`), edited in place; the marks are labels (a story's labels are written
//! whole, by name: Shortcut makes a missing one); a claimed story moves to its workflow's
//! first `started` state. Rate limit: 200 requests a minute, a 429 (waited 60 s when it says
//! no `Retry-After`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{CacheFile, Client, Mark, Tracker, key_of, need, text, var, without_marker};
use crate::error::{HankError, Result};
use crate::forge::{Http, Reply, enc};
use crate::policy::tracker::{Issue, ItemKey, TrackerKind, is_hank_comment};

/// The public API.
pub const API: &str = "https://api.app.shortcut.com/api/v3";

/// A Shortcut workspace's stories.
pub struct Shortcut {
    client: Client,
    /// Story key → the story as last read.
    known: BTreeMap<ItemKey, Value>,
    cache: CacheFile,
}

/// Shortcut's answer in the budget's terms: a 429 without `Retry-After` waits a minute.
#[must_use]
pub fn rate(r: &Reply, _now: jiff::Timestamp) -> (u16, Vec<(String, String)>) {
    let mut out: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
        .cloned()
        .collect();
    if r.status == 429 && out.is_empty() {
        out.push(("Retry-After".into(), "60".into()));
    }
    (r.status, out)
}

fn story_id(key: &ItemKey) -> Result<u64> {
    key.as_str()
        .strip_prefix("sc-")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| HankError::Internal(format!("Shortcut: {key} is not a story key")))
}

impl Shortcut {
    /// The client of `SHORTCUT_API_URL` with `SHORTCUT_API_TOKEN`.
    ///
    /// # Errors
    /// The token is not set; the URL is not one.
    pub fn open(root: &std::path::Path) -> Result<Self> {
        let k = TrackerKind::Shortcut;
        let token = need(
            k,
            "SHORTCUT_API_TOKEN",
            "a Shortcut API token (Settings → API Tokens)",
        )?;
        let base = var("SHORTCUT_API_URL").unwrap_or_else(|| API.to_string());
        let http = Http::with_headers(
            &base,
            "SHORTCUT_API_URL",
            "SHORTCUT_API_TOKEN",
            vec![
                ("Shortcut-Token".into(), token.trim().to_string()),
                ("Accept".into(), "application/json".into()),
            ],
        )?;
        let budget = format!("shortcut-{}", http.token_key());
        Ok(Self {
            client: Client::new(k, Box::new(http), budget, rate, "SHORTCUT_API_TOKEN"),
            known: BTreeMap::new(),
            cache: CacheFile::open(root)?,
        })
    }

    fn send(&self, what: &str, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let r = self.client.request(method, path, body, &[])?;
        self.client.json(what, &r)
    }

    fn issue_of(&mut self, s: &Value) -> Result<Option<Issue>> {
        let id = s.get("id").and_then(Value::as_u64).unwrap_or(0);
        let key = key_of(TrackerKind::Shortcut, &format!("sc-{id}"))?;
        self.known.insert(key.clone(), s.clone());
        let closed = s.get("completed").and_then(Value::as_bool) == Some(true)
            || s.get("archived").and_then(Value::as_bool) == Some(true);
        if closed {
            return Ok(None);
        }
        Ok(Some(Issue {
            key,
            title: text(s, "name"),
            body: text(s, "description"),
            url: text(s, "app_url"),
            labels: names(s),
        }))
    }

    fn story(&mut self, key: &ItemKey) -> Result<Value> {
        if !self.known.contains_key(key) {
            self.item(key)?;
        }
        self.known.get(key).cloned().ok_or_else(|| {
            HankError::Tool(format!(
                "{key} at {}: no such story",
                self.client.describe()
            ))
        })
    }
}

fn names(s: &Value) -> Vec<String> {
    s.get("labels")
        .and_then(Value::as_array)
        .map(|ls| ls.iter().map(|l| text(l, "name")).collect())
        .unwrap_or_default()
}

impl Tracker for Shortcut {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Shortcut
    }

    fn describe(&self) -> String {
        self.client.describe()
    }

    fn items(&mut self, label: &str) -> Result<Vec<Issue>> {
        let query = format!("label:\"{}\" !is:done !is:archived", label.replace('"', ""));
        let mut path = format!("search/stories?query={}&page_size=25", enc(&query));
        let mut out = Vec::new();
        for _ in 0..10 {
            let v = self.send("searching the labelled stories", "GET", &path, None)?;
            for s in v
                .get("data")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(i) = self.issue_of(s)?
                    && i.labels.iter().any(|l| l == label)
                {
                    out.push(i);
                }
            }
            // `next` is the path and query of the next page, under the API root.
            match v.get("next").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => {
                    path = next
                        .trim_start_matches('/')
                        .trim_start_matches("api/v3/")
                        .to_string();
                }
                _ => break,
            }
        }
        Ok(out)
    }

    fn item(&mut self, key: &ItemKey) -> Result<Option<Issue>> {
        let id = story_id(key)?;
        let r = self
            .client
            .request("GET", &format!("stories/{id}"), None, &[])?;
        if r.status == 404 {
            return Ok(None);
        }
        let v = self.client.json(&format!("reading {key}"), &r)?;
        self.issue_of(&v)
    }

    fn comment(&mut self, key: &ItemKey, body: &str) -> Result<()> {
        let id = story_id(key)?;
        let body = without_marker(body);
        let story = self.story(key)?;
        let comment = self.cache.note(TrackerKind::Shortcut, key).or_else(|| {
            story
                .get("comments")
                .and_then(Value::as_array)
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| is_hank_comment(&text(c, "text")))
                        .and_then(|c| c.get("id").and_then(Value::as_u64))
                        .map(|n| n.to_string())
                })
        });
        let payload = json!({ "text": body });
        if let Some(c) = comment {
            let path = format!("stories/{id}/comments/{c}");
            let r = self.client.request("PUT", &path, Some(&payload), &[])?;
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
            &format!("stories/{id}/comments"),
            Some(&payload),
        )?;
        if let Some(c) = v.get("id").and_then(Value::as_u64) {
            self.cache
                .keep_note(TrackerKind::Shortcut, key, &c.to_string())?;
        }
        Ok(())
    }

    fn mark(&mut self, key: &ItemKey, mark: Mark) -> Result<()> {
        let id = story_id(key)?;
        let story = self.story(key)?;
        let (add, remove) = mark.labels();
        let mut labels: Vec<String> = names(&story)
            .into_iter()
            .filter(|l| !remove.contains(&l.as_str()))
            .collect();
        for l in add {
            if !labels.iter().any(|x| x == l) {
                labels.push((*l).to_string());
            }
        }
        let mut update = json!({
            "labels": labels.iter().map(|l| json!({ "name": l })).collect::<Vec<_>>(),
        });
        if mark == Mark::Working {
            let workflow = story.get("workflow_id").and_then(Value::as_u64);
            let flows = self.send("reading the workflows", "GET", "workflows", None)?;
            let started = flows.as_array().and_then(|fs| {
                fs.iter()
                    .filter(|f| {
                        workflow.is_none() || f.get("id").and_then(Value::as_u64) == workflow
                    })
                    .flat_map(|f| {
                        f.get("states")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default()
                    })
                    .find(|s| text(s, "type") == "started")
            });
            if let Some(state) = started.and_then(|s| s.get("id").and_then(Value::as_u64)) {
                update["workflow_state_id"] = json!(state);
            }
        }
        self.send(
            &format!("labelling {key}"),
            "PUT",
            &format!("stories/{id}"),
            Some(&update),
        )?;
        self.known.remove(key);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_429_waits_as_it_says_or_a_minute_and_keys_are_sc_n() {
        let now = jiff::Timestamp::UNIX_EPOCH;
        let r = |h: Vec<(String, String)>| Reply {
            status: 429,
            body: String::new(),
            headers: h,
        };
        assert_eq!(
            rate(&r(vec![]), now).1,
            [("Retry-After".to_string(), "60".to_string())]
        );
        let said = vec![("retry-after".to_string(), "3".to_string())];
        assert_eq!(rate(&r(said.clone()), now), (429, said));
        // Trello's: a 429 without a Retry-After waits 10 s; its other headers are not the budget's.
        let t = crate::tracker::trello::rate(
            &r(vec![(
                "x-rate-limit-api-token-remaining".into(),
                "0".into(),
            )]),
            now,
        );
        assert_eq!(
            t,
            (429, vec![("Retry-After".to_string(), "10".to_string())])
        );
        assert_eq!(story_id(&ItemKey::parse("sc-42").unwrap()).unwrap(), 42);
        assert!(story_id(&ItemKey::parse("42").unwrap()).is_err());
    }
}
