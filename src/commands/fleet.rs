//! `hank fleet`: the plan's tasks in parallel ([`crate::fleet`]); `--dry-run` prints the tasks
//! and their waves; `--monitor` runs the supervisor in tmux with every running task's live
//! output and the dashboard ([`crate::monitor::tmux`]); `hank fleet status [--json]` prints
//! `.hank/fleet.json`; `hank fleet plan` and `hank fleet run-task` (the fleet as CI jobs) are
//! in [`super::fleet_ci`].

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use crate::cli::{FleetAction, FleetArgs};
use crate::error::{HankError, Result};
use crate::fleet::{self, Options};
use crate::policy::fleet as rules;
use crate::settings;

use super::context::{Project, parse_agents, run_flags};

/// The integration branch when `--into` is not given.
const DEFAULT_INTO: &str = "hank/fleet";

/// `hank fleet clean`.
fn clean(root: &Path) -> Result<u8> {
    let (removed, dir) = fleet::clean(root)?;
    if removed == 0 {
        outln!(
            "hank: no worktrees kept for the next fleet in {}",
            dir.display()
        );
    } else {
        outln!(
            "hank: removed {removed} worktree{} kept for the next fleet (in {})",
            if removed == 1 { "" } else { "s" },
            dir.display()
        );
    }
    Ok(0)
}

/// `hank fleet` (its CI jobs are [`super::fleet_ci`]), in the project found from here.
pub(crate) fn run_checked(a: &FleetArgs) -> Result<u8> {
    let project = Project::locate()?;
    let root = project.root().to_path_buf();
    match &a.action {
        Some(FleetAction::Status { json }) => return status(&root, *json),
        // Dispatched to `fleet_ci` by `lib.rs`.
        Some(FleetAction::Plan(_) | FleetAction::RunTask(_)) => {}
        Some(FleetAction::Clean) => return clean(&root),
        None => {}
    }
    let agents = parse_agents(&a.agents)?;
    let flags = run_flags(&a.run_flags, "hank fleet")?;
    let run = flags.run;
    // `--monitor` is a fleet flag and a `hank run` flag: either place works.
    let monitor = a.monitor || run.monitor;
    let monitor_exit = a.monitor_exit || run.monitor_exit;
    if monitor_exit && !monitor {
        return Err(HankError::usage(
            "--monitor-exit goes with --monitor (it closes the tmux layout when the fleet ends)",
        ));
    }
    // (A dry run runs nothing, so there is nothing to watch: it is printed without tmux.)
    if monitor && !(a.dry_run || run.flags.dry_run) {
        crate::monitor::tmux::require_tmux_for(crate::monitor::tmux::Layout::Fleet)?;
    }
    // Each task's run has no terminal to warn in: refused there, so refused here first.
    if std::env::var("CLAUDECODE").ok().as_deref().map(str::trim) == Some("1") && !run.force {
        return Err(HankError::usage_hint(
            "hank fleet is running inside a Claude Code session (CLAUDECODE=1): every task's \
             agent would share that session's usage limits and windows",
            "run it from a plain terminal, or pass --force to run the tasks nested anyway",
        ));
    }
    crate::approval::require(&root, run.accept_config, "hank fleet")?;
    // Its merges and deliveries run git on the project: a run for the approval model (a hook
    // planted in the shared git directory meanwhile is pending at its end).
    let _recorded = crate::approval::record(&root, "hank fleet")?;
    let s = settings::load(&run.flags, &root)?;
    // Every task's run would refuse an unknown agent: refused once, here, before any starts.
    project.known_agents(&s)?;
    // Flag > environment > .hankrc > default (the settings resolve the last three).
    let max_merge_attempts = match a.max_merge_attempts.as_deref() {
        None => s.max_merge_attempts.value,
        Some(v) => match v.trim().parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(HankError::usage(format!(
                    "--max-merge-attempts (MAX_MERGE_ATTEMPTS) expects a whole number ≥ 1, got {v:?}"
                )));
            }
        },
    };
    let min_free_memory = match a.min_free_memory.as_deref() {
        None => s.fleet_min_free_memory.value,
        Some(v) => settings::resolve::parse_size(v).ok_or_else(|| {
            HankError::usage(format!(
                "--min-free-memory (FLEET_MIN_FREE_MEMORY) expects a size such as 2G, 512M or a number of bytes, got {v:?}"
            ))
        })?,
    };
    let tasks =
        project.parsed_plan(&s, "the fleet's tasks come from it", rules::tasks_from_plan)?;
    let plan_path = project.plan_path();
    if tasks.is_empty() {
        return Err(HankError::usage_hint(
            format!(
                "{} has no task: no `##` section with open required items",
                plan_path.display()
            ),
            "give each independent piece of work its own `## Name` section",
        ));
    }
    let waves = rules::waves(&tasks).map_err(HankError::usage)?;
    // A workspace (issue 51): the plan's `repos:` checked, every repository a task changes
    // fit to start from, before any task starts.
    let workspace = crate::workspace::check_before_start(&root, &tasks)?;
    let into = a.into.clone().unwrap_or_else(|| DEFAULT_INTO.to_string());
    // A fleet that merged every task of this plan is finished: its work (and the plan's
    // ticks) is on the integration branch, not here yet.
    if let Some(done) = finished_fleet(&root, &tasks)? {
        errln!(
            "hank: the fleet is finished: every task of the plan is merged into {done} (the plan here shows them open until that branch is merged)"
        );
        errln!("hank: next: {}", next_step(&root, &done));
        errln!("hank: to run the plan's tasks again anyway, remove .hank/fleet.json first");
        return Ok(crate::exit::OK);
    }
    // A fleet that merged every task but whose delivery stopped part-way (the forge refused
    // the pull request, the checks could not be read, Ctrl-C): that delivery is finished from
    // its record, as `hank deliver` does, not started again.
    if let Some(rec) = open_fleet_delivery(&root, &into, &tasks)? {
        errln!("hank: fleet: every task is merged into {into}; finishing its delivery");
        let store = crate::store::Store::new(&root);
        let _lock = super::lock_or_hint(&store, "finish the fleet's delivery")?;
        let opts = crate::deliver::outside::Opts::default();
        let code = crate::deliver::outside::resume(&root, &store, &s, opts, rec)?.code;
        if code == crate::exit::OK {
            fleet::mark_done(&root)?;
        }
        return Ok(code);
    }
    // The same for a change set across a workspace (issue 51): resumed from its record.
    if workspace.as_ref().is_some_and(|w| w.is_multi())
        && fleet::read(&root)?.is_some_and(|f| f.into == into && all_merged(&f, &tasks))
        && crate::deliver::change_set::load(&root).is_some_and(|c| c.resumable() && c.into == into)
    {
        errln!("hank: fleet: every task is merged into {into}; finishing its change set");
        let store = crate::store::Store::new(&root);
        let _lock = super::lock_or_hint(&store, "finish the fleet's change set")?;
        let opts = crate::deliver::outside::Opts::default();
        let code = crate::deliver::outside::last_run(&root, &store, &s, opts, false)?.code;
        if code == crate::exit::OK {
            fleet::mark_done(&root)?;
        }
        return Ok(code);
    }
    let verify = if run.flags.no_verify {
        None
    } else {
        s.verify_command.value.clone()
    };
    if a.dry_run || run.flags.dry_run {
        return dry_run(
            &tasks,
            &waves,
            agents,
            &into,
            verify.as_deref(),
            &a.run_flags,
        );
    }
    // A workspace of several repositories runs each task across the ones it names (issue
    // 51); a workspace of one other repository is still refused, as before.
    if let Some(ws) = workspace.as_ref().filter(|ws| !ws.is_multi()) {
        crate::workspace::require_project_only(&root, ws, &tasks)?;
    }
    let checkout = crate::git::Checkout::at(&root);
    if checkout
        .git()
        .read(&["rev-parse", "--verify", "HEAD"])
        .is_err()
    {
        return Err(HankError::usage_hint(
            format!("{} is not a git repository with a commit", root.display()),
            "hank fleet runs each task in a git worktree: `git init` and commit first",
        ));
    }
    project.refuse_dirty_tree(a.allow_dirty)?;
    // In a workspace of several repositories the fleet delivers one change set (issue 51).
    let deliver = match workspace.as_ref().filter(|w| w.is_multi()) {
        Some(ws) => {
            let d = fleet::deliver::FleetDelivery::of_workspace(&s, ws, &tasks)?;
            if matches!(d, fleet::deliver::FleetDelivery::ChangeSet { .. }) {
                crate::workspace::refuse_without_push(&root, ws, &tasks)?;
            }
            d
        }
        None => fleet::deliver::FleetDelivery::of(&s, &root, a.into.is_some())?,
    };
    if monitor {
        // Everything `hank fleet` would refuse was refused above, in the user's terminal,
        // before any tmux session exists; so is a fleet already running here.
        if fleet::control::fleet_running(&root) {
            return Err(HankError::usage_hint(
                format!("another hank fleet runs for {}", root.display()),
                "watch it with `hank monitor --live` (its tasks' live output) and `hank monitor`",
            ));
        }
        return crate::monitor::launch_fleet_tmux(&monitor_forwarded(a), &root, !monitor_exit);
    }
    let opts = Options {
        deliver,
        agents,
        into,
        min_free_memory,
        max_merge_attempts,
        run_flags: a.run_flags.clone(),
        verify,
        verify_timeout: s.verify_timeout.value,
        watched: crate::approval::watched_files(&root, &s),
        limits: s.budget_limits(),
        max_cost_usd: s.max_cost_usd.value,
        max_runtime: s.max_runtime.value,
        window_limits: s.max_window_percent.value.clone(),
        json: a.json || run.flags.json,
        exit_at_usage_limit: s.on_usage_limit.value
            == crate::policy::decide::UsageLimitPolicy::Exit,
        keep_worktrees: s.fleet_keep_worktrees.value,
        retry: a
            .retry
            .as_deref()
            .map(|t| Some(t.trim().to_owned()).filter(|t| !t.is_empty())),
    };
    let _notify = crate::notify::install(
        &s,
        crate::policy::time::Clock::now(&crate::clock::SystemClock::from_env()?),
    );
    let code = fleet::run(&root, tasks, &opts)?;
    if code == crate::exit::OK {
        errln!("hank: fleet: next: {}", next_step(&root, &opts.into));
    } else if code == crate::exit::HALTED
        && crate::deliver::change_set::load(&root)
            .is_some_and(|c| c.into == opts.into && c.state == crate::store::schema::SetState::Red)
    {
        // Every task merged; a pull request of its change set went red.
        errln!(
            "hank: fleet: next: fix the integration branch of each repository named above (the findings are in .hank/change-set.json), then `hank deliver` pushes it and waits for the checks again"
        );
    } else if code == crate::exit::HALTED {
        errln!(
            "hank: fleet: next: once the cause is fixed, `hank fleet --retry` queues the failed tasks again on their kept branches (`--retry TASK`: one of them)"
        );
    }
    Ok(code)
}

/// Whether the fleet of `file` merged every one of `tasks`.
fn all_merged(file: &crate::store::schema::FleetFile, tasks: &[rules::TaskSpec]) -> bool {
    tasks.iter().all(|task| {
        file.tasks
            .iter()
            .any(|t| t.name == task.name && t.state() == rules::TaskState::Merged)
    })
}

/// The integration branch of a finished fleet that merged every one of `tasks`, if any.
fn finished_fleet(root: &Path, tasks: &[rules::TaskSpec]) -> Result<Option<String>> {
    let Some(file) = fleet::read(root)? else {
        return Ok(None);
    };
    let done = file.state == "done" && !file.into.is_empty() && all_merged(&file, tasks);
    Ok(done.then(|| file.into.clone()))
}

/// The open delivery record of the fleet into `into` whose every one of `tasks` is merged.
fn open_fleet_delivery(
    root: &Path,
    into: &str,
    tasks: &[rules::TaskSpec],
) -> Result<Option<crate::store::schema::Delivery>> {
    let Some(file) = fleet::read(root)? else {
        return Ok(None);
    };
    if file.into != into || !all_merged(&file, tasks) {
        return Ok(None);
    }
    Ok(crate::deliver::record::load(root).filter(|r| r.fleet && r.resumable() && r.branch == into))
}

/// What to do with a finished fleet's work: its pull request when one was opened for the
/// integration branch `into`, else the merge of that branch.
fn next_step(root: &Path, into: &str) -> String {
    // A change set's pull requests, in the order they are to be merged.
    if let Some(set) = crate::deliver::change_set::load(root).filter(|c| c.into == into) {
        let refs: Vec<String> = set
            .repos
            .iter()
            .filter_map(|r| r.pr_url.as_deref().map(crate::sanitize::line))
            .collect();
        if !refs.is_empty() {
            return format!(
                "review and merge the change set's pull requests, in this order: {}",
                refs.join(", ")
            );
        }
    }
    let pr = crate::fsread::read(
        &root.join(".hank").join(crate::deliver::DELIVERY_FILE),
        crate::fsread::CONFIG_LIMIT,
        crate::fsread::Follow::No,
    )
    .ok()
    .and_then(|b| serde_json::from_slice::<crate::store::schema::Delivery>(&b).ok())
    .filter(|d| d.branch == into)
    .and_then(|d| d.pr_url);
    match pr {
        Some(url) => format!(
            "review and merge the pull request {} (the fleet's work on {into})",
            crate::sanitize::line(&url)
        ),
        None => format!(
            "`git merge {into}` brings the fleet's work (and the plan's ticks) into this branch"
        ),
    }
}

/// The `hank fleet` arguments of the `--monitor` loop pane: the fleet's own flags, then the
/// `hank run` flags for the tasks, without `--monitor` and `--monitor-exit`.
fn monitor_forwarded(a: &FleetArgs) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["--agents".into(), a.agents.clone().into()];
    for (flag, value) in [
        ("--into", &a.into),
        ("--min-free-memory", &a.min_free_memory),
        ("--max-merge-attempts", &a.max_merge_attempts),
    ] {
        if let Some(v) = value {
            out.push(flag.into());
            out.push(v.clone().into());
        }
    }
    if a.json {
        out.push("--json".into());
    }
    if a.allow_dirty {
        out.push("--allow-dirty".into());
    }
    out.extend(
        a.run_flags
            .iter()
            .filter(|f| {
                !matches!(
                    f.as_str(),
                    "--monitor" | "--monitor-exit" | "--record-exit-code"
                )
            })
            .map(Into::into),
    );
    out
}

fn dry_run(
    tasks: &[rules::TaskSpec],
    waves: &[Vec<String>],
    agents: usize,
    into: &str,
    verify: Option<&str>,
    flags: &[String],
) -> Result<u8> {
    let mut text = String::new();
    text.push_str(&format!(
        "# {} task(s), {} wave(s); at most {agents} at once; merged into {into}\n",
        tasks.len(),
        waves.len()
    ));
    for (i, wave) in waves.iter().enumerate() {
        text.push_str(&format!("\nwave {}:\n", i + 1));
        for name in wave {
            let Some(t) = tasks.iter().find(|t| &t.name == name) else {
                continue;
            };
            let after = if t.after.is_empty() {
                String::new()
            } else {
                format!(" (after: {})", t.after.join(", "))
            };
            let repos = if t.repos.is_empty() {
                String::new()
            } else {
                format!(" in {}", t.repos.join(", "))
            };
            text.push_str(&format!(
                "  {}{after} — branch hank/{}{repos}, {} open item(s)\n",
                crate::sanitize::line(&t.name),
                t.slug,
                t.open_items.len()
            ));
            for item in &t.open_items {
                text.push_str(&format!("    - [ ] {}\n", crate::sanitize::line(item)));
            }
        }
    }
    let mut cmd = vec!["hank".to_string(), "run".to_string()];
    cmd.extend(flags.iter().map(|f| crate::report::shell_quote(f)));
    text.push_str(&format!(
        "\neach task runs: {} (in its worktree)\nafter each task: merge, then {}\n",
        cmd.join(" "),
        verify.map_or_else(
            || "no check (no VERIFY_COMMAND)".to_string(),
            |v| format!("VERIFY_COMMAND: {v}")
        )
    ));
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| HankError::io("failed to write to", "standard output", e))?;
    Ok(crate::exit::OK)
}

fn status(root: &Path, json: bool) -> Result<u8> {
    let Some((file, alive)) = fleet::read_live(root)? else {
        return Err(HankError::usage_hint(
            format!(
                "no fleet has run in {} (no .hank/fleet.json)",
                root.display()
            ),
            "start one with `hank fleet`",
        ));
    };
    let stale = file.is_stale(alive);
    let text = if json {
        // As `hank status --json`: `running`, `stale`, and a stale file's state
        // `not_running` (what it said kept in `last_state`), holding nothing back.
        let v = serde_json::to_value(&file)
            .map_err(|e| HankError::Internal(format!("cannot encode the fleet status: {e}")))?;
        let mut v = super::view::json_view(v, alive, stale);
        if stale && let Some(obj) = v.as_object_mut() {
            obj.insert("held".into(), serde_json::Value::Null);
        }
        format!("{v}\n")
    } else {
        let file = file.shown(alive);
        let mut s = format!(
            "fleet: {} — into {}, {} call(s) in the last hour{}\n",
            if file.state.is_empty() {
                "unknown".to_owned()
            } else {
                file.state.replace('_', " ")
            },
            file.into,
            file.calls_in_window,
            if file.max_calls_per_hour > 0 {
                format!(" of {}", file.max_calls_per_hour)
            } else {
                String::new()
            }
        );
        if stale {
            let note = file.stale_note(&jiff::tz::TimeZone::system());
            s.push_str(&format!("  {note}\n"));
        }
        s.push_str(&budget_line(&file));
        for t in &file.tasks {
            s.push_str(&format!(
                "  {:<24} {:<10} {:<24} loops {:<4} ${:<8.2} {}\n",
                crate::sanitize::line(&t.name),
                t.state().as_str(),
                t.branch,
                t.loops,
                t.cost_usd,
                crate::sanitize::line(&t.message)
            ));
            if !t.repos.is_empty() {
                s.push_str(&format!(
                    "    repositories: {}\n",
                    crate::sanitize::line(&t.repos.join(", "))
                ));
            }
            if let Some(i) = &t.issue {
                s.push_str(&format!(
                    "    issue: {} {}\n",
                    i.number,
                    crate::sanitize::line(&i.url)
                ));
            }
            if t.state().is_active()
                && let Some(wt) = &t.worktree
            {
                s.push_str(&format!(
                    "    watch: hank monitor --dir {}\n",
                    crate::report::shell_quote(wt)
                ));
            }
        }
        if let Some((n, dir, bytes)) = fleet::kept_worktrees(root) {
            s.push_str(&format!(
                "kept worktrees: {n} in {}, {} (`hank fleet clean` removes them; FLEET_KEEP_WORKTREES=false keeps none)\n",
                dir.display(),
                bytes.map_or_else(
                    || "more than 2,000,000 files".to_string(),
                    super::view::human_bytes
                )
            ));
        }
        s
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| HankError::io("failed to write to", "standard output", e))?;
    Ok(crate::exit::OK)
}

/// The fleet's shared budget: cost, tokens, runtime, and why nothing starts.
fn budget_line(file: &crate::store::schema::FleetFile) -> String {
    let mut parts = vec![format!("cost ${:.2}", file.cost_usd)];
    if file.max_cost_usd > 0.0 {
        parts[0].push_str(&format!(" of ${:.2}", file.max_cost_usd));
    }
    let mut tokens = format!("{} token(s) in the last hour", file.tokens_in_window);
    if file.max_tokens_per_hour > 0 {
        tokens.push_str(&format!(" of {}", file.max_tokens_per_hour));
    }
    parts.push(tokens);
    if let Some(d) = file.deadline {
        parts.push(format!("MAX_RUNTIME ends {}", crate::report::short_time(d)));
    }
    let mut s = format!("budget: {}\n", parts.join(", "));
    if file.paused {
        s.push_str("paused: by hank ctl pause; no task starts until hank ctl resume\n");
    }
    if let Some(why) = &file.held {
        s.push_str(&format!("held: {}\n", crate::sanitize::line(why)));
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::settings::resolve::parse_size;

    /// The loop pane's `hank fleet` gets the fleet's flags first, then the tasks' `hank run`
    /// flags, without the monitor's own.
    #[test]
    fn monitor_forwards_the_fleet_and_run_flags() {
        use clap::Parser;
        let parse = |args: &[&str]| {
            let cli = crate::cli::Cli::try_parse_from(
                std::iter::once("hank")
                    .chain(std::iter::once("fleet"))
                    .chain(args.iter().copied()),
            )
            .unwrap();
            match cli.command {
                Some(crate::cli::Command::Fleet(a)) => a,
                other => panic!("not a fleet command: {other:?}"),
            }
        };
        let cases: [(&[&str], &[&str]); 4] = [
            (&["--monitor"], &["--agents", "2"]),
            (
                &[
                    "--monitor",
                    "--monitor-exit",
                    "--agents",
                    "3",
                    "--calls",
                    "4",
                ],
                &["--agents", "3", "--calls", "4"],
            ),
            (
                &[
                    "--agents",
                    "3",
                    "--into",
                    "int",
                    "--json",
                    "--monitor",
                    "--max-loops",
                    "2",
                    "--monitor-exit",
                    "--model",
                    "it's",
                ],
                &[
                    "--agents",
                    "3",
                    "--into",
                    "int",
                    "--json",
                    "--max-loops",
                    "2",
                    "--model",
                    "it's",
                ],
            ),
            (
                &[
                    "--min-free-memory",
                    "1G",
                    "--max-merge-attempts",
                    "4",
                    "--monitor",
                    "--live",
                ],
                &[
                    "--agents",
                    "2",
                    "--min-free-memory",
                    "1G",
                    "--max-merge-attempts",
                    "4",
                    "--live",
                ],
            ),
        ];
        for (given, want) in cases {
            let got: Vec<String> = super::monitor_forwarded(&parse(given))
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            assert_eq!(got, want, "{given:?}");
        }
    }

    #[test]
    fn sizes() {
        for (t, want) in [
            ("2G", Some(2u64 << 30)),
            ("512M", Some(512 << 20)),
            ("64k", Some(64 << 10)),
            ("100", Some(100)),
            ("G", None),
            ("x", None),
            ("-1M", None),
        ] {
            assert_eq!(parse_size(t), want, "{t}");
        }
    }
}
