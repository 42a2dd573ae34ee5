//! The loop's rules, as pure functions and state machines over plain data. **\[pure\]**
//!
//! Nothing here reads the clock, touches files or spawns processes: time, file contents and
//! facts about the run are arguments. The compiler keeps it so: `clippy.toml` disallows the
//! clock, `std::fs`, `std::process` and tokio, and this module denies those lints.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `secrets` (the one list of secret-looking names `why_named`/`looks_like_secret`, content
//! `why_content` with the redactor's `token_shape`, `DELIVER_ALLOW_FILES` globs `allowed`, the
//! refusal text), `deliver`'s `defuse_references`/`fenced` (the agent's text in PR bodies: closing
//! keywords, mentions, HTML, images), `breaker` (productive error results hold the streaks),
//! `budget`, `charge` (what a call is charged: reported cost, estimate, token prices; nothing for a
//! call that cannot have reached the API — no stdout, ended within 2 s), `crash` (`agent_crashed`:
//! the same crash twice in a row, the fix to try by the crash's line, the exit message), `decide`,
//! `fixplan`, `session`, `startup` (startup hangs: 2 free retries, the third counts), `fleet`
//! (tasks from the plan's `##` sections, `(after: …)`, waves, admission, the window forecast
//! `window_admission`/`rise_per_task`, the fleet-wide budget `fleet_budget`, the task state machine
//! `next_state`, ticking; `fleet/machine.rs`: the whole supervision as `Fleet::on(Event, now) ->
//! Vec<Command>` — admission by agents/memory/windows (the forecast's first readings kept), waves,
//! a finished task's commit and the reuse of its worktree (the next start waits for a worktree
//! being freed), the merge queue (one at a time, a handed-back task first, `last` attempt),
//! blocked-after-failed, the fleet's runtime/cost stop, `hank ctl` pause/stop, Ctrl-C (SIGTERM,
//! SIGKILL after the grace or a second signal; `wake_at`: the machine's own next wake-up — the
//! grace's end, MAX_RUNTIME's deadline — for the driver's wait), adoption after a restart (a
//! committed task merged without running again), `Event::Retry` (`hank fleet --retry [TASK]`:
//! failed tasks — `retry_targets` — pending again on their kept branches, the tasks they blocked
//! too; every failure message names it), `end`/`close`; `replay` of a `HANK_FLEET_RECORD`
//! recording; table tests and a recorded real run in `fleet/machine/tests.rs`;
//! `plan_view`/`standings`: the plan as a CI job sees it — ticked sections are merged tasks — and
//! why an open task is or is not listed), `verification` (a run's VERIFY_COMMAND state: the
//! baseline, the per-loop check, a claim judged, drift of required items, the `.hankrc` edit
//! warning, the exit summary), `progress` (facts type), `time` (`Clock`), `review` (issue 39:
//! `REVIEW_MAX_ROUNDS`/`REVIEW_MAX_SHARE` — `before_round`, `after_verdict` —, the reviewer's
//! prompt, the capped diff, the worker's note with blockers only, the PR body's Review section, the
//! `review_rejected` note), `run` (the loop as a state machine: `Run::next(now) -> Step`,
//! `Run::on(Fact, now)`; every ordering rule of the loop, table-tested on a fixed clock;
//! `run/wait.rs`: what ends a wait — `Waited`, `Run::woke` (its time, MAX_RUNTIME), `Run::wait_cut`
//! (commands)), `deliver` (branch names, the PR's evidence body, the fail-closed CI verdict, CI /
//! review / pre-push feedback for the agent; `deliver/change_set.rs` a workspace's change set:
//! its record and machine), `notify` (NOTIFY targets, NOTIFY_EVENTS, which events
//! become messages and their text: waits, a wait for answers with the questions, circuit, rejected
//! done, agent switch, fleet task merged/failed, delivery, run end), `control` (`hank ctl`
//! commands, the signed `hank1` remote format: HMAC-SHA256, skew, nonce; `steer_fleet`: what a
//! command does to a running fleet — paused/stopping/sets, the tasks it is forwarded to, the
//! acknowledgement), `tracker` (`hank watch`: `choose` — which labelled issues are taken and why
//! the others are not —, the claim's lease and heartbeat, `task_of` — an issue as a fleet task
//! whose items carry `[#N]` —, the comment texts, `RateBudget` — 304s uncounted,
//! `Retry-After`/`X-RateLimit-*`, the reserve), `ci` (bounded for GitHub Actions: the job's
//! `--max-runtime` default, a wait past the job's end stops it), `bash_rules` (the one model of the
//! client's `Bash(…)` rule matching, see `docs/claude-contract.md`) **\[pure, clippy-enforced\]**

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod bash_rules;
pub mod breaker;
pub mod budget;
pub mod charge;
pub mod ci;
pub mod control;
pub mod crash;
pub mod decide;
pub mod deliver;
pub mod failover;
pub mod fixplan;
pub mod fleet;
pub mod notify;
pub mod progress;
pub mod receipts;
pub mod review;
pub mod run;
pub mod secrets;
pub mod session;
pub mod startup;
pub mod time;
pub mod tracker;
pub mod verification;
pub mod verify;
pub mod windows;
pub mod workspace;
