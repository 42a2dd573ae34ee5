//! The loop. (in progress)
use crate::error::{HankError, Result};
pub fn run(_a: &crate::cli::RunArgs) -> Result<u8> { Err(HankError::Other("todo".into())) }
