use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::*;
use crate::deliver::scripted::{SHA, ScriptedGit};
use crate::forge::scripted::{ScriptedForge, pending_then};
use crate::policy::deliver::CheckState;
use crate::policy::deliver::change_set::Machine;

/// A fixed clock: it moves only by what is slept.
struct Fixed {
    now: Timestamp,
}

impl Waiter for Fixed {
    fn now(&self) -> Timestamp {
        self.now
    }
    fn sleep(&mut self, d: Duration) -> crate::deliver::WaitFut<'_> {
        self.now += SignedDuration::try_from(d).unwrap();
        Box::pin(async { false })
    }
    fn tick(&mut self, _countdown: Countdown, _now: Timestamp) -> bool {
        false
    }
}

/// Two repositories through scripted git and forges: pushed and opened in order, the first
/// body edited to link the second, both waited for on the fixed clock, delivered; the
/// record on disk says so.
#[test]
fn a_set_is_driven_through_each_repositorys_doors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".hank")).unwrap();
    let git = Arc::new(ScriptedGit::default());
    let api = ScriptedForge::new(SHA, pending_then(2, CheckState::Passed));
    let web = ScriptedForge::new(SHA, pending_then(0, CheckState::Passed));
    let (api_opened, api_edited) = (Arc::clone(&api.opened), Arc::clone(&api.edited));
    let (web_opened, web_looks) = (Arc::clone(&web.opened), Arc::clone(&web.looks));
    let plans = vec![
        RepoPlan {
            name: "api".into(),
            dir: dir.path().join("api"),
            forge: Some("o/api".into()),
            base: Some("main".into()),
            tasks: vec!["Endpoint".into()],
            trailer: vec!["Closes #7".into()],
        },
        RepoPlan {
            name: "web".into(),
            dir: dir.path().join("web"),
            forge: None,
            base: Some("dev".into()),
            tasks: vec!["UI".into()],
            trailer: Vec::new(),
        },
    ];
    let lines = vec![FleetTaskLine {
        name: "UI".into(),
        state: "merged".into(),
        loops: 2,
        cost_usd: 0.5,
        message: "done".into(),
    }];
    let set = fresh("hank/fleet", &plans, &lines, true, &[]).unwrap();
    assert_eq!(set.repos[1].base, "dev");
    assert!(set.repos[1].body.contains("| UI | merged | 2 |"));
    assert!(!set.repos[0].body.contains("| UI |"), "only its own tasks");
    // A repository's trailer (hank watch's issue line) ends its body; none, none.
    assert!(
        set.repos[0].body.ends_with("\nCloses #7\n"),
        "{}",
        set.repos[0].body
    );
    assert!(
        !set.repos[1].body.contains("Closes"),
        "{}",
        set.repos[1].body
    );
    let door = |forge: ScriptedForge, name: &str| Door {
        dir: dir.path().join(name),
        place: Place {
            branch: "hank/fleet".into(),
            base: "main".into(),
            remote: "origin".into(),
        },
        allow_files: Vec::new(),
        git: Arc::clone(&git) as Arc<dyn DeliverGit>,
        forge: Box::new(forge),
    };
    let doors = vec![door(api, "api"), door(web, "web")];
    let start = Timestamp::from_second(1_900_000_000).unwrap();
    let mut clock = Fixed { now: start };
    let mut host = Host {
        clock: &mut clock,
        root: dir.path().to_path_buf(),
        prefix: "hank: ",
        last_told: None,
    };
    let cfg = Config {
        ci: Some(
            CiWaitSettings {
                appear: Duration::from_secs(600),
                total: Duration::from_secs(1800),
            }
            .limits(),
        ),
        secrets: Vec::new(),
    };
    let mut m = Machine::new(cfg, set);
    let runtime = crate::proc::runtime().unwrap();
    let state = runtime.block_on(drive(&mut m, &mut host, &doors)).unwrap();
    assert_eq!(state, SetState::Delivered);
    assert_eq!(
        *git.calls.lock().unwrap(),
        [
            "head of hank/fleet",
            "head of hank/fleet",
            &format!("scan {SHA}"),
            "push branch origin hank/fleet",
            &format!("scan {SHA}"),
            "push branch origin hank/fleet",
        ]
    );
    assert_eq!(api_opened.lock().unwrap().len(), 1);
    assert_eq!(web_opened.lock().unwrap().len(), 1);
    // The scripted forges both answer #7 as `o/r`: api's body is edited to link web's.
    let edited = api_edited.lock().unwrap().clone();
    assert_eq!(edited.len(), 1);
    assert!(edited[0].1.contains("o/r#7, o/r#7"), "{edited:?}");
    assert_eq!(*web_looks.lock().unwrap(), 1, "green at once: looked once");
    let saved = load(dir.path()).unwrap();
    assert_eq!(saved.state, SetState::Delivered);
    assert_eq!(code_of(&saved), 0);
    assert!(saved.repos.iter().all(|r| r.linked && r.checks == "green"));
    // Two pending looks of api, each followed by a poll's wait (15 s at most).
    assert_eq!(saved.at, Some(start + SignedDuration::from_secs(30)));
    assert_eq!(
        end_lines(&saved),
        ["the change set is delivered: 2 pull requests open and green (o/r#7, o/r#7)"]
    );
}

#[test]
fn the_end_names_the_red_repository_or_the_step_it_stopped_at() {
    let mut set = ChangeSet {
        state: SetState::Red,
        repos: vec![ChangeSetRepo {
            name: "web".into(),
            tasks: vec!["UI".into()],
            pr_ref: Some("o/web#2".into()),
            pr_url: Some("https://github.com/o/web/pull/2".into()),
            checks: "failed".into(),
            check_names: vec!["test".into()],
            findings: Some("## Failing check: test\nboom".into()),
            ..ChangeSetRepo::default()
        }],
        ..ChangeSet::default()
    };
    let lines = end_lines(&set).join("\n");
    for want in ["web: o/web#2", "failed: test", "findings for UI", "boom"] {
        assert!(lines.contains(want), "{want}: {lines}");
    }
    set.state = SetState::Stopped;
    set.stopped_at = Some("opening the pull request of web".into());
    set.error = Some("HTTP 403".into());
    set.exit_reason = Some(ExitReason::ForgeFailed);
    let lines = end_lines(&set).join("\n");
    assert!(lines.contains("stopped at opening the pull request of web: HTTP 403"));
    assert!(lines.contains("`hank deliver` resumes"));
    assert_eq!(code_of(&set), 1);
}
