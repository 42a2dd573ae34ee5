//! The driver of the delivery machine ([`crate::policy::deliver::machine`]): [`drive`] feeds
//! the machine an event, executes the commands it returns through a [`DeliveryEffects`], and
//! feeds back what happened, until the machine says `Done`. The three hosts are a run's
//! delivery round (`engine/drive.rs`), `hank deliver` (`outside.rs`) and a fleet's
//! integration pull request (`fleet/deliver.rs`); each gives its clock and waits
//! ([`super::Waiter`]), where the record is saved and shown, and how it words what happened.
//! Git and the forge are the same for all three: the [`World`] (its git a [`DeliverGit`],
//! [`RealGit`] through `src/git/`; its forge a [`Forge`]).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::{Committed, Push};
use crate::error::{HankError, Result};
use crate::forge::{Forge, NewPullRequest, PullRequest};
use crate::policy::deliver::machine::{Command, Countdown, Event, Machine, Said, Want};
use crate::policy::deliver::{self as rules};
use crate::policy::run::Delivered;
use crate::store::schema::Delivery;

/// Delivery's git: the commit of what the agent left, the commit pushed, the scan of what a
/// push sends, the push. [`RealGit`] runs them through `src/git/`; the engine's tests give a
/// scripted one.
pub trait DeliverGit: Send + Sync {
    /// [`super::commit_all`].
    ///
    /// # Errors
    /// As [`super::commit_all`].
    fn commit_all(&self, dir: &std::path::Path, branch: &str, message: &str) -> Result<Committed>;
    /// [`super::head`].
    ///
    /// # Errors
    /// As [`super::head`].
    fn head(&self, dir: &std::path::Path) -> Result<String>;
    /// The commits of `sha` the remote does not know, scanned for secrets
    /// ([`super::scan::known_on_remote`], [`super::scan::scan`]).
    ///
    /// # Errors
    /// git cannot run or cannot read the history.
    fn scan(
        &self,
        dir: &std::path::Path,
        sha: &str,
        to: &Place,
        allow: &[String],
    ) -> Result<super::scan::Scan>;
    /// [`super::push`].
    ///
    /// # Errors
    /// As [`super::push`].
    fn push(&self, dir: &std::path::Path, remote: &str, branch: &str) -> Result<Push>;
    /// Where a run's delivery goes as `want` asks, and the remote's URL (the forge is found
    /// from it): a git repository, the remote, the base (required with `pr`).
    ///
    /// # Errors
    /// Not a repository, no such remote, no known base (each message says how to fix it).
    fn locate(&self, dir: &std::path::Path, want: &Want) -> Result<(Place, String)>;
    /// Puts the working tree on `branch` ([`super::prepare_branch`]).
    ///
    /// # Errors
    /// git refused the switch.
    fn switch(&self, dir: &std::path::Path, branch: &str) -> Result<()>;
    /// The commit the local branch `branch` points at ([`super::branch_head`]: a fleet's
    /// integration branch, delivered as it is).
    ///
    /// # Errors
    /// As [`super::branch_head`].
    fn branch_head(&self, dir: &std::path::Path, branch: &str) -> Result<String>;
    /// Pushes the local branch `branch` by name ([`super::push_branch`]).
    ///
    /// # Errors
    /// As [`super::push_branch`].
    fn push_branch(&self, dir: &std::path::Path, remote: &str, branch: &str) -> Result<Push>;
}

/// Where a delivery goes: the branch, the pull request's base, the remote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    pub branch: String,
    pub base: String,
    pub remote: String,
}

/// [`DeliverGit`] through `src/git/` (the delivery runner: the user's credentials, hooks
/// only when approved).
pub struct RealGit;

impl DeliverGit for RealGit {
    fn commit_all(&self, dir: &std::path::Path, branch: &str, message: &str) -> Result<Committed> {
        super::commit_all(dir, branch, message)
    }

    fn head(&self, dir: &std::path::Path) -> Result<String> {
        super::head(dir)
    }

    fn scan(
        &self,
        dir: &std::path::Path,
        sha: &str,
        to: &Place,
        allow: &[String],
    ) -> Result<super::scan::Scan> {
        let known = super::scan::known_on_remote(dir, &to.remote, &to.base, &to.branch)?;
        super::scan::scan(dir, sha, &known, allow)
    }

    fn push(&self, dir: &std::path::Path, remote: &str, branch: &str) -> Result<Push> {
        super::push(dir, remote, branch)
    }

    fn locate(&self, dir: &std::path::Path, want: &Want) -> Result<(Place, String)> {
        let start = super::current_branch(dir)?;
        let branch = rules::branch_for(want.branch.as_deref(), start.as_deref());
        let url = super::remote_url(dir, &want.remote)?;
        let (explicit, start) = (want.base.as_deref(), start.as_deref());
        let base = super::base_branch(dir, explicit, start, &branch, &want.remote);
        let base = if want.base_required {
            base?
        } else {
            base.unwrap_or_default()
        };
        let remote = want.remote.clone();
        Ok((
            Place {
                branch,
                base,
                remote,
            },
            url,
        ))
    }

    fn switch(&self, dir: &std::path::Path, branch: &str) -> Result<()> {
        super::prepare_branch(dir, branch)
    }

    fn branch_head(&self, dir: &std::path::Path, branch: &str) -> Result<String> {
        super::branch_head(dir, branch)
    }

    fn push_branch(&self, dir: &std::path::Path, remote: &str, branch: &str) -> Result<Push> {
        super::push_branch(dir, remote, branch)
    }
}

/// How the branch is committed and pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Branch {
    /// The working tree is on it (a run's round): commit there, HEAD checked.
    Current,
    /// `hank deliver`: the working tree is put on it first.
    Prepare,
    /// A fleet's integration branch: its head as it is, pushed by name.
    AsItIs,
}

/// The git and the forge of a delivery.
pub struct World {
    pub dir: PathBuf,
    pub place: Place,
    pub branch: Branch,
    /// DELIVER_ALLOW_FILES: paths the scan of the pushed commits lets through.
    pub allow_files: Vec<String>,
    pub git: Arc<dyn DeliverGit>,
    pub forge: Option<Box<dyn Forge>>,
    /// The pull request, once opened or found (kept across a run's rounds).
    pub pr: Option<PullRequest>,
}

impl World {
    /// Starts a run's delivery as `want` asks: where it goes, the forge (found before the
    /// switch: a refusal leaves the checkout as it was), the working tree on the branch.
    async fn start(&mut self, want: Want) -> Result<Event> {
        let (git, dir) = (Arc::clone(&self.git), self.dir.clone());
        let asked = want.clone();
        let (place, url) = blocking(move || git.locate(&dir, &asked)).await?;
        if want.forge {
            let env = crate::forge::Env::from_process();
            self.forge = Some(crate::forge::detect(&self.dir, &url, &env)?);
        }
        let (git, dir, branch) = (
            Arc::clone(&self.git),
            self.dir.clone(),
            place.branch.clone(),
        );
        blocking(move || git.switch(&dir, &branch)).await?;
        self.place = place.clone();
        Ok(Event::Started {
            branch: place.branch,
            base: place.base,
            remote: place.remote,
        })
    }

    async fn commit(&mut self, message: Option<String>) -> Result<Event> {
        let (dir, branch) = (self.dir.clone(), self.place.branch.clone());
        let Some(message) = message.filter(|_| self.branch != Branch::AsItIs) else {
            let git = Arc::clone(&self.git);
            let head = blocking(move || git.branch_head(&dir, &branch)).await?;
            return Ok(committed(Committed::default(), head));
        };
        let (git, prepare) = (Arc::clone(&self.git), self.branch == Branch::Prepare);
        blocking(move || {
            if prepare {
                git.switch(&dir, &branch)?;
            }
            let c = git.commit_all(&dir, &branch, &message)?;
            let head = if c.refused.is_some() {
                String::new()
            } else {
                git.head(&dir)?
            };
            Ok(committed(c, head))
        })
        .await
    }

    async fn scan(&self, head: String) -> Result<Event> {
        let (git, dir, to) = (Arc::clone(&self.git), self.dir.clone(), self.place.clone());
        let allow = self.allow_files.clone();
        let found = blocking(move || git.scan(&dir, &head, &to, &allow)).await?;
        let p = &self.place;
        Ok(Event::Scanned {
            refusal: (!found.hits.is_empty()).then(|| {
                crate::policy::secrets::refusal(&p.remote, &p.branch, &found.hits, &found.skipped)
            }),
        })
    }

    async fn push(&self) -> Result<Event> {
        let (git, dir) = (Arc::clone(&self.git), self.dir.clone());
        let (remote, branch) = (self.place.remote.clone(), self.place.branch.clone());
        let as_it_is = self.branch == Branch::AsItIs;
        let pushed = blocking(move || {
            if as_it_is {
                git.push_branch(&dir, &remote, &branch)
            } else {
                git.push(&dir, &remote, &branch)
            }
        })
        .await?;
        Ok(match pushed {
            Push::Pushed => Event::Pushed,
            Push::Rejected { output } => Event::PushRefused { output },
        })
    }

    fn forge(&self) -> std::result::Result<&dyn Forge, String> {
        self.forge
            .as_deref()
            .ok_or_else(|| "no forge is known for this remote".to_string())
    }

    fn open_pr(
        &mut self,
        title: String,
        body: String,
        draft: bool,
        known: Option<(u64, String)>,
    ) -> Event {
        let forge = match self.forge() {
            Ok(f) => f,
            Err(error) => return Event::ForgeFailed { error },
        };
        let opened = match known {
            Some((number, _)) if self.pr.as_ref().is_some_and(|p| p.number == number) => {
                return self.pr_event(false);
            }
            Some((number, url)) => {
                let found = forge.find_pr(&self.place.branch).ok().flatten();
                found.filter(|p| p.number == number).unwrap_or(PullRequest {
                    number,
                    url,
                    head_sha: None,
                    node_id: None,
                })
            }
            None => match forge.create_pr(&NewPullRequest {
                title,
                body,
                base: self.place.base.clone(),
                head: self.place.branch.clone(),
                draft,
            }) {
                Ok(p) => {
                    self.pr = Some(p);
                    return self.pr_event(true);
                }
                Err(e) => return forge_failed(&e),
            },
        };
        self.pr = Some(opened);
        self.pr_event(false)
    }

    fn pr_event(&self, created: bool) -> Event {
        match &self.pr {
            Some(p) => Event::PrOpen {
                number: p.number,
                url: p.url.clone(),
                created,
            },
            None => Event::ForgeFailed {
                error: "no pull request".into(),
            },
        }
    }

    fn checks(&self, head: &str) -> Event {
        match self.forge().map(|f| f.checks(head)) {
            Ok(Ok(checks)) => Event::Checks(checks),
            Ok(Err(e)) => forge_failed(&e),
            Err(error) => Event::ForgeFailed { error },
        }
    }

    fn logs(&self, failed: &[crate::policy::deliver::Check]) -> Event {
        let Ok(f) = self.forge() else {
            return Event::Logs(Vec::new());
        };
        let logs = failed
            .iter()
            .map(|c| (c.name.clone(), f.check_log(c).unwrap_or(None)))
            .collect();
        Event::Logs(logs)
    }

    fn reviews(&self) -> Event {
        let (Ok(f), Some(p)) = (self.forge(), self.pr.as_ref()) else {
            return Event::Reviews {
                reviews: Vec::new(),
                comments: Vec::new(),
            };
        };
        match f.reviews(p).and_then(|r| Ok((r, f.review_comments(p)?))) {
            Ok((reviews, comments)) => Event::Reviews { reviews, comments },
            Err(e) => forge_failed(&e),
        }
    }

    fn arm_auto_merge(&self) -> Event {
        let error = match (self.forge(), self.pr.as_ref()) {
            (Ok(f), Some(p)) => f.arm_auto_merge(p).err().map(|e| e.to_string()),
            (Err(e), _) => Some(e),
            (_, None) => Some("no pull request".into()),
        };
        Event::AutoMerge { error }
    }

    /// A comment on `issue`; the forge's error when it failed.
    fn comment(&self, issue: u64, text: &str) -> Option<String> {
        match self.forge() {
            Ok(f) => f.comment_issue(issue, text).err().map(|e| e.to_string()),
            Err(e) => Some(e),
        }
    }
}

fn committed(c: Committed, head: String) -> Event {
    Event::Committed {
        made: c.made,
        secrets_skipped: c.secrets_skipped,
        refused: c.refused,
        head,
    }
}

fn forge_failed(e: &HankError) -> Event {
    Event::ForgeFailed {
        error: e.to_string(),
    }
}

/// What a host of the delivery machine provides: its clock and waits ([`super::Waiter`]),
/// where the record is saved (the per-user record) and shown (`.hank/delivery.json`, the
/// `delivery` event, status.json), how it words what happened, and the [`World`].
pub trait DeliveryEffects: super::Waiter {
    /// Saves the record (stamped by the machine).
    ///
    /// # Errors
    /// It cannot be written.
    fn save(&mut self, d: &Delivery) -> Result<()>;
    /// Shows the record ([`Delivery::shown`]).
    ///
    /// # Errors
    /// It cannot be written.
    fn tell(&mut self, d: &Delivery) -> Result<()>;
    /// Tells people what happened; `d` is the record as it is now.
    fn say(&mut self, said: &Said, d: &Delivery);
    /// The git and the forge.
    fn world(&mut self) -> &mut World;
    /// Each event fed to the machine, with its time (a replay's recording).
    fn recorded(&mut self, _at: Timestamp, _event: &Event) {}
}

/// Runs the machine `m` from `first` until it is done: each command executed through `fx`,
/// what happened fed back.
///
/// # Errors
/// git cannot run or refused (the commit of `hank deliver`), a record cannot be written.
pub async fn drive(
    m: &mut Machine,
    fx: &mut dyn DeliveryEffects,
    first: Event,
) -> Result<Delivered> {
    match run(m, fx, first).await? {
        Some(outcome) => Ok(outcome),
        None => Err(HankError::Internal(
            "the delivery ended without a verdict".into(),
        )),
    }
}

/// Starts a run's delivery: [`Event::Open`], whose first command (`Start`) checks what can be
/// refused and puts the work on the delivery branch through `fx`'s [`World`].
///
/// # Errors
/// Not a repository, no such remote, no known base, no forge login, git refused the switch.
pub async fn start(m: &mut Machine, fx: &mut dyn DeliveryEffects, want: Want) -> Result<()> {
    match run(m, fx, Event::Open(want)).await? {
        None => Ok(()),
        Some(_) => Err(HankError::Internal(
            "the delivery ended while it started".into(),
        )),
    }
}

/// The machine's commands from `first` until `Done` (its outcome) or `Ready` (`None`).
async fn run(
    m: &mut Machine,
    fx: &mut dyn DeliveryEffects,
    first: Event,
) -> Result<Option<Delivered>> {
    let now = fx.now();
    fx.recorded(now, &first);
    let mut queue: VecDeque<Command> = m.on(first, now).into();
    while let Some(c) = queue.pop_front() {
        let event = match c {
            Command::Save => {
                fx.save(&m.record)?;
                continue;
            }
            Command::Tell => {
                fx.tell(&m.record.shown())?;
                continue;
            }
            Command::Say(said) => {
                fx.say(&said, &m.record);
                continue;
            }
            Command::Comment { issue, text } => {
                if let Some(error) = fx.world().comment(issue, &text) {
                    fx.say(&Said::CommentFailed { issue, error }, &m.record);
                }
                continue;
            }
            Command::Fail(message) => return Err(HankError::Tool(message)),
            Command::Done(outcome) => return Ok(Some(outcome)),
            Command::Ready => return Ok(None),
            Command::Start(want) => fx.world().start(want).await?,
            Command::Commit { message } => fx.world().commit(message).await?,
            Command::Scan { head } => fx.world().scan(head).await?,
            Command::Push => fx.world().push().await?,
            Command::Wait { until, countdown } => Event::Woke {
                interrupted: wait_until(fx, until, countdown).await,
            },
            Command::OpenPr {
                title,
                body,
                draft,
                known,
            } => fx.world().open_pr(title, body, draft, known),
            Command::LookChecks { head } => fx.world().checks(&head),
            Command::FetchLogs { failed } => fx.world().logs(&failed),
            Command::ReadReviews => fx.world().reviews(),
            Command::ArmAutoMerge => fx.world().arm_auto_merge(),
        };
        let now = fx.now();
        fx.recorded(now, &event);
        queue.extend(m.on(event, now));
    }
    Err(HankError::Internal(
        "the delivery ended without a verdict".into(),
    ))
}

/// Waits until `until` in steps of at most a second on `fx`'s clock; the CI wait tells its
/// countdown before each. `true` when the wait is to end (a signal, `hank ctl stop`).
async fn wait_until(
    fx: &mut dyn DeliveryEffects,
    until: Timestamp,
    countdown: Option<Countdown>,
) -> bool {
    loop {
        let now = fx.now();
        let left = until.duration_since(now);
        if left.is_zero() || left.is_negative() {
            return false;
        }
        let step = Duration::try_from(left)
            .unwrap_or_default()
            .min(Duration::from_secs(1));
        if let Some(c) = countdown
            && fx.tick(c, now)
        {
            return true;
        }
        if fx.sleep(step).await {
            return true;
        }
    }
}

/// Runs blocking git off the runtime's thread (the signal handler keeps running, so a
/// Ctrl-C stops git's process group through `proc::Cmd`).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| HankError::Internal(format!("a delivery step failed: {e}")))?
}
