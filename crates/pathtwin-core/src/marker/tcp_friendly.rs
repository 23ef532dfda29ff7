//! The TCP-friendly marker (Feroz, Rao, Kalyanaraman, RPI; IETF draft
//! draft-azeem-tcpfriendly-diffserv-00; the thesis of papers/tcp-friendly-marker-thesis-ch3-4
//! runs it with B = 296 K byte tokens per T = 400 ms).
//!
//! The principles are the authors': keep per-flow state at the edge; protect SYNs,
//! retransmissions and small-window flows by marking them IN; spread OUT marks evenly in time
//! and across flows instead of marking a whole burst OUT when the tokens run out at the end of
//! an interval. **The concrete rules below are this project's proposal (ALGORITHMS.md §3
//! marks them [P]), not the draft's text**:
//!
//! - every T the budget is reset to B (as the per-interval token bucket; unused bytes lapse);
//! - per flow: highest sequence seen (end of the highest segment), a window estimate (an EWMA
//!   with gain ½ of the packets seen per `rtt`-long epoch) and the time of its last OUT mark;
//! - *protected*: SYN, FIN, RST or no payload; a retransmission (starts below the highest
//!   sequence seen); or a window estimate below 4 packets (so that fast retransmit, which
//!   needs three duplicate ACKs, stays possible);
//! - a packet the budget cannot cover is OUT, protected or not — the IN rate never exceeds B/T;
//! - otherwise a protected packet is IN;
//! - otherwise the flow accrues the OUT share the previous interval showed —
//!   `1 − B / bytes offered` of each packet's length — and when that share reaches one
//!   packet and the flow's last OUT is at least one `rtt` ago, the packet is OUT (at most one
//!   OUT per window per flow keeps Reno out of timeouts); else it is IN;
//! - IN packets spend their length of the budget.
//!
//! `rtt` is a parameter because an edge marker sees one direction of a flow and cannot time
//! its round trips; the window estimate therefore counts packets per configured `rtt`.
//! Sequence numbers are compared modulo 2^32 (RFC 1982), as a TCP header carries them. Flows
//! idle for 16 `rtt` and a whole interval are forgotten at the next interval.

use super::Color;
use crate::packet::{FlowKey, PacketMeta};
use crate::time::{Duration, Instant};
use crate::units::Size;
use std::collections::BTreeMap;

/// Below this many packets per RTT a flow is protected (ALGORITHMS.md §3: fast retransmit
/// needs three duplicate ACKs, so a window under 4 cannot recover without a timeout).
pub const SMALL_WINDOW: f64 = 4.0;
/// Idle RTTs after which a flow's state is dropped.
const IDLE_RTTS: u64 = 16;

#[derive(Clone, Debug)]
struct Flow {
    /// End (seq + payload) of the highest segment seen, modulo 2^32.
    highest_end: Option<u32>,
    /// Packets per RTT (EWMA over completed epochs); zero until one epoch has completed.
    window: f64,
    epoch_start: Instant,
    epoch_packets: u32,
    last_out: Option<Instant>,
    /// OUT bytes this flow owes to spread the interval's expected excess.
    owed: f64,
    last_seen: Instant,
}

impl Flow {
    fn new(now: Instant) -> Flow {
        Flow { highest_end: None, window: 0.0, epoch_start: now, epoch_packets: 0, last_out: None, owed: 0.0, last_seen: now }
    }

    /// Counts a packet into the window estimate, closing the epochs that ended before `now`.
    fn observe(&mut self, now: Instant, rtt: Duration) {
        let elapsed = now.saturating_since(self.epoch_start).as_nanos();
        if elapsed >= rtt.as_nanos() {
            let epochs = elapsed / rtt.as_nanos();
            // The finished epoch, then `epochs − 1` empty ones, each halving the estimate.
            self.window = if self.window == 0.0 { self.epoch_packets as f64 } else { (self.window + self.epoch_packets as f64) / 2.0 };
            self.window /= 2f64.powi((epochs - 1).min(64) as i32);
            self.epoch_start += Duration::from_nanos(epochs * rtt.as_nanos());
            self.epoch_packets = 0;
        }
        self.epoch_packets += 1;
        self.last_seen = now;
    }
}

/// `a` is before `b` modulo 2^32 (RFC 1982 §3.2).
fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// The TCP-friendly marker's state.
#[derive(Clone, Debug)]
pub struct TcpFriendly {
    budget_per_interval: u64,
    interval: Duration,
    rtt: Duration,
    epoch: u64,
    budget: u64,
    /// Bytes offered in the current interval.
    offered: u64,
    /// Fraction of each unprotected packet a flow owes as OUT, from the last interval.
    out_share: f64,
    flows: BTreeMap<FlowKey, Flow>,
    protected: u64,
}

impl TcpFriendly {
    /// `budget` IN bytes per `interval` (> 0); `rtt` (> 0) paces OUT marks and windows.
    pub fn new(budget: Size, interval: Duration, rtt: Duration) -> TcpFriendly {
        assert!(interval.as_nanos() > 0 && rtt.as_nanos() > 0, "validated: interval and rtt > 0");
        TcpFriendly {
            budget_per_interval: budget.bytes(),
            interval,
            rtt,
            epoch: 0,
            budget: budget.bytes(),
            offered: 0,
            out_share: 0.0,
            flows: BTreeMap::new(),
            protected: 0,
        }
    }

    /// Packets protected and marked IN so far.
    pub fn protected(&self) -> u64 {
        self.protected
    }

    /// Flows with state.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    fn refresh(&mut self, now: Instant) {
        let k = now.as_nanos() / self.interval.as_nanos();
        if k == self.epoch {
            return;
        }
        // An interval that was skipped entirely offered nothing: no excess expected.
        self.out_share = if k == self.epoch + 1 && self.offered > self.budget_per_interval {
            1.0 - self.budget_per_interval as f64 / self.offered as f64
        } else {
            0.0
        };
        self.epoch = k;
        self.budget = self.budget_per_interval;
        self.offered = 0;
        let idle = Duration::from_nanos(self.rtt.as_nanos().saturating_mul(IDLE_RTTS)) + self.interval;
        self.flows.retain(|_, f| now.saturating_since(f.last_seen) < idle);
    }

    pub(crate) fn color<P: PacketMeta>(&mut self, now: Instant, pkt: &P) -> Color {
        self.refresh(now);
        let len = pkt.wire_len();
        self.offered += len as u64;
        let rtt = self.rtt;
        let flow = self.flows.entry(pkt.flow_key()).or_insert_with(|| Flow::new(now));
        flow.observe(now, rtt);
        let flags = pkt.tcp_flags();
        let control = flags.is_some_and(|f| f.syn || f.fin || f.rst) || (flags.is_some() && pkt.payload_len() == 0);
        let mut retransmission = false;
        if let Some(seq) = pkt.tcp_seq().filter(|_| pkt.payload_len() > 0) {
            let (start, end) = (seq as u32, (seq as u32).wrapping_add(pkt.payload_len()));
            retransmission = flow.highest_end.is_some_and(|h| seq_before(start, h));
            if flow.highest_end.is_none_or(|h| seq_before(h, end)) {
                flow.highest_end = Some(end);
            }
        }
        let protected = control || retransmission || flow.window < SMALL_WINDOW;
        let color = if self.budget < len as u64 {
            Color::Red
        } else if protected {
            self.protected += 1;
            Color::Green
        } else {
            // The owed share is capped at one packet so that a flow held back by the
            // once-per-RTT rule does not pay its arrears as a burst of OUTs later.
            flow.owed = (flow.owed + self.out_share * len as f64).min(len as f64);
            let due = flow.owed >= len as f64;
            let spaced = flow.last_out.is_none_or(|t| now.saturating_since(t) >= rtt);
            if due && spaced {
                flow.owed -= len as f64;
                Color::Red
            } else {
                Color::Green
            }
        };
        match color {
            Color::Green => self.budget -= len as u64,
            _ => flow.last_out = Some(now),
        }
        color
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_pkt::Pkt;
    use super::*;
    use crate::packet::TcpFlags;

    fn ms(t: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(t)
    }

    /// 100 KB per 100 ms, RTT 50 ms.
    fn marker() -> TcpFriendly {
        TcpFriendly::new(Size::from_bytes(100_000), Duration::from_millis(100), Duration::from_millis(50))
    }

    /// Sends `per_rtt` new 1000-byte segments of `flow` evenly over each 50 ms from `from` to
    /// `to` (ms); returns (time, seq, colour) of each.
    fn send(m: &mut TcpFriendly, flow: u64, next_seq: &mut u64, per_rtt: u64, from: u64, to: u64) -> Vec<(Instant, u64, Color)> {
        let gap = Duration::from_nanos(50_000_000 / per_rtt);
        let mut t = ms(from);
        let mut out = Vec::new();
        while t < ms(to) {
            let c = m.color(t, &Pkt::data(flow, *next_seq));
            out.push((t, *next_seq, c));
            *next_seq += 1000;
            t += gap;
        }
        out
    }

    /// Feeds `m` new segments of `flow` every 625 µs (80 per RTT) from `t` until the next one
    /// would be a spread OUT (OUT with budget left), and returns that time; `m` is left just
    /// before it. The caller has overloaded the marker so that an OUT share is due.
    fn until_out_is_due(m: &mut TcpFriendly, flow: u64, seq: &mut u64, mut t: Instant) -> Instant {
        for _ in 0..1000 {
            let mut probe = m.clone();
            if probe.color(t, &Pkt::data(flow, *seq)) == Color::Red && m.budget >= 1040 {
                return t;
            }
            m.color(t, &Pkt::data(flow, *seq));
            *seq += 1000;
            t += Duration::from_micros(625);
        }
        panic!("no OUT came due");
    }

    /// A marker that has seen flow 1 at 80 segments per RTT (1.66 MB/s against 1 MB/s of
    /// budget) for 300 ms, stopped where flow 1's next new segment would be a spread OUT.
    fn out_due() -> (TcpFriendly, u64, Instant) {
        let mut m = marker();
        let mut seq = 0;
        send(&mut m, 1, &mut seq, 80, 0, 300);
        let t = until_out_is_due(&mut m, 1, &mut seq, ms(300));
        (m, seq, t)
    }

    #[test]
    fn syn_fin_and_pure_acks_are_in_when_an_out_is_due() {
        let (m, seq, t) = out_due();
        let syn = Pkt { len: 60, payload: 0, flags: TcpFlags { syn: true, ..Default::default() }, ..Pkt::data(1, seq) };
        let fin = Pkt { len: 1040, flags: TcpFlags { fin: true, ..Default::default() }, ..Pkt::data(1, seq) };
        let ack = Pkt { len: 40, payload: 0, ..Pkt::data(1, 0) };
        for p in [syn, fin, ack] {
            assert_eq!(m.clone().color(t, &p), Color::Green, "{p:?}");
        }
        assert_eq!(m.clone().color(t, &Pkt::data(1, seq)), Color::Red, "new data is OUT in the same state");
    }

    #[test]
    fn retransmissions_are_in_when_an_out_is_due() {
        let (m, seq, t) = out_due();
        for old in [0, seq - 1000, seq - 500] {
            assert_eq!(m.clone().color(t, &Pkt::data(1, old)), Color::Green, "retransmission of {old}");
        }
        assert_eq!(m.clone().color(t, &Pkt::data(1, seq)), Color::Red);
    }

    #[test]
    fn small_windows_are_protected_while_budget_lasts() {
        // Flow 0 overloads (80 segments per RTT); flow 1 sends 3 per RTT, a window too small
        // for fast retransmit. An OUT share is due from the second interval on, and flow 0
        // takes spread OUTs, but flow 1 gets none while the budget covers its packets.
        let mut m = marker();
        let (mut big, mut small) = (0u64, 0u64);
        let mut spread_outs_big = 0;
        let mut t = ms(0);
        let mut k = 0u64;
        while t < ms(2000) {
            let had_budget = m.budget >= 1040;
            if m.color(t, &Pkt::data(0, big)) == Color::Red && had_budget {
                spread_outs_big += 1;
            }
            big += 1000;
            if k.is_multiple_of(26) {
                let had_budget = m.budget >= 1040;
                let c = m.color(t, &Pkt::data(1, small));
                small += 1000;
                if had_budget {
                    assert_eq!(c, Color::Green, "small-window flow at {t:?}");
                }
            }
            k += 1;
            t += Duration::from_micros(625);
        }
        assert!(m.out_share > 0.3 && spread_outs_big > 10, "overloaded: share {}, {spread_outs_big} spread OUTs", m.out_share);
    }

    #[test]
    fn at_most_one_out_per_window_per_flow_and_outs_spread_across_flows() {
        // Two flows of 20 segments per RTT: 83 200 B per interval against a budget of
        // 75 600 B, so 9 % must go OUT — more than one segment per window of 20 would shed.
        let mut m = TcpFriendly::new(Size::from_bytes(75_600), Duration::from_millis(100), Duration::from_millis(50));
        let mut seqs = [0u64; 2];
        let mut outs: Vec<Vec<(Instant, bool)>> = vec![Vec::new(), Vec::new()];
        let mut t = ms(0);
        while t < ms(3000) {
            for f in 0..2usize {
                let had_budget = m.budget >= 1040;
                if m.color(t, &Pkt::data(f as u64, seqs[f])) == Color::Red {
                    outs[f].push((t, had_budget));
                }
                seqs[f] += 1000;
            }
            t += Duration::from_micros(2500);
        }
        let mut spread = [0usize; 2];
        for (f, o) in outs.iter().enumerate() {
            for w in o.windows(2) {
                let ((t0, _), (t1, spread_out)) = (w[0], w[1]);
                if spread_out {
                    assert!(t1.saturating_since(t0) >= Duration::from_millis(50), "flow {f}: OUT at {t0:?} and {t1:?}");
                }
            }
            spread[f] = o.iter().filter(|(_, s)| *s).count();
        }
        // The budget still runs out near the end of each interval (the once-per-RTT rule sheds
        // at most 5 % of a 20-segment window), and that OUT holds the flow's next spread OUT
        // back one RTT: about one spread OUT per flow per interval after the first.
        assert!(spread.iter().all(|&n| n >= 25), "spread OUTs {spread:?}");
        assert!(spread[0].abs_diff(spread[1]) <= spread[0].max(spread[1]) / 4, "spread across flows: {spread:?}");
    }

    #[test]
    fn in_bytes_never_exceed_the_budget_per_interval() {
        let mut m = marker();
        let mut seq = 0;
        let marks = send(&mut m, 1, &mut seq, 200, 0, 1000);
        for k in 0..10u64 {
            let in_bytes: u64 = marks.iter().filter(|(t, _, c)| t.as_nanos() / 100_000_000 == k && *c == Color::Green).count() as u64 * 1040;
            assert!(in_bytes <= 100_000, "interval {k}: {in_bytes}");
        }
    }

    #[test]
    fn sequence_comparison_wraps_modulo_2_32() {
        assert!(seq_before(u32::MAX - 10, 5));
        assert!(!seq_before(5, u32::MAX - 10));
        let mut m = marker();
        // A flow crossing the 32-bit wrap, as the emulator sees it, is not a retransmission.
        let mut seq = (1u64 << 32) - 5000;
        let marks = send(&mut m, 9, &mut seq, 10, 0, 60);
        assert!(marks.iter().all(|(_, _, c)| *c == Color::Green));
        let before = m.protected();
        // Wrapped value of the next segment: new data, beyond the highest seen.
        let next = Pkt::data(9, seq & 0xffff_ffff);
        m.color(ms(61), &next);
        // Window is now 10 packets (not small): a new segment is not counted as protected.
        assert_eq!(m.protected(), before);
    }
}
