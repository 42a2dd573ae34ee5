//! Delivery inside `hank run` (`DELIVER=branch|pr`): the loop works on the delivery branch
//! from its start (`InRun::start`, the delivery machine's first command, before the first
//! call); at each verified completion the run's state machine
//! asks for a delivery ([`crate::policy::run::Step::Deliver`]) and `InRun::deliver` runs
//! one round of the delivery machine ([`crate::policy::deliver::machine`], driven by
//! [`super::drive::drive`]): commit, scan, push, the pull request once (`pr`), the checks of
//! exactly the pushed commit (`CI_WAIT`), and how it ended as a [`Delivered`]: final, or
//! feedback for the next loop. The run's state machine counts the rounds.
//!
//! Its clock, its waits and its records are the run's (`RunSide`: the engine, and its
//! effects as `RunIo`, so the engine's tests run a delivery round with a 30-minute CI wait
//! at once); its git is a [`DeliverGit`] ([`RealGit`]: through `src/git/`), its forge a [`Forge`].

use std::path::PathBuf;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::drive::{Branch, DeliveryEffects, World};
pub use super::drive::{DeliverGit, Place, RealGit};
use super::{CiWaitSettings, WaitFut, Waiter};
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::forge::Forge;
use crate::policy::deliver::machine::{
    Config, Countdown, Event, Machine, Recording, Said, Source, Want,
};
use crate::policy::deliver::{self as rules};
use crate::policy::run::{DeliverRounds, Delivered};
use crate::settings::{DeliverMode, Settings};
use crate::store::schema::Delivery;

/// Waits between attempts of a push that failed for a transient reason (the network).
const PUSH_RETRY_WAITS: [SignedDuration; 2] =
    [SignedDuration::from_secs(5), SignedDuration::from_secs(15)];

/// A run's delivery: the machine (its record kept across the run's rounds) and its world.
pub struct InRun {
    machine: Machine,
    world: World,
    /// What starting it asks for, until it is started.
    want: Option<Want>,
    /// Every event fed to the machine, with the record it started from (a replay's
    /// recording), when asked for ([`InRun::recording`]).
    recording: Option<(Delivery, Vec<(Timestamp, Event)>)>,
}

/// The run's effects a delivery round uses (in `hank run`, the engine's effects): its clock
/// and sleeps, its records, its terminal.
pub(crate) trait RunIo {
    /// The time on the run's clock.
    fn now(&self) -> Timestamp;
    /// Sleeps `d` on the run's clock; `true` when a signal cut it short (or had come).
    fn sleep(&mut self, d: std::time::Duration) -> WaitFut<'_>;
    /// What a round reads and where it writes (`None`: the run keeps no delivery records).
    fn records(&self) -> Option<RunRecords>;
    /// Writes `bytes` to `path` atomically, 0600 (`.hank/delivery.json`).
    ///
    /// # Errors
    /// The file cannot be written.
    fn write_file(&mut self, path: &std::path::Path, bytes: &[u8]) -> Result<()>;
    /// Saves the delivery record of the project at `project` ([`super::record::save`]).
    ///
    /// # Errors
    /// The record cannot be written.
    fn save_record(&mut self, project: &std::path::Path, rec: &Delivery) -> Result<()>;
    /// A line for the user.
    fn say(&mut self, line: &str);
    /// The CI wait's countdown, like the run's other waits (`waiting (checks) until …`).
    fn counting_down(&mut self, until: Timestamp, now: Timestamp);
}

/// The run a delivery is part of (the engine): its effects ([`RunIo`]), how the delivery is
/// shown, how warnings are said, and whether the run was asked to stop.
pub(crate) trait RunSide {
    /// The run's effects.
    fn io(&mut self) -> &mut dyn RunIo;
    /// The run's effects, to read (its clock, its records).
    fn io_ref(&self) -> &dyn RunIo;
    /// `d` as it is shown now: in status.json, and as the `delivery` event when `step` (a
    /// step happened; else its CI countdown moved).
    ///
    /// # Errors
    /// The record cannot be written.
    fn show(&mut self, d: &Delivery, step: bool) -> Result<()>;
    /// A warning of the round (a secret-looking file left out, a forge call that failed
    /// without stopping it).
    fn warn(&mut self, line: &str);
    /// Whether the run was asked to stop (the control source polled, as in every wait): a
    /// `hank ctl stop` ends the CI wait.
    fn stop_asked(&mut self) -> bool;
}

/// What a round reads and writes besides the host's records: the run's `events.jsonl` (the
/// evidence of the PR body), where `.hank/delivery.json` is, the secret values to redact.
#[derive(Debug, Clone, Default)]
pub struct RunRecords {
    pub events: String,
    pub delivery_file: PathBuf,
    pub secrets: Vec<String>,
}

impl InRun {
    /// `DELIVER=branch|pr` for `hank run` (`None` with `none`), not started: the engine
    /// starts it (`InRun::start`) before the run's first call, with the delivery machine's
    /// first command — everything that can be refused is checked there (a git repository,
    /// the remote `DELIVER_REMOTE`, the base of the pull request, the forge), then the working
    /// tree is put on the delivery branch (`hank/<branch you are on>` or `DELIVER_BRANCH`),
    /// where the agent works. Its git is `git` ([`RealGit`] in `hank run`).
    #[must_use]
    pub fn new(s: &Settings, git: Arc<dyn DeliverGit>) -> Option<Self> {
        let mode = s.deliver.value;
        if mode == DeliverMode::None {
            return None;
        }
        let want = Want {
            branch: s.deliver_branch.value.clone(),
            remote: s.deliver_remote.value.clone(),
            base: s.deliver_base.value.clone(),
            base_required: mode == DeliverMode::Pr,
            forge: mode == DeliverMode::Pr || s.ci_wait.value.applies(mode),
        };
        let place = Place {
            remote: want.remote.clone(),
            ..Place::default()
        };
        let mut d = Self::build(s, place, None, want.forge, git);
        d.want = Some(want);
        Some(d)
    }

    /// Starts the delivery (once; a delivery made with [`InRun::of`] is started): the
    /// machine's first command checks what can be refused and puts the work on its branch,
    /// through `host`'s clock and `git`.
    ///
    /// # Errors
    /// Not a repository, no such remote, no known base, no forge login, or git refused the
    /// switch (each message says how to fix it).
    pub(crate) async fn start(&mut self, run: &mut dyn RunSide) -> Result<()> {
        let Some(want) = self.want.take() else {
            return Ok(());
        };
        let mut round = Round {
            run,
            world: &mut self.world,
            delivery_file: PathBuf::new(),
            record: self.recording.as_mut().map(|(_, events)| events),
            shown: None,
        };
        super::drive::start(&mut self.machine, &mut round, want).await
    }

    /// The delivery of `s`'s `DELIVER` mode to `place` through `forge` and `git`, started
    /// (nothing checked nor switched: [`InRun::new`] does that); CI_WAIT decides whether the
    /// checks are waited for (only with a forge).
    #[must_use]
    pub fn of(
        s: &Settings,
        place: Place,
        forge: Option<Box<dyn Forge>>,
        git: Arc<dyn DeliverGit>,
    ) -> Self {
        let known = forge.is_some();
        Self::build(s, place, forge, known, git)
    }

    /// The delivery to `place`; `forge_known`: a forge is there (or will be, once started).
    fn build(
        s: &Settings,
        place: Place,
        forge: Option<Box<dyn Forge>>,
        forge_known: bool,
        git: Arc<dyn DeliverGit>,
    ) -> Self {
        let mode = s.deliver.value;
        let ci = (s.ci_wait.value.applies(mode) && forge_known).then(|| {
            CiWaitSettings {
                appear: s.ci_appear_timeout.value,
                total: s.ci_timeout.value,
            }
            .limits()
        });
        let cfg = Config {
            source: Source::Run,
            pr: mode == DeliverMode::Pr && forge_known,
            ci,
            auto_merge: s.auto_merge.value,
            review_loop: s.review_loop.value,
            push_retry_waits: PUSH_RETRY_WAITS.to_vec(),
            secrets: Vec::new(),
        };
        let record = Delivery {
            mode: mode.as_str().to_string(),
            branch: place.branch.clone(),
            base: place.base.clone(),
            remote: place.remote.clone(),
            ..Delivery::default()
        };
        let world = World {
            dir: s.project_dir.clone(),
            place,
            branch: Branch::Current,
            allow_files: s.deliver_allow_files.value.clone().unwrap_or_default(),
            git,
            forge,
            pr: None,
        };
        Self {
            machine: Machine::new(cfg, record),
            world,
            want: None,
            recording: None,
        }
    }

    /// Records every event fed to the machine from now on.
    #[must_use]
    pub fn recording(mut self) -> Self {
        self.recording = Some((self.machine.record.clone(), Vec::new()));
        self
    }

    /// The recording: the machine's configuration, the record it started from, the events.
    #[must_use]
    pub fn recorded(&self) -> Option<(Config, &Delivery, &Recording)> {
        let (start, events) = self.recording.as_ref()?;
        Some((self.machine.config().clone(), start, events))
    }

    /// The record as the machine holds it.
    #[must_use]
    pub fn record(&self) -> &Delivery {
        &self.machine.record
    }

    /// The rounds that go back to the agent: 2 rejected pushes
    /// ([`rules::MAX_PUSH_RETRIES`]), `MAX_CI_ROUNDS` red CI rounds, and as many review rounds
    /// with `REVIEW_LOOP` (none without).
    #[must_use]
    pub fn rounds(s: &Settings) -> DeliverRounds {
        DeliverRounds {
            push: rules::MAX_PUSH_RETRIES,
            ci: s.max_ci_rounds.value,
            review: if s.review_loop.value {
                s.max_ci_rounds.value
            } else {
                0
            },
        }
    }

    /// The delivery branch (where the loop works).
    #[must_use]
    pub fn branch(&self) -> &str {
        &self.world.place.branch
    }

    /// The last delivery's record as shown (status.json `delivery`), once a round ran.
    #[must_use]
    pub fn last(&self) -> Option<Delivery> {
        (self.machine.record.round > 0).then(|| self.machine.record.shown())
    }

    /// Delivers the verified completion `reason` of `run`: one round of the delivery machine,
    /// on the run's clock (a signal or a `hank ctl stop` ends a push retry wait or the CI wait
    /// with `interrupted`), each step shown and the records written through its effects.
    /// Effects without a delivery's records (none) leave the completion as it is.
    ///
    /// # Errors
    /// git cannot run or refused, a record cannot be written.
    pub(crate) async fn deliver(
        &mut self,
        reason: ExitReason,
        run: &mut dyn RunSide,
    ) -> Result<Delivered> {
        let Some(records) = run.io_ref().records() else {
            return Ok(Delivered::Final(reason));
        };
        run.io().say(&format!(
            "delivering the verified work on {}",
            self.branch()
        ));
        let secrets = records.secrets.as_slice();
        let mut ev = super::evidence_of_current(
            &records.events,
            reason,
            "a verified completion, delivered by the loop",
        );
        ev.base = self.world.place.base.clone();
        ev.head = self.world.place.branch.clone();
        let verified = ev.last_check.as_ref().map(|c| c.passed);
        let evidence = super::record::evidence(&ev, verified, secrets);
        self.machine.set_secrets(records.secrets.clone());
        let mut round = Round {
            run,
            world: &mut self.world,
            delivery_file: records.delivery_file,
            record: self.recording.as_mut().map(|(_, events)| events),
            shown: None,
        };
        let first = Event::Begin {
            reason,
            evidence: Some(evidence),
        };
        super::drive::drive(&mut self.machine, &mut round, first).await
    }
}

/// One round's effects: the run's ([`RunSide`]) and the delivery's [`World`].
struct Round<'a> {
    run: &'a mut dyn RunSide,
    world: &'a mut World,
    delivery_file: PathBuf,
    record: Option<&'a mut Vec<(Timestamp, Event)>>,
    /// The record as last shown (its CI countdown is put in it).
    shown: Option<Delivery>,
}

/// The run's clock (in the engine, its effects' sleep: a signal cuts it short; the test
/// effects' clock moves).
impl Waiter for Round<'_> {
    fn now(&self) -> Timestamp {
        self.run.io_ref().now()
    }

    fn sleep(&mut self, d: std::time::Duration) -> WaitFut<'_> {
        self.run.io().sleep(d)
    }

    /// The countdown of the CI wait, like the run's other waits (`waiting (checks) until
    /// …`), and in status.json's delivery when it changed (when the verdict is due, checks
    /// pending); `hank ctl stop` ends it.
    fn tick(&mut self, countdown: Countdown, now: Timestamp) -> bool {
        self.run.io().counting_down(countdown.due, now);
        if let Some(d) = self.shown.as_mut() {
            let before = (d.checks_due, d.checks_pending);
            countdown.show_in(d);
            if before != (d.checks_due, d.checks_pending) {
                let _ = self.run.show(&d.clone(), false);
            }
        }
        self.run.stop_asked()
    }
}

impl DeliveryEffects for Round<'_> {
    fn save(&mut self, d: &Delivery) -> Result<()> {
        let dir = self.world.dir.clone();
        self.run.io().save_record(&dir, d)
    }

    /// `.hank/delivery.json`, then the run's (the event, status.json).
    fn tell(&mut self, d: &Delivery) -> Result<()> {
        let json = serde_json::to_vec_pretty(d).map_err(|e| HankError::Internal(e.to_string()))?;
        self.run.io().write_file(&self.delivery_file, &json)?;
        self.shown = Some(d.clone());
        self.run.show(d, true)
    }

    fn say(&mut self, said: &Said, d: &Delivery) {
        let line = match said {
            Said::SecretLeftOut(f) => format!(
                "{} looks like a secret and is not ignored: left out of the delivery commit (still in the working tree; add it to .gitignore)",
                crate::sanitize::line(f)
            ),
            Said::SecretsRefused(text) => text.clone(),
            Said::PushRetry { line, wait } => format!(
                "the push to {} failed ({line}); trying again in {}s",
                d.remote,
                wait.as_secs()
            ),
            Said::CommentFailed { issue, error } => {
                format!("could not comment on issue #{issue}: {error}")
            }
            Said::AutoMergeFailed(e) => e.clone(),
            _ => return,
        };
        self.run.warn(&line);
    }

    fn world(&mut self) -> &mut World {
        self.world
    }

    fn recorded(&mut self, at: Timestamp, event: &Event) {
        if let Some(events) = self.record.as_mut() {
            events.push((at, event.clone()));
        }
    }
}

/// What `hank run --dry-run` says about `DELIVER=branch|pr` (nothing is switched or pushed).
#[must_use]
pub fn dry_run_note(s: &Settings) -> String {
    let start = super::current_branch(&s.project_dir).ok().flatten();
    let branch = rules::branch_for(s.deliver_branch.value.as_deref(), start.as_deref());
    let what = match s.deliver.value {
        DeliverMode::Pr => "push, a pull request, its checks",
        _ => "push",
    };
    format!(
        "DELIVER={} ({}): the loop would work on branch `{branch}` and deliver a verified completion to `{}` ({what})",
        s.deliver.value.as_str(),
        s.deliver.source,
        s.deliver_remote.value
    )
}
