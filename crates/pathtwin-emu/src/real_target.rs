//! Monarch's way to a real target: probes leave through the machine's own network stack and
//! the target's answers come back through it, as Monarch's proxy sent and received them with
//! raw sockets on an ordinary host (Haeberlen et al., IMC 2006, §3).
//!
//! Two raw sockets in the emulator's network namespace (the machine's own, where its routes
//! to the world are):
//! - one with `IPPROTO_RAW` (which implies `IP_HDRINCL`) sends each probe exactly as
//!   [`crate::monarch::Translator`] built it, from the source address the kernel's routing
//!   picks for the target (learnt by connecting a UDP socket, which sends nothing);
//! - one of the answers' protocol (TCP for the RSTs that answer `tcp-ack` probes, ICMP for
//!   the others), bound to that address and connected to the target, so that the kernel hands
//!   it only what the target sends this host. A raw socket gets a copy of each matching
//!   datagram before the protocol's own handler, which then drops the RST or the ICMP error
//!   as belonging to no socket of its own.
//!
//! What it needs, and why: `CAP_NET_RAW` for both sockets (root has it); a firewall that lets
//! the probes out and their answers in — a stateful rule such as nftables'
//! `ct state invalid drop` drops a RST that answers an ACK of a connection conntrack never saw
//! when `net.netfilter.nf_conntrack_tcp_loose` is 0, and rate limits on ICMP errors
//! (`net.ipv4.icmp_ratelimit` on the target) throttle `udp` probes' answers.
//!
//! What it refuses: addresses that are not globally reachable, unless asked
//! (`pathtwin_core::config::special_purpose`); and more than `[monarch] max_rate` of probes:
//! a token bucket polices them, and a packet whose probe would exceed the cap is dropped
//! before it leaves (the sender's TCP sees a loss and slows down), so a transfer cannot flood
//! a host that did not agree to be measured. Every such drop is counted and reported.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use pathtwin_core::config::ProbeKind;
use pathtwin_core::time::Instant;
use pathtwin_core::units::Rate;

use crate::packet::IpPacket;

/// Bursts the cap lets through at once: this long at the cap's rate (a TCP flow's
/// back-to-back segments after an idle ACK clock), and never less than two full packets.
const BURST_NS: u64 = 100_000_000;
const MIN_BURST_BYTES: f64 = 3000.0;
/// The answers' socket buffer: a burst of answers must not be lost to a full buffer while
/// the loop writes to the hosts.
const RECV_BUFFER: libc::c_int = 1 << 21;

/// Why a probe was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotSent {
    /// It would have exceeded the rate cap.
    Capped,
    /// The kernel refused it (no route, a full buffer, larger than the route's MTU).
    Failed,
}

/// The sockets and the cap of one real target.
pub struct RealTarget {
    target: Ipv4Addr,
    source: Ipv4Addr,
    send: OwnedFd,
    answers: OwnedFd,
    cap: TokenBucket,
}

impl RealTarget {
    /// Opens the way to `target` for probes of `kind`, capped at `max_rate`. Errors name what
    /// failed: no route to the target, or no permission for raw sockets.
    pub fn open(target: Ipv4Addr, kind: ProbeKind, max_rate: Rate) -> io::Result<RealTarget> {
        let source = source_address(target)?;
        let send = raw_socket(libc::IPPROTO_RAW)?;
        let protocol = if kind == ProbeKind::TcpAck { libc::IPPROTO_TCP } else { libc::IPPROTO_ICMP };
        let answers = raw_socket(protocol)?;
        let fd = answers.as_raw_fd();
        // SAFETY: the option's value is a c_int that lives across the call.
        let set = unsafe {
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, (&RECV_BUFFER as *const libc::c_int).cast(), size_of::<libc::c_int>() as u32)
        };
        if set != 0 {
            return Err(context("SO_RCVBUF on the answers' socket", io::Error::last_os_error()));
        }
        let local = sockaddr(source);
        // SAFETY: binds and connects a socket we own to addresses that live across the calls.
        if unsafe { libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) } != 0 {
            return Err(context("binding the answers' socket", io::Error::last_os_error()));
        }
        let remote = sockaddr(target);
        if unsafe { libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) } != 0 {
            return Err(context("connecting the answers' socket", io::Error::last_os_error()));
        }
        Ok(RealTarget { target, source, send, answers, cap: TokenBucket::new(max_rate) })
    }

    /// The address the probes come from (this host's, towards the target).
    pub fn source(&self) -> Ipv4Addr {
        self.source
    }

    pub fn target(&self) -> Ipv4Addr {
        self.target
    }

    /// The answers' socket, for the loop's epoll set.
    pub fn answers_fd(&self) -> RawFd {
        self.answers.as_raw_fd()
    }

    /// Whether a probe of `bytes` may leave at `now` under the cap (taking its tokens).
    pub fn admit(&mut self, now: Instant, bytes: usize) -> Result<(), NotSent> {
        if self.cap.take(now, bytes) {
            Ok(())
        } else {
            Err(NotSent::Capped)
        }
    }

    /// Sends `probe` (admitted first by [`RealTarget::admit`]).
    pub fn send(&self, probe: &IpPacket) -> Result<(), NotSent> {
        let to = sockaddr(self.target);
        let bytes = probe.bytes();
        // SAFETY: sends a buffer we own to an address that lives across the call.
        let n = unsafe {
            libc::sendto(self.send.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), 0, (&to as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32)
        };
        if n == bytes.len() as isize {
            Ok(())
        } else {
            Err(NotSent::Failed)
        }
    }

    /// The next answer waiting, as a whole IPv4 datagram in `buf` (`None`: nothing waits).
    pub fn recv(&self, buf: &mut Vec<u8>) -> Option<usize> {
        buf.resize(65_536, 0);
        // SAFETY: reads at most `buf.len()` bytes into a buffer we own.
        let n = unsafe { libc::recv(self.answers.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if n <= 0 {
            return None;
        }
        buf.truncate(n as usize);
        Some(n as usize)
    }
}

/// The address this host sends from towards `target`: connecting a UDP socket makes the
/// kernel choose it by its routes, without sending anything.
fn source_address(target: Ipv4Addr) -> io::Result<Ipv4Addr> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    s.connect((target, 9)).map_err(|e| context(&format!("no route to {target}"), e))?;
    match s.local_addr()?.ip() {
        std::net::IpAddr::V4(a) => Ok(a),
        std::net::IpAddr::V6(_) => Err(io::Error::new(io::ErrorKind::Unsupported, "an IPv6 source for an IPv4 target")),
    }
}

fn raw_socket(protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        let what = if e.kind() == io::ErrorKind::PermissionDenied {
            "a raw socket (a real Monarch target needs CAP_NET_RAW: run as root)"
        } else {
            "a raw socket"
        };
        return Err(context(what, e));
    }
    // SAFETY: fd is fresh and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr(addr: Ipv4Addr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from(addr).to_be() },
        sin_zero: [0; 8],
    }
}

fn context(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A token bucket in bytes, filled at the cap's rate up to [`BURST_NS`] of it.
struct TokenBucket {
    bytes_per_ns: f64,
    depth: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    fn new(rate: Rate) -> TokenBucket {
        let bytes_per_ns = rate.bps() as f64 / 8e9;
        let depth = (bytes_per_ns * BURST_NS as f64).max(MIN_BURST_BYTES);
        TokenBucket { bytes_per_ns, depth, tokens: depth, at: Instant::ZERO }
    }

    fn take(&mut self, now: Instant, bytes: usize) -> bool {
        let elapsed = now.saturating_since(self.at).as_nanos() as f64;
        self.at = self.at.max(now);
        self.tokens = (self.tokens + elapsed * self.bytes_per_ns).min(self.depth);
        if self.tokens >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathtwin_core::time::Duration;

    /// Over a long stream of offers the bucket passes the cap's rate (plus its one burst),
    /// whatever the offered load.
    #[test]
    fn the_cap_passes_its_rate_and_one_burst() {
        let rate = Rate::from_mbps(2);
        for offered_mbps in [4u64, 20] {
            let mut b = TokenBucket::new(rate);
            let gap = Duration::from_nanos(1500 * 8 * 1000 / offered_mbps);
            let (mut t, mut passed) = (Instant::ZERO, 0usize);
            let secs = 5;
            while t < Instant::from_nanos(secs * 1_000_000_000) {
                if b.take(t, 1500) {
                    passed += 1500;
                }
                t = t + gap;
            }
            let expected = rate.bps() as f64 / 8.0 * secs as f64 + b.depth;
            let got = passed as f64;
            assert!((got - expected).abs() <= 1500.0, "offered {offered_mbps} Mbit/s: passed {got} B, expected {expected}");
        }
    }

    /// Under the cap nothing is dropped.
    #[test]
    fn under_the_cap_everything_passes() {
        let mut b = TokenBucket::new(Rate::from_mbps(10));
        let gap = Duration::from_nanos(1500 * 8 * 1000 / 5);
        let mut t = Instant::ZERO;
        for _ in 0..10_000 {
            assert!(b.take(t, 1500));
            t = t + gap;
        }
    }
}
