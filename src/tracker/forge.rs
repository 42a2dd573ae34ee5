//! GitHub and GitLab as trackers: the code's forge, reached through `GH_TOKEN` REST or `gh`,
//! `GITLAB_TOKEN` REST or `glab` (all over [`crate::forge::Api`]). The labelled issues and the
//! open pull requests are conditional requests (`If-None-Match`, the `ETag` and body kept in
//! the per-user `watch-cache.json`: an unchanged listing is a 304, not counted against the
//! rate budget); hank's comment (`<!-- hank:watch -->`) is edited in place (id cached, else
//! found among the comments); the marks are labels.

use serde_json::{Value, json};

use super::{CacheFile, Client, Mark, Tracker, rate_as_is};
use crate::error::{HankError, Result};
use crate::forge::{CliApi, Http, Reply, enc, text};
use crate::policy::tracker::{Issue, ItemKey, OpenPr, TrackerKind, is_hank_comment};

/// One repository's issues on its forge.
pub struct ForgeTracker {
    client: Client,
    /// `owner/repo` (`group/project`).
    pub repo: String,
    cache: CacheFile,
}

fn number(kind: TrackerKind, key: &ItemKey) -> Result<u64> {
    key.as_number().ok_or_else(|| {
        HankError::Internal(format!("{}: {key} is not an issue number", kind.title()))
    })
}

impl ForgeTracker {
    /// How the forge is reached: the user's CLI when it is logged in, else REST with a token.
    ///
    /// # Errors
    /// No usable login.
    pub fn open(
        kind: TrackerKind,
        root: &std::path::Path,
        host: Option<&str>,
        repo: &str,
        env: &crate::forge::Env,
    ) -> Result<Self> {
        let var = super::var;
        let (api, key, credentials): (Box<dyn crate::forge::Api>, String, &'static str) =
            if kind == TrackerKind::GitHub {
                if let Some(token) = env.gh_token.clone() {
                    let base = crate::forge::api_url_for(host, env.api_url.as_deref());
                    let http = Http::new(&base, token)?;
                    let key = http.token_key();
                    (Box::new(http), key, "GH_TOKEN / GITHUB_TOKEN")
                } else if let Ok(gh) = which::which("gh") {
                    let hostname = host.filter(|h| *h != "github.com").map(str::to_string);
                    let key = format!("gh-{}", hostname.as_deref().unwrap_or("github.com"));
                    let cli = CliApi {
                        program: gh,
                        hostname,
                        dir: root.to_path_buf(),
                    };
                    (Box::new(cli), key, "gh's login (`gh auth status`)")
                } else {
                    return Err(HankError::usage_hint(
                        format!("no GitHub login for {repo}"),
                        "run `gh auth login`, or set GH_TOKEN",
                    ));
                }
            } else if let Some(token) = var("GITLAB_TOKEN") {
                let base = var("GITLAB_API_URL")
                    .unwrap_or_else(|| format!("https://{}/api/v4", host.unwrap_or("gitlab.com")));
                let http = Http::new(&base, token)?;
                let key = http.token_key();
                (Box::new(http), key, "GITLAB_TOKEN")
            } else if let Ok(glab) = which::which("glab") {
                let hostname = host.filter(|h| *h != "gitlab.com").map(str::to_string);
                let key = format!("glab-{}", hostname.as_deref().unwrap_or("gitlab.com"));
                let cli = CliApi {
                    program: glab,
                    hostname,
                    dir: root.to_path_buf(),
                };
                (Box::new(cli), key, "glab's login (`glab auth status`)")
            } else {
                return Err(HankError::usage_hint(
                    format!("no GitLab login for {repo}"),
                    "install glab and run `glab auth login`, or set GITLAB_TOKEN",
                ));
            };
        Ok(Self {
            client: Client::new(kind, api, key, rate_as_is, credentials),
            repo: repo.to_string(),
            cache: CacheFile::open(root)?,
        })
    }

    fn kind_(&self) -> TrackerKind {
        self.client.kind
    }

    /// A listing, conditional on its last `ETag`: a 304 gives the cached body back.
    fn listing(&mut self, what: &str, path: &str) -> Result<Value> {
        let cached = self.cache.cache.listings.get(path).cloned();
        let headers: Vec<(String, String)> = cached
            .as_ref()
            .map(|(etag, _)| vec![("If-None-Match".to_string(), etag.clone())])
            .unwrap_or_default();
        let r = self.client.request("GET", path, None, &headers)?;
        if r.status == 304
            && let Some((_, body)) = cached
        {
            return Ok(serde_json::from_str(&body).unwrap_or(Value::Null));
        }
        let v = self.client.json(what, &r)?;
        if let Some(etag) = r.header("etag") {
            self.cache
                .cache
                .listings
                .insert(path.to_string(), (etag.to_string(), r.body.clone()));
            self.cache.save()?;
        }
        Ok(v)
    }

    fn project(&self) -> String {
        format!("projects/{}", enc(&self.repo))
    }

    fn issue_of(&self, i: &Value) -> Option<Issue> {
        let (number, body, url) = match self.kind_() {
            TrackerKind::GitLab => ("iid", "description", "web_url"),
            _ => ("number", "body", "html_url"),
        };
        Some(Issue {
            key: ItemKey::number(i.get(number)?.as_u64()?),
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
    }

    fn find_comment(&self, issue: u64) -> Result<Option<u64>> {
        let path = match self.kind_() {
            TrackerKind::GitLab => format!("{}/issues/{issue}/notes?per_page=100", self.project()),
            _ => format!("repos/{}/issues/{issue}/comments?per_page=100", self.repo),
        };
        let r = self.client.request("GET", &path, None, &[])?;
        if !r.ok() {
            return Ok(None);
        }
        Ok(r.json().as_array().and_then(|a| {
            a.iter()
                .filter(|c| is_hank_comment(&text(c, "body")))
                .find_map(|c| c.get("id").and_then(Value::as_u64))
        }))
    }

    fn refused(&self, what: &str, r: &Reply) -> HankError {
        self.client.refused(what, r)
    }
}

impl Tracker for ForgeTracker {
    fn kind(&self) -> TrackerKind {
        self.kind_()
    }

    fn describe(&self) -> String {
        format!(
            "{} {} ({})",
            self.kind_().as_str(),
            self.repo,
            self.client.describe()
        )
    }

    /// The open issues carrying `label` (pull requests left out).
    fn items(&mut self, label: &str) -> Result<Vec<Issue>> {
        let path = match self.kind_() {
            TrackerKind::GitLab => format!(
                "{}/issues?state=opened&labels={}&per_page=100",
                self.project(),
                enc(label)
            ),
            _ => format!(
                "repos/{}/issues?state=open&labels={}&per_page=100",
                self.repo,
                enc(label)
            ),
        };
        let v = self.listing("listing the labelled issues", &path)?;
        let items = v.as_array().cloned().unwrap_or_default();
        Ok(items
            .iter()
            .filter(|i| i.get("pull_request").is_none())
            .filter_map(|i| self.issue_of(i))
            .collect())
    }

    fn item(&mut self, key: &ItemKey) -> Result<Option<Issue>> {
        let n = number(self.kind_(), key)?;
        let path = match self.kind_() {
            TrackerKind::GitLab => format!("{}/issues/{n}", self.project()),
            _ => format!("repos/{}/issues/{n}", self.repo),
        };
        let r = self.client.request("GET", &path, None, &[])?;
        if matches!(r.status, 404 | 410) {
            return Ok(None);
        }
        let v = self.client.json(&format!("reading issue #{n}"), &r)?;
        let open = matches!(
            v.get("state").and_then(Value::as_str),
            None | Some("open" | "opened")
        );
        Ok(self.issue_of(&v).filter(|_| open))
    }

    /// The open pull (merge) requests: head, body, link.
    fn open_prs(&mut self) -> Result<Vec<OpenPr>> {
        let (path, head, body, url) = match self.kind_() {
            TrackerKind::GitLab => (
                format!(
                    "{}/merge_requests?state=opened&per_page=100",
                    self.project()
                ),
                "/source_branch",
                "description",
                "web_url",
            ),
            _ => (
                format!("repos/{}/pulls?state=open&per_page=100", self.repo),
                "/head/ref",
                "body",
                "html_url",
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

    /// The one written before is edited in place (found by its id, else among the issue's
    /// comments).
    fn comment(&mut self, key: &ItemKey, body: &str) -> Result<()> {
        let issue = number(self.kind_(), key)?;
        let id = match self.cache.cache.comments.get(&issue) {
            Some(id) => Some(*id),
            None => self.find_comment(issue)?,
        };
        let payload = json!({ "body": body });
        if let Some(id) = id {
            let (method, path) = match self.kind_() {
                TrackerKind::GitLab => (
                    "PUT",
                    format!("{}/issues/{issue}/notes/{id}", self.project()),
                ),
                _ => ("PATCH", format!("repos/{}/issues/comments/{id}", self.repo)),
            };
            let r = self.client.request(method, &path, Some(&payload), &[])?;
            if r.ok() {
                return Ok(());
            }
            if r.status != 404 {
                return Err(self.refused(&format!("editing hank's comment on #{issue}"), &r));
            }
            // Deleted by someone: a new one.
        }
        let path = match self.kind_() {
            TrackerKind::GitLab => format!("{}/issues/{issue}/notes", self.project()),
            _ => format!("repos/{}/issues/{issue}/comments", self.repo),
        };
        let r = self.client.request("POST", &path, Some(&payload), &[])?;
        if !r.ok() {
            return Err(self.refused(&format!("commenting on #{issue}"), &r));
        }
        if let Some(id) = r.json().get("id").and_then(Value::as_u64) {
            self.cache.cache.comments.insert(issue, id);
            self.cache.save()?;
        }
        Ok(())
    }

    /// Adds and removes the mark's labels (a label that is not there is not an error).
    fn mark(&mut self, key: &ItemKey, mark: Mark) -> Result<()> {
        let issue = number(self.kind_(), key)?;
        let (add, remove) = mark.labels();
        if self.kind_() == TrackerKind::GitLab {
            let path = format!("{}/issues/{issue}", self.project());
            let body = json!({ "add_labels": add.join(","), "remove_labels": remove.join(",") });
            let r = self.client.request("PUT", &path, Some(&body), &[])?;
            if !r.ok() {
                return Err(self.refused(&format!("labelling #{issue}"), &r));
            }
            return Ok(());
        }
        for l in remove {
            let path = format!("repos/{}/issues/{issue}/labels/{}", self.repo, enc(l));
            let r = self.client.request("DELETE", &path, None, &[])?;
            if !r.ok() && r.status != 404 {
                return Err(self.refused(&format!("removing label {l} of #{issue}"), &r));
            }
        }
        if !add.is_empty() {
            let path = format!("repos/{}/issues/{issue}/labels", self.repo);
            let r = self
                .client
                .request("POST", &path, Some(&json!({ "labels": add })), &[])?;
            if !r.ok() {
                return Err(self.refused(&format!("labelling #{issue}"), &r));
            }
        }
        Ok(())
    }
}
