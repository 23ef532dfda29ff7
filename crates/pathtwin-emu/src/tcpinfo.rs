//! The kernel's socket-diagnostics wire format, as `ss -ti` reads it: building a
//! `SOCK_DIAG_BY_FAMILY` dump request for TCP sockets and parsing the answer — netlink
//! messages carrying an `inet_diag_msg` (the 4-tuple and state) followed by route attributes,
//! of which `INET_DIAG_INFO` (a `struct tcp_info`) and `INET_DIAG_CONG` (the congestion
//! control's name) are kept. Pure byte-level code: no sockets here (see [`crate::sampler`]).
//!
//! Layouts from the Linux UAPI headers `linux/netlink.h`, `linux/sock_diag.h`,
//! `linux/inet_diag.h` and `linux/tcp.h`; all fields are in host byte order except the
//! ports and addresses of `inet_diag_sockid`, which are in network order. `struct tcp_info`
//! has only grown at its end since Linux 2.6 (e.g. 104 bytes in 3.x, 192 in 4.19, 232 in
//! 5.4, 248 in 6.7, 280 in 6.18), and the kernel copies `min(its size, attribute length)`: so fields
//! are read by offset and every field past the received length is `None` — a shorter
//! (older) struct parses, with fewer fields.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `NLMSG_ERROR` and `NLMSG_DONE` (`linux/netlink.h`).
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `SOCK_DIAG_BY_FAMILY` (`linux/sock_diag.h`).
pub const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// Request flags (`linux/netlink.h`): `NLM_F_REQUEST | NLM_F_DUMP` (= `NLM_F_ROOT | NLM_F_MATCH`).
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
/// Route attribute types of an `inet_diag_msg` (`linux/inet_diag.h`, enum `INET_DIAG_*`).
pub const INET_DIAG_INFO: u16 = 2;
pub const INET_DIAG_CONG: u16 = 4;
/// Multicast groups of `NETLINK_SOCK_DIAG` on which the kernel announces freed TCP sockets,
/// with their final `inet_diag_msg` and `tcp_info` (`linux/sock_diag.h`, enum `SKNLGRP_*`).
pub const SKNLGRP_INET_TCP_DESTROY: u32 = 1;
pub const SKNLGRP_INET6_TCP_DESTROY: u32 = 3;
/// `sizeof(struct nlmsghdr)`, `sizeof(struct inet_diag_req_v2)`, `sizeof(struct inet_diag_msg)`.
const NLMSG_HDR_LEN: usize = 16;
const REQ_V2_LEN: usize = 56;
const DIAG_MSG_LEN: usize = 72;

/// TCP states (`include/net/tcp_states.h`) that carry no `tcp_info` worth sampling: a
/// listener, a half-open request (`SYN_RECV` mini-socket) and `TIME_WAIT`/`CLOSE` (mini or
/// dead sockets); every other state is asked for.
const TCP_SYN_RECV: u8 = 3;
const TCP_TIME_WAIT: u8 = 6;
const TCP_CLOSE: u8 = 7;
const TCP_LISTEN: u8 = 10;
/// The `states` bit mask of a request: every state 1..=11 except those above.
pub fn sampled_states() -> u32 {
    let all: u32 = (1 << 12) - 2; // TCP_ESTABLISHED (1) .. TCP_CLOSING (11)
    all & !((1 << TCP_SYN_RECV) | (1 << TCP_TIME_WAIT) | (1 << TCP_CLOSE) | (1 << TCP_LISTEN))
}

/// A `SOCK_DIAG_BY_FAMILY` dump request for the TCP sockets of `family` (`AF_INET` or
/// `AF_INET6`) in `states`, asking for `tcp_info` and the congestion control name.
pub fn dump_request(family: u8, states: u32, seq: u32) -> Vec<u8> {
    let len = NLMSG_HDR_LEN + REQ_V2_LEN;
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&(len as u32).to_ne_bytes());
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    // struct inet_diag_req_v2 { sdiag_family, sdiag_protocol, idiag_ext, pad, idiag_states, id }
    b.push(family);
    b.push(libc::IPPROTO_TCP as u8);
    // idiag_ext: bit (attribute − 1) asks for an attribute.
    b.push((1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1)));
    b.push(0);
    b.extend_from_slice(&states.to_ne_bytes());
    b.resize(len, 0); // inet_diag_sockid: zero, i.e. any socket
    b
}

/// `struct tcp_info` (`linux/tcp.h`), each field `None` when the kernel's struct ended
/// before it. Units as the kernel reports them: times in µs, windows in segments.
/// Serializable so that a run can spill its samples ([`crate::spill`]).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TcpInfo {
    /// Length of the struct the kernel sent.
    pub len: usize,
    pub state: Option<u8>,
    pub ca_state: Option<u8>,
    /// Unrecovered RTO timeouts in a row (`tcpi_retransmits`, `icsk_retransmits`).
    pub retransmits: Option<u8>,
    pub backoff: Option<u8>,
    pub rto_us: Option<u32>,
    pub snd_mss: Option<u32>,
    pub unacked: Option<u32>,
    pub lost: Option<u32>,
    pub rtt_us: Option<u32>,
    pub rttvar_us: Option<u32>,
    pub snd_ssthresh: Option<u32>,
    pub snd_cwnd: Option<u32>,
    pub total_retrans: Option<u32>,
    pub pacing_rate: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    /// Segments sent, pure ACKs, SYN, FIN and retransmissions included (RFC 4898
    /// `tcpEStatsPerfSegsOut`; Linux ≥ 4.2).
    pub segs_out: Option<u32>,
    pub min_rtt_us: Option<u32>,
    /// Bytes per second, as the kernel estimates it (RFC draft `delivery rate estimation`).
    pub delivery_rate: Option<u64>,
    pub delivered: Option<u32>,
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
    /// Retransmission-timer expiries over the connection's life, SYN and SYN-ACK timeouts
    /// included (`tcpi_total_rto`, Linux ≥ 6.7).
    pub total_rto: Option<u16>,
}

/// `ssthresh` while still in slow start with no loss yet (`TCP_INFINITE_SSTHRESH`, 0x7fffffff).
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

impl TcpInfo {
    /// Reads the fields present in `b` (however long the kernel's struct was).
    pub fn parse(b: &[u8]) -> TcpInfo {
        let u8_at = |o: usize| b.get(o).copied();
        let u16_at = |o: usize| b.get(o..o + 2).map(|s| u16::from_ne_bytes(s.try_into().expect("2 bytes")));
        let u32_at = |o: usize| b.get(o..o + 4).map(|s| u32::from_ne_bytes(s.try_into().expect("4 bytes")));
        let u64_at = |o: usize| b.get(o..o + 8).map(|s| u64::from_ne_bytes(s.try_into().expect("8 bytes")));
        // Offsets of `struct tcp_info` in linux/tcp.h.
        TcpInfo {
            len: b.len(),
            state: u8_at(0),
            ca_state: u8_at(1),
            retransmits: u8_at(2),
            backoff: u8_at(4),
            rto_us: u32_at(8),
            snd_mss: u32_at(16),
            unacked: u32_at(24),
            lost: u32_at(32),
            rtt_us: u32_at(68),
            rttvar_us: u32_at(72),
            snd_ssthresh: u32_at(76),
            snd_cwnd: u32_at(80),
            total_retrans: u32_at(100),
            pacing_rate: u64_at(104),
            bytes_acked: u64_at(120),
            bytes_received: u64_at(128),
            segs_out: u32_at(136),
            min_rtt_us: u32_at(148),
            delivery_rate: u64_at(160),
            delivered: u32_at(192),
            bytes_sent: u64_at(200),
            bytes_retrans: u64_at(208),
            // After tcpi_snd_wnd (228), tcpi_rcv_wnd (232) and tcpi_rehash (236).
            total_rto: u16_at(240),
        }
    }
}

/// One socket of a dump: its 4-tuple and state, its `tcp_info` and congestion control.
#[derive(Clone, Debug, PartialEq)]
pub struct DiagSocket {
    pub state: u8,
    pub local: IpAddr,
    pub local_port: u16,
    pub remote: IpAddr,
    pub remote_port: u16,
    pub info: Option<TcpInfo>,
    pub cc: Option<String>,
}

/// What one `recv` of a dump held.
#[derive(Debug, Default, PartialEq)]
pub struct DumpPart {
    pub sockets: Vec<DiagSocket>,
    /// `NLMSG_DONE` was seen: the dump is complete.
    pub done: bool,
    /// An `NLMSG_ERROR` with this (positive) errno ended the dump.
    pub error: Option<i32>,
}

/// Parses the netlink messages in `buf` (one `recv` of a dump). Malformed or truncated
/// messages end the parse instead of panicking; unknown message types are skipped.
pub fn parse_dump(buf: &[u8]) -> DumpPart {
    let mut part = DumpPart::default();
    let mut at = 0;
    while at + NLMSG_HDR_LEN <= buf.len() {
        let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
        let kind = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().expect("2 bytes"));
        if len < NLMSG_HDR_LEN || at + len > buf.len() {
            break;
        }
        let body = &buf[at + NLMSG_HDR_LEN..at + len];
        match kind {
            NLMSG_DONE => {
                part.done = true;
                break;
            }
            NLMSG_ERROR => {
                // struct nlmsgerr { int error; struct nlmsghdr msg; } — error is −errno (0: an ACK).
                let errno = body.get(0..4).map_or(0, |s| i32::from_ne_bytes(s.try_into().expect("4 bytes")));
                if errno != 0 {
                    part.error = Some(-errno);
                    break;
                }
            }
            SOCK_DIAG_BY_FAMILY => {
                if let Some(s) = parse_diag_msg(body) {
                    part.sockets.push(s);
                }
            }
            _ => {}
        }
        at += align4(len);
    }
    part
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One `inet_diag_msg` and its attributes.
fn parse_diag_msg(b: &[u8]) -> Option<DiagSocket> {
    if b.len() < DIAG_MSG_LEN {
        return None;
    }
    let family = b[0];
    let state = b[1];
    // inet_diag_sockid at offset 4: sport, dport (big-endian), src[4], dst[4] (network order).
    let local_port = u16::from_be_bytes([b[4], b[5]]);
    let remote_port = u16::from_be_bytes([b[6], b[7]]);
    let addr = |o: usize| -> Option<IpAddr> {
        let raw: [u8; 16] = b[o..o + 16].try_into().ok()?;
        match family as i32 {
            libc::AF_INET => Some(IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))),
            libc::AF_INET6 => {
                let v6 = Ipv6Addr::from(raw);
                // A dual-stack socket talking IPv4 reports a v4-mapped address.
                Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
            }
            _ => None,
        }
    };
    let local = addr(8)?;
    let remote = addr(24)?;
    let mut s = DiagSocket { state, local, local_port, remote, remote_port, info: None, cc: None };
    let mut at = DIAG_MSG_LEN;
    // struct rtattr { unsigned short rta_len; unsigned short rta_type; } then the payload.
    while at + 4 <= b.len() {
        let len = u16::from_ne_bytes([b[at], b[at + 1]]) as usize;
        let kind = u16::from_ne_bytes([b[at + 2], b[at + 3]]);
        if len < 4 || at + len > b.len() {
            break;
        }
        let payload = &b[at + 4..at + len];
        match kind {
            INET_DIAG_INFO => s.info = Some(TcpInfo::parse(payload)),
            INET_DIAG_CONG => {
                let name = payload.split(|&c| c == 0).next().unwrap_or_default();
                s.cc = Some(String::from_utf8_lossy(name).into_owned());
            }
            _ => {}
        }
        at += align4(len);
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `struct tcp_info` of `len` bytes with known values at the offsets of linux/tcp.h.
    fn tcp_info_bytes(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; 248];
        b[0] = 1; // TCP_ESTABLISHED
        b[1] = 4; // TCP_CA_Loss
        b[2] = 2;
        let put32 = |b: &mut Vec<u8>, o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        let put64 = |b: &mut Vec<u8>, o: usize, v: u64| b[o..o + 8].copy_from_slice(&v.to_ne_bytes());
        put32(&mut b, 8, 204_000); // rto
        put32(&mut b, 16, 1448); // snd_mss
        put32(&mut b, 32, 3); // lost
        put32(&mut b, 68, 41_250); // rtt
        put32(&mut b, 72, 900); // rttvar
        put32(&mut b, 76, 17); // snd_ssthresh
        put32(&mut b, 80, 23); // snd_cwnd
        put32(&mut b, 100, 5); // total_retrans
        put64(&mut b, 104, 2_500_000); // pacing_rate
        put64(&mut b, 120, 1_000_001); // bytes_acked
        put64(&mut b, 128, 77); // bytes_received
        put32(&mut b, 136, 812); // segs_out
        put32(&mut b, 148, 40_100); // min_rtt
        put64(&mut b, 160, 1_250_000); // delivery_rate
        put64(&mut b, 200, 1_010_000); // bytes_sent
        b[240..242].copy_from_slice(&3u16.to_ne_bytes()); // total_rto
        b.truncate(len);
        b
    }

    fn rtattr(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(payload);
        b.resize(align4(b.len()), 0);
        b
    }

    fn nlmsg(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&((NLMSG_HDR_LEN + body.len()) as u32).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&2u16.to_ne_bytes()); // NLM_F_MULTI
        b.extend_from_slice(&7u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(body);
        b.resize(align4(b.len()), 0);
        b
    }

    /// An inet_diag_msg for 10.64.1.1:40000 -> 10.64.1.2:5201, or its IPv6 counterpart.
    fn diag_msg(v6: bool, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![0u8; DIAG_MSG_LEN];
        b[0] = if v6 { libc::AF_INET6 } else { libc::AF_INET } as u8;
        b[1] = 1;
        b[4..6].copy_from_slice(&40000u16.to_be_bytes());
        b[6..8].copy_from_slice(&5201u16.to_be_bytes());
        if v6 {
            b[8..24].copy_from_slice(&"fd70:7477::1".parse::<Ipv6Addr>().unwrap().octets());
            b[24..40].copy_from_slice(&"fd70:7477::2".parse::<Ipv6Addr>().unwrap().octets());
        } else {
            b[8..12].copy_from_slice(&[10, 64, 1, 1]);
            b[24..28].copy_from_slice(&[10, 64, 1, 2]);
        }
        for a in attrs {
            b.extend_from_slice(a);
        }
        b
    }

    #[test]
    fn request_is_a_dump_of_tcp_asking_for_info_and_cong() {
        let r = dump_request(libc::AF_INET6 as u8, sampled_states(), 9);
        assert_eq!(r.len(), 72);
        assert_eq!(u32::from_ne_bytes(r[0..4].try_into().unwrap()), 72);
        assert_eq!(u16::from_ne_bytes(r[4..6].try_into().unwrap()), 20);
        assert_eq!(u16::from_ne_bytes(r[6..8].try_into().unwrap()), 0x301);
        assert_eq!(r[16], 10); // AF_INET6
        assert_eq!(r[17], 6); // IPPROTO_TCP
        assert_eq!(r[18], 0b1010); // 1 << (2 − 1) | 1 << (4 − 1)
        let states = u32::from_ne_bytes(r[20..24].try_into().unwrap());
        assert_ne!(states & (1 << 1), 0, "ESTABLISHED is sampled");
        assert_ne!(states & (1 << 8), 0, "CLOSE_WAIT is sampled (a sender may still send)");
        assert_eq!(states & (1 << 10), 0, "LISTEN is not");
        assert_eq!(states & (1 << 6), 0, "TIME_WAIT is not");
    }

    #[test]
    fn full_tcp_info_parses_every_field() {
        let i = TcpInfo::parse(&tcp_info_bytes(248));
        assert_eq!((i.state, i.ca_state, i.retransmits), (Some(1), Some(4), Some(2)));
        assert_eq!(i.rto_us, Some(204_000));
        assert_eq!(i.snd_mss, Some(1448));
        assert_eq!(i.rtt_us, Some(41_250));
        assert_eq!(i.rttvar_us, Some(900));
        assert_eq!((i.snd_cwnd, i.snd_ssthresh), (Some(23), Some(17)));
        assert_eq!(i.total_retrans, Some(5));
        assert_eq!(i.lost, Some(3));
        assert_eq!(i.pacing_rate, Some(2_500_000));
        assert_eq!(i.bytes_acked, Some(1_000_001));
        assert_eq!(i.bytes_received, Some(77));
        assert_eq!(i.min_rtt_us, Some(40_100));
        assert_eq!(i.delivery_rate, Some(1_250_000));
        assert_eq!(i.bytes_sent, Some(1_010_000));
        assert_eq!((i.segs_out, i.total_rto), (Some(812), Some(3)));
    }

    #[test]
    fn older_kernels_shorter_struct_leaves_newer_fields_none() {
        // Linux 3.10's struct ends with tcpi_total_retrans (104 bytes); 4.6's with
        // tcpi_data_segs_out (160 bytes); cut at 104 and at 152 (through tcpi_min_rtt).
        let i = TcpInfo::parse(&tcp_info_bytes(104));
        assert_eq!(i.len, 104);
        assert_eq!((i.snd_cwnd, i.rtt_us, i.total_retrans), (Some(23), Some(41_250), Some(5)));
        assert_eq!((i.pacing_rate, i.bytes_acked, i.min_rtt_us, i.delivery_rate), (None, None, None, None));
        let i = TcpInfo::parse(&tcp_info_bytes(152));
        assert_eq!((i.bytes_acked, i.min_rtt_us), (Some(1_000_001), Some(40_100)));
        assert_eq!((i.delivery_rate, i.bytes_sent), (None, None));
        // Linux 6.6's struct ends at tcpi_snd_wnd (232 bytes): no total_rto yet.
        assert_eq!(TcpInfo::parse(&tcp_info_bytes(232)).total_rto, None);
        // A field cut in the middle is absent, not misread.
        let i = TcpInfo::parse(&tcp_info_bytes(70));
        assert_eq!((i.snd_mss, i.rtt_us), (Some(1448), None));
    }

    #[test]
    fn a_dump_of_two_sockets_then_done() {
        let cubic = rtattr(INET_DIAG_CONG, b"cubic\0");
        let info = rtattr(INET_DIAG_INFO, &tcp_info_bytes(104));
        let mut buf = nlmsg(SOCK_DIAG_BY_FAMILY, &diag_msg(false, &[info.clone(), cubic]));
        // An unknown attribute before the info is skipped; CONG absent is fine.
        buf.extend(nlmsg(SOCK_DIAG_BY_FAMILY, &diag_msg(true, &[rtattr(99, &[1, 2, 3]), info])));
        buf.extend(nlmsg(NLMSG_DONE, &0i32.to_ne_bytes()));
        let part = parse_dump(&buf);
        assert!(part.done);
        assert_eq!(part.error, None);
        assert_eq!(part.sockets.len(), 2);
        let a = &part.sockets[0];
        assert_eq!(a.local, IpAddr::V4(Ipv4Addr::new(10, 64, 1, 1)));
        assert_eq!((a.local_port, a.remote_port), (40000, 5201));
        assert_eq!(a.remote, IpAddr::V4(Ipv4Addr::new(10, 64, 1, 2)));
        assert_eq!(a.cc.as_deref(), Some("cubic"));
        assert_eq!(a.info.as_ref().unwrap().snd_cwnd, Some(23));
        let b = &part.sockets[1];
        assert_eq!(b.remote, "fd70:7477::2".parse::<IpAddr>().unwrap());
        assert_eq!(b.cc, None);
        assert_eq!(b.info.as_ref().unwrap().len, 104);
    }

    #[test]
    fn errors_truncation_and_mapped_addresses() {
        let mut buf = nlmsg(NLMSG_ERROR, &(-libc::EPERM).to_ne_bytes());
        assert_eq!(parse_dump(&buf).error, Some(libc::EPERM));
        // A message claiming more bytes than were received ends the parse quietly.
        buf = nlmsg(SOCK_DIAG_BY_FAMILY, &diag_msg(false, &[]));
        buf.truncate(40);
        assert_eq!(parse_dump(&buf), DumpPart::default());
        // A v4-mapped IPv6 socket address is reported as IPv4.
        let mut m = diag_msg(true, &[]);
        m[8..24].copy_from_slice(&"::ffff:10.64.1.1".parse::<Ipv6Addr>().unwrap().octets());
        let part = parse_dump(&nlmsg(SOCK_DIAG_BY_FAMILY, &m));
        assert_eq!(part.sockets[0].local, IpAddr::V4(Ipv4Addr::new(10, 64, 1, 1)));
    }
}
