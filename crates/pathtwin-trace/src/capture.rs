//! Streaming capture reader: classic pcap and pcapng files to timestamped link-layer frames.
//!
//! Owns file framing only: magic numbers, byte order, timestamp resolution (micro-, nano- and
//! pcapng's `if_tsresol`/`if_tsoffset`), pcapng sections and interfaces, and link types. It
//! does not look inside frames; `decode` does. Block parsing is pcap-parser's; this module
//! drives its incremental reader over a fixed buffer, so memory stays constant whatever the
//! file size.
//!
//! A file cut off in the middle of its last record (a capture killed while writing) is not an
//! error: the frames before it are delivered and [`ReadSummary::truncated_tail`] is set.

use std::io::{self, Read};

use pcap_parser::pcapng::Block;
use pcap_parser::{PcapBlockOwned, PcapError};

use crate::decode::LinkType;
use crate::error::TraceError;

/// One captured frame, borrowed from the reader's buffer for the duration of a callback.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Capture time in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// How `data` begins.
    pub link: LinkType,
    /// The captured bytes (at most the snap length).
    pub data: &'a [u8],
    /// The frame's length on the wire; larger than `data.len()` when the snap length cut it.
    pub orig_len: u32,
}

/// What the reader saw besides frames.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSummary {
    /// Frames delivered.
    pub frames: u64,
    /// Bytes of the file consumed.
    pub bytes: u64,
    /// The file ended inside a record; the partial record was dropped.
    pub truncated_tail: bool,
    /// pcapng sections seen (1 for classic pcap).
    pub sections: u32,
}

/// Initial buffer: large enough for any ordinary frame; grown on demand up to `MAX_BUFFER`.
const BUFFER: usize = 1 << 20;
/// A record larger than this is taken as a corrupt length field, not a real frame.
const MAX_BUFFER: usize = 1 << 26;
/// Bytes read before handing the input to pcap-parser (any file header fits).
const PEEK: usize = 1 << 16;

/// Classic pcap magic numbers as read little-endian: µs and ns resolution, both byte orders,
/// and Kuznetsov's modified format.
const PCAP_MAGICS: [u32; 5] = [0xa1b2_c3d4, 0xd4c3_b2a1, 0xa1b2_3c4d, 0x4d3c_b2a1, 0xa1b2_cd34];
/// The pcapng Section Header Block type (the same in both byte orders).
const PCAPNG_MAGIC: u32 = 0x0a0d_0d0a;

/// Per-interface decoding state of a pcapng section.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link: LinkType,
    /// Timestamp units per second.
    resolution: u64,
    /// Seconds added to every timestamp (`if_tsoffset`).
    offset_s: i64,
}

/// Reads every frame of a capture, calling `on_frame` for each and `on_progress` with the
/// number of bytes consumed so far (about every megabyte); `on_progress` returning `false`
/// stops the reading with [`TraceError::Cancelled`].
pub fn read_frames<R: Read>(
    mut input: R,
    mut on_frame: impl FnMut(&Frame<'_>),
    mut on_progress: impl FnMut(u64) -> bool,
) -> Result<ReadSummary, TraceError> {
    // Peek at the magic ourselves so that an empty file, a short file and a foreign file each
    // get their own one-line error rather than pcap-parser's generic one. The peek is large
    // because pcap-parser probes the file header with a single `read`, which must return it
    // whole.
    let mut head = vec![0u8; PEEK];
    let got = read_up_to(&mut input, &mut head)?;
    head.truncate(got);
    if got == 0 {
        return Err(TraceError::Empty);
    }
    if got < 4 {
        return Err(TraceError::TruncatedHeader { len: got as u64 });
    }
    let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if magic != PCAPNG_MAGIC && !PCAP_MAGICS.contains(&magic) {
        return Err(TraceError::BadMagic { magic });
    }
    let chained = io::Cursor::new(head).chain(input);
    let mut reader = match pcap_parser::create_reader(BUFFER, chained) {
        Ok(r) => r,
        Err(PcapError::Eof | PcapError::Incomplete(_) | PcapError::UnexpectedEof) => {
            return Err(TraceError::TruncatedHeader { len: got as u64 })
        }
        Err(PcapError::ReadError) => {
            return Err(TraceError::Io(io::Error::other("read failed while probing the header")))
        }
        Err(e) => {
            return Err(TraceError::Malformed { offset: 0, what: format!("bad file header ({e})") })
        }
    };

    let mut summary = ReadSummary::default();
    // Classic pcap: one link type and resolution for the whole file.
    let mut legacy: Option<(LinkType, u64)> = None;
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut next_progress = 0u64;
    let mut capacity = BUFFER;
    loop {
        if reader.reader_exhausted() && reader.data().is_empty() {
            break;
        }
        let offset = reader.consumed() as u64;
        match reader.next() {
            Ok((len, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(h) => {
                        summary.sections = 1;
                        let link = LinkType::from_linktype(h.network.0)
                            .ok_or(TraceError::UnsupportedLinkType { linktype: h.network.0, interface: 0 })?;
                        let resolution = if h.is_nanosecond_precision() { 1_000_000_000 } else { 1_000_000 };
                        legacy = Some((link, resolution));
                    }
                    PcapBlockOwned::Legacy(b) => {
                        let (link, resolution) = legacy.ok_or_else(|| malformed(offset, "record before file header"))?;
                        let frac_ns = (b.ts_usec as u64).saturating_mul(1_000_000_000 / resolution);
                        let ts_ns = (b.ts_sec as u64) * 1_000_000_000 + frac_ns;
                        let caplen = (b.caplen as usize).min(b.data.len());
                        summary.frames += 1;
                        on_frame(&Frame { ts_ns, link, data: &b.data[..caplen], orig_len: b.origlen });
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                        // A new section starts a new interface numbering.
                        summary.sections += 1;
                        interfaces.clear();
                    }
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        let id = interfaces.len() as u32;
                        let link = LinkType::from_linktype(idb.linktype.0)
                            .ok_or(TraceError::UnsupportedLinkType { linktype: idb.linktype.0, interface: id })?;
                        let resolution = idb
                            .ts_resolution()
                            .filter(|&r| r > 0)
                            .ok_or_else(|| malformed(offset, "interface timestamp resolution out of range"))?;
                        interfaces.push(Interface { link, resolution, offset_s: idb.ts_offset() });
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        let iface = *interfaces
                            .get(epb.if_id as usize)
                            .ok_or(TraceError::UnknownInterface { offset, interface: epb.if_id })?;
                        let raw = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                        let ts_ns = ng_timestamp(raw, iface);
                        let caplen = (epb.caplen as usize).min(epb.data.len());
                        summary.frames += 1;
                        on_frame(&Frame { ts_ns, link: iface.link, data: &epb.data[..caplen], orig_len: epb.origlen });
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                        // Simple packets carry no timestamp and belong to interface 0.
                        let iface = *interfaces
                            .first()
                            .ok_or(TraceError::UnknownInterface { offset, interface: 0 })?;
                        let caplen = (spb.origlen as usize).min(spb.data.len());
                        summary.frames += 1;
                        on_frame(&Frame { ts_ns: 0, link: iface.link, data: &spb.data[..caplen], orig_len: spb.origlen });
                    }
                    // Statistics, name resolution, secrets, custom blocks: nothing to analyse.
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(len);
                summary.bytes = reader.consumed() as u64;
                if summary.bytes >= next_progress {
                    if !on_progress(summary.bytes) {
                        return Err(TraceError::Cancelled);
                    }
                    next_progress = summary.bytes + (1 << 20);
                }
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::UnexpectedEof) => {
                // A cut-off last record is a warning; a record claiming an impossible length
                // is corruption, whether or not the file happens to end after it.
                if implausible_length(reader.data(), magic) {
                    return Err(malformed(offset, "record length beyond any plausible frame"));
                }
                summary.truncated_tail = true;
                break;
            }
            Err(PcapError::Incomplete(_)) => {
                reader.refill().map_err(|_| io::Error::other("read failed"))?;
                if reader.reader_exhausted() && !reader.data().is_empty() {
                    // Check once more: the parser reports UnexpectedEof now that input is over.
                    continue;
                }
            }
            Err(PcapError::BufferTooSmall) => {
                capacity *= 2;
                if capacity > MAX_BUFFER || !reader.grow(capacity) {
                    return Err(malformed(offset, "record length beyond any plausible frame"));
                }
                reader.refill().map_err(|_| io::Error::other("read failed"))?;
            }
            Err(PcapError::ReadError) => return Err(io::Error::other("read failed").into()),
            Err(e) => return Err(malformed(offset, &e.to_string())),
        }
    }
    summary.bytes = reader.consumed() as u64;
    on_progress(summary.bytes);
    Ok(summary)
}

/// Converts a pcapng timestamp in interface units to nanoseconds since the epoch, splitting
/// seconds and fraction so that no resolution up to 2^-63 s overflows.
fn ng_timestamp(raw: u64, iface: Interface) -> u64 {
    let secs = raw / iface.resolution;
    let frac = raw % iface.resolution;
    let frac_ns = (frac as u128 * 1_000_000_000 / iface.resolution as u128) as u64;
    let secs = (secs as i64).saturating_add(iface.offset_s).max(0) as u64;
    secs.saturating_mul(1_000_000_000).saturating_add(frac_ns)
}

/// Whether the record starting `data` declares a length no capture tool writes: a classic
/// pcap caplen above 256 KiB (libpcap's maximum snap length), or a pcapng block above
/// [`MAX_BUFFER`] in either byte order.
fn implausible_length(data: &[u8], magic: u32) -> bool {
    const MAX_SNAPLEN: u32 = 262_144;
    let word = |at: usize| data.get(at..at + 4).map(|b| [b[0], b[1], b[2], b[3]]);
    if magic == PCAPNG_MAGIC {
        return word(4).is_some_and(|b| u32::from_le_bytes(b).min(u32::from_be_bytes(b)) as usize > MAX_BUFFER);
    }
    let big_endian = matches!(magic, 0xd4c3_b2a1 | 0x4d3c_b2a1);
    word(8).is_some_and(|b| if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) } > MAX_SNAPLEN)
}

fn malformed(offset: u64, what: &str) -> TraceError {
    TraceError::Malformed { offset, what: what.to_string() }
}

/// Reads until `buf` is full or the input ends; returns the number of bytes read.
fn read_up_to<R: Read>(input: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
