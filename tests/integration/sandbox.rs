//! SANDBOX with the real Landlock of this kernel (no root): a probe agent (the fake `claude`
//! with an `effect.sh`) tries what a confined agent must not do and what it must still do.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;

use crate::support::{Project, TICK_ONE, stderr};

/// A loopback HTTP server answering every request with `body`, on its own thread.
fn serve(body: &'static str) -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let _ = c.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    port
}

/// The probe: each attempt appends one word to `probe.log` in the project.
const PROBE: &str = r#"
log() { echo "$1" >> probe.log; }
if cat "$HOME/.ssh/id_ed25519" >/dev/null 2>&1; then log read-key; else log no-key; fi
if echo x > "$HOME/x" 2>/dev/null; then log wrote-home; else log no-home; fi
if echo x > ../sibling/x 2>/dev/null; then log wrote-sibling; else log no-sibling; fi
if curl --noproxy '*' -fsS -m 10 "http://127.0.0.1:$PROBE_OTHER_PORT/" >/dev/null 2>&1; then log direct; else log no-direct; fi
if curl -fsS -m 10 "http://evil.example/" >/dev/null 2>&1; then log evil; else log no-evil; fi
if [ "$(curl -fsS -m 10 "$ANTHROPIC_BASE_URL/v1/ping" 2>/dev/null)" = pong ]; then log api; else log no-api; fi
if echo work > work.txt && git add work.txt && git commit -qm work; then log committed; else log no-commit; fi
f="${TMPDIR:-/tmp}/hank-probe-$$"
if echo t > "$f"; then rm -f "$f"; log tmp; else log no-tmp; fi
{ echo udp > "/dev/udp/127.0.0.1/$PROBE_UDP_PORT"; } 2>/dev/null
if { echo x > /dev/udp/192.0.2.1/53; } 2>/dev/null; then log udp-out; else log no-udp-out; fi
log "netns $(readlink /proc/self/ns/net)"
"#;

/// What the probe did besides its fixed attempts: whether its datagram reached the UDP
/// listener outside, whether a datagram to another host could be sent, and its network
/// namespace.
struct Network {
    udp_received: bool,
    udp_out: bool,
    netns: String,
}

/// A git project, a planted key, a sibling folder, the API, another loopback listener and a
/// UDP one; the probe run once with `sandbox` (SANDBOX's value); what it logged (its fixed
/// attempts) and what it did on the network.
fn probe(sandbox: &str) -> (Project, Vec<String>, Network) {
    let p = Project::new(&["task", "next task"]);
    p.git_init();
    let ssh = p.home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY\n").expect("write");
    let sibling = p.dir.parent().expect("root").join("sibling");
    std::fs::create_dir_all(&sibling).expect("mkdir");
    p.fake("effect-1.sh", &format!("{PROBE}{TICK_ONE}"));
    let (api, other) = (serve("pong"), serve("other"));
    let udp = std::net::UdpSocket::bind(("127.0.0.1", 0)).expect("udp");
    udp.set_nonblocking(true).expect("nonblocking");
    let udp_port = udp.local_addr().expect("addr").port();
    let fake = p.fake.display().to_string();
    let out = p
        .cmd()
        .env("SANDBOX", sandbox)
        .env("SANDBOX_WRITE", &fake)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{api}"))
        .env("PROBE_OTHER_PORT", other.to_string())
        .env("PROBE_UDP_PORT", udp_port.to_string())
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .args(["run", "--max-loops", "2"])
        .output()
        .expect("run hank");
    let log = std::fs::read_to_string(p.dir.join("probe.log")).unwrap_or_default();
    assert!(!log.is_empty(), "the probe did not run: {}", stderr(&out));
    let mut lines: Vec<String> = log.lines().map(str::to_string).collect();
    let netns = lines
        .iter()
        .position(|l| l.starts_with("netns "))
        .map(|i| lines.remove(i))
        .unwrap_or_default();
    let udp_out = lines.iter().position(|l| l.ends_with("udp-out"));
    let udp_out = udp_out.is_some_and(|i| lines.remove(i) == "udp-out");
    let network = Network {
        udp_received: udp.recv(&mut [0u8; 16]).is_ok(),
        udp_out,
        netns: netns.trim_start_matches("netns ").to_string(),
    };
    (p, lines, network)
}

fn landlock_here() -> bool {
    hank::sandbox::available()
}

/// The parts a confined agent gets on this kernel, as status names them (`netns`: whether it
/// gets its own network namespace).
fn parts(netns: bool) -> String {
    let extras = hank::sandbox::Extras::here();
    let mut name = String::from("landlock-fs+landlock-net");
    if extras.ioctl_dev {
        name.push_str("+landlock-ioctl");
    }
    if extras.scopes {
        name.push_str("+landlock-scope");
    }
    if netns {
        name.push_str("+netns");
    }
    name
}

/// Whether hank can make a network namespace on this machine (root, or unprivileged user
/// namespaces), as a run would find out: `hank __sandbox --probe-netns`; else why not.
fn netns_here() -> Result<(), String> {
    let out = std::process::Command::new(crate::support::hank_bin())
        .args(["__sandbox", "--probe-netns"])
        .output()
        .expect("run the probe");
    if out.status.success() {
        Ok(())
    } else {
        Err(stderr(&out))
    }
}

/// This process's network namespace (`net:[N]`).
fn own_netns() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .map(|l| l.display().to_string())
        .unwrap_or_default()
}

#[test]
fn a_sandboxed_agent_is_refused_keys_home_siblings_and_other_hosts_and_still_works() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let (p, log, network) = probe("landlock");
    assert_eq!(
        log,
        [
            "no-key",
            "no-home",
            "no-sibling",
            "no-direct",
            "no-evil",
            "api",
            "committed",
            "tmp"
        ],
    );
    assert!(!p.home.join("x").exists());
    let denied = p.events_of("egress_denied");
    assert!(
        denied.iter().any(|e| e["host"] == "evil.example:80"),
        "{denied:?}"
    );
    let log = crate::support::git(&p.dir, &["log", "--format=%s"]);
    assert!(log.lines().any(|l| l == "work"), "{log}");
    // Told: status.json, `hank status`, and the next loop's context.
    // The network: in its own namespace (where hank can make one) the agent's datagrams
    // reach nothing outside and no other host; otherwise status says UDP stays open.
    let status = p.status();
    let sandbox = status["sandbox"].as_str().unwrap_or_default();
    match netns_here() {
        Ok(()) => {
            assert!(
                sandbox.starts_with(&format!("{}: ", parts(true))),
                "{status}"
            );
            assert!(!sandbox.contains("still open: UDP"), "{sandbox}");
            assert!(sandbox.ends_with("CPU and memory"), "{sandbox}");
            assert_ne!(network.netns, own_netns(), "the agent's own namespace");
            assert!(!network.udp_received, "UDP to the host's loopback");
            assert!(!network.udp_out, "UDP to another host");
        }
        Err(why) => {
            eprintln!("no network namespace on this machine ({why}): UDP stays open");
            assert!(
                sandbox.starts_with(&format!("{}: ", parts(false))),
                "{status}"
            );
            assert!(sandbox.contains("still open: UDP"), "{sandbox}");
            assert!(sandbox.contains("no network namespace"), "{sandbox}");
            assert_eq!(network.netns, own_netns());
        }
    }
    assert!(
        status["egress_denied"][0]
            .as_str()
            .is_some_and(|d| d.starts_with("evil.example:80 at ")),
        "{status}"
    );
    let shown = p.run(&["status"]);
    let text = stderr(&shown) + &String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("sandbox:      landlock-fs+landlock-net"),
        "{text}"
    );
    assert!(text.contains("refused:    evil.example:80"), "{text}");
    let next = String::from_utf8_lossy(&p.stdin(2)).into_owned();
    assert!(
        next.contains("sandbox refused connections to evil.example:80"),
        "{next}"
    );
}

#[test]
fn doctor_says_what_confinement_the_next_run_gets() {
    let p = Project::new(&["task"]);
    let landlock = format!("{}: ", parts(netns_here().is_ok()));
    for (mode, want) in [
        ("landlock", landlock.as_str()),
        ("off", "off: the agent runs unconfined (SANDBOX=off)"),
    ] {
        if mode == "landlock" && !landlock_here() {
            continue;
        }
        let out = p
            .cmd()
            .env("SANDBOX", mode)
            .args(["doctor", "--json"])
            .output()
            .expect("doctor");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let check = crate::support::doctor_check(&v, "sandbox");
        assert_eq!(check["ok"], true, "{check}");
        assert!(
            !check["detail"]
                .as_str()
                .is_some_and(|d| d.contains("not granted")),
            "{check}"
        );
        assert!(
            check["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with(want)),
            "{check}"
        );
    }
}

/// `hank doctor` warns about a SANDBOX_READ entry that holds a credential file.
#[test]
fn doctor_warns_about_a_sandbox_read_entry_holding_credentials() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = Project::new(&["task"]);
    let out = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_READ", "~/.cargo ~/.rustup")
        .args(["doctor", "--json"])
        .output()
        .expect("doctor");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let check = crate::support::doctor_check(&v, "sandbox");
    assert!(
        check["detail"]
            .as_str()
            .is_some_and(|d| d.contains("`~/.cargo` is not granted to the agent")),
        "{check}"
    );
    assert_eq!(check["warning"], true, "{check}");
}

#[test]
fn sandbox_off_leaves_the_agent_unconfined() {
    let (_p, log, network) = probe("off");
    assert!(
        network.udp_received,
        "unconfined UDP reaches the host's loopback"
    );
    assert_eq!(network.netns, own_netns());
    assert_eq!(
        log,
        [
            "read-key",
            "wrote-home",
            "wrote-sibling",
            "direct",
            "no-evil",
            "api",
            "committed",
            "tmp"
        ],
    );
}

#[test]
fn sandbox_values_are_checked() {
    let p = Project::new(&["task"]);
    let out = p
        .cmd()
        .env("SANDBOX", "maybe")
        .args(["run", "--max-loops", "1"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("SANDBOX"), "{}", stderr(&out));
}

/// A fleet task's probe: its own worktree and commit allowed; the user's checkout and the
/// folder of the other worktrees refused.
const FLEET_PROBE: &str = r#"n=$(basename "$PWD"); out="$FAKE_CLAUDE_DIR/probe-$n"
sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
if echo x > "$PROBE_CHECKOUT/intruder-$n" 2>/dev/null; then echo wrote-checkout >> "$out"; else echo no-checkout >> "$out"; fi
if echo x > "../intruder-$n" 2>/dev/null; then echo wrote-worktrees >> "$out"; else echo no-worktrees >> "$out"; fi
if echo "$n" > "$n.txt" && git add "$n.txt" && git commit -qm "work $n"; then echo committed >> "$out"; else echo no-commit >> "$out"; fi
"#;

#[test]
fn a_fleet_task_writes_only_its_own_worktree() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = crate::fleet::project_doing("## A\n- [ ] a\n## B\n- [ ] b\n", FLEET_PROBE);
    let out = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .env("PROBE_CHECKOUT", &p.dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .args(["fleet", "--agents", "2"])
        .output()
        .expect("run hank fleet");
    for task in ["a", "b"] {
        let probe = std::fs::read_to_string(p.fake.join(format!("probe-{task}")))
            .unwrap_or_else(|_| panic!("task {task} did not run: {}", stderr(&out)));
        assert_eq!(
            probe.lines().collect::<Vec<_>>(),
            ["no-checkout", "no-worktrees", "committed"],
            "task {task}"
        );
        assert!(!p.dir.join(format!("intruder-{task}")).exists());
    }
}

/// `hank import`'s conversion probe: it writes the three files in its own working folder (as
/// the conversion must) and tries to read the planted key and a file of the folder it was
/// started from, and to write there and in HOME; each attempt one word in `probe` in the fake
/// agent's folder (allowed with SANDBOX_WRITE).
const IMPORT_PROBE: &str = r#"out="$FAKE_CLAUDE_DIR/probe"
mkdir -p .hank/specs
printf '## Project\n---HANK_STATUS---\n' > .hank/PROMPT.md
printf '# Fix plan\n- [ ] a\n' > .hank/fix_plan.md
printf '# Req\n' > .hank/specs/requirements.md
if cat "$HOME/.ssh/id_ed25519" >/dev/null 2>&1; then echo read-key >> "$out"; else echo no-key >> "$out"; fi
if cat "$PROBE_WORK/notes.txt" >/dev/null 2>&1; then echo read-project >> "$out"; else echo no-project-read >> "$out"; fi
if echo x > "$PROBE_WORK/intruder" 2>/dev/null; then echo wrote-project >> "$out"; else echo no-project-write >> "$out"; fi
if echo x > "$HOME/x" 2>/dev/null; then echo wrote-home >> "$out"; else echo no-home >> "$out"; fi
"#;

#[test]
fn a_sandboxed_import_works_in_its_own_folder_only() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = Project::new(&[]);
    let work = p.dir.join("work");
    std::fs::create_dir(&work).expect("mkdir");
    std::fs::write(work.join("prd.md"), "# Todo\n\n- [ ] Add a todo\n").expect("write");
    std::fs::write(work.join("notes.txt"), "private notes\n").expect("write");
    let ssh = p.home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY\n").expect("write");
    p.fake("effect.sh", IMPORT_PROBE);
    let out = p
        .cmd()
        .current_dir(&work)
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .env("PROBE_WORK", &work)
        .args(["import", "prd.md", "todo"])
        .output()
        .expect("run hank import");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let probe = std::fs::read_to_string(p.fake.join("probe")).unwrap_or_default();
    assert_eq!(
        probe.lines().collect::<Vec<_>>(),
        ["no-key", "no-project-read", "no-project-write", "no-home"],
        "{}",
        stderr(&out)
    );
    assert!(!work.join("intruder").exists());
    // The files the confined conversion wrote were moved into the new project.
    let plan = std::fs::read_to_string(work.join("todo/.hank/fix_plan.md")).unwrap_or_default();
    assert!(plan.contains("- [ ] a"), "{plan}");
}

/// The attacks of a confined agent on the user's terminal, devices, session and toolchain
/// secrets, run under a terminal (hank started in a pty by `script`): each attempt one line
/// in `probe.log`. `$HANK` is hank's pid, found up the agent's process tree.
const SESSION_PROBE: &str = r#"
log() { echo "$1" >> probe.log; }
pid=$$; HANK=
while [ "$pid" -gt 1 ]; do
  if [ "$(cat /proc/$pid/comm)" = hank ]; then HANK=$pid; break; fi
  pid=$(awk '{print $4}' /proc/$pid/stat)
done
if (exec 3</dev/tty) 2>/dev/null; then log tty-open; else log no-tty; fi
if python3 -c 'import os,fcntl,termios; fd=os.open("/dev/tty", os.O_RDONLY); fcntl.ioctl(fd, termios.TIOCSTI, b" ")' 2>/dev/null; then log tiocsti; else log no-tiocsti; fi
if python3 -c 'import os,sys,fcntl,termios; fd=os.open("/proc/"+sys.argv[1]+"/fd/0", os.O_RDONLY); fcntl.ioctl(fd, termios.TIOCSTI, b" ")' "$HANK" 2>/dev/null; then log tiocsti-hank-fd; else log no-tiocsti-hank-fd; fi
if ls /dev/pts >/dev/null 2>&1; then log pts; else log no-pts; fi
if ls /dev/shm >/dev/null 2>&1 || { echo x > /dev/shm/hank-probe; } 2>/dev/null; then log shm; else log no-shm; fi
if [ "$(head -c 8 /dev/urandom | wc -c)" = 8 ] && echo x > /dev/null && [ "$(head -c 3 /dev/zero | wc -c)" = 3 ] \
   && echo x > /dev/stderr && ls /dev/fd/ >/dev/null; then log devices; else log no-devices; fi
leaked=$(env | grep -oE '^(SSH_AUTH_SOCK|SSH_AGENT_PID|DBUS_SESSION_BUS_ADDRESS|XDG_RUNTIME_DIR|DISPLAY|TMUX|KITTY_LISTEN_ON)=' | tr -d = | sort | tr '\n' ' ')
if [ -n "$leaked" ]; then log "env $leaked"; else log no-session-env; fi
if cat "$HOME/.cargo/credentials.toml" >/dev/null 2>&1; then log cargo-token; else log no-cargo-token; fi
if [ "$("$HOME/.cargo/bin/cargo-probe")" = tool ]; then log tool; else log no-tool; fi
log "tmp $(stat -c %a "$TMPDIR")"
own=$(awk '{print $6, $7}' /proc/$$/stat); theirs=$(awk '{print $6}' /proc/$HANK/stat)
case "$own" in "$theirs "*) log shared-session;; *" 0") log own-session-no-tty;; *) log "own-session tty $own";; esac
if kill -STOP "$HANK" 2>/dev/null; then kill -CONT "$HANK"; log stopped-hank; else log no-stop-hank; fi
sleep 30 & child=$!
if kill -STOP "$child" && kill -KILL "$child"; then log killed-own-child; else log no-child-kill; fi
"#;

/// A confined agent run by a hank in a terminal: it cannot open the terminal (nor type into
/// the user's shell with `TIOCSTI`), list `/dev/pts` or `/dev/shm`, see the user's session
/// sockets, read `~/.cargo/credentials.toml` or stop hank; it still uses `/dev/null`,
/// `/dev/urandom`, a toolchain's program, its private 0700 TMPDIR and signals its own child.
#[test]
fn a_sandboxed_agent_has_no_terminal_devices_session_sockets_or_toolchain_secrets() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    if crate::support::missing("script") || crate::support::missing("python3") {
        return;
    }
    let p = Project::new(&["task", "next task"]);
    p.git_init();
    let cargo = p.home.join(".cargo");
    std::fs::create_dir_all(cargo.join("bin")).expect("mkdir");
    std::fs::write(
        cargo.join("credentials.toml"),
        "[registry]\ntoken = \"cio0123456789abcdefghijABCDEFGHIJ\"\n",
    )
    .expect("write");
    let tool = cargo.join("bin/cargo-probe");
    std::fs::write(&tool, "#!/bin/sh\necho tool\n").expect("write");
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let tmp = p.dir.parent().expect("root").join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    p.fake("effect-1.sh", &format!("{SESSION_PROBE}{TICK_ONE}"));
    let hank = crate::support::hank_bin().display().to_string();
    let out = p
        .cmd_of("script")
        .args(["-qec", &format!("{hank} run --max-loops 1"), "/dev/null"])
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        // `~/.cargo` holds the crates.io token: refused, with a warning; its `bin` granted.
        .env("SANDBOX_READ", "~/.cargo ~/.cargo/bin")
        .env("TMPDIR", &tmp)
        .env("SSH_AUTH_SOCK", tmp.join("agent.sock"))
        .env("SSH_AGENT_PID", "1")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus")
        .env("XDG_RUNTIME_DIR", "/run/user/1000")
        .env("DISPLAY", ":0")
        .env("TMUX", "/tmp/tmux-1000/default,1,0")
        .env("KITTY_LISTEN_ON", "unix:/tmp/kitty")
        .output()
        .expect("run hank in a terminal");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &stderr(&out);
    let log = std::fs::read_to_string(p.dir.join("probe.log")).unwrap_or_default();
    assert!(!log.is_empty(), "the probe did not run: {text}");
    let signals = hank::sandbox::Extras::here().scopes;
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| signals || !l.ends_with("stop-hank"))
        .collect();
    let mut want = vec![
        "no-tty",
        "no-tiocsti",
        "no-tiocsti-hank-fd",
        "no-pts",
        "no-shm",
        "devices",
        "no-session-env",
        "no-cargo-token",
        "tool",
        "tmp 700",
        "own-session-no-tty",
        "no-stop-hank",
        "killed-own-child",
    ];
    if !signals {
        eprintln!("no Landlock ABI 6 here: the agent's signals to hank are not scoped");
        want.retain(|l| *l != "no-stop-hank");
    }
    assert_eq!(lines, want, "{text}");
    assert!(
        text.contains("SANDBOX: `~/.cargo` is not granted to the agent"),
        "{text}"
    );
    // The start said what is in force.
    let status = p.status();
    let sandbox = status["sandbox"].as_str().unwrap_or_default();
    assert!(
        sandbox.contains("a session of its own with no terminal"),
        "{sandbox}"
    );
    let sockets = if netns_here().is_ok() {
        "Unix sockets in the paths it is granted"
    } else {
        "Unix sockets on paths it can name"
    };
    assert!(sandbox.contains(sockets), "{sandbox}");
    if signals {
        assert!(sandbox.contains("+landlock-scope"), "{sandbox}");
    }
}

/// The agent's private TMPDIR (0700) outlives a hank killed with SIGKILL; the next start
/// removes it (its owner is gone), and leaves the folder of a hank still running.
#[test]
fn a_killed_runs_agent_tmpdir_is_removed_at_the_next_start() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new(&["task", "next task"]);
    let tmp = p.dir.parent().expect("root").join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    // A folder of a running hank's (this test's own pid and start time).
    let me = std::process::id();
    let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let ticks = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .expect("start time");
    let alive = tmp.join(format!("hank-agent-tmp-{me}-{ticks}-alive1"));
    std::fs::create_dir(&alive).expect("mkdir");
    p.fake("sleep-1", "300");
    let mut child = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .env("TMPDIR", &tmp)
        .args(["run", "--max-loops", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn hank");
    p.wait_calls(1, std::time::Duration::from_secs(20));
    let made = |prefix: &str| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&tmp)
            .expect("read tmp")
            .flatten()
            .map(|e| e.path())
            .filter(|d| {
                d.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix) && !n.ends_with("alive1"))
            })
            .collect()
    };
    let first = made("hank-agent-tmp-");
    assert_eq!(first.len(), 1, "{first:?}");
    let mode = std::fs::metadata(&first[0])
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    child.kill().expect("SIGKILL hank");
    child.wait().expect("reap");
    assert!(first[0].exists(), "no drop ran: the folder is left");
    // The next start removes it, stops the killed run's agent, and runs.
    let out = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .env("TMPDIR", &tmp)
        .args(["run", "--max-loops", "1"])
        .output()
        .expect("run hank");
    assert!(!first[0].exists(), "{}", stderr(&out));
    assert!(alive.exists(), "a running hank's folder stays");
    assert!(
        made("hank-agent-tmp-").is_empty(),
        "the second run's folder was dropped"
    );
    assert!(
        made("hank-egress-").is_empty(),
        "{:?}",
        made("hank-egress-")
    );
}

/// A confined agent in its own session is still stopped with its whole tree at the timeout.
#[test]
fn a_sandboxed_agent_and_its_grandchild_are_stopped_at_the_timeout() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = Project::new(&["task"]);
    p.fake("sleep", "300").fake("grandchild", "");
    let out = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .args(["run", "--max-loops", "1", "-t", "2s"])
        .output()
        .expect("run hank");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(p.status()["last_loop"]["outcome"], "timeout");
    let gc = p.grandchild_pid();
    crate::support::poll(std::time::Duration::from_secs(5), || {
        (!crate::support::alive(gc)).then_some(())
    });
    assert!(!crate::support::alive(gc), "grandchild {gc} survived");
}

/// SIGTERM to hank during a confined call: the agent, in its own session, is stopped with its
/// grandchild, and hank exits 130.
#[test]
fn a_sandboxed_agent_and_its_grandchild_are_stopped_when_hank_is_interrupted() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = Project::new(&["task"]);
    p.fake("sleep", "300").fake("grandchild", "");
    let fake = p.fake.display().to_string();
    let child = p.spawn_env(
        &[("SANDBOX", "landlock"), ("SANDBOX_WRITE", fake.as_str())],
        &["--max-loops", "1"],
    );
    p.wait_calls(1, std::time::Duration::from_secs(20));
    let gc = p.grandchild_pid();
    crate::support::terminate(child);
    crate::support::poll(std::time::Duration::from_secs(5), || {
        (!crate::support::alive(gc)).then_some(())
    });
    assert!(!crate::support::alive(gc), "grandchild {gc} survived");
}

/// A write the sandbox refuses, as the agent's error output names it, is a `sandbox_denied`
/// event with the path (once in the run), shown in `hank status` (and so the monitor) with
/// SANDBOX_WRITE / SANDBOX_READ, and told to the agent in the next loop's context; an
/// unconfined agent's "Permission denied" is no sandbox refusal.
#[test]
fn a_refused_write_is_a_sandbox_denied_event_naming_the_path_and_the_setting() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = Project::new(&["task", "next task"]);
    let blocked = p.home.join("blocked.txt");
    let path = blocked.display().to_string();
    p.fake("effect-1.sh", &format!("echo x > '{path}'\n{TICK_ONE}"))
        .fake("effect-2.sh", &format!("echo x > '{path}'\n{TICK_ONE}"));
    let out = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .args(["run", "--max-loops", "2"])
        .output()
        .expect("run hank");
    let err = stderr(&out);
    assert!(!blocked.exists(), "the write was refused");
    let denied: Vec<String> = p
        .events_of("sandbox_denied")
        .iter()
        .map(|e| e["path"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        denied,
        std::slice::from_ref(&path),
        "once in the run: {err}"
    );
    assert!(err.contains("SANDBOX_WRITE"), "{err}");
    let status = p.status();
    assert_eq!(
        status["sandbox_denied"],
        serde_json::json!([path]),
        "{status}"
    );
    let shown = p.run(&["status"]);
    let text = stderr(&shown) + &String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains(&format!(
            "refused:    file {path} (allow it with SANDBOX_WRITE"
        )),
        "{text}"
    );
    let next = String::from_utf8_lossy(&p.stdin(2)).into_owned();
    assert!(
        next.contains(&path) && next.contains("SANDBOX_WRITE"),
        "{next}"
    );

    let q = Project::new(&["task"]);
    q.fake("stderr-1", "bash: /srv/data/x: Permission denied\n");
    let o = q.run(&["--max-loops", "1"]);
    assert!(q.events_of("sandbox_denied").is_empty(), "{}", stderr(&o));
}

/// A one-task fleet of `plan` under Landlock, the fake agent's folder writable (its probes
/// write there), with an identity for the agent's own commits.
fn confined_fleet(p: &Project) -> std::process::Output {
    p.cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .args(["fleet", "--agents", "1"])
        .output()
        .expect("run hank fleet")
}

/// The first task's state and message in `.hank/fleet.json`.
fn first_task(p: &Project) -> (String, String) {
    let v = crate::fleet::fleet_json(p);
    let t = &v["tasks"][0];
    (
        t["state"].as_str().unwrap_or_default().to_string(),
        t["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// Every `security` event the fleet's tasks wrote (their `events.jsonl`, followed into the
/// fleet's logs, and left in the worktrees), as the lines written.
fn security_events(p: &Project) -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let ft = e.file_type().expect("type");
            if ft.is_dir() && !ft.is_symlink() {
                walk(&path, out);
            } else if path.to_string_lossy().ends_with("events.jsonl") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                out.extend(
                    text.lines()
                        .filter(|l| l.contains("\"type\":\"security\""))
                        .map(str::to_string),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(&p.home.join(".local/state/hank"), &mut out);
    out
}

/// Issue 47, attack 1: the task's agent points its worktree's `.git` file at `$HOME` in its
/// first call. Its second call is confined by the rules hank recorded at the task's start
/// (never read again from the `.git` file): it cannot read the planted key or write `$HOME` —
/// and it never comes: the changed file stops the task's run with a `security` event naming
/// it, and the fleet fails the task with that reason.
#[test]
fn a_fleet_task_agent_that_rewrites_its_git_file_gets_no_wider_sandbox_and_is_stopped() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = crate::fleet::project_doing("# Fix plan\n\n## A\n- [ ] a1\n- [ ] a2\n", "");
    let ssh = p.home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY\n").expect("write");
    let tick = "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\n";
    p.fake(
        "effect-1.sh",
        &format!("{tick}printf 'gitdir: %s\\n' \"$HOME\" > .git\n"),
    );
    p.fake(
        "effect-2.sh",
        &format!(
            "{tick}out=\"$FAKE_CLAUDE_DIR/probe-2\"\n\
             if cat \"$HOME/.ssh/id_ed25519\" >/dev/null 2>&1; then echo read-key >> \"$out\"; else echo no-key >> \"$out\"; fi\n\
             if echo x > \"$HOME/x\" 2>/dev/null; then echo wrote-home >> \"$out\"; else echo no-home >> \"$out\"; fi\n"
        ),
    );
    let out = confined_fleet(&p);
    let err = stderr(&out);
    let probe = std::fs::read_to_string(p.fake.join("probe-2")).unwrap_or_default();
    assert!(
        !probe.contains("read-key") && !probe.contains("wrote-home"),
        "{probe}\n{err}"
    );
    assert!(!p.home.join("x").exists(), "{err}");
    let (state, message) = first_task(&p);
    assert_eq!(state, "failed", "{message}\n{err}");
    assert!(
        message.contains("security") && message.contains(".git"),
        "{message}\n{err}"
    );
    let events = security_events(&p);
    assert!(
        events.iter().any(|e| e.contains("/.git\"")),
        "no security event naming the .git file: {events:?}\n{err}"
    );
}

/// Issue 47, attack 2: the agent points the `commondir` of its worktree's git dir at a
/// folder whose config signs commits with its own program. hank's task commit never reads it
/// (the checkout's records are not the agent's to write; the agent's own repository is never
/// where hank's git runs): the program never runs.
#[test]
fn a_fleet_task_agent_that_rewrites_commondir_never_runs_its_program_in_hanks_git() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = crate::fleet::project_doing("# Fix plan\n\n## A\n- [ ] a1\n", "");
    let attack = r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
echo a > a.txt
evil="$FAKE_CLAUDE_DIR/evil"
git init -q --bare "$evil"
printf '#!/bin/sh\ntouch "%s/gpg-ran"\nexit 1\n' "$FAKE_CLAUDE_DIR" > "$FAKE_CLAUDE_DIR/gpg"
chmod +x "$FAKE_CLAUDE_DIR/gpg"
git --git-dir="$evil" config commit.gpgSign true
git --git-dir="$evil" config gpg.program "$FAKE_CLAUDE_DIR/gpg"
gd=$(git rev-parse --absolute-git-dir)
for d in "$gd" "$gd/.."; do
  if echo "$evil" > "$d/commondir" 2>/dev/null; then echo "wrote $d" >> "$FAKE_CLAUDE_DIR/probe"; fi
done
"#;
    p.fake("effect.sh", attack);
    let out = confined_fleet(&p);
    let err = stderr(&out);
    assert!(
        !p.fake.join("gpg-ran").exists(),
        "the agent's gpg.program ran in hank's git: {err}"
    );
    let files = crate::support::git(&p.dir, &["ls-tree", "-r", "--name-only", "hank/fleet"]);
    let (state, message) = first_task(&p);
    // Never merged through a planted configuration: failed, naming the file, or merged
    // without it (the agent only changed its own repository's file).
    if state == "merged" {
        assert!(files.contains("a.txt"), "{files}");
    } else {
        assert!(message.contains("commondir"), "{message}\n{err}");
    }
}

/// Issue 47, attack 3 (and the agent's own commit, which must still work): the task's agent
/// deletes the user's branch `feature` with its reflog, moves `main` and another task's
/// branch onto its commit, and deletes the user's objects, with git and with `rm`. Every one
/// of them is refused (or lands in the agent's own repository only): after the fleet the
/// user's branches, reflogs and objects are as they were, and the agent's own commit is
/// merged.
#[test]
fn a_fleet_task_agent_cannot_move_or_delete_the_users_branches_or_objects() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let p = crate::fleet::project_doing("# Fix plan\n\n## A\n- [ ] a1\n", "");
    let g = |args: &[&str]| crate::support::git(&p.dir, args).trim().to_string();
    g(&["branch", "feature"]);
    std::fs::write(p.dir.join("f.txt"), "feature\n").expect("write");
    g(&["add", "f.txt"]);
    g(&["commit", "-qm", "on main"]);
    g(&["branch", "hank/earlier"]);
    let before: Vec<String> = ["main", "feature", "hank/earlier"]
        .iter()
        .map(|b| g(&["rev-parse", b]))
        .collect();
    let attack = r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
out="$FAKE_CLAUDE_DIR/probe"
echo mine > mine.txt
git add mine.txt && git commit -qm "the agent's own commit" && echo committed >> "$out"
c=$(git rev-parse HEAD)
git update-ref -d refs/heads/feature 2>/dev/null
git update-ref refs/heads/main "$c" 2>/dev/null
git update-ref refs/heads/hank/earlier "$c" 2>/dev/null
own=$(git rev-parse --absolute-git-dir)
alt=$(head -n1 "$own/objects/info/alternates" 2>/dev/null)
for d in "$(cd "$(git rev-parse --git-common-dir)" && pwd)" "${alt%/objects}"; do
  [ -n "$d" ] && [ "$d" != "$own" ] || continue
  git --git-dir="$d" update-ref -d refs/heads/feature 2>/dev/null
  git --git-dir="$d" update-ref refs/heads/main "$c" 2>/dev/null
  git --git-dir="$d" update-ref refs/heads/hank/earlier "$c" 2>/dev/null
  rm -rf "$d/logs" "$d/refs/heads/feature" "$d/packed-refs" 2>/dev/null
  find "$d/objects" -type f -regex '.*/\(pack/.*\|[0-9a-f][0-9a-f]/.*\)' -delete 2>/dev/null
done
git checkout -q hank/a 2>/dev/null
"#;
    p.fake("effect.sh", attack);
    let out = confined_fleet(&p);
    let err = stderr(&out);
    let probe = std::fs::read_to_string(p.fake.join("probe")).unwrap_or_default();
    assert!(probe.contains("committed"), "{probe}\n{err}");
    let after: Vec<String> = ["main", "feature", "hank/earlier"]
        .iter()
        .map(|b| g(&["rev-parse", b]))
        .collect();
    assert_eq!(after, before, "{err}");
    assert!(
        p.dir.join(".git/logs/refs/heads/feature").is_file(),
        "{err}"
    );
    let fsck = std::process::Command::new("git")
        .args(["fsck", "--no-dangling", "--no-progress"])
        .current_dir(&p.dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git fsck");
    assert!(fsck.status.success(), "{}\n{err}", stderr(&fsck));
    // The agent's own commit came in through hank: on its branch, and merged.
    let (state, message) = first_task(&p);
    assert_eq!(state, "merged", "{message}\n{err}");
    let log = g(&["log", "--format=%s", "hank/fleet"]);
    assert!(log.contains("the agent's own commit"), "{log}");
    let files = g(&["ls-tree", "-r", "--name-only", "hank/fleet"]);
    assert!(files.contains("mine.txt"), "{files}");
}

/// Issue 47: a record changed in a task's last call (its plan done in the same call) stops
/// the run at once, sandbox or not: a `security` event naming the file, the task failed with
/// that reason, nothing of it merged.
#[test]
fn a_fleet_task_whose_last_call_rewrites_its_git_file_fails_with_a_security_event() {
    let p = crate::fleet::project_doing(
        "# Fix plan\n\n## A\n- [ ] a1\n",
        "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\necho a > a.txt\n\
         printf 'gitdir: %s\\n' \"$HOME\" > .git\n",
    );
    let out = p.run(&["fleet"]);
    let err = stderr(&out);
    let (state, message) = first_task(&p);
    assert_eq!(state, "failed", "{message}\n{err}");
    assert!(
        message.contains("security") && message.contains(".git"),
        "{message}\n{err}"
    );
    assert!(
        security_events(&p).iter().any(|e| e.contains("/.git\"")),
        "{err}"
    );
    let files = crate::support::git(&p.dir, &["ls-tree", "-r", "--name-only", "hank/fleet"]);
    assert!(!files.contains("a.txt"), "{files}");
}

/// The socket probe: connects to each Unix socket named in `PROBE_SOCKETS` (`name=path …`),
/// and to one it makes in its project.
const SOCKET_PROBE: &str = r#"
log() { echo "$1" >> probe.log; }
reach() { python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$1" 2>/dev/null; }
for pair in $PROBE_SOCKETS; do
  if reach "${pair#*=}"; then log "reached ${pair%%=*}"; else log "no ${pair%%=*}"; fi
done
python3 -c '
import os, socket
l = socket.socket(socket.AF_UNIX); l.bind("own.sock"); l.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect("own.sock")
os.remove("own.sock")' 2>/dev/null && log reached-own || log no-own
if ls "$PROBE_ROOT" >/dev/null 2>&1; then log "sees $(ls "$PROBE_ROOT" | tr '\n' ' ')"; else log no-listing; fi
"#;

/// Issue 47: Landlock does not govern `connect()` on a path socket, so in its own namespaces
/// the agent finds none of the user's: an SSH agent's in the temp folder, a control master in
/// `~/.ssh`, a server beside the project. One in its own project still works. Where no
/// namespace can be made, the start says the sockets stay reachable.
#[test]
fn a_path_socket_outside_the_agents_grants_is_not_there_for_it() {
    if !landlock_here() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    if crate::support::missing("python3") {
        return;
    }
    let netns = netns_here();
    let p = Project::new(&["task", "next task"]);
    p.git_init();
    let root = p.dir.parent().expect("root").to_path_buf();
    let agent_dir = root.join("tmp/ssh-XXXXabcd");
    let ssh = p.home.join(".ssh");
    let beside = root.join("beside");
    for d in [&agent_dir, &ssh, &beside] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let sockets = [
        ("ssh-agent", agent_dir.join("agent.1234")),
        ("control-master", ssh.join("cm-git@example.com:22")),
        ("server", beside.join("server.sock")),
    ];
    let _listeners: Vec<std::os::unix::net::UnixListener> = sockets
        .iter()
        .map(|(_, path)| std::os::unix::net::UnixListener::bind(path).expect("bind"))
        .collect();
    let named: Vec<String> = sockets
        .iter()
        .map(|(n, path)| format!("{n}={}", path.display()))
        .collect();
    p.fake("effect-1.sh", &format!("{SOCKET_PROBE}{TICK_ONE}"));
    let out = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .env("PROBE_SOCKETS", named.join(" "))
        .env("PROBE_ROOT", &root)
        .args(["run", "--max-loops", "1"])
        .output()
        .expect("run hank");
    let log = std::fs::read_to_string(p.dir.join("probe.log")).unwrap_or_default();
    assert!(!log.is_empty(), "the probe did not run: {}", stderr(&out));
    let lines: Vec<&str> = log.lines().collect();
    let sandbox = p.status()["sandbox"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match netns {
        Ok(()) => {
            assert_eq!(
                lines[..4],
                [
                    "no ssh-agent",
                    "no control-master",
                    "no server",
                    "reached-own"
                ],
                "{log}\n{}",
                stderr(&out)
            );
            // Of the folder that holds the project, the agent sees only what it is granted.
            let seen = lines.get(4).copied().unwrap_or_default();
            assert!(!seen.contains("beside"), "{seen}");
            assert!(
                sandbox.contains("Unix sockets only in the paths it is granted"),
                "{sandbox}"
            );
        }
        Err(why) => {
            eprintln!("no namespaces here ({why}): the sockets stay reachable, and said so");
            assert_eq!(
                lines[..4],
                [
                    "reached ssh-agent",
                    "reached control-master",
                    "reached server",
                    "reached-own"
                ],
                "{log}"
            );
            assert!(
                sandbox.contains("Unix sockets on paths it can name"),
                "{sandbox}"
            );
        }
    }
}

/// The same as an ordinary user (root would hide a refusal): `hank-sandbox`, started by uid
/// 65534 with the rules hank gives an agent, makes its namespaces unprivileged (a user
/// namespace), and the socket outside its grants is not there while its project is writable.
#[test]
fn an_ordinary_users_agent_finds_no_path_socket_outside_its_grants() {
    use std::os::unix::fs::PermissionsExt;
    if !landlock_here() || !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs Landlock and root (to become an ordinary user)");
        return;
    }
    if crate::support::missing("setpriv") || crate::support::missing("python3") {
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    let open = |p: &std::path::Path| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).expect("chmod")
    };
    open(root.path());
    let (project, hidden, handover) = (
        root.path().join("project"),
        root.path().join("hidden"),
        root.path().join("handover"),
    );
    for d in [&project, &hidden, &handover] {
        std::fs::create_dir(d).expect("mkdir");
        open(d);
    }
    let socket = hidden.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    open(&socket);
    let mut proxy = hank::sandbox::proxy::Proxy::start(Vec::new()).expect("proxy");
    let proxy_socket = handover.join("proxy.sock");
    proxy.listen_unix(&proxy_socket).expect("unix");
    open(&proxy_socket);
    let probe = root.path().join("probe.sh");
    std::fs::write(
        &probe,
        format!(
            "#!/bin/sh\nif python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' {} 2>/dev/null; then echo reached; else echo no-socket; fi\necho x > w && echo wrote-project\n",
            socket.display()
        ),
    )
    .expect("write");
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let rules = hank::sandbox::Rules {
        read: ["/usr", "/etc", "/bin", "/lib", "/lib64", "/proc"]
            .iter()
            .map(std::path::PathBuf::from)
            .filter(|p| p.exists())
            .chain([probe.clone()])
            .collect(),
        write: vec![project.clone(), "/dev/null".into()],
        port: proxy.port(),
        netns: Some(proxy_socket),
        held: None,
    };
    let wrapper = crate::support::hank_bin().with_file_name("hank-sandbox");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&wrapper)
        .arg(rules.to_arg())
        .arg("--")
        .arg(&probe)
        .current_dir(&project)
        .output()
        .expect("run hank-sandbox as uid 65534");
    let said = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("network namespace") {
        eprintln!("skipped: no unprivileged user namespaces here: {err}");
        return;
    }
    assert_eq!(
        said.lines().collect::<Vec<_>>(),
        ["no-socket", "wrote-project"],
        "{err}"
    );
}

/// The run's namespace holder killed mid-run (by the user, by the OOM killer): the next call
/// makes a network namespace of its own instead of failing, and the run goes on confined.
#[test]
fn a_killed_namespace_holder_leaves_the_next_calls_confined_and_working() {
    if !landlock_here() || netns_here().is_err() {
        eprintln!("skipped: needs Landlock and namespaces");
        return;
    }
    let p = Project::new(&["task", "next task"]);
    p.git_init();
    let marker = p.fake.join("called-1");
    p.fake(
        "effect-1.sh",
        &format!(
            "{TICK_ONE}log() {{ echo \"$1\" >> probe.log; }}\nlog \"netns $(readlink /proc/self/ns/net)\"\ntouch {m}\nwhile [ -e {m} ]; do sleep 0.1; done\n",
            m = marker.display()
        ),
    );
    p.fake(
        "effect-2.sh",
        &format!("{TICK_ONE}echo \"netns $(readlink /proc/self/ns/net)\" >> probe.log\n"),
    );
    let child = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .args(["run", "--max-loops", "3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run hank");
    let hank = child.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The holder: hank's child whose command line says --hold-netns.
    let holders: Vec<i32> = std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u32>().ok());
            ppid == Some(hank) && String::from_utf8_lossy(&cmd).contains("--hold-netns")
        })
        .collect();
    assert_eq!(holders.len(), 1, "one holder for the run");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(holders[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the holder");
    std::thread::sleep(std::time::Duration::from_millis(200));
    std::fs::remove_file(&marker).expect("let the first call end");
    let out = child.wait_with_output().expect("hank");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = std::fs::read_to_string(p.dir.join("probe.log")).unwrap_or_default();
    let spaces: Vec<&str> = log.lines().filter(|l| l.starts_with("netns ")).collect();
    assert_eq!(spaces.len(), 2, "{log}");
    let own = format!(
        "netns {}",
        std::fs::read_link("/proc/self/ns/net")
            .expect("own netns")
            .display()
    );
    // Both calls in a namespace that is not the host's; the second in one of its own.
    assert!(spaces.iter().all(|s| *s != own), "{log}");
    assert_ne!(spaces[0], spaces[1], "{log}");
}

/// The run's held view of the file system (issue 47's cost): calls whose grants are the same
/// enter one mount namespace, made once; a granted folder replaced between two calls makes the
/// next call's view its own, holding the new folder (a bind holds the folder found when it was
/// made, so the held view is entered only while it is still true).
#[test]
fn calls_share_the_held_view_until_a_granted_folder_is_replaced() {
    if !landlock_here() || netns_here().is_err() {
        eprintln!("skipped: needs Landlock and namespaces");
        return;
    }
    let p = Project::new(&["task", "next task", "last task"]);
    p.git_init();
    let shared = p.home.join("shared");
    std::fs::create_dir_all(&shared).expect("shared");
    std::fs::write(shared.join("said"), "old\n").expect("said");
    let marker = p.fake.join("called-2");
    let probe = |extra: &str| {
        format!(
            "{TICK_ONE}echo \"mnt $(readlink /proc/self/ns/mnt) $(cat {s}/said)\" >> probe.log\n{extra}",
            s = shared.display()
        )
    };
    p.fake("effect-1.sh", &probe(""));
    p.fake(
        "effect-2.sh",
        &probe(&format!(
            "touch {m}\nwhile [ -e {m} ]; do sleep 0.1; done\n",
            m = marker.display()
        )),
    );
    p.fake("effect-3.sh", &probe(""));
    let child = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env(
            "SANDBOX_WRITE",
            format!("{} {}", p.fake.display(), shared.display()),
        )
        .args(["run", "--max-loops", "3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run hank");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(marker.exists(), "the second call never started");
    // Replaced while the second call runs: the third call's view must hold the new folder.
    std::fs::rename(&shared, p.home.join("shared.old")).expect("move the folder away");
    std::fs::create_dir(&shared).expect("a new folder");
    std::fs::write(shared.join("said"), "new\n").expect("said");
    std::fs::remove_file(&marker).expect("let the second call end");
    let out = child.wait_with_output().expect("hank");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = std::fs::read_to_string(p.dir.join("probe.log")).unwrap_or_default();
    let calls: Vec<(&str, &str)> = log
        .lines()
        .filter_map(|l| l.strip_prefix("mnt "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    assert_eq!(calls.len(), 3, "{log}");
    let own = std::fs::read_link("/proc/self/ns/mnt").expect("own mnt");
    assert!(
        calls.iter().all(|(ns, _)| *ns != own.to_string_lossy()),
        "{log}"
    );
    assert_eq!(
        calls[0], calls[1],
        "one held view for the first two calls: {log}"
    );
    assert_eq!(calls[1].1, "old", "{log}");
    assert_ne!(
        calls[2].0, calls[1].0,
        "a view of its own once the folder was replaced: {log}"
    );
    assert_eq!(calls[2].1, "new", "{log}");
}
