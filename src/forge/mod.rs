//! Forges: where a delivery branch becomes a pull request and where its checks run.
//!
//! | module | role |
//! |---|---|
//! | this file | the [`Forge`] operations, [`GitHub`] and [`GitLab`] over an [`Api`], [`detect`] |
//! | [`transport`] | `gh api` / `glab api` (the user's login) or REST with a token (`GITHUB_API_URL`) |
//! | [`exec`] | the one spawn of the forge layer (`gh`, `glab`) |
//!
//! Which forge: GitLab when the remote's host names GitLab (`glab`); else GitHub through `gh`
//! when it is installed and logged in (hank passes the user's `GH_*` and proxy environment
//! through), else REST with `GH_TOKEN` / `GITHUB_TOKEN` at `GITHUB_API_URL`, by default the
//! remote's own host (`https://api.github.com` for github.com, `https://HOST/api/v3` for an
//! Enterprise server): gh's own error is shown as a warning, and the token never goes to a host
//! other than the repository's (or the one the user named). The repository is `GH_REPO` (`[HOST/]OWNER/REPO`, as gh reads it)
//! when set, else the remote's URL. What gh 2.23.0 sends is in `docs/forges.md`.
//!
//! The operations ([`Forge`]): create or find a pull request (`NewPullRequest::draft` for work
//! the reviewer rejected: GitHub's `draft`, GitLab's `Draft: ` title), the checks of an exact
//! SHA, a check's log, reviews, review comments, an issue comment, auto-merge, access.
//! [`GitHub`] and [`GitLab`] share one `get`, `send`, `opened` and `items`. A request travels
//! through `gh api` / `glab api` (the user's login, the environment passed through; started
//! by [`exec`] through `proc::Cmd`: stdin bytes, bounded output, a timeout, stopped on a
//! signal) or as REST with a token through [`crate::http`], hank's one HTTP client.

pub mod exec;
#[cfg(test)]
pub(crate) mod scripted;
pub mod transport;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::{HankError, Result};
use crate::policy::deliver::{Check, CheckState, Review, ReviewComment, repo_of_url};

pub use transport::{Api, CliApi, Http, Reply};

/// The default GitHub API root.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// A pull request (GitHub) or merge request (GitLab).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub url: String,
    /// The head commit the forge knows.
    pub head_sha: Option<String>,
    /// GitHub's GraphQL node id (for auto-merge).
    pub node_id: Option<String>,
}

/// A pull request to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPullRequest {
    pub title: String,
    pub body: String,
    /// The branch it merges into.
    pub base: String,
    /// The delivery branch.
    pub head: String,
    /// Opened as a draft (a GitHub draft pull request; a GitLab merge request titled
    /// `Draft: …`): work the reviewer did not approve (`review_rejected`).
    pub draft: bool,
}

/// What the forge says about the login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The account.
    pub login: String,
    /// It may push to the repository (`None`: the forge did not say).
    pub can_push: Option<bool>,
}

/// The operations delivery needs.
pub trait Forge {
    /// `GitHub (gh)`, `GitHub (REST at …)`, `GitLab (glab)`.
    fn describe(&self) -> String;
    /// `owner/repo`.
    fn repo(&self) -> &str;
    /// Who is logged in and whether they may push.
    ///
    /// # Errors
    /// Not logged in, or the forge cannot be reached.
    fn access(&self) -> Result<Access>;
    /// Opens a pull request; an open one of the same head is returned instead.
    ///
    /// # Errors
    /// The forge refused it (the message names why).
    fn create_pr(&self, pr: &NewPullRequest) -> Result<PullRequest>;
    /// The open pull request of `head`, if any.
    ///
    /// # Errors
    /// The forge cannot be asked.
    fn find_pr(&self, head: &str) -> Result<Option<PullRequest>>;
    /// The checks (check runs and commit statuses) of exactly this commit.
    ///
    /// # Errors
    /// The forge cannot be asked.
    fn checks(&self, sha: &str) -> Result<Vec<Check>>;
    /// The end of a failed check's log, when the forge has one.
    ///
    /// # Errors
    /// The forge cannot be asked.
    fn check_log(&self, check: &Check) -> Result<Option<String>>;
    /// The reviews of a pull request.
    ///
    /// # Errors
    /// The forge cannot be asked.
    fn reviews(&self, pr: &PullRequest) -> Result<Vec<Review>>;
    /// The review comments (on lines of the diff) of a pull request.
    ///
    /// # Errors
    /// The forge cannot be asked.
    fn review_comments(&self, pr: &PullRequest) -> Result<Vec<ReviewComment>>;
    /// Writes hank's one comment on an issue (the PR link on an issue it closes): the comment
    /// of hank's already there (`hank watch`'s, an earlier delivery's, found by
    /// [`crate::policy::tracker::is_hank_comment`]) is edited in place, else one is posted.
    ///
    /// # Errors
    /// The forge refused it.
    fn comment_issue(&self, issue: u64, body: &str) -> Result<()>;
    /// Arms the forge's auto-merge (call only on green checks of the head).
    ///
    /// # Errors
    /// The forge refused it (auto-merge not allowed in the repository, …).
    fn arm_auto_merge(&self, pr: &PullRequest) -> Result<()>;
    /// Replaces the body (description) of pull request `number` (a change set's links).
    ///
    /// # Errors
    /// The forge refused it.
    fn edit_pr_body(&self, number: u64, body: &str) -> Result<()>;
    /// How other pull requests name pull request `number` (`owner/repo#12`, GitLab's
    /// `group/project!12`).
    fn reference(&self, number: u64) -> String {
        format!("{}#{number}", self.repo())
    }
}

fn refused(what: &str, via: &str, r: &Reply) -> HankError {
    HankError::Tool(format!(
        "{what} via {via}: HTTP {} {}",
        r.status,
        r.message()
    ))
}

/// A string field of a JSON object (empty when absent).
pub(crate) fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A string field, when there is one.
fn opt_text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The items of a JSON array that `item` reads (none when `v` is not an array).
fn items<T>(v: &Value, item: impl FnMut(&Value) -> Option<T>) -> Vec<T> {
    v.as_array()
        .map(|a| a.iter().filter_map(item).collect())
        .unwrap_or_default()
}

/// The id of hank's comment among an issue's comments (notes), if there is one.
fn hank_comment(listed: &Value) -> Option<u64> {
    listed.as_array()?.iter().find_map(|c| {
        crate::policy::tracker::is_hank_comment(&text(c, "body"))
            .then(|| c.get("id").and_then(Value::as_u64))
            .flatten()
    })
}

/// `GET path` as JSON; an HTTP error is an error saying `what` was refused.
fn get(api: &impl Api, what: &str, path: &str) -> Result<Value> {
    let r = api.call("GET", path, None)?;
    if r.ok() {
        Ok(r.json())
    } else {
        Err(refused(what, &api.describe(), &r))
    }
}

/// A request whose answer only has to be a success; an HTTP error says `what` was refused.
fn send(api: &impl Api, what: &str, method: &str, path: &str, body: &Value) -> Result<()> {
    let r = api.call(method, path, Some(body))?;
    if r.ok() {
        Ok(())
    } else {
        Err(refused(what, &api.describe(), &r))
    }
}

/// The answer to opening a pull (merge) request: the new one (`read` from the reply), or the
/// open one of the same head when the forge answered `conflict` (it exists already).
fn opened<F: Forge + ?Sized>(
    forge: &F,
    r: &Reply,
    read: fn(&Value) -> Option<PullRequest>,
    conflict: u16,
    head: &str,
    missing: &str,
) -> Result<Option<PullRequest>> {
    if r.ok() {
        return read(&r.json())
            .map(Some)
            .ok_or_else(|| HankError::Tool(format!("{}: {missing}", forge.describe())));
    }
    if r.status == conflict {
        return forge.find_pr(head);
    }
    Ok(None)
}

fn login(v: &Value) -> String {
    v.pointer("/user/login")
        .or_else(|| v.pointer("/author/username"))
        .and_then(Value::as_str)
        .unwrap_or("someone")
        .to_string()
}

/// Path segments are percent-encoded where they carry user text (branch names).
pub(crate) fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// GitHub

/// GitHub's REST (and, for auto-merge, GraphQL) API through an [`Api`].
pub struct GitHub<A: Api> {
    pub api: A,
    /// `owner/repo`.
    pub repo: String,
}

impl<A: Api> GitHub<A> {
    fn pr_of(v: &Value) -> Option<PullRequest> {
        Some(PullRequest {
            number: v.get("number")?.as_u64()?,
            url: text(v, "html_url"),
            head_sha: v
                .pointer("/head/sha")
                .and_then(Value::as_str)
                .map(str::to_string),
            node_id: opt_text(v, "node_id"),
        })
    }
}

impl<A: Api> Forge for GitHub<A> {
    fn describe(&self) -> String {
        format!("GitHub ({})", self.api.describe())
    }

    fn repo(&self) -> &str {
        &self.repo
    }

    fn access(&self) -> Result<Access> {
        let user = get(&self.api, "reading the login (GET /user)", "user")?;
        let repo = get(
            &self.api,
            &format!("reading repository {}", self.repo),
            &format!("repos/{}", self.repo),
        )?;
        Ok(Access {
            login: text(&user, "login"),
            can_push: repo.pointer("/permissions/push").and_then(Value::as_bool),
        })
    }

    fn create_pr(&self, pr: &NewPullRequest) -> Result<PullRequest> {
        let mut body =
            json!({"title": pr.title, "body": pr.body, "base": pr.base, "head": pr.head});
        if pr.draft {
            body["draft"] = json!(true);
        }
        let r = self
            .api
            .call("POST", &format!("repos/{}/pulls", self.repo), Some(&body))?;
        let missing = "the new pull request has no number";
        if let Some(done) = opened(self, &r, Self::pr_of, 422, &pr.head, missing)? {
            return Ok(done);
        }
        Err(refused(
            &format!("opening a pull request {} → {}", pr.head, pr.base),
            &self.api.describe(),
            &r,
        ))
    }

    fn find_pr(&self, head: &str) -> Result<Option<PullRequest>> {
        let owner = self.repo.split('/').next().unwrap_or_default();
        let v = get(
            &self.api,
            "finding the branch's pull request",
            &format!(
                "repos/{}/pulls?state=open&head={}",
                self.repo,
                enc(&format!("{owner}:{head}"))
            ),
        )?;
        Ok(v.as_array().and_then(|a| a.iter().find_map(Self::pr_of)))
    }

    fn checks(&self, sha: &str) -> Result<Vec<Check>> {
        let runs = get(
            &self.api,
            "reading the check runs",
            &format!(
                "repos/{}/commits/{}/check-runs?per_page=100",
                self.repo,
                enc(sha)
            ),
        )?;
        let mut out = items(runs.get("check_runs").unwrap_or(&Value::Null), |c| {
            Some(Check {
                name: text(c, "name"),
                state: CheckState::of_check_run(
                    &text(c, "status"),
                    c.get("conclusion").and_then(Value::as_str),
                ),
                url: opt_text(c, "html_url"),
                id: c.get("id").and_then(Value::as_u64),
            })
        });
        let statuses = get(
            &self.api,
            "reading the commit statuses",
            &format!("repos/{}/commits/{}/status", self.repo, enc(sha)),
        )?;
        out.extend(items(
            statuses.get("statuses").unwrap_or(&Value::Null),
            |s| {
                Some(Check {
                    name: text(s, "context"),
                    state: CheckState::of_status(&text(s, "state")),
                    url: opt_text(s, "target_url"),
                    id: None,
                })
            },
        ));
        Ok(out)
    }

    fn check_log(&self, check: &Check) -> Result<Option<String>> {
        let Some(id) = check.id else { return Ok(None) };
        let v = get(
            &self.api,
            "reading a check run",
            &format!("repos/{}/check-runs/{id}", self.repo),
        )?;
        let parts: Vec<String> = ["title", "summary", "text"]
            .iter()
            .filter_map(|k| v.pointer(&format!("/output/{k}")).and_then(Value::as_str))
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string)
            .collect();
        Ok((!parts.is_empty()).then(|| parts.join("\n")))
    }

    fn reviews(&self, pr: &PullRequest) -> Result<Vec<Review>> {
        let v = get(
            &self.api,
            "reading the reviews",
            &format!(
                "repos/{}/pulls/{}/reviews?per_page=100",
                self.repo, pr.number
            ),
        )?;
        Ok(items(&v, |r| {
            Some(Review {
                id: r.get("id")?.as_u64()?,
                author: login(r),
                state: text(r, "state"),
                body: text(r, "body"),
            })
        }))
    }

    fn review_comments(&self, pr: &PullRequest) -> Result<Vec<ReviewComment>> {
        let v = get(
            &self.api,
            "reading the review comments",
            &format!(
                "repos/{}/pulls/{}/comments?per_page=100",
                self.repo, pr.number
            ),
        )?;
        Ok(items(&v, |c| {
            Some(ReviewComment {
                id: c.get("id")?.as_u64()?,
                author: login(c),
                path: text(c, "path"),
                line: c.get("line").and_then(Value::as_u64),
                body: text(c, "body"),
            })
        }))
    }

    fn comment_issue(&self, issue: u64, body: &str) -> Result<()> {
        let listed = get(
            &self.api,
            &format!("reading the comments of issue #{issue}"),
            &format!("repos/{}/issues/{issue}/comments?per_page=100", self.repo),
        )?;
        let (method, path) = match hank_comment(&listed) {
            Some(id) => ("PATCH", format!("repos/{}/issues/comments/{id}", self.repo)),
            None => (
                "POST",
                format!("repos/{}/issues/{issue}/comments", self.repo),
            ),
        };
        send(
            &self.api,
            &format!("commenting on issue #{issue}"),
            method,
            &path,
            &json!({"body": body}),
        )
    }

    fn edit_pr_body(&self, number: u64, body: &str) -> Result<()> {
        send(
            &self.api,
            &format!("editing pull request #{number}"),
            "PATCH",
            &format!("repos/{}/pulls/{number}", self.repo),
            &json!({"body": body}),
        )
    }

    fn arm_auto_merge(&self, pr: &PullRequest) -> Result<()> {
        let Some(id) = &pr.node_id else {
            return Err(HankError::Tool(format!(
                "{}: pull request #{} has no node id to arm auto-merge with",
                self.describe(),
                pr.number
            )));
        };
        let q = json!({
            "query": "mutation($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id}) { pullRequest { number } } }",
            "variables": {"id": id},
        });
        let r = self.api.call("POST", "graphql", Some(&q))?;
        let errors = r.json().get("errors").cloned();
        match errors {
            None if r.ok() => Ok(()),
            _ => Err(HankError::Tool(format!(
                "arming auto-merge of #{} via {}: HTTP {} {}",
                pr.number,
                self.api.describe(),
                r.status,
                errors.map_or_else(|| r.message(), |e| crate::sanitize::line(&e.to_string()))
            ))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GitLab

/// GitLab's REST API (v4) through `glab api`. Merge requests for pull requests, pipeline
/// jobs' commit statuses for checks, MR notes for review comments (GitLab has no "changes
/// requested" review state: an unresolved note is the request).
pub struct GitLab<A: Api> {
    pub api: A,
    /// `group/project`.
    pub repo: String,
}

impl<A: Api> GitLab<A> {
    fn project(&self) -> String {
        format!("projects/{}", enc(&self.repo))
    }

    fn mr_of(v: &Value) -> Option<PullRequest> {
        Some(PullRequest {
            number: v.get("iid")?.as_u64()?,
            url: text(v, "web_url"),
            head_sha: opt_text(v, "sha"),
            node_id: None,
        })
    }
}

impl<A: Api> Forge for GitLab<A> {
    fn describe(&self) -> String {
        format!("GitLab ({})", self.api.describe())
    }

    fn repo(&self) -> &str {
        &self.repo
    }

    fn access(&self) -> Result<Access> {
        let user = get(&self.api, "reading the login (GET /user)", "user")?;
        let p = get(
            &self.api,
            &format!("reading project {}", self.repo),
            &self.project(),
        )?;
        let level = ["project_access", "group_access"]
            .iter()
            .filter_map(|k| {
                p.pointer(&format!("/permissions/{k}/access_level"))
                    .and_then(Value::as_u64)
            })
            .max();
        Ok(Access {
            login: text(&user, "username"),
            // 30 = Developer: may push to unprotected branches.
            can_push: level.map(|l| l >= 30),
        })
    }

    fn create_pr(&self, pr: &NewPullRequest) -> Result<PullRequest> {
        let title = if pr.draft {
            format!("Draft: {}", pr.title)
        } else {
            pr.title.clone()
        };
        let body = json!({"source_branch": pr.head, "target_branch": pr.base, "title": title, "description": pr.body});
        let r = self.api.call(
            "POST",
            &format!("{}/merge_requests", self.project()),
            Some(&body),
        )?;
        let missing = "the new merge request has no iid";
        if let Some(done) = opened(self, &r, Self::mr_of, 409, &pr.head, missing)? {
            return Ok(done);
        }
        Err(refused("opening a merge request", &self.api.describe(), &r))
    }

    fn find_pr(&self, head: &str) -> Result<Option<PullRequest>> {
        let v = get(
            &self.api,
            "finding the branch's merge request",
            &format!(
                "{}/merge_requests?state=opened&source_branch={}",
                self.project(),
                enc(head)
            ),
        )?;
        Ok(v.as_array().and_then(|a| a.iter().find_map(Self::mr_of)))
    }

    fn checks(&self, sha: &str) -> Result<Vec<Check>> {
        let v = get(
            &self.api,
            "reading the commit statuses",
            &format!(
                "{}/repository/commits/{}/statuses?per_page=100",
                self.project(),
                enc(sha)
            ),
        )?;
        Ok(items(&v, |s| {
            Some(Check {
                name: text(s, "name"),
                state: match text(s, "status").as_str() {
                    "success" | "skipped" => CheckState::Passed,
                    "created"
                    | "waiting_for_resource"
                    | "preparing"
                    | "pending"
                    | "running"
                    | "scheduled"
                    | "manual" => CheckState::Pending,
                    _ => CheckState::Failed,
                },
                url: opt_text(s, "target_url"),
                id: s.get("id").and_then(Value::as_u64),
            })
        }))
    }

    fn check_log(&self, check: &Check) -> Result<Option<String>> {
        let Some(id) = check.id else { return Ok(None) };
        let r = self
            .api
            .call("GET", &format!("{}/jobs/{id}/trace", self.project()), None)?;
        Ok(r.ok().then_some(r.body))
    }

    fn reviews(&self, _pr: &PullRequest) -> Result<Vec<Review>> {
        Ok(Vec::new())
    }

    fn review_comments(&self, pr: &PullRequest) -> Result<Vec<ReviewComment>> {
        let v = get(
            &self.api,
            "reading the merge request's notes",
            &format!(
                "{}/merge_requests/{}/notes?per_page=100",
                self.project(),
                pr.number
            ),
        )?;
        Ok(items(&v, |n| {
            if n.get("system").and_then(Value::as_bool).unwrap_or(false) {
                return None;
            }
            Some(ReviewComment {
                id: n.get("id")?.as_u64()?,
                author: login(n),
                path: n
                    .pointer("/position/new_path")
                    .and_then(Value::as_str)
                    .unwrap_or("the merge request")
                    .to_string(),
                line: n.pointer("/position/new_line").and_then(Value::as_u64),
                body: text(n, "body"),
            })
        }))
    }

    fn comment_issue(&self, issue: u64, body: &str) -> Result<()> {
        let notes = format!("{}/issues/{issue}/notes", self.project());
        let listed = get(
            &self.api,
            &format!("reading the notes of issue #{issue}"),
            &format!("{notes}?per_page=100"),
        )?;
        let (method, path) = match hank_comment(&listed) {
            Some(id) => ("PUT", format!("{notes}/{id}")),
            None => ("POST", notes),
        };
        send(
            &self.api,
            &format!("commenting on issue #{issue}"),
            method,
            &path,
            &json!({"body": body}),
        )
    }

    fn edit_pr_body(&self, number: u64, body: &str) -> Result<()> {
        send(
            &self.api,
            &format!("editing merge request !{number}"),
            "PUT",
            &format!("{}/merge_requests/{number}", self.project()),
            &json!({"description": body}),
        )
    }

    fn reference(&self, number: u64) -> String {
        format!("{}!{number}", self.repo)
    }

    fn arm_auto_merge(&self, pr: &PullRequest) -> Result<()> {
        send(
            &self.api,
            &format!("arming auto-merge of !{}", pr.number),
            "PUT",
            &format!("{}/merge_requests/{}/merge", self.project(), pr.number),
            &json!({"merge_when_pipeline_succeeds": true}),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Choosing the forge

/// What [`detect`] reads from the environment (passed in so tests choose it).
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub gh_repo: Option<String>,
    pub gh_token: Option<String>,
    pub api_url: Option<String>,
    pub gitlab_host: Option<String>,
}

impl Env {
    /// The real environment.
    #[must_use]
    pub fn from_process() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Self {
            gh_repo: var("GH_REPO"),
            gh_token: var("GH_TOKEN").or_else(|| var("GITHUB_TOKEN")),
            api_url: var("GITHUB_API_URL"),
            gitlab_host: var("GITLAB_HOST"),
        }
    }
}

/// The host and `owner/repo`: `GH_REPO` (`[HOST/]OWNER/REPO`) when set, else the remote URL.
///
/// # Errors
/// Neither names a repository.
pub fn repo_of(env: &Env, remote_url: &str) -> Result<(Option<String>, String)> {
    if let Some(r) = &env.gh_repo {
        let parts: Vec<&str> = r.trim().split('/').collect();
        return match parts.as_slice() {
            [o, n] if !o.is_empty() && !n.is_empty() => Ok((None, format!("{o}/{n}"))),
            [h, o, n] if !h.is_empty() && !o.is_empty() && !n.is_empty() => {
                Ok((Some((*h).to_string()), format!("{o}/{n}")))
            }
            _ => Err(HankError::usage(format!(
                "GH_REPO=`{r}`: expected OWNER/REPO or HOST/OWNER/REPO"
            ))),
        };
    }
    repo_of_url(remote_url)
        .map(|(h, r)| (Some(h), r))
        .ok_or_else(|| {
            HankError::usage_hint(
                format!(
                    "the remote's URL `{}` names no forge repository",
                    crate::sanitize::line(remote_url)
                ),
                "push to a GitHub or GitLab remote, or set GH_REPO=OWNER/REPO",
            )
        })
}

/// The forge of this project's remote. `gh_ok` tells whether gh answered `GET /user`.
///
/// # Errors
/// No usable login: the message says how to get one.
pub fn detect(dir: &Path, remote_url: &str, env: &Env) -> Result<Box<dyn Forge>> {
    let (host, repo) = repo_of(env, remote_url)?;
    let is_gitlab = host.as_deref().is_some_and(|h| h.contains("gitlab"))
        || env
            .gitlab_host
            .as_deref()
            .is_some_and(|g| host.as_deref() == Some(g.trim_start_matches("https://")));
    if is_gitlab {
        let glab = which::which("glab").map_err(|_| {
            HankError::usage_hint(
                format!("{repo} is on GitLab and `glab` is not installed"),
                "install glab (https://gitlab.com/gitlab-org/cli) and run `glab auth login`",
            )
        })?;
        return Ok(Box::new(GitLab {
            api: CliApi {
                program: glab,
                hostname: host.filter(|h| h != "gitlab.com"),
                dir: dir.to_path_buf(),
            },
            repo,
        }));
    }
    let hostname = host.clone().filter(|h| h != "github.com");
    let mut gh_problem = None;
    if let Ok(gh) = which::which("gh") {
        let api = CliApi {
            program: gh,
            hostname: hostname.clone(),
            dir: dir.to_path_buf(),
        };
        match api.call("GET", "user", None) {
            Ok(r) if r.ok() => return Ok(Box::new(GitHub { api, repo })),
            Ok(r) if r.status == 401 => {
                gh_problem = Some(format!("gh is not logged in (HTTP 401 {})", r.message()));
            }
            Ok(r) => gh_problem = Some(format!("gh: HTTP {} {}", r.status, r.message())),
            Err(e) => gh_problem = Some(e.to_string()),
        }
    }
    if let Some(token) = env.gh_token.clone() {
        let base = api_url_for(host.as_deref(), env.api_url.as_deref());
        // gh's own error is shown; the token goes to the repository's own host only.
        if let Some(problem) = &gh_problem {
            eprintln!(
                "hank: warning: {}; using GH_TOKEN at {base}",
                crate::sanitize::line(problem)
            );
        }
        return Ok(Box::new(GitHub {
            api: Http::new(&base, token)?,
            repo,
        }));
    }
    Err(HankError::usage_hint(
        format!(
            "no GitHub login for {repo}: {}",
            gh_problem.unwrap_or_else(|| {
                "gh is not installed and GH_TOKEN / GITHUB_TOKEN is not set".to_string()
            })
        ),
        "run `gh auth login` (or install gh first), or set GH_TOKEN to a token that may push and open pull requests",
    ))
}

/// The REST root for the repository's host: `GITHUB_API_URL` when the user set it, else
/// `https://api.github.com` for github.com (or no host named), else the Enterprise server's
/// own `https://HOST/api/v3`. A token is only ever sent to the remote's own host.
#[must_use]
pub fn api_url_for(host: Option<&str>, user_set: Option<&str>) -> String {
    if let Some(url) = user_set {
        return url.to_string();
    }
    match host {
        None | Some("github.com") => DEFAULT_API_URL.to_string(),
        Some(h) => format!("https://{h}/api/v3"),
    }
}

/// Where a program is, for doctor's messages.
#[must_use]
pub fn installed(name: &str) -> Option<PathBuf> {
    which::which(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_goes_only_to_the_remotes_host() {
        assert_eq!(api_url_for(None, None), DEFAULT_API_URL);
        assert_eq!(api_url_for(Some("github.com"), None), DEFAULT_API_URL);
        assert_eq!(
            api_url_for(Some("ghe.example.com"), None),
            "https://ghe.example.com/api/v3"
        );
        assert_eq!(
            api_url_for(Some("ghe.example.com"), Some("http://127.0.0.1:9/api")),
            "http://127.0.0.1:9/api"
        );
    }

    #[test]
    fn repos_from_gh_repo_or_the_remote() {
        let env = Env {
            gh_repo: Some("o/r".into()),
            ..Env::default()
        };
        assert_eq!(repo_of(&env, "/tmp/x.git").unwrap(), (None, "o/r".into()));
        let env = Env {
            gh_repo: Some("ghe.example.com/o/r".into()),
            ..Env::default()
        };
        assert_eq!(
            repo_of(&env, "").unwrap(),
            (Some("ghe.example.com".into()), "o/r".into())
        );
        assert!(
            repo_of(
                &Env {
                    gh_repo: Some("bad".into()),
                    ..Env::default()
                },
                ""
            )
            .is_err()
        );
        assert_eq!(
            repo_of(&Env::default(), "git@github.com:o/r.git").unwrap(),
            (Some("github.com".into()), "o/r".into())
        );
        let e = repo_of(&Env::default(), "/tmp/remote.git")
            .unwrap_err()
            .to_string();
        assert!(e.contains("names no forge repository"), "{e}");
        assert_eq!(enc("o:hank/main"), "o%3Ahank%2Fmain");
    }
}
