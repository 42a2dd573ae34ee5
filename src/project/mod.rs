//! Project bootstrap: detection, task sources, templates, `setup`, `enable`, `enable-ci`,
//! `migrate`, `import`. (in progress)

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct SetupArgs {
    /// Name of the new project folder.
    pub name: String,
}

#[derive(Debug, Clone, Default, Args)]
pub struct EnableArgs {}

#[derive(Debug, Clone, Default, Args)]
pub struct EnableCiArgs {}

#[derive(Debug, Clone, Default, Args)]
pub struct MigrateArgs {
    /// Project folder (default: current directory).
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The PRD / spec document.
    pub file: PathBuf,
    /// Project name (default: from the file name).
    pub name: Option<String>,
}

use crate::error::{HankError, Result};

/// `hank setup NAME`.
pub fn setup(_args: &SetupArgs) -> Result<u8> {
    Err(HankError::Other("setup is being built".into()))
}
/// `hank enable`.
pub fn enable(_args: &EnableArgs) -> Result<u8> {
    Err(HankError::Other("enable is being built".into()))
}
/// `hank enable-ci`.
pub fn enable_ci(_args: &EnableCiArgs) -> Result<u8> {
    Err(HankError::Other("enable-ci is being built".into()))
}
/// `hank migrate`.
pub fn migrate(_args: &MigrateArgs) -> Result<u8> {
    Err(HankError::Other("migrate is being built".into()))
}
/// `hank import`.
pub fn import(_args: &ImportArgs) -> Result<u8> {
    Err(HankError::Other("import is being built".into()))
}
