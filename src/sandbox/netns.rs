//! The agent's own network namespace, where hank may make one: as root (`CLONE_NEWNET`, as in
//! CI and containers) or through an unprivileged user namespace where the kernel allows it
//! (`CLONE_NEWUSER | CLONE_NEWNET`, the user mapped to itself). The namespace has only
//! loopback, so UDP (DNS included), other hosts and the host's abstract Unix sockets are out of
//! reach; the egress proxy is reached in it.
//!
//! `hank __sandbox --netns SOCKET …` (the agent's own process, single-threaded, before Landlock
//! and the `exec` of the agent: `crate::proc::agent::enter_sandbox`) enters the namespace
//! ([`unshare_net`]), brings `lo` up, listens on 127.0.0.1:PORT there — the port the agent's
//! proxy variables name — and hands that listening socket to hank's proxy ([`hand_over`]) over
//! the proxy's Unix socket `SOCKET` (a path: Unix sockets on paths are not bound to a network
//! namespace). hank accepts the agent's connections on it from its own namespace and closes it
//! when the call ends, so nothing but the agent runs per call. `hank __sandbox --probe-netns`
//! tells hank at the start of a run (and `hank doctor`) whether a namespace can be made here.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use nix::sched::{CloneFlags, unshare};
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, socket,
};

use crate::error::{HankError, Result};

/// The first argument of `hank __sandbox` for the probe.
pub const PROBE: &str = "--probe-netns";

/// The first argument of `hank-sandbox` for the run's namespace holder ([`hold_here`]).
pub const HOLD: &str = "--hold-netns";

/// The run's network namespace as its holder made it ([`hold_here`]): the holder's pid and the
/// inode numbers of its network and user namespaces (`/proc/PID/ns/net`, `…/user`), checked by
/// each call before it enters them ([`enter_held`]) — a pid reused by another process is
/// refused, never joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Held {
    pub pid: u32,
    pub net: u64,
    pub user: u64,
    /// The held mount namespace, the agent's view of the file system
    /// ([`super::mounts::hide_ungranted`]), when this call's grants are the ones it was made
    /// from and it is still true ([`super::mounts::View::still_true`]); `None`: the call makes
    /// its own.
    #[serde(default)]
    pub mnt: Option<u64>,
    /// Whether the proxy already accepts on the namespace's port (the holder handed its
    /// listener over for the run): a call entering the namespace hands over nothing.
    #[serde(default)]
    pub listens: bool,
}

/// The first word of the holder's first line, before its [`Ready`] as JSON.
pub const READY: &str = "ready";

/// What the holder made ([`hold_here`]): the inodes of its namespaces, and the view of the
/// file system it holds, if it was asked for one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ready {
    pub net: u64,
    pub user: u64,
    pub mnt: Option<u64>,
    pub view: Option<super::mounts::View>,
    /// Whether it handed the run's listener on the proxy's port to hank's proxy
    /// ([`HAND_OVER_HELD`]).
    #[serde(default)]
    pub listens: bool,
}

/// The inode of a namespace file (`/proc/self/ns/net`…).
fn ns_inode(path: &str) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map(|m| m.ino())
}

fn fail(what: &str, e: impl std::fmt::Display) -> HankError {
    HankError::usage(format!("network namespace: {what}: {e}"))
}

/// Moves this (single-threaded) process into a new network namespace with `lo` up, and a new
/// mount namespace (where [`super::mounts::hide_ungranted`] then covers what is not granted):
/// as root plain ones, otherwise inside a new user namespace where the user is mapped to
/// itself.
///
/// # Errors
/// The kernel refuses the namespaces (no privilege, user namespaces disabled) or `lo`.
pub fn unshare_net() -> Result<()> {
    unshare_with(CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWNS)
}

/// [`unshare_net`] with `flags` (and, for a user, `CLONE_NEWUSER` with the user mapped to
/// itself), `lo` up.
fn unshare_with(flags: CloneFlags) -> Result<()> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    if uid.is_root() {
        unshare(flags).map_err(|e| fail(&format!("unshare({flags:?})"), e))?;
    } else {
        let flags = flags | CloneFlags::CLONE_NEWUSER;
        unshare(flags).map_err(|e| fail(&format!("unshare({flags:?})"), e))?;
        for (file, text) in [
            ("/proc/self/setgroups", "deny".to_string()),
            ("/proc/self/uid_map", format!("{uid} {uid} 1")),
            ("/proc/self/gid_map", format!("{gid} {gid} 1")),
        ] {
            std::fs::write(file, text).map_err(|e| fail(file, e))?;
        }
    }
    loopback_up()
}

/// `ip link set lo up` through a route netlink socket: `RTM_NEWLINK` for interface 1 (`lo`
/// in a new namespace) with `IFF_UP`, and its acknowledgement.
fn loopback_up() -> Result<()> {
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST_ACK: u16 = 1 | 4;
    const NLMSG_ERROR: u16 = 2;
    const IFF_UP: u32 = 1;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(|e| fail("netlink socket", e))?;
    let mut msg = Vec::with_capacity(32);
    msg.extend_from_slice(&32u32.to_ne_bytes()); // nlmsg_len
    msg.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
    msg.extend_from_slice(&NLM_F_REQUEST_ACK.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    msg.extend_from_slice(&[0, 0]); // ifi_family AF_UNSPEC, padding
    msg.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    msg.extend_from_slice(&1i32.to_ne_bytes()); // ifi_index: lo
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_flags
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_change
    sendto(
        fd.as_raw_fd(),
        &msg,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .map_err(|e| fail("bringing lo up", e))?;
    let mut answer = [0u8; 256];
    let n = recv(fd.as_raw_fd(), &mut answer, MsgFlags::empty())
        .map_err(|e| fail("bringing lo up", e))?;
    let field = |at: usize, len: usize| answer.get(at..at + len).filter(|_| at + len <= n);
    let kind = field(4, 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let errno = field(16, 4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (kind, errno) {
        (Some(NLMSG_ERROR), Some(0)) => Ok(()),
        (Some(NLMSG_ERROR), Some(e)) => Err(fail(
            "bringing lo up",
            nix::errno::Errno::from_raw(e.saturating_neg()),
        )),
        _ => Err(fail("bringing lo up", "no acknowledgement")),
    }
}

/// `hank-sandbox --hold-netns [RULES]`: makes the run's network namespace (in a user namespace
/// of its own unless root), brings `lo` up and, given the first call's rules
/// ([`super::Rules::to_arg`]), the agent's view of the file system in a mount namespace there
/// ([`super::mounts::hide_ungranted`]); says `ready` and its [`Ready`] as JSON on its standard
/// output, and holds the namespaces until its standard input ends — hank keeps that pipe for
/// the run, so the holder ends with hank, even killed. Each call's `hank-sandbox` then enters
/// them ([`enter_held`]) instead of making its own: making a namespace, and covering and
/// binding the file system in it, costs the kernel far more than entering one.
///
/// # Errors
/// The rules are not [`super::Rules::to_arg`]'s, or the namespaces cannot be made.
pub fn hold_here(args: &[std::ffi::OsString]) -> Result<u8> {
    use std::io::{Read, Write};
    let view = args.get(1).map(|a| super::Rules::from_arg(a)).transpose()?;
    let flags = match view {
        Some(_) => CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWNS,
        None => CloneFlags::CLONE_NEWNET,
    };
    unshare_with(flags)?;
    // The run's listener on the proxy's port, handed to hank's proxy once for the run (before
    // the view is made: the proxy's socket is not in it); the calls then hand over nothing.
    let listens = match view
        .as_ref()
        .and_then(|r| r.netns.as_deref().map(|s| (r.port, s)))
    {
        Some((port, socket)) => {
            let listener =
                TcpListener::bind(("127.0.0.1", port)).map_err(|e| fail("the proxy's port", e))?;
            send_listener_as(&listener, socket, HAND_OVER_HELD)
                .map_err(|e| fail("handing the port to hank", e))?;
            true
        }
        None => false,
    };
    let view = view
        .map(|rules| super::mounts::hide_ungranted(&rules.read, &rules.write))
        .transpose()?;
    let inode = |kind: &str| {
        ns_inode(&format!("/proc/self/ns/{kind}"))
            .map_err(|e| fail("reading the namespaces made", e))
    };
    let ready = Ready {
        net: inode("net")?,
        user: inode("user")?,
        mnt: view.as_ref().map(|_| inode("mnt")).transpose()?,
        view,
        listens,
    };
    let json = serde_json::to_string(&ready).map_err(|e| fail("saying ready", e))?;
    let mut out = io::stdout().lock();
    writeln!(out, "{READY} {json}")
        .and_then(|()| out.flush())
        .map_err(|e| fail("saying ready", e))?;
    drop(out);
    let mut sink = [0u8; 64];
    let mut stdin = io::stdin().lock();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    Ok(0)
}

/// In the agent's process (before the hand-over, Landlock and the `exec`): enters the run's
/// held namespaces — its user namespace (unless it is this process's own, as root), then its
/// network namespace — after checking each is the one the holder made. The file system's view
/// comes after the hand-over ([`enter_view`]): the proxy's socket is not in it.
///
/// # Errors
/// The holder is gone or is not the one recorded, or the kernel refuses.
pub fn enter_held(held: &Held) -> Result<Option<std::os::fd::OwnedFd>> {
    use nix::sched::setns;
    // Each opened and checked before any is entered.
    let own_user = ns_inode("/proc/self/ns/user").map_err(|e| fail("/proc/self/ns/user", e))?;
    let user = (held.user != own_user)
        .then(|| open_ns(held.pid, "user", held.user))
        .transpose()?;
    let net = open_ns(held.pid, "net", held.net)?;
    let view = held
        .mnt
        .map(|want| open_ns(held.pid, "mnt", want))
        .transpose()?;
    if let Some(user) = user {
        setns(&user, CloneFlags::CLONE_NEWUSER).map_err(|e| fail("setns(user)", e))?;
    }
    setns(&net, CloneFlags::CLONE_NEWNET).map_err(|e| fail("setns(net)", e))?;
    Ok(view)
}

/// After [`enter_held`] and the hand-over: enters the held view of the file system if the
/// call may use it (`view`, the one [`enter_held`] opened and checked), else makes a mount
/// namespace of its own. Whether it entered the view (then nothing is left to cover or bind).
///
/// # Errors
/// The kernel refuses.
pub fn enter_view(view: Option<std::os::fd::OwnedFd>) -> Result<bool> {
    use nix::sched::setns;
    if let Some(mnt) = view {
        setns(&mnt, CloneFlags::CLONE_NEWNS).map_err(|e| fail("setns(mnt)", e))?;
        return Ok(true);
    }
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| fail("unshare(CLONE_NEWNS)", e))?;
    Ok(false)
}

/// `/proc/PID/ns/KIND`, opened, if it is the namespace `want` (its inode).
fn open_ns(pid: u32, kind: &str, want: u64) -> Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::{Mode, fstat};
    let path = format!("/proc/{pid}/ns/{kind}");
    let fd = open(
        path.as_str(),
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| fail(&format!("the run's namespace ({path})"), e))?;
    let ino = fstat(&fd).map_err(|e| fail(&path, e))?.st_ino;
    if ino == want {
        Ok(fd)
    } else {
        Err(fail(
            &format!("the run's namespace ({path})"),
            "not the one hank's holder made (the holder is gone)",
        ))
    }
}

/// `hank __sandbox --probe-netns`: the namespaces made, `lo` up, a loopback connection made in
/// it, and the file system's places covered with the temporary folder bound back.
///
/// # Errors
/// What failed.
pub fn probe_here() -> Result<u8> {
    unshare_net()?;
    super::mounts::hide_ungranted(&[], &[std::env::temp_dir()])?;
    let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(|e| fail("loopback", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| fail("loopback", e))?
        .port();
    TcpStream::connect(("127.0.0.1", port)).map_err(|e| fail("loopback", e))?;
    Ok(0)
}

/// In the agent's process, in its new namespace (`hank __sandbox … --netns SOCKET`, before
/// Landlock and the `exec` of the agent): listens on 127.0.0.1:`port` there — the port the
/// agent's proxy variables name — and hands the listening socket to hank's proxy over the Unix
/// socket `socket` (`SCM_RIGHTS`), which accepts the agent's connections on it from hank's own
/// namespace. Returns once hank has taken it; this process keeps no copy (the agent never
/// holds the listener). No process of its own: one process per call, the agent.
///
/// # Errors
/// The port cannot be listened on, or hank did not take the socket.
pub fn hand_over(port: u16, socket: &Path) -> Result<()> {
    let listener =
        TcpListener::bind(("127.0.0.1", port)).map_err(|e| fail("the proxy's port", e))?;
    send_listener(&listener, socket).map_err(|e| fail("handing the port to hank", e))
}

/// Sends `listener` to hank's proxy on the Unix socket `socket` and waits until the proxy
/// says it accepts on it ([`HAND_OVER_TIMEOUT`] at most).
///
/// # Errors
/// The proxy cannot be reached, or did not take the socket.
pub fn send_listener(listener: &TcpListener, socket: &Path) -> io::Result<()> {
    send_listener_as(listener, socket, HAND_OVER)
}

/// [`send_listener`] with `marker`: [`HAND_OVER`] (a call's listener, shut at its end) or
/// [`HAND_OVER_HELD`] (the run's, served until the proxy stops).
fn send_listener_as(listener: &TcpListener, socket: &Path, marker: &[u8; 1]) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    use std::io::Read;
    use std::mem::MaybeUninit;
    use std::os::fd::AsFd;
    let mut conn = UnixStream::connect(socket)?;
    conn.set_read_timeout(Some(HAND_OVER_TIMEOUT))?;
    let fds = [listener.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the socket"));
    }
    sendmsg(
        &conn,
        &[io::IoSlice::new(marker)],
        &mut control,
        SendFlags::empty(),
    )?;
    let mut ack = [0u8; 1];
    conn.read_exact(&mut ack)?;
    if ack == *TAKEN {
        Ok(())
    } else {
        Err(io::Error::other("hank refused the socket"))
    }
}

/// The byte sent with the listening socket.
pub const HAND_OVER: &[u8; 1] = b"L";
/// The byte sent with the run's listener by the namespace holder ([`hold_here`]): the proxy
/// serves it until it stops, not only until the call's end.
pub const HAND_OVER_HELD: &[u8; 1] = b"H";
/// hank's answer once it accepts connections on it.
pub const TAKEN: &[u8; 1] = b"1";
/// How long the agent's process waits for hank to take the socket.
pub const HAND_OVER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
