//! Test captures built byte by byte: a short TCP conversation and writers for every file
//! format and link type the reader claims to support.

#![allow(dead_code)]

use etherparse::{PacketBuilder, TcpOptionElement};

/// One segment of a conversation: time (ns), from client?, flags, seq, ack, payload length.
#[derive(Clone, Copy)]
pub struct Seg {
    pub t_ns: u64,
    pub from_client: bool,
    pub syn: bool,
    pub ack: bool,
    pub fin: bool,
    pub seq: u32,
    pub ackno: u32,
    pub len: usize,
}

/// A complete, loss-free exchange: handshake, a 100-byte request, a 3-segment response of
/// 1000 bytes each, FIN both ways. Client ISN `ci`, server ISN `si`, RTT 10 ms.
pub fn conversation(ci: u32, si: u32) -> Vec<Seg> {
    let ms = 1_000_000u64;
    let s = |t, c, syn, ack, fin, seq, ackno, len| Seg { t_ns: 1_700_000_000_000_000_000 + t, from_client: c, syn, ack, fin, seq, ackno, len };
    let c1 = ci.wrapping_add(1);
    let s1 = si.wrapping_add(1);
    vec![
        s(0, true, true, false, false, ci, 0, 0),
        s(50_000, false, true, true, false, si, c1, 0),
        s(50_000 + 10 * ms, true, false, true, false, c1, s1, 0),
        s(11 * ms, true, false, true, false, c1, s1, 100),
        s(41 * ms, false, false, true, false, s1, c1.wrapping_add(100), 1000),
        s(41 * ms + 100_000, false, false, true, false, s1.wrapping_add(1000), c1.wrapping_add(100), 1000),
        s(41 * ms + 200_000, false, false, true, false, s1.wrapping_add(2000), c1.wrapping_add(100), 1000),
        s(52 * ms, true, false, true, false, c1.wrapping_add(100), s1.wrapping_add(2000), 0),
        s(52 * ms + 900_000, true, false, true, false, c1.wrapping_add(100), s1.wrapping_add(3000), 0),
        s(53 * ms, false, false, true, true, s1.wrapping_add(3000), c1.wrapping_add(100), 0),
        s(63 * ms, true, false, true, true, c1.wrapping_add(100), s1.wrapping_add(3001), 0),
        s(63 * ms + 50_000, false, false, true, false, s1.wrapping_add(3001), c1.wrapping_add(101), 0),
    ]
}

pub const CLIENT4: [u8; 4] = [10, 0, 0, 1];
pub const SERVER4: [u8; 4] = [10, 0, 0, 2];
pub const CLIENT6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub const SERVER6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// The IP packet (no link header) of a segment.
pub fn ip_packet(seg: &Seg, v6: bool) -> Vec<u8> {
    let (sp, dp) = if seg.from_client { (40000, 80) } else { (80, 40000) };
    let builder = if v6 {
        let (s, d) = if seg.from_client { (CLIENT6, SERVER6) } else { (SERVER6, CLIENT6) };
        PacketBuilder::ipv6(s, d, 64)
    } else {
        let (s, d) = if seg.from_client { (CLIENT4, SERVER4) } else { (SERVER4, CLIENT4) };
        PacketBuilder::ipv4(s, d, 64)
    };
    let mut tcp = builder.tcp(sp, dp, seg.seq, 65535);
    if seg.syn {
        tcp = tcp.syn();
        tcp = tcp
            .options(&[
                TcpOptionElement::MaximumSegmentSize(1460),
                TcpOptionElement::SelectiveAcknowledgementPermitted,
                TcpOptionElement::WindowScale(7),
            ])
            .expect("options fit");
    }
    if seg.ack {
        tcp = tcp.ack(seg.ackno);
    }
    if seg.fin {
        tcp = tcp.fin();
    }
    let payload = vec![b'x'; seg.len];
    let mut out = Vec::new();
    tcp.write(&mut out, &payload).expect("write to vec");
    out
}

/// Link layers, with the LINKTYPE_ number for the file header.
#[derive(Clone, Copy, Debug)]
pub enum Link {
    Ethernet,
    Vlan,
    Sll,
    Sll2,
    Raw,
    BsdLoopbackLe,
}

impl Link {
    pub fn linktype(self) -> u32 {
        match self {
            Link::Ethernet | Link::Vlan => 1,
            Link::Sll => 113,
            Link::Sll2 => 276,
            Link::Raw => 101,
            Link::BsdLoopbackLe => 0,
        }
    }

    pub fn frame(self, ip: &[u8]) -> Vec<u8> {
        let v6 = ip[0] >> 4 == 6;
        let ethertype: [u8; 2] = if v6 { [0x86, 0xdd] } else { [0x08, 0x00] };
        let mut f = Vec::new();
        match self {
            Link::Ethernet => {
                f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
                f.extend_from_slice(&ethertype);
            }
            Link::Vlan => {
                f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x00, 0x2a]);
                f.extend_from_slice(&ethertype);
            }
            Link::Sll => {
                f.extend_from_slice(&[0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
                f.extend_from_slice(&ethertype);
            }
            Link::Sll2 => {
                f.extend_from_slice(&ethertype);
                f.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
            }
            Link::Raw => {}
            Link::BsdLoopbackLe => f.extend_from_slice(&(if v6 { 30u32 } else { 2u32 }).to_le_bytes()),
        }
        f.extend_from_slice(ip);
        f
    }
}

/// A classic pcap file. `snaplen` cuts frames as libpcap would.
pub fn pcap(frames: &[(u64, Vec<u8>)], link: Link, big_endian: bool, nanos: bool, snaplen: usize) -> Vec<u8> {
    let w32 = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
    let w16 = |v: u16| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut out = Vec::new();
    out.extend_from_slice(&w32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    out.extend_from_slice(&w16(2));
    out.extend_from_slice(&w16(4));
    out.extend_from_slice(&w32(0));
    out.extend_from_slice(&w32(0));
    out.extend_from_slice(&w32(snaplen as u32));
    out.extend_from_slice(&w32(link.linktype()));
    for (t, f) in frames {
        let cap = f.len().min(snaplen);
        let frac = if nanos { t % 1_000_000_000 } else { (t % 1_000_000_000) / 1000 };
        out.extend_from_slice(&w32((t / 1_000_000_000) as u32));
        out.extend_from_slice(&w32(frac as u32));
        out.extend_from_slice(&w32(cap as u32));
        out.extend_from_slice(&w32(f.len() as u32));
        out.extend_from_slice(&f[..cap]);
    }
    out
}

fn ng_block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
    let pad = (4 - body.len() % 4) % 4;
    let len = (12 + body.len() + pad) as u32;
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    out.extend(std::iter::repeat(0).take(pad));
    out.extend_from_slice(&len.to_le_bytes());
}

/// A pcapng file: frames alternate over two sections, each with two interfaces of
/// different link types and timestamp resolutions (µs, and 2^-20 s... here 10^-9 s).
pub fn pcapng(frames: &[(u64, Vec<u8>)], links: [Link; 2]) -> Vec<u8> {
    let mut out = Vec::new();
    let half = frames.len() / 2;
    for (section, chunk) in [&frames[..half], &frames[half..]].into_iter().enumerate() {
        let mut shb = Vec::new();
        shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        ng_block(&mut out, 0x0a0d_0d0a, &shb);
        for (i, link) in links.iter().enumerate() {
            let mut idb = Vec::new();
            idb.extend_from_slice(&(link.linktype() as u16).to_le_bytes());
            idb.extend_from_slice(&0u16.to_le_bytes());
            idb.extend_from_slice(&0u32.to_le_bytes());
            // if_tsresol: interface 1 uses nanoseconds, interface 0 the default (µs).
            if i == 1 {
                idb.extend_from_slice(&9u16.to_le_bytes());
                idb.extend_from_slice(&1u16.to_le_bytes());
                idb.extend_from_slice(&[9, 0, 0, 0]);
                idb.extend_from_slice(&[0, 0, 0, 0]);
            }
            ng_block(&mut out, 1, &idb);
        }
        for (k, (t, ip)) in chunk.iter().enumerate() {
            // Alternate interfaces, differently in each section.
            let iface = (k + section) % 2;
            let frame = links[iface].frame(ip);
            let units = if iface == 1 { *t } else { t / 1000 };
            let mut epb = Vec::new();
            epb.extend_from_slice(&(iface as u32).to_le_bytes());
            epb.extend_from_slice(&((units >> 32) as u32).to_le_bytes());
            epb.extend_from_slice(&(units as u32).to_le_bytes());
            epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            epb.extend_from_slice(&frame);
            epb.extend(std::iter::repeat(0).take((4 - frame.len() % 4) % 4));
            ng_block(&mut out, 6, &epb);
        }
    }
    out
}

/// The conversation as (time, IP packet) pairs.
pub fn ip_frames(segs: &[Seg], v6: bool) -> Vec<(u64, Vec<u8>)> {
    segs.iter().map(|s| (s.t_ns, ip_packet(s, v6))).collect()
}

/// The conversation framed for `link`.
pub fn frames(segs: &[Seg], link: Link, v6: bool) -> Vec<(u64, Vec<u8>)> {
    segs.iter().map(|s| (s.t_ns, link.frame(&ip_packet(s, v6)))).collect()
}
