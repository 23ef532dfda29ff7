//! Streaming capture reader: classic pcap and pcapng files to timestamped link-layer frames.
//!
//! Owns file framing only: magic numbers, byte order, timestamp resolution (micro-, nano- and
//! pcapng's `if_tsresol`/`if_tsoffset`), pcapng sections and interfaces, and link types. It
//! does not look inside frames; `decode` does. Classic pcap records are framed here, in
//! place in one large read buffer (a record header is four fixed words, and this is the
//! bulk of all captures); pcapng blocks are pcap-parser's, driven over a fixed buffer. Either
//! way memory stays constant whatever the file size. Old pcap files whose record headers
//! swap the two length fields are read as libpcap's `sf-pcap.c` reads them.
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

/// Read buffer: many records per system call; a pcapng block larger than it grows it up to
/// `MAX_BUFFER`.
const BUFFER: usize = 1 << 20;
/// A pcapng block larger than this is taken as a corrupt length field, not a real frame.
const MAX_BUFFER: usize = 1 << 26;
/// A classic pcap record longer than this is a corrupt length field: libpcap's largest snap
/// length (`MAXIMUM_SNAPLEN`).
const MAX_SNAPLEN: u32 = 262_144;
/// Bytes read before choosing a reader (any file header fits).
const PEEK: usize = 1 << 16;

/// Classic pcap magic numbers as read little-endian: µs and ns resolution and Kuznetsov's
/// modified format, each in both byte orders.
const PCAP_MAGICS: [u32; 6] = [0xa1b2_c3d4, 0xd4c3_b2a1, 0xa1b2_3c4d, 0x4d3c_b2a1, 0xa1b2_cd34, 0x34cd_b2a1];
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
    input: R,
    on_frame: impl FnMut(&Frame<'_>),
    on_progress: impl FnMut(u64) -> bool,
) -> Result<ReadSummary, TraceError> {
    read_source(ReadBuffer::new(input), on_frame, on_progress)
}

/// [`read_frames`] over a capture already in memory (a memory-mapped file): frames are
/// borrowed from `data` itself, with no copy at all.
pub fn read_frames_from_slice(
    data: &[u8],
    on_frame: impl FnMut(&Frame<'_>),
    on_progress: impl FnMut(u64) -> bool,
) -> Result<ReadSummary, TraceError> {
    read_source(SliceSource { data, start: 0 }, on_frame, on_progress)
}

fn read_source<S: Source>(
    mut src: S,
    on_frame: impl FnMut(&Frame<'_>),
    on_progress: impl FnMut(u64) -> bool,
) -> Result<ReadSummary, TraceError> {
    // Peek at the magic ourselves so that an empty file, a short file and a foreign file each
    // get their own one-line error rather than a parser's generic one.
    let got = src.fill(PEEK)?;
    if got == 0 {
        return Err(TraceError::Empty);
    }
    if got < 4 {
        return Err(TraceError::TruncatedHeader { len: got as u64 });
    }
    let head = src.available();
    let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if magic == PCAPNG_MAGIC {
        read_pcapng(src.into_reader(), got, on_frame, on_progress)
    } else if PCAP_MAGICS.contains(&magic) {
        read_pcap(src, magic, on_frame, on_progress)
    } else {
        Err(TraceError::BadMagic { magic })
    }
}

/// Where the bytes come from: whole records are borrowed in place from `available`.
trait Source {
    /// Makes at least `need` bytes available unless the input ends first; returns how many
    /// are.
    fn fill(&mut self, need: usize) -> io::Result<usize>;
    fn available(&self) -> &[u8];
    fn consume(&mut self, n: usize);
    /// Bytes consumed so far.
    fn consumed(&self) -> u64;
    /// The unconsumed input as a reader, for pcap-parser.
    fn into_reader(self) -> impl Read;
}

/// A reader behind a large buffer.
struct ReadBuffer<R> {
    input: R,
    data: Vec<u8>,
    /// Unconsumed bytes are `data[start..end]`.
    start: usize,
    end: usize,
    /// Bytes consumed before `data[start]`.
    consumed: u64,
    eof: bool,
}

impl<R: Read> ReadBuffer<R> {
    fn new(input: R) -> Self {
        ReadBuffer { input, data: vec![0; BUFFER], start: 0, end: 0, consumed: 0, eof: false }
    }
}

impl<R: Read> Source for ReadBuffer<R> {
    /// Reads as much as fits at each call, so that a record costs no system call.
    fn fill(&mut self, need: usize) -> io::Result<usize> {
        if self.end - self.start >= need || self.eof {
            return Ok(self.end - self.start);
        }
        if self.start + need > self.data.len() {
            // Move the partial record to the front; grow only for a record larger than the
            // whole buffer (callers bound `need`).
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if need > self.data.len() {
                self.data.resize(need, 0);
            }
        }
        while self.end - self.start < need {
            match self.input.read(&mut self.data[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.start)
    }

    fn available(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.consumed += n as u64;
    }

    fn consumed(&self) -> u64 {
        self.consumed
    }

    fn into_reader(self) -> impl Read {
        io::Cursor::new(self.data[self.start..self.end].to_vec()).chain(self.input)
    }
}

/// A capture wholly in memory.
struct SliceSource<'a> {
    data: &'a [u8],
    start: usize,
}

impl<'a> Source for SliceSource<'a> {
    fn fill(&mut self, _need: usize) -> io::Result<usize> {
        Ok(self.data.len() - self.start)
    }

    fn available(&self) -> &[u8] {
        &self.data[self.start..]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
    }

    fn consumed(&self) -> u64 {
        self.start as u64
    }

    fn into_reader(self) -> impl Read {
        &self.data[self.start..]
    }
}

/// How a classic pcap file orders the two length fields of its record headers (libpcap's
/// `sf-pcap.c`): before version 2.3 the captured and original lengths were the other way
/// round, version 2.3 files were written both ways, and DG/UX wrote version 543.0 files the
/// old way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lengths {
    Normal,
    Swapped,
    /// Swapped when the "captured" length exceeds the "original" one, which is impossible.
    MaybeSwapped,
}

/// Frames classic pcap records straight out of the buffer: the record header is four
/// 32-bit words (Kuznetsov's modified format adds 8 bytes), so no parser is needed, and
/// framing by hand is a third of the reading cost saved on a large capture.
fn read_pcap<S: Source>(
    mut buf: S,
    magic: u32,
    mut on_frame: impl FnMut(&Frame<'_>),
    mut on_progress: impl FnMut(u64) -> bool,
) -> Result<ReadSummary, TraceError> {
    let head = buf.available();
    if head.len() < 24 {
        return Err(TraceError::TruncatedHeader { len: head.len() as u64 });
    }
    // The magic reads as one of ours little-endian exactly when the file is little-endian.
    let big_endian = matches!(magic, 0xd4c3_b2a1 | 0x4d3c_b2a1 | 0x34cd_b2a1);
    let u16_at = |b: &[u8], at: usize| {
        let v = [b[at], b[at + 1]];
        if big_endian { u16::from_be_bytes(v) } else { u16::from_le_bytes(v) }
    };
    let u32_at = move |b: &[u8], at: usize| {
        let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if big_endian { u32::from_be_bytes(v) } else { u32::from_le_bytes(v) }
    };
    let (major, minor) = (u16_at(head, 4), u16_at(head, 6));
    let lengths = match (major, minor) {
        (2, 0..=2) | (543, _) => Lengths::Swapped,
        (2, 3) => Lengths::MaybeSwapped,
        (2, _) => Lengths::Normal,
        _ => return Err(malformed(4, &format!("unsupported pcap version {major}.{minor}"))),
    };
    // The upper bits of the link-type word carry FCS information (libpcap's LT_LINKTYPE).
    let linktype = (u32_at(head, 20) & 0x03ff_ffff) as i32;
    let link = LinkType::from_linktype(linktype).ok_or(TraceError::UnsupportedLinkType { linktype, interface: 0 })?;
    let ns_per_tick = if matches!(magic, 0xa1b2_3c4d | 0x4d3c_b2a1) { 1 } else { 1_000 };
    let record_header = if matches!(magic, 0xa1b2_cd34 | 0x34cd_b2a1) { 24 } else { 16 };
    buf.consume(24);

    let mut summary = ReadSummary { sections: 1, ..ReadSummary::default() };
    let mut next_progress = 1 << 20;
    loop {
        let have = buf.fill(record_header)?;
        if have < record_header {
            summary.truncated_tail = have > 0;
            break;
        }
        let offset = buf.consumed();
        let h = buf.available();
        prefetch_ahead(h);
        let (ts_sec, ts_frac) = (u32_at(h, 0), u32_at(h, 4));
        let (mut caplen, mut origlen) = (u32_at(h, 8), u32_at(h, 12));
        if lengths == Lengths::Swapped || (lengths == Lengths::MaybeSwapped && caplen > origlen) {
            std::mem::swap(&mut caplen, &mut origlen);
        }
        // A record larger than any snap length is a corrupt length field, whether or not the
        // file happens to end after it.
        if caplen > MAX_SNAPLEN {
            return Err(malformed(offset, "record length beyond any plausible frame"));
        }
        let total = record_header + caplen as usize;
        if buf.fill(total)? < total {
            summary.truncated_tail = true;
            break;
        }
        let ts_ns = ts_sec as u64 * 1_000_000_000 + ts_frac as u64 * ns_per_tick;
        let data = &buf.available()[record_header..total];
        summary.frames += 1;
        on_frame(&Frame { ts_ns, link, data, orig_len: origlen });
        buf.consume(total);
        if buf.consumed() >= next_progress {
            if !on_progress(buf.consumed()) {
                return Err(TraceError::Cancelled);
            }
            next_progress = buf.consumed() + (1 << 20);
        }
    }
    summary.bytes = buf.consumed();
    on_progress(summary.bytes);
    Ok(summary)
}

/// How far ahead of the record being framed its successors are asked into the cache.
const PREFETCH_DISTANCE: usize = 2048;

/// Asks for the bytes [`PREFETCH_DISTANCE`] ahead of `rest`'s start. Each record's place
/// depends on the previous record's length, so framing is a chain of dependent loads; the
/// processor's own prefetcher did not run far enough ahead of it, and three fifths of the
/// framing loop's time went to waiting for record headers.
#[inline(always)]
fn prefetch_ahead(rest: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if rest.len() > PREFETCH_DISTANCE {
        // SAFETY: a prefetch is a hint; it never faults, and the address is inside `rest`.
        unsafe { std::arch::x86_64::_mm_prefetch(rest.as_ptr().add(PREFETCH_DISTANCE).cast(), std::arch::x86_64::_MM_HINT_T0) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = rest;
}

/// Reads a pcapng file through pcap-parser's block parser, which handles the format's
/// variable blocks, options and per-interface timestamp units.
///
/// `input` begins with the `peeked` bytes already read: pcap-parser probes the file header
/// with a single `read`, which must return it whole.
fn read_pcapng(
    input: impl Read,
    peeked: usize,
    mut on_frame: impl FnMut(&Frame<'_>),
    mut on_progress: impl FnMut(u64) -> bool,
) -> Result<ReadSummary, TraceError> {
    let mut reader = match pcap_parser::create_reader(BUFFER, input) {
        Ok(r) => r,
        Err(PcapError::Eof | PcapError::Incomplete(_) | PcapError::UnexpectedEof) => {
            return Err(TraceError::TruncatedHeader { len: peeked as u64 })
        }
        Err(PcapError::ReadError) => {
            return Err(TraceError::Io(io::Error::other("read failed while probing the header")))
        }
        Err(e) => {
            return Err(TraceError::Malformed { offset: 0, what: format!("bad file header ({e})") })
        }
    };

    let mut summary = ReadSummary::default();
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
                    // (A classic pcap header cannot appear: the magic chose this reader.)
                    PcapBlockOwned::NG(_) | PcapBlockOwned::LegacyHeader(_) | PcapBlockOwned::Legacy(_) => {}
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
                // A cut-off last block is a warning; a block claiming an impossible length
                // is corruption, whether or not the file happens to end after it.
                if implausible_length(reader.data()) {
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

/// Whether the pcapng block starting `data` declares a length above [`MAX_BUFFER`] in
/// either byte order (the section's byte order may not be known yet).
fn implausible_length(data: &[u8]) -> bool {
    data.get(4..8).is_some_and(|b| {
        let b = [b[0], b[1], b[2], b[3]];
        u32::from_le_bytes(b).min(u32::from_be_bytes(b)) as usize > MAX_BUFFER
    })
}

fn malformed(offset: u64, what: &str) -> TraceError {
    TraceError::Malformed { offset, what: what.to_string() }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// A classic pcap file written field by field: `records` are (seconds, fraction, first
    /// length word, second length word, bytes), the length words in file order.
    fn file(magic: u32, big_endian: bool, version: (u16, u16), records: &[(u32, u32, u32, u32, Vec<u8>)]) -> Vec<u8> {
        let w32 = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let w16 = |v: u16| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let modified = magic == 0xa1b2_cd34;
        let mut out = w32(magic).to_vec();
        out.extend(w16(version.0));
        out.extend(w16(version.1));
        out.extend([0; 8]);
        out.extend(w32(65535));
        out.extend(w32(101));
        for (s, f, l1, l2, data) in records {
            for w in [*s, *f, *l1, *l2] {
                out.extend(w32(w));
            }
            if modified {
                out.extend([0; 8]);
            }
            out.extend(data);
        }
        out
    }

    /// A frame as (timestamp, captured bytes, original length).
    type Owned = (u64, Vec<u8>, u32);

    /// Every frame of a capture.
    fn frames<R: Read>(input: R) -> Result<(Vec<Owned>, ReadSummary), TraceError> {
        let mut got = Vec::new();
        let summary = read_frames(input, |f| got.push((f.ts_ns, f.data.to_vec(), f.orig_len)), |_| true)?;
        Ok((got, summary))
    }

    #[test]
    fn versions_before_2_3_swap_the_length_fields() {
        // Version 2.2 writes the original length first: 60 on the wire, 20 captured.
        let recs = vec![(5, 7, 60, 20, vec![1; 20]), (6, 0, 40, 40, vec![2; 40])];
        let (got, _) = frames(&file(0xa1b2_c3d4, false, (2, 2), &recs)[..]).unwrap();
        assert_eq!(got, vec![(5_000_007_000, vec![1; 20], 60), (6_000_000_000, vec![2; 40], 40)]);
        // DG/UX's version 543.0 as well; 2.4 files never.
        let (got, _) = frames(&file(0xa1b2_c3d4, true, (543, 0), &recs)[..]).unwrap();
        assert_eq!(got[0].1.len(), 20);
        let recs24 = vec![(5, 7, 20, 60, vec![1; 20])];
        assert_eq!(frames(&file(0xa1b2_c3d4, false, (2, 4), &recs24)[..]).unwrap().0[0].2, 60);
    }

    #[test]
    fn version_2_3_swaps_only_impossible_lengths() {
        // First record written the old way (captured > original is impossible), second the new.
        let recs = vec![(1, 0, 60, 20, vec![1; 20]), (2, 0, 30, 50, vec![2; 30])];
        let (got, _) = frames(&file(0xa1b2_c3d4, false, (2, 3), &recs)[..]).unwrap();
        assert_eq!((got[0].1.len(), got[0].2), (20, 60));
        assert_eq!((got[1].1.len(), got[1].2), (30, 50));
    }

    #[test]
    fn modified_format_and_nanoseconds_in_both_byte_orders() {
        let recs = vec![(3, 999, 10, 10, vec![9; 10]), (4, 1, 12, 100, vec![8; 12])];
        for be in [false, true] {
            let (got, _) = frames(&file(0xa1b2_cd34, be, (2, 4), &recs)[..]).unwrap();
            assert_eq!(got, vec![(3_000_999_000, vec![9; 10], 10), (4_000_001_000, vec![8; 12], 100)], "be={be}");
            let (got, _) = frames(&file(0xa1b2_3c4d, be, (2, 4), &recs)[..]).unwrap();
            assert_eq!(got[0].0, 3_000_000_999, "be={be}");
        }
    }

    #[test]
    fn records_across_buffer_refills_and_tiny_reads() {
        /// Hands out at most `step` bytes per read, as a pipe might.
        struct Trickle<'a>(&'a [u8], usize);
        impl Read for Trickle<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(out.len()).min(self.1);
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        // 3 MB of records of awkward sizes: many straddle the 1 MiB buffer's end.
        let recs: Vec<_> = (0..3000u32).map(|i| (i, 0, 997 + i % 13, 2000, vec![(i % 251) as u8; (997 + i % 13) as usize])).collect();
        let bytes = file(0xa1b2_c3d4, false, (2, 4), &recs);
        let expected: Vec<_> = recs.iter().map(|r| (r.0 as u64 * 1_000_000_000, r.4.clone(), 2000)).collect();
        for step in [usize::MAX, 4093, 7] {
            let (got, summary) = frames(Trickle(&bytes, step)).unwrap();
            assert!(got == expected, "step {step}");
            assert_eq!((summary.bytes, summary.truncated_tail), (bytes.len() as u64, false));
        }
        // Cut inside the last record's header and inside its data: both a warning.
        let last = 16 + recs[2999].4.len();
        for cut in [last - 10, 500] {
            let (got, summary) = frames(&bytes[..bytes.len() - cut]).unwrap();
            assert_eq!((got.len(), summary.truncated_tail), (2999, true));
        }
    }

    #[test]
    fn progress_can_cancel() {
        let recs: Vec<_> = (0..3000u32).map(|i| (i, 0, 1000, 1000, vec![0; 1000])).collect();
        let bytes = file(0xa1b2_c3d4, false, (2, 4), &recs);
        let mut calls = 0;
        let r = read_frames(&bytes[..], |_| {}, |_| {
            calls += 1;
            calls < 2
        });
        assert!(matches!(r, Err(TraceError::Cancelled)));
    }

    #[test]
    fn unknown_versions_are_errors() {
        let err = read_frames(&file(0xa1b2_c3d4, false, (1, 0), &[])[..], |_| {}, |_| true).unwrap_err();
        assert!(err.to_string().contains("version 1.0"), "{err}");
    }
}
