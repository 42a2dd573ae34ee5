//! Linear through its GraphQL API (`LINEAR_API_URL`, default `https://api.linear.app/graphql`;
//! `LINEAR_API_KEY`, sent as `Authorization: <key>` — a personal key has no `Bearer`; an OAuth
//! token given as `Bearer …` is sent as it is). Items: the open issues (state type neither
//! `completed` nor `canceled`) carrying the label, of the team `LINEAR_TEAM` (its key, e.g.
//! `ENG`) when it is set; their key is the identifier (`ENG-123`), which Linear's GitHub and
//! GitLab integrations find in the branch's name. The schema is strict about `String` and
//! `ID`: the issue, comment and label arguments of queries and mutations are `String!`
//! (`issue(id:)` takes the identifier too), a filter comparator on an id is `ID`; every
//! operation here declares its variables as the schema types them. Rate limits: requests and
//! complexity per hour (`X-RateLimit-Requests-*`, `X-RateLimit-Complexity-*`, resets in
//! milliseconds); a limited request is an error `RATELIMITED` in the body.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{
    CacheFile, Client, Mark, Tracker, key_of, need, seconds_until, text, var, without_marker,
};
use crate::error::{HankError, Result};
use crate::forge::{Http, Reply};
use crate::policy::tracker::{Issue, ItemKey, TrackerKind, is_hank_comment};

/// The public endpoint.
pub const API: &str = "https://api.linear.app/graphql";
/// Complexity points kept back: below this the next request waits for the reset.
const COMPLEXITY_RESERVE: i64 = 2_000;

const FIELDS: &str = "fragment HankIssue on Issue { id identifier title description url \
    team { id } state { type } labels(first: 25) { nodes { id name } } }";
const ITEMS: &str = "query HankItems($filter: IssueFilter, $after: String) { \
    issues(filter: $filter, first: 50, after: $after) { nodes { ...HankIssue } \
    pageInfo { hasNextPage endCursor } } }";
const ITEM: &str = "query HankItem($id: String!) { issue(id: $id) { ...HankIssue } }";
const COMMENTS: &str = "query HankComments($id: String!) { issue(id: $id) { comments(first: 50) { nodes { id body } } } }";
const COMMENT_CREATE: &str = "mutation HankCommentCreate($input: CommentCreateInput!) { \
    commentCreate(input: $input) { success comment { id } } }";
const COMMENT_UPDATE: &str = "mutation HankCommentUpdate($id: String!, $input: CommentUpdateInput!) { \
    commentUpdate(id: $id, input: $input) { success } }";
const LABEL_FIND: &str = "query HankLabel($name: String!) { \
    issueLabels(filter: { name: { eq: $name } }, first: 1) { nodes { id } } }";
const LABEL_CREATE: &str = "mutation HankLabelCreate($input: IssueLabelCreateInput!) { \
    issueLabelCreate(input: $input) { success issueLabel { id } } }";
const LABEL_ADD: &str = "mutation HankLabelAdd($id: String!, $labelId: String!) { \
    issueAddLabel(id: $id, labelId: $labelId) { success } }";
const LABEL_REMOVE: &str = "mutation HankLabelRemove($id: String!, $labelId: String!) { \
    issueRemoveLabel(id: $id, labelId: $labelId) { success } }";
const STARTED: &str = "query HankStarted($team: ID!) { workflowStates(filter: \
    { team: { id: { eq: $team } }, type: { eq: \"started\" } }, first: 1) { nodes { id } } }";
const ISSUE_UPDATE: &str = "mutation HankIssueUpdate($id: String!, $input: IssueUpdateInput!) { \
    issueUpdate(id: $id, input: $input) { success } }";
const LINK: &str = "mutation HankLink($issueId: String!, $url: String!, $title: String) { \
    attachmentLinkURL(issueId: $issueId, url: $url, title: $title) { success } }";

/// What hank keeps of an item it listed or read.
#[derive(Debug, Clone, Default)]
struct Known {
    id: String,
    team: String,
    state_type: String,
    labels: BTreeMap<String, String>,
}

/// A Linear workspace's issues.
pub struct Linear {
    client: Client,
    team: Option<String>,
    known: BTreeMap<ItemKey, Known>,
    label_ids: BTreeMap<String, String>,
    cache: CacheFile,
}

/// Linear's rate headers in the budget's terms; a `RATELIMITED` error is a 429 until the
/// later of the two resets; spent complexity waits for its reset too.
#[must_use]
pub fn rate(r: &Reply, now: jiff::Timestamp) -> (u16, Vec<(String, String)>) {
    let num = |name: &str| r.header(name).and_then(|v| v.trim().parse::<i64>().ok());
    // Resets are epoch milliseconds; a value that can only be seconds is taken as such.
    let secs = |v: i64| if v > 100_000_000_000 { v / 1000 } else { v };
    let mut out = Vec::new();
    if let Some(l) = num("x-ratelimit-requests-limit") {
        out.push(("X-RateLimit-Limit".into(), l.to_string()));
    }
    if let Some(l) = num("x-ratelimit-requests-remaining") {
        out.push(("X-RateLimit-Remaining".into(), l.to_string()));
    }
    let requests_reset = num("x-ratelimit-requests-reset").map(secs);
    if let Some(s) = requests_reset {
        out.push(("X-RateLimit-Reset".into(), s.to_string()));
    }
    let complexity_reset = num("x-ratelimit-complexity-reset").map(secs);
    let limited = r
        .json()
        .get("errors")
        .and_then(Value::as_array)
        .is_some_and(|es| {
            es.iter().any(|e| {
                e.pointer("/extensions/code").and_then(Value::as_str) == Some("RATELIMITED")
            })
        });
    let complexity_spent =
        num("x-ratelimit-complexity-remaining").is_some_and(|c| c < COMPLEXITY_RESERVE);
    if limited || complexity_spent {
        let until = requests_reset.into_iter().chain(complexity_reset).max();
        let wait = until.map_or_else(|| "60".to_string(), |s| seconds_until(s, now));
        out.push(("Retry-After".into(), wait));
    }
    (if limited { 429 } else { r.status }, out)
}

impl Linear {
    /// The client of `LINEAR_API_URL` with `LINEAR_API_KEY`.
    ///
    /// # Errors
    /// The key is not set; the URL is not one.
    pub fn open(root: &std::path::Path) -> Result<Self> {
        let key = need(
            TrackerKind::Linear,
            "LINEAR_API_KEY",
            "a Linear API key (Settings → API)",
        )?;
        let base = var("LINEAR_API_URL").unwrap_or_else(|| API.to_string());
        let http = Http::with_headers(
            &base,
            "LINEAR_API_URL",
            "LINEAR_API_KEY",
            vec![
                ("Authorization".into(), key.trim().to_string()),
                ("Accept".into(), "application/json".into()),
            ],
        )?;
        let budget = format!("linear-{}", http.token_key());
        Ok(Self {
            client: Client::new(
                TrackerKind::Linear,
                Box::new(http),
                budget,
                rate,
                "LINEAR_API_KEY",
            ),
            team: var("LINEAR_TEAM"),
            known: BTreeMap::new(),
            label_ids: BTreeMap::new(),
            cache: CacheFile::open(root)?,
        })
    }

    /// One operation: its `data`, or the refusal (HTTP, GraphQL errors) said with `what`.
    fn gql(&self, what: &str, query: &str, variables: &Value) -> Result<Value> {
        let query = if query.contains("...HankIssue") {
            format!("{query} {FIELDS}")
        } else {
            query.to_string()
        };
        let body = json!({ "query": query, "variables": variables });
        let r = self.client.request("POST", "", Some(&body), &[])?;
        let v = r.json();
        if let Some(errors) = v
            .get("errors")
            .and_then(Value::as_array)
            .filter(|e| !e.is_empty())
        {
            let said: Vec<String> = errors
                .iter()
                .map(|e| {
                    let code = e
                        .pointer("/extensions/code")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    format!("{} {}", code, text(e, "message"))
                        .trim()
                        .to_string()
                })
                .collect();
            if r.ok() || r.status == 400 {
                return Err(HankError::Tool(format!(
                    "{what} at {}: {}",
                    self.client.describe(),
                    crate::sanitize::line(&said.join("; "))
                )));
            }
        }
        let v = self.client.json(what, &r)?;
        v.get("data")
            .cloned()
            .filter(|d| !d.is_null())
            .ok_or_else(|| {
                HankError::Tool(format!(
                    "{what} at {}: an answer without data",
                    self.client.describe()
                ))
            })
    }

    fn issue_of(&mut self, v: &Value) -> Result<Option<Issue>> {
        let raw = text(v, "identifier");
        if raw.is_empty() {
            return Ok(None);
        }
        let key = key_of(TrackerKind::Linear, &raw)?;
        let labels: BTreeMap<String, String> = v
            .pointer("/labels/nodes")
            .and_then(Value::as_array)
            .map(|ls| {
                ls.iter()
                    .map(|l| (text(l, "name"), text(l, "id")))
                    .collect()
            })
            .unwrap_or_default();
        let state_type = v
            .pointer("/state/type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        self.known.insert(
            key.clone(),
            Known {
                id: text(v, "id"),
                team: v
                    .pointer("/team/id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                state_type: state_type.clone(),
                labels: labels.clone(),
            },
        );
        if matches!(state_type.as_str(), "completed" | "canceled") {
            return Ok(None);
        }
        Ok(Some(Issue {
            key,
            title: text(v, "title"),
            body: text(v, "description"),
            url: text(v, "url"),
            labels: labels.into_keys().collect(),
        }))
    }

    fn known(&mut self, key: &ItemKey) -> Result<Known> {
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

    /// The label's id, made (a workspace label) when `create` and it does not exist.
    fn label_id(&mut self, name: &str, create: bool) -> Result<Option<String>> {
        if let Some(id) = self.label_ids.get(name) {
            return Ok(Some(id.clone()));
        }
        let d = self.gql(
            &format!("finding the label {name}"),
            LABEL_FIND,
            &json!({ "name": name }),
        )?;
        let mut id = d
            .pointer("/issueLabels/nodes/0/id")
            .and_then(Value::as_str)
            .map(str::to_string);
        if id.is_none() && create {
            let d = self.gql(
                &format!("creating the label {name}"),
                LABEL_CREATE,
                &json!({ "input": { "name": name } }),
            )?;
            id = d
                .pointer("/issueLabelCreate/issueLabel/id")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        if let Some(i) = &id {
            self.label_ids.insert(name.to_string(), i.clone());
        }
        Ok(id)
    }
}

impl Tracker for Linear {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Linear
    }

    fn describe(&self) -> String {
        match &self.team {
            Some(t) => format!("{} team {t}", self.client.describe()),
            None => self.client.describe(),
        }
    }

    fn items(&mut self, label: &str) -> Result<Vec<Issue>> {
        let mut filter = json!({
            "labels": { "some": { "name": { "eq": label } } },
            "state": { "type": { "nin": ["completed", "canceled"] } },
        });
        if let Some(team) = &self.team {
            filter["team"] = json!({ "key": { "eq": team } });
        }
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        // At most 10 pages of 50.
        for _ in 0..10 {
            let d = self.gql(
                "listing the labelled issues",
                ITEMS,
                &json!({ "filter": filter, "after": after }),
            )?;
            let nodes = d
                .pointer("/issues/nodes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for n in &nodes {
                if let Some(i) = self.issue_of(n)? {
                    out.push(i);
                }
            }
            let page = d
                .pointer("/issues/pageInfo")
                .cloned()
                .unwrap_or(Value::Null);
            after = page
                .get("endCursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            if page.get("hasNextPage").and_then(Value::as_bool) != Some(true) || after.is_none() {
                break;
            }
        }
        Ok(out)
    }

    fn item(&mut self, key: &ItemKey) -> Result<Option<Issue>> {
        let d = self.gql(
            &format!("reading {key}"),
            ITEM,
            &json!({ "id": key.as_str() }),
        )?;
        match d.get("issue").filter(|v| !v.is_null()) {
            Some(v) => {
                let v = v.clone();
                self.issue_of(&v)
            }
            None => Ok(None),
        }
    }

    fn comment(&mut self, key: &ItemKey, body: &str) -> Result<()> {
        let body = without_marker(body);
        let issue = self.known(key)?;
        let id = match self.cache.note(TrackerKind::Linear, key) {
            Some(id) => Some(id),
            None => {
                let d = self.gql(
                    &format!("reading the comments of {key}"),
                    COMMENTS,
                    &json!({ "id": issue.id }),
                )?;
                d.pointer("/issue/comments/nodes")
                    .and_then(Value::as_array)
                    .and_then(|cs| {
                        cs.iter()
                            .find(|c| is_hank_comment(&text(c, "body")))
                            .map(|c| text(c, "id"))
                    })
            }
        };
        if let Some(id) = id {
            let edited = self.gql(
                &format!("editing hank's comment on {key}"),
                COMMENT_UPDATE,
                &json!({ "id": id, "input": { "body": body } }),
            );
            match edited {
                Ok(_) => return Ok(()),
                // Deleted by someone: a new one.
                Err(e) if e.to_string().contains("ENTITY_NOT_FOUND") => {}
                Err(e) => return Err(e),
            }
        }
        let d = self.gql(
            &format!("commenting on {key}"),
            COMMENT_CREATE,
            &json!({ "input": { "issueId": issue.id, "body": body } }),
        )?;
        if let Some(id) = d
            .pointer("/commentCreate/comment/id")
            .and_then(Value::as_str)
        {
            self.cache.keep_note(TrackerKind::Linear, key, id)?;
        }
        Ok(())
    }

    fn mark(&mut self, key: &ItemKey, mark: Mark) -> Result<()> {
        let issue = self.known(key)?;
        let (add, remove) = mark.labels();
        for l in remove {
            if let Some(label) = issue.labels.get(*l) {
                self.gql(
                    &format!("removing the label {l} of {key}"),
                    LABEL_REMOVE,
                    &json!({ "id": issue.id, "labelId": label }),
                )?;
            }
        }
        for l in add {
            if issue.labels.contains_key(*l) {
                continue;
            }
            if let Some(label) = self.label_id(l, true)? {
                self.gql(
                    &format!("labelling {key} {l}"),
                    LABEL_ADD,
                    &json!({ "id": issue.id, "labelId": label }),
                )?;
            }
        }
        // Shown to people: a claimed issue moves to the team's first started state.
        if mark == Mark::Working && issue.state_type != "started" && !issue.team.is_empty() {
            let d = self.gql(
                "finding the team's started state",
                STARTED,
                &json!({ "team": issue.team }),
            )?;
            if let Some(state) = d
                .pointer("/workflowStates/nodes/0/id")
                .and_then(Value::as_str)
            {
                self.gql(
                    &format!("moving {key} to started"),
                    ISSUE_UPDATE,
                    &json!({ "id": issue.id, "input": { "stateId": state } }),
                )?;
            }
        }
        self.known.remove(key);
        Ok(())
    }

    fn link_pr(&mut self, key: &ItemKey, url: &str) -> Result<()> {
        let issue = self.known(key)?;
        self.gql(
            &format!("linking the pull request to {key}"),
            LINK,
            &json!({ "issueId": issue.id, "url": url, "title": "hank's pull request" }),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        Reply {
            status,
            body: body.into(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        }
    }

    #[test]
    fn linear_s_rate_headers_and_ratelimited_errors_are_the_budget_s() {
        let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        let (status, h) = rate(
            &reply(
                200,
                &[
                    ("X-RateLimit-Requests-Limit", "5000"),
                    ("X-RateLimit-Requests-Remaining", "4990"),
                    ("X-RateLimit-Requests-Reset", "1700003600000"),
                    ("X-RateLimit-Complexity-Remaining", "200000"),
                ],
                "{\"data\":{}}",
            ),
            now,
        );
        assert_eq!(status, 200);
        assert!(
            h.contains(&("X-RateLimit-Remaining".into(), "4990".into())),
            "{h:?}"
        );
        assert!(
            h.contains(&("X-RateLimit-Reset".into(), "1700003600".into())),
            "{h:?}"
        );
        assert!(!h.iter().any(|(k, _)| k == "Retry-After"), "{h:?}");
        // Limited: a 429 until the later reset.
        let (status, h) = rate(
            &reply(
                400,
                &[
                    ("X-RateLimit-Requests-Reset", "1700000010000"),
                    ("X-RateLimit-Complexity-Reset", "1700000030"),
                ],
                r#"{"errors":[{"message":"Rate limit exceeded","extensions":{"code":"RATELIMITED"}}]}"#,
            ),
            now,
        );
        assert_eq!(status, 429);
        assert!(h.contains(&("Retry-After".into(), "30".into())), "{h:?}");
        // Spent complexity waits for its reset before the next request.
        let (status, h) = rate(
            &reply(
                200,
                &[
                    ("X-RateLimit-Complexity-Remaining", "10"),
                    ("X-RateLimit-Complexity-Reset", "1700000005000"),
                ],
                "{}",
            ),
            now,
        );
        assert_eq!(status, 200);
        assert!(h.contains(&("Retry-After".into(), "5".into())), "{h:?}");
    }

    #[test]
    fn the_operations_type_ids_as_the_schema_does() {
        // Arguments of queries and mutations are String!, filter comparators on ids are ID.
        for q in [
            ITEM,
            COMMENTS,
            COMMENT_UPDATE,
            LABEL_ADD,
            LABEL_REMOVE,
            ISSUE_UPDATE,
        ] {
            assert!(q.contains("$id: String!"), "{q}");
        }
        assert!(LINK.contains("$issueId: String!"));
        assert!(STARTED.contains("$team: ID!") && STARTED.contains("id: { eq: $team }"));
        assert!(ITEMS.contains("$filter: IssueFilter"));
    }
}
