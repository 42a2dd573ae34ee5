//! The agent's process: spawned, streamed, timed out and stopped by the process layer
//! ([`crate::proc::agent`]); these names stay here for the engine and the agent call.

pub use crate::proc::agent::*;
