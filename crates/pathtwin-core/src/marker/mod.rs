//! Markers: DiffServ edge conditioners that tag each packet IN or OUT of profile (the drop
//! precedence RIO/FRIO read) and pass it on at once (DESIGN.md "Markers").
//!
//! [`Marker`] is the element: zero delay, like a delay line of 0, it colours every packet
//! with its [`Policy`], writes the resulting [`Mark`] into the packet (the emulator turns it
//! into the DSCP AF11/AF12 of the real header) and counts what it decided. The policies:
//! - [`TokenBucket`] — per-interval refill (the thesis's marker: B bytes every T) or a
//!   continuous bucket (rate r, depth b);
//! - [`SrTcm`] (RFC 2697) and [`TrTcm`] (RFC 2698), colour-blind or colour-aware;
//! - [`TcpFriendly`] (Feroz, Rao, Kalyanaraman; draft-azeem-tcpfriendly-diffserv-00).
//!
//! Colours and marks: a three-colour meter's green is IN, yellow and red are both OUT, as
//! `Mark` has two drop precedences (RFC 2597 has three; RIO/FRIO use two). The stats keep the
//! three colours apart; a two-colour policy reports IN as green and OUT as red.
//!
//! [`Policy::from_config`] builds an entry's policy; the `[[marker]]` schema and its checks
//! are the config's (`config::MarkerConfig`). This module does not drop, delay or queue
//! packets, and it does not decide where a marker sits (that is `topology`'s).

mod bucket;
mod tcm;
mod tcp_friendly;

pub use bucket::TokenBucket;
pub use tcm::{SrTcm, TrTcm};
pub use tcp_friendly::TcpFriendly;

use crate::config::{MarkerConfig, MarkerKind};
use crate::element::Passthrough;
use crate::packet::{Mark, PacketMeta};
use crate::time::{Duration, Instant};
use serde::Serialize;

/// The TCP-friendly marker's RTT when an entry gives none: a typical wide-area round trip; it
/// only paces OUT marks and the window estimate (see `tcp_friendly`).
pub const DEFAULT_TF_RTT: Duration = Duration::from_millis(100);

/// A meter's verdict on one packet (RFC 2697/2698 terms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Color {
    Green,
    Yellow,
    Red,
}

impl Color {
    /// The drop precedence written into the packet: green is IN, yellow and red are OUT.
    pub fn mark(self) -> Mark {
        match self {
            Color::Green => Mark::In,
            Color::Yellow | Color::Red => Mark::Out,
        }
    }
}

/// The colour a colour-aware meter reads from a packet's mark: OUT is yellow (AF12, the
/// middle precedence), IN and unmarked are green (as RIO treats unmarked packets as IN).
fn precolor(mark: Mark) -> Color {
    match mark {
        Mark::Out => Color::Yellow,
        Mark::In | Mark::Unmarked => Color::Green,
    }
}

/// A marking policy and its state.
#[derive(Clone, Debug)]
pub enum Policy {
    TokenBucket(TokenBucket),
    SrTcm(SrTcm),
    TrTcm(TrTcm),
    TcpFriendly(TcpFriendly),
}

impl Policy {
    /// The policy of a validated `[[marker]]` entry, in its initial state.
    pub fn from_config(m: &MarkerConfig) -> Policy {
        let need = |what: &str| -> ! { unreachable!("validated: {what}") };
        match m.kind {
            MarkerKind::TokenBucket => match (m.interval, m.bucket, m.rate, m.depth) {
                (Some(t), Some(b), None, None) => Policy::TokenBucket(TokenBucket::per_interval(b, t)),
                (None, None, Some(r), Some(d)) => Policy::TokenBucket(TokenBucket::continuous(r, d)),
                _ => need("token-bucket form"),
            },
            MarkerKind::Srtcm => Policy::SrTcm(
                SrTcm::new(m.cir.unwrap_or_else(|| need("cir")), m.cbs.unwrap_or_else(|| need("cbs")), m.ebs.unwrap_or_else(|| need("ebs")))
                    .color_aware(m.color_aware.unwrap_or(false)),
            ),
            MarkerKind::Trtcm => Policy::TrTcm(
                TrTcm::new(
                    m.cir.unwrap_or_else(|| need("cir")),
                    m.cbs.unwrap_or_else(|| need("cbs")),
                    m.pir.unwrap_or_else(|| need("pir")),
                    m.pbs.unwrap_or_else(|| need("pbs")),
                )
                .color_aware(m.color_aware.unwrap_or(false)),
            ),
            MarkerKind::TcpFriendly => Policy::TcpFriendly(TcpFriendly::new(
                m.budget.unwrap_or_else(|| need("budget")),
                m.interval.unwrap_or_else(|| need("interval")),
                m.rtt.unwrap_or(DEFAULT_TF_RTT),
            )),
        }
    }

    /// Colours a packet of `pkt` arriving at `now` (non-decreasing), updating the state.
    pub fn color<P: PacketMeta>(&mut self, now: Instant, pkt: &P) -> Color {
        match self {
            Policy::TokenBucket(p) => p.color(now, pkt.wire_len()),
            Policy::SrTcm(p) => p.color(now, pkt.wire_len(), precolor(pkt.mark())),
            Policy::TrTcm(p) => p.color(now, pkt.wire_len(), precolor(pkt.mark())),
            Policy::TcpFriendly(p) => p.color(now, pkt),
        }
    }

    /// The name results use (the config's `kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Policy::TokenBucket(_) => "token-bucket",
            Policy::SrTcm(_) => "srtcm",
            Policy::TrTcm(_) => "trtcm",
            Policy::TcpFriendly(_) => "tcp-friendly",
        }
    }
}

/// What a marker decided since the start, per colour (IP bytes, as the meters count them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MarkerStats {
    pub green_packets: u64,
    pub green_bytes: u64,
    pub yellow_packets: u64,
    pub yellow_bytes: u64,
    pub red_packets: u64,
    pub red_bytes: u64,
    /// Packets the TCP-friendly marker protected (SYN/FIN/pure ACK, retransmission, small
    /// window) and found budget for; zero for the other policies.
    pub protected_packets: u64,
}

impl MarkerStats {
    pub fn in_packets(&self) -> u64 {
        self.green_packets
    }
    pub fn in_bytes(&self) -> u64 {
        self.green_bytes
    }
    pub fn out_packets(&self) -> u64 {
        self.yellow_packets + self.red_packets
    }
    pub fn out_bytes(&self) -> u64 {
        self.yellow_bytes + self.red_bytes
    }

    fn count(&mut self, color: Color, len: u32) {
        let (p, b) = match color {
            Color::Green => (&mut self.green_packets, &mut self.green_bytes),
            Color::Yellow => (&mut self.yellow_packets, &mut self.yellow_bytes),
            Color::Red => (&mut self.red_packets, &mut self.red_bytes),
        };
        *p += 1;
        *b += len as u64;
    }
}

/// The marker element. Call order as every element: `push(at, ..)` with non-decreasing `at`,
/// then `poll_output(now)` releases each packet at the time it arrived.
pub struct Marker<P> {
    policy: Policy,
    pending: Passthrough<P>,
    stats: MarkerStats,
}

impl<P: PacketMeta> Marker<P> {
    pub fn new(policy: Policy) -> Self {
        Marker { policy, pending: Passthrough::default(), stats: MarkerStats::default() }
    }

    /// Colours and marks the packet; it is releasable at `at`.
    pub fn push(&mut self, at: Instant, mut pkt: P) {
        let color = self.policy.color(at, &pkt);
        pkt.set_mark(color.mark());
        self.stats.count(color, pkt.wire_len());
        if let Policy::TcpFriendly(tf) = &self.policy {
            self.stats.protected_packets = tf.protected();
        }
        self.pending.push(at, pkt);
    }

    pub fn next_wakeup(&self) -> Option<Instant> {
        self.pending.next_wakeup()
    }

    pub fn poll_output(&mut self, now: Instant) -> Option<(Instant, P)> {
        self.pending.poll_output(now)
    }

    pub fn stats(&self) -> &MarkerStats {
        &self.stats
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn kind(&self) -> &'static str {
        self.policy.kind()
    }
}

#[cfg(test)]
pub(crate) mod test_pkt {
    use crate::packet::{FlowKey, Mark, PacketMeta, TcpFlags};

    /// A TCP packet as the marker sees it.
    #[derive(Clone, Debug)]
    pub struct Pkt {
        pub len: u32,
        pub payload: u32,
        pub flow: FlowKey,
        pub flags: TcpFlags,
        pub seq: u64,
        pub mark: Mark,
    }

    impl Pkt {
        /// A data segment of 1000 payload bytes (1040 on the wire).
        pub fn data(flow: FlowKey, seq: u64) -> Pkt {
            Pkt { len: 1040, payload: 1000, flow, flags: TcpFlags::default(), seq, mark: Mark::Unmarked }
        }
    }

    impl PacketMeta for Pkt {
        fn wire_len(&self) -> u32 {
            self.len
        }
        fn payload_len(&self) -> u32 {
            self.payload
        }
        fn flow_key(&self) -> FlowKey {
            self.flow
        }
        fn tcp_flags(&self) -> Option<TcpFlags> {
            Some(self.flags)
        }
        fn tcp_seq(&self) -> Option<u64> {
            Some(self.seq)
        }
        fn mark(&self) -> Mark {
            self.mark
        }
        fn set_mark(&mut self, mark: Mark) {
            self.mark = mark;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_pkt::Pkt;
    use super::*;
    use crate::time::Duration;
    use crate::units::{Rate, Size};

    #[test]
    fn marker_writes_the_mark_counts_colours_and_adds_no_delay() {
        // A 2080-byte bucket that is never refilled within the test: two packets IN, then OUT.
        let tb = TokenBucket::per_interval(Size::from_bytes(2080), Duration::from_secs(10));
        let mut m = Marker::new(Policy::TokenBucket(tb));
        let t = Instant::from_nanos(5);
        for i in 0..3 {
            m.push(t, Pkt::data(1, i * 1000));
        }
        assert_eq!(m.next_wakeup(), Some(t));
        let out: Vec<_> = std::iter::from_fn(|| m.poll_output(t)).collect();
        assert_eq!(out.iter().map(|(at, _)| *at).collect::<Vec<_>>(), vec![t; 3]);
        assert_eq!(out.iter().map(|(_, p)| p.mark).collect::<Vec<_>>(), vec![Mark::In, Mark::In, Mark::Out]);
        let s = m.stats();
        assert_eq!((s.in_packets(), s.in_bytes(), s.out_packets(), s.out_bytes()), (2, 2080, 1, 1040));
        assert_eq!((s.green_packets, s.yellow_packets, s.red_packets), (2, 0, 1));
    }

    #[test]
    fn three_colour_stats_map_yellow_to_out() {
        // CBS holds one packet, EBS one more: green, yellow, red.
        let sr = SrTcm::new(Rate::from_bps(8), Size::from_bytes(1040), Size::from_bytes(1040));
        let mut m = Marker::new(Policy::SrTcm(sr));
        for i in 0..3 {
            m.push(Instant::ZERO, Pkt::data(1, i * 1000));
        }
        let marks: Vec<_> = std::iter::from_fn(|| m.poll_output(Instant::ZERO)).map(|(_, p)| p.mark).collect();
        assert_eq!(marks, vec![Mark::In, Mark::Out, Mark::Out]);
        let s = m.stats();
        assert_eq!((s.green_packets, s.yellow_packets, s.red_packets), (1, 1, 1));
        assert_eq!((s.out_packets(), s.out_bytes()), (2, 2080));
    }

    #[test]
    fn each_config_entry_builds_its_policy() {
        let policy = |marker: &str| {
            let text = format!("hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"50ms\"\nabw = \"10mbit\"\n[[marker]]\nat = \"a\"\n{marker}");
            Policy::from_config(&crate::config::Config::from_toml(&text, "t.toml").unwrap().markers[0])
        };
        assert_eq!(policy("kind = \"token-bucket\"\ninterval = \"400ms\"\nbucket = \"296KB\"\n").kind(), "token-bucket");
        assert_eq!(policy("kind = \"token-bucket\"\nrate = \"5.92mbit\"\ndepth = \"30KB\"\n").kind(), "token-bucket");
        assert!(matches!(policy("kind = \"srtcm\"\ncir = \"1mbit\"\ncbs = \"3KB\"\nebs = \"6KB\"\n"), Policy::SrTcm(t) if !t.is_color_aware()));
        let trtcm = policy("kind = \"trtcm\"\ncir = \"1mbit\"\ncbs = \"3KB\"\npir = \"2mbit\"\npbs = \"6KB\"\ncolor_aware = true\n");
        assert!(matches!(trtcm, Policy::TrTcm(t) if t.is_color_aware()));
        assert_eq!(policy("kind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"296KB\"\n").kind(), "tcp-friendly");
    }

    #[test]
    fn a_colour_aware_meter_reads_an_upstream_out_mark_as_yellow() {
        // Plenty of committed tokens: colour-blind, everything would be green.
        let sr = SrTcm::new(Rate::from_bps(8), Size::from_bytes(10_000), Size::from_bytes(10_000)).color_aware(true);
        let mut m = Marker::new(Policy::SrTcm(sr));
        let mut out = Pkt::data(1, 0);
        out.mark = Mark::Out;
        m.push(Instant::ZERO, out);
        m.push(Instant::ZERO, Pkt::data(1, 1000));
        let marks: Vec<_> = std::iter::from_fn(|| m.poll_output(Instant::ZERO)).map(|(_, p)| p.mark).collect();
        assert_eq!(marks, vec![Mark::Out, Mark::In]);
        assert_eq!((m.stats().yellow_packets, m.stats().green_packets), (1, 1));
    }
}
