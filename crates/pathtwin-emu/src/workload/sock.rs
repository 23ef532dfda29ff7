//! The system calls of the workload's programs: TCP sockets created inside a host's network
//! namespace and set up before their handshake, non-blocking connect, reading and writing,
//! `getsockopt(TCP_INFO)`, and the epoll set that waits on them all. Thin and checked:
//! every call's failure comes back as the `io::Error` the kernel gave.
//!
//! A socket belongs to the namespace of the thread that created it, for its whole life, so
//! the runner's one thread enters a host's namespace ([`enter`]) only to create that host's
//! sockets; reading and writing them afterwards does not depend on where the thread is.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::tcpinfo::TcpInfo;

use super::plan::SocketOptions;

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Moves this thread into the network namespace `ns` (a descriptor of `/run/netns/NAME`).
pub fn enter(ns: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: setns on a valid namespace descriptor; affects only the calling thread.
    check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt reads the int we own, of its size.
    check(unsafe { libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t) })
        .map(drop)
}

/// A non-blocking IPv4 TCP socket in the calling thread's namespace.
fn tcp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked and owned below.
    let fd = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: a fresh descriptor owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

fn bind(fd: RawFd, a: SocketAddrV4) -> io::Result<()> {
    let sa = sockaddr(a);
    // SAFETY: bind(2) with an address we own and its size.
    check(unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t) }).map(drop)
}

/// Applies `o` to a socket before its handshake (before `connect`, or before `listen` for a
/// listener, whose accepted sockets inherit them), and the limit on unsent bytes
/// `notsent_lowat` (see `super::runner::WRITE_AHEAD`).
fn apply(fd: RawFd, o: &SocketOptions, notsent_lowat: Option<u32>) -> io::Result<()> {
    let opt = |what: &str, r: io::Result<()>| r.map_err(|e| io::Error::new(e.kind(), format!("{what}: {e}")));
    if let Some(cc) = &o.cc {
        // SAFETY: setsockopt reads the name's bytes, of its length.
        let r = check(unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_ptr().cast(), cc.len() as libc::socklen_t) });
        opt(&format!("TCP_CONGESTION {cc}"), r.map(drop))?;
    }
    if let Some(mss) = o.mss {
        opt("TCP_MAXSEG", set_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, mss as libc::c_int))?;
    }
    // Buffers before the window clamp and before the handshake: the window scale a SYN
    // announces is chosen from them.
    if let Some(b) = o.rcvbuf {
        opt("SO_RCVBUF", set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b as libc::c_int))?;
    }
    if let Some(b) = o.sndbuf {
        opt("SO_SNDBUF", set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, b as libc::c_int))?;
    }
    if let Some(w) = o.window_clamp {
        opt("TCP_WINDOW_CLAMP", set_int(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, w as libc::c_int))?;
    }
    if let Some(l) = notsent_lowat {
        opt("TCP_NOTSENT_LOWAT", set_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, l as libc::c_int))?;
    }
    Ok(())
}

/// A listener on `port` of every address of the calling thread's namespace, with `o` for
/// the sockets it accepts. Non-blocking.
pub fn listen(port: u16, o: &SocketOptions, notsent_lowat: u32, backlog: u32) -> io::Result<TcpListener> {
    let fd = tcp_socket()?;
    set_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    apply(fd.as_raw_fd(), o, Some(notsent_lowat))?;
    bind(fd.as_raw_fd(), SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))?;
    // SAFETY: listen(2) on our socket.
    check(unsafe { libc::listen(fd.as_raw_fd(), backlog.min(i32::MAX as u32) as libc::c_int) })?;
    Ok(TcpListener::from(fd))
}

/// A client socket in the calling thread's namespace, set up with `o`, bound to `bind_to`
/// if given (a pipe's address), and connecting to `to`: the handshake goes on after this
/// returns (writable once it is done, see [`take_error`]).
pub fn connect(to: SocketAddrV4, bind_to: Option<Ipv4Addr>, o: &SocketOptions, notsent_lowat: u32) -> io::Result<TcpStream> {
    let fd = tcp_socket()?;
    apply(fd.as_raw_fd(), o, Some(notsent_lowat))?;
    if let Some(a) = bind_to {
        bind(fd.as_raw_fd(), SocketAddrV4::new(a, 0))?;
    }
    let sa = sockaddr(to);
    // SAFETY: connect(2) with an address we own and its size.
    let r = unsafe { libc::connect(fd.as_raw_fd(), (&sa as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    Ok(TcpStream::from(fd))
}

/// Re-arms quick acknowledgments (`TCP_QUICKACK`), which the kernel clears by itself.
pub fn quickack(fd: RawFd) -> io::Result<()> {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1)
}

/// The socket's congestion control (`TCP_CONGESTION`).
pub fn congestion_control(fd: RawFd) -> io::Result<String> {
    let mut name = [0u8; 32];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the buffer we own.
    check(unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_mut_ptr().cast(), &mut len) })?;
    let name = &name[..len as usize];
    Ok(String::from_utf8_lossy(name.split(|&c| c == 0).next().unwrap_or_default()).into_owned())
}

/// The socket's `struct tcp_info`, as long as the kernel's.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut buf = [0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the buffer we own.
    check(unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len) })?;
    Ok(TcpInfo::parse(&buf[..(len as usize).min(buf.len())]))
}

/// An epoll set whose entries carry a `u64` token.
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: a fresh descriptor owned by no one else.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Watches `fd` for `events` (e.g. `EPOLLIN | EPOLLET`), reported with `token`.
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: epoll_ctl reads the event we own.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) }).map(drop)
    }

    /// Waits for events (forever with `timeout_ms` −1); fills `out` and returns how many.
    pub fn wait(&self, out: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        loop {
            // SAFETY: epoll_wait writes at most `out.len()` events into the slice we own.
            let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), out.as_mut_ptr(), out.len() as libc::c_int, timeout_ms) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// An `eventfd`: written by one thread to wake another that polls it.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd(2) with flags; checked and owned below.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: a fresh descriptor owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes `fd` (an eventfd) readable.
pub fn signal(fd: &OwnedFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: write(2) of 8 bytes we own to an eventfd.
    unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
}
