//! The loop's rules, as pure functions and state machines over plain data. **\[pure\]**
//!
//! Nothing here reads the clock, touches files or spawns processes: time, file contents and
//! facts about the run are arguments. The compiler keeps it so: `clippy.toml` disallows the
//! clock, `std::fs`, `std::process` and tokio, and this module denies those lints.

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
