//! Configuration (being written).

/// The tools the agent may use unless `ALLOWED_TOOLS` says otherwise: the file tools, Task,
/// TodoWrite and the everyday git subcommands (never `Bash(git *)` wholesale, so the agent
/// cannot `git clean` or `git rm` hank's own files). `enable` adds the project's detected
/// build/test commands and writes the list into `.hankrc`.
pub const DEFAULT_ALLOWED_TOOLS: &[&str] = &[
    "Write",
    "Read",
    "Edit",
    "MultiEdit",
    "Glob",
    "Grep",
    "Task",
    "TodoWrite",
    "Bash(git add *)",
    "Bash(git commit *)",
    "Bash(git diff *)",
    "Bash(git log *)",
    "Bash(git status *)",
    "Bash(git push *)",
    "Bash(git pull *)",
    "Bash(git fetch *)",
    "Bash(git checkout *)",
    "Bash(git branch *)",
    "Bash(git stash *)",
    "Bash(git merge *)",
    "Bash(git tag *)",
];

/// How the agent prints its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Json,
    Text,
}
