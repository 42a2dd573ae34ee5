//! `hank fleet plan` and `hank fleet run-task NAME`: the fleet as CI jobs, one task per job
//! in a fresh clone ([`crate::fleet::ci`] reads the remote; the rules are
//! [`crate::policy::fleet::plan_view`] and [`crate::policy::fleet::standings`]).
//!
//! `run-task` is `hank run` on one task's items, in the current checkout, on the task's branch
//! `hank/<slug>`: claim and restore `refs/hank/state/<slug>` ([`crate::handoff`]), run the loop with
//! the task's section as the plan, put the whole plan back with the task's ticked items, then
//! deliver per DELIVER (`hank deliver`) at a verified completion, or commit and push the work
//! to the task branch when it stopped (a limit, a usage window, Ctrl-C) so that the next job
//! continues it, and save the state (releasing the claim).

use std::path::Path;

use clap::Parser;
use jiff::Timestamp;

use crate::cli::{FleetPlanArgs, FleetRunTaskArgs, RunArgs, RunFlagsOnly};
use crate::clock::SystemClock;
use crate::error::{HankError, Result};
use crate::exit;
use crate::fleet::ci;
use crate::handoff::Handoff;
use crate::policy::fixplan;
use crate::policy::fleet::{self as rules, PlanView, Standing, TaskSpec};
use crate::policy::time::Clock;
use crate::settings::{self, DeliverMode, Settings};
use crate::store::schema::PlannedTask;

use super::context::Project;

fn now() -> Result<Timestamp> {
    Ok(SystemClock::from_env()?.now())
}

/// The plan of the checkout as a CI job sees it. In a workspace (issue 51) its open tasks
/// are checked as `hank fleet` checks them, and a task changing a repository other than the
/// checkout is refused: a CI job runs in the checkout alone.
fn read_view(root: &Path, s: &Settings) -> Result<PlanView> {
    let view = Project::at(root).parsed_plan(
        s,
        "the tasks come from its `##` sections",
        rules::plan_view,
    )?;
    let ws = crate::workspace::load(root)?;
    crate::policy::workspace::check_tasks(&view.open, ws.as_ref()).map_err(|e| {
        HankError::usage(format!(
            "{}: {e}",
            root.join(".hank").join("fix_plan.md").display()
        ))
    })?;
    if let Some(ws) = &ws {
        crate::workspace::require_project_only(root, ws, &view.open)?;
    }
    Ok(view)
}

/// The remote to read and write, `None` with `--remote none`; a remote the repository does
/// not have is an error naming it.
fn remote_of(root: &Path, remote: &str) -> Result<Option<String>> {
    if remote == "none" {
        return Ok(None);
    }
    if !ci::has_remote(root, remote)? {
        return Err(HankError::usage_hint(
            format!(
                "{} has no git remote {remote:?} (--remote): the task branches and state refs live there",
                root.display()
            ),
            "pass --remote NAME, or --remote none to use the checkout alone (no claim, no saved state)",
        ));
    }
    Ok(Some(remote.to_string()))
}

/// `hank fleet plan [--json]`.
pub(crate) fn plan(root: &Path, a: &FleetPlanArgs) -> Result<u8> {
    let s = settings::load(&settings::Flags::default(), root)?;
    let view = read_view(root, &s)?;
    let remote = remote_of(root, &a.remote)?;
    let (delivered, running) = match &remote {
        Some(r) => ci::remote_standing(root, r, &view, &s.optional_sections.value, now()?)?,
        None => Default::default(),
    };
    let mut ready = Vec::new();
    for (t, standing) in rules::standings(&view, &delivered, &running) {
        let name = crate::sanitize::line(&t.name);
        match standing {
            Standing::Ready => ready.push(PlannedTask {
                name: t.name.clone(),
                slug: t.slug.clone(),
                branch: ci::branch_of(&t.slug),
                after: t.after.clone(),
                items: t.open_items.clone(),
            }),
            Standing::After(missing) => errln!(
                "hank: {name} waits for {} to be merged (items ticked in {})",
                crate::sanitize::line(&missing.join(", ")),
                Project::at(root).plan_path().display()
            ),
            Standing::Delivered => errln!(
                "hank: {name} is finished on {}: waiting for its merge",
                ci::branch_of(&t.slug)
            ),
            Standing::Running(owner) => errln!(
                "hank: {name} is claimed by {}: another job runs it",
                crate::sanitize::line(&owner)
            ),
        }
    }
    if view.open.is_empty() {
        errln!("hank: every task of the plan is merged");
    }
    let text = if a.json {
        let mut j = serde_json::to_string(&ready)
            .map_err(|e| HankError::Internal(format!("cannot encode the plan: {e}")))?;
        j.push('\n');
        j
    } else {
        ready
            .iter()
            .map(|t| {
                format!(
                    "{}\t{}\t{} open item(s)\n",
                    crate::sanitize::line(&t.name),
                    t.branch,
                    t.items.len()
                )
            })
            .collect()
    };
    super::out(&text)?;
    Ok(exit::OK)
}

/// The task `name` of the checkout's plan, checked to be able to start now. `Ok(None)`: it
/// is merged already (nothing to run).
fn task_to_run(root: &Path, view: &PlanView, name: &str) -> Result<Option<TaskSpec>> {
    let Some(spec) = view.find(name) else {
        if view.is_done(name) {
            return Ok(None);
        }
        let known = view.known();
        return Err(HankError::usage_hint(
            format!(
                "{} has no task {:?}; {}",
                Project::at(root).plan_path().display(),
                crate::sanitize::line(name),
                if known.is_empty() {
                    "it has no task (no `##` section with items)".to_string()
                } else {
                    format!(
                        "its tasks are: {}",
                        crate::sanitize::line(&known.join(", "))
                    )
                }
            ),
            "name a task by its `##` heading (without `(after: …)`) or its slug; `hank fleet plan` lists the tasks that can start now",
        ));
    };
    let missing: Vec<&str> = spec
        .after
        .iter()
        .filter(|a| !view.done.contains(a))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(HankError::usage_hint(
            format!(
                "task {:?} comes after {}, not merged yet (its items are not all ticked in {})",
                crate::sanitize::line(&spec.name),
                crate::sanitize::line(&missing.join(", ")),
                Project::at(root).plan_path().display()
            ),
            "`hank fleet plan` lists the tasks that can start now",
        ));
    }
    Ok(Some(spec.clone()))
}

/// `hank run` on the current project with the given run flags: run-task's loop, handed in by
/// the dispatcher (`lib.rs`: the `hank run` command itself), so that this command names no
/// other command's file.
pub(crate) type HankRun = fn(&RunArgs) -> Result<u8>;

/// The task's loop: `hank run` ([`HankRun`]) with the job's run flags.
struct TaskRun {
    args: RunArgs,
    hank_run: HankRun,
}

/// `hank fleet run-task NAME [RUN FLAGS…]`; its loop is `hank_run`.
pub(crate) fn run_task(root: &Path, a: &FleetRunTaskArgs, hank_run: HankRun) -> Result<u8> {
    let run = RunFlagsOnly::try_parse_from(&a.run_flags)
        .map_err(|e| {
            HankError::usage(format!(
                "a `hank run` flag given to hank fleet run-task is not valid: {}",
                e.to_string().trim()
            ))
        })?
        .run;
    if run.monitor || run.flags.dry_run {
        return Err(HankError::usage_hint(
            "--monitor and --dry-run are not taken by hank fleet run-task",
            "`hank fleet plan` shows what can run; `hank monitor` watches a running task",
        ));
    }
    super::require_hank_dir(root)?;
    crate::approval::require(root, run.accept_config, "hank fleet run-task")?;
    let _recorded = crate::approval::record(root, "hank fleet run-task")?;
    let s = settings::load(&run.flags, root)?;
    let view = read_view(root, &s)?;
    let Some(spec) = task_to_run(root, &view, &a.name)? else {
        errln!(
            "hank: task {:?} is merged already (every item ticked in {}): nothing to run",
            crate::sanitize::line(&a.name),
            Project::at(root).plan_path().display()
        );
        return Ok(exit::OK);
    };
    ci::require_clean(root)?;
    ci::require_identity(root)?;
    let remote = remote_of(root, &a.remote)?;
    let owner = a
        .owner
        .clone()
        .unwrap_or_else(crate::store::portable::owner_id);
    let start = crate::deliver::current_branch(root)?;
    let branch = ci::branch_of(&spec.slug);
    // 1. The claim and the state a former job saved.
    let handoff = remote
        .as_deref()
        .map(|r| Handoff::new(root, Some(&spec.slug), r, Some(&owner)))
        .transpose()?;
    if let Some(h) = &handoff {
        let code = h.restore(None, Some(a.ttl), now()?)?;
        if code != exit::OK {
            return Ok(code);
        }
    } else {
        errln!("hank: --remote none: no claim, the state stays in this checkout");
    }
    // From here the claim is ours: every way out saves the state and releases it.
    let mut run = TaskRun {
        args: run,
        hank_run,
    };
    let outcome = run_claimed(root, &s, &mut run, &spec, remote.as_deref(), start, &branch);
    let saved = match &handoff {
        Some(h) => h.save(None, true, now()?),
        None => Ok(exit::OK),
    };
    let code = outcome?;
    match saved? {
        exit::OK => Ok(code),
        lost => Ok(lost),
    }
}

/// The branch, the loop on the task's items, the plan put back, the delivery or the work kept
/// on the task branch. The exit code is the loop's, or the delivery's after a completion.
fn run_claimed(
    root: &Path,
    s: &Settings,
    run: &mut TaskRun,
    spec: &TaskSpec,
    remote: Option<&str>,
    start: Option<String>,
    branch: &str,
) -> Result<u8> {
    let base = crate::deliver::head(root)?;
    if ci::checkout_task_branch(root, remote, branch)? {
        errln!("hank: continuing the work of {branch} saved by an earlier job");
    }
    // The branch's configuration is the agent's work of an earlier job: not used unapproved.
    let (prompt, script) = crate::approval::watched_files(root, s);
    let changed = ci::config_changed(root, &base, &prompt, script.as_deref())?;
    if !changed.is_empty() {
        if !run.args.accept_config {
            // Back where the job started, so that running it again checks the same change.
            ci::switch_back(root, start.as_deref(), &base)?;
            return Err(HankError::usage_hint(
                format!(
                    "{branch} changes hank's configuration ({}) against the commit the job started from: an agent of an earlier job may have written it, so it is not used unapproved",
                    changed.join(", ")
                ),
                format!(
                    "look at the change (`git diff {} {branch} -- FILES`) and pass --accept-config to run with it",
                    base.get(..12).unwrap_or(&base)
                ),
            ));
        }
        errln!(
            "hank: running with the configuration of {branch} ({}; --accept-config)",
            changed.join(", ")
        );
    }
    // The plan on the task branch (an earlier job may have ticked some of its items).
    let path = Project::at(root).plan_path();
    let full = s
        .read_fix_plan()
        .ok_or_else(|| HankError::usage(format!("cannot read {} on {branch}", path.display())))?;
    let here = rules::plan_view(&full, &s.optional_sections.value)
        .map_err(|e| HankError::usage(format!("{} on {branch}: {e}", path.display())))?;
    let code = match here.find(&spec.name).cloned() {
        None => {
            errln!(
                "hank: every item of task {:?} is ticked on {branch}: delivering it",
                crate::sanitize::line(&spec.name)
            );
            exit::OK
        }
        Some(task) => match run_loop(root, run, &task, &full) {
            Ok(code) => code,
            Err(e) => {
                // What the agent did before the error is kept for the next job all the same.
                let name = crate::sanitize::line(&spec.name);
                let wip = format!("hank: work in progress on task {name} (stopped by an error)");
                if let Err(k) = keep_work(root, remote, branch, &wip, &pushed_since(s, &base)) {
                    errln!("hank: warning: the work on {branch} was not kept: {k}");
                }
                return Err(e);
            }
        },
    };
    let name = crate::sanitize::line(&spec.name);
    if code == exit::OK {
        return deliver(root, s, &name, remote, start, branch, &base);
    }
    keep_work(
        root,
        remote,
        branch,
        &format!("hank: work in progress on task {name} (stopped, exit {code})"),
        &pushed_since(s, &base),
    )?;
    Ok(code)
}

/// Runs `hank run` with the task's section as `.hank/fix_plan.md`, then puts back the whole
/// plan with the items the run ticked (also when the run failed).
fn run_loop(root: &Path, run: &mut TaskRun, task: &TaskSpec, full: &str) -> Result<u8> {
    let path = Project::at(root).plan_path();
    crate::store::write_atomic(&path, rules::task_plan(task).as_bytes(), false)
        .map_err(|e| HankError::io("write", &path, e))?;
    // The delivery comes after the whole plan is back (never a commit of the task's own plan).
    run.args.flags.deliver = Some(DeliverMode::None.as_str().to_string());
    let result = (run.hank_run)(&run.args);
    let own = std::fs::read_to_string(&path).unwrap_or_default();
    let done: Vec<String> = fixplan::parse(&own, &fixplan::default_optional_sections())
        .items
        .into_iter()
        .filter(|i| i.done)
        .map(|i| i.text)
        .collect();
    let back = rules::tick_items(full, &task.name, &done);
    crate::store::write_atomic(&path, back.as_bytes(), false)
        .map_err(|e| HankError::io("write", &path, e))?;
    result
}

/// A verified completion: `hank deliver` per DELIVER (branch or pr), or with DELIVER=none the
/// work committed and pushed to the task branch (a CI job leaves nothing behind).
fn deliver(
    root: &Path,
    s: &Settings,
    name: &str,
    remote: Option<&str>,
    start: Option<String>,
    branch: &str,
    job_start: &str,
) -> Result<u8> {
    let mode = s.deliver.value;
    if mode == DeliverMode::None || remote.is_none() {
        keep_work(
            root,
            remote,
            branch,
            &format!("hank: task {name}"),
            &pushed_since(s, job_start),
        )?;
        errln!(
            "hank: task {name} finished{}; DELIVER=none: no pull request (set DELIVER=pr for one)",
            remote.map_or_else(String::new, |r| format!(
                ", its work pushed to {r} {branch}"
            ))
        );
        return Ok(exit::OK);
    }
    // `hank deliver`'s delivery, on the task branch into the branch the job started on.
    let flags = settings::Flags {
        deliver: Some(mode.as_str().to_string()),
        branch: Some(branch.to_string()),
        base: start.filter(|b| b != branch),
        ..settings::Flags::default()
    };
    let opts = crate::deliver::outside::Opts::default();
    super::context::deliver_last_run(&flags, false, opts, |_| Ok(()))
}

/// Commits what the run left on the task branch (hank's runtime files excepted) and pushes
/// the branch, so that the next job continues from it.
/// What the scan of a task branch's push leaves out (the commit the job started from) and
/// lets through (`DELIVER_ALLOW_FILES`).
fn pushed_since(s: &Settings, job_start: &str) -> (String, Vec<String>) {
    (
        job_start.to_string(),
        s.deliver_allow_files.value.clone().unwrap_or_default(),
    )
}

fn keep_work(
    root: &Path,
    remote: Option<&str>,
    branch: &str,
    message: &str,
    (job_start, allow): &(String, Vec<String>),
) -> Result<()> {
    let committed = crate::deliver::commit_all(root, branch, message)?;
    crate::deliver::outside::warn_skipped_secrets(&committed);
    if let Some(out) = &committed.refused {
        return Err(HankError::Tool(format!(
            "`git commit` on {branch} failed: {}",
            crate::sanitize::line(out.trim())
        )));
    }
    if committed.made {
        errln!("hank: committed the work on {branch}");
    }
    let Some(r) = remote else { return Ok(()) };
    // What is pushed is scanned: the commits since the job started (and not on the remote's
    // task branch), by name and content.
    let mut known = crate::deliver::scan::known_on_remote(root, r, "", branch)?;
    known.push(job_start.clone());
    let sha = crate::deliver::head(root)?;
    crate::deliver::scan::refuse_secrets(root, &sha, &known, allow, r, branch)?;
    match crate::deliver::push(root, r, branch)? {
        crate::deliver::Push::Pushed => {
            errln!("hank: pushed {branch} to {r}");
            Ok(())
        }
        crate::deliver::Push::Rejected { output } => Err(HankError::Tool(format!(
            "the push of {branch} to {r} was refused: {}",
            crate::sanitize::line(output.trim())
        ))),
    }
}
