use jiff::{SignedDuration, Timestamp};

use super::*;

fn t0() -> Timestamp {
    Timestamp::from_second(1_900_000_000).unwrap()
}

fn limits() -> CiLimits {
    CiLimits {
        appear: SignedDuration::from_mins(10),
        total: SignedDuration::from_mins(30),
        poll: SignedDuration::from_secs(15),
    }
}

fn repo(name: &str, tasks: &[&str]) -> ChangeSetRepo {
    ChangeSetRepo {
        name: name.into(),
        dir: format!("/w/{name}"),
        remote: "origin".into(),
        branch: "hank/fleet".into(),
        base: "main".into(),
        tasks: tasks.iter().map(|t| (*t).to_string()).collect(),
        title: format!("{name} change"),
        body: format!("records of {name}"),
        checks: "not_waited".into(),
        ..ChangeSetRepo::default()
    }
}

fn set() -> ChangeSet {
    ChangeSet {
        into: "hank/fleet".into(),
        fleet: true,
        repos: vec![repo("api", &["Endpoint"]), repo("web", &["UI", "Rename"])],
        ..ChangeSet::default()
    }
}

fn check(name: &str, state: CheckState) -> Check {
    Check {
        name: name.into(),
        state,
        url: None,
        id: None,
    }
}

/// A scripted world: the head of each repository, the forge failing to open the pull
/// request of `refuse_open`, the checks of each repository at each look (the last entry
/// again for later looks).
struct World {
    heads: Vec<&'static str>,
    refuse_open: Option<usize>,
    secret_in: Option<usize>,
    checks: Vec<Vec<Vec<Check>>>,
    looks: Vec<usize>,
    /// Every command the machine gave but Save/Say, in order.
    log: Vec<String>,
    opened: Vec<(usize, String)>,
    edited: Vec<(usize, String)>,
}

impl World {
    fn new(heads: Vec<&'static str>) -> Self {
        let n = heads.len();
        Self {
            heads,
            refuse_open: None,
            secret_in: None,
            checks: vec![vec![vec![check("ci", CheckState::Passed)]]; n],
            looks: vec![0; n],
            log: Vec::new(),
            opened: Vec::new(),
            edited: Vec::new(),
        }
    }

    /// Runs `m` from `Begin` until `Done`, the clock moving by each wait; the end state.
    fn run(&mut self, m: &mut Machine) -> SetState {
        let mut now = t0();
        let mut queue: std::collections::VecDeque<Command> = m.on(Event::Begin, now).into();
        let mut steps = 0;
        while let Some(c) = queue.pop_front() {
            steps += 1;
            assert!(steps < 10_000, "the machine never ends");
            let event = match c {
                Command::Save | Command::Say(_) => continue,
                Command::Done(state) => return state,
                Command::ReadHead { repo } => Event::Head {
                    repo,
                    sha: self.heads[repo].into(),
                },
                Command::Scan { repo, head } => {
                    self.log.push(format!("scan {repo} {head}"));
                    Event::Scanned {
                        repo,
                        refusal: (self.secret_in == Some(repo)).then(|| "a secret".into()),
                    }
                }
                Command::Push { repo } => {
                    self.log.push(format!("push {repo}"));
                    Event::Pushed { repo }
                }
                Command::OpenPr { repo, body, .. } => {
                    self.log.push(format!("open {repo}"));
                    if self.refuse_open == Some(repo) {
                        Event::ForgeFailed {
                            repo,
                            error: "HTTP 403 Resource not accessible".into(),
                        }
                    } else {
                        self.opened.push((repo, body));
                        let number = 10 + repo as u64;
                        Event::PrOpen {
                            repo,
                            number,
                            url: format!("https://forge.test/pull/{number}"),
                            reference: format!("o/{}#{number}", ["api", "web", "db"][repo]),
                        }
                    }
                }
                Command::EditBody { repo, body, .. } => {
                    self.log.push(format!("edit {repo}"));
                    self.edited.push((repo, body));
                    Event::Edited { repo }
                }
                Command::LookChecks { repo, head } => {
                    assert_eq!(head, self.heads[repo], "the checks of the pushed commit");
                    let script = &self.checks[repo];
                    let n = self.looks[repo].min(script.len() - 1);
                    self.looks[repo] += 1;
                    Event::Checks {
                        repo,
                        checks: script[n].clone(),
                    }
                }
                Command::FetchLogs { repo, failed } => Event::Logs {
                    repo,
                    logs: failed
                        .iter()
                        .map(|c| (c.name.clone(), Some(format!("{} FAILED: test_x", c.name))))
                        .collect(),
                },
                Command::Wait { until, .. } => {
                    now = until;
                    Event::Woke { interrupted: false }
                }
            };
            queue.extend(m.on(event, now));
        }
        panic!("the machine stopped without Done");
    }
}

fn machine(rec: ChangeSet) -> Machine {
    Machine::new(
        Config {
            ci: Some(limits()),
            secrets: Vec::new(),
        },
        rec,
    )
}

#[test]
fn a_green_set_is_pushed_opened_in_order_linked_and_delivered() {
    let mut m = machine(set());
    let mut w = World::new(vec!["a1", "w1"]);
    assert_eq!(w.run(&mut m), SetState::Delivered);
    assert_eq!(
        w.log,
        [
            "scan 0 a1",
            "push 0",
            "open 0",
            "scan 1 w1",
            "push 1",
            "open 1",
            "edit 0"
        ]
    );
    // api opened first, not yet knowing web; web opened knowing api: only api is edited.
    assert!(
        w.opened[0].1.contains("web (not opened yet)"),
        "{:?}",
        w.opened
    );
    assert!(
        w.opened[1].1.contains("o/api#10, web (this pull request)"),
        "{:?}",
        w.opened
    );
    assert!(w.edited[0].1.contains("o/api#10, o/web#11"));
    assert!(w.edited[0].1.contains("records of api"));
    let r = &m.record;
    assert_eq!(r.exit_reason, Some(ExitReason::Delivered));
    assert!(r.repos.iter().all(|x| x.checks == "green" && x.linked));
    assert_eq!(r.repos[1].pushed.as_deref(), Some("w1"));
    assert_eq!(r.schema_version, CHANGE_SET_SCHEMA);
}

#[test]
fn each_step_ends_as_the_table_says() {
    let red = vec![
        vec![check("ci", CheckState::Pending)],
        vec![
            check("ci", CheckState::Failed),
            check("lint", CheckState::Passed),
        ],
    ];
    // (what the world does, the end state, the exit reason, where it stopped)
    type Setup = fn(&mut World);
    let table: Vec<(Setup, SetState, ExitReason, Option<&str>)> = vec![
        (|_| {}, SetState::Delivered, ExitReason::Delivered, None),
        (
            |w| w.refuse_open = Some(1),
            SetState::Stopped,
            ExitReason::ForgeFailed,
            Some("opening the pull request of web"),
        ),
        (
            |w| w.secret_in = Some(0),
            SetState::Stopped,
            ExitReason::SecretsInCommits,
            Some("scanning what the push sends of api"),
        ),
        (
            |w| w.checks[0] = vec![vec![]],
            SetState::Stopped,
            ExitReason::CiMissing,
            Some("the checks of api"),
        ),
        (
            |w| w.checks[1] = vec![vec![check("ci", CheckState::Pending)]],
            SetState::Stopped,
            ExitReason::CiTimeout,
            Some("the checks of web"),
        ),
    ];
    for (i, (setup, state, reason, stopped)) in table.into_iter().enumerate() {
        let mut m = machine(set());
        let mut w = World::new(vec!["a1", "w1"]);
        setup(&mut w);
        assert_eq!(w.run(&mut m), state, "row {i}");
        assert_eq!(m.record.exit_reason, Some(reason), "row {i}");
        assert_eq!(m.record.stopped_at.as_deref(), stopped, "row {i}");
        assert_eq!(m.record.state, state, "row {i}");
    }
    // A red check in web: the set is red, web's findings name the failed check and its log
    // for the tasks that changed web; api stays green.
    let mut m = machine(set());
    let mut w = World::new(vec!["a1", "w1"]);
    w.checks[1] = red;
    assert_eq!(w.run(&mut m), SetState::Red);
    let web = &m.record.repos[1];
    assert_eq!(web.checks, "failed");
    assert_eq!(web.check_names, ["ci"]);
    let findings = web.findings.as_deref().unwrap();
    assert!(findings.contains("ci FAILED: test_x"), "{findings}");
    assert!(findings.contains("w1"), "{findings}");
    assert_eq!(web.tasks, ["UI", "Rename"]);
    assert_eq!(m.record.repos[0].checks, "green");
    assert_eq!(m.record.red().len(), 1);
    assert_eq!(m.record.exit_reason, Some(ExitReason::CiFailed));
}

#[test]
fn a_stopped_set_resumes_without_doing_again_what_it_did() {
    // The forge refuses web's pull request: api is pushed and open, web pushed.
    let mut m = machine(set());
    let mut w = World::new(vec!["a1", "w1"]);
    w.refuse_open = Some(1);
    assert_eq!(w.run(&mut m), SetState::Stopped);
    let stored = m.record.clone();
    assert!(stored.resumable());
    assert_eq!(stored.repos[0].pr_number, Some(10));
    assert!(!stored.repos[0].linked);

    // Resumed from the record: web opened (nothing pushed again), api's body linked.
    let mut m = machine(stored);
    let mut w = World::new(vec!["a1", "w1"]);
    assert_eq!(w.run(&mut m), SetState::Delivered);
    assert_eq!(w.log, ["open 1", "edit 0"]);

    // Resumed again when delivered and linked: nothing pushed, opened or edited; green is
    // not waited for again.
    let done = m.record.clone();
    assert!(!done.resumable());
    let mut m = machine(done.clone());
    let mut w = World::new(vec!["a1", "w1"]);
    assert_eq!(w.run(&mut m), SetState::Delivered);
    assert!(w.log.is_empty(), "{:?}", w.log);
    assert_eq!(w.looks, [0, 0]);

    // A new commit on web (a fix): only web is pushed again and waited for.
    let mut m = machine(done);
    let mut w = World::new(vec!["a1", "w2"]);
    assert_eq!(w.run(&mut m), SetState::Delivered);
    assert_eq!(w.log, ["scan 1 w2", "push 1"]);
    assert_eq!(w.looks, [0, 1]);
    assert_eq!(m.record.repos[1].pushed.as_deref(), Some("w2"));
}

#[test]
fn the_gate_waits_on_the_fixed_clock_until_every_verdict_is_in() {
    let mut m = machine(set());
    let mut w = World::new(vec!["a1", "w1"]);
    let pending = vec![check("ci", CheckState::Pending)];
    // api pending for 3 looks then green; web pending for 5 then green.
    w.checks[0] = [
        vec![pending.clone(); 3],
        vec![vec![check("ci", CheckState::Passed)]],
    ]
    .concat();
    w.checks[1] = [
        vec![pending; 5],
        vec![vec![check("ci", CheckState::Passed)]],
    ]
    .concat();
    assert_eq!(w.run(&mut m), SetState::Delivered);
    assert_eq!(w.looks, [4, 6], "a green one is not looked at again");
    // Five waits of one poll each.
    assert_eq!(m.record.at, Some(t0() + SignedDuration::from_secs(75)));
}

#[test]
fn an_interrupted_wait_stops_the_set_resumably() {
    let mut m = machine(set());
    let now = t0();
    m.on(Event::Begin, now);
    m.on(
        Event::Head {
            repo: 0,
            sha: "a1".into(),
        },
        now,
    );
    m.on(
        Event::Head {
            repo: 1,
            sha: "w1".into(),
        },
        now,
    );
    for repo in 0..2 {
        m.on(
            Event::Scanned {
                repo,
                refusal: None,
            },
            now,
        );
        m.on(Event::Pushed { repo }, now);
        m.on(
            Event::PrOpen {
                repo,
                number: repo as u64 + 1,
                url: "u".into(),
                reference: format!("r#{repo}"),
            },
            now,
        );
    }
    let out = m.on(Event::Edited { repo: 0 }, now);
    assert!(
        out.iter()
            .any(|c| matches!(c, Command::LookChecks { repo: 0, .. }))
    );
    let pending = vec![check("ci", CheckState::Pending)];
    m.on(
        Event::Checks {
            repo: 0,
            checks: pending.clone(),
        },
        now,
    );
    let out = m.on(
        Event::Checks {
            repo: 1,
            checks: pending,
        },
        now,
    );
    assert!(matches!(out.as_slice(), [Command::Wait { .. }]), "{out:?}");
    let out = m.on(Event::Woke { interrupted: true }, now);
    assert_eq!(out.last(), Some(&Command::Done(SetState::Stopped)));
    assert_eq!(m.record.exit_reason, Some(ExitReason::Interrupted));
    assert!(m.record.resumable());
    // An event the machine does not wait for changes nothing.
    assert!(m.on(Event::Pushed { repo: 0 }, now).is_empty());
}

#[test]
fn a_red_set_addresses_its_findings_to_the_tasks_that_changed_each_red_repository() {
    let mut rec = set();
    rec.repos[0].tasks.push("Rename".into());
    rec.state = SetState::Red;
    for (i, name) in ["api", "web"].iter().enumerate() {
        let r = &mut rec.repos[i];
        r.checks = "failed".into();
        r.pr_ref = Some(format!("o/{name}#{i}"));
        r.findings = Some(format!("{name} test failed"));
    }
    let got = rec.findings_by_task();
    let tasks: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(tasks, ["Endpoint", "Rename", "UI"]);
    // Rename changed both: it gets both repositories' findings.
    let rename = &got[1].1;
    assert!(
        rename.contains("o/api#0") && rename.contains("api test failed"),
        "{rename}"
    );
    assert!(
        rename.contains("o/web#1") && rename.contains("web test failed"),
        "{rename}"
    );
    assert!(!got[0].1.contains("web test failed"));
    assert!(rec.fix_round_due(2));
    rec.round = 2;
    assert!(!rec.fix_round_due(2), "bounded by the round limit");
    rec.repos[1].checks = "green".into();
    rec.round = 0;
    let got = rec.findings_by_task();
    assert_eq!(got.len(), 2, "only api's tasks: {got:?}");
}
