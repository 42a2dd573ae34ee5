//! Running the agent: the argv and loop context (pure, [`argv`]), which client release it
//! is ([`client`]) and the process
//! ([`process`]): no shell, own process group, concurrent draining to the loop logs,
//! timeout and interrupt handling that never leaves a survivor.

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
