//! The options of the project commands (`setup`, `enable`, `enable-ci`, `import`): one
//! definition, with its clap attributes (the help texts), read by `crate::cli` into the
//! parser and passed as they are to the commands here. Values are checked by the commands.

// `[KEY, default …]` in the help texts below is shown by `--help`, not a doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;

use clap::Args;

/// A `--from` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FromSource {
    /// beads issues (`bd list --json`).
    Beads,
    /// open GitHub issues (`gh issue list`).
    Github,
    /// a PRD / requirements document (`--prd FILE`).
    Prd,
    /// no import: a starter fix_plan.
    None,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct SetupArgs {
    /// Name of the new project folder (created in the current directory).
    pub name: String,
    /// What the project will be: rust, typescript, javascript, python, go [default: unknown].
    /// The agent may then build, test and lint it the way that type does (ALLOWED_TOOLS,
    /// VERIFY_COMMAND).
    #[arg(long, value_name = "TYPE")]
    pub project_type: Option<String>,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// A repository of the project's workspace, NAME=PATH or NAME=PATH@BASE (repeat per
    /// repository): written to .hank/workspace.toml, so that one plan's tasks may change
    /// several repositories (docs/fleet.md, Workspaces). PATH is relative to the project.
    #[arg(long = "repo", value_name = "NAME=PATH[@BASE]")]
    pub repos: Vec<String>,
}

/// The answers `enable` and `enable-ci` share (each also a wizard question for `enable`).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ProjectOptions {
    /// Task sources to import from (repeat or comma-separate) [default: `enable` asks, or with
    /// --yes takes the detected ones; `enable-ci` imports none].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "SOURCE")]
    pub from: Vec<FromSource>,
    /// The PRD document to extract tasks from (implies `--from prd`).
    #[arg(long, value_name = "FILE")]
    pub prd: Option<PathBuf>,
    /// Only GitHub issues with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Maximum tasks imported per source.
    #[arg(long, default_value_t = crate::project::sources::DEFAULT_LIMIT, value_name = "N")]
    pub limit: u32,
    /// Project name [default: package name, else folder name].
    #[arg(long, value_name = "NAME")]
    pub project_name: Option<String>,
    /// Project type [default: detected: rust, typescript, javascript, python, go, unknown].
    #[arg(long, value_name = "TYPE")]
    pub project_type: Option<String>,
    /// MAX_CALLS_PER_HOUR written into `.hankrc` [default: 100].
    #[arg(long, value_name = "N")]
    pub calls: Option<u32>,
    /// Agents to use, in failover order, e.g. `claude,codex` (AGENT / AGENTS) [default:
    /// `enable` asks when several are installed; else claude, or the one installed].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub agents: Vec<String>,
    /// Regenerate the hank files even if they exist; each replaced file is first copied to
    /// .hank/backup/<timestamp>/.
    #[arg(long)]
    pub force: bool,
    /// Recreate only the missing hank files (.hankrc, .hank/AGENT.md, …); touch nothing that
    /// exists.
    #[arg(long, conflicts_with = "force")]
    pub repair: bool,
    /// A repository of the project's workspace, NAME=PATH or NAME=PATH@BASE (repeat per
    /// repository): written to .hank/workspace.toml (kept when it exists, replaced with
    /// --force), so that one plan's tasks may change several repositories (docs/fleet.md,
    /// Workspaces). PATH is relative to the project.
    #[arg(long = "repo", value_name = "NAME=PATH[@BASE]")]
    pub repos: Vec<String>,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct EnableArgs {
    #[command(flatten)]
    pub opts: ProjectOptions,
    /// Accept the detected defaults without asking (works without a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct EnableCiArgs {
    #[command(flatten)]
    pub opts: ProjectOptions,
    /// Print exactly one JSON object on stdout (errors too).
    #[arg(long)]
    pub json: bool,
    /// No human output on stderr (errors still go there without --json).
    #[arg(short, long)]
    pub quiet: bool,
    /// Also write .github/workflows/hank.yml (a plan job, then one job per task: `hank fleet
    /// plan` / `hank fleet run-task`; needs --action). In a project hank already enables,
    /// writes only the workflow.
    #[arg(long)]
    pub github_actions: bool,
    /// The hank action the workflow uses: OWNER/REPO@REF or ./PATH (required with
    /// --github-actions: hank names no published repository).
    #[arg(long, value_name = "REF", requires = "github_actions")]
    pub action: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct ImportArgs {
    /// The PRD / spec document: Markdown, plain text or JSON.
    pub file: PathBuf,
    /// Project name: the new folder in the current directory [default: from the file name].
    pub name: Option<String>,
    /// Import into this existing project folder instead of creating a new one.
    #[arg(long, value_name = "DIR")]
    pub into: Option<PathBuf>,
    /// With --into: replace existing .hank/PROMPT.md, fix_plan.md and specs/requirements.md.
    #[arg(long)]
    pub force: bool,
    /// Extract the tasks without AI (headings, checkboxes, numbered items, "must" sentences).
    #[arg(long)]
    pub no_ai: bool,
    /// Maximum tasks kept by the conversion without AI.
    #[arg(long, default_value_t = crate::project::import::DEFAULT_TASK_LIMIT, value_name = "N")]
    pub limit: u32,
    /// The agent command: a path or a name on PATH [CLAUDE_CODE_CMD, default claude].
    #[arg(long, value_name = "PATH")]
    pub claude_cmd: Option<String>,
    /// Time limit of the AI conversion: minutes, or 90s / 2m / 1h [CLAUDE_TIMEOUT_MINUTES, default 15].
    #[arg(short = 't', long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Claude model [CLAUDE_MODEL].
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Print exactly one JSON result object on stdout (errors too).
    #[arg(long)]
    pub json: bool,
}
