//! Frame decoding: link layer, IPv4/IPv6 and the TCP, UDP or ICMP header above it.
//!
//! Owns the walk from a link-layer frame to a [`Packet`], the few fields the analyses need.
//! The link layers (Ethernet with up to two VLAN tags, Linux cooked SLL and SLL2, BSD
//! loopback, raw IP, PPP, FDDI) are stripped here because each is a fixed-size header; IP headers are
//! etherparse's, in its lax mode so that a frame cut by the snap length still yields its
//! headers (an unfragmented IPv4 TCP segment, nearly every packet, is read by hand first).
//! The TCP header is read by hand: its fixed 20 bytes suffice, options cut by the snap
//! length are read as far as they go. Lengths come from the IP header, never from the
//! captured byte count: a truncated packet keeps its true payload length. Options are parsed
//! by hand because the analyses need only five of them and this runs once per packet.

use std::net::IpAddr;

use etherparse::{IpNumber, LaxIpSlice};

/// The link layers this reader understands, from the pcap LINKTYPE_ registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// LINKTYPE_ETHERNET (1), with optional 802.1Q/802.1ad tags.
    Ethernet,
    /// LINKTYPE_NULL (0): a 4-byte address family in the capturing host's byte order.
    BsdLoopback,
    /// LINKTYPE_LOOP (108): the same, in network byte order.
    OpenBsdLoopback,
    /// LINKTYPE_RAW (101; DLT 12 and 14 on some systems) and LINKTYPE_IPV4/IPV6 (228, 229).
    RawIp,
    /// LINKTYPE_LINUX_SLL (113): 16-byte cooked header, protocol in bytes 14..16.
    LinuxSll,
    /// LINKTYPE_LINUX_SLL2 (276): 20-byte cooked header, protocol in bytes 0..2.
    LinuxSll2,
    /// LINKTYPE_PPP (9) and LINKTYPE_PPP_HDLC (50): PPP in HDLC-like framing (RFC 1662),
    /// address and control bytes optional, protocol field one or two bytes (RFC 1661 §6.5).
    Ppp,
    /// LINKTYPE_FDDI (10): frame control, two addresses, then 802.2 LLC with a SNAP header.
    Fddi,
}

impl LinkType {
    /// Maps a LINKTYPE_ number to a supported link type.
    pub fn from_linktype(n: i32) -> Option<LinkType> {
        Some(match n {
            1 => LinkType::Ethernet,
            0 => LinkType::BsdLoopback,
            108 => LinkType::OpenBsdLoopback,
            12 | 14 | 101 | 228 | 229 => LinkType::RawIp,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            9 | 50 => LinkType::Ppp,
            10 => LinkType::Fddi,
            _ => return None,
        })
    }
}

/// TCP flag bits as on the wire.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

/// The TCP options the analyses use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    /// TSval, TSecr.
    pub timestamp: Option<(u32, u32)>,
    /// Up to four SACK blocks (left, right); `sack_len` of them are valid.
    pub sack: [(u32, u32); 4],
    pub sack_len: u8,
}

/// A TCP segment's header fields.
#[derive(Debug, Clone, Copy)]
pub struct TcpHeader<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// The option bytes as captured (cut short if the snap length cut the header). Kept raw
    /// and parsed by [`TcpHeader::options`] where needed: a parsed set is large, and copying
    /// it along with every packet cost more than parsing.
    pub raw_options: &'a [u8],
    /// Payload length from the IP header (true length, even if the capture cut it).
    pub payload_len: u32,
}

impl TcpHeader<'_> {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// The options the analyses use.
    #[inline]
    pub fn options(&self) -> TcpOptions {
        if self.raw_options.is_empty() {
            TcpOptions::default()
        } else {
            parse_options(self.raw_options)
        }
    }
}

/// Transport-layer content of a packet.
#[derive(Debug, Clone, Copy)]
pub enum Transport<'a> {
    /// A TCP segment and the captured part of its payload.
    Tcp(TcpHeader<'a>, &'a [u8]),
    /// A UDP datagram: source and destination port.
    Udp { src_port: u16, dst_port: u16 },
    /// ICMP or ICMPv6: type, code, and the bytes after the 4-byte ICMP header (the echo
    /// identifier and sequence, or the quoted original datagram of an error).
    Icmp { icmp_type: u8, code: u8, rest: &'a [u8] },
    /// Any other IP protocol, or a transport header cut short.
    Other,
}

/// The decoded fields of one IP packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IPv4 identification (0 for IPv6, which has none outside fragments).
    pub ip_id: u16,
    /// IP total length from the header.
    pub ip_len: u32,
    pub transport: Transport<'a>,
}

/// Why a frame yielded no packet; counted per kind, never fatal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Not IP (ARP, LLDP, ...): ignored silently.
    NotIp,
    /// The link or IP header is cut short or invalid.
    BadHeader,
    /// A non-first IP fragment: carries no transport header.
    Fragment,
}

/// Decodes a frame of the given link type.
#[inline]
pub fn decode(link: LinkType, frame: &[u8]) -> Result<Packet<'_>, Skip> {
    let ip = match link {
        LinkType::Ethernet => strip_ethernet(frame)?,
        LinkType::RawIp => frame,
        LinkType::BsdLoopback | LinkType::OpenBsdLoopback => {
            let fam = frame.get(..4).ok_or(Skip::BadHeader)?;
            // The family's byte order is the capturing host's; IPv4 is 2 and IPv6 is 24, 28
            // or 30 depending on the BSD, so both orders can be recognised without knowing it.
            let fam = u32::from_le_bytes([fam[0], fam[1], fam[2], fam[3]])
                .min(u32::from_be_bytes([fam[0], fam[1], fam[2], fam[3]]));
            match fam {
                2 | 24 | 28 | 30 => &frame[4..],
                _ => return Err(Skip::NotIp),
            }
        }
        LinkType::LinuxSll => {
            let proto = frame.get(14..16).ok_or(Skip::BadHeader)?;
            ip_ethertype(u16::from_be_bytes([proto[0], proto[1]]), &frame[16..])?
        }
        LinkType::LinuxSll2 => {
            let proto = frame.get(0..2).ok_or(Skip::BadHeader)?;
            let body = frame.get(20..).ok_or(Skip::BadHeader)?;
            ip_ethertype(u16::from_be_bytes([proto[0], proto[1]]), body)?
        }
        LinkType::Ppp => strip_ppp(frame)?,
        LinkType::Fddi => {
            // 13 bytes of frame control and addresses; LLC AA-AA-03 and a zero OUI (SNAP
            // carrying an Ethertype, RFC 1042) precede the protocol.
            let llc = frame.get(13..21).ok_or(Skip::BadHeader)?;
            if llc[..6] != [0xaa, 0xaa, 0x03, 0, 0, 0] {
                return Err(Skip::NotIp);
            }
            ip_ethertype(u16::from_be_bytes([llc[6], llc[7]]), &frame[21..])?
        }
    };
    decode_ip(ip)
}

/// Skips the Ethernet header and any VLAN tags; returns the IP header onwards.
fn strip_ethernet(frame: &[u8]) -> Result<&[u8], Skip> {
    let mut at = 12;
    loop {
        let t = frame.get(at..at + 2).ok_or(Skip::BadHeader)?;
        let ethertype = u16::from_be_bytes([t[0], t[1]]);
        match ethertype {
            // 802.1Q, 802.1ad and the pre-standard QinQ tag.
            0x8100 | 0x88a8 | 0x9100 if at < 12 + 4 * 4 => at += 4,
            _ => return ip_ethertype(ethertype, frame.get(at + 2..).ok_or(Skip::BadHeader)?),
        }
    }
}

/// Skips a PPP header: optional address and control bytes (0xff 0x03), then the protocol,
/// one byte when compressed (an odd first byte) or two; IPv4 is 0x21, IPv6 0x57.
fn strip_ppp(frame: &[u8]) -> Result<&[u8], Skip> {
    let rest = match frame {
        [0xff, 0x03, rest @ ..] => rest,
        rest => rest,
    };
    let (proto, body) = match rest {
        [p, body @ ..] if p & 1 == 1 => (*p as u16, body),
        [hi, lo, body @ ..] => (u16::from_be_bytes([*hi, *lo]), body),
        _ => return Err(Skip::BadHeader),
    };
    match proto {
        0x21 | 0x57 => Ok(body),
        _ => Err(Skip::NotIp),
    }
}

fn ip_ethertype(ethertype: u16, body: &[u8]) -> Result<&[u8], Skip> {
    match ethertype {
        0x0800 | 0x86dd => Ok(body),
        _ => Err(Skip::NotIp),
    }
}

/// Decodes an IP packet starting at `ip`.
#[inline]
pub fn decode_ip(ip: &[u8]) -> Result<Packet<'_>, Skip> {
    if let Some(pkt) = decode_plain_ipv4_tcp(ip) {
        return pkt;
    }
    let sliced = LaxIpSlice::from_slice(ip).map_err(|_| Skip::BadHeader)?.0;
    let (src, dst, ip_id, ip_len, declared_payload) = match &sliced {
        LaxIpSlice::Ipv4(v4) => {
            let h = v4.header();
            let total = h.total_len() as u32;
            let hl = h.ihl() as u32 * 4;
            (IpAddr::V4(h.source_addr()), IpAddr::V4(h.destination_addr()), h.identification(), total, total.saturating_sub(hl))
        }
        LaxIpSlice::Ipv6(v6) => {
            let h = v6.header();
            let ext = v6.extensions().slice().len() as u32;
            let plen = h.payload_length() as u32;
            (IpAddr::V6(h.source_addr()), IpAddr::V6(h.destination_addr()), 0, plen + 40, plen.saturating_sub(ext))
        }
    };
    let payload = sliced.payload();
    if payload.fragmented {
        return Err(Skip::Fragment);
    }
    let body = payload.payload;
    let transport = match payload.ip_number {
        IpNumber::TCP => match tcp_segment(body, declared_payload) {
            Some((header, payload)) => Transport::Tcp(header, payload),
            None => return Err(Skip::BadHeader),
        },
        IpNumber::UDP => match body.get(..4) {
            Some(p) => Transport::Udp {
                src_port: u16::from_be_bytes([p[0], p[1]]),
                dst_port: u16::from_be_bytes([p[2], p[3]]),
            },
            None => return Err(Skip::BadHeader),
        },
        IpNumber::ICMP | IpNumber::IPV6_ICMP => match body.get(..4) {
            Some(p) => Transport::Icmp { icmp_type: p[0], code: p[1], rest: &body[4..] },
            None => return Err(Skip::BadHeader),
        },
        _ => Transport::Other,
    };
    Ok(Packet { src, dst, ip_id, ip_len, transport })
}

/// Fast path for the overwhelmingly common packet, an unfragmented IPv4 TCP segment: read
/// the few header fields directly instead of building etherparse's full slice (a fifth of
/// the analysis time on a large capture). Anything else — options-laden oddities aside,
/// IPv6, fragments, other protocols, short or inconsistent headers — returns `None` and
/// takes the general path, which validates the same fields.
#[inline]
fn decode_plain_ipv4_tcp(ip: &[u8]) -> Option<Result<Packet<'_>, Skip>> {
    let (h, ihl, total, body) = plain_ipv4_tcp(ip)?;
    let (header, payload) = tcp_segment(body, (total - ihl) as u32)?;
    Some(Ok(Packet {
        src: IpAddr::V4([h[12], h[13], h[14], h[15]].into()),
        dst: IpAddr::V4([h[16], h[17], h[18], h[19]].into()),
        ip_id: u16::from_be_bytes([h[4], h[5]]),
        ip_len: total as u32,
        transport: Transport::Tcp(header, payload),
    }))
}

/// The checks of the fast path: an unfragmented IPv4 packet carrying TCP, with consistent
/// lengths and the TCP fixed header captured. Returns the IP header, its length, the IP
/// total length and the captured TCP bytes.
#[inline]
fn plain_ipv4_tcp(ip: &[u8]) -> Option<(&[u8], usize, usize, &[u8])> {
    let h = ip.get(..20)?;
    let ihl = (h[0] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([h[2], h[3]]) as usize;
    let frag = u16::from_be_bytes([h[6], h[7]]);
    // Version 4, TCP, not a fragment (MF clear and offset zero), lengths consistent.
    if h[0] >> 4 != 4 || h[9] != 6 || frag & 0x3fff != 0 || ihl < 20 || total < ihl {
        return None;
    }
    let body = ip.get(ihl..total.min(ip.len()))?;
    (body.len() >= 20 && body[12] >> 4 >= 5).then_some((h, ihl, total, body))
}

/// The addresses and ports of a frame that [`decode`] would take as an IPv4 TCP segment by
/// its fast path, read without decoding the rest: lets a tracker thread pass over the
/// segments of flows another thread owns. `None` when the frame needs the full decoding.
#[inline]
pub fn peek_ipv4_tcp(link: LinkType, frame: &[u8]) -> Option<([u8; 4], [u8; 4], u16, u16)> {
    let ip = match link {
        LinkType::Ethernet if frame.get(12..14)? == [0x08, 0x00] => &frame[14..],
        LinkType::RawIp => frame,
        _ => return None,
    };
    let (h, _, _, tcp) = plain_ipv4_tcp(ip)?;
    Some((
        [h[12], h[13], h[14], h[15]],
        [h[16], h[17], h[18], h[19]],
        u16::from_be_bytes([tcp[0], tcp[1]]),
        u16::from_be_bytes([tcp[2], tcp[3]]),
    ))
}

/// Reads a TCP header from `body`, the captured part of a segment whose length the IP
/// header declares as `declared`. Only the fixed 20 bytes must have been captured: options
/// cut by the snap length are read as far as they go (tcptrace does the same; a SYN
/// captured with `-s 68` still carries its ports, sequence number and flags). `None` for a
/// fixed header cut short or a data offset below the minimum.
#[inline]
fn tcp_segment(body: &[u8], declared: u32) -> Option<(TcpHeader<'_>, &[u8])> {
    let h = body.get(..20)?;
    let header_len = (h[12] >> 4) as usize * 4;
    if header_len < 20 {
        return None;
    }
    let word = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let header = TcpHeader {
        src_port: u16::from_be_bytes([h[0], h[1]]),
        dst_port: u16::from_be_bytes([h[2], h[3]]),
        seq: word(4),
        ack: word(8),
        flags: h[13] & 0x3f,
        window: u16::from_be_bytes([h[14], h[15]]),
        raw_options: body.get(20..header_len.min(body.len())).unwrap_or(&[]),
        payload_len: declared.saturating_sub(header_len as u32),
    };
    Some((header, body.get(header_len..).unwrap_or(&[])))
}

/// Parses MSS, window scale, SACK-permitted, timestamps and SACK blocks (RFC 9293, 7323,
/// 2018). A malformed option ends parsing; options already read are kept.
pub fn parse_options(mut opts: &[u8]) -> TcpOptions {
    let mut out = TcpOptions::default();
    while let Some(&kind) = opts.first() {
        match kind {
            0 => break,
            1 => {
                opts = &opts[1..];
                continue;
            }
            _ => {}
        }
        let Some(&len) = opts.get(1) else { break };
        let len = len as usize;
        if len < 2 || len > opts.len() {
            break;
        }
        let body = &opts[2..len];
        match (kind, body.len()) {
            (2, 2) => out.mss = Some(u16::from_be_bytes([body[0], body[1]])),
            (3, 1) => out.wscale = Some(body[0]),
            (4, 0) => out.sack_permitted = true,
            (5, n) if n % 8 == 0 => {
                for block in body.chunks_exact(8).take(4) {
                    let l = u32::from_be_bytes([block[0], block[1], block[2], block[3]]);
                    let r = u32::from_be_bytes([block[4], block[5], block[6], block[7]]);
                    out.sack[out.sack_len as usize] = (l, r);
                    out.sack_len += 1;
                }
            }
            (8, 8) => {
                out.timestamp = Some((
                    u32::from_be_bytes([body[0], body[1], body[2], body[3]]),
                    u32::from_be_bytes([body[4], body[5], body[6], body[7]]),
                ))
            }
            _ => {}
        }
        opts = &opts[len..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_known_bytes() {
        // MSS 1460, NOP, WS 7, SACK-permitted, TS (1, 2): a Linux SYN's option block.
        let opts = [2, 4, 5, 180, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        let o = parse_options(&opts);
        assert_eq!(o.mss, Some(1460));
        assert_eq!(o.wscale, Some(7));
        assert!(o.sack_permitted);
        assert_eq!(o.timestamp, Some((1, 2)));
    }

    #[test]
    fn malformed_options_stop_without_panic() {
        for opts in [&[2u8][..], &[2, 0], &[2, 40, 1], &[5, 9, 0, 0, 0, 0, 0, 0, 0], &[3, 3]] {
            let _ = parse_options(opts);
        }
        let o = parse_options(&[5, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!((o.sack_len, o.sack[0]), (1, (1, 2)));
    }

    /// A SYN captured with a 68-byte snap length (tcptrace's pcap_v2.2.dmp): 14 bytes of
    /// Ethernet, 20 of IP, 34 of a 40-byte TCP header. The fixed header and the options that
    /// made it are read; the cut timestamp option is not.
    #[test]
    fn tcp_header_cut_inside_its_options() {
        let mut tcp = vec![0x04, 0x0c, 0, 9, 0x4f, 0xa6, 0, 0x01, 0, 0, 0, 0, 0xa0, 0x02, 0x40, 0];
        tcp.extend([0, 0, 0, 0]); // checksum, urgent pointer
        tcp.extend([2, 4, 5, 180, 1, 3, 3, 0, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0]);
        let mut ip = vec![0x45, 0, 0, 60, 0, 1, 0, 0, 64, 6, 0, 0, 128, 224, 2, 23, 128, 224, 1, 148];
        ip.extend(&tcp[..34]);
        let Transport::Tcp(h, payload) = decode_ip(&ip).expect("decodes").transport else { panic!("not TCP") };
        assert_eq!((h.src_port, h.dst_port, h.seq, h.flags, h.window), (1036, 9, 0x4fa6_0001, flags::SYN, 16384));
        let o = h.options();
        assert_eq!((o.mss, o.wscale, o.timestamp), (Some(1460), Some(0), None));
        assert_eq!((h.payload_len, payload.len()), (0, 0));
        // Fewer than the fixed 20 bytes, or a data offset below 5 words: not a TCP header.
        ip.truncate(20 + 19);
        assert_eq!(decode_ip(&ip).err(), Some(Skip::BadHeader));
        ip.extend([0]);
        ip[20 + 12] = 0x40;
        assert_eq!(decode_ip(&ip).err(), Some(Skip::BadHeader));
    }

    /// PPP with and without address/control bytes and with a compressed protocol field,
    /// and FDDI with SNAP, all carry the same IP packet (frames as in tcptrace's
    /// ppp_encap.dmp and single_byte_rexmit.dmp).
    #[test]
    fn ppp_and_fddi_framing() {
        let ip = [0x45, 0, 0, 20, 0, 1, 0, 0, 64, 253, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        let wrap = |head: &[u8]| [head, &ip[..]].concat();
        for head in [&[0xff, 0x03, 0x00, 0x21][..], &[0x00, 0x21], &[0x21]] {
            assert_eq!(decode(LinkType::Ppp, &wrap(head)).map(|p| p.ip_len).ok(), Some(20), "{head:?}");
        }
        assert_eq!(decode(LinkType::Ppp, &wrap(&[0xff, 0x03, 0xc0, 0x21])).err(), Some(Skip::NotIp)); // LCP
        let mut fddi = vec![0x50, 0, 0, 0x0c, 0x7e, 0x59, 0xa0, 0, 0xe0, 0x34, 0x15, 0x60, 0x60];
        fddi.extend([0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
        assert_eq!(decode(LinkType::Fddi, &[&fddi[..], &ip[..]].concat()).map(|p| p.ip_len).ok(), Some(20));
        assert_eq!(decode(LinkType::Fddi, &fddi[..15]).err(), Some(Skip::BadHeader));
    }

    #[test]
    fn loopback_family_in_either_byte_order() {
        let mut v4 = vec![2, 0, 0, 0];
        v4.extend_from_slice(&[0x45, 0, 0, 20, 0, 1, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        assert!(matches!(decode(LinkType::BsdLoopback, &v4), Err(Skip::BadHeader)));
        let mut be = v4.clone();
        be[..4].copy_from_slice(&[0, 0, 0, 2]);
        assert_eq!(decode(LinkType::BsdLoopback, &v4).err(), decode(LinkType::BsdLoopback, &be).err());
        be[..4].copy_from_slice(&[0, 0, 0, 9]);
        assert_eq!(decode(LinkType::BsdLoopback, &be).err(), Some(Skip::NotIp));
    }
}
