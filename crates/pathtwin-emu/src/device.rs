//! Packet I/O with the hosts: the [`PacketIo`] trait and its TUN implementation [`Tun`].
//!
//! The driver only needs "read one IP datagram if there is one" and "write one IP datagram"
//! on a non-blocking descriptor it can put into epoll; anything that offers that (TUN,
//! AF_PACKET on a veth, AF_XDP) fits. TUN is used (why, with numbers: the crate doc).
//!
//! A device opened with offload ([`Tun::create`] with `offload`: `IFF_VNET_HDR` and
//! `TUNSETOFFLOAD` for checksums and TSO over IPv4 and IPv6) exchanges datagrams prefixed by
//! a virtio-net header ([`crate::gso`]): the host's TCP hands over 64-KB super-packets with
//! their checksums left partial, and takes merged ones back, one system call each. Without
//! offload the kernel segments before the device and completes every checksum, so every
//! datagram is at most one MTU, as on a wire.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::gso::{VnetHdr, MAX_MERGED, VNET_HDR_LEN};

/// One host's attachment to the emulator.
pub trait PacketIo {
    /// Reads one datagram into `buf` (which must hold the MTU, or 64 KB with offload), and
    /// what the device says of it (all zero without offload); `Ok(None)` when none is
    /// waiting.
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, VnetHdr)>>;
    /// Writes one datagram, the concatenation of `parts` (at most [`MAX_MERGED`] + 1), with
    /// `hdr` if the device offloads (a device without offload is only given plain datagrams
    /// with complete checksums). `Ok(false)` when the device is momentarily full (the caller
    /// counts a drop; the kernel would do the same on a full transmit queue).
    fn send(&self, parts: &[&[u8]], hdr: &VnetHdr) -> io::Result<bool>;
    /// Whether datagrams may be super-packets with partial checksums, both ways.
    fn offloads(&self) -> bool;
    /// The descriptor to wait on for readability.
    fn raw_fd(&self) -> RawFd;
}

/// A TUN device (`IFF_TUN | IFF_NO_PI`): IP datagrams without link-layer framing.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
    offload: bool,
}

// From <linux/if_tun.h>.
const TUNSETIFF: libc::c_ulong = 0x400454ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x400454d0;
const IFF_VNET_HDR: libc::c_int = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

impl Tun {
    /// Creates a non-persistent TUN device called `name` in the calling thread's network
    /// namespace, with segmentation and checksum offload if `offload`. It disappears when the
    /// descriptor is closed.
    pub fn create(name: &str, offload: bool) -> io::Result<Tun> {
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
        let vnet = if offload { IFF_VNET_HDR } else { 0 };
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI | vnet) as libc::c_short;
        // SAFETY: TUNSETIFF reads an ifreq we own.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if offload {
            // ECN with TSO: a super-packet may carry CWR on its first segment (`split_tcp`
            // keeps it there).
            let features = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
            // SAFETY: TUNSETOFFLOAD takes its argument by value.
            if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, features as libc::c_ulong) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Tun { fd, name: name.to_string(), offload })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl PacketIo for Tun {
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, VnetHdr)>> {
        let mut hdr = [0u8; VNET_HDR_LEN];
        let n = if self.offload {
            let iov = [
                libc::iovec { iov_base: hdr.as_mut_ptr().cast(), iov_len: hdr.len() },
                libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() },
            ];
            // SAFETY: readv into two buffers we own, each bounded by its length.
            unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), iov.len() as i32) }
        } else {
            // SAFETY: read into a buffer we own, bounded by its length.
            unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }
        };
        if n >= 0 {
            let len = if self.offload { (n as usize).saturating_sub(VNET_HDR_LEN) } else { n as usize };
            return Ok(Some((len, VnetHdr::from_bytes(&hdr))));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        }
    }

    fn send(&self, parts: &[&[u8]], hdr: &VnetHdr) -> io::Result<bool> {
        let hdr = hdr.to_bytes();
        let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        let mut iov = [empty; MAX_MERGED + 2];
        let mut n = 0;
        if self.offload {
            iov[0] = libc::iovec { iov_base: hdr.as_ptr() as *mut _, iov_len: hdr.len() };
            n = 1;
        }
        if parts.len() + n > iov.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "too many parts for one datagram"));
        }
        for p in parts {
            iov[n] = libc::iovec { iov_base: p.as_ptr() as *mut _, iov_len: p.len() };
            n += 1;
        }
        // SAFETY: writev from slices we borrow (the kernel only reads them).
        let written = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), n as i32) };
        if written >= 0 {
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

    fn offloads(&self) -> bool {
        self.offload
    }

    fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
