//! A scripted [`Forge`] for tests of delivery (no network): the checks of each look come from a
//! script, every look and pull request is counted.

use std::sync::{Arc, Mutex};

use super::{Access, Forge, NewPullRequest, PullRequest};
use crate::error::Result;
use crate::policy::deliver::{Check, CheckState, Review, ReviewComment};

/// The checks the forge shows at look `n` (1-based).
pub(crate) type Script = Box<dyn Fn(usize) -> Vec<Check>>;

/// One check named `ci` in `state`.
pub(crate) fn ci(state: CheckState) -> Vec<Check> {
    vec![Check {
        name: "ci".into(),
        state,
        url: None,
        id: None,
    }]
}

/// `ci` pending for the first `pending` looks, then in `then`.
pub(crate) fn pending_then(pending: usize, then: CheckState) -> Script {
    Box::new(move |n| {
        ci(if n <= pending {
            CheckState::Pending
        } else {
            then
        })
    })
}

/// The forge; `looks` and `opened` are shared with the test.
pub(crate) struct ScriptedForge {
    pub sha: String,
    pub script: Script,
    pub looks: Arc<Mutex<usize>>,
    pub opened: Arc<Mutex<Vec<NewPullRequest>>>,
    /// The bodies edited: (number, body).
    pub edited: Arc<Mutex<Vec<(u64, String)>>>,
}

impl ScriptedForge {
    pub(crate) fn new(sha: &str, script: Script) -> Self {
        Self {
            sha: sha.into(),
            script,
            looks: Arc::default(),
            opened: Arc::default(),
            edited: Arc::default(),
        }
    }
}

impl Forge for ScriptedForge {
    fn describe(&self) -> String {
        "scripted forge".into()
    }
    fn repo(&self) -> &str {
        "o/r"
    }
    fn access(&self) -> Result<Access> {
        Ok(Access {
            login: "hank".into(),
            can_push: Some(true),
        })
    }
    fn create_pr(&self, pr: &NewPullRequest) -> Result<PullRequest> {
        self.opened.lock().unwrap().push(pr.clone());
        Ok(PullRequest {
            number: 7,
            url: "https://forge.test/o/r/pull/7".into(),
            head_sha: Some(self.sha.clone()),
            node_id: None,
        })
    }
    fn find_pr(&self, _head: &str) -> Result<Option<PullRequest>> {
        Ok(None)
    }
    fn checks(&self, sha: &str) -> Result<Vec<Check>> {
        assert_eq!(sha, self.sha, "the checks of exactly the pushed commit");
        let mut looks = self.looks.lock().unwrap();
        *looks += 1;
        Ok((self.script)(*looks))
    }
    fn check_log(&self, check: &Check) -> Result<Option<String>> {
        Ok(Some(format!("{} FAILED: test_x", check.name)))
    }
    fn reviews(&self, _pr: &PullRequest) -> Result<Vec<Review>> {
        Ok(Vec::new())
    }
    fn review_comments(&self, _pr: &PullRequest) -> Result<Vec<ReviewComment>> {
        Ok(Vec::new())
    }
    fn comment_issue(&self, _issue: u64, _body: &str) -> Result<()> {
        Ok(())
    }
    fn arm_auto_merge(&self, _pr: &PullRequest) -> Result<()> {
        Ok(())
    }
    fn edit_pr_body(&self, number: u64, body: &str) -> Result<()> {
        self.edited.lock().unwrap().push((number, body.to_string()));
        Ok(())
    }
}
