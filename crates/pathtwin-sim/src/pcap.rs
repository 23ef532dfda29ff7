//! Packet captures at simulated hosts, as ns-3's pcap tracing writes them: every packet a host
//! sends or receives becomes a record in `<host>.pcap`, with the time the host saw it.
//!
//! Format: classic pcap with nanosecond timestamps (magic `0xa1b23c4d`), link type
//! `LINKTYPE_RAW` (101, bare IPv4). The simulator carries no payload bytes, so each record
//! holds the IPv4 and TCP headers with their options and is cut there: `caplen` is the header
//! length and `orig_len` the packet's full length, exactly like a capture taken with a small
//! snaplen — which is all header-based analysis (tcptrace, `pathtwin trace`) needs.
//!
//! Addresses and ports: host *i* is `10.0.x.y` with `x.y = i + 1`; the client of connection
//! *c* uses port `10000 + c` and the server port 80. A flow over a `[[pipe]]` comes from its
//! pipe's own address instead ([`pipe_addr`]): pipe *g* (file order, all client hosts
//! counted) is `10.128.0.1 + g`, the emulator's plan (`pathtwin_emu::lab::pipe_addr`) for a
//! run whose subnet index is 0, so a capture of either engine reads the same way; the
//! range 10.128.0.0/9 is far from the host range. Sequence numbers are the low 32 bits of
//! the simulator's 64-bit sequence space (ISNs are below 2^32). The IPv4 checksum is real;
//! the TCP checksum is 0 because the payload it covers is not there.
//!
//! Windows: the simulated TCP keeps its windows in bytes and models the window-scale option
//! (RFC 7323 §2) only by its room in the SYN. A SYN that carries it is written with the shift
//! Linux would pick for its sender's receive buffer (`tcp_select_initial_window`:
//! log2(buffer) − 15, at most 14; [`window_shift`]), and once the sender has negotiated the
//! option (`Endpoint::window_scale_enabled`) its windows are written shifted by it (rounded
//! down, as a sender of the option does), so a reader that scales them, as every analyser
//! does, gets the window back to within 2^shift bytes. A connection without the option (the
//! `ns2` profile) is written as its wire would carry it, at most 65 535 bytes, although the
//! simulated endpoint may allow more in flight: ns-2's TCP has no window scaling and no such
//! limit either.

use pathtwin_core::{checksum, pcapfile};
use pathtwin_tcp::Segment;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Largest header a record can hold: 20 B IPv4 + 60 B TCP.
const SNAPLEN: u32 = 80;

/// The IPv4 address of host `index`.
pub fn host_addr(index: u32) -> [u8; 4] {
    let n = index + 1;
    [10, 0, (n >> 8) as u8, n as u8]
}

/// The client address of pipe `g` (see the module docs): the shared plan
/// ([`pathtwin_core::topology::pipe_address`]) in 10.128.0.0.
pub fn pipe_addr(g: u32) -> [u8; 4] {
    pathtwin_core::topology::pipe_address(std::net::Ipv4Addr::new(10, 128, 0, 0), g).octets()
}

/// Dotted-quad text of an address, as the results tables give it.
pub fn addr_text(a: [u8; 4]) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

/// TCP ports of connection `conn`: (client, server).
pub fn ports(conn: u32) -> (u16, u16) {
    (10_000u32.wrapping_add(conn) as u16, 80)
}

/// The window-scale shift a receiver with a buffer of `rcv_buffer` bytes announces: Linux's
/// `tcp_select_initial_window`, log2 of the buffer less 15, from 0 to 14 (RFC 7323 §2.3).
pub fn window_shift(rcv_buffer: u64) -> u8 {
    (rcv_buffer.max(1).ilog2() as i64 - 15).clamp(0, 14) as u8
}

/// How a segment's sender scales its windows: the shift it announces in a SYN with the
/// option ([`window_shift`] of its receive buffer), and whether both SYNs carried it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowScale {
    pub shift: u8,
    pub in_effect: bool,
}

/// The window field of `seg` as its wire carries it: the SYN's unscaled (RFC 7323 §2.2),
/// later ones shifted once the option is in effect, and at most 65 535.
fn window_field(seg: &Segment, scale: WindowScale) -> u16 {
    let shift = if scale.in_effect && !seg.flags.syn() { scale.shift } else { 0 };
    (seg.wnd >> shift).min(u16::MAX as u64) as u16
}

/// One host's capture file.
pub struct PcapWriter {
    out: BufWriter<File>,
    ip_id: u16,
}

impl PcapWriter {
    pub fn create(path: &Path) -> io::Result<PcapWriter> {
        let mut out = BufWriter::with_capacity(1 << 16, File::create(path)?);
        pcapfile::write_header(&mut out, SNAPLEN)?;
        Ok(PcapWriter { out, ip_id: 0 })
    }

    /// Records a segment between two addresses at `time_ns`, its windows as its sender
    /// scales them (`scale`).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        time_ns: u64,
        src: [u8; 4],
        dst: [u8; 4],
        src_port: u16,
        dst_port: u16,
        seg: &Segment,
        scale: WindowScale,
        wire_len: u32,
        dscp: u8,
    ) -> io::Result<()> {
        let mut buf = [0u8; SNAPLEN as usize];
        let tcp_len = seg.header_bytes() as usize;
        let hdr_len = 20 + tcp_len;
        // IPv4 header (RFC 791).
        buf[0] = 0x45;
        // DSCP (a marker's decision, RFC 2474) and ECN (RFC 3168) share the TOS byte.
        buf[1] = dscp << 2 | seg.ecn.codepoint();
        buf[2..4].copy_from_slice(&(wire_len.min(u16::MAX as u32) as u16).to_be_bytes());
        buf[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
        self.ip_id = self.ip_id.wrapping_add(1);
        buf[6] = 0x40; // don't fragment
        buf[8] = 64;
        buf[9] = 6;
        buf[12..16].copy_from_slice(&src);
        buf[16..20].copy_from_slice(&dst);
        let sum = checksum::of(&buf[..20]);
        buf[10..12].copy_from_slice(&sum.to_be_bytes());
        // TCP header (RFC 9293 §3.1) and options (MSS, SACK-permitted, SACK: RFC 2018;
        // timestamps: RFC 7323).
        let t = &mut buf[20..hdr_len];
        t[0..2].copy_from_slice(&src_port.to_be_bytes());
        t[2..4].copy_from_slice(&dst_port.to_be_bytes());
        t[4..8].copy_from_slice(&(seg.seq as u32).to_be_bytes());
        t[8..12].copy_from_slice(&(seg.ack as u32).to_be_bytes());
        t[12] = ((tcp_len / 4) as u8) << 4;
        t[13] = seg.flags.bits();
        t[14..16].copy_from_slice(&window_field(seg, scale).to_be_bytes());
        let mut o = 20;
        if let Some(mss) = seg.mss {
            t[o..o + 4].copy_from_slice(&[2, 4, (mss >> 8) as u8, mss as u8]);
            o += 4;
        }
        if seg.timestamps {
            // Linux's layout (`tcp_options_write`): SACK-permitted or two NOPs, then TS
            // (kind 8, RFC 7323 §3) with TSval and TSecr on a 1-ms clock, as Linux's
            // (TSecr 0 before the peer's first TSval). SACK blocks follow two NOPs.
            let lead = if seg.sack_permitted { [4, 2] } else { [1, 1] };
            t[o..o + 2].copy_from_slice(&lead);
            t[o + 2..o + 4].copy_from_slice(&[8, 10]);
            t[o + 4..o + 8].copy_from_slice(&((seg.ts_val.as_nanos() / 1_000_000) as u32).to_be_bytes());
            let ecr = seg.ts_ecr.map_or(0, |t| (t.as_nanos() / 1_000_000) as u32);
            t[o + 8..o + 12].copy_from_slice(&ecr.to_be_bytes());
            o += 12;
            if !seg.sack.is_empty() {
                t[o..o + 2].copy_from_slice(&[1, 1]);
                o += 2;
            }
        } else if seg.sack_permitted {
            t[o..o + 2].copy_from_slice(&[4, 2]);
            o += 2;
        }
        if seg.window_scale {
            // NOP, window scale (kind 3) with the sender's shift (module docs).
            t[o..o + 4].copy_from_slice(&[1, 3, 3, scale.shift]);
            o += 4;
        }
        if !seg.sack.is_empty() {
            t[o] = 5;
            t[o + 1] = (2 + 8 * seg.sack.len()) as u8;
            o += 2;
            for (start, end) in seg.sack.iter() {
                t[o..o + 4].copy_from_slice(&(start as u32).to_be_bytes());
                t[o + 4..o + 8].copy_from_slice(&(end as u32).to_be_bytes());
                o += 8;
            }
        }
        // Pad with NOPs (kind 1) to the data offset.
        for b in &mut t[o..] {
            *b = 1;
        }
        pcapfile::write_record(&mut self.out, time_ns, &buf[..hdr_len], wire_len)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use pathtwin_tcp::Flags;

    #[test]
    fn addresses_are_distinct_per_host() {
        assert_eq!(host_addr(0), [10, 0, 0, 1]);
        assert_eq!(host_addr(299), [10, 0, 1, 44]);
    }

    #[test]
    fn the_window_shift_is_linuxs_for_the_buffer() {
        // Linux 6.x, `tcp_select_initial_window`: a 32 MiB tcp_rmem[2] announces 10 (what
        // the emulator's kernel captures carry), the default 6 MiB 7, 64 KiB 1.
        assert_eq!(window_shift(32 << 20), 10);
        assert_eq!(window_shift(6 << 20), 7);
        assert_eq!(window_shift(4 << 20), 7);
        assert_eq!(window_shift(1 << 16), 1);
        assert_eq!(window_shift(65_535), 0);
        assert_eq!(window_shift(1 << 40), 14);
    }

    #[test]
    fn windows_are_shifted_only_once_the_option_is_in_effect() {
        let seg = |syn: bool, wnd: u64| Segment { flags: if syn { Flags::SYN } else { Flags::ACK }, wnd, ..Segment::default() };
        let on = WindowScale { shift: 7, in_effect: true };
        let off = WindowScale { shift: 7, in_effect: false };
        let big = 3 << 20;
        // The SYN's own window is never scaled (RFC 7323 §2.2).
        assert_eq!(window_field(&seg(true, 64_240), on), 64_240);
        // Not (yet) negotiated: unscaled, at most 65 535, as its wire would carry it.
        assert_eq!(window_field(&seg(false, big), off), u16::MAX);
        // In effect: the bytes shifted by 7, rounded down.
        assert_eq!(window_field(&seg(false, big), on), (big >> 7) as u16);
        assert_eq!(window_field(&seg(false, 128 * 500 + 127), on), 500);
    }

    #[test]
    fn pipe_addresses_follow_the_emulators_plan() {
        // pathtwin-emu's lab tests: pipe 0 of subnet 1 is 10.129.0.1, pipe 300 is .1.45.
        assert_eq!(pipe_addr(0), [10, 128, 0, 1]);
        assert_eq!(pipe_addr(300), [10, 128, 1, 45]);
        assert_eq!(addr_text(pipe_addr(65_534)), "10.128.255.255");
        assert_ne!(pipe_addr(0), host_addr(0));
    }
}
