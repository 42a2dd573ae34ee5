//! SANDBOX: the agent's whole process tree confined with Landlock (no root needed).
//!
//! hank never confines itself: the agent starts through `hank __sandbox RULES -- PROGRAM ARGS…`
//! (the process layer's `crate::proc::agent` puts it in front of the agent's argv), a
//! short-lived process that restricts itself with the rules (Landlock domains are inherited by
//! every descendant and cannot be lifted) and then `exec`s the agent in place. hank's git, the
//! check (`VERIFY_COMMAND`) and every other tool start without it.
//!
//! What the agent may do ([`Rules`]): read and write its project (or a fleet task's worktree and
//! the task's own repository, the checkout's objects read-only: `worktree_git`, from hank's
//! record only), a private `TMPDIR`, the client's own state paths named by its
//! profile (`[sandbox] state`), `/dev/null`, `/dev/zero` and `/dev/full`; read the system (of
//! `/dev` only `/dev/random` and `/dev/urandom`: never a terminal, `/dev/pts/*` or `/dev/shm`),
//! the client's install, its configuration (`[sandbox] config`, guarded where it lies in its
//! state: [`guard`]) and the toolchains of SANDBOX_READ (never a known credential file:
//! [`refused_grant`]); connect by TCP only to hank's egress proxy ([`proxy::Proxy`]) on
//! 127.0.0.1, which lets through only the profile's API hosts and SANDBOX_ALLOW_HOSTS. Where
//! the kernel has them ([`Extras`]), ioctls on devices are refused but on those granted
//! (Landlock ABI 5) and signals and abstract Unix sockets are scoped to the agent's own
//! processes (ABI 6: it cannot stop hank or another process of the user). `hank __sandbox`
//! makes the agent a session of its own first: no controlling terminal.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! SANDBOX (issue 37): `mod.rs` (`Mode`, `decide` **\[pure\]** — what the next run gets,
//! `available()` — the Landlock ABI 4 probe, `host_port`/`parse_hosts`/`allowed_hosts`
//! **\[pure\]**, `ProfileSandbox` — a profile's `[sandbox]` table (`state` written, `config` read
//! only, `api`), `Rules::for_agent` — the paths from a `Place` (project or task worktree + its git
//! dir/object store, TMPDIR, the client's state, its configuration read only, install dirs, system,
//! SANDBOX_READ/WRITE), `Rules::to_arg` (the rules as one JSON value)/`from_args`, `restrict_self`
//! (all or nothing: ABI 4 required, `Extras` — ABI 5's device ioctls, ABI 6's signal and
//! abstract-socket scopes — each used when `Extras::here()` finds it),
//! `CREDENTIAL_FILES`/`refused_grant`: a SANDBOX_READ/WRITE entry that is, holds or lies beneath a
//! credential file is left out with a warning at the start; of `/dev` only null, zero, full,
//! random, urandom; `hank-sandbox RULES -- PROGRAM ARGS…` (`src/bin/hank-sandbox.rs` →
//! `hank::sandbox_main`, a small binary beside hank: each call loads only the confinement; `hank
//! __sandbox` when it is not installed, `proc::agent::sandbox_program`) is
//! `proc::agent::enter_sandbox`: first a session of its own (`own_session`: `setsid`, the group
//! leader hank signals kept), with a hand-over socket in the rules it then enters the agent's own
//! network and mount namespaces (`netns.rs`) and covers every top folder but the system's with an
//! empty tmpfs, the granted paths bound back (`mounts.rs`: `places`/`beneath` **\[pure\]**,
//! `hide_ungranted` — no path socket of the user's is there); the network namespace is the run's,
//! held by `hank-sandbox --hold-netns [RULES]` (`proc::agent::NamespaceHolder`, one per
//! `Sandboxing`, started at the first call with its rules, kept out of the orphan walks by
//! `OwnSpawn`) with the first call's view of the file system (`mounts::View`), and entered by each
//! call (`netns::enter_held`, the holder's namespace inodes checked; `netns::enter_view`: the held
//! view when the call's `Rules::granted` are the view's and `View::still_true`, else a view of its
//! own), then restricts itself, then `exec`s the agent — no
//! `unsafe`/`pre_exec` (the crate forbids unsafe); `make_state_dirs`: a profile's `[sandbox] state`
//! folders (entries ending in `/`) made 0700 before the call; an npm install is read as its whole
//! `node_modules` tree, a Python venv's program as its venv and base Python: `venv_of`), `netns.rs`
//! (`unshare_net`: `CLONE_NEWNET` as root, else `CLONE_NEWUSER|CLONE_NEWNET` with the user mapped
//! to itself; `lo` up by one route-netlink message; `hank __sandbox --probe-netns` —
//! `proc::agent::netns_probe` asks it at a run's start and in `doctor` —; `hand_over`: in the
//! agent's process before Landlock, 127.0.0.1:PORT of the namespace listened on and the listening
//! socket sent to the proxy's Unix socket by `SCM_RIGHTS` (rustix, no unsafe) — no bridge process,
//! one process per call), `proxy.rs` (`Proxy`: the egress proxy thread on 127.0.0.1 and, with a
//! namespace, a Unix socket in a 0700 folder (`listen_unix`) where it takes each call's handed-over
//! listener, checked to be a loopback listening socket, served until `end_call`; CONNECT + plain
//! HTTP with each kept-alive request framed and rewritten, allow list per call, `Denied` kept);
//! `Confinement::Landlock { netns, extras }` names what the run got
//! (`landlock-fs+landlock-net[+landlock-ioctl][+landlock-scope][+netns]`, and what stays open:
//! `still_open`); `proc::agent::Spawn::sandbox` wraps the agent's argv; `effects/agent.rs`
//! `Sandboxing` (opened with `Real` and by `hank import`'s conversion — `rules_for` its temp
//! folder, no project access —: decision, netns probe, proxy, TMPDIR (0700,
//! `hank-agent-tmp-PID-START-…`; `remove_stale`: a killed hank's folders removed at the next
//! start), the refused SANDBOX_READ/WRITE entries as warnings; `SESSION_ENV`: the user's session
//! sockets removed from a confined agent's environment (`removed_for(pass, sandboxed)`); `prepare`
//! per call (the `Rules` resolved at an agent's first call and frozen for the run: `frozen`),
//! `sandbox_env`, the refusals → `egress_denied` events, status.json `sandbox`/`egress_denied`, a
//! context note through `poll_control`); tests: `src/sandbox/tests.rs`,
//! `tests/integration/sandbox.rs` (real Landlock and namespaces; `support.rs` runs every other test
//! with `SANDBOX=off`), the contract suite's `sandboxed_…` cases (each real client confined;
//! `scripts/sandbox-observe.sh` lists what each writes and is refused, under strace); `guard.rs`
//! (issue 47: the `config` entries that lie in a path the agent writes — `guarded` —, kept before
//! each call by `Guard::take` and put back after it by `Guard::undo`, each `Change` a
//! `client_config_changed` event, a warning and a context note from `effects/agent.rs`'s
//! `config_changed`); `repo.rs` (issue 47: `RepoGuard` — the project's `.git` and its git dir's
//! `commondir` as recorded at the run's start, checked before and after each confined call (a
//! change stops the run: a `security` event); the repository's `config`, `config.worktree`,
//! `hooks/`, `info/` and its submodules' saved before each call and put back after it, each file a
//! `security` event; a file whose settled stamp — `guard::Stamp`, `ctime` at least 2 s older than
//! the look — is unchanged is not read again)

pub mod guard;
pub mod mounts;
pub mod netns;
pub mod proxy;
pub mod repo;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use serde::Deserialize;

use crate::error::{HankError, Result};

/// The hidden subcommand the agent starts through when [`WRAPPER`] is not installed.
pub const ENTER: &str = "__sandbox";

/// The sandbox's own program, beside `hank` (`src/bin/hank-sandbox.rs`): what the agent starts
/// through at every call.
pub const WRAPPER: &str = "hank-sandbox";

/// The Landlock ABI hank asks for: TCP connect rules came with ABI 4.
const NEEDED_ABI: ABI = ABI::V4;

/// SANDBOX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Landlock when the kernel has it (ABI ≥ 4), else a warning that the agent runs unconfined.
    #[default]
    Auto,
    /// Landlock or exit 1.
    Landlock,
    /// Never confined.
    Off,
}

impl Mode {
    /// The setting's value.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Landlock => "landlock",
            Self::Off => "off",
        }
    }
}

/// The parts of Landlock past ABI 4 that this kernel enforces, each used when present (ABI 4's
/// files and TCP are required; these are best effort, and said).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extras {
    /// ABI 5 (`LANDLOCK_ACCESS_FS_IOCTL_DEV`): no ioctl on a device but those granted.
    pub ioctl_dev: bool,
    /// ABI 6 (`LANDLOCK_SCOPE_SIGNAL`, `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET`): the agent signals
    /// and reaches abstract Unix sockets only of its own processes.
    pub scopes: bool,
}

impl Extras {
    /// What this kernel enforces: a ruleset handling each part created (and dropped) as a hard
    /// requirement.
    #[must_use]
    pub fn here() -> Self {
        let hard = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
        Self {
            ioctl_dev: hard()
                .handle_access(AccessFs::IoctlDev)
                .and_then(Ruleset::create)
                .is_ok(),
            scopes: hard()
                .scope(Scope::from_all(ABI::V6))
                .and_then(Ruleset::create)
                .is_ok(),
        }
    }

    /// The file rights handled: ABI 5's (ioctl on devices) when the kernel has them.
    fn fs_abi(self) -> ABI {
        if self.ioctl_dev { ABI::V5 } else { NEEDED_ABI }
    }
}

/// What the next run's agent gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Confined with Landlock (files, TCP connect, and the [`Extras`] this kernel has) behind
    /// the egress proxy, in a session of its own; in its own network namespace when `netns` is
    /// `Ok`, else not, and why.
    Landlock {
        netns: std::result::Result<(), String>,
        extras: Extras,
    },
    /// Not confined, and why (`SANDBOX=off`, or no Landlock ABI ≥ 4 with `auto`).
    Unconfined { why: String, warn: bool },
}

impl Confinement {
    /// One line for `hank doctor`, the run's start and `hank status`: the parts the agent gets
    /// ([`Confinement::name`]), what they confine, and what stays open.
    #[must_use]
    pub fn describe(&self) -> String {
        let (netns, extras) = match self {
            Self::Unconfined { why, .. } => {
                return format!("off: the agent runs unconfined ({why})");
            }
            Self::Landlock { netns, extras } => (netns, extras),
        };
        let mut what = vec![
            "runs in a session of its own with no terminal".to_string(),
            "writes only its project, TMPDIR and its client's state (not its configuration)".to_string(),
            "reads no other file of HOME, no credential file of its toolchains and of /dev only null, zero, full, random and urandom".to_string(),
        ];
        if extras.ioctl_dev {
            what.push("sends no ioctl to another device".into());
        }
        if extras.scopes {
            what.push("signals and reaches abstract Unix sockets of its own processes only".into());
        }
        what.push(match netns {
            Ok(()) => "reaches the network only through hank's egress proxy (its own network namespace has only loopback) and Unix sockets only in the paths it is granted (in its own mount namespace, /home, /root, /tmp, /run, /var and the like hold only what it is granted)".into(),
            Err(_) => "connects by TCP only to hank's egress proxy".into(),
        });
        let last = what.pop().unwrap_or_default();
        let mut text = format!(
            "{}: the agent {}, and {last}; still open: {}",
            self.name(),
            what.join(", "),
            self.still_open().join(", ")
        );
        if let Err(why) = netns {
            text.push_str(&format!(" (no network namespace: {why})"));
        }
        text
    }

    /// What a confined agent can still do (said in `doctor` and `status`, never claimed
    /// closed); empty when unconfined.
    #[must_use]
    pub fn still_open(&self) -> Vec<&'static str> {
        let Self::Landlock { netns, extras } = self else {
            return Vec::new();
        };
        let mut open = Vec::new();
        if netns.is_err() {
            open.extend(["UDP (DNS included)", "other hosts on the proxy's own port"]);
        }
        if netns.is_err() && !extras.scopes {
            open.push("abstract Unix sockets");
        }
        if !extras.scopes {
            open.push("signals to the user's other processes, hank's included (no Landlock ABI 6)");
        }
        if !extras.ioctl_dev {
            open.push("ioctls on the devices it may open (no Landlock ABI 5)");
        }
        open.push(if netns.is_ok() {
            STILL_OPEN_GRANTED_SOCKETS
        } else {
            STILL_OPEN_SOCKETS
        });
        open.push("CPU and memory");
        open
    }

    /// The parts the agent gets, as shown in status: `landlock-fs+landlock-net`, then
    /// `+landlock-ioctl` (ABI 5), `+landlock-scope` (ABI 6) and `+netns` when it gets them;
    /// or `off`.
    #[must_use]
    pub fn name(&self) -> String {
        let Self::Landlock { netns, extras } = self else {
            return "off".into();
        };
        let mut name = String::from("landlock-fs+landlock-net");
        if extras.ioctl_dev {
            name.push_str("+landlock-ioctl");
        }
        if extras.scopes {
            name.push_str("+landlock-scope");
        }
        if netns.is_ok() {
            name.push_str("+netns");
        }
        name
    }

    /// Whether the agent gets its own network namespace.
    #[must_use]
    pub fn netns(&self) -> bool {
        matches!(self, Self::Landlock { netns: Ok(()), .. })
    }
}

/// What stays open whatever the kernel: Landlock (before ABI 9) does not govern `connect()` on
/// a Unix socket's path, and hank makes no mount namespace.
/// What stays reachable of Unix sockets in the agent's own mount namespace.
pub const STILL_OPEN_GRANTED_SOCKETS: &str =
    "Unix sockets in the paths it is granted (its project's, its client's state's)";

/// What stays reachable of Unix sockets without a namespace of the agent's own.
pub const STILL_OPEN_SOCKETS: &str = "Unix sockets on paths it can name (the ones named in the user's environment — SSH agent, D-Bus, X11/Wayland, tmux… — are removed from its environment)";

/// The decision for `mode` on a kernel where Landlock ABI ≥ 4 is (or is not) `available`, with
/// the later parts it has (`extras`);
/// `netns` is asked only for a confined agent: whether it gets its own network namespace
/// (`Err`: why not).
///
/// # Errors
/// `SANDBOX=landlock` on a kernel without it: the run must not start.
pub fn decide(
    mode: Mode,
    available: bool,
    extras: Extras,
    netns: impl FnOnce() -> std::result::Result<(), String>,
) -> std::result::Result<Confinement, String> {
    match (mode, available) {
        (Mode::Off, _) => Ok(Confinement::Unconfined {
            why: "SANDBOX=off".into(),
            warn: false,
        }),
        (Mode::Auto | Mode::Landlock, true) => Ok(Confinement::Landlock {
            netns: netns(),
            extras,
        }),
        (Mode::Auto, false) => Ok(Confinement::Unconfined {
            why: "SANDBOX=auto and this kernel has no Landlock ABI 4 or later".into(),
            warn: true,
        }),
        (Mode::Landlock, false) => Err(
            "SANDBOX=landlock: this kernel has no Landlock ABI 4 or later (filesystem and TCP rules); use SANDBOX=auto or off to run unconfined".into(),
        ),
    }
}

/// Whether this kernel enforces Landlock with TCP connect rules (ABI ≥ 4): a ruleset handling
/// them is created (and dropped) as a hard requirement.
#[must_use]
pub fn available() -> bool {
    let ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    ruleset
        .handle_access(AccessFs::from_all(NEEDED_ABI))
        .and_then(|r| r.handle_access(AccessNet::ConnectTcp))
        .and_then(Ruleset::create)
        .is_ok()
}

/// The profile's `[sandbox]` table: the client's own state (written), its configuration (read
/// only, guarded) and which APIs it calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSandbox {
    /// Paths under HOME (`~/…`) the client writes its own state to (read and write): sessions,
    /// transcripts, caches, its login's token. `write` is the older name of the list.
    #[serde(default, alias = "write")]
    pub state: Vec<String>,
    /// The client's configuration (`~/…`; a `*` stands for one folder name): settings, hooks,
    /// MCP servers, memory files, commands, agents, plugins. Read only to the agent; where an
    /// entry lies in a `state` path (Landlock cannot take a path out of a folder it grants),
    /// hank guards it instead: kept before each call, a change undone after it and reported
    /// ([`guard`]).
    #[serde(default)]
    pub config: Vec<String>,
    /// The API endpoints the egress proxy lets through.
    #[serde(default)]
    pub api: Vec<ApiEndpoint>,
}

/// One API endpoint: the base URL from `env` when it is set in the agent's environment, else
/// `default`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiEndpoint {
    pub env: String,
    pub default: String,
}

/// `host:port` of a URL or a host entry (`https://h/…` → `h:443`, `http://h:8080` →
/// `h:8080`, `h` → `h:443`), lower-cased; `None` when there is no host (pure).
#[must_use]
pub fn host_port(entry: &str) -> Option<String> {
    let entry = entry.trim();
    let (default_port, rest) = if let Some(r) = entry.strip_prefix("https://") {
        (443, r)
    } else if let Some(r) = entry.strip_prefix("http://") {
        (80, r)
    } else {
        (443, entry)
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit('@').next().unwrap_or("");
    if authority.is_empty() {
        return None;
    }
    let (host, port) = split_host_port(authority, default_port)?;
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'))
    {
        return None;
    }
    Some(format!("{}:{port}", host.to_ascii_lowercase()))
}

/// `host[:port]` (with `[v6]` brackets kept) split, `default` when there is no port.
fn split_host_port(authority: &str, default: u16) -> Option<(&str, u16)> {
    if authority.starts_with('[') {
        let end = authority.find(']')?;
        let host = &authority[..=end];
        return match &authority[end + 1..] {
            "" => Some((host, default)),
            p => Some((host, p.strip_prefix(':')?.parse().ok()?)),
        };
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h, p.parse().ok().filter(|p| *p > 0)?)),
        None => Some((authority, default)),
    }
}

/// SANDBOX_ALLOW_HOSTS: entries separated by spaces or commas, each a host, `host:port` or
/// URL; `None` when one is not (pure).
#[must_use]
pub fn parse_hosts(text: &str) -> Option<Vec<String>> {
    text.split([' ', ',', '\t', '\n'])
        .filter(|e| !e.is_empty())
        .map(host_port)
        .collect()
}

/// The hosts the proxy lets through for a profile: each endpoint's URL from the agent's
/// environment (`env` = the variables the agent gets, `None` = unset) or its default, then
/// `extra` (pure).
#[must_use]
pub fn allowed_hosts(
    profile: &ProfileSandbox,
    env: impl Fn(&str) -> Option<String>,
    extra: &[String],
) -> Vec<String> {
    let mut hosts: Vec<String> = profile
        .api
        .iter()
        .filter_map(|a| {
            let url = env(&a.env).filter(|v| !v.trim().is_empty());
            host_port(url.as_deref().unwrap_or(&a.default))
        })
        .collect();
    hosts.extend(extra.iter().cloned());
    hosts.sort();
    hosts.dedup();
    hosts
}

/// The paths and port of one confined agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Read (and execute) only.
    pub read: Vec<PathBuf>,
    /// Read and write (create, remove, rename beneath).
    pub write: Vec<PathBuf>,
    /// The one TCP port the agent may connect to (the egress proxy's).
    pub port: u16,
    /// The agent's own network namespace, whose proxy port is handed to the proxy over its
    /// Unix socket at this path ([`netns`]); `None`: the host's network.
    pub netns: Option<PathBuf>,
    /// The run's network namespace, held by a process of hank's for the whole run and entered
    /// by each call ([`netns::Held`]); `None`: each call makes its own.
    pub held: Option<netns::Held>,
}

/// [`Rules`] as `hank-sandbox` receives them (one serialized value, [`Rules::to_arg`]).
#[derive(serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    read: Vec<WirePath>,
    write: Vec<WirePath>,
    port: u16,
    netns: Option<WirePath>,
    #[serde(default)]
    held: Option<netns::Held>,
}

/// A path in [`Wire`]: its text, or its bytes where it is not UTF-8.
#[derive(serde::Serialize, Deserialize)]
#[serde(untagged)]
enum WirePath {
    Text(String),
    Bytes(Vec<u8>),
}

impl WirePath {
    fn of(path: &Path) -> Self {
        use std::os::unix::ffi::OsStrExt;
        path.to_str().map_or_else(
            || Self::Bytes(path.as_os_str().as_bytes().to_vec()),
            |t| Self::Text(t.to_owned()),
        )
    }

    fn into_path(self) -> PathBuf {
        use std::os::unix::ffi::OsStringExt;
        match self {
            Self::Text(t) => PathBuf::from(t),
            Self::Bytes(b) => PathBuf::from(OsString::from_vec(b)),
        }
    }
}

/// The system's read-only part. `/run` is left out but for the resolver's files (it holds
/// users' agent sockets and keyrings); `/tmp` is replaced by the run's own TMPDIR; of `/dev`
/// only the random sources (never a terminal — `/dev/tty`, `/dev/pts/*`, `/dev/console` —
/// nor `/dev/shm`, shared with every process of the user). `/dev/fd`, `/dev/stdin`,
/// `/dev/stdout` and `/dev/stderr` are links into `/proc/self/fd`, read through `/proc`.
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/etc",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/sys",
    "/dev/random",
    "/dev/urandom",
    "/run/systemd/resolve",
    "/nix/store",
];

/// Devices the agent's tools write (git needs `/dev/null` writable); with Landlock ABI 5 the
/// only devices it may send an ioctl to (an `isatty` on them says "not a terminal").
const DEVICES_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Files under HOME that hold credentials of the toolchains and tools an agent uses (crates.io
/// and registry tokens, npm, PyPI and Docker logins, git's and gh's stored credentials, SSH
/// and GnuPG keys, cloud logins). No SANDBOX_READ or SANDBOX_WRITE entry that is one of them,
/// holds one or lies beneath one is granted ([`refused_grant`]).
pub const CREDENTIAL_FILES: &[&str] = &[
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".cargo/config",
    ".cargo/config.toml",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".docker/config.json",
    ".config/gh",
    ".config/glab-cli",
    ".config/hub",
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".gem/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".local/share/keyrings",
    ".password-store",
];

/// Why SANDBOX_READ / SANDBOX_WRITE's `entry` is not granted: it is, holds or lies beneath a
/// credential file of [`CREDENTIAL_FILES`] (compared as written and, where they exist, with
/// links resolved); `None` when it may be. The message names the file.
#[must_use]
pub fn refused_grant(entry: &str, home: Option<&Path>) -> Option<String> {
    refused_among(entry, home, &credential_places(home))
}

/// Each credential file of [`CREDENTIAL_FILES`] under `home`, as written and with links
/// resolved where it exists: resolved once for all the entries of a call (each resolution
/// reads every component's link).
fn credential_places(home: Option<&Path>) -> Vec<(&'static str, Vec<PathBuf>)> {
    let Some(home) = home else {
        return Vec::new();
    };
    CREDENTIAL_FILES
        .iter()
        .map(|c| {
            let cred = home.join(c);
            let real = std::fs::canonicalize(&cred).ok();
            (*c, [Some(cred), real].into_iter().flatten().collect())
        })
        .collect()
}

/// [`refused_grant`] against credential places already resolved.
fn refused_among(
    entry: &str,
    home: Option<&Path>,
    creds: &[(&'static str, Vec<PathBuf>)],
) -> Option<String> {
    let path = expand(entry, home)?;
    home?;
    let real = std::fs::canonicalize(&path).ok();
    let paths: Vec<PathBuf> = [Some(path), real].into_iter().flatten().collect();
    creds.iter().find_map(|(c, places)| {
        let clash = paths
            .iter()
            .any(|p| places.iter().any(|c| c.starts_with(p) || p.starts_with(c)));
        clash.then(|| {
            format!(
                "SANDBOX: `{entry}` is not granted to the agent: it is, holds or lies beneath ~/{c} (a credential file's place); name the folders the agent needs instead (e.g. ~/.cargo/bin ~/.cargo/registry)"
            )
        })
    })
}

/// The warnings for the SANDBOX_READ and SANDBOX_WRITE entries [`refused_grant`] leaves out
/// (said at the run's start).
#[must_use]
pub fn refused_grants(read: &[String], write: &[String], home: Option<&Path>) -> Vec<String> {
    let creds = credential_places(home);
    read.iter()
        .chain(write)
        .filter_map(|e| refused_among(e, home, &creds))
        .collect()
}

/// Where the facts for one agent's rules come from.
#[derive(Debug)]
pub struct Place<'a> {
    /// The folder the agent works in (project or task worktree).
    pub cwd: &'a Path,
    pub home: Option<&'a Path>,
    /// The run's private TMPDIR.
    pub tmp: &'a Path,
    /// The agent's program as hank will start it (a name is looked up in `path`).
    pub program: &'a Path,
    pub path: Option<&'a OsStr>,
    /// `[sandbox] state` of the profile (read and write).
    pub client_write: &'a [String],
    /// `[sandbox] config` of the profile (read only; an entry with a `*` is left to the guard).
    pub client_config: &'a [String],
    /// SANDBOX_READ.
    pub extra_read: &'a [String],
    /// SANDBOX_WRITE.
    pub extra_write: &'a [String],
    pub proxy_port: u16,
    /// The proxy's Unix socket, when the agent gets its own network namespace.
    pub netns: Option<&'a Path>,
    /// The run's held network namespace, when hank holds one.
    pub held: Option<netns::Held>,
}

/// `~/x` under `home`, an absolute path as it is (a trailing `/` dropped); `None` otherwise.
pub(crate) fn expand(entry: &str, home: Option<&Path>) -> Option<PathBuf> {
    let entry = match entry.trim_end_matches('/') {
        "" => "/",
        e => e,
    };
    if entry == "~" || entry == "/" {
        return None; // never the whole HOME, never the whole system
    }
    match entry.strip_prefix("~/") {
        Some(rest) => home.map(|h| h.join(rest)),
        None => Some(PathBuf::from(entry)).filter(|p| p.is_absolute()),
    }
}

/// The state folders of a profile's `[sandbox] state` (the entries that end in `/`) that do not
/// exist yet, made with mode 0700 (parents included): Landlock grants only a path that exists,
/// and a confined client cannot make its own folder in HOME on its first run. Files are never
/// made (a client's own file format is its business). The folders made.
///
/// # Errors
/// A folder cannot be made.
pub fn make_state_dirs(entries: &[String], home: Option<&Path>) -> std::io::Result<Vec<PathBuf>> {
    use std::os::unix::fs::DirBuilderExt;
    let mut made = Vec::new();
    for dir in entries
        .iter()
        .filter(|e| e.ends_with('/'))
        .filter_map(|e| expand(e, home))
    {
        if std::fs::symlink_metadata(&dir).is_err() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
            made.push(dir);
        }
    }
    Ok(made)
}

impl Rules {
    /// The rules for an agent at `place`: the files it needs and nothing else of HOME.
    #[must_use]
    pub fn for_agent(place: &Place<'_>) -> Self {
        let creds = credential_places(place.home);
        let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
        read.extend(
            place
                .extra_read
                .iter()
                .filter(|e| refused_among(e, place.home, &creds).is_none())
                .filter_map(|e| expand(e, place.home)),
        );
        read.extend(install_dirs(place.program, place.path));
        read.extend(
            place
                .client_config
                .iter()
                .filter(|e| !e.contains('*'))
                .filter_map(|e| expand(e, place.home)),
        );
        let mut write: Vec<PathBuf> = vec![place.cwd.to_path_buf(), place.tmp.to_path_buf()];
        write.extend(DEVICES_WRITE.iter().map(PathBuf::from));
        write.extend(
            place
                .client_write
                .iter()
                .filter_map(|e| expand(e, place.home)),
        );
        write.extend(
            place
                .extra_write
                .iter()
                .filter(|e| refused_among(e, place.home, &creds).is_none())
                .filter_map(|e| expand(e, place.home)),
        );
        let (git_read, git_write) = worktree_git(place.cwd);
        read.extend(git_read);
        write.extend(git_write);
        read.retain(|p| p.exists());
        write.retain(|p| p.exists());
        // Each path also as its links resolve now, once (the agent's own mount namespace binds
        // both back; `hank-sandbox` resolves nothing itself at a call).
        for list in [&mut read, &mut write] {
            let real: Vec<PathBuf> = list
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok().filter(|r| r != p))
                .filter(|r| !list.contains(r))
                .collect();
            list.extend(real);
        }
        Self {
            read,
            write,
            port: place.proxy_port,
            netns: place.netns.map(Path::to_path_buf),
            held: place.held.filter(|_| place.netns.is_some()),
        }
    }

    /// The same rules with the project read-only (the reviewer's call, `REVIEW_AGENT`): `cwd`
    /// and every write rule beneath it, and a task worktree's git folders, become read
    /// rules; the run's TMPDIR, the devices and the client's own state stay writable.
    pub fn read_only_in(&mut self, cwd: &Path) {
        let (_, git_write) = worktree_git(cwd);
        let real = std::fs::canonicalize(cwd).ok();
        let git_real: Vec<PathBuf> = git_write
            .iter()
            .filter_map(|g| std::fs::canonicalize(g).ok())
            .collect();
        let (project, keep): (Vec<PathBuf>, Vec<PathBuf>) =
            std::mem::take(&mut self.write).into_iter().partition(|p| {
                p.starts_with(cwd)
                    || real.as_ref().is_some_and(|r| p.starts_with(r))
                    || git_write.contains(p)
                    || git_real.contains(p)
            });
        self.write = keep;
        self.read.extend(project);
    }

    /// The rules as the one argument of `hank-sandbox` before `--`: a JSON object
    /// (`{"read":[…],"write":[…],"port":N,"netns":…}`, each path a string, or its bytes where
    /// it is not UTF-8), read back by [`Rules::from_args`] only.
    #[must_use]
    pub fn to_arg(&self) -> OsString {
        let wire = Wire {
            read: self.read.iter().map(|p| WirePath::of(p)).collect(),
            write: self.write.iter().map(|p| WirePath::of(p)).collect(),
            port: self.port,
            netns: self.netns.as_deref().map(WirePath::of),
            held: self.held,
        };
        // A value of strings, byte lists and a number always serializes.
        OsString::from(serde_json::to_string(&wire).unwrap_or_default())
    }

    /// The rules and the command of `hank-sandbox RULES -- PROGRAM ARGS…` ([`Rules::to_arg`]).
    ///
    /// # Errors
    /// The rules are not [`Rules::to_arg`]'s, or there is no command.
    pub fn from_args(args: &[OsString]) -> Result<(Self, &[OsString])> {
        let bad = |what: &str| HankError::usage(format!("{ENTER}: {what}"));
        let [rules, dashes, command @ ..] = args else {
            return Err(bad("expected `RULES -- PROGRAM ARGS…`"));
        };
        if dashes != "--" || command.is_empty() {
            return Err(bad("expected `RULES -- PROGRAM ARGS…`"));
        }
        Ok((Self::from_arg(rules)?, command))
    }

    /// The rules of [`Rules::to_arg`]'s one argument.
    ///
    /// # Errors
    /// It is not [`Rules::to_arg`]'s JSON.
    pub fn from_arg(rules: &OsStr) -> Result<Self> {
        let bad = |what: &str| HankError::usage(format!("{ENTER}: {what}"));
        let wire: Wire = rules
            .to_str()
            .ok_or_else(|| bad("RULES: expected UTF-8 JSON"))
            .and_then(|r| {
                serde_json::from_str(r)
                    .map_err(|e| bad(&format!("RULES: expected the rules' JSON: {e}")))
            })?;
        Ok(Self {
            read: wire.read.into_iter().map(WirePath::into_path).collect(),
            write: wire.write.into_iter().map(WirePath::into_path).collect(),
            port: wire.port,
            netns: wire.netns.map(WirePath::into_path),
            held: wire.held,
        })
    }

    /// Every path granted, read or write, sorted once each: what the agent's mount namespace
    /// binds back ([`mounts::hide_ungranted`]), so two calls whose rules grant the same paths
    /// (the worker's and the reviewer's, read-only) see the same view.
    #[must_use]
    pub fn granted(&self) -> Vec<PathBuf> {
        let mut all: Vec<PathBuf> = self.read.iter().chain(&self.write).cloned().collect();
        all.sort();
        all.dedup();
        all
    }

    /// Restricts this process (and everything it starts) to the rules, all or nothing: ABI 4's
    /// files and TCP connect as a hard requirement, and each of the [`Extras`] this kernel has
    /// (ioctl on devices, the signal and abstract Unix socket scopes).
    ///
    /// # Errors
    /// Landlock ABI 4 is not enforced on this kernel, or a rule cannot be added.
    pub fn restrict_self(&self) -> Result<()> {
        let fail = |e: &dyn std::fmt::Display| {
            HankError::usage(format!(
                "{ENTER}: Landlock could not confine the agent: {e}"
            ))
        };
        let extras = Extras::here();
        let abi = extras.fs_abi();
        let status = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.handle_access(AccessNet::ConnectTcp))
            .and_then(|r| {
                if extras.scopes {
                    r.scope(Scope::from_all(ABI::V6))
                } else {
                    Ok(r)
                }
            })
            .and_then(Ruleset::create)
            .and_then(|r| r.add_rules(path_beneath_rules(&self.read, AccessFs::from_read(abi))))
            .and_then(|r| r.add_rules(path_beneath_rules(&self.write, AccessFs::from_all(abi))))
            .and_then(|r| r.add_rule(NetPort::new(self.port, AccessNet::ConnectTcp)))
            .and_then(|r| r.restrict_self())
            .map_err(|e| fail(&e))?;
        if status.ruleset == RulesetStatus::FullyEnforced {
            Ok(())
        } else {
            Err(fail(&"the ruleset is not fully enforced"))
        }
    }
}

/// The folders of the agent's install: the program's own folder and, when it is a link (npm's
/// `bin/claude` → `…/node_modules/@anthropic-ai/claude-code/bin/claude.exe`), the target's
/// folder; for a program inside a `node_modules` tree, that whole tree (the outermost
/// `node_modules` above it: npm's CLIs read their packages' `package.json` and start binaries
/// of other packages, e.g. codex's `@openai/codex-linux-x64`).
fn install_dirs(program: &Path, path: Option<&OsStr>) -> Vec<PathBuf> {
    let found = if program.components().count() > 1 {
        Some(program.to_path_buf())
    } else {
        path.and_then(|p| {
            std::env::split_paths(p)
                .map(|d| d.join(program))
                .find(|c| c.is_file())
        })
    };
    let Some(found) = found else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = found.parent().map(Path::to_path_buf).into_iter().collect();
    if let Ok(real) = std::fs::canonicalize(&found)
        && let Some(dir) = real.parent()
    {
        dirs.push(dir.to_path_buf());
    }
    let trees: Vec<PathBuf> = dirs.iter().filter_map(|d| node_modules_of(d)).collect();
    dirs.extend(trees);
    let venvs: Vec<PathBuf> = dirs.iter().flat_map(|d| venv_of(d)).collect();
    dirs.extend(venvs);
    dirs
}

/// For a program in a Python virtual environment's `bin/` (pip's, pipx's, uv's: a folder beside
/// `pyvenv.cfg`), the environment and the Python it was made from (the prefix above the
/// `home = …/bin` that `pyvenv.cfg` names): the program imports its packages from the one and
/// runs the interpreter and standard library of the other. Never `/` nor a whole HOME.
fn venv_of(bin: &Path) -> Vec<PathBuf> {
    let Some(root) = bin.parent() else {
        return Vec::new();
    };
    let Ok(cfg) = crate::fsread::read(
        &root.join("pyvenv.cfg"),
        crate::fsread::CONFIG_LIMIT,
        crate::fsread::Follow::Yes,
    ) else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&cfg);
    let home = text.lines().find_map(|l| {
        let (key, value) = l.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    });
    let base = home
        .filter(|h| h.is_absolute())
        .and_then(|h| h.parent().map(Path::to_path_buf))
        .filter(|p| p.parent().is_some())
        .filter(|p| std::env::var_os("HOME").is_none_or(|h| *p != Path::new(&h)));
    std::iter::once(root.to_path_buf()).chain(base).collect()
}

/// The outermost folder named `node_modules` that holds `dir` (or is it), if any (pure).
fn node_modules_of(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .map(Path::to_path_buf)
}

/// The git folders of the agent working in `cwd`: (read, write). Never read again from what
/// the agent can write once resolved (issue 47):
///
/// - a fleet task's worktree: the rules hank recorded when it pinned it ([`record_git_rules`],
///   from `crate::git::TaskWorktree::agent_git_rules`) — write the agent's own repository
///   (`<common>/worktrees/<id>/agent`), read the checkout's objects (its alternate); nothing of
///   the user's refs, reflogs, objects, `config`, `hooks/` or `info/`. A pinned worktree hank
///   gave no repository of its own gets no git write at all (read: the checkout's git dir).
/// - any other linked worktree (`hank run` in a worktree of the user's): its `.git` file and
///   `commondir` read once, at this process's first call, and frozen — read the common dir,
///   write the worktree's own git dir, the object store, refs and logs.
/// - a plain checkout: nothing (its `.git` is inside the project).
pub(crate) fn worktree_git(cwd: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    {
        let recorded = RECORDED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let resolved = std::fs::canonicalize(cwd).ok();
        if let Some((_, rules)) = recorded.iter().find(|(names, _)| {
            names
                .iter()
                .any(|n| n == cwd || Some(n) == resolved.as_ref())
        }) {
            return rules.clone();
        }
    }
    static FROZEN: std::sync::Mutex<Vec<(PathBuf, GitRules)>> = std::sync::Mutex::new(Vec::new());
    let mut frozen = FROZEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, rules)) = frozen.iter().find(|(d, _)| d == cwd) {
        return rules.clone();
    }
    let rules = linked_worktree_git(cwd);
    frozen.push((cwd.to_path_buf(), rules.clone()));
    rules
}

/// Read and write rules of git folders.
type GitRules = (Vec<PathBuf>, Vec<PathBuf>);

/// The git rules hank recorded for work trees it pinned (each by the names it may be given).
static RECORDED: std::sync::Mutex<Vec<(Vec<PathBuf>, GitRules)>> =
    std::sync::Mutex::new(Vec::new());

/// Records the git rules of a fleet task's work tree known by `names` (its path as named and
/// resolved): what its agent reads and writes of git, from hank's own record, for every
/// later call of this process (`crate::git::TaskWorktree::record_for_sandbox`: a worker at
/// its start).
pub fn record_git_rules(names: &[PathBuf], read: Vec<PathBuf>, write: Vec<PathBuf>) {
    let mut recorded = RECORDED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    recorded.retain(|(n, _)| !n.iter().any(|x| names.contains(x)));
    recorded.push((names.to_vec(), (read, write)));
}

/// A linked worktree's git dirs (its `.git` is a file `gitdir: <common>/worktrees/<slug>`): read
/// the common dir (config, hooks), write the worktree's own git dir, the object store, refs
/// and logs. Nothing for a plain checkout.
fn linked_worktree_git(cwd: &Path) -> GitRules {
    let Ok(text) = std::fs::read_to_string(cwd.join(".git")) else {
        return (Vec::new(), Vec::new());
    };
    let Some(gitdir) = text.trim().strip_prefix("gitdir:").map(str::trim) else {
        return (Vec::new(), Vec::new());
    };
    let own = cwd.join(gitdir);
    let common = std::fs::read_to_string(own.join("commondir"))
        .map(|c| own.join(c.trim()))
        .unwrap_or_else(|_| own.join("../.."));
    let common = std::fs::canonicalize(&common).unwrap_or(common);
    let write = ["objects", "refs", "logs", "packed-refs"]
        .iter()
        .map(|d| common.join(d))
        .chain([own])
        .collect();
    (vec![common], write)
}

#[cfg(test)]
mod tests;
