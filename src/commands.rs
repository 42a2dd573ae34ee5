//! Small commands: status, circuit, reset, doctor, completions. (in progress)
use crate::cli;
use crate::error::{HankError, Result};
pub fn status(_a: &cli::StatusArgs) -> Result<u8> { Err(HankError::Other("todo".into())) }
pub fn circuit(_a: &cli::CircuitArgs) -> Result<u8> { Err(HankError::Other("todo".into())) }
pub fn reset(_w: cli::ResetWhat) -> Result<u8> { Err(HankError::Other("todo".into())) }
pub fn doctor(_a: &cli::DoctorArgs) -> Result<u8> { Err(HankError::Other("todo".into())) }
pub fn completions(_a: &cli::CompletionsArgs) -> Result<u8> { Err(HankError::Other("todo".into())) }
