//! The issue tracker as `hank watch` reads and writes it (I/O; the rules are
//! [`crate::policy::tracker`]): one interface, [`Tracker`], and one implementation per tracker.
//!
//! | module | role |
//! |---|---|
//! | this file | [`Tracker`] (list the labelled open items, read one fresh, hank's one comment edited in place, the marks shown to people, the PR link), [`open`], [`Client`]: every request under the shared rate budget, a refusal said with the tracker, the item and what to do |
//! | [`forge`] | GitHub and GitLab (the code's forge: conditional listings with an `ETag` cache, labels, `Closes #N`) |
//! | [`linear`] | Linear's GraphQL API (`LINEAR_API_KEY`) |
//! | [`jira`] | Jira Cloud's REST API v3 (`JIRA_URL`, `JIRA_EMAIL`, `JIRA_API_TOKEN`; comments in its document format) |
//! | [`trello`], [`plane`], [`shortcut`] | Trello's, Plane's and Shortcut's REST APIs |
//! | [`budget`] | the rate budget per credential, shared by every hank process of the user (a file under a lock) |
//! | [`claims`] | one claim per item on the code's remote (`refs/hank/claims/<tracker>-<key>`, compare-and-swap) |
//!
//! The credentials come from hank's environment and stay with hank: the agent's environment
//! never holds them (`effects::agent::AGENT_ENV_REMOVED`), and the agent never writes to the
//! tracker. The claim is the lock; labels and states are shown to people, never read as one.
//! Each tracker's quirks are in `docs/trackers.md`.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `hank watch`'s tracker I/O behind one trait, `Tracker` (`mod.rs`: items by label, one item read
//! fresh after its claim, hank's one comment edited in place, `Mark`s, the PR link; `Client`: every
//! request under the shared rate budget with the tracker's headers mapped, refusals naming tracker,
//! item and variable; `open`): `forge.rs` (GitHub/GitLab: `ETag` listings, labels), `linear.rs`
//! (GraphQL, `String!` vs `ID!`, `RATELIMITED`), `jira.rs` (REST v3, ADF), `trello.rs`, `plane.rs`,
//! `shortcut.rs`; `budget.rs` (the per-credential rate budget shared by every hank process,
//! flock'd, visible waits), `claims.rs` (`refs/hank/claims/<tracker>-<key>` on origin,
//! create-only/leased CAS); the rules are `policy/tracker.rs` (`ItemKey`, `choose`, `Claim`,
//! `task_of`, `comment`/`PrLink`, `RateBudget`); quirks in `docs/trackers.md`

pub mod budget;
pub mod claims;
pub mod forge;
pub mod jira;
pub mod linear;
pub mod plane;
pub mod shortcut;
pub mod trello;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{HankError, Result};
use crate::forge::{Api, Reply};
use crate::policy::tracker::{Issue, ItemKey, OpenPr, TrackerKind};

/// Attempts of one request that the tracker rate-limits.
const RATE_ATTEMPTS: u32 = 3;

/// What hank shows on an item (labels and, where the tracker has them, workflow states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Claimed: `hank:working` (and a started state where the tracker has one).
    Working,
    /// Delivered: `hank:done` instead of `hank:working`.
    Done,
    /// Failed: `hank:failed` instead of `hank:working` (removing it lets a watch try again).
    Failed,
    /// Given back unfinished: `hank:working` removed.
    Released,
}

impl Mark {
    /// The labels added and removed.
    #[must_use]
    pub fn labels(self) -> (&'static [&'static str], &'static [&'static str]) {
        use crate::policy::tracker::{DONE, FAILED, WORKING};
        match self {
            Self::Working => (&[WORKING], &[]),
            Self::Done => (&[DONE], &[WORKING]),
            Self::Failed => (&[FAILED], &[WORKING]),
            Self::Released => (&[], &[WORKING]),
        }
    }
}

/// One tracker as `hank watch` uses it.
pub trait Tracker {
    /// Which tracker.
    fn kind(&self) -> TrackerKind;

    /// `Linear (GraphQL at https://…)`, for messages.
    fn describe(&self) -> String;

    /// The open items carrying `label` (the tracker's closest equivalent where it has no
    /// labels, `docs/trackers.md`), each with its labels; as cheaply as the tracker allows (a
    /// conditional request where it has them).
    ///
    /// # Errors
    /// The tracker cannot be asked, or refuses.
    fn items(&mut self, label: &str) -> Result<Vec<Issue>>;

    /// One item read fresh (after its claim, so the task runs what it says now); `None` when
    /// it is gone or closed.
    ///
    /// # Errors
    /// The tracker cannot be asked, or refuses.
    fn item(&mut self, key: &ItemKey) -> Result<Option<Issue>>;

    /// hank's open pull requests, for a tracker that is the code's forge (others: none).
    ///
    /// # Errors
    /// The forge cannot be asked.
    fn open_prs(&mut self) -> Result<Vec<OpenPr>> {
        Ok(Vec::new())
    }

    /// Writes hank's one comment on the item: the one written before is edited in place.
    /// `body` is Markdown starting with the comment marker; a tracker that shows neither
    /// renders it in its own format.
    ///
    /// # Errors
    /// The tracker refused it.
    fn comment(&mut self, key: &ItemKey, body: &str) -> Result<()>;

    /// Shows `mark` on the item (labels; a workflow state where the tracker has them).
    ///
    /// # Errors
    /// The tracker refused it.
    fn mark(&mut self, key: &ItemKey, mark: Mark) -> Result<()>;

    /// Links the pull request to the item where the tracker has a place for links (Linear's
    /// attachments); elsewhere the comment and the branch's name carry it.
    ///
    /// # Errors
    /// The tracker refused it.
    fn link_pr(&mut self, key: &ItemKey, url: &str) -> Result<()> {
        let _ = (key, url);
        Ok(())
    }
}

/// Rate-limit facts of an answer in the budget's terms: the status to note (a limit said in a
/// body is a 429) and the headers `X-RateLimit-Limit`/`-Remaining`/`-Reset` (seconds since the
/// epoch) and `Retry-After` (seconds), from whatever the tracker sends.
pub type RateOf = fn(&Reply, jiff::Timestamp) -> (u16, Vec<(String, String)>);

/// The headers as they are (GitHub's names, or none the budget reads).
#[must_use]
pub fn rate_as_is(r: &Reply, _now: jiff::Timestamp) -> (u16, Vec<(String, String)>) {
    (r.status, r.headers.clone())
}

/// A tracker's requests: its transport, the shared rate budget's name, what the rate headers
/// mean, and the variables that hold its credential (for messages).
pub struct Client {
    pub kind: TrackerKind,
    api: Box<dyn Api>,
    budget_key: String,
    rate: RateOf,
    /// The variables a refused credential is set in (`LINEAR_API_KEY`).
    pub credentials: &'static str,
}

impl Client {
    #[must_use]
    pub fn new(
        kind: TrackerKind,
        api: Box<dyn Api>,
        budget_key: String,
        rate: RateOf,
        credentials: &'static str,
    ) -> Self {
        Self {
            kind,
            api,
            budget_key,
            rate,
            credentials,
        }
    }

    /// `Linear (GraphQL at …)`.
    #[must_use]
    pub fn describe(&self) -> String {
        format!("{} ({})", self.kind.title(), self.api.describe())
    }

    /// The shared rate budget's name.
    #[must_use]
    pub fn budget_key(&self) -> &str {
        &self.budget_key
    }

    /// One request under the shared rate budget: a visible wait while it is spent, the
    /// answer's rate facts noted, a rate-limited request sent again after its wait.
    ///
    /// # Errors
    /// The request could not be made; interrupted while waiting.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(String, String)],
    ) -> Result<Reply> {
        let mut attempt = 0;
        loop {
            budget::before(&self.budget_key)?;
            let r = self.api.call_with(method, path, body, headers)?;
            let now = crate::policy::time::Clock::now(&crate::clock::SystemClock::from_env()?);
            let (status, rate) = (self.rate)(&r, now);
            budget::after(&self.budget_key, status, &rate)?;
            attempt += 1;
            // A rate limit (429, or a 403 that says so): the budget now holds the time to
            // wait, which `before` waits for, visibly; then the request again.
            let said = |name: &str| rate.iter().find(|(k, _)| k.eq_ignore_ascii_case(name));
            let limited = status == 429
                || status == 403
                    && (said("retry-after").is_some()
                        || said("x-ratelimit-remaining").is_some_and(|(_, v)| v.trim() == "0"));
            if !limited || attempt >= RATE_ATTEMPTS {
                return Ok(r);
            }
        }
    }

    /// What a refused request means: the tracker, the item, the status and the tracker's
    /// message, and what to do for a refused credential, a missing item or a tracker that is
    /// down.
    #[must_use]
    pub fn refused(&self, what: &str, r: &Reply) -> HankError {
        let hint = match r.status {
            401 => format!(
                ": the credential was refused; check {} (a new token, not an expired one)",
                self.credentials
            ),
            403 => format!(
                ": not allowed; the account of {} needs access to it",
                self.credentials
            ),
            404 => ": not found; check the item, the project and the API address".to_string(),
            429 => ": still rate-limited after waiting; try again later".to_string(),
            500..=599 => ": the tracker failed; try again later".to_string(),
            _ => String::new(),
        };
        HankError::Tool(format!(
            "{what} at {}: HTTP {} {}{hint}",
            self.describe(),
            r.status,
            r.message()
        ))
    }

    /// A 2xx answer's JSON body, or the refusal; an answer that is not JSON is said so.
    ///
    /// # Errors
    /// Refused, or not JSON.
    pub fn json(&self, what: &str, r: &Reply) -> Result<Value> {
        if !r.ok() {
            return Err(self.refused(what, r));
        }
        if r.body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&r.body).map_err(|_| {
            HankError::Tool(format!(
                "{what} at {}: HTTP {} but the answer is not JSON: {}",
                self.describe(),
                r.status,
                crate::sanitize::cut_chars(&crate::sanitize::line(&r.body), 120)
            ))
        })
    }
}

/// What is kept between polls (`watch-cache.json` in the project's per-user folder): the
/// last answer and `ETag` of each listing, hank's comment per item.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Cache {
    /// Request path → (ETag, body).
    pub listings: BTreeMap<String, (String, String)>,
    /// A forge's issue number → hank's comment (note) id.
    pub comments: BTreeMap<u64, u64>,
    /// `<tracker>:<key>` → hank's comment id, for the trackers whose ids are not numbers.
    pub notes: BTreeMap<String, String>,
}

/// The cache and where it is kept.
pub struct CacheFile {
    path: PathBuf,
    pub cache: Cache,
}

impl CacheFile {
    /// The project's cache (empty when there is none or it does not read).
    ///
    /// # Errors
    /// The per-user folder cannot be made.
    pub fn open(root: &Path) -> Result<Self> {
        let path = crate::store::userdir::project_dir(root)?.join("watch-cache.json");
        let cache = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Ok(Self { path, cache })
    }

    /// Written atomically (0600).
    ///
    /// # Errors
    /// It cannot be written.
    pub fn save(&self) -> Result<()> {
        let bytes = serde_json::to_vec(&self.cache)
            .map_err(|e| HankError::Internal(format!("cannot encode the watch cache: {e}")))?;
        crate::store::write_atomic(&self.path, &bytes, false)
            .map_err(|e| HankError::io("write", &self.path, e))
    }

    /// hank's comment id on `key` of `kind`, as kept.
    #[must_use]
    pub fn note(&self, kind: TrackerKind, key: &ItemKey) -> Option<String> {
        self.cache
            .notes
            .get(&format!("{}:{}", kind.as_str(), key.as_str()))
            .cloned()
    }

    /// Keeps hank's comment id on `key`.
    ///
    /// # Errors
    /// The cache cannot be written.
    pub fn keep_note(&mut self, kind: TrackerKind, key: &ItemKey, id: &str) -> Result<()> {
        self.cache.notes.insert(
            format!("{}:{}", kind.as_str(), key.as_str()),
            id.to_string(),
        );
        self.save()
    }
}

/// A variable of hank's environment, when it is set and not blank.
#[must_use]
pub fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

/// A variable a tracker needs, or a usage error naming it and what it holds.
///
/// # Errors
/// It is not set.
pub fn need(kind: TrackerKind, k: &str, what: &str) -> Result<String> {
    var(k).ok_or_else(|| {
        HankError::usage_hint(
            format!("--tracker {}: {k} is not set", kind.as_str()),
            format!("set {k} to {what} in hank's environment (the agent never sees it)"),
        )
    })
}

/// The key an item's JSON gives, or an error naming the tracker and what was expected.
///
/// # Errors
/// The key is missing or not a key.
pub fn key_of(kind: TrackerKind, raw: &str) -> Result<ItemKey> {
    ItemKey::parse(raw).ok_or_else(|| {
        HankError::Tool(format!(
            "{}: an item's key {:?} is not one (expected letters, digits, - or _)",
            kind.title(),
            crate::sanitize::cut_chars(&crate::sanitize::line(raw), 80)
        ))
    })
}

/// The tracker of `kind`: the code's forge (`host`, `repo` from the remote) or a tracker
/// reached with the credentials in hank's environment (`docs/trackers.md`).
///
/// # Errors
/// No usable login or credential; a base URL that is not one.
pub fn open(
    kind: TrackerKind,
    root: &Path,
    host: Option<&str>,
    repo: &str,
    env: &crate::forge::Env,
) -> Result<Box<dyn Tracker>> {
    Ok(match kind {
        TrackerKind::GitHub | TrackerKind::GitLab => {
            Box::new(forge::ForgeTracker::open(kind, root, host, repo, env)?)
        }
        TrackerKind::Linear => Box::new(linear::Linear::open(root)?),
        TrackerKind::Jira => Box::new(jira::Jira::open(root)?),
        TrackerKind::Trello => Box::new(trello::Trello::open(root)?),
        TrackerKind::Plane => Box::new(plane::Plane::open(root)?),
        TrackerKind::Shortcut => Box::new(shortcut::Shortcut::open(root)?),
    })
}

/// A JSON string field (empty when absent).
#[must_use]
pub fn text(v: &Value, key: &str) -> String {
    crate::forge::text(v, key)
}

/// The key (seconds from now) of a reset time, as `Retry-After`.
#[must_use]
pub fn seconds_until(at_second: i64, now: jiff::Timestamp) -> String {
    (at_second - now.as_second()).max(1).to_string()
}

/// `body` without hank's comment marker line, for a tracker that would show it as text (its
/// comment is then found by its first line, [`crate::policy::tracker::is_hank_comment`]).
#[must_use]
pub fn without_marker(body: &str) -> String {
    body.strip_prefix(crate::policy::tracker::COMMENT_MARKER)
        .map_or(body, |rest| rest.trim_start_matches('\n'))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Canned;

    impl Api for Canned {
        fn describe(&self) -> String {
            "REST at http://127.0.0.1:9".into()
        }
        fn call_with(
            &self,
            _: &str,
            _: &str,
            _: Option<&Value>,
            _: &[(String, String)],
        ) -> Result<Reply> {
            Err(HankError::Internal("not called".into()))
        }
    }

    fn reply(status: u16, body: &str) -> Reply {
        Reply {
            status,
            body: body.into(),
            headers: Vec::new(),
        }
    }

    #[test]
    fn refusals_and_garbage_name_the_tracker_the_item_and_what_to_do() {
        let c = Client::new(
            TrackerKind::Jira,
            Box::new(Canned),
            "k".into(),
            rate_as_is,
            "JIRA_EMAIL / JIRA_API_TOKEN",
        );
        let said = |status: u16, body: &str| {
            c.json("reading PROJ-1", &reply(status, body))
                .unwrap_err()
                .to_string()
        };
        let e = said(401, r#"{"message":"Unauthorized"}"#);
        assert!(
            e.contains("reading PROJ-1 at Jira (REST at http://127.0.0.1:9): HTTP 401")
                && e.contains("check JIRA_EMAIL / JIRA_API_TOKEN"),
            "{e}"
        );
        assert!(said(403, "{}").contains("needs access"));
        assert!(said(404, "{}").contains("not found; check the item"));
        assert!(said(503, "<html>down</html>").contains("the tracker failed; try again later"));
        let e = said(200, "<html>a login page</html>");
        assert!(e.contains("HTTP 200 but the answer is not JSON"), "{e}");
        assert_eq!(
            c.json("x", &reply(200, r#"{"a":1}"#)).unwrap()["a"],
            1,
            "JSON reads"
        );
        assert_eq!(c.json("x", &reply(204, "")).unwrap(), Value::Null);
        assert_eq!(without_marker("<!-- hank:watch -->\n**hank**"), "**hank**");
    }

    #[test]
    fn marks_are_the_labels_people_see() {
        assert_eq!(Mark::Working.labels(), (&["hank:working"][..], &[][..]));
        assert_eq!(
            Mark::Done.labels(),
            (&["hank:done"][..], &["hank:working"][..])
        );
        assert_eq!(
            Mark::Failed.labels(),
            (&["hank:failed"][..], &["hank:working"][..])
        );
        assert_eq!(Mark::Released.labels(), (&[][..], &["hank:working"][..]));
    }
}
