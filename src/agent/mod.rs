//! Running the agent: the argv and loop context (pure, [`argv`]), which client release it
//! is ([`client`]) and the process
//! ([`process`]): no shell, own process group, concurrent draining to the loop logs,
//! timeout and interrupt handling that never leaves a survivor.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `argv.rs` (argv, loop context, stdin prompt, which format is asked — stream-json whenever the
//! profile has it — and CLIENT_SETTINGS' `--setting-sources` **\[pure\]**), `client.rs` (client
//! version vs the tested range; the `--version` probe runs through `proc::Cmd`), `process.rs` and
//! `signals.rs` (the names the engine calls — `run`, `run_with_hook`, `Spawn`, `RunOutcome`,
//! `Marker`, `install` — re-exported from `proc/`), `call.rs` (spawn + analysis in the asked
//! format), `answer.rs` (what one answer means for the state, in the loop's order: `complete` —
//! session tokens, the charge, vetting, the login expiry; `fold` (`fold_call` with the settings'
//! configs) — startup hangs, productive errors, `State::fold`, counters; `judge` —
//! `decide::after_loop` with and without claims as `run::Answer`; `report` — the `agent_finished`
//! event and the summary block; `Call`: one call's facts for all of them **\[pure\]**), `redact.rs`

pub mod answer;
pub mod argv;
pub mod call;
pub mod chain;
pub mod client;
pub mod process;
pub mod profile;
pub mod redact;
pub mod signals;
pub mod vet;
