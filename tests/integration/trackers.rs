//! `hank watch` over the trackers that are not the code's forge, each against a fake of its
//! API on 127.0.0.1 (`fake_trackers.rs`, written from the public documentation): labelled
//! items become fleet tasks named by their keys (claim ref, task, branch), hank's one comment
//! per item edited in place, labels and workflow states shown, a rate limit waited out
//! visibly, an item's text read fresh after its claim, a refused credential said with the
//! tracker and the variable, and the credentials never in the agent's environment.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::fake_trackers::{self, Served, adf, adf_lines};
use crate::support::{Project, git, stderr};

/// Ticks the task's first item, writes `<worktree name>.txt` and whether the tracker
/// credentials reached the agent (`seen.txt`).
const WORK: &str = r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
n=$(basename "$PWD"); echo "$n" >> "$n.txt"
echo "linear:${LINEAR_API_KEY:-none} jira:${JIRA_API_TOKEN:-none}" > seen.txt
true
"#;

const LINEAR_KEY: &str = "lin_api_fake0000000000000000";
/// `Basic base64("t@t:tok")`.
const JIRA_AUTH: &str = "Basic dEB0OnRvaw==";

fn project() -> (Project, PathBuf) {
    let p = Project::new(&[]);
    p.fake("effect.sh", WORK);
    let remote = p.git_pushed_to_origin();
    (p, remote)
}

fn with_identity(c: &mut Command) -> &mut Command {
    c.env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
}

fn linear_watch(p: &Project, fake: &Served<fake_trackers::Linear>, args: &[&str]) -> Output {
    let mut c = p.cmd();
    c.args(["watch", "--tracker", "linear"])
        .args(args)
        .env("LINEAR_API_KEY", LINEAR_KEY)
        .env("LINEAR_API_URL", format!("{}/graphql", fake.url()));
    with_identity(&mut c).output().expect("hank watch")
}

fn jira_watch(p: &Project, fake: &Served<fake_trackers::Jira>, args: &[&str]) -> Output {
    let mut c = p.cmd();
    c.args(["watch", "--tracker", "jira"])
        .args(args)
        .env("JIRA_URL", fake.url())
        .env("JIRA_EMAIL", "t@t")
        .env("JIRA_API_TOKEN", "tok");
    with_identity(&mut c).output().expect("hank watch")
}

fn claim_refs(remote: &Path) -> Vec<String> {
    git(
        remote,
        &["for-each-ref", "--format=%(refname)", "refs/hank/claims/"],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

fn linear_fake() -> Served<fake_trackers::Linear> {
    let mut w = fake_trackers::Linear {
        key: LINEAR_KEY.into(),
        ..Default::default()
    };
    w.issue(1, "Add the alpha file", "Please add it.", &["hank"]);
    w.issue(
        2,
        "Beta work",
        "Two steps:\n- [ ] first step\n- [ ] second step\n",
        &["hank", "enhancement"],
    );
    w.issue(3, "Not for hank", "", &["bug"]);
    Served::start(w, fake_trackers::linear)
}

fn versions(c: &Value) -> Vec<String> {
    c["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().map_or_else(|| adf_lines(v), str::to_string))
        .collect()
}

#[test]
fn linear_issues_become_tasks_named_by_their_keys_with_one_comment_labels_and_a_state() {
    let (p, remote) = project();
    let fake = linear_fake();
    // ENG-1 is edited between the listing and its claim: the task runs the new text.
    fake.world.lock().unwrap().edit_on_read = Some((
        "ENG-1".into(),
        "Changed since.\n- [ ] the fresh step\n".into(),
    ));
    let o = linear_watch(
        &p,
        &fake,
        &["--label", "hank", "--once", "--deliver", "branch"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        claim_refs(&remote),
        [
            "refs/hank/claims/linear-ENG-1",
            "refs/hank/claims/linear-ENG-2"
        ]
    );
    let branches = git(&remote, &["branch", "--list", "hank/ENG-*"]);
    for b in ["hank/ENG-1-add-the-alpha-file", "hank/ENG-2-beta-work"] {
        assert!(branches.contains(b), "{b} in {branches}\n{err}");
        let seen = git(&remote, &["show", &format!("{b}:seen.txt")]);
        assert_eq!(
            seen.trim(),
            "linear:none jira:none",
            "the agent saw a credential"
        );
    }
    let w = fake.world.lock().unwrap();
    assert!(w.type_errors.is_empty(), "{:?}", w.type_errors);
    for key in ["ENG-1", "ENG-2"] {
        let comments = w.comments_on(key);
        assert_eq!(
            comments.len(),
            1,
            "one comment, edited in place: {comments:?}"
        );
        let v = versions(&comments[0]);
        assert!(v.len() >= 2, "{v:?}");
        assert!(
            v[0].starts_with("**hank is working on this issue**"),
            "{v:?}"
        );
        let last = v.last().unwrap();
        assert!(last.contains("hank delivered this issue"), "{last}");
        assert!(
            last.contains(&format!("Branch pushed: hank/{key}-")),
            "{last}"
        );
        assert!(
            !v.iter().any(|b| b.contains("<!--")),
            "the marker is not shown: {v:?}"
        );
        let labels = w.labels_of(key);
        assert!(labels.iter().any(|l| l == "hank:done"), "{labels:?}");
        assert!(!labels.iter().any(|l| l == "hank:working"), "{labels:?}");
        assert_eq!(w.get(key)["state"], "started");
    }
    // The fresh text, not the listed one.
    let started = &versions(&w.comments_on("ENG-1")[0])[0];
    assert!(started.contains("[ENG-1] the fresh step"), "{started}");
    assert!(w.comments_on("ENG-3").is_empty());
    assert_eq!(w.labels_of("ENG-3"), ["bug"]);
    drop(w);
    let told: Vec<String> = p
        .events_of("issue")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["issue"].as_str().unwrap(),
                e["action"].as_str().unwrap()
            )
        })
        .collect();
    assert!(told.contains(&"ENG-1 delivered".to_string()), "{told:?}");

    // Again: nothing new (delivered claims, hank:done).
    let o = linear_watch(
        &p,
        &fake,
        &["--label", "hank", "--once", "--deliver", "branch"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("nothing to take"), "{err}");
}

#[test]
fn a_linear_dry_run_says_per_item_why_and_waits_out_ratelimited_visibly() {
    let (p, remote) = project();
    let fake = linear_fake();
    {
        let mut w = fake.world.lock().unwrap();
        w.issue(4, "Tried before", "x", &["hank", "hank:failed"]);
        w.issue(5, "", "", &["hank"]);
        w.throttle = 1;
    }
    let o = linear_watch(&p, &fake, &["--label", "hank", "--dry-run"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("the tracker's rate budget is spent; waiting until"),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    for line in [
        "ENG-1 Add the alpha file\twould take\t1 item(s) → hank/ENG-1-add-the-alpha-file",
        "ENG-2 Beta work\twould take\t2 item(s) → hank/ENG-2-beta-work",
        "ENG-4 Tried before\tnot taken: labelled hank:failed: remove the label to let hank try again",
        "ENG-5 \tnot taken: it has no title and no text: write what should be done in it",
    ] {
        assert!(out.contains(line), "{line:?} in\n{out}");
    }
    assert!(!out.contains("ENG-3"), "{out}");
    assert!(claim_refs(&remote).is_empty(), "a dry run claims nothing");
    assert!(fake.world.lock().unwrap().comments.is_empty());
    // The RATELIMITED answer, then the listing again.
    assert_eq!(fake.requests().len(), 2);
}

fn jira_fake() -> Served<fake_trackers::Jira> {
    let mut w = fake_trackers::Jira {
        auth: JIRA_AUTH.into(),
        ..Default::default()
    };
    w.issue(
        "PROJ-1",
        "Add the alpha file",
        adf(&["Two steps:"], &["first step", "second step"]),
        &["hank"],
    );
    w.issue("PROJ-2", "Closed already", adf(&["x"], &[]), &["hank"]);
    w.issues[1]["category"] = "done".into();
    w.issue("PROJ-3", "Not for hank", adf(&["y"], &[]), &["bug"]);
    Served::start(w, fake_trackers::jira)
}

#[test]
fn jira_issues_become_tasks_with_one_document_comment_labels_and_a_transition() {
    let (p, remote) = project();
    let fake = jira_fake();
    fake.world.lock().unwrap().throttle = 1;
    let o = jira_watch(
        &p,
        &fake,
        &["--label", "hank", "--once", "--deliver", "branch"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("the tracker's rate budget is spent; waiting until"),
        "a 429 is waited out visibly: {err}"
    );
    assert_eq!(claim_refs(&remote), ["refs/hank/claims/jira-PROJ-1"]);
    let branch = "hank/PROJ-1-add-the-alpha-file";
    assert!(
        git(&remote, &["branch", "--list", "hank/*"]).contains(branch),
        "{err}"
    );
    let seen = git(&remote, &["show", &format!("{branch}:seen.txt")]);
    assert_eq!(
        seen.trim(),
        "linear:none jira:none",
        "the agent saw a credential"
    );
    let w = fake.world.lock().unwrap();
    let comments = w.comments_on("PROJ-1");
    assert_eq!(comments.len(), 1, "{comments:?}");
    let v = versions(&comments[0]);
    assert!(v[0].starts_with("hank is working on this issue"), "{v:?}");
    assert!(
        v[0].contains("[PROJ-1] first step") && v[0].contains("[PROJ-1] second step"),
        "the task list of the description is the task's items: {v:?}"
    );
    let last = v.last().unwrap();
    assert!(last.contains("hank delivered this issue"), "{last}");
    assert!(!last.contains("**") && !last.contains("<!--"), "{last}");
    let labels = w.labels_of("PROJ-1");
    assert!(labels.iter().any(|l| l == "hank:done"), "{labels:?}");
    assert!(!labels.iter().any(|l| l == "hank:working"), "{labels:?}");
    assert_eq!(w.transitions, [("PROJ-1".to_string(), "21".to_string())]);
    assert!(w.comments_on("PROJ-2").is_empty() && w.comments_on("PROJ-3").is_empty());
}

#[test]
fn a_refused_or_missing_credential_names_the_tracker_and_what_to_set_and_claims_nothing() {
    let (p, remote) = project();
    let fake = jira_fake();
    fake.world.lock().unwrap().auth = "Basic something-else".into();
    let o = jira_watch(
        &p,
        &fake,
        &["--label", "hank", "--once", "--deliver", "branch"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("at Jira (REST at http://127.0.0.1:")
            && err.contains("HTTP 401")
            && err.contains("check JIRA_EMAIL / JIRA_API_TOKEN"),
        "{err}"
    );
    assert!(!err.contains("tok\n") && !err.contains("dEB0"), "{err}");
    assert!(claim_refs(&remote).is_empty());

    let o = p
        .cmd()
        .args([
            "watch",
            "--tracker",
            "linear",
            "--once",
            "--deliver",
            "branch",
        ])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--tracker linear: LINEAR_API_KEY is not set"),
        "{err}"
    );
    let o = p
        .cmd()
        .args(["watch", "--tracker", "youtrack"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("expects one of github, gitlab, linear, jira, trello, plane, shortcut"),
        "{err}"
    );
    assert!(claim_refs(&remote).is_empty());
}

/// `hank watch --tracker KIND --label L --once --deliver branch` with `env`.
fn watch_with(p: &Project, kind: &str, label: &str, env: &[(&str, String)]) -> Output {
    let mut c = p.cmd();
    c.args([
        "watch",
        "--tracker",
        kind,
        "--label",
        label,
        "--once",
        "--deliver",
        "branch",
    ]);
    for (k, v) in env {
        c.env(k, v);
    }
    with_identity(&mut c).output().expect("hank watch")
}

/// The shared asserts of a delivered item: its claim ref and branch on the remote, the
/// credentials never in the agent's environment, one comment whose bodies went from started
/// to delivered without the hidden marker.
fn assert_delivered(
    remote: &Path,
    kind: &str,
    key: &str,
    branch: &str,
    versions: &[String],
    err: &str,
) {
    assert!(
        claim_refs(remote).contains(&format!("refs/hank/claims/{kind}-{key}")),
        "{:?}\n{err}",
        claim_refs(remote)
    );
    assert!(
        git(remote, &["branch", "--list", "hank/*"]).contains(branch),
        "{branch}\n{err}"
    );
    let seen = git(remote, &["show", &format!("{branch}:seen.txt")]);
    assert_eq!(
        seen.trim(),
        "linear:none jira:none",
        "the agent saw a credential"
    );
    assert!(versions.len() >= 2, "{versions:?}");
    assert!(
        versions[0].contains("hank is working on this issue"),
        "{versions:?}"
    );
    let last = versions.last().unwrap();
    assert!(last.contains("hank delivered this issue"), "{last}");
    assert!(!versions.iter().any(|v| v.contains("<!--")), "{versions:?}");
}

#[test]
fn trello_cards_with_the_label_or_in_the_list_are_taken_and_a_done_card_moves() {
    let (p, remote) = project();
    let auth = "OAuth oauth_consumer_key=\"k1\", oauth_token=\"t1\"";
    let mut w = fake_trackers::Trello {
        auth: auth.into(),
        lists: vec![
            ("list-todo".into(), "Ready for hank".into()),
            ("list-backlog".into(), "Backlog".into()),
            ("list-done".into(), "Done".into()),
        ],
        ..Default::default()
    };
    w.card("AbC12xYz", "Add the alpha file", "list-todo", &[]);
    w.card("QrS34tUv", "Not for hank", "list-backlog", &["bug"]);
    let fake = Served::start(w, fake_trackers::trello);
    let env = [
        ("TRELLO_KEY", "k1".to_string()),
        ("TRELLO_TOKEN", "t1".to_string()),
        ("TRELLO_BOARD", "b1".to_string()),
        ("TRELLO_DONE_LIST", "Done".to_string()),
        ("TRELLO_API_URL", format!("{}/1", fake.url())),
    ];
    let o = watch_with(&p, "trello", "Ready for hank", &env);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let w = fake.world.lock().unwrap();
    let comments = w.comments_on("AbC12xYz");
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert_delivered(
        &remote,
        "trello",
        "AbC12xYz",
        "hank/AbC12xYz-add-the-alpha-file",
        &versions(&comments[0]),
        &err,
    );
    let labels = w.labels_of("AbC12xYz");
    assert_eq!(labels, ["hank:done"], "{labels:?}");
    assert_eq!(w.get("AbC12xYz")["idList"], "list-done");
    assert!(w.comments_on("QrS34tUv").is_empty());
}

#[test]
fn plane_issues_are_keyed_by_the_project_identifier_and_move_to_started() {
    let (p, remote) = project();
    let mut w = fake_trackers::Plane {
        key: "plane_api_fake".into(),
        ..Default::default()
    };
    w.issue(
        42,
        "Add the alpha file",
        r#"<p>Two steps:</p><ul data-type="taskList"><li data-checked="false" data-type="taskItem"><p>first step</p></li></ul>"#,
        &["hank"],
        "st-todo",
    );
    w.issue(43, "Finished", "<p>x</p>", &["hank"], "st-done");
    w.issue(44, "Not for hank", "<p>y</p>", &["bug"], "st-todo");
    let fake = Served::start(w, fake_trackers::plane);
    let env = [
        ("PLANE_API_KEY", "plane_api_fake".to_string()),
        ("PLANE_WORKSPACE", "acme".to_string()),
        ("PLANE_PROJECT", "p1".to_string()),
        ("PLANE_URL", fake.url()),
    ];
    let o = watch_with(&p, "plane", "hank", &env);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let w = fake.world.lock().unwrap();
    let comments = w.comments_on(42);
    assert_eq!(comments.len(), 1, "{comments:?}");
    let v: Vec<String> = versions(&comments[0]);
    assert_delivered(
        &remote,
        "plane",
        "WEB-42",
        "hank/WEB-42-add-the-alpha-file",
        &v,
        &err,
    );
    assert!(
        v[0].starts_with("<p>hank is working"),
        "HTML paragraphs: {v:?}"
    );
    assert!(v[0].contains("[WEB-42] first step"), "{v:?}");
    let labels = w.labels_of(42);
    assert!(
        labels.contains(&"hank:done".to_string()) && !labels.contains(&"hank:working".to_string()),
        "{labels:?}"
    );
    assert_eq!(w.get(42)["state"], "st-doing");
    assert!(w.comments_on(43).is_empty() && w.comments_on(44).is_empty());
}

#[test]
fn shortcut_stories_are_keyed_sc_n_with_their_labels_written_whole() {
    let (p, remote) = project();
    let mut w = fake_trackers::Shortcut {
        token: "sc-token-fake".into(),
        ..Default::default()
    };
    w.story(
        7,
        "Add the alpha file",
        "Please add it.",
        &["hank", "frontend"],
    );
    w.story(8, "Not for hank", "", &["bug"]);
    let fake = Served::start(w, fake_trackers::shortcut);
    let env = [
        ("SHORTCUT_API_TOKEN", "sc-token-fake".to_string()),
        ("SHORTCUT_API_URL", format!("{}/api/v3", fake.url())),
    ];
    let o = watch_with(&p, "shortcut", "hank", &env);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let w = fake.world.lock().unwrap();
    let story = w.get(7);
    let comments = story["comments"].as_array().unwrap();
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert_delivered(
        &remote,
        "shortcut",
        "sc-7",
        "hank/sc-7-add-the-alpha-file",
        &versions(&comments[0]),
        &err,
    );
    assert_eq!(w.labels_of(7), ["hank", "frontend", "hank:done"]);
    assert_eq!(story["workflow_state_id"], 500000003);
    assert!(
        w.searches
            .iter()
            .all(|q| q == "label:\"hank\" !is:done !is:archived"),
        "{:?}",
        w.searches
    );
    assert!(w.get(8)["comments"].as_array().unwrap().is_empty());
}

#[test]
fn a_linear_issue_delivered_as_a_pull_request_on_the_forge_is_linked_and_said_so() {
    let (p, _remote) = project();
    let fake = linear_fake();
    let gh = crate::fake_github::FakeGitHub::start();
    gh.set(|w| w.check_runs.push(crate::deliver_loop::green_check()));
    let mut c = p.cmd();
    c.args([
        "watch",
        "--tracker",
        "linear",
        "--label",
        "hank",
        "--once",
        "--agents",
        "2",
    ])
    .env("LINEAR_API_KEY", LINEAR_KEY)
    .env("LINEAR_API_URL", format!("{}/graphql", fake.url()));
    crate::deliver::at_fake_github(&mut c, &gh);
    let o = c.output().expect("hank watch");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let heads: Vec<String> = crate::deliver::pulls(&gh)
        .iter()
        .map(|r| r.json()["head"].as_str().unwrap().to_string())
        .collect();
    assert!(
        heads.contains(&"hank/ENG-1-add-the-alpha-file".to_string()),
        "the branch named by the key: {heads:?}\n{err}"
    );
    let w = fake.world.lock().unwrap();
    let comments = w.comments_on("ENG-1");
    assert_eq!(comments.len(), 1, "{comments:?}");
    let last = versions(&comments[0]).pop().unwrap();
    assert!(
        last.contains("Pull request: https://github.com/o/r/pull/"),
        "{last}"
    );
    assert!(!last.contains("no pull request was asked"), "{last}");
    assert!(
        w.attachments
            .iter()
            .any(|(issue, url)| issue == "6f0c-uuid-1" && url.contains("/pull/")),
        "{:?}",
        w.attachments
    );
}

#[test]
fn two_watchers_on_two_clones_never_take_one_jira_issue() {
    let (p, remote) = project();
    let fake = jira_fake();
    fake.world
        .lock()
        .unwrap()
        .issue("PROJ-4", "Beta work", adf(&["Beta."], &[]), &["hank"]);
    let clone = p.home.join("clone");
    git(
        &p.home,
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    for f in [
        ".hank/PROMPT.md",
        ".hank/AGENT.md",
        ".hank/fix_plan.md",
        ".hankrc",
    ] {
        if !clone.join(f).exists() {
            std::fs::copy(p.dir.join(f), clone.join(f)).unwrap();
        }
    }
    let start = |dir: &Path| {
        let mut c = p.cmd();
        c.current_dir(dir)
            .args([
                "watch",
                "--tracker",
                "jira",
                "--label",
                "hank",
                "--once",
                "--deliver",
                "branch",
            ])
            .env("JIRA_URL", fake.url())
            .env("JIRA_EMAIL", "t@t")
            .env("JIRA_API_TOKEN", "tok")
            .stderr(std::process::Stdio::piped());
        with_identity(&mut c).spawn().unwrap()
    };
    let (a, b) = (start(&p.dir), start(&clone));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let err = format!("A:\n{}\nB:\n{}", stderr(&a), stderr(&b));
    assert_eq!(
        (a.status.code(), b.status.code()),
        (Some(0), Some(0)),
        "{err}"
    );
    for key in ["PROJ-1", "PROJ-4"] {
        assert_eq!(err.matches(&format!("{key} claimed (")).count(), 1, "{err}");
        let comments = fake.world.lock().unwrap().comments_on(key);
        assert_eq!(comments.len(), 1, "{key}: {comments:?}");
    }
    assert_eq!(
        claim_refs(&remote),
        [
            "refs/hank/claims/jira-PROJ-1",
            "refs/hank/claims/jira-PROJ-4"
        ]
    );
}

#[test]
fn an_item_closed_between_the_listing_and_its_claim_is_given_back_at_once() {
    let (p, remote) = project();
    let fake = linear_fake();
    fake.world.lock().unwrap().close_on_read = Some("ENG-1".into());
    let o = linear_watch(
        &p,
        &fake,
        &["--label", "hank", "--once", "--deliver", "branch"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("ENG-1 not taken: it was closed or removed since it was listed"),
        "{err}"
    );
    // Its claim was released; ENG-2 was worked as usual.
    assert_eq!(claim_refs(&remote), ["refs/hank/claims/linear-ENG-2"]);
    let w = fake.world.lock().unwrap();
    assert!(w.comments_on("ENG-1").is_empty());
    assert!(!w.labels_of("ENG-1").iter().any(|l| l.starts_with("hank:")));
    assert_eq!(w.comments_on("ENG-2").len(), 1);
    drop(w);
    let released: Vec<Value> = p
        .events_of("issue")
        .into_iter()
        .filter(|e| e["issue"] == "ENG-1")
        .collect();
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0]["action"], "released");
}
