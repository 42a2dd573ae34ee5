//! Project bootstrap: detection, task sources, templates, `setup`, `enable`, `enable-ci`,
//! `migrate`, `import`.
//!
//! | file | role |
//! |---|---|
//! | `args` | the options of `setup`, `enable`, `enable-ci`, `import`: one definition, with its clap attributes |
//! | `templates` | the embedded `templates/` and the strict `{{name}}` renderer **\[pure\]** |
//! | `detect` | type, framework, package manager, commands, git/GitHub, task sources **\[pure\]** |
//! | `scan` | reads a folder into what `detect` needs |
//! | `tasks` | parsing `bd` / `gh` output and PRDs into tagged fix_plan items **\[pure\]** |
//! | `sources` | running `bd` / `gh` (no shell, stdin null, timeout), reading PRDs |
//! | `rules` | the `Bash(…)` rules for build/test/lint commands and the client's matching **\[pure\]** |
//! | `backup` | copies of files hank is about to replace, in `.hank/backup/<timestamp>/` |
//! | `generate` | rendering and writing `.hank/*`, `.hankrc`, `.gitignore` entries |
//! | `setup`, `enable`, `ci`, `migrate`, `import` | the commands |
//!
//! A project is **enabled** when `.hank/PROMPT.md` exists: `enable`/`enable-ci` then stop with
//! exit 2 unless `--force`, and `migrate` says it is already migrated. The generator writes
//! `.hank/PROMPT.md` last, so an interrupted run can be repeated.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! detection, task sources, templates, setup / enable / enable-ci / migrate (their options:
//! `args.rs`); `actions.rs` the GitHub Actions workflow (render, `--action` check, write);
//! `import/`: `document` (reading, JSON → Markdown **\[pure\]**), `extract` (the `--no-ai`
//! conversion **\[pure\]**), `ai` (prompt, argv, checks, the call), `install` (writing into the
//! target, git commit), `mod.rs` (the command)

pub(crate) mod actions;
pub(crate) mod args;
pub(crate) mod backup;
pub(crate) mod ci;
pub(crate) mod detect;
pub(crate) mod enable;
pub(crate) mod generate;
pub(crate) mod import;
pub(crate) mod locate;
pub(crate) mod migrate;
pub(crate) mod rules;
pub(crate) mod scan;
pub(crate) mod setup;
pub(crate) mod sources;
pub(crate) mod tasks;
pub(crate) mod templates;

pub(crate) use args::{
    EnableArgs, EnableCiArgs, FromSource, ImportArgs, ProjectOptions, SetupArgs,
};

/// `--agents` checked: each name must be a built-in profile or have
/// `.hank/agents/NAME.toml` in `dir`; duplicates are dropped.
///
/// # Errors
/// A name that is neither, listing the built-in ones.
pub(crate) fn known_agents(
    dir: &std::path::Path,
    names: &[String],
) -> crate::error::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for raw in names {
        let name = raw.trim();
        if name.is_empty() || out.iter().any(|n| n == name) {
            continue;
        }
        let builtin = crate::agent::profile::BUILTIN
            .iter()
            .any(|(n, _)| *n == name);
        let own = crate::policy::failover::valid_name(name)
            && crate::agent::profile::project_folder(dir)
                .join(format!("{name}.toml"))
                .is_file();
        if !builtin && !own {
            return Err(crate::error::HankError::usage(format!(
                "--agents: unknown agent `{name}`; expected one of {} or a profile in .hank/agents/",
                crate::agent::profile::BUILTIN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        out.push(name.to_owned());
    }
    if out.is_empty() {
        return Err(crate::error::HankError::usage(
            "--agents: expected at least one agent name, e.g. claude or claude,codex",
        ));
    }
    Ok(out)
}
