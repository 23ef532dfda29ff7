//! Packet I/O with the hosts: the [`PacketIo`] trait and its TUN implementation [`Tun`].
//!
//! The driver only needs "read one IP datagram if there is one" and "write one IP datagram"
//! on a non-blocking descriptor it can put into epoll; anything that offers that (TUN,
//! AF_PACKET on a veth, AF_XDP) fits. TUN is used (why, with numbers: the crate doc). The
//! device is opened without `IFF_VNET_HDR`, so the kernel segments TSO/GSO super-packets
//! before they reach us: every datagram the model sees is at most one MTU, as on a wire.
//! Checksums are complete for the same reason, so a packet can be written to another host
//! unchanged.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// One host's attachment to the emulator.
pub trait PacketIo {
    /// Reads one datagram into `buf` (which must hold the MTU); `Ok(None)` when none is
    /// waiting.
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>>;
    /// Writes one datagram. `Ok(false)` when the device is momentarily full (the caller
    /// counts a drop; the kernel would do the same on a full transmit queue).
    fn send(&self, pkt: &[u8]) -> io::Result<bool>;
    /// The descriptor to wait on for readability.
    fn raw_fd(&self) -> RawFd;
}

/// A TUN device (`IFF_TUN | IFF_NO_PI`): IP datagrams without link-layer framing.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

const TUNSETIFF: libc::c_ulong = 0x400454ca;

impl Tun {
    /// Creates a non-persistent TUN device called `name` in the calling thread's network
    /// namespace. It disappears when the descriptor is closed.
    pub fn create(name: &str) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad device name {name:?}")));
        }
        // SAFETY: open(2) with a NUL-terminated path.
        let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ifreq is plain old data; zeroed is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads an ifreq we own.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Tun { fd, name: name.to_string() })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl PacketIo for Tun {
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: read into a buffer we own, bounded by its length.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        }
    }

    fn send(&self, pkt: &[u8]) -> io::Result<bool> {
        // SAFETY: write from a slice we borrow.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        if n >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => Ok(false),
            // The host may have taken the device down (e.g. a test doing so): its packets
            // are dropped, the emulation goes on.
            _ if e.raw_os_error() == Some(libc::EIO) => Ok(false),
            _ => Err(e),
        }
    }

    fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
