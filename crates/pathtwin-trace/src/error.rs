//! Errors of trace analysis: what can make a whole capture unreadable.
//!
//! A problem with one packet (a garbage frame, a header cut short by the snap length) is not
//! an error: it is counted in [`crate::CaptureStats`] and the packet is skipped. Only a
//! capture that cannot be read at all, or whose framing breaks down part way through, ends
//! the analysis with a [`TraceError`], whose message is one line naming the file offset.

use std::io;

/// Why a capture could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The operating system refused to open or read the file.
    #[error("cannot read capture: {0}")]
    Io(#[from] io::Error),
    /// The file has no bytes at all.
    #[error("capture is empty (0 bytes)")]
    Empty,
    /// The first bytes are neither a pcap nor a pcapng header.
    #[error("not a pcap or pcapng capture (unrecognised magic number {magic:#010x})")]
    BadMagic {
        /// The first four bytes, read little-endian.
        magic: u32,
    },
    /// The file ends inside the file header, before any packet.
    #[error("capture truncated inside its file header ({len} bytes)")]
    TruncatedHeader {
        /// How many bytes the file has.
        len: u64,
    },
    /// A link type this reader does not decode (see `decode::LinkType`).
    #[error("unsupported link type {linktype} (interface {interface}); supported: Ethernet (1), BSD loopback (0, 108), raw IP (12, 14, 101, 228, 229), Linux cooked SLL (113) and SLL2 (276), PPP (9, 50), FDDI (10)")]
    UnsupportedLinkType {
        /// The LINKTYPE_ number from the file.
        linktype: i32,
        /// The pcapng interface number (0 for classic pcap).
        interface: u32,
    },
    /// A record header or pcapng block is malformed (bad length, unknown section).
    #[error("malformed capture record at byte offset {offset}: {what}")]
    Malformed {
        /// Offset of the record from the start of the file.
        offset: u64,
        /// What is wrong with it.
        what: String,
    },
    /// A packet block refers to an interface the section never described.
    #[error("packet at byte offset {offset} refers to undeclared interface {interface}")]
    UnknownInterface {
        /// Offset of the block from the start of the file.
        offset: u64,
        /// The interface id in the block.
        interface: u32,
    },
    /// The caller asked to stop (Ctrl-C).
    #[error("analysis interrupted")]
    Cancelled,
}
