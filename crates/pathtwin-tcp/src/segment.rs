//! The TCP segment as the model sees it: header fields, options, and a payload byte count.
//!
//! This module owns [`Segment`], its [`Flags`] and its inline [`SackBlocks`], and the size
//! the header would have on the wire ([`Segment::header_bytes`]). It does not own the IP
//! header beyond its ECN codepoint ([`Ecn`], RFC 3168 §5, carried beside the segment so that
//! queues can read and set it), the payload bytes (the model never carries them) or wire
//! encoding.
//!
//! A segment may instead be one of Monaco's control packets ([`Control`]; ACC paper
//! §III-B.1): it then carries no TCP header fields that matter, occupies no sequence space
//! and is consumed by the peer's accumulation estimator, not by TCP.
//!
//! Sequence numbers are 64-bit and never wrap in a run, so comparisons are plain integer
//! comparisons instead of RFC 9293's modular arithmetic. SYN and FIN each occupy one
//! sequence number, as on the wire. The window field holds the advertised window already
//! scaled to bytes, so window scaling (RFC 7323) is implicit.

use pathtwin_core::time::Instant;
use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

/// TCP header flags. The bit values are those of the wire header (RFC 9293 §3.1, RFC 3168
/// for ECE/CWR), so a capture writer can copy them unchanged.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(u8);

impl Flags {
    pub const EMPTY: Flags = Flags(0);
    pub const FIN: Flags = Flags(0x01);
    pub const SYN: Flags = Flags(0x02);
    pub const RST: Flags = Flags(0x04);
    pub const PSH: Flags = Flags(0x08);
    pub const ACK: Flags = Flags(0x10);
    pub const ECE: Flags = Flags(0x40);
    pub const CWR: Flags = Flags(0x80);

    /// The flags from a wire header byte; the URG bit (0x20) is not modelled and dropped.
    pub const fn from_bits_truncate(bits: u8) -> Flags {
        Flags(bits & !0x20)
    }
    pub const fn bits(self) -> u8 {
        self.0
    }
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    pub const fn intersects(self, other: Flags) -> bool {
        self.0 & other.0 != 0
    }
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn insert(&mut self, other: Flags) {
        self.0 |= other.0;
    }
    pub fn remove(&mut self, other: Flags) {
        self.0 &= !other.0;
    }
    pub const fn syn(self) -> bool {
        self.contains(Flags::SYN)
    }
    pub const fn ack(self) -> bool {
        self.contains(Flags::ACK)
    }
    pub const fn fin(self) -> bool {
        self.contains(Flags::FIN)
    }
    pub const fn rst(self) -> bool {
        self.contains(Flags::RST)
    }
}

impl BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}
impl BitOrAssign for Flags {
    fn bitor_assign(&mut self, rhs: Flags) {
        self.0 |= rhs.0;
    }
}
impl BitAnd for Flags {
    type Output = Flags;
    fn bitand(self, rhs: Flags) -> Flags {
        Flags(self.0 & rhs.0)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(Flags, &str); 7] = [
            (Flags::SYN, "SYN"),
            (Flags::FIN, "FIN"),
            (Flags::RST, "RST"),
            (Flags::PSH, "PSH"),
            (Flags::ACK, "ACK"),
            (Flags::ECE, "ECE"),
            (Flags::CWR, "CWR"),
        ];
        let mut first = true;
        for (flag, name) in NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// The ECN field of the IP header (RFC 3168 §5). The simulator carries it with the segment;
/// a queue that marks instead of dropping turns [`Ecn::Ect0`] into [`Ecn::Ce`]. ECT(1) is
/// not modelled: nothing in the model sends it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub enum Ecn {
    /// Not-ECT: the sender does not take part in ECN; queues must drop, not mark.
    #[default]
    NotEct,
    /// ECT(0): ECN-capable transport.
    Ect0,
    /// CE: congestion experienced, set by a queue.
    Ce,
}

impl Ecn {
    /// ECN-capable, whether marked already or not: a queue may mark it.
    pub fn is_capable(self) -> bool {
        self != Ecn::NotEct
    }
    /// The two ECN bits of the IPv4 TOS / IPv6 traffic-class byte (RFC 3168 §5: Not-ECT
    /// 00, ECT(0) 10, CE 11).
    pub fn codepoint(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }
}

/// A Monaco control packet (ACC paper §III-B.1). The forward pair is sent once per control
/// period: [`Control::Probe`] out of band, then [`Control::Count`] in band behind the data;
/// the receiver answers with [`Control::Feedback`] out of band.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Control {
    /// The forward out-of-band packet of pair `seq`: it skips queues (band 0), so its
    /// arrival marks the forward propagation delay.
    Probe { seq: u32 },
    /// The forward in-band packet of pair `seq`, with the payload bytes the sender has sent
    /// in total when it was sent (the paper carries the bytes of one period; a running total
    /// gives the same answer and survives a lost pair).
    Count { seq: u32, bytes_sent: u64 },
    /// The reverse out-of-band answer to pair `seq`: the estimated accumulation in whole
    /// bytes and whether data sent before the pair's in-band packet went missing since the
    /// last answer.
    Feedback { seq: u32, accumulation: u64, loss: bool },
}

impl Control {
    /// The strict-priority band the packet travels in: 0 (out of band) or 1 (with data).
    pub fn band(self) -> u8 {
        match self {
            Control::Count { .. } => 1,
            Control::Probe { .. } | Control::Feedback { .. } => 0,
        }
    }
}

/// Up to four SACK blocks (RFC 2018), each a half-open sequence range `[start, end)`,
/// stored inline so that a segment is `Copy` and never allocates.
///
/// Four is the most that fit in the 40 option bytes without timestamps (RFC 2018 §3:
/// 2 + 8·4 = 34 bytes).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct SackBlocks {
    blocks: [(u64, u64); SackBlocks::MAX],
    len: u8,
}

impl SackBlocks {
    /// Blocks that fit in one header without the timestamp option (RFC 2018 §3).
    pub const MAX: usize = 4;
    /// Blocks that fit beside the timestamp option: 40 bytes of options hold 12 for the
    /// timestamps and 4 + 8·3 for SACK (RFC 2018 §3; Linux's `TCP_NUM_SACKS` limit applies
    /// the same arithmetic in `tcp_established_options`).
    pub const MAX_WITH_TIMESTAMPS: usize = 3;
    pub const EMPTY: SackBlocks = SackBlocks { blocks: [(0, 0); SackBlocks::MAX], len: 0 };

    /// Appends `[start, end)`; returns false (and changes nothing) when already full or the
    /// range is empty.
    pub fn push(&mut self, start: u64, end: u64) -> bool {
        if (self.len as usize) == Self::MAX || start >= end {
            return false;
        }
        self.blocks[self.len as usize] = (start, end);
        self.len += 1;
        true
    }
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_slice(&self) -> &[(u64, u64)] {
        &self.blocks[..self.len as usize]
    }
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.as_slice().iter().copied()
    }
}

impl fmt::Debug for SackBlocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// One TCP segment: header fields and options; the payload is a byte count.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct Segment {
    /// Sequence number of the first octet (or of the SYN / FIN when there is no payload).
    pub seq: u64,
    /// Next sequence number expected from the peer; meaningful only with [`Flags::ACK`].
    pub ack: u64,
    pub flags: Flags,
    /// Payload bytes.
    pub len: u32,
    /// Advertised receive window in bytes, already scaled.
    pub wnd: u64,
    pub sack: SackBlocks,
    /// MSS option, sent on SYN segments only.
    pub mss: Option<u16>,
    /// SACK-permitted option, sent on SYN segments only.
    pub sack_permitted: bool,
    /// The window-scale option (RFC 7323 §2, NOP and 3 bytes), sent on SYN segments only.
    /// Only its room is modelled: advertised windows are already scaled.
    pub window_scale: bool,
    /// The timestamp option (RFC 7323 §3): on a SYN, offered; after the handshake, on every
    /// segment of a connection that negotiated it. It takes its room in the header and
    /// carries `ts_val` and `ts_ecr`.
    pub timestamps: bool,
    /// With `timestamps`, TSval: when the segment was sent (the model's clock, in
    /// nanoseconds where Linux's clock ticks in milliseconds).
    pub ts_val: Instant,
    /// With `timestamps`, TSecr: the TS.Recent the sender holds (RFC 7323 §4.3), the TSval
    /// of the peer's segment that last advanced its cumulative point; `None` before one.
    pub ts_ecr: Option<Instant>,
    /// The IP header's ECN codepoint (not part of the TCP header).
    pub ecn: Ecn,
    /// Set on a Monaco control packet, which is not a TCP segment at all.
    pub control: Option<Control>,
}

/// The fixed TCP header without options (RFC 9293 §3.1).
pub const TCP_BASE_HEADER: u32 = 20;
/// Room the timestamp option takes in every segment after the handshake: 10 bytes (RFC 7323
/// §3) behind two NOPs, Linux's `TCPOLEN_TSTAMP_ALIGNED`.
pub const TIMESTAMP_OPTION_BYTES: u32 = 12;

impl Segment {
    /// The strict-priority band of the packet: band 0 for Monaco's out-of-band control
    /// packets, 1 (the default of every packet) otherwise.
    pub fn band(&self) -> u8 {
        self.control.map_or(1, Control::band)
    }

    /// Sequence space the segment occupies: payload plus one each for SYN and FIN.
    pub fn seq_len(&self) -> u64 {
        self.len as u64 + self.flags.syn() as u64 + self.flags.fin() as u64
    }

    /// One past the last sequence number the segment occupies.
    pub fn seq_end(&self) -> u64 {
        self.seq + self.seq_len()
    }

    /// TCP header size on the wire: 20 bytes plus options, padded to a multiple of 4.
    ///
    /// Option sizes are RFC 9293 §3.2 (MSS: kind, length, 2 bytes = 4), RFC 2018 §2–3
    /// (SACK-permitted: 2; SACK: 2 + 8 per block). Padding models the NOP/EOL filler real
    /// stacks add so that the data offset is a whole number of 32-bit words.
    ///
    /// With timestamps (RFC 7323 §3: 10 bytes) the layout is Linux's (`tcp_options_write`):
    /// the option takes a word-aligned 12 bytes (behind SACK-permitted on a SYN, behind two
    /// NOPs otherwise) and SACK blocks follow two NOPs (4 + 8 per block): a data segment's
    /// header is 32 bytes, which is why Linux's payload per 1500-byte packet is 1448. The
    /// window-scale option on a SYN takes 4 more bytes (NOP and 3).
    ///
    /// A Monaco control packet is a fixed 20-byte header, the size of the paper's Linux
    /// implementation's and of a TCP header without options.
    pub fn header_bytes(&self) -> u32 {
        if self.control.is_some() {
            return TCP_BASE_HEADER;
        }
        let mut options = 0u32;
        if self.mss.is_some() {
            options += 4;
        }
        if self.window_scale {
            options += 4;
        }
        if self.timestamps {
            // SACK-permitted shares the timestamps' word pair (or two NOPs do).
            options += 12;
            if !self.sack.is_empty() {
                options += 4 + 8 * self.sack.len() as u32;
            }
            return TCP_BASE_HEADER + options;
        }
        if self.sack_permitted {
            options += 2;
        }
        if !self.sack.is_empty() {
            options += 2 + 8 * self.sack.len() as u32;
        }
        TCP_BASE_HEADER + options.div_ceil(4) * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes_counts_options_and_pads_to_words() {
        let mut seg = Segment::default();
        assert_eq!(seg.header_bytes(), 20);
        seg.mss = Some(1460);
        assert_eq!(seg.header_bytes(), 24);
        seg.sack_permitted = true; // 4 + 2 = 6 -> 8, as Linux's MSS + NOP NOP SACKOK
        assert_eq!(seg.header_bytes(), 28);

        let mut ack = Segment::default();
        ack.sack.push(10, 20);
        assert_eq!(ack.header_bytes(), 20 + 12); // 2 + 8 = 10 -> 12
        ack.sack.push(30, 40);
        ack.sack.push(50, 60);
        assert_eq!(ack.header_bytes(), 20 + 28); // 26 -> 28
        ack.sack.push(70, 80);
        assert_eq!(ack.header_bytes(), 20 + 36); // 34 -> 36
    }

    #[test]
    fn timestamps_take_twelve_bytes_as_linux_lays_them_out() {
        // A data segment: NOP NOP TS = 32-byte header, 1448 + 32 + 20 = 1500.
        let data = Segment { timestamps: true, len: 1448, ..Default::default() };
        assert_eq!(data.header_bytes(), 32);
        // SYN: MSS (4) + SACK-permitted and TS (12).
        let syn = Segment { timestamps: true, mss: Some(1460), sack_permitted: true, ..Default::default() };
        assert_eq!(syn.header_bytes(), 36);
        // Linux's SYN: MSS, SACK-permitted and timestamps, NOP and window scale: 40 bytes of
        // header, 60 on the wire as the kernel's captures show.
        assert_eq!(Segment { window_scale: true, ..syn }.header_bytes(), 40);
        // SACK beside timestamps: 12 + NOP NOP SACK (4 + 8n), at most 3 blocks in 40 bytes.
        let mut ack = Segment { timestamps: true, ..Default::default() };
        ack.sack.push(10, 20);
        assert_eq!(ack.header_bytes(), 20 + 24);
        ack.sack.push(30, 40);
        ack.sack.push(50, 60);
        assert_eq!(ack.header_bytes(), 20 + 40);
        assert_eq!(SackBlocks::MAX_WITH_TIMESTAMPS, 3);
    }

    #[test]
    fn sack_blocks_hold_at_most_four_nonempty_ranges() {
        let mut b = SackBlocks::EMPTY;
        assert!(!b.push(5, 5));
        for i in 0..4 {
            assert!(b.push(i * 10, i * 10 + 5));
        }
        assert!(!b.push(100, 200));
        assert_eq!(b.len(), 4);
        assert_eq!(b.as_slice()[3], (30, 35));
    }

    #[test]
    fn syn_and_fin_take_one_sequence_number_each() {
        let seg = Segment { seq: 100, len: 10, flags: Flags::SYN | Flags::FIN, ..Default::default() };
        assert_eq!(seg.seq_len(), 12);
        assert_eq!(seg.seq_end(), 112);
        assert_eq!(format!("{:?}", seg.flags), "SYN|FIN");
        assert_eq!(Flags::from_bits_truncate(0x12), Flags::SYN | Flags::ACK);
    }
}
