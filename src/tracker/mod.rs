//! The issue tracker as `hank watch` reads and writes it (I/O; the rules are
//! [`crate::policy::tracker`]).
//!
//! | module | role |
//! |---|---|
//! | this file | [`Tracker`]: the labelled open issues (conditional requests, an `ETag` cache), hank's open pull requests, hank's one comment per issue (edited in place), labels |
//! | [`budget`] | the rate budget per token, shared by every hank process of the user (a file under a lock) |
//! | [`claims`] | one claim per issue on the `origin` remote (`refs/hank/claims/<tracker>-<N>`, compare-and-swap) |
//!
//! Every request goes through the forge layer's [`Api`] (`gh api` / `glab api` or REST with a
//! token): the token stays with hank, the agent never writes to the tracker.

pub mod budget;
pub mod claims;

use crate::forge::{enc, text};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{HankError, Result};
use crate::forge::{Api, CliApi, Http, Reply};
use crate::policy::tracker::{COMMENT_MARKER, Issue, OpenPr, TrackerKind};

/// Attempts of one request that the forge rate-limits.
const RATE_ATTEMPTS: u32 = 3;

/// What is kept between polls (`watch-cache.json` in the project's per-user folder): the
/// last answer and `ETag` of each listing, hank's comment id per issue.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Cache {
    /// Request path → (ETag, body).
    pub listings: BTreeMap<String, (String, String)>,
    /// Issue number → hank's comment (note) id.
    pub comments: BTreeMap<u64, u64>,
}

/// One repository's tracker.
pub struct Tracker {
    pub kind: TrackerKind,
    api: Box<dyn Api>,
    /// `owner/repo` (`group/project`).
    pub repo: String,
    /// The rate budget's name (per token / login).
    budget_key: String,
    cache_path: PathBuf,
    cache: Cache,
}

/// How a tracker is reached: the user's CLI when it is logged in, else REST with a token.
///
/// # Errors
/// No usable login.
pub fn open(
    kind: TrackerKind,
    root: &Path,
    host: Option<&str>,
    repo: &str,
    env: &crate::forge::Env,
) -> Result<Tracker> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let (api, key): (Box<dyn Api>, String) = match kind {
        TrackerKind::GitHub => {
            if let Some(token) = env.gh_token.clone() {
                let base = crate::forge::api_url_for(host, env.api_url.as_deref());
                let http = Http::new(&base, token, root)?;
                let key = http.token_key();
                (Box::new(http), key)
            } else if let Ok(gh) = which::which("gh") {
                let hostname = host.filter(|h| *h != "github.com").map(str::to_string);
                let key = format!("gh-{}", hostname.as_deref().unwrap_or("github.com"));
                (
                    Box::new(CliApi {
                        program: gh,
                        hostname,
                        dir: root.to_path_buf(),
                    }),
                    key,
                )
            } else {
                return Err(HankError::usage_hint(
                    format!("no GitHub login for {repo}"),
                    "run `gh auth login`, or set GH_TOKEN",
                ));
            }
        }
        TrackerKind::GitLab => {
            if let Some(token) = var("GITLAB_TOKEN") {
                let base = var("GITLAB_API_URL")
                    .unwrap_or_else(|| format!("https://{}/api/v4", host.unwrap_or("gitlab.com")));
                let http = Http::new(&base, token, root)?;
                let key = http.token_key();
                (Box::new(http), key)
            } else if let Ok(glab) = which::which("glab") {
                let hostname = host.filter(|h| *h != "gitlab.com").map(str::to_string);
                let key = format!("glab-{}", hostname.as_deref().unwrap_or("gitlab.com"));
                (
                    Box::new(CliApi {
                        program: glab,
                        hostname,
                        dir: root.to_path_buf(),
                    }),
                    key,
                )
            } else {
                return Err(HankError::usage_hint(
                    format!("no GitLab login for {repo}"),
                    "install glab and run `glab auth login`, or set GITLAB_TOKEN",
                ));
            }
        }
    };
    let cache_path = crate::store::userdir::project_dir(root)?.join("watch-cache.json");
    let cache = std::fs::read(&cache_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    Ok(Tracker {
        kind,
        api,
        repo: repo.to_string(),
        budget_key: key,
        cache_path,
        cache,
    })
}

impl Tracker {
    /// `GitHub o/r (REST at …)`.
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "{} {} ({})",
            self.kind.as_str(),
            self.repo,
            self.api.describe()
        )
    }

    /// The shared rate budget's name.
    #[must_use]
    pub fn budget_key(&self) -> &str {
        &self.budget_key
    }

    fn save_cache(&self) -> Result<()> {
        let bytes = serde_json::to_vec(&self.cache)
            .map_err(|e| HankError::Internal(format!("cannot encode the watch cache: {e}")))?;
        crate::store::write_atomic(&self.cache_path, &bytes, false)
            .map_err(|e| HankError::io("write", &self.cache_path, e))
    }

    /// One request under the shared rate budget (a visible wait when it is spent).
    fn request(
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
            budget::after(&self.budget_key, r.status, &r.headers)?;
            attempt += 1;
            // A rate limit (429, or a 403 that says so): the budget now holds the time to
            // wait, which `before` waits for, visibly; then the request again.
            let limited = r.status == 429
                || r.status == 403
                    && (r.header("retry-after").is_some()
                        || r.header("x-ratelimit-remaining") == Some("0"));
            if !limited || attempt >= RATE_ATTEMPTS {
                return Ok(r);
            }
        }
    }

    /// A listing, conditional on its last `ETag`: a 304 gives the cached body back.
    fn listing(&mut self, what: &str, path: &str) -> Result<Value> {
        let cached = self.cache.listings.get(path).cloned();
        let headers: Vec<(String, String)> = cached
            .as_ref()
            .map(|(etag, _)| vec![("If-None-Match".to_string(), etag.clone())])
            .unwrap_or_default();
        let r = self.request("GET", path, None, &headers)?;
        if r.status == 304
            && let Some((_, body)) = cached
        {
            return Ok(serde_json::from_str(&body).unwrap_or(Value::Null));
        }
        if !r.ok() {
            return Err(HankError::Tool(format!(
                "{what} via {}: HTTP {} {}",
                self.api.describe(),
                r.status,
                r.message()
            )));
        }
        if let Some(etag) = r.header("etag") {
            self.cache
                .listings
                .insert(path.to_string(), (etag.to_string(), r.body.clone()));
            self.save_cache()?;
        }
        Ok(r.json())
    }

    fn project(&self) -> String {
        format!("projects/{}", enc(&self.repo))
    }

    /// The open issues carrying `label` (pull requests left out).
    ///
    /// # Errors
    /// The tracker cannot be asked.
    pub fn issues(&mut self, label: &str) -> Result<Vec<Issue>> {
        let (path, number, body, url) = match self.kind {
            TrackerKind::GitHub => (
                format!(
                    "repos/{}/issues?state=open&labels={}&per_page=100",
                    self.repo,
                    enc(label)
                ),
                "number",
                "body",
                "html_url",
            ),
            TrackerKind::GitLab => (
                format!(
                    "{}/issues?state=opened&labels={}&per_page=100",
                    self.project(),
                    enc(label)
                ),
                "iid",
                "description",
                "web_url",
            ),
        };
        let v = self.listing("listing the labelled issues", &path)?;
        let items = v.as_array().cloned().unwrap_or_default();
        Ok(items
            .iter()
            .filter(|i| i.get("pull_request").is_none())
            .filter_map(|i| {
                Some(Issue {
                    number: i.get(number)?.as_u64()?,
                    title: text(i, "title"),
                    body: text(i, body),
                    url: text(i, url),
                    labels: i
                        .get("labels")
                        .and_then(Value::as_array)
                        .map(|ls| {
                            ls.iter()
                                .filter_map(|l| {
                                    l.as_str()
                                        .or_else(|| l.get("name").and_then(Value::as_str))
                                        .map(str::to_string)
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
            .collect())
    }

    /// The open pull (merge) requests: head, body, link.
    ///
    /// # Errors
    /// The tracker cannot be asked.
    pub fn open_prs(&mut self) -> Result<Vec<OpenPr>> {
        let (path, head, body, url) = match self.kind {
            TrackerKind::GitHub => (
                format!("repos/{}/pulls?state=open&per_page=100", self.repo),
                "/head/ref",
                "body",
                "html_url",
            ),
            TrackerKind::GitLab => (
                format!(
                    "{}/merge_requests?state=opened&per_page=100",
                    self.project()
                ),
                "/source_branch",
                "description",
                "web_url",
            ),
        };
        let v = self.listing("listing the open pull requests", &path)?;
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .filter(|p| {
                        // The fake and GitLab may list closed ones when asked loosely.
                        p.get("state")
                            .and_then(Value::as_str)
                            .is_none_or(|s| s == "open" || s == "opened")
                    })
                    .map(|p| OpenPr {
                        head: p
                            .pointer(head)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        body: text(p, body),
                        url: text(p, url),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Writes hank's one comment on `issue`: the one written before is edited in place
    /// (found by its id, else by [`COMMENT_MARKER`] among the issue's comments).
    ///
    /// # Errors
    /// The tracker refused it.
    pub fn comment(&mut self, issue: u64, body: &str) -> Result<()> {
        let id = match self.cache.comments.get(&issue) {
            Some(id) => Some(*id),
            None => self.find_comment(issue)?,
        };
        let payload = json!({ "body": body });
        if let Some(id) = id {
            let (method, path) = match self.kind {
                TrackerKind::GitHub => {
                    ("PATCH", format!("repos/{}/issues/comments/{id}", self.repo))
                }
                TrackerKind::GitLab => (
                    "PUT",
                    format!("{}/issues/{issue}/notes/{id}", self.project()),
                ),
            };
            let r = self.request(method, &path, Some(&payload), &[])?;
            if r.ok() {
                return Ok(());
            }
            if r.status != 404 {
                return Err(self.refused(&format!("editing hank's comment on #{issue}"), &r));
            }
            // Deleted by someone: a new one.
        }
        let path = match self.kind {
            TrackerKind::GitHub => format!("repos/{}/issues/{issue}/comments", self.repo),
            TrackerKind::GitLab => format!("{}/issues/{issue}/notes", self.project()),
        };
        let r = self.request("POST", &path, Some(&payload), &[])?;
        if !r.ok() {
            return Err(self.refused(&format!("commenting on #{issue}"), &r));
        }
        if let Some(id) = r.json().get("id").and_then(Value::as_u64) {
            self.cache.comments.insert(issue, id);
            self.save_cache()?;
        }
        Ok(())
    }

    fn find_comment(&self, issue: u64) -> Result<Option<u64>> {
        let path = match self.kind {
            TrackerKind::GitHub => {
                format!("repos/{}/issues/{issue}/comments?per_page=100", self.repo)
            }
            TrackerKind::GitLab => format!("{}/issues/{issue}/notes?per_page=100", self.project()),
        };
        let r = self.request("GET", &path, None, &[])?;
        if !r.ok() {
            return Ok(None);
        }
        Ok(r.json().as_array().and_then(|a| {
            a.iter()
                .filter(|c| text(c, "body").starts_with(COMMENT_MARKER))
                .find_map(|c| c.get("id").and_then(Value::as_u64))
        }))
    }

    /// Adds `add` and removes `remove` from the issue's labels (a label that is not there is
    /// not an error).
    ///
    /// # Errors
    /// The tracker refused it.
    pub fn labels(&self, issue: u64, add: &[&str], remove: &[&str]) -> Result<()> {
        match self.kind {
            TrackerKind::GitHub => {
                for l in remove {
                    let path = format!("repos/{}/issues/{issue}/labels/{}", self.repo, enc(l));
                    let r = self.request("DELETE", &path, None, &[])?;
                    if !r.ok() && r.status != 404 {
                        return Err(self.refused(&format!("removing label {l} of #{issue}"), &r));
                    }
                }
                if !add.is_empty() {
                    let path = format!("repos/{}/issues/{issue}/labels", self.repo);
                    let r = self.request("POST", &path, Some(&json!({ "labels": add })), &[])?;
                    if !r.ok() {
                        return Err(self.refused(&format!("labelling #{issue}"), &r));
                    }
                }
            }
            TrackerKind::GitLab => {
                let path = format!("{}/issues/{issue}", self.project());
                let body =
                    json!({ "add_labels": add.join(","), "remove_labels": remove.join(",") });
                let r = self.request("PUT", &path, Some(&body), &[])?;
                if !r.ok() {
                    return Err(self.refused(&format!("labelling #{issue}"), &r));
                }
            }
        }
        Ok(())
    }

    fn refused(&self, what: &str, r: &Reply) -> HankError {
        HankError::Tool(format!(
            "{what} via {}: HTTP {} {}",
            self.api.describe(),
            r.status,
            r.message()
        ))
    }
}
