//! `hank --monitor`: the loop in a tmux session, with the live output and the dashboard.
//!
//! Layout: the loop on the left (`hank run --live …`), `tail -F .hank/live.log` top right,
//! `hank monitor` bottom right — in a new session, or in a new window of the current session
//! when `hank --monitor` runs inside tmux. The loop pane runs a small `/bin/sh` script
//! (executed by tmux directly, never through the user's shell, which may be fish or a login
//! shell that resets PATH) that runs `hank run --record-exit-code` (hank itself records its
//! exit code in `.hank/logs/tmux-exit-code`, never the shell through a path the agent could
//! plant), prints it, waits for a key (unless `--monitor-exit`) so the final screen stays readable, and
//! closes the session (or window). Every path and user argument in that script is
//! single-quoted; `hank`, `tmux` and `tail` are absolute paths.
//!
//! The loop gets the caller's whole environment (API keys, base URLs, proxies, HOME…), not the
//! tmux server's, which may have been started long ago with another one: it is written to a
//! private file (0600, in a 0700 temp folder) that the pane's `hank __with-env FILE -- …` reads,
//! deletes and passes on, so no value ever appears on a command line. The dashboard panes get
//! `PATH`, `CLAUDE_CODE_CMD` (made absolute) and the hank settings with `-e`.
//!
//! `hank fleet --monitor` ([`Layout::Fleet`]) is the same layout around the fleet's supervisor:
//! `hank fleet --record-exit-code … --live` in the loop pane (`--live` is a `hank run` flag
//! given to every task, so each task writes its `.hank/live.log`), `hank monitor --live` (every
//! running task's live output, tasks picked up as they start) in place of `tail -F`, and
//! `hank monitor` in the checkout (a row per task and the shared budget).
//!
//! The argv builders are pure; [`launch`] runs them.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::proc::{Cmd, Finished};

use crate::error::{HankError, Result};
use crate::exit;
use crate::report::shell_quote;

/// Where the loop pane's `hank run` records its exit code (relative to the project).
pub(crate) const EXIT_CODE_FILE: &str = ".hank/logs/tmux-exit-code";
/// The hidden `hank run` flag that makes it record its exit code in [`EXIT_CODE_FILE`].
pub(crate) const RECORD_EXIT_CODE: &str = "--record-exit-code";
/// Oldest tmux with `new-session -e` and `split-window -l N%`.
pub(crate) const MIN_VERSION: (u32, u32) = (3, 2);
/// Size of a detached session (an attaching client resizes it).
pub(crate) const DETACHED_SIZE: (u16, u16) = (200, 50);

/// What runs in the loop pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `hank --monitor`: one loop (`hank run`), its `live.log` followed by `tail -F`.
    Run,
    /// `hank fleet --monitor`: the supervisor (`hank fleet`), its tasks' live output followed
    /// by `hank monitor --live`.
    Fleet,
}

impl Layout {
    /// The subcommand of the loop pane.
    fn command(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Fleet => "fleet",
        }
    }

    /// What runs in the loop pane, in words, and where its details are.
    fn what(self) -> (&'static str, &'static str) {
        match self {
            Self::Run => ("the loop", "`hank status`"),
            Self::Fleet => ("the fleet", "`hank fleet status`"),
        }
    }
}

/// Everything the tmux commands are built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LaunchSpec {
    /// Absolute path of tmux.
    pub tmux: PathBuf,
    /// Absolute path of this hank binary.
    pub hank: PathBuf,
    /// Absolute path of `tail`.
    pub tail: PathBuf,
    /// Absolute project directory.
    pub project: PathBuf,
    /// The session name (already sanitized and unique).
    pub session: String,
    /// The user's `hank run` arguments, as given.
    pub forwarded: Vec<String>,
    /// `NAME=value` pairs for the dashboard panes.
    pub env: Vec<(String, String)>,
    /// The caller's environment for the loop pane (see the module docs).
    pub env_file: Option<PathBuf>,
    /// `hank --monitor` runs inside tmux: a new window of the current session.
    pub inside_tmux: bool,
    /// Keep the layout after the loop ends until a key is pressed (not `--monitor-exit`).
    pub keep_open: bool,
    /// One loop or a fleet.
    pub layout: Layout,
}

/// A tmux session name from a folder name: letters, digits, `-` and `_` kept, every other
/// run of characters (tmux forbids `.` and `:`) becomes one `_`; at most 40 characters;
/// `hank` when nothing is left.
#[must_use]
pub(crate) fn sanitize_session_name(folder: &str) -> String {
    let mut out = String::new();
    for c in folder.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out: String = out.trim_matches('_').chars().take(40).collect();
    if out.is_empty() {
        "hank".to_string()
    } else {
        out
    }
}

/// `base`, else `base-2`, `base-3`, … : the first name `exists` says is free.
#[must_use]
pub(crate) fn unique_session_name(base: &str, exists: impl Fn(&str) -> bool) -> String {
    if !exists(base) {
        return base.to_string();
    }
    (2..1000)
        .map(|n| format!("{base}-{n}"))
        .find(|name| !exists(name))
        .unwrap_or_else(|| format!("{base}-{}", std::process::id()))
}

/// Parses `tmux -V` output (`tmux 3.3a`, `tmux next-3.4`, `tmux 3.0-rc5`) → (major, minor).
#[must_use]
pub(crate) fn parse_version(text: &str) -> Option<(u32, u32)> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let rest = &text[start..];
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    Some((major, minor))
}

fn os(s: &str) -> OsString {
    OsString::from(s)
}

fn path_arg(p: &Path) -> OsString {
    p.as_os_str().to_os_string()
}

fn exact(session: &str) -> String {
    format!("={session}")
}

fn env_args(spec: &LaunchSpec) -> Vec<OsString> {
    spec.env
        .iter()
        .flat_map(|(k, v)| [os("-e"), os(&format!("{k}={v}"))])
        .collect()
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The `/bin/sh` script of the loop pane.
#[must_use]
pub(crate) fn loop_script(spec: &LaunchSpec) -> String {
    let mut run = Vec::new();
    if let Some(file) = &spec.env_file {
        run.extend([
            shell_quote(&path_str(&spec.hank)),
            shell_quote(WITH_ENV),
            shell_quote(&path_str(file)),
            "--".to_string(),
        ]);
    }
    run.extend([
        shell_quote(&path_str(&spec.hank)),
        shell_quote(spec.layout.command()),
        shell_quote(RECORD_EXIT_CODE),
    ]);
    let live = !spec.forwarded.iter().any(|a| a == "--live");
    if live && spec.layout == Layout::Run {
        run.push(shell_quote("--live"));
    }
    run.extend(spec.forwarded.iter().map(|a| shell_quote(a)));
    // `hank fleet`'s `hank run` flags come last: `--live` there goes to every task.
    if live && spec.layout == Layout::Fleet {
        run.push(shell_quote("--live"));
    }
    [
        // Ctrl-C goes to hank (which stops gracefully); the script survives to clean up.
        "trap : INT".to_string(),
        // hank itself records its exit code (`--record-exit-code`): the shell never writes
        // through a path under `.hank/` that the agent could have replaced by a link.
        run.join(" "),
        "code=$?".to_string(),
        format!(
            "printf '\\nhank {} exited with code %s\\n' \"$code\"",
            spec.layout.command()
        ),
    ]
    .into_iter()
    .chain(spec.keep_open.then(|| {
        // One key, no Enter needed; the terminal mode is restored before the layout closes.
        "printf 'Press any key to close the monitor.\\n'\n\
         old=$(stty -g 2>/dev/null)\n\
         stty -icanon -echo min 1 time 0 2>/dev/null\n\
         dd bs=1 count=1 >/dev/null 2>&1\n\
         [ -n \"$old\" ] && stty \"$old\" 2>/dev/null"
            .to_string()
    }))
    .chain(std::iter::once(if spec.inside_tmux {
        format!(
            "exec {} kill-window -t \"$TMUX_PANE\"",
            shell_quote(&path_str(&spec.tmux))
        )
    } else {
        format!(
            "exec {} kill-session -t {}",
            shell_quote(&path_str(&spec.tmux)),
            shell_quote(&exact(&spec.session))
        )
    }))
    .collect::<Vec<_>>()
    .join("\n")
}

/// The hidden subcommand the loop pane runs: `hank __with-env FILE -- PROGRAM ARGS…`.
pub(crate) const WITH_ENV: &str = "__with-env";

/// Variables that describe the caller's terminal, not the pane's: the pane keeps its own.
const PANE_OWN: &[&str] = &["TMUX", "TMUX_PANE", "TERM", "COLUMNS", "LINES"];

/// The environment file: `NAME=value` entries separated by NUL bytes (pure).
#[must_use]
pub(crate) fn encode_env(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    for (k, v) in vars {
        let kb = k.as_bytes();
        if kb.is_empty() || kb.contains(&b'=') || kb.contains(&0) || v.as_bytes().contains(&0) {
            continue;
        }
        if PANE_OWN.iter().any(|p| p.as_bytes() == kb) {
            continue;
        }
        out.extend_from_slice(kb);
        out.push(b'=');
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out
}

/// Reads [`encode_env`]'s format back (pure); malformed entries are skipped.
#[must_use]
pub(crate) fn decode_env(bytes: &[u8]) -> Vec<(OsString, OsString)> {
    use std::os::unix::ffi::OsStrExt;
    bytes
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let eq = entry.iter().position(|b| *b == b'=')?;
            (eq > 0).then(|| {
                (
                    std::ffi::OsStr::from_bytes(&entry[..eq]).to_os_string(),
                    std::ffi::OsStr::from_bytes(&entry[eq + 1..]).to_os_string(),
                )
            })
        })
        .collect()
}

/// Writes the caller's environment to a new private file for the loop pane.
fn write_env_file() -> Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::Builder::new()
        .prefix("hank-env-")
        .tempdir()
        .map_err(|e| HankError::io("create", std::env::temp_dir(), e))?
        .keep();
    let file = dir.join("env");
    let bytes = encode_env(std::env::vars_os());
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .and_then(|mut f| f.write_all(&bytes))
        .map_err(|e| HankError::io("write", &file, e))?;
    Ok(file)
}

fn remove_env_file(file: &Path) {
    let _ = std::fs::remove_file(file);
    if let Some(dir) = file.parent() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// `hank __with-env FILE -- PROGRAM ARGS…`: reads and deletes FILE, then runs PROGRAM (in
/// place of this process) with that environment, keeping the pane's own terminal variables.
pub(crate) fn with_env(file: &Path, command: &[OsString]) -> Result<u8> {
    use std::io::Read;
    let (program, args) = command
        .split_first()
        .ok_or_else(|| HankError::usage(format!("{WITH_ENV}: expected `-- PROGRAM ARGS…`")))?;
    let meta = std::fs::symlink_metadata(file).map_err(|e| HankError::io("read", file, e))?;
    if !meta.is_file() {
        return Err(HankError::usage(format!(
            "{}: expected a regular file",
            file.display()
        )));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(16 << 20).read_to_end(&mut bytes))
        .map_err(|e| HankError::io("read", file, e))?;
    remove_env_file(file);
    let mut cmd = Cmd::new(program).args(args).env_clear();
    for (key, value) in decode_env(&bytes) {
        cmd = cmd.env(key, value);
    }
    for key in PANE_OWN {
        if let Some(v) = std::env::var_os(key) {
            cmd = cmd.env(key, v);
        }
    }
    let err = cmd.exec();
    Err(HankError::io("run", PathBuf::from(program), err))
}

/// `tmux new-session`: the detached session with the loop pane; prints the pane id.
#[must_use]
pub(crate) fn new_session_argv(spec: &LaunchSpec) -> Vec<OsString> {
    let mut argv = vec![
        path_arg(&spec.tmux),
        os("new-session"),
        os("-d"),
        os("-s"),
        os(&spec.session),
        os("-c"),
        path_arg(&spec.project),
        os("-x"),
        os(&DETACHED_SIZE.0.to_string()),
        os("-y"),
        os(&DETACHED_SIZE.1.to_string()),
    ];
    argv.extend(print_pane_id());
    argv.extend([os("/bin/sh"), os("-c"), os(&loop_script(spec))]);
    argv
}

/// `tmux new-window` in the current session (inside tmux): the loop pane; prints its pane id.
#[must_use]
pub(crate) fn new_window_argv(spec: &LaunchSpec) -> Vec<OsString> {
    let mut argv = vec![
        path_arg(&spec.tmux),
        os("new-window"),
        os("-n"),
        os(&spec.session),
        os("-c"),
        path_arg(&spec.project),
    ];
    argv.extend(print_pane_id());
    argv.extend([os("/bin/sh"), os("-c"), os(&loop_script(spec))]);
    argv
}

/// `tmux split-window` of `target` (`-h` beside it, `-v` below it), the new pane `size` of it,
/// detached, in the project folder.
fn split_window_argv(spec: &LaunchSpec, side: &str, size: &str, target: &str) -> Vec<OsString> {
    vec![
        path_arg(&spec.tmux),
        os("split-window"),
        os(side),
        os("-d"),
        os("-l"),
        os(size),
        os("-t"),
        os(target),
        os("-c"),
        path_arg(&spec.project),
    ]
}

/// The options that make tmux print the new pane's id.
fn print_pane_id() -> [OsString; 3] {
    [os("-P"), os("-F"), os("#{pane_id}")]
}

/// `tmux split-window`: the live output pane right of `loop_pane`; prints its pane id.
#[must_use]
pub(crate) fn live_pane_argv(spec: &LaunchSpec, loop_pane: &str) -> Vec<OsString> {
    let mut argv = split_window_argv(spec, "-h", "50%", loop_pane);
    argv.extend(print_pane_id());
    argv.extend(env_args(spec));
    match spec.layout {
        Layout::Run => argv.extend([
            path_arg(&spec.tail),
            os("-n"),
            os("200"),
            os("-F"),
            path_arg(&spec.project.join(".hank").join("live.log")),
        ]),
        Layout::Fleet => argv.extend([
            path_arg(&spec.hank),
            os("monitor"),
            os("--live"),
            os("--dir"),
            path_arg(&spec.project),
        ]),
    }
    argv
}

/// `tmux split-window`: the dashboard below `live_pane`.
#[must_use]
pub(crate) fn monitor_pane_argv(spec: &LaunchSpec, live_pane: &str) -> Vec<OsString> {
    let mut argv = split_window_argv(spec, "-v", "65%", live_pane);
    argv.extend(env_args(spec));
    argv.extend([
        path_arg(&spec.hank),
        os("monitor"),
        os("--dir"),
        path_arg(&spec.project),
    ]);
    argv
}

/// `tmux attach-session` (outside tmux) or `switch-client` (inside tmux).
#[must_use]
pub(crate) fn attach_argv(spec: &LaunchSpec, inside_tmux: bool) -> Vec<OsString> {
    let verb = if inside_tmux {
        "switch-client"
    } else {
        "attach-session"
    };
    vec![
        path_arg(&spec.tmux),
        os(verb),
        os("-t"),
        os(&exact(&spec.session)),
    ]
}

/// `tmux has-session` for an exact name.
#[must_use]
pub(crate) fn has_session_argv(tmux: &Path, session: &str) -> Vec<OsString> {
    vec![
        path_arg(tmux),
        os("has-session"),
        os("-t"),
        os(&exact(session)),
    ]
}

/// The variables passed to every pane: `PATH`, `CLAUDE_CODE_CMD` made absolute, and the
/// hank settings set in the environment. `lookup` reads a variable; `resolve` makes a
/// command absolute (PATH lookup, or relative to the current directory).
#[must_use]
pub(crate) fn pane_env(
    lookup: impl Fn(&str) -> Option<String>,
    resolve: impl Fn(&str) -> Option<PathBuf>,
) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let Some(path) = lookup("PATH") {
        env.push(("PATH".to_string(), path));
    }
    for key in crate::settings::KEYS
        .iter()
        .map(|k| k.name)
        .chain(["IS_SANDBOX", "NO_COLOR"])
    {
        if key == "PATH" {
            continue;
        }
        let Some(value) = lookup(key) else { continue };
        let value = if key == "CLAUDE_CODE_CMD" {
            resolve(&value).map_or(value, |p| path_str(&p))
        } else {
            value
        };
        env.push((key.to_string(), value));
    }
    env
}

fn utf8_args(forwarded: &[OsString]) -> Result<Vec<String>> {
    forwarded
        .iter()
        .map(|a| {
            a.to_str().map(str::to_string).ok_or_else(|| {
                HankError::usage(format!(
                    "argument {} is not valid UTF-8",
                    a.to_string_lossy()
                ))
            })
        })
        .collect()
}

/// How long one tmux command (not `attach`) may take.
const TMUX_TIMEOUT: Duration = Duration::from_secs(30);

fn tmux_failed(what: &str, out: &Finished) -> HankError {
    let stderr = String::from_utf8_lossy(&out.stderr);
    HankError::Tool(format!("tmux {what} failed: {}", stderr.trim()))
}

fn run_capture(argv: &[OsString]) -> Result<Finished> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| HankError::Internal("empty tmux argv".into()))?;
    Cmd::new(program)
        .args(args)
        .timeout(TMUX_TIMEOUT)
        .stderr_max(64 * 1024)
        .run()
        .map_err(|e| HankError::Tool(format!("{} {e}", PathBuf::from(program).display())))
}

fn session_exists(tmux: &Path, session: &str) -> bool {
    run_capture(&has_session_argv(tmux, session)).is_ok_and(|o| o.status.success())
}

/// The loop's exit code as recorded by the loop pane's `hank run` (a regular file only).
fn recorded_exit_code(project: &Path) -> Option<u8> {
    let bytes =
        crate::fsread::read(&project.join(EXIT_CODE_FILE), 64, crate::fsread::Follow::No).ok()?;
    String::from_utf8_lossy(&bytes).trim().parse().ok()
}

/// `hank run --record-exit-code`: writes `code` to [`EXIT_CODE_FILE`] the way hank writes
/// its own files (`.hank/logs` a real directory, temp + rename, which replaces a planted
/// link instead of following it).
pub(crate) fn record_exit_code(project: &Path, code: u8) {
    let store = crate::store::Store::new(project);
    if store.ensure_dirs().is_ok() {
        let _ = crate::store::write_atomic(
            &project.join(EXIT_CODE_FILE),
            format!("{code}\n").as_bytes(),
            false,
        );
    }
}

fn ended_early(spec: &LaunchSpec) -> u8 {
    let code = recorded_exit_code(&spec.project);
    let (what, details) = spec.layout.what();
    match code {
        Some(c) => errln!("hank: {what} ended before the panes were set up (exit code {c})"),
        None => errln!("hank: the tmux session ended before the panes were set up"),
    }
    errln!("hint: see .hank/logs/ and {details}");
    code.unwrap_or(exit::ERROR)
}

/// Starts the session (or, inside tmux, a window) and attaches to it (or prints how to).
/// `project` is the validated project root; `keep_open` keeps the layout after the loop ends
/// until a key is pressed. Returns the loop's exit code when the loop ended while attached
/// (or, inside tmux, when it ends); 0 after a detach.
pub(crate) fn launch(
    forwarded: &[OsString],
    project: &Path,
    keep_open: bool,
    layout: Layout,
) -> Result<u8> {
    let tmux = require_tmux_for(layout)?;
    let version = run_capture(&[path_arg(&tmux), os("-V")])?;
    let version_text = String::from_utf8_lossy(&version.stdout).trim().to_string();
    if let Some(v) = parse_version(&version_text).filter(|v| *v < MIN_VERSION) {
        return Err(HankError::usage(format!(
            "{version_text} is too old for `hank --monitor` (needs tmux {}.{} or newer; found {}.{})",
            MIN_VERSION.0, MIN_VERSION.1, v.0, v.1
        )));
    }
    let project = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
    let exe = std::env::current_exe().map_err(|e| HankError::io("locate", "the hank binary", e))?;
    let hank = std::fs::canonicalize(&exe).unwrap_or(exe);
    let tail = which::which("tail").unwrap_or_else(|_| PathBuf::from("tail"));
    let env = pane_env(
        |k| std::env::var(k).ok(),
        |cmd| which::which_in(cmd, std::env::var_os("PATH"), &project).ok(),
    );
    let folder = project
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let inside_tmux = std::env::var_os("TMUX").is_some_and(|v| !v.is_empty());
    let base = sanitize_session_name(&folder);
    let session = if inside_tmux {
        base
    } else {
        unique_session_name(&base, |n| session_exists(&tmux, n))
    };
    let forwarded = utf8_args(forwarded)?;
    let env_file = write_env_file()?;
    let spec = LaunchSpec {
        tmux,
        hank,
        tail,
        project,
        session,
        forwarded,
        env,
        env_file: Some(env_file.clone()),
        inside_tmux,
        keep_open,
        layout,
    };
    let result = start_panes(&spec);
    if !matches!(result, Ok(Started::Panes(_))) {
        // The loop pane never ran (or ended at once): the file must not stay behind.
        remove_env_file(&env_file);
    }
    match result? {
        Started::EndedEarly(code) => Ok(code),
        Started::Panes(loop_pane) if spec.inside_tmux => Ok(wait_in_window(&spec, &loop_pane)),
        Started::Panes(_) => attach(&spec),
    }
}

/// The tmux binary, or the error that says how to do without it.
pub(crate) fn require_tmux() -> Result<PathBuf> {
    require_tmux_for(Layout::Run)
}

/// [`require_tmux`] for `layout`'s command.
pub(crate) fn require_tmux_for(layout: Layout) -> Result<PathBuf> {
    which::which("tmux").map_err(|_| match layout {
        Layout::Run => HankError::usage_hint(
            "tmux is not installed (`hank --monitor` runs the loop in a tmux session)",
            "install tmux, or run `hank` and `hank monitor` in two terminals",
        ),
        Layout::Fleet => HankError::usage_hint(
            "tmux is not installed (`hank fleet --monitor` runs the fleet in a tmux session)",
            "install tmux, or run `hank fleet`, `hank monitor --live` (the tasks' live output) \
             and `hank monitor` in three terminals",
        ),
    })
}

/// What setting up the panes gave.
enum Started {
    /// The loop pane's id.
    Panes(String),
    /// The loop ended before the layout was complete: its exit code.
    EndedEarly(u8),
}

fn start_panes(spec: &LaunchSpec) -> Result<Started> {
    // A stale code from an earlier session must not be mistaken for this one's.
    let _ = std::fs::remove_file(spec.project.join(EXIT_CODE_FILE));
    let first = if spec.inside_tmux {
        new_window_argv(spec)
    } else {
        new_session_argv(spec)
    };
    let out = run_capture(&first)?;
    if !out.status.success() {
        return Err(tmux_failed(
            if spec.inside_tmux {
                "new-window"
            } else {
                "new-session"
            },
            &out,
        ));
    }
    let loop_pane = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let gone = |spec: &LaunchSpec| {
        if spec.inside_tmux {
            !pane_exists(&spec.tmux, &loop_pane)
        } else {
            !session_exists(&spec.tmux, &spec.session)
        }
    };
    let out = run_capture(&live_pane_argv(spec, &loop_pane))?;
    if !out.status.success() {
        if gone(spec) {
            return Ok(Started::EndedEarly(ended_early(spec)));
        }
        return Err(tmux_failed("split-window", &out));
    }
    let live_pane = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = run_capture(&monitor_pane_argv(spec, &live_pane))?;
    if !out.status.success() {
        if gone(spec) {
            return Ok(Started::EndedEarly(ended_early(spec)));
        }
        return Err(tmux_failed("split-window", &out));
    }
    Ok(Started::Panes(loop_pane))
}

fn pane_exists(tmux: &Path, pane: &str) -> bool {
    run_capture(&[
        path_arg(tmux),
        os("display-message"),
        os("-p"),
        os("-t"),
        os(pane),
        os("#{pane_id}"),
    ])
    .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
}

/// Inside tmux: the loop runs in a new window of this session (tmux shows it); this pane
/// waits for the loop's exit code and returns it. Ctrl-C here stops only the waiting.
fn wait_in_window(spec: &LaunchSpec, loop_pane: &str) -> u8 {
    let (what, details) = spec.layout.what();
    errln!(
        "hank: {what} runs in window '{}' of this tmux session; waiting here for its exit code (Ctrl-C stops waiting, not {what})",
        spec.session
    );
    loop {
        if let Some(code) = recorded_exit_code(&spec.project) {
            errln!("hank: {what} exited with code {code} (details: {details})");
            return code;
        }
        if !pane_exists(&spec.tmux, loop_pane) {
            // Closed before it recorded a code (the window was killed).
            return recorded_exit_code(&spec.project).unwrap_or_else(|| {
                errln!("hank: {what}'s window was closed (details: {details})");
                exit::ERROR
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// Outside tmux: attach (with a terminal) and return the loop's exit code once the session
/// ends; without a terminal, print how to attach.
fn attach(spec: &LaunchSpec) -> Result<u8> {
    let attach_cmd = format!("tmux attach -t {}", shell_quote(&spec.session));
    let (what, details) = spec.layout.what();
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if !terminal {
        errln!(
            "hank: {what} runs in tmux session '{}' (no terminal here, so it stays detached)",
            spec.session
        );
        super::print_stdout(&format!("{attach_cmd}\n"))?;
        return Ok(exit::OK);
    }
    let argv = attach_argv(spec, false);
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| HankError::Internal("empty tmux argv".into()))?;
    Cmd::new(program)
        .args(args)
        .interactive()
        .map_err(|e| HankError::io("run", PathBuf::from(program), e))?;
    if session_exists(&spec.tmux, &spec.session) {
        errln!("hank: detached; {what} keeps running. Reattach with: {attach_cmd}");
        return Ok(exit::OK);
    }
    match recorded_exit_code(&spec.project) {
        Some(code) => {
            errln!("hank: {what} exited with code {code} (details: {details})");
            Ok(code)
        }
        None => {
            errln!(
                "hank: the tmux session ended before {what} recorded an exit code (details: {details})"
            );
            Ok(exit::ERROR)
        }
    }
}

/// Whether `s` would need quoting (used by tests to pick interesting inputs).
#[cfg(test)]
fn needs_quoting(s: &std::ffi::OsStr) -> bool {
    s.to_string_lossy()
        .chars()
        .any(|c| !(c.is_ascii_alphanumeric() || "-_./=".contains(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(forwarded: &[&str]) -> LaunchSpec {
        LaunchSpec {
            tmux: "/usr/bin/tmux".into(),
            hank: "/opt/hank bin/hank".into(),
            tail: "/usr/bin/tail".into(),
            project: "/home/u/my project".into(),
            session: "my_project".into(),
            forwarded: forwarded.iter().map(|s| (*s).to_string()).collect(),
            env: vec![("PATH".into(), "/bin:/usr/bin".into())],
            env_file: None,
            inside_tmux: false,
            keep_open: false,
            layout: Layout::Run,
        }
    }

    fn strs(argv: &[OsString]) -> Vec<String> {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn session_names() {
        let cases = [
            ("my-project", "my-project"),
            ("my.project", "my_project"),
            ("a:b c", "a_b_c"),
            ("...", "hank"),
            ("", "hank"),
            ("héllo wörld", "h_llo_w_rld"),
            ("$(rm -rf)", "rm_-rf"),
        ];
        for (input, want) in cases {
            assert_eq!(sanitize_session_name(input), want, "{input:?}");
        }
        assert_eq!(sanitize_session_name(&"x".repeat(100)).len(), 40);
        let taken = ["proj", "proj-2"];
        assert_eq!(
            unique_session_name("proj", |n| taken.contains(&n)),
            "proj-3"
        );
        assert_eq!(
            unique_session_name("other", |n| taken.contains(&n)),
            "other"
        );
    }

    #[test]
    fn versions() {
        let cases = [
            ("tmux 3.3a", Some((3, 3))),
            ("tmux 3.2", Some((3, 2))),
            ("tmux next-3.4", Some((3, 4))),
            ("tmux 2.9a", Some((2, 9))),
            ("tmux 10", Some((10, 0))),
            ("tmux master", None),
            ("", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_version(input), want, "{input:?}");
        }
    }

    #[test]
    fn new_session_argv_runs_sh_directly() {
        let argv = strs(&new_session_argv(&spec(&["-c", "5"])));
        assert_eq!(
            argv[..14],
            [
                "/usr/bin/tmux",
                "new-session",
                "-d",
                "-s",
                "my_project",
                "-c",
                "/home/u/my project",
                "-x",
                "200",
                "-y",
                "50",
                "-P",
                "-F",
                "#{pane_id}"
            ]
        );
        // No environment on the loop pane's command line: it comes from the env file.
        assert_eq!(argv[14..16], ["/bin/sh", "-c"]);
        assert_eq!(argv.len(), 17);
        let script = &argv[16];
        assert!(
            script.contains("'/opt/hank bin/hank' run --record-exit-code --live -c 5\ncode=$?"),
            "{script}"
        );
        assert!(
            script.ends_with("exec /usr/bin/tmux kill-session -t =my_project"),
            "{script}"
        );
        // hank records its exit code itself; the shell writes no file.
        assert!(!script.contains("tmux-exit-code"), "{script}");
        assert!(!script.contains(" > "), "{script}");
    }

    /// The loop pane starts through `__with-env` when there is an env file, waits for a key
    /// unless `--monitor-exit`, and closes its window (inside tmux) or its session.
    #[test]
    fn loop_script_variants() {
        let mut s = spec(&["--max-loops", "1"]);
        s.env_file = Some("/tmp/hank-env-x/env".into());
        s.keep_open = true;
        let script = loop_script(&s);
        assert!(
            script.contains(
                "'/opt/hank bin/hank' __with-env /tmp/hank-env-x/env -- '/opt/hank bin/hank' run --record-exit-code --live --max-loops 1\ncode=$?"
            ),
            "{script}"
        );
        assert!(script.contains("Press any key") && script.contains("dd bs=1 count=1"));
        assert!(script.ends_with("kill-session -t =my_project"), "{script}");
        s.inside_tmux = true;
        s.keep_open = false;
        let script = loop_script(&s);
        assert!(!script.contains("Press any key"));
        assert!(
            script.ends_with("kill-window -t \"$TMUX_PANE\""),
            "{script}"
        );
        let argv = strs(&new_window_argv(&s));
        assert_eq!(argv[1..4], ["new-window", "-n", "my_project"]);
        assert!(!argv.iter().any(|a| a == "-e"));
    }

    #[test]
    fn env_file_round_trip_keeps_bytes_and_drops_the_terminal() {
        use std::os::unix::ffi::OsStringExt;
        let vars = vec![
            (
                OsString::from("ANTHROPIC_API_KEY"),
                OsString::from("sk-ant-x y=z"),
            ),
            (
                OsString::from("TMUX"),
                OsString::from("/tmp/tmux-1/default,1,0"),
            ),
            (OsString::from("TERM"), OsString::from("xterm")),
            (
                OsString::from("RAW"),
                OsString::from_vec(vec![0xff, b'a', b'\n']),
            ),
            (OsString::from("BAD=NAME"), OsString::from("v")),
            (OsString::from("EMPTY"), OsString::new()),
        ];
        let decoded = decode_env(&encode_env(vars));
        assert_eq!(
            decoded,
            vec![
                (
                    OsString::from("ANTHROPIC_API_KEY"),
                    OsString::from("sk-ant-x y=z")
                ),
                (
                    OsString::from("RAW"),
                    OsString::from_vec(vec![0xff, b'a', b'\n'])
                ),
                (OsString::from("EMPTY"), OsString::new()),
            ]
        );
    }

    /// `hank fleet --monitor`: the supervisor in the loop pane with `--live` among the tasks'
    /// flags (last), the follower in place of `tail -F`, the dashboard as for one loop.
    #[test]
    fn the_fleet_layout() {
        let mut s = spec(&["--agents", "3", "--max-loops", "2"]);
        s.layout = Layout::Fleet;
        let script = loop_script(&s);
        assert!(
            script.contains(
                "'/opt/hank bin/hank' fleet --record-exit-code --agents 3 --max-loops 2 --live\ncode=$?"
            ),
            "{script}"
        );
        assert!(script.contains("hank fleet exited with code"), "{script}");
        let mut given = spec(&["--live", "--max-loops", "2"]);
        given.layout = Layout::Fleet;
        assert_eq!(loop_script(&given).matches(" --live").count(), 1);
        assert_eq!(
            strs(&live_pane_argv(&s, "%3"))[13..],
            [
                "-e",
                "PATH=/bin:/usr/bin",
                "/opt/hank bin/hank",
                "monitor",
                "--live",
                "--dir",
                "/home/u/my project"
            ]
        );
        assert_eq!(
            strs(&monitor_pane_argv(&s, "%4"))[12..],
            [
                "/opt/hank bin/hank",
                "monitor",
                "--dir",
                "/home/u/my project"
            ]
        );
    }

    #[test]
    fn live_is_not_added_twice() {
        let script = loop_script(&spec(&["--live", "--max-loops", "1"]));
        assert_eq!(script.matches(" --live").count(), 1, "{script}");
    }

    #[test]
    fn pane_argvs() {
        let s = spec(&[]);
        assert_eq!(
            strs(&live_pane_argv(&s, "%3")),
            [
                "/usr/bin/tmux",
                "split-window",
                "-h",
                "-d",
                "-l",
                "50%",
                "-t",
                "%3",
                "-c",
                "/home/u/my project",
                "-P",
                "-F",
                "#{pane_id}",
                "-e",
                "PATH=/bin:/usr/bin",
                "/usr/bin/tail",
                "-n",
                "200",
                "-F",
                "/home/u/my project/.hank/live.log"
            ]
        );
        assert_eq!(
            strs(&monitor_pane_argv(&s, "%4")),
            [
                "/usr/bin/tmux",
                "split-window",
                "-v",
                "-d",
                "-l",
                "65%",
                "-t",
                "%4",
                "-c",
                "/home/u/my project",
                "-e",
                "PATH=/bin:/usr/bin",
                "/opt/hank bin/hank",
                "monitor",
                "--dir",
                "/home/u/my project"
            ]
        );
        assert_eq!(
            strs(&attach_argv(&s, false)),
            ["/usr/bin/tmux", "attach-session", "-t", "=my_project"]
        );
        assert_eq!(strs(&attach_argv(&s, true))[1], "switch-client");
        assert_eq!(
            strs(&has_session_argv(Path::new("/t"), "x")),
            ["/t", "has-session", "-t", "=x"]
        );
    }

    #[test]
    fn pane_env_forwards_path_and_an_absolute_claude() {
        let vars = [
            ("PATH", "/a:/b"),
            ("CLAUDE_CODE_CMD", "claude"),
            ("MAX_LOOPS", "3"),
            ("HOME", "/home/u"),
            ("ANTHROPIC_API_KEY", "secret"),
        ];
        let lookup = |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        };
        let env = pane_env(lookup, |cmd| Some(PathBuf::from(format!("/abs/{cmd}"))));
        assert_eq!(env[0], ("PATH".to_string(), "/a:/b".to_string()));
        assert!(env.contains(&("CLAUDE_CODE_CMD".to_string(), "/abs/claude".to_string())));
        assert!(env.contains(&("MAX_LOOPS".to_string(), "3".to_string())));
        assert!(
            !env.iter()
                .any(|(k, _)| k == "HOME" || k == "ANTHROPIC_API_KEY")
        );
        let unresolved = pane_env(lookup, |_| None);
        assert!(unresolved.contains(&("CLAUDE_CODE_CMD".to_string(), "claude".to_string())));
        assert!(pane_env(|_| None, |_| None).is_empty());
    }

    /// The loop script, run by a real /bin/sh with stand-ins for hank and tmux, passes every
    /// argument through byte for byte and records the exit code.
    #[cfg(unix)]
    #[test]
    fn loop_script_preserves_arguments_and_the_exit_code() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("it's a \"project\" $HOME");
        std::fs::create_dir_all(project.join(".hank")).unwrap();
        let fake = |name: &str, body: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let args_out = dir.path().join("args");
        let hank = fake(
            "fake hank",
            &format!(
                "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > {}\nexit 3",
                shell_quote(&path_str(&args_out))
            ),
        );
        let tmux_out = dir.path().join("tmux-args");
        let tmux = fake(
            "fake tmux",
            &format!(
                "printf '%s\\n' \"$@\" > {}",
                shell_quote(&path_str(&tmux_out))
            ),
        );
        let forwarded = [
            "--prompt",
            "my prompt's file.md",
            "--model",
            "$(touch pwned)",
            "`id`",
            "a\\b",
            "\"q\"",
            "",
        ];
        let spec = LaunchSpec {
            tmux,
            hank,
            tail: "/usr/bin/tail".into(),
            project: project.clone(),
            session: "s".into(),
            forwarded: forwarded.iter().map(|s| (*s).to_string()).collect(),
            env: vec![],
            env_file: None,
            inside_tmux: false,
            keep_open: false,
            layout: Layout::Run,
        };
        assert!(forwarded.iter().all(|a| a.is_empty()
            || needs_quoting(std::ffi::OsStr::new(a))
            || a.starts_with("--")));
        let out = Cmd::new("/bin/sh")
            .arg("-c")
            .arg(loop_script(&spec))
            .cwd(&project)
            .stderr_max(1 << 20)
            .run()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("hank run exited with code 3"), "{stdout}");
        let got = std::fs::read_to_string(&args_out).unwrap();
        let mut want = vec!["run", RECORD_EXIT_CODE, "--live"];
        want.extend(forwarded);
        assert_eq!(
            got,
            want.iter().map(|a| format!("{a}\n")).collect::<String>()
        );
        // The script does not write the exit code file (the real hank does, see
        // `record_exit_code`).
        assert_eq!(recorded_exit_code(&project), None);
        record_exit_code(&project, 3);
        assert_eq!(recorded_exit_code(&project), Some(3));
        assert_eq!(
            std::fs::read_to_string(&tmux_out).unwrap(),
            "kill-session\n-t\n=s\n"
        );
        assert!(!project.join("pwned").exists() && !dir.path().join("pwned").exists());
    }
}
