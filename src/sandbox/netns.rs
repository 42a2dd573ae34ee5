//! The agent's own network namespace, where hank may make one: as root (`CLONE_NEWNET`, as in
//! CI and containers) or through an unprivileged user namespace where the kernel allows it
//! (`CLONE_NEWUSER | CLONE_NEWNET`, the user mapped to itself). The namespace has only
//! loopback, so UDP (DNS included), other hosts and the host's abstract Unix sockets are out of
//! reach; the egress proxy is bridged into it.
//!
//! `hank __sandbox --netns SOCKET …` (the agent's own process, single-threaded, before Landlock
//! and the `exec` of the agent: `crate::proc::agent::enter_sandbox`) enters the namespace
//! ([`unshare_net`]), brings `lo` up, and starts the bridge,
//! `hank __sandbox --bridge PORT SOCKET PARENT`: a process in the namespace (started before
//! the Landlock restriction, never running agent code) that listens on 127.0.0.1:PORT there —
//! the port the agent's proxy variables name — and carries each connection to the proxy's Unix
//! socket `SOCKET` (a path: Unix sockets on paths are not bound to a network namespace). It
//! dies with the agent (`PR_SET_PDEATHSIG`). `hank __sandbox --probe-netns` tells hank at the
//! start of a run (and `hank doctor`) whether a namespace can be made here.

use std::io::{self, BufRead, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::thread;

use nix::sched::{CloneFlags, unshare};
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, socket,
};

use crate::error::{HankError, Result};

/// The first argument of `hank __sandbox` for the probe.
pub const PROBE: &str = "--probe-netns";
/// The first argument of `hank __sandbox` for the bridge.
pub const BRIDGE: &str = "--bridge";

fn fail(what: &str, e: impl std::fmt::Display) -> HankError {
    HankError::usage(format!("network namespace: {what}: {e}"))
}

/// Moves this (single-threaded) process into a new network namespace with `lo` up: as root a
/// plain one, otherwise inside a new user namespace where the user is mapped to itself.
///
/// # Errors
/// The kernel refuses the namespace (no privilege, user namespaces disabled) or `lo`.
pub fn unshare_net() -> Result<()> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    if uid.is_root() {
        unshare(CloneFlags::CLONE_NEWNET).map_err(|e| fail("unshare(CLONE_NEWNET)", e))?;
    } else {
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET)
            .map_err(|e| fail("unshare(CLONE_NEWUSER | CLONE_NEWNET)", e))?;
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

/// `hank __sandbox --probe-netns`: a namespace made, `lo` up, a loopback connection made in it.
///
/// # Errors
/// What failed.
pub fn probe_here() -> Result<u8> {
    unshare_net()?;
    let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(|e| fail("loopback", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| fail("loopback", e))?
        .port();
    TcpStream::connect(("127.0.0.1", port)).map_err(|e| fail("loopback", e))?;
    Ok(0)
}

/// `hank __sandbox --bridge PORT SOCKET PARENT`: listens on 127.0.0.1:PORT of the namespace it
/// was started in, says `ready` on stdout, and carries each connection to the Unix socket
/// `SOCKET`; ends with its parent (the agent).
///
/// # Errors
/// Bad arguments, or the port cannot be listened on.
pub fn bridge(args: &[std::ffi::OsString]) -> Result<u8> {
    let bad = || HankError::usage("__sandbox --bridge: expected PORT SOCKET PARENT");
    let [port, socket, parent] = args else {
        return Err(bad());
    };
    let port: u16 = port.to_str().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let parent: i32 = parent
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or_else(bad)?;
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| fail("bridge", e))?;
    if nix::unistd::getppid().as_raw() != parent {
        return Ok(0); // the agent is already gone
    }
    let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|e| fail("bridge", e))?;
    let mut out = io::stdout();
    let _ = writeln!(out, "ready").and_then(|()| out.flush());
    let socket = Path::new(socket).to_path_buf();
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let socket = socket.clone();
        let _ = thread::Builder::new()
            .name("hank-bridge".into())
            .spawn(move || {
                if let Ok(proxy) = UnixStream::connect(&socket) {
                    carry(conn, proxy);
                }
            });
    }
    Ok(0)
}

/// Copies both ways between the agent's connection and the proxy until either side ends.
fn carry(conn: TcpStream, proxy: UnixStream) {
    let (Ok(mut c_read), Ok(mut p_write)) = (conn.try_clone(), proxy.try_clone()) else {
        return;
    };
    let up = thread::spawn(move || {
        let _ = io::copy(&mut c_read, &mut p_write);
        let _ = p_write.shutdown(Shutdown::Write);
    });
    let (mut p_read, mut c_write) = (proxy, conn);
    let _ = io::copy(&mut p_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Both);
    let _ = up.join();
}

/// Whether the bridge said `ready` on `out` (its stdout).
///
/// # Errors
/// It did not.
pub fn ready(out: impl io::Read) -> Result<()> {
    let mut line = String::new();
    io::BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| fail("bridge", e))?;
    if line.trim() == "ready" {
        Ok(())
    } else {
        Err(fail("bridge", "it did not start"))
    }
}
